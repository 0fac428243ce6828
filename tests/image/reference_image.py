"""The pure-Python metadata image: kraftkit's original implementation, kept as the test oracle
of the Rust engine behind :mod:`kraftkit.metadata.image` (and as the "pure-Python path" peer in
the benchmarks). It raises the face's :class:`ReplayError` and :class:`UnwritableMetadataError`
so that errors of both compare equal. Do not change its semantics without changing the engine's.

The metadata image: the state a KRaft node builds by replaying metadata records.

:class:`MetadataImage` holds what Kafka's ``MetadataImage`` holds -- finalized features and
metadata.version, the ZK migration state, brokers and controllers, topics and their
partitions, configs, client quotas, the next producer id, ACLs, SCRAM credentials and
delegation tokens -- plus its provenance (last offset, epoch and append time) and the KRaft
control state (kraft.version and the voter set) a snapshot must carry.

Replay follows Kafka's image deltas (``org.apache.kafka.image.*Delta``):

* ``FeatureLevelRecord`` sets a level; level 0 removes a feature other than metadata.version.
* ``RegisterBrokerRecord`` replaces a broker's registration; ``UnregisterBrokerRecord``
  removes it; ``FenceBrokerRecord``/``UnfenceBrokerRecord``/``BrokerRegistrationChangeRecord``
  need a registered broker with the same epoch (Fenced 1 = fence, -1 = unfence, 0 = no change;
  InControlledShutdown 1 = enter, 0 = no change; a non-empty LogDirs replaces the directories).
* ``PartitionChangeRecord`` merges as ``PartitionRegistration.merge``: null lists and
  Leader -2 mean "unchanged", a leader change bumps the leader epoch, every change bumps the
  partition epoch, LeaderRecoveryState -1 means unchanged; directories that are all
  ``MIGRATING`` (the zero uuid) or empty become one ``MIGRATING`` per replica.
* ``RemoveTopicRecord`` removes the topic and its configs; ``ClearElrRecord`` clears ELR and
  LastKnownElr (of one topic, or of all when TopicName is empty) as a partition change.
* ``ConfigRecord`` with a null value deletes the key; a resource without keys disappears.
* ``Begin/End/AbortTransactionRecord`` group records that apply together (or not at all).

Errors in the records (a change to an unknown broker or partition...) raise
:class:`ReplayError` with the offset and Kafka's message.
"""

from __future__ import annotations

import base64
import copy
import gc
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftkit._core import decode_metadata_batch, encode_control_record, encode_metadata_record
from kraftkit._kafka import (  # the metadata record api keys (facts, not the logic under test)
    ABORT_TRANSACTION, ACCESS_CONTROL_ENTRY, BEGIN_TRANSACTION, BROKER_REGISTRATION_CHANGE, CLEAR_ELR, CLIENT_QUOTA,
    CONFIG, DELEGATION_TOKEN, END_TRANSACTION, FEATURE_LEVEL, FENCE_BROKER, NO_OP, PARTITION, PARTITION_CHANGE,
    PRODUCER_IDS, REGISTER_BROKER, REGISTER_CONTROLLER, REMOVE_ACCESS_CONTROL_ENTRY, REMOVE_DELEGATION_TOKEN,
    REMOVE_TOPIC, REMOVE_USER_SCRAM_CREDENTIAL, TOPIC, UNFENCE_BROKER, UNREGISTER_BROKER, UNREGISTER_CONTROLLER,
    USER_SCRAM_CREDENTIAL, ZK_MIGRATION_STATE,
)
from kraftkit.errors import KraftkitError
from kraftkit.log.control import ControlType

ZERO_UUID = uuid.UUID(int=0)
#: DirectoryId.MIGRATING
MIGRATING = ZERO_UUID
MV_FEATURE = "metadata.version"
ELR_FEATURE = "eligible.leader.replicas.version"

# control record types
LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS = (
    ControlType.LEADER_CHANGE, ControlType.SNAPSHOT_HEADER, ControlType.SNAPSHOT_FOOTER,
    ControlType.KRAFT_VERSION, ControlType.KRAFT_VOTERS,
)

#: metadata.version feature level -> version string (MetadataVersion.java, Kafka 4.4.0;
#: levels 1-6 from the 3.x enum, which 4.x no longer lists; 34 is 4.4.0's unstable level).
MV_NAMES = {
    1: "3.0-IV1", 2: "3.1-IV0", 3: "3.2-IV0", 4: "3.3-IV0", 5: "3.3-IV1", 6: "3.3-IV2", 7: "3.3-IV3",
    8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0", 13: "3.6-IV1", 14: "3.6-IV2",
    15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3", 19: "3.7-IV4", 20: "3.8-IV0", 21: "3.9-IV0",
    22: "4.0-IV0", 23: "4.0-IV1", 24: "4.0-IV2", 25: "4.0-IV3", 26: "4.1-IV0", 27: "4.1-IV1", 28: "4.2-IV0",
    29: "4.2-IV1", 30: "4.3-IV0", 31: "4.4-IV0", 32: "4.4-IV1", 33: "4.4-IV2", 34: "4.5-IV0",
}
#: An image without a metadata.version record is at 3.0-IV1 (FeaturesImage.EMPTY).
MINIMUM_KRAFT_MV = 1
# MV levels that gate what a snapshot can hold (Kafka's ``MetadataVersion``; 4.3.1 for >= 26)
MV_3_3_IV0, MV_3_3_IV3, MV_3_4_IV0, MV_3_5_IV2, MV_3_6_IV2 = 4, 7, 8, 11, 14
MV_3_7_IV0, MV_3_7_IV2, MV_4_0_IV0, MV_4_0_IV1, MV_4_3_IV0 = 15, 17, 22, 23, 30

