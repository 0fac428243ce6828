"""``kraftkit controller``: run a KRaft controller (the raft replica with Kafka's controller on it)."""

from __future__ import annotations

import argparse
import asyncio

from kraftkit.cli.exits import EXIT_USAGE, fail
from kraftkit.cli.quorum import add_run_options, node_config, serve

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
        "leader resigns first). Exit 2 on bad arguments or unreadable bootstrap metadata, 1 if the "
        "node fails.",
    )
    add_run_options(r, observer=False)
    r.set_defaults(func=run_controller)


def run_controller(args: argparse.Namespace) -> int:
    from kraftkit.controller import BootstrapError, ControllerNode, read_bootstrap_metadata

    command = "controller run"
    cfg = node_config(args, command)
    if isinstance(cfg, int):
        return cfg
    try:
        boot = read_bootstrap_metadata(cfg.log_dir)
    except BootstrapError as e:
        return fail(command, str(e), EXIT_USAGE)
    node = ControllerNode(cfg, boot)
    return asyncio.run(
        serve(node, args, command, process="controller", bootstrap=boot.source, metadata_version=boot.metadata_version)
    )
