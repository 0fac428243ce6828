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
