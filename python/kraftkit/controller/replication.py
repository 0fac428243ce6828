"""Kafka's ``ReplicationControlManager`` for kraftkit's controller: topic creation (CreateTopics).

A CreateTopicsRequest, sent directly or forwarded by a broker inside an Envelope, is decided as
Kafka 4.4's ``ControllerApis.createTopics`` and ``ReplicationControlManager.createTopics`` decide it:

* a name given more than once: INVALID_REQUEST "Duplicate topic name." (each copy left out);
  ``__cluster_metadata``: INVALID_REQUEST, its creation is prohibited;
* ``Topic.validate``: INVALID_TOPIC_EXCEPTION for the empty name, ``.``, ``..``, a name longer than 249
  characters or one with characters other than ASCII alphanumerics, ``.``, ``_`` and ``-``; a name
  that differs from an existing topic's only by ``.`` against ``_``: INVALID_TOPIC_EXCEPTION (it
  collides); an existing name: TOPIC_ALREADY_EXISTS;
* a config with a null value: INVALID_CONFIG; a value over 32767 characters: INVALID_CONFIG; then
  the configs are checked as Kafka's controller checks a topic's configs (INVALID_CONFIG with Kafka's
  message for an unknown name, a value of the wrong type or one its validator refuses:
  :mod:`kraftkit.controller.topic_configs`), before the topic's placement;
* with manual assignments, ReplicationFactor and NumPartitions must be -1, each partition given
  once, its brokers registered, not with all their log directories cordoned (KIP-1066), distinct,
  as many for every partition, at least one of them active (unfenced, not in controlled shutdown),
  the partitions 0..n-1; else a replication factor of -1 (the default) or > 0
  (INVALID_REPLICATION_FACTOR), a partition count of -1 (the default) or > 0 (INVALID_PARTITIONS),
  the replicas placed by :mod:`kraftkit.controller.placement` over the brokers that are not shutting
  down and have a directory that is not cordoned (INVALID_REPLICATION_FACTOR when they cannot be, or
  when a partition would have no active replica);
* a request for more than 10000 partitions in all (Kafka 4.4's ``validateTotalNumberOfPartitions``,
  before any other check) or whose records would pass 10000 (Kafka's bounded record list, checked
  before each topic's placement): POLICY_VIOLATION for every topic, so a request for two billion
  partitions costs nothing.

A created topic is a TopicRecord (a random id), then its ConfigRecords (resource type TOPIC, in
the order Kafka's HashMap of them iterates; with eligible leader replicas enabled, a
``min.insync.replicas`` among them is followed by a ClearElrRecord of the topic), then a
PartitionRecord per partition at the version the finalized metadata.version writes: ISR = the replicas that are active, leader = the first of
the ISR, leader and partition epoch 0, and (from metadata.version 3.7-IV2, directory assignment)
each replica's log directory: its broker's only directory when it registered exactly one, else
Kafka's UNASSIGNED id (MIGRATING when it registered none). ``validateOnly`` answers the same and
writes nothing. A success lists the topic's effective configs, sorted by name (the ``Configs`` of
the CreatableTopicResult, from version 5): its own, else the controller's dynamic, cluster-wide
dynamic or static broker config of a synonym, else Kafka's default, each with its ConfigSource.

What differs from Kafka: there is no CreateTopicPolicy, no controller mutation quota and no ACLs
(every principal may create and describe: TopicConfigErrorCode is always NONE).
"""

from __future__ import annotations

import logging
import random
import uuid
from collections import Counter
from collections.abc import Mapping
from typing import Any

from kraftkit._core import encode_metadata_record
from kraftkit._kafka import CLEAR_ELR, CONFIG, PARTITION, TOPIC
from kraftkit.controller.cluster import ClusterControlManager, ControllerError
from kraftkit.controller.configs import MAX_RECORDS, MAX_VALUE_CHARS, java_hash_order
from kraftkit.controller.configs import TOPIC as TOPIC_RESOURCE
from kraftkit.controller.placement import PlacementError, UsableBroker, place
from kraftkit.controller.topic_configs import node_layers, topic_schema, validate_topic_configs
from kraftkit.features.registry import registry
from kraftkit.metadata.image import MetadataImage, uuid_text
from kraftkit.protocol.messages import Errors

__all__ = ["CLUSTER_METADATA_TOPIC", "ReplicationControlManager", "create_topics_response", "validate_topic_name"]

