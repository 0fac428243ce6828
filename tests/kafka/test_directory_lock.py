"""A node's directory is its own while it runs, between Kafka and kraftkit as between two Kafka
nodes: Kafka locks ``metadata.log.dir/.lock`` (``KafkaRaftManager.lockDataDir``, Java's
``FileChannel.tryLock``: an fcntl lock on Linux) and so does a kraftkit node (``kraftkit._fs.DirectoryLock``).
A real Kafka 4.x node refuses the directory of a running ``kraftkit controller run`` with its own
"Failed to acquire lock on file .lock" and exits; ``kraftkit controller run`` and ``quorum run``
refuse a running Kafka node's directory (exit 2, naming it) and each other's."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from kraftkit._fs import LOCK_FILE
from kraftkit.features.storage.format import format_storage
from tests._procs import KraftkitProcess
from tests.harness import jars
from tests.harness.node import KafkaNode, free_port

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

VERSION = jars.KAFKA_NEWEST


def run_kraftkit(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftkit.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_kafka_and_kraftkit_refuse_each_others_running_directory(kafka_jars, tmp_path):
    # a running Kafka node: kraftkit refuses its metadata.log.dir
    with KafkaNode(tmp_path / "kafka", VERSION) as kafka:
        port = free_port()
        got = run_kraftkit("controller", "run", "--node-id", 1, "--voters", f"1@127.0.0.1:{port}",
                           "--log-dir", kafka.metadata_dir)
        assert got.returncode == 2, got
        assert got.stderr.strip() == (f"kraftkit controller run: {kafka.metadata_dir}: {LOCK_FILE} is locked by "
                                      "another process: a Kafka or kraftkit node runs on this directory")
        assert "Traceback" not in got.stderr
        assert kafka.running

    # a running kraftkit controller: Kafka refuses its directory, and so does a second kraftkit node
    d = tmp_path / "kraftkit"
    format_storage([d], cluster_id=kafka.cluster_id, node_id=1, release_version="4.0", no_initial_controllers=True)
    port = free_port()
    node = KraftkitProcess(["controller", "run"], ["--node-id", "1", "--voters", f"1@127.0.0.1:{port}",
                                                   "--log-dir", str(d)], tmp_path / "kraftkit.log")
    try:
        # a Kafka node whose log directory (and metadata.log.dir) is the running kraftkit node's
        other = KafkaNode(tmp_path / "kafka-2", VERSION, cluster_id=kafka.cluster_id)
        other.workdir.mkdir(parents=True)
        other.metadata_dir.symlink_to(d, target_is_directory=True)
        other.launch()
        deadline = time.monotonic() + 120
        while other.running and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not other.running, "Kafka started on a directory a kraftkit node holds"
        said = other.server_log.read_text(errors="replace") + other.stdout_log.read_text(errors="replace")
        assert "Failed to acquire lock on file .lock" in said, other.log_tail()
        other.stop()
        got = run_kraftkit("quorum", "run", "--node-id", 1, "--voters", f"1@127.0.0.1:{free_port()}",
                           "--log-dir", d, "--cluster-id", kafka.cluster_id)
        assert got.returncode == 2 and f"{d}: {LOCK_FILE} is locked by another process" in got.stderr, got
        assert node.proc.poll() is None  # (the running node is untouched)
    finally:
        assert node.stop() == 0
    # once it stopped, the directory is free again
    again = KraftkitProcess(["controller", "run"], ["--node-id", "1", "--voters", f"1@127.0.0.1:{port}",
                                                    "--log-dir", str(d)], tmp_path / "kraftkit-2.log")
    assert again.stop() == 0
