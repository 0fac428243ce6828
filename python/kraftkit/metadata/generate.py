"""Generates realistic, metadata-shaped KRaft logs (for ``kraftkit demo``, the synthetic Spark
fleets of ``kraftkit.spark.fleet``, tests and benchmarks).

Records are encoded by the schema-driven codec (``kraftkit.metadata.records``) at the versions
a 3.9-IV0 controller writes, in KRaft-style batches: null keys, timestamp delta 0, no headers,
one controller append per batch group, and a LeaderChange control batch at the start of every
epoch.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kraftkit._core import control_record_key, encode_control_record, encode_metadata_record
from kraftkit._kafka import CONFIG, FEATURE_LEVEL, NO_OP, PARTITION, REGISTER_BROKER, TOPIC
from kraftkit.log import Log, encode_batch
from kraftkit.log.control import ControlType
from kraftkit.metadata.mv_levels import MV_3_9_IV0

#: metadata.version 3.9-IV0 and the record versions it writes.
METADATA_VERSION = MV_3_9_IV0
LEADER_CHANGE = ControlType.LEADER_CHANGE


def feature_level_record(name: str, level: int) -> bytes:
    return encode_metadata_record(FEATURE_LEVEL, 0, {"Name": name, "FeatureLevel": level})


def topic_record(name: str, topic_id: bytes) -> bytes:
    return encode_metadata_record(TOPIC, 0, {"Name": name, "TopicId": topic_id})


def partition_record(
    partition: int, topic_id: bytes, replicas: list[int], leader: int, directories: list[bytes]
) -> bytes:
    return encode_metadata_record(
        PARTITION,
        1,
        {
            "PartitionId": partition,
            "TopicId": topic_id,
            "Replicas": replicas,
            "Isr": replicas,
            "Leader": leader,
            "LeaderEpoch": 0,
            "PartitionEpoch": 0,
            "Directories": directories,
        },
    )


def register_broker_record(broker_id: int, epoch: int, log_dir: bytes) -> bytes:
    return encode_metadata_record(
        REGISTER_BROKER,
        3,
        {
            "BrokerId": broker_id,
            "IncarnationId": uuid.UUID(int=broker_id).bytes,
            "BrokerEpoch": epoch,
            "EndPoints": [
                {"Name": "PLAINTEXT", "Host": f"broker-{broker_id}.kafka", "Port": 9092, "SecurityProtocol": 0}
            ],
            "Features": [
                {"Name": "metadata.version", "MinSupportedVersion": 1, "MaxSupportedVersion": METADATA_VERSION}
            ],
            "Rack": f"rack-{broker_id % 3}",
            "Fenced": False,
            "LogDirs": [log_dir],
        },
    )


def config_record(resource_type: int, resource: str, name: str, value: str | None) -> bytes:
    return encode_metadata_record(
        CONFIG, 0, {"ResourceType": resource_type, "ResourceName": resource, "Name": name, "Value": value}
    )


def noop_record() -> bytes:
    return encode_metadata_record(NO_OP, 0, {})


def leader_change_value(leader: int, voters: list[int]) -> bytes:
    """LeaderChangeMessage v0 (a control record value, not framed)."""
    ids = [{"VoterId": v} for v in voters]
    return encode_control_record(
        LEADER_CHANGE, {"Version": 0, "LeaderId": leader, "Voters": ids, "GrantingVoters": ids}
    )


@dataclass
class DemoStats:
    records: int = 0
    batches: int = 0
    control_batches: int = 0
    topics: int = 0
    partitions: int = 0
    brokers: int = 0
    epochs: int = 0


def metadata_records(rng: random.Random, topics: int, partitions: int, brokers: int) -> Iterator[list[bytes]]:
    """Yields groups of records, one controller append each (a topic creation is one group)."""
    yield [feature_level_record("metadata.version", METADATA_VERSION)]
    dirs = {b: uuid.UUID(int=rng.getrandbits(128)).bytes for b in range(1, brokers + 1)}
    yield [register_broker_record(b, 10 + b, dirs[b]) for b in range(1, brokers + 1)]
    for t in range(topics):
        tid = uuid.UUID(int=rng.getrandbits(128)).bytes
        name = f"orders-{t:05d}"
        group = [topic_record(name, tid)]
        for p in range(partitions):
            reps = rng.sample(range(1, brokers + 1), 3)
            group.append(partition_record(p, tid, reps, reps[0], [dirs[r] for r in reps]))
        group.append(config_record(2, name, "retention.ms", str(rng.choice([3600000, 86400000, 604800000]))))
        group.append(config_record(2, name, "cleanup.policy", rng.choice(["delete", "compact"])))
        yield group
        if t % 7 == 0:
            yield [noop_record()]


def write_metadata_log(
    directory: Path,
    *,
    topics: int = 2000,
    partitions: int = 24,
    brokers: int = 6,
    epochs: int = 3,
    segment_bytes: int = 8 * 1024 * 1024,
    seed: int = 7,
    start_ms: int = 1_700_000_000_000,
    max_batch_records: int = 500,
) -> DemoStats:
    """Writes a ``__cluster_metadata-0``-style log to ``directory`` and returns what it wrote."""
    rng = random.Random(seed)
    stats = DemoStats(topics=topics, partitions=topics * partitions, brokers=brokers, epochs=epochs)
    groups = list(metadata_records(rng, topics, partitions, brokers))
    per_epoch = -(-len(groups) // epochs)
    voters = [1, 2, 3]
    now = start_ms
    with Log(directory, create=True, segment_bytes=segment_bytes) as log:
        for epoch in range(1, epochs + 1):
            leader = voters[(epoch - 1) % len(voters)]
            data = encode_batch(
                [(now, control_record_key(LEADER_CHANGE), leader_change_value(leader, voters), [])],
                base_offset=log.log_end_offset,
                partition_leader_epoch=epoch,
                control=True,
            )
            log.append(data)
            stats.control_batches += 1
            stats.batches += 1
            stats.records += 1
            pending: list[bytes] = []
            for group in groups[(epoch - 1) * per_epoch : epoch * per_epoch]:
                if pending and len(pending) + len(group) > max_batch_records:
                    _flush(log, pending, now, epoch, stats)
                    pending = []
                    now += rng.randint(1, 25)
                pending.extend(group)
            if pending:
                _flush(log, pending, now, epoch, stats)
            now += 1000
    return stats


def _flush(log: Log, values: list[bytes], ts: int, epoch: int, stats: DemoStats) -> None:
    data = encode_batch(
        [(ts, None, v, []) for v in values], base_offset=log.log_end_offset, partition_leader_epoch=epoch
    )
    log.append(data)
    stats.batches += 1
    stats.records += len(values)
