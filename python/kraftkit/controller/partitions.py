"""The partition-leadership half of Kafka's ``ReplicationControlManager`` for kraftkit's controller:
what happens to partitions when brokers come and go (fencing, unfencing, controlled shutdown, a new
incarnation, unregistration), AlterPartition from partition leaders, ElectLeaders, and the
preferred-leader rebalance. Each change is one :class:`~kraftkit.controller.partition_change.PartitionChange`.

The rules are Kafka 4.4's:

* **A broker fenced** (its session expired, or it asked) or **shutting down at once**: it leaves the
  ISR of every partition that has it, and the partitions it led elect another leader from the ISR
  (an unclean election for a topic with ``unclean.leader.election.enable``); then its fencing record.
* **Controlled shutdown**: an unfenced broker that asks to shut down while it leads partitions enters
  controlled shutdown (a BrokerRegistrationChangeRecord from 3.3-IV3), leaves every ISR and hands its
  leaderships over; it is told to shut down once it leads nothing and every active broker has caught
  up to the offset of that change.
* **Unfenced**: its unfencing record, then the leaderless partitions it may lead elect it.
* **A new incarnation** registering: it leaves every ISR (with eligible leader replicas on and an
  unclean shutdown, the previous epoch not given back, it leaves every ELR too); **unregistered**:
  it leaves every ISR and ELR.
* **AlterPartition** (v2-v3, topics by id): the broker's epoch must be current (STALE_BROKER_EPOCH for
  the request); per partition UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER for an
  epoch above the controller's (it is behind), FENCED_LEADER_EPOCH for a lower leader epoch,
  INVALID_REQUEST from a broker that does not lead, INVALID_UPDATE_VERSION for a lower partition
  epoch, INVALID_REQUEST for an ISR that is not a subset of the replicas, lacks the leader, or has
  more than the leader while it recovers, INELIGIBLE_REPLICA for an ISR member that is not
  registered, shutting down, fenced or at another broker epoch. The answer carries the partition as
  the record leaves it; NEW_LEADER_ELECTED when completing a reassignment moved the leadership.
* **ElectLeaders**: PREFERRED (ELECTION_NOT_NEEDED when the preferred replica leads,
  PREFERRED_LEADER_NOT_AVAILABLE when it cannot) or UNCLEAN (ELECTION_NOT_NEEDED when a leader
  exists, ELIGIBLE_LEADERS_NOT_AVAILABLE when none can be found); all partitions when none is named,
  leaving out those that need no election.
* **Rebalance** (``auto.leader.rebalance.enable``, every ``leader.imbalance.check.interval.seconds``):
  a preferred election for each partition not led by its first replica, at most 1000 records a
  round; and every ``unclean.leader.election.interval.ms``, an unclean election for each leaderless
  partition of a topic that allows one.

``min.insync.replicas`` and ``unclean.leader.election.enable`` are the topic's, else this controller
node's dynamic broker config, else the cluster-wide dynamic default, else the node's
server.properties, else Kafka's defaults (1, false); the ISR minimum is capped at the topic's
replication factor.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from kraftkit._core import encode_metadata_record
from kraftkit._kafka import BROKER_REGISTRATION_CHANGE, PARTITION_CHANGE
from kraftkit.controller.cluster import IN_CONTROLLED_SHUTDOWN, ControllerError
from kraftkit.controller.configs import BROKER as BROKER_RESOURCE
from kraftkit.controller.configs import TOPIC as TOPIC_RESOURCE
from kraftkit.controller.partition_change import (
    LOST_DIR,
    NO_LEADER,
    NO_LEADER_CHANGE,
    RECOVERED,
    RECOVERING,
    Election,
    PartitionChange,
    merge,
)
from kraftkit.controller.replication import MIGRATING_DIR, UNASSIGNED_DIR, ReplicationControlManager
from kraftkit.features.registry import MetadataVersion, registry
from kraftkit.metadata.image import ELR_FEATURE, MetadataImage, Topic
from kraftkit.protocol.messages import Errors

__all__ = ["PartitionControlManager"]

log = logging.getLogger(__name__)

#: ElectLeaders' ElectionType values
PREFERRED_ELECTION, UNCLEAN_ELECTION = 0, 1
MAX_ELECTIONS_PER_IMBALANCE = 1000


def _bool_config(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() == "true"  # Java's Boolean.parseBoolean


class PartitionControlManager:
    """Partition leadership and ISR on the active controller (see the module's rules)."""

    def __init__(self, replication: ReplicationControlManager, node_id: int) -> None:
        self.replication = replication
        self.cluster = replication.cluster
        self.node_id = node_id

    # ------------------------------------------------------------------ configuration
    def _config(self, image: MetadataImage, topic: str, name: str) -> str | None:
        for key in ((TOPIC_RESOURCE, topic), (BROKER_RESOURCE, str(self.node_id)), (BROKER_RESOURCE, "")):
            value = image.configs.get(key, {}).get(name)
            if value is not None:
                return value
        return self.replication.static_config.get(name)

    def unclean_enabled(self, image: MetadataImage, topic: str) -> bool:
        return bool(_bool_config(self._config(image, topic, "unclean.leader.election.enable")))

    def min_isr(self, image: MetadataImage, topic: Topic) -> int:
        raw = self._config(image, topic.name, "min.insync.replicas")
        try:
            value = int(raw) if raw is not None else 1
        except ValueError:
            value = 1
        first = topic.partitions.get(0)
        rf = len(first["Replicas"]) if first is not None else value
        return min(value, rf)

    @staticmethod
    def elr_enabled(image: MetadataImage, mv: MetadataVersion) -> bool:
        return mv.supported("elr") and image.finalized_features.get(ELR_FEATURE, 0) >= 1

    @staticmethod
    def _mv(image: MetadataImage) -> MetadataVersion:
        level = image.metadata_version
        if level is None:
            raise ControllerError(Errors.NOT_CONTROLLER, "the metadata log holds no metadata.version yet")
        return registry().metadata_version(level)

    # ------------------------------------------------------------------ brokers as leaders
    def is_active(self, bid: int) -> bool:
        return self.replication.is_active(bid)

    def _online_dir(self, bid: int, partition: Mapping[str, Any]) -> bool:
        """Kafka's ``hasOnlineDir``: the replica's directory on ``bid`` is one it registered (or unassigned)."""
        reg = self.cluster.brokers.get(bid)
        if reg is None:
            return False
        dirs = partition.get("Directories") or []
        try:
            d = dirs[partition["Replicas"].index(bid)]
        except (ValueError, IndexError):
            return True
        return _dir_online(d, reg["LogDirs"])

    def _acceptor(
        self, partition: Mapping[str, Any], base: Callable[[int], bool] | None = None
    ) -> Callable[[int], bool]:
        test = base if base is not None else self.is_active
        return lambda b: test(b) and self._online_dir(b, partition)

    def _builder(
        self,
        image: MetadataImage,
        mv: MetadataVersion,
        topic: Topic,
        pid: int,
        base: Callable[[int], bool] | None = None,
        election: Election | None = None,
    ) -> PartitionChange:
        partition = topic.partitions[pid]
        if election is None:
            election = Election.UNCLEAN if self.unclean_enabled(image, topic.name) else Election.ONLINE
        return PartitionChange(
            partition,
            topic.id,
            pid,
            self._acceptor(partition, base),
            mv,
            self.min_isr(image, topic),
            elr=self.elr_enabled(image, mv),
            election=election,
            default_dir=self.replication.default_dir,
        )

    @staticmethod
    def _encode(mv: MetadataVersion, change: dict[str, Any]) -> bytes:
        return encode_metadata_record(PARTITION_CHANGE, mv.partition_change_record_version, change)

    # ------------------------------------------------------------------ partitions by broker
    @staticmethod
    def _partitions(image: MetadataImage, keep: Callable[[Mapping[str, Any]], bool]) -> Iterator[tuple[Topic, int]]:
        for topic in image.topics.values():
            for pid, p in topic.partitions.items():
                if keep(p):
                    yield topic, pid

    def has_leaderships(self, image: MetadataImage, bid: int) -> bool:
        return any(True for _ in self._partitions(image, lambda p: p["Leader"] == bid))

    def leader_and_isr_updates(
        self,
        image: MetadataImage,
        context: str,
        parts: list[tuple[Topic, int]],
        *,
        remove: int = NO_LEADER,
        add: int = NO_LEADER,
        unclean_shutdown: int = NO_LEADER,
    ) -> list[bytes]:
        """Kafka's ``generateLeaderAndIsrUpdates``: ``remove`` and ``unclean_shutdown`` leave the ISR
        (and the latter the ELR) and may not lead; ``add`` may lead although its unfencing is not
        committed yet."""
        mv = self._mv(image)

        def base(r: int) -> bool:
            return r not in (remove, unclean_shutdown) and (r == add or self.is_active(r))

        records = []
        for topic, pid in parts:
            b = self._builder(image, mv, topic, pid, base)
            if unclean_shutdown != NO_LEADER:
                b.unclean_shutdown = [unclean_shutdown]
            b.target_isr = [r for r in topic.partitions[pid]["Isr"] if r not in (remove, unclean_shutdown)]
            change = b.build()
            if change is not None:
                records.append(self._encode(mv, change))
        if records:
            log.info("%s: changing %d partition(s)", context, len(records))
        return records

    def _in_isr(self, image: MetadataImage, bid: int) -> list[tuple[Topic, int]]:
        return list(self._partitions(image, lambda p: bid in p["Isr"]))

    def _in_elr(self, image: MetadataImage, bid: int) -> list[tuple[Topic, int]]:
        return list(self._partitions(image, lambda p: bid in p["EligibleLeaderReplicas"]))

    # ------------------------------------------------------------------ broker changes
    def broker_fenced(self, image: MetadataImage, bid: int) -> list[bytes]:
        """Kafka's ``handleBrokerFenced``: leaves every ISR, then its fencing record."""
        records = self.leader_and_isr_updates(image, "handleBrokerFenced", self._in_isr(image, bid), remove=bid)
        return records + self.cluster.fence_records(image, bid)

    def broker_unfenced(self, image: MetadataImage, bid: int, epoch: int) -> list[bytes]:
        """Kafka's ``handleBrokerUnfenced``: its unfencing record, then the leaderless partitions elect."""
        records = self.cluster.unfence_records(image, bid, epoch)
        leaderless = list(self._partitions(image, lambda p: p["Leader"] == NO_LEADER))
        return records + self.leader_and_isr_updates(image, "handleBrokerUnfenced", leaderless, add=bid)

    def broker_in_controlled_shutdown(self, image: MetadataImage, bid: int, epoch: int) -> list[bytes]:
        """Kafka's ``handleBrokerInControlledShutdown``."""
        mv = self._mv(image)
        records = []
        reg = self.cluster.brokers.get(bid)
        if mv.supported("in_controlled_shutdown") and not (reg and reg["InControlledShutdown"]):
            change = {"BrokerId": bid, "BrokerEpoch": epoch, "InControlledShutdown": IN_CONTROLLED_SHUTDOWN}
            records.append(encode_metadata_record(BROKER_REGISTRATION_CHANGE, 1, change))
        context = f"enterControlledShutdown[{bid}]"
        return records + self.leader_and_isr_updates(image, context, self._in_isr(image, bid), remove=bid)

    def broker_shutdown(self, image: MetadataImage, bid: int, clean: bool) -> list[bytes]:
        """Kafka 4.4's ``handleBrokerShutdown``, for a new incarnation registering."""
        mv = self._mv(image)
        if self.elr_enabled(image, mv) and not clean:
            context = "handleBrokerUncleanShutdown"
            return self.leader_and_isr_updates(
                image, context, self._in_isr(image, bid), unclean_shutdown=bid
            ) + self.leader_and_isr_updates(image, context, self._in_elr(image, bid), unclean_shutdown=bid)
        return self.leader_and_isr_updates(image, "handleBrokerShutdown", self._in_isr(image, bid), remove=bid)

    def broker_unregistered(self, image: MetadataImage, bid: int) -> list[bytes]:
        """Kafka's ``handleBrokerUnregistered``: leaves every ISR and ELR, then its unregistration."""
        context = "handleBrokerUnregistered"
        records = self.leader_and_isr_updates(image, context, self._in_isr(image, bid), remove=bid)
        records += self.leader_and_isr_updates(image, context, self._in_elr(image, bid), remove=bid)
        return records + self.cluster.unregister_broker(image, bid)

    def directories_offline(self, image: MetadataImage, bid: int, epoch: int, dirs: list[uuid.UUID]) -> list[bytes]:
        """Kafka's ``handleDirectoriesOffline``: a heartbeat names log directories that failed; for those
        the broker registered and still counts online, its replicas in them leave their ISRs and
        leaderships, then a BrokerRegistrationChangeRecord lists the directories left."""
        reg = self.cluster.brokers.get(bid)
        if reg is None:
            return []
        registered = list(reg["LogDirs"])
        newly = [d for d in registered if d in set(dirs)]
        if not newly:
            return []
        records: list[bytes] = []
        for d in newly:

            def on_dir(p: Mapping[str, Any], d: uuid.UUID = d) -> bool:
                replicas, dirs_of = p["Replicas"], p.get("Directories") or []
                return bid in replicas and replicas.index(bid) < len(dirs_of) and dirs_of[replicas.index(bid)] == d

            parts = list(self._partitions(image, on_dir))
            records += self.leader_and_isr_updates(image, f"handleDirectoriesOffline[{bid}:{d}]", parts, remove=bid)
        left = [d for d in registered if d not in set(newly)]
        change = {"BrokerId": bid, "BrokerEpoch": epoch, "LogDirs": left}
        records.append(encode_metadata_record(BROKER_REGISTRATION_CHANGE, 2, change))
        log.warning("Directories %s in broker %d marked offline, remaining directories: %s", newly, bid, left)
        return records

    # ------------------------------------------------------------------ AlterPartition
    def alter_partition(self, image: MetadataImage, body: Mapping, version: int) -> tuple[list[bytes], dict]:
        """The records and the answer of an AlterPartitionRequest (v2+: topics by id), or
        :class:`ControllerError` (STALE_BROKER_EPOCH) for the whole request."""
        bid, epoch = body.get("BrokerId", -1), body.get("BrokerEpoch", -1)
        self.cluster.check_broker_epoch(image, bid, epoch)
        mv = self._mv(image)
        topics = image.topics
        records: list[bytes] = []
        answer: list[dict] = []
        for td in body.get("Topics") or []:
            tid = td.get("TopicId") or uuid.UUID(int=0)
            parts: list[dict] = []
            answer.append({"TopicId": tid, "Partitions": parts})
            topic = topics.get(tid)
            if topic is None:
                log.info("Rejecting AlterPartition request for unknown topic ID %s.", tid)
                parts.extend({"PartitionIndex": p.get("PartitionIndex", 0), "ErrorCode": Errors.UNKNOWN_TOPIC_ID}
                             for p in td.get("Partitions") or [])  # fmt: skip
                continue
            for pd in td.get("Partitions") or []:
                parts.append(self._alter_one(image, mv, bid, topic, pd, version, records))
        return records, {"ThrottleTimeMs": 0, "ErrorCode": Errors.NONE, "Topics": answer}

    def _alter_one(
        self, image: MetadataImage, mv: MetadataVersion, bid: int, topic: Topic, pd: Mapping, version: int,
        records: list[bytes],
    ) -> dict:  # fmt: skip
        pid = pd.get("PartitionIndex", 0)
        if version < 3:
            isr_states = [{"BrokerId": b, "BrokerEpoch": -1} for b in pd.get("NewIsr") or []]
        else:
            isr_states = list(pd.get("NewIsrWithEpochs") or [])
        error = self._validate_alter(bid, topic, pid, pd, isr_states, version)
        if error != Errors.NONE:
            return {"PartitionIndex": pid, "ErrorCode": error}
        partition = topic.partitions[pid]
        b = self._builder(image, mv, topic, pid)
        b.target_isr = [s.get("BrokerId", -1) for s in isr_states]
        b.target_recovery = pd.get("LeaderRecoveryState", RECOVERED)
        change = b.build()
        if change is not None:
            records.append(self._encode(mv, change))
            partition = merge(partition, change)
            leader = change.get("Leader", NO_LEADER_CHANGE)
            if leader not in (bid, NO_LEADER_CHANGE):
                # completing a reassignment moved the leadership: the broker must learn it first
                log.info(
                    "AlterPartition request from node %d for %s-%d completed the ongoing partition reassignment "
                    "and triggered a leadership change. Returning NEW_LEADER_ELECTED.",
                    bid,
                    topic.name,
                    pid,
                )
                return {"PartitionIndex": pid, "ErrorCode": Errors.NEW_LEADER_ELECTED}
        return {
            "PartitionIndex": pid,
            "ErrorCode": Errors.NONE,
            "LeaderId": partition["Leader"],
            "Isr": list(partition["Isr"]),
            "LeaderRecoveryState": partition["LeaderRecoveryState"],
            "LeaderEpoch": partition["LeaderEpoch"],
            "PartitionEpoch": partition["PartitionEpoch"],
        }

    def _validate_alter(
        self, bid: int, topic: Topic, pid: int, pd: Mapping, isr_states: Sequence[Mapping], version: int
    ) -> int:
        """Kafka's ``validateAlterPartitionData``: NONE or the partition's error code."""
        partition = topic.partitions.get(pid)
        where = f"AlterPartition request from node {bid} for {topic.name}-{pid}"
        if partition is None:
            log.info("Rejecting AlterPartition request for unknown partition %s-%d.", topic.name, pid)
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        leader_epoch, partition_epoch = pd.get("LeaderEpoch", -1), pd.get("PartitionEpoch", -1)
        if leader_epoch > partition["LeaderEpoch"] or partition_epoch > partition["PartitionEpoch"]:
            log.debug("Rejecting %s: its epochs are ahead of this controller's", where)
            return Errors.NOT_CONTROLLER
        if leader_epoch < partition["LeaderEpoch"]:
            log.debug("Rejecting %s: the current leader epoch is %d", where, partition["LeaderEpoch"])
            return Errors.FENCED_LEADER_EPOCH
        if bid != partition["Leader"]:
            log.info("Rejecting %s because the current leader is %d.", where, partition["Leader"])
            return Errors.INVALID_REQUEST
        if partition_epoch < partition["PartitionEpoch"]:
            log.info("Rejecting %s because the current partition epoch is %d.", where, partition["PartitionEpoch"])
            return Errors.INVALID_UPDATE_VERSION
        isr = [s.get("BrokerId", -1) for s in isr_states]
        if not _valid_isr(partition["Replicas"], isr):
            log.error("Rejecting %s because it specified an invalid ISR %s.", where, isr)
            return Errors.INVALID_REQUEST
        if partition["Leader"] not in isr:
            log.error("Rejecting %s because it specified an invalid ISR %s that doesn't include itself.", where, isr)
            return Errors.INVALID_REQUEST
        recovery = pd.get("LeaderRecoveryState", RECOVERED)
        if recovery == RECOVERING and len(isr) > 1:
            log.info("Rejecting %s because the ISR %s had more than one replica while the leader recovers.", where, isr)
            return Errors.INVALID_REQUEST
        if partition["LeaderRecoveryState"] == RECOVERED and recovery == RECOVERING:
            log.info("Rejecting %s because the leader recovery state cannot change from RECOVERED to RECOVERING.",
                     where)  # fmt: skip
            return Errors.INVALID_REQUEST
        ineligible = []
        for s in isr_states:
            b, e = s.get("BrokerId", -1), s.get("BrokerEpoch", -1)
            reg = self.cluster.brokers.get(b)
            if reg is None:
                ineligible.append(f"{b} (not registered)")
            elif reg["InControlledShutdown"]:
                ineligible.append(f"{b} (shutting down)")
            elif reg["Fenced"]:
                ineligible.append(f"{b} (fenced)")
            elif e != -1 and reg["BrokerEpoch"] != e:
                ineligible.append(f"{b} (broker epoch mismatch: requested={e} VS expected={reg['BrokerEpoch']})")
        if ineligible:
            log.info("Rejecting %s because it specified ineligible replicas %s in the new ISR %s.", where,
                     ", ".join(ineligible), isr)  # fmt: skip
            return Errors.INELIGIBLE_REPLICA if version > 1 else Errors.OPERATION_NOT_ATTEMPTED
        return Errors.NONE

    # ------------------------------------------------------------------ ElectLeaders
    def elect_leaders(self, image: MetadataImage, body: Mapping) -> tuple[list[bytes], dict]:
        """The records and the answer of an ElectLeadersRequest, or :class:`ControllerError`
        (INVALID_REQUEST for an unknown election type) for the whole request."""
        kind = body.get("ElectionType", PREFERRED_ELECTION)
        if kind not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
            raise ControllerError(Errors.INVALID_REQUEST, f"Unknown election type {kind}")
        mv = self._mv(image)
        records: list[bytes] = []
        results: list[dict] = []
        asked = body.get("TopicPartitions")
        if asked is None:
            for topic in sorted(image.topics.values(), key=lambda t: t.name):
                parts = []
                for pid in sorted(topic.partitions):
                    code, message = self._elect_one(image, mv, topic.name, pid, kind, records)
                    if code != Errors.ELECTION_NOT_NEEDED:
                        parts.append({"PartitionId": pid, "ErrorCode": code, "ErrorMessage": message})
                results.append({"Topic": topic.name, "PartitionResult": parts})
        else:
            for tp in asked:
                name = tp.get("Topic") or ""
                parts = []
                for pid in tp.get("Partitions") or []:
                    code, message = self._elect_one(image, mv, name, pid, kind, records)
                    parts.append({"PartitionId": pid, "ErrorCode": code, "ErrorMessage": message})
                results.append({"Topic": name, "PartitionResult": parts})
        return records, {"ThrottleTimeMs": 0, "ErrorCode": Errors.NONE, "ReplicaElectionResults": results}

    def _elect_one(
        self, image: MetadataImage, mv: MetadataVersion, name: str, pid: int, kind: int, records: list[bytes]
    ) -> tuple[int, str | None]:
        topic = image.topic(name)
        if topic is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}"
        partition = topic.partitions.get(pid)
        if partition is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{pid}"
        replicas = partition["Replicas"]
        preferred = replicas[0] if replicas else NO_LEADER
        if (kind == PREFERRED_ELECTION and partition["Leader"] == preferred) or (
            kind == UNCLEAN_ELECTION and partition["Leader"] != NO_LEADER
        ):
            return Errors.ELECTION_NOT_NEEDED, None
        election = Election.UNCLEAN if kind == UNCLEAN_ELECTION else Election.PREFERRED
        change = self._builder(image, mv, topic, pid, election=election).build()
        if change is None:
            if kind == PREFERRED_ELECTION:
                return Errors.PREFERRED_LEADER_NOT_AVAILABLE, None
            return Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, None
        records.append(self._encode(mv, change))
        return Errors.NONE, None

    # ------------------------------------------------------------------ AssignReplicasToDirs
    def assign_replicas_to_dirs(self, image: MetadataImage, body: Mapping) -> tuple[list[bytes], dict]:
        """The records and the answer of an AssignReplicasToDirsRequest (a broker with several log
        directories says where it put its replicas), or :class:`ControllerError` for the whole request
        (UNSUPPORTED_VERSION below 3.7-IV2, STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED)."""
        mv = self._mv(image)
        if not mv.supported("directory_assignment"):
            raise ControllerError(Errors.UNSUPPORTED_VERSION, "Directory assignment is not supported yet.")
        bid = body.get("BrokerId", -1)
        self.cluster.check_broker_epoch(image, bid, body.get("BrokerEpoch", -1))
        reg = self.cluster.brokers.get(bid)
        if reg is None:
            raise ControllerError(Errors.BROKER_ID_NOT_REGISTERED, f"Broker ID {bid} is not currently registered")
        topics = image.topics
        records: list[bytes] = []
        offline: dict[tuple[uuid.UUID, int], tuple[Topic, int]] = {}
        answer = []
        for d in body.get("Directories") or []:
            dir_id = d.get("Id") or UNASSIGNED_DIR
            dir_offline = not _dir_online(dir_id, reg["LogDirs"])
            out_topics = []
            for td in d.get("Topics") or []:
                tid = td.get("TopicId") or uuid.UUID(int=0)
                topic = topics.get(tid)
                if topic is None:
                    log.warning("AssignReplicasToDirsRequest from broker %d references unknown topic ID %s", bid, tid)
                parts = []
                for pd in td.get("Partitions") or []:
                    pid = pd.get("PartitionIndex", 0)
                    code = Errors.UNKNOWN_TOPIC_ID if topic is None else Errors.NONE
                    if topic is not None:
                        partition = topic.partitions.get(pid)
                        if partition is None:
                            code = Errors.UNKNOWN_TOPIC_OR_PARTITION
                        elif bid not in partition["Replicas"]:
                            code = Errors.NOT_LEADER_OR_FOLLOWER
                        else:
                            b = self._builder(image, mv, topic, pid, election=Election.ONLINE)
                            b.target_dirs[bid] = dir_id
                            change = b.build()
                            if change is not None:
                                records.append(self._encode(mv, change))
                            if dir_offline:
                                offline[(tid, pid)] = (topic, pid)
                        if code != Errors.NONE:
                            log.warning("AssignReplicasToDirsRequest from broker %d for %s-%d: %s", bid, topic.name,
                                        pid, Errors(code).name)  # fmt: skip
                    parts.append({"PartitionIndex": pid, "ErrorCode": code})
                out_topics.append({"TopicId": tid, "Partitions": parts})
            answer.append({"Id": dir_id, "Topics": out_topics})
        if offline:
            records += self.leader_and_isr_updates(image, "offline-dir-assignment", list(offline.values()), remove=bid)
        return records, {"ThrottleTimeMs": 0, "ErrorCode": Errors.NONE, "Directories": answer}

    # ------------------------------------------------------------------ background elections
    def imbalanced(self, image: MetadataImage) -> list[tuple[Topic, int]]:
        """The partitions led by a replica other than their first (Kafka's imbalancedPartitions)."""
        return list(self._partitions(image, lambda p: bool(p["Replicas"]) and p["Leader"] != p["Replicas"][0]))

    def balance(self, image: MetadataImage, limit: int = MAX_ELECTIONS_PER_IMBALANCE) -> list[bytes]:
        """Kafka's ``maybeBalancePartitionLeaders``: preferred elections, at most ``limit`` records."""
        mv = self._mv(image)
        records: list[bytes] = []
        for topic, pid in self.imbalanced(image):
            if len(records) >= limit:
                break
            change = self._builder(image, mv, topic, pid, election=Election.PREFERRED).build()
            if change is not None:
                records.append(self._encode(mv, change))
        return records

    def elect_unclean(self, image: MetadataImage, limit: int = MAX_ELECTIONS_PER_IMBALANCE) -> list[bytes]:
        """Kafka's ``maybeElectUncleanLeaders``: an unclean election for each leaderless partition of a
        topic that allows one, at most ``limit`` records."""
        mv = self._mv(image)
        records: list[bytes] = []
        for topic, pid in list(self._partitions(image, lambda p: p["Leader"] == NO_LEADER)):
            if len(records) >= limit:
                break
            if not self.unclean_enabled(image, topic.name):
                continue
            code, _message = self._elect_one(image, mv, topic.name, pid, UNCLEAN_ELECTION, records)
            if code == Errors.NONE:
                log.error("Triggering unclean leader election for offline partition %s-%d.", topic.name, pid)
            else:
                log.warning("Cannot trigger unclean leader election for offline partition %s-%d: %s", topic.name,
                            pid, Errors(code).name)  # fmt: skip
        return records


def _dir_online(d: uuid.UUID, dirs: Sequence[uuid.UUID]) -> bool:
    """Kafka's ``DirectoryId.isOnline``: a reserved id other than LOST counts as online, and so does any
    directory of a broker that registered none."""
    if d in (UNASSIGNED_DIR, MIGRATING_DIR):
        return True
    if d == LOST_DIR:
        return False
    return not dirs or d in dirs


def _valid_isr(replicas: list[int], isr: list[int]) -> bool:
    """Kafka's ``Replicas.validateIsr``: distinct, non-negative members of the replicas (empty is valid)."""
    if not isr:
        return True
    return min(isr) >= 0 and len(set(isr)) == len(isr) and set(isr) <= set(replicas)
