"""Iterating a batch (``for r in batch``): records decoded one at a time, and recycled.

The iterator rewrites a record it handed out two steps before, and that record's key and value
bytes, when nothing but the iterator references them any more (rust/src/py/record.rs,
``RecordIterator``); bytes objects of dead records are kept by length for the next records. None
of it may be visible: whatever the caller keeps (a record, a key, a value, a hashed key) keeps
its value, and every record equals what was encoded. The oracle is the input rows.
"""

from __future__ import annotations

import gc
import struct
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kraftkit.log as L
from kraftkit.errors import CorruptRecordError

TS = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _expected(rows, base_offset):
    return [(base_offset + i, ts, k, v, [(hk, hv) for hk, hv in h]) for i, (ts, k, v, h) in enumerate(rows)]


def _fields(r):
    return (r.offset, r.timestamp, r.key, r.value, r.headers)


def _batch(rows, base_offset=0, **kw):
    (b,) = L.decode_batches(L.encode_batch(rows, base_offset=base_offset, **kw))
    return b


def _rows(n, key_len=6, value_len=lambda i: 60):
    return [(TS + i // 3, b"k%0*d" % (key_len - 1, i), bytes([i % 251]) * value_len(i), [("h", b"x")] if i % 17 == 0 else [])
            for i in range(n)]


@pytest.mark.parametrize("codec", CODECS)
def test_iteration_yields_the_encoded_records(codec):
    # same-length keys and values (rewritten in place), lengths that change (taken by length),
    # null and empty keys and values, headers, shared timestamps
    rows = _rows(300, value_len=lambda i: 60 if i < 150 else i % 70)
    rows[10] = (TS, None, None, [])
    rows[11] = (TS, b"", b"", [])
    rows[12] = (TS, b"a", b"b", [])
    b = _batch(rows, base_offset=1 << 33, compression=codec)
    seen = [_fields(r) for r in b]
    assert seen == _expected(rows, 1 << 33)
    assert seen == [_fields(r) for r in b.records()]
    assert len(b) == len(seen)


def test_control_records_iterate():
    rows = [(TS, struct.pack(">hh", 0, t), b"\0\0\0\0\0\0", []) for t in (0, 1, 1, 0)]
    b = _batch(rows, base_offset=5, control=True, transactional=True)
    got = [(type(r), r.offset, r.control_type, r.control_type_name, r.key) for r in b]
    assert got == [(L.ControlRecord, 5 + i, t, "COMMIT" if t else "ABORT", rows[i][1]) for i, t in enumerate((0, 1, 1, 0))]


def test_kept_records_keys_and_values_never_change():
    rows = _rows(1000)
    b = _batch(rows)
    kept_records, kept_keys, kept_values, hashed = {}, {}, {}, {}
    for i, r in enumerate(b):
        if i % 7 == 0:
            kept_records[i] = r
        if i % 5 == 0:
            kept_keys[i] = r.key
        if i % 3 == 0:
            kept_values[i] = r.value
        if i % 4 == 0:
            hashed[r.key] = i  # caches the key's hash, then the record (and key) may go
    exp = _expected(rows, 0)
    assert {i: _fields(r) for i, r in kept_records.items()} == {i: exp[i] for i in kept_records}
    assert kept_keys == {i: exp[i][2] for i in kept_keys}
    assert kept_values == {i: exp[i][3] for i in kept_values}
    assert hashed == {exp[i][2]: i for i in range(0, 1000, 4)}


def test_hash_of_a_recycled_key_is_its_own():
    # every key is hashed (its hash cached in the bytes object) and dropped; the objects come
    # back for the next records: a stale cached hash would break dict lookups
    rows = _rows(2000)
    index = {bytes(bytearray(k)): i for i, (_, k, _, _) in enumerate(rows)}  # copies, not the same objects
    for b in [_batch(rows), _batch(rows, compression="lz4")]:
        for i, r in enumerate(b):
            assert hash(r.key) == hash(bytes(bytearray(r.key)))
            assert index[r.key] == i
            assert hash(r.value) == hash(bytes(bytearray(r.value)))


def test_records_are_recycled_when_nothing_keeps_them():
    # what the other tests here exercise: a loop that keeps nothing reuses a few objects
    b = _batch(_rows(1000))
    ids = {(id(r), id(r.key), id(r.value)) for r in b}
    assert len({i[0] for i in ids}) <= 3 and len({i[2] for i in ids}) <= 3
    # a record that is kept is never reused
    kept = list(b)
    assert len({id(r) for r in kept}) == 1000
    assert [_fields(r) for r in kept] == _expected(_rows(1000), 0)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 3),
            st.one_of(st.none(), st.binary(max_size=4)),
            st.one_of(st.none(), st.binary(max_size=12)),
            st.lists(st.tuples(st.text(max_size=3), st.one_of(st.none(), st.binary(max_size=3))), max_size=2),
        ),
        min_size=1,
        max_size=60,
    ),
    keep=st.lists(st.integers(0, 15), min_size=60, max_size=60),
    codec=st.sampled_from(CODECS),
)
def test_any_keep_pattern_sees_the_encoded_records(rows, keep, codec):
    rows = [(TS + d, k, v, h) for d, k, v, h in rows]
    b = _batch(rows, base_offset=100, compression=codec)
    exp = _expected(rows, 100)
    held = []
    for i, r in enumerate(b):
        assert _fields(r) == exp[i]
        what = keep[i]
        if what & 1:
            held.append((i, "record", r))
        if what & 2:
            held.append((i, "key", r.key))
        if what & 4:
            held.append((i, "value", r.value))
        if what & 8 and r.key is not None:
            held.append((i, "hashed", {r.key: i}))
    for i, kind, obj in held:
        if kind == "record":
            assert _fields(obj) == exp[i]
        elif kind == "key":
            assert obj == exp[i][2]
        elif kind == "value":
            assert obj == exp[i][3]
        else:
            assert obj[exp[i][2]] == i


