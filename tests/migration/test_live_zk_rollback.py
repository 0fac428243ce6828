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

import pytest

from kraftkit.cli.migrate import _rollback_refused_by
from tests.cli.test_json_schema import check_output
from tests.harness import jars
from tests.migration.live import LiveCluster, roll, wait_until
from tests.migration.test_live_zk_finalize import Broker, consumed
from tests.migration.test_offline_zk import describe, kraftkit

pytestmark = [pytest.mark.kafka, pytest.mark.zookeeper, pytest.mark.timeout(900)]

CONTROLLER_ID = 3000
BROKERS = (1, 2)


def test_a_migration_rolled_back_before_finalizing_keeps_every_record_and_topic(kafka_jars, tmp_path):
    with LiveCluster(tmp_path, BROKERS, broker_cls=Broker) as live:
        zk, brokers, boot, client, cluster_id = live.zk, live.brokers, live.boot, live.client, live.cluster_id
        live.create_topic("orders", 2, 2)

        def produce(topic: str, tag: str, n: int) -> list[bytes]:
            values = [f"{topic}-{tag}-{i}".encode() for i in range(n)]
            live.produce({topic: [{"key": b"k", "value": v} for v in values]})
            return values

        expected = {"orders": produce("orders", "zk", 20)}

        quorum = live.migrate()
        meta, controller = quorum.dirs[CONTROLLER_ID], quorum.procs[CONTROLLER_ID]

        # during the migration: a topic created through the brokers (forwarded to the kraftkit
        # controller, dual-written) and records produced to both topics
        live.create_topic("during", 2, 2)
        wait_until(
            "the topic created during the migration in ZooKeeper",
            lambda: client.exists("/brokers/topics/during/partitions/1/state") is not None,
            60,
        )
        during_id = json.loads(client.get("/brokers/topics/during")[0])["topic_id"]
        expected["during"] = produce("during", "migration", 15)
        expected["orders"] += produce("orders", "migration", 10)

        # broker 1 in KRaft mode: no rollback until it is a ZooKeeper-mode broker again
        roll(brokers[1], kraft=True)
        refused = wait_until(
            "broker 1's KRaft registration in the controller's log", lambda: _rollback_refused_by(meta), 60
        )
        got = kraftkit("migrate", "rollback", "--zookeeper", zk.connect, "--controller-dir", meta)
        assert got.returncode == 1, got
        assert "broker(s) 1 run in KRaft mode" in got.stderr and refused[1] in got.stderr, got.stderr
        roll(brokers[1], kraft=False)
        wait_until(
            "broker 1 registered as a ZooKeeper-mode broker again", lambda: _rollback_refused_by(meta) is None, 120
        )
        for name, values in expected.items():
            assert consumed(boot, name) == sorted(values), name

        # refused while the controller runs; it would claim ZooKeeper again
        got = kraftkit("migrate", "rollback", "--zookeeper", zk.connect, "--bootstrap-controller", controller.address)
        assert got.returncode == 1 and "a controller still answers there" in got.stderr, got
        assert json.loads(client.get("/controller")[0])["brokerid"] == CONTROLLER_ID
        address = controller.address
        assert quorum.stop() == {CONTROLLER_ID: 0}

        dry = kraftkit(
            "migrate", "rollback", "--zookeeper", zk.connect, "--controller-dir", meta, "--dry-run", "--json"
        )
        assert dry.returncode == 0, dry.stderr
        assert json.loads(dry.stdout)["wouldDelete"] == ["/controller", "/migration"]
        assert client.exists("/migration") is not None
        migration = json.loads(client.get("/migration")[0])
        got = kraftkit(
            "migrate",
            "rollback",
            "--zookeeper",
            zk.connect,
            "--controller-dir",
            meta,
            "--bootstrap-controller",
            address,
            "--json",
        )
        assert got.returncode == 0, got.stderr
        assert check_output("migrate rollback", got.stdout) == []
        out = json.loads(got.stdout)
        assert out["deleted"] == ["/controller", "/migration"] and out["controller"]["id"] == CONTROLLER_ID
        assert out["migration"] == {
            "kraftControllerId": migration["kraft_controller_id"],
            "kraftControllerEpoch": migration["kraft_controller_epoch"],
            "kraftMetadataOffset": migration["kraft_metadata_offset"],
            "kraftMetadataEpoch": migration["kraft_metadata_epoch"],
        }
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
        live.roll(migrate_to=None)
        topics = describe(jars.KAFKA_3, boot)
        assert {"orders", "during"} <= set(topics)
        assert topics["during"]["id"] == during_id
        for name, values in expected.items():
            assert consumed(boot, name) == sorted(values), name
        live.create_topic("after", 1, 2)
        assert consumed(boot, "after") == []
        expected["after"] = produce("after", "zk-again", 5)
        assert consumed(boot, "after") == sorted(expected["after"])
        st = kraftkit("migrate", "status", "--zookeeper", zk.connect, "--json")
        assert st.returncode == 0, st.stderr
        assert check_output("migrate status", st.stdout) == []
        assert (json.loads(st.stdout)["zkMigrationState"], json.loads(st.stdout)["clusterId"]) == ("NONE", cluster_id)
