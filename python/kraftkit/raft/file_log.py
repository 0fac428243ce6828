"""The raft log on disk: Kafka's ``__cluster_metadata-0`` directory, read and written as Kafka does.

:class:`FileRaftLog` is the :class:`~kraftkit.raft.log.RaftLog` a real node uses. It sits on
:class:`kraftkit.log.Log` (segments, offset and time indexes, ``leader-epoch-checkpoint``) and keeps
snapshots beside it as ``<end offset, 20 digits>-<epoch, 10 digits>.checkpoint`` files, so the
directory is one Kafka itself (and ``kraftkit dump-log``/``metadata``) can read.

What travels is record batches, byte for byte: a leader's :meth:`read` returns the bytes of its
segments from the batch holding the fetch offset (a :class:`~kraftkit.raft.log.Batch`), a follower
appends the batches it was sent unchanged, and local appends (the leader's own entries) become one
uncompressed v2 batch per call, its partition leader epoch set, LeaderChangeMessage entries as
control batches. Durability is explicit: writes reach the page cache at once and are made durable by
:meth:`flush` (fsync), which the node calls when the core asks for it.

Snapshots sit on batch boundaries (the state machine snapshots what it applied, batch by batch);
taking one deletes the segments wholly below it and moves the log start to its end offset, as the
metadata log's retention does. Opening a directory recovers it as Kafka does after a crash: a torn
tail is cut off (and reported in :attr:`recovery`), a snapshot newer than the log end replaces the
log, unfinished ``.checkpoint.part`` files are removed.
"""

from __future__ import annotations

import itertools
import logging
import mmap
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kraftkit._core import (
    assign_offsets,
    control_record_key,
    decode_batches,
    decode_control_record,
    decode_metadata_record,
    encode_batch,
    encode_control_record,
    write_atomic,
)
from kraftkit._fs import open_input
from kraftkit._kafka import FEATURE_LEVEL
from kraftkit.errors import KraftkitError, LogError
from kraftkit.log import Log
from kraftkit.log.control import ControlType
from kraftkit.log.log import DEFAULT_INDEX_INTERVAL, list_segments
from kraftkit.metadata.snapshot import SnapshotId, list_snapshots
from kraftkit.raft.log import Batch, Entry, RaftLog
from kraftkit.raft.voters import KRAFT_VERSION, KRAFT_VOTERS, ControlRecord, KRaftControlState

if TYPE_CHECKING:
    from kraftkit._core import RecordInput

__all__ = ["FileRaftLog", "ClientBatches", "split_batches"]

log = logging.getLogger(__name__)

#: Kafka's ``KafkaRaftClient.MAX_FETCH_SIZE_BYTES``: how much one Fetch answer carries at most
MAX_FETCH_BYTES = 8 * 1024 * 1024
#: Kafka's ``KafkaRaftClient.MAX_BATCH_SIZE_BYTES``: the largest batch the leader writes
MAX_BATCH_BYTES = 8 * 1024 * 1024
LEADER_CHANGE = ControlType.LEADER_CHANGE
BATCH_HEADER = 61


MV_NAME = b"metadata.version"


def _sets_metadata_version(data: bytes) -> bool:
    """Whether an (uncompressed) batch holds a FeatureLevelRecord for metadata.version (the caller
    checked that the name occurs in its bytes at all, which registrations' feature lists also do)."""
    for batch in decode_batches(data):
        if batch.is_control:
            return False
        for r in batch.records():
            v = r.value
            if v is None or len(v) < 2 or v[1] != FEATURE_LEVEL:
                continue
            if decode_metadata_record(v)[2].get("Name") == "metadata.version":
                return True
    return False


CONTROL_ATTRIBUTE = 0x20


