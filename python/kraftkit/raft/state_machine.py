"""The state machine a kraftkit quorum replicates: Kafka's metadata image.

Committed batches are replayed into a :class:`~kraftkit.metadata.MetadataImage` (the Rust engine),
in offset order and only below the high watermark, as Kafka's controllers and brokers apply
``handleCommit``. A snapshot of the image is the KRaft snapshot of the log prefix it covers (the
same file Kafka writes, readable by ``kraftkit snapshot verify`` and by Kafka); loading one from the
leader (FetchSnapshot) or from disk at start replaces the image.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from kraftkit._core import RecordBatch
from kraftkit.metadata.image import MetadataImage, load_snapshot
from kraftkit.metadata.snapshot import SnapshotId
from kraftkit.raft.file_log import FileRaftLog

__all__ = ["MetadataStateMachine"]

log = logging.getLogger(__name__)


class MetadataStateMachine:
    """Applies the committed prefix of ``raft_log`` to a metadata image."""

    def __init__(self, raft_log: FileRaftLog) -> None:
        self.log = raft_log
        self.image = MetadataImage()
        self.applied_offset = raft_log.start_offset  # every offset below this is applied
        self.records_since_snapshot = 0
        self.snapshot_path: Path | None = None
        sid = raft_log.snapshot()
        if sid is not None:
            self.load_snapshot(raft_log.snapshot_path(sid), sid)

    def load_snapshot(self, path: Path, sid: SnapshotId) -> None:
        self.image = load_snapshot(path)
        self.applied_offset = sid.end_offset
        self.records_since_snapshot = 0
        self.snapshot_path = Path(path)

    def apply_committed(self, high_watermark: int) -> list[RecordBatch]:
        """Replays every whole batch below ``high_watermark`` not applied yet; returns them."""
        if high_watermark <= self.applied_offset:
            return []
        out: list[RecordBatch] = []
        for batch in self.log.log_dir.batches(self.applied_offset):
            if batch.last_offset >= high_watermark:
                break
            if batch.last_offset < self.applied_offset:
                continue
            self.image.replay_batch(batch)
            self.applied_offset = batch.last_offset + 1
            if not batch.is_control:
                self.records_since_snapshot += batch.count
            out.append(batch)
        return out

    def snapshot_job(self, sid: SnapshotId) -> Callable[[], Path]:
        """The writing of a snapshot of the image as it is now (it must cover exactly
        ``[.., sid.end_offset)``), as a function another thread can run: it touches nothing but
        this image, which must not change until it returns (replay nothing meanwhile; loading a
        snapshot replaces the image and leaves this one alone). Then ``snapshot_written``."""
        if sid.end_offset != self.applied_offset:
            raise ValueError(f"the image is at {self.applied_offset}, not at the snapshot end {sid.end_offset}")
        image, directory = self.image, self.log.dir
        return lambda: image.write_snapshot(directory, sid)

    def snapshot_written(self, path: Path) -> None:
        """Records that the image was written as the snapshot at ``path``."""
        self.records_since_snapshot = 0
        self.snapshot_path = Path(path)
