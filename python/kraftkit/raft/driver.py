"""The raft node's driver: the deterministic core run by asyncio on real files.

Per hosted raft partition (multi-raft ready, as KIP-595 decided; KRaft itself hosts
``__cluster_metadata``-0) a :class:`Replica` holds the :class:`~kraftkit.raft.core.RaftCore`, its
:class:`~kraftkit.raft.file_log.FileRaftLog`, its ``quorum-state`` file and its state machine. The
driver feeds the core events (requests and answers from the network, timer ticks at
``core.next_deadline()``, fsync completions, local appends) and carries out what it returns, in order:

* ``PersistElection``: the ``quorum-state`` file is written and fsynced before anything after it;
* ``Send``: a request goes out on the shared :class:`~kraftkit.raft.transport.PeerConnection` to
  that node, an answer to the connection that asked;
* ``Fsync``: the log is flushed once the current burst of events is handled (group commit), then
  ``FsyncComplete`` is fed back;
* ``Committed``: the state machine applies the newly committed batches, ``append`` futures resolve,
  listeners hear of it;
* ``StateChanged`` / ``SnapshotLoaded``: listeners hear of it (a lost leadership fails the appends
  still waiting: their fate is then unknown).

The API, in the spirit of Kafka's ``RaftClient``: :meth:`RaftDriver.append` (a future of the
committed offset), :meth:`RaftDriver.committed_batches` (committed reads) and listeners with
``handle_commit``, ``handle_load_snapshot`` and ``handle_leader_change``. The listener that takes
requests in is :class:`kraftkit.raft.server.RaftNode`, the driver with its server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from kraftkit._core import RecordBatch
from kraftkit._fs import DirectoryLock
from kraftkit.errors import KraftkitError
from kraftkit.metadata.snapshot import SnapshotId
from kraftkit.raft import messages as m
from kraftkit.raft.core import RaftConfig, RaftCore
from kraftkit.raft.events import (
    Append,
    Appended,
    AppendRejected,
    Committed,
    CreateSnapshot,
    Fsync,
    FsyncComplete,
    PeerUnreachable,
    PersistElection,
    Receive,
    RequestFailed,
    Resign,
    Send,
    SnapshotLoaded,
    Start,
    StateChanged,
    Tick,
)
from kraftkit.raft.file_log import ClientBatches, FileRaftLog
from kraftkit.raft.messages import TopicPartition
from kraftkit.raft.quorum_state import FileQuorumStateStore, Role
from kraftkit.raft.records import KafkaRecords
from kraftkit.raft.state_machine import LossyDowngrade, MetadataStateMachine
from kraftkit.raft.transport import ListenerLimits, PeerConnection
from kraftkit.raft.voters import ZERO_UUID, Endpoint

__all__ = ["NodeConfig", "RaftDriver", "Replica", "RaftListener", "NotLeaderError", "parse_voters"]

#: (the node's log keeps the name it had before the driver and the server were two modules)
log = logging.getLogger("kraftkit.raft.node")


class NotLeaderError(KraftkitError):
    """An append to a node that is not the leader, or whose leadership ended before the append
    committed (its outcome is then unknown). ``leader_id`` names the leader if known (-1 if not)."""

    def __init__(self, message: str, leader_id: int = -1, epoch: int = -1) -> None:
        super().__init__(message)
        self.leader_id = leader_id
        self.epoch = epoch


def parse_voters(text: str) -> dict[int, tuple[str, int]]:
    """``1@127.0.0.1:19091,2@host:19092`` (Kafka's ``controller.quorum.voters``) -> {id: (host, port)}."""
    out: dict[int, tuple[str, int]] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        try:
            ident, addr = item.split("@", 1)
            host, port = addr.rsplit(":", 1)
            vid, vport, host = int(ident), int(port), host.strip("[]")
        except ValueError:
            raise ValueError(f"bad voter {item!r}: expected ID@HOST:PORT") from None
        if not 0 <= vid <= 2**31 - 1:
            raise ValueError(f"bad voter {item!r}: id {vid} is outside 0..{2**31 - 1}")
        if not 1 <= vport <= 65535:
            raise ValueError(f"bad voter {item!r}: port {vport} is outside 1..65535")
        if not host:
            raise ValueError(f"bad voter {item!r}: no host")
        if vid in out:
            raise ValueError(f"voter id {vid} is given twice ({out[vid][0]}:{out[vid][1]} and {host}:{vport})")
        out[vid] = (host, vport)
    if not out:
        raise ValueError("no voters given")
    return out


class RaftListener(Protocol):
    """Kafka's ``RaftClient.Listener``, as far as kraftkit's node calls it. Every method is optional."""

    def handle_commit(self, batches: list[RecordBatch]) -> None: ...
    def handle_load_snapshot(self, path: Path, snapshot_id: SnapshotId) -> None: ...
    def handle_leader_change(self, leader_id: int, epoch: int, role: Role) -> None: ...


@dataclasses.dataclass
class NodeConfig:
    """One node. ``voters`` maps every voter's id to its listener address; a ``node_id`` outside
    it is an observer. ``listen`` defaults to the node's own voter address. The partition
    directories go under ``log_dir`` as Kafka lays them out (``__cluster_metadata-0``)."""

    node_id: int
    #: a static quorum's voters (``controller.quorum.voters``); empty for a dynamic quorum
    #: (KIP-853), whose voters are in the log and whose nodes find the leader through ``bootstrap_servers``
    voters: dict[int, tuple[str, int]]
    log_dir: Path
    cluster_id: str
    listen: tuple[str, int] | None = None
    #: ``controller.quorum.bootstrap.servers`` (a dynamic quorum): where an observer asks for the leader
    bootstrap_servers: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    #: the quorum's listener name (``controller.listener.names``' first), and the address this node
    #: gives of itself there (default: the address it listens on)
    listener_name: str = "CONTROLLER"
    advertised: tuple[str, int] | None = None
    #: the directory id of the metadata log (meta.properties' ``directory.id``; None: read from
    #: ``log_dir/meta.properties`` if there, else none, as for a static quorum)
    directory_id: uuid.UUID | None = None
    raft: RaftConfig = dataclasses.field(default_factory=RaftConfig)
    partitions: tuple[TopicPartition, ...] = (m.METADATA_PARTITION,)
    #: snapshot after this many committed records since the last one (Kafka's
    #: ``metadata.log.max.record.bytes.between.snapshots`` counts bytes; 0 = never)
    snapshot_every_records: int = 20000
    segment_bytes: int = 1024 * 1024 * 1024
    #: Kafka's ``index.interval.bytes`` of the log's segments
    index_interval_bytes: int = 4096
    #: what clients can make the listener hold (request size, buffered bytes, connections, deadlines)
    limits: ListenerLimits = dataclasses.field(default_factory=ListenerLimits)
    #: the bytes of Produce records accepted and not answered yet (appended, waiting for their commit)
    #: node-wide; a Produce over it is answered THROTTLING_QUOTA_EXCEEDED
    produce_pending_max_bytes: int = 128 * 1024 * 1024
    seed: int | None = None

    def __post_init__(self) -> None:
        self.log_dir = Path(self.log_dir)
        if self.produce_pending_max_bytes < 1:
            raise ValueError(f"produce pending max bytes must be at least 1, not {self.produce_pending_max_bytes}")
        if self.listen is None:
            if self.node_id not in self.voters:
                raise ValueError(f"node {self.node_id} is not a static voter: give it an address to listen on")
            self.listen = self.voters[self.node_id]
        if self.raft.cluster_id is None:
            self.raft = dataclasses.replace(self.raft, cluster_id=self.cluster_id)
        if self.bootstrap_servers:
            ids = tuple(bootstrap_id(i) for i in range(len(self.bootstrap_servers)))
            self.raft = dataclasses.replace(self.raft, bootstrap_ids=ids, listener=self.listener_name)
        if self.directory_id is None:
            self.directory_id = _directory_id_of(self.log_dir)


def bootstrap_id(i: int) -> int:
    """The id standing for the i-th ``controller.quorum.bootstrap.servers`` entry (far below the
    negative ids of inbound connections)."""
    return -(1 << 30) - i


def _directory_id_of(log_dir: Path) -> uuid.UUID | None:
    """``directory.id`` of ``log_dir/meta.properties`` (None: no such file or key)."""
    from kraftkit.features.storage.properties import MetaProperties
    from kraftkit.features.storage.uuids import parse_uuid

    path = log_dir / "meta.properties"
    if not path.is_file():
        return None
    meta = MetaProperties.read(path)
    return uuid.UUID(bytes=parse_uuid(meta.directory_id)) if meta.directory_id else None


class Replica:
    """One hosted raft partition: core, log, quorum-state file, state machine, waiting appends."""

    def __init__(self, node: RaftDriver, tp: TopicPartition) -> None:
        cfg = node.config
        self.node = node
        self.tp = tp
        self.dir = cfg.log_dir / f"{tp.topic}-{tp.partition}"
        self.log = FileRaftLog(self.dir, segment_bytes=cfg.segment_bytes, index_interval_bytes=cfg.index_interval_bytes)
        self.store = FileQuorumStateStore(self.dir / "quorum-state")
        self.core = RaftCore(
            cfg.node_id,
            sorted(cfg.voters),
            self.log,
            directory_id=cfg.directory_id or ZERO_UUID,
            persisted=self.store.read(),
            config=cfg.raft,
            rng=random.Random(cfg.seed if cfg.seed is not None else None),
            tp=tp,
            records=KafkaRecords(),
        )
        self.machine = MetadataStateMachine(self.log)
        self.listeners: list[Any] = []
        self.waiters: list[tuple[int, asyncio.Future]] = []  # (last offset, future), ascending
        self.flush_scheduled = False
        self.snapshot_scheduled = False
        #: the snapshot being written in another thread (commits wait to be applied until it ends)
        self.snapshot_task: asyncio.Task | None = None
        self.produce_queue: list[tuple[ClientBatches, Any]] = []
        self.produce_scheduled = False
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at: int | None = None
        self.role = self.core.role


class RaftDriver:
    """Runs the cores of a node's replicas (see the module docstring); the listener is added by
    :class:`kraftkit.raft.server.RaftNode`, which starts and stops both."""

    def __init__(self, config: NodeConfig, listeners: list[Any] | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.replicas: dict[TopicPartition, Replica] = {}
        self._extra_listeners = list(listeners or [])
        self._peers: dict[int, PeerConnection] = {}
        self._inbound: dict[int, asyncio.Future] = {}  # answers the cores owe to requests from the listener
        self._next_inbound = 1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._t0 = 0.0
        self._wall0 = 0
        self.failed: BaseException | None = None
        self._stopped: asyncio.Event | None = None
        self._dir_lock: DirectoryLock | None = None

    # ------------------------------------------------------------------ life cycle
    def now(self) -> int:
        assert self._loop is not None
        return int((self._loop.time() - self._t0) * 1000)

    def wall_ms(self, core_ms: int) -> int:
        """A core time as wall-clock epoch milliseconds (-1 stays -1)."""
        return -1 if core_ms < 0 else self._wall0 + core_ms

    async def stop(self, *, resign: bool = True, timeout: float = 1.0) -> None:
        raise NotImplementedError  # the node stops its listener too: RaftNode.stop

    def _open_replicas(self) -> None:
        """The clock starts and every replica's files are opened (before the listener starts)."""
        self._loop = asyncio.get_running_loop()
        self._t0 = self._loop.time()
        self._wall0 = int(time.time() * 1000)
        self._stopped = asyncio.Event()
        self._logs_closed = False
        # the directory is this node's while it runs, as Kafka's KafkaRaftManager locks metadata.log.dir
        self.config.log_dir.mkdir(parents=True, exist_ok=True)
        self._dir_lock = DirectoryLock(self.config.log_dir)
        try:
            for tp in self.config.partitions:
                rep = Replica(self, tp)
                rep.listeners = list(self._extra_listeners)
                self.replicas[tp] = rep
                if rep.log.recovery is not None:
                    log.warning("node %d %s: log recovered: %s", self.node_id, tp, rep.log.recovery.get("error"))
        except BaseException:
            self._dir_lock.release()
            raise

    def _start_cores(self, address: tuple[str, int] | None = None) -> None:
        """Listeners hear of the snapshot each replica starts from; then its core starts, knowing
        the address it listens on (what a dynamic quorum's voter set says of it)."""
        adv = self.config.advertised or address
        for rep in self.replicas.values():
            if adv is not None and not rep.core.cfg.endpoints:
                ep = (Endpoint(self.config.listener_name, adv[0], adv[1]),)
                rep.core.cfg = dataclasses.replace(rep.core.cfg, endpoints=ep, listener=self.config.listener_name)
            if rep.machine.snapshot_path is not None:
                self._notify(rep, "handle_load_snapshot", rep.machine.snapshot_path, rep.log.snapshot())
            self._step(rep, Start(self.now()))

    async def _finish_snapshots_and_resign(self, resign: bool, timeout: float) -> None:
        """A snapshot being written is finished first (its file is complete or absent); then each
        leader resigns (EndQuorumEpoch) and waits up to ``timeout`` s for the voters to hear it."""
        assert self._loop is not None
        writing = [r.snapshot_task for r in self.replicas.values() if r.snapshot_task is not None]
        if writing:
            await asyncio.wait(writing, timeout=60)
        if resign:
            leaders = [r for r in self.replicas.values() if r.core.role is Role.LEADER]
            for rep in leaders:
                self._step(rep, Resign(self.now()))
            if leaders:
                deadline = self._loop.time() + timeout
                while self._loop.time() < deadline and any(r.core.resignation_pending for r in leaders):
                    await asyncio.sleep(0.01)

    async def _close_peers(self) -> None:
        for p in list(self._peers.values()):
            await p.close()

    def _close_replicas(self) -> None:
        # (the listener may take a moment more to close: a step or a flush queued meanwhile is dropped)
        self._logs_closed = True
        for rep in self.replicas.values():
            if rep.timer is not None:
                rep.timer.cancel()
            self._fail_waiters(rep, "the node stopped")
            rep.log.close()
        if self._dir_lock is not None:
            self._dir_lock.release()

    def _fatal(self, rep: Replica, e: BaseException) -> None:
        log.critical("node %d %s: fatal: %s", self.node_id, rep.tp, e, exc_info=e)
        self.failed = e
        asyncio.get_running_loop().create_task(self.stop(resign=False))

    # ------------------------------------------------------------------ driving the core
    def _step(self, rep: Replica, event) -> list:
        if self._loop is None or self._logs_closed:
            return []
        try:
            out = rep.core.step(event)
        except Exception as e:  # RaftStateError and I/O errors are fatal, as in Kafka
            self._fatal(rep, e)
            return []
        self._execute(rep, out)
        self._arm_timer(rep)
        return out

    def _execute(self, rep: Replica, out: list) -> None:
        for o in out:
            if isinstance(o, PersistElection):
                rep.store.write(o.state)
            elif isinstance(o, Send):
                if o.is_response:
                    fut = self._inbound.pop(o.correlation_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result(o.body)
                else:
                    self._send(rep, o)
            elif isinstance(o, Fsync):
                if not rep.flush_scheduled:
                    rep.flush_scheduled = True
                    self._loop.call_soon(self._flush, rep)  # type: ignore[union-attr]
            elif isinstance(o, Committed):
                self._on_commit(rep, o.high_watermark)
            elif isinstance(o, StateChanged):
                self._on_state_change(rep, o)
            elif isinstance(o, SnapshotLoaded):
                path = rep.log.snapshot_path(o.snapshot_id)
                log.info(
                    "node %d %s: loaded snapshot %s (%d bytes) fetched from leader %d",
                    self.node_id,
                    rep.tp,
                    tuple(o.snapshot_id),
                    path.stat().st_size,
                    rep.core.leader_id,
                )
                rep.machine.load_snapshot(path, o.snapshot_id)
                self._notify(rep, "handle_load_snapshot", path, o.snapshot_id)
            elif isinstance(o, (Appended, AppendRejected)):
                pass  # handled by append(), which made the event

    def _arm_timer(self, rep: Replica) -> None:
        if self._loop is None:
            return
        at = rep.core.next_deadline()
        if at == rep.timer_at and rep.timer is not None:
            return
        if rep.timer is not None:
            rep.timer.cancel()
            rep.timer = None
        rep.timer_at = at
        if at is not None:
            delay = max(0, at - self.now() + 1) / 1000
            rep.timer = self._loop.call_later(delay, self._tick, rep)

    def _tick(self, rep: Replica) -> None:
        rep.timer = None
        rep.timer_at = None
        self._step(rep, Tick(self.now()))

    def _flush(self, rep: Replica) -> None:
        rep.flush_scheduled = False
        if self._loop is None or self._logs_closed:
            return
        try:
            rep.log.flush()
        except Exception as e:
            self._fatal(rep, e)
            return
        self._step(rep, FsyncComplete(self.now()))

    # ------------------------------------------------------------------ commits, leadership
    def _on_commit(self, rep: Replica, hw: int) -> None:
        batches = []
        if rep.snapshot_task is None:  # else applied once the snapshot is written
            try:
                batches = rep.machine.apply_committed(hw)
            except Exception as e:
                self._fatal(rep, e)
                return
        while rep.waiters and rep.waiters[0][0] < hw:
            last, fut = rep.waiters.pop(0)
            if not fut.done():
                fut.set_result(last)
        if batches:
            self._notify(rep, "handle_commit", batches)
        if rep.machine.pending_rewrite is not None and rep.snapshot_task is None:
            self._rewrite(rep)
            return
        every = self.config.snapshot_every_records
        if (
            every
            and rep.machine.records_since_snapshot >= every
            and not rep.snapshot_scheduled
            and rep.snapshot_task is None
        ):
            rep.snapshot_scheduled = True
            self._loop.call_soon(self._snapshot, rep)  # type: ignore[union-attr]

    def _snapshot(self, rep: Replica) -> None:
        """Starts writing a snapshot of the state machine in another thread (the image engine
        releases the GIL): the replica goes on answering and replicating meanwhile, and the
        commits of that time are applied once the file is written."""
        rep.snapshot_scheduled = False
        if self._loop is None or rep.snapshot_task is not None:
            return
        end = rep.machine.applied_offset
        if end <= rep.log.start_offset or end > rep.log.flushed_offset:
            return
        if getattr(rep.machine.image, "in_transaction", False):
            # inside a metadata transaction the image holds records back: a snapshot now would
            # lose them (Kafka snapshots only what its loader published); the commit that ends
            # the transaction schedules it again
            return
        try:
            sid = SnapshotId(end, rep.log.epoch_of(end - 1))
            job = rep.machine.snapshot_job(sid)
        except Exception as e:
            log.error("node %d %s: snapshot at %d failed: %s", self.node_id, rep.tp, end, e)
            return
        rep.snapshot_task = self._loop.create_task(self._write_snapshot(rep, sid, job, rep.machine.image))

    async def _write_snapshot(self, rep: Replica, sid: SnapshotId, job, image) -> None:
        path = None
        try:
            path = await asyncio.get_running_loop().run_in_executor(None, job)
        except Exception as e:
            log.error("node %d %s: snapshot at %d failed: %s", self.node_id, rep.tp, sid.end_offset, e)
        finally:
            rep.snapshot_task = None
        if self._loop is None:
            return
        if path is not None:
            if rep.machine.image is image and sid.end_offset > rep.log.start_offset:
                rep.machine.snapshot_written(path)
                self._step(rep, CreateSnapshot(self.now(), sid.end_offset, path))
                log.info(
                    "node %d %s: snapshot %s; log start now %d", self.node_id, rep.tp, tuple(sid), rep.log.start_offset
                )
            else:
                # a snapshot fetched from the leader replaced the image meanwhile: this one is stale
                log.info("node %d %s: snapshot %s superseded while written", self.node_id, rep.tp, tuple(sid))
                if rep.log.snapshot() != sid:  # (not the very snapshot that was fetched)
                    path.unlink(missing_ok=True)
        # what was committed while the file was written
        self._on_commit(rep, rep.core.high_watermark)

    def _rewrite(self, rep: Replica) -> None:
        """A committed batch lowered metadata.version across a change of the metadata format
        (:class:`~kraftkit.raft.state_machine.LossyDowngrade`): the image is rewritten at the new
        level in another thread as the snapshot at that batch's end, which this replica then loads
        and makes its log start, and replay goes on from there (listeners hear
        ``handle_load_snapshot`` and ``handle_metadata_rewrite(snapshot_id, report)``)."""
        pending = rep.machine.pending_rewrite
        assert pending is not None and self._loop is not None
        end = pending.snapshot_id.end_offset
        # when nothing follows the batch yet, the next records start a segment of their own, so no
        # segment kept after the snapshot holds a record the lower level cannot read
        rolled = rep.log.start_segment_at(end)
        log.warning(
            "node %d %s: metadata.version lowered from %d to %d at offset %d across a change of the metadata "
            "format: rewriting the image at the new level as the snapshot %s%s",
            self.node_id,
            rep.tp,
            pending.from_level,
            pending.to_level,
            end - 1,
            tuple(pending.snapshot_id),
            "" if rolled else " (records below it stay in the segment it ends in until that segment is deleted)",
        )
        try:
            job = rep.machine.rewrite_job(pending)
        except Exception as e:
            self._fatal(rep, e)
            return
        rep.snapshot_task = self._loop.create_task(self._write_rewrite(rep, pending, job))

    async def _write_rewrite(self, rep: Replica, pending: LossyDowngrade, job) -> None:
        sid = pending.snapshot_id
        try:
            path, report = await asyncio.get_running_loop().run_in_executor(None, job)
        except Exception as e:
            rep.snapshot_task = None
            # every replica rewrites the same image the same way: the controller's dry run of the
            # same rewrite, before the record was committed, makes this a bug, never bad input
            self._fatal(
                rep, RuntimeError(f"rewriting the metadata at level {pending.to_level} at {tuple(sid)} failed: {e}")
            )
            return
        rep.snapshot_task = None
        if self._loop is None:
            return
        if rep.machine.pending_rewrite is not pending:
            # a snapshot fetched from the leader replaced the image meanwhile
            if rep.log.snapshot() != sid:
                path.unlink(missing_ok=True)
        else:
            if rep.log.flushed_offset < sid.end_offset:
                self._flush(rep)
            self._step(rep, CreateSnapshot(self.now(), sid.end_offset, path))
            if rep.log.snapshot() != sid:
                return  # the step failed (fatal, logged)
            rep.machine.load_snapshot(path, sid)
            log.warning(
                "node %d %s: loaded the metadata rewritten at level %d as snapshot %s (log start now %d): %s",
                self.node_id,
                rep.tp,
                pending.to_level,
                tuple(sid),
                rep.log.start_offset,
                "; ".join(line.strip() for line in report.text().splitlines()[1:]),
            )
            self._notify(rep, "handle_load_snapshot", path, sid)
            self._notify(rep, "handle_metadata_rewrite", sid, report)
        self._on_commit(rep, rep.core.high_watermark)

    def _on_state_change(self, rep: Replica, o: StateChanged) -> None:
        was = rep.role
        rep.role = o.role
        log.info("node %d %s: %s in epoch %d (leader %d)", self.node_id, rep.tp, o.role.value, o.epoch, o.leader_id)
        if was is Role.LEADER and o.role is not Role.LEADER:
            self._fail_waiters(
                rep,
                f"leadership of epoch {rep.core.epoch} ended before the append committed; "
                "it may or may not be committed",
            )
        self._notify(rep, "handle_leader_change", o.leader_id, o.epoch, o.role)

    def _fail_waiters(self, rep: Replica, why: str) -> None:
        waiters, rep.waiters = rep.waiters, []
        for _last, fut in waiters:
            if not fut.done():
                fut.set_exception(NotLeaderError(why, rep.core.leader_id, rep.core.epoch))

    def _notify(self, rep: Replica, what: str, *args: Any) -> None:
        for lst in rep.listeners:
            fn = getattr(lst, what, None)
            if fn is not None:
                try:
                    fn(*args)
                except Exception:
                    log.exception("listener %r failed in %s", lst, what)

    # ------------------------------------------------------------------ the RaftClient API
    def replica(self, tp: TopicPartition | None = None) -> Replica:
        return self.replicas[tp or self.config.partitions[0]]

    def register(self, listener: Any, tp: TopicPartition | None = None) -> None:
        """Adds a listener (``handle_commit``, ``handle_load_snapshot``, ``handle_leader_change``)."""
        self.replica(tp).listeners.append(listener)

    def append_nowait(
        self, values: list[bytes] | ClientBatches, tp: TopicPartition | None = None
    ) -> tuple[int, asyncio.Future]:
        """Appends ``values`` (record values, one batch; or :class:`ClientBatches` taken as they
        are) if this node leads; returns the base offset and a future of the last offset that
        resolves once it is committed. Raises :class:`NotLeaderError` otherwise."""
        rep = self.replica(tp)
        if self._loop is None:
            raise NotLeaderError("the node is not running")
        out = self._step(rep, Append(self.now(), values if isinstance(values, ClientBatches) else tuple(values)))
        for o in out:
            if isinstance(o, Appended):
                fut = self._loop.create_future()
                if rep.core.high_watermark > o.last_offset:  # committed already (a one-voter quorum)
                    fut.set_result(o.last_offset)
                else:
                    rep.waiters.append((o.last_offset, fut))
                return o.base_offset, fut
            if isinstance(o, AppendRejected):
                raise NotLeaderError(f"node {self.node_id}: {o.reason}", rep.core.leader_id, rep.core.epoch)
        raise NotLeaderError(f"node {self.node_id}: the append was not taken", rep.core.leader_id, rep.core.epoch)

    async def append(self, values: list[bytes], tp: TopicPartition | None = None) -> int:
        """Appends and waits until committed; returns the last offset."""
        _base, fut = self.append_nowait(values, tp)
        return await fut

    def committed_batches(self, start: int = 0, tp: TopicPartition | None = None) -> Iterator[RecordBatch]:
        """Committed batches from the one holding ``start`` (below the high watermark)."""
        rep = self.replica(tp)
        hw = rep.core.high_watermark
        for b in rep.log.log_dir.batches(max(start, rep.log.start_offset)):
            if b.last_offset >= hw:
                return
            yield b

    def leader(self, tp: TopicPartition | None = None) -> tuple[int, int]:
        core = self.replica(tp).core
        return core.leader_id, core.epoch

    # ------------------------------------------------------------------ outgoing requests
    def peer_features(self, node_id: int) -> dict[str, tuple[int, int]] | None:
        """The SupportedFeatures voter ``node_id`` gave in its ApiVersions answer on this node's
        connection to it (None: not heard from yet)."""
        conn = self._peers.get(node_id)
        return None if conn is None else conn.peer_features

    def address_of(self, node_id: int) -> tuple[str, int] | None:
        """Where ``node_id`` listens on the quorum's listener: a static voter's configured address,
        a bootstrap server's, or what a replica knows (its voter set, the endpoints it heard of)."""
        addr = self.config.voters.get(node_id)
        if addr is None and node_id <= bootstrap_id(0):
            i = bootstrap_id(0) - node_id
            addr = self.config.bootstrap_servers[i] if i < len(self.config.bootstrap_servers) else None
        if addr is None:
            for rep in self.replicas.values():
                addr = rep.core.endpoint_of(node_id)
                if addr is not None:
                    break
        return addr

    def voter_addresses(self, tp: TopicPartition | None = None) -> dict[int, tuple[str, int]]:
        """The voters in force and their addresses (a static quorum's configuration, or a dynamic
        quorum's voter set; a voter without a known address is left out)."""
        core = self.replica(tp).core
        out = {}
        for v in core.voters:
            addr = self.address_of(v)
            if addr is not None:
                out[v] = addr
        return out

    def _peer(self, dest: int) -> PeerConnection | None:
        conn = self._peers.get(dest)
        if conn is None:
            addr = self.address_of(dest)
            if addr is None:
                return None
            conn = PeerConnection(
                dest,
                addr[0],
                addr[1],
                client_id=f"raft-client-{self.node_id}",
                versions={**m.VERSIONS, m.API_VERSIONS: 4},
                on_refused=self._refused,
            )
            self._peers[dest] = conn
        return conn

    def _refused(self, dest: int) -> None:
        if self._loop is not None:
            for rep in self.replicas.values():
                self._step(rep, PeerUnreachable(self.now(), dest))

    def _send(self, rep: Replica, o: Send) -> None:
        conn = self._peer(o.dest)
        if conn is None:
            log.error("node %d: no address for node %d", self.node_id, o.dest)
            return

        def on_answer(body: dict | None, rep=rep, o=o) -> None:
            if self._loop is None:
                return
            if body is None:
                self._step(rep, RequestFailed(self.now(), o.dest, o.correlation_id))
            else:
                self._step(rep, Receive(self.now(), o.dest, o.api, body, o.correlation_id, True))

        conn.send(o.api, o.body, on_answer)
