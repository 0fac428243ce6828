"""``kraftkit controller run`` as a process: its start-up line, a clean exit on SIGTERM, and exit 2
with the file named for bootstrap metadata it cannot use."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys

import pytest

from kraftkit.features.storage.format import BOOTSTRAP_FILE, format_storage
from tests.raft._cluster import CLUSTER_ID, free_ports

pytestmark = pytest.mark.timeout(120)


def controller_run(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kraftkit.cli.main", "controller", "run", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def test_it_says_where_it_listens_and_what_it_bootstraps_and_stops_cleanly_on_sigterm(tmp_path):
    format_storage([tmp_path], cluster_id=CLUSTER_ID, node_id=1, release_version="3.9-IV0", layout="bootstrap-file",
                   no_initial_controllers=True)
    (port,) = free_ports(1)
    proc = controller_run("--node-id", "1", "--voters", f"1@127.0.0.1:{port}", "--log-dir", str(tmp_path))
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "no start-up line within 60 s"
        line = json.loads(proc.stdout.readline())
        assert line == {"event": "listening", "node_id": 1, "host": "127.0.0.1", "port": port,
                        "process": "controller", "bootstrap": str(tmp_path / BOOTSTRAP_FILE), "metadata_version": 21}
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode(errors="replace")


def test_bootstrap_metadata_it_cannot_use_is_exit_2_naming_the_file(tmp_path):
    (tmp_path / BOOTSTRAP_FILE).write_bytes(b"\x00" * 70)
    (port,) = free_ports(1)
    proc = controller_run("--node-id", "1", "--voters", f"1@127.0.0.1:{port}", "--log-dir", str(tmp_path),
                          "--cluster-id", CLUSTER_ID)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and out == b""
    text = err.decode()
    assert text.startswith(f"kraftkit controller run: {tmp_path / BOOTSTRAP_FILE}") and "Traceback" not in text


def test_a_node_outside_the_voters_is_a_usage_error(tmp_path):
    proc = controller_run("--node-id", "4", "--voters", "1@127.0.0.1:1", "--log-dir", str(tmp_path),
                          "--cluster-id", CLUSTER_ID)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and err.decode().strip() == "kraftkit controller run: node 4 is not in --voters: add it"
