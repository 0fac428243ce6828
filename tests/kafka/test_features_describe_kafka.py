"""``kraftkit features describe --bootstrap-controller`` against a real Kafka 4.4.0 controller
quorum agrees with Kafka's own ``FeatureCommand --bootstrap-controller ... describe`` on every
feature's finalized level and supported range, and finds all three controllers through
DescribeCluster from one bootstrap address."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from kraftkit.features.registry import registry
from tests.harness import jars, tools
from tests.harness.quorum import KafkaQuorum

from .test_controller_kafka import parse_describe

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]


def level_of(name: str, text: str) -> int:
    """A level as FeatureCommand prints it: metadata.version by name (4.4-IV0), the rest as numbers."""
    return registry().metadata_version(text).level if name == "metadata.version" else int(text)


def test_describe_live_agrees_with_kafkas_feature_command(kafka_jars, tmp_path):
    version = jars.KAFKA_NEWEST
    jars.ensure_kafka(version)
    feature_command = tools.find_class(version, "org.apache.kafka.tools.FeatureCommand")
    with KafkaQuorum(tmp_path / "kafka", version, broker=False) as q:
        first = q.controller_bootstrap.split(",")[0]
        deadline = time.monotonic() + 120
        while True:  # until every controller has registered (DescribeCluster names it) and answered
            ours = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "features", "describe",
                                   "--bootstrap-controller", first, "--json"], capture_output=True, text=True,
                                  timeout=120, env={**os.environ, "PYTHONWARNINGS": "error"})
            got = json.loads(ours.stdout) if ours.returncode == 0 else None
            if got and len(got["nodes"]) == 3 and all(n["error"] is None for n in got["nodes"]):
                break
            if time.monotonic() > deadline:
                pytest.fail(f"exit {ours.returncode}\n{ours.stdout}\n{ours.stderr}\n{q.log_tails()}")
            time.sleep(1)
        theirs = tools.run_tool(version, feature_command, ["--bootstrap-controller", q.controller_bootstrap,
                                                           "describe"], timeout=120)
    kafka = parse_describe(theirs.stdout)
    assert "metadata.version" in kafka and len(kafka) >= 5, theirs.stdout
    assert sorted(n["id"] for n in got["nodes"]) == [1, 2, 3]
    assert sorted(n["address"] for n in got["nodes"]) == sorted(q.controller_bootstrap.split(","))
    for name, row in kafka.items():
        # Kafka lists an unfinalized feature at level 0; kraftkit leaves it out of "finalized"
        assert got["finalized"].get(name, 0) == level_of(name, row["FinalizedVersionLevel"]), (name, row, got)
        want = [level_of(name, row["SupportedMinVersion"]), level_of(name, row["SupportedMaxVersion"])]
        for n in got["nodes"]:  # the same software on every controller: each node's range is the tool's
            assert n["supported"][name] == want, (name, n, row)
        nxt = got["nextLevels"][name]
        assert nxt["level"] == got["finalized"].get(name, 0) + 1
        assert nxt["blockedBy"] == ([] if want[0] <= nxt["level"] <= want[1] else [1, 2, 3]), (name, nxt)
    # every feature a controller supports is one the tool shows, and the finalized levels are all there
    assert set(got["nodes"][0]["supported"]) == set(kafka)
    assert set(got["finalized"]) <= set(kafka)
    assert got["finalizedFeaturesEpoch"] >= 0
    assert got["metadataVersion"] == kafka["metadata.version"]["FinalizedVersionLevel"]
