#!/usr/bin/env python3
"""Write ``fixtures/``: small golden files written by real Apache Kafka releases.

For each release in ``RELEASES`` one combined KRaft node (``tests/harness/node.py``) on
127.0.0.1 runs this scenario:

1. ``kafka-storage format`` with the fixed ``CLUSTER_ID`` (static quorum before 4.0, a
   ``--standalone`` dynamic quorum from 4.0, as the harness does);
2. Kafka's own ``TopicCommand``, ``ConfigCommand``, ``AclCommand`` (and, from 3.6, with a
   SASL/SCRAM listener, ``DelegationTokenCommand``) run the steps in ``metadata_steps``:
   topics, a partition increase, a deleted topic, topic/broker/cluster-default configs (one
   deleted again), client quotas, SCRAM credentials (one deleted again), ACLs (one removed
   again), a delegation token;
3. one topic per codec (``codec-<none|gzip|snappy|lz4|zstd>``) receives ``JOBS_PER_TOPIC``
   producer runs of ``RECORDS_PER_JOB`` records each (Kafka's Java producer; one flush per
   run, so one batch per run; fixed keys, values and timestamps); idempotent producers make
   the controller write ProducerIdsRecords;
4. the node keeps writing time-based metadata snapshots; the script waits for two more after
   the last step (the newer covers everything), then stops the node cleanly.

It then copies only the files a reader needs into ``fixtures/kafka-<release>/data/`` (the
node's single log dir, which is also its metadata dir): ``meta.properties``,
``bootstrap.checkpoint`` (before 4.4), the metadata log's first segment, the snapshot
``kafka-storage format`` wrote (``00000000000000000000-0000000000.checkpoint``, from 4.0
with a dynamic quorum; from 4.4 it holds the bootstrap feature levels too) and the newest
snapshot, and each codec topic's segment with its ``.index`` and ``.timeindex``. Kafka's own
``kafka-dump-log`` reads every copied file; what it reports (batches, records, codecs, record
types, index entries) goes into ``fixtures/MANIFEST.json`` with each file's sha256, and the
tests compare kraftkit's reading against it.

Usage::

    python scripts/gen_fixtures.py                   # write the releases MANIFEST.json lacks or that do not match it
    python scripts/gen_fixtures.py --release 4.3.1   # redo one release (repeatable)
    python scripts/gen_fixtures.py --check           # exit 1 unless every file matches MANIFEST.json

Needs Java 17+ and the Kafka jars (``python -m tests.harness fetch --version X``). Segments
of the data topics are byte-for-byte reproducible for a release (fixed keys, values,
timestamps, one batch per producer run, producer ids allocated from 0); the metadata is not
(topic ids, directory ids, incarnation ids and batch timestamps are Kafka's choice).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.harness import dumplog, jars, tools  # noqa: E402
from tests.harness.jars import HarnessError  # noqa: E402
from tests.harness.node import KafkaNode, SaslScramNode  # noqa: E402

OUT = REPO / "fixtures"
MANIFEST = OUT / "MANIFEST.json"

#: releases written, oldest first; a failure of an OPTIONAL one is reported, not fatal
RELEASES = ("3.5.2", "3.9.2", "4.3.1", "4.4.0")
OPTIONAL = frozenset({"4.4.0"})

#: base64 of b"kraftkit-fixture" (a valid Kafka Uuid)
CLUSTER_ID = "a3JhZnRraXQtZml4dHVyZQ"
NODE_ID = 1

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
JOBS_PER_TOPIC = 4
RECORDS_PER_JOB = 8
BASE_TIMESTAMP = 1_700_000_000_000  # 2023-11-14T22:13:20Z; record i has BASE_TIMESTAMP + 1000 * i
INDEX_INTERVAL_BYTES = 128  # an index entry for (almost) every batch
SNAPSHOT_INTERVAL_MS = 2000
#: the codec topics' configs. retention.ms=-1: the records' fixed timestamps are years old, and
#: Kafka 3.5.2 deleted such a segment by the 7-day default retention in this scenario (after the
#: dynamic cluster-default broker configs), log.retention.hours=-1 in server.properties notwithstanding
CODEC_TOPIC_CONFIGS = {"index.interval.bytes": str(INDEX_INTERVAL_BYTES), "retention.ms": "-1"}

TOKEN_USER, TOKEN_PASSWORD, TOKEN_RENEWER = "alice", "alice-secret", "bob"

#: topic -> partitions at creation
TOPICS = {"orders": 3, "events": 2, "growing": 1, "doomed": 1}
GROWN = ("growing", 2)
DELETED = ("doomed",)
TOPIC_CONFIGS = {"orders": {"retention.ms": "86400000", "cleanup.policy": "delete"}}
#: configs set after creation: (entity type, entity name or None for the default, {key: value})
CONFIGS = [
    ("topics", "events", {"max.message.bytes": "2000000", "retention.bytes": "1048576"}),
    ("brokers", str(NODE_ID), {"log.cleaner.threads": "2"}),
    ("brokers", None, {"log.retention.bytes": "1099511627776", "log.cleaner.backoff.ms": "20000"}),
]
DELETED_CONFIGS = [("topics", "events", "retention.bytes"), ("brokers", None, "log.cleaner.backoff.ms")]
#: client quotas: ([(entity type, name or None)], {key: value})
QUOTAS = [
    ([("users", "alice")], {"producer_byte_rate": "1048576"}),
    ([("clients", "app-1")], {"request_percentage": "50.5"}),
    ([("users", "bob"), ("clients", "app-2")], {"consumer_byte_rate": "4096"}),
    ([("users", None)], {"consumer_byte_rate": "1000000"}),
]
#: SCRAM credentials: (user, mechanism, iterations); carol's is deleted again
SCRAM = [(TOKEN_USER, "SCRAM-SHA-256", 8192), (TOKEN_USER, "SCRAM-SHA-512", 4096), ("carol", "SCRAM-SHA-256", 4096)]
DELETED_SCRAM = [("carol", "SCRAM-SHA-256")]
#: ACLs: (principal, operation, resource flag, resource name, pattern type); the last is removed again
ACLS = [
    ("User:alice", "Read", "--topic", "orders", "literal"),
    ("User:bob", "Describe", "--topic", "ev", "prefixed"),
    ("User:alice", "Write", "--topic", "orders", "literal"),
]
REMOVED_ACLS = [ACLS[-1]]

_WORDS = ("kafka raft log segment batch record offset epoch leader voter snapshot metadata broker controller "
          "topic partition replica fetch commit abort kraftkit crc varint header key value").split()


def release_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def has_tokens(version: str) -> bool:
    """Delegation tokens in KRaft mode came with Kafka 3.6."""
    return release_tuple(version) >= (3, 6)


def dynamic_quorum(version: str) -> bool:
    return jars.major(version) >= 4


#: the snapshot ``kafka-storage format`` writes with a dynamic quorum (and, from 4.4, always)
BOOTSTRAP_SNAPSHOT = f"{0:020d}-{0:010d}.checkpoint"


def topic_dir(codec: str) -> str:
    return f"codec-{codec}-0"


# ------------------------------------------------------------------------------ the node

class FixtureNode(SaslScramNode):
    """``SaslScramNode`` (SCRAM users, ACLs, the delegation token) with time-based metadata
    snapshots and small index files."""

    def properties(self) -> dict[str, object]:
        props = super().properties()
        props.update({
            "metadata.log.max.snapshot.interval.ms": SNAPSHOT_INTERVAL_MS,
            "metadata.max.idle.interval.ms": 5000,  # a few NoOpRecords, not hundreds
            "log.index.size.max.bytes": 4096,
        })
        if has_tokens(self.version):  # 3.5 refuses to start with a token secret in KRaft mode
            props["delegation.token.secret.key"] = "kraftkit-fixture-token-secret"
        return props


# ------------------------------------------------------------------------------ the scenario

def metadata_steps(version: str, bootstrap: str, sasl_bootstrap: str, client_config: Path) -> list[tuple]:
    """``(main class, args, retry)`` in order. ``retry``: the step may run before the broker's
    metadata shows an earlier step (e.g. a topic just created), so a failure is retried."""
    topic_cmd = tools.topic_command_class(version)
    config_cmd = tools.find_class(version, "org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand")
    acl_cmd = tools.find_class(version, "org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand")
    bs = ["--bootstrap-server", bootstrap]
    steps: list[tuple] = []

    def entity(etype: str, name: str | None) -> list[str]:
        return ["--entity-type", etype, *(["--entity-name", name] if name is not None else ["--entity-default"])]

    for name, n in TOPICS.items():
        cfg = [x for k, v in TOPIC_CONFIGS.get(name, {}).items() for x in ("--config", f"{k}={v}")]
        steps.append((topic_cmd, [*bs, "--create", "--topic", name, "--partitions", str(n),
                                  "--replication-factor", "1", *cfg], False))
    steps.append((topic_cmd, [*bs, "--alter", "--topic", GROWN[0], "--partitions", str(GROWN[1])], True))
    for name in DELETED:
        steps.append((topic_cmd, [*bs, "--delete", "--topic", name], True))
    for etype, name, cfg in CONFIGS:
        steps.append((config_cmd, [*bs, "--alter", *entity(etype, name),
                                   "--add-config", ",".join(f"{k}={v}" for k, v in cfg.items())], True))
    for etype, name, key in DELETED_CONFIGS:
        steps.append((config_cmd, [*bs, "--alter", *entity(etype, name), "--delete-config", key], True))
    for entities, cfg in QUOTAS:
        args = [x for etype, name in entities for x in entity(etype, name)]
        steps.append((config_cmd, [*bs, "--alter", *args,
                                   "--add-config", ",".join(f"{k}={v}" for k, v in cfg.items())], True))
    # one mechanism per request ("A user credential cannot be altered twice in the same request")
    for user, mech, iterations in SCRAM:
        steps.append((config_cmd, [*bs, "--alter", *entity("users", user), "--add-config",
                                   f"{mech}=[iterations={iterations},password={user}-secret]"], True))
    for user, mech in DELETED_SCRAM:
        steps.append((config_cmd, [*bs, "--alter", *entity("users", user), "--delete-config", mech], True))
    for principal, op, flag, name, pattern in ACLS:
        steps.append((acl_cmd, [*bs, "--add", "--allow-principal", principal, "--operation", op, flag, name,
                                "--resource-pattern-type", pattern], True))
    for principal, op, flag, name, pattern in REMOVED_ACLS:
        steps.append((acl_cmd, [*bs, "--remove", "--force", "--allow-principal", principal, "--operation", op,
                                flag, name, "--resource-pattern-type", pattern], True))
    if has_tokens(version):
        token_cmd = tools.find_class(version, "org.apache.kafka.tools.DelegationTokenCommand",
                                     "kafka.admin.DelegationTokenCommand")
        steps.append((token_cmd, ["--bootstrap-server", sasl_bootstrap, "--command-config", str(client_config),
                                  "--create", "--max-life-time-period", "-1",
                                  "--renewer-principal", f"User:{TOKEN_RENEWER}"], True))
    return steps


def run_steps(version: str, steps: list[tuple], log: Path) -> None:
    with open(log, "a") as out:
        for i, (cls, args, retry) in enumerate(steps):
            deadline = time.monotonic() + 60
            while True:
                proc = tools.run_tool(version, cls, args, timeout=120, check=False)
                out.write(f"=== step {i}: {cls} {args} -> {proc.returncode}\n{proc.stdout}{proc.stderr}\n")
                out.flush()
                # TopicCommand prints "Error while executing topic command" and may still exit 0 (3.x)
                failed = proc.returncode != 0 or "Error while executing" in proc.stdout + proc.stderr
                if not failed:
                    break
                if not retry or time.monotonic() > deadline:
                    raise HarnessError(f"step {i} ({cls.rsplit('.', 1)[-1]} {' '.join(args[2:])}) failed "
                                       f"({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
                time.sleep(1.0)


def record(codec: str, i: int) -> dict:
    rng = random.Random(f"kraftkit-fixture:{codec}:{i}")
    value = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 24))).encode()
    headers = [("trace", str(i).encode())] if i % 3 == 0 else []
    return {"key": None if i % 5 == 4 else f"key-{i % 7}".encode(), "value": value, "headers": headers,
            "timestamp": BASE_TIMESTAMP + 1000 * i}


def produce_jobs() -> list[dict]:
    jobs = []
    for codec in CODECS:
        for j in range(JOBS_PER_TOPIC):
            recs = [record(codec, j * RECORDS_PER_JOB + k) for k in range(RECORDS_PER_JOB)]
            # a long linger: all of a run's records wait for its flush and leave in one batch
            jobs.append({"topic": f"codec-{codec}", "records": recs,
                         "props": {"compression.type": codec, "linger.ms": 60000, "batch.size": 65536}})
    return jobs


def snapshots(metadata_log_dir: Path) -> list[Path]:
    """The snapshots Kafka took (not the one ``kafka-storage format`` wrote at offset 0)."""
    return sorted(p for p in metadata_log_dir.glob("*.checkpoint") if p.name != BOOTSTRAP_SNAPSHOT)


def wait_for_snapshots(metadata_log_dir: Path, count: int, timeout: float = 90.0) -> Path:
    """Waits until ``count`` snapshots newer than the newest one now exist; returns the newest."""
    before = {p.name for p in snapshots(metadata_log_dir)}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = [p for p in snapshots(metadata_log_dir) if p.name not in before]
        if len(new) >= count:
            return new[-1]
        time.sleep(0.5)
    raise HarnessError(f"no {count} new metadata snapshots in {metadata_log_dir} after {timeout:.0f}s")


def run_scenario(version: str, work: Path) -> dict:
    """Runs the node and the scenario in ``work``; returns what the manifest records."""
    node = FixtureNode(work / "node", version, dynamic_quorum=dynamic_quorum(version), cluster_id=CLUSTER_ID)
    client_config = work / "client.properties"
    client_config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{TOKEN_USER}" password="{TOKEN_USER}-secret";\n')
    with node:
        formatted = node.format_output
        log = work / "steps.log"
        run_steps(version, metadata_steps(version, node.bootstrap, node.sasl_bootstrap, client_config), log)
        tools.create_topics(version, node.bootstrap, [
            {"name": f"codec-{c}", "partitions": 1, "configs": CODEC_TOPIC_CONFIGS} for c in CODECS])
        acks = tools.produce(version, node.bootstrap, produce_jobs(), timeout=300)
        produced = Counter(a["topic"] for a in acks)
        ends = {t: max(a["offset"] for a in acks if a["topic"] == t) + 1 for t in produced}
        if any(ends[t] != n for t, n in produced.items()):
            raise HarnessError(f"offsets do not follow the acks: {ends} vs {dict(produced)}")
        newest = wait_for_snapshots(node.metadata_log_dir, 2)
    level = re.search(r"metadata\.version (\S+?)\.?\s*$", formatted, re.M)
    return {"node": node, "snapshot": newest.name, "produced": dict(sorted(produced.items())),
            "format_output": formatted.strip().replace(str(work), "<workdir>"),
            "metadata_version": level.group(1) if level else None}


# ------------------------------------------------------------------------------ copying

def copy_files(node: KafkaNode, snapshot: str, dest: Path) -> list[Path]:
    """The files a reader needs, copied from the stopped node's log dir into ``dest``."""
    src = node.log_dirs[0]
    meta = "__cluster_metadata-0"
    wanted = ["meta.properties", "bootstrap.checkpoint", f"{meta}/{'0' * 20}.log",
              f"{meta}/{BOOTSTRAP_SNAPSHOT}", f"{meta}/{snapshot}"]
    for c in CODECS:
        wanted += [f"{topic_dir(c)}/{'0' * 20}{ext}" for ext in (".log", ".index", ".timeindex")]
    copied = []
    for rel in wanted:
        f = src / rel
        if not f.is_file():
            if rel in ("bootstrap.checkpoint", f"{meta}/{BOOTSTRAP_SNAPSHOT}"):
                continue  # which of the two kafka-storage format writes depends on the release
            raise HarnessError(f"Kafka {node.version} did not write {rel}")
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest / rel)
        copied.append(dest / rel)
    return copied


