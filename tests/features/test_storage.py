"""kraftkit.features.storage and ``kraftkit storage``: feature levels at a release version,
the files a format writes, refusals, info, ids. (Real Kafka: tests/kafka/test_storage_kafka.py.)"""

from __future__ import annotations

import base64
import errno
import json
import os
import re
import resource
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftkit._core import decode_batches, decode_control_record, decode_metadata_record
from kraftkit.cli.main import main
from kraftkit.features import registry
from kraftkit.features import storage as S
from kraftkit.features.storage import (
    DynamicVoter,
    MetaProperties,
    StorageInputError,
    StorageStateError,
    format_storage,
    parse_properties,
    resolve_features,
)
from kraftkit.log.control import ControlType
from kraftkit.metadata.snapshot import SnapshotReader

CID = "MkU3OEVBNTcwNTJENDM2Qk"  # the example cluster id of Kafka's docs (not canonical base64: accepted)
PRODUCTION = ["eligible.leader.replicas.version", "group.version", "kraft.version", "share.version",
              "streams.version", "transaction.version"]


# ------------------------------------------------------------------ ids

def test_random_uuid_is_kafkas_uuid():
    seen = set()
    for _ in range(2000):
        u = S.random_uuid()
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", u) and not u.startswith("-")
        raw = S.parse_uuid(u)
        assert S.uuid_to_str(raw) == u
        assert uuid.UUID(bytes=raw).version == 4  # java.util.UUID.randomUUID
        seen.add(u)
    assert len(seen) == 2000


def test_random_uuid_redraws_reserved_and_dash(monkeypatch):
    dash = base64.urlsafe_b64decode("-" + "A" * 21 + "==")
    draws = iter([uuid.UUID(bytes=bytes(16)), uuid.UUID(int=1), uuid.UUID(bytes=dash), uuid.UUID(int=7 << 64)])
    monkeypatch.setattr(S.uuids._uuid, "uuid4", lambda: next(draws))
    assert S.random_uuid() == S.uuid_to_str((7 << 64).to_bytes(16, "big"))


def test_generate_directory_id_redraws(monkeypatch):
    good = bytes(range(1, 17))
    taken = bytes(range(2, 18))
    draws = iter([(5).to_bytes(16, "big"), (99).to_bytes(16, "big"),
                  base64.urlsafe_b64decode("-" + "B" * 21 + "=="), taken, good])
    monkeypatch.setattr(S.uuids.secrets, "token_bytes", lambda n: next(draws))
    assert S.generate_directory_id([S.uuid_to_str(taken)]) == S.uuid_to_str(good)
    assert S.directory_id_reserved((99).to_bytes(16, "big"))
    assert not S.directory_id_reserved((100).to_bytes(16, "big"))
    assert not S.directory_id_reserved((1 << 64).to_bytes(16, "big"))


@given(st.binary(min_size=16, max_size=16))
def test_uuid_text_round_trip(raw):
    text = S.uuid_to_str(raw)
    assert len(text) == 22 and S.parse_uuid(text) == raw and S.parse_uuid(text + "==") == raw


@pytest.mark.parametrize("bad", ["", "foo", "A" * 21, "A" * 23, "A" * 25, "A" * 21 + "+", "A" * 21 + "/",
                                 "AAAAAAAAAAAAAAAAAAAAA=", "a b" * 8])
def test_parse_uuid_rejects(bad):
    with pytest.raises(ValueError):
        S.parse_uuid(bad)


def test_cluster_id_rules():
    assert S.validate_cluster_id(CID) == CID
    u = S.random_uuid()
    assert S.validate_cluster_id(u) == u
    for bad, why in [("foo", "22 characters"), ("", "22 characters"), ("AAAAAAAAAAAAAAAAAAAAAA", "reserved"),
                     ("AAAAAAAAAAAAAAAAAAAAAQ", "reserved"), ("x=y", "Kafka Uuid")]:
        with pytest.raises(StorageInputError, match=why):
            S.validate_cluster_id(bad)
    # a ZooKeeper-mode cluster's id may start with '-' (Kafka's CoreUtils.generateUuidAsBase64 draws
    # any base64url Uuid): taken, as Kafka takes it; random_uuid never makes one
    assert S.validate_cluster_id("-" + "A" * 20 + "Q") == "-" + "A" * 20 + "Q"


# ------------------------------------------------------------------ feature levels

#: The newest release's latest production metadata.version (the default, as kafka-storage's)
#: and its newest testing one, from the tables scripts/gen_features.py reads from Kafka's jars.
LATEST = registry().latest_production
TESTING = registry().by_level(registry().newest_release.latest_testing)

def test_release_versions():
    assert resolve_features("3.9").metadata_version.name == "3.9-IV0"
    assert resolve_features("3.5").metadata_version.name == "3.5-IV2"
    assert resolve_features("3.9.2").metadata_version.name == "3.9-IV0"
    assert resolve_features("3.7-IV1").metadata_version.level == 16
    assert resolve_features(None).metadata_version.name == LATEST.name
    assert resolve_features(features={"metadata.version": 20}).metadata_version.name == "3.8-IV0"
    assert [m.name for m in S.bootstrap_metadata_versions()][:2] == ["3.3-IV3", "3.4-IV0"]
    assert S.bootstrap_metadata_versions()[-1].name == LATEST.name