ZK_MIGRATION_STATES = {0: "NONE", 1: "MIGRATION", 2: "PRE_MIGRATION", 3: "POST_MIGRATION", 4: "ZK"}
CONFIG_TYPES = {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}
SCRAM_MECHANISMS = {0: "UNKNOWN", 1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}


def mv_name(level: int | None) -> str:
    """A level without a name is shown as unknown, with the newest named one."""
    if level is None:
        return MV_NAMES[MINIMUM_KRAFT_MV]
    if level in MV_NAMES:
        return MV_NAMES[level]
    top = max(MV_NAMES)
    newest = f"{MV_NAMES[top]} = {top}"
    if level > top:
        return f"{level} (unknown: newer than kraftkit's newest, {newest})"
    return f"{level} (unknown: not a level kraftkit knows (newest: {newest}))"


def uuid_text(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


from kraftkit.metadata.image import ReplayError, UnwritableMetadataError  # noqa: E402  (shared with the face)


@dataclass
class Provenance:
    """``MetadataProvenance``: the last offset in the image, its epoch and append time."""

    offset: int = -1
    epoch: int = -1
    timestamp: int = -1

    @property
    def end_offset(self) -> int:
        return self.offset + 1


@dataclass
class Topic:
    name: str
    id: uuid.UUID
    #: partition id -> PartitionRecord-shaped dict (Replicas, Isr, ..., LastKnownElr; lists, never None)
    partitions: dict[int, dict[str, Any]] = field(default_factory=dict)


def _by_name(items: list[dict]) -> list[dict]:
    """Endpoints and features are maps keyed by Name in Kafka (``mapKey``): order carries no
    meaning, so the image keeps them sorted."""
    return sorted((dict(x) for x in items), key=lambda x: x["Name"])


def _ints(v: list[int] | None) -> list[int]:
    return [] if v is None else list(v)


def _dirs(dirs: list[uuid.UUID] | None, n: int) -> list[uuid.UUID]:
    """``PartitionRegistration.defaultToMigrating``."""
    if dirs is None or all(d == MIGRATING for d in dirs):
        return [MIGRATING] * n
    return list(dirs)



def _set_or_remove(sections: dict, owner: Any, key: str, value: Any, remove: bool) -> None:
    """Sets ``sections[owner][key] = value``, or removes the key (and an owner left empty)."""
    if remove:
        entries = sections.get(owner)
        if entries is not None:
            entries.pop(key, None)
            if not entries:
                del sections[owner]
    else:
        sections.setdefault(owner, {})[key] = value

class MetadataImage:
    """An in-memory metadata image. Build one with :func:`load_image` or by replaying
    records (``replay(api_key, version, data)``, ``replay_batch(batch)``)."""

    def __init__(self) -> None:
        self.metadata_version: int | None = None
        self.features: dict[str, int] = {}
        self.zk_migration_state = 0
        self.brokers: dict[int, dict[str, Any]] = {}
        self.controllers: dict[int, dict[str, Any]] = {}
        self.topics: dict[uuid.UUID, Topic] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = {}
        self.next_producer_id = -1
        self.acls: dict[uuid.UUID, dict[str, Any]] = {}
        self.scram: dict[tuple[int, str], dict[str, Any]] = {}
        self.delegation_tokens: dict[str, dict[str, Any]] = {}
        self.provenance = Provenance()
        #: kraft.version from KRaftVersion control records (None: never seen, i.e. 0)
        self.kraft_version: int | None = None
        #: the last VotersRecord, decoded (None: none seen)
        self.voters: dict[str, Any] | None = None
        #: records of an open metadata transaction (BeginTransactionRecord seen, no End yet)
        self.pending_transaction: list[tuple[int, int, dict, int | None]] | None = None
        self.records_replayed = 0

    # ------------------------------------------------------------------ accessors
    def copy(self) -> MetadataImage:
        return copy.deepcopy(self)

    def topic(self, name: str) -> Topic | None:
        tid = self.topic_ids.get(name)
        return None if tid is None else self.topics[tid]

    @property
    def finalized_features(self) -> dict[str, int]:
        """All finalized feature levels, metadata.version included (when set)."""
        out = dict(self.features)
        if self.metadata_version is not None:
            out[MV_FEATURE] = self.metadata_version
        return out

    @property
    def effective_metadata_version(self) -> int:
        return MINIMUM_KRAFT_MV if self.metadata_version is None else self.metadata_version

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MetadataImage):
            return NotImplemented
        return self.sections() == other.sections()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"MetadataImage(mv={mv_name(self.metadata_version)}, brokers={sorted(self.brokers)}, "
                f"topics={len(self.topics)}, offset={self.provenance.offset})")

    # ------------------------------------------------------------------ replay
    def replay_batch(self, batch) -> None:
        """Applies every record of one KRaft batch (data or control) and moves the
        provenance to its last offset."""
        for offset, api_key, ver, data in decode_metadata_batch(batch):
            if api_key is None:
                self.replay_control(ver, data)
            else:
                self.replay(api_key, ver, data, offset)
        self.provenance = Provenance(batch.last_offset, batch.partition_leader_epoch, batch.max_timestamp)

    def replay_control(self, control_type: int, data: dict | None) -> None:
        if control_type == KRAFT_VERSION and data is not None:
            self.kraft_version = data["KRaftVersion"]
        elif control_type == KRAFT_VOTERS and data is not None:
            self.voters = data

    def replay(self, api_key: int, version: int, data: dict[str, Any], offset: int | None = None) -> None:
        """Applies one metadata record (decoded dict, schema field names)."""
        if api_key == BEGIN_TRANSACTION:
            if self.pending_transaction is not None:
                raise ReplayError("BeginTransactionRecord inside a metadata transaction", offset)
            self.pending_transaction = []
            return
        if api_key == END_TRANSACTION or api_key == ABORT_TRANSACTION:
            if self.pending_transaction is None:
                raise ReplayError(f"{'End' if api_key == END_TRANSACTION else 'Abort'}TransactionRecord without a "
                                  "BeginTransactionRecord", offset)
            pending, self.pending_transaction = self.pending_transaction, None
            if api_key == END_TRANSACTION:
                for rec in pending:
                    self._apply(*rec)
            return
        if self.pending_transaction is not None:
            self.pending_transaction.append((api_key, version, data, offset))
            return
        self._apply(api_key, version, data, offset)

    def _apply(self, api_key: int, version: int, data: dict[str, Any], offset: int | None) -> None:
        handler = _HANDLERS.get(api_key)
        if handler is None:
            raise ReplayError(f"Unknown metadata id {api_key}", offset)
        self.records_replayed += 1
        try:
            handler(self, data)
        except ReplayError as e:
            if e.offset is None and offset is not None:
                raise ReplayError(e.reason, offset) from None
            raise
        except (KeyError, TypeError) as e:
            raise ReplayError(f"malformed {api_key} record: {e!r}", offset) from None

    # features
    def _feature_level(self, d: dict) -> None:
        name, level = d["Name"], d["FeatureLevel"]
        if name == MV_FEATURE:
            self.metadata_version = level
        elif level == 0:
            self.features.pop(name, None)
        else:
            self.features[name] = level

    def _zk_migration(self, d: dict) -> None:
        self.zk_migration_state = d["ZkMigrationState"]

    # cluster
    def _register_broker(self, d: dict) -> None:
        self.brokers[d["BrokerId"]] = {
            "BrokerId": d["BrokerId"],
            "IsMigratingZkBroker": d.get("IsMigratingZkBroker", False),
            "IncarnationId": d["IncarnationId"],
            "BrokerEpoch": d["BrokerEpoch"],
            "EndPoints": _by_name(d["EndPoints"]),
            "Features": _by_name(d["Features"]),
            "Rack": d["Rack"],
            "Fenced": d["Fenced"],
            "InControlledShutdown": d.get("InControlledShutdown", False),
            "LogDirs": list(d.get("LogDirs", [])),
            "CordonedLogDirs": None if d.get("CordonedLogDirs") is None else list(d["CordonedLogDirs"]),
        }

    def _unregister_broker(self, d: dict) -> None:
        self.brokers.pop(d["BrokerId"], None)

    def _broker_or_throw(self, broker_id: int, epoch: int, action: str) -> dict:
        b = self.brokers.get(broker_id)
        if b is None:
            raise ReplayError(f"Tried to {action} broker {broker_id}, but that broker was not registered.")
        if b["BrokerEpoch"] != epoch:
            raise ReplayError(f"Tried to {action} broker {broker_id}, but the given epoch, {epoch}, did not match "
                              f"the current broker epoch, {b['BrokerEpoch']}")
        return b

    def _fence(self, d: dict) -> None:
        self._broker_or_throw(d["Id"], d["Epoch"], "fence")["Fenced"] = True

    def _unfence(self, d: dict) -> None:
        self._broker_or_throw(d["Id"], d["Epoch"], "unfence")["Fenced"] = False

    def _broker_change(self, d: dict) -> None:
        b = self._broker_or_throw(d["BrokerId"], d["BrokerEpoch"], "change")
        fenced = d.get("Fenced", 0)
        if fenced not in (-1, 0, 1):
            raise ReplayError(f"Unable to replay BrokerRegistrationChangeRecord: unknown value for fenced field: {fenced}")
        shutdown = d.get("InControlledShutdown", 0)
        if shutdown not in (0, 1):
            raise ReplayError("Unable to replay BrokerRegistrationChangeRecord: unknown value for "
                              f"inControlledShutdown field: {shutdown}")
        if fenced:
            b["Fenced"] = fenced == 1
        if shutdown == 1:
            b["InControlledShutdown"] = True
        if d.get("LogDirs"):
            b["LogDirs"] = list(d["LogDirs"])
        if d.get("CordonedLogDirs") is not None:
            b["CordonedLogDirs"] = list(d["CordonedLogDirs"])

    def _register_controller(self, d: dict) -> None:
        self.controllers[d["ControllerId"]] = {
            "ControllerId": d["ControllerId"],
            "IncarnationId": d["IncarnationId"],
            "ZkMigrationReady": d["ZkMigrationReady"],
            "EndPoints": _by_name(d["EndPoints"]),
            "Features": _by_name(d["Features"]),
        }

    def _unregister_controller(self, d: dict) -> None:
        self.controllers.pop(d["ControllerId"], None)

    # topics
    def _topic(self, d: dict) -> None:
        tid, name = d["TopicId"], d["Name"]
        old = self.topics.get(tid)
        if old is not None and old.name != name:
            self.topic_ids.pop(old.name, None)
        self.topics[tid] = Topic(name, tid)
        self.topic_ids[name] = tid

    def _topic_or_throw(self, tid: uuid.UUID) -> Topic:
        t = self.topics.get(tid)
        if t is None:
            raise ReplayError(f"Unable to find topic with id {uuid_text(tid)}")
        return t

    def _partition(self, d: dict) -> None:
        t = self._topic_or_throw(d["TopicId"])
        replicas = list(d["Replicas"])
        dirs = d.get("Directories")
        if dirs and len(dirs) != len(replicas):
            raise ReplayError(f"The lengths for replicas and directories do not match: {d}")
        t.partitions[d["PartitionId"]] = {
            "Replicas": replicas,
            "Isr": list(d["Isr"]),
            "RemovingReplicas": list(d["RemovingReplicas"]),
            "AddingReplicas": list(d["AddingReplicas"]),
            "Leader": d["Leader"],
            "LeaderRecoveryState": d.get("LeaderRecoveryState", 0),
            "LeaderEpoch": d["LeaderEpoch"],
            "PartitionEpoch": d["PartitionEpoch"],
            "Directories": _dirs(dirs, len(replicas)),
            "EligibleLeaderReplicas": _ints(d.get("EligibleLeaderReplicas")),
            "LastKnownElr": _ints(d.get("LastKnownElr")),
        }

    def _partition_change(self, d: dict) -> None:
        t = self._topic_or_throw(d["TopicId"])
        p = t.partitions.get(d["PartitionId"])
        if p is None:
            raise ReplayError(f"Unable to find partition {uuid_text(d['TopicId'])}:{d['PartitionId']}")
        _merge(p, d)

    def _remove_topic(self, d: dict) -> None:
        tid = d["TopicId"]
        t = self.topics.pop(tid, None)
        if t is None:
            raise ReplayError(f"Unable to delete topic with id {uuid_text(tid)}: no such topic found.")
        if self.topic_ids.get(t.name) == tid:
            del self.topic_ids[t.name]
        self.configs.pop((2, t.name), None)

    def _clear_elr(self, d: dict) -> None:
        name = d["TopicName"]
        if name:
            t = self.topic(name)
            if t is None:
                raise ReplayError(f"Topic {name} not found.")
            topics = [t]
        else:
            topics = list(self.topics.values())
        for t in topics:
            for p in t.partitions.values():
                if p["EligibleLeaderReplicas"] or p["LastKnownElr"]:
                    _merge(p, {"EligibleLeaderReplicas": [], "LastKnownElr": []})

    # configs, quotas, producer ids
    def _config(self, d: dict) -> None:
        _set_or_remove(self.configs, (d["ResourceType"], d["ResourceName"]), d["Name"], d["Value"], d["Value"] is None)

    def _client_quota(self, d: dict) -> None:
        entity = tuple(sorted((e["EntityType"], e["EntityName"]) for e in d["Entity"]))
        _set_or_remove(self.client_quotas, entity, d["Key"], d["Value"], d["Remove"])

    def _producer_ids(self, d: dict) -> None:
        self.next_producer_id = d["NextProducerId"]

    # security
    def _acl(self, d: dict) -> None:
        self.acls[d["Id"]] = {k: d[k] for k in ("Id", "ResourceType", "ResourceName", "PatternType", "Principal",
                                                 "Host", "Operation", "PermissionType")}

    def _remove_acl(self, d: dict) -> None:
        if self.acls.pop(d["Id"], None) is None:
            raise ReplayError(f"Failed to find existing ACL with ID {uuid_text(d['Id'])} in either image or changes")

    def _scram(self, d: dict) -> None:
        self.scram[(d["Mechanism"], d["Name"])] = {k: d[k] for k in ("Name", "Mechanism", "Salt", "StoredKey",
                                                                       "ServerKey", "Iterations")}

    def _remove_scram(self, d: dict) -> None:
        self.scram.pop((d["Mechanism"], d["Name"]), None)

    def _token(self, d: dict) -> None:
        self.delegation_tokens[d["TokenId"]] = {k: (list(d[k]) if k == "Renewers" else d[k]) for k in (
            "Owner", "Requester", "Renewers", "IssueTimestamp", "MaxTimestamp", "ExpirationTimestamp", "TokenId")}

    def _remove_token(self, d: dict) -> None:
        self.delegation_tokens.pop(d["TokenId"], None)

    def _noop(self, d: dict) -> None:
        pass

    # ------------------------------------------------------------------ views
    def sections(self) -> dict[str, Any]:
        """The image as plain JSON-able data, one entry per section (the delta and the shell
        are computed from this). Uuids are in Kafka's text form."""
        return {
            "features": {
                "metadataVersion": mv_name(self.metadata_version),
                "metadataVersionLevel": self.metadata_version,
                "finalized": dict(sorted(self.features.items())),
                "zkMigrationState": ZK_MIGRATION_STATES.get(self.zk_migration_state, str(self.zk_migration_state)),
            },
            "brokers": {str(k): _jsonable(v) for k, v in sorted(self.brokers.items())},
            "controllers": {str(k): _jsonable(v) for k, v in sorted(self.controllers.items())},
            "topics": {t.name: {"id": uuid_text(t.id),
                                "partitions": {str(p): _jsonable(v) for p, v in sorted(t.partitions.items())}}
                       for t in sorted(self.topics.values(), key=lambda t: t.name)},
            "configs": {_config_node(k): dict(sorted(v.items())) for k, v in sorted(self.configs.items())},
            "clientQuotas": {_entity_node(k): dict(sorted(v.items())) for k, v in sorted(self.client_quotas.items(), key=_quota_sort)},
            "producerIds": {"nextProducerId": self.next_producer_id},
            "acls": {uuid_text(k): _jsonable(v) for k, v in sorted(self.acls.items(), key=lambda kv: uuid_text(kv[0]))},
            "scram": {f"{SCRAM_MECHANISMS.get(m, m)}:{u}": _jsonable(v) for (m, u), v in sorted(self.scram.items())},
            "delegationTokens": {k: _jsonable(v) for k, v in sorted(self.delegation_tokens.items())},
        }

    # ------------------------------------------------------------------ snapshots
    def snapshot_records(self, metadata_version: int | None = None) -> list[tuple[int, int, dict[str, Any]]]:
        """The records of a snapshot of this image, in Kafka's order (``MetadataImage.write``),
        at the record versions of ``metadata_version`` (default: the image's), keys sorted
        within each section so equal images give equal records. Raises
        :class:`UnwritableMetadataError` when something cannot be represented at that version."""
        mv = self.effective_metadata_version if metadata_version is None else metadata_version
        name = mv_name(mv)
        losses: list[str] = []
        out: list[tuple[int, int, dict[str, Any]]] = []
        # 1. features
        if mv < MV_3_3_IV0:
            if self.finalized_features:
                losses.append("feature flag(s): " + ", ".join(sorted(self.finalized_features)))
        else:
            out.append((FEATURE_LEVEL, 0, {"Name": MV_FEATURE, "FeatureLevel": mv}))
            for fname, level in sorted(self.features.items()):
                out.append((FEATURE_LEVEL, 0, {"Name": fname, "FeatureLevel": level}))
        # ZkMigrationStateRecord: 3.x writes one at MV >= 3.4-IV0; 4.x (no ZooKeeper) never
        # does and ignores it on replay, so it is written for MV < 4.0 or a state that is not NONE.
        if mv >= MV_3_4_IV0 and (mv < MV_4_0_IV0 or self.zk_migration_state != 0):
            out.append((ZK_MIGRATION_STATE, 0, {"ZkMigrationState": self.zk_migration_state}))
        elif self.zk_migration_state != 0:
            losses.append(f"the ZK Migration state which was {ZK_MIGRATION_STATES.get(self.zk_migration_state)}")
        # 2. cluster
        bver = 4 if mv >= MV_4_3_IV0 else 3 if mv >= MV_3_7_IV2 else 2 if mv >= MV_3_4_IV0 else 1 if mv >= MV_3_3_IV3 else 0
        for _, b in sorted(self.brokers.items()):
            rec = dict(b)
            if bver < 1:
                if rec.pop("InControlledShutdown"):
                    losses.append("the inControlledShutdown state of one or more brokers")
            if bver < 2 and rec.pop("IsMigratingZkBroker"):
                losses.append("the isMigratingZkBroker state of one or more brokers")
            if bver < 3 and rec.pop("LogDirs"):
                losses.append("the online log directories of one or more brokers")
            if bver < 4 and rec.pop("CordonedLogDirs", None):
                losses.append("the cordoned log directories of one or more brokers")
            rec = {k: v for k, v in rec.items() if _field_in(REGISTER_BROKER, k, bver)}
            out.append((REGISTER_BROKER, bver, rec))
        if self.controllers:
            if mv >= MV_3_7_IV0:
                for _, c in sorted(self.controllers.items()):
                    out.append((REGISTER_CONTROLLER, 0, dict(c)))
            else:
                losses.append("controller registration data")
        # 3. topics
        pver = 2 if mv >= MV_4_0_IV1 else 1 if mv >= MV_3_7_IV2 else 0
        elr_enabled = mv >= MV_4_0_IV1 and self.features.get(ELR_FEATURE, 0) >= 1
        for t in sorted(self.topics.values(), key=lambda t: t.name):
            out.append((TOPIC, 0, {"Name": t.name, "TopicId": t.id}))
            for pid, p in sorted(t.partitions.items()):
                rec = {"PartitionId": pid, "TopicId": t.id, "Replicas": p["Replicas"], "Isr": p["Isr"],
                       "RemovingReplicas": p["RemovingReplicas"], "AddingReplicas": p["AddingReplicas"],
                       "Leader": p["Leader"], "LeaderRecoveryState": p["LeaderRecoveryState"],
                       "LeaderEpoch": p["LeaderEpoch"], "PartitionEpoch": p["PartitionEpoch"]}
                if pver >= 1:
                    rec["Directories"] = p["Directories"]
                elif any(x != MIGRATING for x in p["Directories"]):
                    losses.append("the directory assignment state of one or more replicas")
                if elr_enabled and pver >= 2:
                    if p["EligibleLeaderReplicas"]:
                        rec["EligibleLeaderReplicas"] = p["EligibleLeaderReplicas"]
                    if p["LastKnownElr"]:
                        rec["LastKnownElr"] = p["LastKnownElr"]
                out.append((PARTITION, pver, rec))
        # 4. configs
        for (rtype, rname), cfg in sorted(self.configs.items()):
            for k, v in sorted(cfg.items()):
                out.append((CONFIG, 0, {"ResourceType": rtype, "ResourceName": rname, "Name": k, "Value": v}))
        # 5. client quotas
        for entity, q in sorted(self.client_quotas.items(), key=_quota_sort):
            for k, v in sorted(q.items()):
                out.append((CLIENT_QUOTA, 0, {"Entity": [{"EntityType": et, "EntityName": en} for et, en in entity],
                                              "Key": k, "Value": v, "Remove": False}))
        # 6. producer ids
        if self.next_producer_id >= 0:
            out.append((PRODUCER_IDS, 0, {"BrokerId": -1, "BrokerEpoch": -1, "NextProducerId": self.next_producer_id}))
        # 7. ACLs
        for _, acl in sorted(self.acls.items()):
            out.append((ACCESS_CONTROL_ENTRY, 0, dict(acl)))
        # 8. SCRAM
        if self.scram:
            if mv >= MV_3_5_IV2:
                for _, cred in sorted(self.scram.items()):
                    out.append((USER_SCRAM_CREDENTIAL, 0, dict(cred)))
            else:
                losses.append("SCRAM credentials of " + ", ".join(sorted({u for _, u in self.scram})))
        # 9. delegation tokens
        if self.delegation_tokens:
            if mv >= MV_3_6_IV2:
                for _, tok in sorted(self.delegation_tokens.items()):
                    out.append((DELEGATION_TOKEN, 0, dict(tok)))
            else:
                losses.append("DelegationTokenImage(" + ", ".join(sorted(self.delegation_tokens)) + ")")
        if losses:
            raise UnwritableMetadataError("Metadata has been lost because the following could not be represented "
                                          f"in metadata.version {name}: " + "; ".join(dict.fromkeys(losses)))
        return out

    def write_snapshot(
        self,
        directory: str | os.PathLike[str],
        snapshot_id=None,
        *,
        last_contained_log_timestamp: int | None = None,
        metadata_version: int | None = None,
        kraft_version: int | None = None,
        voters: dict[str, Any] | None | bool = True,
        time_ms: int | None = None,
        batch_records: int = 1024,
    ) -> Path:
        """Writes this image as a KRaft snapshot ``<end offset>-<epoch>.checkpoint`` in
        ``directory`` and returns its path.

        ``snapshot_id`` defaults to the provenance (end offset = last offset + 1, its epoch);
        ``last_contained_log_timestamp`` to the provenance's time. kraft.version and the voter
        set default to the image's (from KRaftVersion/Voters control records); pass
        ``voters=None`` to leave the voter set out. Every batch timestamp is ``time_ms``,
        by default the last contained log timestamp, so that the same image always gives
        the same bytes. Records go to the writer in lists of ``batch_records`` (Kafka's
        ``SnapshotEmitter`` uses 1024)."""
        from kraftkit.metadata.snapshot import SnapshotId, SnapshotWriter

        if snapshot_id is None:
            if self.provenance.offset < 0:
                raise KraftkitError("the image has no provenance; pass a snapshot id")
            snapshot_id = SnapshotId(self.provenance.end_offset, self.provenance.epoch)
        ts = self.provenance.timestamp if last_contained_log_timestamp is None else last_contained_log_timestamp
        kv = (self.kraft_version or 0) if kraft_version is None else kraft_version
        if voters is True:
            voters = self.voters if kv >= 1 else None
        voters_value = None if not voters else encode_control_record(KRAFT_VOTERS, voters)
        records = [encode_metadata_record(k, v, d) for k, v, d in self.snapshot_records(metadata_version)]
        with SnapshotWriter(directory, snapshot_id, last_contained_log_timestamp=ts, kraft_version=kv,
                            voters_value=voters_value, time_ms=ts if time_ms is None else time_ms) as w:
            for i in range(0, len(records), batch_records):
                w.append(records[i:i + batch_records])
        return w.final_path


