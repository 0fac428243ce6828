#!/usr/bin/env python
"""The live ZooKeeper-to-KRaft migration's copy (KIP-866): kraftkit's controller against Kafka
3.9.2's own KRaft controller, migrating the same ZooKeeper in the same run.

    .venv/bin/python benches/migration.py                      # 10,000 partitions (1,000 topics x 10)
    .venv/bin/python benches/migration.py --partitions 200     # a quick check
    .venv/bin/python benches/run.py --suites migration         # the same rows in the suite table

Set-up, once: a real ZooKeeper (3.8.4, from Kafka 3.9.2's jars) on 127.0.0.1; a real Kafka 3.9.2
ZooKeeper-mode broker started on it and stopped (it writes ``/cluster/id``, ``/controller_epoch``,
``/feature`` and the other znodes of a ZooKeeper-mode cluster); then ``--partitions`` partitions
(topics of ``--topic-partitions``, replication factor 2 on brokers 1 and 2, each led and in sync)
written straight into ZooKeeper in Kafka's znode format: ``/brokers/topics/<t>`` (version 3, with
its topic id), ``.../partitions/<p>/state`` and ``/config/topics/<t>``. ZooKeeper is stopped and its
data directory kept; each side starts from a fresh copy of it, on fresh KRaft storage.

Each side: ZooKeeper started on the copy; the controller (``kraftkit controller run --config``,
or Kafka 3.9.2's ``kafka.Kafka`` with ``process.roles=controller``), one voter, formatted at
3.9-IV0 with ZooKeeper's cluster id, ``zookeeper.metadata.migration.enable=true``; then brokers
1 and 2 register as migrating ZooKeeper brokers: each holds an ephemeral ``/brokers/ids/<id>``
(Kafka's version 5 broker JSON) and sends ``BrokerRegistration`` with ``IsMigratingZkBroker``,
then heartbeats every second, as a Kafka 3.9 ZooKeeper-mode broker with the migration enabled does
(they are protocol-level brokers: the copy does not involve the brokers, and 10,000 partitions on
real ZooKeeper-mode brokers would take minutes of set-up per side). Both controllers then wait
for every broker of ``/brokers/ids`` and of the replica assignments to be registered (Kafka's
``KRaftMigrationDriver`` checks both), claim ZooKeeper, copy it in one metadata transaction and
record the copy's end offset in ``/migration``.

Measured from outside, the same way for both:

* **migration time**: from the moment both brokers' registrations were answered to the moment
  ``/migration`` holds the copy's end offset (polled every 20 ms; both controllers write it right
  after the transaction's ``EndTransactionRecord`` is committed); the time from the controller's
  process start is printed too;
* **copy rate**: the records of the migration transaction (``BeginTransactionRecord`` to
  ``EndTransactionRecord``, read back from each controller's metadata log) divided by the span
  of the transaction's batch timestamps (the leader's append time, in ms);
* **completeness**: each controller's KRaft image (replayed by kraftkit from its log directory)
  must be in ZK migration state MIGRATION with every topic and partition of ZooKeeper, the same
  topic ids: a fast wrong copy fails the run.

Target: kraftkit's migration time at most Kafka's (ratio = Kafka's time / kraftkit's >= 1.0x),
and its copy rate at least Kafka's. The load average is printed with each side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(HERE), str(REPO)):
    if p not in sys.path:
        sys.path.insert(0, p)

import benchlib  # noqa: E402
from benchlib import Row  # noqa: E402

S = "migration"
M_TIME = "brokers registered to /migration written"
M_RATE = "copy rate (migration transaction)"
CONTROLLER_ID = 3000
BROKERS = (1, 2)
ZK_VERSION = "3.9.2"
#: the bench's own bound on each side's migration (the machine may be loaded)
MIGRATION_TIMEOUT_S = 900.0


class BenchError(Exception):
    pass


# ---------------------------------------------------------------------------------- ZooKeeper
def topic_id_text(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    import base64

    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def _zookeeper(workdir: Path):
    from tests.migration.test_offline_zk import ZooKeeper

    return ZooKeeper(workdir)


def populate(zk_connect: str, partitions: int, per_topic: int, log=print) -> dict[str, str]:
    """Writes ``partitions`` partitions (topics ``bench-<i>`` of ``per_topic``) in Kafka's znode
    format; the topic ids written, by name."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk_connect, timeout=30)
    client.start(timeout=30)
    try:
        epoch = int(client.get("/controller_epoch")[0])
        ids: dict[str, str] = {}
        topics = (partitions + per_topic - 1) // per_topic
        pending = []
        done = 0
        for i in range(topics):
            name = f"bench-{i:05d}"
            n = min(per_topic, partitions - i * per_topic)
            tid = topic_id_text(uuid.uuid4())
            ids[name] = tid
            assignment = {str(p): list(BROKERS) if p % 2 == 0 else list(reversed(BROKERS)) for p in range(n)}
            topic = {
                "partitions": assignment,
                "topic_id": tid,
                "adding_replicas": {},
                "removing_replicas": {},
                "version": 3,
            }
            base = f"/brokers/topics/{name}"
            # (one session's requests are applied in order: each parent before its children)
            pending.append(
                client.create_async(f"/config/topics/{name}", json.dumps({"version": 1, "config": {}}).encode())
            )
            pending.append(client.create_async(base, json.dumps(topic).encode()))
            pending.append(client.create_async(f"{base}/partitions", b""))
            for p in range(n):
                replicas = assignment[str(p)]
                state = {
                    "controller_epoch": epoch,
                    "leader": replicas[0],
                    "version": 1,
                    "leader_epoch": 0,
                    "isr": replicas,
                }
                pending.append(client.create_async(f"{base}/partitions/{p}", b""))
                pending.append(client.create_async(f"{base}/partitions/{p}/state", json.dumps(state).encode()))
            if len(pending) > 2000:
                for r in pending:
                    r.get(timeout=120)
                done += len(pending)
                pending = []
        for r in pending:
            r.get(timeout=120)
        log(f"  ZooKeeper: {topics} topics, {partitions} partitions written ({done + len(pending)} znodes)")
        return ids
    finally:
        client.stop()
        client.close()


