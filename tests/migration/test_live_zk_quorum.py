"""The live ZooKeeper-to-KRaft migration (KIP-866) of a three-broker cluster to a three-voter kraftkit
controller quorum, against real parts, while a producer and a consumer run.

A real ZooKeeper and three Kafka 3.9.2 ZooKeeper-mode brokers, populated with Kafka's own tools:
topics with configs (replication factors 3 and 2) by kafka-topics, a client quota and a SCRAM user by
kafka-configs, an ACL by kafka-acls. Kafka's VerifiableProducer (idempotent, acks=all) and
VerifiableConsumer (a consumer group, every record it consumes printed) run from before the brokers
are rolled with the migration's configs until the migration is in dual write. Three ``kraftkit
controller run --config`` voters with the migration enabled, the copy in batches of one record (a
topic of 200 partitions makes it long): the active voter starts the copy and is killed with kill -9
in the middle of it (its own log holds the half copy, a metadata transaction begun and not ended, and
the image of that log shows PRE_MIGRATION and no topic); another voter aborts it before it is active
and copies again, whole (``/controller`` names it, the log is in MIGRATION); the killed voter comes
back as a follower. Then topics created and deleted through the ZooKeeper-mode brokers (Kafka's
``kafka-topics --bootstrap-server``, forwarded by the brokers to the KRaft controller) show up in
ZooKeeper; the active voter killed with kill -9 again (in dual write), another takes over (it claims ZooKeeper again:
``/controller_epoch`` one above, ``/controller`` names it), syncs, sends the brokers the full metadata
and keeps dual writing: topics created and deleted then show up in ZooKeeper too. At the end every
record the producer saw acknowledged was consumed, by the running consumer and by a consume from the
beginning, and the KRaft image of each live voter's log directory equals what ZooKeeper holds
(normalized: topics with ids and partition states, topic configs, quotas, SCRAM credentials, ACLs,
the next producer id)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from kraftkit._core import Segment, decode_metadata_record
from kraftkit.features.storage.format import CLUSTER_METADATA_DIR
from kraftkit.log import list_segments, segment_name
from kraftkit.metadata.image import load_image
from kraftkit.metadata.records import record_type
from tests.harness import jars, tools
from tests.migration.live import (
    COMPLETED,
    LiveCluster,
    MigrationQuorum,
    Verifiable,
    kraft_view,
    read_zk,
    status,
    wait_until,
    zk_view,
)
from tests.migration.test_offline_zk import acl_list

pytestmark = [pytest.mark.kafka, pytest.mark.zookeeper, pytest.mark.timeout(1500)]

BROKERS = (1, 2, 3)
TOPICS = {
    "orders": {"partitions": 3, "rf": 3, "configs": {"retention.ms": "86400000"}},
    "audit": {"partitions": 2, "rf": 2, "configs": {"cleanup.policy": "compact"}},
    "stream": {"partitions": 3, "rf": 3, "configs": {"min.insync.replicas": "2"}},
    # many partitions: with batches of one record the copy is long enough to kill its voter in the middle
    "wide": {"partitions": 200, "rf": 2, "configs": {}},
}
STREAM = "stream"  # what the verifiable producer writes and the verifiable consumer reads
#: how much the copying voter's metadata log grows (some dozens of one-record batches) before its kill -9
COPY_KILL_BYTES = 6000


def metadata_log_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in (d / CLUSTER_METADATA_DIR).glob("*.log"))


def record_names(d: Path) -> list[str]:
    """The record type of every record of a voter's metadata log, read from its segment files."""
    part = d / CLUSTER_METADATA_DIR
    return [
        record_type(decode_metadata_record(r.value)[0])[1]
        for base in list_segments(part)
        for b in Segment(part / segment_name(base)).read_batches(verify_crc=True)
        if not b.is_control
        for r in b.records()
    ]