def control_type_name(control: dict) -> str:
    """Kafka's ``ControlRecordType`` name of a control record as dumplog parsed it: kafka-dump-log
    prints some by that name (``controlType: LEADER_CHANGE(2)``), others as ``SnapshotHeader: {...}``."""
    if control["type"] == "controlType":
        return control["name"]
    if control["type"] == "endTxnMarker":
        return control["marker"]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", control["type"].replace("KRaft", "Kraft")).upper()


def kafka_reading(version: str, files: list[Path]) -> dict[str, dict]:
    """What Kafka's own kafka-dump-log reports about each file (relative to ``OUT``)."""
    meta = [f for f in files if f.suffix in (".log", ".checkpoint") and "__cluster_metadata" in str(f)
            or f.name == "bootstrap.checkpoint"]
    data = [f for f in files if f.suffix in (".log", ".index", ".timeindex") and f not in meta]
    parsed = {}
    parsed.update(tools.dump_log_parsed(version, meta, deep=True, cluster_metadata=True))
    parsed.update(tools.dump_log_parsed(version, data, deep=True))
    out = {}
    for f in files:
        if f.suffix not in (".log", ".checkpoint", ".index", ".timeindex"):
            continue
        d = parsed.get(str(f))
        if d is None:
            raise HarnessError(f"kafka-dump-log printed nothing for {f}")
        if d["errors"] or d["unparsed"]:
            raise HarnessError(f"kafka-dump-log reported on {f}: {d['errors'][:5]} {d['unparsed'][:5]}")
        info: dict = {}
        if f.suffix in (".index", ".timeindex"):
            info["entries"] = len(d["entries"])
        else:
            batches = d["batches"]
            records = [r for b in batches for r in b.get("records", [])]
            info["batches"] = len(batches)
            info["records"] = len(records)
            info["control_batches"] = sum(1 for b in batches if b["isControl"])
            if batches:
                info["first_offset"], info["last_offset"] = batches[0]["baseOffset"], batches[-1]["lastOffset"]
            info["codecs"] = sorted({b["compresscodec"] for b in batches})
            types, features = Counter(), {}
            for r in records:
                payload = r.get("payload_json")
                if r.get("control"):
                    types[control_type_name(r["control"])] += 1
                elif isinstance(payload, dict) and "type" in payload:
                    types[payload["type"]] += 1
                    if payload["type"] == "FEATURE_LEVEL_RECORD":
                        features[payload["data"]["name"]] = payload["data"]["featureLevel"]
            if types:
                info["types"] = dict(sorted(types.items()))
            if features:
                info["features"] = dict(sorted(features.items()))
        out[str(f.relative_to(OUT))] = info
    return out