@pytest.mark.parametrize("spec,msg", [
    ("3.2", "too old"), ("3.3-IV2", "too old"), ("9.9", "Unknown metadata.version '9.9'"),
    (TESTING.release, "Unknown metadata.version"), (TESTING.name, "not yet stable"), ("x", "Unknown metadata.version"),
])
def test_release_versions_refused(spec, msg):
    with pytest.raises(StorageInputError, match=re.escape(msg)):
        resolve_features(spec)


@given(st.integers(min_value=7, max_value=30))
def test_defaults_follow_bootstrap_metadata_version(level):
    """Kafka's Feature.defaultLevel: the highest level whose bootstrap MV <= the release's."""
    fs = resolve_features(level)
    reg = registry()
    assert list(fs.levels) == sorted([*PRODUCTION, "metadata.version"])
    for name in PRODUCTION:
        if name == "kraft.version":
            assert fs.levels[name] == 0
            continue
        f = reg.newest_release.features[name]
        want = max(lv.level for lv in f.levels if lv.bootstrap_metadata_version <= level)
        assert fs.levels[name] == want
    boot = fs.bootstrap_levels()
    assert list(boot)[0] == "metadata.version" and boot["metadata.version"] == level
    rest = list(boot)[1:]
    assert rest == sorted(rest) and "kraft.version" not in rest
    assert all(boot[n] > 0 for n in rest)
    assert all(n in rest for n, lv in fs.levels.items() if lv > 0 and n not in ("metadata.version", "kraft.version"))
    assert fs.bootstrap_records() == [(12, 0, {"Name": n, "FeatureLevel": lv}) for n, lv in boot.items()]


def test_defaults_known_points():
    assert resolve_features("3.9").bootstrap_levels() == {"metadata.version": 21}
    assert resolve_features("4.0").bootstrap_levels() == {"metadata.version": 25, "group.version": 1,
                                                         "transaction.version": 2}
    assert resolve_features("4.3").bootstrap_levels() == {
        "metadata.version": 30, "eligible.leader.replicas.version": 1, "group.version": 1, "share.version": 1,
        "streams.version": 1, "transaction.version": 2}


def test_requested_levels():
    fs = resolve_features("3.9", [("transaction.version", 1), ("transaction.version", 2)])
    assert fs.bootstrap_levels() == {"metadata.version": 21, "transaction.version": 2}  # last one wins
    fs = resolve_features("4.3", {"group.version": 0, "transaction.version": 1})
    assert fs.bootstrap_levels() == {"metadata.version": 30, "eligible.leader.replicas.version": 1,
                                     "share.version": 1, "streams.version": 1, "transaction.version": 1}
    # Kafka 4.3.1 gives transaction.version no dependency: level 2 at 3.9 is accepted (as kafka-storage does)
    assert resolve_features("3.5", {"transaction.version": 2}).levels["transaction.version"] == 2


@pytest.mark.parametrize("release,features,msg", [
    ("3.9", {"eligible.leader.replicas.version": 1},
     "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23 (4.0-IV1"),
    ("4.0-IV0", {"eligible.leader.replicas.version": 1}, "depends on metadata.version level 23"),
    ("3.9", {"transaction.version": 3}, "No feature:transaction.version with feature level 3"),
    ("3.9", {"group.version": -1}, "No feature:group.version with feature level -1"),
    ("3.9", {"test.feature.version": 1}, "Unsupported feature: test.feature.version. Supported features are: "
                                          + ", ".join(PRODUCTION)),
    ("3.9", {"nope": 0}, "Unsupported feature: nope"),
    ("3.9", {"metadata.version": 21}, "Use --release-version instead of --feature metadata.version=X"),
    (None, {"metadata.version": 99}, "No MetadataVersion with feature level 99"),
    (None, {"metadata.version": TESTING.level}, "not yet stable"),
    (None, {"metadata.version": 6}, "too old"),
    ("3.9", {"kraft.version": 1}, "Cannot set kraft.version to 1 unless"),
])
def test_feature_refusals(release, features, msg):
    with pytest.raises(StorageInputError, match=re.escape(msg)):
        resolve_features(release, features)


def test_kraft_version_rules():
    assert resolve_features("3.9").levels["kraft.version"] == 0
    assert resolve_features("3.9", dynamic_quorum=True).levels["kraft.version"] == 1
    assert resolve_features("3.9", {"kraft.version": 1}, dynamic_quorum=True).levels["kraft.version"] == 1
    assert resolve_features("3.9", {"kraft.version": 0}).levels["kraft.version"] == 0
    with pytest.raises(StorageInputError, match="Cannot set kraft.version to 0"):
        resolve_features("3.9", {"kraft.version": 0}, dynamic_quorum=True)
    assert "kraft.version" not in resolve_features("4.3", dynamic_quorum=True).bootstrap_levels()


@pytest.mark.parametrize("text,out", [("a=1", ("a", 1)), ("transaction.version=2", ("transaction.version", 2)),
                                      ("x = -3", ("x", -3))])
