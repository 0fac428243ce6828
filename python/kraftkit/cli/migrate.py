"""``kraftkit migrate``: a stopped ZooKeeper-mode Kafka cluster converted to KRaft, offline (beyond
Kafka); ``migrate status``: where a live migration (KIP-866) stands; ``migrate rollback``: ZooKeeper
released for a rollback to ZooKeeper mode before the migration is finalized."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kraftkit.cli.argtypes import int_arg, seconds
from kraftkit.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, fail
from kraftkit.cli.jsonout import emit

HELP = "convert a stopped ZooKeeper-mode Kafka cluster to KRaft, offline (beyond Kafka); where a live migration stands"
CMD = "migrate from-zookeeper"


def _controller_dir(text: str) -> tuple[int, str]:
    ident, sep, path = text.partition("=")
    if not sep or not path:
        raise argparse.ArgumentTypeError(f"{text!r}: expected ID=DIR")
    return int_arg(0, 2**31 - 1)(ident), path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("migrate", help=HELP, description=HELP + ".")
    msub = p.add_subparsers(dest="migrate_command", metavar="SUBCOMMAND", required=True)
    z = msub.add_parser(
        "from-zookeeper",
        help="read a stopped ZooKeeper-mode cluster's metadata from ZooKeeper; write KRaft controller "
        "directories and rewrite the brokers' meta.properties",
        description="Convert a ZooKeeper-mode Kafka cluster whose brokers are stopped to KRaft, offline, from its "
        "running ZooKeeper (--zookeeper) or a stopped ZooKeeper's data directory (--zookeeper-data-dir). "
        "Read from ZooKeeper: the cluster id, the topics with their topic ids, "
        "their partitions (replicas, ISR, leader, leader epoch), topic configs, client quotas, SCRAM "
        "credentials, ACLs, dynamic broker configs, delegation tokens (without their HMACs, which the "
        "brokers derive from delegation.token.secret.key: keep it the same), the producer id block and "
        "/feature's finalized features. "
        "Written: for each --controller-dir a new KRaft controller directory (meta.properties and a "
        "snapshot of that metadata in __cluster_metadata-0) at the metadata.version of the brokers' "
        "inter.broker.protocol.version; start each controller on it with controller.quorum.voters set to "
        "--voters. Each --broker-dir's meta.properties is rewritten for KRaft (node.id = broker.id), the "
        "old one kept as meta.properties.zk-backup; the partitions' data stay where they are. Refused "
        "(exit 1, saying why): what is not carried yet (dynamic broker password configs), delegation tokens "
        "below inter.broker.protocol.version 3.6 (KRaft keeps them from metadata.version 3.6-IV2) "
        "and partition reassignments or topic deletions "
        "in progress; a znode past a bound or not holding Kafka's JSON (the error names it). Exit 0 "
        "written (or --dry-run), 1 the cluster cannot be converted as it is, 2 bad arguments, ZooKeeper "
        "unreachable or no Kafka cluster there (no /cluster/id), an unreadable broker directory or an existing "
        "controller directory.",
    )
    src = z.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/CHROOT]",
        help="the cluster's running ZooKeeper (zookeeper.connect of its brokers)",
    )
    src.add_argument(
        "--zookeeper-data-dir",
        metavar="DIR",
        help="a stopped ZooKeeper's data directory (its dataDir, holding version-2/ with snapshot.* and log.*), "
        "read instead of asking a running ZooKeeper",
    )
    z.add_argument(
        "--zookeeper-chroot",
        default="",
        metavar="PATH",
        help="with --zookeeper-data-dir: the chroot of zookeeper.connect (the path the cluster's znodes are under)",
    )
    z.add_argument(
        "--controller-dir",
        dest="controller_dirs",
        action="append",
        type=_controller_dir,
        required=True,
        metavar="ID=DIR",
        help="a new KRaft controller's node id and directory (its metadata.log.dir), repeatable; "
        "the directory must not exist",
    )
    z.add_argument(
        "--voters",
        required=True,
        metavar="ID@HOST:PORT,...",
        help="the controller quorum (controller.quorum.voters); every --controller-dir id is among them",
    )
    z.add_argument(
        "--broker-dir",
        dest="broker_dirs",
        action="append",
        default=[],
        metavar="DIR",
        help="a broker's log directory (one of its log.dirs) whose meta.properties is rewritten for KRaft, repeatable",
    )
    ibp = z.add_mutually_exclusive_group(required=True)
    ibp.add_argument(
        "--inter-broker-protocol-version",
        metavar="VERSION",
        help="the brokers' inter.broker.protocol.version (3.9, 3.9-IV0): the metadata.version written",
    )
    ibp.add_argument(
        "--broker-config",
        dest="broker_configs",
        action="append",
        metavar="FILE",
        help="a broker's server.properties to read inter.broker.protocol.version from, repeatable (all must agree)",
    )
    z.add_argument(
        "--zookeeper-timeout",
        type=seconds,
        default=15.0,
        metavar="SECONDS",
        help="bound on connecting to ZooKeeper and on each request (default 15)",
    )
    z.add_argument(
        "--max-znode-bytes",
        type=int_arg(1, 2**31 - 1, " bytes"),
        default=1024 * 1024,
        metavar="N",
        help="a larger znode is refused, naming it (default 1048576, ZooKeeper's jute.maxbuffer)",
    )
    z.add_argument(
        "--max-partitions",
        type=int_arg(1, 2**31 - 1),
        default=2_000_000,
        metavar="N",
        help="more partitions in all are refused (default 2000000)",
    )
    z.add_argument("--dry-run", action="store_true", help="read, check and say what would be written; write nothing")
    z.add_argument("--json", action="store_true", help="one JSON document (fields: docs/json.md)")
    z.set_defaults(func=run_from_zookeeper)

    st = msub.add_parser(
        "status",
        help="where a live ZooKeeper-to-KRaft migration (KIP-866) stands, as ZooKeeper and the controller say",
        description="Where a live migration (KIP-866, `kraftkit controller run` with "
        "zookeeper.metadata.migration.enable=true) stands, read from the cluster's ZooKeeper: who holds "
        "/controller (a ZooKeeper-mode broker, or a KRaft controller and its epoch), /controller_epoch, "
        "/migration (the KRaft controller that ran the migration and the offset and epoch of the last "
        "record copied or dual-written), the brokers of /brokers/ids and the partitions not led or not fully in sync (the "
        "controller takes over only once there are none). The state: NONE (no KRaft controller ran the "
        "migration here yet), PRE_MIGRATION (one did; the metadata is not copied yet: its log says which "
        "broker it waits for and why) or MIGRATION (copied). With --bootstrap-controller, the controller's "
        "ApiVersions says whether it is configured for the migration (ZkMigrationReady, KIP-919); with "
        "--controller-dir, the active controller's dual writes: ZooKeeperBlockingKRaftMillis (how long the "
        "oldest KRaft change not yet in ZooKeeper has waited) and the last offset written. Nothing "
        "is written. Exit 0, 1 a znode that is not Kafka's JSON, 2 bad arguments or ZooKeeper or the "
        "controller unreachable.",
    )
    _zookeeper_options(st, "bound on connecting to ZooKeeper, to the controller and on each request (default 15)")
    st.add_argument(
        "--bootstrap-controller", metavar="HOST:PORT", help="a controller to ask for ZkMigrationReady (ApiVersions)"
    )
    st.add_argument(
        "--controller-dir",
        metavar="DIR",
        help="the metadata.log.dir of the active controller (on this host): show its dual writes' metrics "
        "(ZooKeeperBlockingKRaftMillis, the last offset written to ZooKeeper) from its "
        "zk-migration-metrics.json",
    )
    st.add_argument("--json", action="store_true", help="one JSON document (fields: docs/json.md)")
    st.set_defaults(func=run_status)

    rb = msub.add_parser(
        "rollback",
        help="roll a live migration (KIP-866) back to ZooKeeper mode before it is finalized: release "
        "/controller and /migration once the KRaft controllers are stopped",
        description='The ZooKeeper part of Kafka\'s "Reverting to ZooKeeper mode During the Migration", '
        "checked: once every KRaft controller of the migration is stopped, deletes /controller (when a KRaft "
        "controller holds it, so that a ZooKeeper-mode broker becomes the controller again) and /migration "
        "(so that a later migration starts afresh), in one ZooKeeper multi conditional on the versions read, "
        "and prints what /migration held. Refused (exit 1, saying why): a --controller-dir whose metadata log "
        "is finalized (POST_MIGRATION: ZooKeeper stopped at the finalization) or names brokers registered in "
        "KRaft mode (restart them as ZooKeeper-mode brokers with the migration enabled first), a "
        "--bootstrap-controller that still answers (a running controller claims ZooKeeper again), a "
        "znode changed while the command ran. Then remove zookeeper.metadata.migration.enable, "
        "controller.listener.names and controller.quorum.voters from the brokers and roll them. Exit 0 "
        "rolled back (or --dry-run, or nothing to roll back), 1 refused, 2 bad arguments, ZooKeeper "
        "unreachable or no Kafka cluster there.",
    )
    _zookeeper_options(rb, "bound on connecting to ZooKeeper and to each controller (default 15)")
    rb.add_argument(
        "--controller-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="a KRaft controller's metadata.log.dir (on this host; repeatable): refuse if its log is finalized "
        "or names brokers registered in KRaft mode",
    )
    rb.add_argument(
        "--bootstrap-controller",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="a KRaft controller of the migration (repeatable): refuse while it accepts connections",
    )
    rb.add_argument("--dry-run", action="store_true", help="check and say what would be deleted; delete nothing")
    rb.add_argument("--json", action="store_true", help="one JSON document (fields: docs/json.md)")
    rb.set_defaults(func=run_rollback)


def _zookeeper_options(p: argparse.ArgumentParser, timeout_help: str) -> None:
    """``--zookeeper`` and ``--zookeeper-timeout``, as the live migration's commands take them."""
    p.add_argument("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]", help="the cluster's ZooKeeper")
    p.add_argument("--zookeeper-timeout", type=seconds, default=15.0, metavar="SECONDS", help=timeout_help)


