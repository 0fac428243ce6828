"""Differential: one sequence of Kafka's own ``kafka-features.sh --bootstrap-controller`` commands
against a real Kafka three-controller quorum and against three ``kraftkit controller run``
processes, both formatted by Kafka's own ``kafka-storage format`` from a server.properties (kraftkit
runs from that same file, ``--config``). The tool's exit codes and output must be the same (epochs
and the leader's node id normalized; kraftkit may add a " To fix: ..." hint after Kafka's message), and so must the
FeatureLevelRecords each quorum committed, in order."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import FEATURE_LEVEL
from kraftkit.metadata.source import batches
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.node import free_port, random_cluster_id
from tests.harness.quorum import KafkaQuorum

from .test_controller_kafka import parse_describe

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

VERSION = jars.KAFKA_NEWEST  # the controllers, the storage tool and kafka-features.sh
RELEASE = "4.0"  # formatted at 4.0-IV3, so there is room to upgrade and to downgrade

# (tool arguments, the feature and level it sets when it succeeds)
STEPS: list[tuple[list[str], tuple[str, int] | None]] = [
    (["upgrade", "--feature", "group.version=1"], ("group.version", 1)),
    (["upgrade", "--metadata", "4.1-IV1"], ("metadata.version", 27)),
    (["downgrade", "--metadata", "4.1-IV0"], ("metadata.version", 26)),
    (["downgrade", "--metadata", "4.0-IV3"], ("metadata.version", 25)),
    (["downgrade", "--metadata", "4.0-IV3", "--unsafe"], ("metadata.version", 25)),
    (["disable", "--feature", "group.version"], ("group.version", 0)),
    (["upgrade", "--feature", "group.version=1", "--feature", "transaction.version=2"], ("group.version", 1)),
    (["upgrade", "--feature", "no.such.feature=1"], None),
    (["upgrade", "--feature", "group.version=9"], None),
    (["downgrade", "--feature", "transaction.version=0"], ("transaction.version", 0)),
    # eligible.leader.replicas.version 1 needs metadata.version 4.1-IV0: refused, then allowed
    (["upgrade", "--feature", "eligible.leader.replicas.version=1"], ("eligible.leader.replicas.version", 1)),
    (["upgrade", "--metadata", "4.1-IV1"], ("metadata.version", 27)),
    (["upgrade", "--feature", "eligible.leader.replicas.version=1"], ("eligible.leader.replicas.version", 1)),
    # (not `upgrade --release-version 4.1`: it also raises kraft.version to 1, a change of the raft
    # layer's voter set format (KIP-853) that kraftkit's controller refuses until it has dynamic quorums)
]


def normalized(text: str) -> str:
    text = re.sub(r"Epoch: \d+", "Epoch: E", text)
    text = re.sub(r"(?i)(controller) \d+", r"\1 N", text)  # which node leads is chance
    return re.sub(r" To fix: .*", "", text)


def feature_records(log_dir: Path) -> list[tuple[str, int]]:
    out = []
    for seg in sorted(log_dir.glob("*.log")):
        for batch in batches(seg):
            if batch.is_control:
                continue
            for r in batch.records():
                key, _v, data = decode_metadata_record(r.value)
                if key == FEATURE_LEVEL:
                    out.append((data["Name"], data["FeatureLevel"]))
    return out


class Cluster:
    """What the sequence needs of a quorum: its --bootstrap-controller and a node's metadata log."""

    def __init__(self, name: str, bootstrap: str, log_dir: Path) -> None:
        self.name, self.bootstrap, self.log_dir = name, bootstrap, log_dir
        self.outputs: list[tuple[int, str]] = []

    def tool(self, feature_command: str, *args: str) -> subprocess.CompletedProcess:
        return tools.run_tool(VERSION, feature_command, ["--bootstrap-controller", self.bootstrap, *args],
                              check=False, timeout=120)

    def describe_when(self, feature_command: str, want: tuple[str, int] | None) -> str:
        """describe, once the level ``want`` shows (answers come from any node, which may lag)."""
        deadline = time.monotonic() + 60
        while True:
            got = self.tool(feature_command, "describe")
            parsed = parse_describe(got.stdout) if got.returncode == 0 else {}
            level = parsed.get(want[0], {}).get("FinalizedVersionLevel") if want and parsed else None
            if parsed and (want is None or level in (str(want[1]), _mv_name(want))):
                return got.stdout
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name}: describe never showed {want}:\n{got.stdout}\n{got.stderr[-3000:]}")
            time.sleep(0.5)

    def run(self, feature_command: str) -> None:
        self.outputs.append((0, self.describe_when(feature_command, None)))
        for args, sets in STEPS:
            got = self.tool(feature_command, *args)
            self.outputs.append((got.returncode, got.stdout))
            self.outputs.append((0, self.describe_when(feature_command, sets if got.returncode == 0 else None)))


def _mv_name(want: tuple[str, int]) -> str | None:
    from kraftkit.features.registry import registry

    return registry().by_level(want[1]).name if want[0] == "metadata.version" else None


def controller_properties(node_id: int, port: int, voters: str, log_dir: Path) -> str:
    return "\n".join([
        "process.roles=controller", f"node.id={node_id}", f"controller.quorum.voters={voters}",
        f"listeners=CONTROLLER://127.0.0.1:{port}", "controller.listener.names=CONTROLLER",
        f"log.dirs={log_dir}", "",
    ])


def test_kafka_features_tool_sees_the_same_quorum_in_kafka_and_in_kraftkit(kafka_jars, tmp_path):
    jars.ensure_kafka(VERSION)
    feature_command = tools.find_class(VERSION, "org.apache.kafka.tools.FeatureCommand")
    java = jars.require_java()

    # kraftkit: three controllers from server.properties files formatted by Kafka's kafka-storage
    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    procs: list[KraftkitProcess] = []
    try:
        for i, port in ports.items():
            props = tmp_path / f"k{i}.properties"
            props.write_text(controller_properties(i, port, voters, tmp_path / f"k{i}"))
            subprocess.run([java, "-Xmx256m", "-cp", jars.classpath(VERSION), "kafka.tools.StorageTool", "format",
                            "--cluster-id", cid, "--config", str(props), "--release-version", RELEASE],
                           check=True, capture_output=True, timeout=120)
        for i in ports:
            procs.append(KraftkitProcess(["controller", "run"], ["--config", str(tmp_path / f"k{i}.properties")],
                                         tmp_path / f"k{i}.log"))
        ours = Cluster("kraftkit", ",".join(f"127.0.0.1:{p}" for p in ports.values()),
                       tmp_path / "k1" / "__cluster_metadata-0")
        ours.run(feature_command)
    finally:
        codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0], "\n".join(p.log_tail() for p in procs)

    with KafkaQuorum(tmp_path / "kafka", VERSION, broker=False, release_version=RELEASE) as q:
        theirs = Cluster("Kafka", q.controller_bootstrap, q.metadata_log_dir(1))
        theirs.run(feature_command)

    for step, ((code_k, out_k), (code_o, out_o)) in enumerate(zip(theirs.outputs, ours.outputs, strict=True)):
        assert (code_o, normalized(out_o)) == (code_k, normalized(out_k)), f"step {step}:\n{out_k}\n---\n{out_o}"
    # the same feature changes committed, in the same order (the refused ones nowhere)
    assert feature_records(ours.log_dir) == feature_records(theirs.log_dir)
