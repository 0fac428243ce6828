"""Fixtures of the pytest-benchmark suites (``benches/test_*.py``).

    .venv/bin/python -m pytest benches --benchmark-only

The data is the benchmark runner's (``datasets.py``, ``metadata.py``, ``rewrite.py``), generated
once into ``.cache/bench/`` at a size that keeps a suite under a few minutes: 64 MB per dataset
(``KRAFTKIT_BENCH_MB``), a 300k-record metadata log (``KRAFTKIT_BENCH_METADATA_RECORDS``), a 32 MB
snapshot. The process is pinned to one core as ``run.py`` pins it (``KRAFTKIT_BENCH_NO_PIN=1``:
not). These suites are not part of the test suite: ``pytest``'s ``testpaths`` is ``tests`` only.
See benches/README.md ("pytest-benchmark").
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import benchlib  # noqa: E402
import datasets  # noqa: E402
import suites  # noqa: E402

SIZE_MB = int(os.environ.get("KRAFTKIT_BENCH_MB", "64"))
ROOT = Path(os.environ.get("KRAFTKIT_BENCH_DATA", str(REPO / ".cache" / "bench")))


def pytest_configure(config):
    if not os.environ.get("KRAFTKIT_BENCH_NO_PIN"):
        benchlib.pin_to_one_core()


@pytest.fixture(scope="session")
def peers() -> dict:
    # kafka-python warns (DeprecationWarning) when imported; the project runs pytest with
    # filterwarnings = error, and the warning is not the benchmark's business
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return suites.load_peers()


def need(peers: dict, name: str):
    """The peer library ``name`` (its MemoryRecords class or module), or skip the case."""
    if name not in peers:
        pytest.skip(f"{name} is not installed (pip install -e '.[bench]')")
    return peers[name]


_cache: dict[str, datasets.Dataset] = {}


def dataset(name: str) -> datasets.Dataset:
    """The runner's dataset ``name`` at ``SIZE_MB`` (compressed ones hold the 'topic' records)."""
    if name not in _cache:
        ROOT.mkdir(parents=True, exist_ok=True)
        seg = max(1, min(64, SIZE_MB // 4))
        topic_records = None
        if name.startswith("topic-") and name != "topic-1k":
            topic_records = dataset("topic").records
        _cache[name] = datasets.ensure_dataset(
            name, ROOT, size_mb=SIZE_MB, segment_mb=seg, topic_records=topic_records, log=lambda *_: None
        )
    return _cache[name]


def file_bytes(ds: datasets.Dataset) -> list[bytes]:
    return [Path(p).read_bytes() for p in ds.segments]
