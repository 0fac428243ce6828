"""The kraftkit command as a user runs it: a real process, its output and its exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kraftkit.log import Log, Segment, encode_batch, segment_name

BASE_TS = 1_700_000_000_000


def run(*args: str, check: int | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "kraftkit.cli.main", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    if check is not None:
        assert proc.returncode == check, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


@pytest.fixture()
def partition(tmp_path: Path) -> Path:
    """A topic partition of 3 segments: 60 batches of 5 records (offsets 0..299), epochs 0..2."""
    d = tmp_path / "t-0"
    with Log(d, create=True, segment_bytes=16 * 1024) as log:
        for i in range(60):
            recs = [(BASE_TS + i * 5 + j, f"k{i}".encode(), f"value-{i}-{j}".encode() * 20, [("h", b"x")]) for j in range(5)]
            log.append(encode_batch(recs, base_offset=i * 5, partition_leader_epoch=i // 20))
    return d


def test_dump_log_text_counts_every_batch_and_record(partition: Path) -> None:
    files = sorted(partition.glob("*.log"))
    assert len(files) >= 3
    out = run("dump-log", "--deep", *map(str, files), check=0).stdout
    lines = out.splitlines()
    batch_lines = [l for l in lines if l.startswith("baseOffset:")]
    record_lines = [l for l in lines if l.startswith("| offset:")]
    assert len(batch_lines) == 60
    assert [int(l.split()[2]) for l in record_lines] == list(range(300))
    assert sum(l.startswith("Dumping ") for l in lines) == len(files)
    assert all("isvalid: true" in l for l in batch_lines)


def test_dump_log_json_lines(partition: Path) -> None:
    f = partition / segment_name(0)
    out = run("dump-log", "--json", "--print-data", str(f), check=0).stdout
    objs = [json.loads(l) for l in out.splitlines()]
    assert objs[0]["type"] == "file" and objs[-1]["type"] == "summary"
    batches = [o for o in objs if o["type"] == "batch"]
    assert batches[0]["baseOffset"] == 0 and batches[0]["count"] == 5
    rec = batches[1]["records"][2]
    assert rec["offset"] == 7 and rec["timestamp"] == BASE_TS + 7
    assert rec["key"] == "k1" and rec["payload"] == "value-1-2" * 20 and rec["headerKeys"] == ["h"]
    assert objs[-1]["batches"] == len(batches) and objs[-1]["error"] is None


def test_dump_log_reports_torn_tail_with_position(partition: Path, tmp_path: Path) -> None:
    src = (partition / segment_name(0)).read_bytes()
    torn = tmp_path / segment_name(0)
    torn.write_bytes(src[:-10])
    proc = run("dump-log", str(torn), check=1)
    assert "Found" in proc.stdout and "invalid bytes at the end" in proc.stdout
    assert str(torn) in proc.stderr and "byte position" in proc.stderr


def test_dump_log_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    proc = run("dump-log", str(tmp_path / "nope.log"), check=2)
    assert "no such file" in proc.stderr


def test_dump_log_into_a_pipe_closed_early_ends_quietly(partition: Path, monkeypatch, capsys) -> None:
    """`kraftkit dump-log ... | head`: the reader going away is not an error to report."""
    import io

    from kraftkit.cli.main import main

    class ClosedPipe(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, b) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    # unbuffered, so that the error comes at the first write, with nothing left to flush
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BufferedWriter(ClosedPipe(), buffer_size=1)))
    files = sorted(partition.glob("*.log"))
    assert main(["dump-log", "--deep", *map(str, files)]) == 0
    assert capsys.readouterr().err == ""


def test_dump_log_of_a_directory_says_so(tmp_path: Path) -> None:
    proc = run("dump-log", str(tmp_path), check=2)
    assert f"{tmp_path}: is a directory" in proc.stderr


def test_dump_log_max_bytes_stops_early_without_error(partition: Path) -> None:
    f = partition / segment_name(0)
    out = run("dump-log", "--max-bytes", "2000", str(f), check=0).stdout
    n = sum(l.startswith("baseOffset:") for l in out.splitlines())
    assert 0 < n < 20


def test_dump_log_start_up_imports_only_what_it_needs(partition: Path) -> None:
    # A small dump's time is mostly the interpreter starting: dump-log must not pull in modules it
    # does not use (pathlib, json and typing took ~8 ms of a ~30 ms run).
    f = partition / segment_name(0)
    code = (
        "import sys; from kraftkit.cli.main import main; sys.argv[1:] = ['dump-log', '--max-bytes', '500', %r]; "
        "rc = main(); print(sorted(m for m in ('pathlib', 'json', 'typing', 'kraftkit.log.log') if m in sys.modules), file=sys.stderr)"
    ) % str(f)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout.startswith(f"Dumping {f}\n")
    assert proc.stderr.strip().splitlines()[-1] == "[]"


def test_version_and_usage_errors(tmp_path: Path) -> None:
    assert run("--version", check=0).stdout.startswith("kraftkit ")
    assert "required: COMMAND" in run(check=2).stderr
    assert "invalid choice: 'nope'" in run("nope", check=2).stderr
    helptext = run("--help", check=0).stdout
    assert all(c in helptext for c in ("dump-log", "verify-log", "snapshot", "quorum", "spark"))
    # an unknown option is the subcommand's usage error, shown with its own usage line
    err = run("snapshot", "verify", "--bogus", "x", check=2).stderr
    assert err.startswith("usage: kraftkit snapshot verify ") and err.endswith(
        "kraftkit snapshot verify: error: unrecognized arguments: --bogus\n")
    assert "kraftkit features describe: error: unrecognized arguments: --nope" in run(
        "features", "describe", "--nope", check=2).stderr


def test_verify_log_good_and_bad(partition: Path) -> None:
    proc = run("verify-log", str(partition.parent), check=0)
    assert "all valid" in proc.stdout and "300 records" in proc.stdout
    # Flip one byte inside the records of the second segment's third batch: a CRC error
    # naming the file and the batch's byte position.
    second = partition / segment_name(sorted(int(p.stem) for p in partition.glob("*.log"))[1])
    victim = Segment(second).read_batches()[2]
    data = bytearray(second.read_bytes())
    data[victim.position + 70] ^= 0x40
    second.write_bytes(bytes(data))
    proc = run("verify-log", "--json", str(partition), check=1)
    part = json.loads(proc.stdout.splitlines()[0])
    assert any("CRC mismatch" in p and str(second) in p and f"byte position {victim.position}" in p for p in part["problems"])
    # Everything before the damage is still counted: the other segments and two batches.
    batches_from_victim_on = len(Segment(second).read_batches()) - 2
    assert part["records"] == 300 - 5 * batches_from_victim_on

def test_verify_log_catches_a_bad_index(partition: Path) -> None:
    idx = partition / segment_name(0, ".index")
    data = bytearray(idx.read_bytes())
    assert len(data) >= 8
    data[4:8] = (int.from_bytes(data[4:8], "big") + 1).to_bytes(4, "big")  # position off by one
    idx.write_bytes(bytes(data))
    proc = run("verify-log", str(partition), check=1)
    assert ".index: entry 0" in proc.stdout


def test_demo_runs_end_to_end() -> None:
    proc = run("demo", "--topics", "200", "--partitions", "4", check=0)
    assert "all valid" in proc.stdout


def test_snapshot_verify(tmp_path: Path) -> None:
    from kraftkit.metadata.generate import noop_record
    from kraftkit.metadata.snapshot import SnapshotId, SnapshotWriter

    with SnapshotWriter(tmp_path, SnapshotId(10, 2), last_contained_log_timestamp=BASE_TS) as w:
        w.append([noop_record()] * 5)
    good = w.final_path
    assert "OK: 3 batches, 5 metadata records" in run("snapshot", "verify", str(good), check=0).stdout
    bad = tmp_path / SnapshotId(10, 3).file_name
    bad.write_bytes(good.read_bytes())
    proc = run("snapshot", "verify", "--json", str(good), str(bad), check=1)
    a, b = (json.loads(line) for line in proc.stdout.splitlines())
    assert a["error"] is None and a["snapshotId"] == "10-2"
    assert "snapshot epoch 3" in b["error"]


def test_snapshot_rewrite_out_grammar_is_the_same_with_dry_run_and_never_overwrites(tmp_path: Path) -> None:
    """`snapshot rewrite IN OUT --dry-run` takes OUT as the output (not a second input) and writes
    nothing; `OUT/` that does not exist is a directory, made; a second run refuses the existing
    output (exit 2) instead of replacing it."""
    snap = Path(__file__).resolve().parents[2] / (
        "fixtures/kafka-3.9.2/data/__cluster_metadata-0/00000000000000000071-0000000001.checkpoint")
    out = tmp_path / "out"
    dry = run("snapshot", "rewrite", str(snap), f"{out}/", "--metadata-version", "3.5", "--dry-run", check=0)
    assert "(dry run)" in dry.stdout and not out.exists()
    done = run("snapshot", "rewrite", str(snap), f"{out}/", "--metadata-version", "3.5", check=0)
    written = out / snap.name
    assert written.is_file() and f"-> {written}" in done.stdout
    before = written.read_bytes()
    again = run("snapshot", "rewrite", str(snap), f"{out}/", "--metadata-version", "3.9", check=2)
    assert f"{written}: exists" in again.stderr and written.read_bytes() == before
    # a plain OUT name is a file, and an existing one is refused too
    file_out = tmp_path / "one.checkpoint"
    run("snapshot", "rewrite", str(snap), str(file_out), "--metadata-version", "3.5", check=0)
    assert file_out.is_file()
    assert "exists" in run("snapshot", "rewrite", str(snap), str(file_out), "--metadata-version", "3.5", check=2).stderr


def test_snapshot_verify_says_a_missing_file_is_missing(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    proc = run("snapshot", "verify", str(missing), check=2)
    assert proc.stderr == f"kraftkit snapshot verify: {missing}: No such file or directory\n"
    assert "is a directory" in run("snapshot", "verify", str(tmp_path), check=2).stderr
