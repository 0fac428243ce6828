"""A mixed controller quorum: ``kraftkit controller run`` processes and real Kafka controllers
(``process.roles=controller``) as voters of one static quorum, formatted together at one release by
their own tools (kraftkit's ``storage format`` and Kafka's ``kafka-storage format``), with a real Kafka
broker of that release on it: Kafka 3.9.2 (Vote v1, no pre-vote: kraftkit's prospective stands at once)
and Kafka 4.3.1 (pre-votes both ways, KIP-996).

The leader is killed with ``kill -9`` round after round, whatever its kind, and comes back; leadership
moves between the two kinds (each must have led, with the other following and applying what it
committed: the broker's registration, a topic, the producer ids of an idempotent producer, the other
kind's controller registrations). Through every change the broker keeps serving: each round's
records are acknowledged (acks=all) and the consumer reads every one back at the end. Then every
voter's log holds the same batches, byte for byte, wherever two of them hold the same offsets.

The Kafka controllers log no ERROR but their own answers to a client that asked too early: a broker
heartbeat that reaches a controller between its election and its activation (NotControllerException,
which Kafka's controllers log among themselves too), this test's describes before the bootstrap is
committed. Kafka 4.3.1 voters send their leader UpdateRaftVoter (KIP-853); kraftkit's leader of
a static quorum answers it as Kafka's leader at kraft.version 0 does (UNSUPPORTED_VERSION)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraftkit.log import Segment
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.jars import HarnessError
from tests.harness.node import KafkaNode, free_port, random_cluster_id
from tests.harness.quorum import metadata_quorum, parse_status
from tests.kafka.test_old_broker_on_kraftkit import OldBroker

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]

META = "__cluster_metadata-0"
#: the exceptions a Kafka controller logs at ERROR when it answers a client that asked it too early
KAFKAS_OWN_ANSWER = re.compile(r"NotControllerException: |"
                               r"UnsupportedVersionException: Direct-to-controller communication is not supported "
                               r"with the current MetadataVersion")


class KafkaController(KafkaNode):
    """A real ``process.roles=controller`` node of the mixed quorum."""

    def __init__(self, workdir: Path, version: str, release: str, node_id: int, port: int, voters: str,
                 cluster_id: str) -> None:
        super().__init__(workdir, version, cluster_id=cluster_id, release_version=release, start_timeout=150,
                         stop_timeout=60)
        self.node_id = node_id
        self.controller_port = port
        self.voters = voters

    def _ensure_ports(self) -> None:
        pass

    @property
    def ready_port(self) -> int:
        return self.controller_port

    def properties(self) -> dict[str, object]:
        return {"process.roles": "controller", "node.id": self.node_id,
                "listeners": f"CONTROLLER://127.0.0.1:{self.controller_port}",
                "controller.listener.names": "CONTROLLER", "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
                "log.dirs": str(self.log_dirs[0]), "controller.quorum.voters": self.voters,
                "num.io.threads": 2, "num.network.threads": 2}


class Member:
    """One voter, of either kind: started, killed with SIGKILL, restarted on the same directory."""

    def __init__(self, tmp: Path, version: str, release: str, node_id: int, kind: str, port: int, voters: str,
                 cid: str) -> None:
        self.node_id, self.kind, self.port, self.voters = node_id, kind, port, voters
        self.tmp = tmp
        self.starts = 0
        self.proc: KraftkitProcess | None = None
        self.kafka: KafkaController | None = None
        if kind == "kafka":
            self.kafka = KafkaController(tmp / f"kafka-{node_id}", version, release, node_id, port, voters, cid)
            self.metadata_dir = self.kafka.metadata_log_dir
        else:
            d = tmp / f"kraftkit-{node_id}"
            subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "storage", "format", "-t", cid, "--node-id",
                            str(node_id), "-d", str(d), "--release-version", release, "--no-initial-controllers"],
                           check=True, capture_output=True, timeout=60)
            self.dir = d
            self.metadata_dir = d / META

    def launch(self, election_timeout_ms: int | None = None) -> None:
        self.starts += 1
        if self.kafka is not None:
            self.kafka.launch()
            return
        extra = [] if election_timeout_ms is None else ["--election-timeout-ms", str(election_timeout_ms)]
        self.proc = KraftkitProcess(["controller", "run"], ["--node-id", str(self.node_id), "--voters", self.voters,
                                                           "--log-dir", str(self.dir), *extra],
                                    self.tmp / f"kraftkit-{self.node_id}-{self.starts}.log")

    def pid(self) -> int:
        if self.kafka is not None:
            assert self.kafka.proc is not None
            return self.kafka.proc.pid
        assert self.proc is not None
        return self.proc.proc.pid

    def kill(self) -> None:
        if self.kafka is not None:
            self.kafka.kill()
        elif self.proc is not None:
            self.proc.proc.kill()
            self.proc.stop()

    def stop(self) -> None:
        if self.kafka is not None:
            self.kafka.stop()
        elif self.proc is not None:
            self.proc.stop()

    def tail(self) -> str:
        if self.kafka is not None:
            return self.kafka.log_tail(40)
        return self.proc.log_tail(30) if self.proc is not None else ""


class Broker(OldBroker):
    """A real ``process.roles=broker`` node of ``version`` on the mixed quorum."""

    def __init__(self, workdir: Path, version: str, voters: str, cluster_id: str) -> None:
        super().__init__(workdir, voters, cluster_id)
        self.version = version


def status(members: dict[int, Member], alive: set[int]) -> dict[str, str] | None:
    """kafka-metadata-quorum describe --status through a live voter (None while nobody answers)."""
    for i in sorted(alive):
        try:
            return parse_status(metadata_quorum(jars.KAFKA_3, f"127.0.0.1:{members[i].port}", "describe", "--status",
                                                timeout=30))
        except HarnessError:  # a voter between leaders, or just killed: the next one is asked
            continue
    return None


def wait_leader(members: dict[int, Member], alive: set[int], above: int, tails) -> tuple[int, int]:
    """(leader id, epoch) once a live voter leads in an epoch above ``above``."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        st = status(members, alive)
        if st is not None and int(st["LeaderId"]) in alive and int(st["LeaderEpoch"]) > above:
            return int(st["LeaderId"]), int(st["LeaderEpoch"])
        time.sleep(1)
    pytest.fail(f"no leader above epoch {above} among {sorted(alive)} in 120 s\n{tails()}")


