"""A topic made through a real Kafka 4.4.0 broker on a quorum of three ``kraftkit controller run``
processes: ``kafka-topics --create`` reaches the active controller inside an Envelope (the broker
forwards its client's CreateTopics), the controller commits a TopicRecord and three
PartitionRecords led by the broker (its only log directory named in them), the broker serves the
partitions (``--describe`` shows them, led by it), and records a producer writes come back to a
consumer. Then ``kafka-topics --alter --partitions 5`` (CreatePartitions, forwarded) adds two
partitions a producer writes to, and ``kafka-topics --delete`` (DeleteTopics, forwarded) removes a
second topic: ``--describe`` and ``--list`` show both, and the controllers' logs replay into an image
holding ``t`` with five partitions and no trace of the deleted topic (nor of its configs).

The producer is idempotent (Kafka's default): the broker gets a block of producer ids from the
controller (AllocateProducerIds), which commits a ProducerIdsRecord for it: the first block, 0..999."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import PARTITION, PRODUCER_IDS, REMOVE_TOPIC, TOPIC
from kraftkit.errors import KraftkitError
from kraftkit.features.storage import MetaProperties, parse_uuid
from kraftkit.features.storage.format import CLUSTER_METADATA_DIR
from kraftkit.log import Segment
from kraftkit.metadata.image import load_image
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.node import free_port, random_cluster_id
from tests.kafka.test_broker_on_kraftkit import BROKER_ID, BrokerOnly

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(400)]

V = jars.KAFKA_NEWEST


def topic_records(metadata_dir, keys=(TOPIC, PARTITION)) -> list[tuple[int, int, dict]]:
    """(api key, version, fields) of the TopicRecords and PartitionRecords (or other ``keys``) of a
    controller's log ([] while its last batch is half written)."""
    out = []
    try:
        for seg in sorted(metadata_dir.glob("*.log")):
            for batch in Segment(seg).read_batches(verify_crc=True):
                if batch.is_control:
                    continue
                for r in batch.records():
                    key, version, data = decode_metadata_record(r.value)
                    if key in keys:
                        out.append((key, version, data))
    except KraftkitError:
        return []
    return out


def describe_until(broker, name: str, count: int, tails) -> list[tuple[str, ...]]:
    """(partition, leader, replicas, isr) of the topic's partitions once ``--describe`` shows ``count``
    of them (the broker's metadata may lag the commit)."""
    deadline = time.monotonic() + 30
    while True:
        desc = tools.topic_command(V, broker.bootstrap, ["--describe", "--topic", name])
        rows = re.findall(rf"Topic: {name}\s+Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]+)",
                          desc)
        if len(rows) == count:
            assert re.search(rf"PartitionCount: {count}\s+ReplicationFactor: 1", desc), desc
            return rows
        assert time.monotonic() < deadline, (desc, tails())
        time.sleep(0.5)


