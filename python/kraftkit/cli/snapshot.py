"""``kraftkit snapshot``: check KRaft snapshot (.checkpoint) files."""

from __future__ import annotations

import argparse

from kraftkit.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, error_code, fail
from kraftkit.cli.jsonout import camel_keys, emit, record_type_name
from kraftkit.cli.main import add_max_batch_bytes
from kraftkit.cli.metadata import offset_arg
from kraftkit.cli.progress import Progress, add_quiet
from kraftkit.metadata.snapshot import SnapshotError, SnapshotNameError, SnapshotReader

HELP = "KRaft snapshot files: verify, create, rewrite to another metadata.version"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("snapshot", help=HELP, description=HELP + ".")
    ssub = p.add_subparsers(dest="snapshot_command", metavar="SUBCOMMAND", required=True)
    v = ssub.add_parser(
        "verify",
        help="check CRCs, offsets, epochs, header and footer of snapshot files",
        description="Check every batch (CRC, sizes), that offsets start at 0 and are contiguous, that every "
        "batch carries the epoch in the file name, that a SnapshotHeader comes first and a "
        "SnapshotFooter last, KRaft's record rules (lastOffsetDelta = records - 1 in every batch), and that "
        "a snapshot ending above offset 0 holds metadata records. Exits 1 on any problem.",
    )
    v.add_argument(
        "files", nargs="+", metavar="FILE", help="<end offset>-<epoch>.checkpoint or bootstrap.checkpoint files"
    )
    v.add_argument("--json", action="store_true", help="one JSON object per file")
    add_max_batch_bytes(v)
    v.set_defaults(func=run_verify)

    c = ssub.add_parser(
        "create",
        help="write a snapshot of the metadata image at a log offset",
        description="Replay the metadata log (from the newest snapshot at or below OFFSET) up to OFFSET "
        "and write the image as <OFFSET>-<epoch>.checkpoint, records in Kafka's order at the "
        "versions of the image's metadata.version, sorted within each section (the same "
        "image always gives the same bytes). OFFSET must be the end of a batch; the epoch "
        "and LastContainedLogTimestamp are those of the batch ending there; kraft.version "
        "and the voter set are carried over from the log's control records. A log with "
        "a hole or an overlap below OFFSET, or a snapshot that does not match the log, is "
        "refused with exit 1 (naming file, batch offset and byte position) unless "
        "--allow-gaps. An image at a metadata.version newer than kraftkit's tables is "
        "refused with exit 2 (the record versions it writes are unknown).",
    )
    c.add_argument("logdir", metavar="LOGDIR", help="a log directory or its __cluster_metadata-0 directory")
    c.add_argument("--at", type=offset_arg, required=True, metavar="OFFSET", help="snapshot end offset (exclusive)")
    c.add_argument(
        "--out", default=None, metavar="DIR", help="directory to write to (default: the metadata partition directory)"
    )
    c.add_argument(
        "--time-ms",
        type=offset_arg,
        default=None,
        metavar="MS",
        help="batch timestamps (default: the last contained log timestamp, for reproducible bytes)",
    )
    c.add_argument("--json", action="store_true", help="print the result as JSON")
    add_quiet(c)
    add_max_batch_bytes(c)
    c.add_argument(
        "--allow-gaps",
        action="store_true",
        help="write the snapshot even when offsets below OFFSET are missing or held twice, or the snapshot "
        "replayed from does not match the log: each is reported on stderr as a warning (offsets held "
        "twice are used once) and the exit code stays 0",
    )
    c.set_defaults(func=run_create)

    r = ssub.add_parser(
        "rewrite",
        help="rewrite snapshots to another metadata.version (downgrade or upgrade)",
        description="Rewrite each snapshot at metadata.version V: records re-encoded at the versions V "
        "writes, record types V cannot hold dropped, other features lowered to what V (and "
        "its Kafka release) supports. Anything non-default that V cannot carry is reported "
        "as lost, by record type and field with sample keys. The input is never modified; "
        "the output is written atomically. Unknown is never guessed: a snapshot at a "
        "metadata.version or feature level newer than kraftkit's tables, or holding a record "
        "type or version its schemas lack, is refused (exit 2, nothing written). Exit codes: "
        "0 done, 1 refused (--fail-on-loss and something would be lost), 2 bad input or input "
        "newer than kraftkit knows.",
    )
    r.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="IN OUT (a new file, or a directory: an existing one or a name ending in /, made if missing), "
        "or IN... OUTDIR; with --dry-run, OUT may be left out. An existing output is never overwritten",
    )
    r.add_argument(
        "--metadata-version",
        "--release-version",
        required=True,
        dest="metadata_version",
        metavar="V",
        help="target: a level (21), a name (3.9-IV0) or a release (3.9: its highest production level)",
    )
    r.add_argument("--dry-run", action="store_true", help="only print the loss report; write nothing")
    r.add_argument("--fail-on-loss", action="store_true", help="refuse (and write nothing) when anything would be lost")
    r.add_argument("--json", action="store_true", help="one JSON report per file")
    add_quiet(r)
    add_max_batch_bytes(r)
    r.set_defaults(func=run_rewrite)


