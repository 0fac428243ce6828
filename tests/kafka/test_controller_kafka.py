"""Kafka's own ``kafka-features.sh`` (``org.apache.kafka.tools.FeatureCommand``) against three
``kraftkit controller run`` processes on loopback, formatted by ``kraftkit storage format``:
``describe`` shows the bootstrap levels the first leader committed, ``upgrade --feature
group.version=1`` succeeds and shows in the next ``describe`` and, once, in the committed log as
Kafka's own ``kafka-dump-log --cluster-metadata-decoder`` reads it; refused requests (an unknown
feature, a level no node supports) give the tool Kafka's error with the reason. Kafka 4.4.0's tool
and 4.3.1's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraftkit.errors import KraftkitError
from kraftkit.features.registry import registry
from kraftkit.features.storage.format import BOOTSTRAP_FILE, BOOTSTRAP_SNAPSHOT, CLUSTER_METADATA_DIR
from kraftkit.features.storage.info import read_bootstrap
from kraftkit.raft.admin import QuorumAdmin
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.node import free_port, random_cluster_id

pytestmark = pytest.mark.kafka

METADATA = CLUSTER_METADATA_DIR


class ControllerProcess(KraftkitProcess):
    """``kraftkit controller run ARGS`` as a child process (see ``tests._procs``)."""

    def __init__(self, args: list[str], log_path: Path, *, timeout: float = 60.0) -> None:
        super().__init__(["controller", "run"], args, log_path, timeout=timeout)


def parse_describe(text: str) -> dict[str, dict[str, str]]:
    """FeatureCommand describe's lines: feature -> {SupportedMinVersion, ..., Epoch}."""
    out = {}
    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+):\s+(\S+)", line))
        if "Feature" in fields:
            out[fields.pop("Feature")] = fields
    return out


def kafka_dump_records(version: str, segment: Path) -> list[tuple[int, dict]]:
    """(offset, {type, version, data}) of the metadata records Kafka's own dump-log decodes in a segment."""
    proc = tools.dump_log(version, [segment], deep=True, print_data=True, cluster_metadata=True, timeout=120)
    out = []
    for line in proc.stdout.splitlines():
        m = re.search(r"offset: (\d+) .*payload: (\{.*\})\s*$", line)
        if m:
            out.append((int(m.group(1)), json.loads(m.group(2))))
    return out


