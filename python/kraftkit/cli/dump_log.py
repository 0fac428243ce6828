"""``kraftkit dump-log``: what kafka-dump-log.sh prints, faster, as text or JSON lines."""

from __future__ import annotations

import argparse
import os
import sys

from kraftkit._fs import InputFileError, check_input, error_text
from kraftkit.cli.argtypes import int_arg
from kraftkit.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, fail
from kraftkit.cli.main import LONG_MAX, add_max_batch_bytes
from kraftkit.cli.progress import Progress, add_quiet
from kraftkit.errors import KraftkitError, TruncatedError
from kraftkit.log import Segment

HELP = "print the batches (and with --deep the records) of segment, snapshot and index files"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dump-log", help=HELP, description=HELP + ". Output matches kafka-dump-log's text format.")
    p.add_argument("files", nargs="*", metavar="FILE", help=".log, .checkpoint, .index or .timeindex files")
    add_files_option(p)
    p.add_argument(
        "--cluster-metadata-decoder",
        action="store_true",
        help="decode KRaft metadata records, as kafka-dump-log's flag does: the output of "
        "`kraftkit metadata dump` (offset, record type, version, fields; --json: its JSON lines)",
    )
    p.add_argument("--deep", "--deep-iteration", action="store_true", help="print every record, not only batches")
    p.add_argument(
        "--print-data", "--print-data-log", action="store_true", help="print record keys and values (implies --deep)"
    )
    p.add_argument("--json", action="store_true", help="JSON lines: one object per batch (records nested)")
    p.add_argument(
        "--max-bytes",
        type=int_arg(0, LONG_MAX, " bytes"),
        default=None,
        metavar="N",
        help="read at most N bytes of each file",
    )
    add_quiet(p)
    add_max_batch_bytes(p)
    p.set_defaults(func=run, parser=p)


def add_files_option(p: argparse.ArgumentParser) -> None:
    """``--files A,B`` as kafka-dump-log spells it (comma-separated, repeatable), next to the FILE arguments."""
    p.add_argument(
        "--files",
        action="append",
        default=[],
        metavar="FILE[,FILE...]",
        dest="files_option",
        help="files to read, comma-separated, as kafka-dump-log takes them (with or instead of FILE...)",
    )


def files_given(args: argparse.Namespace, positional: str) -> list[str]:
    """The FILE arguments, then those of every --files; a usage error (exit 2) if there are none."""
    files = list(getattr(args, positional)) + [f for opt in args.files_option for f in opt.split(",") if f]
    if not files:
        args.parser.error("give the files to read (FILE... or --files FILE[,FILE...])")
    return files


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
    from kraftkit.cli.jsonout import dumps  # not at the top: start-up is most of a small dump's time

    return dumps(obj) + "\n"


#: bytes per entry of the offset index and the time index
_ENTRY_BYTES = {".index": 8, ".timeindex": 12}


def _dump_index(path: str, out, as_json: bool) -> int:
    stem, ext = os.path.splitext(path)
    seg = Segment(stem + ".log")
    if ext == ".index":
        if os.path.getsize(path) == 0 and not as_json:
            out.write(f"{path} is empty.\n")  # kafka-dump-log's line for an offset index without entries
        for offset, position in seg.offset_index():
            out.write(
                _json_line({"type": "index", "offset": offset, "position": position})
                if as_json
                else f"offset: {offset} position: {position}\n"
            )
    else:
        for ts, offset in seg.time_index():
            out.write(
                _json_line({"type": "timeindex", "timestamp": ts, "offset": offset})
                if as_json
                else f"timestamp: {ts} offset: {offset}\n"
            )
    problems = [(entry, reason) for suffix, entry, reason in seg.verify_indexes() if suffix == ext.lstrip(".")]
    out.flush()
    for entry, reason in problems:
        print(
            f"kraftkit dump-log: {path}: entry {entry} (byte position {entry * _ENTRY_BYTES[ext]}): {reason}",
            file=sys.stderr,
        )
    return EXIT_PROBLEMS if problems else EXIT_OK


def _unreadable(path: str) -> str | None:
    """Why ``path`` cannot be dumped (``<path>: <reason>``), or None: it is a regular file
    that can be opened (a FIFO or a device is refused without being read)."""
    try:
        check_input(path)
    except InputFileError as e:
        if os.path.isdir(path):
            return f"{path}: is a directory (give its .log, .index, .timeindex or .checkpoint files)"
        return str(e)
    except FileNotFoundError as e:
        return f"{path}: no such file" if e.strerror == "No such file or directory" else error_text(e)
    except OSError as e:
        return error_text(e)
    return None


def _is_kraft_file(path: str) -> bool:
    """A snapshot, or a segment of ``__cluster_metadata-<n>``: a KRaft file, whose offsets are dense
    (the metadata log is never compacted). Written out here: dump-log imports no more than it needs."""
    if path.endswith(".checkpoint"):
        return True
    parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
    prefix = "__cluster_metadata-"
    return parent.startswith(prefix) and parent[len(prefix) :].isdigit()


#: At most this many problems of one kind are listed per file.
_MAX_LISTED = 10