# ------------------------------------------------------------------------------ the manifest

def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def release_root(version: str) -> Path:
    return OUT / f"kafka-{version}"


def scenario_constants(version: str) -> dict:
    return {
        "cluster_id": CLUSTER_ID, "node_id": NODE_ID, "dynamic_quorum": dynamic_quorum(version),
        "codecs": list(CODECS), "jobs_per_topic": JOBS_PER_TOPIC, "records_per_job": RECORDS_PER_JOB,
        "base_timestamp": BASE_TIMESTAMP, "index_interval_bytes": INDEX_INTERVAL_BYTES,
        "topics": {**{n: p for n, p in TOPICS.items() if n not in DELETED}, GROWN[0]: GROWN[1],
                   **{f"codec-{c}": 1 for c in CODECS}},
        "deleted_topics": list(DELETED),
        "topic_configs": {**TOPIC_CONFIGS, **{f"codec-{c}": CODEC_TOPIC_CONFIGS for c in CODECS},
                          **{n: {k: v for k, v in cfg.items() if (et, n, k) not in DELETED_CONFIGS}
                             for et, n, cfg in CONFIGS if et == "topics"}},
        "scram": [list(x) for x in sorted({(u, m) for u, m, _ in SCRAM} - set(DELETED_SCRAM))],
        "quota_entities": len(QUOTAS),
        "acls": len(ACLS) - len(REMOVED_ACLS),
        "delegation_tokens": 1 if has_tokens(version) else 0,
    }