# the tool's release formats as its own kafka-storage would: 4.4 in the bootstrap snapshot, 4.3 in
# bootstrap.checkpoint (a 4.3 tool cannot name 4.4's levels)
@pytest.mark.parametrize("tool_version,release,bootstrap_file", [
    (jars.KAFKA_NEWEST, "4.4", f"{METADATA}/{BOOTSTRAP_SNAPSHOT}"),
    (jars.KAFKA_4, "4.3", BOOTSTRAP_FILE),
])
def test_kafka_features_tool_describes_and_upgrades_a_kraftkit_controller_quorum(kafka_jars, tmp_path, tool_version,
                                                                                 release, bootstrap_file):
    jars.ensure_kafka(tool_version)
    feature_command = tools.find_class(tool_version, "org.apache.kafka.tools.FeatureCommand")
    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    dirs = {i: tmp_path / f"c{i}" for i in ports}
    for i, d in dirs.items():
        subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "storage", "format", "-t", cid, "--node-id",
                        str(i), "-d", str(d), "--release-version", release, "--feature", "group.version=0",
                        "--no-initial-controllers"], check=True, capture_output=True, timeout=60)
    boot = read_bootstrap(dirs[1] / bootstrap_file)
    procs: list[ControllerProcess] = []

    def tool(*args: str) -> subprocess.CompletedProcess:
        return tools.run_tool(tool_version, feature_command, ["--bootstrap-controller", bootstrap, *args],
                              check=False, timeout=120)

    def quorum_led() -> bool:
        """Whether the quorum has a leader whose epoch has committed something (kraftkit's client)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with QuorumAdmin(bootstrap.split(",")[0], timeout=5) as admin:
                    info = admin.describe()
                if info["leader_id"] >= 0 and info["high_watermark"] > 0:
                    return True
            except (KraftkitError, OSError):
                pass
            time.sleep(0.2)
        return False

    def describe_until(what: str, ok) -> dict[str, dict[str, str]]:
        deadline = time.monotonic() + 60
        while True:
            got = tool("describe")
            parsed = parse_describe(got.stdout) if got.returncode == 0 else {}
            if parsed and ok(parsed):
                return parsed
            if time.monotonic() > deadline:
                tails = "\n".join(p.log_tail() for p in procs)
                pytest.fail(f"describe never showed {what}: exit {got.returncode}\n{got.stdout}\n{got.stderr}\n{tails}")
            time.sleep(0.5)

    try:
        for i, d in dirs.items():
            procs.append(ControllerProcess(["--node-id", str(i), "--voters", voters, "--log-dir", str(d)],
                                           tmp_path / f"c{i}.log"))
        for p, d in zip(procs, dirs.values(), strict=True):
            assert p.info["process"] == "controller" and p.info["bootstrap"] == str(d / bootstrap_file)
            assert p.info["metadata_version"] == boot["metadata_version"]["level"]

        assert quorum_led(), "\n".join(p.log_tail() for p in procs)
        mv_name = registry().by_level(boot["metadata_version"]["level"]).name
        first = describe_until("the bootstrap levels", lambda d: d.get("metadata.version", {}).get(
            "FinalizedVersionLevel") == mv_name)
        for name, level in boot["features"].items():
            assert first[name]["FinalizedVersionLevel"] == str(level), (name, first)
        assert first["group.version"]["FinalizedVersionLevel"] == "0"
        assert first["group.version"]["SupportedMaxVersion"] == "1"

        up = tool("upgrade", "--feature", "group.version=1")
        assert up.returncode == 0, up.stdout + up.stderr
        assert "group.version was upgraded to 1." in up.stdout
        after = describe_until("group.version=1", lambda d: d["group.version"]["FinalizedVersionLevel"] == "1")
        epoch = int(after["group.version"]["Epoch"])

        unknown = tool("upgrade", "--feature", "no.such.feature=1")
        assert unknown.returncode != 0
        assert "Could not upgrade no.such.feature to 1." in unknown.stdout
        assert "Invalid update version 1 for feature no.such.feature." in unknown.stdout
        assert "does not support it" in unknown.stdout
        too_high = tool("upgrade", "--feature", "group.version=5")
        assert too_high.returncode != 0
        assert "Invalid update version 5 for feature group.version." in too_high.stdout
        assert "is not supported by controller" in too_high.stdout

        off = tool("disable", "--feature", "group.version")
        assert off.returncode == 0, off.stdout + off.stderr
        disabled = describe_until("group.version=0", lambda d: d["group.version"]["FinalizedVersionLevel"] == "0")
        disabled_epoch = int(disabled["group.version"]["Epoch"])
    finally:
        codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0], "\n".join(p.log_tail() for p in procs)

    # the committed log, read by Kafka's own dump-log: the bootstrap once, the upgrade and the
    # disabling once each, one registration per controller (nothing of the refused requests), and the epochs describe showed are
    # the offsets of their records
    # The bootstrap is framed as Kafka 4.4's activation frames it: a metadata transaction, and the
    # cluster-wide min.insync.replicas when ELR is enabled
    n_boot = 1 + len(boot["features"])
    elr = boot["features"].get("eligible.leader.replicas.version", 0) > 0
    activation = (["BEGIN_TRANSACTION_RECORD"] + ["FEATURE_LEVEL_RECORD"] * n_boot
                  + ["CONFIG_RECORD"] * elr + ["END_TRANSACTION_RECORD"])
    for d in dirs.values():
        # (every segment: the log rolls a segment after each batch that sets metadata.version)
        everything = [rec for seg in sorted((d / METADATA).glob("*.log"))
                      for rec in kafka_dump_records(jars.KAFKA_NEWEST, seg)]
        # (each controller also registered itself once: RegisterControllerRecord, KIP-919)
        assert [r["type"] for _o, r in everything if r["type"] != "REGISTER_CONTROLLER_RECORD"] == \
            activation + ["FEATURE_LEVEL_RECORD"] * 2
        assert sorted(r["data"]["controllerId"] for _o, r in everything
                      if r["type"] == "REGISTER_CONTROLLER_RECORD") == [1, 2, 3]
        recs = [(o, r["data"]["name"], r["data"]["featureLevel"]) for o, r in everything
                if r["type"] == "FEATURE_LEVEL_RECORD"]
        assert [(n, lv) for _o, n, lv in recs] == [("metadata.version", boot["metadata_version"]["level"]),
                                                   *boot["features"].items(), ("group.version", 1),
                                                   ("group.version", 0)]
        assert [o for o, _n, _l in recs[-2:]] == [epoch, disabled_epoch]
