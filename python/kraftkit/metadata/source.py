"""Where metadata lives on disk: the files of a ``__cluster_metadata-0`` directory (log
segments and snapshots) and the decoded records in them.

A *path* given by a user may be a ``.log`` segment, a ``.checkpoint`` snapshot, a partition
directory (``__cluster_metadata-0``) or a log directory that holds one; this module turns it
into the files to read, in log order.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kraftkit._core import RecordBatch, Segment, decode_metadata_batch
from kraftkit.errors import KraftkitError
from kraftkit.log.log import list_segments, segment_name
from kraftkit.metadata.snapshot import BOOTSTRAP_FILE, SnapshotId, list_snapshots, parse_snapshot_name

METADATA_PARTITION = "__cluster_metadata-0"


class MetadataSourceError(KraftkitError):
    """A path that holds no metadata files, or a log that does not cover the offsets asked for."""


@dataclass(frozen=True)
class MetadataFile:
    path: Path
    kind: str  # "segment" | "snapshot"
    #: base offset (segments) or snapshot id (snapshots; None for bootstrap.checkpoint)
    base_offset: int | None = None
    snapshot_id: SnapshotId | None = None


def classify(path: Path) -> MetadataFile | None:
    name = path.name
    if name.endswith(".log") and name[:-4].isdigit():
        return MetadataFile(path, "segment", base_offset=int(name[:-4]))
    if name == BOOTSTRAP_FILE:
        return MetadataFile(path, "snapshot")
    parsed = parse_snapshot_name(name)
    if parsed and parsed[1] == "immutable":
        return MetadataFile(path, "snapshot", snapshot_id=parsed[0])
    return None


def metadata_dir(path: str | os.PathLike[str]) -> Path:
    """The partition directory for a path that is one, or a log directory holding
    ``__cluster_metadata-0``."""
    p = Path(path)
    if (p / METADATA_PARTITION).is_dir():
        return p / METADATA_PARTITION
    return p


def files_in(directory: Path) -> list[MetadataFile]:
    """Snapshots (oldest first), then segments (in offset order) of a partition directory."""
    out = [MetadataFile(directory / sid.file_name, "snapshot", snapshot_id=sid) for sid in list_snapshots(directory)]
    out += [MetadataFile(directory / segment_name(b), "segment", base_offset=b) for b in list_segments(directory)]
    return out


def expand(paths: list[str | os.PathLike[str]]) -> list[MetadataFile]:
    """Files for the paths a user gave (files as given; directories expanded).
    Raises :class:`MetadataSourceError` for a path that is neither."""
    out: list[MetadataFile] = []
    for name in paths:
        p = Path(name)
        if p.is_dir():
            d = metadata_dir(p)
            found = files_in(d)
            if not found:
                raise MetadataSourceError(f"{p}: no metadata log segments (*.log) or snapshots (*.checkpoint)")
            out += found
        elif p.is_file():
            f = classify(p)
            if f is None and p.suffix == ".log":
                f = MetadataFile(p, "segment")
            elif f is None and p.suffix == ".checkpoint":
                f = MetadataFile(p, "snapshot")
            if f is None:
                raise MetadataSourceError(f"{p}: not a log segment (<offset>.log) or snapshot (<offset>-<epoch>.checkpoint)")
            out.append(f)
        else:
            raise MetadataSourceError(f"{p}: no such file or directory")
    return out


def batches(path: Path, start: int = 0) -> Iterator[RecordBatch]:
    """The batches of one file, CRC checked (a bad batch raises ``CorruptRecordError``)."""
    return iter(Segment(path).batches(start=start, verify_crc=True))


def records(path: Path) -> Iterator[tuple[RecordBatch, list]]:
    """(batch, decoded records) for each batch of a file; see ``decode_metadata_batch``."""
    for batch in batches(path):
        yield batch, decode_metadata_batch(batch)