log = logging.getLogger(__name__)

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
MAX_NAME_LENGTH = 249
#: Kafka's DirectoryId.MIGRATING and DirectoryId.UNASSIGNED
MIGRATING_DIR = uuid.UUID(int=0)
UNASSIGNED_DIR = uuid.UUID(int=1)
_JAVA_SPACE = "".join(map(chr, range(33)))  # what Java's String.trim strips
_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def validate_topic_name(name: str) -> str | None:
    """Why ``name`` is not a valid topic name (Kafka's ``Topic.validate`` message), None if it is."""
    if name == "":
        reason = "the empty string is not allowed"
    elif name == ".":
        reason = "'.' is not allowed"
    elif name == "..":
        reason = "'..' is not allowed"
    elif len(name.encode("utf-16-le", "surrogatepass")) // 2 > MAX_NAME_LENGTH:  # Java counts UTF-16 units
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    elif not set(name) <= _LEGAL:
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return None
    return f"Topic name is invalid: {reason}"


def _unify(name: str) -> str:
    return name.replace(".", "_")


def _error(name: str, code: int, message: str | None) -> dict:
    return {
        "Name": name,
        "TopicId": uuid.UUID(int=0),
        "ErrorCode": code,
        "ErrorMessage": message,
        "TopicConfigErrorCode": Errors.NONE,
        "NumPartitions": -1,
        "ReplicationFactor": -1,
        "Configs": [],
    }


def create_topics_response(body: Mapping, results: list[dict] | None, error: ControllerError | None = None) -> dict:
    """A CreateTopicsResponse: the per-topic ``results``, or when the whole request failed
    (NOT_CONTROLLER, a timeout, a batch too large) ``error`` for every topic, as Kafka's getErrorResponse."""
    if results is None:
        assert error is not None
        results = [_error(t.get("Name") or "", error.code, error.message) for t in body.get("Topics") or []]
    return {"ThrottleTimeMs": 0, "Topics": results}


def _random_topic_id(taken: Mapping[uuid.UUID, Any]) -> uuid.UUID:
    """A random topic id as Kafka's ``Uuid.randomUuid`` makes one (not a reserved id, its text not
    starting with '-'), and not an existing topic's."""
    while True:
        u = uuid.uuid4()
        if u.int >= 100 and not uuid_text(u).startswith("-") and u not in taken:
            return u


def _unencodable(configs: list[Mapping]) -> str | None:
    """Why a config of a topic cannot be a ConfigRecord: a name or value over 32767 bytes in UTF-8
    (a record's string; Kafka's serializer fails on it), None if every one can."""
    for c in configs:
        for field in ("Name", "Value"):
            size = len((c.get(field) or "").encode("utf-8", "surrogatepass"))
            if size > MAX_VALUE_CHARS:
                return (
                    f"The configuration {field.lower()} is {size} bytes in UTF-8; a ConfigRecord holds at most 32767."
                )
    return None


def _int_config(config: Mapping[str, str], name: str, default: int, bound: int) -> int:
    raw = config.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if not 1 <= value < bound:
        log.error("%s=%r is not an integer in 1..%d: the controller uses %d", name, raw, bound - 1, default)
        return default
    return value


def _bool_config(config: Mapping[str, str], name: str, default: bool) -> bool:
    """A boolean as Kafka's ConfigDef reads one: ``true`` or ``false`` in any case, trimmed."""
    raw = config.get(name)
    if raw is None:
        return default
    value = str(raw).strip(_JAVA_SPACE).lower()
    if value not in ("true", "false"):
        log.error("%s=%r is neither true nor false: the controller uses %s", name, raw, str(default).lower())
        return default
    return value == "true"


