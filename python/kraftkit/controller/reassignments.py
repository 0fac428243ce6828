"""Partition reassignments on kraftkit's controller: AlterPartitionReassignments (KIP-455) and
ListPartitionReassignments, decided as Kafka 4.4's ``ReplicationControlManager`` decides them. Each
change is one :class:`~kraftkit.controller.partition_change.PartitionChange` of the partition.

* **A reassignment** to the target replicas ``T`` of a partition whose replicas are ``R``: the
  replicas become ``T`` followed by the replicas it removes (``R - T``, ascending), ``AddingReplicas``
  the replicas it adds (``T - R``, ascending) and ``RemovingReplicas`` ``R - T`` (each set only when
  not empty: a request that adds or removes nothing leaves a reassignment in progress as it is). The
  change completes at once when the ISR already allows it (a reordering of the replicas, say);
  otherwise the partition's leader completes it with the AlterPartition that takes every adding
  replica into the ISR (:meth:`~kraftkit.controller.partitions.PartitionControlManager.alter_partition`).
  The election is the ONLINE one whatever the topic's ``unclean.leader.election.enable``.
* **A cancellation** (``Replicas`` null) of a reassignment in progress: the replicas without the
  adding ones, the ISR without them too; when that leaves the ISR empty its first remaining replica
  is the ISR, an unclean election, refused (INVALID_REPLICA_ASSIGNMENT) unless the topic allows
  unclean elections. NO_REASSIGNMENT_IN_PROGRESS when none is.
* **Validation**, per partition and in this order: UNKNOWN_TOPIC_OR_PARTITION for an unknown topic or
  partition; INVALID_REPLICA_ASSIGNMENT for an empty replica list, a broker that is not registered or
  named twice (Kafka 4.4 also refuses a broker whose log directories are all cordoned: kraftkit's
  controller does not track cordoned directories, for CreateTopics neither); INVALID_REPLICATION_FACTOR
  when ``AllowReplicationFactorChange`` (v1; true before) is false and the number of target replicas
  differs from the partition's replication factor (its target's, while a reassignment is in progress).
  Each partition is answered on its own; the records of those that succeeded commit together. One
  write holds at most 10000 records: a partition whose record would pass that is answered
  UNKNOWN_SERVER_ERROR (Kafka's bounded record list).
* **The answer** echoes ``AllowReplicationFactorChange``; the top-level ErrorCode is NONE and
  ErrorMessage null (an error of the whole request, NOT_CONTROLLER say, is set there by the caller).
  A request naming no topic is answered at once, as Kafka's ``QuorumController`` answers it.
* **ListPartitionReassignments** reads the committed image: with ``Topics`` null every partition
  being reassigned (topics in the image's order, partitions ascending; Kafka's order is that of its
  hash map of reassigning topics, which no client relies on), else the named partitions
  of the named topics that are being reassigned, in the order asked (unknown topics and partitions
  are left out); each with its Replicas, AddingReplicas and RemovingReplicas.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kraftkit.controller.cluster import ControllerError
from kraftkit.controller.configs import MAX_RECORDS
from kraftkit.controller.partition_change import Election, PartitionChange
from kraftkit.controller.partitions import PartitionControlManager
from kraftkit.features.registry import MetadataVersion
from kraftkit.metadata.image import MetadataImage, Topic
from kraftkit.protocol import types as t
from kraftkit.protocol.messages import Errors

__all__ = [
    "PartitionReassignments",
    "in_progress",
    "plan_cancellation",
    "plan_reassignment",
    "reassignment_replicas",
    "revert",
]

log = logging.getLogger(__name__)


def in_progress(partition: Mapping[str, Any]) -> bool:
    """Kafka's ``isReassignmentInProgress``: the partition is adding or removing replicas."""
    return bool(partition["AddingReplicas"]) or bool(partition["RemovingReplicas"])


