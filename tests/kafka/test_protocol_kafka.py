"""kraftkit's protocol client against a real Kafka 4.x node: ApiVersions at every version,
DescribeQuorum as kafka-metadata-quorum reports it, and a KRaft Fetch of __cluster_metadata
whose records are byte for byte the node's log."""

from __future__ import annotations

import re
import uuid

import pytest

from kraftkit.protocol import ApiKey, KafkaConnection, ProtocolError, supported_versions
from tests.harness import jars, tools
from tests.harness.node import KafkaNode

pytestmark = pytest.mark.kafka

METADATA_TOPIC_ID = uuid.UUID(int=1)  # Uuid.METADATA_TOPIC_ID


@pytest.fixture(scope="module")
def node(kafka_jars, tmp_path_factory):
    with KafkaNode(tmp_path_factory.mktemp("protocol-node"), jars.KAFKA_4) as n:
        yield n


def test_api_versions_at_every_version(node):
    for port, quorum in ((node.broker_port, False), (node.controller_port, True)):
        with KafkaConnection("127.0.0.1", port) as c:
            lo, hi = supported_versions()[ApiKey.API_VERSIONS]
            seen = [c.api_versions(v) for v in range(lo, hi + 1)]
            assert all(s == seen[-1] for s in seen)
            got = seen[-1]
            assert got[ApiKey.FETCH][1] >= 17
            # the controller listener serves the quorum RPCs, the broker listener does not
            for k in (ApiKey.VOTE, ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH, ApiKey.FETCH_SNAPSHOT):
                assert (k in got) == quorum, (port, k)
                if quorum:
                    assert c.version_for(k) == min(got[k][1], supported_versions()[k][1])


def _quorum_status(bootstrap: str) -> dict[str, str]:
    cls = tools.find_class(jars.KAFKA_4, "org.apache.kafka.tools.MetadataQuorumCommand")
    out = tools.run_tool(jars.KAFKA_4, cls, ["--bootstrap-controller", bootstrap, "describe", "--status"], timeout=120).stdout
    return dict(re.findall(r"^(\w+):\s+(.*)$", out, re.M))


def test_describe_quorum_agrees_with_kafka_metadata_quorum(node):
    with KafkaConnection("127.0.0.1", node.controller_port) as c:
        v = c.version_for(ApiKey.DESCRIBE_QUORUM)
        r = c.request(ApiKey.DESCRIBE_QUORUM, v, {"Topics": [{"TopicName": "__cluster_metadata",
                                                              "Partitions": [{"PartitionIndex": 0}]}]})
    status = _quorum_status(node.controller_bootstrap)
    p = r["Topics"][0]["Partitions"][0]
    assert r["ErrorCode"] == 0 and p["ErrorCode"] == 0
    assert str(p["LeaderId"]) == status["LeaderId"] and str(p["LeaderEpoch"]) == status["LeaderEpoch"]
    assert 0 < p["HighWatermark"] <= int(status["HighWatermark"])  # it only grows (NoOp records)
    assert [v["ReplicaId"] for v in p["CurrentVoters"]] == [1]


def test_kraft_fetch_returns_the_log_bytes(node):
    with KafkaConnection("127.0.0.1", node.controller_port) as c:
        q = c.request(ApiKey.DESCRIBE_QUORUM, c.version_for(ApiKey.DESCRIBE_QUORUM),
                      {"Topics": [{"TopicName": "__cluster_metadata", "Partitions": [{"PartitionIndex": 0}]}]})
        epoch = q["Topics"][0]["Partitions"][0]["LeaderEpoch"]
        v = c.version_for(ApiKey.FETCH)
        r = c.request(ApiKey.FETCH, v, {
            "ClusterId": node.cluster_id, "ReplicaState": {"ReplicaId": 99, "ReplicaEpoch": -1},  # an observer
            "MaxWaitMs": 0, "MinBytes": 0, "MaxBytes": 8 << 20,
            "Topics": [{"TopicId": METADATA_TOPIC_ID, "Partitions": [{
                "Partition": 0, "CurrentLeaderEpoch": epoch, "FetchOffset": 0, "LastFetchedEpoch": 0,
                "LogStartOffset": -1, "PartitionMaxBytes": 8 << 20}]}]})
        # a wrong cluster id is refused with INCONSISTENT_CLUSTER_ID (104)
        bad = c.request(ApiKey.FETCH, v, {"ClusterId": "AAAAAAAAAAAAAAAAAAAAAA", "Topics": []})
    p = r["Responses"][0]["Partitions"][0]
    assert r["ErrorCode"] == 0 and p["ErrorCode"] == 0 and p["HighWatermark"] > 0
    records = p["Records"]
    log = (node.metadata_log_dir / "00000000000000000000.log").read_bytes()
    assert records and log[: len(records)] == records
    assert bad["ErrorCode"] == 104


def test_connection_errors_are_clear(node):
    with pytest.raises(ProtocolError, match="cannot connect"):
        KafkaConnection("127.0.0.1", 1, timeout=2)
