"""Generates realistic, metadata-shaped KRaft logs (for the demo, tests and benchmarks).

The records are framed exactly as Kafka's controller writes them (ApiMessageAndVersion frame,
flexible-version bodies) for a handful of record types, in KRaft-style batches: null keys,
timestamp delta 0, no headers, a LeaderChange control batch at the start of every epoch.
The full schema-driven codec for every record type comes with the metadata package; this
module only needs these few, encoded by hand from Kafka's JSON schemas.
"""

from __future__ import annotations

import random
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kraftkit.log import Log, encode_batch


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _cstr(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def _int32s(xs: list[int]) -> bytes:
    return _uvarint(len(xs) + 1) + b"".join(struct.pack(">i", x) for x in xs)


NO_TAGS = b"\x00"


def frame(api_key: int, version: int, body: bytes) -> bytes:
    """The ApiMessageAndVersion frame: frame version 1, api key, version (unsigned varints)."""
    return _uvarint(1) + _uvarint(api_key) + _uvarint(version) + body


def feature_level_record(name: str, level: int) -> bytes:
    return frame(12, 0, _cstr(name) + struct.pack(">h", level) + NO_TAGS)


def topic_record(name: str, topic_id: bytes) -> bytes:
    return frame(2, 0, _cstr(name) + topic_id + NO_TAGS)


def partition_record(partition: int, topic_id: bytes, replicas: list[int], leader: int, leader_epoch: int = 0) -> bytes:
    body = (
        struct.pack(">i", partition) + topic_id + _int32s(replicas) + _int32s(replicas) + _int32s([]) + _int32s([])
        + struct.pack(">iii", leader, leader_epoch, 0) + NO_TAGS
    )
    return frame(3, 0, body)


def config_record(resource_type: int, resource: str, name: str, value: str | None) -> bytes:
    return frame(4, 0, struct.pack(">b", resource_type) + _cstr(resource) + _cstr(name) + _cstr(value) + NO_TAGS)


def noop_record() -> bytes:
    return frame(20, 0, NO_TAGS)


def leader_change_value(leader: int, voters: list[int]) -> bytes:
    """LeaderChangeMessage v0 (control record value, not framed)."""
    def structs(ids: list[int]) -> bytes:
        return _uvarint(len(ids) + 1) + b"".join(struct.pack(">i", i) + NO_TAGS for i in ids)

    return struct.pack(">hi", 0, leader) + structs(voters) + structs(voters) + NO_TAGS


LEADER_CHANGE_KEY = struct.pack(">hh", 0, 2)


@dataclass
class DemoStats:
    records: int = 0
    batches: int = 0
    control_batches: int = 0
    topics: int = 0
    partitions: int = 0
    epochs: int = 0


def metadata_records(rng: random.Random, topics: int, partitions: int, brokers: int) -> Iterator[list[bytes]]:
    """Yields groups of records as one controller append each (a topic creation is one group)."""
    yield [feature_level_record("metadata.version", 21)]
    for t in range(topics):
        tid = uuid.UUID(int=rng.getrandbits(128)).bytes
        name = f"orders-{t:05d}"
        group = [topic_record(name, tid)]
        for p in range(partitions):
            reps = rng.sample(range(1, brokers + 1), 3)
            group.append(partition_record(p, tid, reps, reps[0]))
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
    stats = DemoStats(topics=topics, partitions=topics * partitions, epochs=epochs)
    groups = list(metadata_records(rng, topics, partitions, brokers))
    per_epoch = -(-len(groups) // epochs)
    voters = [1, 2, 3]
    now = start_ms
    with Log(directory, create=True, segment_bytes=segment_bytes) as log:
        for epoch in range(1, epochs + 1):
            leader = voters[(epoch - 1) % len(voters)]
            value = leader_change_value(leader, voters)
            data = encode_batch([(now, LEADER_CHANGE_KEY, value, [])], base_offset=log.log_end_offset,
                                partition_leader_epoch=epoch, control=True)
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
    data = encode_batch([(ts, None, v, []) for v in values], base_offset=log.log_end_offset, partition_leader_epoch=epoch)
    log.append(data)
    stats.batches += 1
    stats.records += len(values)