class ReplicationControlManager:
    """The topics of the active controller: CreateTopics validated against the committed image and
    the registrations ``cluster`` keeps; ``static_config`` (the node's server.properties) gives
    ``num.partitions``, ``default.replication.factor`` and ``delete.topic.enable`` (Kafka's defaults,
    1, 1 and true, when absent: Kafka's controller takes them from its KafkaConfig, whose defaults
    they are); ``rng`` drives the placement. DeleteTopics and CreatePartitions use it too
    (:mod:`kraftkit.controller.topic_changes`)."""

    def __init__(
        self,
        cluster: ClusterControlManager,
        static_config: Mapping[str, str] | None = None,
        rng: random.Random | None = None,
        node_id: int | None = None,
    ) -> None:
        self.cluster = cluster
        #: this controller's id (its dynamic BROKER configs are a layer of a new topic's effective configs)
        self.node_id = node_id
        self.random = rng if rng is not None else random.Random()
        config = static_config or {}
        self.static_config: Mapping[str, str] = config
        self.default_partitions = _int_config(config, "num.partitions", 1, 2**31)
        self.default_replication_factor = _int_config(config, "default.replication.factor", 1, 2**15)
        #: ``delete.topic.enable`` (Kafka's default: true): DeleteTopics is refused when false
        self.delete_topic_enable = _bool_config(config, "delete.topic.enable", True)

    # ------------------------------------------------------------------ brokers
    def is_active(self, bid: int) -> bool:
        reg = self.cluster.brokers.get(bid)
        return reg is not None and not reg["Fenced"] and not reg["InControlledShutdown"]

    def usable_brokers(self, image: MetadataImage) -> list[UsableBroker]:
        """The brokers a placement may use: those with a session on the active controller that are
        not shutting down and have a log directory that is not cordoned (Kafka 4.4's
        ``BrokerHeartbeatManager.usableBrokers``), with their racks."""
        sessions = self.cluster.sessions or {}
        out = []
        for bid in sorted(sessions):
            s = sessions[bid]
            reg = self.cluster.brokers.get(bid)
            if reg is None or s.shutting_down or reg["InControlledShutdown"]:
                continue
            if not self.has_uncordoned_dirs(image, bid):
                continue
            out.append(UsableBroker(bid, (image.brokers.get(bid) or {}).get("Rack"), s.fenced))
        return out

    @staticmethod
    def has_uncordoned_dirs(image: MetadataImage, bid: int) -> bool:
        """Kafka 4.4's ``BrokerRegistration.hasUncordonedDirs``: the broker registered no log directory,
        or no cordoned ones (KIP-1066), or one of its directories is not cordoned."""
        b = image.brokers.get(bid) or {}
        dirs, cordoned = b.get("LogDirs") or [], b.get("CordonedLogDirs")
        return not dirs or cordoned is None or bool(set(dirs) - set(cordoned))

    def default_dir(self, bid: int) -> uuid.UUID:
        """Kafka's ``ClusterControlManager.defaultDir``: the broker's only log directory, else UNASSIGNED
        (MIGRATING when it registered none; UNASSIGNED when it is not registered)."""
        reg = self.cluster.brokers.get(bid)
        if reg is None:
            return UNASSIGNED_DIR
        dirs = reg["LogDirs"]
        if not dirs:
            return MIGRATING_DIR
        return dirs[0] if len(dirs) == 1 else UNASSIGNED_DIR

    # ------------------------------------------------------------------ CreateTopics
    def create_topics(self, image: MetadataImage, body: Mapping) -> tuple[list[bytes], list[dict]]:
        """The records (none with ``validateOnly``) and the per-topic results of a CreateTopicsRequest,
        or :class:`ControllerError` for the whole request."""
        if self.cluster.sessions is None:
            raise ControllerError(Errors.NOT_CONTROLLER, "ClusterControlManager is not active.")
        level = image.metadata_version
        if level is None:
            raise ControllerError(Errors.NOT_CONTROLLER, "the metadata log holds no metadata.version yet")
        mv = registry().metadata_version(level)
        topics = list(body.get("Topics") or [])
        counts = Counter(t.get("Name") or "" for t in topics)
        # ControllerApis.createTopics: the duplicates and __cluster_metadata never reach the manager
        wanted = [t for t in topics if counts[t.get("Name") or ""] == 1 and t.get("Name") != CLUSTER_METADATA_TOPIC]
        self._check_total_partitions(wanted)
        records, results = self._create(image, mv, wanted)
        for name in dict.fromkeys(t.get("Name") or "" for t in topics):
            if counts[name] > 1:
                results.append(_error(name, Errors.INVALID_REQUEST, "Duplicate topic name."))
            elif name == CLUSTER_METADATA_TOPIC:
                msg = f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."
                results.append(_error(name, Errors.INVALID_REQUEST, msg))
        summary = ", ".join(
            f"{r['Name']}: "
            + ("SUCCESS" if r["ErrorCode"] == Errors.NONE else f"{Errors(r['ErrorCode']).name} ({r['ErrorMessage']})")
            for r in results
        )
        if body.get("validateOnly"):
            log.info("Validate-only CreateTopics result(s): %s", summary)
            return [], results
        log.info("CreateTopics result(s): %s", summary)
        return records, results

    def _create(self, image: MetadataImage, mv: Any, topics: list[Mapping]) -> tuple[list[bytes], list[dict]]:
        errors: dict[str, tuple[int, str]] = {}
        existing = image.topic_ids
        colliding: dict[str, list[str]] = {}
        for name in existing:
            if "." in name or "_" in name:
                colliding.setdefault(_unify(name), []).append(name)
        for t in topics:
            name = t.get("Name") or ""
            why = validate_topic_name(name)
            if why is not None:
                errors[name] = (Errors.INVALID_TOPIC_EXCEPTION, why)
            if ("." in name or "_" in name) and _unify(name) in colliding:
                other = min(colliding[_unify(name)])
                errors[name] = (Errors.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {other}")
        for t in topics:
            name = t.get("Name") or ""
            if name in existing:
                errors[name] = (Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        configs: dict[str, dict[str, str]] = {}
        for t in topics:
            name = t.get("Name") or ""
            if name in errors:
                continue
            given = t.get("Configs") or []
            nulls = [c.get("Name") or "" for c in given if c.get("Value") is None]
            if nulls:
                errors[name] = (Errors.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}")
            elif any(len(c["Value"]) > MAX_VALUE_CHARS for c in given):
                errors[name] = (
                    Errors.INVALID_CONFIG,
                    "The configuration value cannot be added because it exceeds the maximum value size of 32767 bytes.",
                )
            elif (why := _unencodable(given)) is not None:
                errors[name] = (Errors.INVALID_CONFIG, why)
            else:
                configs[name] = {c.get("Name") or "": c["Value"] for c in given}
                try:  # ConfigurationControlManager.incrementalAlterConfig of the new topic's configs
                    validate_topic_configs(name, {}, configs[name], self.static_config, image.configs, self.node_id)
                except ControllerError as e:
                    errors[name] = (e.code, e.message)
        records: list[bytes] = []
        successes: dict[str, dict] = {}
        taken: dict[uuid.UUID, Any] = dict(image.topics)
        for t in topics:
            name = t.get("Name") or ""
            if name in errors:
                continue
            before = len(records)
            try:
                successes[name] = self._create_topic(image, mv, t, configs.get(name, {}), records, taken)
            except ControllerError as e:
                if e.code == Errors.POLICY_VIOLATION:
                    raise  # the whole request (Kafka's BoundedListTooLongException)
                errors[name] = (e.code, e.message)
            except ValueError as e:  # a record the codec cannot write (the checks above should prevent it)
                del records[before:]
                errors[name] = (Errors.INVALID_REQUEST, f"Topic '{name}' cannot be written: {e}")
        results = [
            _error(name, *errors[name]) if name in errors else successes[name]
            for name in (t.get("Name") or "" for t in topics)
        ]
        return records, results

    def _check_total_partitions(self, topics: list[Mapping]) -> None:
        """Kafka 4.4's ``validateTotalNumberOfPartitions``: the partitions the request asks for (the
        default for -1, a manual assignment's count; a non-positive count adds none) are at most 10000."""
        total = 0
        for t in topics:
            assignments = t.get("Assignments") or []
            parts = t.get("NumPartitions", -1)
            if assignments:
                total += len(assignments)
            elif parts == -1:
                total += self.default_partitions
            elif parts > 0:
                total += parts
            if total > MAX_RECORDS:
                raise ControllerError(Errors.POLICY_VIOLATION, "Excessively large number of partitions per request.")

    def _check_room(self, records: list[bytes], more: int) -> None:
        if len(records) + more > MAX_RECORDS:
            raise ControllerError(Errors.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")

    def _create_topic(
        self,
        image: MetadataImage,
        mv: Any,
        topic: Mapping,
        configs: Mapping[str, str],
        records: list[bytes],
        taken: dict[uuid.UUID, Any],
    ) -> dict:
        """Appends one topic's records to ``records``; its result, or :class:`ControllerError`."""
        name = topic.get("Name") or ""
        rf, parts = topic.get("ReplicationFactor", -1), topic.get("NumPartitions", -1)
        assignments = topic.get("Assignments") or []
        new: dict[int, list[int]] = {}
        # with eligible leader replicas enabled, a ConfigRecord of min.insync.replicas brings a ClearElrRecord
        isr_key = "min.insync.replicas"
        clear_elr = (
            (image.features.get("eligible.leader.replicas.version") or 0) >= 1
            and isr_key in configs
            and (image.configs.get((TOPIC_RESOURCE, name), {}).get(isr_key) != configs[isr_key])
        )
        if assignments:
            if rf != -1:
                raise ControllerError(
                    Errors.INVALID_REQUEST,
                    "A manual partition assignment was specified, but replication factor was not set to -1.",
                )
            if parts != -1:
                raise ControllerError(
                    Errors.INVALID_REQUEST,
                    "A manual partition assignment was specified, but numPartitions was not set to -1.",
                )
            self._check_room(records, 1 + len(configs) + clear_elr + len(assignments))
            size: int | None = None
            for a in assignments:
                index, replicas = a.get("PartitionIndex", 0), list(a.get("BrokerIds") or [])
                if index in new:
                    raise ControllerError(
                        Errors.INVALID_REPLICA_ASSIGNMENT,
                        f"Found multiple manual partition assignments for partition {index}",
                    )
                self.validate_manual(image, replicas, size)
                size = len(replicas)
                if not any(self.is_active(b) for b in replicas):
                    raise ControllerError(
                        Errors.INVALID_REPLICA_ASSIGNMENT,
                        f"All brokers specified in the manual partition assignment for partition {index} "
                        "are fenced or in controlled shutdown.",
                    )
                new[index] = replicas
            for i in range(len(new)):
                if i not in new:
                    raise ControllerError(
                        Errors.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"
                    )
        elif rf < -1 or rf == 0:
            raise ControllerError(
                Errors.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        elif parts < -1 or parts == 0:
            raise ControllerError(
                Errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
            )
        else:
            n = self.default_partitions if parts == -1 else parts
            r = self.default_replication_factor if rf == -1 else rf
            self._check_room(records, 1 + len(configs) + clear_elr + n)
            try:
                placed = place(self.random, self.usable_brokers(image), n, r)
            except PlacementError as e:
                raise ControllerError(
                    Errors.INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition {r} time(s): {e}"
                ) from None
            for i, replicas in enumerate(placed):
                if not any(self.is_active(b) for b in replicas):
                    raise ControllerError(
                        Errors.INVALID_REPLICATION_FACTOR,
                        f"Unable to replicate the partition {r} time(s): All brokers are currently fenced or in "
                        "controlled shutdown.",
                    )
                new[i] = replicas
        topic_id = _random_topic_id(taken)
        taken[topic_id] = name
        records.append(encode_metadata_record(TOPIC, 0, {"Name": name, "TopicId": topic_id}))
        current = image.configs.get((TOPIC_RESOURCE, name), {})
        for key in java_hash_order(list(configs)):
            if current.get(key) != configs[key]:
                records.append(
                    encode_metadata_record(
                        CONFIG,
                        0,
                        {"ResourceType": TOPIC_RESOURCE, "ResourceName": name, "Name": key, "Value": configs[key]},
                    )
                )
        if clear_elr:  # Kafka 4.4's createClearElrRecordsAsNeeded, as for a change of the topic's config
            records.append(encode_metadata_record(CLEAR_ELR, 0, {"TopicName": name}))
        for index in sorted(new):
            records.append(self.partition_record(mv, topic_id, index, new[index]))
        return {
            "Name": name,
            "TopicId": topic_id,
            "ErrorCode": Errors.NONE,
            "ErrorMessage": None,
            "TopicConfigErrorCode": Errors.NONE,
            "NumPartitions": len(new),
            "ReplicationFactor": len(new[0]),
            "Configs": topic_schema().created_configs(
                self.static_config, *node_layers(image.configs, self.node_id), configs
            ),
        }

    def partition_record(self, mv: Any, topic_id: uuid.UUID, index: int, replicas: list[int]) -> bytes:
        """The PartitionRecord of a new partition at the version ``mv`` writes: ISR = the active
        replicas (the caller checked that there is one), leader = the first of them, epochs 0, and
        from 3.7-IV2 each replica's :meth:`default_dir`."""
        isr = [b for b in replicas if self.is_active(b)]
        record: dict[str, Any] = {
            "PartitionId": index,
            "TopicId": topic_id,
            "Replicas": replicas,
            "Isr": isr,
            "RemovingReplicas": [],
            "AddingReplicas": [],
            "Leader": isr[0],
            "LeaderRecoveryState": 0,
            "LeaderEpoch": 0,
            "PartitionEpoch": 0,
        }
        if mv.supported("directory_assignment"):
            record["Directories"] = [self.default_dir(b) for b in replicas]
        return encode_metadata_record(PARTITION, mv.partition_record_version, record)

    def validate_manual(self, image: MetadataImage, replicas: list[int], size: int | None) -> None:
        """Kafka 4.4's ``validateManualPartitionAssignment`` (``size``: the replica count every partition must have)."""
        if not replicas:
            raise ControllerError(
                Errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
            )
        prev = None
        for b in sorted(replicas):
            if b not in self.cluster.brokers:
                raise ControllerError(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {b}, but no such broker is registered.",
                )
            if not self.has_uncordoned_dirs(image, b):
                raise ControllerError(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {b}, but all its log directories are cordoned.",
                )
            if b == prev:
                raise ControllerError(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {prev} more than once.",
                )
            prev = b
        if size is not None and len(replicas) != size:
            raise ControllerError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is "
                f"not consistent with previous partitions, which have {size} replica(s).",
            )
