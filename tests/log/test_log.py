"""The partition log (``kraftkit.log.Log``): segments, rolling, reading, truncation, the
leader-epoch cache and its checkpoint file, and recovery of a torn tail. Expected layouts come
from Kafka's rules (``LogSegment.shouldRoll``,
``LocalLog.truncateTo``, ``LeaderEpochFileCache``), computed here by the test."""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import pytest

import kraftkit.log as L
from kraftkit.errors import CorruptRecordError, LogError, TruncatedError
from kraftkit.log import Log

from ._support import CODECS

NAME = re.compile(r"^\d{20}\.(log|index|timeindex)$")


def mk(offset: int, n: int = 2, *, epoch: int = 0, size: int = 100, codec: str = "none", ts: int = 1000) -> bytes:
    return L.encode_batch([(ts + i, b"k%d" % (offset + i), bytes([offset % 251]) * size, [("o", b"%d" % (offset + i))])
                           for i in range(n)], base_offset=offset, partition_leader_epoch=epoch, compression=codec)


def log_files(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if NAME.match(n))


def all_bytes(log: Log) -> bytes:
    return b"".join(bytes(memoryview(b)) for b in log.batches())


def test_create_and_open_errors(tmp_path):
    with pytest.raises(LogError):
        Log(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LogError):
        Log(tmp_path / "empty")
    d = tmp_path / "p-0"
    with Log(d, create=True) as log:
        assert log.segments == [0] and log.log_start_offset == 0 and log.log_end_offset == 0
        assert log.leader_epochs == [] and log.latest_epoch is None
        assert list(log.batches()) == [] and log.read(0) == b""
    assert (d / "00000000000000000000.log").is_file()
    with Log(tmp_path / "q-0", create=True, initial_offset=42) as log:
        assert log.segments == [42] and log.log_end_offset == 42
    assert (tmp_path / "q-0" / "00000000000000000042.log").is_file()
    assert L.segment_name(42) == "00000000000000000042.log"
    assert L.segment_name(2**63 - 1, ".index") == "09223372036854775807.index"


def test_append_read_reopen(tmp_path):
    parts = []
    with Log(tmp_path, create=True) as log:
        off = 0
        for i, codec in enumerate(CODECS * 2):
            b = mk(off, 3, codec=codec)
            info = log.append(b)
            assert (info["first_offset"], info["last_offset"]) == (off, off + 2)
            assert info["position"] == sum(len(p) for p in parts) and info["segment"] == 0
            parts.append(b)
            off += 3
        # Several batches in one append call.
        two = mk(off, 1) + mk(off + 1, 4)
        info = log.append(two)
        assert (info["first_offset"], info["last_offset"], info["batches"], info["records"]) == (off, off + 4, 2, 5)
        parts += [two]
        assert log.log_end_offset == off + 5
        assert all_bytes(log) == b"".join(parts)
    with Log(tmp_path) as log:
        assert log.log_end_offset == off + 5 and log.segments == [0]
        assert all_bytes(log) == b"".join(parts)
        assert log.recovery["error"] is None
        assert [r.value for b in log.batches() for r in b][-1] == bytes([(off + 1) % 251]) * 100


def model_roll(sizes_and_offsets, segment_bytes):
    """LogSegment.shouldRoll on size: roll before an append when the (non-empty) active segment's
    size > segment.bytes - append size; the new segment is named after the append's first offset."""
    bases, size = [sizes_and_offsets[0][1]], 0
    for n, first in sizes_and_offsets:
        if size > 0 and size > segment_bytes - n:
            bases.append(first)
            size = 0
        size += n
    return bases


