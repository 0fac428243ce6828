"""``QuorumController``: the controller's logic over the raft replica, in the spirit of Kafka's.

It listens to the raft driver (``handle_commit``, ``handle_load_snapshot``,
``handle_leader_change``); the raft state machine (:mod:`kraftkit.raft.state_machine`) has replayed
every committed batch into the metadata image before a commit is heard of, so the image is the
controller's state, and records committed through the raft replica are the only way it changes.

**Activation.** A node that wins an election becomes the *active* controller once everything
committed before its epoch is in its image: the replica's high watermark has passed the epoch's
LeaderChange record (``epoch_start_offset``), as Kafka's raft client tells a new leader only after
its listener caught up to the epoch start. If the image then holds no metadata.version, the log
has never been bootstrapped: once a majority of the voters are known to support the bootstrap
metadata.version (this node by its own ranges, the others by the SupportedFeatures of their
ApiVersions answers; until then it says who cannot and tries again every second, since a failover
could otherwise elect a leader that cannot read the log), the leader appends the bootstrap records (KIP-778, framed as Kafka
4.4 frames them: :meth:`~kraftkit.controller.bootstrap.BootstrapMetadata.activation_records`) as
one batch, which commits whole or not at all, and is active once it committed. A bootstrap that an earlier
leader appended is either committed by now (the new leader's log holds it, and it commits with the
new epoch's LeaderChange: the image has a metadata.version, nothing is appended again) or gone
from every log that can win an election, so it is never committed twice.

**Writes.** While active it takes writes (:meth:`QuorumController.submit`) one at a time: each is
validated against the committed image and settled once its records are committed, so the next one
sees them; a node that is not the active controller refuses them with NOT_CONTROLLER, as Kafka's
controllers do (the client then finds the active one). The requests that make them are answered by
:class:`~kraftkit.controller.apis.ControllerApis` (``self.apis``). While active it also fences a
broker whose session expired, one at a time, and with ``--auto-finalize`` raises finalized levels.

**A metadata transaction left open** by an earlier leader (a ZooKeeper migration's copy cut short)
is aborted by the new leader before it is active: an ``AbortTransactionRecord`` ("Controller
failover"), as Kafka's ``ActivationRecordsGenerator`` writes it.

**ZooKeeper migration** (KIP-866, ``zk_migration``): the bootstrap carries
``ZkMigrationStateRecord(PRE_MIGRATION)``; ZooKeeper-mode brokers may register; a log bootstrapped
without the migration (state NONE) is not taken over (Kafka 3.9 refuses to start then). A
:class:`MigrationHook` (the driver of :mod:`kraftkit.migration.driver`, wired in by the CLI: the
controller does not import the migration) hears when this node becomes and stops being active and
of each commit. While the state is PRE_MIGRATION, the writes Kafka would also write to ZooKeeper are
refused (:meth:`QuorumController.check_no_dual_write`); in MIGRATION those the driver writes to
ZooKeeper (its ``dual_writes``) are taken, the others refused, saying which. Fencing, unfencing,
controlled shutdown and background elections change partitions as in KRaft (Kafka 3.9's hybrid
mode): the driver writes those changes to ZooKeeper and sends the ZooKeeper-mode brokers their
LeaderAndIsr. While migrating the rules are Kafka 3.9's, not 4.x's: a broker already fenced is not
fenced again when its heartbeats stop (3.9 fences only unfenced brokers on session expiry), so a
ZooKeeper-mode broker registered but fenced at the takeover keeps what ZooKeeper says it leads
until it is unfenced, shuts down or is fenced from unfenced; and see :class:`_Kafka39Partitions`
(a new incarnation registering).
**Finalizing**: a controller with the migration disabled that becomes active on a log in MIGRATION
appends ``ZkMigrationStateRecord(POST_MIGRATION)`` before it is active when no ZooKeeper-mode broker
is registered, and otherwise becomes active in MIGRATION saying which are (Kafka 3.9's
``ActivationRecordsGenerator.recordsForNonEmptyLog``); in POST_MIGRATION the migration setting is
ignored (said) and ZooKeeper-mode brokers may not register.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from kraftkit._core import RecordBatch, encode_metadata_record
from kraftkit._kafka import (
    FEATURE_LEVEL,
    NO_OP,
    REGISTER_BROKER,
    REGISTER_CONTROLLER,
    UNREGISTER_BROKER,
    UNREGISTER_CONTROLLER,
)
from kraftkit.controller.acls import AclControlManager
from kraftkit.controller.apis import WRITE_TIMEOUT_MS, ControllerApis
from kraftkit.controller.bootstrap import (
    MIGRATION,
    NONE,
    POST_MIGRATION,
    PRE_MIGRATION,
    BootstrapError,
    BootstrapMetadata,
)
from kraftkit.controller.cluster import BROKER_RECORDS, ClusterControlManager, ControllerError
from kraftkit.controller.configs import ConfigurationControlManager
from kraftkit.controller.faults import crash_point
from kraftkit.controller.features import FeatureControlManager
from kraftkit.controller.partitions import MAX_ELECTIONS_PER_IMBALANCE, PartitionControlManager
from kraftkit.controller.producer_ids import ProducerIdControlManager
from kraftkit.controller.registration import ControllerRegistrationManager
from kraftkit.controller.replication import ReplicationControlManager
from kraftkit.features.registry import MV_FEATURE, registry
from kraftkit.features.rewrite import RewriteReport
from kraftkit.metadata.image import ZK_MIGRATION_STATES, MetadataImage
from kraftkit.metadata.records import record_type
from kraftkit.metadata.snapshot import SnapshotId
from kraftkit.protocol.messages import Errors
from kraftkit.raft.driver import NotLeaderError, RaftDriver
from kraftkit.raft.quorum_state import Role
from kraftkit.raft.server import CONTROLLER_LISTENER
from kraftkit.raft.state import LeaderState

__all__ = ["MigrationHook", "QuorumController"]

log = logging.getLogger(__name__)

#: broker.session.timeout.ms's default
DEFAULT_SESSION_TIMEOUT_MS = 9000
#: how often a bootstrap that a majority of the voters cannot read yet is tried again
BOOTSTRAP_RETRY_S = 1.0


def _positive(config: Mapping[str, str], name: str, default: float, unit: float) -> float:
    """A positive number of ``unit`` seconds from the static config, ``default`` units when absent or bad."""
    raw = config.get(name)
    try:
        value = float(raw) if raw is not None else default
    except ValueError:
        value = default
    if value <= 0:
        log.error("%s=%r is not positive: the controller uses %s", name, raw, default)
        value = default
    return value * unit


#: how often the active controller writes a NoOpRecord in ZK migration state MIGRATION (Kafka's
#: ``metadata.max.idle.interval.ms`` default)
MIGRATION_IDLE_INTERVAL_S = 0.5


class _Kafka39Partitions:
    """The partition changes of broker state changes while the ZooKeeper migration runs. As Kafka
    3.9 (the release a migration runs on), not 4.x: a new incarnation of a broker registering
    changes no partition below the ELR metadata versions (3.9's ``handleBrokerUncleanShutdown``
    writes nothing there; 4.x removes the broker from every ISR): its partitions move when its old
    session expires (fencing), or stay with it and it is told them again once unfenced.

    A controlled shutdown is Kafka's: the broker's leaderships move when it begins, and it is
    granted once every other active broker reports an offset past those records (a ZooKeeper-mode
    broker follows the metadata log as an observer and reports what it has read; the
    ``NoOpRecord`` written every 500 ms in MIGRATION moves that offset on an otherwise idle log)."""

    def __init__(self, partitions: Any) -> None:
        self.partitions = partitions

    def __getattr__(self, name: str) -> Any:
        return getattr(self.partitions, name)

    def broker_shutdown(self, image: MetadataImage, bid: int, clean: bool) -> list[bytes]:
        return []


class MigrationHook(Protocol):
    """What the controller tells a ZooKeeper migration driver (all on the event loop)."""

    def activated(self, epoch: int) -> None:
        """This node became the active controller in leader epoch ``epoch``."""

    def deactivated(self) -> None:
        """This node is no longer the active controller."""

    def committed(self) -> None:
        """Records were committed (the image changed)."""

    async def close(self) -> None:
        """The node stops."""


class QuorumController:
    """The controller of one node of the quorum (register it as a listener of ``node``)."""

    def __init__(
        self,
        node: RaftDriver,
        bootstrap: BootstrapMetadata,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        *,
        auto_finalize: bool = False,
        static_config: Mapping[str, str] | None = None,
        zk_migration: bool = False,
    ) -> None:
        self.node = node
        #: ``zookeeper.metadata.migration.enable``
        self.zk_migration = zk_migration
        #: the migration driver (set by whoever runs the migration; None: no migration)
        self.migration: MigrationHook | None = None
        self._activation_refused: str | None = None
        #: finalize what every registered node supports, without being asked (``--auto-finalize``)
        self.auto_finalize = auto_finalize
        self._auto_pending = False
        self._auto_refused: str | None = None  # the last refused auto-finalize request (not retried as is)
        self.bootstrap = bootstrap
        voters = lambda: node.replica().core.voters  # noqa: E731  (the voters in force: a dynamic quorum's change)
        self.features = FeatureControlManager(node.node_id, voters)
        self.cluster = ClusterControlManager(node.config.cluster_id, session_timeout_ms, zk_migration=zk_migration)
        self.configs = ConfigurationControlManager(node.node_id, voters, static_config)
        self.replication = ReplicationControlManager(self.cluster, static_config, node_id=node.node_id)
        self.partitions = PartitionControlManager(self.replication, node.node_id)
        self.producer_ids = ProducerIdControlManager(self.cluster)
        self.acls = AclControlManager()
        self._fence_timer: asyncio.TimerHandle | None = None
        config = static_config or {}
        self.auto_rebalance = str(config.get("auto.leader.rebalance.enable", "true")).strip().lower() == "true"
        self.rebalance_interval = _positive(config, "leader.imbalance.check.interval.seconds", 300.0, 1.0)
        self.unclean_interval = _positive(config, "unclean.leader.election.interval.ms", 300000.0, 0.001)
        self._election_timers: dict[str, asyncio.TimerHandle] = {}
        self.registration = ControllerRegistrationManager(self, CONTROLLER_LISTENER)
        #: the leader epoch in which this node is the active controller (-1: it is not)
        self.active_epoch = -1
        self._claimed_epoch = -1  # an epoch this node leads and has not activated in yet
        self._bootstrapping = False
        #: why the bootstrap waits (a majority of the voters not known to support its level), if it does
        self.bootstrap_blocked: str | None = None
        self._in_flight: asyncio.Future | None = None  # the commit of the write in progress
        self._waiting: collections.deque[Callable[[], None]] = collections.deque()  # writes to run, in order
        #: lossy downgrades appended by this node, by the end offset of their batch: their rewrite
        self._rewrites: dict[int, asyncio.Future] = {}
        #: the requests this controller answers
        self.apis = ControllerApis(self)

    # ------------------------------------------------------------------ state
    @property
    def image(self) -> MetadataImage:
        return self.node.replica().machine.image

    @property
    def active(self) -> bool:
        if self.active_epoch < 0:
            return False
        core = self.node.replica().core
        return self.active_epoch >= 0 and core.role is Role.LEADER and core.epoch == self.active_epoch

    # ------------------------------------------------------------------ raft listener
    def handle_commit(self, batches: list[RecordBatch]) -> None:
        # one pass over the committed records: a framed record's second byte is its api key
        # (every metadata api key fits one varint byte)
        membership = False  # a node registered, left, or a feature level changed
        for batch in batches:
            if batch.is_control:
                continue
            for r in batch.records():
                value = r.value
                if value is None or len(value) < 2:
                    continue
                key = value[1]
                if key == FEATURE_LEVEL:
                    self.features.replay_feature_level(r.offset)
                    membership = True
                elif key in BROKER_RECORDS:
                    self.cluster.replay(value, r.offset)
                    membership = membership or key in (REGISTER_BROKER, UNREGISTER_BROKER)
                elif key in (REGISTER_CONTROLLER, UNREGISTER_CONTROLLER):
                    membership = True
        if self.node.replica().machine.pending_rewrite is not None:
            crash_point("metadata-rewrite-pending")  # committed, the rewritten snapshot not in place yet
        self._maybe_activate()
        self.registration.maybe_register()
        if membership:
            self._maybe_auto_finalize()  # (what every node supports changes only with these)
        if self.migration is not None and self.active:
            self.migration.committed()

    def handle_load_snapshot(self, path: Path, snapshot_id: SnapshotId) -> None:
        self.features.load_snapshot(self.image, snapshot_id.end_offset)
        self.cluster.load_snapshot(self.image, snapshot_id.end_offset)

    def handle_metadata_rewrite(self, snapshot_id: SnapshotId, report: RewriteReport) -> None:
        """This replica loaded its image rewritten at a lower metadata.version (a lossy downgrade
        committed at ``snapshot_id``): the UpdateFeatures that asked for it is answered."""
        waiter = self._rewrites.pop(snapshot_id.end_offset, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(report)

    def handle_leader_change(self, leader_id: int, epoch: int, role: Role) -> None:
        if role is Role.LEADER:
            self._claimed_epoch = epoch
            self._maybe_activate()
        else:
            if self.active_epoch >= 0:
                log.info("node %d: no longer the active controller (epoch %d)", self.node.node_id, epoch)
            was_active = self.active_epoch >= 0
            self.active_epoch = self._claimed_epoch = -1
            self._deactivate()
            if was_active and self.migration is not None:
                self.migration.deactivated()
            self.registration.maybe_register()

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
        if mv is not None and self.image.in_transaction:
            # an earlier leader's transaction, cut short: aborted before this node is active
            self._bootstrapping = True
            asyncio.get_running_loop().call_soon(self._append_abort, epoch)
            return
        if mv is not None:
            refusal = self._migration_refusal()
            if refusal is not None:
                if refusal != self._activation_refused:
                    log.error("node %d: cannot become the active controller: %s", self.node.node_id, refusal)
                self._activation_refused = refusal
                return
            if self._finalize_due():
                self._bootstrapping = True
                asyncio.get_running_loop().call_soon(self._append_finalize, epoch)
                return
            self.active_epoch = epoch
            self.cluster.activate(self.image)
            self._schedule_fencing()
            self._schedule_elections()
            asyncio.get_running_loop().call_soon(self.registration.maybe_register)
            asyncio.get_running_loop().call_soon(self._maybe_auto_finalize)
            log.info("node %d: active controller in epoch %d at metadata.version %d", self.node.node_id, epoch, mv)
            if self.migration is not None:
                asyncio.get_running_loop().call_soon(self._migration_activated, epoch)
            return
        self._bootstrapping = True
        # appended once the raft step that told us has finished (no core step inside another)
        asyncio.get_running_loop().call_soon(self._append_bootstrap, epoch)

    def _migration_activated(self, epoch: int) -> None:
        if self.migration is not None and self.active and self.active_epoch == epoch:
            self.migration.activated(epoch)

    def _migration_refusal(self) -> str | None:
        """Why a log with a metadata.version cannot be run as the migration configuration says
        (Kafka 3.9's ``ActivationRecordsGenerator.recordsForNonEmptyLog``), or None."""
        if not self.zk_migration:
            return None
        mv = registry().metadata_version(self.image.metadata_version or 0)
        if not mv.supported("migration"):
            return f"zookeeper.metadata.migration.enable=true, but the metadata.version {mv.name} does not support ZK migrations"
        if self.image.zk_migration_state == NONE:
            return (
                "zookeeper.metadata.migration.enable=true, but this cluster was created in KRaft mode (ZK migration "
                "state NONE): a migration starts from a freshly formatted controller quorum"
            )
        return None

    def zk_brokers(self) -> list[int]:
        """The brokers registered as ZooKeeper-mode brokers (``IsMigratingZkBroker``), fenced or not."""
        return sorted(b for b, reg in self.image.brokers.items() if reg.get("IsMigratingZkBroker"))

    def _finalize_due(self) -> bool:
        """Kafka 3.9's ``ActivationRecordsGenerator.recordsForNonEmptyLog`` for a log in MIGRATION on a
        controller started with the migration disabled: True when it completes the migration
        (``ZkMigrationStateRecord(POST_MIGRATION)`` before it is active), False (said) when a
        ZooKeeper-mode broker is still registered: it then becomes active in MIGRATION (and takes no
        write Kafka would dual-write: nothing writes ZooKeeper), finalizing at a later activation.
        A log already in POST_MIGRATION on a controller with the migration enabled: the setting is
        ignored (said), as Kafka ignores it."""
        state = self.image.zk_migration_state
        if state == POST_MIGRATION and self.zk_migration:
            log.warning(
                "node %d: ignoring zookeeper.metadata.migration.enable=true since the ZK migration has been "
                "completed (POST_MIGRATION): ZooKeeper is no longer written and rolling back to ZooKeeper mode "
                "is not possible",
                self.node.node_id,
            )
            return False
        if state != MIGRATION or self.zk_migration:
            return False
        still = self.zk_brokers()
        if still:
            log.error(
                "node %d: cannot complete the ZK migration because the following broker(s) are still registered "
                "as ZK brokers: %s. Restart these brokers in KRaft mode before restarting the controllers to "
                "finalize the migration; until then this controller stays in MIGRATION and ZooKeeper is not written",
                self.node.node_id,
                still,
            )
            return False
        return True

    def _append_finalize(self, epoch: int) -> None:
        """Appends ``ZkMigrationStateRecord(POST_MIGRATION)`` (see :meth:`_finalize_due`)."""
        try:
            base, committed = self.node.append_nowait(
                [
                    encode_metadata_record(
                        record_type("ZkMigrationStateRecord")[0], 0, {"ZkMigrationState": POST_MIGRATION}
                    )
                ]
            )
        except NotLeaderError as e:
            self._bootstrapping = False
            log.info("node %d: POST_MIGRATION not appended: %s", self.node.node_id, e)
            return
        log.warning(
            "node %d: completing the ZK migration since this controller was configured with "
            "zookeeper.metadata.migration.enable=false: ZkMigrationStateRecord(POST_MIGRATION) at offset %d "
            "(epoch %d); ZooKeeper is no longer written and rolling back to ZooKeeper mode is no longer possible",
            self.node.node_id,
            base,
            epoch,
        )

        def done(f: asyncio.Future) -> None:
            self._bootstrapping = False
            if f.cancelled() or f.exception() is not None:
                return
            self._maybe_activate()

        committed.add_done_callback(done)

    @property
    def migrating(self) -> bool:
        """The ZooKeeper migration state is PRE_MIGRATION or MIGRATION."""
        return self.image.zk_migration_state in (PRE_MIGRATION, MIGRATION)

    def check_no_dual_write(self, what: str) -> None:
        """Refuses (:class:`ControllerError`) a write that Kafka would also write to ZooKeeper while
        the migration is in PRE_MIGRATION (the metadata is not copied yet), or in MIGRATION unless
        the migration driver writes its changes to ZooKeeper (its ``dual_writes`` names it)."""
        if not self.migrating:
            return
        state = self.image.zk_migration_state
        if state == MIGRATION and what in getattr(self.migration, "dual_writes", ()):
            return
        name = ZK_MIGRATION_STATES.get(state, "?")
        if state == PRE_MIGRATION:
            why = "the metadata is not copied from ZooKeeper yet"
        elif not self.zk_migration:
            why = (
                "this controller runs with zookeeper.metadata.migration.enable=false, so it does not write ZooKeeper, "
                f"and cannot finalize the migration while ZooKeeper-mode brokers are registered ({self.zk_brokers()}): "
                "restart them in KRaft mode, then restart the controllers"
            )
        else:
            why = (
                "kraftkit's controller does not write its changes back to ZooKeeper yet (dual writes are built for "
                "topics, partitions and their reassignments, broker unregistrations, topic and broker configs, "
                "client quotas, SCRAM credentials, ACLs, the producer id block and delegation tokens; not for "
                "other config resources)"
            )
        raise ControllerError(
            Errors.UNSUPPORTED_VERSION, f"{what} is refused during the ZooKeeper migration (state {name}): {why}"
        )

    def partition_changes(self) -> Any:
        """What broker fencing, unfencing and shutdown do to partitions: :attr:`partitions`, in the
        ZooKeeper migration too (its driver writes them to ZooKeeper and to the ZooKeeper-mode
        brokers), there as Kafka 3.9 does them (:class:`_Kafka39Partitions`)."""
        return _Kafka39Partitions(self.partitions) if self.migrating else self.partitions

    def _append_abort(self, epoch: int) -> None:
        """Appends the AbortTransactionRecord of a transaction an earlier leader left open."""
        pending = self.image.pending_transaction
        try:
            base, committed = self.node.append_nowait(
                [encode_metadata_record(record_type("AbortTransactionRecord")[0], 0, {"Reason": "Controller failover"})]
            )
        except NotLeaderError as e:
            self._bootstrapping = False
            log.info("node %d: abort not appended: %s", self.node.node_id, e)
            return
        log.info(
            "node %d: aborting the in-progress metadata transaction (%d record(s)) at offset %d (epoch %d)",
            self.node.node_id,
            len(pending or ()),
            base,
            epoch,
        )

        def done(f: asyncio.Future) -> None:
            self._bootstrapping = False
            if f.cancelled() or f.exception() is not None:
                return
            self._maybe_activate()

        committed.add_done_callback(done)

    def bootstrap_refusal(self) -> str | None:
        """Why the bootstrap level cannot be committed yet: a majority of the voters must be known
        to support it (this node by its own ranges, the others by their ApiVersions answers), or a
        failover could elect a leader that cannot read the log. None when it can."""
        level = self.bootstrap.metadata_version
        voters = sorted(self.node.replica().core.voters)
        supporters, others = [], []
        for v in voters:
            ranges = self.features.supported if v == self.node.node_id else self.node.peer_features(v)
            rng = None if ranges is None else ranges.get(MV_FEATURE)
            if rng is not None and rng[0] <= level <= rng[1]:
                supporters.append(v)
            elif ranges is None:
                others.append(f"node {v} has not answered ApiVersions yet")
            elif rng is None:
                others.append(f"node {v} supports no metadata.version")
            else:
                others.append(f"node {v} supports metadata.version {rng[0]}..{rng[1]}")
        if len(supporters) > len(voters) // 2:
            return None
        return (
            f"cannot commit the bootstrap metadata.version {level} ({self.bootstrap.source}): only "
            f"{len(supporters)} of the {len(voters)} voters are known to support it, a majority must be "
            f"({'; '.join(others)})"
        )

    def _append_bootstrap(self, epoch: int) -> None:
        boot = self.bootstrap
        refusal = self.bootstrap_refusal()
        if refusal is not None:
            if refusal != self.bootstrap_blocked:
                log.error("node %d: %s; retrying every second", self.node.node_id, refusal)
            self.bootstrap_blocked = refusal

            def retry() -> None:
                self._bootstrapping = False
                self._maybe_activate()

            asyncio.get_running_loop().call_later(BOOTSTRAP_RETRY_S, retry)
            return
        self.bootstrap_blocked = None
        try:
            records = boot.activation_records(zk_migration=self.zk_migration)
            base, committed = self.node.append_nowait(records)
        except BootstrapError as e:
            log.error("node %d: cannot bootstrap: %s", self.node.node_id, e)
            return  # (_bootstrapping stays set: nothing to retry; the CLI checks this at start)
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

    async def close(self) -> None:
        """The node stops: no more registration attempts or fencing checks."""
        for waiter in self._rewrites.values():
            waiter.cancel()
        self._rewrites.clear()
        self._deactivate()
        if self.migration is not None:
            await self.migration.close()
        await self.registration.close()

    def _deactivate(self) -> None:
        self.cluster.deactivate()
        if self._fence_timer is not None:
            self._fence_timer.cancel()
            self._fence_timer = None
        for t in self._election_timers.values():
            t.cancel()
        self._election_timers = {}

    # ------------------------------------------------------------------ writes
    def submit(
        self,
        what: str,
        build: Callable[[], tuple[list[bytes], Any]],
        timeout_ms: int,
        crash_at: str = "",
        hold: Callable[[int], asyncio.Future | None] | None = None,
    ) -> asyncio.Future:
        """Runs ``build`` (validation against the committed image: the records to append and the
        answer, or :class:`ControllerError`) as the one write in progress: at once when no other
        is, else once the earlier ones are settled, in order. Its records are appended as one
        batch; the future resolves to the answer once they are committed (at once when there are
        none), or to a :class:`ControllerError`: NOT_CONTROLLER when this node is not (or stops
        being) the active controller, REQUEST_TIMED_OUT after ``timeout_ms``. No task is made: a
        heartbeat that writes nothing is answered within the call. ``hold(end offset)`` may give a
        future that must settle too before the write is over (and the next one validated): its
        result is then the answer."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        appended_at: list[int] = []

        def run() -> None:
            if fut.done():
                return  # timed out while it waited
            try:
                if not self.active:
                    raise ControllerError(*self._not_controller())
                records, answer = build()
                if not records:
                    fut.set_result(answer)
                    return
                try:
                    base, committed = self.node.append_nowait(records)
                except NotLeaderError:
                    raise ControllerError(*self._not_controller()) from None
            except ControllerError as e:
                fut.set_exception(e)
                return
            if crash_at:
                crash_point(crash_at)
            appended_at.append(base)
            self._in_flight = committed  # the next write is validated once this one's fate is known
            held = hold(base + len(records)) if hold is not None else None

            def settled(f: asyncio.Future) -> None:
                failed = f.cancelled() or f.exception() is not None
                if held is not None and not held.done() and not failed:
                    self._in_flight = held
                    held.add_done_callback(lambda _h: settled(f))
                    return
                self._in_flight = None
                if held is not None and not held.done():
                    held.cancel()
                if not fut.done():
                    if failed:
                        why = "cancelled" if f.cancelled() else str(f.exception())
                        fut.set_exception(ControllerError(Errors.NOT_CONTROLLER, why))
                    elif held is not None:
                        if held.cancelled():
                            fut.set_exception(ControllerError(Errors.NOT_CONTROLLER, "the controller stopped"))
                        else:
                            fut.set_result(held.result())
                    else:
                        fut.set_result(answer)
                self._drain()

            committed.add_done_callback(settled)

        def timed_out() -> None:
            if fut.done():
                return
            if appended_at:
                msg = f"the records of this {what} at offset {appended_at[0]} were not committed within {timeout_ms} ms"
            else:
                msg = f"an earlier controller write was not committed within {timeout_ms} ms; this {what} waited for it"
            fut.set_exception(ControllerError(Errors.REQUEST_TIMED_OUT, msg))

        if self._in_flight is None and not self._waiting:
            run()
        else:
            self._waiting.append(run)
        if not fut.done():
            timer = loop.call_later(timeout_ms / 1000, timed_out)
            fut.add_done_callback(lambda _f: timer.cancel())
        return fut

    def _drain(self) -> None:
        """Runs the waiting writes while none has records in flight (iteratively: a long queue of
        heartbeats that write nothing must not recurse)."""
        while self._in_flight is None and self._waiting:
            self._waiting.popleft()()

    async def _write(
        self,
        what: str,
        build: Callable[[], tuple[list[bytes], Any]],
        timeout_ms: int,
        crash_at: str = "",
        hold: Callable[[int], asyncio.Future | None] | None = None,
    ) -> Any:
        """:meth:`submit`, awaited."""
        return await self.submit(what, build, timeout_ms, crash_at, hold)

    # ------------------------------------------------------------------ auto-finalize
    def _maybe_auto_finalize(self) -> None:
        """With ``auto_finalize``, the active controller upgrades what every node supports (see
        :meth:`~kraftkit.controller.features.FeatureControlManager.auto_finalize_request`) after
        each commit, one request at a time; a request refused is not made again unchanged."""
        if not self.auto_finalize or self._auto_pending or not self.active:
            return
        body = self.features.auto_finalize_request(self.image)
        if body is None or repr(body["FeatureUpdates"]) == self._auto_refused:
            return
        self._auto_pending = True

        async def finalize() -> None:
            try:
                answer = await self.apis.update_features(body, 2)
            finally:
                self._auto_pending = False
            wanted = ", ".join(f"{u['Feature']}={u['MaxVersionLevel']}" for u in body["FeatureUpdates"])
            if answer["ErrorCode"] == Errors.NONE:
                log.info("node %d: auto-finalized %s: every registered node supports it", self.node.node_id, wanted)
                self._maybe_auto_finalize()  # the next step (the features at the new metadata.version)
            elif answer["ErrorCode"] != Errors.NOT_CONTROLLER:
                self._auto_refused = repr(body["FeatureUpdates"])
                log.warning(
                    "node %d: auto-finalize of %s refused: %s", self.node.node_id, wanted, answer["ErrorMessage"]
                )

        asyncio.get_running_loop().create_task(finalize())

    # ------------------------------------------------------------------ session expiry
    def _schedule_fencing(self) -> None:
        """Checks for an expired broker session when the oldest unfenced one expires."""
        if self._fence_timer is not None:
            self._fence_timer.cancel()
            self._fence_timer = None
        if not self.active:
            return
        loop = asyncio.get_running_loop()
        at = self.cluster.next_expiry()
        if at is None:
            at = loop.time() + self.cluster.session_timeout  # a broker may register meanwhile
        delay = max(0.0, at - self.cluster.now()) + 0.001
        self._fence_timer = loop.call_later(delay, self._on_fence_timer)

    def _on_fence_timer(self) -> None:
        self._fence_timer = None
        asyncio.get_running_loop().create_task(self._fence_stale())

    async def _fence_stale(self) -> None:
        """Fences every broker whose session expired, one batch each (Kafka fences one at a time,
        so each fencing is visible before the next)."""
        try:
            while self.active:
                bid = self.cluster.stale_broker()
                if bid is None:
                    break
                log.info("node %d: fencing broker %d because its session has timed out", self.node.node_id, bid)

                def build(bid: int = bid) -> tuple[list[bytes], None]:
                    if self.cluster.stale_broker() != bid:
                        return [], None  # it heartbeated while the previous fencing committed
                    if self.migrating and self.cluster.brokers[bid]["Fenced"]:
                        # Kafka 3.9 (the migration's release) fences only unfenced brokers on session
                        # expiry: a fenced one keeps its partitions (the session just ends)
                        self.cluster.mark_fenced(bid)
                        return [], None
                    records = self.partition_changes().broker_fenced(self.image, bid)
                    self.cluster.mark_fenced(bid)
                    return records, None

                try:
                    await self._write(f"fencing broker {bid}", build, WRITE_TIMEOUT_MS)
                except ControllerError as e:
                    log.warning("node %d: fencing broker %d failed: %s", self.node.node_id, bid, e.message)
                    break
        finally:
            self._schedule_fencing()

    # ------------------------------------------------------------------ background elections
    def _schedule_elections(self) -> None:
        """While active: the preferred-leader rebalance every ``leader.imbalance.check.interval.seconds``
        (with ``auto.leader.rebalance.enable``) and unclean elections every
        ``unclean.leader.election.interval.ms``, as Kafka's periodic controller tasks. A round that
        wrote as many elections as one may is followed by another at once."""
        for t in self._election_timers.values():
            t.cancel()
        self._election_timers = {}
        if not self.active:
            return
        self._next_elections("unclean leader elections", self.unclean_interval, self.partitions.elect_unclean)
        if self.migration is not None:
            self._next_elections("migration no-op", MIGRATION_IDLE_INTERVAL_S, self._migration_noop)
        if self.auto_rebalance:
            self._next_elections("preferred leader rebalance", self.rebalance_interval, self.partitions.balance)

    def _migration_noop(self, image: MetadataImage) -> list[bytes]:
        """In ZK migration state MIGRATION, a ``NoOpRecord`` (Kafka's controller writes one every
        ``metadata.max.idle.interval.ms``, 500 ms): a Kafka 3.9 ZooKeeper-mode broker reports in its
        heartbeats an offset behind the end of an idle log, so without a later record it would never
        reach its registration's offset (and be unfenced) after a restart."""
        if image.zk_migration_state != MIGRATION:
            return []
        return [encode_metadata_record(NO_OP, 0, {})]

    def _next_elections(
        self, what: str, delay: float, make: Callable[[MetadataImage], list[bytes]], interval: float | None = None
    ) -> None:
        loop = asyncio.get_running_loop()
        every = delay if interval is None else interval
        self._election_timers[what] = loop.call_later(delay, self._run_elections, what, every, make)

    def _run_elections(self, what: str, interval: float, make: Callable[[MetadataImage], list[bytes]]) -> None:
        def build() -> tuple[list[bytes], int]:
            records = make(self.image)
            return records, len(records)

        async def run() -> None:
            written = 0
            try:
                written = await self._write(what, build, WRITE_TIMEOUT_MS)
            except ControllerError as e:
                if e.code != Errors.NOT_CONTROLLER:
                    log.warning("node %d: %s failed: %s", self.node.node_id, what, e.message)
            if self.active:
                more = written >= MAX_ELECTIONS_PER_IMBALANCE
                self._next_elections(what, 0.0 if more else interval, make, interval)

        asyncio.get_running_loop().create_task(run())

    @property
    def idle(self) -> bool:
        """No write in progress nor waiting: one submitted now is validated at once."""
        return self._in_flight is None and not self._waiting

    def check_active(self) -> None:
        """Raises NOT_CONTROLLER (a :class:`ControllerError`) unless this node is the active controller."""
        if not self.active:
            raise ControllerError(*self._not_controller())

    # ------------------------------------------------------------------ answers
    def _not_controller(self) -> tuple[int, str]:
        leader, epoch = self.node.leader()
        who = f"node {leader}" if leader >= 0 else "unknown"
        return (
            Errors.NOT_CONTROLLER,
            f"node {self.node.node_id} is not the active controller (the raft leader of epoch {epoch} is {who})",
        )

    def rewrite_waiter(self, end: int) -> asyncio.Future:
        """A future that resolves to the :class:`~kraftkit.features.rewrite.RewriteReport` once this
        replica loaded its image rewritten by the lossy downgrade whose batch ends at ``end``."""
        waiter = asyncio.get_running_loop().create_future()
        self._rewrites[end] = waiter
        waiter.add_done_callback(lambda _w: self._rewrites.pop(end, None))
        return waiter