def control_records(data: bytes | memoryview, snapshot: bool = False) -> Iterator[tuple[int, ControlRecord]]:
    """``(offset, record)`` of every KRaftVersion and KRaftVoters control record in ``data`` (v2
    batches, whole ones; the CRCs were checked by whoever took the bytes in). Only control batches
    are decoded (the attribute bit is read from the header). ``snapshot``: a snapshot's control
    records are in its first batches: stop at the first data batch."""
    view = memoryview(data)
    pos, n = 0, len(view)
    while n - pos >= BATCH_HEADER:
        size = 12 + int.from_bytes(view[pos + 8 : pos + 12], "big", signed=True)
        if size < BATCH_HEADER or pos + size > n:
            return
        if not view[pos + 22] & CONTROL_ATTRIBUTE:
            if snapshot:
                return
            pos += size
            continue
        for batch in decode_batches(view[pos : pos + size]):
            for r in batch.records():
                key = r.key
                if key is None or len(key) < 4 or r.value is None:
                    continue
                ctype = int.from_bytes(key[2:4], "big", signed=True)
                if ctype in (KRAFT_VERSION, KRAFT_VOTERS):
                    yield r.offset, ControlRecord(ctype, decode_control_record(ctype, r.value))
        pos += size


def split_batches(data: bytes | memoryview) -> tuple[list[Batch], int]:
    """The complete v2 batches at the front of ``data`` (a Fetch answer may end in a partial one,
    which Kafka's readers drop too) as :class:`Batch` items, and how many bytes they cover. Only the
    headers are read; CRCs are checked by the caller."""
    view = memoryview(data)
    out: list[Batch] = []
    pos, n = 0, len(view)
    while n - pos >= BATCH_HEADER:
        length = int.from_bytes(view[pos + 8 : pos + 12], "big", signed=True)
        size = 12 + length
        if length < BATCH_HEADER - 12 or pos + size > n:
            break
        base = int.from_bytes(view[pos : pos + 8], "big", signed=True)
        epoch = int.from_bytes(view[pos + 12 : pos + 16], "big", signed=True)
        delta = int.from_bytes(view[pos + 23 : pos + 27], "big", signed=True)
        out.append(Batch(base, epoch, bytes(view[pos : pos + size]), base + delta))
        pos += size
    return out, pos


class ClientBatches:
    """Record batches a client sent to be appended as they are (a Produce request's records,
    already checked): ``len()`` is their record count. The leader gives them offsets and its epoch
    in place (:func:`kraftkit._core.assign_offsets`) instead of re-encoding every record."""

    __slots__ = ("data", "count")

    def __init__(self, data: bytes, count: int) -> None:
        self.data = data
        self.count = count

    def __len__(self) -> int:
        return self.count


