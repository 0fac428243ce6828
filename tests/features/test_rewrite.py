"""Snapshot rewriting to another metadata.version: versions, losses, features, atomicity and
bad input. Oracles: the schema tables (which fields each version has, their defaults) read in
Python, and kraftkit's generic decoder on the output."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftkit._core import RewritePlan
from kraftkit._core import rewrite_snapshot as core_rewrite
from kraftkit.errors import KraftkitError
from kraftkit.features import registry
from kraftkit.features.rewrite import LossError, record_versions, rewrite_snapshot
from kraftkit.metadata import records as mr
from kraftkit.metadata.snapshot import SnapshotId, SnapshotReader, SnapshotWriter
from kraftkit.metadata.source import batches
from kraftkit._core import decode_metadata_batch
from tests.metadata.test_roundtrip_hypothesis import SCHEMA, _has, struct_strategy

MV43, MV39, MV35 = 30, 21, 11
DIR = uuid.UUID(int=0xABC)
TOPIC = uuid.UUID(int=0x1234)


def write_snapshot(directory: Path, recs: list[tuple[int, int, dict]], *, kraft_version: int = 0) -> Path:
    with SnapshotWriter(directory, SnapshotId(100, 3), last_contained_log_timestamp=7, time_ms=7,
                        kraft_version=kraft_version) as w:
        w.append([mr.encode_metadata_record(k, v, d) for k, v, d in recs])
    return w.final_path


def read_records(path: Path) -> list[tuple[int, int, dict]]:
    out = []
    for b in batches(path):
        for _off, key, ver, data in decode_metadata_batch(b):
            if key is not None:
                out.append((key, ver, data))
    return out


def rich_43() -> list[tuple[int, int, dict]]:
    reg = registry()
    feats = [(12, 0, {"Name": "metadata.version", "FeatureLevel": MV43})]
    for name in ("group.version", "transaction.version", "eligible.leader.replicas.version"):
        feats.append((12, 0, {"Name": name, "FeatureLevel": reg.feature(name).latest_production}))
    broker = {"BrokerId": 1, "IncarnationId": uuid.UUID(int=5), "BrokerEpoch": 9, "EndPoints": [],
              "Features": [], "Rack": None, "Fenced": False, "InControlledShutdown": False,
              "IsMigratingZkBroker": False, "LogDirs": [DIR], "CordonedLogDirs": []}
    return feats + [
        (21, 0, {"ZkMigrationState": 0}),
        (0, 4, broker),
        (27, 0, {"ControllerId": 1, "IncarnationId": uuid.UUID(int=6), "ZkMigrationReady": False,
                 "EndPoints": [], "Features": []}),
        (2, 0, {"Name": "orders", "TopicId": TOPIC}),
        (3, 2, {"PartitionId": 0, "TopicId": TOPIC, "Replicas": [1], "Isr": [1], "RemovingReplicas": [],
                "AddingReplicas": [], "Leader": 1, "LeaderEpoch": 0, "PartitionEpoch": 0,
                "Directories": [uuid.UUID(int=0)]}),
        (3, 2, {"PartitionId": 1, "TopicId": TOPIC, "Replicas": [1], "Isr": [1], "RemovingReplicas": [],
                "AddingReplicas": [], "Leader": 1, "LeaderEpoch": 0, "PartitionEpoch": 0, "Directories": [DIR]}),
        (4, 0, {"ResourceType": 2, "ResourceName": "orders", "Name": "retention.ms", "Value": "1000"}),
        (11, 0, {"Name": "alice", "Mechanism": 1, "Salt": b"s", "StoredKey": b"k", "ServerKey": b"v", "Iterations": 4096}),
    ]


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_downgrade_to_3_5_reports_exactly_what_is_lost(tmp_path):
    src = write_snapshot(tmp_path, rich_43())
    before = sha(src)
    out = tmp_path / "out"
    out.mkdir()
    rep = rewrite_snapshot(src, out, "3.5")
    assert sha(src) == before  # the input is untouched
    dst = out / src.name
    SnapshotReader(dst).check()
    lost = {(x["record"], x["field"]): (x["count"], x["samples"]) for x in rep.losses}
    assert lost == {
        ("RegisterBrokerRecord", "LogDirs"): (1, ["broker 1"]),
        ("RegisterControllerRecord", ""): (1, ["controller 1"]),
        ("PartitionRecord", "Directories"): (1, ["orders-1"]),  # partition 0 was only MIGRATING
    }
    assert rep.direction == "downgrade" and rep.source_metadata_version.level == MV43
    changes = {c["name"]: (c["from"], c["to"]) for c in rep.feature_changes}
    assert changes["metadata.version"] == (MV43, MV35)
    assert all(to == 0 for name, (_, to) in changes.items() if name != "metadata.version")
    recs = read_records(dst)
    allowed = record_versions(registry().by_level(MV35))
    for key, ver, _ in recs:
        assert allowed[key] is not None and ver <= allowed[key], (key, ver)
    kinds = [k for k, _, _ in recs]
    assert 27 not in kinds and kinds.count(12) == 1
    assert recs[0][2] == {"Name": "metadata.version", "FeatureLevel": MV35}
    # SCRAM survives at 3.5-IV2, and what was kept is unchanged
    assert (11, 0, rich_43()[-1][2]) in recs
    part = [d for k, _, d in recs if k == 3]
    assert part[1]["Replicas"] == [1] and "Directories" not in part[1]


def test_downgrade_to_3_9_keeps_everything(tmp_path):
    src = write_snapshot(tmp_path, rich_43())
    rep = rewrite_snapshot(src, tmp_path / "x.checkpoint", "3.9", fail_on_loss=True)
    assert rep.losses == []
    recs = read_records(tmp_path / "x.checkpoint")
    assert [d for k, v, d in recs if k == 3][1]["Directories"] == [DIR]


def test_fail_on_loss_and_dry_run_write_nothing(tmp_path):
    src = write_snapshot(tmp_path, rich_43())
    dst = tmp_path / "out.checkpoint"
    with pytest.raises(LossError, match="RegisterControllerRecord") as ei:
        rewrite_snapshot(src, dst, "3.5", fail_on_loss=True)
    assert ei.value.report.lossy
    assert not dst.exists() and not list(tmp_path.glob("*.part"))
    rep = rewrite_snapshot(src, None, "3.5")
    assert rep.destination is None and rep.lossy
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]


def test_upgrade_is_lossless_and_keeps_records(tmp_path):
    recs = [r for r in rich_43() if r[0] in (2, 4)] + [(12, 0, {"Name": "metadata.version", "FeatureLevel": MV35})]
    src = write_snapshot(tmp_path, recs)
    rep = rewrite_snapshot(src, tmp_path / "up.checkpoint", "4.3")
    assert rep.direction == "upgrade" and not rep.losses
    out = read_records(tmp_path / "up.checkpoint")
    assert out[:-1] == recs[:-1]
    assert out[-1][2]["FeatureLevel"] == MV43


def test_onto_itself_and_corrupt_input(tmp_path):
    src = write_snapshot(tmp_path, rich_43())
    with pytest.raises(KraftkitError, match="onto itself"):
        rewrite_snapshot(src, src, "3.9")
    bad = tmp_path / "bad.checkpoint"
    data = bytearray(src.read_bytes())
    data[200] ^= 0x40
    bad.write_bytes(bytes(data))
    with pytest.raises(KraftkitError) as ei:
        rewrite_snapshot(bad, tmp_path / "o.checkpoint", "3.9")
    assert str(bad) in str(ei.value) and ei.value.position is not None
    assert not (tmp_path / "o.checkpoint").exists() and not list(tmp_path.glob("*.part"))
    with pytest.raises(KraftkitError):
        rewrite_snapshot(src, None, "2.8")


MULTI = [m for m in SCHEMA["metadata"] if m["valid_versions"][1] > m["valid_versions"][0]]


@pytest.mark.parametrize("m", MULTI, ids=[m["name"] for m in MULTI])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_lower_version_matches_the_schema_oracle(tmp_path_factory, m, data):
    lo, hi = m["valid_versions"]
    v = data.draw(st.integers(lo + 1, hi), label="from")
    to = data.draw(st.integers(lo, v - 1), label="to")
    d = data.draw(struct_strategy(m["fields"], v, flexible=True))
    d.pop(mr.UNKNOWN_TAGS, None)
    directory = tmp_path_factory.mktemp("h")
    src = write_snapshot(directory, [(m["api_key"], v, d)])
    dst = directory / "out.checkpoint"
    rep = core_rewrite(str(src), str(dst), RewritePlan({m["api_key"]: to}, {}))
    ((key, ver, back),) = read_records(dst)
    assert (key, ver) == (m["api_key"], to)
    expect_lost = []
    expect = {}
    for f in m["fields"]:
        if not _has(f["versions"], v):
            continue
        if _has(f["versions"], to):
            expect[f["name"]] = d[f["name"]]
        elif d[f["name"]] != f["default"]:
            expect_lost.append(f["name"])
    assert back == expect
    assert sorted(x["field"] for x in rep["losses"]) == sorted(expect_lost)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_flipped_or_truncated_bytes_give_precise_errors_never_crashes(tmp_path_factory, data):
    directory = tmp_path_factory.mktemp("fuzz")
    src = write_snapshot(directory, rich_43())
    original = src.read_bytes()
    raw = bytearray(original)
    if data.draw(st.booleans(), label="truncate"):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1), label="cut")]
    else:
        for _ in range(data.draw(st.integers(1, 4), label="flips")):
            raw[data.draw(st.integers(0, len(raw) - 1))] ^= 1 << data.draw(st.integers(0, 7))
    (directory / "in").mkdir()
    bad = directory / "in" / src.name  # named as a snapshot: its epoch is checked too
    bad.write_bytes(bytes(raw))
    (directory / "out").mkdir()
    dst = directory / "out" / src.name
    try:
        rewrite_snapshot(bad, dst, "3.5")
    except KraftkitError as e:
        assert str(bad) in str(e)
        assert not dst.exists() and not list((directory / "out").iterdir())
    else:
        # CRCs cover all but the base offset and the length, which are checked too: no flip
        # goes unnoticed (flips that cancel out leave the input intact)
        assert bytes(raw) == original, "corrupt input rewritten without an error"


def test_a_rewrite_plan_refuses_what_it_cannot_mean() -> None:
    with pytest.raises(ValueError, match='unknown semantic default rule "zeros"'):
        RewritePlan({}, {}, semantic_defaults=[("PartitionRecord", "Directories", "zeros")])
    with pytest.raises(ValueError, match="api keys are non-negative"):
        RewritePlan({-1: 0}, {})
    assert "2 features" in repr(RewritePlan({3: 0}, {"a": {1: 0}, "b": {}}))


def test_cidr_acls_are_lost_below_the_level_that_accepts_them(tmp_path):
    """Kafka accepts an ACL host holding '/' (a CIDR range) from the metadata.version whose
    ``isCidrAclSupported`` holds (4.4-IV1, read from the jars); an older release compares hosts
    literally, so a rewrite below that level drops such ACLs and reports them lost, and keeps
    them at or above it."""
    reg = registry()
    cidr_from = min(m.level for m in reg.metadata_versions if m.supported("cidr_acl"))

    def acl(n: int, host: str) -> tuple[int, int, dict]:
        return (18, 0, {"Id": uuid.UUID(int=n), "ResourceType": 2, "ResourceName": "orders", "PatternType": 3,
                        "Principal": "User:eve", "Host": host, "Operation": 3, "PermissionType": 1})

    newest = reg.latest_production.level
    src = write_snapshot(tmp_path, [(12, 0, {"Name": "metadata.version", "FeatureLevel": newest}),
                                    acl(1, "10.0.0.0/8"), acl(2, "10.1.2.3"), acl(3, "*")])
    for level in (cidr_from, cidr_from - 1):
        (tmp_path / f"out-{level}").mkdir()
        rep = rewrite_snapshot(src, tmp_path / f"out-{level}", reg.by_level(level))
        hosts = [d["Host"] for k, _, d in read_records(tmp_path / f"out-{level}" / src.name) if k == 18]
        if level >= cidr_from:
            assert hosts == ["10.0.0.0/8", "10.1.2.3", "*"] and rep.losses == []
        else:
            assert hosts == ["10.1.2.3", "*"]
            assert rep.losses == [{"record": "AccessControlEntryRecord", "field": "Host (CIDR range)", "count": 1,
                                   "samples": ["User:eve from 10.0.0.0/8 on orders"]}]
            assert "LOST AccessControlEntryRecord.Host (CIDR range): 1" in rep.text()
