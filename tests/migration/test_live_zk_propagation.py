"""The controller-to-broker RPCs of the live ZooKeeper migration against real parts: a real
ZooKeeper and two Kafka 3.9.2 ZooKeeper-mode brokers (live.py's LiveCluster), taken over
by a kraftkit controller. After the takeover the brokers live then (unfenced) take the controller's
full UpdateMetadata and LeaderAndIsr (Type FULL, isKRaftController, controller 3000, the ZooKeeper
controller epoch it claimed), one still fenced then (the takeover waits for registrations only, as
Kafka's) the LeaderAndIsr of its partitions once unfenced: both answer without an error, each LeaderAndIsr names the partitions the broker holds (as
Kafka's kafka-topics described them before), the brokers' own logs show the requests of controller
3000, and, since a FULL LeaderAndIsr makes a 3.9 broker drop what it does not name, every record
produced before is still consumed. A Metadata request to each broker lists the brokers and the
partition leaders of the controller's image. The controller is then restarted (a failover: a new
KRaft epoch, ZooKeeper claimed again at the next epoch) and sends the full metadata again, with the
new epoch, which the brokers take too. Last a ZooKeeper-mode broker is restarted: no ZooKeeper
controller is left to tell it its partitions; the controller's incremental LeaderAndIsr (to the
broker's new registration once unfenced) does, and the partitions only it holds serve their records
again. Then the hybrid phase: a topic created through the kraftkit controller (CreateTopics) is
hosted by the ZooKeeper-mode brokers, and what Kafka's console producer wrote to it (acks=all) is
consumed back; broker 1 killed (kill -9), its session expires at the controller, which fences it and
moves the leadership of its partitions to broker 2 (ZooKeeper's state znodes, dual-written, and
broker 2's own Metadata answer say so; broker 2 alone serves every record); broker 1 restarted
follows again and is back in the ISR (broker 2's AlterPartition), and once broker 2 stops (a
controlled shutdown: its leaderships move to broker 1) broker 1 alone serves every record."""

from __future__ import annotations

import json
import re
import time

import pytest

from kraftkit.metadata.image import load_image
from kraftkit.protocol.client import KafkaConnection
from kraftkit.protocol.messages import ApiKey
from tests.harness import jars, tools
from tests.migration.live import (
    LiveCluster,
    MigratingZkBroker,
    console_produce,
    roll,
    wait_broker_log,
    wait_log,
    wait_zk_state,
)
from tests.migration.test_offline_zk import describe

pytestmark = [pytest.mark.kafka, pytest.mark.zookeeper, pytest.mark.timeout(900)]

CONTROLLER_ID = 3000
BROKERS = (1, 2)
TOPICS = {"orders": 3, "audit": 2}
HYBRID = "hybrid"  # created through the kraftkit controller after the takeover


def full_taken(log: str, broker: int, api: str) -> list[tuple[int, int]]:
    """(partitions, ZooKeeper controller epoch) of every full ``api`` the controller's log says
    ``broker`` took."""
    pattern = (
        rf"broker {broker} took the full {api} \((\d+) partitions\) from controller {CONTROLLER_ID}, "
        r"ZooKeeper controller epoch (\d+)"
    )
    return [(int(a), int(b)) for a, b in re.findall(pattern, log)]


def metadata(broker: MigratingZkBroker) -> dict:
    host, port = broker.bootstrap.rsplit(":", 1)
    with KafkaConnection(host, int(port)) as c:
        return c.request(
            ApiKey.METADATA,
            12,
            {"Topics": None, "AllowAutoTopicCreation": False, "IncludeTopicAuthorizedOperations": False},
        )


