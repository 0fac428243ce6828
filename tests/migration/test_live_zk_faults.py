"""Faults during the live ZooKeeper-to-KRaft migration (KIP-866), against real parts: a real ZooKeeper
(3.8.4, from Kafka 3.9.2's jars), Kafka 3.9.2 ZooKeeper-mode brokers and ``kraftkit controller run``
with ``zookeeper.metadata.migration.enable=true``, set up as ``test_live_zk`` sets them up (whose
helpers this file uses).

* The controller's ZooKeeper session expires in the middle of the copy: the controller is frozen
  (SIGSTOP, as a long GC pause or a stalled VM freezes it) once the copy has committed a batch, until
  ZooKeeper has expired its session (6 s), then thawed. The copy is aborted (an
  ``AbortTransactionRecord`` after committed batches, in the log) and done again on a new session,
  ending in MIGRATION with an image equal to ZooKeeper.
* During the dual writes: a znode the dual write must set is made read-only with a ZooKeeper ACL
  (so ZooKeeper answers NoAuth) and a topic config altered through the controller: the KRaft
  commit stays, the controller says the write failed, ``migrate status`` shows ZooKeeper behind;
  the ACL lifted, the sync brings ZooKeeper level with the image. A write made as the ZooKeeper
  controller before the takeover made its writes (a ``multi`` checking ``/controller_epoch`` at
  the zkVersion it had) fails with BadVersion and changes nothing, and the broker that was that
  ZooKeeper controller resigned and wrote nothing after the claim. A ZooKeeper-mode broker killed
  (-9) and started again registers again with the controller, takes the UpdateMetadata of every
  partition and the LeaderAndIsr of all of its own, its partitions are led and in sync again.

Each test ends with nothing lost: the controller's KRaft image equals what ZooKeeper holds, the
migration state is MIGRATION, and every record produced is consumed back."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from kraftkit.metadata.image import load_image
from kraftkit.migration import zk_reader
from kraftkit.protocol import KafkaConnection
from kraftkit.protocol.messages import ApiKey, Errors
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.migration.live import LiveCluster, kraft_view, status, wait_broker_log, wait_log, wait_until, zk_view
from tests.migration.test_offline_zk import kraftkit

pytestmark = [pytest.mark.kafka, pytest.mark.zookeeper, pytest.mark.timeout(900)]

CONTROLLER_ID = 3000
BROKERS = (1, 2)
#: the controller's ZooKeeper session timeout (the brokers keep Kafka's 18 s)
SESSION_MS = 6000


class Migration(LiveCluster):
    """A ZooKeeper, two Kafka 3.9.2 ZooKeeper-mode brokers with ``topics`` (name -> (partitions,
    replication factor, configs)) holding ``records`` records each, produced with acks=all
    (:meth:`populate`), and a kraftkit controller run with ``controller_conf`` too
    (:meth:`start_controller`) that takes them over once the brokers are rolled with the
    migration's configs (:meth:`restart_brokers_for_the_migration`); ``close`` stops them all."""

    def __init__(self, tmp_path: Path, topics: dict[str, tuple[int, int, dict[str, str]]], records: int,
                 controller_conf: dict[str, object]) -> None:
        super().__init__(tmp_path, BROKERS)
        self.topics = topics
        self.records = records
        self.controller_conf = controller_conf
        self.controller: KraftkitProcess | None = None
        self.meta = tmp_path / f"controller-{CONTROLLER_ID}"
        #: every record produced: topic -> [(key, value)]
        self.produced: dict[str, list[tuple[bytes, bytes]]] = {t: [] for t in topics}

    def populate(self) -> None:
        self.__enter__()
        assert self.client is not None
        # CreateTopics goes to the ZooKeeper controller (the others answer NOT_CONTROLLER)
        deadline = time.monotonic() + 60
        while True:
            got = self.client.exists("/controller") and self.client.get("/controller")
            broker = self.brokers.get(json.loads(got[0])["brokerid"]) if got else None
            if broker is not None:
                with KafkaConnection("127.0.0.1", broker.broker_port, timeout=60) as conn:
                    created = conn.request(ApiKey.CREATE_TOPICS, conn.version_for(ApiKey.CREATE_TOPICS), {
                        "Topics": [{"Name": name, "NumPartitions": parts, "ReplicationFactor": rf, "Assignments": [],
                                    "Configs": [{"Name": k, "Value": v} for k, v in configs.items()]}
                                   for name, (parts, rf, configs) in self.topics.items()],
                        "timeoutMs": 120000, "validateOnly": False})
                if {t["ErrorCode"] for t in created["Topics"]} != {Errors.NOT_CONTROLLER}:
                    break
            assert time.monotonic() < deadline, "no ZooKeeper controller took CreateTopics"
            time.sleep(1)
        assert [t["ErrorCode"] for t in created["Topics"]] == [0] * len(self.topics), created
        self.produce_records("before")

    def produce_records(self, tag: str, topics: list[str] | None = None) -> None:
        batch = {}
        for name in topics or list(self.topics):
            parts = self.topics[name][0]
            recs = [(f"{name}-{tag}-k{i}".encode(), f"{name}-{tag}-v{i}".encode()) for i in range(self.records)]
            batch[name] = [{"key": k, "value": v, "partition": i % parts} for i, (k, v) in enumerate(recs)]
            self.produced[name] += recs
        self.produce(batch)

    def start_controller(self) -> KraftkitProcess:
        self.q = self.quorum(extra=self.controller_conf)
        assert self.q.dirs[CONTROLLER_ID] == self.meta
        self.q.start()
        self.voters = self.q.voters
        self.controller = self.q.procs[CONTROLLER_ID]
        return self.controller

    def restart_brokers_for_the_migration(self) -> None:
        self.roll(migrate_to=self.voters)

    def wait_in_sync(self, timeout: float = 120) -> dict:
        """``migrate status`` once every partition is led and in sync in ZooKeeper."""
        assert self.controller is not None
        deadline = time.monotonic() + timeout
        while True:
            got = status(self.zk.connect, self.controller.address)
            if not got["partitionsOutOfSync"] or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert got["partitionsOutOfSync"] == [], got
        return got

    def check_nothing_lost(self) -> None:
        """The controller stopped: its image equals what ZooKeeper holds, in state MIGRATION, and
        every record produced is consumed back from the ZooKeeper-mode brokers."""
        source = zk_reader.KazooSource(self.zk.connect)
        try:
            cluster = zk_reader.read_cluster(source)
        finally:
            source.close()
        assert self.controller is not None
        assert self.controller.stop() == 0
        self.controller = None
        shown = kraftkit("metadata", "image", self.meta, "--path", "/features", "--json", "-q")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["zkMigrationState"] == "MIGRATION"
        kview, zview = kraft_view(load_image(self.meta)), zk_view(cluster)
        assert kview == zview
        assert set(kview["topics"]) == set(self.topics)
        for name in self.topics:
            got = tools.consume(jars.KAFKA_3, self.boot, name)
            assert sorted((r["key"], r["value"]) for r in got) == sorted(self.produced[name]), name

