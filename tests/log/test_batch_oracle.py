"""Independent decoders and encoders as oracles for the v2 batch format.

* kraftkit encodes -> kafka-python's ``DefaultRecordBatch`` / ``MemoryRecords`` decode (its own
  varint, CRC and codec code, with the gzip/python-snappy/lz4/zstandard libraries).
* kafka-python's ``DefaultRecordBatchBuilder`` encodes -> kraftkit decodes.
* Hex examples worked out by hand from the v2 format (KIP-98), independently of kraftkit.
"""

from __future__ import annotations

import gzip
import struct

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kraftkit.log as L

from ._support import (
    CODEC_ID,
    CODECS,
    KBatch,
    KBuilder,
    KControlRecord,
    KMemoryRecords,
    compressible,
    crc_of,
    header,
    kcodec,
)


def test_kafka_python_has_every_codec():
    # Otherwise the oracle would silently not cover them.
    assert kcodec.has_gzip() and kcodec.has_snappy() and kcodec.has_lz4() and kcodec.has_zstd()


def kafka_python_view(b: bytes):
    kb = KBatch(b)
    assert kb.validate_crc()
    return kb, list(kb)


def assert_same_batch(kb, krecs, batch):
    """Every header field and every record of kraftkit's batch equals kafka-python's decoding."""
    assert batch.base_offset == kb.base_offset
    assert batch.size_in_bytes == kb.size_in_bytes
    assert batch.length == kb.size_in_bytes - 12
    assert batch.partition_leader_epoch == kb.leader_epoch
    assert batch.magic == kb.magic == 2
    assert batch.crc == kb.crc
    assert batch.attributes == kb.attributes
    assert batch.last_offset_delta == kb.last_offset_delta
    assert batch.last_offset == kb.last_offset
    assert batch.compression == CODECS[kb.compression_type]
    assert batch.timestamp_type == ("LogAppendTime" if kb.timestamp_type == 1 else "CreateTime")
    assert batch.is_transactional == kb.is_transactional
    assert batch.is_control == kb.is_control_batch
    assert batch.base_timestamp == kb.first_timestamp
    assert batch.max_timestamp == kb.max_timestamp
    assert batch.producer_id == kb.producer_id
    assert batch.producer_epoch == kb.producer_epoch
    assert batch.base_sequence == kb.base_sequence
    assert batch.last_sequence == kb.last_sequence
    assert batch.count == kb.records_count == len(batch)
    recs = batch.records()
    assert len(recs) == len(krecs)
    for r, kr in zip(recs, krecs):
        assert r.offset == kr.offset
        assert r.timestamp == kr.timestamp
        assert r.key == kr.key
        assert r.value == kr.value
        assert r.headers == kr.headers
        assert r.size_in_bytes - _varint_size(kr.size_in_bytes) == kr.size_in_bytes
        if kb.is_control_batch:
            assert isinstance(kr, KControlRecord)
            assert isinstance(r, L.ControlRecord)
            assert (r.key_version, r.control_type) == (kr.version, kr.type)


def _varint_size(n: int) -> int:
    z = (n << 1) ^ (n >> 63)
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def sample_records(n: int, base_ts: int = 1_700_000_000_000):
    out = []
    for i in range(n):
        key = None if i % 3 == 0 else b"key-%d" % i
        value = None if i % 7 == 6 else compressible(i)
        headers = [] if i % 2 else [("h1", b"x" * i), ("null", None), ("\u00e9t\u00e9", b"")]
        # Non-monotonic timestamps, negative deltas included.
        out.append((base_ts + (i * 37) % 11 - 5, key, value, headers))
    return out


# ---------------------------------------------------------------------------------------------
# kraftkit encodes, kafka-python decodes