_HANDLERS = {
    REGISTER_BROKER: MetadataImage._register_broker,
    UNREGISTER_BROKER: MetadataImage._unregister_broker,
    TOPIC: MetadataImage._topic,
    PARTITION: MetadataImage._partition,
    CONFIG: MetadataImage._config,
    PARTITION_CHANGE: MetadataImage._partition_change,
    FENCE_BROKER: MetadataImage._fence,
    UNFENCE_BROKER: MetadataImage._unfence,
    REMOVE_TOPIC: MetadataImage._remove_topic,
    DELEGATION_TOKEN: MetadataImage._token,
    USER_SCRAM_CREDENTIAL: MetadataImage._scram,
    FEATURE_LEVEL: MetadataImage._feature_level,
    CLIENT_QUOTA: MetadataImage._client_quota,
    PRODUCER_IDS: MetadataImage._producer_ids,
    BROKER_REGISTRATION_CHANGE: MetadataImage._broker_change,
    ACCESS_CONTROL_ENTRY: MetadataImage._acl,
    REMOVE_ACCESS_CONTROL_ENTRY: MetadataImage._remove_acl,
    NO_OP: MetadataImage._noop,
    ZK_MIGRATION_STATE: MetadataImage._zk_migration,
    REMOVE_USER_SCRAM_CREDENTIAL: MetadataImage._remove_scram,
    REMOVE_DELEGATION_TOKEN: MetadataImage._remove_token,
    REGISTER_CONTROLLER: MetadataImage._register_controller,
    CLEAR_ELR: MetadataImage._clear_elr,
    UNREGISTER_CONTROLLER: MetadataImage._unregister_controller,
}


