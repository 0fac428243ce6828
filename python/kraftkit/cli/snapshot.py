"""``kraftkit snapshot``: check KRaft snapshot (.checkpoint) files."""

from __future__ import annotations

import argparse
import json
import sys

from kraftkit.metadata.snapshot import SnapshotError, SnapshotReader

HELP = "KRaft snapshot files: verify their structure"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("snapshot", help=HELP, description=HELP + ".")
    ssub = p.add_subparsers(dest="snapshot_command", metavar="SUBCOMMAND", required=True)
    v = ssub.add_parser("verify", help="check CRCs, offsets, epochs, header and footer of snapshot files",
                        description="Check every batch (CRC, sizes), that offsets start at 0 and are contiguous, that every "
                                    "batch carries the epoch in the file name, that a SnapshotHeader comes first and a "
                                    "SnapshotFooter last, and KRaft's record rules. Exits 1 on any problem.")
    v.add_argument("files", nargs="+", metavar="FILE", help="<end offset>-<epoch>.checkpoint or bootstrap.checkpoint files")
    v.add_argument("--json", action="store_true", help="one JSON object per file")
    v.set_defaults(func=run_verify)

    c = ssub.add_parser("create", help="write a snapshot of the metadata image at a log offset",
                        description="Replay the metadata log (from the newest snapshot at or below OFFSET) up to OFFSET "
                                    "and write the image as <OFFSET>-<epoch>.checkpoint, records in Kafka's order at the "
                                    "versions of the image's metadata.version, sorted within each section (the same "
                                    "image always gives the same bytes). OFFSET must be the end of a batch; the epoch "
                                    "and LastContainedLogTimestamp are those of the batch ending there; kraft.version "
                                    "and the voter set are carried over from the log's control records.")
    c.add_argument("logdir", metavar="LOGDIR", help="a log directory or its __cluster_metadata-0 directory")
    c.add_argument("--at", type=int, required=True, metavar="OFFSET", help="snapshot end offset (exclusive)")
    c.add_argument("--out", default=None, metavar="DIR", help="directory to write to (default: the metadata partition directory)")
    c.add_argument("--time-ms", type=int, default=None, metavar="MS",
                   help="batch timestamps (default: the last contained log timestamp, for reproducible bytes)")
    c.add_argument("--json", action="store_true", help="print the result as JSON")
    c.set_defaults(func=run_create)


def run_create(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kraftkit.errors import KraftkitError
    from kraftkit.metadata.image import batch_ending_at, load_image
    from kraftkit.metadata.snapshot import SnapshotId
    from kraftkit.metadata.source import MetadataSourceError, metadata_dir

    d = metadata_dir(args.logdir)
    out = Path(args.out) if args.out else d
    try:
        if not d.is_dir():
            raise MetadataSourceError(f"{args.logdir}: not a directory")
        if not out.is_dir():
            raise MetadataSourceError(f"{out}: not a directory")
        batch = batch_ending_at(d, args.at)
        image = load_image(d, at=args.at)
        sid = SnapshotId(args.at, batch.partition_leader_epoch)
        path = image.write_snapshot(out, sid, last_contained_log_timestamp=batch.max_timestamp, time_ms=args.time_ms)
    except (MetadataSourceError, SnapshotError, OSError, ValueError) as e:
        print(f"kraftkit snapshot create: {e}", file=sys.stderr)
        return 2
    except KraftkitError as e:
        print(f"kraftkit snapshot create: {e}", file=sys.stderr)
        return 1
    rep = SnapshotReader(path).check()
    if args.json:
        print(json.dumps({"path": str(path), "snapshot_id": str(sid), "data_records": rep["data_records"],
                          "last_contained_log_timestamp": batch.max_timestamp,
                          "kraft_version": rep["kraft_version"]}))
    else:
        print(f"{path}: {rep['data_records']} metadata records, epoch {sid.epoch}, "
              f"last contained log timestamp {batch.max_timestamp}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    status = 0
    for name in args.files:
        try:
            reader = SnapshotReader(name)
            rep = reader.verify()
        except (SnapshotError, OSError) as e:
            print(f"kraftkit snapshot verify: {e}", file=sys.stderr)
            status = max(status, 2)
            continue
        err = rep["error"]
        if err is not None:
            status = max(status, 1)
        if args.json:
            out = {k: v for k, v in rep.items() if k != "error"}
            out["snapshot_id"] = str(reader.snapshot_id) if reader.snapshot_id else None
            out["error"] = str(err) if err is not None else None
            print(json.dumps(out))
        elif err is None:
            kv = f", kraft.version {rep['kraft_version']}" if rep["kraft_version"] is not None else ""
            print(f"{name}: OK: {rep['batches']} batches, {rep['data_records']} metadata records, "
                  f"last contained log timestamp {rep['last_contained_log_timestamp']}{kv}")
        else:
            print(f"{name}: INVALID: {err}")
    return status