@pytest.mark.parametrize("segment_bytes", [1, 300, 700, 2000])
def test_roll_by_size(tmp_path, segment_bytes):
    appends, off = [], 0
    for i in range(20):
        n = 1 + i % 4
        appends.append(mk(off, n, size=30 + 7 * i))
        off += n
    with Log(tmp_path, create=True, segment_bytes=segment_bytes) as log:
        for a in appends:
            info = log.append(a)
        expected = model_roll([(len(a), struct.unpack_from(">q", a)[0]) for a in appends], segment_bytes)
        assert log.segments == expected
        assert info["segment"] == expected[-1]
    names = log_files(tmp_path)
    assert [n for n in names if n.endswith(".log")] == [L.segment_name(b) for b in expected]
    for b in expected:
        for suffix in (".index", ".timeindex"):
            assert L.segment_name(b, suffix) in names
        seg = L.Segment(tmp_path / L.segment_name(b))
        assert seg.scan(deep=True)["error"] is None
        assert seg.verify_indexes() == []
        first = seg.read_batches()[0]
        assert first.base_offset == b
        if segment_bytes > 1:
            assert seg.size <= max(segment_bytes, max(len(a) for a in appends))
    with Log(tmp_path, segment_bytes=segment_bytes) as log:
        assert log.segments == expected
        assert all_bytes(log) == b"".join(appends)
        for a in appends:  # batches(start) from every batch start, across segments
            first = struct.unpack_from(">q", a)[0]
            got = b"".join(bytes(memoryview(x)) for x in log.batches(first))
            assert got == b"".join(appends)[b"".join(appends).index(a):]


def test_explicit_roll(tmp_path):
    with Log(tmp_path, create=True) as log:
        log.append(mk(0, 2))
        log.roll()
        assert log.segments == [0, 2]
        with pytest.raises(LogError):
            log.roll(1)
        log.append(mk(2, 2))
        log.roll(4)
        log.append(mk(4, 1))
        assert log.segments == [0, 2, 4]
        assert [b.base_offset for b in log.batches()] == [0, 2, 4]
    assert [n for n in log_files(tmp_path) if n.endswith(".log")] == [L.segment_name(b) for b in (0, 2, 4)]


def test_read(tmp_path):
    appends, off = [], 0
    with Log(tmp_path, create=True, segment_bytes=900) as log:
        for i in range(12):
            a = mk(off, 3, size=50)
            log.append(a)
            appends.append((off, a))
            off += 3
        segs = log.segments
        assert len(segs) > 2
        seg_of = {o: max(s for s in segs if s <= o) for o, _ in appends}
        for target in range(off):
            start = max(o for o, _ in appends if o <= target)
            same_seg = [a for o, a in appends if o >= start and seg_of[o] == seg_of[start]]
            for max_bytes in (1, len(same_seg[0]), len(same_seg[0]) + 1, 2 * len(same_seg[0]), 10**6):
                got = log.read(target, max_bytes)
                exp, total = b"", 0
                for a in same_seg:  # whole batches from one segment; the first one always
                    if exp and total + len(a) > max_bytes:
                        break
                    exp += a
                    total += len(a)
                assert got == exp, (target, max_bytes)
        assert log.read(off) == b""
        with pytest.raises(LogError):
            log.read(off + 1)


def test_leader_epoch_checkpoint(tmp_path):
    ck = tmp_path / "leader-epoch-checkpoint"
    with Log(tmp_path, create=True) as log:
        log.append(mk(0, 2, epoch=-1))  # no epoch: no entry
        assert not ck.exists() and log.leader_epochs == []
        log.append(mk(2, 2, epoch=0))
        log.append(mk(4, 2, epoch=0))
        log.append(mk(6, 1, epoch=3) + mk(7, 1, epoch=3) + mk(8, 2, epoch=5))
        log.append(mk(10, 1, epoch=4))  # lower than the latest: ignored
        log.append(mk(11, 1, epoch=7))
        assert log.leader_epochs == [(0, 2), (3, 6), (5, 8), (7, 11)] and log.latest_epoch == 7
    assert ck.read_text() == "0\n4\n0 2\n3 6\n5 8\n7 11\n"
    assert L.read_leader_epochs(ck) == [(0, 2), (3, 6), (5, 8), (7, 11)]
    with Log(tmp_path) as log:
        assert log.leader_epochs == [(0, 2), (3, 6), (5, 8), (7, 11)]
        log.truncate_to(8)
        assert log.leader_epochs == [(0, 2), (3, 6)]
    assert ck.read_text() == "0\n2\n0 2\n3 6\n"
    assert not (tmp_path / "leader-epoch-checkpoint.tmp").exists()


