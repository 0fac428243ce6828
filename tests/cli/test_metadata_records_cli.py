"""``kraftkit metadata records PATH [--json]`` as a user runs it: one line per record with its batch,
JSON with camelCase keys, exit 0 / 1 on damaged data / 2 on unreadable input."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from kraftkit.log import segment_name
from tests.cli.test_cli import run
from tests.cli.test_metadata_cli import RECORDS, metalog  # noqa: F401  (the fixture)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_json_lines_carry_the_batch_and_the_data_dump_prints(metalog: Path) -> None:  # noqa: F811
    lines = [json.loads(x) for x in run("metadata", "records", "--json", str(metalog), check=0).stdout.splitlines()]
    assert [x["offset"] for x in lines] == list(range(len(RECORDS)))
    for x in lines:
        assert all(re.fullmatch(r"[a-z][A-Za-z]*", k) for k in x), x  # camelCase, as kafka-dump-log prints
    seg = str(metalog / segment_name(0))
    assert {x["file"] for x in lines} == {seg}
    assert [(x["baseOffset"], x["lastOffset"]) for x in lines[:3]] == [(0, 1), (0, 1), (2, 3)]
    assert lines[0]["position"] == 0 and lines[2]["position"] > 0
    assert {x["partitionLeaderEpoch"] for x in lines} == {4} and not any(x["control"] for x in lines)
    # type, version and data as `metadata dump --json` prints them (Rust's own JSON, not re-encoded)
    dumped = [json.loads(x) for x in run("metadata", "dump", "--json", str(metalog), check=0).stdout.splitlines()]
    dumped = [x for x in dumped if "offset" in x]
    assert [{k: x[k] for k in ("offset", "type", "version", "data")} for x in lines] == dumped


def test_text_lines_and_control_records_of_a_kafka_snapshot() -> None:
    snap = next((FIXTURES / "kafka-4.3.1" / "data" / "__cluster_metadata-0").glob("*-0000000001.checkpoint"))
    out = run("metadata", "records", str(snap), check=0).stdout.splitlines()
    assert out[0] == f"# {snap}"
    assert re.fullmatch(r'0  SNAPSHOT_HEADER v0  batch 0\.\.\d+ at byte 0, epoch 1  \{"version":0,.*\}', out[1])
    assert re.fullmatch(r'(\d+)  SNAPSHOT_FOOTER v0  batch \1\.\.\1 at byte \d+, epoch 1  \{"version":0\}', out[-1])
    js = [json.loads(x) for x in run("metadata", "records", "--json", str(snap), check=0).stdout.splitlines()]
    assert js[0]["control"] is True and js[0]["type"] == "SNAPSHOT_HEADER" and js[-1]["type"] == "SNAPSHOT_FOOTER"
    assert len(js) == len(out) - 1


def test_exit_codes_and_messages(metalog: Path, tmp_path: Path) -> None:  # noqa: F811
    missing = run("metadata", "records", str(tmp_path / "missing"))
    assert missing.returncode == 2
    assert missing.stderr == f"kraftkit metadata records: {tmp_path / 'missing'}: no such file or directory\n"
    fifo = tmp_path / "00000000000000000000.log"
    os.mkfifo(fifo)
    proc = run("metadata", "records", str(fifo))
    assert proc.returncode == 2 and proc.stderr == f"kraftkit metadata records: {fifo}: not a regular file (a FIFO)\n"

    seg = metalog / segment_name(0)
    data = bytearray(seg.read_bytes())
    second = int(json.loads(run("metadata", "records", "--json", str(metalog), check=0).stdout.splitlines()[2])["position"])
    data[second + 70] ^= 0xFF  # inside the second batch's records
    seg.write_bytes(bytes(data))
    proc = run("metadata", "records", "--json", str(metalog))
    assert proc.returncode == 1
    assert [json.loads(x)["offset"] for x in proc.stdout.splitlines()] == [0, 1]  # the records before it
    assert proc.stderr.startswith(f"kraftkit metadata records: {seg}: ") and "CRC" in proc.stderr
    assert "base offset 2" in proc.stderr and f"position {second}" in proc.stderr


def test_a_hole_exits_1_unless_allowed(metalog: Path) -> None:  # noqa: F811
    seg = metalog / segment_name(0)
    lines = [json.loads(x) for x in run("metadata", "records", "--json", str(metalog), check=0).stdout.splitlines()]
    cut = lines[2]["position"], lines[4]["position"]
    data = seg.read_bytes()
    seg.write_bytes(data[: cut[0]] + data[cut[1] :])  # the batch of offsets 2..3 removed
    proc = run("metadata", "records", str(metalog))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"kraftkit metadata records: {seg}: offsets 2..3 are missing: the batch before ends at offset 1 "
        f"(batch base offset 4, byte position {cut[0]})",
        "kraftkit metadata records: refused: the log is not continuous (--allow-gaps goes on anyway)",
    ]
    proc = run("metadata", "records", "--allow-gaps", "--json", str(metalog), check=0)
    assert [json.loads(x)["offset"] for x in proc.stdout.splitlines()] == [0, 1, 4, 5]
    assert "kraftkit metadata records: warning: " in proc.stderr
