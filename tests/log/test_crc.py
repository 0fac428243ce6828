"""kraftkit's CRC-32C against the ICRAR ``crc32c`` package, and batch CRCs (bytes [21, end))."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kraftkit.log as L
from kraftkit.errors import CorruptRecordError

from ._support import CODECS, crc_of, header, icrar_crc32c


def test_check_value():
    # The standard CRC-32C check value (RFC 3720 / Castagnoli), and the empty input.
    assert L.crc32c(b"123456789") == 0xE3069283 == icrar_crc32c.crc32c(b"123456789")
    assert L.crc32c(b"") == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4096))
def test_matches_icrar_package(data):
    assert L.crc32c(data) == icrar_crc32c.crc32c(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2048), st.binary(max_size=2048), st.integers(0, 2**32 - 1))
def test_continuation(a, b, seed):
    # Continuing from the CRC of a prefix gives the CRC of the whole; and from any start value
    # it agrees with the package's own continuation.
    assert L.crc32c(b, L.crc32c(a)) == icrar_crc32c.crc32c(a + b)
    assert L.crc32c(b, seed) == icrar_crc32c.crc32c(b, value=seed)


@pytest.mark.parametrize("size", [64 * 1024, 64 * 1024 + 1, 3 * 1024 * 1024 + 7])
def test_large_buffers(size):
    # Above 64 KiB kraftkit releases the GIL; the result must not change.
    data = os.urandom(size)
    assert L.crc32c(data) == icrar_crc32c.crc32c(data)
    half = size // 3
    assert L.crc32c(data[half:], L.crc32c(data[:half])) == icrar_crc32c.crc32c(data)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("flags", [{}, {"transactional": True, "producer_id": 9, "producer_epoch": 2, "base_sequence": 0},
                                   {"control": True}, {"log_append_time": 123456}, {"delete_horizon_ms": 99}])
def test_batch_crc_covers_attributes_to_end(codec, flags):
    recs = [(1000 + i, b"k%d" % i if flags.get("control") is None else b"\x00\x00\x00\x01",
             b"v" * i, [("h", b"x")] if not flags.get("control") else []) for i in range(20)]
    b = L.encode_batch(recs, base_offset=77, partition_leader_epoch=5, compression=codec, **flags)
    stored = struct.unpack_from(">I", b, 17)[0]
    assert stored == crc_of(b)
    (batch,) = L.decode_batches(b, verify_crc=True)
    assert batch.crc == stored
    assert batch.compute_crc() == crc_of(b)
    assert batch.is_valid


def test_crc_excludes_offset_length_epoch_magic_prefix():
    b = bytearray(L.encode_batch([(1, b"k", b"v", [])], base_offset=3, partition_leader_epoch=1))
    # Base offset and partition leader epoch are outside [21, end): changing them keeps the batch valid.
    struct.pack_into(">q", b, 0, 123456789)
    struct.pack_into(">i", b, 12, 42)
    assert crc_of(b) == header(b)["crc"]
    (batch,) = L.decode_batches(bytes(b), verify_crc=True)
    assert batch.is_valid and batch.base_offset == 123456789 and batch.partition_leader_epoch == 42


@pytest.mark.parametrize("codec", CODECS)
def test_any_flip_in_crc_range_is_detected(codec):
    b = L.encode_batch([(5, b"key", b"value" * 10, [("a", None)])] * 3, compression=codec)
    for pos in range(21, len(b)):
        bad = bytearray(b)
        bad[pos] ^= 0x01
        (batch,) = L.decode_batches(bytes(bad))  # sizes still fine: no error without verify_crc
        assert batch.crc == header(bad)["crc"]
        assert batch.compute_crc() == crc_of(bad) != batch.crc
        assert not batch.is_valid
        with pytest.raises(CorruptRecordError) as ei:
            batch.ensure_valid()
        assert ei.value.position == 0 and "CRC" in ei.value.reason
        with pytest.raises(CorruptRecordError):
            L.decode_batches(bytes(bad), verify_crc=True)
