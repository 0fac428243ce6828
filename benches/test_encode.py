"""Encoding record batches from Python: kraftkit's ``encode_batch`` against aiokafka's and
kafka-python's ``DefaultRecordBatchBuilder``, on the same records (the topic shape: 6 B keys,
60 B values, 200 records per batch, uncompressed; 100k records)."""

from __future__ import annotations

import pytest
from conftest import need

import kraftkit.log as kl

PER_BATCH = 200
BATCHES = 500
TS0 = 1_700_000_000_000


def _records():
    out = []
    for b in range(BATCHES):
        out.append(
            [
                (TS0 + b * PER_BATCH + i, b"k%05d" % ((b * PER_BATCH + i) % 100_000), b"v" * 60, ())
                for i in range(PER_BATCH)
            ]
        )
    return out


BATCH_RECORDS = _records()


def _kraftkit():
    n = 0
    for b, recs in enumerate(BATCH_RECORDS):
        n += len(kl.encode_batch(recs, base_offset=b * PER_BATCH))
    return n


def _builder(cls):
    def run():
        n = 0
        for recs in BATCH_RECORDS:
            bb = cls(2, 0, 0, -1, -1, -1, 1 << 30)
            for i, (ts, k, v, _h) in enumerate(recs):
                bb.append(i, ts, k, v, [])
            n += len(bb.build())
        return n

    return run


@pytest.mark.parametrize("impl", ["kraftkit", "aiokafka", "kafka-python"])
def test_encode_batches(benchmark, peers, impl):
    benchmark.group = f"encode: {BATCHES * PER_BATCH} records in {BATCHES} batches"
    if impl == "kraftkit":
        fn = _kraftkit
    else:
        need(peers, impl)
        if impl == "aiokafka":
            from aiokafka.record.default_records import DefaultRecordBatchBuilder
        else:
            from kafka.record.default_records import DefaultRecordBatchBuilder
        fn = _builder(DefaultRecordBatchBuilder)
    total = benchmark(fn)
    # the same records in every implementation's batches: the sizes agree
    assert total == _kraftkit()