STATUS = "migrate status"


def run_status(args: argparse.Namespace) -> int:
    from kraftkit.migration.zk_client import MigrationZNode, parse_controller, parse_controller_epoch
    from kraftkit.migration.zk_reader import KazooSource, ZkConnectError, ZkInputError, ZkLimits, read_cluster_id

    def zk_status(source: Any) -> dict[str, Any]:
        from kraftkit.migration.driver import zk_brokers

        controller = source.get("/controller")
        epoch = source.get("/controller_epoch")
        migration = source.get("/migration")
        in_zk, _in_topics, out_of_sync = zk_brokers(source, ZkLimits())
        m = MigrationZNode.decode(migration[0]) if migration is not None else None
        holder = None
        if controller is not None:
            cid, kraft_epoch = parse_controller(controller[0])
            holder = {"id": cid, "kraftControllerEpoch": kraft_epoch}
        if m is None:
            state = "NONE"
        elif m.kraft_metadata_offset < 0:
            state = "PRE_MIGRATION"
        else:
            state = "MIGRATION"
        return {
            "zkMigrationState": state,
            "controller": holder,
            "controllerEpoch": parse_controller_epoch(epoch[0]) if epoch is not None else None,
            "migration": None
            if m is None
            else {
                "kraftControllerId": m.kraft_controller_id,
                "kraftControllerEpoch": m.kraft_controller_epoch,
                "kraftMetadataOffset": m.kraft_metadata_offset,
                "kraftMetadataEpoch": m.kraft_metadata_epoch,
            },
            "zkBrokers": sorted(in_zk),
            "partitionsOutOfSync": out_of_sync,
        }

    try:
        source = KazooSource(args.zookeeper, timeout=args.zookeeper_timeout)
        try:
            if source.get("/cluster/id") is None:
                return fail(
                    STATUS, f"{args.zookeeper}: /cluster/id: no such znode (no Kafka cluster there)", EXIT_USAGE
                )
            out = {"clusterId": read_cluster_id(source), **zk_status(source)}
        finally:
            source.close()
    except ZkConnectError as e:
        return fail(STATUS, str(e), EXIT_USAGE)
    except ZkInputError as e:
        return fail(STATUS, str(e), EXIT_PROBLEMS)
    except Exception as e:  # kazoo's connection and session errors
        if type(e).__module__.startswith("kazoo"):
            return fail(STATUS, f"{args.zookeeper}: ZooKeeper: {type(e).__name__} {e}".rstrip(), EXIT_USAGE)
        raise
    out["dualWrite"] = None
    out["kraftZkMigrationState"] = None
    if args.controller_dir is not None:
        kraft = _kraft_migration_state(Path(args.controller_dir))
        if kraft.startswith("error: "):
            return fail(STATUS, kraft[len("error: ") :], EXIT_USAGE)
        out["kraftZkMigrationState"] = kraft
        if kraft == "POST_MIGRATION":
            out["zkMigrationState"] = kraft  # (ZooKeeper cannot say it: it is no longer written)
        dual = _dual_write_metrics(Path(args.controller_dir))
        if isinstance(dual, str) and not (kraft == "POST_MIGRATION" and "no such file" in dual):
            return fail(STATUS, dual, EXIT_USAGE)
        out["dualWrite"] = None if isinstance(dual, str) else dual
    out["zkMigrationReady"] = None
    if args.bootstrap_controller is not None:
        ready = _zk_migration_ready(args.bootstrap_controller, args.zookeeper_timeout)
        if isinstance(ready, str):
            return fail(STATUS, ready, EXIT_USAGE)
        out["zkMigrationReady"] = ready
    if args.json:
        emit(out)
        return EXIT_OK
    holder = out["controller"]
    print(f"cluster id: {out['clusterId']}")
    print(f"ZK migration state: {out['zkMigrationState']}")
    if holder is None:
        print("/controller: none (no controller holds the cluster)")
    elif holder["kraftControllerEpoch"] is not None and holder["kraftControllerEpoch"] >= 0:
        print(f"/controller: KRaft controller {holder['id']} (KRaft epoch {holder['kraftControllerEpoch']})")
    else:
        print(f"/controller: ZooKeeper-mode broker {holder['id']}")
    print(f"/controller_epoch: {out['controllerEpoch']}")
    m = out["migration"]
    if m is not None:
        print(
            f"/migration: KRaft controller {m['kraftControllerId']} (epoch {m['kraftControllerEpoch']}), copied and "
            f"dual-written up to offset {m['kraftMetadataOffset']} (epoch {m['kraftMetadataEpoch']})"
        )
    print(f"brokers in ZooKeeper: {', '.join(map(str, out['zkBrokers'])) or 'none'}")
    for p in out["partitionsOutOfSync"]:
        print(f"not led or not in sync: {p}")
    dual = out["dualWrite"]
    if dual is not None:
        print(
            f"dual writes (controller {dual['nodeId']}, {dual['state']}): ZooKeeperBlockingKRaftMillis="
            f"{dual['zooKeeperBlockingKRaftMillis']}, last offset written to ZooKeeper {dual['lastWrittenOffset']} "
            f"(epoch {dual['lastWrittenEpoch']}), ZooKeeper holds the changes up to offset {dual['syncedOffset']}"
        )
        if dual["lastError"] is not None:
            print(f"dual writes: the last write failed: {dual['lastError']}")
    if out["zkMigrationReady"] is not None:
        print(f"controller {args.bootstrap_controller}: ZkMigrationReady={str(out['zkMigrationReady']).lower()}")
    if out["kraftZkMigrationState"] is not None:
        print(f"the controller's metadata log: ZK migration state {out['kraftZkMigrationState']}")
    hint = _HINTS.get(out["zkMigrationState"])
    if hint is not None:
        print(f"next: {hint}")
    return EXIT_OK


