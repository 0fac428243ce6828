"""KRaft RPC bodies as dicts shaped exactly like Kafka's message schemas, typed by the generated
:mod:`kraftkit.protocol.types` (mypy checks every key).

Field names are those of ``kraftkit._core.rpc_schema()`` (the schemas of the Kafka client the codec
was generated from), so a transport can hand any body built here to
:func:`kraftkit.protocol.encode_request` / :func:`~kraftkit.protocol.encode_response` at the
version given in :data:`VERSIONS`. Note that in those schemas ``VoteRequest`` names the candidate
``ReplicaId``/``ReplicaEpoch`` (Kafka renamed ``CandidateId``/``CandidateEpoch`` when it added
pre-vote); the meaning is unchanged. A transport talking to an older peer sends the highest version
both speak: a standard vote (``PreVote`` false) encodes at v0 and v1 as well, a pre-vote only from
v2 (the codec refuses a non-default ``PreVote`` below it, as Kafka's does).

Every body is *batched*: the topic/partition arrays are kept, and the builders take the
:class:`TopicPartition` the replica is keyed by, so one transport can later multiplex many raft
partitions. The ``Records`` / ``UnalignedRecords`` values are whatever the core's records adapter
produces (see :class:`kraftkit.raft.core.RecordsAdapter`).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from typing import Any

from kraftkit._core import rpc_schema
from kraftkit.protocol import types as t
from kraftkit.protocol.messages import ApiKey, Errors

__all__ = [
    "FETCH",
    "VOTE",
    "BEGIN_QUORUM_EPOCH",
    "END_QUORUM_EPOCH",
    "FETCH_SNAPSHOT",
    "VERSIONS",
    "API_NAMES",
    "Errors",
    "TopicPartition",
    "METADATA_PARTITION",
    "METADATA_TOPIC_ID",
    "ZERO_UUID",
    "single_partition",
    "voter_change_response",
    "ADD_RAFT_VOTER",
    "REMOVE_RAFT_VOTER",
    "UPDATE_RAFT_VOTER",
    "API_VERSIONS",
]

FETCH, VOTE, FETCH_SNAPSHOT = ApiKey.FETCH, ApiKey.VOTE, ApiKey.FETCH_SNAPSHOT
BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH = ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH
ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER
UPDATE_RAFT_VOTER, API_VERSIONS = ApiKey.UPDATE_RAFT_VOTER, ApiKey.API_VERSIONS

#: The highest request versions kraftkit's replica sends its peers, capped per peer by its ApiVersions
#: answer (real Kafka 3.9 and 4.x quorums take them: tests/kafka/test_raft_kafka.py). Vote v2 carries
#: ``PreVote`` (KIP-996); a Kafka 3.9 voter speaks Vote up to v1.
VERSIONS: dict[int, int] = {VOTE: 2, BEGIN_QUORUM_EPOCH: 1, END_QUORUM_EPOCH: 1, FETCH: 17, FETCH_SNAPSHOT: 1}
#: apiKey -> the RPC's schema name without "Request" (``Vote``)
API_NAMES = {
    m["api_key"]: m["name"].removesuffix("Request")
    for m in rpc_schema()
    if m["kind"] == "request" and m["api_key"] in VERSIONS
}

ZERO_UUID = uuid.UUID(int=0)
#: Kafka's fixed topic id of ``__cluster_metadata`` (``AAAAAAAAAAAAAAAAAAAAAQ``)
METADATA_TOPIC_ID = uuid.UUID(int=1)


@dataclasses.dataclass(frozen=True, order=True)
class TopicPartition:
    """The key of one raft replica (KRaft itself uses ``__cluster_metadata``-0)."""

    topic: str
    partition: int
    topic_id: uuid.UUID = dataclasses.field(default=ZERO_UUID, compare=False)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


METADATA_PARTITION = TopicPartition("__cluster_metadata", 0, METADATA_TOPIC_ID)


def single_partition(body: Mapping[str, Any], api: int, response: bool = False) -> tuple[str | uuid.UUID, Any] | None:
    """``(topic name or id, partition dict)`` if the body names exactly one partition, else None."""
    topics_key = "Responses" if (api == FETCH and response) else "Topics"
    topics = body.get(topics_key) or []
    if len(topics) != 1:
        return None
    t = topics[0]
    parts = t.get("Partitions") or []
    if len(parts) != 1:
        return None
    if api == FETCH:
        name: Any = t.get("TopicId", ZERO_UUID)
    elif api == FETCH_SNAPSHOT:
        name = t.get("Name")
    else:
        name = t.get("TopicName")
    return name, parts[0]


def topic_matches(tp: TopicPartition, api: int, name: Any, part: dict, response: bool = False) -> bool:
    if api == FETCH:
        ok_topic = name == tp.topic_id
        idx = part.get("PartitionIndex") if response else part.get("Partition")
    elif api == FETCH_SNAPSHOT:
        ok_topic = name == tp.topic
        idx = part.get("Index") if response else part.get("Partition")
    else:
        ok_topic = name == tp.topic
        idx = part.get("PartitionIndex")
    return ok_topic and idx == tp.partition


# ---------------------------------------------------------------- builders (requests)


def vote_request(
    tp: TopicPartition,
    cluster_id: str | None,
    voter_id: int,
    candidate_epoch: int,
    candidate_id: int,
    last_epoch: int,
    last_offset: int,
    pre_vote: bool = False,
    candidate_dir: uuid.UUID = ZERO_UUID,
    voter_dir: uuid.UUID = ZERO_UUID,
) -> t.VoteRequest:
    """A vote request; ``pre_vote``: a prospective's, in its own epoch, that the receiver answers
    without voting (Vote v2)."""
    return {
        "ClusterId": cluster_id,
        "VoterId": voter_id,
        "Topics": [
            {
                "TopicName": tp.topic,
                "Partitions": [
                    {
                        "PartitionIndex": tp.partition,
                        "ReplicaEpoch": candidate_epoch,
                        "ReplicaId": candidate_id,
                        "ReplicaDirectoryId": candidate_dir,
                        "VoterDirectoryId": voter_dir,
                        "LastOffsetEpoch": last_epoch,
                        "LastOffset": last_offset,
                        "PreVote": pre_vote,
                    }
                ],
            }
        ],
    }


def begin_quorum_epoch_request(
    tp: TopicPartition,
    cluster_id: str | None,
    voter_id: int,
    leader_id: int,
    epoch: int,
    voter_dir: uuid.UUID = ZERO_UUID,
    leader_endpoints: list[t.BeginQuorumEpochRequestLeaderEndpoint] | None = None,
) -> t.BeginQuorumEpochRequest:
    return {
        "ClusterId": cluster_id,
        "VoterId": voter_id,
        "Topics": [
            {
                "TopicName": tp.topic,
                "Partitions": [
                    {
                        "PartitionIndex": tp.partition,
                        "VoterDirectoryId": voter_dir,
                        "LeaderId": leader_id,
                        "LeaderEpoch": epoch,
                    }
                ],
            }
        ],
        "LeaderEndpoints": leader_endpoints or [],
    }


def end_quorum_epoch_request(
    tp: TopicPartition, cluster_id: str | None, leader_id: int, epoch: int, preferred: list[int]
) -> t.EndQuorumEpochRequest:
    return {
        "ClusterId": cluster_id,
        "Topics": [
            {
                "TopicName": tp.topic,
                "Partitions": [
                    {
                        "PartitionIndex": tp.partition,
                        "LeaderId": leader_id,
                        "LeaderEpoch": epoch,
                        "PreferredSuccessors": list(preferred),
                        "PreferredCandidates": [
                            {"CandidateId": c, "CandidateDirectoryId": ZERO_UUID} for c in preferred
                        ],
                    }
                ],
            }
        ],
        "LeaderEndpoints": [],
    }


def fetch_request(
    tp: TopicPartition,
    cluster_id: str | None,
    replica_id: int,
    epoch: int,
    fetch_offset: int,
    last_fetched_epoch: int,
    max_wait_ms: int,
    replica_dir: uuid.UUID = ZERO_UUID,
) -> t.FetchRequest:
    return {
        "ClusterId": cluster_id,
        "ReplicaState": {"ReplicaId": replica_id, "ReplicaEpoch": -1},
        "MaxWaitMs": max_wait_ms,
        "MinBytes": 0,
        "MaxBytes": 8388608,
        "IsolationLevel": 0,
        "SessionId": 0,
        "SessionEpoch": -1,
        "Topics": [
            {
                "TopicId": tp.topic_id,
                "Partitions": [
                    {
                        "Partition": tp.partition,
                        "CurrentLeaderEpoch": epoch,
                        "FetchOffset": fetch_offset,
                        "LastFetchedEpoch": last_fetched_epoch,
                        "LogStartOffset": -1,
                        "PartitionMaxBytes": 0,
                        "ReplicaDirectoryId": replica_dir,
                    }
                ],
            }
        ],
        "ForgottenTopicsData": [],
        "RackId": "",
    }


def fetch_snapshot_request(
    tp: TopicPartition,
    cluster_id: str | None,
    replica_id: int,
    epoch: int,
    snapshot_id: tuple[int, int],
    position: int,
    max_bytes: int,
    replica_dir: uuid.UUID = ZERO_UUID,
) -> t.FetchSnapshotRequest:
    return {
        "ClusterId": cluster_id,
        "ReplicaId": replica_id,
        "MaxBytes": max_bytes,
        "Topics": [
            {
                "Name": tp.topic,
                "Partitions": [
                    {
                        "Partition": tp.partition,
                        "CurrentLeaderEpoch": epoch,
                        "SnapshotId": {"EndOffset": snapshot_id[0], "Epoch": snapshot_id[1]},
                        "Position": position,
                        "ReplicaDirectoryId": replica_dir,
                    }
                ],
            }
        ],
    }


# ---------------------------------------------------------------- builders (responses)


def vote_response(
    tp: TopicPartition, error: int, leader_id: int, epoch: int, granted: bool, top_error: int = 0
) -> t.VoteResponse:
    part: t.VoteResponseTopicDataPartitionData = {
        "PartitionIndex": tp.partition,
        "ErrorCode": error,
        "LeaderId": leader_id,
        "LeaderEpoch": epoch,
        "VoteGranted": granted,
    }
    topics: list[t.VoteResponseTopicData] = [] if top_error else [{"TopicName": tp.topic, "Partitions": [part]}]
    return {"ErrorCode": top_error, "Topics": topics, "NodeEndpoints": []}


def begin_quorum_epoch_response(
    tp: TopicPartition, error: int, leader_id: int, epoch: int, top_error: int = 0
) -> t.BeginQuorumEpochResponse:
    part: t.BeginQuorumEpochResponseTopicDataPartitionData = {
        "PartitionIndex": tp.partition,
        "ErrorCode": error,
        "LeaderId": leader_id,
        "LeaderEpoch": epoch,
    }
    topics: list[t.BeginQuorumEpochResponseTopicData] = (
        [] if top_error else [{"TopicName": tp.topic, "Partitions": [part]}]
    )
    return {"ErrorCode": top_error, "Topics": topics, "NodeEndpoints": []}


def end_quorum_epoch_response(
    tp: TopicPartition, error: int, leader_id: int, epoch: int, top_error: int = 0
) -> t.EndQuorumEpochResponse:
    part: t.EndQuorumEpochResponseTopicDataPartitionData = {
        "PartitionIndex": tp.partition,
        "ErrorCode": error,
        "LeaderId": leader_id,
        "LeaderEpoch": epoch,
    }
    topics: list[t.EndQuorumEpochResponseTopicData] = (
        [] if top_error else [{"TopicName": tp.topic, "Partitions": [part]}]
    )
    return {"ErrorCode": top_error, "Topics": topics, "NodeEndpoints": []}


def fetch_response(
    tp: TopicPartition,
    error: int,
    leader_id: int,
    epoch: int,
    *,
    high_watermark: int = -1,
    log_start_offset: int = -1,
    diverging: tuple[int, int] | None = None,
    snapshot_id: tuple[int, int] | None = None,
    records: Any = None,
    top_error: int = 0,
    node_endpoints: list[Any] | None = None,
) -> t.FetchResponse:
    part: t.FetchResponseFetchableTopicResponsePartitionData = {
        "PartitionIndex": tp.partition,
        "ErrorCode": error,
        "HighWatermark": high_watermark,
        "LastStableOffset": -1,
        "LogStartOffset": log_start_offset,
        "DivergingEpoch": {"Epoch": diverging[0], "EndOffset": diverging[1]}
        if diverging
        else {"Epoch": -1, "EndOffset": -1},
        "CurrentLeader": {"LeaderId": leader_id, "LeaderEpoch": epoch},
        "SnapshotId": {"EndOffset": snapshot_id[0], "Epoch": snapshot_id[1]}
        if snapshot_id
        else {"EndOffset": -1, "Epoch": -1},
        "AbortedTransactions": [],
        "PreferredReadReplica": -1,
        "Records": records,
    }
    return {
        "ThrottleTimeMs": 0,
        "ErrorCode": top_error,
        "SessionId": 0,
        "Responses": [] if top_error else [{"TopicId": tp.topic_id, "Partitions": [part]}],
        "NodeEndpoints": node_endpoints or [],
    }


def fetch_snapshot_response(
    tp: TopicPartition,
    error: int,
    leader_id: int,
    epoch: int,
    *,
    snapshot_id: tuple[int, int] = (-1, -1),
    size: int = -1,
    position: int = -1,
    data: Any = b"",
    top_error: int = 0,
) -> t.FetchSnapshotResponse:
    part: t.FetchSnapshotResponseTopicSnapshotPartitionSnapshot = {
        "Index": tp.partition,
        "ErrorCode": error,
        "SnapshotId": {"EndOffset": snapshot_id[0], "Epoch": snapshot_id[1]},
        "CurrentLeader": {"LeaderId": leader_id, "LeaderEpoch": epoch},
        "Size": size,
        "Position": position,
        "UnalignedRecords": data,
    }
    return {
        "ThrottleTimeMs": 0,
        "ErrorCode": top_error,
        "Topics": [] if top_error else [{"Name": tp.topic, "Partitions": [part]}],
        "NodeEndpoints": [],
    }


# ---------------------------------------------------------------- KIP-853 voter changes


def voter_change_response(error: int, message: str | None = None) -> dict[str, Any]:
    """An AddRaftVoter or RemoveRaftVoter answer (the two share their fields)."""
    return {"ThrottleTimeMs": 0, "ErrorCode": error, "ErrorMessage": message}
