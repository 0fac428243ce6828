"""Input newer than kraftkit's tables (a newer Kafka's metadata.version or feature level, a
record type or record version the schemas lack) is never guessed at: every command either
handles it by rules exact for it or refuses it, naming the level and the newest known.

The inputs are built with kraftkit's own writers; "newer" is always computed from the tables
(``kafka_features.json``) and the schemas, never written down here."""

from __future__ import annotations

import json
import os

import pytest

from kraftkit._core import decode_metadata_record, metadata_record_types
from kraftkit.cli.main import main
from kraftkit.features import registry
from kraftkit.features.rewrite import rewrite_snapshot
from kraftkit.log import Log, encode_batch
from kraftkit.metadata.generate import feature_level_record, write_metadata_log
from kraftkit.metadata.image import load_image
from kraftkit.metadata.snapshot import SnapshotId, SnapshotReader, SnapshotWriter, list_snapshots
from kraftkit.metadata.versions import NewerThanKnownError, mv_name

MV = "metadata.version"
SHARE = "share.version"


def newest_mv() -> int:
    return registry().latest.level


def newest_share() -> int:
    return max(lv.level for lv in registry().feature(SHARE).levels)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return code, out.out, out.err


def files_of(d):
    return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in d.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A metadata log written by the demo writer and a snapshot kraftkit wrote of its image."""
    root = tmp_path_factory.mktemp("unknown")
    d = root / "log" / "__cluster_metadata-0"
    d.mkdir(parents=True)
    write_metadata_log(d, topics=3, partitions=2, brokers=3, epochs=1)
    img = load_image(d)
    snapdir = root / "snap"
    snapdir.mkdir()
    snap = img.write_snapshot(snapdir)
    return d, snap


def _snapshot(directory, values, snap_id):
    directory.mkdir(parents=True, exist_ok=True)
    with SnapshotWriter(directory, snap_id, last_contained_log_timestamp=0) as w:
        w.append(values)
    return w.final_path


def _id(snap):
    return SnapshotReader(snap).snapshot_id


def _values(snap):
    return [v for _, v in SnapshotReader(snap).records()]


def _with_levels(values, mv, share):
    """The records with metadata.version at ``mv`` (and share.version at ``share`` after it)."""
    out = []
    for v in values:
        k, _, body = decode_metadata_record(v)
        if k == 12 and body["Name"] == MV:
            out.append(feature_level_record(MV, mv))
            if share is not None:
                out.append(feature_level_record(SHARE, share))
        else:
            out.append(v)
    return out


@pytest.fixture()
def newer_mv_snapshot(base, tmp_path):
    """A snapshot at the metadata.version one above the newest of the tables."""
    _, snap = base
    return _snapshot(tmp_path / "newer-mv", _with_levels(_values(snap), newest_mv() + 1, None), _id(snap))


@pytest.fixture()
def newer_share_snapshot(base, tmp_path):
    """A snapshot at the newest known metadata.version whose share.version is above its table's max."""
    _, snap = base
    vals = _with_levels(_values(snap), newest_mv(), newest_share() + 1)
    return _snapshot(tmp_path / "newer-share", vals, _id(snap))


def _record_types():
    return {k: (name, lo, hi) for k, name, lo, hi in metadata_record_types()}


@pytest.fixture()
def newer_record_version_snapshot(base, tmp_path):
    """A PartitionRecord framed at the version above its schema's newest (the body of the one
    it was)."""
    _, snap = base
    top = _record_types()[3][2]
    vals = []
    for v in _values(snap):
        if v[:2] == bytes([1, 3]) and not any(x[:3] == bytes([1, 3, top + 1]) for x in vals):
            v = bytes([1, 3, top + 1]) + v[3:]
        vals.append(v)
    assert any(x[:3] == bytes([1, 3, top + 1]) for x in vals)
    return _snapshot(tmp_path / "newer-record-version", vals, _id(snap))


@pytest.fixture()
def unknown_type_snapshot(base, tmp_path):
    """A record whose type (api key) is one above the newest the schemas know."""
    _, snap = base
    unknown = max(_record_types()) + 1
    return _snapshot(tmp_path / "unknown-type", _values(snap) + [bytes([1, unknown, 0, 0])], _id(snap))