@pytest.mark.parametrize("target", range(0, 24))
def test_truncate_to(tmp_path, target):
    appends, off = [], 0
    with Log(tmp_path, create=True, segment_bytes=700) as log:
        for i in range(8):
            a = mk(off, 3, epoch=i // 2, size=60)
            log.append(a)
            appends.append((off, a))
            off += 3
        segs_before = log.segments
        log.truncate_to(target)
        # Whole batches: a batch holding `target` goes too.
        kept = [(o, a) for o, a in appends if o + 2 < target]
        leo = kept[-1][0] + 3 if kept else 0
        assert log.log_end_offset == leo
        assert all_bytes(log) == b"".join(a for _, a in kept)
        # LocalLog.truncateTo: segments whose base offset is above the target are deleted.
        assert all(s <= target for s in log.segments)
        assert set(log.segments) <= set(segs_before)
        # LeaderEpochFileCache.truncateFromEnd: entries starting at or after the target go.
        exp_epochs = [(e, o) for e, o in [(0, 0), (1, 6), (2, 12), (3, 18)] if o < target]
        assert log.leader_epochs == exp_epochs
        log.append(mk(leo, 1, epoch=9))
        assert log.log_end_offset == leo + 1
    names = log_files(tmp_path)
    for s in segs_before:
        present = L.segment_name(s) in names
        assert present == (s in log.segments)
        if s > target:
            assert not any(n.startswith(L.segment_name(s, "")) for n in names)
    with Log(tmp_path) as log:
        assert all_bytes(log) == b"".join(a for _, a in kept) + mk(leo, 1, epoch=9)
        assert log.leader_epochs == exp_epochs + [(9, leo)]
        for s in log.segments:
            assert L.Segment(tmp_path / L.segment_name(s)).verify_indexes() == []


def test_truncate_beyond_end_is_a_noop(tmp_path):
    with Log(tmp_path, create=True) as log:
        log.append(mk(0, 3))
        log.truncate_to(3)
        log.truncate_to(100)
        assert log.log_end_offset == 3 and all_bytes(log) == mk(0, 3)


def test_append_rejects_bad_input(tmp_path):
    with Log(tmp_path, create=True) as log:
        log.append(mk(0, 2))
        before = (tmp_path / "00000000000000000000.log").read_bytes()
        with pytest.raises(LogError):
            log.append(mk(1, 2))  # overlaps the log end
        with pytest.raises(LogError):
            log.append(mk(5, 2))  # gap at the start
        bad = bytearray(mk(2, 2))
        bad[70] ^= 0x10
        with pytest.raises(CorruptRecordError) as ei:
            log.append(bytes(bad))
        assert "CRC" in ei.value.reason
        with pytest.raises(TruncatedError):
            log.append(mk(2, 2)[:-1])
        with pytest.raises(CorruptRecordError):
            log.append(mk(2, 2) + mk(3, 1))  # second batch below the next expected offset
        with pytest.raises(CorruptRecordError):
            log.append(mk(2, 2) + b"\xff" * 20)  # trailing garbage
        with pytest.raises(LogError):
            log.append(b"")
        assert log.log_end_offset == 2
        assert (tmp_path / "00000000000000000000.log").read_bytes() == before
        log.append(mk(2, 2))
        assert log.log_end_offset == 4


def _torn_tails(good_last: bytes):
    """(name, bytes appended to the active segment) of torn and corrupt tails."""
    partial = mk(100, 3)
    crc_bad = bytearray(mk(100, 3))
    crc_bad[-1] ^= 1
    return [
        ("half-header", partial[:7]),
        ("header-only", partial[:61]),
        ("all-but-one", partial[:-1]),
        ("crc", bytes(crc_bad)),
        ("zeros", bytes(64)),
        ("bad-magic", partial[:16] + b"\x07" + partial[17:]),
    ]


@pytest.mark.parametrize("case", range(6))
def test_torn_tail_on_reopen(tmp_path, case):
    appends, off = [], 0
    with Log(tmp_path, create=True, segment_bytes=600) as log:
        for i in range(6):
            a = mk(off, 2, epoch=i, size=80)
            log.append(a)
            appends.append(a)
            off += 2
        segs = log.segments
        epochs = log.leader_epochs
    name, tail = _torn_tails(appends[-1])[case]
    # A tail whose base offset runs on from the log (torn write of the next batch).
    tail = struct.pack(">q", off) + tail[8:] if len(tail) >= 8 else tail
    active = tmp_path / L.segment_name(segs[-1])
    good = active.read_bytes()
    active.write_bytes(good + tail)
    with pytest.raises(CorruptRecordError) as ei:
        Log(tmp_path)
    assert ei.value.file == str(active), name
    assert ei.value.position == len(good), name
    assert active.read_bytes() == good + tail  # nothing changed without the option
    with Log(tmp_path, truncate_corrupt_tail=True) as log:
        assert log.recovery["valid_bytes"] == len(good)
        assert isinstance(log.recovery["error"], CorruptRecordError)
        assert active.read_bytes() == good
        assert log.log_end_offset == off and log.segments == segs
        assert all_bytes(log) == b"".join(appends)  # never lose committed data
        assert log.leader_epochs == epochs
        log.append(mk(off, 1, epoch=99))
    with Log(tmp_path) as log:
        assert log.recovery["error"] is None
        assert all_bytes(log) == b"".join(appends) + mk(off, 1, epoch=99)


def test_corrupt_batch_inside_active_segment(tmp_path):
    with Log(tmp_path, create=True) as log:
        parts = [mk(0, 2, epoch=1), mk(2, 2, epoch=2), mk(4, 2, epoch=3)]
        for p in parts:
            log.append(p)
    path = tmp_path / L.segment_name(0)
    data = bytearray(path.read_bytes())
    data[len(parts[0]) + 40] ^= 0xFF  # inside the second batch's CRC-covered bytes
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError) as ei:
        Log(tmp_path)
    assert (ei.value.file, ei.value.position, ei.value.offset) == (str(path), len(parts[0]), 2)
    with Log(tmp_path, truncate_corrupt_tail=True) as log:
        # Like LogSegment.recover: everything from the first invalid batch on is cut.
        assert all_bytes(log) == parts[0]
        assert log.log_end_offset == 2
        assert log.leader_epochs == [(1, 0)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"


def test_delete_oldest_segments_and_truncate_fully(tmp_path):
    log = Log(tmp_path / "p", create=True, segment_bytes=300)
    for i, epoch in zip(range(0, 12, 2), (1, 1, 2, 2, 3, 3)):
        log.append(mk(i, epoch=epoch))
    bases = log.segments
    assert len(bases) >= 3
    with pytest.raises(LogError):
        log.delete_segments(bases[1:2])  # not the oldest
    with pytest.raises(LogError):
        log.delete_segments(bases)  # the active one too
    log.delete_segments(bases[:2])
    assert log.segments == bases[2:] and log.log_start_offset == bases[2]
    left = log_files(tmp_path / "p")
    assert [n for n in left if n.endswith(".log")] == [f"{b:020d}.log" for b in bases[2:]]
    assert not [n for n in left if int(n[:20]) in bases[:2]]  # nor their indexes
    # the epoch cache starts at the new log start (the epoch in force there), as Kafka truncates it
    assert log.leader_epochs[0][1] == bases[2] and all(o >= bases[2] for _e, o in log.leader_epochs)
    assert L.read_leader_epochs(tmp_path / "p" / "leader-epoch-checkpoint") == log.leader_epochs
    log.truncate_fully_and_start_at(100)
    assert (log.segments, log.log_start_offset, log.log_end_offset, log.leader_epochs) == ([100], 100, 100, [])
    log.append(mk(100, epoch=4))
    log.close()
    again = Log(tmp_path / "p")
    assert (again.segments, again.log_end_offset, again.leader_epochs) == ([100], 102, [(4, 100)])