def test_parse_feature_arg(text, out):
    assert S.parse_feature_arg(text) == out


@pytest.mark.parametrize("text,msg", [("a", "equals sign not found"), ("a=x", "unable to parse x as a short"),
                                      ("a=40000", "unable to parse 40000 as a short"), ("a=", "as a short")])
def test_parse_feature_arg_refused(text, msg):
    with pytest.raises(StorageInputError, match=msg):
        S.parse_feature_arg(text)


# ------------------------------------------------------------------ voters and listeners

def test_parse_voters():
    vs = S.parse_voters(" 2@h2:9094:07R5amHmR32VDA6jHkGbTA,,0@[::1]:9092:MvDxzVmcRsaTz33bUuRU6A ")
    assert list(vs) == [0, 2]
    assert vs[0] == DynamicVoter(0, "::1", 9092, "MvDxzVmcRsaTz33bUuRU6A")
    assert str(vs[0]) == "0@[::1]:9092:MvDxzVmcRsaTz33bUuRU6A" and str(vs[2]) == "2@h2:9094:07R5amHmR32VDA6jHkGbTA"
    assert vs[0].endpoint_host() == "0:0:0:0:0:0:0:1"
    assert DynamicVoter(1, "::ffff:10.0.0.1", 1, "x").endpoint_host() == "10.0.0.1"
    assert DynamicVoter(1, "fe80::a:B", 1, "x").endpoint_host() == "fe80:0:0:0:0:0:a:b"
    assert DynamicVoter(1, "kafka-1.example", 1, "x").endpoint_host() == "kafka-1.example"


@pytest.mark.parametrize("text,msg", [
    ("1h:1:MvDxzVmcRsaTz33bUuRU6A", "No @ found"), ("@h:1:MvDxzVmcRsaTz33bUuRU6A", "Invalid @ at beginning"),
    ("x@h:1:MvDxzVmcRsaTz33bUuRU6A", "Failed to parse node id"), ("-1@h:1:MvDxzVmcRsaTz33bUuRU6A", "Invalid negative"),
    ("1@", "No hostname found"), ("1@[::1:1:MvDxzVmcRsaTz33bUuRU6A", "no right bracket"), ("1@h", "No colon following hostname"),
    ("1@[::1]x1:MvDxzVmcRsaTz33bUuRU6A", "Port section must start with a colon"), ("1@h:1", "No colon following port"),
    ("1@h:x:MvDxzVmcRsaTz33bUuRU6A", "Failed to parse port"), ("1@h:70000:MvDxzVmcRsaTz33bUuRU6A", "Invalid port 70000"),
    ("1@h:1:nope", "Failed to parse directory ID"), ("", "No voters given"),
    ("1@h:1:MvDxzVmcRsaTz33bUuRU6A,1@g:2:07R5amHmR32VDA6jHkGbTA", "Node id 1 was specified more than once"),
])
def test_parse_voters_refused(text, msg):
    with pytest.raises(StorageInputError, match=re.escape(msg)):
        S.parse_voters(text)


def test_controller_listener():
    assert S.parse_controller_listener("controller") == S.ControllerListener("CONTROLLER")
    assert S.parse_controller_listener("CONTROLLER://127.0.0.1:9093") == S.ControllerListener("CONTROLLER", "127.0.0.1", 9093)
    assert S.parse_controller_listener("C://:9093") == S.ControllerListener("C", "localhost", 9093)
    assert S.parse_controller_listener("C://[::1]:9093") == S.ControllerListener("C", "::1", 9093)
    for bad in ("", "C://h", "C://h:99999", "a b"):
        with pytest.raises(StorageInputError):
            S.parse_controller_listener(bad)


# ------------------------------------------------------------------ meta.properties

def test_properties_order_is_javas():
    assert S.java_properties_order(["version", "cluster.id", "node.id", "directory.id"]) == \
        ["node.id", "directory.id", "version", "cluster.id"]  # what Kafka 4.3.1 on Java 17 writes
    assert S._java_string_hash("") == 0 and S._java_string_hash("a") == 97
    assert S._java_string_hash("ab") == 97 * 31 + 98


def test_meta_properties_text():
    mp = MetaProperties(1, CID, 3, "JEXY6aqzQY-32P5TStzaFg")
    text = mp.to_text(ts=0)
    lines = text.splitlines()
    assert lines[0] == "#" and re.fullmatch(r"#\w{3} \w{3} \d{2} \d{2}:\d{2}:\d{2} \S+ \d{4}", lines[1])
    assert lines[2:] == ["node.id=3", "directory.id=JEXY6aqzQY-32P5TStzaFg", "version=1", f"cluster.id={CID}"]
    assert text.endswith("\n")
    back = MetaProperties.from_properties(parse_properties(text))
    assert back == mp
    assert back.to_dict() == {"cluster.id": CID, "directory.id": "JEXY6aqzQY-32P5TStzaFg", "node.id": "3", "version": "1"}
    v0 = MetaProperties.from_properties({"broker.id": "5", "cluster.id": "c"})
    assert (v0.version, v0.node_id, v0.cluster_id) == (0, 5, "c")
    assert "broker.id=5" in v0.to_text()