def _merge(p: dict[str, Any], d: dict[str, Any]) -> None:
    """``PartitionRegistration.merge(PartitionChangeRecord)``, in place."""
    new_replicas = d.get("Replicas")
    new_dirs = d.get("Directories")
    if new_replicas is not None or new_dirs is not None:
        replicas = p["Replicas"] if new_replicas is None else list(new_replicas)
        if new_dirs and new_replicas is not None and len(new_dirs) != len(new_replicas):
            raise ReplayError(f"The lengths for replicas and directories do not match: {d}")
        p["Directories"] = _dirs(p["Directories"] if new_dirs is None else new_dirs, len(replicas))
        p["Replicas"] = replicas
    for k in ("Isr", "RemovingReplicas", "AddingReplicas", "EligibleLeaderReplicas", "LastKnownElr"):
        if d.get(k) is not None:
            p[k] = list(d[k])
    leader = d.get("Leader", -2)
    if leader != -2:
        p["Leader"] = leader
        p["LeaderEpoch"] += 1
    lrs = d.get("LeaderRecoveryState", -1)
    if lrs != -1:
        if lrs not in (0, 1):
            raise ReplayError(f"Unknown leader recovery state {lrs}")
        p["LeaderRecoveryState"] = lrs
    p["PartitionEpoch"] += 1


