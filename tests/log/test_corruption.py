"""Corruption fuzzing of segment files.

Every damaged file must end in a precise kraftkit error (CorruptRecordError and its
TruncatedError / CompressionError subclasses, or UnsupportedFormatError) naming the file and
the byte position of the first bad batch, or in a batch whose CRC check fails -- never a crash,
a hang, or a silently skipped batch. The expected outcome of each case is derived from the
mutation and the format (Kafka's DefaultRecordBatch: the CRC covers bytes [21, end); BaseOffset,
Length, PartitionLeaderEpoch and Magic are outside it), using batch boundaries computed here.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kraftkit.log as L
from kraftkit.errors import (
    CompressionError,
    CorruptRecordError,
    TruncatedError,
    UnsupportedFormatError,
)

from ._support import KafkaCorruptRecordError, CODEC_ID, KBatch, KLegacyBuilder, batch_bounds, compressible, fix_crc

SEG_NAME = "00000000000000000000.log"


def build_segment() -> bytes:
    out = bytearray()
    off = 0
    plan = [("none", 3), ("gzip", 4), ("snappy", 2), ("lz4", 3), ("zstd", 5), ("none", 1), ("lz4", 2)]
    for i, (codec, n) in enumerate(plan):
        recs = [(1_000 + off + j, None if j % 2 else b"k%d" % j, compressible(j, 4), [("h", b"%d" % j)])
                for j in range(n)]
        out += L.encode_batch(recs, base_offset=off, compression=codec, partition_leader_epoch=i // 3)
        off += n
    return bytes(out)


SEGMENT = build_segment()
BOUNDS = batch_bounds(SEGMENT)  # batch starts + file length
STARTS = BOUNDS[:-1]
ORIGINAL = [(b.base_offset, b.to_bytes()) for b in L.decode_batches(SEGMENT, verify_crc=True)]
ALLOWED = (CorruptRecordError, UnsupportedFormatError)  # Truncated/Compression are CorruptRecordError


def batch_index(pos: int) -> int:
    return max(i for i, s in enumerate(STARTS) if s <= pos)


def uncovered(pos: int) -> bool:
    """BaseOffset (0..7) and PartitionLeaderEpoch (12..15): not in the CRC, not sizes or magic."""
    rel = pos - STARTS[batch_index(pos)]
    return rel < 8 or 12 <= rel < 16


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("corrupt")


def put(workdir: Path, data: bytes) -> Path:
    """Writes a fresh file (new inode, so earlier mappings stay valid)."""
    path = workdir / SEG_NAME
    tmp = workdir / "tmp.bin"
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def check(path: Path, data: bytes, flips: set[int], length: int):
    """Runs every reader on the damaged file and checks the outcome against the expectation."""
    seg = L.Segment(path)
    rep = seg.scan(deep=True)
    assert rep["total_bytes"] == len(data) == length
    vb = rep["valid_bytes"]
    err = rep["error"]

    # k: first batch touched at all; kd: first batch with damage kraftkit must detect.
    k = kd = None
    for i, s in enumerate(STARTS):
        e = BOUNDS[i + 1]
        if s >= length:
            break  # cut off whole: gone, not damaged
        inside = {p for p in flips if s <= p < e}
        cut = e > length
        if k is None and (inside or cut):
            k = i
        if kd is None and (cut or any(not uncovered(p) for p in inside)):
            kd = i
    lo = BOUNDS[k] if k is not None else length
    if kd is None:
        hi = length
    else:
        hi = BOUNDS[kd]
    assert vb in BOUNDS and lo <= vb <= hi, (vb, lo, hi, sorted(flips), length)
    if kd is not None:
        assert err is not None, (sorted(flips), length)
    if err is None:
        assert vb == length
    else:
        assert isinstance(err, ALLOWED), err
        assert err.file == str(path) and err.position == vb, (err, vb)
        assert err.reason
        if kd is not None and vb == BOUNDS[kd] and not any(BOUNDS[kd] <= p < BOUNDS[kd + 1] for p in flips):
            assert isinstance(err, TruncatedError), err  # an intact batch cut by the end of the file
        if vb == BOUNDS[kd if kd is not None else -1] and any(p == vb + 16 for p in flips) and data[vb + 16] in (0, 1):
            assert isinstance(err, UnsupportedFormatError), err

    # Nothing before the damage is lost or altered.
    good = [b for b in L.decode_batches(data[:vb], verify_crc=True)]
    assert len(good) == BOUNDS.index(vb)
    for i, b in enumerate(good):
        if BOUNDS[i + 1] <= lo:
            assert (b.base_offset, b.to_bytes()) == ORIGINAL[i]
        list(b)  # every record of a valid batch decodes

    # The iterator (CRC checked, but not offsets or records: like Kafka's FileRecords.batches)
    # yields every batch up to the first one with size, magic or CRC damage, then raises there.
    seen = []
    it = seg.batches(verify_crc=True)
    if kd is None:
        seen = list(it)
        assert len(seen) == BOUNDS.index(length)
    else:
        with pytest.raises(ALLOWED) as ei:
            for b in it:
                seen.append(b)
        assert ei.value.position == BOUNDS[kd] and ei.value.file == str(path)
        assert len(seen) == kd
        if err is not None and err.position == BOUNDS[kd]:
            assert type(ei.value) is type(err)
    assert [s.position for s in seen] == BOUNDS[: len(seen)]

    # dump-log's renderer (batches rendered in parallel, findings merged in file order) goes on
    # past a CRC failure like kafka-dump-log, and stops only where the framing breaks: it shows
    # every batch before the damage as valid and says where it stopped and why.
    dump = seg.dump(deep=True, print_data=True)
    text = b"".join(dump).decode()
    summary = dump.summary()
    batch_lines = [l for l in text.splitlines() if l.startswith("baseOffset:")]
    assert len(batch_lines) == summary["batches"] >= BOUNDS.index(vb)
    assert all(l.endswith("isvalid: true") for l in batch_lines[:BOUNDS.index(vb)])
    assert summary["invalid_batches"] == sum(l.endswith("isvalid: false") for l in batch_lines)
    stop = summary["error"] if summary["trailing_bytes"] else None
    if stop is None:
        assert sum(int(l.split(" size: ")[1].split()[0]) for l in batch_lines) == length
    else:
        assert isinstance(stop, ALLOWED) and stop.file == str(path) and stop.reason
        assert stop.position + summary["trailing_bytes"] == length >= vb

    # Without CRC checks the damaged batch may be returned, but then it reports itself invalid
    # (or its records raise a precise error); it is never skipped.
    try:
        loose = seg.read_batches()
    except ALLOWED as e:
        assert e.position is not None and e.position >= vb and e.file == str(path)
    else:
        assert sum(b.size_in_bytes for b in loose) == length
        for b in loose[len(good):]:
            if b.is_valid:
                try:
                    b.records()
                except ALLOWED as e:
                    assert e.position == b.position
            else:
                with pytest.raises(CorruptRecordError):
                    b.ensure_valid()
    return rep


def test_segment_is_valid(workdir):
    rep = L.Segment(put(workdir, SEGMENT)).scan(deep=True)
    assert rep["error"] is None and rep["valid_bytes"] == len(SEGMENT) and rep["batches"] == len(STARTS)


def test_every_truncation(workdir):
    for n in range(len(SEGMENT)):
        data = SEGMENT[:n]
        rep = check(put(workdir, data), data, set(), n)
        expected_vb = max(b for b in BOUNDS if b <= n)
        assert rep["valid_bytes"] == expected_vb
        if n == expected_vb:
            assert rep["error"] is None
        else:
            assert isinstance(rep["error"], TruncatedError)
        # decode_batches on the same bytes raises the same error, or succeeds at a boundary
        if n == expected_vb:
            assert len(L.decode_batches(data)) == BOUNDS.index(n)
        else:
            with pytest.raises(TruncatedError) as ei:
                L.decode_batches(data)
            assert ei.value.position == expected_vb and ei.value.file is None


@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_every_single_byte_flip(workdir, mask):
    for pos in range(len(SEGMENT)):
        data = bytearray(SEGMENT)
        data[pos] ^= mask
        data = bytes(data)
        check(put(workdir, data), data, {pos}, len(data))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(
    flips=st.dictionaries(st.integers(0, len(SEGMENT) - 1), st.integers(1, 255), max_size=6),
    cut=st.none() | st.integers(0, len(SEGMENT)),
)
def test_random_flips_and_truncation(workdir, flips, cut):
    data = bytearray(SEGMENT)
    for p, m in flips.items():
        data[p] ^= m
    length = len(data) if cut is None else cut
    data = bytes(data[:length])
    check(put(workdir, data), data, {p for p in flips if p < length}, length)


# ---------------------------------------------------------------------------------------------
# Damage behind a valid CRC (as a buggy writer would produce): record parsing and decompression
# must still fail precisely, and anything kraftkit accepts must be what kafka-python decodes.


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(
    which=st.integers(0, len(STARTS) - 1),
    flips=st.dictionaries(st.integers(61, 10_000), st.integers(1, 255), min_size=1, max_size=4),
    count_delta=st.sampled_from([0, 0, 0, 1, -1, 2**31 - 1]),
)
def test_payload_damage_with_valid_crc(workdir, which, flips, count_delta):
    s, e = BOUNDS[which], BOUNDS[which + 1]
    batch = bytearray(SEGMENT[s:e])
    for p, m in flips.items():
        batch[61 + (p - 61) % (len(batch) - 61)] ^= m
    if count_delta:
        (n,) = struct.unpack_from(">i", batch, 57)
        struct.pack_into(">i", batch, 57, (n + count_delta + 2**31) % 2**32 - 2**31)
    fix_crc(batch)
    data = SEGMENT[:s] + bytes(batch) + SEGMENT[e:]
    path = put(workdir, data)
    seg = L.Segment(path)
    shallow = seg.scan(deep=False)
    if struct.unpack_from(">i", batch, 57)[0] < 0:
        # DefaultRecordBatch: a negative count is invalid even without reading records.
        assert isinstance(shallow["error"], CorruptRecordError) and shallow["error"].position == s
        assert shallow["valid_bytes"] == s
    else:
        assert shallow["error"] is None and shallow["valid_bytes"] == len(data)
    rep = seg.scan(deep=True)
    err = rep["error"]
    bad = seg.read_batches()[which]
    if err is not None:
        assert isinstance(err, CorruptRecordError), err
        assert err.position == s == rep["valid_bytes"] and err.file == str(path)
        assert err.offset == bad.base_offset
        if bad.count < 0:
            with pytest.raises(CorruptRecordError) as ei:
                bad.ensure_valid()
            assert ei.value.position == s and ei.value.file == str(path)
        else:
            try:
                recs = bad.records()
            except ALLOWED as e:
                assert type(e) is type(err) and e.position == s and e.file == str(path)
            else:
                # Only the deep scan checks record offsets against the header (a reader, like
                # Kafka's DefaultRecordBatch iterator, does not): then some offset is outside.
                assert "offset delta" in err.reason, err
                assert any(not bad.base_offset <= r.offset <= bad.last_offset for r in recs)
        codec = bad.compression
        if isinstance(err, CompressionError):
            assert codec != "none"
        return
    # Accepted: an independent decoder must agree record by record.
    assert rep["valid_bytes"] == len(data)
    ours = bad.records()
    if any(r.attributes < 0 for r in ours):
        # Kafka's DefaultRecord.readFrom reads the record attributes as one int8 (kraftkit too);
        # kafka-python reads a varint there, so it cannot serve as the oracle for such bytes.
        return
    kb = KBatch(bytes(batch))
    try:
        theirs = list(kb)
    except KafkaCorruptRecordError as e:
        # kafka-python decodes header keys strictly; Java's Utils.utf8 (and kraftkit) replace
        # malformed UTF-8. Any other refusal is a disagreement.
        assert "UnicodeDecodeError" in str(e), e
        return
    except RuntimeError as e:
        # The lz4 library wants a zero end mark; Kafka's Lz4BlockInputStream masks the
        # "uncompressed" bit off a block size before its end-mark test, so 0x80000000 ends a
        # frame there (and in kraftkit). Any other refusal is a disagreement.
        assert bad.compression == "lz4" and lz4_end_mark(bytes(batch[61:])) == 0x80000000, e
        return
    assert len(ours) == len(theirs) == bad.count
    for a, b in zip(ours, theirs):
        assert (a.offset, a.timestamp, a.key, a.value, a.headers) == (b.offset, b.timestamp, b.key, b.value, b.headers)


def lz4_end_mark(frame: bytes) -> int | None:
    """The word that ends an LZ4 frame's blocks as Kafka reads them (size 0 once the uncompressed
    bit is masked off), or None if there is none. Kafka's frames carry no block checksums."""
    flg = frame[4]
    pos = 4 + 2 + (8 if flg & 0x08 else 0) + 1  # magic, FLG, BD, content size, header checksum
    while pos + 4 <= len(frame):
        (word,) = struct.unpack_from("<I", frame, pos)
        if word & 0x7FFFFFFF == 0:
            return word
        pos += 4 + (word & 0x7FFFFFFF)
    return None