def _newer_log(base, tmp_path, mv, share=None):
    """A copy of the demo log with one more batch: metadata.version at ``mv`` (and share.version)."""
    import shutil

    src, _ = base
    d = tmp_path / "node" / src.name
    shutil.copytree(src, d)
    vals = [feature_level_record(MV, mv)] + ([feature_level_record(SHARE, share)] if share is not None else [])
    with Log(d) as log:
        epoch = load_image(src).provenance.epoch
        log.append(encode_batch([(1, None, v, []) for v in vals], base_offset=log.log_end_offset,
                                partition_leader_epoch=epoch))
    return d


def _newest_name():
    return f"{registry().latest.name} = {newest_mv()}"


# ------------------------------------------------------------------------ snapshot rewrite

@pytest.mark.parametrize("target", ["3.9-IV0", "newest"])
def test_rewrite_refuses_a_newer_metadata_version(newer_mv_snapshot, tmp_path, capsys, target):
    target = registry().latest.name if target == "newest" else target
    out = tmp_path / "out"
    out.mkdir()
    before = newer_mv_snapshot.read_bytes()
    for extra in ([], ["--dry-run"], ["--json"], ["--fail-on-loss"]):
        args = [newer_mv_snapshot] + ([] if extra == ["--dry-run"] else [out])
        code, so, err = run(capsys, "snapshot", "rewrite", *args, "--metadata-version", target, *extra)
        assert code == 2
        assert f"metadata.version level {newest_mv() + 1} is newer than kraftkit knows (newest: {_newest_name()})" in err
        assert "refusing to rewrite" in err and str(newer_mv_snapshot) in err
        assert "same" not in so and "nothing lost" not in so and so == ""
        assert list(out.iterdir()) == []
    assert newer_mv_snapshot.read_bytes() == before