def load_manifest() -> dict:
    if MANIFEST.is_file():
        return json.loads(MANIFEST.read_text())
    return {"releases": {}, "files": {}}


def write_manifest(m: dict) -> None:
    m["files"] = dict(sorted(m["files"].items()))
    m["releases"] = dict(sorted(m["releases"].items(), key=lambda kv: release_tuple(kv[0])))
    tmp = MANIFEST.with_name(MANIFEST.name + ".tmp")
    tmp.write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")
    tmp.replace(MANIFEST)


README_HEAD = """\
# fixtures: files written by real Apache Kafka releases

Small golden files that Apache Kafka itself wrote, for tests that read them without Java.
They are Apache Kafka's output (Apache Kafka, Copyright The Apache Software Foundation,
licensed under the Apache License, Version 2.0: https://www.apache.org/licenses/LICENSE-2.0).
Nothing here was written or edited by kraftkit; every byte is a copy of what a stopped Kafka
node left in its log directory.

`scripts/gen_fixtures.py` wrote them (this file too) and says how: one combined KRaft node per
release on 127.0.0.1, Kafka's own `kafka-storage format`, `kafka-topics`, `kafka-configs`,
`kafka-acls` and `kafka-delegation-tokens` tools (run by the test harness, `tests/harness/`),
Kafka's Java producer for the data topics. `MANIFEST.json` lists every file with its sha256,
its size, the release that wrote it and what Kafka's `kafka-dump-log` reported about it
(batches, records, codecs, record types, index entries); the tests in `tests/fixtures/` check
the files against it and compare kraftkit's reading with Kafka's.

Each `kafka-<release>/data/` is the node's log directory (also its metadata directory), with
only these files kept:

* `meta.properties`: written by `kafka-storage format`.
* `bootstrap.checkpoint`: the bootstrap feature levels, written by `kafka-storage format`
  (up to 4.3; 4.4 no longer writes it).
* `__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`: written by
  `kafka-storage format --standalone` (the 4.x nodes here): KRaftVersion and KRaftVoters; from
  4.4 it also holds the bootstrap feature levels, in place of `bootstrap.checkpoint`.
* `__cluster_metadata-0/00000000000000000000.log`: the whole metadata log, every record the
  scenario made Kafka write (its `.index`/`.timeindex` are not kept).
* `__cluster_metadata-0/<offset>-<epoch>.checkpoint`: the newest metadata snapshot
  (time-based, taken after the last step).
* `codec-<none|gzip|snappy|lz4|zstd>-0/00000000000000000000.{log,index,timeindex}`: one
  segment per codec: %(jobs)d producer runs of %(records)d records (one batch each), fixed keys,
  values and timestamps, `index.interval.bytes=%(interval)d`, `retention.ms=-1`.

Regenerate with `python scripts/gen_fixtures.py --release <release>` (Java 17+, the jars
from `python -m tests.harness fetch --version <release>`); `--check` compares the files with
the manifest. The data segments come out byte for byte the same; metadata does not (topic ids,
directory ids and timestamps are Kafka's choice).

| release | written | command | metadata.version | files | bytes |
|---|---|---|---|---|---|
"""


