"""Differential: one sequence of Kafka's own ``kafka-topics.sh`` commands (create, alter the partition
count, delete, and the refusals of each) through a real Kafka 4.4.0 broker, once on three real Kafka
4.4.0 controllers and once on three ``kraftkit controller run`` processes, both formatted by Kafka's
``kafka-storage format`` at release 4.4 from the same server.properties keys. The tool's exit codes,
its output and the exception it reports must be the same (topic ids and ports normalized); so must
the topic records each quorum committed, in order (TopicRecords, topic ConfigRecords,
PartitionRecords, RemoveTopicRecords, each topic id replaced by its topic's name and the broker's
log directory by a placeholder; and the record types of every batch holding one), and the topics and topic configs of the images their logs replay
into. After each change the script waits until the broker's metadata shows it (Metadata requests),
so that the tool's own checks see the same state in both runs."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import CONFIG, NO_OP, PARTITION, REMOVE_TOPIC, TOPIC
from kraftkit.features.storage import MetaProperties, parse_uuid
from kraftkit.metadata.image import load_image
from kraftkit.metadata.source import batches
from kraftkit.protocol import KafkaConnection
from kraftkit.protocol.messages import ApiKey
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.node import free_port, random_cluster_id
from tests.harness.quorum import KafkaQuorum
from tests.kafka.test_broker_on_kraftkit import BrokerOnly

from .test_configs_differential import exception_line, normalized
from .test_features_differential import controller_properties

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]

VERSION = jars.KAFKA_NEWEST
RELEASE = "4.4"
#: (kafka-topics arguments, the topics' partition counts the broker shows once it took effect)
STEPS: list[tuple[list[str], dict[str, int]]] = [
    (["--create", "--topic", "t", "--partitions", "2", "--config", "retention.ms=1000",
      "--config", "cleanup.policy=compact"], {"t": 2}),
    (["--create", "--topic", "u", "--partitions", "1", "--config", "retention.ms=5"], {"t": 2, "u": 1}),
    (["--alter", "--topic", "t", "--partitions", "4"], {"t": 4, "u": 1}),
    (["--alter", "--topic", "t", "--partitions", "3"], {"t": 4, "u": 1}),  # no increase
    (["--alter", "--topic", "t", "--partitions", "4"], {"t": 4, "u": 1}),  # already 4
    (["--alter", "--topic", "t", "--partitions", "6", "--replica-assignment", "100,100,100,100,100,100"],
     {"t": 6, "u": 1}),
    (["--alter", "--topic", "t", "--partitions", "7", "--replica-assignment", "100,100,100,100,100,100,7"],
     {"t": 6, "u": 1}),  # an unknown broker
    (["--alter", "--topic", "nope", "--partitions", "2"], {"t": 6, "u": 1}),
    (["--delete", "--topic", "u"], {"t": 6}),
    (["--delete", "--topic", "u"], {"t": 6}),  # gone
    (["--create", "--topic", "u", "--partitions", "2"], {"t": 6, "u": 2}),  # again, without configs
    (["--list"], {"t": 6, "u": 2}),
    (["--describe"], {"t": 6, "u": 2}),
]


def broker_topics(port: int) -> dict[str, int]:
    """The topics the broker's metadata shows, with their partition counts (Metadata, all topics)."""
    with KafkaConnection("127.0.0.1", port, timeout=30) as conn:
        got = conn.request(ApiKey.METADATA, conn.version_for(ApiKey.METADATA),
                           {"Topics": None, "AllowAutoTopicCreation": False, "IncludeTopicAuthorizedOperations": False})
    return {t["Name"]: len(t["Partitions"]) for t in got["Topics"] if t["ErrorCode"] == 0}


def run_steps(broker: BrokerOnly) -> list[tuple[int, str, str]]:
    command = tools.topic_command_class(VERSION)
    outputs = []
    for args, expect in STEPS:
        got = tools.run_tool(VERSION, command, ["--bootstrap-server", broker.bootstrap, *args], check=False,
                             timeout=120)
        text = re.sub(r"TopicId: \S+", "TopicId: ID", normalized(got.stdout))
        outputs.append((got.returncode, text, re.sub(r"^\[[-\d :,]+\] ", "", exception_line(got.stderr))))
        deadline = time.monotonic() + 60
        while (seen := broker_topics(broker.broker_port)) != expect:
            assert time.monotonic() < deadline, (args, seen, expect, got.stdout, got.stderr[-2000:])
            time.sleep(0.2)
    return outputs


