"""Rewriting a snapshot for an older metadata.version (4.3-IV0 -> 3.9-IV0): kraftkit's
``rewrite_snapshot`` against the same rewrite written per record in Python with kraftkit's codec
(``rewrite.python_rewrite``), on the same 32 MB snapshot (``KRAFTKIT_BENCH_SNAPSHOT_MB``), written to a temporary directory."""

from __future__ import annotations

import os

import rewrite
from conftest import ROOT

from kraftkit.features.rewrite import rewrite_snapshot

SIZE_MB = int(os.environ.get("KRAFTKIT_BENCH_SNAPSHOT_MB", "32"))


def test_rewrite_snapshot_kraftkit(benchmark, tmp_path):
    src = rewrite.make_snapshot(ROOT, SIZE_MB)
    benchmark.group = f"rewrite: {SIZE_MB} MB snapshot to 3.9-IV0"
    dst = tmp_path / "out.checkpoint"
    benchmark(lambda: rewrite_snapshot(src, dst, "3.9"))
    assert dst.stat().st_size > 0


def test_rewrite_snapshot_python_per_record(benchmark, tmp_path):
    src = rewrite.make_snapshot(ROOT, SIZE_MB)
    benchmark.group = f"rewrite: {SIZE_MB} MB snapshot to 3.9-IV0"
    dst = tmp_path / "py.checkpoint"
    done = benchmark.pedantic(lambda: rewrite.python_rewrite(src, dst, src.stat().st_size), rounds=1, iterations=1)
    assert done == src.stat().st_size
