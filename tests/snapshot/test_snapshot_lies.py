"""Snapshots that lie about themselves: empty, a name whose end offset or epoch does not match
the log, altered base offsets, a lying lastOffsetDelta. ``snapshot verify`` exits 1 for what
the file alone shows; ``metadata image``/``verify-log`` also check the name against the log.

The snapshots are made by ``kraftkit snapshot create`` from a ``kraftkit.metadata.generate`` metadata log
and then damaged; expected offsets and epochs are read from the log.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kraftkit.log import Segment, crc32c
from kraftkit.metadata.generate import write_metadata_log
from kraftkit.metadata.snapshot import SnapshotId, SnapshotReader, SnapshotWriter
from tests.cli.test_cli import run


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> tuple[Path, SnapshotId]:
    root = tmp_path_factory.mktemp("lies") / "logdir"
    d = root / "__cluster_metadata-0"
    write_metadata_log(d, topics=120, partitions=3, segment_bytes=8000, max_batch_records=20)
    batches = [b for s in sorted(d.glob("*.log")) for b in Segment(s).read_batches()]
    # a batch end in the second leader epoch, with later batches after it
    b = [x for x in batches if x.partition_leader_epoch == 2][3]
    run("snapshot", "create", str(root), "--at", str(b.last_offset + 1), check=0)
    return root, SnapshotId(b.last_offset + 1, 2)


@pytest.fixture()
def logdir(pristine, tmp_path: Path) -> tuple[Path, Path]:
    root, sid = pristine
    dst = tmp_path / "logdir"
    shutil.copytree(root, dst)
    snap = dst / "__cluster_metadata-0" / sid.file_name
    os.chmod(snap, 0o644)
    return dst, snap


def rewrite_batch(data: bytearray, index: int, *, base_offset: int | None = None, last_offset_delta: int | None = None,
                  epoch: int | None = None) -> int:
    """Changes header fields of the index-th batch and recomputes its CRC; returns its position."""
    pos = 0
    for _ in range(index):
        pos += int.from_bytes(data[pos + 8:pos + 12], "big") + 12
    size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
    if base_offset is not None:
        data[pos:pos + 8] = base_offset.to_bytes(8, "big", signed=True)
    if epoch is not None:
        data[pos + 12:pos + 16] = epoch.to_bytes(4, "big", signed=True)
    if last_offset_delta is not None:
        data[pos + 23:pos + 27] = last_offset_delta.to_bytes(4, "big", signed=True)
    data[pos + 17:pos + 21] = crc32c(bytes(data[pos + 21:pos + size])).to_bytes(4, "big")
    return pos


def test_undamaged_snapshot_is_valid(logdir) -> None:
    root, snap = logdir
    run("snapshot", "verify", str(snap), check=0)
    assert "all valid" in run("verify-log", "--deep", str(root), check=0).stdout
    run("metadata", "image", str(root), check=0)


def test_empty_snapshot(logdir) -> None:
    root, snap = logdir
    sid = SnapshotReader(snap).snapshot_id
    snap.unlink()
    with SnapshotWriter(snap.parent, sid, last_contained_log_timestamp=1):
        pass  # header and footer, no records
    proc = run("snapshot", "verify", str(snap), check=1)
    want = f"{snap}: empty snapshot: it claims offsets up to {sid.end_offset - 1} but holds no metadata records"
    assert f"{snap}: INVALID: {want}" in proc.stdout
    assert f"kraftkit metadata image: {want}" in run("metadata", "image", str(root), check=1).stderr.splitlines()
    snap.write_bytes(b"")
    assert "empty snapshot: no SnapshotHeader" in run("snapshot", "verify", str(snap), check=1).stdout


def relabel(src: Path, dst: Path, epoch: int) -> None:
    """``src``'s bytes with every batch carrying ``epoch``, written as ``dst`` (consistent in itself)."""
    data = bytearray(src.read_bytes())
    for i in range(len(Segment(src).read_batches())):
        rewrite_batch(data, i, epoch=epoch)
    dst.write_bytes(bytes(data))


