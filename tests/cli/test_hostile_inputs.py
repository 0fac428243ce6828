"""The kraftkit commands given hostile files and arguments: FIFOs, devices, directories, symbolic
link loops, dangling links, huge or malformed small files, out-of-range numbers. Each is
answered at once with a precise message naming the file and exit 2 (unreadable input or a bad
argument) or 1 (damaged data), never a hang or a traceback.

Commands that could block on a FIFO run as real processes with a subprocess timeout: a
regression fails the test instead of hanging the suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kraftkit._fs import SMALL_FILE_LIMIT
from kraftkit.cli.main import main
from kraftkit.features.storage import format_storage
from kraftkit.log import Log, Segment, encode_batch, segment_name
from kraftkit.metadata.records import encode_metadata_record
from kraftkit.metadata.snapshot import SnapshotId, SnapshotWriter

CID = "MkU3OEVBNTcwNTJENDM2Qk"
FEATURE_LEVEL = (12, 0, {"Name": "metadata.version", "FeatureLevel": 17})
#: 72e15 ms after the epoch is in the year 2283559, past the year 9999 a datetime can hold;
#: a record timestamp is any long, so Kafka writes it and its tools print the number.
FAR_FUTURE_MS = 72_000_000_000_000_000


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """The command as a process; a FIFO that hangs it fails the test (TimeoutExpired)."""
    proc = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONWARNINGS": "error"})
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def metadata_log(d: Path, ts: int = 1_700_000_000_000) -> Path:
    with Log(d, create=True) as log:
        log.append(encode_batch([(ts, None, encode_metadata_record(*FEATURE_LEVEL), ())], base_offset=0,
                                partition_leader_epoch=1))
    return d


# ------------------------------------------------------------------ FIFOs in place of files

@pytest.fixture()
def fifo_partition(tmp_path: Path) -> tuple[Path, Path]:
    """A log directory whose __cluster_metadata-0 holds a FIFO named like its first segment."""
    part = tmp_path / "logs" / "__cluster_metadata-0"
    part.mkdir(parents=True)
    fifo = part / segment_name(0)
    os.mkfifo(fifo)
    return part, fifo


@pytest.mark.parametrize("command", [
    ["verify-log"], ["metadata", "dump"], ["metadata", "image"], ["features", "describe"],
])
def test_a_fifo_segment_in_a_directory_is_refused_at_once(fifo_partition, command) -> None:
    part, fifo = fifo_partition
    proc = run(*command, str(part))
    assert proc.returncode == 2
    assert f"{fifo}: not a regular file (a FIFO)" in proc.stderr


def test_dump_log_refuses_a_fifo_segment(fifo_partition) -> None:
    _, fifo = fifo_partition
    proc = run("dump-log", str(fifo))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"kraftkit dump-log: {fifo}: not a regular file (a FIFO)\n"


def test_dump_log_refuses_a_fifo_index_and_devices(tmp_path: Path) -> None:
    d = metadata_log(tmp_path / "t-0")
    (d / segment_name(0, ".timeindex")).unlink()
    os.mkfifo(d / segment_name(0, ".timeindex"))
    proc = run("dump-log", str(d / segment_name(0, ".timeindex")), "/dev/zero", str(d / segment_name(0)))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"kraftkit dump-log: {d / segment_name(0, '.timeindex')}: not a regular file (a FIFO)",
        "kraftkit dump-log: /dev/zero: not a regular file (a character device)",
    ]
    assert f"Dumping {d / segment_name(0)}" in proc.stdout  # the good file is still dumped


@pytest.mark.parametrize("command", [["snapshot", "verify"], ["snapshot", "rewrite", "--metadata-version", "3.9",
                                                                 "--dry-run"]])
def test_a_fifo_snapshot_is_refused_at_once(tmp_path: Path, command) -> None:
    fifo = tmp_path / SnapshotId(5, 1).file_name
    os.mkfifo(fifo)
    proc = run(*command, str(fifo))
    assert proc.returncode == 2
    assert f"kraftkit snapshot {command[1]}: {fifo}: not a regular file (a FIFO)" in proc.stderr


def test_snapshot_rewrite_refuses_a_fifo_input_with_an_output(tmp_path: Path) -> None:
    fifo = tmp_path / SnapshotId(5, 1).file_name
    os.mkfifo(fifo)
    proc = run("snapshot", "rewrite", "--metadata-version", "3.9", str(fifo), str(tmp_path / "out.checkpoint"))
    assert proc.returncode == 2
    assert proc.stderr == f"kraftkit snapshot rewrite: {fifo}: not a regular file (a FIFO)\n"
    assert not (tmp_path / "out.checkpoint").exists() and not (tmp_path / "out.checkpoint.part").exists()


def test_a_fifo_meta_properties(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    format_storage([d], cluster_id=CID, node_id=1)
    metadata_log(d / "__cluster_metadata-0")
    mp = d / "meta.properties"
    mp.unlink()
    os.mkfifo(mp)
    proc = run("storage", "info", str(d))
    assert proc.returncode == 2
    assert proc.stderr == f"kraftkit storage info: {mp}: not a regular file (a FIFO)\n"
    assert f"Error loading {mp}: not a regular file (a FIFO)" in proc.stdout
    proc = run("storage", "info", "--json", str(d))
    assert proc.returncode == 2 and json.loads(proc.stdout)["unreadable"] == [f"{mp}: not a regular file (a FIFO)"]
    # features describe reads the metadata log, not meta.properties: it answers, and promptly
    proc = run("features", "describe", str(d))
    assert proc.returncode == 0 and "metadata.version" in proc.stdout
    proc = run("features", "describe", str(mp))
    assert proc.returncode == 2
    assert proc.stderr == f"kraftkit features describe: {mp}: not a regular file (a FIFO)\n"
    proc = run("storage", "format", "-t", CID, "--node-id", "1", "-d", str(d))
    assert proc.returncode == 2
    assert proc.stderr == (f"kraftkit storage format: I/O error trying to read log directory {d}: "
                           f"{mp}: not a regular file (a FIFO)\n")


# ------------------------------------------------------------- hostile meta.properties

@pytest.fixture()
def formatted(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    format_storage([d], cluster_id=CID, node_id=1)
    return d


def _info(capsys, *dirs: Path) -> tuple[int, str, str]:
    rc = main(["storage", "info", *map(str, dirs)])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_meta_properties_that_is_dev_zero(formatted: Path, capsys) -> None:
    mp = formatted / "meta.properties"
    mp.unlink()
    mp.symlink_to("/dev/zero")  # read whole, it never ends (it was a MemoryError)
    rc, out, err = _info(capsys, formatted)
    assert rc == 2
    assert err == f"kraftkit storage info: {mp}: not a regular file (a character device)\n"


def test_a_huge_meta_properties_is_refused_by_its_size(formatted: Path, capsys) -> None:
    mp = formatted / "meta.properties"
    with open(mp, "r+b") as f:
        f.truncate(SMALL_FILE_LIMIT + 1)
    rc, _, err = _info(capsys, formatted)
    assert rc == 2
    assert err == (f"kraftkit storage info: {mp}: {SMALL_FILE_LIMIT + 1} bytes: too large for a meta.properties "
                   f"file (at most {SMALL_FILE_LIMIT} bytes)\n")


def test_meta_properties_as_a_directory_or_a_dangling_link(formatted: Path, capsys) -> None:
    mp = formatted / "meta.properties"
    mp.unlink()
    mp.mkdir()
    rc, _, err = _info(capsys, formatted)
    assert rc == 2 and err == f"kraftkit storage info: {mp}: is a directory, not a file\n"
    mp.rmdir()
    mp.symlink_to(formatted / "gone")
    rc, _, err = _info(capsys, formatted)
    assert rc == 2 and err == f"kraftkit storage info: {mp}: dangling symbolic link (to {formatted / 'gone'})\n"


def test_a_non_utf8_meta_properties_is_read_as_latin1(formatted: Path, capsys) -> None:
    mp = formatted / "meta.properties"
    mp.write_bytes(mp.read_bytes() + b"owner=J\xf6rg\n")  # ISO-8859-1, as Properties.load reads
    assert main(["storage", "info", "--json", str(formatted)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["metadata"]["owner"] == "J\u00f6rg" and info["metadata"]["node.id"] == "1"


@pytest.mark.parametrize("text,problem", [
    ("version=1\ncluster.id=x\nnode.id=\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669\u0660\u0661\n",
     "Failed to parse node.id property as an int"),
    ("version=1\ncluster.id=x\nnode.id=" + "9" * 5000 + "\n", "Failed to parse node.id property as an int"),
    ("version=7\n", "Unknown meta.properties version number 7"),
    ("version=1\ncluster.id=x\nnode.id=1\ndirectory.id=\\u12\n", "malformed \\uxxxx encoding"),
])
def test_malformed_meta_properties_are_problems_not_tracebacks(formatted: Path, capsys, text, problem) -> None:
    (formatted / "meta.properties").write_text(text, encoding="utf-8")
    rc, out, err = _info(capsys, formatted)
    assert rc == 1 and err == ""
    assert f"Error loading {formatted / 'meta.properties'}: " in out and problem in out


def test_an_empty_meta_properties(formatted: Path, capsys) -> None:
    (formatted / "meta.properties").write_bytes(b"")
    rc, out, _ = _info(capsys, formatted)
    # no version: 0, ZooKeeper's layout (as Kafka's MetaProperties reads it)
    assert rc == 1 and "formatted for legacy (ZooKeeper) mode" in out


def test_storage_info_of_a_symlink_loop_and_a_dangling_directory(tmp_path: Path, capsys) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    rc, out, err = _info(capsys, loop, dangling)
    assert rc == 2 and err == f"kraftkit storage info: {loop}: Too many levels of symbolic links\n"
    assert f"{dangling} does not exist (a dangling symbolic link)" in out


def test_storage_format_into_hostile_directories(tmp_path: Path, capsys) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    for d, msg in ((loop, f"I/O error trying to read log directory {loop}: Too many levels of symbolic links"),
                   (dangling, f"{dangling} is a dangling symbolic link (to {tmp_path / 'gone'})")):
        assert main(["storage", "format", "-t", CID, "--node-id", "1", "-d", str(d)]) == 2
        assert capsys.readouterr().err == f"kraftkit storage format: {msg}\n"
    assert not (tmp_path / "gone").exists()


# ----------------------------------------------------------------- numeric arguments

@pytest.mark.parametrize("args,msg", [
    (["dump-log", "--max-bytes", "-1", "x.log"], "argument --max-bytes: must be from 0 to 9223372036854775807 bytes, not -1"),
    (["dump-log", "--max-bytes", str(2**64), "x.log"], f"must be from 0 to 9223372036854775807 bytes, not {2**64}"),
    (["dump-log", "--max-bytes", "1e3", "x.log"], "argument --max-bytes: '1e3' is not a whole number"),
    (["dump-log", "--max-bytes", "\u0661", "x.log"], "argument --max-bytes: '\u0661' is not a whole number"),
    (["dump-log", "--max-bytes", "9" * 5000, "x.log"], "must be from 0 to 9223372036854775807 bytes, not 999999999999999999999999... (5000 characters)"),
    (["storage", "format", "-t", CID, "-d", "x", "--node-id", "-1"], "argument --node-id: must be from 0 to 2147483647, not -1"),
    (["storage", "format", "-t", CID, "-d", "x", "--node-id", str(2**31)], f"must be from 0 to 2147483647, not {2**31}"),
])
def test_numeric_arguments_are_range_checked(capsys, args, msg) -> None:
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    assert msg in capsys.readouterr().err


@pytest.mark.parametrize("args,msg", [
    (["--release-version", "9" * 5000], "Unknown metadata.version '999"),
    (["--release-version", "\u00b2"], "Unknown metadata.version '\u00b2'"),
    (["--standalone", "--controller-listener", "CONTROLLER://h:" + "9" * 5000], "invalid controller listener"),
])
def test_storage_format_numbers_in_strings(tmp_path: Path, capsys, args, msg) -> None:
    assert main(["storage", "format", "-t", CID, "--node-id", "1", "-d", str(tmp_path / "a"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kraftkit storage format: ") and msg in err
    assert not (tmp_path / "a").exists()


# ------------------------------------------------------------ out-of-range timestamps

def test_metadata_image_with_a_timestamp_past_year_9999(tmp_path: Path, capsys) -> None:
    d = metadata_log(tmp_path / "logs" / "__cluster_metadata-0", ts=FAR_FUTURE_MS)
    assert main(["metadata", "image", str(d), "--path", "/provenance"]) == 0
    prov = json.loads(capsys.readouterr().out)
    assert prov == {"offset": 0, "epoch": 1, "timestamp": FAR_FUTURE_MS,
                    "time": f"{FAR_FUTURE_MS} (out of range for a date: later than year 9999)"}
    assert main(["metadata", "image", str(d), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["provenance"]["timestamp"] == FAR_FUTURE_MS
    # an ordinary timestamp is still a date
    d2 = metadata_log(tmp_path / "logs2" / "__cluster_metadata-0", ts=1_700_000_000_123)
    assert main(["metadata", "image", str(d2), "--path", "/provenance"]) == 0
    assert json.loads(capsys.readouterr().out)["time"] == "2023-11-14T22:13:20.123000+00:00"


def test_snapshot_with_a_timestamp_past_year_9999(tmp_path: Path, capsys) -> None:
    with SnapshotWriter(tmp_path, SnapshotId(1, 1), last_contained_log_timestamp=FAR_FUTURE_MS) as w:
        w.append([encode_metadata_record(*FEATURE_LEVEL)])
    assert main(["snapshot", "verify", str(w.final_path)]) == 0
    assert f"last contained log timestamp {FAR_FUTURE_MS}" in capsys.readouterr().out
    assert main(["metadata", "image", str(w.final_path), "--path", "/provenance"]) == 0
    assert json.loads(capsys.readouterr().out)["time"] == f"{FAR_FUTURE_MS} (out of range for a date: later than year 9999)"


# ---------------------------------------------------------------- snapshot rewrite paths

@pytest.fixture()
def snapshot(tmp_path: Path) -> Path:
    with SnapshotWriter(tmp_path, SnapshotId(1, 1), last_contained_log_timestamp=1000) as w:
        w.append([encode_metadata_record(*FEATURE_LEVEL)])
    return w.final_path


def _rewrite(capsys, *paths: str) -> tuple[int, str]:
    rc = main(["snapshot", "rewrite", "--metadata-version", "3.9", *paths])
    return rc, capsys.readouterr().err


def test_snapshot_rewrite_with_symlink_loops(tmp_path: Path, snapshot: Path, capsys) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    rc, err = _rewrite(capsys, str(loop), str(tmp_path / "out.checkpoint"))
    assert rc == 2 and err == f"kraftkit snapshot rewrite: {loop}: Too many levels of symbolic links\n"
    rc, err = _rewrite(capsys, str(snapshot), str(loop))  # (Path.resolve raised RuntimeError)
    assert rc == 2 and err == f"kraftkit snapshot rewrite: {loop}: cannot write there: Too many levels of symbolic links\n"
    assert loop.is_symlink()


def test_snapshot_rewrite_refuses_special_outputs(tmp_path: Path, snapshot: Path, capsys) -> None:
    fifo = tmp_path / "out.checkpoint"
    os.mkfifo(fifo)
    rc, err = _rewrite(capsys, str(snapshot), str(fifo))
    assert rc == 2 and err == f"kraftkit snapshot rewrite: {fifo}: the output exists and is a FIFO, not a regular file\n"
    # the output is renamed into place: over a device node it would replace it
    rc, err = _rewrite(capsys, str(snapshot), "/dev/null")
    assert rc == 2 and err == "kraftkit snapshot rewrite: /dev/null: the output exists and is a character device, not a regular file\n"
    assert Path("/dev/null").is_char_device()
    hard = tmp_path / "hard.checkpoint"
    os.link(snapshot, hard)
    rc, err = _rewrite(capsys, str(snapshot), str(hard))
    assert rc == 2 and "refusing to rewrite a snapshot onto itself" in err


def test_snapshot_rewrite_refuses_a_stale_part_fifo(tmp_path: Path, snapshot: Path, capsys) -> None:
    out = tmp_path / "out" / "x.checkpoint"
    out.parent.mkdir()
    os.mkfifo(out.parent / "x.checkpoint.part")  # opened for writing, it would block for a reader
    rc, err = _rewrite(capsys, str(snapshot), str(out))
    assert rc == 2 and err == f"kraftkit snapshot rewrite: {out}.part: not a regular file (a FIFO)\n"
    assert not out.exists()


def test_snapshot_rewrite_of_a_directory_or_an_empty_file(tmp_path: Path, capsys) -> None:
    rc, err = _rewrite(capsys, str(tmp_path), str(tmp_path / "o.checkpoint"))
    assert rc == 2 and err == f"kraftkit snapshot rewrite: {tmp_path}: is a directory, not a file\n"
    empty = tmp_path / SnapshotId(1, 1).file_name
    empty.write_bytes(b"")
    rc, err = _rewrite(capsys, str(empty), str(tmp_path / "o.checkpoint"))
    # damage in the data, 1, as snapshot verify, metadata image and features describe say of it too
    assert rc == 1 and err == f"kraftkit snapshot rewrite: {empty}: empty snapshot: no batches\n"
    assert not (tmp_path / "o.checkpoint").exists() and not (tmp_path / "o.checkpoint.part").exists()


# ----------------------------------------------------------------- dump-log problems on stderr

@pytest.fixture()
def damaged(tmp_path: Path) -> tuple[Path, list]:
    """A segment of 5 one-record batches whose third batch fails its CRC check."""
    d = tmp_path / "t-0"
    with Log(d, create=True) as log:
        for i in range(5):
            log.append(encode_batch([(1000 + i, b"k", b"v" * 50, ())], base_offset=i, partition_leader_epoch=0))
    f = d / segment_name(0)
    batches = Segment(f).read_batches()
    data = bytearray(f.read_bytes())
    data[batches[2].position + 70] ^= 0x40  # inside the records: the stored CRC no longer matches
    bad = tmp_path / "bad.log"
    bad.write_bytes(bytes(data))
    return bad, batches


@pytest.mark.parametrize("mode", [[], ["--json"], ["--deep"]])
def test_dump_log_names_each_crc_failure_on_stderr(damaged, mode) -> None:
    bad, batches = damaged
    proc = run("dump-log", *mode, str(bad))
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1
    line = lines[0]
    assert line.startswith(f"kraftkit dump-log: {bad}: CRC mismatch: stored ")
    assert line.endswith(f"(batch base offset 2, byte position {batches[2].position})")
    if mode == ["--json"]:
        rows = [json.loads(x) for x in proc.stdout.splitlines()]
        assert [r["crc"] == batches[2].crc for r in rows if r["type"] == "batch"].count(True) == 1
        assert rows[-1]["invalidBatches"] == 1
    else:
        assert proc.stdout.count("isvalid: false") == 1  # stdout keeps kafka-dump-log's format


def test_dump_log_max_bytes_does_not_hide_a_torn_tail(tmp_path: Path, damaged) -> None:
    _, batches = damaged
    good = tmp_path / "t-0" / segment_name(0)
    torn = tmp_path / "torn.log"
    torn.write_bytes(good.read_bytes()[:-10])
    last = batches[-1].position
    for args in ([], ["--max-bytes", "100000"]):  # a cut past the end of the file: the tear is damage
        proc = run("dump-log", *args, str(torn))
        assert proc.returncode == 1
        assert f"kraftkit dump-log: {torn}: " in proc.stderr and f"(batch base offset 4, byte position {last})" in proc.stderr
    # a cut inside an intact batch is where --max-bytes stops, not damage
    proc = run("dump-log", "--max-bytes", str(batches[1].position + 20), str(torn))
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout.count("baseOffset:") == 1
    # a cut inside the torn batch: it is torn in the file, whatever the cut
    proc = run("dump-log", "--max-bytes", str(last + 20), str(torn))
    assert proc.returncode == 1 and f"(batch base offset 4, byte position {last})" in proc.stderr


def test_dump_log_locates_non_consecutive_offsets(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    with Log(d, create=True) as log:
        log.append(encode_batch([(1, b"k", b"v", ())], base_offset=0))
        log.append(encode_batch([(2, b"k", b"v", ())], base_offset=1))
    f = d / segment_name(0)
    data = bytearray(f.read_bytes())
    second = Segment(f).read_batches()[1].position
    data[second:second + 8] = (7).to_bytes(8, "big")  # base offset 1 -> 7 (outside the CRC)
    gap = tmp_path / segment_name(0)
    gap.write_bytes(bytes(data))
    assert run("dump-log", str(gap)).stderr == ""  # records (and their offsets) are read with --deep
    proc = run("dump-log", "--deep", str(gap))
    assert proc.returncode == 0  # compaction leaves such gaps: a note, not damage
    assert proc.stderr == (f"kraftkit dump-log: {gap}: non-consecutive offsets: 0 is followed by 7 "
                           f"(batch base offset 7, byte position {second})\n")


@pytest.mark.parametrize("spec,msg", [
    ("transaction.version=" + "9" * 30, "the level must be from -32768 to 32767"),
    ("transaction.version=-32769", "the level must be from -32768 to 32767"),
    ("transaction.version=\u00b2", "expected NAME=LEVEL"),  # isdigit() is true for it, int() refuses it
    ("transaction.version", "expected NAME=LEVEL"),
])
def test_features_levels_are_checked(tmp_path: Path, capsys, spec, msg) -> None:
    d = metadata_log(tmp_path / "logs" / "__cluster_metadata-0")
    assert main(["features", "upgrade", str(d), "--feature", spec, "--dry-run"]) == 2
    assert capsys.readouterr().err == f"kraftkit features upgrade: --feature {spec!r}: {msg}\n"
    assert main(["features", "upgrade", str(d), "--release-version", "\u00b2", "--dry-run"]) == 2
    assert "unknown metadata.version or release '\u00b2'" in capsys.readouterr().err


@pytest.mark.parametrize("value,reason", [
    (b"\xff\xff\xff", "record at offset 1: Could not read frame version"),
    (encode_metadata_record(12, 0, {"Name": "x", "FeatureLevel": 1})[:3], "record at offset 1: "),
])
def test_a_bootstrap_checkpoint_with_undecodable_records(tmp_path: Path, capsys, value, reason) -> None:
    from kraftkit.features.storage import bootstrap_checkpoint_bytes

    d = tmp_path / "logs"
    format_storage([d], cluster_id=CID, node_id=1)
    boot = d / "bootstrap.checkpoint"
    boot.write_bytes(bootstrap_checkpoint_bytes([value]))  # CRCs fine, the record inside is not
    rc, out, err = _info(capsys, d)
    assert rc == 1 and err == ""
    assert f"Error loading {boot}: {reason}" in out
    # damaged metadata, not unreadable input: 1, and the message names the file
    assert main(["features", "describe", str(boot)]) == 1
    assert capsys.readouterr().err.startswith(f"kraftkit features describe: {boot}: {reason}")