def test_rewrite_refuses_a_newer_feature_level(newer_share_snapshot, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    for target in ("3.9", registry().latest.name):
        code, so, err = run(capsys, "snapshot", "rewrite", newer_share_snapshot, out, "--metadata-version", target)
        assert code == 2 and so == ""
        assert f"share.version level {newest_share() + 1} is newer than kraftkit knows (newest: {newest_share()})" in err
        assert list(out.iterdir()) == []


def test_rewrite_refuses_a_newer_record_version_instead_of_splicing_it(newer_record_version_snapshot, tmp_path, capsys):
    top = _record_types()[3][2]
    out = tmp_path / "out"
    out.mkdir()
    for target in ("3.9", "3.5", registry().latest.name):
        code, so, err = run(capsys, "snapshot", "rewrite", newer_record_version_snapshot, out,
                            "--metadata-version", target)
        assert code == 2 and so == ""
        assert (f"PartitionRecord version {top + 1} is newer than kraftkit knows (newest: {top}); "
                "refusing to rewrite") in err
        assert list(out.iterdir()) == []


def test_rewrite_refuses_an_unknown_record_type(unknown_type_snapshot, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    code, so, err = run(capsys, "snapshot", "rewrite", unknown_type_snapshot, out, "--metadata-version", "3.9")
    assert code == 2 and so == "" and f"Unknown metadata id {max(_record_types()) + 1}" in err
    assert list(out.iterdir()) == []


def test_the_api_refuses_with_the_level_and_the_newest(newer_mv_snapshot, tmp_path):
    from kraftkit.errors import UnsupportedFormatError

    with pytest.raises(UnsupportedFormatError, match=f"level {newest_mv() + 1} is newer than kraftkit knows"):
        rewrite_snapshot(newer_mv_snapshot, tmp_path / "x.checkpoint", "3.9")
    assert not (tmp_path / "x.checkpoint").exists() and not list(tmp_path.glob("*.part"))


def test_known_levels_still_rewrite(base, tmp_path, capsys):
    # the newest known level itself is known: rewritten, and named
    _, snap = base
    s = _snapshot(tmp_path / "in", _with_levels(_values(snap), newest_mv(), newest_share()), _id(snap))
    code, so, err = run(capsys, "snapshot", "rewrite", s, "--metadata-version", "3.9", "--dry-run", "--json")
    assert code == 0, err
    rep = json.loads(so)
    assert rep["from"] == registry().latest.name and rep["direction"] == "downgrade"


# ------------------------------------------------------------------------ features describe

def test_describe_shows_an_unknown_level_as_unknown(newer_mv_snapshot, newer_share_snapshot, capsys):
    code, so, err = run(capsys, "features", "describe", newer_mv_snapshot, "--json")
    assert code == 0, err
    d = json.loads(so)
    lv = newest_mv() + 1
    assert d["metadataVersion"] is None and d["metadataVersionLevel"] == lv and d["finalized"][MV] == lv
    assert d["unknownLevels"] == [{"feature": MV, "level": lv, "newestKnown": newest_mv(),
                                   "reason": f"metadata.version level {lv} is newer than kraftkit knows "
                                             f"(newest: {_newest_name()})"}]
    assert [n["id"] for n in d["nodes"]] == [1, 2, 3]  # what it could read is shown
    code, so, _ = run(capsys, "features", "describe", newer_mv_snapshot)
    assert code == 0
    assert f"finalized {lv} (unknown: newer than kraftkit's newest, {_newest_name()})" in so
    assert f"level-{lv}" not in so

    code, so, _ = run(capsys, "features", "describe", newer_share_snapshot, "--json")
    d = json.loads(so)
    assert code == 0 and d["metadataVersion"] == registry().latest.name
    assert [(u["feature"], u["level"], u["newestKnown"]) for u in d["unknownLevels"]] == \
        [(SHARE, newest_share() + 1, newest_share())]
    code, so, _ = run(capsys, "features", "describe", newer_share_snapshot)
    assert f"finalized {newest_share() + 1} (unknown: newer than kraftkit's newest, {newest_share()})" in so


def test_describe_refuses_unknown_records_with_kafkas_message(newer_record_version_snapshot, unknown_type_snapshot,
                                                              capsys):
    top = _record_types()[3][2]
    code, so, err = run(capsys, "features", "describe", newer_record_version_snapshot)
    assert code == 1 and so == "" and f"Can't read version {top + 1} of PartitionRecord" in err
    code, so, err = run(capsys, "features", "describe", unknown_type_snapshot, "--json")
    assert code == 1 and so == "" and f"Unknown metadata id {max(_record_types()) + 1}" in err


# ------------------------------------------------------------------------ features upgrade/downgrade/disable

@pytest.mark.parametrize("argv", [
    ["downgrade", "--release-version", "3.9", "--unsafe"],
    ["downgrade", "--release-version", "3.9", "--unsafe", "--dry-run"],
    ["downgrade", "--feature", "metadata.version=21", "--unsafe"],
    ["upgrade", "--release-version", "newest"],
    ["upgrade", "--feature", "group.version=1"],
    ["disable", "--feature", "share.version"],
])
def test_feature_changes_refuse_metadata_at_a_newer_level(base, tmp_path, capsys, argv):
    argv = [registry().latest.name if a == "newest" else a for a in argv]
    for mv, share in ((newest_mv() + 1, None), (newest_mv(), newest_share() + 1)):
        d = _newer_log(base, tmp_path / f"{mv}-{share}", mv, share)
        before = files_of(d.parent)
        code, so, err = run(capsys, "features", argv[0], d, *argv[1:], "--backup", tmp_path / "bk")
        assert code == 2, err
        bad, level, newest = (MV, mv, _newest_name()) if share is None else (SHARE, share, newest_share())
        assert f"{bad} level {level} is newer than kraftkit knows (newest: {newest}); refusing to change features" in err
        assert "nothing lost" not in so and "same" not in so
        assert files_of(d.parent) == before and not list_snapshots(d)
        assert not (tmp_path / "bk").exists()


# ------------------------------------------------------------------------ metadata image / dump, snapshot verify/create

def test_metadata_image_names_an_unknown_level_honestly(newer_mv_snapshot, capsys):
    lv = newest_mv() + 1
    code, so, err = run(capsys, "metadata", "image", newer_mv_snapshot, "--path", "/features/metadataVersion")
    assert code == 0, err
    assert json.loads(so) == f"{lv} (unknown: newer than kraftkit's newest, {_newest_name()})"
    assert mv_name(lv) == json.loads(so)
    code, so, _ = run(capsys, "metadata", "image", newer_mv_snapshot, "--path", "/features", "--json")
    assert f"level-{lv}" not in so


def test_metadata_dump_and_snapshot_verify_are_exact_on_newer_levels(newer_mv_snapshot, capsys):
    # neither depends on the level: dump prints the record as it is, verify checks the framing
    code, so, err = run(capsys, "metadata", "dump", newer_mv_snapshot, "--json")
    assert code == 0, err
    levels = [json.loads(line)["data"] for line in so.splitlines() if '"FEATURE_LEVEL_RECORD"' in line]
    assert levels == [{"name": MV, "featureLevel": newest_mv() + 1}]
    code, so, err = run(capsys, "snapshot", "verify", newer_mv_snapshot)
    assert code == 0 and "OK" in so


def test_metadata_dump_refuses_unknown_records_with_kafkas_message(newer_record_version_snapshot, unknown_type_snapshot,
                                                                   capsys):
    top = _record_types()[3][2]
    code, _, err = run(capsys, "metadata", "dump", newer_record_version_snapshot)
    assert code == 1 and f"Can't read version {top + 1} of PartitionRecord" in err
    code, _, err = run(capsys, "metadata", "dump", unknown_type_snapshot)
    assert code == 1 and f"Unknown metadata id {max(_record_types()) + 1}" in err


def test_snapshot_create_refuses_a_newer_metadata_version(base, tmp_path, capsys):
    d = _newer_log(base, tmp_path, newest_mv() + 1)
    end = load_image(d).provenance.end_offset
    before = files_of(d.parent)
    code, so, err = run(capsys, "snapshot", "create", d, "--at", end)
    assert code == 2 and so == ""
    assert f"metadata.version level {newest_mv() + 1} is newer than kraftkit knows (newest: {_newest_name()})" in err
    assert files_of(d.parent) == before
    with pytest.raises(NewerThanKnownError):
        load_image(d).write_snapshot(tmp_path, SnapshotId(end, 1))
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".checkpoint") or ".part" in p]