#: what an operator can do next, by state (docs/migration.md, "Finish and roll back")
_HINTS = {
    "PRE_MIGRATION": "the controller copies the metadata once every broker is registered; to roll back: stop the "
    "KRaft controllers, delete /controller and /migration, restart the brokers without the migration configs",
    "MIGRATION": "restart the brokers one by one in KRaft mode, then the controllers with "
    "zookeeper.metadata.migration.enable=false to finalize; until then a rollback to ZooKeeper mode is possible "
    "(docs/migration.md)",
    "POST_MIGRATION": "the migration is finalized: ZooKeeper is no longer written and a rollback to ZooKeeper mode "
    "is refused",
}


ROLLBACK = "migrate rollback"


def run_rollback(args: argparse.Namespace) -> int:
    """``migrate rollback``: see its description."""
    from kraftkit.migration.zk_client import (
        CONTROLLER,
        MIGRATION,
        Delete,
        KazooClient,
        MigrationZNode,
        Op,
        ZkBadVersion,
        ZkNoNode,
        parse_controller,
    )
    from kraftkit.migration.zk_reader import ZkConnectError, ZkInputError

    for d in args.controller_dir:
        refused = _rollback_refused_by(Path(d))
        if refused is not None:
            code, why = refused
            return fail(ROLLBACK, why, code)
    for address in args.bootstrap_controller:
        try:
            running = _answers(address, args.zookeeper_timeout)
        except ValueError as e:
            return fail(ROLLBACK, f"--bootstrap-controller {address}: {e}", EXIT_USAGE)
        if running:
            return fail(
                ROLLBACK,
                f"--bootstrap-controller {address}: a controller still answers there: stop every KRaft controller "
                "of the migration first (a running one claims ZooKeeper again)",
                EXIT_PROBLEMS,
            )
    try:
        zk = KazooClient(args.zookeeper, timeout=args.zookeeper_timeout)
    except ZkConnectError as e:
        return fail(ROLLBACK, str(e), EXIT_USAGE)
    try:
        if zk.get("/cluster/id") is None:
            return fail(ROLLBACK, f"{args.zookeeper}: /cluster/id: no such znode (no Kafka cluster there)", EXIT_USAGE)
        controller = zk.get(CONTROLLER)
        migration = zk.get(MIGRATION)
        holder = parse_controller(controller[0]) if controller is not None else None
        kraft_holder = holder is not None and holder[1] is not None and holder[1] >= 0
        m = MigrationZNode.decode(migration[0]) if migration is not None else None
        ops: list[Op] = []
        if controller is not None and kraft_holder:
            ops.append(Delete(CONTROLLER, controller[1]))
        if migration is not None:
            ops.append(Delete(MIGRATION, migration[1]))
        if ops and not args.dry_run:
            zk.multi(ops)
    except ZkInputError as e:
        return fail(ROLLBACK, str(e), EXIT_PROBLEMS)
    except (ZkBadVersion, ZkNoNode) as e:
        return fail(
            ROLLBACK,
            f"{args.zookeeper}: {e}: a znode changed while the command ran (is a KRaft controller still running?); "
            "nothing was deleted",
            EXIT_PROBLEMS,
        )
    except Exception as e:  # kazoo's connection and session errors
        if type(e).__module__.startswith("kazoo"):
            return fail(ROLLBACK, f"{args.zookeeper}: ZooKeeper: {type(e).__name__} {e}".rstrip(), EXIT_USAGE)
        raise
    finally:
        zk.close()
    deleted = [op.path for op in ops]
    out: dict[str, Any] = {
        "deleted": [] if args.dry_run else deleted,
        "wouldDelete": deleted if args.dry_run else [],
        "controller": None if holder is None else {"id": holder[0], "kraftControllerEpoch": holder[1]},
        "migration": None
        if m is None
        else {
            "kraftControllerId": m.kraft_controller_id,
            "kraftControllerEpoch": m.kraft_controller_epoch,
            "kraftMetadataOffset": m.kraft_metadata_offset,
            "kraftMetadataEpoch": m.kraft_metadata_epoch,
        },
        "dryRun": bool(args.dry_run),
    }
    if args.json:
        emit(out)
        return EXIT_OK
    if not deleted:
        print("nothing to roll back: no KRaft controller holds /controller and there is no /migration")
        return EXIT_OK
    verb = "would delete" if args.dry_run else "deleted"
    if m is not None:
        print(
            f"/migration held: KRaft controller {m.kraft_controller_id} (epoch {m.kraft_controller_epoch}), "
            f"copied and dual-written up to offset {m.kraft_metadata_offset} (epoch {m.kraft_metadata_epoch})"
        )
    if holder is not None and not kraft_holder:
        print(f"/controller: ZooKeeper-mode broker {holder[0]} (kept)")
    print(f"{verb}: {', '.join(deleted)}")
    print(
        "next: on each broker remove zookeeper.metadata.migration.enable, controller.listener.names and "
        "controller.quorum.voters, and roll the brokers one by one (one of them is the ZooKeeper controller again); "
        "then delete the KRaft controllers' metadata.log.dir"
    )
    return EXIT_OK


