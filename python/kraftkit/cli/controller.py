"""``kraftkit controller``: run a KRaft controller (the raft replica with Kafka's controller on it)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
from typing import TYPE_CHECKING

from kraftkit.cli.argtypes import int_arg
from kraftkit.cli.exits import EXIT_USAGE, fail
from kraftkit.cli.quorum import RUN_DEFAULTS, add_run_options, node_config, serve

if TYPE_CHECKING:
    from kraftkit.controller.config import ControllerConfig

#: Kafka's broker.session.timeout.ms default
BROKER_SESSION_TIMEOUT_MS = 9000
log = logging.getLogger(__name__)
HELP = "run a KRaft controller node: metadata.version bootstrap, feature negotiation, UpdateFeatures"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("controller", help=HELP, description=HELP + ".")
    csub = p.add_subparsers(dest="controller_command", metavar="SUBCOMMAND", required=True)
    r = csub.add_parser(
        "run",
        help="run a controller until SIGTERM/SIGINT",
        description="Run one controller of a KRaft quorum: the raft replica of `kraftkit quorum run` "
        "(its log in LOG_DIR/__cluster_metadata-0, formatted by `kraftkit storage format` or Kafka's "
        "`kafka-storage format`) with Kafka's controller over it. A new leader whose log holds no "
        "metadata.version commits the bootstrap records (LOG_DIR/bootstrap.checkpoint, else the "
        "bootstrap snapshot's, else the latest production metadata.version) as one batch; the "
        "leader answers UpdateFeatures (kafka-features.sh --bootstrap-controller); ApiVersions "
        "carries the supported and finalized features. SIGTERM or SIGINT stop it gracefully (a "
        "leader resigns first). With --config, the node's settings come from Kafka's server.properties "
        "(the file given to kafka-server-start.sh: process.roles=controller, node.id, "
        "controller.quorum.voters, the first controller listener of listeners and "
        "controller.listener.names, metadata.log.dir else log.dirs, the quorum timeouts and connection "
        "limits); options given override the file's values. Exit 2 on bad arguments, a configuration "
        "kraftkit cannot honour or unreadable bootstrap metadata, 1 if the node fails.",
    )
    r.add_argument(
        "--config",
        metavar="FILE",
        help="Kafka's server.properties for this controller; --node-id, --voters, --log-dir and the other "
        "options, when given, override its values",
    )
    add_run_options(r, observer=False, config_file=True)
    r.add_argument(
        "--broker-session-timeout-ms",
        type=int_arg(1),
        default=None,
        metavar="MS",
        help="how long a broker stays registered without a heartbeat (broker.session.timeout.ms, "
        f"default {BROKER_SESSION_TIMEOUT_MS})",
    )
    r.add_argument(
        "--auto-finalize",
        action="store_true",
        help="while active, raise metadata.version and the other features to what every registered broker and "
        "controller supports (the highest production metadata.version, each feature's default level at it), "
        "without an UpdateFeatures request; off by default, as in Kafka",
    )
    r.set_defaults(func=run_controller)


def run_controller(args: argparse.Namespace) -> int:
    from kraftkit.controller import BootstrapError, ControllerNode, read_bootstrap_metadata
    from kraftkit.controller.config import ControllerConfigError, read_controller_config

    command = "controller run"
    file: ControllerConfig | None = None
    if args.config is not None:
        try:
            file = read_controller_config(args.config)
        except ControllerConfigError as e:
            return fail(command, str(e))
    settings = _settings(args, file)
    if isinstance(settings, str):
        return fail(command, settings)
    voters, listen, session_timeout_ms = settings
    servers = list(file.bootstrap_servers) if file is not None and file.bootstrap_servers and voters is None else None
    if servers is not None and args.voters is not None:
        servers = None  # --voters given: a static quorum
    cfg = node_config(args, command, voters=voters, listen=listen, bootstrap_servers=servers)
    if isinstance(cfg, int):
        return cfg
    if file is not None and file.listener:
        cfg.listener_name = file.listener
        cfg.raft = dataclasses.replace(cfg.raft, listener=file.listener)
    if file is not None:
        log.debug("%s: not used: %s", file.path, ", ".join(file.ignored) or "(none)")
        for warning in file.warnings:
            log.warning("%s", warning)
    migration = file.zk_migration if file is not None else None
    try:
        boot = read_bootstrap_metadata(cfg.log_dir)
        if migration is not None:
            boot.activation_records(zk_migration=True)  # (refused when its metadata.version cannot migrate)
    except BootstrapError as e:
        return fail(command, str(e), EXIT_USAGE)
    if migration is not None:
        try:
            import kazoo  # noqa: F401
        except ImportError:
            return fail(
                command,
                "zookeeper.metadata.migration.enable=true needs kazoo: pip install 'kraftkit[zookeeper]'",
                EXIT_USAGE,
            )
    node = ControllerNode(
        cfg,
        boot,
        session_timeout_ms=session_timeout_ms,
        auto_finalize=args.auto_finalize,
        static_config=file.properties if file is not None else None,
        zk_migration=migration is not None,
    )
    if migration is not None:
        from kraftkit.migration.driver import MigrationDriver

        node.controller.migration = MigrationDriver(node.controller, migration)
        log.info("ZooKeeper migration enabled: ZooKeeper %s", migration.connect)
    return asyncio.run(
        serve(node, args, command, process="controller", bootstrap=boot.source, metadata_version=boot.metadata_version)
    )


def _settings(
    args: argparse.Namespace, file: ControllerConfig | None
) -> tuple[dict[int, tuple[str, int]] | None, tuple[str, int] | None, int] | str:
    """Fills ``args`` from the options given, else the file, else the defaults; returns the voters
    and listener address the file gives (``None``: the options say it) and the broker session
    timeout, or the reason the two together do not make a node."""
    if file is None:
        missing = [
            opt for opt, dest in (("--node-id", "node_id"), ("--log-dir", "log_dir")) if getattr(args, dest) is None
        ]
        if args.voters is None and args.bootstrap_servers is None:
            missing.append("--voters or --bootstrap-servers")
        if missing:
            return f"the following arguments are required (or --config FILE): {', '.join(missing)}"
        for dest, value in RUN_DEFAULTS.items():
            if getattr(args, dest) is None:
                setattr(args, dest, value)
        return None, None, args.broker_session_timeout_ms or BROKER_SESSION_TIMEOUT_MS
    if args.node_id is None:
        if file.node_id is None:
            return f"{file.path}: node.id is not set: set it, or pass --node-id"
        args.node_id = file.node_id
    voters = None
    if args.voters is None and args.bootstrap_servers is None and file.bootstrap_servers is None:
        if file.voters is None:
            return (
                f"{file.path}: neither controller.quorum.voters nor controller.quorum.bootstrap.servers is set: "
                "set one, or pass --voters or --bootstrap-servers"
            )
        voters = file.voters
        if args.node_id not in voters:
            return f"{file.path}: controller.quorum.voters={file.voters_text}: node {args.node_id} is not one of its voters"
    if args.log_dir is None:
        args.log_dir = file.metadata_log_dir
    listen = None
    if args.listen is None:
        if file.listen is None:
            return f"{file.path}: controller.listener.names is not set: name the controller listener, or pass --listen"
        listen = file.listen
    for dest, value in RUN_DEFAULTS.items():
        if getattr(args, dest) is None:
            given = getattr(file, dest)
            setattr(args, dest, value if given is None else given)
    session = args.broker_session_timeout_ms or file.broker_session_timeout_ms or BROKER_SESSION_TIMEOUT_MS
    return voters, listen, session
