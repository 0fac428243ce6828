"""The end of the live ZooKeeper migration against real parts: a real ZooKeeper and two Kafka 3.9.2
ZooKeeper-mode brokers (live.py's LiveCluster), taken over by a kraftkit controller. Then,
as Kafka 3.9's "Migrating brokers to KRaft" says, each broker is restarted in KRaft mode (same id as
``node.id``, ``process.roles=broker``, the quorum's configs, no ZooKeeper configs) on its old log
directory: with one broker in KRaft mode and the other still in ZooKeeper mode every record
produced before is consumed; with both in KRaft mode the controller, restarted with the migration
disabled, finalizes: POST_MIGRATION in its image (``kraftkit metadata image``) and its log, and a
topic created afterwards is not written to ZooKeeper. (Every partition has two replicas: a partition
whose only replica is on a restarted broker stays without a leader, since this controller elects no
leader when a broker unfences during the migration yet; see docs/migration.md.)"""

from __future__ import annotations

import json
import time

import pytest

from kraftkit.metadata.image import load_image
from tests.cli.test_json_schema import check_output
from tests.harness import jars, tools
from tests.harness.jars import HarnessError
from tests.migration.live import LiveCluster, MigratingZkBroker, roll, wait_broker_log, wait_log
from tests.migration.test_offline_zk import kraftkit

pytestmark = [pytest.mark.kafka, pytest.mark.zookeeper, pytest.mark.timeout(900)]

CONTROLLER_ID = 3000
BROKERS = (1, 2)
TOPICS = {"orders": 2, "audit": 2}


class Broker(MigratingZkBroker):
    """A Kafka 3.9.2 broker: ZooKeeper mode (with the migration's configs once ``migrate_to`` is
    set), then KRaft mode once ``kraft`` is set, on the same log directory and port."""

    kraft = False

    def properties(self) -> dict[str, object]:
        props = super().properties()
        if not self.kraft:
            return props
        for k in (
            "broker.id",
            "zookeeper.connect",
            "inter.broker.protocol.version",
            "zookeeper.metadata.migration.enable",
        ):
            props.pop(k, None)
        props.update(
            {
                "process.roles": "broker",
                "node.id": self.node_id,
                "controller.quorum.voters": self.migrate_to,
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                # (Kafka's docs: AclAuthorizer is ZooKeeper's; a KRaft broker takes StandardAuthorizer)
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            }
        )
        return props

    def is_ready(self) -> bool:
        if not self.kraft:
            return super().is_ready()
        if self.proc is None or self.proc.poll() is not None:
            raise HarnessError(f"Kafka 3.9.2 KRaft-mode broker {self.node_id} exited.\n{self.log_tail()}")
        return "Kafka Server started" in self._new_log_text() and self._port_open(self.broker_port)


def consumed(boot: str, name: str) -> list[bytes]:
    return sorted(r["value"] for r in tools.consume(jars.KAFKA_3, boot, name))


def test_brokers_restarted_in_kraft_mode_keep_serving_and_the_controller_finalizes(kafka_jars, tmp_path):
    with LiveCluster(tmp_path, BROKERS, broker_cls=Broker) as live:
        zk, brokers, boot, client = live.zk, live.brokers, live.boot, live.client
        for name, parts in TOPICS.items():
            live.create_topic(name, parts, 2)
        live.produce(
            {
                name: [
                    {"key": f"k{i}".encode(), "value": f"{name}-{i}".encode(), "partition": i % parts}
                    for i in range(20)
                ]
                for name, parts in TOPICS.items()
            }
        )
        expected = {name: sorted(f"{name}-{i}".encode() for i in range(20)) for name in TOPICS}

        quorum = live.migrate()
        meta, controller = quorum.dirs[CONTROLLER_ID], quorum.procs[CONTROLLER_ID]
        # each broker hears its partitions from controller 3000 (its own log says so): in the full
        # LeaderAndIsr if it was unfenced at the takeover, else in the one sent once it is
        for n in brokers.values():
            wait_broker_log(
                n, rf"Handling LeaderAndIsr request correlationId \d+ from controller {CONTROLLER_ID} ", 120
            )

        # broker 1 in KRaft mode, broker 2 still in ZooKeeper mode: every record is served
        roll(brokers[1], kraft=True)
        for name in TOPICS:
            assert consumed(boot, name) == expected[name], name

        # broker 2 too; dual writes go on: a topic created now is in ZooKeeper
        roll(brokers[2], kraft=True)
        for name in TOPICS:
            assert consumed(boot, name) == expected[name], name
        live.create_topic("during", 1, 2)
        deadline = time.monotonic() + 60
        while client.exists("/brokers/topics/during") is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert client.exists("/brokers/topics/during") is not None

        # the controller restarted with the migration disabled finalizes
        assert quorum.stop() == {CONTROLLER_ID: 0}
        quorum.disable_migration()
        quorum.start()
        controller = quorum.procs[CONTROLLER_ID]
        wait_log(controller, "completing the ZK migration", 120)
        live.create_topic("after", 1, 2)
        for name in TOPICS:
            assert consumed(boot, name) == expected[name], name
        for n in brokers.values():
            n.stop()
        assert quorum.stop() == {CONTROLLER_ID: 0}
        image = load_image(meta)
        assert image.zk_migration_state == 3  # POST_MIGRATION (Kafka's ZkMigrationState id)
        assert "after" in image.topic_ids and "during" in image.topic_ids
        shown = kraftkit("metadata", "image", str(meta), "--json")
        assert shown.returncode == 0, shown.stderr
        assert "POST_MIGRATION" in shown.stdout
        got = kraftkit("migrate", "status", "--zookeeper", zk.connect, "--controller-dir", meta, "--json")
        assert got.returncode == 0, got.stderr
        assert check_output("migrate status", got.stdout) == []
        st = json.loads(got.stdout)
        assert (st["zkMigrationState"], st["kraftZkMigrationState"]) == ("POST_MIGRATION", "POST_MIGRATION")
        text = kraftkit("migrate", "status", "--zookeeper", zk.connect, "--controller-dir", meta)
        assert "ZK migration state: POST_MIGRATION" in text.stdout and "rollback" in text.stdout
        # ZooKeeper is no longer written
        assert client.exists("/brokers/topics/after") is None
        assert client.exists("/brokers/topics/during") is not None
