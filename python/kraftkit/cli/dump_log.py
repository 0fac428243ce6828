"""``kraftkit dump-log``: what kafka-dump-log.sh prints, faster, as text or JSON lines."""

from __future__ import annotations

import argparse
import os
import sys

from kraftkit.errors import KraftkitError, TruncatedError
from kraftkit.log import Segment

HELP = "print the batches (and with --deep the records) of segment, snapshot and index files"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dump-log", help=HELP, description=HELP + ". Output matches kafka-dump-log's text format.")
    p.add_argument("files", nargs="+", metavar="FILE", help=".log, .checkpoint, .index or .timeindex files")
    p.add_argument("--deep", "--deep-iteration", action="store_true", help="print every record, not only batches")
    p.add_argument("--print-data", "--print-data-log", action="store_true", help="print record keys and values (implies --deep)")
    p.add_argument("--json", action="store_true", help="JSON lines: one object per batch (records nested)")
    p.add_argument("--max-bytes", type=int, default=None, metavar="N", help="read at most N bytes of each file")
    p.set_defaults(func=run)


def _describe(path: str) -> str | None:
    name = os.path.basename(path)
    if name.endswith(".log"):
        return f"Log starting offset: {int(name.split('.')[0])}" if name.split(".")[0].isdigit() else None
    if name == "bootstrap.checkpoint":
        return "KRaft bootstrap snapshot"
    if name.endswith(".checkpoint"):
        stem = name[: -len(".checkpoint")]
        parts = stem.split("-")
        if len(parts) == 2 and all(p.isdigit() for p in parts):
            return f"Snapshot end offset: {int(parts[0])}, epoch: {int(parts[1])}"
    return None


def _json_line(obj: dict) -> str:
    import json  # not at the top: start-up is most of the time of a small dump, and JSON is optional

    return json.dumps(obj) + "\n"


def _dump_index(path: str, out, as_json: bool) -> int:
    stem, ext = os.path.splitext(path)
    seg = Segment(stem + ".log")
    if ext == ".index":
        for offset, position in seg.offset_index():
            out.write(_json_line({"type": "index", "offset": offset, "position": position}) if as_json else f"offset: {offset} position: {position}\n")
    else:
        for ts, offset in seg.time_index():
            out.write(_json_line({"type": "timeindex", "timestamp": ts, "offset": offset}) if as_json else f"timestamp: {ts} offset: {offset}\n")
    problems = seg.verify_indexes()
    for suffix, entry, reason in problems:
        if suffix == ext.lstrip("."):
            print(f"{path}: entry {entry}: {reason}", file=sys.stderr)
    return 1 if problems else 0


def _fileno(f: object) -> int | None:
    """The file descriptor behind ``f``, or None when it has none (an in-memory stream)."""
    try:
        return int(f.fileno())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None


def run(args: argparse.Namespace) -> int:
    out_bin = sys.stdout.buffer
    status = 0
    for path in args.files:
        sys.stdout.flush()
        if not os.path.isfile(path):
            why = "is a directory (give its .log, .index, .timeindex or .checkpoint files)" if os.path.isdir(path) else "no such file"
            print(f"kraftkit dump-log: {path}: {why}", file=sys.stderr)
            status = max(status, 2)
            continue
        try:
            if os.path.splitext(path)[1] in (".index", ".timeindex"):
                if not args.json:
                    out_bin.write(f"Dumping {path}\n".encode())
                out_bin.flush()
                status = max(status, _dump_index(path, sys.stdout, args.json))
                sys.stdout.flush()
                continue
            seg = Segment(path)
            if args.json:
                out_bin.write(_json_line({"type": "file", "file": path, "size": seg.size}).encode())
            else:
                out_bin.write(f"Dumping {path}\n".encode())
                desc = _describe(path)
                if desc:
                    out_bin.write(desc.encode() + b"\n")
            it = seg.dump(deep=args.deep, print_data=args.print_data, json=args.json, max_bytes=args.max_bytes)
            fd = _fileno(out_bin)
            if fd is None:
                for chunk in it:
                    out_bin.write(chunk)
            else:
                out_bin.flush()
                it.write_to(fd)  # straight from Rust to the file or pipe
            summary = it.summary()
        except BrokenPipeError:
            raise  # the reader went away (`| head`): main() ends quietly
        except (KraftkitError, OSError) as e:
            out_bin.flush()
            print(f"kraftkit dump-log: {e}", file=sys.stderr)
            status = max(status, 2 if isinstance(e, OSError) else 1)
            continue
        if args.max_bytes is not None and isinstance(summary["error"], TruncatedError):
            summary["error"] = None  # the cut at --max-bytes, not damage
        bad = summary["invalid_batches"] or summary["error"] is not None
        if args.json:
            s = {k: v for k, v in summary.items() if k != "error"}
            s["error"] = str(summary["error"]) if summary["error"] else None
            out_bin.write(_json_line({"type": "summary", "file": path, **s}).encode())
        elif summary["trailing_bytes"] and args.max_bytes is None:
            out_bin.write(f"Found {summary['trailing_bytes']} invalid bytes at the end of {os.path.basename(path)}\n".encode())
        out_bin.flush()
        if summary["error"] is not None:
            print(f"kraftkit dump-log: {summary['error']}", file=sys.stderr)
        if summary["invalid_batches"]:
            print(f"kraftkit dump-log: {path}: {summary['invalid_batches']} batch(es) fail their CRC check", file=sys.stderr)
        for prev, nxt in summary["non_consecutive"][:10]:
            print(f"kraftkit dump-log: {path}: non-consecutive offsets: {prev} is followed by {nxt}", file=sys.stderr)
        if bad:
            status = max(status, 1)
    return status
