"""The raft node's own files in hostile shapes: a FIFO in place of a segment, a snapshot, the
quorum-state file or meta.properties is refused at once, naming it, never opened blindly (opening
a FIFO for reading blocks until a writer comes). Commands run as processes with a timeout, so a
regression fails the test instead of hanging the suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kraftkit.errors import KraftkitError
from kraftkit.log import Log
from kraftkit.raft.file_log import FileRaftLog
from kraftkit.raft.quorum_state import FileQuorumStateStore

from ._cluster import CLUSTER_ID


def run(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_a_fifo_segment_is_refused_by_the_log(tmp_path: Path) -> None:
    fifo = tmp_path / "00000000000000000000.log"
    os.mkfifo(fifo)
    with pytest.raises((KraftkitError, OSError), match=r"00000000000000000000\.log: not a regular file \(a FIFO\)"):
        Log(tmp_path, create=True)


def test_a_fifo_snapshot_is_refused_by_the_raft_log(tmp_path: Path) -> None:
    log = FileRaftLog(tmp_path / "__cluster_metadata-0")
    log.close()
    os.mkfifo(tmp_path / "__cluster_metadata-0" / "00000000000000000005-0000000001.checkpoint")
    with pytest.raises((KraftkitError, OSError), match=r"checkpoint: not a regular file \(a FIFO\)"):
        FileRaftLog(tmp_path / "__cluster_metadata-0").read_snapshot()


def test_a_fifo_quorum_state_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "quorum-state")
    with pytest.raises(OSError, match=r"quorum-state: not a regular file \(a FIFO\)"):
        FileQuorumStateStore(tmp_path / "quorum-state").read()


def test_quorum_run_refuses_a_fifo_meta_properties(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    os.mkfifo(tmp_path / "log" / "meta.properties")
    proc = run("quorum", "run", "--node-id", "1", "--voters", "1@127.0.0.1:19091", "--log-dir",
               str(tmp_path / "log"), "--cluster-id", CLUSTER_ID)
    assert proc.returncode == 2
    assert f"{tmp_path / 'log' / 'meta.properties'}: not a regular file (a FIFO)" in proc.stderr
