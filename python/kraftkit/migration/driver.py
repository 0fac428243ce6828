"""The live ZooKeeper-to-KRaft migration (KIP-866) on the active kraftkit controller: the part of
Kafka 3.9's ``KRaftMigrationDriver`` that takes a ZooKeeper cluster's metadata over.

The controller (:class:`~kraftkit.controller.quorum_controller.QuorumController`, started with
``zookeeper.metadata.migration.enable=true``) bootstraps its log in the ZK migration state
PRE_MIGRATION and tells this driver (its :class:`~kraftkit.controller.quorum_controller.MigrationHook`)
when it becomes and stops being the active controller. On the active controller the driver goes
through Kafka's states:

* ``WAIT_FOR_CONTROLLER_QUORUM``: every voter registered (from metadata.version 3.7-IV0, KIP-919)
  and ready for the migration (``ZkMigrationReady``: run with the migration enabled);
* ``WAIT_FOR_BROKERS``: every broker of ZooKeeper (``/brokers/ids``, and any broker named by a
  topic's replica assignment) registered with KRaft as a migrating ZooKeeper broker (as in Kafka,
  partitions not led or not fully in sync in ZooKeeper do not hold the takeover back: after it the
  ZooKeeper-mode leaders' AlterPartition and this controller's LeaderAndIsr carry the ISR changes
  and elections on). What it waits
  for is logged once per change, broker by broker, with the reason: not registered yet (the broker
  runs without ``zookeeper.metadata.migration.enable=true`` or the quorum's connection configs),
  or its registration refused by the controller (another cluster id, an
  ``inter.broker.protocol.version`` whose metadata.version is not the cluster's, ...);
* ``BECOME_CONTROLLER``: the controller is claimed in ZooKeeper as Kafka's
  ``KafkaZkClient.tryRegisterKRaftControllerAsActiveController`` claims it: one ZooKeeper ``multi``
  that sets ``/controller_epoch`` to the next epoch conditionally on its zkVersion (so a ZooKeeper
  controller that still believes it leads fails its writes, which are all conditional on it),
  replaces ``/controller`` (``brokerid`` = this controller's id, ``kraftControllerEpoch`` = its raft
  epoch; refused when ``/controller`` already names a KRaft epoch at least as high);
* ``ZK_MIGRATION``: a ``BeginTransactionRecord`` ("ZK Migration"), then ZooKeeper's metadata read by
  :func:`~kraftkit.migration.zk_reader.read_cluster` and turned into records by
  :func:`~kraftkit.migration.convert.records` (topics with their ids, partition states, topic and
  broker configs, client quotas, SCRAM credentials, ACLs, the producer id block; the finalized
  features are the bootstrap's, as in Kafka, which does not copy ``/feature``), committed in batches
  of ``zookeeper.metadata.migration.min.batch.size`` records, each after a check that
  ``/controller_epoch`` still has the zkVersion this controller gave it, then
  ``ZkMigrationStateRecord(MIGRATION)`` and the ``EndTransactionRecord``. While the copy runs no
  other controller write is validated (it holds the write queue), so nothing else lands inside
  the transaction. Its progress is logged (``copy batch N of M committed``: the first batch, then at
  most once a second, and the last). A ZooKeeper error (a connection lost, a session expired: the
  reason names the ZooKeeper), another controller in ZooKeeper or anything else that stops
  the copy appends an ``AbortTransactionRecord``, and the copy starts over (kazoo makes a new
  session when the old one expired); a copy cut short by a lost leadership is aborted
  by the next active controller on activation; the metadata image applies a transaction only at its
  end, so it never shows a half copy. Then ``/migration`` records the controller and the offset and
  epoch of the last record copied (conditionally on its zkVersion).
* ``MIGRATED``: the metadata is in KRaft. A new active controller in state MIGRATION claims
  ZooKeeper again and is ``MIGRATED``.
* ``DUAL_WRITE`` (Kafka's ``KRaftMigrationZkWriter``, :mod:`kraftkit.migration.zk_writer`): every
  committed KRaft change to topics, partitions, topic and broker configs, client quotas, SCRAM
  credentials, ACLs and the producer id block is written to ZooKeeper in ZooKeeper's own JSON,
  round by round in commit order, each ZooKeeper ``multi`` checking ``/controller_epoch`` at the zkVersion claimed and setting ``/migration``
  (conditionally on its zkVersion) to the offset and epoch of the last record written. It begins
  with a sync (ZooKeeper read and compared with the image, what differs written: what a failover
  needs), and syncs again after any failed write; a ``/controller_epoch`` taken by another
  controller sends it back to ``BECOME_CONTROLLER``. The controller takes the writes these cover
  (:data:`~kraftkit.migration.zk_writer.DUAL_WRITES`, given to it as :attr:`MigrationDriver.dual_writes`)
  and refuses the others (configs of groups and client metrics, ...). The controller's own
  partition changes (fencing, unfencing, controlled shutdown, background elections) are made as
  in Kafka 3.9's hybrid mode and reach ZooKeeper and the brokers the same way. The lag is
  the metric ``ZooKeeperBlockingKRaftMillis`` (:meth:`MigrationDriver.metrics`), kept with the
  offset last written in :data:`METRICS_FILE` of the metadata log directory for ``kraftkit migrate
  status --controller-dir``.
* The controller is now the ZooKeeper-mode brokers' controller:
  :class:`~kraftkit.migration.propagator.Propagator` sends them, on entering ``MIGRATED`` (after the
  copy or a failover), the full metadata (UpdateMetadata of every partition, then LeaderAndIsr of
  ``Type`` FULL, each broker its partitions, with ``isKRaftController`` and the ZooKeeper controller
  epoch it claimed) and after each committed change what changed (LeaderAndIsr and UpdateMetadata of
  changed partitions, StopReplica with delete for deleted topics and moved replicas, UpdateMetadata of
  the live brokers when a registration changes), as Kafka's ``MigrationPropagator`` does.

* The end (KIP-866's finalization, done by the controller, not the driver): brokers restarted in KRaft
  mode register during MIGRATION without ``IsMigratingZkBroker`` and get no controller-to-broker RPC;
  the dual writes go on. A controller started with the migration disabled (so without a driver)
  appends ``ZkMigrationStateRecord(POST_MIGRATION)`` on activation once no ZooKeeper-mode broker is
  registered (:meth:`~kraftkit.controller.quorum_controller.QuorumController._finalize_due`); from then
  on nothing writes ZooKeeper. A driver that finds the log in POST_MIGRATION refuses to run, saying
  that a rollback to ZooKeeper mode is no longer possible, and a driver in ``DUAL_WRITE`` whose image
  leaves MIGRATION stops writing.

The ZooKeeper calls block: they run in a worker thread, each bounded by the ZooKeeper session
timeout; what ZooKeeper holds is bounded as the reader bounds it (:class:`~kraftkit.migration.zk_reader.ZkLimits`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kraftkit._core import encode_metadata_record
from kraftkit._kafka import FEATURE_LEVEL
from kraftkit.controller.bootstrap import MIGRATION, POST_MIGRATION, PRE_MIGRATION
from kraftkit.controller.cluster import ControllerError
from kraftkit.errors import KraftkitError
from kraftkit.features.registry import registry
from kraftkit.metadata.image import ZK_MIGRATION_STATES
from kraftkit.metadata.records import record_type
from kraftkit.migration import convert, zk_client, zk_writer
from kraftkit.migration.propagator import Propagator
from kraftkit.migration.zk_client import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    Create,
    Delete,
    MigrationZNode,
    SetData,
    ZkBadVersion,
    ZkClient,
    controller_json,
    parse_controller,
    parse_controller_epoch,
)
from kraftkit.migration.zk_reader import READ_WINDOW, ZkError, ZkInputError, ZkLimits, ZkSource, read_cluster
from kraftkit.protocol.messages import Errors
from kraftkit.raft.driver import NotLeaderError

if TYPE_CHECKING:
    from kraftkit.controller.config import ZkMigrationConfig
    from kraftkit.controller.quorum_controller import QuorumController

__all__ = ["MigrationDriver", "MigrationError"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: Kafka's ``MigrationDriverState`` names, and this slice's end state
INACTIVE = "INACTIVE"
WAIT_FOR_CONTROLLER_QUORUM = "WAIT_FOR_CONTROLLER_QUORUM"
WAIT_FOR_BROKERS = "WAIT_FOR_BROKERS"
BECOME_CONTROLLER = "BECOME_CONTROLLER"
ZK_MIGRATION = "ZK_MIGRATION"
MIGRATED = "MIGRATED"
DUAL_WRITE = "DUAL_WRITE"
#: the dual writes' metrics (:meth:`MigrationDriver.metrics`), in the active controller's metadata
#: log directory, as JSON
METRICS_FILE = "zk-migration-metrics.json"
#: how long the copy may hold the controller's write queue, at most
COPY_TIMEOUT_MS = 600_000


class MigrationError(KraftkitError):
    """Something that stops the migration's step (said, then the step is tried again)."""


