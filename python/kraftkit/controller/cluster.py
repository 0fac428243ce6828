"""Kafka's ``ClusterControlManager`` and ``BrokerHeartbeatManager`` for kraftkit's controller: who
is registered, their sessions, and the registration RPCs turned into the records Kafka writes.

What the committed log says (registrations, fencing, controlled shutdown) is in the metadata image
the raft state machine keeps; this manager adds what the image does not hold: the offset of each
broker's RegisterBrokerRecord (a broker is unfenced only once it has caught up to it) and, on the
active controller only, each broker's session (last contact, reported metadata offset, controlled
shutdown offset), which a new active controller starts afresh, as Kafka's does.

The rules are Kafka 4.4's:

* **BrokerRegistration**: the cluster id must match (INCONSISTENT_CLUSTER_ID); a broker id whose
  current registration still has a live session and another incarnation id is refused
  (DUPLICATE_BROKER_REGISTRATION); from metadata.version 3.7-IV2 (directory assignment) the log
  directories must be given, not reserved, not repeated and not another broker's
  (INVALID_REGISTRATION); metadata.version must be among the features; every finalized feature
  level (and kraft.version) must be inside the broker's range, a feature it does not list counting
  as (0, 0) (UNSUPPORTED_VERSION). A new incarnation gets a new broker epoch, the offset its
  records are written at; the same incarnation keeps its epoch, fencing and shutdown state.
  A ZooKeeper-mode broker (``IsMigratingZkBroker``, KIP-866) registers only when the controller runs
  the migration (``zookeeper.metadata.migration.enable``) at a metadata.version that supports it,
  and a KRaft broker not while the migration state is PRE_MIGRATION (both BROKER_ID_NOT_REGISTERED,
  as Kafka 3.9's ``ClusterControlManager.registerBroker``); beyond Kafka, a ZooKeeper-mode broker
  never once the migration is finalized (POST_MIGRATION: a rollback is too late, and it says so).
  A KRaft broker restarted with a ZooKeeper-mode broker's id during MIGRATION replaces its
  registration (no longer ``IsMigratingZkBroker``).
* **BrokerHeartbeat** (Kafka's ``calculateNextBrokerState``): a fenced broker unfences once its
  metadata offset reached its registration and it does not ask to stay fenced, or is told to shut
  down at once if it asks (its fencing is written again, as Kafka's is); an unfenced broker that asks
  to be fenced is; one that asks to shut down while it leads partitions enters controlled shutdown
  (its leaderships move first) and is told to shut down once it leads none and every active broker
  has caught up to the end of that change; one that leads none shuts down at once. The partition
  records of each change come from :class:`~kraftkit.controller.partitions.PartitionControlManager`.
  A broker whose last heartbeat at its epoch is older than ``broker.session.timeout.ms`` is fenced,
  one at a time, as Kafka's ``maybeFenceOneStaleBroker`` does, even if it is fenced already: Kafka's
  ``BrokerHeartbeatTracker`` times every broker that heartbeats, and an unfenced broker from the
  controller's activation on; a new registration, a fenced broker at the activation and a broker
  whose expiry was handled have no live session until they heartbeat. From 3.7-IV2 a heartbeat
  naming failed log directories moves the replicas in them.
* **UnregisterBroker**: BROKER_ID_NOT_REGISTERED for an unknown id, else an UnregisterBrokerRecord.
* **ControllerRegistration**: from metadata.version 3.7-IV0 a RegisterControllerRecord (else
  UNSUPPORTED_VERSION), with the controller's listeners and supported features.

Fencing and unfencing are BrokerRegistrationChangeRecords from metadata.version 3.3-IV2 on, and
Fence/UnfenceBrokerRecords before, each at the version the finalized metadata.version writes.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from kraftkit._core import decode_metadata_record, encode_metadata_record
from kraftkit._kafka import (
    BROKER_REGISTRATION_CHANGE,
    FENCE_BROKER,
    REGISTER_BROKER,
    REGISTER_CONTROLLER,
    UNFENCE_BROKER,
    UNREGISTER_BROKER,
)
from kraftkit.controller.bootstrap import POST_MIGRATION, PRE_MIGRATION
from kraftkit.features.registry import MV_FEATURE, registry
from kraftkit.features.rewrite import record_versions
from kraftkit.metadata.image import MetadataImage
from kraftkit.protocol.messages import Errors

__all__ = ["BrokerSession", "ClusterControlManager", "ControllerError", "HeartbeatReply"]

log = logging.getLogger(__name__)

KRAFT_VERSION_FEATURE = "kraft.version"
#: how many listeners, features or log directories one registration may list
MAX_REGISTRATION_ENTRIES = 1000
#: the records that change a broker's registration
BROKER_RECORDS = frozenset(
    (REGISTER_BROKER, UNREGISTER_BROKER, FENCE_BROKER, UNFENCE_BROKER, BROKER_REGISTRATION_CHANGE)
)
#: BrokerRegistrationChangeRecord's Fenced values (Kafka's BrokerRegistrationFencingChange)
FENCE, UNFENCE = 1, -1
#: and its InControlledShutdown value (BrokerRegistrationInControlledShutdownChange)
IN_CONTROLLED_SHUTDOWN = 1
#: Java's Long.MAX_VALUE: the lowest active offset when no other broker is active
LONG_MAX = 2**63 - 1


#: a broker's state on the active controller (Kafka's BrokerControlState)
FENCED, UNFENCED, CONTROLLED_SHUTDOWN, SHUTDOWN_NOW = "FENCED", "UNFENCED", "CONTROLLED_SHUTDOWN", "SHUTDOWN_NOW"


class ControllerError(Exception):
    """A request the controller refuses: Kafka's error code and the message its exception carries."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class BrokerSession:
    """One broker's session on the active controller (Kafka's ``BrokerHeartbeatState``)."""

    broker_id: int
    epoch: int
    fenced: bool
    #: monotonic seconds of its last heartbeat at this epoch; None: none since its registration, the
    #: activation (a fenced broker) or the fencing of its expired session (Kafka's BrokerHeartbeatTracker
    #: holds no entry for it: its session is not live and cannot expire)
    last_contact: float | None
    metadata_offset: int = -1
    controlled_shutdown_offset: int = -1  # the offset at which its controlled shutdown completes

    @property
    def shutting_down(self) -> bool:
        return self.controlled_shutdown_offset >= 0


