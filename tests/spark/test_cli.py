"""``kraftkit spark ...`` in this process (the session fixture's SparkSession is reused)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

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
    assert total["rows"] == want and total["damagedRows"] == 0  # camelCase JSON since the one JSON style
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


def test_format_kraft_works_in_a_fresh_session_without_register(fleet, tmp_path):
    """Spark registers ``pyspark_kraft.DefaultSource`` on its own (a fresh process, no kraftkit import)."""
    script = tmp_path / "fresh.py"
    script.write_text(
        "import os, sys\n"
        "os.environ['PYSPARK_PYTHON'] = sys.executable\n"
        "from pyspark.sql import SparkSession\n"
        "s = (SparkSession.builder.master('local[1]').config('spark.driver.host', '127.0.0.1')\n"
        "     .config('spark.driver.bindAddress', '127.0.0.1').config('spark.ui.enabled', 'false').getOrCreate())\n"
        "print('ROWS', s.read.format('kraft').load(sys.argv[1]).count())\n"
        "s.stop()\n")
    node = f"{fleet.root}/{fleet.clusters[2].name}/node-0"
    proc = subprocess.run([sys.executable, str(script), node], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = sum(b.count for f in sorted(Path(node).rglob("*")) if f.suffix in (".log", ".checkpoint")
               for b in Segment(f).batches())
    assert f"ROWS {want}" in proc.stdout


def test_clusters_named_by_meta_properties_and_the_output_says_so(spark, formatted_fleet, fleet, capsys):
    """A fleet at .../data/ux/{demo,other} formatted by `kraftkit storage format`: scan and verify
    name cluster <cluster.id> and nodes 1 and 2, and say which rule named them."""
    root, cid, nodes = formatted_fleet
    want = sum(b.count for d in nodes for f in sorted(d.rglob("*")) if f.suffix in (".log", ".checkpoint")
               and f.parent.name == "__cluster_metadata-0" for b in Segment(f).batches())
    assert main(["spark", "scan", str(root), "--json"]) == 0
    lines = json_lines(capsys.readouterr().out)
    assert [x for x in lines if x["type"] == "naming"] == [
        {"type": "naming", "directory": str(d), "cluster": cid, "node": str(n), "namedBy": "meta.properties"}
        for d, n in nodes.items()]
    assert {x["cluster"] for x in lines if x["type"] == "count"} == {cid}
    assert lines[-1]["rows"] == want
    assert main(["spark", "scan", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("2 node(s) named by meta.properties (cluster.id, node.id): ")
    assert main(["spark", "scan", str(root), "--naming", "path", "--json"]) == 0
    lines = json_lines(capsys.readouterr().out)
    assert {x["cluster"] for x in lines if x["type"] == "count"} == {"ux"}
    assert {x["namedBy"] for x in lines if x["type"] == "naming"} == {"path"}
    assert main(["spark", "verify", str(root), "--json", "--no-progress"]) == 0
    files = [x for x in json_lines(capsys.readouterr().out) if x["type"] == "file"]
    assert {(x["cluster"], x["node"]) for x in files} == {(cid, "1"), (cid, "2")}
    # a node directory without meta.properties: named by path, or refused with --naming meta
    bare = root / "ux" / "bare" / "__cluster_metadata-0"
    shutil.copytree(root / "ux" / "demo" / "__cluster_metadata-0", bare)
    assert main(["spark", "verify", str(root), "--naming", "meta"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kraftkit spark verify: {root}/ux/bare/meta.properties: no meta.properties with cluster.id")


def test_every_jobs_json_matches_the_one_schema(spark, fleet, tmp_path, capsys):
    """The Spark jobs' --json lines through the schema check every other command's output goes through
    (tests/cli/test_json_schema.py): the fields docs/json.md lists, of their types, compact JSON lines,
    on a fleet with a flipped byte, a torn tail and a bad index entry (so corrupt_batch and problem lines)."""
    from tests.cli.test_json_schema import check_output, schema

    runs = [
        ("spark generate", ["spark", "generate", tmp_path / "gen", "--clusters", "2", "--nodes", "2", "--topics",
                            "3:5", "--corrupt", "2", "--json", "-q"], 0),
        ("spark scan", ["spark", "scan", fleet.root, "--json"], 1),
        ("spark audit", ["spark", "audit", fleet.root, "--json", "-q"], 1),
        ("spark verify", ["spark", "verify", fleet.root, "--json", "-q"], 1),
        ("spark rewrite", ["spark", "rewrite", fleet.root, "--metadata-version", "3.5", "--json", "--dry-run", "-q"], 0),
    ]
    errors: list[str] = []
    kinds: dict[str, set[str]] = {}
    for command, argv, code in runs:
        assert main([str(a) for a in argv]) == code, argv
        out = capsys.readouterr().out
        errors += check_output(command, out)
        assert all(not line.startswith('{"type": ') for line in out.splitlines())  # one compact line each
        kinds[command] = {json.loads(line).get("type", "") for line in out.splitlines()}
    assert errors == []
    assert {c for c in schema()["commands"] if c.startswith("spark ")} == {c for c, _, _ in runs}
    # every kind of line the schema lists was printed, and so checked
    assert kinds["spark audit"] == {"naming", "cluster", "downgrade", "corrupt_batch"}
    assert kinds["spark verify"] == {"naming", "file", "problem"}
    assert kinds["spark scan"] == {"naming", "count", "total"}
