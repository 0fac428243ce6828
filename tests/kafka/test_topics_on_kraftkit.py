"""A topic made through a real Kafka 4.4.0 broker on a quorum of three ``kraftkit controller run``
processes: ``kafka-topics --create`` reaches the active controller inside an Envelope (the broker
forwards its client's CreateTopics), the controller commits a TopicRecord and three
PartitionRecords led by the broker (its only log directory named in them), the broker serves the
partitions (``--describe`` shows them, led by it), and records a producer writes come back to a
consumer.

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
from kraftkit._kafka import PARTITION, PRODUCER_IDS, TOPIC
from kraftkit.errors import KraftkitError
from kraftkit.features.storage import MetaProperties, parse_uuid
from kraftkit.features.storage.format import CLUSTER_METADATA_DIR
from kraftkit.log import Segment
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
        deadline = time.monotonic() + 30
        while True:
            desc = tools.topic_command(V, broker.bootstrap, ["--describe", "--topic", "t"])
            rows = re.findall(r"Topic: t\s+Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]+)",
                              desc)
            if len(rows) == 3:
                break
            assert time.monotonic() < deadline, (desc, tails())
            time.sleep(0.5)
        assert sorted(rows) == [(str(p), str(BROKER_ID), str(BROKER_ID), str(BROKER_ID)) for p in range(3)], desc
        assert re.search(r"PartitionCount: 3\s+ReplicationFactor: 1", desc), desc

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

        deadline = time.monotonic() + 30
        while not all(len(topic_records(d / CLUSTER_METADATA_DIR)) >= 4 for d in dirs.values()):
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
    assert "ASSIGN_REPLICAS_TO_DIRS" not in controller_logs
    assert " ERROR " not in broker.server_log.read_text(errors="replace"), tails()

    # every controller committed the same TopicRecord and three PartitionRecords: the broker the
    # only replica, leader and ISR, in the directory kafka-storage wrote into its meta.properties
    dir_id = uuid.UUID(bytes=parse_uuid(MetaProperties.read(broker.log_dirs[0] / "meta.properties").directory_id))
    seqs = [topic_records(d / CLUSTER_METADATA_DIR) for d in dirs.values()]
    assert seqs[0] == seqs[1] == seqs[2]
    # the idempotent producer's id came from the first block the controller handed the broker
    pids = [topic_records(d / CLUSTER_METADATA_DIR, (PRODUCER_IDS,)) for d in dirs.values()]
    assert pids[0] == pids[1] == pids[2] and [(p["BrokerId"], p["NextProducerId"]) for _k, _v, p in pids[0]] == [
        (BROKER_ID, 1000)]
    (k, _v, topic), *parts = seqs[0]
    assert k == TOPIC and topic["Name"] == "t"
    assert [(k, p["PartitionId"], p["TopicId"], p["Replicas"], p["Isr"], p["Leader"], p["Directories"])
            for k, _v, p in parts] == [(PARTITION, i, topic["TopicId"], [BROKER_ID], [BROKER_ID], BROKER_ID, [dir_id])
                                       for i in range(3)]
