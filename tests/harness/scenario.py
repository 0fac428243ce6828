"""Build a realistic data set written by a real Kafka node, cached for reuse.

``build_oracle_data(workdir=None, version=KAFKA_4) -> OracleData``:

1. start a combined KRaft node (``node.KafkaNode``; dynamic quorum on 4.x so the metadata
   log holds KRaftVersion/KRaftVoters records; small metadata segments + frequent
   metadata snapshots);
2. create the topics in ``TOPICS`` (one per codec ``codec-<none|gzip|snappy|lz4|zstd>``
   plus ``txn`` (transactions, commits and aborts), ``log-append-time``,
   ``non-idempotent`` (producerId -1) and ``compacted`` (tombstones; never actually
   cleaned: min.compaction.lag.ms is huge)), all with small segments so they roll;
3. produce deterministic records (seeded random keys, text values of varied sizes,
   headers) with Kafka's Java producer -- half, restart the node, the other half (so
   partition leader epochs change mid-log);
4. consume everything back with Kafka's Java consumer and check consumed == produced;
5. stop the node cleanly and store the data + a manifest under
   ``.cache/oracle-data/<version>-<scenario hash>/`` (reused while the scenario --
   this file, node.py, HarnessClient.java -- is unchanged).

With ``workdir`` given, the cached tree is copied there (so tests may mutate it) and the
returned ``OracleData`` points at the copy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import sys
from pathlib import Path

from . import jars, tools
from .cache import build_cached, copy_of
from .jars import CACHE_DIR, HarnessError
from .node import KafkaNode

HERE = Path(__file__).resolve().parent
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
RECORDS_PER_TOPIC = 3000
SEGMENT_BYTES = 128 * 1024
METADATA_SEGMENT_BYTES = 4 * 1024


@dataclasses.dataclass(frozen=True)
class TopicSpec:
    name: str
    codec: str  # producer compression.type
    configs: dict  # topic configs (besides segment size)
    producer_props: dict
    kind: str = "plain"  # plain | txn | compacted
    timestamp_type: str = "CreateTime"


TOPICS: tuple[TopicSpec, ...] = (
    *(TopicSpec(f"codec-{c}", c, {}, {"linger.ms": 5}) for c in CODECS),
    TopicSpec("txn", "gzip", {}, {"linger.ms": 5}, kind="txn"),
    TopicSpec("log-append-time", "zstd", {"message.timestamp.type": "LogAppendTime"},
              {"linger.ms": 5}, timestamp_type="LogAppendTime"),
    TopicSpec("non-idempotent", "lz4", {}, {"enable.idempotence": "false", "acks": "1",
                                            "linger.ms": 5}),
    TopicSpec("compacted", "snappy", {"cleanup.policy": "compact",
                                      "min.compaction.lag.ms": str(10 * 365 * 86400 * 1000)},
              {"linger.ms": 5}, kind="compacted"),
)

_WORDS = ("kafka raft log segment batch record offset epoch leader voter snapshot "
          "metadata broker controller topic partition replica fetch commit abort "
          "kraftkit zstd lz4 gzip snappy crc varint header key value é ü ß 日本 Ωμέγα").split()


@dataclasses.dataclass
class OracleData:
    """What ``build_oracle_data`` made.  Paths point at the copy (or the cache)."""

    root: Path
    version: str
    cluster_id: str
    log_dirs: list[Path]
    metadata_dir: Path
    topics: dict[str, TopicSpec]
    # topic -> records in offset order: {"offset", "partition", "timestamp", "key",
    # "value", "headers": [(str, bytes|None)], "committed": bool, "txn": int}
    produced: dict[str, list[dict]]
    node_dir: Path

    @property
    def metadata_log_dir(self) -> Path:
        return self.metadata_dir / "__cluster_metadata-0"

    def partition_dir(self, topic: str, partition: int = 0) -> Path:
        for d in self.log_dirs:
            p = d / f"{topic}-{partition}"
            if p.is_dir():
                return p
        raise KeyError(f"{topic}-{partition} not in {self.log_dirs}")

    def segment_files(self, topic: str, suffix: str = ".log", partition: int = 0) -> list[Path]:
        return sorted(self.partition_dir(topic, partition).glob(f"*{suffix}"))

    def node(self, **kw) -> KafkaNode:
        """A ``KafkaNode`` on this (copied) data: ``with data.node() as n: ...`` restarts real
        Kafka on it (new ports; no format), e.g. to check Kafka accepts files kraftkit wrote.
        Refused on the shared cache itself (use ``build_oracle_data(workdir)``)."""
        if self.root.resolve() == cache_root(self.version).resolve():
            raise HarnessError("refusing to run Kafka on the shared oracle cache; pass a workdir")
        return KafkaNode(self.node_dir, self.version, dynamic_quorum=jars.major(self.version) >= 4,
                         extra_props=_node_props(self.version), cluster_id=self.cluster_id, **kw)

    def committed(self, topic: str) -> list[dict]:
        """What a read_committed consumer sees (all records for non-transactional topics)."""
        return [r for r in self.produced[topic] if r["committed"]]


def _scenario_hash() -> str:
    h = hashlib.sha256(f"py{sys.version_info[0]}.{sys.version_info[1]}".encode())
    for f in (HERE / "scenario.py", HERE / "node.py", HERE / "java" / "HarnessClient.java"):
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def cache_root(version: str) -> Path:
    return CACHE_DIR / "oracle-data" / f"{version}-{_scenario_hash()}"


# ------------------------------------------------------------------ records

def _text(rng: random.Random, size: int) -> bytes:
    out, n = [], 0
    while n < size:
        w = rng.choice(_WORDS) if rng.random() < 0.7 else str(rng.randrange(10 ** rng.randint(1, 9)))
        out.append(w)
        n += len(w.encode()) + 1
    return " ".join(out).encode()[:size].decode("utf-8", "ignore").encode()


def gen_records(topic: str, n: int, *, compacted: bool = False) -> list[dict]:
    rng = random.Random(f"kraftkit-oracle:{topic}")
    recs = []
    for i in range(n):
        r = rng.random()
        if r < 0.70:
            size = rng.randint(1, 600)
        elif r < 0.93:
            size = rng.randint(600, 3000)
        elif r < 0.99:
            size = rng.randint(3000, 20000)
        else:
            size = rng.randint(20000, 60000)  # bigger than batch.size: a batch of its own
        value = _text(rng, size)
        if i % 97 == 13:
            value = b""
        elif i % 251 == 7:
            value = b"line one\nline two\n\nline four"  # dump-log prints it over 4 lines
        if compacted:
            key = f"user-{rng.randrange(200)}".encode()
            if rng.random() < 0.1:
                value = None  # tombstone
        elif i % 10 == 3:
            key = None
        else:
            key = f"key-{rng.randrange(500)}-{'é' if i % 7 == 0 else ''}".encode()
        headers = []
        for j in range(rng.choice((0, 0, 1, 2, 3))):
            hv = None if rng.random() < 0.1 else _text(rng, rng.randint(0, 40))
            headers.append((("trace-id", "h-é", "source", "h3")[j], hv))
        recs.append({"key": key, "value": value, "headers": headers})
    return recs


def _topic_configs(spec: TopicSpec, version: str) -> dict:
    seg_key = "internal.segment.bytes" if jars.major(version) >= 4 else "segment.bytes"
    return {seg_key: str(SEGMENT_BYTES), **spec.configs}


def _node_props(version: str) -> dict:
    props: dict = {
        "metadata.log.max.record.bytes.between.snapshots": 8192,
        "metadata.log.max.snapshot.interval.ms": 5000,
    }
    if jars.major(version) >= 4:
        props["internal.metadata.log.segment.bytes"] = METADATA_SEGMENT_BYTES
    else:
        props["metadata.log.segment.min.bytes"] = METADATA_SEGMENT_BYTES
        props["metadata.log.segment.bytes"] = METADATA_SEGMENT_BYTES
    return props


def _jobs(spec: TopicSpec, records: list[dict], phase: int) -> list[dict]:
    props = {"compression.type": spec.codec, **spec.producer_props}
    if spec.kind == "txn":
        txns, size = [], 25
        for t, start in enumerate(range(0, len(records), size)):
            txns.append({"commit": (t + phase) % 4 != 3, "records": records[start:start + size]})
        return [{"topic": spec.name, "props": props, "transactional_id": f"oracle-txn-{phase}",
                 "transactions": txns}]
    return [{"topic": spec.name, "props": props, "records": records}]


# ------------------------------------------------------------------- build

def _check_consumed(topic: str, produced: list[dict], consumed: list[dict]) -> None:
    if len(produced) != len(consumed):
        raise HarnessError(f"{topic}: produced {len(produced)} records, consumed {len(consumed)}")
    for p, c in zip(produced, consumed):
        for f in ("offset", "key", "value", "headers", "timestamp"):
            if p[f] != c[f]:
                raise HarnessError(f"{topic} offset {p['offset']}: {f} differs: "
                                   f"produced {p[f]!r:.200} consumed {c[f]!r:.200}")


def _build(root: Path, version: str) -> None:
    node = KafkaNode(root / "node", version, dynamic_quorum=jars.major(version) >= 4,
                     extra_props=_node_props(version))
    per_phase = RECORDS_PER_TOPIC // 2
    generated = {s.name: gen_records(s.name, RECORDS_PER_TOPIC, compacted=s.kind == "compacted")
                 for s in TOPICS}
    acks: dict[str, list[tuple[dict, dict]]] = {s.name: [] for s in TOPICS}
    with node:
        tools.create_topics(version, node.bootstrap, [
            {"name": s.name, "partitions": 1, "configs": _topic_configs(s, version)} for s in TOPICS])
        for phase in (0, 1):
            if phase == 1:  # restart on the same data dir: new leader epoch for the 2nd half
                node.stop()
                node.start()
            jobs, sent = [], []
            for s in TOPICS:
                recs = generated[s.name][phase * per_phase:(phase + 1) * per_phase]
                jobs += _jobs(s, recs, phase)
                sent += [(s.name, r) for r in recs]
            got = tools.produce(version, node.bootstrap, jobs, timeout=600)
            if len(got) != len(sent):
                raise HarnessError(f"producer acked {len(got)} of {len(sent)} records")
            for (topic, rec), ack in zip(sent, got):
                if ack["topic"] != topic:
                    raise HarnessError(f"ack for {ack['topic']} where {topic} was expected")
                acks[topic].append((rec, ack))
        produced: dict[str, list[dict]] = {}
        for s in TOPICS:
            rows = [{"offset": a["offset"], "partition": a["partition"], "timestamp": a["timestamp"],
                     "key": r["key"], "value": r["value"], "headers": list(r["headers"]),
                     "committed": a["committed"], "txn": a["txn"], "index": i}
                    for i, (r, a) in enumerate(acks[s.name])]
            rows.sort(key=lambda r: (r["partition"], r["offset"]))
            produced[s.name] = rows
            # (for LogAppendTime the ack carries the broker's append time, so timestamps match)
            consumed = tools.consume(version, node.bootstrap, s.name, isolation="read_committed")
            _check_consumed(s.name, [r for r in rows if r["committed"]], consumed)
    manifest = {
        "version": version,
        "cluster_id": node.cluster_id,
        "log_dirs": [str(d.relative_to(root)) for d in node.log_dirs],
        "metadata_dir": str(node.metadata_dir.relative_to(root)),
        "topics": [dataclasses.asdict(s) for s in TOPICS],
        # records are regenerated from their seed on load; only the acks are stored
        "acks": {t: [[r["partition"], r["offset"], r["timestamp"], r["committed"], r["txn"]]
                     for r in rows] for t, rows in produced.items()},
        "order": {t: [r["index"] for r in rows] for t, rows in produced.items()},
    }
    (root / "manifest.json").write_text(json.dumps(manifest))


def _produced_from_manifest(m: dict) -> dict[str, list[dict]]:
    out = {}
    for t in m["topics"]:
        name = t["name"]
        gen = gen_records(name, RECORDS_PER_TOPIC, compacted=t["kind"] == "compacted")
        out[name] = [{"offset": off, "partition": part, "timestamp": ts, "key": gen[i]["key"],
                      "value": gen[i]["value"], "headers": list(gen[i]["headers"]),
                      "committed": committed, "txn": txn}
                     for i, (part, off, ts, committed, txn) in zip(m["order"][name], m["acks"][name])]
    return out


def _load(root: Path) -> OracleData:
    m = json.loads((root / "manifest.json").read_text())
    return OracleData(
        root=root,
        version=m["version"],
        cluster_id=m["cluster_id"],
        log_dirs=[root / d for d in m["log_dirs"]],
        metadata_dir=root / m["metadata_dir"],
        topics={t["name"]: TopicSpec(**t) for t in m["topics"]},
        produced=_produced_from_manifest(m),
        node_dir=root / "node",
    )


def build_oracle_data(workdir: Path | str | None = None, version: str = jars.KAFKA_4) -> OracleData:
    """Build (or reuse from the cache) the oracle data set; copy it to ``workdir`` if given."""
    root = build_cached(cache_root(version), version, _build)
    return _load(copy_of(root, workdir))