@pytest.mark.parametrize("props,msg", [
    ({"version": "1", "node.id": "1"}, "cluster.id was not found"),
    ({"version": "1", "cluster.id": "c"}, "node.id was not found"),
    ({"version": "2"}, "Unknown meta.properties version number 2"),
    ({"version": "1", "cluster.id": "c", "node.id": "x"}, "Failed to parse node.id"),
    ({"version": "1", "cluster.id": "c", "node.id": "1", "directory.id": "zz"}, "invalid directory.id"),
])
def test_meta_properties_refused(props, msg):
    with pytest.raises(StorageStateError, match=msg):
        MetaProperties.from_properties(props)


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@given(st.dictionaries(_text.filter(bool), _text, max_size=6))
def test_properties_round_trip(props):
    assert parse_properties(S.properties_text(props, ts=0)) == props


def test_parse_properties_java_syntax():
    text = "# c\n! c\n  a = 1\nb:2\nc 3\nd=con\\\n   tinued\ne=\\u0041\\t\\#\nf\n#g=1\nh\\\n#not a comment\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "continued", "e": "A\t#", "f": "",
                                      "h#not": "a comment"}


# ------------------------------------------------------------------ format

def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mode & 0o777 for p in sorted(root.rglob("*")) if p.is_file()}


def _bootstrap(path: Path) -> list[tuple[int, int, dict]]:
    return [decode_metadata_record(v) for _, v in SnapshotReader(path).records()]


def test_format_writes_kafkas_files(tmp_path):
    res = format_storage([tmp_path / "a", tmp_path / "b"], cluster_id=CID, node_id=4, release_version="3.9",
                         features={"transaction.version": 2}, time_ms=1_700_000_000_000)
    probe = tmp_path / "probe"
    os.close(os.open(probe, os.O_CREAT | os.O_WRONLY, 0o644))
    mode = probe.stat().st_mode & 0o777  # 0o644 less the umask, as Kafka's files
    probe.unlink()
    assert _files(tmp_path) == {"a/bootstrap.checkpoint": mode, "a/meta.properties": mode,
                                "b/bootstrap.checkpoint": mode, "b/meta.properties": mode}
    assert res.messages == [f"Formatting metadata directory {tmp_path / 'a'} with metadata.version 3.9-IV0.",
                            f"Formatting data directory {tmp_path / 'b'} with metadata.version 3.9-IV0."]
    ids = set()
    for d in ("a", "b"):
        mp = MetaProperties.read(tmp_path / d / "meta.properties")
        assert (mp.version, mp.cluster_id, mp.node_id) == (1, CID, 4)
        ids.add(mp.directory_id)
        assert _bootstrap(tmp_path / d / "bootstrap.checkpoint") == [
            (12, 0, {"Name": "metadata.version", "FeatureLevel": 21}),
            (12, 0, {"Name": "transaction.version", "FeatureLevel": 2})]
        rep = SnapshotReader(tmp_path / d / "bootstrap.checkpoint").check()
        assert rep["last_contained_log_timestamp"] == 0 and rep["batches"] == 3 and rep["has_footer"]
        batches = decode_batches((tmp_path / d / "bootstrap.checkpoint").read_bytes(), verify_crc=True)
        assert [(b.base_offset, b.count, b.is_control, b.partition_leader_epoch, b.base_timestamp) for b in batches] == \
            [(0, 1, True, 0, 1_700_000_000_000), (1, 2, False, 0, 1_700_000_000_000),
             (3, 1, True, 0, 1_700_000_000_000)]
    assert len(ids) == 2
    # same inputs and time: same bootstrap bytes in every directory, and every time
    assert (tmp_path / "a/bootstrap.checkpoint").read_bytes() == (tmp_path / "b/bootstrap.checkpoint").read_bytes()
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    j = res.to_dict()
    assert j["metadata_version"] == {"level": 21, "name": "3.9-IV0"}
    assert j["bootstrap_records"] == [{"name": "metadata.version", "level": 21}, {"name": "transaction.version", "level": 2}]


def test_bootstrap_batches_split_at_max_size(monkeypatch):
    monkeypatch.setattr(S.format, "MAX_BATCH_BYTES", 61 + 3 * 60)
    values = [bytes([0, 0]) + bytes(40) for _ in range(10)]
    batches = decode_batches(S.bootstrap_checkpoint_bytes(values, time_ms=5), verify_crc=True)
    data = [b for b in batches if not b.is_control]
    assert [b.count for b in data] == [3, 3, 3, 1]
    assert [b.base_offset for b in batches] == [0, 1, 4, 7, 10, 11]


