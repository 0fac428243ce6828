"""Shared helpers of the unit tests: the independent oracles and small builders.

kafka-python is imported here, once, with its own DeprecationWarning (``importlib.resources``
in its protocol package, raised at import time) silenced, because the suite runs with
``filterwarnings = error``. Nothing else is silenced.
"""

from __future__ import annotations

import struct
import warnings

import crc32c as icrar_crc32c  # the ICRAR "crc32c" package: an independent CRC-32C

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec as kcodec
    from kafka.errors import CorruptRecordError as KafkaCorruptRecordError
    from kafka.record.default_records import (
        ControlRecord as KControlRecord,
        DefaultRecordBatch as KBatch,
        DefaultRecordBatchBuilder as KBuilder,
    )
    from kafka.record.legacy_records import LegacyRecordBatchBuilder as KLegacyBuilder
    from kafka.record.memory_records import MemoryRecords as KMemoryRecords

import kraftkit.log as L

__all__ = [
    "CODECS",
    "CODEC_ID",
    "KafkaCorruptRecordError",
    "KBatch",
    "KBuilder",
    "KControlRecord",
    "KLegacyBuilder",
    "KMemoryRecords",
    "batch_bounds",
    "crc_of",
    "icrar_crc32c",
    "kcodec",
    "header",
    "fix_crc",
]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_ID = {name: i for i, name in enumerate(CODECS)}  # Kafka's CompressionType ids

# The v2 header (Kafka's DefaultRecordBatch), decoded with struct: an oracle independent of kraftkit.
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_FIELDS = (
    "base_offset", "length", "partition_leader_epoch", "magic", "crc", "attributes",
    "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "records_count",
)


def header(b: bytes, pos: int = 0) -> dict:
    return dict(zip(HEADER_FIELDS, HEADER.unpack_from(b, pos)))


def crc_of(batch: bytes) -> int:
    """CRC-32C of bytes [21, end) with the independent implementation."""
    return icrar_crc32c.crc32c(bytes(batch[21:]))


def fix_crc(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, 17, crc_of(batch))
    return batch


def batch_bounds(data: bytes) -> list[int]:
    """Start positions of the batches in a well-formed buffer, plus its length
    (walks the Length fields; independent of kraftkit)."""
    out, pos = [], 0
    while pos < len(data):
        out.append(pos)
        (length,) = struct.unpack_from(">i", data, pos + 8)
        pos += 12 + length
    assert pos == len(data)
    out.append(pos)
    return out


def compressible(i: int, n: int = 60) -> bytes:
    """A value that every codec shrinks (kafka-python falls back to 'none' otherwise)."""
    return (b"value-%d-" % i) * n


def make_segment_bytes(specs, start_offset: int = 0) -> tuple[bytes, list[list[tuple]]]:
    """Encodes batches with kraftkit. specs: list of (codec, records, kwargs)."""
    out = bytearray()
    off = start_offset
    recs_out = []
    for codec, recs, kw in specs:
        out += L.encode_batch(recs, base_offset=off, compression=codec, **kw)
        recs_out.append(recs)
        off += max(len(recs), 1)
    return bytes(out), recs_out
