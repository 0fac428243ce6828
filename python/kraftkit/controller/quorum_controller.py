"""``QuorumController``: the controller's logic over the raft replica, in the spirit of Kafka's.

It listens to the raft driver (``handle_commit``, ``handle_load_snapshot``,
``handle_leader_change``); the raft state machine (:mod:`kraftkit.raft.state_machine`) has replayed
every committed batch into the metadata image before a commit is heard of, so the image is the
controller's state, and records committed through the raft replica are the only way it changes.

**Activation.** A node that wins an election becomes the *active* controller once everything
committed before its epoch is in its image: the replica's high watermark has passed the epoch's
LeaderChange record (``epoch_start_offset``), as Kafka's raft client tells a new leader only after
its listener caught up to the epoch start. If the image then holds no metadata.version, the log
has never been bootstrapped: the leader appends the bootstrap records (KIP-778, framed as Kafka
4.4 frames them: :meth:`~kraftkit.controller.bootstrap.BootstrapMetadata.activation_records`) as
one batch, which commits whole or not at all, and is active once it committed. A bootstrap that an earlier
leader appended is either committed by now (the new leader's log holds it, and it commits with the
new epoch's LeaderChange: the image has a metadata.version, nothing is appended again) or gone
from every log that can win an election, so it is never committed twice.

**Requests.** While active it turns UpdateFeatures into FeatureLevelRecords (one batch, answered
once committed), one request at a time; a node that is not the active controller answers
NOT_CONTROLLER, as Kafka's controllers do (the admin client then finds the active one).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path

from kraftkit._core import RecordBatch
from kraftkit.controller.bootstrap import BootstrapMetadata
from kraftkit.controller.faults import crash_point
from kraftkit.controller.features import FeatureControlManager
from kraftkit.metadata.image import MetadataImage
from kraftkit.metadata.snapshot import SnapshotId
from kraftkit.protocol.messages import Errors
from kraftkit.raft.driver import NotLeaderError, RaftDriver
from kraftkit.raft.quorum_state import Role
from kraftkit.raft.state import LeaderState

__all__ = ["QuorumController"]

log = logging.getLogger(__name__)

#: UpdateFeaturesRequest's default timeoutMs
DEFAULT_TIMEOUT_MS = 60000


class QuorumController:
    """The controller of one node of the quorum (register it as a listener of ``node``)."""

    def __init__(self, node: RaftDriver, bootstrap: BootstrapMetadata) -> None:
        self.node = node
        self.bootstrap = bootstrap
        self.features = FeatureControlManager(node.node_id, node.config.voters)
        #: the leader epoch in which this node is the active controller (-1: it is not)
        self.active_epoch = -1
        self._claimed_epoch = -1  # an epoch this node leads and has not activated in yet
        self._bootstrapping = False
        self._lock: asyncio.Lock | None = None  # UpdateFeatures one at a time (made on the loop)

    # ------------------------------------------------------------------ state
    @property
    def image(self) -> MetadataImage:
        return self.node.replica().machine.image

    @property
    def active(self) -> bool:
        core = self.node.replica().core
        return self.active_epoch >= 0 and core.role is Role.LEADER and core.epoch == self.active_epoch

    # ------------------------------------------------------------------ raft listener
    def handle_commit(self, batches: list[RecordBatch]) -> None:
        self.features.replay(batches)
        self._maybe_activate()

    def handle_load_snapshot(self, path: Path, snapshot_id: SnapshotId) -> None:
        self.features.load_snapshot(self.image, snapshot_id.end_offset)

    def handle_leader_change(self, leader_id: int, epoch: int, role: Role) -> None:
        if role is Role.LEADER:
            self._claimed_epoch = epoch
            self._maybe_activate()
        else:
            if self.active_epoch >= 0:
                log.info("node %d: no longer the active controller (epoch %d)", self.node.node_id, epoch)
            self.active_epoch = self._claimed_epoch = -1

    def _maybe_activate(self) -> None:
        rep = self.node.replica()
        core, epoch = rep.core, self._claimed_epoch
        if epoch < 0 or self.active_epoch == epoch or self._bootstrapping:
            return
        st = core.state
        if core.role is not Role.LEADER or core.epoch != epoch or not isinstance(st, LeaderState):
            return
        if rep.machine.applied_offset <= st.epoch_start_offset:
            return  # what earlier leaders committed is not all in the image yet
        mv = self.image.metadata_version
        if mv is not None:
            self.active_epoch = epoch
            log.info("node %d: active controller in epoch %d at metadata.version %d", self.node.node_id, epoch, mv)
            return
        self._bootstrapping = True
        # appended once the raft step that told us has finished (no core step inside another)
        asyncio.get_running_loop().call_soon(self._append_bootstrap, epoch)

    def _append_bootstrap(self, epoch: int) -> None:
        boot = self.bootstrap
        try:
            records = boot.activation_records()
            base, committed = self.node.append_nowait(records)
        except NotLeaderError as e:
            self._bootstrapping = False
            log.info("node %d: bootstrap not appended: %s", self.node.node_id, e)
            return
        crash_point("bootstrap-appended")
        log.info(
            "node %d: the metadata log is empty: appending %d bootstrap record(s) at metadata.version %d from %s "
            "as one batch of %d records at offset %d (epoch %d)",
            self.node.node_id,
            len(boot.records),
            boot.metadata_version,
            boot.source,
            len(records),
            base,
            epoch,
        )

        def done(f: asyncio.Future) -> None:
            self._bootstrapping = False
            if f.cancelled() or f.exception() is not None:
                log.warning(
                    "node %d: the bootstrap batch at offset %d did not commit in epoch %d: %s",
                    self.node.node_id,
                    base,
                    epoch,
                    "cancelled" if f.cancelled() else f.exception(),
                )
                return
            log.info("node %d: bootstrap committed at offsets %d..%d", self.node.node_id, base, f.result())
            self._maybe_activate()

        committed.add_done_callback(done)

    # ------------------------------------------------------------------ UpdateFeatures
    def _not_controller(self) -> tuple[int, str]:
        leader, epoch = self.node.leader()
        who = f"node {leader}" if leader >= 0 else "unknown"
        return (
            Errors.NOT_CONTROLLER,
            f"node {self.node.node_id} is not the active controller (the raft leader of epoch {epoch} is {who})",
        )

    async def update_features(self, body: Mapping, version: int) -> dict:
        """Answers an UpdateFeatures request (decoded at ``version``): validated against the image,
        its FeatureLevelRecords committed as one batch unless ``ValidateOnly``; the answer comes
        once they are committed (or the request's ``timeoutMs`` passed: REQUEST_TIMED_OUT)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        names = [u.get("Feature", "") for u in body.get("FeatureUpdates") or []]
        if not self.active:
            return _update_answer(version, *self._not_controller(), names)
        # (Kafka's controller sets no deadline on UpdateFeatures; kraftkit honours the request's own
        # timeoutMs, 60 s when it gives none, so an answer never waits on a commit forever)
        timeout_ms = body.get("timeoutMs", 0)
        if timeout_ms <= 0:
            timeout_ms = DEFAULT_TIMEOUT_MS
        lock = self._lock
        try:
            await asyncio.wait_for(lock.acquire(), timeout_ms / 1000)
        except TimeoutError:
            return _update_answer(
                version,
                Errors.REQUEST_TIMED_OUT,
                f"an earlier feature update was not committed within {timeout_ms} ms; this one waited for it",
                names,
            )
        held_by_append = False
        try:
            if not self.active:
                return _update_answer(version, *self._not_controller(), names)
            change = self.features.update_features(self.image, body, version)
            if change.error_code != Errors.NONE:
                log.warning("node %d: UpdateFeatures refused: %s", self.node.node_id, change.message)
                return _update_answer(version, change.error_code, change.message, names)
            if body.get("ValidateOnly") or not change.records:
                return _update_answer(version, Errors.NONE, None, names)
            try:
                base, committed = self.node.append_nowait(change.records)
            except NotLeaderError:
                return _update_answer(version, *self._not_controller(), names)
            crash_point("feature-update-appended")
            # the next request is validated only once this one's fate is known (committed, or
            # failed with the leadership), even when its answer went out at the timeout first
            held_by_append = True
            committed.add_done_callback(lambda _f: lock.release())
            try:
                last = await asyncio.wait_for(asyncio.shield(committed), timeout_ms / 1000)
            except TimeoutError:
                return _update_answer(
                    version,
                    Errors.REQUEST_TIMED_OUT,
                    f"the feature records at offset {base} were not committed within {timeout_ms} ms",
                    names,
                )
            except NotLeaderError as e:
                return _update_answer(version, Errors.NOT_CONTROLLER, str(e), names)
            log.info(
                "node %d: UpdateFeatures committed at offsets %d..%d: %s",
                self.node.node_id,
                base,
                last,
                ", ".join(f"{u['Feature']}={u['MaxVersionLevel']}" for u in body.get("FeatureUpdates") or []),
            )
            return _update_answer(version, Errors.NONE, None, names)
        finally:
            if not held_by_append:
                lock.release()


def _update_answer(version: int, error: int, message: str | None, names: list[str]) -> dict:
    """An UpdateFeaturesResponse: per-feature results only for a success below v2 (Kafka's rule)."""
    results = (
        [{"Feature": n, "ErrorCode": 0, "ErrorMessage": None} for n in dict.fromkeys(names)]
        if error == Errors.NONE and version <= 1
        else []
    )
    return {"ThrottleTimeMs": 0, "ErrorCode": error, "ErrorMessage": message, "Results": results}
