"""Differential: one sequence of Kafka's own ``kafka-topics.sh`` commands (create, alter the partition
count, delete, and the refusals of each) through a real Kafka 4.4.0 broker, once on three real Kafka
4.4.0 controllers and once on three ``kraftkit controller run`` processes, both formatted by Kafka's
``kafka-storage format`` at release 4.4 from the same server.properties keys. The tool's exit codes,
its output and the exception it reports must be the same (topic ids and ports normalized); so must
the topic records each quorum committed, in order (TopicRecords, topic ConfigRecords,
PartitionRecords, RemoveTopicRecords, each topic id replaced by its topic's name and the broker's
log directory by a placeholder; and the record types of every batch holding one), and the topics and topic configs of the images their logs replay
into. After each change the script waits until the broker's metadata shows it (Metadata requests),
so that the tool's own checks see the same state in both runs.

Then topic configs (CONFIG_STEPS): creations with configs Kafka's controller refuses (and one with
``min.insync.replicas``, which brings a ClearElrRecord), and ``kafka-configs.sh --entity-type topics``
alters (forwarded by the broker in an Envelope: sets, refusals of an unknown name, a bad value, remote
storage, an unknown topic), ``--delete-config`` and describes (the broker's answers from the records
each quorum committed), each waited for until the broker's DescribeConfigs shows the topic's configs;
then one validate-only CreateTopics sent through the broker, whose answer (the topic's effective
configs) must be the same, and a controller's own DescribeConfigs of topics (entries sorted by name)."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import CLEAR_ELR, CONFIG, NO_OP, PARTITION, REMOVE_TOPIC, TOPIC
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


TOPIC_CONFIGS = ["--entity-type", "topics", "--entity-name", "t"]
T0 = {"retention.ms": "1000", "cleanup.policy": "compact"}
T1 = {"retention.ms": "2000", "cleanup.policy": "compact", "segment.ms": "100000"}
T2 = {"retention.ms": "2000", "cleanup.policy": "compact"}
T3 = {"retention.ms": "2000", "cleanup.policy": "compact,delete"}
#: (the tool, its arguments, the dynamic configs of topic t the broker shows once it took effect)
CONFIG_STEPS: list[tuple[str, list[str], dict[str, str]]] = [
    ("topics", ["--create", "--topic", "bad", "--partitions", "1", "--config", "retention.ms=abc"], T0),
    ("topics", ["--create", "--topic", "bad", "--partitions", "1", "--config", "no.such.config=1"], T0),
    # (eligible leader replicas are enabled: a new topic's min.insync.replicas comes with a ClearElrRecord)
    ("topics", ["--create", "--topic", "m", "--partitions", "1", "--config", "min.insync.replicas=1"], T0),
    ("configs", ["--alter", *TOPIC_CONFIGS, "--add-config", "retention.ms=2000,segment.ms=100000"], T1),
    ("configs", ["--alter", *TOPIC_CONFIGS, "--add-config", "retention.ms=abc"], T1),
    ("configs", ["--alter", *TOPIC_CONFIGS, "--add-config", "no.such.config=1"], T1),
    ("configs", ["--alter", *TOPIC_CONFIGS, "--add-config", "remote.storage.enable=true"], T1),
    ("configs", ["--alter", *TOPIC_CONFIGS, "--delete-config", "segment.ms"], T2),
    ("configs", ["--alter", "--entity-type", "topics", "--entity-name", "nope", "--add-config", "retention.ms=1"], T2),
    # (with eligible leader replicas enabled, a topic's new min.insync.replicas also clears its ELRs)
    ("configs", ["--alter", *TOPIC_CONFIGS, "--add-config", "min.insync.replicas=1"],
     {**T2, "min.insync.replicas": "1"}),
    ("configs", ["--alter", *TOPIC_CONFIGS, "--delete-config", "min.insync.replicas"], T2),
    ("configs", ["--alter", *TOPIC_CONFIGS, "--add-config", "cleanup.policy=[compact,delete]"], T3),
    ("configs", ["--describe", *TOPIC_CONFIGS], T3),
    ("configs", ["--describe", *TOPIC_CONFIGS, "--all"], T3),
]


def broker_topic_configs(port: int, name: str) -> dict[str, str]:
    """The topic's own configs (DYNAMIC_TOPIC_CONFIG) as the broker describes them."""
    with KafkaConnection("127.0.0.1", port, timeout=30) as conn:
        got = conn.request(ApiKey.DESCRIBE_CONFIGS, conn.version_for(ApiKey.DESCRIBE_CONFIGS),
                           {"Resources": [{"ResourceType": 2, "ResourceName": name, "ConfigurationKeys": None}],
                            "IncludeSynonyms": False, "IncludeDocumentation": False})
    (res,) = got["Results"]
    return {c["Name"]: c["Value"] for c in res["Configs"] if c["ConfigSource"] == 1}


def controller_describe(controller: str) -> list[dict]:
    """A controller's DescribeConfigs answer for topics t (with synonyms) and nope, once it shows t's
    configs as the last step left them (its entries sorted by name)."""
    host, port = controller.split(":")
    deadline = time.monotonic() + 60
    while True:
        with KafkaConnection(host, int(port), timeout=30) as conn:
            got = conn.request(ApiKey.DESCRIBE_CONFIGS, conn.version_for(ApiKey.DESCRIBE_CONFIGS),
                               {"Resources": [{"ResourceType": 2, "ResourceName": n, "ConfigurationKeys": None}
                                              for n in ("t", "nope", "a/b")],
                                "IncludeSynonyms": True, "IncludeDocumentation": False})
        results = got["Results"]
        for r in results:
            r["Configs"] = sorted(r["Configs"], key=lambda c: c["Name"])
        if {c["Name"]: c["Value"] for c in results[0]["Configs"] if c["ConfigSource"] == 1} == CONFIG_STEPS[-1][2]:
            return results
        assert time.monotonic() < deadline, results
        time.sleep(0.2)


