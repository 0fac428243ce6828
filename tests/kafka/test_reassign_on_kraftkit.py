"""Partition reassignment with Kafka's own ``kafka-reassign-partitions`` on a kraftkit controller
quorum: two real Kafka 4.4.0 brokers (101, 102) on three ``kraftkit controller run`` processes, a
topic ``t`` with partition 0 on broker 101 and partition 1 on broker 102, records produced to both.

``--execute`` moves partition 0 from 101 to 102 and adds 101 to partition 1 (AlterPartitionReassignments
forwarded by the broker inside an Envelope); the new replicas catch up and their leaders' AlterPartition
completes the reassignments (partition 0's leadership moves to 102); ``--verify`` (ListPartitionReassignments)
reports both completed, ``--list`` finds none left, ``kafka-topics --describe`` shows the new replicas,
and every record produced before is consumed back, with more produced after. Then, broker 101 shut
down, a reassignment adding it back cannot complete: ``--list`` shows it with its adding replica,
``--verify`` says it is in progress, ``--cancel`` reverts it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kraftkit.protocol import KafkaConnection
from kraftkit.protocol.messages import ApiKey
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.node import free_port, random_cluster_id
from tests.kafka.test_broker_failover_on_kraftkit import Broker, describe, records, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

V = jars.KAFKA_NEWEST
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def reassign(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return tools.run_tool(V, tools.find_class(V, REASSIGN), ["--bootstrap-server", bootstrap, *args], check=False,
                          timeout=120)


def test_kafka_reassign_partitions_moves_replicas_on_a_kraftkit_quorum(kafka_jars, tmp_path):
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
                "--node-id", str(i), "--voters", voters, "--log-dir", str(d)], tmp_path / f"c{i}.log"))
        for b in brokers.values():
            b.launch()
        for b in brokers.values():
            b.wait_ready()
        bootstrap = brokers[101].bootstrap
        out = tools.topic_command(V, bootstrap, ["--create", "--topic", "t", "--replica-assignment", "101,102"])
        assert "Created topic t." in out, (out, tails())
        before = wait_for("t-0 on 101 and t-1 on 102", lambda: (
            d if (d := describe(bootstrap)) == {0: (101, [101], [101]), 1: (102, [102], [102])} else None), tails)
        assert before
        acks = tools.produce(V, bootstrap, [{"topic": "t", "records": records(0, 40, 2), "props": props}])
        assert len(acks) == 40

        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "t", "partition": 0, "replicas": [102]},
            {"topic": "t", "partition": 1, "replicas": [102, 101]}]}))
        executed = reassign(bootstrap, "--reassignment-json-file", str(plan), "--execute")
        assert executed.returncode == 0, (executed.stdout, executed.stderr, tails())
        assert "Successfully started partition reassignments for t-0,t-1" in executed.stdout, executed.stdout

        def verified() -> str | None:
            # (--preserve-throttles: no throttle was set, and clearing the topic-level ones would be an
            # IncrementalAlterConfigs of a TOPIC resource, which kraftkit's controller does not take yet)
            proc = reassign(bootstrap, "--reassignment-json-file", str(plan), "--verify", "--preserve-throttles")
            assert proc.returncode == 0, (proc.stdout, proc.stderr, tails())
            done = all(f"Reassignment of partition t-{p} is completed." in proc.stdout for p in (0, 1))
            return proc.stdout if done else None

        out = wait_for("both reassignments completed", verified, tails, timeout=120)
        assert out.startswith("Status of partition reassignment:"), out
        listed = reassign(bootstrap, "--list")
        assert listed.returncode == 0 and "No partition reassignments found." in listed.stdout, (listed.stdout,
                                                                                                 listed.stderr)
        # (the ISR in the order the leader's AlterPartition gave it)
        seen: list[dict] = []
        wait_for("t-0 on 102, t-1 on 102 and 101", lambda: (
            seen.append({p: (leader, replicas, sorted(isr)) for p, (leader, replicas, isr) in describe(bootstrap).items()})
            or seen[-1] == {0: (102, [102], [102]), 1: (102, [102, 101], [101, 102])}),
            lambda: f"last described: {seen[-1:]}\n{tails()}")

        acks += tools.produce(V, bootstrap, [{"topic": "t", "records": records(40, 20, 2), "props": props}])
        assert len(acks) == 60
        got = tools.consume(V, brokers[102].bootstrap, "t")
        assert sorted((r["partition"], r["key"], r["value"]) for r in got) == sorted(
            (s["partition"], s["key"], s["value"]) for s in records(0, 60, 2))

        # broker 101 shuts down; a reassignment adding it back to t-0 (sent through broker 102, which
        # forwards it) cannot complete: the tool lists it and verifies it in progress, then cancels it
        brokers[101].stop()
        bootstrap = brokers[102].bootstrap
        with KafkaConnection("127.0.0.1", brokers[102].broker_port, timeout=60) as conn:
            api = ApiKey.ALTER_PARTITION_REASSIGNMENTS
            got = conn.request(api, conn.version_for(api), {"TimeoutMs": 30000, "Topics": [
                {"Name": "t", "Partitions": [{"PartitionIndex": 0, "Replicas": [102, 101]}]}]})
        assert got["ErrorCode"] == 0 and got["Responses"][0]["Partitions"][0]["ErrorCode"] == 0, got
        listed = reassign(bootstrap, "--list")
        assert "Current partition reassignments:" in listed.stdout, (listed.stdout, listed.stderr)
        assert "t-0: replicas: 102,101. adding: 101." in listed.stdout, listed.stdout
        back = tmp_path / "back.json"
        back.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [102, 101]}]}))
        proc = reassign(bootstrap, "--reassignment-json-file", str(back), "--verify", "--preserve-throttles")
        assert "Reassignment of partition t-0 is still in progress." in proc.stdout, (proc.stdout, proc.stderr)
        proc = reassign(bootstrap, "--reassignment-json-file", str(back), "--cancel", "--preserve-throttles")
        assert proc.returncode == 0, (proc.stdout, proc.stderr, tails())
        assert "Successfully cancelled partition reassignment for: t-0" in proc.stdout, proc.stdout
        listed = reassign(bootstrap, "--list")
        assert "No partition reassignments found." in listed.stdout, (listed.stdout, listed.stderr)
        wait_for("t-0 back on 102 alone", lambda: describe(bootstrap).get(0) == (102, [102], [102]), tails)
    finally:
        for b in brokers.values():
            b.stop()
        codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0], tails()
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.glob("c*.log"))
    assert "Successfully altered 2 out of 2 partition reassignment(s)." in logs
    assert "completed the ongoing partition reassignment" in logs  # the leader's AlterPartition finished t-0's
    # Kafka's broker logs one ERROR of its own whenever a replica of a topic it already knew lands on
    # it (ReplicaManager.getOrCreatePartition: the topic is in the previous image, the partition is
    # not hosted there), whatever the controller: t-0 on 102 and t-1 on 101 here. Nothing else.
    for b, moved in ((101, "t-1"), (102, "t-0")):
        landed = f"ERROR [Broker id={b}] Expected partition {moved} with topic id"
        errors = [line for line in brokers[b].server_log.read_text(errors="replace").splitlines() if " ERROR " in line]
        assert len(errors) == 1 and landed in errors[0], brokers[b].log_tail(80)