def prepare_zookeeper(root: Path, partitions: int, per_topic: int, log=print) -> tuple[Path, dict[str, str], str]:
    """The pristine ZooKeeper data directory (stopped), the topic ids written and the cluster id."""
    from kazoo.client import KazooClient
    from tests.migration.test_offline_zk import ZkBroker

    zk = _zookeeper(root / "zk-setup")
    broker = ZkBroker(root / "zk-broker", 1, zk.connect)
    try:
        zk.start()
        log("  a Kafka 3.9.2 ZooKeeper-mode broker writes the cluster's znodes, then stops")
        broker.start()
        broker.stop()
        ids = populate(zk.connect, partitions, per_topic, log)
        client = KazooClient(hosts=zk.connect, timeout=30)
        client.start(timeout=30)
        try:
            cluster_id = json.loads(client.get("/cluster/id")[0])["id"]
            if client.get_children("/brokers/ids"):
                raise BenchError("/brokers/ids: the set-up broker's registration outlived it")
        finally:
            client.stop()
            client.close()
    finally:
        broker.stop()
        zk.stop()
    return root / "zk-setup" / "data", ids, cluster_id


# ---------------------------------------------------------------------------------- brokers
def broker_features() -> list[dict]:
    """The feature ranges a Kafka 3.9 broker advertises (kraftkit's release registry for 3.9)."""
    from kraftkit.features.registry import MV_FEATURE, registry

    release = registry().release("3.9")
    out = []
    for name in [MV_FEATURE, *sorted(release.features)]:
        rng = release.supported_range(name)
        if rng is not None:
            out.append({"Name": name, "MinSupportedVersion": rng[0], "MaxSupportedVersion": rng[1]})
    return out


