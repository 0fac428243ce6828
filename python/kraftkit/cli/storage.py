"""``kraftkit storage``: format log directories, show what they hold, make cluster ids
(what ``kafka-storage format``, ``info`` and ``random-uuid`` do)."""

from __future__ import annotations

import argparse
import sys

from kraftkit.cli.argtypes import int_arg
from kraftkit.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from kraftkit.cli.jsonout import camel_keys, emit
from kraftkit.cli.main import add_max_batch_bytes
from kraftkit.cli.versions import add_parsers as add_version_parsers

HELP = (
    "format KRaft storage directories as kafka-storage does; show their meta.properties and bootstrap metadata; "
    "version-mapping, feature-dependencies"
)


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
    f.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        default=None,
        help="the node's server.properties, as kafka-storage format -c reads it: node.id, log.dirs (or log.dir) "
        "and metadata.log.dir, the first controller.listener.names entry and its address in advertised.listeners "
        "or listeners; --node-id, --directories, --metadata-log-dir and --controller-listener override it",
    )
    f.add_argument(
        "--node-id", type=int_arg(0, 2**31 - 1), default=None, metavar="N", help="the node.id of this node (or -c)"
    )
    f.add_argument(
        "--directories",
        "-d",
        nargs="+",
        default=None,
        metavar="DIR",
        help="the node's log directories (log.dirs, or -c)",
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
        default=None,
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
    add_version_parsers(ssub, "storage")

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


def server_properties(path: str) -> dict[str, str]:
    """The entries of a server.properties, read as Kafka reads it (java.util.Properties, ISO-8859-1;
    a regular file of at most 1 MiB). Raises StorageInputError naming the file and the reason."""
    from kraftkit._fs import error_text, read_small
    from kraftkit.features.storage import StorageInputError
    from kraftkit.features.storage.properties import PropertiesSyntaxError, properties_entries

    try:
        data = read_small(path, 1024 * 1024, what="a server.properties file")
    except OSError as e:
        raise StorageInputError(error_text(e)) from None
    try:
        return {k: v.strip() for _line, k, v in properties_entries(data.decode("latin-1"))}
    except PropertiesSyntaxError as e:
        raise StorageInputError(f"{path}: line {e.line}: {e}") from None


def _items(value: str | None) -> list[str]:
    return [x.strip() for x in value.split(",") if x.strip()] if value else []


def apply_config(args: argparse.Namespace) -> None:
    """Fills --node-id, --directories, --metadata-log-dir and --controller-listener from ``-c
    FILE`` where they were not given, as kafka-storage format reads its config (refusing, with
    Kafka's messages, a file without controller.quorum.voters or .bootstrap.servers, static voters
    with --standalone or --initial-controllers, and a dynamic controller given neither); then
    checks that node id and directories are known. Raises StorageInputError."""
    from kraftkit.features.storage import StorageInputError

    if args.config is not None:
        props = server_properties(args.config)
        where = args.config
        if not props.get("process.roles"):
            raise StorageInputError(
                f"{where}: process.roles is not set: formatting is only supported for KRaft nodes "
                "(process.roles=broker, controller or both)"
            )
        voters, servers = props.get("controller.quorum.voters"), props.get("controller.quorum.bootstrap.servers")
        dynamic = args.standalone or args.initial_controllers is not None
        # Kafka's KafkaConfig and StorageTool rules (their messages)
        if not voters and not servers:
            raise StorageInputError(
                f"{where}: If using process.roles, either controller.quorum.bootstrap.servers must contain the set "
                "of bootstrap controllers or controller.quorum.voters must contain a parseable set of controllers."
            )
        if voters and dynamic:
            raise StorageInputError(
                f"{where}: You cannot specify controller.quorum.voters and format the node with "
                "--initial-controllers or --standalone. If you want to use dynamic quorum, please remove "
                "controller.quorum.voters and specify controller.quorum.bootstrap.servers instead."
            )
        if (
            not voters
            and "controller" in _items(props["process.roles"])
            and not (dynamic or args.no_initial_controllers)
        ):
            raise StorageInputError(
                f"{where}: Because controller.quorum.voters is not set on this controller, you must specify one "
                "of the following: --standalone, --initial-controllers, or --no-initial-controllers."
            )
        if args.node_id is None:
            text = props.get("node.id") or props.get("broker.id")
            if text is None:
                raise StorageInputError(f"{where}: node.id is not set: set it, or pass --node-id")
            if not (text.isascii() and text.isdigit() and int(text) < 2**31):
                raise StorageInputError(f"{where}: node.id={text[:40]}: not a node id (0 to 2147483647)")
            args.node_id = int(text)
        if args.directories is None:
            args.directories = _items(props.get("log.dirs")) or _items(props.get("log.dir")) or ["/tmp/kafka-logs"]
        if args.metadata_log_dir is None and props.get("metadata.log.dir"):
            args.metadata_log_dir = props["metadata.log.dir"]
        if args.controller_listener is None:
            names = _items(props.get("controller.listener.names"))
            if names:
                args.controller_listener = names[0]
                for key in ("advertised.listeners", "listeners"):  # the address others reach it at
                    found = [x for x in _items(props.get(key)) if x.upper().startswith(names[0].upper() + "://")]
                    if found:
                        args.controller_listener = found[0]
                        break
    missing = [opt for opt, v in (("--node-id", args.node_id), ("--directories", args.directories)) if v is None]
    if missing:
        raise StorageInputError(f"give {' and '.join(missing)}, or -c/--config server.properties")
    if args.controller_listener is None:
        args.controller_listener = "CONTROLLER"


def run_format(args: argparse.Namespace) -> int:
    from kraftkit.features.storage import StorageError, format_storage, parse_feature_arg

    try:
        apply_config(args)
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
