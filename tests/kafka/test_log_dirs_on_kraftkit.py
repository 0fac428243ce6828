"""A real Kafka 4.4.0 broker with two log directories on a kraftkit controller quorum: the partitions
of a new topic are created UNASSIGNED, the broker puts each in one of its directories and tells the
controller (AssignReplicasToDirs), and every controller's image then names, for each partition, the
directory (its ``directory.id`` in that directory's meta.properties) in which the broker holds it."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest

from kraftkit.errors import KraftkitError
from kraftkit.features.storage import MetaProperties, parse_uuid
from kraftkit.metadata.image import load_image
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.node import free_port, random_cluster_id
from tests.kafka.test_broker_failover_on_kraftkit import Broker

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(400)]

V = jars.KAFKA_NEWEST


class TwoDirBroker(Broker):
    @property
    def log_dirs(self):
        return [self.workdir / "data-a", self.workdir / "data-b"]


def test_a_broker_with_two_log_directories_assigns_its_replicas(kafka_jars, tmp_path):
    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    procs = []
    for i in ports:
        subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "storage", "format", "-t", cid, "--node-id",
                        str(i), "-d", str(tmp_path / f"c{i}"), "--no-initial-controllers"], check=True,
                       capture_output=True, timeout=60)
    broker = TwoDirBroker(tmp_path / "broker", voters, 101, cluster_id=cid, start_timeout=120)

    def assigned(i: int) -> dict[int, uuid.UUID] | None:
        try:
            t = load_image(tmp_path / f"c{i}").topic("m")
        except KraftkitError:
            return None  # a batch half written
        if t is None or len(t.partitions) != 6:
            return None
        dirs = {p: f["Directories"][0] for p, f in t.partitions.items()}
        return dirs if all(d.int > 2 for d in dirs.values()) else None  # none UNASSIGNED (1), MIGRATING (0)

    try:
        for i in ports:
            procs.append(KraftkitProcess(["controller", "run"], ["--node-id", str(i), "--voters", voters,
                                                                 "--log-dir", str(tmp_path / f"c{i}")],
                                         tmp_path / f"c{i}.log"))
        broker.start()
        out = tools.topic_command(V, broker.bootstrap, ["--create", "--topic", "m", "--partitions", "6",
                                                        "--replication-factor", "1"])
        assert "Created topic m." in out
        deadline = time.monotonic() + 60
        while not all(assigned(i) for i in ports):
            assert time.monotonic() < deadline, "\n".join(p.log_tail() for p in procs) + broker.log_tail()
            time.sleep(0.3)
        sent = [{"key": b"k", "value": f"v{i}".encode(), "partition": i % 6} for i in range(12)]
        assert len(tools.produce(V, broker.bootstrap, [{"topic": "m", "records": sent, "props": {"acks": "all"}}])) == 12
        assert len(tools.consume(V, broker.bootstrap, "m")) == 12
    finally:
        broker.stop()
        codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0]
    ids = {uuid.UUID(bytes=parse_uuid(MetaProperties.read(d / "meta.properties").directory_id)): d
           for d in broker.log_dirs}
    where = {p: ids[d] for p, d in assigned(1).items()}
    for p, d in where.items():
        assert (d / f"m-{p}").is_dir(), (p, d)  # the directory the controller names holds the partition
    assert assigned(1) == assigned(2) == assigned(3)
    logs = "".join((tmp_path / f"c{i}.log").read_text(errors="replace") for i in ports)
    assert "UNSUPPORTED_VERSION" not in logs
