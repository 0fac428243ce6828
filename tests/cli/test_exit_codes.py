"""One exit code for one condition, whatever the command (README, "Command-line tools"):
a CRC mismatch is 1 everywhere, an existing output is 2 everywhere; and ``features describe``
of a freshly formatted directory reads its bootstrap metadata."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kraftkit.cli.main import main

DATA = Path(__file__).resolve().parents[2] / "fixtures" / "kafka-4.4.0" / "data"
SNAPSHOT = DATA / "__cluster_metadata-0" / "00000000000000000080-0000000001.checkpoint"
CID = "MkU3OEVBNTcwNTJENDM2Qg"


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def _formatted(tmp_path: Path, capsys, release: str = "3.9", *extra: str) -> Path:
    d = tmp_path / "node"
    code, _, err = run(capsys, "storage", "format", "-t", CID, "--node-id", 1, "-d", d, "-r", release,
                       "--layout", "bootstrap-file", *extra)
    assert code == 0, err
    return d


# ------------------------------------------------------------------ a CRC mismatch: 1


@pytest.fixture
def damaged(tmp_path) -> Path:
    """The 4.4 fixture without its newer snapshot and with one byte of the metadata log's second
    batch (offsets 3..11, byte position 174) flipped."""
    d = tmp_path / "damaged"
    shutil.copytree(DATA, d)
    (d / SNAPSHOT.relative_to(DATA)).unlink()
    _flip(d / "__cluster_metadata-0" / "00000000000000000000.log", 200)
    return d


@pytest.mark.parametrize("argv", [
    ["dump-log", "{log}"],
    ["verify-log", "{dir}"],
    ["metadata", "dump", "{dir}"],
    ["metadata", "image", "{dir}"],
    ["features", "describe", "{dir}"],
    ["features", "describe", "{log}"],
    ["snapshot", "create", "{dir}", "--at", "80", "--out", "{out}"],
    ["metadata", "records", "{dir}"],
    # the offline changes read the log before they validate anything (they were 2)
    ["features", "upgrade", "{dir}", "--release-version", "4.4", "--dry-run"],
    ["features", "downgrade", "{dir}", "--release-version", "3.9", "--unsafe", "--dry-run"],
    ["features", "disable", "{dir}", "--feature", "group.version", "--dry-run"],
])
def test_a_crc_mismatch_is_exit_1_for_every_command(damaged, tmp_path, capsys, argv):
    (tmp_path / "out").mkdir()
    log = damaged / "__cluster_metadata-0" / "00000000000000000000.log"
    args = [a.format(log=log, dir=damaged, out=tmp_path / "out") for a in argv]
    code, out, err = run(capsys, *args)
    assert code == 1, err
    said = err + out  # (verify-log lists the problems in its report, on stdout)
    assert "CRC" in said and "byte position 174" in said, said


def test_a_crc_mismatch_in_a_snapshot_is_exit_1_and_located_once(tmp_path, capsys):
    """A damaged snapshot: ``snapshot rewrite`` of it was 2, and the commands that check a directory's
    snapshot before reading it said its batch offset and byte position twice."""
    from kraftkit.log import Segment

    d = tmp_path / "node"
    shutil.copytree(DATA, d)
    snap = d / SNAPSHOT.relative_to(DATA)
    second = list(Segment(SNAPSHOT).batches())[1]  # the records' batch (the first holds the header)
    _flip(snap, second.position + 100)
    where = f"(batch base offset {second.base_offset}, byte position {second.position})"
    (tmp_path / "out").mkdir()
    for argv in (["snapshot", "rewrite", snap, tmp_path / "out" / "x.checkpoint", "--metadata-version", "3.9"],
                 ["snapshot", "verify", snap], ["metadata", "image", d], ["metadata", "dump", d],
                 ["metadata", "records", d], ["features", "describe", d],
                 ["features", "upgrade", d, "--release-version", "4.4", "--dry-run"]):
        code, out, err = run(capsys, *argv)
        said = err + out
        assert code == 1, (argv, said)
        assert f"{snap}: CRC mismatch: " in said and said.count(where) == 1, (argv, said)
        if argv[:2] != ["snapshot", "verify"]:  # (its report is on stdout) the error names the command run
            assert err.startswith(f"kraftkit {argv[0]} {argv[1]}: {snap}: CRC mismatch: "), (argv, err)
    assert not (tmp_path / "out" / "x.checkpoint").exists()


def test_a_crc_mismatch_in_a_formatted_directorys_bootstrap_file_is_exit_1_everywhere(tmp_path, capsys):
    """features describe of the directory was 2 ("no metadata log segments or snapshots"): it now
    reads the bootstrap.checkpoint, and a damaged one is a problem in the data, as elsewhere."""
    d = _formatted(tmp_path, capsys)
    boot = d / "bootstrap.checkpoint"
    _flip(boot, boot.stat().st_size - 5)
    for argv in (["features", "describe", d], ["features", "describe", boot], ["snapshot", "verify", boot],
                 ["metadata", "image", boot], ["storage", "info", d]):
        code, _, err = run(capsys, *argv)
        assert code == 1, (argv, err)
    code, _, err = run(capsys, "features", "describe", d)
    assert err == f"kraftkit features describe: {boot}: CRC mismatch: " + err.split("CRC mismatch: ", 1)[1]


# ------------------------------------------------------------------ an existing output: 2


def test_storage_format_of_a_formatted_directory_is_exit_2_as_every_existing_output(tmp_path, capsys):
    d = _formatted(tmp_path, capsys)
    code, _, err = run(capsys, "storage", "format", "-t", CID, "--node-id", 1, "-d", d)
    assert code == 2 and f"Log directory {d} is already formatted" in err, err
    # formatted for another cluster or node: the output exists too
    code, _, err = run(capsys, "storage", "format", "-t", "a3JhZnRraXQtZml4dHVyZQ", "--node-id", 1, "-d", d)
    assert code == 2 and "Invalid cluster.id" in err, err
    code, _, err = run(capsys, "storage", "format", "-t", CID, "--node-id", 2, "-d", d)
    assert code == 2 and "Stored node id 1 doesn't match" in err, err
    # a file where the directory is to be
    (tmp_path / "file").write_text("x")
    code, _, err = run(capsys, "storage", "format", "-t", CID, "--node-id", 1, "-d", tmp_path / "file")
    assert code == 2 and "is not a directory" in err, err


def test_every_command_that_writes_refuses_an_existing_output_with_2(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    assert run(capsys, "snapshot", "create", DATA, "--at", 80, "--out", out)[0] == 0
    written = out / SNAPSHOT.name
    code, _, err = run(capsys, "snapshot", "create", DATA, "--at", 80, "--out", out)
    assert code == 2 and f"{written}: already exists" in err, err
    code, _, err = run(capsys, "snapshot", "rewrite", "--metadata-version", "3.9", SNAPSHOT, written)
    assert code == 2 and f"{written}: exists" in err, err
    d = _formatted(tmp_path, capsys)
    code, _, err = run(capsys, "storage", "format", "-t", CID, "--node-id", 1, "-d", d)
    assert code == 2, err
    node = tmp_path / "copy"
    shutil.copytree(DATA, node)
    backup = tmp_path / "backup"
    (backup / "__cluster_metadata-0").mkdir(parents=True)
    (backup / "__cluster_metadata-0" / "00000000000000000000.log").write_bytes(b"")
    code, _, err = run(capsys, "features", "downgrade", node, "--release-version", "3.9", "--unsafe",
                       "--backup", backup)
    assert code == 2 and "the backup directory is not empty" in err, err


# ------------------------------------------------------------------ a formatted node's features


def test_features_describe_of_a_freshly_formatted_directory_reads_its_bootstrap_file(tmp_path, capsys):
    d = _formatted(tmp_path, capsys, "3.9")
    code, out, err = run(capsys, "features", "describe", d)
    assert code == 0, err
    assert "metadata.version                     finalized 21 (3.9-IV0)" in out
    assert f"the levels of {d / 'bootstrap.checkpoint'}, which the node bootstraps from" in out
    code, out, _ = run(capsys, "features", "describe", "--json", d)
    assert code == 0 and '"finalized":{"metadata.version":21}' in out


def test_a_bootstrap_snapshot_with_only_voters_adds_kraft_version_to_the_bootstrap_files_levels(tmp_path, capsys):
    """Kafka 4.3's layout with --standalone: the feature levels in bootstrap.checkpoint, the voters
    (kraft.version 1) in the bootstrap snapshot."""
    d = _formatted(tmp_path, capsys, "4.3", "--standalone", "--controller-listener", "CONTROLLER://127.0.0.1:9093")
    code, out, err = run(capsys, "features", "describe", "--json", d)
    assert code == 0, err
    import json

    got = json.loads(out)["finalized"]
    assert got["kraft.version"] == 1 and got["metadata.version"] == 30 and got["transaction.version"] == 2


# ------------------------------------------------------------------ a path that is not there: 2


@pytest.mark.parametrize("argv", [
    ["verify-log", str(DATA), "/nonexistent"],
    ["dump-log", str(DATA / "codec-none-0" / "00000000000000000000.log"), "/nonexistent"],
])
def test_a_missing_path_among_good_ones_is_exit_2_for_every_command(capsys, argv):
    """verify-log said 1 (problems in the data) for a path that is not there; dump-log said 2."""
    code, _, err = run(capsys, *argv)
    assert code == 2 and "/nonexistent: no such file" in err, err