@pytest.mark.parametrize("codec", CODECS)
def test_kraftkit_encode_kafka_python_decode(codec):
    recs = sample_records(50)
    b = L.encode_batch(recs, base_offset=1234, compression=codec, partition_leader_epoch=7,
                       producer_id=4242, producer_epoch=3, base_sequence=100, transactional=True)
    kb, krecs = kafka_python_view(b)
    assert kb.compression_type == CODEC_ID[codec]
    (batch,) = L.decode_batches(b, verify_crc=True)
    assert_same_batch(kb, krecs, batch)
    # And both agree with the input.
    assert [(r.timestamp, r.key, r.value, r.headers) for r in krecs] == recs
    assert [r.offset for r in krecs] == list(range(1234, 1284))
    assert kb.max_timestamp == max(r[0] for r in recs)
    assert kb.first_timestamp == recs[0][0]


@pytest.mark.parametrize("codec", CODECS)
def test_control_and_log_append_time(codec):
    commit = (1_700_000_000_000, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x07", [])
    b = L.encode_batch([commit], base_offset=9, compression=codec, control=True, transactional=True,
                       producer_id=1, producer_epoch=0)
    kb, krecs = kafka_python_view(b)
    assert kb.is_control_batch and krecs[0].commit
    assert_same_batch(kb, krecs, L.decode_batches(b)[0])

    recs = sample_records(10)
    b = L.encode_batch(recs, compression=codec, log_append_time=1_800_000_000_000)
    kb, krecs = kafka_python_view(b)
    assert kb.timestamp_type == 1 and kb.max_timestamp == 1_800_000_000_000
    assert {r.timestamp for r in krecs} == {1_800_000_000_000}
    assert_same_batch(kb, krecs, L.decode_batches(b)[0])


@pytest.mark.parametrize("codec", CODECS)
def test_multi_batch_buffer_with_memory_records(codec):
    data = bytearray()
    off = 0
    for n in (1, 5, 30, 2):
        data += L.encode_batch(sample_records(n), base_offset=off, compression=codec)
        off += n
    mr = KMemoryRecords(bytes(data))
    kbatches = []
    while (kb := mr.next_batch()) is not None:
        kbatches.append((kb, list(kb)))
    ours = L.decode_batches(bytes(data), verify_crc=True)
    assert len(ours) == len(kbatches) == 4
    pos = 0
    for batch, (kb, krecs) in zip(ours, kbatches):
        assert batch.position == pos
        pos += kb.size_in_bytes
        assert_same_batch(kb, krecs, batch)


def test_compressed_payload_framing_matches_kafka():
    """The compressed area (bytes [61, end)) is what Kafka's codecs produce and read: check it
    with the reference libraries directly."""
    recs = sample_records(40)
    raw = L.encode_batch(recs)[61:]
    payload = {c: L.encode_batch(recs, compression=c)[61:] for c in CODECS[1:]}
    assert gzip.decompress(payload["gzip"]) == raw
    assert payload["gzip"][:2] == b"\x1f\x8b"
    # snappy-java's xerial stream: magic, version 1, compatible 1, then (int32 len, block)*.
    s = payload["snappy"]
    assert s[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    out, pos = b"", 16
    while pos < len(s):
        (n,) = struct.unpack_from(">i", s, pos)
        out += snappy.decompress(s[pos + 4:pos + 4 + n])
        pos += 4 + n
    assert out == raw
    # LZ4 frame (KafkaLZ4BlockOutputStream): magic, FLG version 01 + independent blocks, BD 64 KiB.
    f = payload["lz4"]
    assert f[:4] == b"\x04\x22\x4d\x18"
    assert f[4] & 0xC0 == 0x40 and f[4] & 0x20, f[4]
    assert (f[5] >> 4) & 0x7 == 4  # block max size id 4 = 64 KiB
    assert lz4.frame.decompress(f) == raw
    z = payload["zstd"]
    assert z[:4] == b"\x28\xb5\x2f\xfd"
    assert zstandard.ZstdDecompressor().decompressobj().decompress(z) == raw


# ---------------------------------------------------------------------------------------------
# kafka-python encodes, kraftkit decodes


def kafka_python_build(records, codec, *, transactional=False, producer=(-1, -1, -1),
                       base_offset=0, epoch=0):
    pid, pepoch, seq = producer
    bld = KBuilder(magic=2, compression_type=CODEC_ID[codec], is_transactional=transactional,
                   producer_id=pid, producer_epoch=pepoch, base_sequence=seq, batch_size=1 << 30)
    for delta, ts, key, value, headers in records:
        assert bld.append(delta, ts, key, value, headers) is not None
    b = bytearray(bld.build())
    # BaseOffset and PartitionLeaderEpoch are set by the broker; neither is covered by the CRC.
    struct.pack_into(">q", b, 0, base_offset)
    struct.pack_into(">i", b, 12, epoch)
    return bytes(b)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("transactional", [False, True])
def test_kafka_python_encode_kraftkit_decode(codec, transactional):
    recs = [(d, ts, k, v, h) for d, (ts, k, v, h) in enumerate(sample_records(40))]
    b = kafka_python_build(recs, codec, transactional=transactional,
                           producer=(77, 1, 2**31 - 10) if transactional else (-1, -1, -1),
                           base_offset=500, epoch=3)
    assert header(b)["attributes"] & 7 == CODEC_ID[codec]  # the data compressed, so it stays
    (batch,) = L.decode_batches(b, verify_crc=True)
    batch.ensure_valid()
    kb, krecs = kafka_python_view(b)
    assert_same_batch(kb, krecs, batch)
    got = [(r.offset - 500, r.timestamp, r.key, r.value, r.headers) for r in batch]
    assert got == recs
    if transactional:
        # Kafka's DefaultRecordBatch.incrementSequence wraps past Integer.MAX_VALUE.
        assert batch.last_sequence == 2**31 - 10 + 39 - 2**31
        assert [r.sequence for r in batch][9:11] == [2**31 - 1, 0]
    else:
        assert batch.last_sequence == -1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(CODECS),
    records=st.lists(
        st.tuples(
            st.integers(0, 1000),  # offset delta gap
            st.integers(0, 2**41),
            st.none() | st.binary(max_size=40),
            st.none() | st.binary(max_size=300),
            st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=10)), max_size=3),
        ),
        min_size=1, max_size=30,
    ),
    base_offset=st.integers(0, 2**62),
)
def test_kafka_python_encode_kraftkit_decode_arbitrary(codec, records, base_offset):
    # Offsets with gaps (as left by compaction): each record's offset delta is arbitrary but increasing.
    delta, recs = -1, []
    for gap, ts, k, v, h in records:
        delta += 1 + gap
        recs.append((delta, ts, k, v, h))
    b = kafka_python_build(recs, codec, base_offset=base_offset)
    (batch,) = L.decode_batches(b, verify_crc=True)
    kb, krecs = kafka_python_view(b)
    assert_same_batch(kb, krecs, batch)
    assert [(r.offset - base_offset, r.timestamp, r.key, r.value, r.headers) for r in batch] == recs


