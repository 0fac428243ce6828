"""Record / ControlRecord objects (C extension types built in rust/src/py/record.rs): their
attributes, types and memory handling (no leaked references, no leaked memory)."""

from __future__ import annotations

import gc
import struct
import sys
import tracemalloc

import pytest

import kraftkit.log as L

TS = 1_700_000_000_000


def _batch(codec: str = "none", **kw) -> L.RecordBatch:
    recs = [
        (TS, b"k0", b"v0", []),
        (TS, None, b"value-1", [("h", b"x"), ("empty", b""), ("null", None)]),
        (TS + 5, b"", None, []),
    ]
    (b,) = L.decode_batches(L.encode_batch(recs, base_offset=1 << 40, compression=codec, **kw))
    return b


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_fields(codec):
    b = _batch(codec, base_sequence=7, producer_id=3, producer_epoch=0)
    r0, r1, r2 = b.records()
    assert [(r.offset, r.timestamp, r.key, r.value) for r in (r0, r1, r2)] == [
        ((1 << 40), TS, b"k0", b"v0"),
        ((1 << 40) + 1, TS, None, b"value-1"),
        ((1 << 40) + 2, TS + 5, b"", None),
    ]
    assert [(r.key_size, r.value_size) for r in (r0, r1, r2)] == [(2, 2), (-1, 7), (0, -1)]
    assert [r.sequence for r in (r0, r1, r2)] == [7, 8, 9]
    assert [r.attributes for r in (r0, r1, r2)] == [0, 0, 0]
    assert (r0.headers, r1.headers, r2.headers) == ([], [("h", b"x"), ("empty", b""), ("null", None)], [])
    assert r1.headers is not r1.headers  # a new list each time
    assert not any(r.is_control for r in (r0, r1, r2)) and all(type(r) is L.Record for r in (r0, r1, r2))
    if codec == "none":
        assert sum(r.size_in_bytes for r in (r0, r1, r2)) == b.size_in_bytes - 61  # 61: the batch header
    assert repr(r1) == f"Record(offset={(1 << 40) + 1}, timestamp={TS}, key_size=-1, value_size=7)"
    # equal timestamps may share one int object; values stay right either way
    assert r0.timestamp == r1.timestamp != r2.timestamp


def test_read_only_and_not_constructible():
    r = _batch().records()[0]
    for name in ("offset", "timestamp", "key", "value", "sequence", "headers", "is_control", "key_size"):
        with pytest.raises(AttributeError):
            setattr(r, name, 1)
    with pytest.raises(AttributeError):
        r.other = 1  # noqa: B018
    with pytest.raises(TypeError):
        L.Record()
    with pytest.raises(TypeError):
        L.ControlRecord()
    assert L.Record.__module__ == L.ControlRecord.__module__ == "kraftkit.log"
    assert L.Record.__name__ == "Record" and issubclass(L.ControlRecord, L.Record)


def test_control_record():
    key = struct.pack(">hh", 0, 1)  # COMMIT
    (b,) = L.decode_batches(L.encode_batch([(TS, key, b"\0\0\0\0\0\0", [])], base_offset=9, control=True, transactional=True))
    (r,) = b.records()
    assert isinstance(r, L.ControlRecord) and isinstance(r, L.Record) and r.is_control
    assert (r.control_type, r.key_version, r.control_type_name) == (1, 0, "COMMIT")
    assert (r.offset, r.key, r.headers) == (9, key, [])
    assert repr(r) == f"ControlRecord(offset=9, type=COMMIT, timestamp={TS})"


def test_python_subclass_of_record_type():
    class Sub(L.Record):
        pass

    with pytest.raises(TypeError):
        Sub()
    assert issubclass(Sub, L.Record)


def test_no_reference_leaks():
    # null keys and values (None), shared timestamps, headers, control records
    rows = [(TS + i // 10, None if i % 2 else b"k", None if i % 5 == 0 else b"v" * i, [("h", b"x")] if i % 7 == 0 else [])
            for i in range(300)]
    batches = L.decode_batches(L.encode_batch(rows) * 4)
    (ctl,) = L.decode_batches(L.encode_batch([(TS, struct.pack(">hh", 0, 0), b"", [])], control=True))

    def churn():
        for b in [*batches, ctl]:
            for r in b.records():
                r.offset, r.timestamp, r.key, r.value, r.headers  # noqa: B018

    churn()
    gc.collect()
    rc = sys.getrefcount  # (values taken outside the asserts, which hold references of their own)
    before = rc(None), rc(L.Record), rc(L.ControlRecord)
    for _ in range(3):
        churn()
    gc.collect()
    after = rc(None), rc(L.Record), rc(L.ControlRecord)
    assert after == before
    recs = batches[0].records()
    n_type = rc(L.Record)
    assert n_type == before[1] + len(recs)  # each instance holds its type
    ts = recs[0].timestamp
    n_ts = rc(ts)
    assert n_ts == 2 + 10  # ts, the argument, and the 10 records sharing it
    del recs
    n_ts, n_type = rc(ts), rc(L.Record)
    assert (n_ts, n_type) == (2, before[1])


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_memory_stays_flat(codec):
    rows = [(TS + i // 50, None if i % 3 else b"key", b"x" * (i % 200), [("h", b"v")] if i % 11 == 0 else []) for i in range(400)]
    rows[5] = (TS, struct.pack(">hh", 0, 1), b"", [])
    data = b"".join(L.encode_batch(rows, base_offset=i * 400, compression=codec) for i in range(20))
    batches = L.decode_batches(data)

    def churn():
        for b in batches:
            for r in b.records():
                r.offset, r.timestamp, r.key, r.value, r.headers, repr(r)  # noqa: B018

    churn()
    gc.collect()
    tracemalloc.start()
    try:
        churn()
        gc.collect()
        first = tracemalloc.get_traced_memory()[0]
        for _ in range(5):
            churn()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - first < 64 * 1024, (first, after)


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_records_with_headers_release_their_batch_bytes():
    # Records with headers keep the batch bytes alive (for .headers) until they go: 4 MB decoded
    # 25 times must not add up.
    rows = [(TS, b"k", b"v" * 1000, [("h", b"x")]) for _ in range(1000)]
    data = L.encode_batch(rows) * 4
    for _ in range(3):
        for b in L.decode_batches(data):
            b.records()[-1].headers  # noqa: B018
    gc.collect()
    start = _rss()
    for _ in range(25):
        for b in L.decode_batches(data):
            recs = b.records()
            recs[0].headers  # noqa: B018
        del recs
    gc.collect()
    assert _rss() - start < 40 << 20
