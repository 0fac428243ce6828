"""KRaft snapshot files: ``<end offset, 20 digits>-<epoch, 10 digits>.checkpoint``.

A snapshot is a file of v2 record batches: a control batch opening with a SnapshotHeader
(and, with kraft.version >= 1, KRaftVersion and Voters records), data batches of framed
metadata records, and a SnapshotFooter batch. Offsets inside start at 0; every batch carries
the snapshot's epoch. Files are written as ``.checkpoint.part``, fsynced, made read-only and
renamed, as Kafka does; ``.checkpoint.deleted`` marks one for deletion.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, Self

from kraftkit._core import (
    RecordBatch,
    Segment,
    commit_part,
    control_record_key,
    encode_batch,
    kraft_version_value,
    snapshot_footer_value,
    snapshot_header_value,
    validate_snapshot,
)
from kraftkit.errors import KraftkitError
from kraftkit.log.control import ControlType

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"
DELETED_SUFFIX = ".checkpoint.deleted"
BOOTSTRAP_FILE = "bootstrap.checkpoint"
#: KafkaRaftClient.MAX_BATCH_SIZE_BYTES
MAX_BATCH_BYTES = 8 * 1024 * 1024
SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS = (
    ControlType.SNAPSHOT_HEADER,
    ControlType.SNAPSHOT_FOOTER,
    ControlType.KRAFT_VERSION,
    ControlType.KRAFT_VOTERS,
)

_NAME_RE = re.compile(r"^(\d{20})-(\d{10})(\.checkpoint|\.checkpoint\.deleted|-\d+\.checkpoint\.part)$")


class SnapshotError(KraftkitError):
    """A snapshot file that is malformed, misnamed or cannot be written."""


class SnapshotNameError(SnapshotError):
    """A snapshot file name Kafka could not load (an epoch above an int32): damage, not usage."""


class _OffsetAndEpoch(NamedTuple):
    end_offset: int
    epoch: int


class SnapshotId(_OffsetAndEpoch):
    """``OffsetAndEpoch``: the end offset (exclusive) and the epoch of the last record. A tuple, so
    it compares, sorts and unpacks as ``(end_offset, epoch)`` (as the raft log and its messages use it)."""

    __slots__ = ()

    def __new__(cls, end_offset: int, epoch: int) -> Self:
        if not 0 <= end_offset < 10**20 or not 0 <= epoch < 2**31:
            raise ValueError(f"invalid snapshot id {end_offset}-{epoch}")
        return super().__new__(cls, end_offset, epoch)

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SUFFIX}"

    def __str__(self) -> str:
        return f"{self.end_offset}-{self.epoch}"


#: The snapshot `kafka-storage format --standalone` writes into __cluster_metadata-0.
BOOTSTRAP_SNAPSHOT_ID = SnapshotId(0, 0)


def parse_snapshot_name(name: str) -> tuple[SnapshotId, str] | None:
    """(id, kind) for a snapshot file name, kind being "immutable", "partial" or "deleted";
    None for any other name. A snapshot name with an epoch above an int32 is an error
    (:class:`SnapshotError` naming it), as it is for Kafka."""
    m = _NAME_RE.match(Path(name).name)
    if not m:
        return None
    suffix = m.group(3)
    kind = "partial" if suffix.endswith(".part") else "deleted" if suffix.endswith(".deleted") else "immutable"
    epoch = int(m.group(2))
    if epoch >= 2**31:  # ten digits fit more than Kafka's int32 epoch (Snapshots.parse fails on it too)
        raise SnapshotNameError(f"{name}: a snapshot name whose epoch {epoch} is above {2**31 - 1} (an int32)")
    return SnapshotId(int(m.group(1)), epoch), kind


def list_snapshots(directory: str | os.PathLike[str]) -> list[SnapshotId]:
    """Ids of the immutable snapshots in a partition directory, oldest first."""
    out = []
    for name in os.listdir(directory):
        parsed = parse_snapshot_name(os.path.join(directory, name))
        if parsed and parsed[1] == "immutable":
            out.append(parsed[0])
    return sorted(out)


class SnapshotReader:
    """Reads a snapshot file. ``verify()`` checks its whole structure (CRCs, offsets, epochs,
    header first and footer last, KRaft record rules) and returns a report;
    ``check()`` raises the first problem instead."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path: Path = Path(path)
        parsed = parse_snapshot_name(str(self.path))
        if self.path.name == BOOTSTRAP_FILE:
            self.snapshot_id: SnapshotId | None = None
            self.epoch: int | None = 0
        elif parsed is None:
            raise SnapshotError(f"{self.path}: not a snapshot file name (<20 digits>-<10 digits>.checkpoint)")
        else:
            self.snapshot_id, _ = parsed
            self.epoch = self.snapshot_id.epoch

    def verify(self) -> dict[str, Any]:
        rep = validate_snapshot(self.path, self.epoch)
        if rep["error"] is None and self.snapshot_id is not None and self.snapshot_id != BOOTSTRAP_SNAPSHOT_ID:
            # The name's end offset is a log offset; nothing inside can be checked against it
            # except that a snapshot of an empty log holds no metadata and any other holds
            # some (source.check_snapshot_name checks the name against the log itself).
            if self.snapshot_id.end_offset == 0 and rep["data_records"]:
                rep["error"] = SnapshotError(
                    f"{self.path}: a snapshot ending at offset 0 holds {rep['data_records']} records"
                )
            elif self.snapshot_id.end_offset > 0 and not rep["data_records"]:
                # Kafka writes a snapshot from a metadata image, which always holds at least
                # the metadata.version FeatureLevelRecord.
                rep["error"] = SnapshotError(
                    f"{self.path}: empty snapshot: it claims offsets up to "
                    f"{self.snapshot_id.end_offset - 1} but holds no metadata records"
                )
        return rep

    def check(self) -> dict[str, Any]:
        rep = self.verify()
        if rep["error"] is not None:
            raise rep["error"]
        return rep

    def batches(self) -> Iterator[RecordBatch]:
        return iter(Segment(self.path).batches(verify_crc=True))

    def records(self) -> Iterator[tuple[int, bytes]]:
        """(offset in the snapshot, framed metadata record value) of every data record."""
        for batch in self.batches():
            if batch.is_control:
                continue
            for r in batch.records():
                if r.value is None:  # verify() refuses this; records() may be read without it
                    raise SnapshotError(f"{self.path}: record at offset {r.offset} has no value")
                yield r.offset, r.value


