"""Replaying a metadata log into an image: the Rust engine (``load_image``) against the
pure-Python image kraftkit had before (``tests/image/reference_image.py``), on the runner's
metadata log at 300k records (``KRAFTKIT_BENCH_METADATA_RECORDS``)."""

from __future__ import annotations

import os

import metadata
import pytest
from conftest import ROOT

RECORDS = int(os.environ.get("KRAFTKIT_BENCH_METADATA_RECORDS", "300000"))


@pytest.fixture(scope="module")
def metadata_log():
    ROOT.mkdir(parents=True, exist_ok=True)
    return metadata.ensure_metadata_log(ROOT, records=RECORDS, log=lambda *_: None)


@pytest.mark.parametrize("impl", ["kraftkit", "python-reference"])
def test_replay_log_into_image(benchmark, metadata_log, impl):
    from kraftkit.metadata.image import load_image

    ml = metadata_log
    benchmark.group = f"image replay: {ml.dataset.records} records"
    load = load_image if impl == "kraftkit" else metadata.reference_image().load_image
    if impl == "kraftkit":
        img = benchmark(lambda: load(ml.dataset.dir))
    else:
        img = benchmark.pedantic(lambda: load(ml.dataset.dir), rounds=2, iterations=1)
    assert img.records_replayed == ml.data_records
