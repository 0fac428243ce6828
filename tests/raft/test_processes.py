"""Three ``kraftkit quorum run`` processes on loopback: SIGKILL the leader, then a follower, while a
client keeps appending; every append the quorum acknowledged must survive on every node, and the
restarted old leader, whose log now ends before the leader's log start, catches up by FetchSnapshot."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraftkit.metadata.image import load_image
from kraftkit.raft.admin import QuorumAdmin

from ._cluster import CLUSTER_ID, free_ports, topic_record, verify_log_problems

pytestmark = pytest.mark.timeout(300)


class Proc:
    def __init__(self, node_id: int, voters: str, log_dir: Path, ports: dict[int, int]) -> None:
        self.node_id, self.voters, self.log_dir, self.port = node_id, voters, log_dir, ports[node_id]
        self.p: subprocess.Popen | None = None
        self.err = log_dir.parent / f"node{node_id}.stderr"

    def start(self) -> None:
        with open(self.err, "ab") as errf:
            self._spawn(errf)

    def _spawn(self, errf) -> None:
        self.p = subprocess.Popen(
            [sys.executable, "-m", "kraftkit.cli.main", "quorum", "run", "--node-id", str(self.node_id),
             "--voters", self.voters, "--log-dir", str(self.log_dir), "--cluster-id", CLUSTER_ID,
             "--snapshot-every", "150"],
            stdout=subprocess.PIPE, stderr=errf, text=True)
        line = self.p.stdout.readline()
        assert json.loads(line)["event"] == "listening", line

    def kill(self) -> None:
        assert self.p is not None
        self.p.send_signal(signal.SIGKILL)
        self.p.wait(10)
        self.p.stdout.close()
        self.p = None

    def stop(self) -> int | None:
        if self.p is None:
            return None
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(15)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(5)
            return None
        finally:
            self.p.stdout.close()
            self.p = None


def describe(port: int) -> dict:
    with QuorumAdmin(f"127.0.0.1:{port}", timeout=30) as admin:
        return admin.describe()


def append_topics(port: int, names: list[str], acked: list[str]) -> None:
    with QuorumAdmin(f"127.0.0.1:{port}", timeout=30) as admin:
        for i in range(0, len(names), 10):
            chunk = names[i:i + 10]
            admin.append([topic_record(n) for n in chunk])
            acked.extend(chunk)


def wait_until(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_quorum_survives_sigkill_of_the_leader_and_a_follower(tmp_path):
    ports = dict(zip((1, 2, 3), free_ports(3)))
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    procs = {i: Proc(i, voters, tmp_path / f"node{i}", ports) for i in ports}
    acked: list[str] = []
    try:
        for p in procs.values():
            p.start()
        first = wait_until(lambda: describe(ports[1]), 60, "a leader")
        old = first["leader_id"]
        append_topics(ports[old], [f"before-{i}" for i in range(100)], acked)
        old_end = describe(ports[old])["high_watermark"]

        procs[old].kill()  # kill -9 the leader
        survivor = next(i for i in ports if i != old)
        after = wait_until(lambda: (d := describe(ports[survivor]))["leader_id"] not in (-1, old) and d, 60,
                           "a new leader")
        assert after["leader_epoch"] > first["leader_epoch"]
        # keep appending through the new leader: enough for snapshots that move its log start past old_end
        append_topics(ports[survivor], [f"after-{i}" for i in range(300)], acked)

        procs[old].start()  # the old leader comes back and must catch up
        new_leader = after["leader_id"]

        def caught_up():
            d = describe(ports[new_leader])
            row = next(v for v in d["voters"] if v["id"] == old)
            return row["log_end_offset"] >= d["high_watermark"] > old_end and d

        wait_until(caught_up, 60, "the old leader to catch up")
        assert "fetched from leader" in procs[old].err.read_text(), "the old leader did not catch up by FetchSnapshot"

        # kill -9 a follower too, append more, bring it back
        follower = next(i for i in ports if i not in (old, new_leader))
        procs[follower].kill()
        append_topics(ports[new_leader], [f"late-{i}" for i in range(50)], acked)
        procs[follower].start()
        final = describe(ports[new_leader])["high_watermark"]
        wait_until(lambda: all(v["log_end_offset"] >= final for v in describe(ports[new_leader])["voters"]), 60,
                   "every voter to reach the final high watermark")
    finally:
        codes = {i: p.stop() for i, p in procs.items()}
    assert all(c in (0, None) for c in codes.values()), codes
    # no acknowledged append is lost, on any node (read offline from the directories Kafka-style)
    for i in ports:
        names = set(load_image(tmp_path / f"node{i}").topic_ids)
        missing = [n for n in acked if n not in names]
        assert not missing, f"node {i} lost {len(missing)} acknowledged topics, e.g. {missing[:5]}"
        assert len(acked) == 450
    # every node's segments and indexes pass verify-log (the followers appended fetched multi-batch chunks)
    assert verify_log_problems(*(tmp_path / f"node{i}" for i in ports)) == []
