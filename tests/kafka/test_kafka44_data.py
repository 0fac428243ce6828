"""kraftkit's reading commands on data written by real Kafka 4.4.0, against Kafka 4.4.0's own tools.

The files: the metadata log and snapshots of a real 4.4.0 node driven through varied metadata
(``metadata_scenario``: topics, configs, quotas, ACLs, SCRAM users, a delegation token; the same
node the image-vs-admin-API suite checks), with the bootstrap snapshot 4.4.0's ``kafka-storage
format`` writes, and the data segments (one per codec) and indexes of ``fixtures/kafka-4.4.0``. ``kafka-dump-log`` of 4.4.0 prints
the expected text; kraftkit must print the same, line for line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kraftkit.metadata.snapshot import list_snapshots
from tests.harness import jars, metadata_scenario, tools
from tests.harness.jars import HarnessError

pytestmark = pytest.mark.kafka

V = jars.KAFKA_NEWEST


@pytest.fixture(scope="module")
def oracle(kafka_jars, tmp_path_factory):
    try:
        return metadata_scenario.build_metadata_oracle(tmp_path_factory.mktemp("metadata-44") / "data", version=V)
    except HarnessError as e:
        pytest.fail(f"kafka harness: {e}", pytrace=False)


def _same_text(files: list[Path], flags: list[str]) -> int:
    kafka_flags = {"--deep": {"deep": True}, "--print-data": {"deep": True, "print_data": True}}
    kw: dict = {}
    for f in flags:
        kw.update(kafka_flags[f])
    java = tools.dump_log(V, files, **kw)
    mine = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "dump-log", *flags, *map(str, files)],
                          capture_output=True, timeout=300)
    assert mine.returncode == 0, mine.stderr[-2000:]
    kafka_lines = java.stdout.splitlines()
    our_lines = mine.stdout.decode().splitlines()
    for i, (a, b) in enumerate(zip(our_lines, kafka_lines)):
        assert a == b, f"line {i}:\n kraftkit: {a}\n kafka:    {b}"
    assert len(our_lines) == len(kafka_lines)
    return len(our_lines)


def test_metadata_log_and_snapshots_print_what_kafka_dump_log_prints(oracle):
    d = oracle.metadata_log_dir
    files = sorted(d.glob("*.log")) + [d / s.file_name for s in list_snapshots(d)]
    assert any(s.end_offset == 0 for s in list_snapshots(d))  # 4.4's bootstrap snapshot is among them
    for flags in ([], ["--deep"], ["--print-data"]):
        assert _same_text(files, flags) > len(files)


def test_data_segments_and_indexes_print_what_kafka_dump_log_prints():
    """The fixtures' 4.4.0 data segments (one topic per codec, written by a real 4.4.0 node) and
    their indexes."""
    data = Path(__file__).resolve().parents[2] / "fixtures" / f"kafka-{V}" / "data"
    segments = sorted(p for p in data.glob("codec-*/*.log"))
    assert len(segments) == 5
    assert _same_text(segments, ["--print-data"]) > len(segments)
    indexes = [s.with_suffix(x) for s in segments for x in (".index", ".timeindex")]
    assert _same_text(indexes, []) > 0


def test_kafka_44_boots_from_a_kraftkit_snapshot(tmp_path):
    """The image of the real 4.4.0 node's log, written by kraftkit as a snapshot, is all its
    metadata log holds: real Kafka 4.4.0 boots from it and serves every topic with its id,
    partitions and configs, at the finalized metadata.version."""
    import re

    from kraftkit.metadata.image import load_image, uuid_text
    from kraftkit.metadata.snapshot import SnapshotReader
    from kraftkit.metadata.versions import mv_name
    from tests.harness.node import free_port
    from tests.kafka.test_downgrade_kafka import OlderAdminNode, _describe_topics, _tool
    from tests.kafka.test_image_kafka import keep_only_raft_state

    data = metadata_scenario.build_metadata_oracle(tmp_path / "data", version=V)
    d = data.metadata_log_dir
    img = load_image(d)
    keep_only_raft_state(d)
    snap = img.write_snapshot(d)
    SnapshotReader(snap).check()
    class BootNode(OlderAdminNode):
        # the scenario's 4 KiB metadata segments were for writing it; fencing the restarted
        # broker's old registration moves every partition in one batch, larger than that
        def properties(self) -> dict[str, object]:
            return {**super().properties(), "internal.metadata.log.segment.bytes": 8 * 1024 * 1024}

    node = BootNode(data.node_dir, V, dynamic_quorum=img.voters is not None, cluster_id=data.cluster_id,
                    start_timeout=240)
    node.formatted = True
    node.broker_port = free_port()
    node.controller_port = img.voters["Voters"][0]["Endpoints"][0]["Port"] if img.voters else free_port()
    with node:
        topics = _describe_topics(V, node.bootstrap)
        features = _tool(V, ("org.apache.kafka.tools.FeatureCommand",), ["--bootstrap-server", node.bootstrap, "describe"])
    assert img.topics and {t.name for t in img.topics.values()} <= set(topics)
    for t in img.topics.values():
        got = topics[t.name]
        assert got["id"] == uuid_text(t.id) and got["partitions"] == len(t.partitions)
        for k, v in img.configs.get((2, t.name), {}).items():
            assert got["configs"].get(k) == v, (t.name, k)
    mv_line = next(x for x in features.splitlines() if x.startswith("Feature: metadata.version"))
    want = mv_name(img.metadata_version)
    assert want.startswith("4.4-") and re.search(rf"FinalizedVersionLevel:\s+{re.escape(want)}\b", mv_line), mv_line
