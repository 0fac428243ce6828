"""Kafka's own tool grows and shrinks a kraftkit dynamic quorum (KIP-853), as its documentation
says to grow a Kafka one:

1. ``kraftkit storage format --standalone`` the first controller, ``--no-initial-controllers`` the
   others (Kafka's ``kafka-storage format`` flags), each with a server.properties that names
   ``controller.quorum.bootstrap.servers`` (no ``controller.quorum.voters``);
2. ``kraftkit controller run --config`` each: the first leads alone, the others fetch as observers;
3. ``kafka-metadata-quorum.sh --bootstrap-controller ... add-controller --command-config
   controller-N.properties`` (Kafka's ``MetadataQuorumCommand``, from Maven's jars) for each of them,
   then ``describe --replication`` shows three voters with their directory ids;
4. ``remove-controller --controller-id 1 --controller-directory-id ...`` removes the leader, which
   resigns: the two others elect a leader and Kafka's tool sees it.

Every answer is checked in what Kafka's tool prints (its own words); the voters' logs are
byte-identical at the end."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._procs import KraftkitProcess
from tests.harness.jars import HarnessError
from tests.harness.node import free_port, random_cluster_id
from tests.harness.quorum import metadata_quorum, parse_replication, parse_status

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

META = "__cluster_metadata-0"
VERSION = "4.3.1"


def kraftkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftkit.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


def directory_id(d: Path) -> str:
    return next(line.split("=", 1)[1] for line in (d / "meta.properties").read_text().splitlines()
                if line.startswith("directory.id="))


def wait_status(bootstrap: str, cond, timeout: float = 60.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            st = parse_status(metadata_quorum(VERSION, bootstrap, "describe", "--status", timeout=60))
            if cond(st):
                return st
            last = st
        except HarnessError as e:
            last = e
        time.sleep(0.5)
    raise AssertionError(f"quorum status never matched: {last}")


def test_kafka_metadata_quorum_adds_and_removes_kraftkit_controllers(kafka_jars, tmp_path):
    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    servers = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    dirs, confs = {}, {}
    for i, port in ports.items():
        d = tmp_path / f"controller-{i}"
        conf = tmp_path / f"controller-{i}.properties"
        conf.write_text(
            "process.roles=controller\n"
            f"node.id={i}\n"
            f"listeners=CONTROLLER://127.0.0.1:{port}\n"
            "controller.listener.names=CONTROLLER\n"
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT\n"
            f"controller.quorum.bootstrap.servers={servers}\n"
            f"log.dirs={d}\n"
        )
        how = ["--standalone"] if i == 1 else ["--no-initial-controllers"]
        r = kraftkit("storage", "format", "-t", cid, "-c", str(conf), "--release-version", "4.0", *how)
        assert r.returncode == 0, r.stderr
        dirs[i], confs[i] = d, conf
    procs = {}
    try:
        for i in (1, 2, 3):
            procs[i] = KraftkitProcess(["controller", "run"], ["--config", str(confs[i])],
                                       tmp_path / f"controller-{i}.log")
        st = wait_status(servers, lambda s: s.get("LeaderId") == "1")
        assert st["CurrentVoters"].startswith('[{"id": 1') and st["ClusterId"] == cid

        # each new controller must have caught up as an observer first: Kafka's tool, unchanged
        for i in (2, 3):
            wait_status(servers, lambda s, i=i: f'"id": {i}' in s.get("CurrentObservers", ""))
            out = metadata_quorum(VERSION, servers, "--command-config", str(confs[i]), "add-controller")
            assert out.strip() == (f"Added controller {i} with directory id {directory_id(dirs[i])} and "
                                   f"endpoints: CONTROLLER://127.0.0.1:{ports[i]}")
        rows = parse_replication(metadata_quorum(VERSION, servers, "describe", "--replication"))
        voters = {int(r["NodeId"]): r for r in rows if r["Status"] in ("Leader", "Follower")}
        assert sorted(voters) == [1, 2, 3], rows
        assert {i: voters[i]["DirectoryId"] for i in voters} == {i: directory_id(dirs[i]) for i in (1, 2, 3)}

        # a controller added twice: Kafka's tool fails with the leader's reason
        with pytest.raises(HarnessError, match="DuplicateVoterException|already"):
            metadata_quorum(VERSION, servers, "--command-config", str(confs[2]), "add-controller")

        # remove the leader: it resigns once the change commits, one of the others leads
        out = metadata_quorum(VERSION, servers, "remove-controller", "--controller-id", "1",
                              "--controller-directory-id", directory_id(dirs[1]))
        assert out.strip() == f"Removed  KRaft controller 1 with directory id {directory_id(dirs[1])}" or (
            out.strip() == f"Removed KRaft controller 1 with directory id {directory_id(dirs[1])}")
        rest = f"127.0.0.1:{ports[2]},127.0.0.1:{ports[3]}"
        st = wait_status(rest, lambda s: s.get("LeaderId") in ("2", "3") and '"id": 1' not in s["CurrentVoters"],
                         timeout=150)
        assert '"id": 2' in st["CurrentVoters"] and '"id": 3' in st["CurrentVoters"]
    finally:
        for p in procs.values():
            p.stop()
    # the three logs hold the same batches where they overlap (node 1 may have stopped behind)
    logs = {i: b"".join(p.read_bytes() for p in sorted((dirs[i] / META).glob("*.log"))) for i in dirs}
    n = min(len(b) for b in logs.values())
    assert n > 0 and logs[1][:n] == logs[2][:n] == logs[3][:n]


def test_a_kraftkit_controller_joins_a_kafka_dynamic_quorum_by_fetch_snapshot_and_votes(kafka_jars, tmp_path):
    """A real Kafka 4.3.1 node (broker and controller, formatted ``--standalone``) whose metadata log
    starts at a snapshot; a kraftkit controller formatted ``--no-initial-controllers`` fetches that
    snapshot as an observer, Kafka's ``add-controller`` makes it a voter (the Kafka leader probes its
    ApiVersions for kraft.version and checks it caught up), and once the Kafka node restarts no leader
    can be elected without the kraftkit voter's vote: one is, and the broker serves again."""
    from tests.harness import tools
    from tests.harness.node import KafkaNode
    from tests.kafka.test_raft_kafka import SNAPSHOT_PROPS, snapshots

    kafka = KafkaNode(tmp_path / "kafka", VERSION, dynamic_quorum=True, extra_props=SNAPSHOT_PROPS).start()
    proc = None
    try:
        for name in ("burst-1", "burst-2"):
            tools.create_topics(VERSION, kafka.bootstrap, [{"name": name, "partitions": 60,
                                                           "configs": {"retention.ms": "3600000"}}])
        theirs = kafka.metadata_log_dir
        deadline = time.monotonic() + 60
        while len([s for s in snapshots(theirs) if not s.startswith("00000000000000000000-")]) < 2:
            assert time.monotonic() < deadline, "Kafka took no two snapshots"
            time.sleep(1)
        newest = snapshots(theirs)[-1]
        # Kafka's metadata log cleaner (every 60 s) keeps only the newest snapshot and moves the log start to it
        deadline = time.monotonic() + 150
        while snapshots(theirs) != [newest]:
            assert time.monotonic() < deadline, f"Kafka's log cleaner kept {snapshots(theirs)}"
            time.sleep(1)
        snap = newest
        boot = kafka.controller_bootstrap
        port = free_port()
        d, conf = tmp_path / "kraftkit-2", tmp_path / "kraftkit-2.properties"
        conf.write_text(f"process.roles=controller\nnode.id=2\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
                        f"controller.listener.names=CONTROLLER\ncontroller.quorum.bootstrap.servers={boot}\n"
                        f"log.dirs={d}\n")
        r = kraftkit("storage", "format", "-t", kafka.cluster_id, "-c", str(conf), "-r", "4.0",
                     "--no-initial-controllers")
        assert r.returncode == 0, r.stderr
        proc = KraftkitProcess(["controller", "run"], ["--config", str(conf)], tmp_path / "kraftkit-2.log")
        hw = int(parse_status(metadata_quorum(VERSION, boot, "describe", "--status"))["HighWatermark"])

        def observer_end() -> int:
            rows = parse_replication(metadata_quorum(VERSION, boot, "describe", "--replication"))
            return max([int(r["LogEndOffset"]) for r in rows if r["NodeId"] == "2"], default=-1)

        deadline = time.monotonic() + 60
        while observer_end() < hw:
            assert time.monotonic() < deadline, proc.log_tail()
            time.sleep(0.5)
        mine = d / META
        assert snapshots(mine) == [snap] and (mine / snap).read_bytes() == (theirs / snap).read_bytes()

        out = metadata_quorum(VERSION, boot, "--command-config", str(conf), "add-controller")
        assert out.strip() == (f"Added controller 2 with directory id {directory_id(d)} and endpoints: "
                               f"CONTROLLER://127.0.0.1:{port}")
        rows = parse_replication(metadata_quorum(VERSION, boot, "describe", "--replication"))
        assert {r["NodeId"]: r["Status"] for r in rows} == {"1": "Leader", "2": "Follower"}
        before = int(parse_status(metadata_quorum(VERSION, boot, "describe", "--status"))["LeaderEpoch"])

        # two voters: after the Kafka node restarts, whoever leads was voted for by the other
        kafka.stop()
        kafka.start()
        both = f"{boot},127.0.0.1:{port}"
        st = wait_status(both, lambda s: int(s.get("LeaderEpoch", -1)) > before and s.get("LeaderId") in ("1", "2"),
                         timeout=120)
        assert '"id": 1' in st["CurrentVoters"] and '"id": 2' in st["CurrentVoters"]
        tools.create_topics(VERSION, kafka.bootstrap, [{"name": "after-join", "partitions": 1}])
    finally:
        if proc is not None:
            proc.stop()
        kafka.stop()


