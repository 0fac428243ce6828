"""Indexes real Kafka 4.4.0 leaves behind, after a clean and after an unclean shutdown.

Kafka preallocates the active segment's ``.index`` and ``.timeindex`` to
``segment.index.bytes`` (10 MiB) of zeros and trims them when the segment rolls or the log
closes cleanly; a SIGKILL leaves them preallocated. ``kraftkit verify-log --deep`` must judge
those files as Kafka's own ``kafka-dump-log --verify-index-only --index-sanity-check`` does:
by Kafka's rules for preallocated and trimmed indexes, not by their length.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import jars, tools
from tests.harness.node import KafkaNode

pytestmark = pytest.mark.kafka

V = jars.KAFKA_NEWEST
TOPIC = "idx"


def _verify_log(paths: list[Path]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "verify-log", "--deep", *map(str, paths)],
                          capture_output=True, text=True, timeout=300)


def _index_files(node: KafkaNode) -> list[Path]:
    out = []
    for d in [*node.log_dirs, node.metadata_dir]:
        out += sorted(p for p in Path(d).rglob("*") if p.suffix in (".index", ".timeindex"))
    return out


def _kafka_index_errors(files: list[Path]) -> dict[str, list]:
    parsed = tools.dump_log_parsed(V, files, verify_index_only=True, index_sanity=True)
    return {f: v["errors"] for f, v in parsed.items() if v["errors"]}


def _preallocated(f: Path) -> bool:
    """10 MiB (segment.index.bytes), rounded down to the entry size (8 or 12 bytes)."""
    return f.stat().st_size == (10 * 1024 * 1024) // (8 if f.suffix == ".index" else 12) * (8 if f.suffix == ".index" else 12)


def _produce(node: KafkaNode, n: int) -> None:
    tools.producer_perf(V, node.bootstrap, TOPIC, num_records=n, record_size=200,
                        producer_props={"acks": "all", "linger.ms": 5, "batch.size": 4096})


def test_indexes_kafka_44_leaves_after_clean_and_unclean_shutdown(tmp_path):
    node = KafkaNode(tmp_path / "node", V, start_timeout=120, extra_props={"log.index.interval.bytes": 1024})
    with node:
        # small segments, so the topic has rolled (trimmed) segments and an active one
        tools.topic_command(V, node.bootstrap, ["--create", "--topic", TOPIC, "--partitions", "1",
                                                 "--replication-factor", "1",
                                                 "--config", f"internal.segment.bytes={256 * 1024}"])
        _produce(node, 3000)
    data = [*node.log_dirs, node.metadata_dir]
    files = _index_files(node)
    # a clean shutdown trims the topic's indexes but leaves the metadata log's active ones
    # preallocated (zero-filled, 10 MiB)
    preallocated = [f for f in files if _preallocated(f)]
    assert preallocated and all(f.parent.name == "__cluster_metadata-0" for f in preallocated), preallocated
    assert _kafka_index_errors(files) == {}
    proc = _verify_log(data)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    # unclean: the active segments' indexes stay preallocated (zero-filled tails)
    node.start()
    try:
        _produce(node, 500)
    finally:
        node.kill()
    files = _index_files(node)
    preallocated = [f for f in files if _preallocated(f)]
    assert {f.suffix for f in preallocated if f.parent.name == f"{TOPIC}-0"} == {".index", ".timeindex"}, \
        [(f, f.stat().st_size) for f in files]
    # file by file, Kafka's sanity check and kraftkit give the same verdict (a preallocated
    # time index whose first entry was written fails Kafka's check: Kafka rebuilds it at start-up)
    kafka_refuses = {f for f in files if _kafka_refuses(f)}
    proc = _verify_log(data)
    kraftkit_refuses = {f for f in files if f"{f}: " in proc.stdout}
    assert kafka_refuses == kraftkit_refuses, (kafka_refuses, proc.stdout)
    assert proc.returncode == (1 if kafka_refuses else 0), proc.stdout[-3000:] + proc.stderr[-3000:]
    for f in kraftkit_refuses & set(preallocated):
        assert "zero-filled preallocation" in proc.stdout and "Kafka rebuilds this index" in proc.stdout
    # and Kafka recovers and serves every record (the segments themselves were sound)
    with node:
        out = tools.run_tool(V, tools.find_class(V, "org.apache.kafka.tools.GetOffsetShell"),
                             ["--bootstrap-server", node.bootstrap, "--topic", TOPIC], timeout=120).stdout
    assert out.strip() == f"{TOPIC}:0:3500", out


def _kafka_refuses(f: Path) -> bool:
    """Kafka's --verify-index-only --index-sanity-check on one file: it throws
    CorruptIndexException (exit 1) on a file that fails the check."""
    proc = tools.dump_log(V, [f], verify_index_only=True, index_sanity=True, check=False)
    if proc.returncode != 0:
        assert "CorruptIndexException" in proc.stderr, proc.stderr[-2000:]
        return True
    return f"{f} passed sanity check." not in proc.stdout