# ---------------------------------------------------------------------------------------------
# worked examples, bytes laid out by hand from DefaultRecordBatch/DefaultRecord

TS = 1_700_000_000_000

EX_A = bytes.fromhex(
    "0000000000000000 0000004f 00000001 02 37ef5bec 0000 00000000"
    "0000018bcfe56800 0000018bcfe56800 ffffffffffffffff ffff ffffffff 00000001"
    "3a 00 00 00 01 2e  01 0c 00  11 6d657461646174612e76657273696f6e  0016  00  00".replace(" ", "")
)
EX_B = bytes.fromhex(
    "0000000000000000 00000047 00000001 02 c7ac7804 0020 00000000"
    "0000018bcfe56800 0000018bcfe56800 ffffffffffffffff ffff ffffffff 00000001"
    "2a 00 00 00 08 00000003 16 0000 0000018bcfe56800 00 00".replace(" ", "")
)
EX_C = bytes.fromhex(
    "0000000000000005 0000003f 00000001 02 8f6608e6 0020 00000000 0000018bcfe56800 0000018bcfe56800"
    " ffffffffffffffff ffff ffffffff 00000001 1a 00 00 00 08 00000004 06 0000 00 00".replace(" ", "")
)
FEATURE_LEVEL_VALUE = bytes.fromhex("010c00 11 6d657461646174612e76657273696f6e 0016 00".replace(" ", ""))
LEADER_CHANGE_VALUE = bytes.fromhex(
    "0000 00000001 04 00000001 00 00000002 00 00000003 00 03 00000001 00 00000002 00 00".replace(" ", "")
)