def write_readme(m: dict) -> None:
    text = README_HEAD % {"jobs": JOBS_PER_TOPIC, "records": RECORDS_PER_JOB, "interval": INDEX_INTERVAL_BYTES}
    for v, info in m["releases"].items():
        mine = [e for e in m["files"].values() if e["release"] == v]
        text += (f"| Apache Kafka {v} | {info['date']} | `{info['command']}` | {info['metadata_version']} "
                 f"| {len(mine)} | {sum(e['bytes'] for e in mine)} |\n")
    missing = [v for v in RELEASES if v not in m["releases"]]
    if missing:
        text += f"\nNot written: {', '.join(missing)} (see the script's output).\n"
    tmp = OUT / "README.md.tmp"
    tmp.write_text(text)
    tmp.replace(OUT / "README.md")


def problems(m: dict, version: str | None = None) -> list[str]:
    """Files of ``version`` (or all) that differ from the manifest, are missing, or are not listed."""
    out = []
    for rel, entry in m["files"].items():
        if version is not None and entry["release"] != version:
            continue
        f = OUT / rel
        if not f.is_file():
            out.append(f"{rel}: missing")
        elif sha256(f) != entry["sha256"]:
            out.append(f"{rel}: sha256 differs")
    roots = [release_root(version)] if version else sorted(OUT.glob("kafka-*"))
    for root in roots:
        for f in sorted(root.rglob("*")) if root.is_dir() else ():
            if f.is_file() and str(f.relative_to(OUT)) not in m["files"]:
                out.append(f"{f.relative_to(OUT)}: not in MANIFEST.json")
    if version is not None and version not in m["releases"]:
        out.append(f"kafka-{version}: not in MANIFEST.json")
    return out