class MigratingBrokers:
    """Brokers 1 and 2 as a Kafka 3.9 ZooKeeper-mode broker with the migration enabled shows itself:
    an ephemeral ``/brokers/ids/<id>``, a ``BrokerRegistration`` with ``IsMigratingZkBroker``, then
    a heartbeat every second (one thread, one connection per broker)."""

    def __init__(self, zk_connect: str, cluster_id: str, controller: tuple[str, int]) -> None:
        self.zk_connect = zk_connect
        self.cluster_id = cluster_id
        self.controller = controller
        self.zk = None
        self.conns: dict[int, object] = {}
        self.epochs: dict[int, int] = {}
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.heartbeat_errors: list[str] = []

    def register_in_zk(self) -> None:
        from kazoo.client import KazooClient

        self.zk = KazooClient(hosts=self.zk_connect, timeout=30)
        self.zk.start(timeout=30)
        for b in BROKERS:
            port = 20000 + b
            info = {
                "features": {},
                "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
                "endpoints": [f"PLAINTEXT://127.0.0.1:{port}"],
                "jmx_port": -1,
                "port": port,
                "host": "127.0.0.1",
                "version": 5,
                "timestamp": str(int(time.time() * 1000)),
            }
            self.zk.create(f"/brokers/ids/{b}", json.dumps(info).encode(), ephemeral=True)

    def register_with_kraft(self, deadline: float) -> None:
        """Each broker's ``BrokerRegistration``, retried (the controller may not listen or lead
        yet) until answered without error or ``deadline`` (monotonic)."""
        from kraftkit.protocol import KafkaConnection
        from kraftkit.protocol.client import ProtocolError
        from kraftkit.protocol.messages import ApiKey, Errors

        features = broker_features()
        last = ""
        for b in BROKERS:
            while True:
                if time.monotonic() > deadline:
                    raise BenchError(f"broker {b}: not registered with the controller in time: {last}")
                try:
                    conn = KafkaConnection(*self.controller, timeout=30)
                except (OSError, ProtocolError) as e:  # not listening yet
                    last = f"connect: {e}"
                    time.sleep(0.05)
                    continue
                try:
                    got = conn.request(
                        ApiKey.BROKER_REGISTRATION,
                        conn.version_for(ApiKey.BROKER_REGISTRATION),
                        {
                            "BrokerId": b,
                            "ClusterId": self.cluster_id,
                            "IncarnationId": uuid.uuid4(),
                            "Listeners": [
                                {"Name": "PLAINTEXT", "Host": "127.0.0.1", "Port": 20000 + b, "SecurityProtocol": 0}
                            ],
                            "Features": features,
                            "Rack": None,
                            "IsMigratingZkBroker": True,
                            "LogDirs": [uuid.uuid4()],
                            "PreviousBrokerEpoch": -1,
                        },
                    )
                except Exception as e:  # the controller not up yet, or a dropped connection: try again
                    conn.close()
                    last = f"{type(e).__name__}: {e}"
                    time.sleep(0.05)
                    continue
                code = got["ErrorCode"]
                if code == 0:
                    self.conns[b] = conn
                    self.epochs[b] = got["BrokerEpoch"]
                    break
                conn.close()
                last = f"error {Errors(code).name}"
                time.sleep(0.05)
        self.thread = threading.Thread(target=self._heartbeats, name="bench-heartbeats", daemon=True)
        self.thread.start()

    def _heartbeats(self) -> None:
        from kraftkit.protocol.messages import ApiKey

        while not self.stop_event.wait(1.0):
            for b, conn in self.conns.items():
                try:
                    got = conn.request(
                        ApiKey.BROKER_HEARTBEAT,
                        conn.version_for(ApiKey.BROKER_HEARTBEAT),
                        {
                            "BrokerId": b,
                            "BrokerEpoch": self.epochs[b],
                            "CurrentMetadataOffset": 0,
                            "WantFence": False,
                            "WantShutDown": False,
                            "OfflineLogDirs": [],
                        },
                    )
                    if got["ErrorCode"]:
                        self.heartbeat_errors.append(f"broker {b}: error {got['ErrorCode']}")
                except Exception as e:
                    self.heartbeat_errors.append(f"broker {b}: {type(e).__name__}: {e}")
                    return

    def close(self) -> None:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout=30)
        for conn in self.conns.values():
            conn.close()
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()


