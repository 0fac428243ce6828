"""The acid test of metadata.version downgrades: real Kafka 4.x metadata, rewritten by kraftkit
to the metadata.version of older releases, boots those older real Kafka releases, which then
serve what the loss report says was kept."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kraftkit.features import registry
from kraftkit.features.rewrite import rewrite_snapshot
from kraftkit.metadata.image import load_snapshot, uuid_text
from kraftkit.metadata.snapshot import SnapshotReader, list_snapshots
from tests.harness import jars, metadata_scenario, tools
from tests.harness.node import free_port

pytestmark = pytest.mark.kafka

QUOTAS_CLIENT = Path(tools.__file__).resolve().parent / "java" / "ClientQuotas.java"


def _describe_topics(version: str, bootstrap: str) -> dict[str, dict]:
    out = tools.topic_command(version, bootstrap, ["--describe"])
    topics: dict[str, dict] = {}
    for line in out.splitlines():
        m = re.match(r"^Topic: (\S+)\s+TopicId: (\S+)\s+PartitionCount: (\d+).*Configs: ?(.*)$", line.strip())
        if m:
            cfg: dict[str, str] = {}
            last = None
            for part in m.group(4).split(","):
                if "=" in part:  # a value may hold commas: "cleanup.policy=compact,delete"
                    last, v = part.split("=", 1)
                    cfg[last] = v
                elif last is not None:
                    cfg[last] += "," + part
            topics[m.group(1)] = {"id": m.group(2), "partitions": int(m.group(3)), "configs": cfg}
    return topics


class OlderAdminNode(metadata_scenario.AdminNode):
    """The oracle's node configuration, minus what the older release refuses to start with
    (3.5 KRaft brokers exit on ``delegation.token.secret.key``: no delegation tokens before 3.6)."""

    def properties(self) -> dict[str, object]:
        props = super().properties()
        if tuple(map(int, self.version.split(".")[:2])) < (3, 6):
            props.pop("delegation.token.secret.key", None)
        return props


def _tool(version: str, classes: tuple[str, ...], args: list[str]) -> str:
    return tools.run_tool(version, tools.find_class(version, *classes), args, timeout=120).stdout


@pytest.mark.parametrize("source,release", [(jars.KAFKA_4, jars.KAFKA_3), (jars.KAFKA_4, jars.KAFKA_OLD),
                                            (jars.KAFKA_NEWEST, jars.KAFKA_3)])
def test_older_kafka_boots_from_a_rewritten_snapshot(kafka_jars, tmp_path, source, release):
    jars.ensure_kafka(release)
    data = metadata_scenario.build_metadata_oracle(tmp_path / "data", version=source)
    d = data.metadata_log_dir
    newest = [s for s in list_snapshots(d) if s.end_offset > 0][-1]
    src = tmp_path / newest.file_name
    shutil.copyfile(d / newest.file_name, src)
    before = load_snapshot(src)
    target = registry().metadata_version(".".join(release.split(".")[:2]))
    out = tmp_path / "rewritten"
    out.mkdir()
    rep = rewrite_snapshot(src, out, target)
    rewritten = out / src.name
    SnapshotReader(rewritten).check()
    after = load_snapshot(rewritten)
    assert after.metadata_version == target.level
    lost_records = {x["record"] for x in rep.losses if not x["field"]}

    # The older release takes over the same node: same directories (and directory ids), its
    # metadata log holding only the rewritten snapshot.
    for p in list(d.iterdir()):
        p.chmod(0o644)
        p.unlink()
    shutil.copyfile(rewritten, d / rewritten.name)
    # kafka-storage format left a bootstrap.checkpoint (the initial metadata.version) in every
    # log directory; the older release reads it at startup, so it is rewritten too
    for boot in [p / "bootstrap.checkpoint" for p in data.log_dirs]:
        if boot.exists():
            tmp = boot.with_name("bootstrap.rewritten")
            assert not rewrite_snapshot(boot, tmp, target).losses
            tmp.replace(boot)
    kraft_kept = after.voters is not None
    node = OlderAdminNode(data.node_dir, release, dynamic_quorum=kraft_kept, cluster_id=data.cluster_id)
    node.formatted = True
    node.broker_port = free_port()
    node.controller_port = after.voters["Voters"][0]["Endpoints"][0]["Port"] if kraft_kept else free_port()
    with node:
        topics = _describe_topics(release, node.bootstrap)
        features = _tool(release, ("org.apache.kafka.tools.FeatureCommand", "kafka.admin.FeatureCommand"),
                         ["--bootstrap-server", node.bootstrap, "describe"])
        acls = _tool(release, ("org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand"),
                     ["--bootstrap-server", node.bootstrap, "--list"])
        users = _tool(release, ("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"),
                      ["--bootstrap-server", node.bootstrap, "--describe", "--entity-type", "users"])
        quotas = tools.run_tool(release, QUOTAS_CLIENT, [node.bootstrap], timeout=120).stdout
        log_tail = node.log_tail(100)
    # the finalized metadata.version is the target
    mv_line = next(line for line in features.splitlines() if line.startswith("Feature: metadata.version"))
    assert re.search(rf"FinalizedVersionLevel:\s+{re.escape(target.name)}\b", mv_line), mv_line
    # every ACL and every SCRAM credential kept is served
    assert after.acls and after.scram and {"UserScramCredentialRecord", "AccessControlEntryRecord"}.isdisjoint(lost_records)
    for acl in after.acls.values():
        assert f"principal={acl['Principal']}, host={acl['Host']}" in acls, (acl, acls)
    # every client quota kept is served (the older release's own Admin client asks)
    assert after.client_quotas and "ClientQuotaRecord" not in lost_records
    served = {}
    for line in quotas.splitlines():
        ent, _, vals = line.partition("\t")
        key = tuple(sorted((t, None if n == "<default>" else n) for t, n in (x.split(":", 1) for x in ent.split(","))))
        served[key] = {k: float(v) for k, v in (x.split("=", 1) for x in vals.split(";"))}
    assert served == {tuple(sorted(k)): v for k, v in after.client_quotas.items()}, (served, after.client_quotas)
    for mech, user in after.scram:
        assert re.search(rf"user-principal '{re.escape(user)}' are .*SCRAM-SHA-{256 if mech == 1 else 512}=", users), (user, users)
    # every topic kept is served, with its id, partitions and configs
    for t in after.topics.values():
        got = topics.get(t.name)
        assert got is not None, (t.name, sorted(topics), log_tail)
        assert got["id"] == uuid_text(t.id)
        assert got["partitions"] == len(t.partitions)
        for k, v in after.configs.get((2, t.name), {}).items():
            assert got["configs"].get(k) == v, (t.name, k)
    assert {t.name for t in after.topics.values()} == {t.name for t in before.topics.values()}
    assert "TopicRecord" not in lost_records and "PartitionRecord" not in lost_records


@pytest.mark.parametrize("source,release", [(jars.KAFKA_4, jars.KAFKA_3), (jars.KAFKA_4, jars.KAFKA_OLD),
                                            (jars.KAFKA_NEWEST, jars.KAFKA_3)])
def test_operator_downgrades_a_stopped_node_with_one_command(kafka_jars, tmp_path, source, release):
    """`kraftkit features downgrade DIR --release-version V --unsafe` on the stopped 4.x node
    writes the downgrade's effect as a snapshot at the end of its log (KIP-778's log-level
    downgrade); the older release then starts on the very same directories."""
    import json
    import subprocess
    import sys

    jars.ensure_kafka(release)
    data = metadata_scenario.build_metadata_oracle(tmp_path / "data", version=source)
    line = ".".join(release.split(".")[:2])
    cmd = [sys.executable, "-m", "kraftkit.cli.main", "features", "downgrade", str(data.metadata_dir),
           "--release-version", line, "--unsafe", "--backup", str(tmp_path / "backup"), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    target = registry().metadata_version(line)
    assert out["report"]["to"] == target.name
    snap = Path(out["snapshot"])
    after = load_snapshot(snap)
    assert after.metadata_version == target.level
    kraft_kept = after.voters is not None
    node = OlderAdminNode(data.node_dir, release, dynamic_quorum=kraft_kept, cluster_id=data.cluster_id)
    node.formatted = True
    node.broker_port = free_port()
    node.controller_port = after.voters["Voters"][0]["Endpoints"][0]["Port"] if kraft_kept else free_port()
    # the log below the snapshot went to the backup, and with the voter set (below 3.9) the
    # quorum-state of the newer release too; static voters take over then
    left = sorted(p.name for p in data.metadata_log_dir.iterdir())
    assert left == sorted([snap.name, "partition.metadata"] + (["quorum-state"] if kraft_kept else [])), left
    assert any(n.endswith(".log") for n in out["moved"])
    with node:
        topics = _describe_topics(release, node.bootstrap)
        features = _tool(release, ("org.apache.kafka.tools.FeatureCommand", "kafka.admin.FeatureCommand"),
                         ["--bootstrap-server", node.bootstrap, "describe"])
    assert {t.name for t in after.topics.values()} <= set(topics)
    mv_line = next(x for x in features.splitlines() if x.startswith("Feature: metadata.version"))
    assert re.search(rf"FinalizedVersionLevel:\s+{re.escape(target.name)}\b", mv_line), mv_line


def test_real_kafka_refuses_the_unsafe_downgrade_kraftkit_does(kafka_jars, tmp_path):
    """Kafka 4.x's UpdateFeatures refuses any metadata.version downgrade across a metadata
    change (KAFKA-13896 was never implemented), with or without --unsafe."""
    from tests.harness.node import KafkaNode

    cls = tools.find_class(jars.KAFKA_4, "org.apache.kafka.tools.FeatureCommand")
    with KafkaNode(tmp_path / "node", jars.KAFKA_4) as node:
        unsafe = tools.run_tool(jars.KAFKA_4, cls, ["--bootstrap-server", node.bootstrap, "downgrade",
                                                    "--metadata", "3.5", "--unsafe"], check=False, timeout=120)
        safe = tools.run_tool(jars.KAFKA_4, cls, ["--bootstrap-server", node.bootstrap, "downgrade",
                                                  "--metadata", "3.5"], check=False, timeout=120)
        after = tools.run_tool(jars.KAFKA_4, cls, ["--bootstrap-server", node.bootstrap, "describe"], timeout=120)
    assert unsafe.returncode != 0
    assert "Unsafe metadata downgrade is not supported in this version" in unsafe.stdout + unsafe.stderr
    assert safe.returncode != 0
    assert "Refusing to perform the requested downgrade because it might delete metadata" in safe.stdout + safe.stderr
    # the node's own release's latest production level (what it formatted at and still finalizes)
    latest = registry().by_level(registry().release(jars.KAFKA_4).latest_production).name
    assert re.search(rf"Feature: metadata.version.*FinalizedVersionLevel:\s+{re.escape(latest)}\b", after.stdout)
