"""The replicated log as the raft core sees it, and an in-memory implementation.

:class:`RaftLog` is the interface (Kafka's ``ReplicatedLog``, reduced to what the core needs):
entries carry an offset and the epoch of the leader that wrote them; the log keeps a leader-epoch
cache (epoch -> start offset) so it can answer ``end_offset_for_epoch``; it can truncate, flush and
hold one snapshot at its start. The real node uses :class:`~kraftkit.raft.file_log.FileRaftLog` on
:class:`kraftkit.log.Log` (which has ``truncate_to`` and a ``leader-epoch-checkpoint``); the simulator
uses :class:`MemoryLog`, whose :meth:`MemoryLog.crash` throws away everything that was not flushed,
like Kafka's ``MockLog.reopen``.

A log holds one kind of record, its type parameter: :class:`Entry` items in memory, :class:`Batch`
(Kafka's record batches, as stored and sent) on disk. It appends and reads only that kind, and
builds it from what a leader appends in :meth:`RaftLog.entries_for_append`; the core passes the
records between log and wire without looking inside (the ``RecordsAdapter`` that goes with the log
encodes them).
"""

from __future__ import annotations

import abc
from typing import Any, Generic, NamedTuple, TypeVar

from kraftkit.errors import LogError  # a request the log cannot honour (a gap, a truncation below the start...)
from kraftkit.metadata.snapshot import SnapshotId  # the snapshots' OffsetAndEpoch, one type for metadata and raft
from kraftkit.raft.voters import ControlRecord, KRaftControlState

__all__ = ["Batch", "Entry", "SnapshotId", "RaftLog", "MemoryLog", "LogError", "ControlRecord"]


class Entry(NamedTuple):
    """One log entry. ``control`` marks KRaft control records: the LeaderChangeMessage (its
    payload a dict) and the KIP-853 records (a :class:`~kraftkit.raft.voters.ControlRecord`)."""

    offset: int
    epoch: int
    payload: Any
    control: bool = False


class Batch(NamedTuple):
    """Record batches exactly as Kafka stores and sends them (one or more v2 batches in ``data``),
    starting at ``offset`` and ending with ``last_offset``. A file-backed log reads and appends
    these, so what the leader sends a follower is the bytes of its segment, and what a follower
    stores is the bytes it was sent (``Entry`` lists stand for the same thing in memory)."""

    offset: int
    epoch: int
    data: bytes
    last_offset: int


#: the records a log holds
R = TypeVar("R", Entry, Batch)