def test_name_with_the_wrong_epoch(logdir) -> None:
    root, snap = logdir
    sid = SnapshotReader(snap).snapshot_id
    epochs = {b.partition_leader_epoch for s in sorted(snap.parent.glob("*.log")) for b in Segment(s).read_batches()}
    assert epochs == {1, 2, 3}
    # renamed only: its batches carry epoch 2, the name 5
    wrong = snap.with_name(SnapshotId(sid.end_offset, 5).file_name)
    shutil.copy(snap, wrong)
    snap.unlink()
    proc = run("snapshot", "verify", str(wrong), check=1)
    assert "batch leader epoch 2 differs from the snapshot epoch 5" in proc.stdout
    # batches rewritten to match the name: the file agrees with itself, not with the log
    relabel(wrong, wrong, 5)
    run("snapshot", "verify", str(wrong), check=0)
    seg, pos, base = batch_ending(root, sid.end_offset - 1)
    want = (f"{wrong}: epoch 5 in the name is not a leader epoch of the log (the log batch ending at offset "
            f"{sid.end_offset - 1} in {seg} has epoch 2) (batch base offset {base}, byte position {pos})")
    assert f"kraftkit metadata image: {want}" in run("metadata", "image", str(root), check=1).stderr.splitlines()
    assert f"  - {want}" in run("verify-log", str(root), check=1).stdout.splitlines()
    # an epoch below the log's
    low = wrong.with_name(SnapshotId(sid.end_offset, 1).file_name)
    relabel(wrong, low, 1)
    wrong.unlink()
    proc = run("metadata", "image", str(root), check=1)
    assert f"{low}: epoch 1 in the name is below leader epoch 2 of the log batch ending at offset {sid.end_offset - 1}" in proc.stderr
    # --allow-gaps goes on, with the lie as a warning
    proc = run("metadata", "image", str(root), "--allow-gaps", check=0)
    assert "warning" in proc.stderr and "below leader epoch 2" in proc.stderr
    # a later epoch of the log is valid for this offset in Kafka's validateOffsetAndEpoch (the
    # epoch's end offset is past the snapshot's): accepted, as Kafka would
    later = low.with_name(SnapshotId(sid.end_offset, 3).file_name)
    relabel(low, later, 3)
    low.unlink()
    run("metadata", "image", str(root), check=0)
    assert "all valid" in run("verify-log", str(root), check=0).stdout


def batch_ending(root: Path, offset: int) -> tuple[Path, int, int]:
    for seg in sorted((root / "__cluster_metadata-0").glob("*.log")):
        for b in Segment(seg).read_batches():
            if b.base_offset <= offset <= b.last_offset:
                return seg, b.position, b.base_offset
    raise AssertionError(offset)


def test_name_with_an_end_offset_inside_a_batch(logdir) -> None:
    root, snap = logdir
    sid = SnapshotReader(snap).snapshot_id
    seg, pos, base = batch_ending(root, sid.end_offset - 1)
    inside = SnapshotId(sid.end_offset - 1, 2)
    assert base < inside.end_offset - 1  # the batch holds more than one record
    moved = snap.with_name(inside.file_name)
    snap.rename(moved)
    proc = run("verify-log", str(root), check=1)
    want = (f"{moved}: end offset {inside.end_offset} is inside the log batch {base}..{sid.end_offset - 1} of {seg}: "
            f"a snapshot ends where a batch ends (batch base offset {base}, byte position {pos})")
    assert f"  - {want}" in proc.stdout.splitlines()
    assert f"kraftkit metadata image: {want}" in run("metadata", "image", str(root), check=1).stderr.splitlines()


def test_altered_base_offset(logdir) -> None:
    root, snap = logdir
    expected = Segment(snap).read_batches()[0].last_offset + 1
    data = bytearray(snap.read_bytes())
    pos = rewrite_batch(data, 1, base_offset=expected + 6)
    snap.write_bytes(bytes(data))
    proc = run("snapshot", "verify", str(snap), check=1)
    want = (f"batch base offset {expected + 6} where offset {expected} was expected (snapshot offsets start at 0 and are "
            f"contiguous) (batch base offset {expected + 6}, byte position {pos})")
    assert want in proc.stdout
    assert want in run("metadata", "image", str(root), check=1).stderr
    assert want in run("metadata", "dump", str(root), check=1).stderr


def test_footer_with_a_lying_last_offset_delta(logdir) -> None:
    root, snap = logdir
    data = bytearray(snap.read_bytes())
    pos = rewrite_batch(data, 2, last_offset_delta=2**31 - 1)
    snap.write_bytes(bytes(data))
    footer = Segment(snap).read_batches()[2]
    want = (f"lastOffsetDelta 2147483647 does not match the batch's 1 records (a KRaft batch holds offsets "
            f"base..base+records-1) (batch base offset {footer.base_offset}, byte position {pos})")
    for cmd in (["snapshot", "verify", str(snap)], ["metadata", "image", str(root)], ["metadata", "dump", str(snap)],
                ["verify-log", str(root)]):
        proc = run(*cmd, check=1)
        assert want in proc.stdout + proc.stderr, cmd
