"""The state machine a kraftkit quorum replicates: Kafka's metadata image.

Committed batches are replayed into a :class:`~kraftkit.metadata.MetadataImage` (the Rust engine),
in offset order and only below the high watermark, as Kafka's controllers and brokers apply
``handleCommit``. A snapshot of the image is the KRaft snapshot of the log prefix it covers (the
same file Kafka writes, readable by ``kraftkit snapshot verify`` and by Kafka); loading one from the
leader (FetchSnapshot) or from disk at start replaces the image.

**Lossy metadata.version downgrades, live.** A committed FeatureLevelRecord that lowers
metadata.version across a change of the metadata format (what Kafka refuses as an unsafe
downgrade) leaves records in the image that the lower level cannot write. Replaying stops after
the batch that holds it (:attr:`MetadataStateMachine.pending_rewrite`); the replica then writes a
snapshot at that batch's end rewritten at the new level (:mod:`kraftkit.features.rewrite`: each
record at the version the level writes, what it cannot carry dropped and reported), loads it as
its image and moves the log start there. Every replica does this at the same offset from the same
image, so they agree; a replica that crashes before the snapshot is in place does it again when it
replays the batch after restart; one that is behind fetches the rewritten snapshot.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kraftkit._core import RecordBatch
from kraftkit.features.registry import registry
from kraftkit.features.rewrite import RewriteReport, rewrite_image
from kraftkit.metadata.image import MetadataImage, load_snapshot
from kraftkit.metadata.snapshot import SnapshotId
from kraftkit.raft.file_log import FileRaftLog

__all__ = ["LossyDowngrade", "MetadataStateMachine"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LossyDowngrade:
    """A committed batch lowered metadata.version from ``from_level`` to ``to_level`` across a
    change of the metadata format: the image must be rewritten at ``snapshot_id`` (its end)."""

    snapshot_id: SnapshotId
    from_level: int
    to_level: int


class MetadataStateMachine:
    """Applies the committed prefix of ``raft_log`` to a metadata image."""

    def __init__(self, raft_log: FileRaftLog) -> None:
        self.log = raft_log
        self.image = MetadataImage()
        self.applied_offset = raft_log.start_offset  # every offset below this is applied
        self.records_since_snapshot = 0
        self.snapshot_path: Path | None = None
        #: a lossy metadata.version downgrade replayed and not rewritten yet (replay waits for it)
        self.pending_rewrite: LossyDowngrade | None = None
        sid = raft_log.snapshot()
        if sid is not None:
            self.load_snapshot(raft_log.snapshot_path(sid), sid)

    def load_snapshot(self, path: Path, sid: SnapshotId) -> None:
        self.image = load_snapshot(path)
        self.applied_offset = sid.end_offset
        self.records_since_snapshot = 0
        self.snapshot_path = Path(path)
        self.pending_rewrite = None

    def apply_committed(self, high_watermark: int) -> list[RecordBatch]:
        """Replays every whole batch below ``high_watermark`` not applied yet; returns them. It stops
        after a batch that makes a lossy metadata.version downgrade (:attr:`pending_rewrite`), and
        replays nothing while one is pending."""
        if high_watermark <= self.applied_offset or self.pending_rewrite is not None:
            return []
        out: list[RecordBatch] = []
        image = self.image
        for batch in self.log.log_dir.batches(self.applied_offset):
            if batch.last_offset >= high_watermark:
                break
            if batch.last_offset < self.applied_offset:
                continue
            before = image.metadata_version
            image.replay_batch(batch)
            self.applied_offset = batch.last_offset + 1
            out.append(batch)
            if batch.is_control:
                continue
            self.records_since_snapshot += batch.count
            after = image.metadata_version
            if (
                before is not None
                and after is not None
                and after < before
                and registry().metadata_changed(after, before)
            ):
                self.pending_rewrite = LossyDowngrade(
                    SnapshotId(self.applied_offset, batch.partition_leader_epoch), before, after
                )
                break
        return out

    def rewrite_job(self, pending: LossyDowngrade) -> Callable[[], tuple[Path, RewriteReport]]:
        """The rewriting of the image at ``pending.to_level``, as a function another thread can run
        (the image must not change until it returns): written at the level it was replayed at,
        rewritten into the log directory as the snapshot at ``pending.snapshot_id``, atomically.
        Returns its path and what the rewrite lost."""
        if pending.snapshot_id.end_offset != self.applied_offset:
            raise ValueError(f"the image is at {self.applied_offset}, not at {pending.snapshot_id.end_offset}")
        image, directory, sid = self.image, self.log.dir, pending.snapshot_id

        def job() -> tuple[Path, RewriteReport]:
            final = directory / sid.file_name
            return final, rewrite_image(image, final, pending.to_level, sid, written_at=pending.from_level)

        return job

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
