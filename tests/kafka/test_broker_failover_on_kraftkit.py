"""Partition leadership moves on a kraftkit controller quorum as it does on Kafka's: two real Kafka
4.4.0 brokers on three ``kraftkit controller run`` processes, a topic of four partitions replicated
on both (made with ``kafka-topics``), an idempotent ``acks=all`` producer:

* **kill -9 of a broker**: its session expires, the controller fences it and moves the leaderships
  it held to the other ISR member; the surviving leaders shrink their ISRs (AlterPartition); the
  producer carries on through the survivor and a consumer reads back every acknowledged record.
* **its restart** (a new incarnation): it registers, catches up, is unfenced; the leaders take it
  back into their ISRs (AlterPartition); ``kafka-leader-election --election-type PREFERRED`` gives
  the leaderships back to the preferred replicas (ElectLeaders, forwarded in an Envelope).
* **controlled shutdown** of the other broker (SIGTERM): the controller moves its leaderships
  before it lets it go, so its partitions never lose their leader.
* **kill -9 of the active controller**: another controller takes over from the log; the broker
  finds it, a topic is created through it and the producer goes on; the killed controller comes
  back and catches up.

Every controller holds the same log at the end, and no broker logged an error."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from kraftkit._kafka import PARTITION_CHANGE
from kraftkit.features.storage.format import CLUSTER_METADATA_DIR
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.node import free_port, random_cluster_id
from tests.kafka.test_broker_on_kraftkit import BrokerOnly
from tests.kafka.test_topics_on_kraftkit import topic_records

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

V = jars.KAFKA_NEWEST
SESSION_MS = 4000
ROW = re.compile(r"Topic: t\s+Partition: (\d+)\s+Leader: (-?\d+|none)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]*)")


class Broker(BrokerOnly):
    def __init__(self, workdir, voters: str, node_id: int, **kw) -> None:
        super().__init__(workdir, voters, **kw)
        self.node_id = node_id

    def properties(self) -> dict[str, object]:
        props = super().properties()
        props.update({"node.id": self.node_id, "broker.heartbeat.interval.ms": 500})
        return props


def describe(bootstrap: str, topic: str = "t") -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, ISR) as ``kafka-topics --describe`` shows them ({} when the tool fails)."""
    proc = tools.run_tool(V, tools.topic_command_class(V), ["--bootstrap-server", bootstrap, "--describe", "--topic",
                                                            topic], check=False, timeout=60)
    out = {}
    row = re.compile(ROW.pattern.replace("Topic: t", f"Topic: {re.escape(topic)}"))
    for pid, leader, replicas, isr in row.findall(proc.stdout):
        out[int(pid)] = (-1 if leader == "none" else int(leader), [int(x) for x in replicas.split(",")],
                         [int(x) for x in isr.split(",") if x])
    return out


def wait_for(what: str, check, tails, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what} not reached in {timeout:.0f} s\n{tails()}"
        time.sleep(0.5)


def active_controller(tmp_path, ports) -> int:
    """The node whose log says it became the active controller in the highest epoch."""
    def last_epoch(i: int) -> int:
        text = "".join(p.read_text(errors="replace") for p in tmp_path.glob(f"c{i}*.log"))
        return max(map(int, re.findall(r"active controller in epoch (\d+)", text)), default=-1)

    return max(ports, key=last_epoch)


def records(n0: int, n: int, parts: int) -> list[dict]:
    return [{"key": f"k{i}".encode(), "value": f"value {i}".encode(), "partition": i % parts} for i in range(n0, n0 + n)]


