"""Decoding every record into Python objects and reading offset, timestamp, key and value:
kraftkit against aiokafka (Cython) and kafka-python on the same bytes (section 3 of
benches/README.md). ``codec``: the same on the lz4 and zstd variants of the topic data."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import dataset, file_bytes, need

import kraftkit.log as kl


def _kraftkit_iter(paths):
    n = 0
    for p in paths:
        for b in kl.Segment(p).batches():
            for r in b:
                r.offset, r.timestamp, r.key, r.value  # noqa: B018
            n += len(b)
    return n


def _kraftkit_list(paths):
    n = 0
    for p in paths:
        for b in kl.Segment(p).batches():
            recs = b.records()
            for r in recs:
                r.offset, r.timestamp, r.key, r.value  # noqa: B018
            n += len(recs)
    return n


def _memory_records(datas, cls):
    n = 0
    for buf in datas:
        mr = cls(buf)
        while (b := mr.next_batch()) is not None:
            for r in b:
                r.offset, r.timestamp, r.key, r.value  # noqa: B018
                n += 1
    return n


def _prefix(paths, limit):
    """kafka-python is ~30x slower: it and the kraftkit row of its group decode the first batches
    of the first segment, up to ``limit`` bytes."""
    end = 0
    for b in kl.Segment(paths[0]).batches():
        if end and end + b.size_in_bytes > limit:
            break
        end += b.size_in_bytes
    return Path(paths[0]).read_bytes()[:end]


def _run(benchmark, peers, ds, impl):
    paths = ds.segments
    if impl == "kraftkit-iter":
        return benchmark(lambda: _kraftkit_iter(paths))
    if impl == "kraftkit-records":
        return benchmark(lambda: _kraftkit_list(paths))
    cls = need(peers, impl)
    datas = file_bytes(ds)
    return benchmark(lambda: _memory_records(datas, cls))


@pytest.mark.parametrize("impl", ["kraftkit-iter", "kraftkit-records", "aiokafka"])
@pytest.mark.parametrize("name", ["meta", "topic"])
def test_decode_every_field(benchmark, peers, name, impl):
    ds = dataset(name)
    benchmark.group = f"decode: {name} ({ds.records / 1e6:.2f} M records)"
    benchmark.extra_info["records"] = ds.records
    assert _run(benchmark, peers, ds, impl) == ds.records


@pytest.mark.parametrize("impl", ["kraftkit-iter", "aiokafka"])
@pytest.mark.parametrize("name", ["topic-lz4", "topic-zstd"])
def test_codec_decode_every_field(benchmark, peers, name, impl):
    ds = dataset(name)
    benchmark.group = f"codec: {name} ({ds.records / 1e6:.2f} M records)"
    benchmark.extra_info["records"] = ds.records
    assert _run(benchmark, peers, ds, impl) == ds.records


@pytest.mark.parametrize("impl", ["kraftkit-iter", "kafka-python"])
def test_decode_prefix_slow_peer(benchmark, peers, tmp_path, impl):
    ds = dataset("topic")
    pre = _prefix(ds.segments, 4 << 20)
    n = sum(b.count for b in kl.decode_batches(pre))
    benchmark.group = f"decode: topic, first {len(pre) / 1e6:.1f} MB ({n} records)"
    if impl == "kraftkit-iter":
        p = tmp_path / "00000000000000000000.log"
        p.write_bytes(pre)
        got = benchmark(lambda: _kraftkit_iter([str(p)]))
    else:
        cls = need(peers, "kafka-python")
        got = benchmark.pedantic(lambda: _memory_records([pre], cls), rounds=3, iterations=1)
    assert got == n