class HeartbeatReply(NamedTuple):
    """A BrokerHeartbeat's answer (a tuple: made on every heartbeat)."""

    is_caught_up: bool
    is_fenced: bool
    in_controlled_shutdown: bool
    should_shut_down: bool


class BrokerChanges(Protocol):
    """The records of a broker's change of state, its partitions included
    (:class:`~kraftkit.controller.partitions.PartitionControlManager`)."""

    def broker_fenced(self, image: MetadataImage, bid: int) -> list[bytes]: ...

    def broker_unfenced(self, image: MetadataImage, bid: int, epoch: int) -> list[bytes]: ...

    def broker_in_controlled_shutdown(self, image: MetadataImage, bid: int, epoch: int) -> list[bytes]: ...

    def broker_shutdown(self, image: MetadataImage, bid: int, clean: bool) -> list[bytes]: ...

    def has_leaderships(self, image: MetadataImage, bid: int) -> bool: ...

    def directories_offline(self, image: MetadataImage, bid: int, epoch: int, dirs: list[uuid.UUID]) -> list[bytes]: ...


class _NoPartitions:
    """:class:`BrokerChanges` of a cluster without partitions: the registration records alone."""

    def __init__(self, cluster: ClusterControlManager) -> None:
        self.cluster = cluster

    def broker_fenced(self, image: MetadataImage, bid: int) -> list[bytes]:
        return self.cluster.fence_records(image, bid)

    def broker_unfenced(self, image: MetadataImage, bid: int, epoch: int) -> list[bytes]:
        return self.cluster.unfence_records(image, bid, epoch)

    def broker_in_controlled_shutdown(self, image: MetadataImage, bid: int, epoch: int) -> list[bytes]:
        return []

    def broker_shutdown(self, image: MetadataImage, bid: int, clean: bool) -> list[bytes]:
        return []

    def has_leaderships(self, image: MetadataImage, bid: int) -> bool:
        return False

    def directories_offline(self, image: MetadataImage, bid: int, epoch: int, dirs: list[uuid.UUID]) -> list[bytes]:
        return []