def test_separate_metadata_dir_and_voters(tmp_path):
    voters = "3@h3:9093:07R5amHmR32VDA6jHkGbTA,1@[::1]:9093:MvDxzVmcRsaTz33bUuRU6A"
    res = format_storage([tmp_path / "d1"], cluster_id=CID, node_id=1, metadata_log_dir=tmp_path / "m",
                         release_version="4.1", initial_controllers=voters, controller_listener="CTRL", time_ms=9)
    assert {d.path: d.type for d in res.directories} == {str(tmp_path / "d1"): "log",
                                                         str(tmp_path / "m"): "dynamic-metadata-voter"}
    snap = tmp_path / "m" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
    assert (snap.stat().st_mode & 0o777) == 0o400
    assert MetaProperties.read(tmp_path / "m" / "meta.properties").directory_id == "MvDxzVmcRsaTz33bUuRU6A"
    assert MetaProperties.read(tmp_path / "d1" / "meta.properties").directory_id not in (
        "MvDxzVmcRsaTz33bUuRU6A", "07R5amHmR32VDA6jHkGbTA")
    assert not (tmp_path / "d1" / "__cluster_metadata-0").exists()
    rep = SnapshotReader(snap).check()
    assert rep["kraft_version"] == 1 and rep["has_voters"] and rep["last_contained_log_timestamp"] == 9
    header = decode_batches(snap.read_bytes())[0].records()
    assert [r.control_type for r in header] == [ControlType.SNAPSHOT_HEADER, ControlType.KRAFT_VERSION,
                                                ControlType.KRAFT_VOTERS]
    voters_rec = decode_control_record(ControlType.KRAFT_VOTERS, header[2].value)
    assert [(v["VoterId"], v["Endpoints"]) for v in voters_rec["Voters"]] == [
        (1, [{"Name": "CTRL", "Host": "0:0:0:0:0:0:0:1", "Port": 9093}]),
        (3, [{"Name": "CTRL", "Host": "h3", "Port": 9093}])]
    assert all(v["KRaftVersionFeature"] == {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}
               for v in voters_rec["Voters"])
    assert "kraft.version" not in {d["Name"] for _, _, d in _bootstrap(tmp_path / "m" / "bootstrap.checkpoint")}


def test_non_voter_and_no_initial_controllers(tmp_path):
    res = format_storage([tmp_path / "a"], cluster_id=CID, node_id=7, release_version="4.0",
                         initial_controllers="1@h:1:MvDxzVmcRsaTz33bUuRU6A")
    assert res.directories[0].type == "dynamic-metadata"
    assert (tmp_path / "a/__cluster_metadata-0/00000000000000000000-0000000000.checkpoint").exists()
    assert res.features.levels["kraft.version"] == 1
    res = format_storage([tmp_path / "b"], cluster_id=CID, node_id=7, release_version="4.0", no_initial_controllers=True)
    assert res.directories[0].type == "metadata" and res.features.levels["kraft.version"] == 1
    assert not (tmp_path / "b/__cluster_metadata-0").exists()


def test_standalone(tmp_path):
    with pytest.raises(StorageInputError, match="--standalone needs the controller listener's host and port"):
        format_storage([tmp_path / "a"], cluster_id=CID, node_id=1, standalone=True)
    assert not (tmp_path / "a").exists()
    res = format_storage([tmp_path / "a"], cluster_id=CID, node_id=1, standalone=True,
                         controller_listener="CONTROLLER://:9093")
    assert res.directories[0].type == "dynamic-metadata-voter"
    (voter,) = res.voters
    assert (voter.node_id, voter.host, voter.port) == (1, "localhost", 9093)
    assert MetaProperties.read(tmp_path / "a/meta.properties").directory_id == voter.directory_id


def test_refusals_leave_nothing(tmp_path):
    d = [tmp_path / "a"]
    cases = [
        (dict(cluster_id="foo", node_id=1), StorageInputError, "invalid cluster id"),
        (dict(cluster_id=CID, node_id=-1), StorageInputError, "non-negative node ID"),
        (dict(cluster_id=CID, node_id=1, release_version="3.9", features={"eligible.leader.replicas.version": 1}),
         StorageInputError, "depends on metadata.version level 23"),
        (dict(cluster_id=CID, node_id=1, standalone=True, no_initial_controllers=True,
              controller_listener="C://h:1"), StorageInputError, "mutually exclusive"),
    ]
    for kw, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            format_storage(d, **kw)
    with pytest.raises(StorageInputError, match="at least one directory"):
        format_storage([], cluster_id=CID, node_id=1)
    assert not any(tmp_path.iterdir())


def test_formatted_directories(tmp_path):
    format_storage([tmp_path / "a"], cluster_id=CID, node_id=1, release_version="3.9")
    before = (tmp_path / "a/meta.properties").read_bytes()
    with pytest.raises(StorageStateError, match=f"Log directory {tmp_path / 'a'} is already formatted. "
                                                 "Use --ignore-formatted"):
        format_storage([tmp_path / "a", tmp_path / "b"], cluster_id=CID, node_id=1)
    other = S.random_uuid()
    with pytest.raises(StorageStateError, match=f"Invalid cluster.id in: .*. Expected {other}, but read {CID}"):
        format_storage([tmp_path / "a", tmp_path / "b"], cluster_id=other, node_id=1, ignore_formatted=True)
    with pytest.raises(StorageStateError, match="Stored node id 1 doesn't match previous node id 2"):
        format_storage([tmp_path / "a", tmp_path / "b"], cluster_id=CID, node_id=2, ignore_formatted=True)
    assert not (tmp_path / "b").exists()
    res = format_storage([tmp_path / "a", tmp_path / "b"], cluster_id=CID, node_id=1, ignore_formatted=True)
    assert [(d.type, d.formatted_now) for d in res.directories] == [(None, False), ("log", True)]
    assert (tmp_path / "a/meta.properties").read_bytes() == before
    assert MetaProperties.read(tmp_path / "b/meta.properties").directory_id != \
        MetaProperties.read(tmp_path / "a/meta.properties").directory_id
    res = format_storage([tmp_path / "a", tmp_path / "b"], cluster_id=CID, node_id=1, ignore_formatted=True)
    assert res.messages == ["All of the log directories are already formatted."]


