"""Snapshot files: naming, writing (atomic, streaming, Kafka's batch layout) and validation."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from kraftkit.errors import CorruptRecordError, TruncatedError
from kraftkit.log import Segment, encode_batch
from kraftkit.metadata.generate import feature_level_record, noop_record, topic_record
from kraftkit.metadata.snapshot import (
    BOOTSTRAP_SNAPSHOT_ID,
    SnapshotError,
    SnapshotId,
    SnapshotReader,
    SnapshotWriter,
    list_snapshots,
    mark_deleted,
    parse_snapshot_name,
)

TS = 1_700_000_000_000


def write(tmp: Path, sid=SnapshotId(1234, 7), n=100, **kw) -> Path:
    with SnapshotWriter(tmp, sid, last_contained_log_timestamp=TS, time_ms=TS + 5, **kw) as w:
        for i in range(n):
            w.append([topic_record(f"t{i}", bytes(16)), feature_level_record("x", i % 100)])
    return w.final_path


def test_names_follow_kafka() -> None:
    # Kafka's layout (Snapshots.filenameFromSnapshotId): 20-digit end offset, 10-digit epoch.
    assert SnapshotId(12345, 7).file_name == "00000000000000012345-0000000007.checkpoint"
    assert BOOTSTRAP_SNAPSHOT_ID.file_name == "00000000000000000000-0000000000.checkpoint"
    assert parse_snapshot_name("00000000000000012345-0000000007.checkpoint") == (SnapshotId(12345, 7), "immutable")
    assert parse_snapshot_name("00000000000000012345-0000000007-98765.checkpoint.part") == (SnapshotId(12345, 7), "partial")
    assert parse_snapshot_name("00000000000000012345-0000000007.checkpoint.deleted") == (SnapshotId(12345, 7), "deleted")
    for bad in ("0000000000000012345-0000000007.checkpoint", "00000000000000012345-0000000007.log", "x.checkpoint",
                "00000000000000012345-0000000007-1.checkpoint"):
        assert parse_snapshot_name(bad) is None, bad


def test_written_snapshot_layout(tmp_path: Path) -> None:
    path = write(tmp_path)
    assert path.name == "00000000000000001234-0000000007.checkpoint"
    assert not list(tmp_path.glob("*.part"))
    assert oct(path.stat().st_mode & 0o777) == "0o444"
    batches = list(Segment(path).batches(verify_crc=True))
    # Header control batch at offset 0, data, footer control batch; every batch at the epoch.
    assert batches[0].is_control and batches[-1].is_control and not any(b.is_control for b in batches[1:-1])
    assert [b.partition_leader_epoch for b in batches] == [7] * len(batches)
    assert batches[0].base_offset == 0
    for a, b in zip(batches, batches[1:]):
        assert b.base_offset == a.last_offset + 1
    header = batches[0].records()[0]
    assert header.control_type_name == "SNAPSHOT_HEADER"
    # SnapshotHeaderRecord v0: int16 version, int64 LastContainedLogTimestamp, empty tags.
    assert header.value == struct.pack(">hqB", 0, TS, 0)
    footer = batches[-1].records()[-1]
    assert footer.control_type_name == "SNAPSHOT_FOOTER" and footer.value == b"\x00\x00\x00"
    data = [r for b in batches[1:-1] for r in b.records()]
    assert len(data) == 200 and all(r.key is None and r.headers == [] for r in data)
    rep = SnapshotReader(path).check()
    assert rep["data_records"] == 200 and rep["last_contained_log_timestamp"] == TS and rep["has_footer"]
    assert list_snapshots(tmp_path) == [SnapshotId(1234, 7)]


def test_lists_never_span_batches_and_batches_respect_the_limit(tmp_path: Path) -> None:
    path = write(tmp_path, n=300, max_batch_bytes=4096)
    data_batches = [b for b in Segment(path).batches() if not b.is_control]
    assert len(data_batches) >= 5
    assert all(b.size_in_bytes <= 4096 for b in data_batches)
    assert all(b.count % 2 == 0 for b in data_batches)  # each append() list is a pair


def test_same_input_same_bytes(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert write(tmp_path / "a").read_bytes() == write(tmp_path / "b").read_bytes()


def test_kraft_version_and_voters_in_the_header_batch(tmp_path: Path) -> None:
    voters = bytes.fromhex("0000" "01" "00")  # VotersRecord v0 with no voters, empty tags
    path = write(tmp_path, kraft_version=1, voters_value=voters)
    first = list(Segment(path).batches())[0].records()
    assert [r.control_type_name for r in first] == ["SNAPSHOT_HEADER", "KRAFT_VERSION", "KRAFT_VOTERS"]
    assert first[1].value == struct.pack(">hhB", 0, 1, 0)
    rep = SnapshotReader(path).check()
    assert rep["kraft_version"] == 1 and rep["has_voters"]
    with pytest.raises(SnapshotError):
        SnapshotWriter(tmp_path, SnapshotId(1, 1), last_contained_log_timestamp=0, voters_value=voters)


def test_abort_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        with SnapshotWriter(tmp_path, SnapshotId(5, 1), last_contained_log_timestamp=0) as w:
            w.append([noop_record()])
            assert list(tmp_path.glob("*.checkpoint.part"))
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_refuses_to_overwrite(tmp_path: Path) -> None:
    write(tmp_path)
    with pytest.raises(SnapshotError, match="already exists"):
        SnapshotWriter(tmp_path, SnapshotId(1234, 7), last_contained_log_timestamp=0)


def test_mark_deleted(tmp_path: Path) -> None:
    p = write(tmp_path)
    d = mark_deleted(p)
    assert d.name == p.name + ".deleted" and not p.exists()
    assert list_snapshots(tmp_path) == []


def _rewrite(path: Path, data: bytes) -> Path:
    os.chmod(path, 0o644)
    path.write_bytes(data)
    return path


def test_truncated_snapshot_is_reported(tmp_path: Path) -> None:
    p = write(tmp_path)
    data = p.read_bytes()
    footer = list(Segment(p).batches())[-1]
    _rewrite(p, data[: footer.position])
    rep = SnapshotReader(p).verify()
    assert isinstance(rep["error"], TruncatedError) and "SnapshotFooter" in str(rep["error"])
    assert rep["error"].file == str(p)
    _rewrite(p, data[: footer.position + 30])
    err = SnapshotReader(p).verify()["error"]
    assert isinstance(err, TruncatedError) and err.position == footer.position


def test_flipped_byte_is_reported_with_position(tmp_path: Path) -> None:
    p = write(tmp_path)
    data = bytearray(p.read_bytes())
    victim = list(Segment(p).batches())[1]
    data[victim.position + 100] ^= 0x01
    _rewrite(p, bytes(data))
    err = SnapshotReader(p).verify()["error"]
    assert isinstance(err, CorruptRecordError) and "CRC" in err.reason and err.position == victim.position
    with pytest.raises(CorruptRecordError):
        SnapshotReader(p).check()


def test_mislabelled_snapshot_epoch(tmp_path: Path) -> None:
    p = write(tmp_path)
    wrong = tmp_path / SnapshotId(1234, 8).file_name
    os.rename(p, wrong)
    err = SnapshotReader(wrong).verify()["error"]
    assert err is not None and "snapshot epoch 8" in err.reason


def test_snapshot_without_header_is_rejected(tmp_path: Path) -> None:
    p = tmp_path / SnapshotId(3, 1).file_name
    p.write_bytes(encode_batch([(TS, None, noop_record(), [])], partition_leader_epoch=1))
    err = SnapshotReader(p).verify()["error"]
    assert err is not None and "SnapshotHeader" in err.reason


def test_non_snapshot_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="not a snapshot file name"):
        SnapshotReader(tmp_path / "foo.checkpoint")