def dump(meta: Path) -> list[dict]:
    """``kraftkit metadata dump --json`` of the controller's metadata log."""
    got = kraftkit("metadata", "dump", meta / "__cluster_metadata-0", "--json")
    assert got.returncode == 0, got.stderr
    lines = [json.loads(line) for line in got.stdout.splitlines() if line.strip()]
    return [r for r in lines if "offset" in r and "type" in r]  # (the records, not the control batches)


def test_a_zookeeper_session_expiry_in_the_copy_aborts_it_and_a_new_session_copies_again(kafka_jars, tmp_path):
    # enough partitions for a copy of hundreds of one-record batches, each committed after a
    # check of /controller_epoch in ZooKeeper
    topics = {f"bulk-{i:02d}": (20, 1, {}) for i in range(25)}
    topics["orders"] = (3, 2, {"retention.ms": "86400000"})
    m = Migration(tmp_path, topics, 10, {"zookeeper.metadata.migration.min.batch.size": 1,
                                         "zookeeper.session.timeout.ms": SESSION_MS})
    try:
        m.populate()
        controller = m.start_controller()
        m.restart_brokers_for_the_migration()
        # (read often: the copy lasts seconds)
        deadline = time.monotonic() + 180
        while "ZK migration: copy batch 1 of" not in controller.log_path.read_text(errors="replace"):
            assert time.monotonic() < deadline and controller.proc.poll() is None, controller.log_tail(80)
            time.sleep(0.05)
        # the controller frozen (as a long GC pause or a stalled VM freezes it) past its session
        # timeout: ZooKeeper expires its session; thawed, its client finds the session gone
        os.kill(controller.proc.pid, signal.SIGSTOP)
        log = controller.log_path.read_text(errors="replace")
        assert "Completed migration of metadata" not in log, "the copy ended before the controller was frozen"
        try:
            zk_log = m.zk.workdir / "zookeeper.log"
            wait_until("ZooKeeper expires the controller's session", lambda: re.search(
                rf"Expiring session (0x[0-9a-f]+), timeout of {SESSION_MS}ms exceeded",
                zk_log.read_text(errors="replace")), SESSION_MS / 1000 * 2 + 60)
        finally:
            os.kill(controller.proc.pid, signal.SIGCONT)
        log = wait_log(controller, "Completed migration of metadata from ZooKeeper to KRaft", 240)
        expired = re.findall(rf"Expiring session (0x[0-9a-f]+), timeout of {SESSION_MS}ms exceeded",
                             zk_log.read_text(errors="replace"))
        assert len(expired) == 1, expired
        # the controller says it: the copy aborted (its next check of /controller_epoch failed), the
        # session expired, a new session, the copy again from its first batch
        abort = re.search(r"ZK migration: aborting the copy: ZooKeeper \S+: (ConnectionLoss|SessionExpiredError)", log)
        lost = log.find("session expired (or closed); the next calls make a new session")
        new = re.search(r"ZooKeeper \S+: connected \(session (0x[0-9a-f]+)\)", log[max(lost, 0):])
        assert abort is not None and lost > 0 and new is not None, controller.log_tail(80)
        assert new[1] != expired[0]
        again = list(re.finditer(r"ZK migration: copy batch 1 of \d+ committed \(1 of \d+ records, up to offset "
                                 r"(\d+)\)", log))
        assert len(again) == 2 and again[1].start() > max(abort.start(), lost), controller.log_tail(80)
        # the log: the first copy's transaction aborted after some of its batches, the second ended
        records = dump(m.meta)
        copies, begun = [], None
        for r in records:
            if r["type"] == "BEGIN_TRANSACTION_RECORD" and r["data"]["name"] == "ZK Migration":
                begun = r["offset"]
            elif r["type"] in ("END_TRANSACTION_RECORD", "ABORT_TRANSACTION_RECORD") and begun is not None:
                copies.append((begun, r["offset"], r["type"]))
                begun = None
        assert [t for *_, t in copies] == ["ABORT_TRANSACTION_RECORD", "END_TRANSACTION_RECORD"], copies
        aborted = [r for r in records if copies[0][0] < r["offset"] < copies[0][1]]
        assert any(r["type"] == "PARTITION_RECORD" for r in aborted), "nothing of the first copy was committed"
        assert copies[1][0] == int(again[1][1]) - 1  # (the new copy's transaction begins just before)
        copied = [r for r in records if copies[1][0] < r["offset"] < copies[1][1]]
        assert len([r for r in copied if r["type"] == "PARTITION_RECORD"]) == sum(p for p, _rf, _c in topics.values())
        assert copied[-1]["type"] == "ZK_MIGRATION_STATE_RECORD"
        assert m.wait_in_sync()["zkMigrationState"] == "MIGRATION"
        m.check_nothing_lost()
    finally:
        m.close()