def _rollback_refused_by(directory: Path) -> tuple[int, str] | None:
    """Why the controller's metadata log in ``directory`` refuses a rollback (exit code, message), if it does."""
    from kraftkit.errors import KraftkitError
    from kraftkit.metadata.image import ZK_MIGRATION_STATES, load_image

    try:
        image = load_image(directory, allow_gaps=True, gaps=[])
    except (OSError, KraftkitError) as e:
        return EXIT_USAGE, f"{directory}: the controller's metadata log cannot be read: {e}"
    state = ZK_MIGRATION_STATES.get(image.zk_migration_state, str(image.zk_migration_state))
    if state == "POST_MIGRATION":
        return EXIT_PROBLEMS, (
            f"{directory}: the migration was finalized (POST_MIGRATION): ZooKeeper stopped at the finalization and "
            "holds none of the changes since; a rollback to ZooKeeper mode is refused"
        )
    kraft_brokers = sorted(b for b, reg in image.brokers.items() if not reg.get("IsMigratingZkBroker"))
    if kraft_brokers:
        return EXIT_PROBLEMS, (
            f"{directory}: broker(s) {', '.join(map(str, kraft_brokers))} run in KRaft mode (registered without "
            "IsMigratingZkBroker): restart them as ZooKeeper-mode brokers with zookeeper.metadata.migration.enable=true "
            "while the KRaft controllers run, then stop the controllers and roll back (docs/migration.md)"
        )
    return None