def kill_in_the_copy(quorum: MigrationQuorum, out: dict, timeout: float) -> None:
    """Once a voter starts the copy and its metadata log has grown by some batches of it, kill -9
    of that voter (``out``: the voter and its exit status, or ``missed``: the copy completed first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for i, p in list(quorum.procs.items()):
            if "starting the copy of ZooKeeper's metadata" not in p.log_path.read_text(errors="replace"):
                continue
            start = metadata_log_bytes(quorum.dirs[i])
            while metadata_log_bytes(quorum.dirs[i]) < start + COPY_KILL_BYTES:
                if "Completed migration" in p.log_path.read_text(errors="replace") or time.monotonic() > deadline:
                    out["missed"] = i
                    return
                time.sleep(0.02)
            out["killed"], out["code"] = i, quorum.kill(i)
            return
        time.sleep(0.05)


def test_a_zookeeper_cluster_migrates_live_to_a_three_voter_quorum_that_survives_a_kill(kafka_jars, tmp_path):
    # (no controller is left at the end to grant a controlled shutdown: the brokers are killed)
    with LiveCluster(tmp_path, BROKERS, kill_brokers=True) as live:
        zk, boot, client, clients = live.zk, live.boot, live.client, live.clients
        quorum: MigrationQuorum | None = None

        def tails() -> str:
            return "\n".join([*(quorum.tails() if quorum else []), *(c.tail() for c in clients)])

        for name, t in TOPICS.items():
            live.create_topic(name, t["partitions"], t["rf"], t["configs"])
        live.add_quota_scram_acl()
        acls_before = acl_list(jars.KAFKA_3, boot)

        # the three voters wait for the brokers
        quorum = live.quorum(voters=3, extra={"zookeeper.metadata.migration.min.batch.size": 1})
        quorum.start()
        quorum.wait_any_log("waiting for broker 1 (registered in ZooKeeper): not registered with KRaft yet", 120)

        # the producer and the consumer run from now until the migration is in dual write
        producer = Verifiable.producer(tmp_path / "producer", boot, STREAM, throughput=50)
        clients.append(producer)
        consumer = Verifiable.consumer(tmp_path / "consumer", boot, STREAM, group="migration-check")
        clients.append(consumer)
        wait_until("the producer's first acknowledged sends", lambda: len(producer.acked()) >= 20, 120, tails)
        wait_until("the consumer's first records", lambda: len(consumer.consumed()) >= 10, 120, tails)

        # the brokers rolled with the migration's configs register with the quorum; the active voter starts
        # the copy and is killed (kill -9) in the middle of it
        in_copy: dict = {}
        killer = threading.Thread(target=kill_in_the_copy, args=(quorum, in_copy, 600), daemon=True)
        killer.start()
        live.roll(migrate_to=quorum.voters)
        killer.join(600)
        assert "killed" in in_copy, (in_copy, tails())
        assert in_copy["code"] == -9
        half = quorum.dirs[in_copy["killed"]]
        # its log holds the half copy: a metadata transaction begun, some partitions, no end
        names = record_names(half)
        begun = len(names) - names[::-1].index("BeginTransactionRecord")
        assert "EndTransactionRecord" not in names[begun:] and "AbortTransactionRecord" not in names[begun:]
        assert 0 < names[begun:].count("PartitionRecord") < sum(t["partitions"] for t in TOPICS.values())
        # the image of that log never shows it: still PRE_MIGRATION (Kafka's ZkMigrationState id 2), no topic
        image = load_image(half)
        assert image.zk_migration_state == 2 and not image.topics and not image.topic_ids
        # another voter aborts the half copy before it is active, then copies again, whole
        first = quorum.wait_any_log(COMPLETED, 300)
        aborted = quorum.log(first)
        assert "aborting the in-progress metadata transaction" in aborted, aborted[-3000:]
        quorum.start(in_copy["killed"])  # (back as a follower)
        ctl = json.loads(client.get("/controller")[0])
        assert ctl["brokerid"] == first, (ctl, first)
        epoch1 = ctl["kraftControllerEpoch"]
        zk_epoch1 = int(client.get("/controller_epoch")[0])
        migration = json.loads(client.get("/migration")[0])
        assert (migration["kraft_controller_id"], migration["kraft_controller_epoch"]) == (first, epoch1)
        copied = status(zk.connect, quorum.address(first))
        assert copied["zkMigrationState"] == "MIGRATION" and copied["zkBrokers"] == list(BROKERS)
        acked_at_takeover = len(producer.acked())

        # topics created and deleted through the ZooKeeper-mode brokers reach ZooKeeper (dual writes)
        live.create_topic("made-1", 2, 3, {"retention.ms": "3600000"})
        tools.topic_command(jars.KAFKA_3, boot, ["--delete", "--topic", "audit"])
        wait_until(
            "made-1 in ZooKeeper, audit gone",
            lambda: (
                client.exists("/brokers/topics/made-1/partitions/1/state") is not None
                and client.exists("/brokers/topics/audit") is None
            ),
            120,
            tails,
        )
        assert json.loads(client.get("/config/topics/made-1")[0])["config"] == {"retention.ms": "3600000"}
        state = json.loads(client.get("/brokers/topics/made-1/partitions/0/state")[0])
        assert state["controller_epoch"] == epoch1  # (written by the KRaft controller)

        # kill -9 of the active voter during dual write: another takes over, claims ZooKeeper again, syncs
        assert quorum.kill(first) == -9
        second = wait_until(
            "another voter named by /controller",
            lambda: c["brokerid"] if (c := json.loads(client.get("/controller")[0]))["brokerid"] != first else None,
            180,
            tails,
        )
        ctl2 = json.loads(client.get("/controller")[0])
        assert second in quorum.procs and ctl2["kraftControllerEpoch"] > epoch1
        assert int(client.get("/controller_epoch")[0]) == zk_epoch1 + 1
        log2 = wait_until(
            "the new active voter's sync",
            lambda: t if "synced ZooKeeper with the image" in (t := quorum.log(second)) else None,
            120,
            tails,
        )
        assert "Completed migration of metadata" not in log2  # (no copy again: the log is in MIGRATION)
        for b in BROKERS:  # the ZooKeeper-mode brokers take the new controller's full metadata
            wait_until(
                f"broker {b} taking {second}'s full UpdateMetadata",
                lambda b=b: f"broker {b} took the full UpdateMetadata" in quorum.log(second),
                120,
                tails,
            )

        # topics created and deleted through the brokers after the kill reach ZooKeeper too
        live.create_topic("made-2", 1, 2)
        tools.topic_command(jars.KAFKA_3, boot, ["--delete", "--topic", "made-1"])
        wait_until(
            "made-2 in ZooKeeper, made-1 gone",
            lambda: (
                client.exists("/brokers/topics/made-2/partitions/0/state") is not None
                and client.exists("/brokers/topics/made-1") is None
            ),
            120,
            tails,
        )
        state = json.loads(client.get("/brokers/topics/made-2/partitions/0/state")[0])
        assert state["controller_epoch"] == ctl2["kraftControllerEpoch"]

        # the producer goes on through the kill; then both stop: every acknowledged record was consumed
        acked_at_kill = len(producer.acked())
        wait_until(
            "more acknowledged sends after the kill", lambda: len(producer.acked()) >= acked_at_kill + 50, 120, tails
        )
        # (SIGTERM: the JVM runs the tool's shutdown hook, which closes the producer, then exits 128 + 15)
        assert producer.stop() == 143 and producer.events("shutdown_complete"), producer.tail()
        acked = producer.acked()
        assert len(acked) > acked_at_takeover > 0
        wait_until(
            "the consumer having consumed every acknowledged record",
            lambda: acked <= consumer.consumed(),
            120,
            lambda: f"missing: {sorted(acked - consumer.consumed())[:20]}\n{tails()}",
        )
        consumer.stop()
        again = {(r["partition"], r["offset"], r["value"].decode()) for r in tools.consume(jars.KAFKA_3, boot, STREAM)}
        assert acked <= again, sorted(acked - again)[:20]
        assert acl_list(jars.KAFKA_3, boot) == acls_before

        # the dual writes caught up, then ZooKeeper against the KRaft image of each live voter's log directory
        def caught_up():
            st = status(zk.connect, quorum.address(second), "--controller-dir", quorum.dirs[second])
            return (
                st
                if st["dualWrite"]["lastWrittenOffset"] == st["migration"]["kraftMetadataOffset"]
                and st["dualWrite"]["zooKeeperBlockingKRaftMillis"] == 0
                else None
            )

        dual = wait_until("the dual writes caught up", caught_up, 60, tails)
        assert dual["controller"] == {"id": second, "kraftControllerEpoch": ctl2["kraftControllerEpoch"]}
        zview = zk_view(read_zk(zk.connect))
        live = sorted(quorum.procs)
        assert quorum.stop() == {i: 0 for i in live}
        assert len(live) == 2 and first not in live and in_copy["killed"] in live
        for i in live:
            image = load_image(quorum.dirs[i])
            assert image.zk_migration_state == 1  # (Kafka's ZkMigrationState MIGRATION)
            assert kraft_view(image) == zview, i
        assert set(zview["topics"]) == {"orders", STREAM, "wide", "made-2", "__consumer_offsets"}
        assert zview["topic_configs"]["orders"] == {"retention.ms": "86400000"}
        assert zview["quotas"] == {(("client-id", "app"),): {"producer_byte_rate": 1048576.0}}
        assert sorted(zview["scram"]) == [("alice", 1)]
        assert len(zview["acls"]) == 1