def run_config_steps(broker: BrokerOnly) -> tuple[list[tuple[int, str, str]], dict]:
    """CONFIG_STEPS' outputs, and the answer to a validate-only CreateTopics with configs sent through the
    broker (its topic id left out: a validate-only creation's id is a random one)."""
    commands = {"topics": tools.topic_command_class(VERSION),
                "configs": tools.find_class(VERSION, "org.apache.kafka.tools.ConfigCommand")}
    outputs = []
    for tool, args, expect in CONFIG_STEPS:
        got = tools.run_tool(VERSION, commands[tool], ["--bootstrap-server", broker.bootstrap, *args], check=False,
                             timeout=120)
        outputs.append((got.returncode, normalized(got.stdout),
                        re.sub(r"^\[[-\d :,]+\] ", "", exception_line(got.stderr))))
        deadline = time.monotonic() + 60
        while (seen := broker_topic_configs(broker.broker_port, "t")) != expect:
            assert time.monotonic() < deadline, (args, seen, expect, got.stdout, got.stderr[-2000:])
            time.sleep(0.2)
    with KafkaConnection("127.0.0.1", broker.broker_port, timeout=30) as conn:
        answer = conn.request(ApiKey.CREATE_TOPICS, conn.version_for(ApiKey.CREATE_TOPICS), {
            "Topics": [{"Name": "v", "NumPartitions": 1, "ReplicationFactor": 1, "Assignments": [],
                        "Configs": [{"Name": "retention.ms", "Value": "5"},
                                    {"Name": "cleanup.policy", "Value": "compact"}]}],
            "timeoutMs": 30000, "validateOnly": True})
    for t in answer["Topics"]:
        t.pop("TopicId")
    return outputs, answer


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
                if key != NO_OP:  # (Kafka's periodic NoOpRecord may share a batch with a change: timing)
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
        ours_cfg, ours_created = run_config_steps(broker)
        ours_described = controller_describe(f"127.0.0.1:{ports[1]}")
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
            theirs_cfg, theirs_created = run_config_steps(kbroker)
            theirs_described = controller_describe(q.controller_bootstrap.split(",")[0])
            their_dir = broker_dir_id(kbroker)
        finally:
            kbroker.stop()
        kafka_log = q.metadata_log_dir(1)

    differ = [f"step {i} {STEPS[i][0]}:\nKafka:    {k}\nkraftkit: {o}"
              for i, (k, o) in enumerate(zip(theirs, ours, strict=True)) if k != o]
    assert not differ, "\n".join(differ)
    assert [code for code, _out, _exc in ours] == [0, 0, 0, 1, 1, 0, 1, 1, 0, 1, 0, 0, 0]
    assert ours[-2][1].split() == ["t", "u"]
    differ = [f"config step {i} {CONFIG_STEPS[i][:2]}:\nKafka:    {k}\nkraftkit: {o}"
              for i, (k, o) in enumerate(zip(theirs_cfg, ours_cfg, strict=True)) if k != o]
    assert not differ, "\n".join(differ)
    assert [code for code, _out, _exc in ours_cfg] == [1, 1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0]
    assert "InvalidConfigurationException: Unknown topic config name: no.such.config" in ours_cfg[5][2]
    assert ours_created == theirs_created, (
        [(o, k) for o, k in zip(ours_created["Topics"][0].pop("Configs"), theirs_created["Topics"][0].pop("Configs"),
                                strict=False) if o != k], ours_created, theirs_created)
    assert ours_described == theirs_described, [
        (o.get("ErrorMessage"), k.get("ErrorMessage"), [(a, b) for a, b in zip(o["Configs"], k["Configs"], strict=False)
                                                         if a != b], len(o["Configs"]), len(k["Configs"]))
        for o, k in zip(ours_described, theirs_described, strict=True)]
    assert [r["ErrorCode"] for r in ours_described] == [0, 3, 17] and len(ours_described[0]["Configs"]) > 30
    (created,) = ours_created["Topics"]
    assert created["ErrorCode"] == 0 and len(created["Configs"]) > 30
    assert {c["Name"]: (c["Value"], c["ConfigSource"]) for c in created["Configs"]}["retention.ms"] == ("5", 1)

    ours_records, our_end = topic_records(tmp_path / "k1" / "__cluster_metadata-0", our_dir)
    their_records, their_end = topic_records(kafka_log, their_dir)
    assert ours_records == their_records
    assert [r[0] for r in ours_records].count("RemoveTopicRecord") == 1
    # the images once the last topic change was committed (the broker's shutdown comes later: Kafka's
    # controller then moves its leaderships, which is not this test's concern)
    ours_image = image_topics(tmp_path / "k1", our_end, our_dir)
    assert ours_image == image_topics(kafka_log, their_end, their_dir)
    topics, configs = ours_image
    assert {n: len(p) for n, p in topics.items()} == {"t": 6, "u": 2, "m": 1}
    assert configs == {(2, "t"): T3, (2, "m"): {"min.insync.replicas": "1"}}  # u's old config gone
    assert ("batch", (CONFIG, CLEAR_ELR)) in ours_records  # t's min.insync.replicas changes
    assert ("batch", (TOPIC, CONFIG, CLEAR_ELR, PARTITION)) in ours_records  # m's creation