def count(proc: KraftkitProcess, text: str) -> int:
    return proc.log_path.read_text(errors="replace").count(text)


def test_faults_in_dual_write_a_refused_write_a_zookeeper_controller_left_behind_and_a_broker_killed(
        kafka_jars, tmp_path):
    topics = {"orders": (3, 2, {"retention.ms": "86400000"}), "audit": (2, 1, {"cleanup.policy": "compact"})}
    m = Migration(tmp_path, topics, 20, {})
    try:
        m.populate()
        client = m.client
        assert client is not None
        controller = m.start_controller()
        m.restart_brokers_for_the_migration()
        log = wait_log(controller, "Completed migration of metadata from ZooKeeper to KRaft", 180)
        claimed = re.search(r"ZooKeeper controller epoch (\d+) \(/controller_epoch zkVersion (\d+)\)", log)
        assert claimed is not None, log
        epoch, version = int(claimed[1]), int(claimed[2])
        kraft_epoch = json.loads(client.get("/controller")[0])["kraftControllerEpoch"]
        claim_zxid = client.get("/controller_epoch")[1].mzxid
        assert m.wait_in_sync()["zkMigrationState"] == "MIGRATION"
        host, port_text = controller.address.rsplit(":", 1)

        # --- the ZooKeeper controller before the takeover: the broker whose own log says it was
        # elected with the epoch and zkVersion just before the claim's; it resigned on the claim
        elected = f"successfully elected as the controller. Epoch incremented to {epoch - 1} and epoch zk version " \
                  f"is now {version - 1}"
        old = [b for b, n in m.brokers.items() if elected in n.server_log.read_text(errors="replace")]
        assert len(old) == 1, old
        old_log = m.brokers[old[0]].server_log
        wait_until(f"broker {old[0]}'s controller resigns",
                   lambda: "Resigned" in old_log.read_text(errors="replace").rsplit(elected, 1)[1], 60)
        # a write as that controller makes it (KafkaZkClient: a multi checking /controller_epoch at
        # its zkVersion, then the data, here a partition state conditional on its own zkVersion)
        from kazoo.exceptions import BadVersionError, RuntimeInconsistency

        state_path = "/brokers/topics/orders/partitions/0/state"
        before = client.get(state_path)
        zombie = dict(json.loads(before[0]), controller_epoch=epoch - 1, leader_epoch=999)
        t = client.transaction()
        t.check("/controller_epoch", version - 1)
        t.set_data(state_path, json.dumps(zombie).encode(), before[1].version)
        results = t.commit()
        assert [type(r) for r in results] == [BadVersionError, RuntimeInconsistency], results  # (nothing applied)
        after = client.get(state_path)
        assert (after[0], after[1].version) == (before[0], before[1].version)

        # --- a ZooKeeper write refused: /config/topics/orders readable by anyone, writable only by
        # the test's digest identity; a topic config altered through the kraftkit controller
        from kazoo.security import ACL, ANYONE_ID_UNSAFE, OPEN_ACL_UNSAFE, Permissions, make_digest_acl

        config_path = "/config/topics/orders"
        client.add_auth("digest", "kk:secret")
        client.set_acls(config_path, [make_digest_acl("kk", "secret", all=True), ACL(Permissions.READ, ANYONE_ID_UNSAFE)])
        written = status(m.zk.connect, controller.address)["migration"]["kraftMetadataOffset"]
        with KafkaConnection(host, int(port_text), timeout=30) as conn:
            altered = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, conn.version_for(ApiKey.INCREMENTAL_ALTER_CONFIGS), {
                "Resources": [{"ResourceType": 2, "ResourceName": "orders",
                               "Configs": [{"Name": "retention.ms", "ConfigOperation": 0, "Value": "172800000"}]}],
                "ValidateOnly": False})
        assert [r["ErrorCode"] for r in altered["Responses"]] == [0], altered
        log = wait_log(controller, "failed (/config/topics/orders: NoAuthError)", 60)
        assert re.search(r"a dual write to ZooKeeper \S+ failed \(/config/topics/orders: NoAuthError\); syncing", log)
        # the KRaft commit stays (the controller describes it); ZooKeeper has the old config and
        # /migration the offset it had; migrate status shows the dual writes blocked
        with KafkaConnection(host, int(port_text), timeout=30) as conn:
            described = conn.request(ApiKey.DESCRIBE_CONFIGS, conn.version_for(ApiKey.DESCRIBE_CONFIGS), {
                "Resources": [{"ResourceType": 2, "ResourceName": "orders", "ConfigurationKeys": ["retention.ms"]}],
                "IncludeSynonyms": False, "IncludeDocumentation": False})
        assert [(c["Name"], c["Value"]) for c in described["Results"][0]["Configs"]] == [("retention.ms", "172800000")]
        assert json.loads(client.get(config_path)[0])["config"] == {"retention.ms": "86400000"}
        blocked = wait_until("migrate status shows the dual writes blocked for a second", lambda: (
            s if (s := status(m.zk.connect, controller.address, "--controller-dir", m.meta))["dualWrite"]
            ["zooKeeperBlockingKRaftMillis"] >= 1000 else None), 60)
        assert blocked["migration"]["kraftMetadataOffset"] == blocked["dualWrite"]["lastWrittenOffset"] >= written
        assert re.fullmatch(rf"ZooKeeper {m.zk.connect}: /config/topics/orders: NoAuthError \(offset \d+ not written\)",
                            blocked["dualWrite"]["lastError"]), blocked
        syncs = count(controller, "synced ZooKeeper with the image up to offset")
        text = kraftkit("migrate", "status", "--zookeeper", m.zk.connect, "--controller-dir", m.meta)
        assert text.returncode == 0 and "ZooKeeperBlockingKRaftMillis=" in text.stdout, text
        assert "dual writes: the last write failed: ZooKeeper " in text.stdout, text.stdout
        # the fault lifted: the next sync writes what the image holds
        client.set_acls(config_path, OPEN_ACL_UNSAFE)
        wait_until("ZooKeeper has the altered config", lambda: json.loads(client.get(config_path)[0])["config"] ==
                   {"retention.ms": "172800000"}, 60)
        synced = wait_until("migrate status shows the dual writes caught up", lambda: (
            s if (s := status(m.zk.connect, controller.address, "--controller-dir", m.meta))["dualWrite"]
            ["zooKeeperBlockingKRaftMillis"] == 0 else None), 60)
        assert synced["migration"]["kraftMetadataOffset"] > blocked["migration"]["kraftMetadataOffset"]
        assert synced["dualWrite"]["lastError"] is None
        assert count(controller, "synced ZooKeeper with the image up to offset") > syncs

        # --- a ZooKeeper-mode broker killed (-9) and started again: it registers again, takes from
        # the controller the UpdateMetadata of every partition and the LeaderAndIsr of all of its own
        # (what Kafka's MigrationPropagator sends a new or restarted broker), its partitions are led
        # and in sync again
        registered = count(controller, "Registering broker 2, incarnation ID")
        m.brokers[2].kill()
        wait_log(controller, "fencing broker 2 because its session has timed out", 90)
        # (a ZooKeeper-mode broker starts only once its old session's /brokers/ids/2 is gone: it
        # exits if the znode is there, owned by the old session; ZooKeeper expires it after 18 s)
        wait_until("ZooKeeper expires broker 2's old session", lambda: client.exists("/brokers/ids/2") is None, 90)
        m.brokers[2].start()
        wait_until("broker 2 registers again", lambda: count(controller, "Registering broker 2, incarnation ID")
                   > registered, 120)
        assignments = {name: json.loads(client.get(f"/brokers/topics/{name}")[0])["partitions"] for name in topics}
        mine = sum(2 in replicas for parts in assignments.values() for replicas in parts.values())
        total = sum(len(parts) for parts in assignments.values())
        wait_broker_log(m.brokers[2], rf"Add {total} partitions and deleted 0 partitions from metadata cache in "
                        rf"response to UpdateMetadata request sent by controller {CONTROLLER_ID} epoch {epoch} ", 120)
        wait_broker_log(m.brokers[2], rf"Handling LeaderAndIsr request correlationId \d+ from controller "
                        rf"{CONTROLLER_ID} for {mine} partitions", 120)
        assert m.wait_in_sync()["zkMigrationState"] == "MIGRATION"
        m.produce_records("after")

        # nobody but the KRaft controller wrote a partition state since the claim
        for name, (parts, _rf, _c) in topics.items():
            for p in range(parts):
                data, stat = client.get(f"/brokers/topics/{name}/partitions/{p}/state")
                if stat.mzxid > claim_zxid:
                    assert json.loads(data)["controller_epoch"] == kraft_epoch, (name, p, data)
        assert (int(client.get("/controller_epoch")[0]), client.get("/controller_epoch")[1].version) == \
            (epoch, version)
        assert json.loads(client.get("/controller")[0])["brokerid"] == CONTROLLER_ID
        m.check_nothing_lost()
    finally:
        m.close()