def test_a_mixed_dynamic_quorum_grown_from_kraftkit_survives_its_leaders_kill(kafka_jars, tmp_path):
    """A dynamic quorum started by one kraftkit controller (``--standalone``) grows by Kafka's
    ``add-controller`` to two real Kafka 4.3.1 controllers (formatted by Kafka's own
    ``kafka-storage format --no-initial-controllers``): they follow kraftkit's leader and take its
    VotersRecords. The kraftkit leader is killed with ``kill -9``: a Kafka controller is elected by the
    voter set kraftkit wrote, the kraftkit controller comes back as its follower, and the three logs
    hold the same batches byte for byte."""
    import os
    import signal

    from tests.harness import jars
    from tests.kafka.test_mixed_quorum import KafkaController, batches

    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    servers = ",".join(f"127.0.0.1:{p}" for p in ports.values())

    class DynamicKafkaController(KafkaController):
        """A real controller of the dynamic quorum: controller.quorum.bootstrap.servers, no voters,
        formatted by Kafka's own kafka-storage format --no-initial-controllers."""

        def __init__(self, node_id: int) -> None:
            super().__init__(tmp_path / f"kafka-{node_id}", VERSION, "4.0", node_id, ports[node_id], "", cid)

        def properties(self) -> dict[str, object]:
            props = super().properties()
            del props["controller.quorum.voters"]
            return {**props, "controller.quorum.bootstrap.servers": servers}

        def format(self) -> None:
            cmd = [jars.require_java(), "-Xmx256m", "-cp", jars.classpath(VERSION), "kafka.tools.StorageTool",
                   "format", "--cluster-id", cid, "--config", str(self.config_path), "--no-initial-controllers"]
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
            assert proc.returncode == 0, proc.stdout
            self.formatted = True

    d1, conf1 = tmp_path / "kraftkit-1", tmp_path / "kraftkit-1.properties"
    conf1.write_text(f"process.roles=controller\nnode.id=1\nlisteners=CONTROLLER://127.0.0.1:{ports[1]}\n"
                     f"controller.listener.names=CONTROLLER\ncontroller.quorum.bootstrap.servers={servers}\n"
                     f"log.dirs={d1}\n")
    r = kraftkit("storage", "format", "-t", cid, "-c", str(conf1), "-r", "4.0", "--standalone")
    assert r.returncode == 0, r.stderr
    kafkas = {i: DynamicKafkaController(i) for i in (2, 3)}
    k1 = KraftkitProcess(["controller", "run"], ["--config", str(conf1)], tmp_path / "kraftkit-1.log")
    try:
        for k in kafkas.values():
            k.start()
        wait_status(servers, lambda s: s.get("LeaderId") == "1")
        for i, k in kafkas.items():
            wait_status(servers, lambda s, i=i: f'"id": {i}' in s.get("CurrentObservers", ""))
            out = metadata_quorum(VERSION, servers, "--command-config", str(k.config_path), "add-controller")
            assert out.startswith(f"Added controller {i} with directory id "), out
        st = wait_status(servers, lambda s: all(f'"id": {i}' in s.get("CurrentVoters", "") for i in (1, 2, 3)))
        assert st["LeaderId"] == "1"
        epoch = int(st["LeaderEpoch"])

        os.kill(k1.proc.pid, signal.SIGKILL)
        k1.stop()
        st = wait_status(servers, lambda s: s.get("LeaderId") in ("2", "3") and int(s["LeaderEpoch"]) > epoch,
                         timeout=120)
        k1 = KraftkitProcess(["controller", "run"], ["--config", str(conf1)], tmp_path / "kraftkit-1b.log")
        hw = int(st["HighWatermark"])
        deadline = time.monotonic() + 60
        while True:
            rows = parse_replication(metadata_quorum(VERSION, servers, "describe", "--replication"))
            mine = next(r for r in rows if r["NodeId"] == "1")
            if mine["Status"] == "Follower" and int(mine["LogEndOffset"]) >= hw:
                break
            assert time.monotonic() < deadline, (rows, k1.log_tail())
            time.sleep(0.5)
    finally:
        k1.stop()
        for k in kafkas.values():
            k.stop()
    logs = {1: batches(d1 / META), **{i: batches(k.metadata_log_dir) for i, k in kafkas.items()}}
    common = set(logs[1]) & set(logs[2]) & set(logs[3])
    assert len(common) > 3
    for base in common:
        assert logs[1][base] == logs[2][base] == logs[3][base], base