class RaftLog(abc.ABC, Generic[R]):
    """What the raft core needs from a log holding records of type ``R`` (see the module
    docstring). Offsets are dense: start_offset .. end_offset-1.

    Every log keeps :attr:`kraft`, the kraft.version and voter sets its control records and its
    snapshot hold (KIP-853): implementations update it on append, truncation and snapshots."""

    _kraft: KRaftControlState | None = None

    @property
    def kraft(self) -> KRaftControlState:
        """The kraft.version and voter sets of this log, by offset."""
        if self._kraft is None:
            self._kraft = KRaftControlState()
        return self._kraft

    @property
    @abc.abstractmethod
    def start_offset(self) -> int: ...

    @property
    @abc.abstractmethod
    def end_offset(self) -> int:
        """The log end offset (LEO): the next offset to be written."""

    @property
    @abc.abstractmethod
    def flushed_offset(self) -> int:
        """Every offset below this is durable."""

    @abc.abstractmethod
    def last_epoch(self) -> int:
        """Epoch of the last entry; the snapshot's epoch if the log is empty after one; else 0."""

    @abc.abstractmethod
    def append(self, records: list[R]) -> None:
        """Append records whose first offset must equal ``end_offset``."""

    @abc.abstractmethod
    def truncate_to(self, offset: int) -> None:
        """Drop every entry at or after ``offset``."""

    @abc.abstractmethod
    def flush(self) -> int:
        """Make everything written so far durable; returns the new flushed offset."""

    @abc.abstractmethod
    def read(self, start: int, max_entries: int) -> list[R]:
        """What a Fetch at ``start`` returns: the records from the one holding ``start``."""

    @abc.abstractmethod
    def epoch_starts(self) -> list[tuple[int, int]]:
        """The leader-epoch cache: ``[(epoch, start_offset), ...]`` ascending."""

    @abc.abstractmethod
    def initialize_leader_epoch(self, epoch: int) -> None:
        """Record that ``epoch`` starts at the current end offset (done before the leader's first append)."""

    @abc.abstractmethod
    def snapshot(self) -> SnapshotId | None:
        """The snapshot at the log start, if any (this log keeps exactly one)."""

    @abc.abstractmethod
    def read_snapshot(self) -> bytes: ...

    @abc.abstractmethod
    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Store a snapshot of the prefix below ``snapshot_id.end_offset`` and delete that prefix."""

    @abc.abstractmethod
    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Replace the whole log by a snapshot fetched from the leader (``truncateToLatestSnapshot``)."""

    @abc.abstractmethod
    def entries_for_append(self, base_offset: int, epoch: int, payloads: Any, control: bool = False) -> list[R]:
        """What a leader's local append of ``payloads`` (``len(payloads)`` records) at
        ``base_offset`` becomes in this log; ``control`` marks KRaft control records (the
        LeaderChangeMessage that opens a leader's epoch)."""

    # ------------------------------------------------------------ derived rules (shared by all logs)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch', end offset)``: the largest epoch <= ``epoch`` the log knows and where it ends
        (``ReplicatedLog.endOffsetForEpoch``; below the first cached epoch the snapshot's epoch is used)."""
        snap = self.snapshot()
        lower = snap.epoch if snap else 0
        for e, start in self.epoch_starts():
            if e > epoch:
                return lower, start
            lower = e
        return self.last_epoch(), self.end_offset

    def epoch_of(self, offset: int) -> int:
        """Epoch of the entry at ``offset`` (which must be in the log or be the snapshot's last offset)."""
        snap = self.snapshot()
        if snap and offset == snap.end_offset - 1:
            return snap.epoch
        found = None
        for e, start in self.epoch_starts():
            if start > offset:
                break
            found = e
        if found is None or not (self.start_offset <= offset < self.end_offset):
            raise LogError(f"no entry at offset {offset}")
        return found

    def truncate_to_end_offset(self, epoch: int, end_offset: int) -> int:
        """Truncate after a DivergingEpoch answer (``ReplicatedLog.truncateToEndOffset``); returns the offset."""
        if epoch == 0:
            at = min(end_offset, self.end_offset)
        else:
            local_epoch, local_end = self.end_offset_for_epoch(epoch)
            at = min(local_end, end_offset) if local_epoch == epoch else local_end
        self.truncate_to(at)
        return at

    def validate_offset_and_epoch(self, offset: int, epoch: int) -> tuple[str, tuple[int, int] | None]:
        """The leader's check of a Fetch position (``ReplicatedLog.validateOffsetAndEpoch``):
        ``("valid", None)``, ``("snapshot", snapshot id)`` or ``("diverging", (epoch, end offset))``."""
        snap = self.snapshot()
        if self.start_offset == 0 and offset == 0:
            return "valid", None
        if snap and (
            offset < self.start_offset or (offset == self.start_offset and epoch != snap.epoch) or epoch < snap.epoch
        ):
            return "snapshot", (snap.end_offset, snap.epoch)
        e, o = self.end_offset_for_epoch(epoch)
        if e != epoch or o < offset:
            return "diverging", (e, o)
        return "valid", None


class MemoryLog(RaftLog[Entry]):
    """An in-memory :class:`RaftLog` of :class:`Entry` items for tests and the simulator.

    ``bootstrap``: the control records of a dynamic quorum's bootstrap snapshot (a KRaftVersion and
    a Voters :class:`~kraftkit.raft.voters.ControlRecord`). ``snapshot_records`` reads the control
    records out of a snapshot's data (the state machine's format: the simulator's), so a snapshot
    fetched from the leader brings its voter set; without it such a log forgets its voters."""

    def __init__(
        self,
        bootstrap: list[ControlRecord] | None = None,
        snapshot_records: Any = None,
    ) -> None:
        self._snapshot_records = snapshot_records
        if bootstrap:
            self.kraft.note_snapshot_records(-1, bootstrap)
        self._entries: list[Entry] = []
        self._start = 0
        self._epochs: list[tuple[int, int]] = []
        self._flushed = 0
        self._snapshot: SnapshotId | None = None
        self._snapshot_data = b""

    # -- state
    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    def last_epoch(self) -> int:
        if self._epochs:
            return self._epochs[-1][0]
        return self._snapshot.epoch if self._snapshot else 0

    def epoch_starts(self) -> list[tuple[int, int]]:
        return list(self._epochs)

    def entries(self) -> list[Entry]:
        return list(self._entries)

    def entry(self, offset: int) -> Entry:
        return self._entries[offset - self._start]

    # -- writes
    def append(self, entries: list[Entry]) -> None:
        for e in entries:
            if e.offset != self.end_offset:
                raise LogError(f"append at {e.offset} but the log ends at {self.end_offset}")
            if e.epoch < self.last_epoch():
                raise LogError(f"append of epoch {e.epoch} after epoch {self.last_epoch()}")
            if e.epoch > self.last_epoch() or not self._epochs:
                self._epochs.append((e.epoch, e.offset))
            self._entries.append(e)
            if e.control and isinstance(e.payload, ControlRecord):
                self.kraft.note(e.offset, e.payload)

    def entries_for_append(self, base_offset: int, epoch: int, payloads: Any, control: bool = False) -> list[Entry]:
        """One entry per payload."""
        return [Entry(base_offset + i, epoch, p, control) for i, p in enumerate(payloads)]

    def initialize_leader_epoch(self, epoch: int) -> None:
        start = self.end_offset
        self._epochs = [(e, s) for e, s in self._epochs if s < start and e < epoch]
        self._epochs.append((epoch, start))

    def truncate_to(self, offset: int) -> None:
        if offset < self._start:
            raise LogError(f"truncation to {offset} below the log start {self._start}")
        if offset >= self.end_offset:
            return
        del self._entries[offset - self._start :]
        self._epochs = [(e, s) for e, s in self._epochs if s < offset]
        self._flushed = min(self._flushed, offset)
        self.kraft.truncate(offset)

    def flush(self) -> int:
        self._flushed = self.end_offset
        return self._flushed

    def crash(self) -> None:
        """Lose everything that was not flushed (a hard crash followed by a restart)."""
        self.truncate_to(max(self._flushed, self._start))
        # an epoch started by initialize_leader_epoch with no entry after the flushed end is lost too
        self._epochs = [(e, s) for e, s in self._epochs if s < self.end_offset]

    def read(self, start: int, max_entries: int) -> list[Entry]:
        if start < self._start:
            raise LogError(f"read at {start} below the log start {self._start}")
        i = start - self._start
        return self._entries[i : i + max_entries]

    # -- snapshots
    def snapshot(self) -> SnapshotId | None:
        return self._snapshot

    def read_snapshot(self) -> bytes:
        return self._snapshot_data

    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        end = snapshot_id.end_offset
        if self._snapshot and end <= self._snapshot.end_offset:
            return
        if not (self._start < end <= self.end_offset) or end > self._flushed:
            raise LogError(f"snapshot at {end} outside the flushed log [{self._start}, {self._flushed}]")
        if self.epoch_of(end - 1) != snapshot_id.epoch:
            raise LogError(f"snapshot {snapshot_id} does not match the epoch at offset {end - 1}")
        del self._entries[: end - self._start]
        last_before = [(e, s) for e, s in self._epochs if s <= end]
        self._epochs = [(e, s) for e, s in self._epochs if s > end]
        if last_before and self._entries and (not self._epochs or self._epochs[0][1] > end):
            self._epochs.insert(0, (last_before[-1][0], end))
        self._start = end
        self._snapshot = SnapshotId(*snapshot_id)
        self._snapshot_data = bytes(data)
        self.kraft.compact(end)

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._entries = []
        self._epochs = []
        self._start = snapshot_id.end_offset
        self._flushed = self._start
        self._snapshot = SnapshotId(*snapshot_id)
        self._snapshot_data = bytes(data)
        records = self._snapshot_records(self._snapshot_data) if self._snapshot_records is not None else []
        self.kraft.note_snapshot_records(self._start - 1, records)
