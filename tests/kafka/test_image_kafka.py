"""The metadata image against real Kafka: the image kraftkit builds from Kafka's
__cluster_metadata-0 holds what the scenario created, snapshots and the log agree, and real
Kafka boots from a snapshot kraftkit generated."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kraftkit.metadata.image import load_image, load_snapshot
from kraftkit.metadata.snapshot import SnapshotReader, list_snapshots
from tests.harness import jars, scenario, tools

pytestmark = pytest.mark.kafka

#: topic configs the scenario sets (scenario._topic_configs), version 4.x
SEG_KEY = "internal.segment.bytes"


def expected_topic_configs(spec) -> dict[str, str]:
    return {SEG_KEY: str(scenario.SEGMENT_BYTES), **spec.configs}


def test_image_holds_the_scenario(kafka_oracle):
    img = load_image(kafka_oracle.metadata_log_dir)
    user_topics = {t.name: t for t in img.topics.values() if not t.name.startswith("__")}
    assert set(user_topics) == set(kafka_oracle.topics)
    for name, spec in kafka_oracle.topics.items():
        t = user_topics[name]
        assert sorted(t.partitions) == [0]  # the scenario creates one partition per topic
        assert img.configs[(2, name)] == expected_topic_configs(spec)
    # Kafka's own internal topic for transactions (the scenario's txn producer) is there too.
    assert "__transaction_state" in img.topic_ids
    # One combined node: one broker and one controller, id 1.
    assert sorted(img.brokers) == [1] and sorted(img.controllers) == [1]
    mv = img.metadata_version
    assert mv is not None and mv >= 22
    assert img.features.get("group.version", 0) >= 1
    # The broker advertised a metadata.version range that contains the finalized level.
    feats = {f["Name"]: f for f in img.brokers[1]["Features"]}
    assert feats["metadata.version"]["MinSupportedVersion"] <= mv <= feats["metadata.version"]["MaxSupportedVersion"]
    assert img.next_producer_id >= 1000
    assert img.kraft_version == 1 and img.voters is not None


def test_snapshot_plus_log_equals_log_alone(kafka_oracle):
    d = kafka_oracle.metadata_log_dir
    snaps = [s for s in list_snapshots(d) if s.end_offset > 0]
    assert snaps, "the scenario makes Kafka write snapshots"
    first_segment = min(int(p.name[:20]) for p in d.glob("*.log"))
    assert first_segment == 0, "the log still starts at 0, so the log alone is a complete history"
    for sid in snaps:
        from_snapshot = load_image(d, at=sid.end_offset)
        from_log = load_image(d, at=sid.end_offset, use_snapshots=False)
        assert from_snapshot == from_log, sid
        assert load_snapshot(d / sid.file_name) == from_log, sid
    assert load_image(d) == load_image(d, use_snapshots=False)


def test_kraftkit_snapshot_of_kafkas_snapshot_point_matches_kafkas(kafka_oracle, tmp_path):
    """At the end offset of each of Kafka's snapshots, kraftkit's snapshot holds the same
    records (as a multiset: Kafka's order within a section is hash order)."""
    from kraftkit.metadata.records import decode_metadata_record

    d = kafka_oracle.metadata_log_dir
    for sid in [s for s in list_snapshots(d) if s.end_offset > 0]:
        img = load_image(d, at=sid.end_offset, use_snapshots=False)
        out = tmp_path / str(sid)
        out.mkdir()
        mine = img.write_snapshot(out, sid)
        theirs = d / sid.file_name

        def recs(p: Path):
            return sorted(repr(_canon(decode_metadata_record(v))) for _, v in SnapshotReader(p).records())

        assert recs(mine) == recs(theirs), sid


def _canon(rec):
    api_key, ver, data = rec
    data = dict(data)
    for k in ("Features", "EndPoints"):
        if k in data:
            data[k] = sorted(data[k], key=lambda x: x["Name"])
    return api_key, ver, data


def _describe(version: str, bootstrap: str) -> dict[str, dict]:
    out = tools.topic_command(version, bootstrap, ["--describe"])
    topics: dict[str, dict] = {}
    for line in out.splitlines():
        m = re.match(r"^Topic: (\S+)\s+TopicId: (\S+)\s+PartitionCount: (\d+).*Configs: ?(.*)$", line.strip())
        if m:
            cfg = dict(kv.split("=", 1) for kv in m.group(4).split(",") if "=" in kv)
            topics[m.group(1)] = {"id": m.group(2), "partitions": int(m.group(3)), "configs": cfg}
    return topics


def keep_only_raft_state(d: Path) -> None:
    """Empties a metadata partition directory but for ``quorum-state`` and ``partition.metadata``
    (the node's raft state), so that a snapshot written there next is all its log holds."""
    for p in list(d.iterdir()):
        if p.name not in ("quorum-state", "partition.metadata"):
            p.chmod(0o644)
            p.unlink()


def test_kafka_boots_from_a_kraftkit_snapshot(kafka_jars, tmp_path):
    # A private copy: this test replaces the metadata log, which other tests must not see.
    data = scenario.build_oracle_data(tmp_path / "data")
    d = data.metadata_log_dir
    img = load_image(d)
    end = img.provenance.end_offset
    # Keep only kraftkit's snapshot: no segments, no Kafka snapshots, no producer
    # snapshots, no leader-epoch cache (Kafka truncates the empty log to the snapshot's end
    # offset and records the snapshot's epoch there itself).
    keep_only_raft_state(d)
    snap = img.write_snapshot(d)
    assert snap.name == f"{end:020d}-{img.provenance.epoch:010d}.checkpoint"
    SnapshotReader(snap).check()
    with data.node() as node:
        described = _describe(data.version, node.bootstrap)
        listed = set(tools.topic_command(data.version, node.bootstrap, ["--list"]).split())
        log_tail = node.log_tail(200)
    want = {t.name for t in img.topics.values()}
    assert want <= listed, (want - listed, log_tail)
    for t in img.topics.values():
        got = described[t.name]
        from kraftkit.metadata.image import uuid_text

        assert got["id"] == uuid_text(t.id)
        assert got["partitions"] == len(t.partitions)
        for k, v in img.configs.get((2, t.name), {}).items():
            assert got["configs"].get(k) == v, (t.name, k, got["configs"])
    # Kafka kept (and extended) the log from kraftkit's snapshot: the image now replays
    # from that snapshot onwards and still holds every topic.
    after = load_image(d)
    assert after.provenance.end_offset > end
    assert {t.name for t in after.topics.values()} == want
    assert shutil.which("java") is not None
    assert jars.major(data.version) >= 4