def _is_type(value: bytes | None, api_key: int) -> bool:
    """A framed metadata record of api key ``api_key`` (< 128: one varint byte after the frame version)."""
    return value is not None and len(value) > 1 and value[1] == api_key


class ClusterControlManager:
    """The registrations of one controller node; ``activate``/``deactivate`` as it becomes or stops
    being the active controller (sessions exist only while active)."""

    def __init__(self, cluster_id: str, session_timeout_ms: int, *, zk_migration: bool = False) -> None:
        self.cluster_id = cluster_id
        #: ``zookeeper.metadata.migration.enable``: ZooKeeper-mode brokers may register (KIP-866)
        self.zk_migration = zk_migration
        self.session_timeout = session_timeout_ms / 1000
        #: broker id -> the offset of its current RegisterBrokerRecord
        self.register_offsets: dict[int, int] = {}
        #: broker id -> what the committed log says of its registration (BrokerEpoch, IncarnationId,
        #: Fenced, InControlledShutdown, LogDirs, as the image's brokers hold them), kept here so a
        #: heartbeat costs no rebuild of the image's view of every broker (Kafka's brokerRegistrations)
        self.brokers: dict[int, dict] = {}
        #: log directory -> the broker registered with it (Kafka's directoryToBroker)
        self.directory_owner: dict[uuid.UUID, int] = {}
        #: broker id -> session, on the active controller (None: not active)
        self.sessions: dict[int, BrokerSession] | None = None

    # ------------------------------------------------------------------ what was committed
    def replay(self, value: bytes, offset: int) -> None:
        """Replays one committed record of :data:`BROKER_RECORDS` (framed ``value``; the image replayed it too)."""
        api, _v, data = decode_metadata_record(value)
        if api in (FENCE_BROKER, UNFENCE_BROKER, BROKER_REGISTRATION_CHANGE):
            reg = self.brokers.get(data["BrokerId"] if "BrokerId" in data else data["Id"])
            if reg is None:
                return
            fenced = {FENCE_BROKER: FENCE, UNFENCE_BROKER: UNFENCE}.get(api, data.get("Fenced", 0))
            if fenced:
                reg["Fenced"] = fenced == FENCE
            if data.get("InControlledShutdown") == IN_CONTROLLED_SHUTDOWN:
                reg["InControlledShutdown"] = True
            if data.get("LogDirs"):
                self._set_directories(reg["BrokerId"], reg, list(data["LogDirs"]))
            return
        bid = data["BrokerId"]
        if api == REGISTER_BROKER:
            prev = self.brokers.get(bid)
            reg = _registration(data, prev["LogDirs"] if prev else [])
            self.brokers[bid] = reg
            self._set_directories(bid, reg, list(data.get("LogDirs") or []))
            self.register_offsets[bid] = offset
            if self.sessions is not None:
                old = self.sessions.get(bid)
                if old is None or old.epoch != data["BrokerEpoch"] or old.fenced != data["Fenced"]:
                    self._register_session(bid, data["BrokerEpoch"], data["Fenced"], old, None)
        else:
            self.register_offsets.pop(bid, None)
            reg = self.brokers.pop(bid, None)
            if reg is not None:
                self._set_directories(bid, reg, [])
            if self.sessions is not None:
                self.sessions.pop(bid, None)

    def _set_directories(self, bid: int, reg: dict, dirs: list[uuid.UUID]) -> None:
        for d in reg["LogDirs"]:
            if self.directory_owner.get(d) == bid:
                del self.directory_owner[d]
        reg["LogDirs"] = dirs
        for d in dirs:
            self.directory_owner[d] = bid

    def load_snapshot(self, image: MetadataImage, end_offset: int) -> None:
        """A snapshot replaced the image: its registrations stand as of its last offset (as Kafka
        replays a snapshot's records at that offset)."""
        self.register_offsets = {bid: end_offset - 1 for bid in image.brokers}
        self.brokers, self.directory_owner = {}, {}
        for bid, b in image.brokers.items():
            reg = self.brokers[bid] = _registration(b, [])
            self._set_directories(bid, reg, list(b.get("LogDirs") or []))

    # ------------------------------------------------------------------ sessions
    @staticmethod
    def now() -> float:
        return time.monotonic()

    def mark_fenced(self, bid: int) -> None:
        """The session of ``bid`` expired: it is fenced (its fencing is being written) and its
        session ends until it heartbeats again (Kafka's ``maybeRemoveExpired`` drops its entry)."""
        s = (self.sessions or {}).get(bid)
        if s is not None:
            s.fenced = True
            s.controlled_shutdown_offset = -1
            s.last_contact = None

    def contacted(self, bid: int, epoch: int) -> None:
        """A heartbeat of ``bid`` at ``epoch`` arrived: its live session's contact time is now, before
        the heartbeat waits its turn behind other writes (Kafka's ``BrokerHeartbeatTracker``, updated
        as a heartbeat is received), so a write that holds the queue long (the ZooKeeper migration's
        copy) does not expire the sessions of brokers that kept heartbeating."""
        s = (self.sessions or {}).get(bid)
        if s is not None and s.epoch == epoch and s.last_contact is not None:
            s.last_contact = self.now()

    def _register_session(
        self, bid: int, epoch: int, fenced: bool, old: BrokerSession | None, contact: float | None
    ) -> None:
        assert self.sessions is not None
        s = BrokerSession(bid, epoch, fenced, contact)
        if old is not None and old.epoch == epoch:
            s.metadata_offset = old.metadata_offset
            s.last_contact = old.last_contact  # (Kafka tracks contacts by broker id and epoch)
        self.sessions[bid] = s

    def activate(self, image: MetadataImage) -> None:
        """This node became the active controller: every registered broker gets a fresh session,
        live from now on for an unfenced broker (Kafka's ``ClusterControlManager.activate``)."""
        self.sessions = {}
        now = self.now()
        for bid, b in self.brokers.items():
            self._register_session(bid, b["BrokerEpoch"], b["Fenced"], None, None if b["Fenced"] else now)

    def deactivate(self) -> None:
        self.sessions = None

    def has_valid_session(self, bid: int, epoch: int) -> bool:
        s = (self.sessions or {}).get(bid)
        return (
            s is not None
            and s.epoch == epoch
            and s.last_contact is not None
            and self.now() - s.last_contact <= self.session_timeout
        )

    def _contacts(self) -> list[tuple[float, int]]:
        return [(s.last_contact, s.broker_id) for s in (self.sessions or {}).values() if s.last_contact is not None]

    def next_expiry(self) -> float | None:
        """When the oldest live session expires (monotonic seconds), if any is live."""
        contacts = self._contacts()
        return min(contacts)[0] + self.session_timeout if contacts else None

    def stale_broker(self) -> int | None:
        """The broker whose session expired longest ago, if any: fenced or not, as Kafka's
        ``maybeFenceOneStaleBroker`` fences (again) any broker whose heartbeats stopped."""
        now = self.now()
        stale = [(at, bid) for at, bid in self._contacts() if now - at > self.session_timeout]
        return min(stale)[1] if stale else None

    # ------------------------------------------------------------------ records
    @staticmethod
    def _mv(image: MetadataImage):
        level = image.metadata_version
        if level is None:
            raise ControllerError(Errors.NOT_CONTROLLER, "the metadata log holds no metadata.version yet")
        return registry().metadata_version(level)

    def fence_records(self, image: MetadataImage, bid: int) -> list[bytes]:
        """The records fencing broker ``bid`` (Kafka's ``handleBrokerFenced``, without moving the
        leadership of its partitions: a later step of the controller)."""
        mv = self._mv(image)
        epoch = self.brokers[bid]["BrokerEpoch"]
        if mv.supported("broker_registration_change_record"):
            return [
                encode_metadata_record(
                    BROKER_REGISTRATION_CHANGE, 0, {"BrokerId": bid, "BrokerEpoch": epoch, "Fenced": FENCE}
                )
            ]
        return [encode_metadata_record(FENCE_BROKER, 0, {"Id": bid, "Epoch": epoch})]

    def unfence_records(self, image: MetadataImage, bid: int, epoch: int) -> list[bytes]:
        mv = self._mv(image)
        if mv.supported("broker_registration_change_record"):
            return [
                encode_metadata_record(
                    BROKER_REGISTRATION_CHANGE, 0, {"BrokerId": bid, "BrokerEpoch": epoch, "Fenced": UNFENCE}
                )
            ]
        return [encode_metadata_record(UNFENCE_BROKER, 0, {"Id": bid, "Epoch": epoch})]

    # ------------------------------------------------------------------ BrokerRegistration
    def register_broker(
        self,
        image: MetadataImage,
        body: Mapping,
        next_offset: int,
        kraft_version: int,
        changes: BrokerChanges | None = None,
    ) -> tuple[list[bytes], int]:
        """The records registering the broker of ``body`` (a BrokerRegistrationRequest) and its
        broker epoch, or :class:`ControllerError`. A new incarnation first leaves its partitions'
        ISRs (``changes.broker_shutdown``: clean when it gives back the epoch of the registration it
        replaces)."""
        if self.sessions is None:
            raise ControllerError(Errors.NOT_CONTROLLER, "ClusterControlManager is not active.")
        if body.get("ClusterId") != self.cluster_id:
            raise ControllerError(
                Errors.INCONSISTENT_CLUSTER_ID,
                f"Expected cluster ID {self.cluster_id}, but got cluster ID {body.get('ClusterId')}",
            )
        bid = body["BrokerId"]
        _check_sizes(body, ("Listeners", "Features", "LogDirs"), f"broker {bid}")
        incarnation = body["IncarnationId"]
        existing = self.brokers.get(bid)
        if (
            existing is not None
            and self.has_valid_session(bid, existing["BrokerEpoch"])
            and incarnation != existing["IncarnationId"]
        ):
            raise ControllerError(
                Errors.DUPLICATE_BROKER_REGISTRATION,
                "Another broker is registered with that broker id. If the broker was recently restarted this "
                "should self-resolve once the heartbeat manager expires the broker's session.",
            )
        mv = self._mv(image)
        zk_broker = bool(body.get("IsMigratingZkBroker"))
        if zk_broker and image.zk_migration_state == POST_MIGRATION:
            raise ControllerError(
                Errors.BROKER_ID_NOT_REGISTERED,
                "Controller does not support registering ZK brokers: the ZK migration was finalized "
                "(POST_MIGRATION), ZooKeeper is no longer written and a broker cannot go back to ZooKeeper mode.",
            )
        if zk_broker and not (self.zk_migration and mv.supported("migration")):
            raise ControllerError(
                Errors.BROKER_ID_NOT_REGISTERED, "Controller does not support registering ZK brokers."
            )
        if not zk_broker and image.zk_migration_state == PRE_MIGRATION:
            raise ControllerError(
                Errors.BROKER_ID_NOT_REGISTERED,
                "Controller is in pre-migration mode and cannot register KRaft brokers until the metadata "
                "migration is complete.",
            )
        dirs = list(body.get("LogDirs") or [])
        if mv.supported("directory_assignment"):
            _check_directories(self.directory_owner, bid, dirs)
        features = {f["Name"]: (f["MinSupportedVersion"], f["MaxSupportedVersion"]) for f in body.get("Features") or []}
        if MV_FEATURE not in features:
            raise ControllerError(Errors.INVALID_REGISTRATION, "Request features do not contain 'metadata.version'")
        finalized = dict(image.finalized_features)
        finalized[KRAFT_VERSION_FEATURE] = kraft_version
        # every feature the broker lists must include the finalized level (1 for an unset
        # metadata.version, 0 for any other feature not finalized), and every finalized feature it
        # does not list must be at level 0, as Kafka's processRegistrationFeature checks
        for name, (lo, hi) in features.items():
            _check_supported(name, finalized.get(name, 1 if name == MV_FEATURE else 0), lo, hi)
        for name, level in sorted(finalized.items()):
            if level != 0 and name not in features:
                _check_supported(name, level, 0, 0)
        record = {
            "BrokerId": bid,
            "IsMigratingZkBroker": zk_broker,
            "IncarnationId": incarnation,
            **_endpoints_and_features(body),
            "Rack": body.get("Rack"),
            "LogDirs": dirs if mv.supported("directory_assignment") else [],
        }
        shutdown: list[bytes] = []
        if existing is not None and existing["IncarnationId"] == incarnation:
            epoch = existing["BrokerEpoch"]
            record.update(Fenced=existing["Fenced"], InControlledShutdown=existing["InControlledShutdown"])
            log.info(
                "Amending registration of broker %d, incarnation ID %s. Broker epoch remains %d.",
                bid,
                incarnation,
                epoch,
            )
        else:
            epoch = next_offset
            record.update(Fenced=True, InControlledShutdown=False)
            clean = existing is not None and existing["BrokerEpoch"] == body.get("PreviousBrokerEpoch", -1)
            shutdown = (changes or _NoPartitions(self)).broker_shutdown(image, bid, clean)
            log.info(
                "Registering broker %d, incarnation ID %s: broker epoch %d (%d record(s) to clean up previous "
                "incarnations).",
                bid,
                incarnation,
                epoch,
                len(shutdown),
            )
        record["BrokerEpoch"] = epoch
        version = record_versions(mv)[REGISTER_BROKER]
        assert version is not None
        return [*shutdown, encode_metadata_record(REGISTER_BROKER, version, record)], epoch

    # ------------------------------------------------------------------ BrokerHeartbeat
    def check_broker_epoch(self, image: MetadataImage, bid: int, epoch: int) -> None:
        reg = self.brokers.get(bid)
        if reg is None:
            raise ControllerError(Errors.STALE_BROKER_EPOCH, f"No broker registration found for broker id {bid}")
        if reg["BrokerEpoch"] != epoch:
            raise ControllerError(
                Errors.STALE_BROKER_EPOCH, f"Expected broker epoch {reg['BrokerEpoch']}, but got broker epoch {epoch}"
            )

    def lowest_active_offset(self) -> int:
        """The lowest metadata offset an active broker (unfenced, not shutting down) reported; Long.MAX_VALUE when none is."""
        offsets = [s.metadata_offset for s in (self.sessions or {}).values() if not s.fenced and not s.shutting_down]
        return min(offsets) if offsets else LONG_MAX  # (Long.MAX_VALUE, as Kafka logs it when no broker is active)

    def heartbeat(
        self, image: MetadataImage, body: Mapping, changes: BrokerChanges | None = None, next_offset: int = 0
    ) -> tuple[list[bytes], HeartbeatReply]:
        """The records a BrokerHeartbeat leads to (none, usually) and its answer: Kafka's
        ``processBrokerHeartbeat`` and ``calculateNextBrokerState``. ``changes`` gives the records of a
        change of the broker's state, partitions included (without it, no partition moves: the broker
        leads none); ``next_offset`` is where the records would be appended (a controlled shutdown
        completes once every active broker has caught up to the end of its batch)."""
        if self.sessions is None:
            raise ControllerError(Errors.NOT_CONTROLLER, "ClusterControlManager is not active.")
        bid, epoch = body["BrokerId"], body["BrokerEpoch"]
        if bid not in self.register_offsets:
            raise ControllerError(
                Errors.STALE_BROKER_EPOCH, f"Receive a heartbeat from broker {bid} before registration"
            )
        self.check_broker_epoch(image, bid, epoch)
        ch = changes if changes is not None else _NoPartitions(self)
        now = self.now()
        s = self.sessions.get(bid)
        if s is None:
            s = self.sessions[bid] = BrokerSession(bid, epoch, self.brokers[bid]["Fenced"], now)
        offset = body.get("CurrentMetadataOffset", -1)
        registered_at = self.register_offsets[bid]
        want_fence, want_shutdown = body.get("WantFence", False), body.get("WantShutDown", False)
        current = CONTROLLED_SHUTDOWN if s.shutting_down else FENCED if s.fenced else UNFENCED
        nxt = current
        if current == FENCED:
            if want_shutdown:
                log.info("Fenced broker %d has requested and been granted an immediate shutdown.", bid)
                nxt = SHUTDOWN_NOW
            elif not want_fence and offset >= registered_at:
                log.info(
                    "The request from broker %d to unfence has been granted because it has caught up with the "
                    "offset of its register broker record %d.",
                    bid,
                    registered_at,
                )
                nxt = UNFENCED
        elif current == UNFENCED:
            if want_fence:
                what = "an immediate shutdown" if want_shutdown else "fencing"
                log.info("Unfenced broker %d has requested and been granted %s.", bid, what)
                nxt = SHUTDOWN_NOW if want_shutdown else FENCED
            elif want_shutdown:
                if ch.has_leaderships(image, bid):
                    log.info("Unfenced broker %d has requested and been granted a controlled shutdown.", bid)
                    nxt = CONTROLLED_SHUTDOWN
                else:
                    log.info("Unfenced broker %d has requested and been granted an immediate shutdown.", bid)
                    nxt = SHUTDOWN_NOW
        elif not ch.has_leaderships(image, bid):
            lowest = self.lowest_active_offset()
            if s.controlled_shutdown_offset <= lowest:
                log.info(
                    "The request from broker %d to shut down has been granted since the lowest active offset %s "
                    "is now greater than the broker's controlled shutdown offset %d.",
                    bid,
                    lowest,
                    s.controlled_shutdown_offset,
                )
                nxt = SHUTDOWN_NOW
            else:
                log.info(
                    "The request from broker %d to shut down can not yet be granted because the lowest active offset "
                    "%s is not greater than the broker's shutdown offset %d.",
                    bid,
                    lowest,
                    s.controlled_shutdown_offset,
                )
        else:
            log.info(
                "Broker %d is in controlled shutdown state, but can not shut down because more leaders still need to "
                "be moved.",
                bid,
            )
        records: list[bytes] = []
        if nxt != current:
            # (FENCED -> SHUTDOWN_NOW is a change too: Kafka writes the fencing once more)
            if nxt in (FENCED, SHUTDOWN_NOW):
                records = ch.broker_fenced(image, bid)
            elif nxt == UNFENCED:
                records = ch.broker_unfenced(image, bid, epoch)
            else:
                records = ch.broker_in_controlled_shutdown(image, bid, epoch)
        if self._mv(image).supported("directory_assignment"):
            offline = list(body.get("OfflineLogDirs") or [])
            if offline:
                records = records + ch.directories_offline(image, bid, epoch, offline)
        fenced = nxt in (FENCED, SHUTDOWN_NOW)
        s.last_contact = now
        s.metadata_offset = offset
        s.fenced = fenced
        if fenced:
            s.controlled_shutdown_offset = -1
        elif nxt == CONTROLLED_SHUTDOWN and s.controlled_shutdown_offset < 0:
            s.controlled_shutdown_offset = next_offset + len(records) - 1  # the end of this write's batch
        return records, HeartbeatReply(offset >= registered_at, fenced, nxt == CONTROLLED_SHUTDOWN, nxt == SHUTDOWN_NOW)

    # ------------------------------------------------------------------ UnregisterBroker
    def unregister_broker(self, image: MetadataImage, bid: int) -> list[bytes]:
        reg = self.brokers.get(bid)
        if reg is None:
            raise ControllerError(Errors.BROKER_ID_NOT_REGISTERED, f"Broker ID {bid} is not currently registered")
        return [encode_metadata_record(UNREGISTER_BROKER, 0, {"BrokerId": bid, "BrokerEpoch": reg["BrokerEpoch"]})]

    # ------------------------------------------------------------------ ControllerRegistration
    def register_controller(self, image: MetadataImage, body: Mapping) -> list[bytes]:
        _check_sizes(body, ("Listeners", "Features"), f"controller {body.get('ControllerId')}")
        mv = self._mv(image)
        version = record_versions(mv)[REGISTER_CONTROLLER]
        if version is None:
            raise ControllerError(
                Errors.UNSUPPORTED_VERSION,
                "The current MetadataVersion is too old to support controller registrations.",
            )
        record = {
            "ControllerId": body["ControllerId"],
            "IncarnationId": body["IncarnationId"],
            "ZkMigrationReady": bool(body.get("ZkMigrationReady")),
            **_endpoints_and_features(body),
        }
        return [encode_metadata_record(REGISTER_CONTROLLER, version, record)]