def _answers(address: str, timeout: float) -> bool:
    """Whether something (a controller still running) accepts connections at ``address``; bad
    addresses raise ``ValueError``."""
    import socket

    from kraftkit.raft.admin import parse_address

    host, port = parse_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:  # refused, unreachable, timed out: nothing runs there
        return False


def _kraft_migration_state(directory: Path) -> str:
    """The ZK migration state of the metadata log in ``directory`` (a controller's metadata.log.dir),
    or ``error: `` and why it cannot be read."""
    from kraftkit.errors import KraftkitError
    from kraftkit.metadata.image import ZK_MIGRATION_STATES, load_image

    try:
        image = load_image(directory, allow_gaps=True, gaps=[])
    except (OSError, KraftkitError) as e:
        return f"error: {directory}: the controller's metadata log cannot be read: {e}"
    return ZK_MIGRATION_STATES.get(image.zk_migration_state, str(image.zk_migration_state))


def _dual_write_metrics(directory: Path) -> dict[str, Any] | str:
    """The dual writes' metrics the active controller keeps in ``directory``, or why they cannot be read."""
    import json

    from kraftkit._fs import error_text, read_small
    from kraftkit.migration.driver import METRICS_FILE

    path = directory / METRICS_FILE
    try:
        js = json.loads(read_small(path, what="the dual writes' metrics").decode("utf-8"))
    except FileNotFoundError:
        return f"{path}: no such file (no controller of this directory has written to ZooKeeper yet)"
    except OSError as e:
        return error_text(e)
    except (ValueError, UnicodeDecodeError) as e:
        return f"{path}: not the dual writes' metrics JSON: {e}"
    keys = ("nodeId", "state", "ZooKeeperBlockingKRaftMillis", "lastWrittenOffset", "lastWrittenEpoch", "syncedOffset")
    if not isinstance(js, dict) or not all(k in js for k in keys) or not isinstance(js["state"], str):
        return f"{path}: not the dual writes' metrics JSON"
    if not all(isinstance(js[k], int) and not isinstance(js[k], bool) for k in keys if k != "state"):
        return f"{path}: not the dual writes' metrics JSON (a field is not an integer)"
    out = {k[0].lower() + k[1:]: js[k] for k in keys}
    last_error = js.get("lastError")  # (absent from the files of controllers before it)
    out["lastError"] = last_error[:2000] if isinstance(last_error, str) else None
    return out