_SCHEMA_FIELDS: dict[int, dict[str, tuple[int, int]]] = {}


def _field_in(api_key: int, name: str, version: int) -> bool:
    if not _SCHEMA_FIELDS:
        from kraftkit._core import metadata_schema

        for m in metadata_schema()["metadata"]:
            _SCHEMA_FIELDS[m["api_key"]] = {f["name"]: f["versions"] for f in m["fields"]}
    lo, hi = _SCHEMA_FIELDS[api_key][name]
    return lo <= version <= hi


# How sections are rendered (uuid text, config and quota node names) is presentation, not the
# replay semantics this oracle checks: it uses the face's helpers.
from kraftkit.metadata.image import _config_node, _entity_node, _jsonable, _quota_sort  # noqa: E402


# ---------------------------------------------------------------------- loading


def replay_records(records: Iterable[tuple[int, int, dict[str, Any]]], image: MetadataImage | None = None) -> MetadataImage:
    """Replays (api_key, version, dict) records into ``image`` (a new one by default)."""
    img = MetadataImage() if image is None else image
    for i, (k, v, d) in enumerate(records):
        img.replay(k, v, d, i)
    return img


def load_snapshot(path: str | os.PathLike[str]) -> MetadataImage:
    """The image a snapshot file holds (provenance from its name and header)."""
    from kraftkit.metadata.snapshot import SnapshotReader
    from kraftkit.metadata.source import batches

    reader = SnapshotReader(path)
    img = MetadataImage()
    ts = -1
    for batch in batches(Path(path)):
        for offset, api_key, ver, data in decode_metadata_batch(batch):
            if api_key is None:
                if ver == SNAPSHOT_HEADER:
                    ts = data["LastContainedLogTimestamp"]
                img.replay_control(ver, data)
            else:
                img.replay(api_key, ver, data, offset)
    if img.pending_transaction is not None:
        raise ReplayError(f"{path}: snapshot ends inside a metadata transaction")
    sid = reader.snapshot_id
    if sid is not None:
        img.provenance = Provenance(sid.end_offset - 1, sid.epoch, ts)
    else:
        img.provenance = Provenance(-1, 0, ts)
    return img