def _registration(fields: Mapping, log_dirs: list[uuid.UUID]) -> dict:
    """The controller's view of one registration, from a RegisterBrokerRecord or the image's broker
    (its ``LogDirs`` start as ``log_dirs``: :meth:`ClusterControlManager._set_directories` sets them)."""
    reg = {k: fields.get(k) for k in ("BrokerId", "BrokerEpoch", "IncarnationId", "Fenced", "InControlledShutdown")}
    reg["LogDirs"] = log_dirs
    return reg


def _endpoints_and_features(body: Mapping) -> dict:
    """A registration request's Listeners and Features as the registration record's EndPoints and
    Features (the same fields, under the record's names)."""
    return {
        "EndPoints": [
            {"Name": x["Name"], "Host": x["Host"], "Port": x["Port"], "SecurityProtocol": x["SecurityProtocol"]}
            for x in body.get("Listeners") or []
        ],
        "Features": [
            {k: f[k] for k in ("Name", "MinSupportedVersion", "MaxSupportedVersion")}
            for f in body.get("Features") or []
        ],
    }


def _check_sizes(body: Mapping, lists: tuple[str, ...], who: str) -> None:
    """A registration lists at most MAX_REGISTRATION_ENTRIES of each (a node has a few listeners,
    features and log directories; a request listing hundreds of thousands would make a record of
    megabytes that every replica must replay while it stalls its quorum)."""
    for name in lists:
        n = len(body.get(name) or [])
        if n > MAX_REGISTRATION_ENTRIES:
            raise ControllerError(
                Errors.INVALID_REGISTRATION,
                f"the registration of {who} lists {n} {name}: more than the {MAX_REGISTRATION_ENTRIES} one may",
            )


def _check_supported(name: str, level: int, lo: int, hi: int) -> None:
    if not lo <= level <= hi:
        raise ControllerError(
            Errors.UNSUPPORTED_VERSION,
            f"Unable to register because the broker does not support finalized version {level} of {name}. "
            f"The broker wants a version between {lo} and {hi}, inclusive.",
        )


def _check_directories(owner: Mapping[uuid.UUID, int], bid: int, dirs: list[uuid.UUID]) -> None:
    if not dirs:
        raise ControllerError(Errors.INVALID_REGISTRATION, "No directories specified in request")
    if any(d.int < 100 for d in dirs):  # Kafka's DirectoryId.reserved: the uuids 0..99
        raise ControllerError(Errors.INVALID_REGISTRATION, "Reserved directory ID in request")
    if len(set(dirs)) != len(dirs):
        raise ControllerError(Errors.INVALID_REGISTRATION, "Duplicate directory ID in request")
    for d in dirs:
        other = owner.get(d)
        if other is not None and other != bid:
            raise ControllerError(
                Errors.INVALID_REGISTRATION, f"Broker {other} is already registered with directory {d}"
            )
