"""The JVM reader of ``format("kraft")`` (``kraftkit.spark.jvm``: a DataSource V2 reading with the
Rust core through JNI) against the Python data source (``format("kraft_python")``) in the same
session: every column of every row of the damaged fleet, under each option, must be the same.
The test session (conftest) has the jar on its classpath; the jar is built by ``./dev``
(``scripts/build_spark_jvm.sh``): a missing jar fails here, it is never skipped. Without the jar
(or javac), ``format("kraft")`` is the Python source: the last tests check that fallback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kraftkit.spark import PYTHON_NAME, jvm
from kraftkit.spark.scan import COLUMN_NAMES

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


def rows(spark, fmt: str, path, select=None, **options) -> list:
    reader = spark.read.format(fmt)
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load(str(path))
    got = df.select(*(select or COLUMN_NAMES)).collect()
    return sorted((tuple(r) for r in got), key=repr)


def test_the_jar_was_built_and_the_session_reads_kraft_with_it(spark, fleet):
    assert jvm.jar() is not None, "no jar: run scripts/build_spark_jvm.sh (./dev does)"
    assert jvm.active(spark)
    plan = spark.read.format("kraft").load(fleet.root)._jdf.queryExecution().executedPlan().toString()
    assert "KraftScan(JVM" in plan and "ColumnarToRow" in plan
    py_plan = spark.read.format(PYTHON_NAME).load(fleet.root)._jdf.queryExecution().executedPlan().toString()
    assert "KraftScan" not in py_plan


def test_every_column_of_every_row_equals_the_python_source_on_a_damaged_fleet(spark, fleet):
    assert any(c.damage for c in fleet.clusters)
    got = rows(spark, "kraft", fleet.root)
    want = rows(spark, PYTHON_NAME, fleet.root)
    assert len(got) == len(want) > 1000
    assert got == want
    # the damage is there: CRC mismatches and rows with errors, located
    by = {n: i for i, n in enumerate(COLUMN_NAMES)}
    assert any(r[by["crc_valid"]] is False for r in got)
    assert any(r[by["error"]] is not None and r[by["position"]] is not None for r in got)


@pytest.mark.parametrize(
    "options",
    [
        {"kind": "snapshots"},
        {"logsOnly": "true", "startOffset": "100", "endOffset": "250"},
        {"partitionBytes": "4096", "chunkRows": "7"},
        {"partitionBytes": str(1 << 40), "minPartitions": "1", "naming": "path"},
        {"columns": "record_type,cluster,offset"},
    ],
)
def test_options_read_the_same_rows(spark, fleet, options):
    cols = options["columns"].split(",") if "columns" in options else None
    assert rows(spark, "kraft", fleet.root, cols, **options) == rows(spark, PYTHON_NAME, fleet.root, cols, **options)


def test_pruned_columns_and_a_user_schema(spark, fleet):
    df = spark.read.format("kraft").schema("record_type string, cluster string, crc_valid boolean").load(fleet.root)
    assert df.columns == ["record_type", "cluster", "crc_valid"]
    want = rows(spark, PYTHON_NAME, fleet.root, ["record_type", "cluster", "crc_valid"])
    assert sorted((tuple(r) for r in df.collect()), key=repr) == want
    # Spark prunes the columns a query does not use: the JVM scan reads only those
    plan = spark.read.format("kraft").load(fleet.root).select("offset")._jdf.queryExecution().executedPlan().toString()
    assert "[offset#" in plan.replace(" ", "") and "record#" not in plan
    with pytest.raises(Exception, match="column crc_valid is boolean, not string"):
        spark.read.format("kraft").schema("crc_valid string").load(fleet.root)


def test_filters_on_offset_and_location_narrow_the_read_and_change_nothing(spark, fleet):
    q = "cluster = 'cluster-001' and offset >= 50 and offset < 120"
    df = spark.read.format("kraft").load(fleet.root).where(q)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "offsets [50, 120)" in plan
    whole = spark.read.format("kraft").option("partitionBytes", "4096").load(fleet.root)
    narrowed = whole.where("cluster = 'cluster-001'")
    assert narrowed.rdd.getNumPartitions() < whole.rdd.getNumPartitions()
    got = sorted((tuple(r) for r in df.collect()), key=repr)
    want = sorted((tuple(r) for r in spark.read.format(PYTHON_NAME).load(fleet.root).where(q).collect()), key=repr)
    assert got == want and len(got) > 70
    assert {r[0] for r in got} == {"cluster-001"}


def test_bad_options_and_paths_are_errors_naming_the_reason(spark, fleet, tmp_path):
    with pytest.raises(Exception, match="unknown column"):
        spark.read.format("kraft").option("columns", "nope").load(fleet.root)
    with pytest.raises(Exception, match="kind must be one of"):
        spark.read.format("kraft").option("kind", "tapes").load(fleet.root)
    # a file that is not a metadata log at all: one error row naming where, never a failed job
    d = tmp_path / "c" / "n" / "__cluster_metadata-0"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(b"\x00\x01" * 50)
    got = rows(spark, "kraft", tmp_path, ["file", "offset", "position", "error"])
    assert got == rows(spark, PYTHON_NAME, tmp_path, ["file", "offset", "position", "error"])
    assert len(got) == 1 and got[0][1] is None and got[0][2] == 0 and got[0][3]


def test_the_planner_answers_as_the_python_source_plans(fleet):
    from kraftkit.spark.planning import ReadOptions, plan_partitions

    req = {"options": {"path": fleet.root, "partitionBytes": "65536"}, "default_min_partitions": 3}
    p = subprocess.run([sys.executable, "-m", "kraftkit.spark.plan"], input=json.dumps(req).encode(),
                       capture_output=True, timeout=120, check=True)
    answer = json.loads(p.stdout)
    want = plan_partitions(ReadOptions.parse(req["options"], 3))
    assert [[(r["path"], r["start"], None if r["end"] < 0 else r["end"]) for r in g] for g in answer["partitions"]] == [
        [(r.path, r.start, r.end) for r in g] for g in want
    ]
    assert len(answer["partitions"]) % 3 == 0
    bad = subprocess.run([sys.executable, "-m", "kraftkit.spark.plan"], input=b'{"options": {}}', capture_output=True,
                         timeout=120)
    assert bad.returncode == 2 and bad.stderr.decode().startswith("kraft: no path")


def test_without_javac_the_build_makes_no_jar_and_says_why(tmp_path):
    # a PATH with the tools the script needs before it looks for javac, and no javac
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("dirname",):
        os.symlink(shutil.which(tool), bin_dir / tool)
    before = jvm.JAR.stat().st_mtime_ns if jvm.JAR.exists() else None
    p = subprocess.run(["/bin/bash", str(REPO / "scripts" / "build_spark_jvm.sh")], env={"PATH": str(bin_dir)},
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert b"no javac" in p.stderr and b"Python data source" in p.stderr
    assert (jvm.JAR.stat().st_mtime_ns if jvm.JAR.exists() else None) == before


FALLBACK = """
import json, sys
from kraftkit.spark import jvm
from kraftkit.spark.session import local_session
spark = local_session("local[1]", app="kraftkit-fallback", jvm=False)
df = spark.read.format("kraft").option("columns", "file,offset,crc_valid,error").load(sys.argv[1])
plan = df._jdf.queryExecution().executedPlan().toString()
out = {"active": jvm.active(spark), "jvm_scan": "KraftScan" in plan,
       "rows": sorted(json.dumps(list(r)) for r in df.collect())}