def load_image(path: str | os.PathLike[str], at: int | None = None, *, use_snapshots: bool = True) -> MetadataImage:
    """The image at ``at`` (an exclusive end offset; default: the end of the log) of a
    log directory or ``__cluster_metadata-0`` directory: the newest snapshot whose end offset
    is at most ``at``, then the log's batches from the snapshot's end up to ``at``.
    A snapshot file gives its own image; a segment file is replayed alone.
    ``use_snapshots=False`` replays the log from its start (which must be offset 0)."""
    from kraftkit.log.log import list_segments
    from kraftkit.metadata.snapshot import list_snapshots
    from kraftkit.metadata.source import MetadataSourceError, batches, classify, metadata_dir

    p = Path(path)
    if p.is_file():
        f = classify(p)
        if p.suffix == ".checkpoint" or (f is not None and f.kind == "snapshot"):
            img = load_snapshot(p)
            if at is not None and at != img.provenance.end_offset:
                raise MetadataSourceError(f"{p}: a snapshot ending at {img.provenance.end_offset} has no image at {at}")
            return img
        if p.suffix == ".log":
            img = MetadataImage()
            _replay_batches(img, batches(p), at)
            return img
        raise MetadataSourceError(f"{p}: not a metadata log segment or snapshot")
    if not p.is_dir():
        raise MetadataSourceError(f"{p}: no such file or directory")
    d = metadata_dir(p)
    segs = list_segments(d)
    snaps = [s for s in list_snapshots(d) if at is None or s.end_offset <= at] if use_snapshots else []
    if not segs and not snaps:
        raise MetadataSourceError(f"{d}: no metadata log segments or snapshots")
    if snaps:
        img = load_snapshot(d / snaps[-1].file_name)
        start = snaps[-1].end_offset
    else:
        img = MetadataImage()
        start = 0
    if at is not None and at <= start:
        return img
    if not segs:
        if at is not None:
            raise MetadataSourceError(f"{d}: no log segments after the snapshot at {start}; cannot reach offset {at}")
        return img
    if segs[0] > start:
        raise MetadataSourceError(f"{d}: the log starts at offset {segs[0]}, after {start} (no snapshot covers the gap)")

    def log_batches():
        for i, base in enumerate(segs):
            if i + 1 < len(segs) and segs[i + 1] <= start:
                continue
            for batch in batches(d / f"{base:020d}.log"):
                if batch.last_offset < start:
                    continue
                yield batch

    # Replay allocates many small containers and frees none: the cyclic GC would only rescan
    # them over and over (a third of the time), so it is paused while replaying.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        end = _replay_batches(img, log_batches(), at, start)
    finally:
        if gc_was_enabled:
            gc.enable()
    if at is not None and end < at:
        raise MetadataSourceError(f"{d}: the log ends at offset {end}, below {at}")
    return img


