"""``kraftkit quorum``: run a KIP-595 raft node, describe a quorum, append to it."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from kraftkit._fs import DirectoryLockError
from kraftkit.cli.argtypes import int_arg, seconds
from kraftkit.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, fail
from kraftkit.cli.jsonout import emit
from kraftkit.cli.progress import Progress, add_quiet

if TYPE_CHECKING:
    from kraftkit.raft.driver import NodeConfig
    from kraftkit.raft.server import RaftNode

HELP = "run a KRaft quorum node (voter or observer), describe a quorum, append metadata records to it"
MIB = 1024 * 1024
#: gen-0 collection threshold of a running node (Python's default is 700)
GC_YOUNG_THRESHOLD = 10_000


def _bootstrap(text: str) -> str:
    """An argparse type: HOST:PORT with a port in 1..65535."""
    from kraftkit.raft.admin import parse_address

    try:
        _host, port = parse_address(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if port == 0:
        raise argparse.ArgumentTypeError(f"bad address {text!r}: port 0 cannot be connected to")
    return text


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quorum", help=HELP, description=HELP + ".")
    qsub = p.add_subparsers(dest="quorum_command", metavar="SUBCOMMAND", required=True)

    r = qsub.add_parser(
        "run",
        help="run a raft node until SIGTERM/SIGINT",
        description="Run one node of a KRaft quorum over the Kafka protocol: Vote, BeginQuorumEpoch, "
        "EndQuorumEpoch, Fetch and FetchSnapshot with its peers; ApiVersions, DescribeQuorum, "
        "DescribeCluster and Produce (appends to __cluster_metadata) for clients. The log lives in "
        "LOG_DIR/__cluster_metadata-0 as Kafka lays it out; committed records are replayed into the "
        "metadata image and snapshotted every --snapshot-every records. SIGTERM or SIGINT stop it "
        "gracefully (a leader resigns first). Exit 2 on bad arguments, 1 if the node fails.",
    )
    add_run_options(r, observer=True)
    r.set_defaults(func=run_node)

    d = qsub.add_parser(
        "describe",
        help="describe a quorum (DescribeQuorum), as kafka-metadata-quorum.sh does",
        description="Ask a node (kraftkit's or a Kafka controller) for the quorum's state: leader, "
        "epoch, high watermark, follower lag, voters and observers (--status, the "
        "default), or one row per replica (--replication). Follows the leader. Exit 2 "
        "if the quorum cannot be reached.",
    )
    _add_bootstrap(d)
    g = d.add_mutually_exclusive_group()
    g.add_argument("--status", action="store_true", help="the quorum summary (default)")
    g.add_argument("--replication", action="store_true", help="one row per voter and observer")
    d.add_argument(
        "--timeout",
        type=seconds,
        default=10.0,
        metavar="SECONDS",
        help="bound on finding the leader and its answer (default 10; a refused connection fails at once)",
    )
    d.add_argument("--json", action="store_true", help="one JSON document (fields: docs/json.md)")
    d.set_defaults(func=run_describe)

    a = qsub.add_parser(
        "append",
        help="append metadata records to a kraftkit quorum and wait for the commit",
        description="Produce metadata records to __cluster_metadata on the leader (acks=-1) and print "
        "the committed offsets, one line per request: --topic NAME appends a TopicRecord (repeatable), "
        "else --count NoOpRecords, --batch records per request. Exit 0 done, 1 the quorum refused an "
        "append, 2 bad arguments or no node of the quorum answered.",
    )
    _add_bootstrap(a)
    a.add_argument("--topic", action="append", default=[], metavar="NAME", help="append a TopicRecord (repeatable)")
    a.add_argument("--count", type=int_arg(1, 1_000_000), default=1, metavar="N", help="append N NoOpRecords (1)")
    a.add_argument(
        "--batch", type=int_arg(1, 10_000), default=1000, metavar="N", help="records per request, at most (1000)"
    )
    a.add_argument(
        "--timeout", type=seconds, default=10.0, metavar="SECONDS", help="bound on finding the leader and each commit"
    )
    a.add_argument("--json", action="store_true", help='print {"records":N,"requests":M,"committed":[[base,last],...]}')
    a.add_argument(
        "--verbose", "-v", action="store_true", help="print every request's committed offsets, not only the summary"
    )
    add_quiet(a)
    a.set_defaults(func=run_append)

    from kraftkit.cli.quorum_voters import add_parsers as add_voter_parsers

    add_voter_parsers(qsub, _add_bootstrap, seconds)

    rc = qsub.add_parser(
        "recover",
        help="write a new quorum from the metadata logs that survive a lost majority (beyond Kafka)",
        description="Recover a cluster whose controller quorum lost its majority for good: read the "
        "__cluster_metadata logs that survive (a controller's log directory, or a broker's: every broker "
        "holds a copy), choose the most complete (the highest last epoch, then the longest log), say what "
        "may be lost, and write OUT/<id>/ for every voter of --voters: meta.properties, a snapshot of the "
        "metadata at the chosen log's end and a quorum-state above every epoch seen. Start each new "
        "controller (Kafka's or kraftkit's) on its directory with controller.quorum.voters set to --voters. "
        "A dynamic quorum's (kraft.version 1) new voter set goes into the snapshot. Exit 0 written (or "
        "--dry-run), 1 the survivors cannot be recovered as they are (another cluster, damage inside a log), "
        "2 bad arguments, "
        "an unreadable survivor or an existing output.",
    )
    rc.add_argument(
        "--from",
        dest="sources",
        action="append",
        required=True,
        metavar="DIR",
        help="a surviving log directory (or its __cluster_metadata-0), repeatable; the nodes must be stopped",
    )
    rc.add_argument(
        "--voters",
        required=True,
        metavar="ID@HOST:PORT,...",
        help="the new quorum's voters (controller.quorum.voters)",
    )
    rc.add_argument(
        "--cluster-id", metavar="ID", help="the cluster's id, when no survivor has a meta.properties naming it"
    )
    rc.add_argument(
        "--out", metavar="DIR", help="where OUT/<id>/ is written for each voter (required without --dry-run)"
    )
    rc.add_argument(
        "--controller-listener-name",
        default="CONTROLLER",
        metavar="NAME",
        help="a dynamic quorum's voters' listener (controller.listener.names; default CONTROLLER)",
    )
    rc.add_argument("--dry-run", action="store_true", help="say what would be recovered and lost; write nothing")
    rc.add_argument("--json", action="store_true", help="one JSON document (fields: docs/json.md)")
    rc.set_defaults(func=run_recover)


#: the defaults of the run options a server.properties may also give (``controller run --config``)
RUN_DEFAULTS = {
    "election_timeout_ms": 1000,
    "fetch_timeout_ms": 2000,
    "socket_request_max_bytes": 100 * MIB,
    "max_connections_per_ip": 64,
    "max_connections": 1000,
}


def add_run_options(r: argparse.ArgumentParser, *, observer: bool, config_file: bool = False) -> None:
    """The options of a node that runs (``quorum run``, ``controller run``). With ``config_file``
    (``controller run --config``) the node id, voters and log directory are not required, and the
    options of :data:`RUN_DEFAULTS` default to ``None`` (given or not; the caller fills them in)."""

    def default(dest: str) -> int | None:
        return None if config_file else RUN_DEFAULTS[dest]

    r.add_argument("--node-id", type=int_arg(0), required=not config_file, metavar="N", help="this node's id (node.id)")
    quorum = r.add_mutually_exclusive_group(required=not config_file)
    quorum.add_argument(
        "--voters",
        metavar="ID@HOST:PORT,...",
        help="a static quorum's voter set (controller.quorum.voters), the same on every node",
    )
    quorum.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT,...",
        help="a dynamic quorum (KIP-853: formatted with --standalone, --initial-controllers or "
        "--no-initial-controllers; its voters are in the metadata log): controllers to ask for the "
        "leader (controller.quorum.bootstrap.servers); needs --listen",
    )
    r.add_argument("--log-dir", required=not config_file, metavar="DIR", help="metadata log directory")
    if observer:
        r.add_argument("--observer", action="store_true", help="run as an observer (the node id must not be a voter)")
    r.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default=None,
        help="listener address (default: the node's voter address; an observer: 127.0.0.1:0)",
    )
    r.add_argument(
        "--cluster-id",
        metavar="ID",
        default=None,
        help="22-character cluster id (default: the cluster.id of LOG_DIR/meta.properties)",
    )
    r.add_argument(
        "--snapshot-every",
        type=int_arg(0),
        default=20000,
        metavar="RECORDS",
        help="snapshot after this many committed records (0: never; default 20000)",
    )
    r.add_argument(
        "--election-timeout-ms",
        type=int_arg(1),
        default=default("election_timeout_ms"),
        metavar="MS",
        help="controller.quorum.election.timeout.ms (default 1000)",
    )
    r.add_argument(
        "--fetch-timeout-ms",
        type=int_arg(1),
        default=default("fetch_timeout_ms"),
        metavar="MS",
        help="controller.quorum.fetch.timeout.ms (default 2000)",
    )
    r.add_argument(
        "--socket-request-max-bytes",
        type=int_arg(1),
        default=default("socket_request_max_bytes"),
        metavar="BYTES",
        help="the largest request a client may send; a larger one closes its connection "
        "(socket.request.max.bytes, default 100 MiB)",
    )
    r.add_argument(
        "--buffered-request-max-bytes",
        type=int_arg(1, 2**62),
        default=None,
        metavar="BYTES",
        help="node-wide, the bytes of requests (over 64 KiB each) being read at once; a request that "
        "would pass it closes its connection (default: 100 MiB, at least --socket-request-max-bytes)",
    )
    r.add_argument(
        "--max-connections-per-ip",
        type=int_arg(1),
        default=default("max_connections_per_ip"),
        metavar="N",
        help="connections from one address; more are closed at once (max.connections.per.ip, default 64)",
    )
    r.add_argument(
        "--max-connections",
        type=int_arg(1),
        default=default("max_connections"),
        metavar="N",
        help="connections in all; more are closed at once (default 1000)",
    )
    r.add_argument(
        "--request-read-timeout-ms",
        type=int_arg(1),
        default=30000,
        metavar="MS",
        help="time to complete a request once its first byte arrived, else the connection is closed (default 30000)",
    )
    r.add_argument(
        "--produce-pending-max-bytes",
        type=int_arg(1, 2**62),
        default=128 * MIB,
        metavar="BYTES",
        help="bytes of produced records waiting for their commit; a Produce past it is refused with "
        "THROTTLING_QUOTA_EXCEEDED (default 128 MiB)",
    )
    r.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="what the node logs to stderr (default INFO)",
    )


def _cluster_id(args: argparse.Namespace, command: str) -> str | None:
    from kraftkit._fs import error_text
    from kraftkit.features.storage import MetaProperties, StorageError, StorageInputError, validate_cluster_id

    props = Path(args.log_dir) / "meta.properties"
    found = None
    if os.path.lexists(props):
        try:
            found = MetaProperties.read(props).cluster_id  # a FIFO or a huge file is refused, not read
        except (OSError, StorageError) as e:
            print(f"kraftkit {command}: {error_text(e) if isinstance(e, OSError) else e}", file=sys.stderr)
            return None
    if args.cluster_id and found and args.cluster_id != found:
        print(f"kraftkit {command}: --cluster-id {args.cluster_id} but {props} says {found}", file=sys.stderr)
        return None
    cid = args.cluster_id or found
    if cid is None:
        print(
            f"kraftkit {command}: no cluster id: pass --cluster-id or format {args.log_dir} (kraftkit storage format)",
            file=sys.stderr,
        )
        return None
    try:
        return validate_cluster_id(cid)
    except StorageInputError as e:
        print(f"kraftkit {command}: {e}", file=sys.stderr)
        return None


def run_node(args: argparse.Namespace) -> int:
    from kraftkit.raft.server import RaftNode

    cfg = node_config(args, "quorum run")
    if isinstance(cfg, int):
        return cfg
    return asyncio.run(serve(RaftNode(cfg), args, "quorum run"))


def node_config(
    args: argparse.Namespace,
    command: str,
    *,
    voters: dict[int, tuple[str, int]] | None = None,
    listen: tuple[str, int] | None = None,
    bootstrap_servers: list[tuple[str, int]] | None = None,
) -> NodeConfig | int:
    """The NodeConfig of ``quorum run``'s options (and ``controller run``'s), with the logging set
    up; or the exit code of a usage error, already reported as ``kraftkit <command>: ...``.
    ``voters`` and ``listen``, parsed already (from ``controller run --config``'s file), stand for
    ``--voters`` and ``--listen``."""
    from kraftkit.raft.admin import parse_address
    from kraftkit.raft.core import RaftConfig
    from kraftkit.raft.driver import NodeConfig, parse_voters
    from kraftkit.raft.transport import ListenerLimits

    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format=f"%(asctime)s node {args.node_id} %(levelname)s %(name)s: %(message)s",
    )
    try:
        if bootstrap_servers is None and voters is None and getattr(args, "bootstrap_servers", None):
            bootstrap_servers = [parse_address(a.strip()) for a in args.bootstrap_servers.split(",") if a.strip()]
            if not bootstrap_servers:
                raise ValueError("--bootstrap-servers: no HOST:PORT given")
        if voters is None:
            voters = {} if bootstrap_servers else parse_voters(args.voters)
        if listen is None and args.listen:
            listen = parse_address(args.listen)
        limits = ListenerLimits(
            socket_request_max_bytes=args.socket_request_max_bytes,
            buffered_request_max_bytes=args.buffered_request_max_bytes,
            max_connections_per_ip=args.max_connections_per_ip,
            max_connections=args.max_connections,
            request_read_timeout_ms=args.request_read_timeout_ms,
        )
    except ValueError as e:
        return fail(command, str(e))
    if Path(args.log_dir).exists() and not Path(args.log_dir).is_dir():
        return fail(command, f"{args.log_dir}: not a directory")
    observer = getattr(args, "observer", False)
    if bootstrap_servers:
        if listen is None:
            return fail(command, "a node of a dynamic quorum (--bootstrap-servers) needs --listen HOST:PORT")
    elif observer == (args.node_id in voters):
        return fail(
            command,
            f"node {args.node_id} "
            + (
                "is a voter: drop --observer"
                if observer
                else "is not in --voters: add it" + (", or pass --observer" if hasattr(args, "observer") else "")
            ),
        )
    if observer and listen is None:
        listen = ("127.0.0.1", 0)
    cid = _cluster_id(args, command)
    if cid is None:
        return EXIT_USAGE
    cfg = NodeConfig(
        args.node_id,
        voters,
        Path(args.log_dir),
        cid,
        listen=listen,
        raft=RaftConfig(election_timeout_ms=args.election_timeout_ms, fetch_timeout_ms=args.fetch_timeout_ms),
        snapshot_every_records=args.snapshot_every,
        limits=limits,
        produce_pending_max_bytes=args.produce_pending_max_bytes,
        bootstrap_servers=list(bootstrap_servers or []),
    )
    return cfg


async def serve(node: RaftNode, args: argparse.Namespace, command: str, **start_line: object) -> int:
    """Runs ``node`` (a RaftNode) until it fails or SIGTERM/SIGINT stops it (a leader resigns
    first); prints the ``listening`` line (JSON, with ``start_line``'s items) once it listens."""
    cfg = node.config
    try:
        await node.start()
    except DirectoryLockError as e:
        return fail(command, str(e))
    except OSError as e:
        assert cfg.listen is not None  # NodeConfig sets it (the node's voter address by default)
        return fail(command, f"cannot listen on {cfg.listen[0]}:{cfg.listen[1]}: {e}")
    # what start-up made (tables, the replayed image, the codec's schemas) lives as long as the
    # process: out of the collector's full scans, which otherwise pause every request for tens of
    # milliseconds under load; and young collections less often (requests make short-lived dicts)
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    assert node.address is not None
    line = {"event": "listening", "node_id": args.node_id, "host": node.address[0], "port": node.address[1]}
    print(json.dumps({**line, **start_line}), flush=True)
    done = asyncio.ensure_future(node.wait_stopped())
    stop = asyncio.ensure_future(stopping.wait())
    await asyncio.wait({done, stop}, return_when=asyncio.FIRST_COMPLETED)
    if not done.done():
        await node.stop()
    return EXIT_PROBLEMS if node.failed is not None else EXIT_OK


def _reachable(address: str, timeout: float, command: str) -> int | None:
    """None if a TCP connection to ``address`` opens; else the exit code of the error, reported
    at once as ``kraftkit <command>: HOST:PORT: <reason>`` (a refused connection or an unknown
    host is not retried until the timeout: nothing listens there)."""
    import socket

    from kraftkit.raft.admin import parse_address

    host, port = parse_address(address)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except ConnectionRefusedError:
        return fail(command, f"{address}: connection refused (is a node listening there?)")
    except socket.gaierror as e:
        return fail(command, f"{address}: unknown host: {e.strerror or e}")
    except TimeoutError:
        return fail(command, f"{address}: no connection within {timeout:g}s")
    except OSError as e:
        return fail(command, f"{address}: {e.strerror or e}")
    return None


def _replica_json(r: dict) -> dict:
    """A voter or observer as DescribeQuorum's ReplicaState names its fields."""
    return {
        "replicaId": r["id"],
        "replicaDirectoryId": r["directory_id"],
        "logEndOffset": r["log_end_offset"],
        "lag": r["lag"],
        "lastFetchTimestamp": r["last_fetch_ms"],
        "lastCaughtUpTimestamp": r["last_caught_up_ms"],
    }


def run_describe(args: argparse.Namespace) -> int:
    from kraftkit.errors import KraftkitError
    from kraftkit.raft.admin import QuorumAdmin

    code = _reachable(args.bootstrap, args.timeout, "quorum describe")
    if code is not None:
        return code
    try:
        with QuorumAdmin(args.bootstrap, timeout=args.timeout) as admin:
            info = admin.describe()
            info["cluster_id"] = admin.cluster_id()
    except (KraftkitError, ValueError) as e:
        return fail("quorum describe", f"{args.bootstrap}: {e}")
    if args.json:
        emit(
            {
                "clusterId": info["cluster_id"],
                "leaderId": info["leader_id"],
                "leaderEpoch": info["leader_epoch"],
                "highWatermark": info["high_watermark"],
                "maxFollowerLag": info["max_follower_lag"],
                "maxFollowerLagTimeMs": info["max_follower_lag_time_ms"],
                "voters": [_replica_json(r) for r in info["voters"]],
                "observers": [_replica_json(r) for r in info["observers"]],
            }
        )
        return EXIT_OK
    if args.replication:
        rows = [
            ("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status")
        ]
        for kind, reps in (("Voter", info["voters"]), ("Observer", info["observers"])):
            for r in reps:
                status = "Leader" if r["id"] == info["leader_id"] else ("Follower" if kind == "Voter" else "Observer")
                rows.append(
                    (
                        str(r["id"]),
                        r["directory_id"],
                        str(r["log_end_offset"]),
                        str(r["lag"]),
                        str(r["last_fetch_ms"]),
                        str(r["last_caught_up_ms"]),
                        status,
                    )
                )
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        return EXIT_OK
    print(f"ClusterId:              {info['cluster_id']}")
    print(f"LeaderId:               {info['leader_id']}")
    print(f"LeaderEpoch:            {info['leader_epoch']}")
    print(f"HighWatermark:          {info['high_watermark']}")
    print(f"MaxFollowerLag:         {info['max_follower_lag']}")
    print(f"MaxFollowerLagTimeMs:   {info['max_follower_lag_time_ms']}")
    print(f"CurrentVoters:          {[v['id'] for v in info['voters']]}")
    print(f"CurrentObservers:       {[o['id'] for o in info['observers']]}")
    return EXIT_OK


def _add_bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap",
        "--bootstrap-server",
        "--bootstrap-controller",
        dest="bootstrap",
        required=True,
        type=_bootstrap,
        metavar="HOST:PORT",
        help="any node of the quorum (Kafka's tools' flag names work too)",
    )


def run_append(args: argparse.Namespace) -> int:
    from kraftkit._core import encode_metadata_record
    from kraftkit.errors import KraftkitError
    from kraftkit.metadata.records import record_type
    from kraftkit.raft.admin import QuorumAdmin, QuorumError

    if args.topic:
        values = [
            encode_metadata_record(record_type("TopicRecord")[0], 0, {"Name": t, "TopicId": uuid.uuid4()})
            for t in args.topic
        ]
    else:
        values = [encode_metadata_record(record_type("NoOpRecord")[0], 0, {}) for _ in range(args.count)]
    batch = args.batch
    out: list[tuple[int, int]] = []
    code = _reachable(args.bootstrap, args.timeout, "quorum append")
    if code is not None:
        return code
    try:
        with (
            Progress("committed", total=len(values), unit="records", quiet=args.quiet) as progress,
            QuorumAdmin(args.bootstrap, timeout=args.timeout) as admin,
        ):
            for i in range(0, len(values), batch):
                out.append(admin.append(values[i : i + batch]))
                progress.advance(len(values[i : i + batch]))
    except (KraftkitError, ValueError) as e:
        print(f"kraftkit quorum append: {args.bootstrap}: {e}", file=sys.stderr)
        if args.json:
            emit(
                {
                    "records": sum(last - base + 1 for base, last in out),
                    "requests": len(out),
                    "committed": [list(x) for x in out],
                    "error": str(e),
                }
            )
        # no node answered (or a bad address): 2, as describe; the quorum refused an append: 1
        unreachable = isinstance(e, ValueError) or (isinstance(e, QuorumError) and e.code == -1)
        return EXIT_USAGE if unreachable else EXIT_PROBLEMS
    if args.json:
        emit({"records": len(values), "requests": len(out), "committed": [list(x) for x in out]})
        return EXIT_OK
    if args.verbose:
        for base, last in out:
            print(f"committed offsets {base}..{last}")
    what = f"{len(args.topic)} TopicRecord(s)" if args.topic else f"{len(values)} NoOpRecord(s)"
    print(f"committed {what} in {len(out)} request(s): offsets {out[0][0]}..{out[-1][1]}")
    return EXIT_OK


def run_recover(args: argparse.Namespace) -> int:
    """``quorum recover``: survey the survivors, plan, write the new voters' directories."""
    from kraftkit.errors import KraftkitError
    from kraftkit.raft.driver import parse_voters
    from kraftkit.raft.recovery import RecoveryInputError, plan, survey, write_quorum

    cmd = "quorum recover"
    try:
        voters = parse_voters(args.voters)
    except ValueError as e:
        return fail(cmd, f"--voters: {e}")
    if args.out is None and not args.dry_run:
        return fail(cmd, "--out DIR is required (or --dry-run)")
    try:
        recovery = plan([survey(p) for p in args.sources], voters, args.cluster_id)
        if not args.dry_run:
            write_quorum(recovery, args.out, listener_name=args.controller_listener_name)
    except RecoveryInputError as e:
        return fail(cmd, str(e))
    except KraftkitError as e:
        return fail(cmd, str(e), EXIT_PROBLEMS)
    except OSError as e:
        from kraftkit._fs import error_text

        return fail(cmd, error_text(e))
    if args.json:
        emit(recovery.to_json())
        return EXIT_OK
    for line in recovery.report():
        print(line)
    if args.dry_run:
        print("dry run: nothing written")
    else:
        for w in recovery.written:
            print(f"wrote {w}")
        if recovery.kraft_version:
            ids = ", ".join(f"{k}: {v}" for k, v in sorted(recovery.directory_ids.items()))
            boot = ",".join(f"{h}:{p}" for _, (h, p) in sorted(voters.items()))
            print(f"directory ids: {ids}")
            print(
                "start each controller on its directory (metadata.log.dir, or log.dirs) with "
                f"controller.quorum.bootstrap.servers={boot}"
            )
        else:
            print(
                "start each controller on its directory (metadata.log.dir, or log.dirs) with "
                f"controller.quorum.voters={args.voters}"
            )
    return EXIT_OK