def generate(version: str, keep: bool) -> None:
    jars.require_java()
    jars.ensure_kafka(version)
    work = Path(tempfile.mkdtemp(prefix=f"kk-fixtures-{version}-"))
    staging = OUT / f".kafka-{version}.tmp"
    try:
        t0 = time.monotonic()
        res = run_scenario(version, work)
        if staging.exists():
            shutil.rmtree(staging)
        files = copy_files(res["node"], res["snapshot"], staging / "data")
        final = release_root(version)
        reading = kafka_reading(version, files)
        # the paths kafka-dump-log saw were the staging ones
        reading = {rel.replace(staging.name, final.name, 1): v for rel, v in reading.items()}
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
        m = load_manifest()
        m["files"] = {k: v for k, v in m["files"].items() if v["release"] != version}
        for f in sorted(final.rglob("*")):
            if f.is_file():
                rel = str(f.relative_to(OUT))
                m["files"][rel] = {"release": version, "sha256": sha256(f), "bytes": f.stat().st_size,
                                   **({"kafka": reading[rel]} if rel in reading else {})}
        m["releases"][version] = {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "command": f"python scripts/gen_fixtures.py --release {version}",
            "java": subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0],
            "format_output": res["format_output"],
            "metadata_version": res["metadata_version"],
            "produced": res["produced"],
            "snapshot": res["snapshot"],
            "scenario": scenario_constants(version),
        }
        write_manifest(m)
        write_readme(m)
        print(f"kafka-{version}: {len(files)} files, {sum(f.stat().st_size for f in final.rglob('*') if f.is_file())} "
              f"bytes, {time.monotonic() - t0:.0f} s")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if keep:
            print(f"kept the node's directory: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", action="append", choices=RELEASES, help="redo this release (repeatable)")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every file matches MANIFEST.json")
    ap.add_argument("--keep", action="store_true", help="keep the node's working directory (for debugging)")
    args = ap.parse_args(argv)
    m = load_manifest()
    if args.check:
        found = problems(m)
        for p in found:
            print(p)
        return 1 if found else 0
    todo = args.release or [v for v in RELEASES if problems(m, v)]
    failed = []
    for v in todo:
        try:
            generate(v, args.keep)
        except HarnessError as e:
            if v in OPTIONAL and not args.release:
                print(f"kafka-{v} (optional) not written: {e}", file=sys.stderr)
                continue
            failed.append(v)
            print(f"kafka-{v} failed: {e}", file=sys.stderr)
    if not todo:
        print("fixtures/ matches MANIFEST.json; nothing to do (--release X redoes one)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