def reassignment_replicas(current: Sequence[int], target: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """Kafka's ``PartitionReassignmentReplicas`` of a move from ``current`` to ``target``: (replicas,
    adding, removing), adding and removing in ascending order (Java's ``TreeSet``)."""
    removing = sorted(set(current) - set(target))
    adding = sorted(set(target) - set(current))
    return [*target, *removing], adding, removing


def revert(partition: Mapping[str, Any]) -> tuple[list[int], list[int], bool]:
    """Kafka's ``PartitionReassignmentRevert``: (replicas, ISR, unclean) once the reassignment in
    progress is cancelled, or :class:`ControllerError` when it added every replica."""
    adding = set(partition["AddingReplicas"])
    replicas = [r for r in partition["Replicas"] if r not in adding]
    isr = [r for r in partition["Isr"] if r not in adding]
    if isr:
        return replicas, isr, False
    if not replicas:
        raise ControllerError(
            Errors.INVALID_REPLICA_ASSIGNMENT, "Invalid replica assignment: addingReplicas contains all replicas."
        )
    return replicas, [replicas[0]], True


def plan_reassignment(b: PartitionChange, target: Sequence[int]) -> None:
    """Sets the targets of ``b`` (a partition's change) for a reassignment to ``target``, as Kafka's
    ``changePartitionReassignment`` does: the replicas when they change, adding and removing when not
    empty (else they stay as they are), the ONLINE election."""
    current = list(b.partition["Replicas"])
    replicas, adding, removing = reassignment_replicas(current, target)
    b.election = Election.ONLINE
    if replicas != current:
        b.target_replicas = replicas
    if removing:
        b.target_removing = removing
    if adding:
        b.target_adding = adding


def plan_cancellation(b: PartitionChange, unclean_allowed: bool, where: str) -> None:
    """Sets the targets of ``b`` for the cancellation of the partition's reassignment, as Kafka's
    ``cancelPartitionReassignment`` does (``where``: ``topic:partition`` for the refusals), or
    :class:`ControllerError`: NO_REASSIGNMENT_IN_PROGRESS, or INVALID_REPLICA_ASSIGNMENT when it
    needs an unclean election the topic does not allow."""
    if not in_progress(b.partition):
        # (Kafka's message is the error's own: the answer carries none)
        raise ControllerError(Errors.NO_REASSIGNMENT_IN_PROGRESS, "")
    replicas, isr, unclean = revert(b.partition)
    if unclean and not unclean_allowed:
        raise ControllerError(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"Unable to revert partition assignment for {where} because it would require an unclean leader election.",
        )
    b.election = Election.UNCLEAN if unclean_allowed else Election.ONLINE
    b.target_isr, b.target_replicas = isr, replicas
    b.target_removing, b.target_adding = [], []


class PartitionReassignments:
    """AlterPartitionReassignments and ListPartitionReassignments on the active controller (see the
    module's rules); partition changes go through ``partitions``' builder."""

    def __init__(self, partitions: PartitionControlManager) -> None:
        self.partitions = partitions

    # ------------------------------------------------------------------ AlterPartitionReassignments
    def alter_reassignments(
        self, image: MetadataImage, body: t.AlterPartitionReassignmentsRequest
    ) -> tuple[list[bytes], t.AlterPartitionReassignmentsResponse]:
        """The records and the answer of an AlterPartitionReassignmentsRequest (per-partition errors;
        :class:`ControllerError` only when the log holds no metadata.version)."""
        allow_rf_change = bool(body.get("AllowReplicationFactorChange", True))
        topics = body.get("Topics") or []
        answer: t.AlterPartitionReassignmentsResponse = {
            "ThrottleTimeMs": 0,
            "AllowReplicationFactorChange": allow_rf_change,
            "ErrorCode": Errors.NONE,
            "ErrorMessage": None,
            "Responses": [],
        }
        records: list[bytes] = []
        if not topics:
            return records, answer
        mv = self.partitions._mv(image)
        done = total = 0
        for td in topics:
            name = td.get("Name") or ""
            parts: list[
                t.AlterPartitionReassignmentsResponseReassignableTopicResponseReassignablePartitionResponse
            ] = []
            answer["Responses"].append({"Name": name, "Partitions": parts})
            for pd in td.get("Partitions") or []:
                pid = pd.get("PartitionIndex", 0)
                code: int = Errors.NONE
                message: str | None = None
                try:
                    record = self._alter_one(image, mv, name, pid, pd.get("Replicas"), allow_rf_change)
                    if record is not None:
                        if len(records) >= MAX_RECORDS:
                            # Kafka's bounded record list refuses the record: an unexpected error, no message
                            code = Errors.UNKNOWN_SERVER_ERROR
                            log.info("Unable to alter partition reassignment for %s:%d: the request already holds "
                                     "%d records", name, pid, MAX_RECORDS)  # fmt: skip
                        else:
                            records.append(record)
                    if code == Errors.NONE:
                        done += 1
                except ControllerError as e:
                    log.info("Unable to alter partition reassignment for %s:%d because of an %s error: %s", name,
                             pid, Errors(e.code).name, e.message)  # fmt: skip
                    code, message = e.code, e.message or None
                total += 1
                parts.append({"PartitionIndex": pid, "ErrorCode": code, "ErrorMessage": message})
        log.info("Successfully altered %d out of %d partition reassignment(s).", done, total)
        return records, answer

    def _alter_one(
        self, image: MetadataImage, mv: MetadataVersion, name: str, pid: int, target: list[int] | None,
        allow_rf_change: bool,
    ) -> bytes | None:  # fmt: skip
        topic = image.topic(name)
        if topic is None:
            raise ControllerError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
        partition = topic.partitions.get(pid)
        if partition is None:
            raise ControllerError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{pid}.")
        if target is None:
            change = self._cancel(image, mv, topic, pid)
        else:
            change = self._change(image, mv, topic, pid, list(target), allow_rf_change)
        return None if change is None else self.partitions._encode(mv, change)

    def _cancel(self, image: MetadataImage, mv: MetadataVersion, topic: Topic, pid: int) -> dict[str, Any] | None:
        """Kafka's ``cancelPartitionReassignment``."""
        b = self.partitions._builder(image, mv, topic, pid)
        plan_cancellation(b, self.partitions.unclean_enabled(image, topic.name), f"{topic.name}:{pid}")
        return b.build()

    def _change(
        self, image: MetadataImage, mv: MetadataVersion, topic: Topic, pid: int, target: list[int],
        allow_rf_change: bool,
    ) -> dict[str, Any] | None:  # fmt: skip
        """Kafka's ``changePartitionReassignment``."""
        partition = topic.partitions[pid]
        self.partitions.replication.validate_manual(image, target, None)
        if not allow_rf_change:
            if in_progress(partition):
                rf = len(set(partition["Replicas"]) - set(partition["RemovingReplicas"]))
            else:
                rf = len(partition["Replicas"])
            if rf != len(target):
                raise ControllerError(
                    Errors.INVALID_REPLICATION_FACTOR, f"The replication factor is changed from {rf} to {len(target)}"
                )
        b = self.partitions._builder(image, mv, topic, pid)
        plan_reassignment(b, target)
        return b.build()

    # ------------------------------------------------------------------ ListPartitionReassignments
    def list_reassignments(
        self, image: MetadataImage, body: t.ListPartitionReassignmentsRequest
    ) -> t.ListPartitionReassignmentsResponse:
        """The answer of a ListPartitionReassignmentsRequest from ``image`` (the committed one)."""
        answer: t.ListPartitionReassignmentsResponse = {
            "ThrottleTimeMs": 0,
            "ErrorCode": Errors.NONE,
            "ErrorMessage": None,
            "Topics": [],
        }
        asked = body.get("Topics")
        if asked is None:
            for topic in image.topics.values():
                self._list_topic(answer, topic, sorted(topic.partitions))
        else:
            for td in asked:
                topic = image.topic(td.get("Name") or "")
                if topic is not None:
                    self._list_topic(answer, topic, td.get("PartitionIndexes") or [])
        return answer

    @staticmethod
    def _list_topic(answer: t.ListPartitionReassignmentsResponse, topic: Topic, pids: Sequence[int]) -> None:
        parts: list[t.ListPartitionReassignmentsResponseOngoingTopicReassignmentOngoingPartitionReassignment] = []
        for pid in pids:
            p = topic.partitions.get(pid)
            if p is None or not in_progress(p):
                continue
            parts.append({
                "PartitionIndex": pid,
                "Replicas": list(p["Replicas"]),
                "AddingReplicas": list(p["AddingReplicas"]),
                "RemovingReplicas": list(p["RemovingReplicas"]),
            })  # fmt: skip
        if parts:
            answer["Topics"].append({"Name": topic.name, "Partitions": parts})
