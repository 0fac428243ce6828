"""Recovery after a lost majority, on a real Kafka 4.4.0 cluster: three controllers
(``process.roles=controller``, static voters) and a broker (node 100). Topics are created, one with a
topic config, and an idempotent producer writes records; the cluster is stopped and the directories
of a majority of its controllers are lost:

* two of the three controllers' directories: ``kraftkit quorum recover --from`` the third's rebuilds
  the quorum, and real Kafka controllers start on the recovered directories;
* all three controllers' directories: recovered ``--from`` the broker's log directory alone (every
  broker replicates ``__cluster_metadata``), and three ``kraftkit controller run`` start on them.

Either way the broker comes back on the new quorum and serves what it held: kafka-topics describes both
topics with their partitions and the topic config, and every acknowledged record is consumed back. The
new quorum's first leader is elected above every epoch the old one reached."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.quorum import KafkaQuorum, metadata_quorum, parse_status
from tests.kafka.test_broker_on_kraftkit import BrokerOnly

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

V = jars.KAFKA_NEWEST
ORDERS = [{"key": f"k{i}".encode(), "value": f"order {i}".encode(), "partition": i % 3} for i in range(60)]
AUDIT = [{"key": None, "value": f"audit {i}".encode()} for i in range(10)]


def kraftkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftkit.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


def last_epoch(q: KafkaQuorum) -> int:
    """The quorum's current leader epoch, from kafka-metadata-quorum describe --status."""
    return int(parse_status(q.metadata_quorum("describe", "--status"))["LeaderEpoch"])


@pytest.mark.parametrize("survivor, controllers", [("controller", "kafka"), ("broker", "kraftkit")])
def test_a_cluster_that_lost_its_controller_majority_is_recovered(kafka_jars, tmp_path, survivor, controllers):
    jars.ensure_kafka(V)
    q = KafkaQuorum(tmp_path / "q", V, broker=False)
    broker = BrokerOnly(tmp_path / "broker", q.voters, cluster_id=q.cluster_id, start_timeout=150, stop_timeout=60)
    procs: list[KraftkitProcess] = []

    def tails() -> str:
        return "\n".join([q.log_tails(30), broker.log_tail(60), *(p.log_tail() for p in procs)])

    try:
        q.start()
        broker.start()
        tools.create_topics(V, broker.bootstrap, [
            {"name": "orders", "partitions": 3},
            {"name": "audit", "partitions": 1, "configs": {"retention.ms": "123456789"}},
        ])
        acks = tools.produce(V, broker.bootstrap, [{"topic": "orders", "records": ORDERS},
                                                    {"topic": "audit", "records": AUDIT}])
        assert len(acks) == len(ORDERS) + len(AUDIT)
        old_epoch = last_epoch(q)
        broker.stop()
        q.stop()

        # the loss: a majority of the controllers' directories, or all of them
        lost = (2, 3) if survivor == "controller" else (1, 2, 3)
        for i in lost:
            shutil.rmtree(q.nodes[i].metadata_dir)
        source = q.nodes[1].metadata_dir if survivor == "controller" else broker.metadata_dir
        out = tmp_path / "recovered"
        proc = kraftkit("quorum", "recover", "--from", str(source), "--voters", q.voters, "--out", str(out),
                        "--json")
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["clusterId"] == q.cluster_id and report["voters"] == [1, 2, 3], report
        assert report["epoch"] >= old_epoch, report
        assert report["diverging"] == [], report  # one survivor: nothing to compare it with

        # the new controllers' directories, where the old ones were
        for i in (1, 2, 3):
            shutil.rmtree(q.nodes[i].metadata_dir, ignore_errors=True)
            shutil.copytree(out / str(i), q.nodes[i].metadata_dir)
            q.nodes[i].formatted = True
        if controllers == "kafka":
            q.start()
        else:
            for i in (1, 2, 3):
                procs.append(KraftkitProcess(
                    ["controller", "run"],
                    ["--node-id", str(i), "--voters", q.voters, "--log-dir", str(q.nodes[i].metadata_dir)],
                    tmp_path / f"kraftkit-{i}.log"))
        broker.start()

        desc = tools.topic_command(V, broker.bootstrap, ["--describe"])
        for topic, parts in (("orders", 3), ("audit", 1)):
            assert re.search(rf"Topic: {topic}\tTopicId: \S+\tPartitionCount: {parts}\t", desc), desc
        assert re.search(r"Topic: audit\t.*Configs: .*retention\.ms=123456789", desc), desc
        for topic, sent in (("orders", ORDERS), ("audit", AUDIT)):
            got = tools.consume(V, broker.bootstrap, topic)
            assert sorted((r["key"], r["value"]) for r in got) == sorted((r["key"], r["value"]) for r in sent)

        if controllers == "kafka":
            assert last_epoch(q) > report["epoch"], tails()
        else:
            status = parse_status(metadata_quorum(V, f"127.0.0.1:{q.controller_ports[1]}", "describe", "--status"))
            assert int(status["LeaderEpoch"]) > report["epoch"], status
    except BaseException:
        print(tails())
        raise
    finally:
        broker.stop()
        q.stop()
        for p in procs:
            p.stop()


def test_a_dynamic_quorums_recovered_directory_holds_the_new_voter_set_kafka_boots_from(kafka_jars, tmp_path):
    """A dynamic quorum (kraft.version 1, ``format --standalone``): the voter set is in the log, so the
    recovered snapshot carries the new one (the voter's new directory id, its endpoint). A real Kafka
    4.4.0 node whose metadata directory is replaced by the recovered one is the voter of that set: it
    elects itself above the old epoch and serves its topic's records."""
    from tests.harness.node import KafkaNode

    jars.ensure_kafka(V)
    node = KafkaNode(tmp_path / "node", V, dynamic_quorum=True, separate_metadata_dir=True, start_timeout=150)
    try:
        node.start()
        tools.create_topics(V, node.bootstrap, [{"name": "orders", "partitions": 3}])
        tools.produce(V, node.bootstrap, [{"topic": "orders", "records": ORDERS}])
        old = parse_status(metadata_quorum(V, node.controller_bootstrap, "describe", "--status"))
        node.stop()

        out = tmp_path / "recovered"
        voter = f"1@127.0.0.1:{node.controller_port}"
        proc = kraftkit("quorum", "recover", "--from", str(node.metadata_dir), "--voters", voter, "--out", str(out),
                        "--json")
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["kraftVersion"] == 1 and report["epoch"] >= int(old["LeaderEpoch"]), report
        new_dir_id = report["directoryIds"]["1"]
        shutil.rmtree(node.metadata_dir)
        shutil.copytree(out / "1", node.metadata_dir)

        node.start()
        status = parse_status(metadata_quorum(V, node.controller_bootstrap, "describe", "--status"))
        assert int(status["LeaderEpoch"]) > report["epoch"], status
        assert status["LeaderId"] == "1" and new_dir_id in status["CurrentVoters"], status
        got = tools.consume(V, node.bootstrap, "orders")
        assert sorted((r["key"], r["value"]) for r in got) == sorted((r["key"], r["value"]) for r in ORDERS)
    except BaseException:
        print(node.log_tail(80))
        raise
    finally:
        node.stop()
