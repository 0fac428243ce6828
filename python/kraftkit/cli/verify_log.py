"""``kraftkit verify-log``: check the CRCs, sizes, offsets and indexes of every segment."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kraftkit.cli.main import add_max_batch_bytes
from kraftkit.log import verify_segments
from kraftkit.log.log import SEGMENT_RE

HELP = "check every segment (CRC, sizes, offsets, indexes) of partition or log directories, in parallel"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify-log", help=HELP, description=HELP + ". Exits 1 if anything is wrong.")
    p.add_argument("paths", nargs="+", metavar="DIR", help="partition directories, log directories holding them, or segment files")
    p.add_argument("--deep", action="store_true", help="also decompress and check every record")
    p.add_argument("--no-index", action="store_true", help="skip the .index/.timeindex checks")
    p.add_argument("--json", action="store_true", help="one JSON object per partition, then a total")
    p.add_argument("--quiet", "-q", action="store_true", help="print only problems and the total")
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


def find_partitions(paths: list[str]) -> tuple[list[Partition], list[str]]:
    """Groups segment (.log) and snapshot (.checkpoint) files by their directory."""
    groups: dict[Path, list[Path]] = {}
    missing = []
    for p in map(Path, paths):
        if p.is_file():
            groups.setdefault(p.parent, []).append(p)
        elif p.is_dir():
            for root, _dirs, names in os.walk(p):
                files = [Path(root) / n for n in names if SEGMENT_RE.match(n) or n.endswith(".checkpoint")]
                if files:
                    groups.setdefault(Path(root), []).extend(files)
        else:
            missing.append(str(p))
    parts = [Partition(d, sorted(set(fs))) for d, fs in sorted(groups.items())]
    return parts, missing


def _progress(done: int, total: int) -> None:
    if sys.stderr.isatty():
        width = 30
        n = int(width * done / max(total, 1))
        sys.stderr.write(f"\r[{'#' * n}{'.' * (width - n)}] {done}/{total} files")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def verify(parts: list[Partition], deep: bool, check_indexes: bool) -> None:
    files = [f for part in parts for f in part.files]
    by_file: dict[str, dict] = {}
    chunk = max(2 * (os.cpu_count() or 1), 8)
    for i in range(0, len(files), chunk):
        for rep in verify_segments(files[i : i + chunk], deep=deep, check_indexes=check_indexes):
            by_file[rep["file"]] = rep
        _progress(min(i + chunk, len(files)), len(files))
    for part in parts:
        prev_last = None
        for f in part.files:
            rep = by_file[str(f)]
            part.bytes += rep["total_bytes"]
            part.batches += rep["batches"]
            part.records += rep["records"]
            if rep["error"] is not None:
                part.problems.append(str(rep["error"]))
            for suffix, entry, reason in rep["index_problems"]:
                part.problems.append(f"{f.with_suffix('.' + suffix)}: entry {entry}: {reason}")
            if not f.name.endswith(".log"):
                continue
            part.segments += 1
            base = int(f.name.split(".")[0])
            first, last = rep["first_offset"], rep["last_offset"]
            if first is not None and first < base:
                part.problems.append(f"{f}: first offset {first} is below the segment's base offset {base}")
            if prev_last is not None and base <= prev_last:
                part.problems.append(f"{f}: base offset {base} overlaps the previous segment, which ends at offset {prev_last}")
            if first is not None:
                part.first_offset = first if part.first_offset is None else part.first_offset
                part.last_offset = last
                prev_last = last


def run(args: argparse.Namespace) -> int:
    parts, missing = find_partitions(args.paths)
    for m in missing:
        print(f"kraftkit verify-log: {m}: no such file or directory", file=sys.stderr)
    if not parts:
        print("kraftkit verify-log: no segment or snapshot files found", file=sys.stderr)
        return 2
    try:
        verify(parts, args.deep, not args.no_index)
    except OSError as e:
        print(f"kraftkit verify-log: {e}", file=sys.stderr)
        return 2
    total = {"partitions": len(parts), "files": sum(len(p.files) for p in parts), "batches": 0, "records": 0, "bytes": 0, "problems": 0}
    for p in parts:
        total["batches"] += p.batches
        total["records"] += p.records
        total["bytes"] += p.bytes
        total["problems"] += len(p.problems)
        if args.json:
            print(json.dumps({"type": "partition", "path": str(p.path), "segments": p.segments, "files": len(p.files),
                              "batches": p.batches, "records": p.records, "bytes": p.bytes, "first_offset": p.first_offset,
                              "last_offset": p.last_offset, "problems": p.problems}))
            continue
        status = "OK" if not p.problems else f"{len(p.problems)} PROBLEM(S)"
        if not args.quiet or p.problems:
            rng = f"offsets {p.first_offset}..{p.last_offset}" if p.first_offset is not None else "empty"
            print(f"{p.path}: {p.segments} segment(s), {p.batches} batches, {p.records} records, {p.bytes} bytes, {rng}: {status}")
        for prob in p.problems:
            print(f"  - {prob}")
    if args.json:
        print(json.dumps({"type": "total", **total}))
    else:
        verdict = "all valid" if not total["problems"] else f"{total['problems']} problem(s)"
        print(f"verified {total['files']} file(s) in {total['partitions']} directory(ies): {total['batches']} batches, "
              f"{total['records']} records, {total['bytes']} bytes: {verdict}")
    return 1 if total["problems"] or missing else 0
