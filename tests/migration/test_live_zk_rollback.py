"""Rolling a live migration (KIP-866) back to ZooKeeper mode before it is finalized, with real parts
(a real ZooKeeper, two Kafka 3.9.2 brokers, ``kraftkit controller run`` with the migration enabled),
by Kafka 3.9's "Reverting to ZooKeeper mode During the Migration" and ``kraftkit migrate rollback``:

* the takeover, then a topic created through the brokers during the migration (forwarded to the
  kraftkit controller, dual-written to ZooKeeper) and records produced to it;
* broker 1 restarted in KRaft mode: ``migrate rollback --controller-dir`` refuses, naming it; it is
  restarted as a ZooKeeper-mode broker with the migration enabled (Kafka's "brokers in KRaft mode"
  step) and registers as one again;
* ``migrate rollback --bootstrap-controller`` refuses while the controller answers; once it is
  stopped, the command deletes ``/controller`` and ``/migration`` and prints what ``/migration`` held;
* a ZooKeeper-mode broker is the controller again; the brokers are rolled without the migration's
  configs; every record produced before and during the migration is consumed back, the topic created
  during it is served, and a topic created afterwards in ZooKeeper mode works: nothing the KRaft side
  took was lost, because the dual writes had put it in ZooKeeper."""

from __future__ import annotations

import json
import time

import pytest

from kraftkit.cli.migrate import _rollback_refused_by
from kraftkit.features.storage.format import format_storage
from tests._procs import KraftkitProcess
from tests.cli.test_json_schema import check_output
from tests.harness import jars, tools
from tests.harness.node import free_port
from tests.migration.test_live_zk import wait_log
from tests.migration.test_live_zk_finalize import Broker, consumed
from tests.migration.test_offline_zk import ZooKeeper, describe, kraftkit

pytestmark = [pytest.mark.kafka, pytest.mark.zookeeper, pytest.mark.timeout(900)]

CONTROLLER_ID = 3000
BROKERS = (1, 2)


def wait_until(what: str, ok, timeout: float):
    deadline = time.monotonic() + timeout
    while True:
        got = ok()
        if got or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert got, f"never: {what}"
    return got


def roll(broker: Broker, **changes) -> None:
    broker.stop()
    for k, v in changes.items():
        setattr(broker, k, v)
    broker.start()


