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
from typing import Any

from kraftkit._core import RecordBatch, Segment, decode_metadata_batch
from kraftkit._fs import check_input, error_text, not_regular_reason
from kraftkit.errors import KraftkitError
from kraftkit.log.checkpoint import FILE_NAME as EPOCH_FILE
from kraftkit.log.checkpoint import read_leader_epochs
from kraftkit.log.continuity import Discontinuity, check_segments
from kraftkit.log.log import list_segments, segment_name
from kraftkit.metadata.snapshot import BOOTSTRAP_FILE, SnapshotId, list_snapshots, parse_snapshot_name

METADATA_PARTITION = "__cluster_metadata-0"


class MetadataSourceError(KraftkitError):
    """A path that holds no metadata files, or a log that does not cover the offsets asked for."""


#: How the segment scan words offsets out of order (see ``segment.rs``'s ``check_batch``).
ORDER_ERRORS = ("below the next expected offset", "cannot be stored relative to the segment's base offset")


class ContinuityError(KraftkitError):
    """A metadata log with missing or repeated offsets, or a snapshot that does not match the
    log it was taken of. ``problems`` lists every :class:`Discontinuity` found."""

    def __init__(self, problems: list[Discontinuity]) -> None:
        self.problems = problems
        super().__init__("\n".join(map(str, problems)))


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
                raise MetadataSourceError(
                    f"{p}: not a log segment (<offset>.log) or snapshot (<offset>-<epoch>.checkpoint)"
                )
            out.append(f)
        else:
            try:
                mode = p.stat().st_mode
            except OSError:
                mode = None  # not there (or a dangling link, a loop): said as such below
            if mode is not None:  # a FIFO, a device, a socket: never opened (a read could block or not end)
                raise MetadataSourceError(f"{p}: {not_regular_reason(mode)}")
            raise MetadataSourceError(f"{p}: no such file or directory")
    return out


def batches(path: Path, start: int = 0) -> Iterator[RecordBatch]:
    """The batches of one file, CRC checked (a bad batch raises ``CorruptRecordError``)."""
    return iter(Segment(path).batches(start=start, verify_crc=True))


def records(path: Path) -> Iterator[tuple[RecordBatch, list[tuple[int, int | None, int, dict[str, Any] | None]]]]:
    """(batch, decoded records) for each batch of a file; see ``decode_metadata_batch``."""
    for batch in batches(path):
        yield batch, decode_metadata_batch(batch)


# ---------------------------------------------------------------------- continuity


def scan_segments(paths: list[Path]) -> list[dict[str, Any]]:
    """Header scans (no CRC: the readers check that) of metadata log segments, in order, as
    :func:`kraftkit.log.continuity.check_segments` takes them."""
    out = []
    for p in paths:
        try:
            check_input(p)  # a FIFO, a directory, a link loop: said as what it is
        except OSError as e:
            raise MetadataSourceError(error_text(e)) from None
        out.append(Segment(p).scan(verify_crc=False, dense=True))
    return out


def known_epochs(directory: Path, reports: list[dict[str, Any]]) -> set[int]:
    """Leader epochs of the log: those its batches carry and those of its leader-epoch-checkpoint
    (which keeps the epoch of offsets whose segments were deleted)."""
    epochs = {e for rep in reports for e, _ in rep["epochs"]}
    try:
        epochs.update(e for e, _ in read_leader_epochs(directory / EPOCH_FILE))
    except (KraftkitError, OSError, ValueError):
        pass  # a damaged checkpoint only gives no epochs; verify-log reports it
    return epochs


def check_snapshot_name(directory: Path, sid: SnapshotId, epochs: set[int]) -> Discontinuity | None:
    """Checks a snapshot's id against the log where the log still holds its last offset: the
    end offset must be where a log batch ends, and the epoch must be valid for that offset as
    Kafka's ``KafkaMetadataLog.validateOffsetAndEpoch`` decides (an epoch of the log that no
    batch below the end offset exceeds). None when it matches or the log does not reach it."""
    end, epoch = sid.end_offset, sid.epoch
    if end <= 0:
        return None
    target = end - 1
    bases = [b for b in list_segments(directory) if b <= target]
    if not bases:
        return None
    seg_path = directory / segment_name(bases[-1])
    try:
        for batch in Segment(seg_path).batches():
            if batch.last_offset >= target:
                break
        else:
            return None  # the log ends below the snapshot's end
    except KraftkitError:
        return None  # unreadable bytes before it: the scan reports them
    pos = batch.position
    if batch.base_offset > target:
        return None  # a hole holds it: reported as a gap
    snap = str(directory / sid.file_name)
    if batch.last_offset != target:
        return Discontinuity(
            snap,
            batch.base_offset,
            pos,
            f"end offset {end} is inside the log batch {batch.base_offset}..{batch.last_offset} of "
            f"{seg_path}: a snapshot ends where a batch ends",
            "snapshot",
        )
    e = batch.partition_leader_epoch
    if epoch < e:
        return Discontinuity(
            snap,
            batch.base_offset,
            pos,
            f"epoch {epoch} in the name is below leader epoch {e} of the log batch ending at offset "
            f"{target} in {seg_path}",
            "snapshot",
        )
    if epoch > e and epoch not in epochs:
        return Discontinuity(
            snap,
            batch.base_offset,
            pos,
            f"epoch {epoch} in the name is not a leader epoch of the log (the log batch ending at "
            f"offset {target} in {seg_path} has epoch {e})",
            "snapshot",
        )
    return None


