"""Byte-level building blocks of the hostile corpus, independent of kraftkit.

The v2 record batch header (Kafka's ``DefaultRecordBatch``) is read and written with
``struct``; CRC-32C comes from the ``crc32c`` package and covers the bytes from the attributes
to the end of the batch, as Kafka computes it. Records are framed by hand (zigzag varints).

The decompression bombs are built by streaming compressors over pieces that are either bytes
or a count of zero bytes, so that a multi-GiB records area costs about a second to make and a
few MB to store.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import crc32c
import cramjam
import lz4.frame
import zstandard

#: baseOffset, length, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
#: baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
#: byte offsets of the header fields inside a batch
BASE_OFFSET, LENGTH, EPOCH, MAGIC, CRC, ATTRIBUTES, LAST_OFFSET_DELTA = 0, 8, 12, 16, 17, 21, 23
BASE_TIMESTAMP, MAX_TIMESTAMP, PRODUCER_ID, PRODUCER_EPOCH, BASE_SEQUENCE, RECORDS_COUNT = 27, 35, 43, 51, 53, 57
#: the part of a batch its CRC covers starts here
CRC_START = ATTRIBUTES
#: field name -> (byte offset, struct format), for mutations that overwrite one field
FIELDS = {
    "base_offset": (BASE_OFFSET, ">q"),
    "length": (LENGTH, ">i"),
    "epoch": (EPOCH, ">i"),
    "magic": (MAGIC, ">b"),
    "crc": (CRC, ">I"),
    "attributes": (ATTRIBUTES, ">h"),
    "last_offset_delta": (LAST_OFFSET_DELTA, ">i"),
    "base_timestamp": (BASE_TIMESTAMP, ">q"),
    "max_timestamp": (MAX_TIMESTAMP, ">q"),
    "records_count": (RECORDS_COUNT, ">i"),
}
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
ZERO_CHUNK = bytes(1 << 20)


@dataclass(frozen=True)
class BatchInfo:
    """Where a batch sits in its file and what its header says."""

    position: int
    base_offset: int
    length: int
    epoch: int
    attributes: int
    last_offset_delta: int
    max_timestamp: int
    count: int

    @property
    def size(self) -> int:
        return self.length + 12

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def codec(self) -> int:
        return self.attributes & 7

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)


def parse_batches(data: bytes) -> list[BatchInfo]:
    """The batches of well-formed segment or snapshot bytes (asserts they tile the data)."""
    out, pos = [], 0
    while pos < len(data):
        f = HEADER.unpack_from(data, pos)
        out.append(BatchInfo(pos, f[0], f[1], f[2], f[5], f[6], f[8], f[12]))
        pos += 12 + f[1]
    assert pos == len(data), "not a well-formed run of batches"
    return out


def crc_of(batch: bytes | bytearray | memoryview) -> int:
    return crc32c.crc32c(bytes(batch[CRC_START:]))


def fix_crc(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, CRC, crc_of(batch))
    return batch


def patch(batch: bytearray, field: str, value: int, *, crc: bool = True) -> bytearray:
    """Overwrites one header field; ``crc=True`` makes the CRC valid again (which only matters
    for fields the CRC covers: everything from the attributes on)."""
    pos, fmt = FIELDS[field]
    struct.pack_into(fmt, batch, pos, value)
    return fix_crc(batch) if crc else batch


# ------------------------------------------------------------------------------ records


def varint(n: int) -> bytes:
    """Zigzag varint (records use it for every length, delta and count)."""
    return _uvarint_bytes((n << 1) ^ (n >> 63))


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of the zigzag varint at ``pos``."""
    z, pos = _uvarint(data, pos)
    return (z >> 1) ^ -(z & 1), pos


def records_of(batch: bytes) -> list[tuple[int, int]]:
    """(position in the batch, size with its length varint) of each record of an
    uncompressed batch."""
    out, pos = [], HEADER_SIZE
    for _ in range(struct.unpack_from(">i", batch, RECORDS_COUNT)[0]):
        n, body = read_varint(batch, pos)
        out.append((pos, body - pos + n))
        pos = body + n
    assert pos == len(batch)
    return out


def build_batch(records_area: bytes, *, base_offset: int, count: int, last_offset_delta: int, codec: str = "none",
                epoch: int = 0, timestamp: int = 0, max_timestamp: int | None = None, control: bool = False) -> bytes:
    """A v2 batch around an already encoded (and compressed) records area, with a valid CRC."""
    attributes = CODEC_IDS[codec] | (0x20 if control else 0)
    header = HEADER.pack(base_offset, HEADER_SIZE - 12 + len(records_area), epoch, 2, 0, attributes,
                         last_offset_delta, timestamp, timestamp if max_timestamp is None else max_timestamp,
                         -1, -1, -1, count)
    return bytes(fix_crc(bytearray(header + records_area)))


