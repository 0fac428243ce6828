"""The pytest-benchmark suites (benches/test_*.py) stay out of the test run, and work.

The project's pytest run collects ``tests`` only (``testpaths``): CI must not time anything.
The suites themselves are run here once with ``--benchmark-disable`` (each benchmarked function
called once, untimed) on tiny data in a temporary directory, so that what they measure keeps
running and keeps checking its results (every suite asserts the records, batches or bytes it
processed). Nothing is timed."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_the_test_run_does_not_collect_the_benchmarks():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert cfg["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]
    assert "pytest-benchmark>=5" in cfg["project"]["optional-dependencies"]["bench"]
    for p in (REPO / "tests").rglob("test_*.py"):
        assert "benchmark(" not in p.read_text() or p.name == Path(__file__).name, p


@pytest.mark.timeout(900)
def test_the_suites_run_untimed_on_tiny_data(tmp_path):
    env = dict(
        os.environ,
        KRAFTKIT_BENCH_MB="2",
        KRAFTKIT_BENCH_DATA=str(tmp_path),
        KRAFTKIT_BENCH_METADATA_RECORDS="150000",
        KRAFTKIT_BENCH_SNAPSHOT_MB="1",
        KRAFTKIT_BENCH_NO_PIN="1",
    )
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "benches", "-q", "-p", "no:cacheprovider", "--benchmark-disable"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=850,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " failed" not in r.stdout and " passed" in r.stdout, r.stdout[-2000:]
    assert " skipped" not in r.stdout, r.stdout[-2000:]  # every peer of the suites is in the test extra
