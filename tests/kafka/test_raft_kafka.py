"""kraftkit's raft replica and a real Kafka KRaft quorum, both ways round.

* A ``kraftkit quorum run --observer`` process joins three real Kafka 4.x controllers (static
  voters, kraft.version 0), finds the leader through their Fetch answers, replicates
  ``__cluster_metadata`` through the real Fetch RPC (and FetchSnapshot when the leader's log no
  longer starts at 0) and stores it byte for byte as the controllers do; it follows a leader change;
  the real leader's DescribeQuorum, as ``kafka-metadata-quorum.sh --replication`` prints it, lists it.
  The same against three 3.9 controllers.
* Kafka's own ``kafka-metadata-quorum.sh describe --status/--replication`` against three
  ``kraftkit quorum run`` voters (and an observer) reports what ``kraftkit quorum describe`` does.
* kraftkit's Vote bodies, pre-votes (Vote v2) among them, answered by real 4.x and 3.9 controllers.

The real quorum comes from ``tests/harness/quorum.py``; kraftkit runs as real processes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from kraftkit.errors import KraftkitError
from kraftkit.metadata.image import load_image
from kraftkit.protocol import encode_request
from kraftkit.protocol.client import KafkaConnection
from kraftkit.raft import messages as m
from kraftkit.raft.admin import QuorumAdmin
from kraftkit.raft.core import RaftConfig
from kraftkit.raft.messages import Errors
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.node import free_port, random_cluster_id
from tests.harness.quorum import KafkaQuorum, metadata_quorum, parse_replication, parse_status

pytestmark = pytest.mark.kafka

V4 = jars.KAFKA_4
OBSERVER = 100  # a node id outside the voters 1, 2, 3
METADATA = "__cluster_metadata-0"
#: Kafka settings that make metadata snapshots happen only when the test writes enough metadata: no
#: NoOp records, no time-based snapshots, a snapshot after 4 KiB of records; and a retention so small
#: that Kafka's log cleaner (every 60 s) drops all but the newest snapshot and moves the log start to it.
SNAPSHOT_PROPS = {"metadata.max.idle.interval.ms": 0, "metadata.log.max.snapshot.interval.ms": 0,
                  "metadata.log.max.record.bytes.between.snapshots": 4096, "metadata.max.retention.bytes": 1}


# ---------------------------------------------------------------------------------------- helpers

class NotYet(Exception):
    """A poll that could not look yet (a command failed while the quorum is changing)."""


def wait_until(what: str, fn: Callable[[], Any], timeout: float, on_timeout: Callable[[], str] = lambda: "") -> Any:
    """Polls ``fn`` until it returns something true (returned); fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        try:
            got = fn()
            if got:
                return got
        except (KraftkitError, OSError, NotYet) as e:
            last = e
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}"
                        + (f" (last error: {last})" if last else "") + f"\n{on_timeout()}")
        time.sleep(0.2)


class KraftkitNode(KraftkitProcess):
    """``kraftkit quorum run ARGS`` as a child process (see ``tests._procs``)."""

    def __init__(self, args: list[str], log_path: Path, *, timeout: float = 60.0) -> None:
        super().__init__(["quorum", "run"], args, log_path, timeout=timeout)


def segments(partition_dir: Path) -> tuple[int, bytes]:
    """``(first base offset, bytes)``: a partition's ``.log`` segments joined in offset order."""
    logs = sorted(partition_dir.glob("*.log"), key=lambda p: int(p.stem))
    if not logs:
        return -1, b""
    return int(logs[0].stem), b"".join(p.read_bytes() for p in logs)


def batch_headers(data: bytes) -> list[tuple[int, int, int, int]]:
    """``(base offset, last offset, partition leader epoch, byte position)`` of every complete v2
    batch in segment bytes, read from the fixed header fields only (independent of kraftkit)."""
    out, pos = [], 0
    while pos + 61 <= len(data):
        base = int.from_bytes(data[pos:pos + 8], "big", signed=True)
        size = 12 + int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        if pos + size > len(data):
            break
        epoch = int.from_bytes(data[pos + 12:pos + 16], "big", signed=True)
        delta = int.from_bytes(data[pos + 23:pos + 27], "big", signed=True)
        out.append((base, base + delta, epoch, pos))
        pos += size
    return out


