"""One call over the decoded records of KRaft metadata files: :func:`records`.

>>> from kraftkit.metadata import records
>>> for r in records("/var/lib/kafka/meta"):                  # doctest: +SKIP
...     print(r.offset, r.type, r.version, r.data)
0 SNAPSHOT_HEADER 0 {'Version': 0, 'LastContainedLogTimestamp': ...}
...

The path is a metadata log segment (``<offset>.log``), a snapshot (``<offset>-<epoch>.checkpoint``
or ``bootstrap.checkpoint``), a ``__cluster_metadata-0`` directory or a log directory holding one.
A directory gives its snapshots (oldest first), then its log segments in offset order: the files
``kraftkit metadata dump`` reads, in the same order; each file's records come in log order.

It is the readers ``metadata dump`` uses, not a new parser: every batch is CRC checked, a
compressed batch may inflate to :func:`kraftkit._core.max_uncompressed_bytes` at most, and the
files are checked for continuity before the first record (see :func:`records`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftkit._core import RecordBatch, decode_metadata_batch, metadata_record_types
from kraftkit.errors import CorruptRecordError
from kraftkit.log.continuity import Discontinuity, check_segments
from kraftkit.log.control import control_type_name
from kraftkit.metadata.source import (
    MetadataFile,
    batches,
    check_log,
    classify,
    expand,
    metadata_dir,
    order_errors,
    refuse_or_note,
    scan_segments,
    snapshot_problem,
)

__all__ = ["MetadataBatch", "MetadataRecord", "check_paths", "records"]


@dataclass(frozen=True, slots=True)
class MetadataBatch:
    """Where a record was read: its file and the record batch holding it (one object per batch)."""

    #: the file, as found (a directory's files are joined to it)
    file: str
    #: "segment" (a metadata log segment) or "snapshot"
    kind: str
    base_offset: int
    last_offset: int
    #: byte position of the batch in the file
    position: int
    partition_leader_epoch: int
    #: the batch's max timestamp (ms since the epoch)
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """A decoded record of a metadata log or snapshot.

    ``type`` is the name ``kafka-dump-log --cluster-metadata-decoder`` prints: the metadata record
    type (``"TOPIC_RECORD"``, ``"FEATURE_LEVEL_RECORD"``) or, for a control record, the control type
    (``"SNAPSHOT_HEADER"``, ``"LEADER_CHANGE"``, ``"KRAFT_VOTERS"``). ``data`` is the record body as a
    dict keyed by the schema's field names (see :mod:`kraftkit.metadata.records`); None for a control
    record of a type without a schema (ABORT, COMMIT or unknown)."""

    offset: int
    batch: MetadataBatch
    type: str
    version: int
    data: dict[str, Any] | None
    #: the metadata record's apiKey (None for a control record)
    api_key: int | None = None
    #: the control record's type (None for a metadata record)
    control_type: int | None = None

    @property
    def is_control(self) -> bool:
        return self.control_type is not None


def _type_names() -> dict[int, str]:
    from kraftkit.metadata.records import _snake

    return {t[0]: _snake(t[1]) for t in metadata_record_types()}


def check_paths(paths: list[str | os.PathLike[str]]) -> list[Discontinuity]:
    """The continuity problems of what ``metadata dump`` and :func:`records` are given: directories
    whole (segments and snapshots, see ``source.check_log``), files each on their own. Unreadable
    segment bytes (but batches out of offset order) are left to the reader, which reports them
    where it reaches them."""
    out: list[Discontinuity] = []
    for name in paths:
        p = Path(name)
        if p.is_dir():
            out += check_log(metadata_dir(p))
        elif p.is_file():
            f = classify(p)
            if p.suffix == ".checkpoint" or (f is not None and f.kind == "snapshot"):
                x = snapshot_problem(p)
                out += [x] if x is not None else []
            else:
                reps = scan_segments([p])
                out += check_segments(reps, dense=True) + order_errors(reps)
    return out


def records(
    path: str | os.PathLike[str], *, allow_gaps: bool = False, gaps: list[Discontinuity] | None = None
) -> Iterator[MetadataRecord]:
    """The decoded records of a metadata file or directory, in log order (see the module's doc).

    Checked before the first record (raised by this call, not by the iteration):
    :class:`~kraftkit.metadata.source.MetadataSourceError` for a path that is not there or holds no
    metadata files, ``OSError`` for one that cannot be read (a FIFO or device is refused), and
    :class:`~kraftkit.metadata.source.ContinuityError` for a log with missing or repeated offsets or
    a snapshot that does not match it, listing each. With ``allow_gaps`` those are appended to
    ``gaps`` instead and offsets held twice are given once (the first time).

    Raised during the iteration, after the records before it: :class:`~kraftkit.errors.CorruptRecordError`
    (``TruncatedError``, ``CompressionError``) or :class:`~kraftkit.errors.UnsupportedFormatError`
    for bytes that cannot be read, with ``file``, ``offset`` (the batch's base offset), ``position``
    (its byte position) and ``reason``."""
    files = expand([path])
    refuse_or_note(check_paths([path]), allow_gaps, gaps)
    return _records(files, allow_gaps)


def _records(files: list[MetadataFile], allow_gaps: bool) -> Iterator[MetadataRecord]:
    names = _type_names()
    log_next: int | None = None  # the offset after the last segment record given: the log is one sequence
    for f in files:
        expected = log_next if f.kind == "segment" else None
        for batch in batches(f.path):
            info = _batch_info(f, batch)
            if expected is not None and batch.base_offset < expected and not allow_gaps:
                # the check found no overlap, so the file changed since: said where it shows
                _raise_order(f, batch, expected)
            for offset, api_key, ver, data in decode_metadata_batch(batch):
                if expected is not None and offset < expected:
                    continue  # held twice (allow_gaps): given once, the first time, as load_image replays it
                if api_key is None:  # a control record: ver is its control type
                    cver = data.get("Version", 0) if data is not None else 0
                    name = control_type_name(ver, unknown=f"CONTROL_{ver}")
                    yield MetadataRecord(offset, info, name, int(cver), data, control_type=ver)
                else:
                    yield MetadataRecord(offset, info, names.get(api_key, str(api_key)), ver, data, api_key=api_key)
            expected = max(expected or 0, batch.last_offset + 1)
        if f.kind == "segment":
            log_next = expected


def _batch_info(f: MetadataFile, batch: RecordBatch) -> MetadataBatch:
    return MetadataBatch(
        str(f.path),
        f.kind,
        batch.base_offset,
        batch.last_offset,
        batch.position,
        batch.partition_leader_epoch,
        batch.max_timestamp,
    )


def _raise_order(f: MetadataFile, batch: RecordBatch, expected: int) -> None:
    reason = (
        f"batch base offset {batch.base_offset} is below the next expected offset {expected}: offsets are held twice"
    )
    e = CorruptRecordError(
        f"{f.path}: {reason} (batch base offset {batch.base_offset}, byte position {batch.position})"
    )
    e.file, e.offset, e.position, e.reason = str(f.path), batch.base_offset, batch.position, reason
    raise e