# ---------------------------------------------------------------------------------- controllers
def _kafka_controller(workdir: Path, zk_connect: str, cluster_id: str):
    from tests.harness.node import KafkaNode, free_port

    class Controller(KafkaNode):
        def _ensure_ports(self) -> None:
            if not self.controller_port:
                self.controller_port = free_port()

        def properties(self) -> dict[str, object]:
            props = super().properties()
            for k in ("advertised.listeners", "inter.broker.listener.name"):
                props.pop(k, None)
            props.update(
                {
                    "process.roles": "controller",
                    "node.id": CONTROLLER_ID,
                    "controller.quorum.voters": f"{CONTROLLER_ID}@127.0.0.1:{self.controller_port}",
                    "listeners": f"CONTROLLER://127.0.0.1:{self.controller_port}",
                    "zookeeper.metadata.migration.enable": "true",
                    "zookeeper.connect": zk_connect,
                }
            )
            return props

    node = Controller(workdir, ZK_VERSION, release_version="3.9-IV0", cluster_id=cluster_id, stop_timeout=60)
    node.node_id = CONTROLLER_ID
    return node


class _Side:
    """One controller process: started, its address, its metadata log directory, stopped."""

    def __init__(self, kind: str, root: Path, zk_connect: str, cluster_id: str) -> None:
        self.kind = kind
        self.root = root
        self.proc: subprocess.Popen | None = None
        self.node = None
        self._err = None
        if kind == "kafka":
            self.node = _kafka_controller(root / "kafka-controller", zk_connect, cluster_id)
            self.node._ensure_ports()
            self.address = ("127.0.0.1", self.node.controller_port)
            self.node.workdir.mkdir(parents=True, exist_ok=True)
            (self.node.workdir / "logs").mkdir(exist_ok=True)
            self.node._write_config()
            self.node.format()
            self.log_dir = self.node.metadata_log_dir
            self.log_path = self.node.server_log
        else:
            from tests.harness.node import free_port

            from kraftkit.features.storage.format import format_storage

            port = free_port()
            meta = root / "kraftkit-controller"
            format_storage(
                [meta], cluster_id=cluster_id, node_id=CONTROLLER_ID, release_version="3.9", no_initial_controllers=True
            )
            self.config = root / "controller.properties"
            self.config.write_text(
                "\n".join(
                    [
                        "process.roles=controller",
                        f"node.id={CONTROLLER_ID}",
                        f"controller.quorum.voters={CONTROLLER_ID}@127.0.0.1:{port}",
                        f"listeners=CONTROLLER://127.0.0.1:{port}",
                        "controller.listener.names=CONTROLLER",
                        f"metadata.log.dir={meta}",
                        "zookeeper.metadata.migration.enable=true",
                        f"zookeeper.connect={zk_connect}",
                        "",
                    ]
                )
            )
            self.address = ("127.0.0.1", port)
            self.log_dir = meta / "__cluster_metadata-0"
            self.log_path = root / "kraftkit-controller.log"

    def start(self) -> None:
        if self.node is not None:
            self.node.launch()
            return
        self._err = open(self.log_path, "wb")  # noqa: SIM115 (the process outlives this call: closed in stop())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kraftkit.cli.main", "controller", "run", "--config", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=self._err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def alive(self) -> bool:
        if self.node is not None:
            return self.node.running
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        from tests._procs import log_tail

        return log_tail(self.log_path, lines)

    def stop(self) -> None:
        if self.node is not None:
            self.node.stop()
            return
        if self.proc is not None and self.proc.poll() is None:
            import signal

            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        if self._err is not None:
            self._err.close()
            self._err = None