def batches(metadata_dir: Path) -> dict[int, bytes]:
    """base offset -> the batch's bytes, over every segment of a metadata log."""
    out = {}
    for seg in sorted(metadata_dir.glob("*.log")):
        data = seg.read_bytes()
        for b in Segment(seg).batches(verify_crc=True):
            out[b.base_offset] = data[b.position : b.position + b.size_in_bytes]
    return out


def records(n0: int, n: int) -> list[dict]:
    return [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % 3} for i in range(n0, n0 + n)]


@pytest.mark.parametrize("version, release", [(jars.KAFKA_3, "3.9"), (jars.KAFKA_4, "4.3")])
@pytest.mark.parametrize("kinds", ["kraftkit,kafka,kafka", "kraftkit,kraftkit,kafka"])
def test_a_mixed_quorum_elects_either_kind_and_the_broker_keeps_serving(kafka_jars, tmp_path, kinds, version, release):
    V = version
    jars.ensure_kafka(V)
    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    members = {i: Member(tmp_path, V, release, i, kind, ports[i], voters, cid)
               for i, kind in zip((1, 2, 3), kinds.split(","), strict=True)}
    broker = Broker(tmp_path / "broker", V, voters, cid)
    alive: set[int] = set()

    def tails() -> str:
        return "\n".join([*(f"== {i} ({m.kind})\n{m.tail()}" for i, m in members.items()), broker.log_tail(40)])

    sent: list[dict] = []
    led: dict[str, int] = {}
    history: list[str] = []
    try:
        for i, m in members.items():
            m.launch()
            alive.add(i)
        leader, epoch = wait_leader(members, alive, 0, tails)
        broker.start()
        tools.create_topics(V, broker.bootstrap, [{"name": "t", "partitions": 3}])
        for rnd in range(8):
            led.setdefault(members[leader].kind, epoch)
            history.append(f"{members[leader].kind} {leader} in epoch {epoch}")
            batch = records(len(sent), 30)
            acks = tools.produce(V, broker.bootstrap, [{"topic": "t", "records": batch, "props": {"acks": "all"}}])
            assert len(acks) == len(batch), tails()
            sent += batch
            if len(led) == 2 and rnd >= 2:
                break
            # the leader dies; when kraftkit would win again while Kafka has not led yet, the other
            # kraftkit voter is paused and the killed one comes back waiting 10 s before it stands, so
            # that the Kafka controller (which stands after its fetch timeout, 2 s) wins the vote
            old = leader
            members[old].kill()
            alive.discard(old)
            paused = [i for i in alive if members[i].kind == "kraftkit"] if (
                "kafka" not in led and members[old].kind == "kraftkit") else []
            for i in paused:
                os.kill(members[i].pid(), signal.SIGSTOP)
            try:
                members[old].launch(election_timeout_ms=10_000 if paused else None)
                alive.add(old)
                leader, epoch = wait_leader(members, alive - set(paused), epoch, tails)
            finally:
                for i in paused:
                    os.kill(members[i].pid(), signal.SIGCONT)
        print(f"{kinds}: leaders {', '.join(history)}")  # pytest -s shows it
        assert set(led) == {"kraftkit", "kafka"}, (history, tails())

        got = tools.consume(V, broker.bootstrap, "t")
        assert sorted((r["key"], r["value"]) for r in got) == sorted((r["key"], r["value"]) for r in sent)
        final = status(members, alive)
        assert final is not None and int(final["HighWatermark"]) > 0, tails()
        # while it ran (not its shutdown, which may find the others gone), no Kafka controller logged an
        # ERROR but its own answers to a client that asked it too early: a broker heartbeat between its
        # election and its activation, the describes of this test before the bootstrap is committed
        for m in members.values():
            if m.kafka is None:
                continue
            lines = m.kafka.server_log.read_text(errors="replace").splitlines()
            errors = [(ln, nxt) for ln, nxt in zip(lines, [*lines[1:], ""], strict=True) if " ERROR " in ln]
            unexpected = [ln for ln, nxt in errors if not KAFKAS_OWN_ANSWER.search(nxt)]
            assert unexpected == [], unexpected[:5]
    except BaseException:
        print(tails())
        raise
    finally:
        broker.stop()
        for m in members.values():
            m.stop()

    # the same batches wherever two logs hold the same offsets
    logs = {i: batches(m.metadata_dir) for i, m in members.items()}
    for i in (2, 3):
        common = sorted(set(logs[1]) & set(logs[i]))
        assert common, f"voters 1 and {i} share no batch"
        differ = [o for o in common if logs[1][o] != logs[i][o]]
        assert differ == [], f"voters 1 and {i} differ at base offsets {differ[:5]}"
