"""Offset and time indexes: built as Kafka builds them, checked against a small model written
here from ``LogSegment.append`` / ``LogSegment.recover`` / ``TimeIndex.maybeAppend`` (Kafka's
storage/src/main/java/org/apache/kafka/storage/internals/log/):

* an offset-index entry is added *before* a batch (of an append call, or in recovery) when the
  bytes since the last entry are strictly greater than index.interval.bytes, so the first one never
  is; it holds (that batch's last offset, position where the batch starts): ``LogSegment.append``
  walks the batches of an append one by one, as recovery does;
* the time index then gets maybeAppend(max timestamp so far, its offset): only a strictly larger
  timestamp than the last entry's (an empty index's last entry is (-1, base offset));
* closing (or rolling, or the end of recovery) adds one last maybeAppend of the max so far;
* the max timestamp so far is paired with the last offset of the first batch holding it.
"""

from __future__ import annotations

import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kraftkit.log as L
from kraftkit.log import Segment, SegmentWriter

from ._support import CODECS


@dataclass
class B:
    last_offset: int
    max_ts: int
    size: int


class TimeIndexModel:
    def __init__(self, base: int):
        self.entries: list[tuple[int, int]] = []
        self.last = (-1, base)

    def maybe_append(self, ts: int, offset: int) -> None:
        if self.entries:
            assert offset >= self.last[1] and ts >= self.last[0]  # Kafka would throw otherwise
        if ts > self.last[0]:
            self.entries.append((ts, offset))
            self.last = (ts, offset)


def model_recover(batches: list[B], base: int, interval: int):
    offsets, tindex = [], TimeIndexModel(base)
    max_ts = (-1, -1)  # TimestampOffset.UNKNOWN
    valid = last_entry = 0
    for b in batches:
        if b.max_ts > max_ts[0]:
            max_ts = (b.max_ts, b.last_offset)
        if valid - last_entry > interval:
            offsets.append((b.last_offset, valid))
            tindex.maybe_append(*max_ts)
            last_entry = valid
        valid += b.size
    tindex.maybe_append(*max_ts)
    return offsets, tindex.entries


def model_append(appends: list[list[B]], base: int, interval: int, close: bool = True):
    offsets, tindex = [], TimeIndexModel(base)
    max_ts = tindex.last  # maxTimestampSoFar() of a new segment: the time index's last entry
    since = pos = 0
    for batches in appends:
        for b in batches:  # batch by batch, whatever the append call held
            if b.max_ts > max_ts[0]:
                max_ts = (b.max_ts, b.last_offset)
            if since > interval:
                offsets.append((b.last_offset, pos))
                tindex.maybe_append(*max_ts)
                since = 0
            since += b.size
            pos += b.size
    if close:
        tindex.maybe_append(*max_ts)
    return offsets, tindex.entries


def read_offset_index(data: bytes, base: int):
    assert len(data) % 8 == 0
    return [(base + rel, pos) for rel, pos in struct.iter_unpack(">ii", data)]


def read_time_index(data: bytes, base: int):
    assert len(data) % 12 == 0
    return [(ts, base + rel) for ts, rel in struct.iter_unpack(">qi", data)]


# ---------------------------------------------------------------------------------------------
# Segment generation

batch_spec = st.tuples(
    st.integers(1, 4),  # records
    st.integers(0, 300),  # value size
    st.lists(st.integers(-1, 60), min_size=4, max_size=4),  # record timestamps (small: many ties)
    st.sampled_from(CODECS),
    st.integers(0, 3),  # offset gap before the batch
)


def encode_specs(specs, base: int):
    """Returns (list of batch bytes, list of B, list of record (offset, ts))."""
    parts, model, records = [], [], []
    off = base
    for n, vsize, tss, codec, gap in specs:
        off += gap
        recs = [(tss[i], None, bytes([i]) * vsize, []) for i in range(n)]
        data = L.encode_batch(recs, base_offset=off, compression=codec)
        parts.append(data)
        model.append(B(off + n - 1, max(tss[:n]), len(data)))
        records += [(off + i, tss[i]) for i in range(n)]
        off += n
    return parts, model, records


def split_appends(parts, model, cuts):
    """Groups consecutive batches into append calls (each non-empty)."""
    groups, start = [], 0
    for c in sorted(set(cuts)) + [len(parts)]:
        if start < c <= len(parts):
            groups.append((b"".join(parts[start:c]), model[start:c]))
            start = c
    return groups


SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@SETTINGS
@given(
    specs=st.lists(batch_spec, min_size=0, max_size=25),
    interval=st.sampled_from([0, 1, 64, 200, 500, 1000, 4096]),
    base=st.sampled_from([0, 7, 1_000_000]),
)
def test_recover_rule(specs, interval, base):
    parts, model, _ = encode_specs(specs, base)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / L.segment_name(base)
        path.write_bytes(b"".join(parts))
        rep, oi, ti = Segment(path).rebuild_indexes(interval)
        assert rep["error"] is None and rep["batches"] == len(parts)
        exp_o, exp_t = model_recover(model, base, interval)
        assert read_offset_index(oi, base) == exp_o
        assert read_time_index(ti, base) == exp_t


@SETTINGS
@given(
    specs=st.lists(batch_spec, min_size=1, max_size=25),
    cuts=st.lists(st.integers(1, 25), max_size=10),
    interval=st.sampled_from([0, 1, 64, 200, 500, 1000, 4096]),
    base=st.sampled_from([0, 7, 1_000_000]),
)
def test_append_rule_and_reopen(specs, cuts, interval, base):
    parts, model, _ = encode_specs(specs, base)
    groups = split_appends(parts, model, cuts)
    with tempfile.TemporaryDirectory() as d:
        w = SegmentWriter.create(d, base, interval)
        pos = 0
        for data, _bs in groups:
            info = w.append(data)
            assert info["position"] == pos and info["size"] == len(data)
            pos += len(data)
        w.flush()
        # flush writes the indexes as they stand: no closing time-index entry yet.
        exp_o, exp_t_open = model_append([g[1] for g in groups], base, interval, close=False)
        seg_path = Path(d) / L.segment_name(base)
        assert read_offset_index((Path(d) / L.segment_name(base, ".index")).read_bytes(), base) == exp_o
        assert read_time_index((Path(d) / L.segment_name(base, ".timeindex")).read_bytes(), base) == exp_t_open
        w.close()
        exp_o, exp_t = model_append([g[1] for g in groups], base, interval)
        seg = Segment(seg_path)
        assert seg.offset_index() == exp_o
        assert seg.time_index() == exp_t
        assert read_offset_index((Path(d) / L.segment_name(base, ".index")).read_bytes(), base) == exp_o
        assert read_time_index((Path(d) / L.segment_name(base, ".timeindex")).read_bytes(), base) == exp_t
        # every entry names the last offset of the batch at its position, however the appends were grouped
        assert seg.verify_indexes() == []
        # Reopening rebuilds them with the recovery rule (one entry per batch, not per append).
        w2, rep = SegmentWriter.open(d, base, interval)
        assert rep["error"] is None and rep["valid_bytes"] == pos
        assert w2.next_offset == model[-1].last_offset + 1
        w2.close()
        exp_o, exp_t = model_recover(model, base, interval)
        assert seg.offset_index() == exp_o and seg.time_index() == exp_t
        assert Segment(seg_path).verify_indexes() == []


@SETTINGS
@given(
    specs=st.lists(batch_spec, min_size=1, max_size=20),
    interval=st.sampled_from([0, 100, 4096]),
    targets=st.lists(st.integers(-2, 200), min_size=1, max_size=10),
    ts_targets=st.lists(st.integers(-2, 62), min_size=1, max_size=10),
)
def test_lookups(specs, interval, targets, ts_targets):
    base = 5
    parts, model, records = encode_specs(specs, base)
    starts = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    with tempfile.TemporaryDirectory() as d:
        w = SegmentWriter.create(d, base, interval)
        for p in parts:
            w.append(p)
        w.close()
        seg = Segment(Path(d) / L.segment_name(base))
        for with_index in (True, False):
            if not with_index:
                os.unlink(Path(d) / L.segment_name(base, ".index"))
                os.unlink(Path(d) / L.segment_name(base, ".timeindex"))
                assert seg.offset_index() == [] and seg.time_index() == []
            for t in targets:
                # the batch holding t, or the next one (translateOffset: first lastOffset >= t)
                exp = next((s for s, b in zip(starts, model) if b.last_offset >= t), None)
                assert seg.position_of(t) == exp
            for t in ts_targets:
                # findOffsetByTimestamp: the first record (in log order) with timestamp >= t
                exp = next(((o, ts) for o, ts in records if ts >= t), None)
                assert seg.offset_for_timestamp(t) == exp


