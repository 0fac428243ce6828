"""A real Kafka 4.4.0 broker (``process.roles=broker``, node 100) on a quorum of three ``kraftkit
controller run`` processes on loopback: formatted by Kafka's own ``kafka-storage format`` with the
controllers' cluster id, it fetches the metadata log from kraftkit's leader as an observer,
registers, heartbeats and is unfenced, and reaches RUNNING (its own log says so); DescribeCluster
through the broker lists it, unfenced. SIGTERM makes it ask for a controlled shutdown, which the
controller grants at once (the broker's log says the controller let it go; no timeout); the three
controllers' logs hold its registration, its unfencing and its fencing, the image replayed up to
the high watermark seen while it ran shows it registered and unfenced, and the final image fenced."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import BROKER_REGISTRATION_CHANGE, FENCE_BROKER, REGISTER_BROKER, UNFENCE_BROKER, UNREGISTER_BROKER
from kraftkit.errors import KraftkitError
from kraftkit.features.storage import MetaProperties, parse_uuid
from kraftkit.features.storage.format import CLUSTER_METADATA_DIR
from kraftkit.log import Segment
from kraftkit.metadata.image import load_image
from kraftkit.protocol import KafkaConnection
from kraftkit.protocol.messages import ApiKey
from kraftkit.raft.admin import QuorumAdmin
from tests._procs import KraftkitProcess
from tests.harness import jars
from tests.harness.node import KafkaNode, free_port, random_cluster_id

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

BROKER_ID = 100
BROKER_RECORDS = {REGISTER_BROKER, BROKER_REGISTRATION_CHANGE, FENCE_BROKER, UNFENCE_BROKER, UNREGISTER_BROKER}
#: BrokerRegistrationChangeRecord's Fenced (Kafka's BrokerRegistrationFencingChange)
FENCE, UNFENCE = 1, -1


class BrokerOnly(KafkaNode):
    """A ``process.roles=broker`` node of the harness whose controllers are ``voters``."""

    def __init__(self, workdir: Path, voters: str, **kw) -> None:
        super().__init__(workdir, jars.KAFKA_NEWEST, log_until_exit=True, **kw)
        self.node_id = BROKER_ID
        self.voters = voters

    def _ensure_ports(self) -> None:
        if not self.broker_port:
            self.broker_port = free_port()

    def properties(self) -> dict[str, object]:
        props = super().properties()
        props.update({
            "process.roles": "broker",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.broker_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.broker_port}",
            "controller.quorum.voters": self.voters,
        })
        return props


def broker_records(metadata_dir: Path) -> list[tuple[int, int, dict]]:
    """(api key, version, fields) of the broker records of a kraftkit controller's metadata log."""
    out = []
    for seg in sorted(metadata_dir.glob("*.log")):
        for batch in Segment(seg).read_batches(verify_crc=True):
            if batch.is_control:
                continue
            for r in batch.records():
                key, version, data = decode_metadata_record(r.value)
                if key in BROKER_RECORDS:
                    out.append((key, version, data))
    return out


def live_broker_records(metadata_dir: Path) -> list[tuple[int, int, dict]]:
    """:func:`broker_records` of a log being written ([] while its last batch is half written)."""
    try:
        return broker_records(metadata_dir)
    except KraftkitError:
        return []