def test_a_migration_rolled_back_before_finalizing_keeps_every_record_and_topic(kafka_jars, tmp_path):
    zk = ZooKeeper(tmp_path / "zk")
    brokers = {b: Broker(tmp_path / f"broker-{b}", b, zk.connect) for b in BROKERS}
    controller: KraftkitProcess | None = None
    client = None
    try:
        zk.start()
        for n in brokers.values():
            n.launch()
        for n in brokers.values():
            n.wait_ready()
        boot = ",".join(n.bootstrap for n in brokers.values())
        tools.topic_command(jars.KAFKA_3, boot, ["--create", "--topic", "orders", "--partitions", "2",
                                                 "--replication-factor", "2"])

        def produce(topic: str, tag: str, n: int) -> list[bytes]:
            values = [f"{topic}-{tag}-{i}".encode() for i in range(n)]
            jobs = [{"topic": topic, "props": {"acks": "all"},
                     "records": [{"key": b"k", "value": v} for v in values]}]
            assert len(tools.produce(jars.KAFKA_3, boot, jobs)) == n
            return values

        expected = {"orders": produce("orders", "zk", 20)}

        from kazoo.client import KazooClient

        client = KazooClient(hosts=zk.connect, timeout=10)
        client.start(timeout=10)
        cluster_id = json.loads(client.get("/cluster/id")[0])["id"]

        port = free_port()
        meta = tmp_path / "controller"
        format_storage([meta], cluster_id=cluster_id, node_id=CONTROLLER_ID, release_version="3.9",
                       no_initial_controllers=True)
        voters = f"{CONTROLLER_ID}@127.0.0.1:{port}"
        config = tmp_path / "controller.properties"
        config.write_text("\n".join([
            "process.roles=controller", f"node.id={CONTROLLER_ID}", f"controller.quorum.voters={voters}",
            f"listeners=CONTROLLER://127.0.0.1:{port}", "controller.listener.names=CONTROLLER",
            f"metadata.log.dir={meta}", "zookeeper.metadata.migration.enable=true", f"zookeeper.connect={zk.connect}",
            ""]))
        controller = KraftkitProcess(["controller", "run"], ["--config", str(config)], tmp_path / "controller.log",
                                     timeout=120)
        for n in brokers.values():
            roll(n, migrate_to=voters)
        wait_log(controller, "Completed migration of metadata from ZooKeeper to KRaft", 180)

        # during the migration: a topic created through the brokers (forwarded to the kraftkit
        # controller, dual-written) and records produced to both topics
        tools.topic_command(jars.KAFKA_3, boot, ["--create", "--topic", "during", "--partitions", "2",
                                                 "--replication-factor", "2"])
        wait_until("the topic created during the migration in ZooKeeper",
                   lambda: client.exists("/brokers/topics/during/partitions/1/state") is not None, 60)
        during_id = json.loads(client.get("/brokers/topics/during")[0])["topic_id"]
        expected["during"] = produce("during", "migration", 15)
        expected["orders"] += produce("orders", "migration", 10)

        # broker 1 in KRaft mode: no rollback until it is a ZooKeeper-mode broker again
        roll(brokers[1], kraft=True)
        refused = wait_until("broker 1's KRaft registration in the controller's log",
                             lambda: _rollback_refused_by(meta), 60)
        got = kraftkit("migrate", "rollback", "--zookeeper", zk.connect, "--controller-dir", meta)
        assert got.returncode == 1, got
        assert "broker(s) 1 run in KRaft mode" in got.stderr and refused[1] in got.stderr, got.stderr
        roll(brokers[1], kraft=False)
        wait_until("broker 1 registered as a ZooKeeper-mode broker again",
                   lambda: _rollback_refused_by(meta) is None, 120)
        for name, values in expected.items():
            assert consumed(boot, name) == sorted(values), name

        # refused while the controller runs; it would claim ZooKeeper again
        got = kraftkit("migrate", "rollback", "--zookeeper", zk.connect, "--bootstrap-controller", controller.address)
        assert got.returncode == 1 and "a controller still answers there" in got.stderr, got
        assert json.loads(client.get("/controller")[0])["brokerid"] == CONTROLLER_ID
        address = controller.address
        assert controller.stop() == 0
        controller = None

        dry = kraftkit("migrate", "rollback", "--zookeeper", zk.connect, "--controller-dir", meta, "--dry-run", "--json")
        assert dry.returncode == 0, dry.stderr
        assert json.loads(dry.stdout)["wouldDelete"] == ["/controller", "/migration"]
        assert client.exists("/migration") is not None
        migration = json.loads(client.get("/migration")[0])
        got = kraftkit("migrate", "rollback", "--zookeeper", zk.connect, "--controller-dir", meta,
                       "--bootstrap-controller", address, "--json")
        assert got.returncode == 0, got.stderr
        assert check_output("migrate rollback", got.stdout) == []
        out = json.loads(got.stdout)
        assert out["deleted"] == ["/controller", "/migration"] and out["controller"]["id"] == CONTROLLER_ID
        assert out["migration"] == {"kraftControllerId": migration["kraft_controller_id"],
                                    "kraftControllerEpoch": migration["kraft_controller_epoch"],
                                    "kraftMetadataOffset": migration["kraft_metadata_offset"],
                                    "kraftMetadataEpoch": migration["kraft_metadata_epoch"]}
        assert client.exists("/migration") is None

        # a ZooKeeper-mode broker is the controller again
        def zk_controller():
            if client.exists("/controller") is None:
                return None
            c = json.loads(client.get("/controller")[0])
            return c["brokerid"] if c["brokerid"] in BROKERS and c.get("kraftControllerEpoch", -1) < 0 else None

        wait_until("a ZooKeeper-mode broker in /controller", zk_controller, 120)
        again = kraftkit("migrate", "rollback", "--zookeeper", zk.connect)
        assert again.returncode == 0 and "nothing to roll back" in again.stdout, again

        # the brokers rolled without the migration's configs: every record and topic is there
        for n in brokers.values():
            roll(n, migrate_to=None)
        topics = describe(jars.KAFKA_3, boot)
        assert {"orders", "during"} <= set(topics)
        assert topics["during"]["id"] == during_id
        for name, values in expected.items():
            assert consumed(boot, name) == sorted(values), name
        tools.topic_command(jars.KAFKA_3, boot, ["--create", "--topic", "after", "--partitions", "1",
                                                 "--replication-factor", "2"])
        assert consumed(boot, "after") == []
        expected["after"] = produce("after", "zk-again", 5)
        assert consumed(boot, "after") == sorted(expected["after"])
        st = kraftkit("migrate", "status", "--zookeeper", zk.connect, "--json")
        assert st.returncode == 0, st.stderr
        assert check_output("migrate status", st.stdout) == []
        assert (json.loads(st.stdout)["zkMigrationState"], json.loads(st.stdout)["clusterId"]) == ("NONE", cluster_id)
    finally:
        if client is not None:
            client.stop()
            client.close()
        if controller is not None:
            controller.stop()
        for n in brokers.values():
            n.stop()
        zk.stop()