def snapshots(partition_dir: Path) -> list[str]:
    return sorted(p.name for p in partition_dir.glob("*.checkpoint"))


def leader_view(address: str) -> dict:
    """The quorum as its leader describes it (kraftkit's DescribeQuorum client follows the leader)."""
    with QuorumAdmin(address, timeout=10) as admin:
        return admin.describe()


def observer_end(view: dict, node_id: int) -> int:
    return next((o["log_end_offset"] for o in view["observers"] if o["id"] == node_id), -1)


def kraftkit_describe(bootstrap: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "quorum", "describe", "--bootstrap", bootstrap,
                           "--json"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise NotYet(f"kraftkit quorum describe exited {proc.returncode}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def row(rows: list[dict[str, str]], node_id: int) -> dict[str, str]:
    found = [r for r in rows if r["NodeId"] == str(node_id)]
    assert len(found) == 1, (node_id, rows)
    return found[0]


# ----------------------------------------------------------------------- kraftkit observes Kafka

@pytest.mark.parametrize("version", [jars.KAFKA_NEWEST, jars.KAFKA_4, jars.KAFKA_3])
def test_observer_replicates_a_real_quorum_byte_for_byte(kafka_jars, tmp_path, version):
    """A kraftkit observer joins three real controllers (4.x and 3.9), fetches __cluster_metadata
    from offset 0 through the real Fetch RPC, keeps following across a leader change and a restart
    of its own, and its segment holds exactly the controllers' bytes; the real leaders'
    DescribeQuorum lists it as an observer."""
    with KafkaQuorum(tmp_path / "kafka", version) as q:
        tools.create_topics(version, q.bootstrap, [
            {"name": "interop-a", "partitions": 3, "configs": {"cleanup.policy": "compact", "retention.ms": "3600000"}},
            {"name": "interop-b", "partitions": 1}])
        status = q.describe_status()
        leader, epoch, hw = int(status["LeaderId"]), int(status["LeaderEpoch"]), int(status["HighWatermark"])
        assert status["ClusterId"] == q.cluster_id and leader in q.nodes

        obs_dir = tmp_path / "observer"
        obs_args = ["--node-id", str(OBSERVER), "--observer", "--voters", q.voters, "--log-dir", str(obs_dir),
                    "--cluster-id", q.cluster_id, "--log-level", "DEBUG"]
        obs = KraftkitNode(obs_args, tmp_path / "observer.log")
        try:
            leader_addr = f"127.0.0.1:{q.controller_ports[leader]}"
            wait_until(f"observer {OBSERVER} to reach offset {hw} on leader {leader}",
                       lambda: observer_end(leader_view(leader_addr), OBSERVER) >= hw, 60, obs.log_tail)
            # the real leader, as Kafka's own tool shows it
            rows = q.describe_replication()
            want = {str(v): "Leader" if v == leader else "Follower" for v in q.nodes}
            assert {r["NodeId"]: r["Status"] for r in rows} == {**want, str(OBSERVER): "Observer"}
            me = row(rows, OBSERVER)
            assert int(me["LogEndOffset"]) >= hw and int(me["Lag"]) >= 0 and int(me["LastFetchTimestamp"]) > 0
            # kraftkit's own describe, bootstrapped from a controller that is not the leader, agrees
            follower = next(n for n in q.nodes if n != leader)
            mine = kraftkit_describe(f"127.0.0.1:{q.controller_ports[follower]}")
            assert (mine["leaderId"], mine["leaderEpoch"], mine["clusterId"]) == (leader, epoch, q.cluster_id)
            assert sorted(v["replicaId"] for v in mine["voters"]) == sorted(q.nodes)
            assert [o["replicaId"] for o in mine["observers"]] == [OBSERVER]

            # the leader goes away: the observer finds the next one through the remaining voters
            q.nodes[leader].stop()
            live = [n for n in q.nodes if n != leader]
            live_addr = f"127.0.0.1:{q.controller_ports[live[0]]}"
            view = wait_until("a new leader",
                              lambda: (v := leader_view(live_addr))["leader_epoch"] > epoch and v, 90, q.log_tails)
            new_leader, new_epoch, new_hw = view["leader_id"], view["leader_epoch"], view["high_watermark"]
            assert new_leader in live
            wait_until(f"observer {OBSERVER} to follow leader {new_leader} to offset {new_hw}",
                       lambda: observer_end(leader_view(live_addr), OBSERVER) >= new_hw, 60, obs.log_tail)
            bootstrap = ",".join(f"127.0.0.1:{q.controller_ports[n]}" for n in live)
            status2 = parse_status(metadata_quorum(version, bootstrap, "describe", "--status"))
            assert int(status2["LeaderId"]) == new_leader and int(status2["LeaderEpoch"]) == new_epoch
            assert [o["id"] for o in json.loads(status2["CurrentObservers"])] == [OBSERVER]
            rows = parse_replication(metadata_quorum(version, bootstrap, "describe", "--replication"))
            assert row(rows, OBSERVER)["Status"] == "Observer" and int(row(rows, OBSERVER)["LogEndOffset"]) >= new_hw

            # restarted on its own files, the observer resumes where it stopped (a Fetch at its log end
            # with its last epoch, which the real leader validates) and catches up again
            assert obs.stop() == 0, obs.log_tail()
            resumed_at = segments(obs_dir / METADATA)[1]
            obs = KraftkitNode(obs_args, tmp_path / "observer-2.log")
            hw2 = leader_view(live_addr)["high_watermark"]
            wait_until(f"the restarted observer to reach offset {hw2}",
                       lambda: observer_end(leader_view(live_addr), OBSERVER) >= hw2, 60, obs.log_tail)
            assert segments(obs_dir / METADATA)[1][:len(resumed_at)] == resumed_at
        finally:
            assert obs.stop() == 0, obs.log_tail()

        # byte for byte: the observer's log is a prefix of every live controller's log
        start, mine = segments(obs_dir / METADATA)
        assert start == 0 and not snapshots(obs_dir / METADATA)
        headers = batch_headers(mine)
        assert headers and headers[-1][1] + 1 >= new_hw
        assert {e for *_, e, _ in headers} >= {epoch, new_epoch}  # written by both leaders
        for n in live:
            d = q.metadata_log_dir(n)
            wait_until(f"controller {n} to hold {len(mine)} log bytes", lambda: len(segments(d)[1]) >= len(mine), 30)
            base, theirs = segments(d)
            assert base == 0 and theirs[:len(mine)] == mine, f"controller {n}'s log differs from the observer's"
        state = json.loads((obs_dir / METADATA / "quorum-state").read_text())
        assert (state["leaderId"], state["leaderEpoch"]) == (new_leader, new_epoch)
        image = load_image(obs_dir / METADATA)
        assert set(image.topic_ids) == {"interop-a", "interop-b"}
        assert image.configs[(2, "interop-a")] == {"cleanup.policy": "compact", "retention.ms": "3600000"}


@pytest.mark.parametrize("version", [jars.KAFKA_4, jars.KAFKA_3])
def test_real_controllers_answer_kraftkits_vote_bodies(kafka_jars, tmp_path, version):
    """kraftkit's Vote bodies (``raft/messages.py``) against three real controllers, at the version
    each negotiates. The leader and the followers fetching from it refuse a standard vote of their
    epoch (4.x at v2, 3.9 at v1). A 4.x controller takes a pre-vote as one: each refuses an
    up-to-date pre-vote of its epoch, and a pre-vote of an older epoch is fenced, naming the leader;
    3.9 speaks Vote up to v1, below which a pre-vote cannot be written (what kraftkit's transport
    answers UNSUPPORTED_VERSION, so the prospective stands at once). Nothing changes: the same
    leader in the same epoch."""
    with KafkaQuorum(tmp_path / "kafka", version, broker=False) as q:
        first = f"127.0.0.1:{q.controller_ports[1]}"
        view = wait_until("a leader", lambda: (v := leader_view(first))["leader_id"] >= 0 and v, 60, q.log_tails)
        leader, epoch = view["leader_id"], view["leader_epoch"]
        # every follower has fetched from the leader by now
        wait_until("the followers to fetch", lambda: all(
            r["last_fetch_ms"] > 0 for r in leader_view(first)["voters"] if r["id"] != leader), 60, q.log_tails)

        def answer(conn: KafkaConnection, v: int, body: dict) -> tuple:
            got = conn.request(m.VOTE, v, body)
            assert got["ErrorCode"] == 0, got
            p = got["Topics"][0]["Partitions"][0]
            return p["ErrorCode"], p["VoteGranted"], p["LeaderId"], p["LeaderEpoch"]

        for n, port in sorted(q.controller_ports.items()):
            asker = next(v for v in q.nodes if v != n)  # (another voter's id: refused, it binds nobody)
            tp, cid = m.METADATA_PARTITION, q.cluster_id
            with KafkaConnection("127.0.0.1", port, timeout=10) as conn:
                v = conn.version_for(m.VOTE)
                assert v == (1 if version == jars.KAFKA_3 else m.VERSIONS[m.VOTE])
                assert answer(conn, v, m.vote_request(tp, cid, n, epoch, asker, 0, 0)) == (0, False, leader, epoch)
                # a log claimed longer than anyone's: only the roles' rules can refuse it
                pre = m.vote_request(tp, cid, n, epoch, asker, epoch, 1 << 40, pre_vote=True)
                if v < 2:
                    with pytest.raises(ValueError, match="PreVote"):
                        encode_request(m.VOTE, v, 1, "raft-client-9", pre)
                    continue
                assert answer(conn, v, pre) == (0, False, leader, epoch)
                stale = m.vote_request(tp, cid, n, epoch - 1, asker, 0, 0, pre_vote=True)
                assert answer(conn, v, stale) == (Errors.FENCED_LEADER_EPOCH, False, leader, epoch)
        after = leader_view(first)
        assert (after["leader_id"], after["leader_epoch"]) == (leader, epoch)


def test_observer_fetches_the_snapshot_of_a_real_leader(kafka_jars, tmp_path):
    """When the real leader's log starts at a snapshot, the kraftkit observer fetches that snapshot
    (FetchSnapshot) and then the log after it: the checkpoint file is the leader's, byte for byte,
    and so is every log byte after it."""
    with KafkaQuorum(tmp_path / "kafka", V4, extra_props=SNAPSHOT_PROPS) as q:
        # two bursts of metadata, each over the 4 KiB between snapshots: two snapshots on every node
        for name in ("burst-1", "burst-2"):
            tools.create_topics(V4, q.bootstrap, [{"name": name, "partitions": 60,
                                                   "configs": {"retention.ms": "3600000"}}])
        dirs = {n: q.metadata_log_dir(n) for n in q.nodes}
        wait_until("two snapshots on every controller", lambda: all(len(snapshots(d)) >= 2 for d in dirs.values()), 60)
        newest = {n: snapshots(d)[-1] for n, d in dirs.items()}
        # Kafka's metadata log cleaner (every 60 s) keeps only the newest snapshot and moves the log start to it
        wait_until("the log cleaner to drop the older snapshots",
                   lambda: all(snapshots(d) == [newest[n]] for n, d in dirs.items()), 150, q.log_tails)
        tools.create_topics(V4, q.bootstrap, [{"name": "after-snapshot", "partitions": 2}])  # log after the snapshot
        status = q.describe_status()
        leader, hw = int(status["LeaderId"]), int(status["HighWatermark"])
        snap = newest[leader]
        snap_end = int(snap.split("-")[0])
        assert 0 < snap_end < hw

        obs_dir = tmp_path / "observer"
        obs = KraftkitNode(["--node-id", str(OBSERVER), "--observer", "--voters", q.voters, "--log-dir", str(obs_dir),
                            "--cluster-id", q.cluster_id, "--log-level", "DEBUG"], tmp_path / "observer.log")
        try:
            leader_addr = f"127.0.0.1:{q.controller_ports[leader]}"
            wait_until(f"observer {OBSERVER} to reach offset {hw}",
                       lambda: observer_end(leader_view(leader_addr), OBSERVER) >= hw, 60, obs.log_tail)
            rows = q.describe_replication()
            assert row(rows, OBSERVER)["Status"] == "Observer" and int(row(rows, OBSERVER)["LogEndOffset"]) >= hw
        finally:
            assert obs.stop() == 0, obs.log_tail()
        assert int(parse_status(q.metadata_quorum("describe", "--status"))["LeaderId"]) == leader

        mine_dir, leader_dir = obs_dir / METADATA, dirs[leader]
        assert snapshots(mine_dir) == [snap]
        assert (mine_dir / snap).read_bytes() == (leader_dir / snap).read_bytes()
        start, mine = segments(mine_dir)
        assert start == snap_end and mine
        _, theirs = segments(leader_dir)
        at = {base: pos for base, _last, _e, pos in batch_headers(theirs)}
        assert snap_end in at, f"the leader has no batch starting at the snapshot end {snap_end}"
        assert theirs[at[snap_end]:at[snap_end] + len(mine)] == mine
        assert batch_headers(mine)[-1][1] + 1 >= hw
        # and what it holds, snapshot then log, is the metadata the broker asked for
        assert set(load_image(mine_dir).topic_ids) == {"burst-1", "burst-2", "after-snapshot"}


# ----------------------------------------------------------------------- Kafka's tool describes kraftkit

def test_kafka_metadata_quorum_describes_a_kraftkit_quorum(kafka_jars, tmp_path):
    """Kafka's ``kafka-metadata-quorum.sh describe --status/--replication`` (4.x, and 3.9's
    ``--status``) against three ``kraftkit quorum run`` voters and an observer agrees with
    ``kraftkit quorum describe``, before and after a leader change, bootstrapped from every voter or
    from one follower only."""
    cid = random_cluster_id()
    ports = {}
    while len(set(ports.values())) < 3:
        ports = {i: free_port() for i in (1, 2, 3)}
    voter_ports = dict(ports)
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    everyone = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    # a generous fetch timeout: no election while Kafka's JVM tools load the machine (a stopped
    # leader resigns with EndQuorumEpoch, so the planned leader change does not wait for it)
    common = ["--voters", voters, "--cluster-id", cid, "--fetch-timeout-ms", "6000", "--log-level", "DEBUG"]
    nodes: dict[int, KraftkitNode] = {}
    try:
        for i in ports:
            nodes[i] = KraftkitNode(["--node-id", str(i), "--log-dir", str(tmp_path / f"n{i}"), *common],
                                    tmp_path / f"n{i}.log")
        nodes[OBSERVER] = KraftkitNode(["--node-id", str(OBSERVER), "--observer", "--log-dir", str(tmp_path / "obs"),
                                        *common], tmp_path / "obs.log")
        one = f"127.0.0.1:{ports[1]}"
        proc = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "quorum", "append", "--bootstrap", one,
                               "--topic", "t1", "--topic", "t2", "--count", "1", "--json"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr

        def settled() -> dict | None:
            """kraftkit's own view once every running replica, the observer included, has everything."""
            d = kraftkit_describe(one)
            running = [r for r in d["voters"] + d["observers"] if r["replicaId"] in nodes]
            ok = {r["replicaId"] for r in d["observers"]} == {OBSERVER} and len(running) == len(nodes) \
                and all(r["logEndOffset"] == d["highWatermark"] for r in running)
            return d if ok else None

        stopped_at_ms = -1  # when the first leader stopped (round 1)
        for round_ in (1, 2):
            before = wait_until("a settled kraftkit quorum", settled, 60,
                                lambda: "\n".join(n.log_tail(15) for n in nodes.values()))
            leader = before["leaderId"]
            follower = next(i for i in ports if i != leader)
            status = parse_status(metadata_quorum(V4, everyone, "describe", "--status"))
            # from one follower only: the tool finds the leader through DescribeCluster
            rows = parse_replication(metadata_quorum(V4, f"127.0.0.1:{ports[follower]}", "describe", "--replication"))
            human = parse_replication(metadata_quorum(V4, everyone, "describe", "--replication", "--human-readable"))
            after = kraftkit_describe(one)

            def ends(node_id: int) -> list[int]:
                return [x["logEndOffset"] for d in (before, after) for x in d["voters"] + d["observers"]
                        if x["replicaId"] == node_id]

            assert status["ClusterId"] == cid
            assert int(status["LeaderId"]) == leader == after["leaderId"]
            assert int(status["LeaderEpoch"]) == before["leaderEpoch"] == after["leaderEpoch"]
            assert before["highWatermark"] <= int(status["HighWatermark"]) <= after["highWatermark"]
            lags = [max(ends(leader)) - min(ends(v["replicaId"])) for v in before["voters"]]
            assert 0 <= int(status["MaxFollowerLag"]) <= max(lags)
            assert json.loads(status["CurrentVoters"]) == [
                {"id": i, "endpoints": [f"CONTROLLER://127.0.0.1:{p}"]} for i, p in sorted(voter_ports.items())]
            assert json.loads(status["CurrentObservers"]) == [{"id": OBSERVER}]
            if round_ == 1:  # the 3.9 tool (an older Admin client: other request versions) reads the same
                old = parse_status(metadata_quorum(jars.KAFKA_3, everyone, "describe", "--status"))
                assert (old["ClusterId"], int(old["LeaderId"]), int(old["LeaderEpoch"])) == (
                    cid, leader, before["leaderEpoch"])
                assert [v["id"] for v in json.loads(old["CurrentVoters"])] == sorted(voter_ports)
                assert [o["id"] for o in json.loads(old["CurrentObservers"])] == [OBSERVER]

            want = {str(v["replicaId"]): ("Leader" if v["replicaId"] == leader else "Follower") for v in before["voters"]}
            want[str(OBSERVER)] = "Observer"
            assert set(want) == {str(i) for i in voter_ports} | {str(OBSERVER)}
            for table in (rows, human):
                assert {r["NodeId"]: r["Status"] for r in table} == want
                assert all(r["DirectoryId"] == "AAAAAAAAAAAAAAAAAAAAAA" for r in table)
            leader_end = int(row(rows, leader)["LogEndOffset"])
            for r in rows:
                node_id = int(r["NodeId"])
                assert min(ends(node_id)) <= int(r["LogEndOffset"]) <= max(ends(node_id))
                assert int(r["Lag"]) == leader_end - int(r["LogEndOffset"])
                if node_id in nodes:
                    assert int(r["LastFetchTimestamp"]) > 0 and int(r["LastCaughtUpTimestamp"]) > 0
                else:
                    # The stopped voter: it never fetched from this leader, or only while it was
                    # shutting down (a resigning leader keeps running until the voters heard it, and
                    # may meet the next leader and fetch from it before it exits). A fetch is
                    # stamped when it is answered, as in Kafka, and the leader may hold one that
                    # finds no new data for up to the fetch's MaxWaitMs (500 ms) after it came.
                    fetched, caught_up = int(r["LastFetchTimestamp"]), int(r["LastCaughtUpTimestamp"])
                    held_ms = RaftConfig().fetch_max_wait_ms
                    assert (fetched, caught_up) == (-1, -1) or (
                        caught_up <= fetched and 0 < fetched <= stopped_at_ms + held_ms), r
            for r in human:
                for k in ("LastFetchTimestamp", "LastCaughtUpTimestamp"):
                    assert re.fullmatch(r"\d+ ms ago", r[k]) or (r[k] == "-1" and int(r["NodeId"]) not in nodes), r

            if round_ == 1:  # the leader goes away; the other two elect a new one
                assert nodes.pop(leader).stop() == 0
                stopped_at_ms = int(time.time() * 1000)
                ports.pop(leader)
                everyone = ",".join(f"127.0.0.1:{p}" for p in ports.values())
                one = f"127.0.0.1:{next(iter(ports.values()))}"
                wait_until("a new kraftkit leader",
                           lambda: kraftkit_describe(one)["leaderEpoch"] > before["leaderEpoch"], 60)
    finally:
        for n in nodes.values():
            n.stop()
