"""``Segment.dump()``: the text of a whole segment, rendered in chunks whose batches are rendered
in parallel, and the summary of what the dump found, merged in file order."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kraftkit.log import Segment, encode_batch, segment_name

TS = 1_700_000_000_000


def test_summary_and_text_of_a_multi_chunk_segment_follow_file_order(tmp_path: Path) -> None:
    # ~12 MB: three chunks or more. Every 7th batch starts 3 offsets after the previous batch's
    # last (a gap, as compaction leaves), and batch 150's CRC is broken by a flipped value byte.
    data = bytearray()
    positions, gaps, counts = [], [], []
    offset = 0
    for i in range(300):
        n = 5 + i % 11
        if i and i % 7 == 0:
            gaps.append((offset - 1, offset + 3))
            offset += 3
        positions.append(len(data))
        counts.append(n)
        batch = bytearray(encode_batch([(TS + j, b"k%d" % j, bytes([i % 251]) * 8000, []) for j in range(n)],
                                       base_offset=offset))
        if i == 150:
            batch[-100] ^= 0x01
        data += batch
        offset += n
    path = tmp_path / segment_name(0)
    path.write_bytes(bytes(data))
    assert len(data) > 3 * (4 << 20)

    # 4 MB steps (the default with records; batch lines alone go 32 MB at a time, one chunk here)
    whole = b"".join(Segment(path).dump())
    with pytest.raises(ValueError, match="chunk_bytes"):
        Segment(path).dump(chunk_bytes=0)
    for deep in (False, True):
        it = Segment(path).dump(deep=deep, chunk_bytes=4 << 20)
        chunks = list(it)
        summary = it.summary()
        assert len(chunks) >= 3
        if not deep:
            assert b"".join(chunks) == whole
        text = b"".join(chunks).decode()
        batch_lines = [l for l in text.splitlines() if l.startswith("baseOffset:")]
        assert [int(l.split("position: ")[1].split()[0]) for l in batch_lines] == positions
        assert [l.endswith("isvalid: false") for l in batch_lines] == [i == 150 for i in range(300)]
        record_lines = [l for l in text.splitlines() if l.startswith("| offset:")]
        assert len(record_lines) == (sum(counts) if deep else 0)
        assert summary["batches"] == 300 and summary["records"] == sum(counts)
        assert summary["invalid_batches"] == 1 and summary["error"] is None
        # offsets are only followed record by record
        assert summary["non_consecutive"] == (gaps if deep else [])


def _log(tmp_path: Path, batches: int = 200) -> Path:
    data = b"".join(encode_batch([(TS + j, None, bytes(range(256)) * 20, []) for j in range(10)], base_offset=10 * i)
                    for i in range(batches))
    path = tmp_path / segment_name(0)
    path.write_bytes(data)
    return path


def test_write_to_a_file_descriptor_writes_what_iteration_gives(tmp_path: Path) -> None:
    path = _log(tmp_path)
    want = b"".join(Segment(path).dump(print_data=True))
    out = tmp_path / "out.txt"
    with open(out, "wb") as f:
        it = Segment(path).dump(print_data=True)
        first = next(it)  # what iteration took is not written again
        it.write_to(f.fileno())
    assert first + out.read_bytes() == want
    assert it.summary()["batches"] == 200


def test_write_to_a_closed_pipe_or_a_bad_descriptor_raises(tmp_path: Path) -> None:
    path = _log(tmp_path)
    r, w = os.pipe()
    os.close(r)
    try:
        with pytest.raises(BrokenPipeError):
            Segment(path).dump(print_data=True).write_to(w)
    finally:
        os.close(w)
    with pytest.raises(OSError):
        Segment(path).dump().write_to(999_999)  # not an open descriptor
    with pytest.raises(ValueError):
        Segment(path).dump().write_to(-1)