def _batch_problems(seg, path: str, summary: dict, max_bytes: int | None, dense: bool) -> tuple[list[str], list[str]]:
    """(errors, notes) for what the dump found in whole batches: CRC mismatches (errors) and
    offsets that do not follow each other (notes: compaction leaves such gaps), each naming the
    file, the batch's base offset, its byte position and the reason. The dump counts the CRC
    failures; they are located by walking the batch headers again, only when there are some."""
    invalid = summary["invalid_batches"]
    crc: list[str] = []
    if invalid:
        try:
            for b in seg.batches(max_bytes=max_bytes):
                if not b.is_valid:
                    try:
                        b.ensure_valid()
                    except KraftkitError as e:
                        crc.append(str(e))
                    if len(crc) >= _MAX_LISTED:
                        break
        except KraftkitError:
            pass  # where the batches stop is reported with the dump's error
    if invalid > len(crc):
        crc.append(
            f"{path}: {invalid} batch(es) fail their CRC check" + (f" (the first {len(crc)} above)" if crc else "")
        )
    steps = list(zip(summary["non_consecutive"], summary["non_consecutive_at"], strict=True))
    # in a KRaft file every offset follows the one before: say which one was due
    gaps = [
        f"{path}: non-consecutive offsets: {prev} is followed by {nxt}"
        + (f", where {prev + 1} was due" if dense else "")
        + f" (batch base offset {base}, byte position {pos})"
        for (prev, nxt), (base, pos) in steps[:_MAX_LISTED]
    ]
    if len(steps) > _MAX_LISTED:
        gaps.append(f"{path}: {len(steps)} non-consecutive offsets in all (the first {_MAX_LISTED} above)")
    return crc, gaps


def _cut_by_limit(seg, error: TruncatedError) -> bool:
    """Whether a truncated batch is only cut by --max-bytes (the whole file holds it), not torn."""
    pos = getattr(error, "position", None)
    if pos is None or pos >= seg.size:
        return False
    try:
        next(iter(seg.batches(start=pos)), None)
    except KraftkitError:
        return False
    return True


def _fileno(f: object) -> int | None:
    """The file descriptor behind ``f``, or None when it has none (an in-memory stream)."""
    try:
        return int(f.fileno())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None


def run(args: argparse.Namespace) -> int:
    files = files_given(args, "files")
    if args.cluster_metadata_decoder:
        from kraftkit.cli.metadata import run_dump

        return run_dump(argparse.Namespace(paths=files, json=args.json, allow_gaps=False))
    with Progress("dumped", total=len(files), unit="files", quiet=args.quiet, stdout_busy=True) as progress:
        status = EXIT_OK
        for path in files:
            status = max(status, _dump_file(args, path))
            progress.advance(1)
    return status


def _dump_file(args: argparse.Namespace, path: str) -> int:
    """Dumps one file; its exit code."""
    out_bin = sys.stdout.buffer
    sys.stdout.flush()
    why = _unreadable(path)
    if why is not None:
        return fail("dump-log", why)
    try:
        if os.path.splitext(path)[1] in (".index", ".timeindex"):
            if not args.json:
                out_bin.write(f"Dumping {path}\n".encode())
            out_bin.flush()
            code = _dump_index(path, sys.stdout, args.json)
            sys.stdout.flush()
            return code
        seg = Segment(path)
        if args.json:
            out_bin.write(_json_line({"type": "file", "file": path, "size": seg.size}).encode())
        else:
            out_bin.write(f"Dumping {path}\n".encode())
            desc = _describe(path)
            if desc:
                out_bin.write(desc.encode() + b"\n")
        dense = _is_kraft_file(path)
        it = seg.dump(deep=args.deep, print_data=args.print_data, json=args.json, max_bytes=args.max_bytes, dense=dense)
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
        code = EXIT_USAGE if isinstance(e, OSError) else EXIT_PROBLEMS
        return fail("dump-log", error_text(e) if isinstance(e, OSError) else str(e), code)
    err = summary["error"]
    if args.max_bytes is not None and isinstance(err, TruncatedError) and _cut_by_limit(seg, err):
        summary["error"] = err = None  # the cut at --max-bytes, not damage
    problems, notes = _batch_problems(seg, path, summary, args.max_bytes, dense)
    if dense:  # a KRaft log is never compacted: a gap in its offsets is damage
        problems, notes = problems + notes, []
    if args.json:
        from kraftkit.cli.jsonout import camel_keys

        s = camel_keys({k: v for k, v in summary.items() if k != "error"})
        s["error"] = str(err) if err else None
        out_bin.write(_json_line({"type": "summary", "file": path, **s}).encode())
    elif summary["trailing_bytes"] and args.max_bytes is None:
        out_bin.write(
            f"Found {summary['trailing_bytes']} invalid bytes at the end of {os.path.basename(path)}\n".encode()
        )
    out_bin.flush()
    # stdout keeps kafka-dump-log's format; every problem is on stderr too, naming the file,
    # the batch's base offset, its byte position and the reason
    if err is not None:
        problems.append(str(err))
    for msg in problems + notes:
        print(f"kraftkit dump-log: {msg}", file=sys.stderr)
    return EXIT_PROBLEMS if problems else EXIT_OK
