"""CRC verification of every batch of a log, kraftkit against the crc32c package, aiokafka and
kafka-python on the same files (a pytest-benchmark group per dataset; section 2 of
benches/README.md describes each implementation)."""

from __future__ import annotations

import struct

import pytest
from conftest import dataset, file_bytes, need

import kraftkit.log as kl

DATASETS = ["meta", "topic"]
_HDR = struct.Struct(">8xi5xI")


def _scan(paths):
    n = 0
    for p in paths:
        rep = kl.Segment(p).scan()
        assert rep["error"] is None, rep["error"]
        n += rep["batches"]
    return n


def _verify(paths):
    reps = kl.verify_segments(paths, check_indexes=False)
    assert all(r["error"] is None for r in reps)
    return sum(r["batches"] for r in reps)


def _crc32c_loop(paths, crc):
    nb = 0
    for p in paths:
        with open(p, "rb") as f:
            buf = f.read()
        mv = memoryview(buf)
        pos, n = 0, len(buf)
        while pos < n:
            length, stored = _HDR.unpack_from(buf, pos)
            end = pos + 12 + length
            if crc(mv[pos + 21 : end]) != stored:
                raise RuntimeError(f"{p}: CRC mismatch at {pos}")
            pos = end
            nb += 1
    return nb


def _memory_records(paths, cls):
    nb = 0
    for p in paths:
        with open(p, "rb") as f:
            mr = cls(f.read())
        while (b := mr.next_batch()) is not None:
            if not b.validate_crc():
                raise RuntimeError(f"{p}: CRC mismatch")
            nb += 1
    return nb


IMPLS = ["kraftkit-scan", "kraftkit-verify_segments", "crc32c-loop", "aiokafka", "kafka-python"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", DATASETS)
def test_verify_every_batch(benchmark, peers, name, impl):
    ds = dataset(name)
    paths = ds.segments
    benchmark.group = f"crc verify: {name} ({ds.bytes / 1e6:.0f} MB)"
    benchmark.extra_info.update(bytes=ds.bytes, batches=ds.batches)
    if impl == "kraftkit-scan":
        fn = lambda: _scan(paths)  # noqa: E731
    elif impl == "kraftkit-verify_segments":
        fn = lambda: _verify(paths)  # noqa: E731
    elif impl == "crc32c-loop":
        crc = need(peers, "crc32c").crc32c
        fn = lambda: _crc32c_loop(paths, crc)  # noqa: E731
    else:
        cls = need(peers, impl)
        fn = lambda: _memory_records(paths, cls)  # noqa: E731
    assert benchmark(fn) == ds.batches


@pytest.mark.parametrize("impl", ["kraftkit", "crc32c"])
@pytest.mark.parametrize("name", DATASETS)
def test_raw_crc_whole_files(benchmark, peers, name, impl):
    """The CRC kernels alone over each whole file in memory: the bound the scans are held to."""
    ds = dataset(name)
    datas = file_bytes(ds)
    benchmark.group = f"crc raw: {name} ({ds.bytes / 1e6:.0f} MB)"
    crc = kl.crc32c if impl == "kraftkit" else need(peers, "crc32c").crc32c
    ours = [kl.crc32c(d) for d in datas]
    assert benchmark(lambda: [crc(d) for d in datas]) == ours
