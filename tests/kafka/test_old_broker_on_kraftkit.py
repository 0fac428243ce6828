"""An older Kafka broker on a kraftkit quorum: a real Kafka 3.9.2 broker registers with three
``kraftkit controller run`` processes whose metadata.version is 3.9-IV0, serves a topic made through
it and clients produce and consume; on a quorum finalized above what 3.9 supports the same broker is
refused with Kafka's error (UNSUPPORTED_VERSION, naming the finalized level and the broker's range)
and never serves."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from kraftkit.features.registry import registry
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.node import KafkaNode, free_port, random_cluster_id

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(400)]

OLD = jars.KAFKA_3  # 3.9.2


class OldBroker(KafkaNode):
    def __init__(self, workdir, voters: str, cluster_id: str) -> None:
        super().__init__(workdir, OLD, cluster_id=cluster_id, start_timeout=120, stop_timeout=60,
                         log_until_exit=True)
        self.node_id = 101
        self.voters = voters

    def _ensure_ports(self) -> None:
        if not self.broker_port:
            self.broker_port = free_port()

    def properties(self) -> dict[str, object]:
        props = super().properties()
        props.update({"process.roles": "broker", "listeners": f"PLAINTEXT://127.0.0.1:{self.broker_port}",
                      "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.broker_port}",
                      "controller.quorum.voters": self.voters})
        return props


def quorum(tmp_path, release: str) -> tuple[str, str, list[KraftkitProcess]]:
    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    procs = []
    for i in ports:
        d = tmp_path / f"c{i}"
        subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "storage", "format", "-t", cid, "--node-id",
                        str(i), "-d", str(d), "--release-version", release, "--no-initial-controllers"],
                       check=True, capture_output=True, timeout=60)
        procs.append(KraftkitProcess(["controller", "run"], ["--node-id", str(i), "--voters", voters, "--log-dir",
                                                             str(d)], tmp_path / f"c{i}.log"))
    return cid, voters, procs


def test_a_kafka_3_9_broker_serves_on_a_quorum_at_3_9_iv0(kafka_jars, tmp_path):
    cid, voters, procs = quorum(tmp_path, "3.9")
    broker = OldBroker(tmp_path / "broker", voters, cid)
    try:
        broker.start()
        out = tools.topic_command(OLD, broker.bootstrap, ["--create", "--topic", "old", "--partitions", "2",
                                                          "--replication-factor", "1"])
        assert "Created topic old." in out, out
        sent = [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % 2} for i in range(10)]
        acks = tools.produce(OLD, broker.bootstrap, [{"topic": "old", "records": sent,
                                                     "props": {"acks": "all", "enable.idempotence": "true"}}])
        assert len(acks) == 10
        got = tools.consume(OLD, broker.bootstrap, "old")
        assert sorted((r["partition"], r["key"], r["value"]) for r in got) == sorted(
            (s["partition"], s["key"], s["value"]) for s in sent)
    finally:
        broker.stop()
        codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0]
    logs = "".join((tmp_path / f"c{i}.log").read_text(errors="replace") for i in (1, 2, 3))
    assert "Registering broker 101" in logs and "at metadata.version 21" in logs  # 3.9-IV0 is level 21
    assert registry().metadata_version("3.9-IV0").level == 21


def test_a_kafka_3_9_broker_is_refused_above_what_it_supports(kafka_jars, tmp_path):
    cid, voters, procs = quorum(tmp_path, "4.0")
    broker = OldBroker(tmp_path / "broker", voters, cid)
    try:
        broker.launch()
        deadline = time.monotonic() + 90
        refused = "Unable to register because the broker does not support finalized version"
        while True:
            text = "".join((tmp_path / f"c{i}.log").read_text(errors="replace") for i in (1, 2, 3))
            if refused in text and "UNSUPPORTED_VERSION" in broker.server_log.read_text(errors="replace"):
                break
            assert time.monotonic() < deadline, broker.log_tail(80) + text[-3000:]
            time.sleep(0.5)
        assert not broker.is_ready()  # it never serves
    finally:
        broker.stop()
        codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0]
    line = next(x for x in text.splitlines() if refused in x)
    level = int(re.search(r"active controller in epoch \d+ at metadata.version (\d+)", text).group(1))
    assert level > 21
    # 3.9.2 supports metadata.version 3.0-IV1 (1) .. 3.9-IV0 (21)
    assert (f"finalized version {level} of metadata.version. The broker wants a version between 1 and 21, "
            "inclusive.") in line, line