def test_a_real_kafka_broker_runs_on_a_kraftkit_controller_quorum(kafka_jars, tmp_path):
    jars.ensure_kafka(jars.KAFKA_NEWEST)
    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    dirs = {i: tmp_path / f"c{i}" for i in ports}
    for i, d in dirs.items():
        subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "storage", "format", "-t", cid, "--node-id",
                        str(i), "-d", str(d), "--no-initial-controllers"], check=True, capture_output=True, timeout=60)
    broker = BrokerOnly(tmp_path / "broker", voters, cluster_id=cid, start_timeout=120, stop_timeout=60)
    procs: list[KraftkitProcess] = []

    def tails() -> str:
        return "\n".join([broker.log_tail(80), *(p.log_tail() for p in procs)])

    try:
        for i, d in dirs.items():
            procs.append(KraftkitProcess(["controller", "run"], ["--node-id", str(i), "--voters", voters,
                                                                 "--log-dir", str(d)], tmp_path / f"c{i}.log"))
        broker.start()  # formats with kafka-storage, then waits for "Kafka Server started"
        log = broker.server_log.read_text(errors="replace")
        assert "The broker has been unfenced. Transitioning from RECOVERY to RUNNING." in log, tails()
        assert "[BrokerServer id=100] Transition from STARTING to STARTED" in log, tails()

        # the broker's own view: DescribeCluster through it lists broker 100, unfenced once the
        # broker's metadata image replayed the unfencing it fetched (it may lag the heartbeat's answer)
        with KafkaConnection("127.0.0.1", broker.broker_port, timeout=30) as conn:
            v = conn.version_for(ApiKey.DESCRIBE_CLUSTER)
            assert v >= 2  # IncludeFencedBrokers / IsFenced
            deadline = time.monotonic() + 30
            while True:
                desc = conn.request(ApiKey.DESCRIBE_CLUSTER, v, {"IncludeClusterAuthorizedOperations": False,
                                                                 "EndpointType": 1, "IncludeFencedBrokers": True})
                assert desc["ErrorCode"] == 0 and desc["ClusterId"] == cid, desc
                listed = [(b["BrokerId"], b["Host"], b["Port"], b["IsFenced"]) for b in desc["Brokers"]]
                if listed == [(BROKER_ID, "127.0.0.1", broker.broker_port, False)]:
                    break
                assert time.monotonic() < deadline, (listed, tails())
                time.sleep(0.2)

        # the quorum's view: the broker replicates the metadata log as an observer of the leader
        with QuorumAdmin(f"127.0.0.1:{ports[1]}", timeout=30) as admin:
            quorum = admin.describe()
        assert BROKER_ID in [o["id"] for o in quorum["observers"]], quorum
        running_hw = quorum["high_watermark"]

        # SIGTERM: a controlled shutdown the controller grants at once
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGTERM)
        broker.proc.wait(timeout=60)
        log = broker.server_log.read_text(errors="replace")
        assert "Beginning controlled shutdown." in log, tails()
        assert "The controller has asked us to exit controlled shutdown." in log, tails()
        assert "Timed out waiting for the controller to approve controlled shutdown" not in log, tails()
        assert "[BrokerServer id=100] Transition from SHUTTING_DOWN to SHUTDOWN" in log, tails()
        assert " ERROR " not in log, tails()

        # the registration, the unfencing and the fencing reach every controller's log before they stop
        deadline = time.monotonic() + 30
        while not all(len(live_broker_records(d / CLUSTER_METADATA_DIR)) >= 3 for d in dirs.values()):
            assert time.monotonic() < deadline, tails()
            time.sleep(0.2)
    finally:
        broker.stop()
        codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0], tails()

    # what the controllers committed: the broker's registration (its listener and the directory
    # id kafka-storage wrote into its meta.properties), its unfencing, its fencing at shutdown
    dir_id = uuid.UUID(bytes=parse_uuid(MetaProperties.read(broker.log_dirs[0] / "meta.properties").directory_id))
    seqs = [broker_records(d / CLUSTER_METADATA_DIR) for d in dirs.values()]
    assert seqs[0] == seqs[1] == seqs[2]
    kinds = [(k, d.get("Fenced")) for k, _v, d in seqs[0]]
    assert kinds == [(REGISTER_BROKER, True), (BROKER_REGISTRATION_CHANGE, UNFENCE),
                     (BROKER_REGISTRATION_CHANGE, FENCE)], seqs[0]
    reg = seqs[0][0][2]
    assert reg["BrokerId"] == BROKER_ID and reg["LogDirs"] == [dir_id]
    assert [(e["Name"], e["Host"], e["Port"]) for e in reg["EndPoints"]] == [
        ("PLAINTEXT", "127.0.0.1", broker.broker_port)]
    assert all(d["BrokerEpoch"] == reg["BrokerEpoch"] for _k, _v, d in seqs[0])

    for d in dirs.values():
        while_running = load_image(d, at=running_hw).brokers[BROKER_ID]
        assert while_running["Fenced"] is False and while_running["IncarnationId"] == reg["IncarnationId"]
        assert load_image(d).brokers[BROKER_ID]["Fenced"] is True