# ------------------------------------------------------------------------------ bombs

Piece = bytes | int  # bytes, or a number of zero bytes


def framed_records(value_sizes: Iterable[int]) -> list[Piece]:
    """Records with null keys whose values are runs of zeros of the given sizes, framed as
    Kafka frames them (length varint, attributes, timestamp delta, offset delta, key, value,
    header count): a well-formed records area that is mostly zeros. Each record's length must
    stay within the int32 varint a record length is."""
    out: list[Piece] = []
    for i, size in enumerate(value_sizes):
        head = b"\x00" + varint(0) + varint(i) + varint(-1) + varint(size)
        tail = varint(0)
        length = len(head) + size + len(tail)
        assert length < 2**31, "a record length is an int32 varint"
        out += [varint(length) + head, size, tail]
    return out


def pieces_size(pieces: list[Piece]) -> int:
    return sum(p if isinstance(p, int) else len(p) for p in pieces)


def _chunks(pieces: list[Piece]) -> Iterator[bytes | memoryview]:
    """The bytes of ``pieces`` in chunks of at most 1 MiB (zeros without copying)."""
    zeros = memoryview(ZERO_CHUNK)
    for p in pieces:
        if isinstance(p, int):
            full, rest = divmod(p, len(ZERO_CHUNK))
            for _ in range(full):
                yield zeros
            if rest:
                yield zeros[:rest]
        else:
            yield p


def zstd_bomb(pieces: list[Piece]) -> bytes:
    """One zstd frame (level 3, its content size written in the frame header)."""
    c = zstandard.ZstdCompressor(level=3, write_content_size=True).compressobj(size=pieces_size(pieces))
    out = bytearray()
    for chunk in _chunks(pieces):
        out += c.compress(chunk)
    out += c.flush()
    return bytes(out)


def gzip_bomb(pieces: list[Piece]) -> bytes:
    """One gzip member. Deflate cannot beat ~1030:1, but compressing 4 GiB of zeros at level 9
    takes ~12 s; instead each 1 MiB run of zeros is the same deflate blocks ending in a full
    flush (self-contained, byte aligned, no back reference across it), compressed once and
    repeated. The trailer carries the real CRC-32 and size (mod 2^32)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    c.compress(ZERO_CHUNK)
    c.flush(zlib.Z_FULL_FLUSH)
    zero_block = c.compress(ZERO_CHUNK) + c.flush(zlib.Z_FULL_FLUSH)
    out = bytearray(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")
    crc = 0
    size = 0
    for chunk in _chunks(pieces):
        crc = zlib.crc32(chunk, crc)
        size += len(chunk)
        if isinstance(chunk, memoryview) and len(chunk) == len(ZERO_CHUNK):
            out += zero_block
        else:
            out += c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
    out += c.flush(zlib.Z_FINISH)
    out += struct.pack("<II", crc, size & 0xFFFFFFFF)
    return bytes(out)


def lz4_bomb(pieces: list[Piece]) -> bytes:
    """One LZ4 frame as Kafka's reader accepts it (independent 64 KiB blocks, no checksums),
    with the content size in its descriptor."""
    c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                     content_checksum=False, block_checksum=False)
    out = bytearray(c.begin(source_size=pieces_size(pieces)))
    for chunk in _chunks(pieces):
        out += c.compress(chunk)
    out += c.flush()
    return bytes(out)


XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def snappy_lying_bomb(head: bytes, declared: int, body_zeros: int = 1 << 20) -> bytes:
    """Kafka's xerial snappy framing: a first block holding ``head``, then a raw snappy block
    whose preamble declares ``declared`` uncompressed bytes while its body inflates to
    ``body_zeros`` zeros. (Snappy cannot exceed ~21:1, so a real 4 GiB snappy payload would
    take ~200 MB; the lying preamble is the practical snappy bomb: a reader that trusts it
    allocates ``declared`` bytes.)"""
    first = bytes(cramjam.snappy.compress_raw(head))
    raw = bytes(cramjam.snappy.compress_raw(bytes(body_zeros)))
    _, body = _uvarint(raw, 0)
    lying = _uvarint_bytes(declared) + raw[body:]
    out = bytearray(XERIAL_HEADER)
    for block in (first, lying):
        out += struct.pack(">I", len(block)) + block
    return bytes(out)


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        b = data[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, pos


def _uvarint_bytes(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)