# ---------------------------------------------------------------------------------- what was copied
def transaction(log_dir: Path) -> dict:
    """The migration transaction in a metadata log directory (the one that moves the ZK migration
    state to MIGRATION; the bootstrap's transaction, which sets PRE_MIGRATION, is not it): the
    records copied from ZooKeeper in it (by type name; not the transaction's markers, its
    ZkMigrationStateRecord or Kafka's periodic NoOpRecords), and its Begin and End batches' max
    timestamps (ms)."""
    from kraftkit._core import decode_batches, decode_metadata_record
    from kraftkit.metadata import image as im

    copied_types = {
        im.TOPIC: "TopicRecord",
        im.PARTITION: "PartitionRecord",
        im.CONFIG: "ConfigRecord",
        im.CLIENT_QUOTA: "ClientQuotaRecord",
        im.USER_SCRAM_CREDENTIAL: "UserScramCredentialRecord",
        im.ACCESS_CONTROL_ENTRY: "AccessControlEntryRecord",
        im.PRODUCER_IDS: "ProducerIdsRecord",
        im.DELEGATION_TOKEN: "DelegationTokenRecord",
    }
    counts: dict[str, int] = {}
    first_ts = None
    migrates = False
    for seg in sorted(log_dir.glob("*.log")):
        for batch in decode_batches(seg.read_bytes()):
            if batch.is_control:
                continue
            for r in batch.records():
                v = r.value
                api = v[1] if v is not None and len(v) > 1 else -1
                if api == im.BEGIN_TRANSACTION:
                    counts, first_ts, migrates = {}, batch.max_timestamp, False
                elif api in copied_types:
                    counts[copied_types[api]] = counts.get(copied_types[api], 0) + 1
                elif api == im.ZK_MIGRATION_STATE:
                    state = decode_metadata_record(v)[2]["ZkMigrationState"]
                    migrates = im.ZK_MIGRATION_STATES.get(state) == "MIGRATION"
                elif api == im.END_TRANSACTION and migrates and first_ts is not None:
                    return {
                        "records": sum(counts.values()),
                        "types": dict(sorted(counts.items())),
                        "first_ms": first_ts,
                        "last_ms": batch.max_timestamp,
                    }
    raise BenchError(
        f"{log_dir}: no complete migration transaction (Begin, ZK migration state MIGRATION, End) in the log"
    )


def check_image(log_dir: Path, ids: dict[str, str], partitions: int) -> dict:
    """The controller's KRaft image: in ZK migration state MIGRATION, every topic of ZooKeeper
    with its topic id and every partition; raises otherwise."""
    from kraftkit.metadata.image import ZK_MIGRATION_STATES, load_image, uuid_text

    image = load_image(log_dir)
    state = ZK_MIGRATION_STATES.get(image.zk_migration_state, str(image.zk_migration_state))
    names = {tid: name for name, tid in image.topic_ids.items()}
    got = {names[tid]: (uuid_text(tid), len(t.partitions)) for tid, t in image.topics.items()}
    copied = sum(n for _tid, n in got.values())
    want_ids = {name: tid for name, tid in ids.items()}
    if state != "MIGRATION":
        raise BenchError(f"{log_dir}: ZK migration state {state}, not MIGRATION")
    if {n: tid for n, (tid, _c) in got.items()} != want_ids:
        missing = sorted(set(want_ids) - set(got))[:5]
        raise BenchError(f"{log_dir}: topics or topic ids differ from ZooKeeper's (missing e.g. {missing})")
    if copied != partitions:
        raise BenchError(f"{log_dir}: {copied} partitions in the image, ZooKeeper holds {partitions}")
    migrating = sorted(b for b, reg in image.brokers.items() if reg.get("IsMigratingZkBroker"))
    return {"state": state, "topics": len(got), "partitions": copied, "migrating_brokers": migrating}


# ---------------------------------------------------------------------------------- one side
def _migration_offset(client) -> int:
    got = client.exists("/migration") and client.get("/migration")
    if not got:
        return -1
    return int(json.loads(got[0]).get("kraft_metadata_offset", -1))


