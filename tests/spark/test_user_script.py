"""A user's own script (``python myscript.py`` as the README's Spark section shows it), run in
an environment that sets nothing for Spark: no PYSPARK_PYTHON, and a ``python3`` on PATH that is
not this virtualenv's interpreter (Spark starts its Python workers with it by default)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kraftkit.log import Segment

pytestmark = pytest.mark.spark

USER_SCRIPT = """\
import logging, sys
from pyspark.sql import SparkSession
import kraftkit.spark

logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
spark = (SparkSession.builder.master("local[1]").config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.ui.enabled", "false").getOrCreate())
kraftkit.spark.register(spark)
df = spark.read.format("kraft").load(sys.argv[1])
print("ROWS", df.count())
print("CLUSTERS", sorted(r["cluster"] for r in df.select("cluster").distinct().collect()))
spark.stop()
"""


def bare_env(tmp_path: Path) -> dict[str, str]:
    """os.environ without Spark's Python settings, with a PATH whose python3 and python are not
    this interpreter (they fail loudly if Spark starts them)."""
    fake = tmp_path / "other-bin"
    fake.mkdir()
    for name in ("python3", "python"):
        exe = fake / name
        exe.write_text("#!/bin/sh\necho 'not the virtualenv python' >&2\nexit 3\n")
        exe.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    env["PATH"] = f"{fake}{os.pathsep}{env.get('PATH', '')}"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def test_readme_script_reads_format_kraft_without_pyspark_python(fleet, tmp_path):
    script = tmp_path / "myscript.py"
    script.write_text(USER_SCRIPT)
    env = bare_env(tmp_path)
    assert subprocess.run(["python3"], env=env, capture_output=True).returncode == 3  # the PATH the workers see
    cluster = fleet.clusters[2].name
    path = f"{fleet.root}/{cluster}"
    proc = subprocess.run([sys.executable, str(script), path], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = sum(
        b.count for f in sorted(Path(path).rglob("*")) if f.suffix in (".log", ".checkpoint") for b in Segment(f).batches()
    )
    assert f"ROWS {want}" in proc.stdout
    assert f"CLUSTERS {[cluster]!r}" in proc.stdout
    # the register helper says which interpreter it gave the workers, and why
    assert f"kraftkit.spark INFO Spark's Python workers run {sys.executable}" in proc.stderr
    # (Spark's own lookup of installed sources, at session start, did run the other python3 and
    # logged that it skipped them: register() does not depend on that lookup)