def test_leaderships_move_on_broker_failure_restart_and_controlled_shutdown(kafka_jars, tmp_path):
    jars.ensure_kafka(V)
    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    dirs = {i: tmp_path / f"c{i}" for i in ports}
    for i, d in dirs.items():
        subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "storage", "format", "-t", cid, "--node-id",
                        str(i), "-d", str(d), "--no-initial-controllers"], check=True, capture_output=True, timeout=60)
    brokers = {b: Broker(tmp_path / f"b{b}", voters, b, cluster_id=cid, start_timeout=120, stop_timeout=60)
               for b in (101, 102)}
    procs: list[KraftkitProcess] = []

    def tails() -> str:
        return "\n".join([*(b.log_tail(60) for b in brokers.values()), *(p.log_tail() for p in procs)])

    props = {"enable.idempotence": "true", "acks": "all"}
    try:
        for i, d in dirs.items():
            procs.append(KraftkitProcess(["controller", "run"], [
                "--node-id", str(i), "--voters", voters, "--log-dir", str(d),
                "--broker-session-timeout-ms", str(SESSION_MS)], tmp_path / f"c{i}.log"))
        for b in brokers.values():
            b.launch()
        for b in brokers.values():
            b.wait_ready()
        b1, b2 = brokers[101], brokers[102]
        out = tools.topic_command(V, b1.bootstrap, ["--create", "--topic", "t", "--partitions", "4",
                                                    "--replication-factor", "2"])
        assert "Created topic t." in out, (out, tails())
        first = wait_for("four partitions, each on both brokers", lambda: (
            d if len(d := describe(b1.bootstrap)) == 4 and all(len(isr) == 2 for _l, _r, isr in d.values())
            else None), tails)
        assert {tuple(sorted(r)) for _l, r, _i in first.values()} == {(101, 102)}
        preferred = {pid: r[0] for pid, (_l, r, _i) in first.items()}
        assert {pid: leader for pid, (leader, _r, _i) in first.items()} == preferred
        assert set(preferred.values()) == {101, 102}  # the placement spreads the leaderships

        acks = tools.produce(V, b1.bootstrap, [{"topic": "t", "records": records(0, 40, 4), "props": props}])
        assert len(acks) == 40

        # kill -9 broker 101: fenced once its session expires, its leaderships move to 102
        b1.kill()
        after_kill = wait_for("every partition led by 102 with ISR [102]", lambda: (
            d if len(d := describe(b2.bootstrap)) == 4 and all(v[0] == 102 and v[2] == [102] for v in d.values())
            else None), tails, timeout=60)
        assert len(after_kill) == 4
        acks += tools.produce(V, b2.bootstrap, [{"topic": "t", "records": records(40, 40, 4), "props": props}])
        assert len(acks) == 80
        got = tools.consume(V, b2.bootstrap, "t")
        assert sorted((r["partition"], r["key"], r["value"]) for r in got) == sorted(
            (s["partition"], s["key"], s["value"]) for s in records(0, 80, 4))

        # back as a new incarnation: unfenced, caught up, back in every ISR; then a preferred election
        b1.start()
        wait_for("101 back in every ISR", lambda: (
            d if len(d := describe(b2.bootstrap)) == 4 and all(sorted(v[2]) == [101, 102] for v in d.values())
            else None), tails, timeout=90)
        election = tools.run_tool(V, "org.apache.kafka.tools.LeaderElectionCommand", [
            "--bootstrap-server", b2.bootstrap, "--election-type", "PREFERRED", "--all-topic-partitions"],
            check=False, timeout=60)
        assert election.returncode == 0, (election.stdout, election.stderr, tails())
        assert "Successfully completed leader election (PREFERRED)" in election.stdout, election.stdout
        wait_for("the preferred leaders back", lambda: (
            {pid: v[0] for pid, v in describe(b2.bootstrap).items()} == preferred), tails)

        # controlled shutdown of 102: its leaderships move to 101 before it goes
        b2.stop()
        after = wait_for("every partition led by 101", lambda: (
            d if len(d := describe(b1.bootstrap)) == 4 and all(v[0] == 101 for v in d.values()) else None), tails)
        assert all(v[2] == [101] for v in after.values())
        acks += tools.produce(V, b1.bootstrap, [{"topic": "t", "records": records(80, 20, 4), "props": props}])

        # kill -9 of the active controller: another takes over from the log, the broker finds it, and
        # its forwarded CreateTopics and the producer's writes go on; the killed one comes back and catches up
        active = active_controller(tmp_path, ports)
        procs[active - 1].proc.kill()
        assert procs[active - 1].stop() == -9
        out = tools.topic_command(V, b1.bootstrap, ["--create", "--topic", "u", "--partitions", "2",
                                                    "--replication-factor", "1"])
        assert "Created topic u." in out, (out, tails())
        assert active_controller(tmp_path, ports) != active
        acks += tools.produce(V, b1.bootstrap, [{"topic": "t", "records": records(100, 20, 4), "props": props},
                                                {"topic": "u", "records": [{"key": b"u", "value": b"v"}], "props": props}])
        got = tools.consume(V, b1.bootstrap, "t")
        assert sorted((r["partition"], r["key"], r["value"]) for r in got) == sorted(
            (s["partition"], s["key"], s["value"]) for s in records(0, 120, 4))
        assert len(acks) == 121
        procs[active - 1] = KraftkitProcess(["controller", "run"], [
            "--node-id", str(active), "--voters", voters, "--log-dir", str(dirs[active]),
            "--broker-session-timeout-ms", str(SESSION_MS)], tmp_path / f"c{active}-restarted.log")

        deadline = time.monotonic() + 30
        while len({len(topic_records(d / CLUSTER_METADATA_DIR, (PARTITION_CHANGE,))) for d in dirs.values()}) != 1:
            assert time.monotonic() < deadline, tails()
            time.sleep(0.2)
    finally:
        for b in brokers.values():
            b.stop()
        codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0], tails()
    changes = [topic_records(d / CLUSTER_METADATA_DIR, (PARTITION_CHANGE,)) for d in dirs.values()]
    assert changes[0] == changes[1] == changes[2] and changes[0]
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.glob("c*.log"))
    assert "because its session has timed out" in logs  # the kill -9 was noticed by the session, not by luck
    assert "controlled shutdown" in logs
    for b in brokers.values():
        assert " ERROR " not in b.server_log.read_text(errors="replace"), b.log_tail(80)