def _segment(tmp_path, data: bytes):
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(data)
    return L.Segment(str(p)), str(p)


def test_a_corrupt_record_is_raised_where_it_is_after_the_good_ones(tmp_path):
    rows = _rows(6)
    lead = L.encode_batch(rows[:2], base_offset=0)
    data = bytearray(L.encode_batch(rows, base_offset=2))
    b = _batch(rows)
    at = 61 + sum(r.size_in_bytes for r in b.records()[:3])  # record 3's length varint
    data[at] = 0x01  # zig-zag -1
    seg, path = _segment(tmp_path, lead + bytes(data))
    _, bad = list(seg.batches())
    it = iter(bad)
    got = [next(it) for _ in range(3)]
    assert [_fields(r) for r in got] == _expected(rows, 2)[:3]
    with pytest.raises(CorruptRecordError) as ei:
        next(it)
    err = ei.value
    assert (err.file, err.position, err.offset) == (path, len(lead), 2)
    assert "record 3 of 6" in err.reason and "invalid record size -1" in err.reason
    with pytest.raises(StopIteration):
        next(it)
    # the list API raises the same error, before any record
    with pytest.raises(CorruptRecordError) as ei2:
        bad.records()
    assert str(ei2.value) == str(err)


def test_bytes_left_after_the_declared_count_are_an_error_at_the_end(tmp_path):
    rows = _rows(5)
    data = bytearray(L.encode_batch(rows))
    data[57:61] = struct.pack(">i", 4)  # records count
    seg, path = _segment(tmp_path, bytes(data))
    (b,) = list(seg.batches())
    seen = []
    with pytest.raises(CorruptRecordError) as ei:
        for r in b:
            seen.append(_fields(r))
    assert seen == _expected(rows, 0)[:4]
    assert ei.value.file == path and "bytes remain after 4 records" in ei.value.reason


def test_an_impossible_count_fails_at_iter(tmp_path):
    data = bytearray(L.encode_batch(_rows(3)))
    data[57:61] = struct.pack(">i", 1 << 30)
    (b,) = L.decode_batches(bytes(data))
    with pytest.raises(CorruptRecordError, match="cannot fit"):
        iter(b)


def test_no_reference_leaks_from_iteration():
    rows = [(TS + i // 10, None if i % 2 else b"k%d" % (i % 3), None if i % 5 == 0 else b"v" * (i % 40), [("h", b"x")] if i % 7 == 0 else [])
            for i in range(300)]
    batches = L.decode_batches(L.encode_batch(rows) * 4 + L.encode_batch(rows, compression="zstd"))
    (ctl,) = L.decode_batches(L.encode_batch([(TS, struct.pack(">hh", 0, 0), b"", [])], control=True))

    def churn():
        for b in [*batches, ctl]:
            for r in b:
                r.offset, r.timestamp, r.key, r.value, r.headers  # noqa: B018
            kept = [r for i, r in enumerate(b) if i % 3 == 0]
            it = iter(b)
            next(it)  # an iterator dropped half way
            del it, kept

    churn()
    gc.collect()
    rc = sys.getrefcount
    before = rc(None), rc(L.Record), rc(L.ControlRecord)
    for _ in range(3):
        churn()
    gc.collect()
    assert (rc(None), rc(L.Record), rc(L.ControlRecord)) == before