def snapshot_problem(path: Path) -> Discontinuity | None:
    """The structural check of a snapshot file (``SnapshotReader.verify``) as a Discontinuity."""
    from kraftkit._core import validate_snapshot
    from kraftkit.metadata.snapshot import SnapshotError, SnapshotReader

    try:
        err = SnapshotReader(path).verify()["error"]
    except SnapshotError:  # not named as a snapshot: no epoch to check its batches against
        err = validate_snapshot(path, None)["error"]
    if err is None:
        return None
    # the core's errors carry their reason apart from the file and the location their text adds
    # (the Discontinuity adds those itself: the text would say them twice)
    reason = getattr(err, "reason", None)
    if not reason:
        text, prefix = str(err), f"{path}: "
        reason = text[len(prefix) :] if text.startswith(prefix) else text
    return Discontinuity(str(path), getattr(err, "offset", None), getattr(err, "position", None), reason, "corrupt")


def check_log(
    directory: Path, *, at: int | None = None, snapshots: list[SnapshotId] | None = None, start: int | None = None
) -> list[Discontinuity]:
    """Every discontinuity of a metadata partition directory that matters for the offsets below
    ``at`` (all of them by default): holes and overlaps between and inside segments, a log that
    starts after ``start`` (default: the end of the newest snapshot checked), ``snapshots``
    (default: every one ending at or below ``at``) whose contents or names do not match the log.
    Bytes a scan cannot read come as kind "corrupt" (the readers report them too)."""
    bases = list_segments(directory)
    reports = scan_segments([directory / segment_name(b) for b in bases])
    if snapshots is None:
        snapshots = [s for s in list_snapshots(directory) if at is None or s.end_offset <= at]
    # holes below a given start do not matter to what is read from there; in a whole check
    # every hole does (the log still holds offsets on both sides of it)
    lo = 0 if start is None else start
    if start is None:
        start = max((s.end_offset for s in snapshots), default=0)
    out = [d for d in check_segments(reports, dense=True) if _relevant(d, lo, at)]
    out += [d for d in order_errors(reports) if at is None or d.offset is None or d.offset < at]
    epochs = known_epochs(directory, reports)
    for sid in snapshots:
        p = snapshot_problem(directory / sid.file_name)
        if p is None:
            p = check_snapshot_name(directory, sid, epochs)
        if p is not None:
            out.append(p)
    if bases and bases[0] > start and (at is None or start < at):
        first = next((r["first_offset"] for r in reports if r["first_offset"] is not None), None)
        what = f"the snapshot it follows ends at offset {start}" if start else "no snapshot covers them"
        out.insert(
            0,
            Discontinuity(
                str(directory / segment_name(bases[0])),
                first,
                0 if first is not None else None,
                f"offsets {start}..{bases[0] - 1} are missing: the log starts at offset {bases[0]} and {what}",
                "gap",
                (start, bases[0] - 1),
            ),
        )
    return out


def order_errors(reports: list[dict[str, Any]]) -> list[Discontinuity]:
    """The scan errors a replay would not notice: a batch below the offset after the one before
    it, or below its segment's base offset (the replay applies batches in file order; other
    unreadable bytes it reports itself, where it reaches them). Kind "corrupt": always refused."""
    out = []
    for rep in reports:
        err = rep["error"]
        reason = getattr(err, "reason", None) or ""
        if err is not None and any(m in reason for m in ORDER_ERRORS):
            out.append(
                Discontinuity(
                    str(rep["file"]), getattr(err, "offset", None), getattr(err, "position", None), reason, "corrupt"
                )
            )
    return out


def refuse_or_note(problems: list[Discontinuity], allow_gaps: bool, noted: list[Discontinuity] | None) -> None:
    """Raises :class:`ContinuityError` for ``problems`` unless ``allow_gaps`` and none of them
    is corrupt bytes or a malformed snapshot; then they are appended to ``noted``."""
    if problems and (not allow_gaps or any(p.kind == "corrupt" for p in problems)):
        raise ContinuityError(problems)
    if noted is not None:
        noted.extend(problems)


def _relevant(d: Discontinuity, start: int, at: int | None) -> bool:
    """A gap matters when it is in ``[start, at)``; anything else below ``at``."""
    if d.missing is not None:
        return d.missing[1] >= start and (at is None or d.missing[0] < at)
    return d.offset is None or at is None or d.offset < at