class FileRaftLog(RaftLog[Batch]):
    """A raft log in a partition directory (created if missing). ``clock`` gives the record
    timestamps of local appends in ms (default: wall time); ``index_interval_bytes`` is Kafka's
    ``index.interval.bytes`` of its segments."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        segment_bytes: int = 1024 * 1024 * 1024,
        max_fetch_bytes: int = MAX_FETCH_BYTES,
        clock=None,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL,
    ) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.max_fetch_bytes = max_fetch_bytes
        self._clock = clock or (lambda: int(time.time() * 1000))
        for p in self.dir.glob("*.checkpoint.part"):
            p.unlink()
        try:
            snaps = list_snapshots(self.dir)
        except ValueError as e:  # a snapshot file name whose epoch or offset is out of range
            raise LogError(f"{self.dir}: {e}") from None
        self._snapshot: SnapshotId | None = None
        for old in snaps[:-1]:
            if old != (0, 0):
                (self.dir / old.file_name).unlink()
        if snaps and tuple(snaps[-1]) != (0, 0):
            self._snapshot = snaps[-1]
        self._snap_map: mmap.mmap | None = None
        has_segments = bool(list_segments(self.dir))
        self._log = Log(
            self.dir,
            create=True,
            segment_bytes=segment_bytes,
            truncate_corrupt_tail=True,
            index_interval_bytes=index_interval_bytes,
            initial_offset=self._snapshot.end_offset if self._snapshot and not has_segments else 0,
        )
        self.recovery: dict[str, Any] | None = None
        rec = self._log.recovery
        if rec and rec.get("error") is not None:
            self.recovery = rec
            log.warning(
                "%s: recovered the log: cut a torn or corrupt tail at offset %s: %s",
                self.dir,
                self._log.log_end_offset,
                rec["error"],
            )
        if self._snapshot and self._log.log_end_offset < self._snapshot.end_offset:
            # the snapshot is ahead of the log (fetched from the leader before a crash): start over from it
            self._restart_at(self._snapshot.end_offset)
        elif self._snapshot:
            self._delete_segments_below(self._snapshot.end_offset)
        self._flushed = self._log.log_end_offset
        self._load_kraft_state(snaps)

    def _load_kraft_state(self, snaps: list[SnapshotId]) -> None:
        """The kraft.version and voter sets: the latest snapshot's (or the bootstrap snapshot's,
        ``00000000000000000000-0000000000.checkpoint``, at offset -1), then every control record of
        the log after it (only control batches are decoded)."""
        sid = self._snapshot or (SnapshotId(0, 0) if snaps and tuple(snaps[0]) == (0, 0) else None)
        if sid is not None:
            path = self.dir / sid.file_name
            fd, st = open_input(path)
            try:
                data = os.read(fd, min(st.st_size, 1 << 20)) if st.st_size else b""
            finally:
                os.close(fd)
            try:
                records = [r for _o, r in control_records(data, snapshot=True)]
                self.kraft.note_snapshot_records(sid.end_offset - 1, records)
            except (KraftkitError, ValueError) as e:
                raise LogError(f"{path}: cannot read its KRaft control records: {e}") from None
        for batch in self._log.batches(self.start_offset):
            if batch.is_control:
                self._note_controls(self._log.read(batch.base_offset, batch.size_in_bytes)[: batch.size_in_bytes])

    def _note_controls(self, data: bytes | memoryview) -> None:
        """Takes the KRaftVersion and Voters records of ``data`` (whole batches) into :attr:`kraft`."""
        for offset, record in self._controls(data):
            self.kraft.note(offset, record)

    def _controls(self, data: bytes | memoryview) -> list[tuple[int, ControlRecord]]:
        """The KRaftVersion and Voters records of ``data``, each checked: one that cannot be read or
        taken is a :class:`LogError` naming this directory and the offset."""
        try:
            out = list(control_records(data))
            for offset, record in out:
                KRaftControlState().note(offset, record)  # (a check: a VotersRecord must be a voter set)
        except (KraftkitError, ValueError) as e:
            raise LogError(f"{self.dir}: a KRaft control record kraftkit cannot take: {e}") from None
        return out

    # -- state
    @property
    def log_dir(self) -> Log:
        """The underlying partition directory."""
        return self._log

    @property
    def start_offset(self) -> int:
        start = self._log.log_start_offset
        return max(start, self._snapshot.end_offset) if self._snapshot else start

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    def last_epoch(self) -> int:
        starts = self.epoch_starts()
        if starts:
            return starts[-1][0]
        return self._snapshot.epoch if self._snapshot else 0

    def epoch_starts(self) -> list[tuple[int, int]]:
        start, end = self.start_offset, self.end_offset
        cached = self._log.leader_epochs
        after = [(e, s) for e, s in cached if s >= start]
        prior = [(e, s) for e, s in cached if s < start]
        if prior and end > start and (not after or after[0][1] > start):
            after.insert(0, (prior[-1][0], start))
        return after

    # -- writes
    def append(self, batches: list[Batch] | list[Entry]) -> None:
        """Appends record batches as they are: the bytes a follower fetched, or what
        :meth:`entries_for_append` built. (A list of :class:`Entry`, the memory log's records, is
        turned into batches at this edge by :meth:`_entry_batches`: the log only writes batches.)"""
        if not batches:
            return
        todo: Iterable[Batch] = self._entry_batches(batches) if isinstance(batches[0], Entry) else batches
        for b in todo:
            controls = self._controls(b.data)  # (refused before anything is written)
            self._append_bytes(b.data, b.epoch)
            for offset, record in controls:
                self.kraft.note(offset, record)

    def entries_for_append(self, base_offset: int, epoch: int, payloads: Any, control: bool = False) -> list[Batch]:
        """One batch for ``payloads`` (a LeaderChangeMessage dict alone in a control batch when
        ``control``), or :class:`ClientBatches` taken as they are with their offsets and epoch set."""
        if isinstance(payloads, ClientBatches):
            data, n = assign_offsets(payloads.data, base_offset, epoch)
            if n != payloads.count:
                raise LogError(f"{self.dir}: the client batches hold {n} records, not {payloads.count}")
            return [Batch(base_offset, epoch, data, base_offset + n - 1)]
        return list(self._entry_batches([Entry(base_offset + i, epoch, p, control) for i, p in enumerate(payloads)]))

    def _entry_batches(self, entries: list[Entry]) -> Iterator[Batch]:
        """Entries as v2 batches, one per run of one epoch and kind (the control records a leader
        writes at once, a LeaderChangeMessage and the KIP-853 records after it, share one batch as
        in Kafka), each encoded when asked for: an append writes one before the next is checked
        against the log end."""
        run: list[Entry] = []
        for e in entries:
            if run and (e.epoch != run[0].epoch or e.control != run[0].control):
                yield self._encode_run(run)
                run = []
            run.append(e)
        if run:
            yield self._encode_run(run)

    def _encode_run(self, run: list[Entry]) -> Batch:
        first = run[0]
        if first.offset != self.end_offset:
            raise LogError(f"{self.dir}: append at {first.offset} but the log ends at {self.end_offset}")
        now = self._clock()
        records: list[RecordInput]
        if first.control:
            records = []
            for e in run:
                if isinstance(e.payload, ControlRecord):
                    ctype, body = e.payload.type, e.payload.body
                elif isinstance(e.payload, dict):
                    ctype, body = LEADER_CHANGE, e.payload
                else:
                    raise LogError(
                        f"{self.dir}: a control entry needs a LeaderChangeMessage dict or a ControlRecord, "
                        f"got {type(e.payload).__name__}"
                    )
                records.append((now, control_record_key(ctype), encode_control_record(ctype, body), []))
        else:
            records = []
            for e in run:
                if not isinstance(e.payload, (bytes, bytearray, memoryview)):
                    raise LogError(f"{self.dir}: entry {e.offset} holds {type(e.payload).__name__}, not bytes")
                records.append((now, None, bytes(e.payload), []))
        data = encode_batch(
            records, base_offset=first.offset, partition_leader_epoch=first.epoch, control=first.control
        )
        if len(data) > MAX_BATCH_BYTES:
            raise LogError(f"{self.dir}: a batch of {len(data)} bytes is over the {MAX_BATCH_BYTES}-byte limit")
        return Batch(first.offset, first.epoch, data, run[-1].offset)

    def _append_bytes(self, data: bytes, epoch: int) -> None:
        last = self.last_epoch()
        if epoch < last:
            raise LogError(f"{self.dir}: append of epoch {epoch} after epoch {last}")
        self._log.append(data)
        if MV_NAME in data and _sets_metadata_version(data):
            # the next batch starts a segment of its own: should this one lower metadata.version
            # across a change of the metadata format, the snapshot rewritten at its end becomes the
            # log start with no record the lower level cannot read below it in any segment kept
            self._log.roll()

    def initialize_leader_epoch(self, epoch: int) -> None:
        self._log.assign_leader_epoch(epoch, self.end_offset)

    def truncate_to(self, offset: int) -> None:
        if offset < self.start_offset:
            raise LogError(f"{self.dir}: truncation to {offset} below the log start {self.start_offset}")
        self._log.truncate_to(offset)
        self._flushed = min(self._flushed, self.end_offset)
        self.kraft.truncate(self.end_offset)

    def flush(self) -> int:
        self._log.flush()
        self._flushed = self.end_offset
        return self._flushed

    def read(self, start: int, max_entries: int) -> list[Batch]:
        """Raw batches from the one holding ``start``, up to :attr:`max_fetch_bytes` (at least one
        batch). ``max_entries`` is the in-memory log's bound and is not used here."""
        if start < self.start_offset:
            raise LogError(f"{self.dir}: read at {start} below the log start {self.start_offset}")
        if start >= self.end_offset:
            return []
        data = self._log.read(start, self.max_fetch_bytes)
        if not data:
            return []
        batches, _ = split_batches(data)
        return [Batch(batches[0].offset, batches[0].epoch, data, batches[-1].last_offset)]

    # -- snapshots
    def snapshot(self) -> SnapshotId | None:
        return self._snapshot

    def snapshot_path(self, sid: SnapshotId | None = None) -> Path:
        sid = sid or self._snapshot
        if sid is None:
            raise LogError(f"{self.dir}: no snapshot")
        return self.dir / sid.file_name

    def read_snapshot(self) -> Any:
        """The snapshot file's bytes as a read-only map (sliced by FetchSnapshot answers)."""
        if self._snapshot is None:
            return b""
        if self._snap_map is None:
            fd, st = open_input(self.snapshot_path())  # a regular file, or an error at once
            try:
                self._snap_map = mmap.mmap(fd, st.st_size, access=mmap.ACCESS_READ) if st.st_size else None
            finally:
                os.close(fd)
        return self._snap_map if self._snap_map is not None else b""

    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes | os.PathLike[str]) -> None:
        """Adopts the snapshot of every offset below ``snapshot_id.end_offset``: ``data`` is the
        checkpoint file's content, or the path of that file already written in this directory under
        its final name (as :meth:`kraftkit.metadata.MetadataImage.write_snapshot` does)."""
        sid = SnapshotId(*snapshot_id)
        end = sid.end_offset
        if self._snapshot and end <= self._snapshot.end_offset:
            return
        if not (self.start_offset < end <= self._flushed):
            raise LogError(
                f"{self.dir}: snapshot at {end} outside the flushed log ({self.start_offset}, {self._flushed}]"
            )
        if end < self.end_offset:
            nxt, _ = split_batches(self._log.read(end, 1))
            if not nxt or nxt[0].offset != end:
                raise LogError(
                    f"{self.dir}: snapshot end offset {end} is inside a batch; snapshots sit on batch boundaries"
                )
        if self.epoch_of(end - 1) != sid.epoch:
            raise LogError(f"{self.dir}: snapshot {tuple(sid)} does not match the epoch at offset {end - 1}")
        target = self.snapshot_path(sid)
        if isinstance(data, (bytes, bytearray, memoryview)):
            write_atomic(target, bytes(data))
        elif Path(data).resolve() != target.resolve():
            raise LogError(f"{self.dir}: snapshot file {data} must be written as {target}")
        elif not target.is_file():
            raise LogError(f"{target}: no such snapshot file")
        self._set_snapshot(sid)
        self._delete_segments_below(end)
        self.kraft.compact(end)

    def start_segment_at(self, offset: int) -> bool:
        """Makes a segment start at ``offset`` (a snapshot about to be taken there then leaves no
        record below it in any segment kept): True when one does (appends roll after a batch that
        sets metadata.version) or the log ends there and a new one was started; False when the log
        goes on past ``offset`` inside a segment."""
        if offset in self._log.segments:
            return True
        if self._log.log_end_offset != offset:
            return False
        self._log.roll(offset)
        return True

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Replaces the whole log by a snapshot fetched from the leader (Kafka's
        ``truncateToLatestSnapshot``): the file is written first, then the segments go."""
        sid = SnapshotId(*snapshot_id)
        data = bytes(data)
        write_atomic(self.snapshot_path(sid), data)
        self._set_snapshot(sid)
        self._restart_at(sid.end_offset)
        try:
            self.kraft.note_snapshot_records(sid.end_offset - 1, [r for _o, r in control_records(data, snapshot=True)])
        except (KraftkitError, ValueError) as e:
            raise LogError(f"{self.snapshot_path(sid)}: cannot read its KRaft control records: {e}") from None

    def _set_snapshot(self, sid: SnapshotId) -> None:
        old = self._snapshot
        self._snapshot = sid
        if self._snap_map is not None:
            self._snap_map.close()
            self._snap_map = None
        if old is not None and old != sid:
            (self.dir / old.file_name).unlink(missing_ok=True)

    def _restart_at(self, offset: int) -> None:
        self._log.truncate_fully_and_start_at(offset)
        self._flushed = offset

    def _delete_segments_below(self, offset: int) -> None:
        """Deletes the segments that hold only offsets below ``offset`` (never the active one)."""
        bases = self._log.segments
        doomed = [b for b, nxt in itertools.pairwise(bases) if nxt <= offset]
        if doomed:
            self._log.delete_segments(doomed)

    def close(self) -> None:
        if self._snap_map is not None:
            self._snap_map.close()
            self._snap_map = None
        self._log.close()

    def __repr__(self) -> str:
        return (
            f"FileRaftLog({str(self.dir)!r}, start={self.start_offset}, end={self.end_offset}, "
            f"flushed={self._flushed}, snapshot={tuple(self._snapshot) if self._snapshot else None})"
        )
