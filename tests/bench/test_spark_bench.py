"""The Spark fleet benchmark (benches/spark_scan.py, ``./dev bench --suites spark``) at a tiny
size, through the main runner: every implementation reads the whole fleet (the bench refuses a
run whose rows count differently; here the count is also derived from the files themselves), the
JVM reader is the reference, and both targets print a MET or MISS line. No figure is judged: the
bench measures, this checks that what it measures is the same rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kraftkit.log import Segment
from kraftkit.spark.layout import discover

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]


def test_the_spark_bench_reads_every_record_with_every_implementation(tmp_path):
    out = tmp_path / "out.json"
    got = subprocess.run(
        [sys.executable, str(REPO / "benches" / "run.py"), "--suites", "spark", "--quick", "--repeat", "1",
         "--data-dir", str(tmp_path), "--json", str(out)],
        capture_output=True, text=True, timeout=840, cwd=REPO,
    )
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-4000:]
    report = json.loads(out.read_text())
    spark = report["spark"]
    assert spark["jvm"] is True
    files = discover(spark["fleet"])
    records = sum(b.count for f in files for b in Segment(f.path).batches())
    rows = [r for r in report["results"] if r["suite"] == "spark"]
    impls = {(r["mode"], r["impl"]) for r in rows}
    for mode in ("typed", "json"):
        assert (mode, 'format("kraft") JVM local[2]') in impls
        assert (mode, 'format("kraft_python") local[2]') in impls
    assert ("typed", "Spark alone: spark.range, no read, local[2]") in impls
    assert ("typed", "naive Python source local[2]") in impls
    assert all(r["records"] == records for r in rows), [(r["impl"], r["records"], records) for r in rows]
    refs = [r for r in rows if r["is_ref"]]
    assert {r["impl"] for r in refs} == {'format("kraft") JVM local[2]'} and len(refs) == 3
    targets = {t["target"]: t for t in report["targets"]}
    assert {"Spark JVM reader local[2] >= 10 M typed rows/s", "Spark JVM reader local[2] >= 2 M rows/s with JSON"} <= set(targets)
    lines = [ln for ln in got.stdout.splitlines() if ln.strip().startswith(("[MET ]", "[MISS]"))]
    assert len(lines) == 2, got.stdout