class _Lost(Exception):
    """This node stopped being the active controller of the epoch the driver runs in."""


def _encode(name: str, data: dict[str, Any]) -> bytes:
    return encode_metadata_record(record_type(name)[0], 0, data)


class MigrationDriver:
    """The migration driver of one controller node (set it as ``controller.migration``)."""

    def __init__(
        self,
        controller: QuorumController,
        config: ZkMigrationConfig,
        connect: Callable[[], ZkClient] | None = None,
        *,
        poll_s: float = 1.0,
        limits: ZkLimits | None = None,
    ) -> None:
        self.controller = controller
        self.config = config
        self._connect = connect or (
            lambda: zk_client.KazooClient(
                config.connect, config.connection_timeout_ms / 1000, config.session_timeout_ms / 1000
            )
        )
        self.poll_s = poll_s
        self.limits = limits or ZkLimits()
        self.zk: ZkClient | None = None
        #: Kafka's driver state (see the module docstring)
        self.state = INACTIVE
        #: what the driver waits for, one line per broker or controller (empty: nothing)
        self.waiting: list[str] = []
        #: the ZooKeeper controller epoch and /controller_epoch zkVersion this controller claimed
        self.zk_epoch: tuple[int, int] | None = None
        #: what the copy committed: record counts by kind, the offset of its last record
        self.copied: dict[str, int] = {}
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._said: str | None = None  # the last "waiting for" said (said again only when it changes)
        self._claimed_in = -1  # the raft epoch in which this driver claimed ZooKeeper
        #: the ZooKeeper brokers' LeaderAndIsr / UpdateMetadata / StopReplica (while MIGRATED and DUAL_WRITE)
        self.propagator: Propagator | None = None
        self._closing: asyncio.Task | None = None
        #: the offset and epoch of the last KRaft record whose changes ZooKeeper holds (its
        #: ``/migration`` names the last one that changed something there)
        self.synced: tuple[int, int] = (-1, -1)
        #: the dual writes' writer (None: not in DUAL_WRITE yet)
        self.writer: zk_writer.ZkWriter | None = None
        #: when the oldest change of the dual-write round in progress, and the oldest after it, was committed
        self._round_since: float | None = None
        self._behind_since: float | None = None
        self._metrics_refused = False
        self._closed = False
        #: why the last dual write failed (None once a round wrote everything)
        self.last_error: str | None = None
        #: the controller writes allowed in state MIGRATION: they are written to ZooKeeper
        self.dual_writes = zk_writer.DUAL_WRITES

    @property
    def node_id(self) -> int:
        return self.controller.node.node_id

    # ------------------------------------------------------------------ MigrationHook
    def activated(self, epoch: int) -> None:
        self.deactivated()
        self._task = asyncio.get_running_loop().create_task(self._run(epoch))

    def deactivated(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self.state = INACTIVE
        self.waiting = []
        self._said = None
        self.zk_epoch = None
        self._stop_propagating()
        self._round_since = self._behind_since = None

    def committed(self) -> None:
        if self.state == DUAL_WRITE and self._behind_since is None:
            self._behind_since = time.monotonic()
        self._wake.set()
        if self.state in (MIGRATED, DUAL_WRITE):
            self._propagate(full=False)

    async def close(self) -> None:
        self._closed = True  # (the task stops at its next check even if a cancellation went astray)
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        propagator, self.propagator = self.propagator, None
        if propagator is not None:
            await propagator.close()
        zk, self.zk = self.zk, None
        if zk is not None:
            await asyncio.to_thread(_close_quietly, zk)

    # ------------------------------------------------------------------ the steps
    async def _run(self, epoch: int) -> None:
        while self._alive(epoch):
            try:
                await self._steps(epoch)
                return
            except _Lost:
                return
            except asyncio.CancelledError:
                raise
            except (MigrationError, ZkError, ControllerError) as e:
                log.error("node %d: ZK migration (%s): %s; trying again", self.node_id, self.state, _text(e))
            except Exception as e:  # kazoo's connection errors, mostly
                log.error(
                    "node %d: ZK migration (%s): ZooKeeper %s: %s; trying again",
                    self.node_id,
                    self.state,
                    self.config.connect,
                    type(e).__name__ + (f": {e}" if str(e) else ""),
                )
            await self._sleep(max(self.poll_s, 1.0))

    async def _steps(self, epoch: int) -> None:
        zk = await self._zk()
        await self._call(self._init_migration_znode, zk)
        state = self.controller.image.zk_migration_state
        if state == PRE_MIGRATION:
            await self._wait(epoch, WAIT_FOR_CONTROLLER_QUORUM, self._controllers_not_ready)
            await self._wait(epoch, WAIT_FOR_BROKERS, lambda: self._brokers_not_ready(zk))
            self._check(epoch)
            await self._claim(zk, epoch)
            await self._copy(zk, epoch)
        elif state == MIGRATION:
            await self._claim(zk, epoch)
        elif state == POST_MIGRATION:
            log.error(
                "node %d: the ZK migration was finalized (ZK migration state POST_MIGRATION): the driver does not run "
                "(zookeeper.metadata.migration.enable=true is ignored); ZooKeeper is no longer written, and rolling "
                "back to ZooKeeper mode is refused: the ZooKeeper-mode brokers' metadata there is out of date",
                self.node_id,
            )
            return
        else:
            name = ZK_MIGRATION_STATES.get(state, str(state))
            log.info("node %d: ZK migration state %s: the driver has nothing to do", self.node_id, name)
            return
        self.state = MIGRATED
        log.info(
            "node %d: ZK migration state MIGRATION: the metadata is in KRaft; its changes are written to ZooKeeper "
            "(dual writes); the ZooKeeper-mode brokers get the metadata from this controller (UpdateMetadata, "
            "LeaderAndIsr, StopReplica)",
            self.node_id,
        )
        self._propagate(full=True)
        await self._dual_write(zk, epoch)

    # ------------------------------------------------------------------ controller-to-broker RPCs
    def _propagate(self, *, full: bool) -> None:
        """The ZooKeeper brokers hear the image (``full``: all of it, on entering MIGRATED) or what
        changed since they last heard (:mod:`kraftkit.migration.propagator`)."""
        if self.zk_epoch is None:
            return
        if self.propagator is None:
            self.propagator = Propagator(self.node_id)
        if full:
            self.propagator.publish_image(self.controller.image, self.zk_epoch[0])
        else:
            self.propagator.publish_delta(self.controller.image, self.zk_epoch[0])

    def _stop_propagating(self) -> None:
        propagator, self.propagator = self.propagator, None
        if propagator is not None:
            try:
                task = asyncio.get_running_loop().create_task(propagator.close())
            except RuntimeError:
                return  # (no event loop: its connections went with it)
            self._closing = task  # (referenced until the next one)

    async def _zk(self) -> ZkClient:
        if self.zk is None:
            self.zk = await asyncio.to_thread(self._connect)
        return self.zk

    async def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in a worker thread, bounded by the ZooKeeper session timeout."""
        bound = self.config.session_timeout_ms / 1000 + 5
        try:
            return await asyncio.wait_for(asyncio.to_thread(fn, *args), bound)
        except TimeoutError:
            raise MigrationError(f"ZooKeeper {self.config.connect} did not answer within {bound:g} s") from None

    def _alive(self, epoch: int) -> bool:
        c = self.controller
        return not self._closed and c.active and c.active_epoch == epoch

    def _check(self, epoch: int) -> None:
        if not self._alive(epoch):
            raise _Lost()

    async def _sleep(self, seconds: float) -> None:
        """Until a commit or ``seconds`` (``asyncio.wait``: unlike ``wait_for`` before Python 3.12,
        it never swallows a cancellation that arrives as the wait ends)."""
        self._wake.clear()
        waiter = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({waiter}, timeout=seconds)
        finally:
            waiter.cancel()

    async def _wait(self, epoch: int, state: str, not_ready: Callable[[], Any]) -> None:
        """Stays in ``state`` until ``not_ready()`` (a list of reasons, or an awaitable of one) is
        empty, saying what it waits for whenever that changes."""
        self.state = state
        while True:
            self._check(epoch)
            reasons = not_ready()
            if asyncio.iscoroutine(reasons):
                reasons = await reasons
            self._check(epoch)
            self.waiting = list(reasons)
            said = "; ".join(self.waiting)
            if said != self._said:
                self._said = said
                if said:
                    log.info("node %d: ZK migration %s: waiting for %s", self.node_id, state, said)
            if not self.waiting:
                return
            await self._sleep(self.poll_s)

    # ------------------------------------------------------------------ /migration
    def _init_migration_znode(self, zk: ZkClient) -> None:
        """``getOrCreateMigrationRecoveryState``: ``/migration`` exists once the driver ran."""
        if zk.get(zk_client.MIGRATION) is None:
            try:
                zk.multi([Create(zk_client.MIGRATION, MigrationZNode().encode())])
            except zk_client.ZkNodeExists:
                pass
        got = zk.get(zk_client.MIGRATION)
        if got is None:
            raise MigrationError(f"{zk_client.MIGRATION}: went away after it was created")
        MigrationZNode.decode(got[0])  # (Kafka's JSON, or refused with the reason)

    # ------------------------------------------------------------------ waiting
    def _controllers_not_ready(self) -> list[str]:
        """``WAIT_FOR_CONTROLLER_QUORUM`` (KIP-919): every voter registered and ready."""
        c = self.controller
        image = c.image
        mv = registry().metadata_version(image.metadata_version or 0)
        if not mv.supported("controller_registration"):
            return []  # (before 3.7-IV0 controllers do not register: Kafka does not wait)
        registered = image.controllers
        out = []
        for v in sorted(c.node.replica().core.voters):
            reg = registered.get(v)
            if reg is None:
                out.append(f"controller {v}: not registered with the quorum yet")
            elif not reg.get("ZkMigrationReady"):
                out.append(
                    f"controller {v}: not ready for the migration (zookeeper.metadata.migration.enable is not true)"
                )
        return out

    async def _brokers_not_ready(self, zk: ZkClient) -> list[str]:
        """``WAIT_FOR_BROKERS``: every ZooKeeper broker registered with KRaft as a migrating one."""
        in_zk, in_topics, _out_of_sync = await self._call(self._zk_brokers, zk)
        brokers = self.controller.image.brokers
        kraft_zk = {b for b, reg in brokers.items() if reg.get("IsMigratingZkBroker")}
        out = []
        if not in_zk and not in_topics:
            return ["brokers: none is registered in ZooKeeper (/brokers/ids) yet"]
        refused = getattr(self.controller.apis, "refused_registrations", {})
        for b in sorted(in_zk | in_topics):
            if b in kraft_zk:
                continue
            where = "registered in ZooKeeper" if b in in_zk else "named by a topic assignment, not in /brokers/ids"
            why = refused.get(b)
            if b in brokers:
                out.append(
                    f"broker {b} ({where}): registered with KRaft as a KRaft broker, not a migrating ZooKeeper one"
                )
            elif why is not None:
                out.append(f"broker {b} ({where}): its registration with KRaft was refused: {why}")
            else:
                out.append(
                    f"broker {b} ({where}): not registered with KRaft yet (restart it with "
                    "zookeeper.metadata.migration.enable=true and the quorum's controller.quorum.voters, "
                    "controller.listener.names and listener.security.protocol.map)"
                )
        return out

    def _zk_brokers(self, zk: ZkClient) -> tuple[set[int], set[int], list[str]]:
        # (the wait reads the assignments only, as Kafka's: the partition states are not waited on)
        return zk_brokers(zk, self.limits, states=False)

    # ------------------------------------------------------------------ BECOME_CONTROLLER
    async def _claim(self, zk: ZkClient, epoch: int) -> None:
        self.state = BECOME_CONTROLLER
        self._check(epoch)
        if self._claimed_in == epoch and self.zk_epoch is not None:
            try:
                await self._call(self._check_zk_epoch, zk)
                return  # claimed in this epoch already (a copy that failed is started over), still ours
            except MigrationError as e:
                log.info("node %d: ZK migration: claiming the controller again: %s", self.node_id, e)
        zk_epoch = await self._call(self._claim_in_zk, zk, epoch)
        self._claimed_in = epoch
        self._check(epoch)
        self.zk_epoch = zk_epoch
        log.info(
            "node %d: claimed the controller in ZooKeeper: /controller names KRaft controller %d (epoch %d); "
            "ZooKeeper controller epoch %d (/controller_epoch zkVersion %d)",
            self.node_id,
            self.node_id,
            epoch,
            zk_epoch[0],
            zk_epoch[1],
        )

    def _claim_in_zk(self, zk: ZkClient, epoch: int) -> tuple[int, int]:
        """``tryRegisterKRaftControllerAsActiveController``: (the new ZooKeeper controller epoch,
        ``/controller_epoch``'s new zkVersion), or :class:`MigrationError`."""
        got = zk.get(CONTROLLER_EPOCH)
        if got is None:
            raise MigrationError(
                f"cannot register KRaft controller {self.node_id} as the active controller since there is no ZK "
                f"controller epoch present ({CONTROLLER_EPOCH}: has a ZooKeeper-mode controller ever run?)"
            )
        zk_epoch, epoch_version = parse_controller_epoch(got[0]), got[1]
        current = zk.get(CONTROLLER)
        ops: list[Any] = [SetData(CONTROLLER_EPOCH, str(zk_epoch + 1).encode(), epoch_version)]
        if current is not None:
            broker, kraft_epoch = parse_controller(current[0])
            if kraft_epoch is not None and kraft_epoch >= epoch:
                raise MigrationError(
                    f"cannot register KRaft controller {self.node_id} with epoch {epoch} as the current controller "
                    f"registered in ZK ({broker}) has the same or newer epoch {kraft_epoch}"
                )
            ops.append(Delete(CONTROLLER, current[1]))
        ops.append(Create(CONTROLLER, controller_json(self.node_id, int(time.time() * 1000), epoch)))
        try:
            versions = zk.multi(ops)
        except (ZkBadVersion, zk_client.ZkNoNode, zk_client.ZkNodeExists) as e:
            raise MigrationError(f"the ZooKeeper controller moved while this controller claimed it ({e})") from None
        return zk_epoch + 1, versions[0]

    # ------------------------------------------------------------------ DUAL_WRITE
    def metrics(self) -> dict[str, Any]:
        """``ZooKeeperBlockingKRaftMillis``: how long the oldest KRaft change not yet written to
        ZooKeeper has waited (0: ZooKeeper holds every committed change); the offset and epoch of
        the last KRaft record written (``/migration``'s), and of the last whose changes ZooKeeper
        holds (records that change nothing there are not written); why the last dual write failed
        (``lastError``, None once a round wrote everything)."""
        since = [t for t in (self._round_since, self._behind_since) if t is not None]
        lag = int((time.monotonic() - min(since)) * 1000) if since and self.state == DUAL_WRITE else 0
        offset, epoch = self.writer.written if self.writer is not None else (-1, -1)
        return {
            "ZooKeeperBlockingKRaftMillis": lag,
            "lastWrittenOffset": offset,
            "lastWrittenEpoch": epoch,
            "syncedOffset": self.synced[0],
            "lastError": self.last_error,
        }

    async def _dual_write(self, zk: ZkClient, epoch: int) -> None:
        """``DUAL_WRITE`` (Kafka's ``KRaftMigrationZkWriter``, :mod:`kraftkit.migration.zk_writer`):
        a sync of ZooKeeper with the image first (read, compared, what differs written), then each
        committed change, until this node stops being the active controller. A write that fails
        is followed by a sync; a lost claim (another controller in ``/controller_epoch``) by a
        new claim."""
        assert self.zk_epoch is not None
        self.state = DUAL_WRITE
        publisher = asyncio.get_running_loop().create_task(self._publish_metrics())
        try:
            await self._dual_write_rounds(zk, epoch)
        finally:
            publisher.cancel()
            self._write_metrics({**self.metrics(), "state": INACTIVE})

    def _write_metrics(self, m: dict[str, Any]) -> bool:
        """Writes ``m`` (with this node's id) to :data:`METRICS_FILE` in the metadata log
        directory, atomically; False (said once) when it cannot."""
        from kraftkit.features.storage.format import write_file_atomic

        path = Path(self.controller.node.config.log_dir) / METRICS_FILE
        try:
            write_file_atomic(path, json.dumps({"nodeId": self.node_id, **m}, sort_keys=True).encode())
        except OSError as e:
            if not self._metrics_refused:
                log.warning("node %d: ZK migration: %s not written: %s", self.node_id, path, e)
            self._metrics_refused = True
            return False
        return True

    async def _publish_metrics(self) -> None:
        """:meth:`metrics`, in :data:`METRICS_FILE` whenever they change (at most once a second),
        for ``kraftkit migrate status --controller-dir``."""
        last: dict[str, Any] | None = None
        while True:
            m = {**self.metrics(), "state": self.state}
            if m != last:
                await asyncio.to_thread(self._write_metrics, m)
                last = m
            await asyncio.sleep(1.0)

    async def _dual_write_rounds(self, zk: ZkClient, epoch: int) -> None:
        assert self.zk_epoch is not None
        writer = self.writer = zk_writer.ZkWriter(self.node_id, epoch, self.zk_epoch[1])
        await self._call(writer.load, zk)
        written: zk_writer.ZkView | None = None  # None: what ZooKeeper holds is to be read (a sync)
        # (the image whose view ``written`` is, and how many records ZooKeeper keeps it had applied)
        viewed: tuple[Any, int] | None = None
        self._round_since = time.monotonic()
        while True:
            self._check(epoch)
            image = self.controller.image
            if image.zk_migration_state != MIGRATION:
                log.info(
                    "node %d: ZK migration state %s: dual writes stop",
                    self.node_id,
                    ZK_MIGRATION_STATES.get(image.zk_migration_state, "?"),
                )
                return
            if written is not None and image.provenance.offset == self.synced[0]:
                await self._sleep(self.poll_s)  # (nothing committed since the last round)
                continue
            applied = image.records_replayed_of(zk_writer.VIEWED_RECORDS)
            if written is not None and viewed is not None and viewed[0] is image and viewed[1] == applied:
                # only records ZooKeeper does not keep (NoOpRecords every 500 ms, registrations,
                # heartbeats' fencing of brokers leading nothing): nothing to compare, whatever
                # the image's size
                self.synced = (image.provenance.offset, image.provenance.epoch)
                self._round_since = self._behind_since = None
                continue
            target = zk_writer.image_view(image)
            prov = image.provenance
            pending = [t for t in (self._round_since, self._behind_since) if t is not None]
            self._round_since, self._behind_since = (min(pending) if pending else None), None
            sync = written is None
            try:
                if written is None:
                    cluster = await self._call(read_cluster, zk, self.limits)
                    written = zk_writer.cluster_view(cluster)
                    self._check(epoch)
                todo = zk_writer.changes(written, target, epoch, max_znodes=self.limits.max_znodes)
                done = []
                for i, change in enumerate(todo):
                    last = i == len(todo) - 1
                    at = (prov.offset, prov.epoch) if last else writer.written
                    if await self._call(writer.apply, zk, change, *at):
                        done.append(change.what)
                if todo and writer.written != (prov.offset, prov.epoch):
                    await self._call(writer.mark, zk, prov.offset, prov.epoch)
                written = target
                viewed = (image, applied)
                self._round_since = None
                self.synced = (prov.offset, prov.epoch)
                self.last_error = None
            except zk_writer.ZkFenced as e:
                raise MigrationError(str(e)) from None
            except (asyncio.CancelledError, _Lost):
                raise
            except Exception as e:  # a ZooKeeper error: the next round reads ZooKeeper again
                written = None
                why = _text(e) if isinstance(e, KraftkitError) else type(e).__name__ + (f": {e}" if str(e) else "")
                self.last_error = f"ZooKeeper {self.config.connect}: {why} (offset {prov.offset} not written)"
                log.warning(
                    "node %d: ZK migration: a dual write to ZooKeeper %s failed (%s); syncing ZooKeeper with the "
                    "image again",
                    self.node_id,
                    self.config.connect,
                    why,
                )
                await self._sleep(max(self.poll_s, 1.0))
                continue
            if done or sync:
                log.info(
                    "node %d: ZK migration: %s up to offset %d (epoch %d) written to ZooKeeper: %s",
                    self.node_id,
                    "synced ZooKeeper with the image" if sync else "dual write",
                    prov.offset,
                    prov.epoch,
                    "; ".join(done[:20]) + (f"; and {len(done) - 20} more" if len(done) > 20 else "")
                    if done
                    else "nothing differed",
                )

    # ------------------------------------------------------------------ ZK_MIGRATION
    async def _copy(self, zk: ZkClient, epoch: int) -> None:
        """The copy, as one controller write that holds the write queue until it is over."""
        self.state = ZK_MIGRATION
        c = self.controller
        loop = asyncio.get_running_loop()
        over: asyncio.Future = loop.create_future()
        outcome: dict[str, Any] = {}

        def build() -> tuple[list[bytes], None]:
            if c.image.zk_migration_state != PRE_MIGRATION:
                raise ControllerError(Errors.INVALID_REQUEST, "the ZK migration state is no longer PRE_MIGRATION")
            if c.image.in_transaction:
                raise ControllerError(Errors.INVALID_REQUEST, "a metadata transaction is open")
            return [_encode("BeginTransactionRecord", {"Name": "ZK Migration"})], None

        def hold(end: int) -> asyncio.Future:
            task = loop.create_task(self._copy_records(zk, epoch, end, outcome))

            def finished(_t: asyncio.Task) -> None:
                if not over.done():
                    over.set_result(None)

            task.add_done_callback(finished)
            return over

        log.info("node %d: ZK migration: starting the copy of ZooKeeper's metadata into KRaft", self.node_id)
        try:
            await c.submit("ZooKeeper metadata copy", build, COPY_TIMEOUT_MS, hold=hold)
        except ControllerError as e:
            if "error" not in outcome:
                raise MigrationError(f"the copy did not complete: {e.message}") from None
        if "error" in outcome:
            raise outcome["error"]
        self.copied = outcome["counts"]
        offset, last_epoch = outcome["last"]
        log.info(
            "node %d: Completed migration of metadata from ZooKeeper to KRaft: %s (offsets up to %d, epoch %d)",
            self.node_id,
            ", ".join(f"{n} {k}" for k, n in sorted(self.copied.items())),
            offset,
            last_epoch,
        )
        try:
            await self._call(self._record_migration, zk, epoch, offset, last_epoch)
        except (ZkError, MigrationError) as e:
            # the metadata is in KRaft; /migration is for a resumption of dual writes (not built yet)
            log.warning("node %d: ZK migration: %s not updated: %s", self.node_id, zk_client.MIGRATION, _text(e))

    async def _copy_records(self, zk: ZkClient, epoch: int, begin_end: int, outcome: dict[str, Any]) -> None:
        """After the BeginTransactionRecord's batch (ending at ``begin_end``) is appended: reads
        ZooKeeper, appends the records batch by batch and ends the transaction, or aborts it."""
        c = self.controller
        try:
            await self._commit_of(epoch, begin_end)
            cluster = await self._call(read_cluster, zk, self.limits)
            cluster.not_carried = [(z, w) for z, w in cluster.not_carried if z != zk_client.MIGRATION]
            mv = registry().metadata_version(c.image.metadata_version or 0)
            try:
                convert.check_carriable(cluster, mv)
            except convert.ConversionError as e:
                raise MigrationError(str(e).replace("cannot convert", "cannot migrate", 1)) from None
            recs = [r for r in convert.records(cluster, mv) if r[0] != FEATURE_LEVEL]
            counts: dict[str, int] = {}
            for api, _v, _d in recs:
                name = record_type(api)[1]
                counts[name] = counts.get(name, 0) + 1
            values = [encode_metadata_record(api, v, d) for api, v, d in recs]
            size = max(1, self.config.batch_size)
            batches = -(-len(values) // size)
            said = 0.0
            for n, i in enumerate(range(0, len(values), size), 1):
                await self._call(self._check_zk_epoch, zk)
                end = await self._append(epoch, values[i : i + size])
                if time.monotonic() - said >= 1.0 or n == batches:  # (the first batch, then at most once a second)
                    said = time.monotonic()
                    log.info(
                        "node %d: ZK migration: copy batch %d of %d committed (%d of %d records, up to offset %d)",
                        self.node_id,
                        n,
                        batches,
                        min(i + size, len(values)),
                        len(values),
                        end - 1,
                    )
            await self._call(self._check_zk_epoch, zk)
            end = await self._append(
                epoch,
                [
                    _encode("ZkMigrationStateRecord", {"ZkMigrationState": MIGRATION}),
                    _encode("EndTransactionRecord", {}),
                ],
            )
            outcome["counts"] = counts
            outcome["last"] = (end - 1, c.node.replica().log.epoch_of(end - 1))
        except _Lost:
            outcome["error"] = MigrationError("this node stopped being the active controller during the copy")
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if isinstance(e, (MigrationError, ZkError)):
                outcome["error"] = e
            elif type(e).__module__.startswith("kazoo"):  # (a connection lost, a session expired, ...)
                outcome["error"] = MigrationError(
                    f"ZooKeeper {self.config.connect}: {type(e).__name__}" + (f": {e}" if str(e) else "")
                )
            else:
                outcome["error"] = MigrationError(f"{type(e).__name__}: {e}")
            await self._abort(epoch, _text(outcome["error"]))

    async def _append(self, epoch: int, values: list[bytes]) -> int:
        """Appends ``values`` as one batch and waits for its commit; the end offset."""
        self._check(epoch)
        try:
            base, committed = self.controller.node.append_nowait(values)
        except NotLeaderError:
            raise _Lost() from None
        await self._committed(committed)
        return base + len(values)

    async def _commit_of(self, epoch: int, end: int) -> None:
        """Waits until the records before ``end`` are committed in this epoch."""
        while self.controller.node.replica().core.high_watermark < end:
            self._check(epoch)
            await self._sleep(0.05)

    async def _committed(self, committed: asyncio.Future) -> None:
        try:
            await asyncio.shield(committed)
        except (NotLeaderError, ControllerError):
            raise _Lost() from None
        except asyncio.CancelledError:
            if committed.cancelled():
                raise _Lost() from None
            raise
        except Exception as e:
            raise MigrationError(f"a batch of the copy was not committed: {e}") from None

    async def _abort(self, epoch: int, reason: str) -> None:
        log.error("node %d: ZK migration: aborting the copy: %s", self.node_id, reason)
        try:
            await self._append(epoch, [_encode("AbortTransactionRecord", {"Reason": reason[:1000]})])
        except (_Lost, MigrationError):
            log.warning("node %d: the abort was not committed: the next active controller aborts it", self.node_id)

    def _check_zk_epoch(self, zk: ZkClient) -> None:
        """``/controller_epoch`` still has the zkVersion this controller gave it."""
        assert self.zk_epoch is not None
        got = zk.get(CONTROLLER_EPOCH)
        if got is None or got[1] != self.zk_epoch[1]:
            raise MigrationError(
                f"{CONTROLLER_EPOCH} changed (zkVersion {None if got is None else got[1]}, this controller set "
                f"{self.zk_epoch[1]}): another controller claimed ZooKeeper"
            )

    def _record_migration(self, zk: ZkClient, epoch: int, offset: int, last_epoch: int) -> None:
        """``setMigrationRecoveryState``: ``/migration`` with this controller and the copy's end,
        conditional on ``/controller_epoch``'s and ``/migration``'s zkVersions."""
        assert self.zk_epoch is not None
        got = zk.get(zk_client.MIGRATION)
        if got is None:
            raise MigrationError(f"{zk_client.MIGRATION}: no such znode")
        state = MigrationZNode(self.node_id, epoch, offset, last_epoch)
        zk.multi(
            [
                zk_client.Check(CONTROLLER_EPOCH, self.zk_epoch[1]),
                SetData(zk_client.MIGRATION, state.encode(), got[1]),
            ]
        )


def zk_brokers(zk: ZkSource, lim: ZkLimits, *, states: bool = True) -> tuple[set[int], set[int], list[str]]:
    """The broker ids of ``/brokers/ids`` and of the topics' replica assignments, and the
    partitions without a leader or with a replica out of the ISR (``topic-p (leader L, ISR [..] of
    replicas [..])``), as ZooKeeper holds them (bounded by ``lim``; ``states=False``: the
    partition states are not read and the last is empty). The topics' and the states' znodes
    are read pipelined, :data:`~kraftkit.migration.zk_reader.READ_WINDOW` at a time."""
    many = getattr(zk, "get_many", None)

    def read(paths: list[str]) -> Iterator[tuple[str, tuple[bytes, int] | None]]:
        for i in range(0, len(paths), READ_WINDOW):
            window = paths[i : i + READ_WINDOW]
            got = many(window) if many is not None else [zk.get(path) for path in window]
            for path, one in zip(window, got, strict=True):
                if one is not None and len(one[0]) > lim.max_znode_bytes:
                    raise ZkInputError(f"{path}: {len(one[0])} bytes, more than {lim.max_znode_bytes} (the bound)")
                yield path, one

    ids = zk.children("/brokers/ids") or []
    if len(ids) > lim.max_children:
        raise ZkInputError(f"/brokers/ids: {len(ids)} children, more than {lim.max_children} (the bound)")
    in_zk = set()
    for kid in ids:
        if not kid.isdigit() or len(kid) > 10:
            raise ZkInputError(f"/brokers/ids/{kid[:40]}: not a broker id")
        in_zk.add(int(kid))
    topics = zk.children("/brokers/topics") or []
    if len(topics) > lim.max_topics:
        raise ZkInputError(f"/brokers/topics: {len(topics)} topics, more than {lim.max_topics} (the bound)")
    in_topics: set[int] = set()
    assignments: list[tuple[str, int, list[int]]] = []
    partitions = 0
    for path, got in read([f"/brokers/topics/{t}" for t in sorted(topics)]):
        if got is None:
            continue
        assignment = _assignment(path, got[0])
        partitions += len(assignment)
        if partitions > lim.max_partitions:
            raise ZkInputError(f"{path}: more than {lim.max_partitions} partitions in all (the bound)")
        for p, replicas in sorted(assignment.items()):
            in_topics.update(replicas)
            assignments.append((path, p, replicas))
    out_of_sync: list[str] = []
    if states:
        state_paths = [f"{path}/partitions/{p}/state" for path, p, _r in assignments]
        for (path, p, replicas), (state_path, state) in zip(assignments, read(state_paths), strict=True):
            leader, isr = _leader_and_isr(state_path, state[0] if state else None, lim.max_znode_bytes)
            if leader < 0 or set(isr) != set(replicas):
                t = path.rsplit("/", 1)[1]
                out_of_sync.append(f"{t}-{p} (leader {leader}, ISR {sorted(isr)} of replicas {replicas})")
    return in_zk, in_topics, out_of_sync


def _json(path: str, data: bytes) -> Any:
    import json

    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        raise ZkInputError(f"{path}: not JSON") from None


def _ids(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 2**31 for r in v)


def _assignment(path: str, data: bytes) -> dict[int, list[int]]:
    """A topic znode's replica assignment (``partitions``): partition -> broker ids."""
    js = _json(path, data)
    parts = js.get("partitions") if isinstance(js, dict) else None
    if not isinstance(parts, dict):
        raise ZkInputError(f"{path}: no partitions object")
    out: dict[int, list[int]] = {}
    for p, replicas in parts.items():
        if not (isinstance(p, str) and p.isdigit() and len(p) <= 10) or not _ids(replicas):
            raise ZkInputError(f"{path}: partition {str(p)[:20]!r}: not a partition of broker ids")
        out[int(p)] = replicas
    return out


def _leader_and_isr(path: str, data: bytes | None, max_bytes: int) -> tuple[int, list[int]]:
    """A partition state znode's leader and ISR ((-1, []) when there is none)."""
    if data is None:
        return -1, []
    if len(data) > max_bytes:
        raise ZkInputError(f"{path}: {len(data)} bytes, more than {max_bytes} (the bound)")
    js = _json(path, data)
    leader, isr = (js.get("leader"), js.get("isr")) if isinstance(js, dict) else (None, None)
    if not isinstance(leader, int) or isinstance(leader, bool) or not isinstance(isr, list) or not _ids(isr):
        raise ZkInputError(f"{path}: not Kafka's partition state JSON")
    return leader, list(isr)


def _text(e: BaseException) -> str:
    return getattr(e, "message", None) or str(e) or type(e).__name__


def _close_quietly(zk: ZkClient) -> None:
    try:
        zk.close()
    except Exception:
        pass
