"""Kafka's ``PartitionChangeBuilder``: the one PartitionChangeRecord (or none) that takes a partition
from what the committed image holds to a target ISR, replica set or leader, electing a leader the
way Kafka's controller does.

Every change of a partition's leadership or ISR goes through :class:`PartitionChange`: a broker
fenced, shutting down, unfenced or unregistered, an AlterPartition from a partition leader, an
ElectLeaders request, the preferred-leader rebalance. Its rules are Kafka 4.4's:

* **Election.** ONLINE keeps the current leader while it is acceptable and in the target ISR, else
  takes the first replica (in replica order) that is in the ISR (or, with an empty ISR, in the
  eligible leader replicas) and acceptable. PREFERRED tries the first replica before that. UNCLEAN
  (a topic with ``unclean.leader.election.enable``, or ElectLeaders UNCLEAN) falls back to any
  acceptable replica; the ISR is then just the new leader and, from 3.2-IV0, the leader is
  RECOVERING. With eligible leader replicas (KIP-966), a partition whose ISR and ELR are both empty
  may elect its last known leader (a "balanced recovery", unclean).
* **Epochs.** The record sets Leader (the leader epoch then goes up) when the leader changes, when a
  replica leaves the replica set, and, below metadata.version 3.6-IV0, when the ISR shrinks
  (KAFKA-15021); the partition epoch goes up with every record.
* **ISR.** An empty target ISR is written only with eligible leader replicas; otherwise the ISR
  keeps its last member and the partition goes leaderless (leader -1).
* **ELR.** With ELR on and the target ISR below the topic's effective ``min.insync.replicas``, the
  replicas leaving the ISR (not shut down uncleanly) join the ELR and the last known ELR; at or
  above it both are emptied. Their order is the iteration order of Java's ``HashSet`` of them, as
  Kafka writes it.
* **Reassignment.** A reassignment completes when the ISR (without the removing replicas) holds
  every adding replica, and every remaining replica when fewer are added than removed: the
  removing replicas leave the replicas and the ISR, adding and removing are emptied.
* **Directories** (from 3.7-IV2): each replica's assigned directory, the broker's default for a new one.

A record whose every field says "no change" is not written.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kraftkit.features.registry import MetadataVersion
from kraftkit.metadata.mv_levels import MV_3_6_IV0

__all__ = ["NO_LEADER", "NO_LEADER_CHANGE", "Election", "PartitionChange", "java_int_set_order", "merge"]

log = logging.getLogger(__name__)

NO_LEADER = -1
NO_LEADER_CHANGE = -2
#: LeaderRecoveryState values (RECOVERED, RECOVERING; -1: no change in a PartitionChangeRecord)
RECOVERED, RECOVERING, NO_RECOVERY_CHANGE = 0, 1, -1
#: Kafka's DirectoryId.LOST
LOST_DIR = uuid.UUID(int=2)


class Election(enum.Enum):
    PREFERRED = 0
    ONLINE = 1
    UNCLEAN = 2


def java_int_set_order(groups: Iterable[Iterable[int]]) -> list[int]:
    """The iteration order of a Java ``HashSet<Integer>`` made from the first group
    (``new HashSet<>(collection)``) and then given the other groups' members (``add``), as Kafka's
    controller builds its ELR sets: by bucket (an Integer's hash is the value, spread by
    ``h ^ (h >>> 16)``) in the table's final size, members of one bucket in insertion order."""
    members: list[int] = []
    seen: set[int] = set()
    capacity = 0
    for i, group in enumerate(groups):
        group = list(group)
        if i == 0:
            want = max(int(len(group) / 0.75) + 1, 16)
            capacity = 1
            while capacity < want:
                capacity *= 2
        for v in group:
            if v in seen:
                continue
            seen.add(v)
            members.append(v)
            if len(members) > capacity * 0.75:
                capacity *= 2
    if not members:
        return []

    def bucket(v: int) -> int:
        h = v & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    order = {v: i for i, v in enumerate(members)}
    return sorted(members, key=lambda v: (bucket(v), order[v]))


def merge(partition: Mapping[str, Any], change: Mapping[str, Any]) -> dict[str, Any]:
    """The partition after ``change`` (a PartitionChangeRecord's fields; absent or None: no change),
    as Kafka's ``PartitionRegistration.merge`` (and kraftkit's image) replays it."""
    p = dict(partition)
    for key in (
        "Replicas",
        "Isr",
        "RemovingReplicas",
        "AddingReplicas",
        "Directories",
        "EligibleLeaderReplicas",
        "LastKnownElr",
    ):
        if change.get(key) is not None:
            p[key] = list(change[key])
    leader = change.get("Leader", NO_LEADER_CHANGE)
    if leader != NO_LEADER_CHANGE:
        p["Leader"] = leader
        p["LeaderEpoch"] = partition["LeaderEpoch"] + 1
    recovery = change.get("LeaderRecoveryState", NO_RECOVERY_CHANGE)
    if recovery != NO_RECOVERY_CHANGE:
        p["LeaderRecoveryState"] = recovery
    p["PartitionEpoch"] = partition["PartitionEpoch"] + 1
    return p


