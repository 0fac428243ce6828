"""A real Kafka node opens the metadata log a kraftkit controller quorum wrote: three kraftkit
controllers bootstrap, take a feature upgrade and register (themselves and a broker); node 1's
``__cluster_metadata-0`` is then copied into a real Kafka 4.4.0 node formatted with the same
cluster id, which boots from it and reports the same finalized features.

And the live lossy downgrade: the quorum, at 3.9, takes an unsafe metadata.version downgrade to
3.5-IV2 (which Kafka itself refuses); node 1's rewritten snapshot and the log after it boot a real
Kafka 3.5.2 node (formatted at 3.4 by its own tool), which reports that level."""

from __future__ import annotations

import asyncio
import re
import shutil

import pytest

from kraftkit.features.registry import registry
from kraftkit.protocol.messages import ApiKey, Errors
from tests.controller._nodes import active_of, call_port, controller, format_dirs, running
from tests.controller.test_registration import registration
from tests.harness import jars, tools
from tests.harness.node import KafkaNode
from tests.raft._cluster import CLUSTER_ID, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

VERSION = jars.KAFKA_NEWEST


def test_a_real_kafka_node_boots_from_a_kraftkit_controller_quorums_log(kafka_jars, tmp_path):
    voters, dirs = format_dirs(tmp_path / "kraftkit", release_version="4.3", features={"group.version": 0})
    nodes = [controller(voters, d, i) for i, d in zip(voters, dirs, strict=True)]

    async def main() -> dict[str, int]:
        loop = asyncio.get_running_loop()
        async with running(nodes):
            leader = await wait_for(lambda: active_of(nodes), what="an active controller")
            await wait_for(lambda: len(leader.controller.image.controllers) == 3, what="controller registrations")
            port = leader.address[1]
            up = await loop.run_in_executor(None, call_port, port, ApiKey.UPDATE_FEATURES, {
                "timeoutMs": 10000, "ValidateOnly": False,
                "FeatureUpdates": [{"Feature": "group.version", "MaxVersionLevel": 1, "UpgradeType": 1}]})
            assert up["ErrorCode"] == Errors.NONE, up
            reg = await loop.run_in_executor(None, call_port, port, ApiKey.BROKER_REGISTRATION, registration(100))
            assert reg["ErrorCode"] == Errors.NONE, reg
            await wait_for(lambda: all(100 in n.controller.image.brokers for n in nodes), what="the registration")
            return {k: v for k, v in nodes[0].controller.image.finalized_features.items() if v}

    finalized = asyncio.run(main())
    assert finalized["group.version"] == 1

    # a node formatted by Kafka's own kafka-storage with the same cluster id (at another release,
    # so what it reports can only come from kraftkit's log), its metadata log then replaced by the
    # kraftkit controller's
    kafka = KafkaNode(tmp_path / "kafka", VERSION, cluster_id=CLUSTER_ID, release_version="3.9")
    for d in kafka.log_dirs:
        d.mkdir(parents=True)
    kafka._ensure_ports()
    kafka._write_config()
    kafka.format()
    target = kafka.metadata_log_dir
    for p in target.iterdir():
        p.unlink()
    for p in (dirs[0] / "__cluster_metadata-0").iterdir():
        if p.suffix in (".log", ".index", ".timeindex") or p.name == "leader-epoch-checkpoint":
            shutil.copyfile(p, target / p.name)
    with kafka:
        feature_command = tools.find_class(VERSION, "org.apache.kafka.tools.FeatureCommand")
        out = tools.run_tool(VERSION, feature_command, ["--bootstrap-server", kafka.bootstrap, "describe"],
                             timeout=120).stdout
    shown = {m.group(1): m.group(2) for m in re.finditer(r"Feature: (\S+).*?FinalizedVersionLevel: (\S+)", out)}
    assert shown["metadata.version"] == registry().by_level(finalized.pop("metadata.version")).name, out
    assert {k: int(v) for k, v in shown.items() if k != "metadata.version" and v != "0"} == finalized, out


def test_a_real_kafka_3_5_boots_from_a_quorum_downgraded_live_to_its_level(kafka_jars, tmp_path):
    old = jars.KAFKA_OLD
    jars.ensure_kafka(old)
    target = registry().metadata_version("3.5-IV2")
    voters, dirs = format_dirs(tmp_path / "kraftkit", release_version="3.9")
    nodes = [controller(voters, d, i) for i, d in zip(voters, dirs, strict=True)]

    async def main() -> str:
        loop = asyncio.get_running_loop()
        async with running(nodes):
            leader = await wait_for(lambda: active_of(nodes), what="an active controller")
            await wait_for(lambda: len(leader.controller.image.controllers) == 3, what="controller registrations")
            port = leader.address[1]
            reg = await loop.run_in_executor(None, call_port, port, ApiKey.BROKER_REGISTRATION, registration(100))
            assert reg["ErrorCode"] == Errors.NONE, reg
            # Kafka's own tool asks for it, as the README shows
            feature_command = tools.find_class(VERSION, "org.apache.kafka.tools.FeatureCommand")
            args = ["--bootstrap-controller", f"127.0.0.1:{port}", "downgrade", "--metadata", "3.5", "--unsafe"]
            proc = await loop.run_in_executor(None, lambda: tools.run_tool(VERSION, feature_command, args,
                                                                            timeout=120, check=False))
            await wait_for(lambda: all(n.controller.image.metadata_version == target.level
                                       and n.replica().log.snapshot() is not None for n in nodes),
                           what="the rewrite on every node")
            return proc

    proc = asyncio.run(main())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"metadata.version was downgraded to {target.level}." in proc.stdout, proc.stdout

    # formatted by Kafka 3.5.2's own kafka-storage at 3.4, so 3.5-IV2 can only come from kraftkit's log
    kafka = KafkaNode(tmp_path / "kafka", old, cluster_id=CLUSTER_ID, release_version="3.4")
    for d in kafka.log_dirs:
        d.mkdir(parents=True)
    kafka._ensure_ports()
    kafka._write_config()
    kafka.format()
    dest = kafka.metadata_log_dir
    dest.mkdir(exist_ok=True)  # (3.5's kafka-storage writes only meta.properties)
    for p in dest.iterdir():
        p.unlink()
    src = dirs[0] / "__cluster_metadata-0"
    copied = []
    for p in src.iterdir():
        if p.suffix in (".log", ".index", ".timeindex", ".checkpoint") or p.name == "leader-epoch-checkpoint":
            shutil.copyfile(p, dest / p.name)
            copied.append(p.name)
    assert any(n.endswith(".checkpoint") for n in copied), copied
    with kafka:
        features = tools.run_tool(old, tools.find_class(old, "org.apache.kafka.tools.FeatureCommand",
                                                        "kafka.admin.FeatureCommand"),
                                  ["--bootstrap-server", kafka.bootstrap, "describe"], timeout=120).stdout
        quorum = tools.run_tool(old, tools.find_class(old, "org.apache.kafka.tools.MetadataQuorumCommand",
                                                      "kafka.admin.MetadataQuorumCommand"),
                                ["--bootstrap-server", kafka.bootstrap, "describe", "--status"], timeout=120).stdout
    mv_line = next(x for x in features.splitlines() if x.startswith("Feature: metadata.version"))
    assert re.search(rf"FinalizedVersionLevel:\s+{re.escape(target.name)}\b", mv_line), features
    assert "ClusterId:" in quorum and CLUSTER_ID in quorum, quorum