# ------------------------------------------------------------------------ storage info, validation, Spark helpers

def test_storage_info_shows_a_newer_bootstrap_level_as_unknown(tmp_path, capsys):
    from kraftkit.features.storage import BOOTSTRAP_FILE, bootstrap_checkpoint_bytes

    d = tmp_path / "a"
    code, _, err = run(capsys, "storage", "format", "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg", "--node-id", "2",
                       "--directories", d, "--release-version", "3.9")
    assert code == 0, err
    lv, share = newest_mv() + 1, newest_share() + 1
    (d / BOOTSTRAP_FILE).write_bytes(bootstrap_checkpoint_bytes([feature_level_record(MV, lv),
                                                                 feature_level_record(SHARE, share)]))
    code, so, _ = run(capsys, "storage", "info", d)
    assert code == 0
    assert (f"metadata.version={lv} (unknown: newer than kraftkit's newest, {_newest_name()}), "
            f"{SHARE}={share} (unknown: newer than kraftkit's newest, {newest_share()})") in so
    code, so, _ = run(capsys, "storage", "info", "--json", d)
    b = json.loads(so)["directories"][0]["bootstrap"]
    assert b["metadataVersion"] == {"level": lv, "name": None}
    assert [(u["feature"], u["level"], u["newestKnown"]) for u in b["unknownLevels"]] == \
        [(MV, lv, newest_mv()), (SHARE, share, newest_share())]


def test_validation_refuses_to_move_from_a_level_it_cannot_name():
    from kraftkit.features.validation import FeatureUpdate, UpgradeType, validate_updates

    lv = newest_mv() + 1
    res = validate_updates({MV: lv}, [FeatureUpdate(MV, 21, UpgradeType.UNSAFE_DOWNGRADE)], [])
    assert not res[0].ok
    assert f"finalized at {lv} (unknown: newer than kraftkit's newest, {_newest_name()})" in res[0].error
    res = validate_updates({MV: newest_mv(), SHARE: newest_share() + 1},
                           [FeatureUpdate(SHARE, 0, UpgradeType.SAFE_DOWNGRADE)], [])
    assert not res[0].ok and f"finalized at {newest_share() + 1} (unknown" in res[0].error


