"""Synthetic fleets of KRaft clusters for tests, benchmarks and demos.

``generate_fleet(root, clusters=...)`` writes ``<root>/<cluster>/<node>/__cluster_metadata-0/``
for every node of every cluster: a metadata log with a realistic record mix (broker
registrations, topics with their partitions and configs, leader elections and ISR changes,
fencing, producer id blocks, client quotas, ACLs, SCRAM credentials, no-ops), rolled into
segments with their indexes, and a snapshot of the image part-way (``<end>-<epoch>.checkpoint``,
written by the image engine at the cluster's metadata.version), with more log after it.
Clusters differ in size and metadata.version. The nodes of a cluster hold the same bytes, as
replicas of the metadata partition do (hard links where possible); ``corrupt=N`` damages one
node of N clusters (a flipped byte in a batch, a torn tail, or a bad index entry) and says
where in the manifest ``<root>/fleet.json``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kraftkit._core import commit_part, control_record_key, encode_batch, encode_metadata_record
from kraftkit.log import Log, Segment
from kraftkit.metadata.generate import (
    LEADER_CHANGE,
    config_record,
    feature_level_record,
    leader_change_value,
    noop_record,
    partition_record,
    register_broker_record,
    topic_record,
)

PARTITION = "__cluster_metadata-0"
#: metadata.versions the clusters run (they all write the 3.7+ record versions of the demo)
FLEET_VERSIONS = ("3.7-IV4", "3.8-IV0", "3.9-IV0", "4.0-IV3", "4.1-IV1")
CORRUPTIONS = ("crc", "torn", "index")


@dataclass
class ClusterInfo:
    name: str
    nodes: list[str]
    metadata_version: str
    topics: int
    brokers: int
    records: int
    snapshot: str | None
    damage: list[dict] = field(default_factory=list)


@dataclass
class Fleet:
    root: str
    clusters: list[ClusterInfo]

    @property
    def bytes(self) -> int:
        return sum(
            p.stat().st_size for p in Path(self.root).rglob("*") if p.is_file() and p.suffix in (".log", ".checkpoint")
        )

    def write_manifest(self) -> Path:
        p = Path(self.root) / "fleet.json"
        p.write_text(json.dumps({"root": self.root, "clusters": [asdict(c) for c in self.clusters]}, indent=1))
        return p

    @classmethod
    def load(cls, root: str | os.PathLike[str]) -> Fleet:
        m = json.loads((Path(root) / "fleet.json").read_text())
        return cls(m["root"], [ClusterInfo(**c) for c in m["clusters"]])


def _uuid(rng: random.Random) -> bytes:
    return uuid.UUID(int=rng.getrandbits(128)).bytes


def cluster_records(rng: random.Random, mv_level: int, topics: int, partitions: int, brokers: int) -> list[list[bytes]]:
    """Groups of record values, one controller append each, in a plausible order."""
    groups: list[list[bytes]] = [[feature_level_record("metadata.version", mv_level)]]
    if mv_level >= 22:  # 4.0+: more finalized features
        groups.append([feature_level_record("group.version", 1), feature_level_record("transaction.version", 2)])
    dirs = {b: _uuid(rng) for b in range(1, brokers + 1)}
    groups.append([register_broker_record(b, 10 + b, dirs[b]) for b in range(1, brokers + 1)])
    groups.append([encode_metadata_record(8, 0, {"Id": b, "Epoch": 10 + b}) for b in range(1, brokers + 1)])
    layout: list[tuple[bytes, int, list[int]]] = []
    for t in range(topics):
        tid = _uuid(rng)
        name = f"{rng.choice(['orders', 'payments', 'clicks', 'audit', 'events', 'users'])}-{t:05d}"
        n = max(1, int(rng.triangular(1, partitions * 2, partitions)))
        group = [topic_record(name, tid)]
        for p in range(n):
            reps = rng.sample(range(1, brokers + 1), min(3, brokers))
            group.append(partition_record(p, tid, reps, reps[0], [dirs[r] for r in reps]))
            layout.append((tid, p, reps))
        group.append(config_record(2, name, "retention.ms", str(rng.choice([3600000, 86400000, 604800000]))))
        if rng.random() < 0.5:
            group.append(config_record(2, name, "cleanup.policy", rng.choice(["delete", "compact"])))
        groups.append(group)
        if t % 11 == 0:
            groups.append([noop_record()])
        if t % 17 == 0:
            groups.append(
                [
                    encode_metadata_record(
                        15,
                        0,
                        {"BrokerId": rng.randint(1, brokers), "BrokerEpoch": 11, "NextProducerId": 1000 * (t + 1)},
                    )
                ]
            )
    groups.append(
        [
            encode_metadata_record(
                14,
                0,
                {
                    "Entity": [{"EntityType": "user", "EntityName": f"svc-{i}"}],
                    "Key": "producer_byte_rate",
                    "Value": float(1 << (10 + i)),
                    "Remove": False,
                },
            )
            for i in range(rng.randint(1, 6))
        ]
    )
    groups.append(
        [
            encode_metadata_record(
                18,
                0,
                {
                    "Id": _uuid(rng),
                    "ResourceType": 2,
                    "ResourceName": f"orders-{i:05d}",
                    "PatternType": 3,
                    "Principal": f"User:svc-{i}",
                    "Host": "*",
                    "Operation": 3,
                    "PermissionType": 3,
                },
            )
            for i in range(rng.randint(1, 8))
        ]
    )
    groups.append(
        [
            encode_metadata_record(
                11,
                0,
                {
                    "Name": f"svc-{i}",
                    "Mechanism": 1,
                    "Salt": rng.randbytes(16),
                    "StoredKey": rng.randbytes(32),
                    "ServerKey": rng.randbytes(32),
                    "Iterations": 4096,
                },
            )
            for i in range(rng.randint(1, 4))
        ]
    )
    # churn: leader elections and ISR shrinks, fencing and unfencing
    for _ in range(len(layout) // 3):
        tid, p, reps = rng.choice(layout)
        leader = rng.choice(reps)
        isr = sorted(rng.sample(reps, max(1, len(reps) - rng.randint(0, 1))))
        if leader not in isr:
            isr.append(leader)
        groups.append([encode_metadata_record(5, 0, {"PartitionId": p, "TopicId": tid, "Leader": leader, "Isr": isr})])
        if rng.random() < 0.02:
            b = rng.randint(1, brokers)
            groups.append([encode_metadata_record(7, 0, {"Id": b, "Epoch": 10 + b})])
            groups.append([encode_metadata_record(8, 0, {"Id": b, "Epoch": 10 + b})])
    return groups


def _append(
    log: Log, groups: list[list[bytes]], epoch: int, now: int, rng: random.Random, max_batch: int
) -> tuple[int, int]:
    records = 0
    pending: list[bytes] = []

    def flush() -> None:
        nonlocal now
        log.append(
            encode_batch(
                [(now, None, v, []) for v in pending], base_offset=log.log_end_offset, partition_leader_epoch=epoch
            )
        )
        now += rng.randint(1, 50)

    for g in groups:
        if pending and len(pending) + len(g) > max_batch:
            flush()
            records += len(pending)
            pending = []
        pending.extend(g)
    if pending:
        flush()
        records += len(pending)
    return records, now


def write_cluster(
    partition_dir: Path,
    rng: random.Random,
    mv_level: int,
    *,
    topics: int,
    partitions: int,
    brokers: int,
    segment_bytes: int,
    epochs: int = 3,
    snapshot_at: float = 0.7,
    start_ms: int = 1_700_000_000_000,
    max_batch: int = 400,
) -> tuple[int, str | None]:
    """Writes one node's metadata partition; returns (records, snapshot file name)."""
    groups = cluster_records(rng, mv_level, topics, partitions, brokers)
    cut = max(1, int(len(groups) * snapshot_at))
    phases = [groups[:cut], groups[cut:]]
    voters = [1, 2, 3]
    now = start_ms
    records = 0
    snap_name = None
    with Log(partition_dir, create=True, segment_bytes=segment_bytes) as log:
        # the snapshot's part over epochs-1 leader epochs, the tail after it in one more
        n = max(1, epochs - 1)
        per = -(-len(phases[0]) // n)
        chunks = [phases[0][i : i + per] for i in range(0, len(phases[0]), per)] + [None, phases[1]]
        epoch = 0
        for chunk in chunks:
            if chunk is None:
                log.flush()
                from kraftkit.metadata.image import load_image

                snap_name = load_image(partition_dir).write_snapshot(partition_dir).name
                continue
            epoch += 1
            leader = voters[(epoch - 1) % 3]
            log.append(
                encode_batch(
                    [(now, control_record_key(LEADER_CHANGE), leader_change_value(leader, voters), [])],
                    base_offset=log.log_end_offset,
                    partition_leader_epoch=epoch,
                    control=True,
                )
            )
            records += 1
            k, now = _append(log, chunk, epoch, now, rng, max_batch)
            records += k
    return records, snap_name


def _damage(partition_dir: Path, how: str, rng: random.Random) -> dict:
    """Damages one file of a node (breaking its hard link first) and says where."""
    segs = sorted(partition_dir.glob("*.log"))
    if how == "index":
        target = next((s.with_suffix(".index") for s in segs if s.with_suffix(".index").stat().st_size >= 16), None)
        if target is None:
            how = "crc"
        else:
            _unlink_copy(target)
            data = bytearray(target.read_bytes())
            # the last entry points past the end of its segment
            past = target.with_suffix(".log").stat().st_size + 4096
            data[-4:] = past.to_bytes(4, "big")
            target.write_bytes(bytes(data))
            return {"kind": "index", "file": str(target), "entry": len(data) // 8 - 1}
    seg = segs[len(segs) // 2] if how == "crc" else segs[-1]
    _unlink_copy(seg)
    batches = list(Segment(seg).batches())
    if how == "torn":
        b = batches[-1]
        with open(seg, "r+b") as f:
            f.truncate(b.position + b.size_in_bytes // 2)
        return {"kind": "torn", "file": str(seg), "position": b.position, "base_offset": b.base_offset}
    b = rng.choice([x for x in batches if not x.is_control and x.count > 1] or batches)
    data = bytearray(seg.read_bytes())
    at = b.position + 61 + rng.randrange(max(1, b.size_in_bytes - 61))
    data[at] ^= 0x5A
    seg.write_bytes(bytes(data))
    return {"kind": "crc", "file": str(seg), "position": b.position, "base_offset": b.base_offset, "byte": at}


def _unlink_copy(p: Path) -> None:
    tmp = p.with_name(p.name + ".tmp-copy")
    shutil.copyfile(p, tmp)
    commit_part(tmp, p)


def _replicate(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file():
            try:
                os.link(f, dst / f.name)
            except OSError:
                shutil.copyfile(f, dst / f.name)


def generate_fleet(
    root: str | os.PathLike[str],
    *,
    clusters: int = 4,
    nodes: int = 3,
    topics: tuple[int, int] = (20, 200),
    partitions: int = 12,
    brokers: tuple[int, int] = (3, 9),
    segment_bytes: int = 1 << 20,
    corrupt: int = 0,
    seed: int = 42,
    versions: tuple[str, ...] = FLEET_VERSIONS,
    progress=None,
) -> Fleet:
    """Writes a fleet under ``root`` (see the module docstring) and its manifest."""
    from kraftkit.features.registry import registry

    reg = registry()
    rng = random.Random(seed)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    damaged = set(rng.sample(range(clusters), min(corrupt, clusters)))
    infos: list[ClusterInfo] = []
    for c in range(clusters):
        name = f"cluster-{c:03d}"
        mv = reg.metadata_version(versions[c % len(versions)])
        n_topics = rng.randint(*topics)
        n_brokers = rng.randint(*brokers)
        node_names = [f"node-{i}" for i in range(nodes)]
        first = root / name / node_names[0] / PARTITION
        records, snap = write_cluster(
            first,
            random.Random(rng.getrandbits(64)),
            mv.level,
            topics=n_topics,
            partitions=partitions,
            brokers=n_brokers,
            segment_bytes=segment_bytes,
        )
        for other in node_names[1:]:
            _replicate(first, root / name / other / PARTITION)
        info = ClusterInfo(name, node_names, mv.name, n_topics, n_brokers, records, snap)
        if c in damaged:
            how = CORRUPTIONS[sum(1 for i in infos if i.damage) % len(CORRUPTIONS)]
            victim = node_names[-1]
            d = _damage(root / name / victim / PARTITION, how, rng)
            d["node"] = victim
            info.damage.append(d)
        infos.append(info)
        if progress is not None:
            progress(c + 1, clusters)
    fleet = Fleet(str(root), infos)
    fleet.write_manifest()
    return fleet