def test_log_append_time_lookup(tmp_path):
    # A LogAppendTime batch's records all carry the batch's max timestamp.
    w = SegmentWriter.create(tmp_path, 0)
    w.append(L.encode_batch([(1, None, b"a", []), (2, None, b"b", [])], base_offset=0))
    w.append(L.encode_batch([(1, None, b"c", []), (1, None, b"d", [])], base_offset=2, log_append_time=50))
    w.close()
    seg = Segment(tmp_path / L.segment_name(0))
    assert seg.offset_for_timestamp(2) == (1, 2)
    assert seg.offset_for_timestamp(3) == (2, 50)
    assert seg.offset_for_timestamp(51) is None


# ---------------------------------------------------------------------------------------------
# verify_indexes


@pytest.fixture
def indexed(tmp_path):
    base = 100
    w = SegmentWriter.create(tmp_path, base, 0)
    off = base
    for i in range(12):
        w.append(L.encode_batch([(1000 + 10 * i + j, b"k", b"v" * (20 + i), []) for j in range(3)], base_offset=off))
        off += 3
    w.close()
    seg = Segment(tmp_path / L.segment_name(base))
    assert seg.verify_indexes() == []
    oi = tmp_path / L.segment_name(base, ".index")
    ti = tmp_path / L.segment_name(base, ".timeindex")
    # interval 0: an entry before every append but the first; each append raises the max
    assert len(oi.read_bytes()) == 8 * 11 and len(ti.read_bytes()) == 12 * 11
    return seg, oi, ti, base


def _patch(path: Path, pos: int, fmt: str, value) -> None:
    b = bytearray(path.read_bytes())
    struct.pack_into(fmt, b, pos, value)
    path.write_bytes(bytes(b))


def _problems(seg):
    return Segment(seg.path).verify_indexes()


def test_verify_offset_entry_position_not_a_batch(indexed):
    seg, oi, _, _ = indexed
    _patch(oi, 8 * 3 + 4, ">i", struct.unpack_from(">i", oi.read_bytes(), 8 * 3 + 4)[0] + 1)
    probs = _problems(seg)
    assert ("index", 3) in [(f, e) for f, e, _ in probs]


def test_verify_offset_entry_wrong_offset(indexed):
    seg, oi, _, _ = indexed
    # Entry 5 names the batch at its position, whose last offset is not 5 below.
    rel = struct.unpack_from(">i", oi.read_bytes(), 8 * 5)[0]
    _patch(oi, 8 * 5, ">i", rel - 1)
    assert ("index", 5) in [(f, e) for f, e, _ in _problems(seg)]


def test_verify_offset_entries_not_increasing(indexed):
    seg, oi, _, _ = indexed
    data = bytearray(oi.read_bytes())
    data[8 * 2:8 * 3], data[8 * 3:8 * 4] = data[8 * 3:8 * 4], data[8 * 2:8 * 3]
    oi.write_bytes(bytes(data))
    assert ("index", 3) in [(f, e) for f, e, _ in _problems(seg)]


def test_verify_index_file_size(indexed):
    seg, oi, _, _ = indexed
    oi.write_bytes(oi.read_bytes() + b"\x00\x00\x00")
    assert ("index", 0) in [(f, e) for f, e, _ in _problems(seg)]


def test_verify_time_entry_wrong_timestamp(indexed):
    seg, _, ti, _ = indexed
    ts = struct.unpack_from(">q", ti.read_bytes(), 12 * 4)[0]
    _patch(ti, 12 * 4, ">q", ts + 1)  # still increasing, but not the batch's max timestamp
    assert [(f, e) for f, e, _ in _problems(seg)] == [("timeindex", 4)]


def test_verify_time_entries_not_increasing(indexed):
    seg, _, ti, _ = indexed
    ts = struct.unpack_from(">q", ti.read_bytes(), 12 * 6)[0]
    _patch(ti, 12 * 7, ">q", ts)
    assert ("timeindex", 7) in [(f, e) for f, e, _ in _problems(seg)]


def test_verify_time_entry_not_a_last_offset(indexed):
    seg, _, ti, _ = indexed
    rel = struct.unpack_from(">i", ti.read_bytes(), 12 * 2 + 8)[0]
    _patch(ti, 12 * 2 + 8, ">i", rel - 1)
    assert ("timeindex", 2) in [(f, e) for f, e, _ in _problems(seg)]
