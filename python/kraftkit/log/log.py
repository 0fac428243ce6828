"""A partition directory (``<topic>-<partition>/``): its segments, offsets and leader epochs.

The decisions (when to roll, what to delete on truncation, the leader epoch cache) are made
here; reading, validating and writing bytes and indexes is done by ``kraftkit._core``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

from kraftkit._core import RecordBatch, Segment, SegmentWriter, truncate_segment
from kraftkit.errors import LogError
from kraftkit.log.checkpoint import FILE_NAME as EPOCH_FILE
from kraftkit.log.checkpoint import read_leader_epochs, write_leader_epochs

SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
DEFAULT_INDEX_INTERVAL = 4096
#: The largest relative offset an index entry can hold.
MAX_RELATIVE_OFFSET = 2**31 - 1


def segment_name(base_offset: int, suffix: str = ".log") -> str:
    """``00000000000000000042.log`` for base offset 42."""
    return f"{base_offset:020d}{suffix}"


def list_segments(directory: Path) -> list[int]:
    """Base offsets of the ``.log`` files in a directory, ascending."""
    out = []
    for name in os.listdir(directory):
        m = SEGMENT_RE.match(name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


class Log:
    """An append-only partition log made of segments, as Kafka lays it out on disk.

    Open an existing directory with ``Log(path)``; create one with ``Log(path, create=True)``.
    A torn or corrupt tail in the active (last) segment raises
    :class:`~kraftkit.errors.CorruptRecordError` naming file, offset and position, unless
    ``truncate_corrupt_tail=True``; then the tail is cut off and reported in
    :attr:`recovery`. Earlier segments are not rescanned (use ``kraftkit verify-log``).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        create: bool = False,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL,
        initial_offset: int = 0,
        truncate_corrupt_tail: bool = False,
    ) -> None:
        self.dir: Path = Path(directory)
        if segment_bytes < 1:
            raise ValueError("segment_bytes must be positive")
        self.segment_bytes = segment_bytes
        self.index_interval_bytes = index_interval_bytes
        if create:
            self.dir.mkdir(parents=True, exist_ok=True)
        elif not self.dir.is_dir():
            raise LogError(f"{self.dir}: not a directory")
        self._bases = list_segments(self.dir)
        self._epochs = read_leader_epochs(self.dir / EPOCH_FILE)
        self.recovery: dict[str, Any] | None = None
        if not self._bases:
            if not create:
                raise LogError(f"{self.dir}: no segment files (*.log); pass create=True to start a log")
            self._active = SegmentWriter.create(self.dir, initial_offset, index_interval_bytes)
            self._bases = [initial_offset]
        else:
            self._active, self.recovery = SegmentWriter.open(
                self.dir, self._bases[-1], index_interval_bytes, truncate=truncate_corrupt_tail
            )
            self._truncate_epochs(self.log_end_offset)

    # -- offsets ---------------------------------------------------------------------------
    @property
    def segments(self) -> list[int]:
        """Base offsets of the segments, oldest first."""
        return list(self._bases)

    @property
    def log_start_offset(self) -> int:
        return self._bases[0]

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record will get."""
        nxt = self._active.next_offset
        return self._active.base_offset if nxt is None else nxt

    @property
    def leader_epochs(self) -> list[tuple[int, int]]:
        """The leader epoch cache: (epoch, start offset) entries."""
        return list(self._epochs)

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1][0] if self._epochs else None

    # -- writing ---------------------------------------------------------------------------
    def append(self, data: bytes) -> dict[str, Any]:
        """Appends one set of complete v2 batches (one Kafka append call) whose first offset
        is the log end offset. Rolls to a new segment first when the active one would exceed
        ``segment_bytes``. Returns the append info (offsets, position, segment)."""
        self._check_open()
        size = len(data)
        first = _first_offset(data)
        if first != self.log_end_offset:
            raise LogError(
                f"{self.dir}: append starts at offset {first}, expected the log end offset {self.log_end_offset}"
            )
        active = self._active
        if active.size > 0 and (
            active.size > self.segment_bytes - size or first - active.base_offset > MAX_RELATIVE_OFFSET
        ):
            self.roll(first)
        info = self._active.append(data)
        info["segment"] = self._active.base_offset
        changed = False
        for epoch, start in info["epochs"]:
            if not self._epochs or epoch > self._epochs[-1][0]:
                self._epochs.append((epoch, start))
                changed = True
        if changed:
            write_leader_epochs(self.dir / EPOCH_FILE, self._epochs)
        return info

    def roll(self, base_offset: int | None = None) -> None:
        """Closes the active segment and starts a new one at ``base_offset`` (default: the log end offset)."""
        self._check_open()
        base = self.log_end_offset if base_offset is None else base_offset
        if base < self.log_end_offset:
            raise LogError(f"{self.dir}: cannot roll to {base}, below the log end offset {self.log_end_offset}")
        self._active.close()
        self._active = SegmentWriter.create(self.dir, base, self.index_interval_bytes)
        self._bases.append(base)

    def truncate_to(self, offset: int) -> None:
        """Removes every record at or above ``offset`` (whole batches, as Kafka does), with
        the segments and leader epochs past it. Used by Raft followers on divergence."""
        self._check_open()
        if offset < self.log_start_offset:
            raise LogError(
                f"{self.dir}: cannot truncate to {offset}, below the log start offset {self.log_start_offset}"
            )
        if offset >= self.log_end_offset:
            return
        self._active.close()
        # As Kafka's UnifiedLog.truncateTo: segments with a base offset above `offset` go,
        # the last one left is truncated (emptied when its base offset equals `offset`).
        keep = [b for b in self._bases if b <= offset]
        for base in self._bases[len(keep) :]:
            for suffix in (".log", ".index", ".timeindex"):
                (self.dir / segment_name(base, suffix)).unlink(missing_ok=True)
        last = keep[-1]
        truncate_segment(self.dir, last, offset, self.index_interval_bytes)
        self._bases = keep
        self._active, _ = SegmentWriter.open(self.dir, last, self.index_interval_bytes)
        self._truncate_epochs(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Deletes every segment and the leader epochs, and starts an empty log at ``offset``
        (Kafka's ``UnifiedLog.truncateFullyAndStartAt``: a Raft follower that installed a
        snapshot past its log does this)."""
        self._check_open()
        self._active.close()
        for base in self._bases:
            for suffix in (".log", ".index", ".timeindex"):
                (self.dir / segment_name(base, suffix)).unlink(missing_ok=True)
        self._epochs = []
        write_leader_epochs(self.dir / EPOCH_FILE, [])
        self._active = SegmentWriter.create(self.dir, offset, self.index_interval_bytes)
        self._bases = [offset]

    def delete_segments(self, base_offsets: list[int]) -> None:
        """Deletes the oldest segments (their ``.log`` and index files), as retention does once a
        snapshot covers them; the log start offset moves to the first segment left. The active
        segment cannot be deleted."""
        self._check_open()
        n = len(base_offsets)
        if n == 0:
            return
        if sorted(base_offsets) != self._bases[:n] or n >= len(self._bases):
            raise LogError(
                f"{self.dir}: can delete only the oldest segments and never the active one, not {base_offsets}"
            )
        for base in self._bases[:n]:
            for suffix in (".log", ".index", ".timeindex"):
                (self.dir / segment_name(base, suffix)).unlink(missing_ok=True)
        self._bases = self._bases[n:]
        start = self._bases[0]
        prior = [(e, o) for e, o in self._epochs if o <= start]
        kept = ([(prior[-1][0], start)] if prior else []) + [(e, o) for e, o in self._epochs if o > start]
        if kept != self._epochs:
            self._epochs = kept
            write_leader_epochs(self.dir / EPOCH_FILE, kept)

    def assign_leader_epoch(self, epoch: int, start_offset: int) -> None:
        """Records that ``epoch`` starts at ``start_offset`` before any batch of it is written (a
        new Raft leader does this, as Kafka's ``LeaderEpochFileCache.assign``); entries for that
        epoch or later, or starting at or after that offset, are replaced."""
        self._check_open()
        if start_offset > self.log_end_offset:
            raise LogError(
                f"{self.dir}: epoch {epoch} cannot start at {start_offset}, past the log end offset {self.log_end_offset}"
            )
        kept = [(e, o) for e, o in self._epochs if e < epoch and o < start_offset]
        kept.append((epoch, start_offset))
        if kept != self._epochs:
            self._epochs = kept
            write_leader_epochs(self.dir / EPOCH_FILE, kept)

    def _truncate_epochs(self, end: int) -> None:
        kept = [(e, o) for e, o in self._epochs if o < end]
        if kept != self._epochs:
            self._epochs = kept
            write_leader_epochs(self.dir / EPOCH_FILE, kept)

    def flush(self) -> None:
        """fsyncs the active segment and writes its indexes."""
        self._check_open()
        self._active.flush()

    def close(self) -> None:
        if not self._active.closed:
            self._active.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._active.closed:
            raise LogError(f"{self.dir}: log is closed")

    # -- reading ---------------------------------------------------------------------------
    def segment(self, base_offset: int) -> Segment:
        return Segment(self.dir / segment_name(base_offset))

    def _segment_for(self, offset: int) -> int:
        idx = 0
        for i, b in enumerate(self._bases):
            if b <= offset:
                idx = i
        return self._bases[idx]

    def read(self, offset: int, max_bytes: int = 1024 * 1024) -> bytes:
        """Bytes of whole batches starting with the batch that holds ``offset``, up to
        ``max_bytes`` (at least one batch is returned, as Kafka's fetch does)."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise LogError(
                f"{self.dir}: offset {offset} is out of range [{self.log_start_offset}, {self.log_end_offset}]"
            )
        if offset == self.log_end_offset:
            return b""
        # Appended bytes are visible to readers at once; the on-disk index of the active
        # segment may lag, which only makes the lookup scan a little further.
        base = self._segment_for(offset)
        seg = self.segment(base)
        pos = seg.position_of(offset)
        if pos is None:
            later = [b for b in self._bases if b > base]
            if not later:
                return b""
            seg = self.segment(later[0])
            pos = 0
        out = bytearray()
        for batch in seg.batches(start=pos):
            if out and len(out) + batch.size_in_bytes > max_bytes:
                break
            out += memoryview(batch)
        return bytes(out)

    def batches(self, start_offset: int | None = None) -> Iterator[RecordBatch]:
        """Every batch from the one holding ``start_offset`` (default: the log start)."""
        start = self.log_start_offset if start_offset is None else start_offset
        for base in self._bases:
            nxt = [b for b in self._bases if b > base]
            if nxt and nxt[0] <= start:
                continue
            seg = self.segment(base)
            pos = seg.position_of(start) if start > base else 0
            if pos is None:
                continue
            yield from seg.batches(start=pos)

    def __repr__(self) -> str:
        if self._active.closed:
            return f"Log({str(self.dir)!r}, segments={len(self._bases)}, closed)"
        return f"Log({str(self.dir)!r}, segments={len(self._bases)}, start={self.log_start_offset}, end={self.log_end_offset})"


def _first_offset(data: bytes) -> int:
    if len(data) < 8:
        raise LogError("append data is shorter than a batch header")
    return int.from_bytes(data[:8], "big", signed=True)
