"""Differential: partition leadership as two real Kafka 4.4.0 brokers move through a controlled
shutdown, a restart and a preferred election, once on three real Kafka 4.4.0 controllers and once on
three ``kraftkit controller run`` processes (both at release 4.4). Driven by Kafka's own tools
(``kafka-topics`` with a manual assignment, SIGTERM, ``kafka-leader-election``), waiting after each step
until the brokers' metadata shows it. The PartitionChangeRecords each quorum committed, partition by
partition and in order, must be the same, and so must the partitions of the images at the end: leader,
replicas, ISR, ELR, last known ELR, recovery state, leader and partition epochs."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import PARTITION_CHANGE, TOPIC
from kraftkit.errors import KraftkitError
from kraftkit.metadata.image import load_image
from kraftkit.metadata.source import batches
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.node import free_port, random_cluster_id
from tests.harness.quorum import KafkaQuorum
from tests.kafka.test_broker_failover_on_kraftkit import Broker, describe

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]

V = jars.KAFKA_NEWEST
RELEASE = "4.4"
ASSIGNMENT = "101:102,102:101,101:102,102:101"
PREFERRED = {0: 101, 1: 102, 2: 101, 3: 102}
KEYS = ("Leader", "Replicas", "Isr", "EligibleLeaderReplicas", "LastKnownElr", "LeaderRecoveryState", "LeaderEpoch",
        "PartitionEpoch")


def wait_until(what: str, check, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.3)
    return got


def run_sequence(b1: Broker, b2: Broker) -> list[int]:
    """The steps; the exit codes of the tools."""
    codes = []
    got = tools.run_tool(V, tools.topic_command_class(V), ["--bootstrap-server", b1.bootstrap, "--create", "--topic",
                                                           "t", "--replica-assignment", ASSIGNMENT], check=False)
    codes.append(got.returncode)
    wait_until("t on both brokers", lambda: (d := describe(b1.bootstrap)) and len(d) == 4 and all(
        len(v[2]) == 2 and v[0] == PREFERRED[p] for p, v in d.items()))
    b2.stop()  # controlled shutdown
    wait_until("every partition led by 101, ISR [101]", lambda: (d := describe(b1.bootstrap)) and len(d) == 4 and all(
        v[0] == 101 and v[2] == [101] for v in d.values()))
    b2.start()
    wait_until("102 back in every ISR", lambda: (d := describe(b1.bootstrap)) and len(d) == 4 and all(
        sorted(v[2]) == [101, 102] for v in d.values()))
    got = tools.run_tool(V, "org.apache.kafka.tools.LeaderElectionCommand", [
        "--bootstrap-server", b1.bootstrap, "--election-type", "PREFERRED", "--all-topic-partitions"], check=False)
    codes.append(got.returncode)
    wait_until("the preferred leaders", lambda: {p: v[0] for p, v in describe(b2.bootstrap).items()} == PREFERRED)
    return codes


def changes(log_dir: Path) -> tuple[dict[int, list[dict]], int]:
    """t's PartitionChangeRecords by partition, in order (without the topic id and the directories), and
    the end offset of the last batch holding one."""
    tid = None
    out: dict[int, list[dict]] = {}
    end = 0
    for seg in sorted(log_dir.glob("*.log")):
        for batch in batches(seg):
            if batch.is_control:
                continue
            for r in batch.records():
                key, _v, data = decode_metadata_record(r.value)
                if key == TOPIC and data["Name"] == "t":
                    tid = data["TopicId"]
                elif key == PARTITION_CHANGE and data["TopicId"] == tid:
                    out.setdefault(data["PartitionId"], []).append(
                        {k: v for k, v in data.items() if k not in ("TopicId", "Directories")})
                    end = batch.last_offset + 1
    return out, end


def settled_copy(log_dir: Path, dest: Path) -> Path:
    """A copy of a live metadata log directory whose last batch is whole (copied again until it is)."""
    for _ in range(50):
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(log_dir, dest)
        try:
            changes(dest)
            return dest
        except KraftkitError:
            time.sleep(0.2)
    raise AssertionError(f"{log_dir} never settled")


def partitions(log_dir: Path, at: int) -> dict[int, dict]:
    image = load_image(log_dir, at)
    t = image.topic("t")
    assert t is not None
    return {p: {k: fields[k] for k in KEYS} for p, fields in t.partitions.items()}


def test_leadership_moves_the_same_on_kafkas_controllers_and_on_kraftkits(kafka_jars, tmp_path):
    jars.ensure_kafka(V)
    # kraftkit's quorum
    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    procs = []
    for i in ports:
        subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "storage", "format", "-t", cid, "--node-id",
                        str(i), "-d", str(tmp_path / f"k{i}"), "--release-version", RELEASE,
                        "--no-initial-controllers"], check=True, capture_output=True, timeout=60)
    brokers = [Broker(tmp_path / f"kb{b}", voters, b, cluster_id=cid, start_timeout=120) for b in (101, 102)]
    try:
        for i in ports:
            procs.append(KraftkitProcess(["controller", "run"], ["--node-id", str(i), "--voters", voters,
                                                                 "--log-dir", str(tmp_path / f"k{i}")],
                                         tmp_path / f"k{i}.log"))
        for b in brokers:
            b.launch()
        for b in brokers:
            b.wait_ready()
        our_codes = run_sequence(*brokers)
        time.sleep(1)  # the last commit reaches node 1 (a follower, maybe)
        ours = settled_copy(tmp_path / "k1" / "__cluster_metadata-0", tmp_path / "ours")
    finally:
        for b in brokers:
            b.stop()
        assert [p.stop() for p in procs] == [0, 0, 0]

    # Kafka's quorum, the same brokers
    with KafkaQuorum(tmp_path / "kafka", V, broker=False, release_version=RELEASE) as q:
        kbrokers = [Broker(tmp_path / f"qb{b}", q.voters, b, cluster_id=q.cluster_id, start_timeout=120)
                    for b in (101, 102)]
        try:
            for b in kbrokers:
                b.launch()
            for b in kbrokers:
                b.wait_ready()
            their_codes = run_sequence(*kbrokers)
            time.sleep(1)
            theirs = settled_copy(q.metadata_log_dir(1), tmp_path / "theirs")
        finally:
            for b in kbrokers:
                b.stop()

    assert our_codes == their_codes == [0, 0]
    our_changes, our_end = changes(ours)
    their_changes, their_end = changes(theirs)
    assert our_changes == their_changes
    assert sum(len(c) for c in our_changes.values()) >= 8  # every partition changed at least twice
    assert partitions(ours, our_end) == partitions(theirs, their_end)
    assert {p: v["Leader"] for p, v in partitions(ours, our_end).items()} == PREFERRED