def test_zookeeper_brokers_take_the_kraftkit_controllers_full_metadata(kafka_jars, tmp_path):
    with LiveCluster(tmp_path, BROKERS) as live:
        brokers, boot, client = live.brokers, live.boot, live.client
        for name, parts in TOPICS.items():
            live.create_topic(name, parts, 2 if name == "orders" else 1)
        live.produce(
            {
                name: [
                    {"key": f"k{i}".encode(), "value": f"{name}-{i}".encode(), "partition": i % parts}
                    for i in range(30)
                ]
                for name, parts in TOPICS.items()
            }
        )
        before = describe(jars.KAFKA_3, boot)
        held = {b: sum(b in r for t in before.values() for r in t["replicas"].values()) for b in BROKERS}
        assert held == {
            1: 3 + sum(1 in before["audit"]["replicas"][p] for p in (0, 1)),
            2: 3 + sum(2 in before["audit"]["replicas"][p] for p in (0, 1)),
        }

        quorum = live.migrate()
        meta, controller = quorum.dirs[CONTROLLER_ID], quorum.procs[CONTROLLER_ID]
        # each broker hears its partitions from controller 3000 (its own log says so): the full
        # LeaderAndIsr if it was live (registered, unfenced) at the takeover; a broker registered but
        # still fenced then (the takeover waits for registrations only, as Kafka's) the LeaderAndIsr
        # of its partitions once unfenced
        for b, n in brokers.items():
            wait_broker_log(
                n,
                rf"Handling LeaderAndIsr request correlationId \d+ from controller {CONTROLLER_ID} "
                rf"for {held[b]} partitions",
                120,
            )
        # (broker 1, restarted first, has long been unfenced at the takeover)
        log = wait_log(controller, "broker 1 took the full UpdateMetadata", 60)
        zk_epoch = int(client.get("/controller_epoch")[0])
        total = sum(t["partitions"] for t in before.values())
        full = [b for b in BROKERS if full_taken(log, b, "LeaderAndIsr")]
        for b in full:
            log = wait_log(controller, f"broker {b} took the full UpdateMetadata", 60)
        for b in full:
            assert full_taken(log, b, "LeaderAndIsr") == [(held[b], zk_epoch)]
            assert full_taken(log, b, "UpdateMetadata") == [(total, zk_epoch)]
            # (a FULL LeaderAndIsr that missed a partition the broker holds would show it as a stray)
            text = brokers[b].server_log.read_text(errors="replace")
            assert re.search(
                rf"While handling full LeaderAndIsr request from KRaft controller {CONTROLLER_ID} "
                r"with correlation id \d+, found 0 stray partition\(s\)",
                text,
            ), brokers[b].log_tail()
        assert "answered" not in log  # (no error answered)

        # nothing was dropped: every record is still there
        for name in TOPICS:
            got = tools.consume(jars.KAFKA_3, boot, name)
            assert sorted(r["value"] for r in got) == sorted(f"{name}-{i}".encode() for i in range(30))

        # a failover: the controller restarted claims ZooKeeper again and sends the full metadata again
        assert quorum.stop() == {CONTROLLER_ID: 0}
        quorum.start()
        controller = quorum.procs[CONTROLLER_ID]
        for b in BROKERS:
            log = wait_log(controller, f"broker {b} took the full UpdateMetadata", 180)
        zk_epoch2 = int(client.get("/controller_epoch")[0])
        assert zk_epoch2 == zk_epoch + 1
        for b in BROKERS:
            log = wait_log(controller, f"broker {b} took the full LeaderAndIsr", 60)
            assert full_taken(log, b, "LeaderAndIsr")[0] == (held[b], zk_epoch2)
            assert full_taken(log, b, "UpdateMetadata")[0] == (total, zk_epoch2)

        # a ZooKeeper-mode broker restarted: no ZooKeeper controller tells it its partitions any more,
        # this controller does (incrementally: the broker's new registration, once unfenced, gets the
        # UpdateMetadata of every partition and the LeaderAndIsr of its own)
        roll(brokers[2])
        text = wait_broker_log(
            brokers[2],
            rf"Handling LeaderAndIsr request correlationId \d+ from controller "
            rf"{CONTROLLER_ID} for {held[2]} partitions",
            120,
        )
        assert f"full LeaderAndIsr request from KRaft controller {CONTROLLER_ID}" not in text  # (INCREMENTAL)
        for name in TOPICS:  # (audit's partitions on broker 2 have no other replica)
            got = tools.consume(jars.KAFKA_3, boot, name)
            assert sorted(r["value"] for r in got) == sorted(f"{name}-{i}".encode() for i in range(30))

        # the hybrid phase: a topic created through the kraftkit controller is hosted by the
        # ZooKeeper-mode brokers (the controller's LeaderAndIsr), and what Kafka's console producer
        # wrote (acks=all) is consumed back
        with KafkaConnection("127.0.0.1", quorum.ports[CONTROLLER_ID], timeout=30) as conn:
            created = conn.request(
                ApiKey.CREATE_TOPICS,
                conn.version_for(ApiKey.CREATE_TOPICS),
                {
                    "Topics": [
                        {"Name": HYBRID, "NumPartitions": 2, "ReplicationFactor": 2, "Assignments": [], "Configs": []}
                    ],
                    "timeoutMs": 30000,
                    "validateOnly": False,
                },
            )
        assert created["Topics"][0]["ErrorCode"] == 0, created
        lines = [f"k{i}:{HYBRID}-{i}" for i in range(20)]
        console_produce(boot, HYBRID, lines)
        values = sorted(line.split(":", 1)[1].encode() for line in lines)
        assert sorted(r["value"] for r in tools.consume(jars.KAFKA_3, boot, HYBRID)) == values

        # kill -9 of a ZooKeeper-mode broker: its session expires at the controller, which fences it
        # and moves the leadership of its partitions to the other broker (a LeaderAndIsr to broker 2,
        # the change dual-written to ZooKeeper)
        brokers[1].kill()
        wait_log(controller, "fencing broker 1 because its session has timed out", 60)
        kraft_epoch = json.loads(client.get("/controller")[0])["kraftControllerEpoch"]
        for p in (0, 1):
            state = wait_zk_state(client, HYBRID, p, lambda s: s["leader"] == 2 and s["isr"] == [2], 60)
            assert state["controller_epoch"] == kraft_epoch  # (written by the KRaft controller)
        answer = metadata(brokers[2])
        hybrid = next(t for t in answer["Topics"] if t["Name"] == HYBRID)
        assert {p["PartitionIndex"]: p["LeaderId"] for p in hybrid["Partitions"]} == {0: 2, 1: 2}
        only2 = brokers[2].bootstrap
        assert sorted(r["value"] for r in tools.consume(jars.KAFKA_3, only2, HYBRID)) == values

        # broker 1 restarted: unfenced, it follows broker 2 again and catches up (broker 2's
        # AlterPartition puts it back in the ISR, written to ZooKeeper)
        deadline = time.monotonic() + 60  # (first ZooKeeper expires the killed broker's session: /brokers/ids/1)
        while client.exists("/brokers/ids/1") is not None and time.monotonic() < deadline:
            time.sleep(0.5)
        brokers[1].start()
        for p in (0, 1):
            wait_zk_state(client, HYBRID, p, lambda s: sorted(s["isr"]) == [1, 2], 120)
        brokers[2].stop()  # (its partitions move to broker 1, in sync: a controlled shutdown)
        for p in (0, 1):
            wait_zk_state(client, HYBRID, p, lambda s: s["leader"] == 1, 60)
        # as Kafka's: the leaderships moved when the shutdown began, which was granted once broker 1
        # had read past those records (the broker stopped only then: its stop() waited for it)
        log = controller.log_path.read_text(errors="replace")
        began = log.rfind("Unfenced broker 2 has requested and been granted a controlled shutdown.")
        granted = log.rfind("The request from broker 2 to shut down has been granted since the lowest active offset")
        assert 0 <= began < granted, controller.log_tail(40)
        assert sorted(r["value"] for r in tools.consume(jars.KAFKA_3, brokers[1].bootstrap, HYBRID)) == values
        brokers[2].start()
        for p in (0, 1):
            wait_zk_state(client, HYBRID, p, lambda s: sorted(s["isr"]) == [1, 2], 120)

        # what the brokers tell a client is what the controller's image holds (read from its log
        # directory before the brokers stop: their controlled shutdowns move leaderships)
        answers = {b: metadata(n) for b, n in brokers.items()}
        image = load_image(meta)
        for n in brokers.values():  # (first: a ZooKeeper-mode broker's controlled shutdown asks the controller)
            n.stop()
        assert quorum.stop() == {CONTROLLER_ID: 0}
        leaders = {(t.name, p): part["Leader"] for t in image.topics.values() for p, part in t.partitions.items()}
        assert {k[0] for k in leaders} >= set(TOPICS)
        addresses = {b: {(e["Host"], e["Port"]) for e in reg["EndPoints"]} for b, reg in image.brokers.items()}
        for b, answer in answers.items():
            assert {x["NodeId"] for x in answer["Brokers"]} == set(image.brokers) == set(BROKERS), answer
            for x in answer["Brokers"]:
                assert (x["Host"], x["Port"]) in addresses[x["NodeId"]]
            got = {(t["Name"], p["PartitionIndex"]): p["LeaderId"] for t in answer["Topics"] for p in t["Partitions"]}
            assert got == leaders, b