def test_a_real_broker_creates_a_topic_on_kraftkit_and_clients_produce_and_consume(kafka_jars, tmp_path):
    jars.ensure_kafka(V)
    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    dirs = {i: tmp_path / f"c{i}" for i in ports}
    for i, d in dirs.items():
        subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "storage", "format", "-t", cid, "--node-id",
                        str(i), "-d", str(d), "--no-initial-controllers"], check=True, capture_output=True, timeout=60)
    broker = BrokerOnly(tmp_path / "broker", voters, cluster_id=cid, start_timeout=120, stop_timeout=60)
    procs: list[KraftkitProcess] = []

    def tails() -> str:
        return "\n".join([broker.log_tail(80), *(p.log_tail() for p in procs)])

    try:
        for i, d in dirs.items():
            procs.append(KraftkitProcess(["controller", "run"], ["--node-id", str(i), "--voters", voters,
                                                                 "--log-dir", str(d)], tmp_path / f"c{i}.log"))
        broker.start()
        out = tools.topic_command(V, broker.bootstrap, ["--create", "--topic", "t", "--partitions", "3",
                                                        "--replication-factor", "1"])
        assert "Created topic t." in out, (out, tails())

        # the broker's metadata shows the three partitions, each led by it (it may lag the commit)
        rows = describe_until(broker, "t", 3, tails)
        assert sorted(rows) == [(str(p), str(BROKER_ID), str(BROKER_ID), str(BROKER_ID)) for p in range(3)]

        # again: TOPIC_ALREADY_EXISTS, in the controller's words
        again = tools.run_tool(V, tools.topic_command_class(V), ["--bootstrap-server", broker.bootstrap, "--create",
                                                                 "--topic", "t", "--partitions", "1"], check=False)
        assert again.returncode != 0 and "Topic 't' already exists." in again.stdout + again.stderr, again

        sent = [{"key": f"k{i}".encode(), "value": f"value {i}".encode(), "partition": i % 3} for i in range(9)]
        acks = tools.produce(V, broker.bootstrap, [{"topic": "t", "records": sent,
                                                   "props": {"enable.idempotence": "true", "acks": "all"}}])
        assert sorted((a["partition"], a["offset"]) for a in acks) == sorted(
            (p, o) for p in range(3) for o in range(3))
        got = tools.consume(V, broker.bootstrap, "t")
        assert sorted((r["partition"], r["key"], r["value"]) for r in got) == sorted(
            (s["partition"], s["key"], s["value"]) for s in sent)

        # more partitions: CreatePartitions forwarded in an Envelope; a producer writes to the new ones
        tools.topic_command(V, broker.bootstrap, ["--alter", "--topic", "t", "--partitions", "5"])
        rows = describe_until(broker, "t", 5, tails)
        assert sorted(rows) == [(str(p), str(BROKER_ID), str(BROKER_ID), str(BROKER_ID)) for p in range(5)]
        more = [{"key": b"n", "value": f"new {p}".encode(), "partition": p} for p in (3, 4)]
        acks = tools.produce(V, broker.bootstrap, [{"topic": "t", "records": more, "props": {"acks": "all"}}])
        assert sorted((a["partition"], a["offset"]) for a in acks) == [(3, 0), (4, 0)]

        # a topic deleted: DeleteTopics forwarded in an Envelope; --list no longer shows it
        tools.topic_command(V, broker.bootstrap, ["--create", "--topic", "gone", "--partitions", "1",
                                                  "--config", "retention.ms=12345"])
        tools.topic_command(V, broker.bootstrap, ["--delete", "--topic", "gone"])
        deadline = time.monotonic() + 30
        while "gone" in (listed := tools.topic_command(V, broker.bootstrap, ["--list"]).split()):
            assert time.monotonic() < deadline, (listed, tails())
            time.sleep(0.5)
        assert "t" in listed

        keys = (TOPIC, PARTITION, REMOVE_TOPIC)
        deadline = time.monotonic() + 30
        while not all(len(topic_records(d / CLUSTER_METADATA_DIR, keys)) >= 9 for d in dirs.values()):
            assert time.monotonic() < deadline, tails()
            time.sleep(0.2)
    finally:
        broker.stop()
        codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0], tails()
    # the broker serves the partitions without asking the controller to assign their directories
    # (AssignReplicasToDirs): the PartitionRecords name the one it registered
    controller_logs = "".join((tmp_path / f"c{i}.log").read_text(errors="replace") for i in ports)
    assert "CreateTopics result(s): t: SUCCESS" in controller_logs
    assert "CreatePartitions result(s): t: SUCCESS" in controller_logs
    assert "DeleteTopics result(s): gone: SUCCESS" in controller_logs
    assert "ASSIGN_REPLICAS_TO_DIRS" not in controller_logs
    # (Kafka's ReplicaManager.getOrCreatePartition logs an ERROR for each partition added to a topic the
    # broker already knew, whichever controller added it: the two partitions of --alter; nothing else)
    errors = [line for line in broker.server_log.read_text(errors="replace").splitlines() if " ERROR " in line]
    added = (r".* ERROR \[Broker id=\d+\] Expected partition t-[34] with topic id \S+ to exist, but it was missing\. "
             r"Creating\.\.\. \(state\.change\.logger\)")
    assert [e for e in errors if not re.fullmatch(added, e)] == [], tails()

    # every controller committed the same TopicRecord and three PartitionRecords: the broker the
    # only replica, leader and ISR, in the directory kafka-storage wrote into its meta.properties
    dir_id = uuid.UUID(bytes=parse_uuid(MetaProperties.read(broker.log_dirs[0] / "meta.properties").directory_id))
    seqs = [topic_records(d / CLUSTER_METADATA_DIR, keys) for d in dirs.values()]
    assert seqs[0] == seqs[1] == seqs[2]
    # the idempotent producer's id came from the first block the controller handed the broker
    pids = [topic_records(d / CLUSTER_METADATA_DIR, (PRODUCER_IDS,)) for d in dirs.values()]
    assert pids[0] == pids[1] == pids[2] and [(p["BrokerId"], p["NextProducerId"]) for _k, _v, p in pids[0]] == [
        (BROKER_ID, 1000)]
    (k, _v, topic), *parts, (gk, _gv, gone), (gpk, _gpv, gone_part), (rk, _rv, removed) = seqs[0]
    assert (k, topic["Name"], gk, gone["Name"], gpk, rk) == (TOPIC, "t", TOPIC, "gone", PARTITION, REMOVE_TOPIC)
    assert [(k, p["PartitionId"], p["TopicId"], p["Replicas"], p["Isr"], p["Leader"], p["Directories"])
            for k, _v, p in parts] == [(PARTITION, i, topic["TopicId"], [BROKER_ID], [BROKER_ID], BROKER_ID, [dir_id])
                                       for i in range(5)]
    assert gone_part["TopicId"] == removed["TopicId"] == gone["TopicId"]
    # replayed: t with its five partitions; the deleted topic and its config gone
    for d in dirs.values():
        image = load_image(d)
        assert image.topic_ids == {"t": topic["TopicId"]} and sorted(image.topic("t").partitions) == list(range(5))
        assert [key for key in image.configs if key[0] == 2] == []
