"""``kraftkit storage``: format log directories, show what they hold, make cluster ids
(what ``kafka-storage format``, ``info`` and ``random-uuid`` do)."""

from __future__ import annotations

import argparse
import sys

from kraftkit.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from kraftkit.cli.jsonout import camel_keys, emit
from kraftkit.cli.main import add_max_batch_bytes, int_arg

HELP = "format KRaft storage directories as kafka-storage does; show their meta.properties and bootstrap metadata"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("storage", help=HELP, description=HELP + ".")
    ssub = p.add_subparsers(dest="storage_command", metavar="SUBCOMMAND", required=True)

    f = ssub.add_parser(
        "format",
        help="write meta.properties and the bootstrap metadata as kafka-storage format does",
        description="Write meta.properties (v1: cluster.id, node.id, a fresh directory.id) into every directory and "
        "the bootstrap records (a FeatureLevelRecord for metadata.version, then one per other feature at "
        "a level above 0, sorted by name), exactly as that release's kafka-storage format does. Kafka 4.4 "
        "and newer (--layout checkpoint): in the bootstrap snapshot "
        "<metadata dir>/__cluster_metadata-0/00000000000000000000-0000000000.checkpoint, with the "
        "KRaftVersion and Voters records of a dynamic quorum. Kafka 4.3 and older (--layout "
        "bootstrap-file): a bootstrap.checkpoint in every directory, and with --standalone or "
        "--initial-controllers the KRaftVersion/Voters bootstrap snapshot. Features not given take their "
        "default level for the release version (kraft.version: 0, or 1 with a dynamic quorum). Exit 2 on "
        "bad input or an existing output (a directory formatted already, for this or another cluster or node), "
        "1 if what is on disk is damaged (an unreadable meta.properties, a reserved or duplicate directory id).",
    )
    f.add_argument("--cluster-id", "-t", required=True, metavar="ID", help="22-character cluster id (see random-uuid)")
    f.add_argument("--node-id", type=int_arg(0, 2**31 - 1), required=True, metavar="N", help="the node.id of this node")
    f.add_argument(
        "--directories", "-d", nargs="+", required=True, metavar="DIR", help="the node's log directories (log.dirs)"
    )
    f.add_argument(
        "--metadata-log-dir",
        metavar="DIR",
        default=None,
        help="metadata.log.dir (default: the first of --directories); formatted too",
    )
    f.add_argument(
        "--release-version",
        "-r",
        metavar="VERSION",
        default=None,
        help="release (3.9) or metadata.version (3.9-IV0) to start with (default: the latest production "
        "of the newest release kraftkit knows)",
    )
    f.add_argument(
        "--layout",
        choices=("checkpoint", "bootstrap-file"),
        default=None,
        help="where the bootstrap records go (default: what the release's own kafka-storage format writes: "
        "checkpoint from 4.4 on, bootstrap-file before; Kafka 4.4's tool writes checkpoint for every "
        "release version)",
    )
    f.add_argument(
        "--feature",
        "-f",
        action="append",
        default=[],
        metavar="NAME=LEVEL",
        help="a feature level, e.g. transaction.version=2 (repeatable)",
    )
    q = f.add_mutually_exclusive_group()
    q.add_argument(
        "--standalone",
        "-s",
        action="store_true",
        help="a single-node KIP-853 dynamic quorum of this node (needs --controller-listener NAME://HOST:PORT)",
    )
    q.add_argument(
        "--initial-controllers",
        "-I",
        metavar="VOTERS",
        default=None,
        help="KIP-853 initial voters: id@host:port:directoryId,... (same value on every node)",
    )
    q.add_argument(
        "--no-initial-controllers",
        "-N",
        action="store_true",
        help="a node of a dynamic quorum that does not bootstrap it (kraft.version 1, no voter snapshot)",
    )
    f.add_argument(
        "--controller-listener",
        metavar="NAME[://HOST:PORT]",
        default="CONTROLLER",
        help="the first controller.listener.names entry, with this node's advertised host and port for "
        "--standalone (default: CONTROLLER)",
    )
    f.add_argument(
        "--ignore-formatted",
        "-g",
        action="store_true",
        help="skip directories that are already formatted instead of failing",
    )
    f.add_argument("--json", action="store_true", help="print the result as JSON")
    f.set_defaults(func=run_format)

    i = ssub.add_parser(
        "info",
        help="show meta.properties and bootstrap metadata of log directories",
        description="What kafka-storage info shows (the directories found, the first meta.properties, "
        "problems: missing or unformatted directories, mismatched cluster or node ids), "
        "plus the metadata.version and features of each directory's bootstrap metadata "
        "(bootstrap.checkpoint, or Kafka 4.4's bootstrap snapshot). Exit 1 if "
        "there is any problem, 2 if a file cannot be read (a FIFO or device in place of "
        "meta.properties, one over 1 MiB, no permission).",
    )
    i.add_argument("directories", nargs="+", metavar="DIR", help="log directories")
    i.add_argument("--json", action="store_true", help="print the result as JSON")
    add_max_batch_bytes(i)
    i.set_defaults(func=run_info)

    r = ssub.add_parser(
        "random-uuid",
        help="print a random cluster id",
        description="Print a random Kafka Uuid (URL-safe base64, 22 characters), as "
        "kafka-storage random-uuid does: never a reserved id, never one starting with '-'.",
    )
    r.set_defaults(func=run_random_uuid)


