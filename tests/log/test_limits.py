"""Work that input decides is bounded: a compressed records area inflates only up to the
process-wide limit (``kraftkit._core.max_uncompressed_bytes``), a lying record count sizes no
memory, and the offset deltas of records are checked against the batch's lastOffsetDelta.

The bombs are built here with the reference compressors (``zstandard``, ``gzip``, ``lz4``,
``cramjam``'s snappy), framed as Kafka frames them, and given a CRC by the independent
``crc32c`` package.
"""

from __future__ import annotations

import gzip
import struct
import uuid

import cramjam
import lz4.frame
import pytest
import zstandard

import kraftkit._core as core
import kraftkit.log as L
from kraftkit.errors import CompressionError, CorruptRecordError

from tests.hostile.batches import varint  # Kafka's zig-zag varint, written independently of kraftkit

from ._support import CODEC_ID, fix_crc, header

MIB = 1024 * 1024


def zeros_compressed(codec: str, size: int) -> bytes:
    """``size`` zero bytes compressed as a Kafka producer frames ``codec`` (streamed: cheap)."""
    chunk = bytes(MIB)
    if codec == "zstd":
        c = zstandard.ZstdCompressor().compressobj()
        return b"".join(c.compress(chunk) for _ in range(size // MIB)) + c.flush()
    if codec == "gzip":
        c = gzip.zlib.compressobj(9, gzip.zlib.DEFLATED, 31)
        return b"".join(c.compress(chunk) for _ in range(size // MIB)) + c.flush()
    if codec == "lz4":
        return lz4.frame.compress(bytes(size), block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                  content_checksum=False)
    if codec == "snappy":  # xerial framing: magic, version 1, compatible 1, then sized blocks
        block = bytes(cramjam.snappy.compress_raw(bytes(32 * 1024)))
        return (b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
                + (struct.pack(">i", len(block)) + block) * (size // (32 * 1024)))
    raise AssertionError(codec)


def bomb_batch(codec: str, area: bytes, count: int = 1000, base_offset: int = 0) -> bytes:
    """A v2 batch whose records area is ``area`` (compressed with ``codec``), CRC valid."""
    b = bytearray(L.encode_batch([(0, None, b"x", [])], base_offset=base_offset))
    b = b[:61] + area
    struct.pack_into(">i", b, 8, len(b) - 12)
    struct.pack_into(">h", b, 21, CODEC_ID[codec])
    struct.pack_into(">i", b, 23, count - 1)  # lastOffsetDelta
    struct.pack_into(">i", b, 57, count)  # records count
    return bytes(fix_crc(b))


@pytest.fixture
def small_limit():
    """A 1 MiB limit for the test (the default is restored afterwards)."""
    before = core.max_uncompressed_bytes()
    core.set_max_uncompressed_bytes(MIB)
    yield MIB
    core.set_max_uncompressed_bytes(before)


def test_the_default_limit_is_kafkas_request_size():
    assert core.DEFAULT_MAX_UNCOMPRESSED_BYTES == 100 * MIB
    assert core.max_uncompressed_bytes() == core.DEFAULT_MAX_UNCOMPRESSED_BYTES


@pytest.mark.parametrize("value", [0, -1])
def test_the_limit_must_be_positive(value):
    with pytest.raises(ValueError, match="at least 1 byte"):
        core.set_max_uncompressed_bytes(value)


@pytest.mark.parametrize("codec", ["zstd", "gzip", "lz4", "snappy"])
def test_a_bomb_stops_at_the_limit_with_file_offset_and_position(tmp_path, small_limit, codec):
    good = L.encode_batch([(0, None, b"v", [])], base_offset=0)
    bomb = bomb_batch(codec, zeros_compressed(codec, 4 * MIB), base_offset=1)
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(good + bomb)
    batches = list(L.Segment(seg).batches(verify_crc=True))  # headers and CRCs are fine
    assert [b.base_offset for b in batches] == [0, 1]
    with pytest.raises(CompressionError) as e:
        batches[1].records()
    err = e.value
    assert (err.offset, err.position) == (1, len(good))
    assert err.file == str(seg)
    assert f"inflates to more than {MIB} bytes" in err.reason
    # the deep scan reports the same batch as the first problem, after the good one
    report = L.Segment(seg).scan(deep=True)
    assert report["batches"] == 1 and report["valid_bytes"] == len(good)
    assert isinstance(report["error"], CompressionError) and report["error"].position == len(good)


def test_a_bomb_under_the_default_limit(tmp_path):
    """128 MiB of zeros (a few KB of zstd) pass the 100 MiB default only as an error."""
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(bomb_batch("zstd", zeros_compressed("zstd", 128 * MIB)))
    (batch,) = L.Segment(seg).batches(verify_crc=True)
    with pytest.raises(CompressionError, match=f"more than {100 * MIB} bytes"):
        batch.records()


def test_raising_the_limit_lets_a_large_batch_through(tmp_path, small_limit):
    records = [(i, None, bytes(4096), []) for i in range(512)]  # 2 MiB of zeros, compressible
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(L.encode_batch(records, compression="zstd"))
    (batch,) = L.Segment(seg).batches()
    with pytest.raises(CompressionError):
        batch.records()
    core.set_max_uncompressed_bytes(4 * MIB)
    assert [r.value for r in batch.records()] == [v for _, _, v, _ in records]


def test_a_lying_record_count_reserves_nothing(tmp_path):
    """0x7fffffff records declared in a 70-byte batch with a valid CRC: an error naming the count,
    from every reader (dump's renderer sizes its text buffer by the count no more)."""
    b = bytearray(L.encode_batch([(0, None, b"v", [])]))
    struct.pack_into(">i", b, 23, 0x7FFFFFFE)
    struct.pack_into(">i", b, 57, 0x7FFFFFFF)
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(bytes(fix_crc(b)))
    assert header(seg.read_bytes())["records_count"] == 0x7FFFFFFF
    (batch,) = L.Segment(seg).batches(verify_crc=True)
    area = len(b) - 61  # the one record's bytes
    with pytest.raises(CorruptRecordError, match=f"records count 2147483647 cannot fit in {area} bytes"):
        batch.records()
    assert "records count 2147483647 cannot fit" in str(L.Segment(seg).scan(deep=True)["error"])
    text = b"".join(L.Segment(seg).dump(deep=True)).decode()
    assert "records count 2147483647 cannot fit" in text


def test_records_beyond_the_last_offset_delta_are_corrupt(tmp_path):
    b = bytearray(L.encode_batch([(0, None, b"a", []), (0, None, b"b", []), (0, None, b"c", [])]))
    struct.pack_into(">i", b, 23, 1)  # lastOffsetDelta 1 for three records
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(bytes(fix_crc(b)))
    (batch,) = L.Segment(seg).batches(verify_crc=True)
    with pytest.raises(CorruptRecordError, match=r"records count 3 is more than lastOffsetDelta 1 \+ 1"):
        batch.records()


@pytest.mark.parametrize("codec", ["zstd", "gzip", "lz4", "snappy"])
def test_a_metadata_append_may_not_inflate_past_kraft_batch_size(codec):
    """The raft leader's Produce check reads a compressed batch as it inflates and stops at
    KRaft's 8 MiB batch size: here one record that claims 64 MiB (then zeros)."""
    size = 64 * MIB
    head = varint(size - 8)
    if codec == "zstd":
        c = zstandard.ZstdCompressor().compressobj()
        area = c.compress(head) + b"".join(c.compress(bytes(MIB)) for _ in range(64)) + c.flush()
    elif codec == "gzip":
        c = gzip.zlib.compressobj(9, gzip.zlib.DEFLATED, 31)
        area = c.compress(head) + b"".join(c.compress(bytes(MIB)) for _ in range(64)) + c.flush()
    else:
        area = None
    if area is None:  # lz4 and snappy: the same records area through the one-shot framers
        data = head + bytes(size - len(head))
        if codec == "lz4":
            area = lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                      content_checksum=False)
        else:
            blocks = [data[i:i + 32 * 1024] for i in range(0, len(data), 32 * 1024)]
            area = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"".join(
                struct.pack(">i", len(z)) + z for z in (bytes(cramjam.snappy.compress_raw(b)) for b in blocks))
    with pytest.raises(CorruptRecordError, match=f"record 0: {codec} records area inflates to more than {8 * MIB} bytes"):
        core.check_metadata_batches(bomb_batch(codec, area))


@pytest.mark.parametrize("codec", ["zstd", "gzip", "lz4", "snappy"])
def test_a_metadata_append_of_zeros_fails_at_the_first_record(codec):
    """A bomb of zeros is a record of size 0 at once: nothing more is inflated."""
    with pytest.raises(CorruptRecordError, match="record 0: invalid record size 0"):
        core.check_metadata_batches(bomb_batch(codec, zeros_compressed(codec, 64 * MIB)))


@pytest.mark.parametrize("codec", ["none", "zstd", "gzip", "lz4", "snappy"])
def test_metadata_appends_are_checked_record_by_record(codec):
    from kraftkit.metadata.records import encode_metadata_record

    values = [encode_metadata_record(2, 0, {"Name": f"t{i}", "TopicId": uuid.UUID(int=i + 1)}) for i in range(3000)]
    good = L.encode_batch([(0, None, v, []) for v in values], compression=codec)
    assert core.check_metadata_batches(good + good) == 6000
    bad = L.encode_batch([(0, None, v, []) for v in values[:2000]] + [(0, None, b"\x01\x02", [])], compression=codec)
    with pytest.raises(CorruptRecordError, match="batch at byte 0: record 2000: "):
        core.check_metadata_batches(bad)


def test_a_metadata_append_needs_a_last_offset_delta_of_count_minus_one():
    from kraftkit.metadata.records import encode_metadata_record

    value = encode_metadata_record(2, 0, {"Name": "t", "TopicId": uuid.UUID(int=1)})  # TopicRecord
    b = bytearray(L.encode_batch([(0, None, value, []), (0, None, value, [])]))
    assert core.check_metadata_batches(bytes(b)) == 2
    struct.pack_into(">i", b, 23, 5)
    with pytest.raises(CorruptRecordError, match="holds 2 records but a lastOffsetDelta of 5"):
        core.check_metadata_batches(bytes(fix_crc(b)))