def _zk_migration_ready(address: str, timeout: float) -> bool | str:
    """The controller's ApiVersions ZkMigrationReady (v3+), or why it cannot be asked."""
    from kraftkit.protocol import KafkaConnection
    from kraftkit.protocol.messages import ApiKey
    from kraftkit.raft.admin import parse_address

    try:
        host, port = parse_address(address)
        with KafkaConnection(host, port, timeout=timeout) as conn:
            resp = conn.request(
                ApiKey.API_VERSIONS, 3, {"ClientSoftwareName": "kraftkit", "ClientSoftwareVersion": "0"}
            )
    except (OSError, ValueError) as e:
        return f"--bootstrap-controller {address}: {e}"
    except Exception as e:  # the codec's ProtocolError
        return f"--bootstrap-controller {address}: {type(e).__name__}: {e}"
    if resp.get("ErrorCode"):
        return f"--bootstrap-controller {address}: ApiVersions v3 failed with error code {resp['ErrorCode']}"
    return bool(resp.get("ZkMigrationReady"))


def _ibp_from_configs(files: list[str]) -> str:
    from kraftkit._fs import read_small
    from kraftkit.features.storage.properties import parse_properties
    from kraftkit.migration.convert import ConversionError, ConversionInputError

    found: dict[str, str] = {}
    for f in files:
        try:
            props = parse_properties(read_small(f, what="a server.properties file").decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ConversionInputError(f"{f}: not UTF-8 text (byte {e.start})") from None
        v = props.get("inter.broker.protocol.version")
        if v is None or not v.strip():
            raise ConversionInputError(
                f"{f}: no inter.broker.protocol.version (give it with --inter-broker-protocol-version)"
            )
        found[f] = v.strip()
    if len(set(found.values())) > 1:
        said = ", ".join(f"{f}: {v}" for f, v in found.items())
        raise ConversionError(f"the brokers' inter.broker.protocol.version differ ({said}): finish the upgrade first")
    return next(iter(found.values()))


def run_from_zookeeper(args: argparse.Namespace) -> int:
    from kraftkit._fs import error_text
    from kraftkit.errors import KraftkitError
    from kraftkit.migration.convert import ConversionError, ConversionInputError, plan, write
    from kraftkit.migration.zk_reader import KazooSource, ZkConnectError, ZkInputError, ZkLimits, read_cluster

    controllers: dict[int, str] = {}
    for ident, path in args.controller_dirs:
        if ident in controllers:
            return fail(CMD, f"--controller-dir: node {ident} given twice")
        controllers[ident] = path
    limits = ZkLimits(max_znode_bytes=args.max_znode_bytes, max_partitions=args.max_partitions)
    try:
        ibp = args.inter_broker_protocol_version or _ibp_from_configs(args.broker_configs)
        if args.zookeeper_data_dir is not None:
            from kraftkit.migration.zk_datadir import DataDirSource

            chroot = args.zookeeper_chroot
            if chroot and (not chroot.startswith("/") or chroot == "/"):
                return fail(CMD, f"--zookeeper-chroot: {chroot!r} is not an absolute path below /")
            source: Any = DataDirSource(args.zookeeper_data_dir, chroot=chroot)
        else:
            source = KazooSource(args.zookeeper, timeout=args.zookeeper_timeout)
        try:
            cluster = read_cluster(source, limits)
        finally:
            source.close()
        p = plan(cluster, ibp, controllers, args.voters, args.broker_dirs)
        if not args.dry_run:
            write(p)
    except (ConversionInputError, ZkConnectError) as e:
        return fail(CMD, str(e), EXIT_USAGE)
    except (ConversionError, ZkInputError) as e:
        return fail(CMD, str(e), EXIT_PROBLEMS)
    except KraftkitError as e:
        return fail(CMD, str(e), EXIT_PROBLEMS)
    except OSError as e:
        return fail(CMD, error_text(e), EXIT_USAGE)
    except Exception as e:  # kazoo's connection and session errors (the cluster's ZooKeeper went away)
        if type(e).__module__.startswith("kazoo"):
            return fail(CMD, f"{args.zookeeper}: ZooKeeper: {type(e).__name__} {e}".rstrip(), EXIT_USAGE)
        raise
    if args.json:
        emit({"dryRun": bool(args.dry_run), **p.to_json()})
        return EXIT_OK
    for line in p.report():
        print(line)
    if args.dry_run:
        for i, t in sorted(p.controllers.items()):
            print(f"would write controller {i}: {t}")
        for b in p.brokers:
            print(f"would rewrite broker {b.broker_id}: {Path(b.path) / 'meta.properties'}")
        print("dry run: nothing written")
        return EXIT_OK
    for i, t in sorted(p.controllers.items()):
        print(f"wrote controller {i}: {t} (directory.id {p.controller_dir_ids[i]})")
    for b in p.brokers:
        assert b.new is not None
        print(
            f"rewrote broker {b.broker_id}: {Path(b.path) / 'meta.properties'} (node.id {b.broker_id}, "
            f"directory.id {b.new.directory_id}); the ZooKeeper-mode one is kept as meta.properties.zk-backup "
            "(put it back to roll back)"
        )
    print(f"start each controller on its directory (metadata.log.dir) with controller.quorum.voters={args.voters}")
    print(
        "then each broker with process.roles=broker, node.id=<its broker.id>, the same log.dirs, "
        f"controller.quorum.voters={args.voters}, and no zookeeper.connect"
    )
    return EXIT_OK