class PartitionChange:
    """Builds the PartitionChangeRecord of one partition (``partition``: the image's dict of it).

    ``acceptable(broker)`` says whether a broker may lead (Kafka's ``LeaderAcceptor``: active, its
    directory for this partition online); ``min_isr`` is the topic's effective
    ``min.insync.replicas`` (at most its replication factor); ``elr`` whether eligible leader
    replicas are on; ``default_dir(broker)`` the directory of a replica new to the partition."""

    def __init__(
        self,
        partition: Mapping[str, Any],
        topic_id: uuid.UUID,
        partition_id: int,
        acceptable: Callable[[int], bool],
        mv: MetadataVersion,
        min_isr: int,
        *,
        elr: bool = False,
        election: Election = Election.ONLINE,
        default_dir: Callable[[int], uuid.UUID] | None = None,
    ) -> None:
        self.partition = partition
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.acceptable = acceptable
        self.mv = mv
        self.min_isr = min_isr
        self.elr_enabled = elr
        self.election = election
        self.default_dir = default_dir
        self.target_isr: list[int] = list(partition["Isr"])
        self.target_replicas: list[int] = list(partition["Replicas"])
        self.target_removing: list[int] = list(partition["RemovingReplicas"])
        self.target_adding: list[int] = list(partition["AddingReplicas"])
        self.target_elr: list[int] = list(partition["EligibleLeaderReplicas"])
        self.target_last_known_elr: list[int] = list(partition["LastKnownElr"])
        self.target_recovery: int = partition["LeaderRecoveryState"]
        self.unclean_shutdown: list[int] = []
        dirs = partition.get("Directories") or []
        self.target_dirs: dict[int, uuid.UUID] = dict(zip(partition["Replicas"], dirs, strict=False))
        #: Kafka's useLastKnownLeaderInBalancedRecovery (always on in Kafka's controller)
        self.last_known_leader = True

    # ------------------------------------------------------------------ election
    def _valid_new_leader(self, replica: int) -> bool:
        in_isr = replica in self.target_isr or (not self.target_isr and replica in self.target_elr)
        return in_isr and self.acceptable(replica)

    def _can_elect_last_known_leader(self) -> bool:
        if not self.elr_enabled or not self.last_known_leader:
            return False
        if self.target_elr or self.target_isr:
            return False
        last = self.partition["LastKnownElr"]
        return len(last) == 1 and self.acceptable(last[0])

    def _elect(self) -> tuple[int, bool]:
        """The leader the election gives and whether the election is unclean."""
        current = self.partition["Leader"]
        if self.election is Election.PREFERRED:
            if self.target_replicas and self._valid_new_leader(self.target_replicas[0]):
                return self.target_replicas[0], False
            if self._valid_new_leader(current):
                return current, False
            for r in self.target_replicas[1:]:
                if self._valid_new_leader(r):
                    return r, False
            if self._can_elect_last_known_leader():
                return self.partition["LastKnownElr"][0], True
            return NO_LEADER, False
        if self._valid_new_leader(current):
            return current, False
        for r in self.target_replicas:
            if self._valid_new_leader(r):
                return r, False
        if self._can_elect_last_known_leader():
            return self.partition["LastKnownElr"][0], True
        if self.election is Election.UNCLEAN:
            for r in self.target_replicas:
                if self.acceptable(r):
                    return r, True
        return NO_LEADER, False

    def _try_election(self, record: dict[str, Any]) -> None:
        leader, unclean = self._elect()
        if leader == self.partition["Leader"]:
            return
        if leader in self.target_elr:
            self.target_isr = [leader]
            self.target_elr = [r for r in self.target_elr if r != leader]
        elif unclean:
            log.info(
                "Setting new leader for topicId %s, partition %d to %d using an unclean election",
                self.topic_id,
                self.partition_id,
                leader,
            )
        record["Leader"] = leader
        if unclean:
            # the ISR is forced to the new leader alone: data may be lost
            record["Isr"] = [leader]
            if self.partition["LeaderRecoveryState"] != RECOVERING and self.mv.supported("leader_recovery"):
                record["LeaderRecoveryState"] = RECOVERING

    # ------------------------------------------------------------------ the record
    def _complete_reassignment(self) -> None:
        """Kafka 4.4's ``maybeCompleteReassignment``: done once the ISR (without the removing
        replicas) holds every adding replica, and every target replica when fewer are added than removed."""
        removing, adding = self.target_removing, self.target_adding
        if not removing and not adding:
            return
        isr, replicas = list(self.target_isr), self.target_replicas
        if removing:
            isr = [r for r in self.target_isr if r not in removing]
            if not isr:
                return
            replicas = [r for r in self.target_replicas if r not in removing]
            if not replicas:
                return
        if not set(adding) <= set(isr):
            return
        if len(adding) < len(removing) and not set(replicas) <= set(isr):
            return
        self.target_isr, self.target_replicas = isr, replicas
        self.target_removing, self.target_adding = [], []

    def _populate_target_elr(self) -> None:
        if not self.elr_enabled:
            return
        if len(self.target_isr) >= self.min_isr:
            self.target_elr, self.target_last_known_elr = [], []
            return
        isr = set(self.target_isr)
        # one HashSet made from the current ELR, given the current ISR, and then the last known ELR
        candidates = [self.target_elr, self.partition["Isr"]]
        self.target_elr = [r for r in java_int_set_order(candidates) if r not in isr and r not in self.unclean_shutdown]
        elr = set(self.target_elr)
        self.target_last_known_elr = [
            r for r in java_int_set_order([*candidates, self.target_last_known_elr]) if r not in isr and r not in elr
        ]

    def _update_record_elr(self, record: dict[str, Any]) -> None:
        clean = "Isr" not in record
        if not clean or not self.elr_enabled:
            self.target_elr, self.target_last_known_elr = [], []
        if self.target_elr != list(self.partition["EligibleLeaderReplicas"]):
            record["EligibleLeaderReplicas"] = self.target_elr
        if self.last_known_leader:
            return  # the last known ELR holds the last known leader: see _update_last_known_leader
        if self.target_last_known_elr != list(self.partition["LastKnownElr"]):
            record["LastKnownElr"] = self.target_last_known_elr

    def _update_last_known_leader(self, record: dict[str, Any]) -> None:
        if not self.last_known_leader or not self.elr_enabled:
            return
        p = self.partition
        leader = record.get("Leader", NO_LEADER_CHANGE)
        if leader == NO_LEADER and not p["LastKnownElr"]:
            record["LastKnownElr"] = [p["Leader"]]  # it goes leaderless: remember who led
        elif leader >= 0 and p["LastKnownElr"]:
            record["LastKnownElr"] = []  # a leader again

    def _assignment_changes(self, record: dict[str, Any]) -> None:
        p = self.partition
        if self.target_replicas:
            if self.mv.supported("directory_assignment"):
                dirs = []
                for r in self.target_replicas:
                    d = self.target_dirs.get(r)
                    if d is None:
                        if self.default_dir is None:
                            raise RuntimeError("no default directory for a new replica")
                        d = self.default_dir(r)
                    dirs.append(d)
                if dirs != list(p.get("Directories") or []):
                    record["Directories"] = dirs
            if self.target_replicas != list(p["Replicas"]):
                record["Replicas"] = self.target_replicas
        if self.target_removing != list(p["RemovingReplicas"]):
            record["RemovingReplicas"] = self.target_removing
        if self.target_adding != list(p["AddingReplicas"]):
            record["AddingReplicas"] = self.target_adding

    def build(self) -> dict[str, Any] | None:
        """The PartitionChangeRecord's fields (TopicId, PartitionId and each field that changes), or
        None when nothing changes."""
        p = self.partition
        record: dict[str, Any] = {}
        self._complete_reassignment()
        self._populate_target_elr()
        self._try_election(record)
        if "Leader" not in record and not set(p["Replicas"]) <= set(self.target_replicas):
            record["Leader"] = p["Leader"]  # a replica leaves: bump the leader epoch
        self._update_record_elr(record)
        if "Isr" not in record and (self.target_isr or self.elr_enabled) and self.target_isr != list(p["Isr"]):
            record["Isr"] = self.target_isr
        if (
            self.mv.level < MV_3_6_IV0
            and "Leader" not in record
            and "Isr" in record
            and not set(p["Isr"]) <= set(record["Isr"])
        ):
            record["Leader"] = p["Leader"]  # KAFKA-15021: brokers before 3.6 need the bump on a shrink
        self._update_last_known_leader(record)
        self._assignment_changes(record)
        if self.target_recovery != p["LeaderRecoveryState"]:
            record["LeaderRecoveryState"] = self.target_recovery
        if not record:
            return None
        return {"TopicId": self.topic_id, "PartitionId": self.partition_id, **record}
