"""``kraftkit verify-log``: check the CRCs, sizes, offsets and indexes of every segment."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kraftkit.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, fail
from kraftkit.cli.jsonout import emit
from kraftkit.cli.main import add_max_batch_bytes
from kraftkit.cli.progress import Progress
from kraftkit.log import verify_segments
from kraftkit.log.continuity import check_leader_epochs, check_segments, is_metadata_partition
from kraftkit.log.log import SEGMENT_RE

HELP = "check every segment (CRC, sizes, offsets, indexes) of partition or log directories, in parallel"
DESCRIPTION = HELP + (
    ". Offsets must follow on from segment to segment. In a KRaft metadata partition (__cluster_metadata-N, or "
    "any directory holding <offset>-<epoch>.checkpoint snapshots) offsets are dense, so a hole between or inside "
    "segments is a problem, as is a first batch above its segment's base offset, a batch whose lastOffsetDelta "
    "does not match its records, a log that starts after the newest snapshot ends, and a snapshot whose contents "
    "or name (end offset, epoch) do not match the log. In other partitions compaction leaves gaps legitimately: "
    "only overlaps and batches below their segment's base offset are problems. Index entries past the point "
    "where a log cannot be read are noted, not counted. Exits 1 if anything is wrong, 2 if a path is not there."
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify-log", help=HELP, description=DESCRIPTION)
    p.add_argument(
        "paths", nargs="+", metavar="DIR", help="partition directories, log directories holding them, or segment files"
    )
    p.add_argument("--deep", action="store_true", help="also decompress and check every record")
    p.add_argument("--no-index", action="store_true", help="skip the .index/.timeindex checks")
    p.add_argument("--json", action="store_true", help="one JSON object per partition, then a total")
    p.add_argument("--quiet", "-q", action="store_true", help="print only problems and the total; no progress line")
    add_max_batch_bytes(p)
    p.set_defaults(func=run)


@dataclass
class Partition:
    path: Path
    files: list[Path]
    segments: int = 0
    batches: int = 0
    records: int = 0
    bytes: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: found by walking a directory (so it holds all of the partition's files)
    whole: bool = False

    @property
    def metadata(self) -> bool:
        """A KRaft log: dense offsets (named __cluster_metadata-N or holding snapshots)."""
        from kraftkit.metadata.snapshot import parse_snapshot_name

        return is_metadata_partition(self.path) or any(parse_snapshot_name(f.name) for f in self.files)


def find_partitions(paths: list[str]) -> tuple[list[Partition], list[str]]:
    """Groups segment (.log) and snapshot (.checkpoint) files by their directory."""
    groups: dict[Path, list[Path]] = {}
    walked: set[Path] = set()
    missing = []
    for p in map(Path, paths):
        if p.is_file():
            groups.setdefault(p.parent, []).append(p)
        elif p.is_dir():
            for root, _dirs, names in os.walk(p):
                files = [Path(root) / n for n in names if SEGMENT_RE.match(n) or n.endswith(".checkpoint")]
                if files:
                    groups.setdefault(Path(root), []).extend(files)
                    walked.add(Path(root))
        else:
            missing.append(str(p))
    parts = [Partition(d, sorted(set(fs)), whole=d in walked) for d, fs in sorted(groups.items())]
    return parts, missing


def verify(parts: list[Partition], deep: bool, check_indexes: bool, progress: Progress | None = None) -> None:
    by_file: dict[str, dict] = {}
    for dense in (False, True):
        files = [f for part in parts if part.metadata == dense for f in part.files]
        chunk = max(2 * (os.cpu_count() or 1), 8)
        for i in range(0, len(files), chunk):
            for rep in verify_segments(files[i : i + chunk], deep=deep, check_indexes=check_indexes, dense=dense):
                by_file[rep["file"]] = rep
            if progress is not None:
                progress.advance(len(files[i : i + chunk]))
    for part in parts:
        dense = part.metadata
        logs = []
        for f in part.files:
            rep = by_file[str(f)]
            part.bytes += rep["total_bytes"]
            part.batches += rep["batches"]
            part.records += rep["records"]
            # a metadata partition's snapshots are checked as snapshots below
            if rep["error"] is not None and not (dense and not f.name.endswith(".log")):
                part.problems.append(str(rep["error"]))
            for suffix, entry, reason in rep["index_problems"]:
                part.problems.append(f"{f.with_suffix('.' + suffix)}: entry {entry}: {reason}")
            for suffix, entry, reason in rep.get("index_unchecked", ()):
                part.notes.append(f"{f.with_suffix('.' + suffix)}: entry {entry}: {reason}")
            if not f.name.endswith(".log"):
                continue
            part.segments += 1
            logs.append(rep)
            if rep["first_offset"] is not None:
                part.first_offset = rep["first_offset"] if part.first_offset is None else part.first_offset
                part.last_offset = rep["last_offset"]
        if part.whole:
            part.problems += [str(x) for x in check_leader_epochs(part.path)]
        if dense and part.whole:
            from kraftkit.errors import KraftkitError
            from kraftkit.metadata.source import check_log

            try:
                found = check_log(part.path)
            except KraftkitError as e:  # a file that cannot be read at all, a misnamed snapshot: one problem
                part.problems.append(str(e))
            else:
                part.problems += [str(x) for x in found if not (x.kind == "corrupt" and x.file.endswith(".log"))]
        else:
            part.problems += [str(x) for x in check_segments(logs, dense=dense)]
            if dense:
                from kraftkit.metadata.source import snapshot_problem

                for f in part.files:
                    if not f.name.endswith(".log") and (x := snapshot_problem(f)) is not None:
                        part.problems.append(str(x))


def run(args: argparse.Namespace) -> int:
    parts, missing = find_partitions(args.paths)
    for m in missing:
        print(f"kraftkit verify-log: {m}: no such file or directory", file=sys.stderr)
    if not parts:
        return fail("verify-log", "no segment or snapshot files found")
    try:
        with Progress("checked", total=sum(len(p.files) for p in parts), unit="files", quiet=args.quiet) as progress:
            verify(parts, args.deep, not args.no_index, progress)
    except OSError as e:
        return fail("verify-log", str(e))
    total = {
        "partitions": len(parts),
        "files": sum(len(p.files) for p in parts),
        "batches": 0,
        "records": 0,
        "bytes": 0,
        "problems": 0,
    }
    for p in parts:
        total["batches"] += p.batches
        total["records"] += p.records
        total["bytes"] += p.bytes
        total["problems"] += len(p.problems)
        if args.json:
            emit(
                {
                    "type": "partition",
                    "path": str(p.path),
                    "segments": p.segments,
                    "files": len(p.files),
                    "batches": p.batches,
                    "records": p.records,
                    "bytes": p.bytes,
                    "firstOffset": p.first_offset,
                    "lastOffset": p.last_offset,
                    "problems": p.problems,
                    "notes": p.notes,
                }
            )
            continue
        status = "OK" if not p.problems else f"{len(p.problems)} PROBLEM(S)"
        if not args.quiet or p.problems:
            rng = f"offsets {p.first_offset}..{p.last_offset}" if p.first_offset is not None else "empty"
            print(
                f"{p.path}: {p.segments} segment(s), {p.batches} batches, {p.records} records, {p.bytes} bytes, {rng}: {status}"
            )
        for prob in p.problems:
            print(f"  - {prob}")
        for note in p.notes:
            print(f"  note: {note}")
    if args.json:
        emit({"type": "total", **total})
    else:
        verdict = "all valid" if not total["problems"] else f"{total['problems']} problem(s)"
        print(
            f"verified {total['files']} file(s) in {total['partitions']} directory(ies): {total['batches']} batches, "
            f"{total['records']} records, {total['bytes']} bytes: {verdict}"
        )
    # a path that is not there is unreadable input (2), as for every command; problems found: 1
    return EXIT_USAGE if missing else EXIT_PROBLEMS if total["problems"] else EXIT_OK