def run_format(args: argparse.Namespace) -> int:
    from kraftkit.features.storage import StorageError, format_storage, parse_feature_arg

    try:
        features = [parse_feature_arg(x) for x in args.feature]
        result = format_storage(
            args.directories,
            cluster_id=args.cluster_id,
            node_id=args.node_id,
            release_version=args.release_version,
            features=features,
            metadata_log_dir=args.metadata_log_dir,
            standalone=args.standalone,
            initial_controllers=args.initial_controllers,
            no_initial_controllers=args.no_initial_controllers,
            controller_listener=args.controller_listener,
            ignore_formatted=args.ignore_formatted,
            layout=args.layout,
        )
    except StorageError as e:
        print(f"kraftkit storage format: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        from kraftkit._fs import error_text

        print(f"kraftkit storage format: {error_text(e)}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        out = camel_keys(result.to_dict())
        out["directories"] = [camel_keys(d) for d in out["directories"]]
        emit(out)
        return EXIT_OK
    boot = ", ".join(f"{n}={lv}" for n, lv in result.features.bootstrap_levels().items())
    print(f"Bootstrap metadata: {boot} ({result.features.metadata_version.name})")
    for line in result.messages:
        print(line)
    return EXIT_OK


def run_info(args: argparse.Namespace) -> int:
    from kraftkit.features.storage import info_text, storage_info

    info = storage_info(args.directories)
    if args.json:
        emit(info_json(info))
    else:
        sys.stdout.write(info_text(info))
    sys.stdout.flush()
    for msg in info["unreadable"]:
        print(f"kraftkit storage info: {msg}", file=sys.stderr)
    if info["unreadable"]:
        return EXIT_USAGE  # unreadable input, not problems found in the data
    return EXIT_PROBLEMS if info["problems"] else EXIT_OK


def info_json(info: dict) -> dict:
    """``storage_info``'s dict in --json's camelCase (meta.properties keys stay Kafka's property names)."""
    out = camel_keys(info)
    out["directories"] = [
        {**camel_keys(d), "bootstrap": None if d["bootstrap"] is None else camel_keys(d["bootstrap"])}
        for d in info["directories"]
    ]
    return out


def run_random_uuid(args: argparse.Namespace) -> int:
    from kraftkit.features.storage import random_uuid

    print(random_uuid())
    return EXIT_OK