def measure_side(
    kind: str, pristine: Path, root: Path, ids: dict[str, str], cluster_id: str, partitions: int, log=print
) -> dict:
    """One controller migrating a fresh copy of the pristine ZooKeeper; the measures."""
    from kazoo.client import KazooClient

    root.mkdir(parents=True)
    zk = _zookeeper(root / "zk")
    shutil.copytree(pristine, root / "zk" / "data")
    side: _Side | None = None
    brokers: MigratingBrokers | None = None
    client = None
    out: dict = {"loadavg_start": os.getloadavg()}
    try:
        zk.start()
        client = KazooClient(hosts=zk.connect, timeout=30)
        client.start(timeout=30)
        if _migration_offset(client) != -1:
            raise BenchError("the copy of ZooKeeper already holds a migration")
        side = _Side(kind, root, zk.connect, cluster_id)
        brokers = MigratingBrokers(zk.connect, cluster_id, side.address)
        brokers.register_in_zk()
        t_start = time.monotonic()
        side.start()
        brokers.register_with_kraft(time.monotonic() + 300)
        t_registered = time.monotonic()
        deadline = t_registered + MIGRATION_TIMEOUT_S
        while (offset := _migration_offset(client)) < 0:
            if not side.alive():
                raise BenchError(f"{kind}: the controller exited before the migration completed\n{side.log_tail()}")
            if time.monotonic() > deadline:
                raise BenchError(
                    f"{kind}: /migration not written within {MIGRATION_TIMEOUT_S:.0f} s\n{side.log_tail()}"
                )
            time.sleep(0.02)
        t_done = time.monotonic()
        out.update(
            total_s=t_done - t_registered,
            from_start_s=t_done - t_start,
            registration_s=t_registered - t_start,
            offset=offset,
        )
        log(
            f"  {kind}: /migration written {out['total_s']:.2f} s after the brokers registered "
            f"({out['from_start_s']:.2f} s after the controller started)"
        )
        if brokers.heartbeat_errors:
            out["heartbeat_errors"] = brokers.heartbeat_errors[:5]
    finally:
        if brokers is not None:
            brokers.close()
        if side is not None:
            side.stop()
        if client is not None:
            client.stop()
            client.close()
        zk.stop()
    out["loadavg_end"] = os.getloadavg()
    txn = transaction(side.log_dir)
    span_ms = max(1, txn["last_ms"] - txn["first_ms"])
    out.update(
        records=txn["records"], types=txn["types"], copy_s=span_ms / 1000, copy_rps=txn["records"] / (span_ms / 1000)
    )
    if kind == "kafka":
        import re

        m = re.search(
            r"Completed migration of metadata from ZooKeeper to KRaft\. (\d+) records were generated in "
            r"(\d+) ms",
            side.log_path.read_text(errors="replace"),
        )
        if m is not None:  # Kafka's own account of the copy, for the record
            out["kafka_log"] = {"records": int(m[1]), "ms": int(m[2])}
    out["image"] = check_image(side.log_dir, ids, partitions)
    if out["image"]["migrating_brokers"] != list(BROKERS):
        raise BenchError(
            f"{kind}: migrating brokers in the image {out['image']['migrating_brokers']}, not {list(BROKERS)}"
        )
    return out


# ---------------------------------------------------------------------------------- the suite
def run_all(a, log=print) -> tuple[list[Row], dict]:
    import logging

    from tests.harness import jars

    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # its reconnect chatter while ZooKeeper starts
    jars.ensure_kafka(ZK_VERSION)
    results: dict = {}
    prev = os.sched_getaffinity(0)
    os.sched_setaffinity(0, benchlib.ALL_CPUS)
    try:
        with tempfile.TemporaryDirectory(prefix="kraftkit-bench-migration-") as tmp_dir:
            tmp = Path(a.work_dir or tmp_dir)
            log(f"  ZooKeeper with {a.partitions:,} partitions ({a.topic_partitions} per topic)")
            pristine, ids, cluster_id = prepare_zookeeper(tmp / "setup", a.partitions, a.topic_partitions, log)
            sides = ["kraftkit"] if a.no_kafka else ["kraftkit", "kafka"]
            for kind in sides:
                log(f"  {kind}: the controller migrates a fresh copy of ZooKeeper")
                results[kind] = measure_side(kind, pristine, tmp / kind, ids, cluster_id, a.partitions, log)
            if "kafka" in results and results["kraftkit"]["types"] != results["kafka"]["types"]:
                raise BenchError(
                    f"the copies differ: kraftkit's transaction holds {results['kraftkit']['types']}, "
                    f"Kafka's {results['kafka']['types']}"
                )
    finally:
        os.sched_setaffinity(0, prev)
    rows: list[Row] = []
    ds = f"{a.partitions:,} partitions"
    for side, impl, ref in (
        ("kraftkit", "kraftkit controller", True),
        ("kafka", f"Kafka {ZK_VERSION} controller", False),
    ):
        res = results.get(side)
        if not res:
            continue
        rows.append(
            Row(
                S,
                ds,
                M_TIME,
                impl,
                1,
                0,
                res["total_s"],
                res["total_s"],
                is_ref=ref,
                note=f"{res['from_start_s']:.2f} s from the process start",
            )
        )
        rows.append(
            Row(
                S,
                ds,
                M_RATE,
                impl,
                res["records"],
                0,
                res["copy_s"],
                res["copy_s"],
                is_ref=ref,
                note=f"{res['records']:,} records in {res['copy_s'] * 1000:.0f} ms; image: "
                f"{res['image']['topics']:,} topics, {res['image']['partitions']:,} partitions, "
                f"{res['image']['state']}",
            )
        )
    return rows, {"migration": {**results, "version": ZK_VERSION, "partitions": a.partitions}}