# ---------------------------------------------------------------------------------------------
# Old message formats


@pytest.mark.parametrize("magic", [0, 1])
def test_magic_0_and_1_in_a_v2_segment(workdir, magic):
    i = 3
    data = bytearray(SEGMENT)
    data[STARTS[i] + 16] = magic
    data = bytes(data)
    path = put(workdir, data)
    rep = L.Segment(path).scan()
    assert isinstance(rep["error"], UnsupportedFormatError)
    assert rep["valid_bytes"] == STARTS[i] == rep["error"].position and rep["error"].file == str(path)
    with pytest.raises(UnsupportedFormatError) as ei:
        L.decode_batches(data)
    assert ei.value.position == STARTS[i]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_legacy_message_sets_from_kafka_python(workdir, magic, codec):
    bld = KLegacyBuilder(magic=magic, compression_type=CODEC_ID[codec], batch_size=1 << 20)
    for i in range(3):
        bld.append(i, 1_000 + i, b"k", compressible(i))
    data = bytes(bld.build())
    path = put(workdir, data)
    rep = L.Segment(path).scan()
    assert isinstance(rep["error"], UnsupportedFormatError), rep["error"]
    assert rep["valid_bytes"] == 0 and rep["error"].position == 0 and rep["batches"] == 0
    with pytest.raises(UnsupportedFormatError):
        L.decode_batches(data)
    with pytest.raises(UnsupportedFormatError):
        list(L.Segment(path).batches())


@pytest.mark.parametrize("zeros", [12, 17, 61, 4096])
def test_zero_filled_tail_is_corrupt(workdir, zeros):
    # A crash after the file was extended but before the bytes landed leaves zeros. Kafka's
    # FileLogInputStream.nextBatch checks the size (0 < LegacyRecord.RECORD_OVERHEAD_V0 = 14)
    # before it reads the magic byte: a CorruptRecordException, not an old message format.
    data = SEGMENT + bytes(zeros)
    path = put(workdir, data)
    rep = L.Segment(path).scan()
    err = rep["error"]
    # (Fewer than HEADER_SIZE_UP_TO_MAGIC = 17 bytes cannot even hold the size: a torn header.)
    assert type(err) is (TruncatedError if zeros < 17 else CorruptRecordError), err
    assert err.position == rep["valid_bytes"] == len(SEGMENT) and err.file == str(path)
    assert rep["batches"] == len(STARTS)