class SnapshotWriter:
    """Writes a snapshot as Kafka's ``RecordsSnapshotWriter`` does, streaming: memory holds
    at most one batch (8 MiB). ``append`` takes a list of framed metadata record values; one
    list never spans two batches. ``freeze()`` writes the footer, fsyncs, makes the file
    read-only and renames ``.checkpoint.part`` to ``.checkpoint``. Leaving the ``with`` block
    on an exception deletes the partial file; leaving it normally freezes.

    ``time_ms`` fixes every batch timestamp (for byte-for-byte reproducible snapshots);
    by default batches carry the wall-clock time they were started, as in Kafka.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        snapshot_id: SnapshotId,
        *,
        last_contained_log_timestamp: int,
        kraft_version: int = 0,
        voters_value: bytes | None = None,
        time_ms: int | None = None,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        file_name: str | None = None,
    ) -> None:
        self.dir: Path = Path(directory)
        self.snapshot_id = snapshot_id
        self.final_path: Path = self.dir / (file_name or snapshot_id.file_name)
        if self.final_path.exists():
            raise SnapshotError(f"{self.final_path}: already exists")
        if kraft_version == 0 and voters_value is not None:
            raise SnapshotError("a voter set needs kraft.version >= 1")
        self._time_ms = time_ms
        self.max_batch_bytes = max_batch_bytes
        prefix = f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}-"
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=PARTIAL_SUFFIX, dir=self.dir)
        self.part_path: Path = Path(tmp)
        self._file = os.fdopen(fd, "wb")
        self._next_offset = 0
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._pending_ts = 0
        self.frozen: bool = False
        self.records: int = 0
        header = [(control_record_key(SNAPSHOT_HEADER), snapshot_header_value(last_contained_log_timestamp))]
        if kraft_version >= 1:
            header.append((control_record_key(KRAFT_VERSION), kraft_version_value(kraft_version)))
            if voters_value is not None:
                header.append((control_record_key(KRAFT_VOTERS), voters_value))
        self._write_control(header)

    def _now(self) -> int:
        return self._time_ms if self._time_ms is not None else int(time.time() * 1000)

    def _write(self, data: bytes, count: int) -> None:
        self._file.write(data)
        self._next_offset += count

    def _write_control(self, records: list[tuple[bytes, bytes]]) -> None:
        ts = self._now()
        data = encode_batch(
            [(ts, k, v, ()) for k, v in records],
            base_offset=self._next_offset,
            partition_leader_epoch=self.snapshot_id.epoch,
            control=True,
        )
        self._write(data, len(records))

    def _flush_pending(self) -> None:
        if not self._pending:
            return
        ts = self._pending_ts
        data = encode_batch(
            [(ts, None, v, ()) for v in self._pending],
            base_offset=self._next_offset,
            partition_leader_epoch=self.snapshot_id.epoch,
        )
        self._write(data, len(self._pending))
        self._pending = []
        self._pending_bytes = 0

    def append(self, values: Sequence[bytes]) -> None:
        if self.frozen:
            raise SnapshotError(f"{self.final_path}: append to a frozen snapshot")
        if not values:
            return
        # Per record: at most 5 (length) + 1 + 1 + 1 + 1 (null key) + 5 (value length) + 1 headers.
        size = sum(len(v) + 15 for v in values)
        if size + 61 > self.max_batch_bytes:
            raise SnapshotError(f"a list of {size} bytes does not fit one batch of {self.max_batch_bytes} bytes")
        if self._pending and self._pending_bytes + size + 61 > self.max_batch_bytes:
            self._flush_pending()
        if not self._pending:
            self._pending_ts = self._now()
        self._pending.extend(values)
        self._pending_bytes += size
        self.records += len(values)

    def freeze(self) -> Path:
        """Footer, fsync, read-only, atomic rename. Returns the final path."""
        if self.frozen:
            return self.final_path
        self._flush_pending()
        self._write_control([(control_record_key(SNAPSHOT_FOOTER), snapshot_footer_value())])
        self._file.close()
        commit_part(self.part_path, self.final_path, mode=0o444)
        self.frozen = True
        return self.final_path

    def abort(self) -> None:
        if not self.frozen:
            self._file.close()
            self.part_path.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.freeze()
        else:
            self.abort()


def mark_deleted(path: str | os.PathLike[str]) -> Path:
    """Renames ``X.checkpoint`` to ``X.checkpoint.deleted``, as Kafka does before deleting it."""
    p = Path(path)
    if not p.name.endswith(SUFFIX):
        raise SnapshotError(f"{p}: not a .checkpoint file")
    target = p.with_name(p.name + ".deleted")
    os.replace(p, target)
    return target
