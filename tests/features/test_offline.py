"""`kraftkit features` on a stopped node's metadata log (written by kraftkit's demo writer:
metadata.version 3.9-IV0, brokers supporting metadata.version 1..21)."""

from __future__ import annotations

import json

import pytest

from kraftkit.cli.main import main
from kraftkit.metadata.generate import METADATA_VERSION, write_metadata_log
from kraftkit.metadata.image import load_image
from kraftkit.metadata.snapshot import list_snapshots


@pytest.fixture()
def logdir(tmp_path):
    d = tmp_path / "meta" / "__cluster_metadata-0"
    d.mkdir(parents=True)
    write_metadata_log(d, topics=20, partitions=4, brokers=4, epochs=2, segment_bytes=16 * 1024)
    return d


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_describe(logdir, capsys):
    code, out, _ = run(capsys, "features", "describe", str(logdir.parent), "--json")
    assert code == 0
    d = json.loads(out)
    assert d["finalized"] == {"metadata.version": METADATA_VERSION} and d["metadataVersion"] == "3.9-IV0"
    assert [n["id"] for n in d["nodes"]] == [1, 2, 3, 4]
    assert d["nodes"][0]["supported"]["metadata.version"] == [1, METADATA_VERSION]


def test_upgrade_refused_when_brokers_do_not_support_it(logdir, capsys):
    code, _, err = run(capsys, "features", "upgrade", str(logdir), "--release-version", "4.0")
    assert code == 1
    assert "broker 1 (supports 1 (3.0-IV1)..21 (3.9-IV0))" in err and "Upgrade the software of broker 1" in err
    assert not list_snapshots(logdir)


def test_safe_downgrade_within_no_metadata_change_needs_no_unsafe(logdir, capsys, tmp_path):
    # 3.9-IV0 -> 3.7-IV2: nothing changed in between; the log is moved aside, nothing lost
    code, out, err = run(capsys, "features", "downgrade", str(logdir), "--release-version", "3.7-IV2",
                         "--backup", str(tmp_path / "bk"), "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["report"]["losses"] == [] and res["report"]["to"] == "3.7-IV2"
    img = load_image(logdir)
    assert img.metadata_version == 17 and len(img.topics) == 20
    assert sorted((tmp_path / "bk" / logdir.name).glob("*.log"))


def test_unsafe_downgrade_reports_losses_and_needs_a_backup(logdir, capsys, tmp_path):
    before = load_image(logdir)
    code, _, err = run(capsys, "features", "downgrade", str(logdir), "--release-version", "3.5")
    assert code == 1 and "Refusing to perform the requested downgrade" in err
    code, _, err = run(capsys, "features", "downgrade", str(logdir), "--release-version", "3.5", "--unsafe")
    assert code == 2 and "backup" in err
    code, out, _ = run(capsys, "features", "downgrade", str(logdir), "--release-version", "3.5", "--unsafe", "--dry-run")
    assert code == 0 and "LOST PartitionRecord.Directories: 80 record(s)" in out
    assert load_image(logdir) == before  # a dry run changes nothing
    code, out, err = run(capsys, "features", "downgrade", str(logdir), "--release-version", "3.5", "--unsafe",
                         "--backup", str(tmp_path / "bk"))
    assert code == 0, err
    after = load_image(logdir)
    assert after.metadata_version == 11
    assert {t.name for t in after.topics.values()} == {t.name for t in before.topics.values()}
    assert after.configs == before.configs
    assert "moved" in out and "LOST RegisterBrokerRecord.LogDirs: 4 record(s)" in out


def test_bad_requests(logdir, capsys):
    assert run(capsys, "features", "downgrade", str(logdir))[0] == 2
    assert run(capsys, "features", "upgrade", str(logdir), "--feature", "group.version")[0] == 2
    assert run(capsys, "features", "upgrade", str(logdir), "--feature", "kraft.version=1")[0] == 2
    assert run(capsys, "features", "describe", str(logdir / "nope"))[0] == 2
    code, _, err = run(capsys, "features", "upgrade", str(logdir), "--release-version", "9.9")
    assert code == 2 and "unknown metadata.version or release" in err


def test_a_downgrade_rewrites_the_bootstrap_checkpoint_beside_the_log(logdir, capsys, tmp_path):
    from kraftkit._core import encode_metadata_record
    from kraftkit.features.offline import describe
    from kraftkit.features.storage import bootstrap_checkpoint_bytes

    boot = logdir.parent / "bootstrap.checkpoint"
    level = encode_metadata_record(12, 0, {"Name": "metadata.version", "FeatureLevel": METADATA_VERSION})
    boot.write_bytes(bootstrap_checkpoint_bytes([level]))
    code, out, err = run(capsys, "features", "downgrade", str(logdir), "--release-version", "3.7-IV2",
                         "--backup", str(tmp_path / "bk"), "--json")
    assert code == 0, err
    assert json.loads(out)["bootstrapRewritten"] == [str(boot)]
    assert describe(boot).finalized == {"metadata.version": 17}
    # rewritten in place through a temporary file that is gone
    assert sorted(p.name for p in logdir.parent.iterdir()) == ["__cluster_metadata-0", "bootstrap.checkpoint"]


@pytest.mark.parametrize("release", ["4.4", "4.3"])
def test_a_formatted_node_that_never_ran_is_formatted_again_not_rewritten(tmp_path, capsys, release):
    """Right after storage format (either layout) there is no metadata log to rewrite: the
    refusal says to format again."""
    d = tmp_path / "meta"
    assert main(["storage", "format", "-t", "MkU3OEVBNTcwNTJENDM2Qg", "--node-id", "1", "-d", str(d),
                 "--release-version", release]) == 0
    capsys.readouterr()
    rc = main(["features", "downgrade", str(d), "--release-version", "3.9", "--unsafe", "--backup", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert rc == 2 and str(d) in err
    # 4.4's layout holds the bootstrap snapshot (an empty log after it); 4.3's no metadata log at all
    assert ("format it again" if release == "4.4" else "no metadata log segments or snapshots") in err
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())