def test_loss_judgement_of_single_records_is_null_for_unknown_ones():
    from kraftkit.spark.udfs import losses_array

    top = _record_types()[3][2]
    known = feature_level_record(MV, newest_mv())
    newer_level = feature_level_record(MV, newest_mv() + 1)
    newer_share = feature_level_record(SHARE, newest_share() + 1)
    from kraftkit._core import encode_metadata_record

    pr = encode_metadata_record(3, top, {"PartitionId": 1})
    newer_pr = bytes([1, 3, top + 1]) + pr[3:]
    assert losses_array([known, newer_level, newer_share, pr, newer_pr], "3.9").to_pylist()[1:] == \
        [None, None, losses_array([pr], "3.9").to_pylist()[0], None]
    assert losses_array([known], "3.9").to_pylist() == [[]]


def test_spark_audit_refuses_downgrade_rows_from_a_newer_level(base, tmp_path):
    from kraftkit.spark.jobs import audit_cluster

    d = _newer_log(base, tmp_path, newest_mv() + 1)
    row, downs = audit_cluster("c", {"node-0": str(d)})
    assert downs == []
    assert row["metadata_version_level"] == newest_mv() + 1
    assert row["metadata_version"] == f"{newest_mv() + 1} (unknown: newer than kraftkit's newest, {_newest_name()})"
    assert f"metadata.version level {newest_mv() + 1} is newer than kraftkit knows" in row["error"]


def test_a_newer_target_is_a_usage_error_naming_the_newest(newer_mv_snapshot, tmp_path, capsys):
    code, so, err = run(capsys, "snapshot", "rewrite", newer_mv_snapshot, tmp_path, "--metadata-version", newest_mv() + 1)
    assert code == 2 and so == ""
    assert f"metadata.version level {newest_mv() + 1} is newer than kraftkit knows (newest: {_newest_name()})" in err
    assert [p.name for p in tmp_path.iterdir()] == ["newer-mv"]


def test_describe_and_image_of_a_log_directory_at_a_newer_level(base, tmp_path, capsys):
    lv = newest_mv() + 1
    d = _newer_log(base, tmp_path, lv, newest_share() + 1)
    code, so, err = run(capsys, "features", "describe", d.parent, "--json")
    assert code == 0, err
    got = json.loads(so)
    assert got["metadataVersion"] is None and got["finalized"] == {MV: lv, SHARE: newest_share() + 1}
    assert [u["feature"] for u in got["unknownLevels"]] == [MV, SHARE]
    code, so, _ = run(capsys, "metadata", "image", d, "--path", "/features", "--json")
    assert code == 0
    assert json.loads(so)["metadataVersion"] == f"{lv} (unknown: newer than kraftkit's newest, {_newest_name()})"


def test_a_feature_the_tables_lack_is_unknown_too(base, tmp_path, capsys):
    from kraftkit.metadata.versions import newest_known_levels

    name = "x" + max(newest_known_levels(), key=len)  # a name no table holds
    assert name not in newest_known_levels()
    _, snap = base
    vals = _values(snap) + [feature_level_record(name, 1)]
    s = _snapshot(tmp_path / "newer-feature", vals, _id(snap))
    out = tmp_path / "out"
    out.mkdir()
    code, so, err = run(capsys, "snapshot", "rewrite", s, out, "--metadata-version", "3.9")
    assert code == 2 and so == "" and f"feature {name} (level 1) is unknown to kraftkit; refusing to rewrite" in err
    assert list(out.iterdir()) == []
    code, so, _ = run(capsys, "features", "describe", s, "--json")
    assert code == 0
    assert [(u["feature"], u["level"], u["newestKnown"]) for u in json.loads(so)["unknownLevels"]] == [(name, 1, None)]