def test_existing_directory_ids_checked(tmp_path):
    for d in ("a", "b"):
        format_storage([tmp_path / d], cluster_id=CID, node_id=1)
    text = (tmp_path / "a/meta.properties").read_text()
    dir_a = MetaProperties.read(tmp_path / "a/meta.properties").directory_id
    dir_b = MetaProperties.read(tmp_path / "b/meta.properties").directory_id
    (tmp_path / "b/meta.properties").write_text(text)
    with pytest.raises(StorageStateError, match=f"Duplicate directory ID {dir_a}"):
        format_storage([tmp_path / "a", tmp_path / "b"], cluster_id=CID, node_id=1, ignore_formatted=True)
    (tmp_path / "b/meta.properties").write_text(text.replace(dir_a, S.uuid_to_str((5).to_bytes(16, "big"))))
    with pytest.raises(StorageStateError, match="reserved directory ID"):
        format_storage([tmp_path / "a", tmp_path / "b"], cluster_id=CID, node_id=1, ignore_formatted=True)
    assert dir_a != dir_b


def test_not_a_directory(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(StorageStateError, match="is not a directory"):
        format_storage([tmp_path / "f"], cluster_id=CID, node_id=1)


def test_atomic_write_leaves_no_temp_file(tmp_path):
    target = tmp_path / "x"
    S.write_file_atomic(target, b"old")
    # the write of the temporary file fails as on a full disk: files may not grow past 2 bytes
    # (EFBIG; Python ignores SIGXFSZ)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2, hard))
    try:
        with pytest.raises(OSError) as e:
            S.write_file_atomic(target, b"new")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert e.value.errno == errno.EFBIG and e.value.filename == str(target)
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["x"]


@pytest.mark.parametrize("layout,files", [(S.LAYOUT_BOOTSTRAP_FILE, ["bootstrap.checkpoint", "meta.properties"]),
                                          (S.LAYOUT_CHECKPOINT, ["meta.properties"])])
def test_meta_properties_written_last(tmp_path, monkeypatch, layout, files):
    """A failure while writing a directory leaves no meta.properties: it is not 'formatted'."""
    real = S.write_file_atomic
    calls = []

    def flaky(path, data, **kw):
        calls.append(Path(path).name)
        if Path(path).name == "meta.properties":
            raise OSError("boom")
        return real(path, data, **kw)

    monkeypatch.setattr(S.format, "write_file_atomic", flaky)  # where _write_directory looks it up
    with pytest.raises(OSError):
        format_storage([tmp_path / "a"], cluster_id=CID, node_id=1, layout=layout)
    assert calls == files
    assert not (tmp_path / "a/meta.properties").exists()
    # the bootstrap snapshot (checkpoint layout) was complete before meta.properties was tried
    assert (tmp_path / "a" / S.CLUSTER_METADATA_DIR / S.BOOTSTRAP_SNAPSHOT).exists() == (layout == S.LAYOUT_CHECKPOINT)


# ------------------------------------------------------------------ info

def test_info(tmp_path):
    format_storage([tmp_path / "a", tmp_path / "b"], cluster_id=CID, node_id=1, release_version="4.0")
    (tmp_path / "c").mkdir()
    info = S.storage_info([tmp_path / "b", tmp_path / "a", tmp_path / "c", tmp_path / "missing"])
    assert info["found"] == [str(tmp_path / d) for d in ("a", "b", "c")]
    assert info["metadata"]["cluster.id"] == CID and info["metadata"]["node.id"] == "1"
    assert info["problems"] == [f"{tmp_path / 'c'} is not formatted.", f"{tmp_path / 'missing'} does not exist"]
    a = info["directories"][0]
    assert a["bootstrap"] == {"file": str(tmp_path / "a" / S.BOOTSTRAP_FILE), "metadata_version": {"level": 25, "name": "4.0-IV3"},
                              "features": {"group.version": 1, "transaction.version": 2}, "other_records": 0,
                              "unknown_levels": []}
    text = S.info_text(info)
    assert text.startswith("Found log directories:\n  " + str(tmp_path / "a") + "\n")
    assert f"Found metadata: {{cluster.id={CID}, directory.id=" in text
    assert f"  {tmp_path / 'a'}: metadata.version=25 (4.0-IV3), group.version=1, transaction.version=2" in text
    assert text.endswith("Found problems:\n  " + f"{tmp_path / 'c'} is not formatted.\n  "
                         f"{tmp_path / 'missing'} does not exist\n\n")
    assert S.info_text({"directories": [], "found": [], "metadata": None, "problems": []}) == "No directories specified.\n"


@pytest.mark.parametrize("layout", S.LAYOUTS)
def test_info_mismatch_and_corrupt(tmp_path, layout):
    format_storage([tmp_path / "a"], cluster_id=CID, node_id=1, layout=layout)
    format_storage([tmp_path / "b"], cluster_id=CID, node_id=2, layout=layout)
    format_storage([tmp_path / "c"], cluster_id=S.random_uuid(), node_id=1, layout=layout)
    info = S.storage_info([tmp_path / "a", tmp_path / "b", tmp_path / "c"])
    assert info["problems"] == ["Mismatched node IDs between storage directories.",
                                "Mismatched cluster IDs between storage directories."]
    p = tmp_path / "a" / (S.BOOTSTRAP_FILE if layout == S.LAYOUT_BOOTSTRAP_FILE
                          else f"{S.CLUSTER_METADATA_DIR}/{S.BOOTSTRAP_SNAPSHOT}")
    p.chmod(0o600)
    data = bytearray(p.read_bytes())
    data[-1] ^= 1
    p.write_bytes(bytes(data))
    info = S.storage_info([tmp_path / "a"])
    assert len(info["problems"]) == 1 and info["problems"][0].startswith(f"Error loading {p}")


# ------------------------------------------------------------------ CLI

def test_cli_format_info_random(tmp_path, capsys):
    assert main(["storage", "random-uuid"]) == 0
    cid = capsys.readouterr().out.strip()
    assert S.parse_uuid(cid) and len(cid) == 22
    d = tmp_path / "a"
    assert main(["storage", "format", "--cluster-id", cid, "--node-id", "2", "--directories", str(d),
                 "--release-version", "3.9", "--feature", "transaction.version=2"]) == 0
    out = capsys.readouterr().out
    assert out == ("Bootstrap metadata: metadata.version=21, transaction.version=2 (3.9-IV0)\n"
                   f"Formatting metadata directory {d} with metadata.version 3.9-IV0.\n")
    assert main(["storage", "info", str(d)]) == 0
    assert "metadata.version=21 (3.9-IV0), transaction.version=2" in capsys.readouterr().out
    assert main(["storage", "info", "--json", str(d), str(tmp_path / "nope")]) == 1
    info = json.loads(capsys.readouterr().out)
    assert info["metadata"]["node.id"] == "2" and info["problems"] == [f"{tmp_path / 'nope'} does not exist"]
    # already formatted: an existing output, 2 as for every command; with -g: 0 and JSON
    assert main(["storage", "format", "-t", cid, "--node-id", "2", "-d", str(d)]) == 2
    assert "is already formatted" in capsys.readouterr().err
    assert main(["storage", "format", "-t", cid, "--node-id", "2", "-d", str(d), "-g", "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["directories"][0]["formattedNow"] is False and j["metadataVersion"]["name"] == LATEST.name


@pytest.mark.parametrize("args,msg", [
    (["--release-version", "3.9", "--feature", "eligible.leader.replicas.version=1"], "depends on metadata.version"),
    (["--feature", "bogus"], "equals sign not found"),
    (["--release-version", "2.8"], "Unknown metadata.version"),
    (["--initial-controllers", "1@h:1"], "No colon following port"),
    (["--standalone"], "--standalone needs"),
])
def test_cli_usage_errors_exit_2(tmp_path, capsys, args, msg):
    assert main(["storage", "format", "-t", CID, "--node-id", "1", "-d", str(tmp_path / "a"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kraftkit storage format: ") and msg in err
    assert not (tmp_path / "a").exists()


def test_cli_bad_cluster_id_and_exclusive_flags(tmp_path, capsys):
    assert main(["storage", "format", "-t", "nope", "--node-id", "1", "-d", str(tmp_path)]) == 2
    assert "invalid cluster id 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["storage", "format", "-t", CID, "--node-id", "1", "-d", str(tmp_path), "-s", "-N"])
    assert e.value.code == 2
    capsys.readouterr()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(level=st.integers(min_value=7, max_value=30), tv=st.sampled_from([None, 0, 1, 2]),
       gv=st.sampled_from([None, 0, 1]))
def test_format_then_info_round_trip(tmp_path_factory, level, tv, gv):
    d = tmp_path_factory.mktemp("rt") / "a"
    feats = {k: v for k, v in (("transaction.version", tv), ("group.version", gv)) if v is not None}
    res = format_storage([d], cluster_id=CID, node_id=0, release_version=level, features=feats)
    info = S.storage_info([d])
    assert info["problems"] == []
    boot = info["directories"][0]["bootstrap"]
    expect = res.features.bootstrap_levels()
    assert boot["metadata_version"]["level"] == expect.pop("metadata.version") == level
    assert boot["features"] == expect
    for k, v in feats.items():
        assert res.features.levels[k] == v
    assert set(os.listdir(d)) == {"bootstrap.checkpoint", "meta.properties"}


# ------------------------------------------------------------------ layouts (Kafka 4.4: the bootstrap snapshot)

@pytest.mark.parametrize("release,want", [(None, S.LAYOUT_CHECKPOINT), ("4.4", S.LAYOUT_CHECKPOINT),
                                          ("4.3", S.LAYOUT_BOOTSTRAP_FILE), ("3.9", S.LAYOUT_BOOTSTRAP_FILE)])
def test_default_layout_follows_the_release(tmp_path, release, want):
    res = format_storage([tmp_path / "log", tmp_path / "meta"], cluster_id=CID, node_id=1, release_version=release,
                         metadata_log_dir=tmp_path / "meta")
    assert res.layout == want == res.to_dict()["layout"]
    names = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()}
    snap = f"meta/{S.CLUSTER_METADATA_DIR}/{S.BOOTSTRAP_SNAPSHOT}"
    if want == S.LAYOUT_CHECKPOINT:
        assert names == {"log/meta.properties", "meta/meta.properties", snap}
    else:
        assert names == {"log/meta.properties", "meta/meta.properties", "log/bootstrap.checkpoint",
                         "meta/bootstrap.checkpoint"}


@pytest.mark.parametrize("kind", ["static", "standalone", "no-initial"])
def test_checkpoint_layout_snapshot(tmp_path, kind):
    """The bootstrap snapshot of the checkpoint layout: a control batch (header, then
    KRaftVersion at kraft.version 1, then the voters when there are initial ones), a batch of
    exactly the bootstrap records, a footer; storage info and features describe read it."""
    kw = {"standalone": {"standalone": True, "controller_listener": "CONTROLLER://127.0.0.1:9093"},
          "no-initial": {"no_initial_controllers": True}, "static": {}}[kind]
    res = format_storage([tmp_path / "meta"], cluster_id=CID, node_id=1, release_version="4.4",
                         features={"share.version": 1}, layout=S.LAYOUT_CHECKPOINT, **kw)
    snap = tmp_path / "meta" / S.CLUSTER_METADATA_DIR / S.BOOTSTRAP_SNAPSHOT
    assert snap.stat().st_mode & 0o777 == 0o400
    batches = decode_batches(snap.read_bytes())
    assert [b.is_control for b in batches] == [True, False, True]
    header = [r.control_type for r in batches[0].records()]
    want = {"static": [ControlType.SNAPSHOT_HEADER],
            "no-initial": [ControlType.SNAPSHOT_HEADER, ControlType.KRAFT_VERSION],
            "standalone": [ControlType.SNAPSHOT_HEADER, ControlType.KRAFT_VERSION, ControlType.KRAFT_VOTERS]}[kind]
    assert header == want
    records = [decode_metadata_record(r.value)[2] for r in batches[1].records()]
    assert [(r["Name"], r["FeatureLevel"]) for r in records] == list(res.features.bootstrap_levels().items())
    assert ("share.version", 1) in [(r["Name"], r["FeatureLevel"]) for r in records]
    assert [r.control_type for r in batches[2].records()] == [ControlType.SNAPSHOT_FOOTER]
    assert SnapshotReader(snap).verify()["error"] is None
    info = S.storage_info([tmp_path / "meta"])
    boot = info["directories"][0]["bootstrap"]
    assert boot["file"] == str(snap) and boot["features"]["share.version"] == 1
    assert boot["metadata_version"]["level"] == res.features.metadata_version.level
    assert f"(in {S.CLUSTER_METADATA_DIR}/{S.BOOTSTRAP_SNAPSHOT})" in S.info_text(info)


def test_voters_only_snapshot_is_no_bootstrap(tmp_path):
    """Kafka 3.9..4.3's bootstrap snapshot holds only the voters: storage info takes the
    bootstrap metadata from bootstrap.checkpoint and reports no problem."""
    format_storage([tmp_path / "meta"], cluster_id=CID, node_id=1, release_version="4.1", standalone=True,
                   controller_listener="CONTROLLER://127.0.0.1:9093")
    assert (tmp_path / "meta" / S.CLUSTER_METADATA_DIR / S.BOOTSTRAP_SNAPSHOT).exists()
    (tmp_path / "meta" / S.BOOTSTRAP_FILE).unlink()
    info = S.storage_info([tmp_path / "meta"])
    assert info["problems"] == [] and info["directories"][0]["bootstrap"] is None


def test_cli_layout(tmp_path, capsys):
    d = tmp_path / "a"
    assert main(["storage", "format", "-t", CID, "--node-id", "1", "-d", str(d), "--release-version", "3.9",
                 "--layout", "checkpoint", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layout"] == "checkpoint"
    assert not (d / S.BOOTSTRAP_FILE).exists() and (d / S.CLUSTER_METADATA_DIR / S.BOOTSTRAP_SNAPSHOT).exists()
    assert main(["storage", "info", str(d)]) == 0
    assert "metadata.version=21 (3.9-IV0)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["storage", "format", "-t", CID, "--node-id", "1", "-d", str(tmp_path / "b"), "--layout", "zk"])
    assert e.value.code == 2
    assert "invalid choice: 'zk'" in capsys.readouterr().err
