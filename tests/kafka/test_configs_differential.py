"""Differential: one sequence of Kafka's own ``kafka-configs.sh --bootstrap-controller`` commands on
BROKER configs (KIP-919) against a real Kafka three-controller quorum and against three ``kraftkit
controller run`` processes, both formatted by Kafka's own ``kafka-storage format`` (metadata.version
4.4, so eligible leader replicas are on) from server.properties files. The tool's exit codes, its
output and the exception it reports must be the same (ports normalized), and so must the
ConfigRecords each quorum committed, in order. ``--describe --all`` (every config of a node, with
its static configuration: both are given the same server.properties keys) must be the same too, but
for the log directories' paths."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import CONFIG
from kraftkit.metadata.source import batches
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.node import free_port, random_cluster_id
from tests.harness.quorum import KafkaQuorum

from .test_features_differential import controller_properties

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

VERSION = jars.KAFKA_NEWEST
RELEASE = "4.4"
BROKERS = ["--entity-type", "brokers"]
STEPS: list[list[str]] = [
    ["--describe", *BROKERS, "--entity-name", "1"],
    # a per-broker dynamic config, then the cluster-wide default of it and of another
    ["--alter", *BROKERS, "--entity-name", "1", "--add-config", "log.cleaner.threads=2"],
    ["--describe", *BROKERS, "--entity-name", "1"],
    ["--alter", *BROKERS, "--entity-default", "--add-config",
     "log.cleaner.threads=3,log.cleaner.io.max.bytes.per.second=1000.5,compression.type=lz4"],
    ["--describe", *BROKERS, "--entity-default"],
    ["--describe", *BROKERS, "--entity-name", "1"],
    ["--describe", *BROKERS, "--entity-name", "2"],
    # a deletion; a name Kafka does not know; a value of the wrong type; a static-only key: a
    # controller addressed directly takes them all (the describes then show what a node applies)
    ["--alter", *BROKERS, "--entity-name", "1", "--delete-config", "log.cleaner.threads"],
    ["--alter", *BROKERS, "--entity-name", "1", "--add-config", "no.such.config=1"],
    ["--alter", *BROKERS, "--entity-name", "2", "--add-config", "log.cleaner.threads=abc"],
    ["--alter", *BROKERS, "--entity-name", "1", "--add-config", "log.dirs=/x"],
    ["--alter", *BROKERS, "--entity-default", "--add-config", "ssl.keystore.type=PKCS12"],
    # refused: a broker-level min.insync.replicas while ELR is enabled; a node that does not exist
    ["--alter", *BROKERS, "--entity-name", "1", "--add-config", "min.insync.replicas=2"],
    ["--alter", *BROKERS, "--entity-default", "--delete-config", "min.insync.replicas"],
    ["--alter", *BROKERS, "--entity-name", "7", "--add-config", "log.cleaner.threads=2"],
    ["--describe", *BROKERS, "--entity-name", "1"],
    ["--describe", *BROKERS, "--entity-name", "2"],
    ["--describe", *BROKERS, "--entity-default"],
    ["--describe", *BROKERS],
]
#: what the harness's Kafka controllers have in their server.properties besides the keys both have
KAFKA_STATIC = "listener.security.protocol.map=CONTROLLER:PLAINTEXT\nnum.io.threads=2\nnum.network.threads=2\n"


def normalized(text: str) -> str:
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:P", text)


def exception_line(stderr: str) -> str:
    """The first line naming an exception (the rest of a stack trace is the JVM's)."""
    return next((normalized(line) for line in stderr.splitlines() if "Exception" in line), "")


def config_records(log_dir: Path) -> list[dict]:
    out = []
    for seg in sorted(log_dir.glob("*.log")):
        for batch in batches(seg):
            if batch.is_control:
                continue
            for r in batch.records():
                key, _v, data = decode_metadata_record(r.value)
                if key == CONFIG:
                    out.append(data)
    return out


def run_steps(config_command: str, bootstrap: str) -> tuple[list[tuple[int, str, str]], str]:
    deadline = time.monotonic() + 60
    while True:  # the quorum has elected a leader and bootstrapped (ours: DescribeCluster says so)
        got = tools.run_tool(VERSION, config_command, ["--bootstrap-controller", bootstrap, "--describe", *BROKERS],
                             check=False, timeout=120)
        if got.returncode == 0:
            break
        assert time.monotonic() < deadline, f"the quorum at {bootstrap} never answered:\n{got.stderr[-3000:]}"
        time.sleep(0.5)
    outputs = []
    for args in STEPS:
        got = tools.run_tool(VERSION, config_command, ["--bootstrap-controller", bootstrap, *args],
                             check=False, timeout=120)
        outputs.append((got.returncode, normalized(got.stdout), exception_line(got.stderr)))
    got = tools.run_tool(VERSION, config_command, ["--bootstrap-controller", bootstrap, "--describe", *BROKERS,
                                                   "--entity-name", "1", "--all"], check=False, timeout=120)
    assert got.returncode == 0, got.stderr[-3000:]
    return outputs, re.sub(r"log\.dirs=[^ ,}]+", "log.dirs=DIR", normalized(got.stdout))


def test_kafka_configs_tool_sees_the_same_broker_configs_in_kafka_and_in_kraftkit(kafka_jars, tmp_path):
    jars.ensure_kafka(VERSION)
    config_command = tools.find_class(VERSION, "org.apache.kafka.tools.ConfigCommand")
    java = jars.require_java()

    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    procs: list[KraftkitProcess] = []
    try:
        for i, port in ports.items():
            props = tmp_path / f"k{i}.properties"
            props.write_text(controller_properties(i, port, voters, tmp_path / f"k{i}") + KAFKA_STATIC)
            subprocess.run([java, "-Xmx256m", "-cp", jars.classpath(VERSION), "kafka.tools.StorageTool", "format",
                            "--cluster-id", cid, "--config", str(props), "--release-version", RELEASE],
                           check=True, capture_output=True, timeout=120)
        for i in ports:
            procs.append(KraftkitProcess(["controller", "run"], ["--config", str(tmp_path / f"k{i}.properties")],
                                         tmp_path / f"k{i}.log"))
        ours, ours_all = run_steps(config_command, ",".join(f"127.0.0.1:{p}" for p in ports.values()))
    finally:
        codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0], "\n".join(p.log_tail() for p in procs)

    with KafkaQuorum(tmp_path / "kafka", VERSION, broker=False, release_version=RELEASE) as q:
        theirs, theirs_all = run_steps(config_command, q.controller_bootstrap)
        kafka_log = q.metadata_log_dir(1)

    differ = [f"step {i} {STEPS[i]}:\nKafka:    {k}\nkraftkit: {o}"
              for i, (k, o) in enumerate(zip(theirs, ours, strict=True)) if k != o]
    assert not differ, "\n".join(differ)
    assert ours_all.count("\n") > 300 and "DYNAMIC_DEFAULT_BROKER_CONFIG:compression.type=lz4" in ours_all
    assert ours_all == theirs_all
    # the same ConfigRecords committed, in the same order (the bootstrap's min.insync.replicas first)
    assert config_records(tmp_path / "k1" / "__cluster_metadata-0") == config_records(kafka_log)