def run_create(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kraftkit.cli.metadata import report_gaps, report_refusal
    from kraftkit.errors import KraftkitError
    from kraftkit.metadata.image import batch_ending_at, load_image
    from kraftkit.metadata.snapshot import SnapshotId
    from kraftkit.metadata.source import ContinuityError, MetadataSourceError, metadata_dir
    from kraftkit.metadata.versions import NewerThanKnownError

    d = metadata_dir(args.logdir)
    out = Path(args.out) if args.out else d
    gaps: list = []
    try:
        if not d.is_dir():
            raise MetadataSourceError(f"{args.logdir}: not a directory")
        if not out.is_dir():
            raise MetadataSourceError(f"{out}: not a directory")
        with Progress(f"replaying {d} up to offset {args.at}", quiet=args.quiet) as progress:
            batch = batch_ending_at(d, args.at)
            image = load_image(d, at=args.at, allow_gaps=args.allow_gaps, gaps=gaps)
            progress.update(0, f"writing the snapshot at {args.at} to {out}")
            sid = SnapshotId(args.at, batch.partition_leader_epoch)
            path = image.write_snapshot(
                out, sid, last_contained_log_timestamp=batch.max_timestamp, time_ms=args.time_ms
            )
        report_gaps("snapshot create", gaps)
    except ContinuityError as e:
        report_refusal("snapshot create", e.problems)
        return EXIT_PROBLEMS
    except (MetadataSourceError, SnapshotError, OSError, ValueError) as e:
        return fail("snapshot create", str(e))
    except NewerThanKnownError as e:
        return fail("snapshot create", f"{d}: {e}")
    except KraftkitError as e:
        return fail("snapshot create", str(e), EXIT_PROBLEMS)
    rep = SnapshotReader(path).check()
    if args.json:
        emit(
            {
                "path": str(path),
                "snapshotId": str(sid),
                "dataRecords": rep["data_records"],
                "lastContainedLogTimestamp": batch.max_timestamp,
                "kraftVersion": rep["kraft_version"],
            }
        )
    else:
        print(
            f"{path}: {rep['data_records']} metadata records, epoch {sid.epoch}, "
            f"last contained log timestamp {batch.max_timestamp}"
        )
    return EXIT_OK


def run_verify(args: argparse.Namespace) -> int:
    from kraftkit._fs import check_input, error_text

    status = EXIT_OK
    for name in args.files:
        try:
            check_input(name)  # missing, a directory, a FIFO...: said as such, before the name is judged
            reader = SnapshotReader(name)
            rep = reader.verify()
        except (SnapshotError, OSError) as e:  # not a snapshot, unreadable: usage; a damaged name: a problem
            text = error_text(e) if isinstance(e, OSError) else str(e)
            status = max(
                status,
                fail("snapshot verify", text, EXIT_PROBLEMS if isinstance(e, SnapshotNameError) else EXIT_USAGE),
            )
            continue
        err = rep["error"]
        if err is not None:
            status = max(status, EXIT_PROBLEMS)
        if args.json:
            out = camel_keys({k: v for k, v in rep.items() if k != "error"})
            out["snapshotId"] = str(reader.snapshot_id) if reader.snapshot_id else None
            out["error"] = str(err) if err is not None else None
            emit(out)
        elif err is None:
            kv = f", kraft.version {rep['kraft_version']}" if rep["kraft_version"] is not None else ""
            print(
                f"{name}: OK: {rep['batches']} batches, {rep['data_records']} metadata records, "
                f"last contained log timestamp {rep['last_contained_log_timestamp']}{kv}"
            )
        else:
            print(f"{name}: INVALID: {err}")
    return status


def run_rewrite(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from kraftkit.errors import KraftkitError
    from kraftkit.features.rewrite import LossError, rewrite_snapshots

    paths = [Path(p) for p in args.paths]
    jobs: list[tuple[Path, Path | None]]
    if len(paths) == 1 and args.dry_run:
        jobs = [(paths[0], None)]
    elif len(paths) < 2:
        return fail("snapshot rewrite", "give IN and OUT (or IN and --dry-run)")
    else:
        # the same grammar with or without --dry-run: the last PATH is where the output goes
        *ins, out = paths
        as_dir = out.is_dir() or args.paths[-1].endswith(("/", os.sep)) or len(ins) > 1
        if len(ins) > 1 and not out.is_dir() and out.exists():
            return fail("snapshot rewrite", f"{out}: several inputs need an output directory, and this is not one")
        targets = [out / p.name if as_dir else out for p in ins]
        # (anything but a regular file there, or the input itself, is refused, precisely, by the rewrite)
        existing = [t for t, p in zip(targets, ins, strict=True) if t.is_file() and not _same_file(t, p)]
        if existing:
            return fail(
                "snapshot rewrite",
                f"{existing[0]}: exists; kraftkit does not overwrite an output: remove it or write elsewhere",
            )
        if args.dry_run:
            jobs = [(p, None) for p in ins]
        else:
            if as_dir and not out.is_dir():
                try:
                    out.mkdir(parents=True)
                except OSError as e:
                    from kraftkit._fs import error_text

                    return fail("snapshot rewrite", error_text(e))
            jobs = list(zip(ins, targets, strict=True))
    try:
        from kraftkit.features import registry

        registry().metadata_version(args.metadata_version)
    except KraftkitError as e:
        return fail("snapshot rewrite", str(e))
    status = EXIT_OK
    with Progress(f"rewriting {len(jobs)} snapshot(s) at metadata.version {args.metadata_version}", quiet=args.quiet):
        results = rewrite_snapshots(jobs, args.metadata_version, fail_on_loss=args.fail_on_loss)
    for res in results:
        if isinstance(res, LossError):
            status = max(status, EXIT_PROBLEMS)
            res = res.report
            refused = True
        elif isinstance(res, (KraftkitError, OSError)):
            from kraftkit._fs import error_text

            text = error_text(res) if isinstance(res, OSError) else str(res)
            status = max(status, fail("snapshot rewrite", text, error_code(res)))
            continue
        else:
            refused = False
        if args.json:
            emit({**rewrite_json(res), "refused": refused})
        else:
            print(res.text() + ("\n  REFUSED (--fail-on-loss): nothing written" if refused else ""))
    return status


def rewrite_json(report) -> dict:
    """A RewriteReport as --json prints it: camelCase counts, each loss's record type as dump-log
    names it (``PARTITION_RECORD``) and its field as Kafka's JsonConverter does (``directories``)."""
    out = camel_keys(report.to_json())
    out["losses"] = [
        {
            **camel_keys(loss),
            "record": record_type_name(loss["record"]),
            "field": loss["field"][:1].lower() + loss["field"][1:] if loss["field"] else loss["field"],
        }
        for loss in report.losses
    ]
    return out


def _same_file(a, b) -> bool:
    import os

    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
