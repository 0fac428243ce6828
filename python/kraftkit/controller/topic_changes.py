"""DeleteTopics and CreatePartitions for kraftkit's controller, decided with its
:class:`~kraftkit.controller.replication.ReplicationControlManager` as Kafka 4.4's ``ControllerApis``
and ``ReplicationControlManager`` decide them, sent directly or forwarded by a broker inside an Envelope.

DeleteTopics (topics by name before v6, by name or by topic id from v6):

* ``delete.topic.enable=false`` in the controller's static config: the whole request refused,
  INVALID_REQUEST "This version does not support topic deletion." below v3, else
  TOPIC_DELETION_DISABLED (every topic of the request listed with that code, no message);
* a v6 topic with neither a name nor an id: INVALID_REQUEST "Neither topic name nor id were
  specified."; with both: INVALID_REQUEST "You may not specify both topic name and topic id.";
* a name given more than once: INVALID_REQUEST "Duplicate topic name." (once); an id given more than
  once: INVALID_REQUEST "Duplicate topic id."; a name that maps to an id the request also gave:
  INVALID_REQUEST "The provided topic name maps to an ID that was already supplied." (and, as in
  Kafka, the id's own entry gets no answer);
* an unknown id: UNKNOWN_TOPIC_ID; an unknown name: UNKNOWN_TOPIC_OR_PARTITION (Kafka's default
  messages); ``__cluster_metadata`` is no topic of the image, so it is unknown too;
* each topic found: one RemoveTopicRecord (v0, its id), in the order Java's HashMap of the ids
  iterates. Its configs get no records of their own: replaying a RemoveTopicRecord drops the topic, its
  partitions and its TOPIC configs, in Kafka's image as in kraftkit's. Past 10000 records (Kafka's
  bounded list) a topic is answered UNKNOWN_SERVER_ERROR and not removed, as Kafka's catch-all does;
* the answers in a random order (Kafka shuffles them so that their positions say nothing); a topic
  refused by name carries the zero id, one refused by id a null name.

CreatePartitions:

* a name given more than once: INVALID_REQUEST "Duplicate topic name." (once, first); the others are
  decided in the order Java's HashSet of their names iterates;
* more than 10000 new partitions in all (counting the topics that exist and grow): POLICY_VIOLATION
  "Excessively large number of additional partitions per request." for the whole request; more than
  10000 topics: POLICY_VIOLATION "Unable to perform excessively large batch operation.";
* an unknown topic: UNKNOWN_TOPIC_OR_PARTITION (no message); a count equal to the current one:
  INVALID_PARTITIONS "Topic already has N partition(s)."; a smaller one: INVALID_PARTITIONS "The topic T
  currently has N partition(s); C would not be an increase.";
* manual assignments (non-null): exactly one per new partition (INVALID_REPLICA_ASSIGNMENT
  "Attempted to add A additional partition(s), but only M assignment(s) were specified."), each
  validated as CreateTopics validates its manual ones with the topic's replication factor (that of its
  first partition), at least one broker of each active;
* else the new partitions are placed by :mod:`kraftkit.controller.placement` as a new topic's would
  be: the topic's replication factor over the usable brokers. Like Kafka's ``StripedReplicaPlacer``
  (whose ``PlacementSpec`` carries the first new partition id but does not use it), the placement does
  not look at where the existing partitions are; a placement error is INVALID_REPLICATION_FACTOR with
  the placer's own message;
* the new partitions are numbered from the current count on, each a PartitionRecord at the version
  the finalized metadata.version writes (with Directories from 3.7-IV2), as CreateTopics writes them;
  ``ValidateOnly`` answers the same and writes nothing.

What differs from Kafka: no ACLs (TOPIC_AUTHORIZATION_FAILED is never answered), no controller
mutation quota; a node that is not the active controller answers NOT_CONTROLLER for the whole request
even when Kafka's would answer it without a write (only refused or unknown topics); a topic whose new
partitions fail half way (a placed partition whose brokers are all inactive) writes none of them
(Kafka keeps the records it had added for that topic).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

from kraftkit._core import encode_metadata_record
from kraftkit._kafka import REMOVE_TOPIC
from kraftkit.controller.cluster import ControllerError
from kraftkit.controller.configs import MAX_RECORDS, java_string_hash
from kraftkit.controller.placement import PlacementError, place
from kraftkit.controller.replication import ReplicationControlManager
from kraftkit.features.registry import registry
from kraftkit.metadata.image import MetadataImage
from kraftkit.protocol.messages import ERROR_MESSAGES, Errors

__all__ = ["create_partitions", "create_partitions_response", "delete_topics", "delete_topics_response"]

log = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)
MAX_REPLICAS = 32767
_K = TypeVar("_K", bound=Hashable)


class _Refused(Exception):
    """One topic refused: Kafka's error code and the message its exception carries (None: no message,
    as Kafka's ``ApiError.fromThrowable`` gives for an exception without one or with the default one)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _java_hash_order(keys: list[_K], hash32: Callable[[_K], int]) -> list[_K]:
    """The iteration order of a ``java.util.HashMap`` (default capacity) the distinct ``keys`` were
    put in, in order, given each key's ``hashCode``: by bucket, then by insertion within a bucket (a
    bucket of eight keys or more, which Java reorganizes, is not modelled: random topic ids make one
    as good as impossible)."""
    keys = list(dict.fromkeys(keys))
    cap = 16
    while len(keys) > cap * 3 // 4:
        cap *= 2

    def bucket(k: _K) -> int:
        h = hash32(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (cap - 1)

    return sorted(keys, key=bucket)


def _uuid_hash(u: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode``: the xor of the two halves of the xor of its two longs."""
    h = (u.int >> 64) ^ (u.int & 0xFFFFFFFFFFFFFFFF)
    return (h >> 32) ^ (h & 0xFFFFFFFF)


def _active(rc: ReplicationControlManager) -> None:
    if rc.cluster.sessions is None:
        raise ControllerError(Errors.NOT_CONTROLLER, "ClusterControlManager is not active.")


def _metadata_version(image: MetadataImage) -> Any:
    level = image.metadata_version
    if level is None:
        raise ControllerError(Errors.NOT_CONTROLLER, "the metadata log holds no metadata.version yet")
    return registry().metadata_version(level)


# ---------------------------------------------------------------------------------- DeleteTopics
def _deletable(name: str | None, topic_id: uuid.UUID, code: int, message: str | None) -> dict:
    return {"Name": name, "TopicId": topic_id, "ErrorCode": code, "ErrorMessage": message}


def delete_topics_response(
    body: Mapping, version: int, results: list[dict] | None, error: ControllerError | None = None
) -> dict:
    """A DeleteTopicsResponse: the per-topic ``results``, or when the whole request failed ``error``
    for every topic of the request, without a message (Kafka's getErrorResponse)."""
    if results is None:
        assert error is not None
        if version >= 6:
            topics = [(t.get("Name"), t.get("TopicId") or ZERO_UUID) for t in body.get("Topics") or []]
        else:
            topics = [(n, ZERO_UUID) for n in body.get("TopicNames") or []]
        results = [_deletable(n, i, error.code, None) for n, i in topics]
    return {"ThrottleTimeMs": 0, "Responses": results}


def delete_topics(
    rc: ReplicationControlManager, image: MetadataImage, body: Mapping, version: int
) -> tuple[list[bytes], list[dict]]:
    """The RemoveTopicRecords and the per-topic results of a DeleteTopicsRequest decoded at
    ``version``, or :class:`ControllerError` for the whole request."""
    if not rc.delete_topic_enable:
        if version < 3:
            raise ControllerError(Errors.INVALID_REQUEST, "This version does not support topic deletion.")
        raise ControllerError(Errors.TOPIC_DELETION_DISABLED, ERROR_MESSAGES[Errors.TOPIC_DELETION_DISABLED])
    _active(rc)
    results: list[dict] = []
    names: dict[str, None] = {}  # the names given once, in order
    dup_names: dict[str, None] = {}
    ids: dict[uuid.UUID, None] = {}
    dup_ids: dict[uuid.UUID, None] = {}

    def add_name(name: str) -> None:
        if name in dup_names or name in names:
            dup_names[name] = None
            names.pop(name, None)
        else:
            names[name] = None

    for name in (body.get("TopicNames") or []) if version < 6 else []:
        add_name(name)
    for t in (body.get("Topics") or []) if version >= 6 else []:
        name, tid = t.get("Name"), t.get("TopicId") or ZERO_UUID
        if name is None:
            if tid == ZERO_UUID:
                results.append(
                    _deletable(None, ZERO_UUID, Errors.INVALID_REQUEST, "Neither topic name nor id were specified.")
                )
            elif tid in dup_ids or tid in ids:
                dup_ids[tid] = None
                ids.pop(tid, None)
            else:
                ids[tid] = None
        elif tid == ZERO_UUID:
            add_name(name)
        else:
            results.append(
                _deletable(name, tid, Errors.INVALID_REQUEST, "You may not specify both topic name and topic id.")
            )
    for name in _java_hash_order(list(dup_names), java_string_hash):
        results.append(_deletable(name, ZERO_UUID, Errors.INVALID_REQUEST, "Duplicate topic name."))
    for tid in _java_hash_order(list(dup_ids), _uuid_hash):
        results.append(_deletable(None, tid, Errors.INVALID_REQUEST, "Duplicate topic id."))
    id_to_name: dict[uuid.UUID, str] = {}
    for tid in _java_hash_order(list(ids), _uuid_hash):
        found = image.topics.get(tid)
        if found is None:
            results.append(_deletable(None, tid, Errors.UNKNOWN_TOPIC_ID, ERROR_MESSAGES[Errors.UNKNOWN_TOPIC_ID]))
        else:
            id_to_name[tid] = found.name
    for name in _java_hash_order(list(names), java_string_hash):
        tid_or_none = image.topic_ids.get(name)
        if tid_or_none is None:
            results.append(
                _deletable(
                    name,
                    ZERO_UUID,
                    Errors.UNKNOWN_TOPIC_OR_PARTITION,
                    ERROR_MESSAGES[Errors.UNKNOWN_TOPIC_OR_PARTITION],
                )
            )
        elif tid_or_none in dup_ids or tid_or_none in id_to_name:
            dup_ids[tid_or_none] = None
            id_to_name.pop(tid_or_none, None)
            results.append(
                _deletable(
                    name,
                    tid_or_none,
                    Errors.INVALID_REQUEST,
                    "The provided topic name maps to an ID that was already supplied.",
                )
            )
        else:
            id_to_name[tid_or_none] = name
    records: list[bytes] = []
    summary = []
    for tid in _java_hash_order(list(id_to_name), _uuid_hash):
        name = id_to_name[tid]
        if len(records) >= MAX_RECORDS:  # Kafka's bounded list throws; its catch-all answers this
            log.error("Unexpected deleteTopics error for %s: more than %d records", tid, MAX_RECORDS)
            results.append(_deletable(name, tid, Errors.UNKNOWN_SERVER_ERROR, None))
            summary.append(f"{name}: UNKNOWN_SERVER_ERROR")
            continue
        records.append(encode_metadata_record(REMOVE_TOPIC, 0, {"TopicId": tid}))
        results.append(_deletable(name, tid, Errors.NONE, None))
        summary.append(f"{name}: SUCCESS")
    if summary:
        log.info("DeleteTopics result(s): %s", ", ".join(summary))
    rc.random.shuffle(results)
    return records, results


# ---------------------------------------------------------------------------------- CreatePartitions
def _partitions_result(name: str, code: int = Errors.NONE, message: str | None = None) -> dict:
    return {"Name": name, "ErrorCode": code, "ErrorMessage": message}


def create_partitions_response(body: Mapping, results: list[dict] | None, error: ControllerError | None = None) -> dict:
    """A CreatePartitionsResponse: the per-topic ``results``, or when the whole request failed ``error``
    for every topic of the request (Kafka's getErrorResponse)."""
    if results is None:
        assert error is not None
        results = [_partitions_result(t.get("Name") or "", error.code, error.message) for t in body.get("Topics") or []]
    return {"ThrottleTimeMs": 0, "Results": results}


def create_partitions(
    rc: ReplicationControlManager, image: MetadataImage, body: Mapping
) -> tuple[list[bytes], list[dict]]:
    """The PartitionRecords (none with ``ValidateOnly``) and the per-topic results of a
    CreatePartitionsRequest, or :class:`ControllerError` for the whole request."""
    _active(rc)
    mv = _metadata_version(image)
    topics = list(body.get("Topics") or [])
    counts = Counter(t.get("Name") or "" for t in topics)
    results = [
        _partitions_result(name, Errors.INVALID_REQUEST, "Duplicate topic name.")
        for name in _java_hash_order([n for n in counts if counts[n] > 1], java_string_hash)
    ]
    by_name = {t.get("Name") or "": t for t in topics if counts[t.get("Name") or ""] == 1}
    # ControllerApis's HashSet of the names (every distinct name went in; the duplicates came out)
    wanted = [by_name[n] for n in _java_hash_order(list(counts), java_string_hash) if n in by_name]
    _check_total_partitions(image, wanted)
    if len(wanted) > MAX_RECORDS:  # Kafka's bounded list of results
        raise ControllerError(Errors.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
    records: list[bytes] = []
    for t in wanted:
        name = t.get("Name") or ""
        before = len(records)
        try:
            _create_partitions(rc, image, mv, t, records)
        except _Refused as e:
            del records[before:]
            results.append(_partitions_result(name, e.code, e.message))
        except ValueError as e:  # a record the codec cannot write
            del records[before:]
            results.append(_partitions_result(name, Errors.INVALID_REQUEST, f"Topic '{name}' cannot be written: {e}"))
        else:
            results.append(_partitions_result(name))
    summary = ", ".join(
        f"{r['Name']}: "
        + ("SUCCESS" if r["ErrorCode"] == Errors.NONE else f"{Errors(r['ErrorCode']).name} ({r['ErrorMessage']})")
        for r in results
    )
    if body.get("ValidateOnly"):
        log.info("Validate-only CreatePartitions result(s): %s", summary)
        return [], results
    log.info("CreatePartitions result(s): %s", summary)
    return records, results


def _check_total_partitions(image: MetadataImage, topics: list[Mapping]) -> None:
    """Kafka 4.4's ``validateTotalNumberOfPartitions`` for CreatePartitions: the partitions the existing
    topics would gain (a negative count, an unknown topic or no increase adds none) are at most 10000."""
    total = 0
    for t in topics:
        count = t.get("Count", 0)
        if count < 0:
            continue
        found = image.topic(t.get("Name") or "")
        if found is None:
            continue
        more = count - len(found.partitions)
        if more <= 0:
            continue
        total += more
        if total > MAX_RECORDS:
            raise ControllerError(
                Errors.POLICY_VIOLATION, "Excessively large number of additional partitions per request."
            )


def _create_partitions(
    rc: ReplicationControlManager, image: MetadataImage, mv: Any, topic: Mapping, records: list[bytes]
) -> None:
    """Appends the PartitionRecords of one topic's new partitions to ``records``, or :class:`_Refused`."""
    name, count = topic.get("Name") or "", topic.get("Count", 0)
    found = image.topic(name)
    if found is None:
        raise _Refused(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    current = len(found.partitions)
    if count == current:
        raise _Refused(Errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if count < current:
        raise _Refused(
            Errors.INVALID_PARTITIONS,
            f"The topic {name} currently has {current} partition(s); {count} would not be an increase.",
        )
    additional = count - current
    assignments = topic.get("Assignments")
    if assignments is not None and len(assignments) != additional:
        raise _Refused(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {additional} additional partition(s), but only {len(assignments)} assignment(s) "
            "were specified.",
        )
    if not found.partitions:  # (a TopicRecord without PartitionRecords: only a hand-made log has one)
        log.error("Invalid state: topic %s appears to have no partitions.", name)
        raise _Refused(Errors.UNKNOWN_SERVER_ERROR)
    # the replication factor of its first partition (Kafka's map of them starts at partition 0)
    rf = len(found.partitions[min(found.partitions)]["Replicas"])
    if rf > MAX_REPLICAS:
        log.error("Invalid replication factor %d: expected a number equal to less than %d", rf, MAX_REPLICAS)
        raise _Refused(Errors.UNKNOWN_SERVER_ERROR)
    if assignments is not None:
        placed = []
        for i, a in enumerate(assignments):
            replicas = list(a.get("BrokerIds") or [])
            try:
                rc.validate_manual(image, replicas, rf)
            except ControllerError as e:
                raise _Refused(e.code, e.message) from None
            if not any(rc.is_active(b) for b in replicas):
                raise _Refused(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"All brokers specified in the manual partition assignment for partition {current + i} "
                    "are fenced or in controlled shutdown.",
                )
            placed.append(replicas)
    else:
        try:
            placed = place(rc.random, rc.usable_brokers(image), additional, rf)
        except PlacementError as e:
            raise _Refused(Errors.INVALID_REPLICATION_FACTOR, str(e)) from None
    for i, replicas in enumerate(placed):
        if not any(rc.is_active(b) for b in replicas):
            raise _Refused(
                Errors.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): All brokers are currently fenced or in "
                "controlled shutdown.",
            )
        records.append(rc.partition_record(mv, found.id, current + i, replicas))