spark.stop()
print(json.dumps(out))
"""


def test_a_session_without_the_jar_reads_kraft_with_the_python_source(spark, fleet):
    p = subprocess.run([sys.executable, "-c", FALLBACK, fleet.root], capture_output=True, timeout=600,
                       env={**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    out = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert out["active"] is False and out["jvm_scan"] is False
    want = rows(spark, "kraft", fleet.root, ["file", "offset", "crc_valid", "error"])
    assert out["rows"] == sorted(json.dumps(list(r)) for r in want)


def test_a_jar_without_a_loadable_library_for_this_machine_is_not_used(tmp_path, monkeypatch):
    import zipfile

    built = jvm.JAR
    assert jvm.jar() == str(built)
    for name, entries in (
        ("none.jar", {"io/kraftkit/spark/KraftSource.class": b"x"}),
        ("other.jar", {jvm.native_entry().replace("linux-", "other_os-"): b"\x7fELF"}),
        ("garbage.jar", {jvm.native_entry(): b"not a shared library"}),
    ):
        j = tmp_path / name
        with zipfile.ZipFile(j, "w") as z:
            for n, data in entries.items():
                z.writestr(n, data)
        monkeypatch.setattr(jvm, "JAR", j)
        assert jvm.jar() is None, name
        assert jvm.with_jar({"spark.jars": "/a.jar"}) == {"spark.jars": "/a.jar"}
    monkeypatch.setattr(jvm, "JAR", built)
    assert jvm.with_jar({"spark.jars": "/a.jar"}) == {"spark.jars": f"/a.jar,{built}"}
