"""The migration benchmark (benches/migration.py) at a tiny size: a real ZooKeeper holding 30
partitions (10 topics of 3), migrated by kraftkit's controller and by Kafka 3.9.2's own KRaft
controller, each on a fresh copy of ZooKeeper's data directory. Both copies are found complete in
each controller's log and image, Kafka's own log agrees on what it copied, and the bench's check
refuses an image that lacks a partition or has another topic id. No timing is asserted: the
bench measures, this checks that what it measures is a whole migration."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kraftkit.metadata.image import load_image, uuid_text

pytestmark = [pytest.mark.kafka, pytest.mark.zookeeper, pytest.mark.timeout(900)]

BENCHES = Path(__file__).resolve().parents[2] / "benches"
TOPICS, PER_TOPIC = 10, 3


def load_bench():
    if str(BENCHES) not in sys.path:
        sys.path.insert(0, str(BENCHES))
    spec = importlib.util.spec_from_file_location("migration_bench", BENCHES / "migration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_migration_bench_migrates_the_same_zookeeper_with_both_controllers(kafka_jars, tmp_path):
    out = tmp_path / "out.json"
    work = tmp_path / "work"
    work.mkdir()
    got = subprocess.run(
        [
            sys.executable,
            str(BENCHES / "migration.py"),
            "--partitions",
            str(TOPICS * PER_TOPIC),
            "--topic-partitions",
            str(PER_TOPIC),
            "--work-dir",
            str(work),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert got.returncode == 0, got.stderr[-4000:]
    # the table and both targets, each with its ratio and MET or MISS (no figure is judged here)
    assert "kraftkit controller" in got.stdout and "Kafka 3.9.2 controller" in got.stdout, got.stdout
    target_lines = [line for line in got.stdout.splitlines() if line.strip().startswith(("[MET ]", "[MISS]"))]
    assert len(target_lines) == 2 and all(line.rstrip().endswith("x") for line in target_lines), got.stdout
    assert "load average" in got.stdout

    data = json.loads(out.read_text())
    m = data["migration"]
    want_types = {"PartitionRecord": TOPICS * PER_TOPIC, "TopicRecord": TOPICS}
    for side in ("kraftkit", "kafka"):
        res = m[side]
        assert res["image"] == {
            "state": "MIGRATION",
            "topics": TOPICS,
            "partitions": TOPICS * PER_TOPIC,
            "migrating_brokers": [1, 2],
        }, res
        assert res["types"] == want_types
        assert res["records"] == TOPICS * (1 + PER_TOPIC)
        assert res["offset"] > 0 and res["total_s"] > 0 and res["copy_s"] > 0
    # Kafka's own log says how many records its migration generated: the same as read from its log
    assert m["kafka"]["kafka_log"]["records"] == TOPICS * (1 + PER_TOPIC)
    assert {(r["impl"], r["mode"]) for r in data["results"]} == {
        (impl, mode)
        for impl in ("kraftkit controller", "Kafka 3.9.2 controller")
        for mode in ("brokers registered to /migration written", "copy rate (migration transaction)")
    }

    # a wrong or partial copy cannot pass the bench's check
    bench = load_bench()
    log_dir = work / "kraftkit" / "kraftkit-controller" / "__cluster_metadata-0"
    image = load_image(log_dir)
    ids = {name: uuid_text(tid) for name, tid in image.topic_ids.items()}
    assert sorted(ids) == [f"bench-{i:05d}" for i in range(TOPICS)]
    assert bench.check_image(log_dir, ids, TOPICS * PER_TOPIC)["partitions"] == TOPICS * PER_TOPIC
    with pytest.raises(bench.BenchError, match="ZooKeeper holds 31"):
        bench.check_image(log_dir, ids, TOPICS * PER_TOPIC + 1)
    other = dict(ids, **{"bench-00000": bench.topic_id_text(uuid.uuid4())})
    with pytest.raises(bench.BenchError, match="topic ids differ"):
        bench.check_image(log_dir, other, TOPICS * PER_TOPIC)
    with pytest.raises(bench.BenchError, match="no complete migration transaction"):
        bench.transaction(tmp_path)  # no log at all
