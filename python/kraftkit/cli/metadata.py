"""``kraftkit metadata``: decoded KRaft metadata records and the metadata image.

* ``dump PATH...``: every record of metadata log segments and snapshots, decoded.
* ``records PATH``: the same records as one stream, each with its batch (file, base offset, byte
  position, leader epoch): :func:`kraftkit.metadata.records` on the command line.
* ``image PATH``: the metadata image (what kafka-metadata-shell shows) after replaying a
  snapshot and the log after it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys

from kraftkit.cli.argtypes import int_arg
from kraftkit.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, fail
from kraftkit.cli.jsonout import emit, record_fields
from kraftkit.cli.main import LONG_MAX, add_max_batch_bytes
from kraftkit.cli.progress import Progress, add_quiet
from kraftkit.errors import KraftkitError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from kraftkit.metadata.iterate import MetadataRecord

HELP = "KRaft metadata records and the metadata image"

GAPS_HELP = (
    "go on when offsets are missing or held twice, or a snapshot's name does not match the log: each is "
    "reported on stderr as a warning, offsets held twice are used once, and the exit code stays 0 if nothing "
    "else is wrong (corrupt bytes still exit 1)"
)
CONTINUITY = (
    " The log is checked first: a hole, an overlap, or a snapshot that does not match the log (its name's "
    "end offset and epoch against the log's batches, its own offsets and lastOffsetDelta) is refused with "
    "exit 1, naming file, batch offset and byte position, unless --allow-gaps."
)


_OFFSET = int_arg(0, LONG_MAX)


def offset_arg(text: str) -> int:
    """An offset: a whole number from 0 to 2^63-1 (argparse exits 2 otherwise)."""
    try:
        return _OFFSET(text)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"invalid offset: {e}") from None


def add_parser(sub: argparse._SubParsersAction) -> None:
    from kraftkit.cli.dump_log import add_files_option

    p = sub.add_parser("metadata", help=HELP, description=HELP + ".")
    msub = p.add_subparsers(dest="metadata_command", metavar="SUBCOMMAND", required=True)
    d = msub.add_parser(
        "dump",
        help="print every metadata record of log segments and snapshots",
        description="Print every record of __cluster_metadata log segments and snapshots (files, "
        "partition directories or log directories): offset, record type, version and "
        "fields. Exits 1 on corrupt data, 2 on unreadable input."
        + CONTINUITY
        + " Directories are checked whole; files given one by one only on their own.",
    )
    d.add_argument("paths", nargs="*", metavar="PATH", help=".log segments, .checkpoint snapshots or directories")
    add_files_option(d)
    d.add_argument(
        "--cluster-metadata-decoder",
        action="store_true",
        help="accepted for kafka-dump-log's flag: metadata dump always decodes the records",
    )
    d.add_argument(
        "--json",
        action="store_true",
        help='JSON lines: {"offset":N,"type":"TOPIC_RECORD","version":0,"data":{...}} per record',
    )
    d.add_argument("--allow-gaps", action="store_true", help=GAPS_HELP)
    add_quiet(d)
    add_max_batch_bytes(d)
    d.set_defaults(func=run_dump, parser=d)

    add_records_parser(msub)

    i = msub.add_parser(
        "image",
        help="the metadata image: ls/cat of the kafka-metadata-shell tree",
        description="Replay the newest snapshot at or below --at and the log after it into a metadata "
        "image, then list a directory of its tree (/features, /cluster/brokers, "
        "/topics/byName/<topic>/<partition>, /configs, ...) or print a leaf." + CONTINUITY,
    )
    i.add_argument("path", metavar="PATH", help="a log directory, __cluster_metadata-0, a snapshot or a segment")
    i.add_argument(
        "--at",
        type=offset_arg,
        default=None,
        metavar="OFFSET",
        help="replay only records below this offset (exclusive end offset, as a snapshot id's)",
    )
    i.add_argument("--path", dest="node", default="/", metavar="NODE", help="node of the tree to show (default /)")
    i.add_argument("--json", action="store_true", help="print the node (a whole subtree for directories) as JSON")
    i.add_argument("--allow-gaps", action="store_true", help=GAPS_HELP)
    add_quiet(i)
    add_max_batch_bytes(i)
    i.set_defaults(func=run_image)


def _prog(args: argparse.Namespace) -> str:
    """The command an error names: ``metadata dump|records|image`` (``dump-log`` when its
    ``--cluster-metadata-decoder`` runs the dump)."""
    sub = getattr(args, "metadata_command", None)
    return f"metadata {sub}" if sub else "dump-log"


def report_gaps(prog: str, problems: list) -> None:
    """--allow-gaps: what is missing or held twice, as warnings on stderr."""
    for p in problems:
        print(f"kraftkit {prog}: warning: {p}", file=sys.stderr)


def report_refusal(prog: str, problems: list) -> None:
    for p in problems:
        print(f"kraftkit {prog}: {p}", file=sys.stderr)
    if any(p.kind != "corrupt" for p in problems):
        print(f"kraftkit {prog}: refused: the log is not continuous (--allow-gaps goes on anyway)", file=sys.stderr)


def dump_problems(paths: list[str]) -> list:
    """Continuity of what ``metadata dump`` is given (see :func:`kraftkit.metadata.iterate.check_paths`)."""
    from kraftkit.metadata.iterate import check_paths

    return check_paths(list(paths))


def run_dump(args: argparse.Namespace) -> int:
    from kraftkit.cli.dump_log import files_given
    from kraftkit.metadata.snapshot import SnapshotError, SnapshotNameError
    from kraftkit.metadata.source import MetadataSourceError, expand

    if hasattr(args, "files_option"):  # (from the command line, not dump-log --cluster-metadata-decoder)
        args.paths = files_given(args, "paths")
    try:
        files = expand(args.paths)
        problems = dump_problems(args.paths)
    except (MetadataSourceError, SnapshotError) as e:  # a damaged snapshot name is a problem in the data
        return fail(_prog(args), str(e), EXIT_PROBLEMS if isinstance(e, SnapshotNameError) else EXIT_USAGE)
    except OSError as e:
        return fail(_prog(args), str(e))
    if problems and (not args.allow_gaps or any(p.kind == "corrupt" for p in problems)):
        report_refusal(_prog(args), problems)
        return EXIT_PROBLEMS
    report_gaps(_prog(args), problems)
    out = sys.stdout
    status = EXIT_OK
    sizes = [_size(f.path) for f in files]
    progress = Progress("read", total=sum(sizes), unit="bytes", quiet=getattr(args, "quiet", False), stdout_busy=True)
    with progress:
        for f, before in zip(files, itertools.accumulate([0, *sizes]), strict=False):
            status = max(status, _dump_one(args, f, out, progress, before))
    out.flush()
    return status


def _size(path) -> int:
    import os

    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _dump_one(args: argparse.Namespace, f, out, progress: Progress, before: int) -> int:
    """Prints the records of one file; its exit code. The lines come from the Rust core
    (:func:`kraftkit._core.metadata_dump`: every record's JSON written straight from its bytes)."""
    from kraftkit._core import metadata_dump
    from kraftkit.cli.dump_log import _fileno

    status = EXIT_OK
    if args.json:
        emit({"type": "file", "file": str(f.path), "kind": f.kind}, out)
    else:
        out.write(f"Dumping {f.path}\n")
    out.flush()
    out_bin = getattr(out, "buffer", None)
    fd = _fileno(out_bin)
    if out_bin is not None:
        out_bin.flush()
    it = None
    try:
        it = metadata_dump(str(f.path), json=args.json)
        if fd is not None:
            while it.write_chunk(fd):  # straight from Rust to the file or pipe
                progress.update(before + it.position)
        else:
            for chunk in it:
                if out_bin is not None:
                    out_bin.write(chunk)
                else:
                    out.write(chunk.decode())
                progress.update(before + it.position)
    except KraftkitError as e:
        out.flush()
        msg = str(e) if str(f.path) in str(e) else f"{f.path}: {e}"
        status = max(status, fail(_prog(args), msg, EXIT_PROBLEMS))
    except BrokenPipeError:
        raise
    except OSError as e:
        out.flush()
        status = max(status, fail(_prog(args), f"{f.path}: {e}"))
    if out_bin is not None:
        out_bin.flush()
    if args.json:
        emit({"type": "summary", "file": str(f.path), "records": it.records if it is not None else 0}, out)
    return status


def run_image(args: argparse.Namespace) -> int:
    from kraftkit.metadata.image import load_image
    from kraftkit.metadata.shell import ShellPathError, lookup
    from kraftkit.metadata.source import ContinuityError, MetadataSourceError

    gaps: list = []
    try:
        with Progress(f"replaying {args.path}", quiet=args.quiet):
            image = load_image(args.path, at=args.at, allow_gaps=args.allow_gaps, gaps=gaps)
    except ContinuityError as e:
        report_refusal(_prog(args), e.problems)
        return EXIT_PROBLEMS
    except MetadataSourceError as e:
        return fail(_prog(args), str(e))
    except OSError as e:
        return fail(_prog(args), str(e))
    except KraftkitError as e:
        return fail(_prog(args), str(e), EXIT_PROBLEMS)
    report_gaps(_prog(args), gaps)
    try:
        _, node = lookup(image, args.node)
    except ShellPathError as e:
        return fail(_prog(args), str(e))
    node = image_json(node)
    if args.json:
        emit(node)
    elif isinstance(node, dict) and not getattr(node, "is_leaf", False):
        sys.stdout.write("".join(f"{k}\n" for k in node))  # ls of a directory
    else:
        sys.stdout.write(json.dumps(node, indent=2, ensure_ascii=False) + "\n")  # cat of a leaf
    sys.stdout.flush()
    return EXIT_OK


def add_records_parser(msub: argparse._SubParsersAction) -> None:
    r = msub.add_parser(
        "records",
        help="every decoded metadata record of a file or directory, with its batch",
        description="Print the decoded records of a metadata log segment, a snapshot, a __cluster_metadata-0 "
        "directory or a log directory holding one (its snapshots, oldest first, then its segments in offset "
        "order), one line per record with the batch it is in: kraftkit.metadata.records(PATH) on the command "
        "line. Exits 1 on corrupt data, 2 on unreadable input." + CONTINUITY,
    )
    r.add_argument("path", metavar="PATH", help="a .log segment, a .checkpoint snapshot or a directory")
    r.add_argument(
        "--json",
        action="store_true",
        help='JSON lines, one per record: {"file":F,"offset":N,"baseOffset":B,"lastOffset":L,"position":P,'
        '"partitionLeaderEpoch":E,"control":false,"type":"TOPIC_RECORD","version":0,"data":{...}} (data as '
        "kafka-dump-log --cluster-metadata-decoder prints it)",
    )
    r.add_argument("--allow-gaps", action="store_true", help=GAPS_HELP)
    add_quiet(r)
    add_max_batch_bytes(r)
    r.set_defaults(func=run_records)


def run_records(args: argparse.Namespace) -> int:
    from kraftkit.metadata.iterate import records
    from kraftkit.metadata.snapshot import SnapshotError, SnapshotNameError
    from kraftkit.metadata.source import ContinuityError, MetadataSourceError

    gaps: list = []
    # checking the log, then reading it: a line on a terminal's stderr while stdout goes elsewhere
    progress = Progress(f"checking {args.path}", quiet=args.quiet, stdout_busy=True)
    try:
        with progress:
            it = records(args.path, allow_gaps=args.allow_gaps, gaps=gaps)
            return _print_records(args, it, gaps, progress)
    except ContinuityError as e:
        report_refusal(_prog(args), e.problems)
        return EXIT_PROBLEMS
    except (MetadataSourceError, SnapshotError) as e:  # a damaged snapshot name is a problem in the data
        return fail(_prog(args), str(e), EXIT_PROBLEMS if isinstance(e, SnapshotNameError) else EXIT_USAGE)
    except OSError as e:
        return fail(_prog(args), str(e))
    except KraftkitError as e:
        return fail(_prog(args), str(e), EXIT_PROBLEMS)


def _print_records(args: argparse.Namespace, it: Iterator[MetadataRecord], gaps: list, progress: Progress) -> int:
    from kraftkit.metadata.source import expand

    report_gaps(_prog(args), gaps)
    out = sys.stdout
    file = None
    # the files in the order the records come from them: the bytes read so far of all of them
    sizes = {str(f.path): _size(f.path) for f in expand([args.path])}
    before = dict(zip(sizes, itertools.accumulate([0, *sizes.values()]), strict=False))
    progress.total, progress.unit, progress.what = sum(sizes.values()), "bytes", "read"
    try:
        for r in it:
            b = r.batch
            progress.update(before.get(b.file, 0) + b.position)
            if args.json:
                body = _body_json(r)
                out.write(
                    f'{{"file":{json.dumps(b.file)},"offset":{r.offset},"baseOffset":{b.base_offset},'
                    f'"lastOffset":{b.last_offset},"position":{b.position},'
                    f'"partitionLeaderEpoch":{b.partition_leader_epoch},'
                    f'"control":{"true" if r.is_control else "false"},"type":"{r.type}","version":{r.version},'
                    f'"data":{body}}}\n'
                )
            else:
                if b.file != file:
                    file = b.file
                    out.write(f"# {file}\n")
                out.write(
                    f"{r.offset}  {r.type} v{r.version}  batch {b.base_offset}..{b.last_offset} at byte "
                    f"{b.position}, epoch {b.partition_leader_epoch}  {_body_json(r)}\n"
                )
    except KraftkitError as e:
        out.flush()
        where = getattr(e, "file", None) or args.path  # the core's errors name their file; others may not
        msg = str(e) if str(where) in str(e) else f"{where}: {e}"
        return fail(_prog(args), msg, EXIT_PROBLEMS)
    except BrokenPipeError:
        raise
    except OSError as e:
        out.flush()
        return fail(_prog(args), str(e))
    out.flush()
    return EXIT_OK


def _body_json(r: MetadataRecord) -> str:
    """A record's body as kafka-dump-log --cluster-metadata-decoder prints it (camelCase names, uuids
    in Kafka's base64 text): encoded again (the codec gives back the bytes it decoded) and printed."""
    from kraftkit.metadata.records import (
        control_record_json,
        encode_control_record,
        encode_metadata_record,
        metadata_record_json,
    )

    if r.data is None:
        return "null"
    if r.control_type is not None:
        return control_record_json(r.control_type, encode_control_record(r.control_type, r.data))[1]
    assert r.api_key is not None
    text = metadata_record_json(encode_metadata_record(r.api_key, r.version, r.data))
    return text[text.index(',"data":') + 8 : -1]


class _Leaf(dict):
    """A leaf of the image tree (a record's fields), after :func:`image_json`."""

    is_leaf = True


def image_json(node):
    """A node of the image tree with the record fields of its leaves named as Kafka's
    JsonConverter names them (``LeaderEpoch`` -> ``leaderEpoch``); directory names (topics,
    config keys, quota entities) are data and stay as they are."""
    from kraftkit.metadata.shell import Leaf

    if isinstance(node, Leaf):
        return _Leaf(record_fields(dict(node)))
    if isinstance(node, dict):
        return {k: image_json(v) for k, v in node.items()}
    return node