def batch_ending_at(path: str | os.PathLike[str], offset: int):
    """The log batch whose last offset is ``offset - 1`` in a metadata partition directory
    (a snapshot may only end at a batch boundary). Raises ``MetadataSourceError`` otherwise."""
    from kraftkit.log.log import list_segments
    from kraftkit.metadata.source import MetadataSourceError, batches, metadata_dir

    d = metadata_dir(path)
    segs = [b for b in list_segments(d) if b < offset]
    if offset <= 0 or not segs:
        raise MetadataSourceError(f"{d}: no log batch ends at offset {offset}")
    for batch in batches(d / f"{segs[-1]:020d}.log"):
        if batch.last_offset + 1 == offset:
            return batch
        if batch.last_offset + 1 > offset:
            before = f"{batch.base_offset} (its start) or " if batch.base_offset > 0 else ""
            raise MetadataSourceError(f"{d}: offset {offset} is inside the batch {batch.base_offset}..{batch.last_offset}; "
                                      f"a snapshot must end at a batch boundary: use {before}{batch.last_offset + 1} (its end)")
    raise MetadataSourceError(f"{d}: offset {offset} is past the end of the log")


def _replay_batches(img: MetadataImage, it, at: int | None, start: int = 0) -> int:
    """Replays batches (records at or above ``start`` and below ``at``); returns the end offset reached."""
    end = start
    for batch in it:
        if at is not None and batch.base_offset >= at:
            break
        if batch.base_offset < start or (at is not None and batch.last_offset >= at):
            # a batch that straddles the start or the requested end: record by record
            for offset, api_key, ver, data in decode_metadata_batch(batch):
                if offset < start or (at is not None and offset >= at):
                    continue
                if api_key is None:
                    img.replay_control(ver, data)
                else:
                    img.replay(api_key, ver, data, offset)
                img.provenance = Provenance(offset, batch.partition_leader_epoch, batch.max_timestamp)
                end = offset + 1
        else:
            img.replay_batch(batch)
            end = batch.last_offset + 1
    return end