def _value(r: Row) -> str:
    if r.mode == M_RATE:
        return f"{benchlib.fmt_rate(r.rec_per_s)} records/s"
    return f"{r.best_s:.2f} s"


def _ratio(r: Row) -> str:
    return "ref" if r.is_ref else ("" if r.ratio is None else f"{r.ratio:.2f}x")


def print_table(rows: list[Row]) -> str:
    rows = [r for r in rows if r.suite == S]
    if not rows:
        return ""
    out = [
        "== 8. ZooKeeper-to-KRaft migration's copy: kraftkit's controller vs Kafka's ('kraftkit x' = Kafka's "
        "time / kraftkit's, kraftkit's records/s / Kafka's) =="
    ]
    order = {m: i for i, m in enumerate([M_TIME, M_RATE])}
    rows = sorted(rows, key=lambda r: (order.get(r.mode, 9), not r.is_ref))
    out.append(
        benchlib.table(
            rows,
            ["ZooKeeper", "measure", "implementation", "value", "kraftkit x", "detail"],
            lambda r: [r.dataset, r.mode, r.impl, _value(r), _ratio(r), r.note],
        )
    )
    out.append("")
    return "\n".join(out)


def targets(rows: list[Row]) -> list[dict]:
    res = []
    for r in rows:
        if r.suite != S or r.is_ref or r.ratio is None:
            continue
        what = (
            "migration time: at least as fast as Kafka's controller"
            if r.mode == M_TIME
            else "copy rate: at least Kafka's controller's"
        )
        res.append({"target": what, "dataset": r.dataset, "value": f"{r.ratio:.2f}x", "met": r.ratio >= 1.0})
    return res


def describe(extra: dict) -> str:
    m = extra.get("migration") or {}
    parts = []
    for side in ("kraftkit", "kafka"):
        res = m.get(side)
        if res:
            parts.append(f"{side} {res['loadavg_start'][0]:.1f} -> {res['loadavg_end'][0]:.1f}")
    return (
        f"migration suite (a real ZooKeeper, Kafka {m.get('version')}'s controller, "
        f"{m.get('partitions', 0):,} partitions): load average " + ", ".join(parts)
    )


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partitions", type=int, default=10_000, help="partitions in ZooKeeper (default 10,000)")
    p.add_argument("--topic-partitions", type=int, default=10, help="partitions of each topic (default 10)")
    p.add_argument("--no-kafka", action="store_true", help="kraftkit's side only")
    p.add_argument("--work-dir", metavar="DIR", help="keep ZooKeeper's and the controllers' directories and logs here")
    p.add_argument("--json", metavar="PATH")
    a = p.parse_args(argv)
    if a.partitions < 1 or a.topic_partitions < 1:
        p.error("--partitions and --topic-partitions must be at least 1")
    return a


def main(argv=None) -> int:
    return benchlib.suite_main(parse(argv), sys.modules[__name__])


if __name__ == "__main__":
    sys.exit(main())
