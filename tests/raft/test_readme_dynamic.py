"""The README's "A dynamic quorum (KIP-853)" block, run as a newcomer would run it: taken from
README.md as it is written and run by ``bash -e``, with only its fixed ports (19191-19193) and its
``/tmp/dq`` directory swapped for free ones; ``kraftkit`` is the installed command. Then what it
printed is checked: both ``add-voter`` lines, and a ``describe --replication`` table with three
voters (one leader, two followers), each with the directory id of its ``meta.properties``."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests._procs import readme_block, stop_group

from ._cluster import free_ports

pytestmark = pytest.mark.timeout(300)

SECTION = "### A dynamic quorum (KIP-853)"




def consecutive_free_ports(n: int) -> int:
    """The first of ``n`` consecutive ports free on 127.0.0.1 (each bound once, then released)."""
    for _ in range(100):
        base = free_ports(1)[0]
        if base + n > 65535:
            continue
        socks: list[socket.socket] = []
        try:
            for i in range(n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError(f"no {n} consecutive free ports")


def test_the_readme_grows_a_dynamic_quorum(tmp_path):
    block = readme_block(SECTION)
    # the block writes the ports as 1919$i (and lists 19191..19193): three consecutive free ports stand in
    base = consecutive_free_ports(3)
    assert "1919$i" in block and all(f"1919{i}" in block for i in (1, 2, 3))
    block = block.replace("1919$i", f"$(({base - 1} + i))")
    for i in (1, 2, 3):
        block = re.sub(rf"\b1919{i}\b", str(base + i - 1), block)
    assert "/tmp/dq" in block
    dq = tmp_path / "dq"
    block = block.replace("/tmp/dq", str(dq))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.Popen(["bash", "-e", "-c", block], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)

    def logs() -> str:
        return "\n----\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(dq.glob("c*.log")))

    try:
        try:
            out, err = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the README block did not finish in 240 s\nstdout: {out}\nstderr: {err[-3000:]}\n{logs()}")
        assert proc.returncode == 0, f"exit {proc.returncode}\nstdout: {out}\nstderr: {err[-3000:]}\n{logs()}"

        def dir_id(i: int) -> str:
            text = (dq / f"c{i}" / "meta.properties").read_text()
            return next(ln.split("=", 1)[1] for ln in text.splitlines() if ln.startswith("directory.id="))

        lines = out.splitlines()
        for i in (2, 3):
            assert (f"added voter {i} (directory id {dir_id(i)}) with endpoints "
                    f"CONTROLLER://127.0.0.1:{base + i - 1}") in lines, out
        table = [ln.split() for ln in lines[lines.index(next(ln for ln in lines if ln.startswith("NodeId"))):]]
        assert table[0][:2] == ["NodeId", "DirectoryId"]
        rows = {int(r[0]): (r[1], r[-1]) for r in table[1:]}
        assert rows == {1: (dir_id(1), "Leader"), 2: (dir_id(2), "Follower"), 3: (dir_id(3), "Follower")}, out
    finally:
        stop_group(proc)