def _check_kraft_header(batch, *, base, epoch, control, size):
    assert batch.size_in_bytes == size
    assert batch.base_offset == base and batch.last_offset == base
    assert batch.partition_leader_epoch == epoch
    assert batch.attributes == (0x20 if control else 0)
    assert batch.is_control == control and not batch.is_transactional
    assert batch.compression == "none" and batch.timestamp_type == "CreateTime"
    assert batch.base_timestamp == batch.max_timestamp == TS
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.count == 1
    assert batch.is_valid


def test_worked_example_a_data_batch():
    assert len(EX_A) == 91
    (batch,) = L.decode_batches(EX_A, verify_crc=True)
    _check_kraft_header(batch, base=0, epoch=1, control=False, size=91)
    assert batch.crc == 0x37EF5BEC
    (r,) = batch.records()
    assert (r.offset, r.timestamp, r.key, r.value, r.headers) == (0, TS, None, FEATURE_LEVEL_VALUE, [])
    assert r.size_in_bytes == 30  # varint 0x3a = 29, plus its own byte
    assert L.encode_batch([(TS, None, FEATURE_LEVEL_VALUE, [])], partition_leader_epoch=1) == EX_A


def test_worked_example_b_snapshot_header():
    assert len(EX_B) == 83
    (batch,) = L.decode_batches(EX_B, verify_crc=True)
    _check_kraft_header(batch, base=0, epoch=1, control=True, size=83)
    (r,) = batch.records()
    assert isinstance(r, L.ControlRecord)
    assert (r.key_version, r.control_type, r.control_type_name) == (0, 3, "SNAPSHOT_HEADER")
    assert r.key == b"\x00\x00\x00\x03"
    assert r.value == bytes.fromhex("0000") + struct.pack(">q", TS) + b"\x00"
    assert L.encode_batch([(TS, r.key, r.value, [])], partition_leader_epoch=1, control=True) == EX_B


def test_worked_example_c_snapshot_footer():
    assert len(EX_C) == 75
    (batch,) = L.decode_batches(EX_C, verify_crc=True)
    _check_kraft_header(batch, base=5, epoch=1, control=True, size=75)
    (r,) = batch.records()
    assert (r.offset, r.key_version, r.control_type, r.control_type_name) == (5, 0, 4, "SNAPSHOT_FOOTER")
    assert r.value == b"\x00\x00\x00"
    assert L.encode_batch([(TS, r.key, r.value, [])], base_offset=5, partition_leader_epoch=1,
                          control=True) == EX_C


def test_worked_example_d_leader_change():
    b = L.encode_batch([(TS, b"\x00\x00\x00\x02", LEADER_CHANGE_VALUE, [])], base_offset=10,
                       partition_leader_epoch=2, control=True)
    assert b[:23] == bytes.fromhex("000000000000000a 0000005e 00000002 02 1735ab2b 0020".replace(" ", ""))
    (batch,) = L.decode_batches(b, verify_crc=True)
    _check_kraft_header(batch, base=10, epoch=2, control=True, size=0x5E + 12)
    (r,) = batch.records()
    assert (r.control_type_name, r.value) == ("LEADER_CHANGE", LEADER_CHANGE_VALUE)


@pytest.mark.parametrize("ex", [EX_A, EX_B, EX_C])
def test_worked_examples_agree_with_kafka_python_and_icrar_crc(ex):
    assert crc_of(ex) == header(ex)["crc"]
    kb, krecs = kafka_python_view(ex)
    assert_same_batch(kb, krecs, L.decode_batches(ex)[0])
