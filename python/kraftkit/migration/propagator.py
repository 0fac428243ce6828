"""The controller-to-broker RPCs of a live ZooKeeper migration (KIP-866): what Kafka 3.9's
``MigrationPropagator`` and its ``ControllerChannelManager`` send to ZooKeeper-mode brokers once a
KRaft controller owns the metadata.

A ZooKeeper-mode broker learns its partitions and the cluster's metadata only from its controller's
``LeaderAndIsr``, ``UpdateMetadata`` and ``StopReplica`` requests. After the takeover the KRaft
controller is that controller, so it sends them itself, built from its metadata image, with its own
node id as ``ControllerId``, ``isKRaftController`` true and, as ``ControllerEpoch``, the ZooKeeper
controller epoch it wrote to ``/controller_epoch`` when it claimed the controller (above every
ZooKeeper controller's, so the brokers take its requests over theirs); each partition state carries
the KRaft epoch of the image's last record, as Kafka's ``MigrationControllerChannelContext`` does.
Every request goes at the version a 3.9 broker speaks for a metadata.version from 3.4
(LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4) with the broker's KRaft registration epoch as
``BrokerEpoch``.

What is sent (Kafka's ``sendRPCsToBrokersFromMetadataImage`` and ``...FromMetadataDelta``):

* **From the image** (:func:`image_batches`, when the driver enters ``MIGRATED``: after the copy,
  after a controller failover, and to a broker whose queue overflowed): one batch with an
  UpdateMetadata of every partition to every live ZooKeeper broker, then a batch of ``Type`` FULL:
  each broker's LeaderAndIsr of every partition it holds a replica of (``IsNew``; the live leaders
  among them), and the UpdateMetadata of those partitions to every live ZooKeeper broker. A
  3.9 broker drops what a FULL request does not name (stray partitions, deleted topics).
* **From a committed change** (:func:`delta_batches`, the image before against the image after):
  brokers registered or changed since get an UpdateMetadata of every partition, the others one of the
  live brokers when any registration changed; then, ``Type`` INCREMENTAL: the new brokers a
  LeaderAndIsr of every partition they hold; each changed partition a LeaderAndIsr to its replicas
  and an UpdateMetadata to every live ZooKeeper broker; a replica moved away a StopReplica with
  ``DeletePartition``; each partition of a deleted topic a StopReplica with ``DeletePartition`` (leader
  epoch -2, Kafka's ``EpochDuringDelete``) to its replicas and an UpdateMetadata with leader -2
  (``LeaderDuringDelete``) to the other brokers.

Within a batch each broker gets its LeaderAndIsr, then its UpdateMetadata, then its StopReplica, as
Kafka's ``sendRequestsToBrokers`` orders them. Live ZooKeeper brokers are those registered with KRaft
as migrating ZooKeeper brokers and not fenced (Kafka's ``ClusterImage.zkBrokers``): only they get
requests. The UpdateMetadata's ``LiveBrokers`` (with every endpoint registered), the LeaderAndIsr's
``LiveLeaders`` and the replicas not offline are every broker registered and not fenced, brokers
restarted in KRaft mode included, so that the ZooKeeper-mode brokers follow and route to them.

The sending (:class:`Propagator`, Kafka's ``ControllerChannelManager``): one connection per live
ZooKeeper broker, to its registered endpoint of the listener ``listener`` (PLAINTEXT unless set),
each with a queue of at most ``max_queued`` requests sent one at a time in order; a request is
sent again on a new connection (after a backoff that doubles up to ``max_backoff_s``) until the
broker answers it, as Kafka's ``RequestSendThread`` does, or the broker leaves. A queue that
overflows is dropped and the broker marked for the full image at the next publication. Every
answer is checked: a top-level or partition error is logged naming the broker, the API and the
partitions (a LeaderAndIsr the broker already applied at that leader epoch answers
``STALE_CONTROLLER_EPOCH`` for those partitions, which is said at info level).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kraftkit.errors import KraftkitError
from kraftkit.metadata.image import MetadataImage
from kraftkit.protocol.messages import ApiKey, Errors, decode_response, encode_request
from kraftkit.raft.framing import FrameError, read_frame, write_frame

__all__ = [
    "FULL",
    "INCREMENTAL",
    "UNKNOWN",
    "Propagator",
    "Request",
    "View",
    "delta_batches",
    "image_batches",
]

log = logging.getLogger(__name__)

#: ``AbstractControlRequest.Type``'s ids (LeaderAndIsr's and UpdateMetadata's ``Type``)
UNKNOWN, INCREMENTAL, FULL = 0, 1, 2
#: the versions Kafka 3.9's controller sends from metadata.version 3.4-IV0 (a migration needs 3.4+)
VERSIONS: dict[int, int] = {ApiKey.LEADER_AND_ISR: 7, ApiKey.UPDATE_METADATA: 8, ApiKey.STOP_REPLICA: 4}
#: Kafka's ``LeaderAndIsr.LeaderDuringDelete`` and ``EpochDuringDelete``
LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2
#: the send order of one batch's requests to one broker (``sendRequestsToBrokers``)
_ORDER: dict[int, int] = {ApiKey.LEADER_AND_ISR: 0, ApiKey.UPDATE_METADATA: 1, ApiKey.STOP_REPLICA: 2}
_NAMES: dict[int, str] = {
    ApiKey.LEADER_AND_ISR: "LeaderAndIsr",
    ApiKey.UPDATE_METADATA: "UpdateMetadata",
    ApiKey.STOP_REPLICA: "StopReplica",
}


@dataclass(frozen=True)
class View:
    """What the requests are built from: the image's brokers and topics (the image's own read-only
    views, kept by reference: an image builds new ones when it changes) and the KRaft epoch of its
    last record."""

    brokers: dict[int, dict[str, Any]]
    topics: dict[uuid.UUID, Any]  # topic id -> metadata.image.Topic
    epoch: int

    @classmethod
    def of(cls, image: MetadataImage) -> View:
        return cls(image.brokers, image.topics, image.provenance.epoch)

    @classmethod
    def empty(cls) -> View:
        return cls({}, {}, -1)

    def zk_brokers(self) -> dict[int, dict[str, Any]]:
        """The live ZooKeeper brokers: registered as migrating, not fenced (``zkBrokers``)."""
        return {b: r for b, r in self.brokers.items() if r.get("IsMigratingZkBroker") and not r.get("Fenced")}

    def live_brokers(self) -> dict[int, dict[str, Any]]:
        """Every live broker, ZooKeeper-mode or restarted in KRaft mode (registered, not fenced): what
        the requests name as live (Kafka's ``MigrationControllerChannelContext`` names every
        registered broker), so that the ZooKeeper-mode brokers reach the KRaft ones."""
        return {b: r for b, r in self.brokers.items() if not r.get("Fenced")}


@dataclass(frozen=True)
class Request:
    """One request to one broker: its API (an ``ApiKey``) and body (the schema's field names)."""

    broker: int
    api: int
    body: dict[str, Any]

    @property
    def name(self) -> str:
        return _NAMES.get(self.api, str(self.api))

    @property
    def version(self) -> int:
        return VERSIONS[self.api]


@dataclass
class _Batch:
    """Kafka's ``AbstractControllerBrokerRequestBatch``: requests gathered, then built per broker."""

    view: View
    controller_id: int
    zk_epoch: int
    listener: str
    type: int = UNKNOWN
    #: broker -> (topic, partition) -> LeaderAndIsr partition state
    lisr: dict[int, dict[tuple[str, int], dict[str, Any]]] = field(default_factory=dict)
    #: the brokers an UpdateMetadata goes to, and its partition states by (topic, partition)
    umr_brokers: set[int] = field(default_factory=set)
    umr: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    #: broker -> (topic, partition) -> StopReplica partition state
    stop: dict[int, dict[tuple[str, int], dict[str, Any]]] = field(default_factory=dict)

    def live(self) -> dict[int, dict[str, Any]]:
        return self.view.zk_brokers()

    def known(self) -> dict[int, dict[str, Any]]:
        return self.view.live_brokers()

    def add_leader_and_isr(self, brokers: Iterable[int], topic: str, p: int, part: dict[str, Any]) -> None:
        """``addLeaderAndIsrRequestForBrokers`` (``isNew`` true, as the propagator always asks): and
        the partition's UpdateMetadata to every live broker."""
        state = {
            "PartitionIndex": p,
            "ControllerEpoch": self.view.epoch,
            "Leader": part["Leader"],
            "LeaderEpoch": part["LeaderEpoch"],
            "Isr": list(part["Isr"]),
            "PartitionEpoch": part["PartitionEpoch"],
            "Replicas": list(part["Replicas"]),
            "AddingReplicas": list(part.get("AddingReplicas") or []),
            "RemovingReplicas": list(part.get("RemovingReplicas") or []),
            "IsNew": True,
            "LeaderRecoveryState": part.get("LeaderRecoveryState", 0),
        }
        for b in brokers:
            if b >= 0:
                self.lisr.setdefault(b, {})[(topic, p)] = state
        self.add_update_metadata(self.live(), [(topic, p, part)])

    def add_update_metadata(
        self, brokers: Iterable[int], partitions: Iterable[tuple[str, int, dict[str, Any]]] = ()
    ) -> None:
        """``addUpdateMetadataRequestForBrokers``: ``brokers`` get the batch's UpdateMetadata, which
        carries ``partitions`` (topic, partition, its PartitionRecord-shaped state)."""
        self.umr_brokers.update(b for b in brokers if b >= 0)
        live = self.known()
        for topic, p, part in partitions:
            replicas = list(part["Replicas"])
            self.umr[(topic, p)] = {
                "PartitionIndex": p,
                "ControllerEpoch": self.view.epoch,
                "Leader": part["Leader"],
                "LeaderEpoch": part["LeaderEpoch"],
                "Isr": list(part["Isr"]),
                "ZkVersion": part["PartitionEpoch"],
                "Replicas": replicas,
                "OfflineReplicas": [r for r in replicas if r not in live],
            }

    def add_deleted(self, brokers: Iterable[int], topic: str, p: int, part: dict[str, Any]) -> None:
        """A partition of a deleted topic in the UpdateMetadata to ``brokers``: leader -2, leader
        and partition epochs 0 (``LeaderAndIsr.duringDelete``)."""
        self.add_update_metadata(
            brokers,
            [(topic, p, {**part, "Leader": LEADER_DURING_DELETE, "LeaderEpoch": 0, "PartitionEpoch": 0})],
        )

    def add_stop_replica(self, brokers: Iterable[int], topic: str, p: int, leader_epoch: int, delete: bool) -> None:
        """``addStopReplicaRequestForBrokers`` (a delete already asked for stays asked for)."""
        for b in brokers:
            if b < 0:
                continue
            states = self.stop.setdefault(b, {})
            before = states.get((topic, p))
            states[(topic, p)] = {
                "PartitionIndex": p,
                "LeaderEpoch": leader_epoch,
                "DeletePartition": delete or bool(before and before["DeletePartition"]),
            }

    # ------------------------------------------------------------------ building
    def _common(self, broker: int) -> dict[str, Any]:
        return {
            "ControllerId": self.controller_id,
            "isKRaftController": True,
            "ControllerEpoch": self.zk_epoch,
            "BrokerEpoch": self.live()[broker].get("BrokerEpoch", -1),
        }

    def _topic_ids(self) -> dict[str, uuid.UUID]:
        return {t.name: tid for tid, t in self.view.topics.items()}

    def requests(self) -> list[Request]:
        """``sendRequestsToBrokers``: the batch's requests to live brokers, broker by broker in
        Kafka's order (LeaderAndIsr, UpdateMetadata, StopReplica)."""
        live, known = self.live(), self.known()
        ids = self._topic_ids()
        out: list[Request] = []
        for b, states in sorted(self.lisr.items()):
            if b not in live:
                continue
            leaders = sorted({s["Leader"] for s in states.values()} & set(known))
            out.append(
                Request(
                    b,
                    ApiKey.LEADER_AND_ISR,
                    {
                        **self._common(b),
                        "Type": self.type,
                        "TopicStates": [
                            {"TopicName": t, "TopicId": ids.get(t, uuid.UUID(int=0)), "PartitionStates": parts}
                            for t, parts in _by_topic(states)
                        ],
                        "LiveLeaders": [{"BrokerId": x, **_host_port(known[x], self.listener)} for x in leaders],
                    },
                )
            )
        if self.umr_brokers:
            topic_states = [
                {"TopicName": t, "TopicId": ids.get(t, uuid.UUID(int=0)), "PartitionStates": parts}
                for t, parts in _by_topic(self.umr)
            ]
            live_brokers = [
                {
                    "Id": x,
                    "Endpoints": [
                        {
                            "Port": e["Port"],
                            "Host": e["Host"],
                            "Listener": e["Name"],
                            "SecurityProtocol": e["SecurityProtocol"],
                        }
                        for e in reg.get("EndPoints") or []
                    ],
                    "Rack": reg.get("Rack"),
                }
                for x, reg in sorted(known.items())
            ]
            for b in sorted(self.umr_brokers & set(live)):
                out.append(
                    Request(
                        b,
                        ApiKey.UPDATE_METADATA,
                        {
                            **self._common(b),
                            "Type": self.type,
                            "TopicStates": topic_states,
                            "LiveBrokers": live_brokers,
                        },
                    )
                )
        for b, states in sorted(self.stop.items()):
            if b not in live:
                continue
            out.append(
                Request(
                    b,
                    ApiKey.STOP_REPLICA,
                    {
                        **self._common(b),
                        "TopicStates": [{"TopicName": t, "PartitionStates": parts} for t, parts in _by_topic(states)],
                    },
                )
            )
        out.sort(key=lambda r: (r.broker, _ORDER[r.api]))
        return out


def _by_topic(states: dict[tuple[str, int], dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, _p), s in sorted(states.items()):
        topics.setdefault(t, []).append(s)
    return list(topics.items())


def _endpoint(reg: dict[str, Any], listener: str) -> dict[str, Any] | None:
    """The broker's endpoint of ``listener``; else its first PLAINTEXT one (security protocol 0)."""
    eps = reg.get("EndPoints") or []
    for e in eps:
        if e.get("Name") == listener:
            return e
    for e in eps:
        if e.get("SecurityProtocol") == 0:
            return e
    return None


def _host_port(reg: dict[str, Any], listener: str) -> dict[str, Any]:
    e = _endpoint(reg, listener)
    return {"HostName": e["Host"], "Port": e["Port"]} if e else {"HostName": "", "Port": -1}


def _partitions(view: View) -> list[tuple[str, int, dict[str, Any]]]:
    return [(t.name, p, part) for t in view.topics.values() for p, part in sorted(t.partitions.items())]


def image_batches(
    view: View, controller_id: int, zk_epoch: int, *, listener: str = "PLAINTEXT", brokers: Iterable[int] | None = None
) -> list[list[Request]]:
    """``sendRPCsToBrokersFromMetadataImage``: the full metadata to the live ZooKeeper brokers (or
    to those of ``brokers`` that are live): an UpdateMetadata of every partition, then the FULL batch
    of LeaderAndIsr (each broker its replicas) with their UpdateMetadata."""
    live = view.zk_brokers()
    to = sorted(live if brokers is None else set(brokers) & set(live))
    parts = _partitions(view)
    first = _Batch(view, controller_id, zk_epoch, listener)
    first.add_update_metadata(to, parts)
    second = _Batch(view, controller_id, zk_epoch, listener, type=FULL)
    for topic, p, part in parts:
        second.add_leader_and_isr([r for r in part["Replicas"] if r in to], topic, p, part)
    if brokers is not None:  # (a resync of some brokers: the others heard it all already)
        second.umr_brokers &= set(to)
    return [first.requests(), second.requests()]


def delta_batches(
    before: View, after: View, controller_id: int, zk_epoch: int, *, listener: str = "PLAINTEXT"
) -> list[list[Request]]:
    """``sendRPCsToBrokersFromMetadataDelta``: what the change from ``before`` to ``after`` makes
    the ZooKeeper brokers hear."""
    live = after.zk_brokers()
    changed_regs = {b for b, r in after.brokers.items() if before.brokers.get(b) != r}
    gone = set(before.brokers) - set(after.brokers)
    new_zk = {b for b in changed_regs if b in live}
    old_zk = {b for b, r in after.brokers.items() if r.get("IsMigratingZkBroker")} - new_zk
    parts = _partitions(after)
    first = _Batch(after, controller_id, zk_epoch, listener)
    if new_zk:
        first.add_update_metadata(new_zk, parts)
    if changed_regs or gone:
        first.add_update_metadata(old_zk)
    second = _Batch(after, controller_id, zk_epoch, listener, type=INCREMENTAL)
    if new_zk:
        for topic, p, part in parts:
            holders = [r for r in part["Replicas"] if r in new_zk]
            if holders:
                second.add_leader_and_isr(holders, topic, p, part)
    deleted = [t for tid, t in before.topics.items() if tid not in after.topics]
    changed: list[tuple[Any, list[int]]] = []
    for tid, t in after.topics.items():
        old = before.topics.get(tid)
        ps = [p for p, part in t.partitions.items() if old is None or old.partitions.get(p) != part]
        if ps:
            changed.append((t, sorted(ps)))
    if deleted or changed:
        second.add_update_metadata(old_zk)
    for t in deleted:
        for p, part in sorted(t.partitions.items()):
            second.add_stop_replica(part["Replicas"], t.name, p, EPOCH_DURING_DELETE, True)
            second.add_deleted(old_zk, t.name, p, part)
    for t, ps in changed:
        old = before.topics.get(t.id)
        for p in ps:
            part = t.partitions[p]
            second.add_leader_and_isr(part["Replicas"], t.name, p, part)
            was = old.partitions.get(p) if old is not None else None
            removed = sorted(set(was["Replicas"]) - set(part["Replicas"])) if was else []
            if removed:
                second.add_stop_replica(removed, t.name, p, part["LeaderEpoch"], True)
    return [first.requests(), second.requests()]


# ---------------------------------------------------------------------------------------- sending


class _Unsendable(Exception):
    """A request the codec refuses to encode (never sent: dropped with the reason)."""


class _Channel:
    """One broker's connection and queue (``RequestSendThread``): requests sent one at a time, in
    order, each until answered."""

    def __init__(self, owner: Propagator, broker: int, host: str, port: int) -> None:
        self.owner = owner
        self.broker = broker
        self.address = (host, port)
        self.queue: collections.deque[Request] = collections.deque()
        self.wake = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"zk-broker-{broker}")
        self._ids = itertools.count(1)

    def put(self, req: Request) -> bool:
        if len(self.queue) >= self.owner.max_queued:
            return False
        self.queue.append(req)
        self.wake.set()
        return True

    async def close(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except (asyncio.CancelledError, Exception):
            pass

    async def _run(self) -> None:
        backoff = self.owner.backoff_s
        writer: asyncio.StreamWriter | None = None
        reader: asyncio.StreamReader | None = None
        try:
            while True:
                if not self.queue:
                    self.wake.clear()
                    await self.wake.wait()
                    continue
                req = self.queue[0]
                try:
                    if writer is None:
                        reader, writer = await asyncio.wait_for(
                            asyncio.open_connection(*self.address), self.owner.timeout_s
                        )
                    assert reader is not None and writer is not None
                    body = await asyncio.wait_for(self._exchange(reader, writer, req), self.owner.timeout_s)
                except _Unsendable as e:
                    log.error(
                        "ZK migration: broker %d: %s not sent: the codec refuses it: %s", self.broker, req.name, e
                    )
                    if self.queue and self.queue[0] is req:
                        self.queue.popleft()
                    continue
                except (OSError, TimeoutError, FrameError, KraftkitError, asyncio.IncompleteReadError) as e:
                    what = "cannot connect" if writer is None else "connection lost"
                    log.warning(
                        "ZK migration: broker %d at %s:%d: %s sending %s: %s; retrying in %.2g s",
                        self.broker,
                        *self.address,
                        what,
                        req.name,
                        type(e).__name__ + (f": {e}" if str(e) else ""),
                        backoff,
                    )
                    if writer is not None:
                        writer.close()
                    reader = writer = None
                    await asyncio.sleep(backoff)
                    backoff = min(self.owner.max_backoff_s, backoff * 2)
                    continue
                backoff = self.owner.backoff_s
                if self.queue and self.queue[0] is req:
                    self.queue.popleft()
                self.owner._answered(req, body)
        finally:
            if writer is not None:
                writer.close()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: Request) -> dict:
        cid = next(self._ids) & 0x7FFFFFFF
        try:
            payload = encode_request(req.api, req.version, cid, self.owner.client_id, req.body)
        except (KraftkitError, ValueError, TypeError, OverflowError) as e:
            raise _Unsendable(str(e)) from None
        write_frame(writer, payload)
        await writer.drain()
        frame = await read_frame(reader)
        if frame is None:
            raise FrameError("the broker closed the connection")
        got, body = decode_response(req.api, req.version, frame)
        if got != cid:
            raise FrameError(f"answer to correlation id {got}, not {cid}")
        return body


class Propagator:
    """The ZooKeeper brokers' channels of one active controller (see the module docstring).

    :meth:`publish_image` sends the full metadata; :meth:`publish_delta` what changed since the last
    publication; :meth:`close` drops every channel. All on the event loop; nothing blocks."""

    def __init__(
        self,
        controller_id: int,
        *,
        listener: str = "PLAINTEXT",
        max_queued: int = 1000,
        timeout_s: float = 30.0,
        backoff_s: float = 0.1,
        max_backoff_s: float = 5.0,
        client_id: str | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.listener = listener
        self.max_queued = max_queued
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.client_id = client_id or f"kraftkit-controller-{controller_id}"
        self.view = View.empty()
        self.zk_epoch = -1
        self.channels: dict[int, _Channel] = {}
        #: brokers whose queue overflowed: they get the full image at the next publication
        self.resync: set[int] = set()
        #: requests answered, by (broker, API name), and those answered with an error
        self.answered: collections.Counter[tuple[int, str]] = collections.Counter()
        self.errors: collections.Counter[tuple[int, str]] = collections.Counter()
        self._closing: set[asyncio.Task] = set()

    # ------------------------------------------------------------------ publishing
    def publish_image(self, image: MetadataImage, zk_epoch: int) -> None:
        """The full metadata to every live ZooKeeper broker (after a takeover or a failover)."""
        view = View.of(image)
        self._brokers(view)
        self.view, self.zk_epoch = view, zk_epoch
        self.resync.clear()
        self._enqueue(image_batches(view, self.controller_id, zk_epoch, listener=self.listener))

    def publish_delta(self, image: MetadataImage, zk_epoch: int) -> None:
        """What changed since the last publication (nothing when nothing did)."""
        view = View.of(image)
        if view.brokers is self.view.brokers and view.topics is self.view.topics and zk_epoch == self.zk_epoch:
            return
        before = self.view
        self._brokers(view)
        self.view, self.zk_epoch = view, zk_epoch
        batches = delta_batches(before, view, self.controller_id, zk_epoch, listener=self.listener)
        if self.resync:
            again, self.resync = set(self.resync), set()
            batches = [[r for r in b if r.broker not in again] for b in batches]
            batches += image_batches(view, self.controller_id, zk_epoch, listener=self.listener, brokers=again)
        self._enqueue(batches)

    async def close(self) -> None:
        channels, self.channels = self.channels, {}
        for ch in channels.values():
            await ch.close()
        for task in list(self._closing):
            await task
        self.view = View.empty()
        self.resync.clear()

    # ------------------------------------------------------------------ internals
    def _brokers(self, view: View) -> None:
        """``publishMetadata``: a channel for each live ZooKeeper broker, none for the others."""
        live = view.zk_brokers()
        for b in sorted(set(self.channels) - set(live)):
            ch = self.channels.pop(b)
            log.info("ZK migration: broker %d is no longer a live ZooKeeper broker: its channel is closed", b)
            self._close_later(ch)
        for b, reg in sorted(live.items()):
            e = _endpoint(reg, self.listener)
            old = self.channels.get(b)
            if old is not None and (e is None or old.address != (e["Host"], e["Port"])):
                self.channels.pop(b)
                self._close_later(old)
                old = None
            if old is None:
                if e is None:
                    log.error(
                        "ZK migration: broker %d registered no %s endpoint nor a PLAINTEXT one (%s): the controller "
                        "cannot send it LeaderAndIsr, UpdateMetadata or StopReplica",
                        b,
                        self.listener,
                        [x.get("Name") for x in reg.get("EndPoints") or []],
                    )
                    continue
                self.channels[b] = _Channel(self, b, e["Host"], e["Port"])
                log.info("ZK migration: channel to ZooKeeper broker %d at %s:%d", b, e["Host"], e["Port"])

    def _close_later(self, ch: _Channel) -> None:
        task = asyncio.get_running_loop().create_task(ch.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _enqueue(self, batches: list[list[Request]]) -> None:
        for batch in batches:
            for req in batch:
                if req.broker in self.resync:
                    continue
                ch = self.channels.get(req.broker)
                if ch is None:
                    continue
                if not ch.put(req):
                    ch.queue.clear()
                    self.resync.add(req.broker)
                    log.error(
                        "ZK migration: broker %d: more than %d requests queued (it does not answer fast enough): "
                        "the queue is dropped and the broker gets the full metadata at the next change",
                        req.broker,
                        self.max_queued,
                    )

    def _answered(self, req: Request, body: dict[str, Any]) -> None:
        self.answered[(req.broker, req.name)] += 1
        errors = _errors(req, body)
        if req.body.get("Type") == FULL and not body.get("ErrorCode"):
            log.info(
                "ZK migration: broker %d took the full %s (%d partitions) from controller %d, ZooKeeper controller "
                "epoch %d",
                req.broker,
                req.name,
                sum(len(t["PartitionStates"]) for t in req.body["TopicStates"]),
                req.body["ControllerId"],
                req.body["ControllerEpoch"],
            )
        if not errors:
            return
        self.errors[(req.broker, req.name)] += 1
        stale = [x for x in errors if x[1] == Errors.STALE_CONTROLLER_EPOCH and x[0] != "*"]
        other = [x for x in errors if x not in stale]
        if stale and req.api == ApiKey.LEADER_AND_ISR:
            log.info(
                "ZK migration: broker %d: LeaderAndIsr: %d partitions already at their leader epoch (%s)",
                req.broker,
                len(stale),
                _said(stale),
            )
        elif stale:
            other = errors
        if other:
            log.error(
                "ZK migration: broker %d answered %s v%d with errors: %s",
                req.broker,
                req.name,
                req.version,
                _said(other),
            )


def _errors(req: Request, body: dict[str, Any]) -> list[tuple[str, int]]:
    """The errors of an answer: ("*", code) for the top-level one, ("topic-p", code) per partition."""
    out: list[tuple[str, int]] = []
    top = body.get("ErrorCode", 0)
    if top:
        out.append(("*", top))
    if req.api == ApiKey.LEADER_AND_ISR:
        names = {t["TopicId"]: t["TopicName"] for t in req.body.get("TopicStates", [])}
        for t in body.get("Topics") or []:
            name = names.get(t.get("TopicId"), str(t.get("TopicId")))
            out += [
                (f"{name}-{p['PartitionIndex']}", p["ErrorCode"])
                for p in t.get("PartitionErrors") or []
                if p.get("ErrorCode")
            ]
    elif req.api == ApiKey.STOP_REPLICA:
        out += [
            (f"{p['TopicName']}-{p['PartitionIndex']}", p["ErrorCode"])
            for p in body.get("PartitionErrors") or []
            if p.get("ErrorCode")
        ]
    return out


def _said(errors: list[tuple[str, int]], most: int = 10) -> str:
    def name(code: int) -> str:
        try:
            return Errors(code).name
        except ValueError:
            return f"error {code}"

    shown = ", ".join(f"{'top level' if w == '*' else w}: {name(c)}" for w, c in errors[:most])
    return shown + (f" and {len(errors) - most} more" if len(errors) > most else "")
