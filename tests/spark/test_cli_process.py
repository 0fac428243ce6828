"""``kraftkit spark ...`` in its own process, as a user's shell runs it: without pyspark
installed, and what reaches stderr from the Spark session it starts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraftkit.log import Segment

pytestmark = pytest.mark.spark

KRAFTKIT = [sys.executable, "-m", "kraftkit.cli.main"]


def run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*KRAFTKIT, *args], capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})}
    )


@pytest.mark.parametrize(
    "job",
    [["scan"], ["audit"], ["verify"], ["rewrite", "--metadata-version", "3.5", "--dry-run"]],
    ids=lambda j: j[0],
)
def test_without_pyspark_one_line_naming_the_package_and_exit_2(job, fleet, tmp_path):
    # a package named pyspark that fails to import as an absent one does, ahead of the real one
    shadow = tmp_path / "shadow" / "pyspark"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ModuleNotFoundError("No module named \'pyspark\'", name="pyspark")\n')
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    probe = subprocess.run([sys.executable, "-c", "import pyspark"], capture_output=True, text=True, env={**os.environ, **env})
    assert probe.returncode == 1 and "No module named 'pyspark'" in probe.stderr
    proc = run(["spark", job[0], fleet.root, *job[1:]], env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"kraftkit spark {job[0]}: needs pyspark, which this Python cannot import (pip install 'kraftkit[spark]')"
    ]


def test_generate_needs_no_pyspark(tmp_path):
    shadow = tmp_path / "shadow" / "pyspark"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ModuleNotFoundError("No module named \'pyspark\'", name="pyspark")\n')
    proc = run(["spark", "generate", str(tmp_path / "f"), "--clusters", "1", "--nodes", "1", "--topics", "2:3", "--json"],
               {"PYTHONPATH": str(tmp_path / "shadow")})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["clusters"] == 1


def test_help_names_the_generate_argument_path():
    proc = run(["spark", "generate", "--help"])
    assert proc.returncode == 0
    assert re.search(r"^usage: .*generate .*\bPATH\b", proc.stdout, re.M | re.S)
    assert "ROOT" not in proc.stdout


def test_no_log4j_lines_on_stderr_and_camel_case_json(fleet):
    """The session the CLI starts logs errors only: Spark's WARN/INFO lines and its log-level
    banner stay off the output; --json lines use Kafka's camelCase field names."""
    node = f"{fleet.root}/{fleet.clusters[2].name}/node-0"
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    proc = subprocess.run([*KRAFTKIT, "spark", "scan", node, "--json"], capture_output=True, text=True, timeout=300,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log4j = [line for line in proc.stderr.splitlines() if re.search(r"\b(WARN|INFO|DEBUG)\b", line)]
    assert log4j == []
    assert "Setting default log level" not in proc.stderr
    assert "log4j" not in proc.stderr
    # nor the JVM's own start-up warning (Spark's launcher always adds --add-modules=jdk.incubator.vector)
    assert [line for line in proc.stderr.splitlines() if line.startswith("WARNING")] == []
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    want = sum(b.count for f in sorted(Path(node).rglob("*")) if f.suffix in (".log", ".checkpoint")
               for b in Segment(f).batches())
    assert lines[-1]["type"] == "total" and lines[-1]["rows"] == want and lines[-1]["damagedRows"] == 0
    counts = [x for x in lines if x["type"] == "count"]
    assert sum(x["count"] for x in counts) == want
    for x in lines:
        assert all(re.fullmatch(r"[a-z][a-zA-Z0-9]*", k) for k in x), x
    assert {"cluster", "recordType", "count"} <= set(counts[0])


def test_the_jvms_stderr_goes_on_but_for_its_start_up_warning(capfd):
    """What the quiet session's JVM writes to stderr reaches this process's stderr line by line (an
    ERROR of Spark's, a crash), all but the incubator-module warning the JVM prints on every start."""
    from kraftkit.spark.session import _jvm_stderr

    w = _jvm_stderr()
    lines = [b"WARNING: Using incubator modules: jdk.incubator.vector\n", b"spark ERROR Executor: lost\n",
             b"Exception in thread \"main\" java.lang.OutOfMemoryError\n", b"no newline at the end"]
    for line in lines:
        os.write(w, line)
    os.close(w)
    err = ""
    for _ in range(100):  # (the pump is a thread: until it has written the last line)
        err += capfd.readouterr().err
        if err.endswith("no newline at the end"):
            break
        time.sleep(0.05)
    assert err == "".join(line.decode() for line in lines[1:])


def test_json_field_names_are_camel_case_but_data_map_keys_are_kept():
    from kraftkit.cli.spark import camel

    row = {"type": "cluster", "corrupt_batches": 0, "metadata_version_level": 21, "features": {"metadata.version": 21},
           "damage": [{"base_offset": 7, "kind": "crc"}]}
    assert camel(row) == {"type": "cluster", "corruptBatches": 0, "metadataVersionLevel": 21,
                          "features": {"metadata.version": 21}, "damage": [{"baseOffset": 7, "kind": "crc"}]}
