"""``kraftkit spark ...`` in this process (the session fixture's SparkSession is reused)."""

from __future__ import annotations

import json

import pytest

from kraftkit.cli import verify_log
from kraftkit.cli.main import main
from kraftkit.log import Segment

pytestmark = pytest.mark.spark


def json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_generate_then_scan(spark, tmp_path, capsys):
    root = tmp_path / "f"
    assert main(["spark", "generate", str(root), "--clusters", "2", "--nodes", "2", "--topics", "5:10", "--json"]) == 0
    gen = json_lines(capsys.readouterr().out)[0]
    assert gen["clusters"] == 2 and gen["damage"] == []
    assert main(["spark", "scan", str(root), "--json"]) == 0
    lines = json_lines(capsys.readouterr().out)
    total = lines[-1]
    want = sum(b.count for p in sorted(root.rglob("*")) if p.suffix in (".log", ".checkpoint") for b in Segment(p).batches())
    assert total["rows"] == want and total["damaged_rows"] == 0
    assert {x["cluster"] for x in lines[:-1]} == {"cluster-000", "cluster-001"}


def test_verify_exit_code_and_json(spark, fleet, capsys):
    assert main(["spark", "verify", fleet.root, "--json", "--no-progress"]) == 1
    lines = json_lines(capsys.readouterr().out)
    parts, _ = verify_log.find_partitions([fleet.root])
    verify_log.verify(parts, deep=True, check_indexes=True)
    assert sorted(x["message"] for x in lines if x["type"] == "problem") == sorted(p for part in parts for p in part.problems)


def test_usage_errors_exit_2(spark, tmp_path, capsys):
    assert main(["spark", "audit", str(tmp_path / "nothing-here")]) == 2
    assert "no metadata" in capsys.readouterr().err
    assert main(["spark", "rewrite", str(tmp_path), "--metadata-version", "3.5"]) == 2  # no --out