def topic_records(metadata_dir: Path, broker_dir: uuid.UUID) -> tuple[list[tuple], int]:
    """The topic records of a controller's log, in order, ids replaced by names and ``broker_dir`` by "D",
    each batch holding some preceded by the api keys of all its records; and the end offset of the last
    such batch."""
    names: dict[uuid.UUID, str] = {}
    out: list[tuple] = []
    end = 0
    for seg in sorted(metadata_dir.glob("*.log")):
        for batch in batches(seg):
            if batch.is_control:
                continue
            before = len(out)
            kinds = []
            for r in batch.records():
                key, version, data = decode_metadata_record(r.value)
                if key != NO_OP:  # (Kafka's controller writes a NoOpRecord every 500 ms: it may share the batch)
                    kinds.append(key)
                if key == TOPIC:
                    names[data["TopicId"]] = data["Name"]
                    out.append(("TopicRecord", data["Name"]))
                elif key == CONFIG and data["ResourceType"] == 2:
                    out.append(("ConfigRecord", data["ResourceName"], data["Name"], data["Value"]))
                elif key == PARTITION:
                    fields = {k: v for k, v in data.items() if k != "TopicId"}
                    fields["Directories"] = ["D" if d == broker_dir else str(d) for d in data.get("Directories", [])]
                    out.append(("PartitionRecord", version, names[data["TopicId"]], sorted(fields.items())))
                elif key == REMOVE_TOPIC:
                    out.append(("RemoveTopicRecord", names[data["TopicId"]]))
            if len(out) > before:  # the batch's record types too: a change writes nothing else alongside
                out.insert(before, ("batch", tuple(kinds)))
                end = batch.last_offset + 1
    return out, end


def image_topics(log_dir: Path, at: int, broker_dir: uuid.UUID) -> tuple[dict, dict]:
    """The topics (partitions without their topic id, the broker's directory as "D") and topic configs
    of the image at ``at``."""
    image = load_image(log_dir, at)
    topics = {}
    for name, tid in image.topic_ids.items():
        parts = image.topics[tid].partitions
        topics[name] = {p: {k: (["D" if d == broker_dir else d for d in v] if k == "Directories" else v)
                            for k, v in fields.items() if k != "TopicId"} for p, fields in parts.items()}
    return topics, {k: v for k, v in image.configs.items() if k[0] == 2}


def broker_dir_id(broker: BrokerOnly) -> uuid.UUID:
    """The log directory id kafka-storage wrote into the broker's meta.properties."""
    return uuid.UUID(bytes=parse_uuid(MetaProperties.read(broker.log_dirs[0] / "meta.properties").directory_id))


def test_kafka_topics_tool_creates_alters_and_deletes_the_same_in_kafka_and_in_kraftkit(kafka_jars, tmp_path):
    jars.ensure_kafka(VERSION)
    java = jars.require_java()

    # kraftkit: three controllers from server.properties files formatted by Kafka's kafka-storage, a real broker
    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    procs: list[KraftkitProcess] = []
    broker = BrokerOnly(tmp_path / "broker", voters, cluster_id=cid, start_timeout=120, stop_timeout=60)
    try:
        for i, port in ports.items():
            props = tmp_path / f"k{i}.properties"
            props.write_text(controller_properties(i, port, voters, tmp_path / f"k{i}"))
            subprocess.run([java, "-Xmx256m", "-cp", jars.classpath(VERSION), "kafka.tools.StorageTool", "format",
                            "--cluster-id", cid, "--config", str(props), "--release-version", RELEASE],
                           check=True, capture_output=True, timeout=120)
        for i in ports:
            procs.append(KraftkitProcess(["controller", "run"], ["--config", str(tmp_path / f"k{i}.properties")],
                                         tmp_path / f"k{i}.log"))
        broker.start()
        ours = run_steps(broker)
        our_dir = broker_dir_id(broker)
    finally:
        broker.stop()
        codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0], "\n".join(p.log_tail() for p in procs)

    # Kafka: three controllers of the harness, the same broker
    with KafkaQuorum(tmp_path / "kafka", VERSION, broker=False, release_version=RELEASE) as q:
        kbroker = BrokerOnly(tmp_path / "kbroker", q.voters, cluster_id=q.cluster_id, start_timeout=120,
                             stop_timeout=60)
        try:
            kbroker.start()
            theirs = run_steps(kbroker)
            their_dir = broker_dir_id(kbroker)
        finally:
            kbroker.stop()
        kafka_log = q.metadata_log_dir(1)

    differ = [f"step {i} {STEPS[i][0]}:\nKafka:    {k}\nkraftkit: {o}"
              for i, (k, o) in enumerate(zip(theirs, ours, strict=True)) if k != o]
    assert not differ, "\n".join(differ)
    assert [code for code, _out, _exc in ours] == [0, 0, 0, 1, 1, 0, 1, 1, 0, 1, 0, 0, 0]
    assert ours[-2][1].split() == ["t", "u"]

    ours_records, our_end = topic_records(tmp_path / "k1" / "__cluster_metadata-0", our_dir)
    their_records, their_end = topic_records(kafka_log, their_dir)
    assert ours_records == their_records
    assert [r[0] for r in ours_records].count("RemoveTopicRecord") == 1
    # the images once the last topic change was committed (the broker's shutdown comes later: Kafka's
    # controller then moves its leaderships, which is not this test's concern)
    ours_image = image_topics(tmp_path / "k1", our_end, our_dir)
    assert ours_image == image_topics(kafka_log, their_end, their_dir)
    topics, configs = ours_image
    assert {n: len(p) for n, p in topics.items()} == {"t": 6, "u": 2}
    assert configs == {(2, "t"): {"retention.ms": "1000", "cleanup.policy": "compact"}}  # u's old config gone
