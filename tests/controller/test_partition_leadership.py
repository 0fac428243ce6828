"""Partition leadership and ISR on the controller (kraftkit.controller.partitions), against an image
and registrations built from records: brokers fenced, unfenced, shutting down under control,
registering anew and unregistering move leaderships as Kafka's controller moves them; AlterPartition's
rules and answers; ElectLeaders. (The PartitionChangeRecords themselves are checked field by field
against Kafka's own builder in tests/kafka/test_partition_change_kafka.py.)"""

from __future__ import annotations

import uuid

import pytest

from kraftkit._core import decode_metadata_record, encode_metadata_record
from kraftkit._kafka import BROKER_REGISTRATION_CHANGE, CONFIG, FEATURE_LEVEL, PARTITION_CHANGE, REGISTER_BROKER
from kraftkit.controller.cluster import BROKER_RECORDS, ControllerError
from kraftkit.controller.configs import TOPIC as TOPIC_RESOURCE
from kraftkit.controller.partitions import PartitionControlManager
from kraftkit.protocol.messages import Errors
from tests.controller.test_create_topics import DIRS, Cluster, topic

BROKERS = {b: (None, False, [DIRS[b]]) for b in (1, 2, 3)}


class Leadership(Cluster):
    """A cluster whose registrations follow what is applied, with a PartitionControlManager."""

    def __init__(self, brokers=BROKERS, **kw) -> None:
        super().__init__(brokers, **kw)
        self.pc = PartitionControlManager(self.rc, node_id=3000)

    def apply(self, records: list[bytes]) -> None:
        for value in records:
            key, version, data = decode_metadata_record(value)
            self.image.replay(key, version, data, self.offset)
            if key in BROKER_RECORDS and hasattr(self, "pc"):
                self.cluster.replay(value, self.offset)
            self.offset += 1

    def partitions(self, name: str) -> dict[int, dict]:
        t = self.image.topic(name)
        assert t is not None
        return t.partitions

    def heartbeat(self, bid: int, offset: int | None = None, *, shutdown: bool = False, fence: bool = False):
        body = {"BrokerId": bid, "BrokerEpoch": self.cluster.brokers[bid]["BrokerEpoch"],
                "CurrentMetadataOffset": self.offset if offset is None else offset, "WantFence": fence,
                "WantShutDown": shutdown}
        records, reply = self.cluster.heartbeat(self.image, body, self.pc, self.offset)
        self.apply(records)
        return [decode_metadata_record(r) for r in records], reply


def kinds(records) -> list[int]:
    return [k for k, _v, _d in records]


def three_way(c: Leadership, name: str = "t", partitions: int = 6) -> dict[int, dict]:
    _r, results = c.create(topic(name, partitions, 3))
    assert results[0]["ErrorCode"] == Errors.NONE
    return {pid: dict(p) for pid, p in c.partitions(name).items()}


def test_a_fenced_broker_leaves_every_isr_and_its_leaderships_move_to_the_next_isr_replica():
    c = Leadership()
    before = three_way(c)
    for b in (1, 2, 3):
        c.heartbeat(b)  # every broker has a live session, unfenced
    records = [decode_metadata_record(r) for r in c.pc.broker_fenced(c.image, 2)]
    assert kinds(records) == [PARTITION_CHANGE] * 6 + [BROKER_REGISTRATION_CHANGE]
    c.apply([encode_metadata_record(k, v, d) for k, v, d in records])
    for pid, p in c.partitions("t").items():
        old = before[pid]
        assert p["Isr"] == [r for r in old["Isr"] if r != 2]
        if old["Leader"] == 2:
            assert p["Leader"] == next(r for r in old["Replicas"] if r != 2)
            assert p["LeaderEpoch"] == old["LeaderEpoch"] + 1
        else:  # from 3.6-IV0 an ISR shrink alone does not bump the leader epoch
            assert (p["Leader"], p["LeaderEpoch"]) == (old["Leader"], old["LeaderEpoch"])
        assert p["PartitionEpoch"] == old["PartitionEpoch"] + 1
    assert not c.pc.has_leaderships(c.image, 2) and c.cluster.brokers[2]["Fenced"]


def test_the_only_isr_member_fenced_leaves_the_partition_leaderless_until_it_is_unfenced():
    c = Leadership()
    c.create(topic("solo", -1, -1, assignments=[(0, [2])]))
    c.apply(c.pc.broker_fenced(c.image, 2))
    p = c.partitions("solo")[0]
    assert (p["Leader"], p["Isr"]) == (-1, [2])  # (without eligible leader replicas the ISR keeps its last member)
    records = [decode_metadata_record(r) for r in c.pc.broker_unfenced(c.image, 2, c.cluster.brokers[2]["BrokerEpoch"])]
    assert kinds(records) == [BROKER_REGISTRATION_CHANGE, PARTITION_CHANGE]
    assert records[1][2]["Leader"] == 2
    c.apply([encode_metadata_record(k, v, d) for k, v, d in records])
    assert c.partitions("solo")[0]["Leader"] == 2 and not c.cluster.brokers[2]["Fenced"]


def test_an_unclean_election_only_for_a_topic_that_allows_it():
    c = Leadership()
    for name, unclean in (("clean", None), ("unclean", "true")):
        configs = {"unclean.leader.election.enable": unclean} if unclean else {}
        c.create(topic(name, -1, -1, configs=configs, assignments=[(0, [2, 1])]))
    # broker 1 falls out of both ISRs, then the leader 2 is fenced
    for name in ("clean", "unclean"):
        p = c.partitions(name)[0]
        tid = c.image.topic_ids[name]
        _r, answer = c.pc.alter_partition(c.image, alter(2, c, tid, 0, p, [2]), 3)
        c.apply(_r)
        assert answer["Topics"][0]["Partitions"][0]["ErrorCode"] == Errors.NONE
    c.apply(c.pc.broker_fenced(c.image, 2))
    assert c.partitions("clean")[0]["Leader"] == -1
    p = c.partitions("unclean")[0]
    assert (p["Leader"], p["Isr"], p["LeaderRecoveryState"]) == (1, [1], 1)  # RECOVERING: data may be lost


def test_a_cluster_wide_dynamic_default_allows_unclean_elections_too():
    c = Leadership()
    c.apply([encode_metadata_record(CONFIG, 0, {"ResourceType": 4, "ResourceName": "", "Name":
                                                "unclean.leader.election.enable", "Value": "true"})])
    assert c.pc.unclean_enabled(c.image, "any")
    c.apply([encode_metadata_record(CONFIG, 0, {"ResourceType": TOPIC_RESOURCE, "ResourceName": "any", "Name":
                                                "unclean.leader.election.enable", "Value": "false"})])
    assert not c.pc.unclean_enabled(c.image, "any")  # the topic's own config comes first


def test_controlled_shutdown_moves_leaderships_then_lets_the_broker_go_once_the_others_caught_up():
    c = Leadership()
    before = three_way(c)
    for b in (1, 2, 3):
        c.heartbeat(b)
    records, reply = c.heartbeat(1, shutdown=True)
    assert reply.in_controlled_shutdown and not reply.should_shut_down and not reply.is_fenced
    led_by_1 = [pid for pid, p in before.items() if p["Leader"] == 1]
    assert kinds(records) == [BROKER_REGISTRATION_CHANGE] + [PARTITION_CHANGE] * 6
    assert records[0][2]["InControlledShutdown"] == 1
    assert led_by_1 and not c.pc.has_leaderships(c.image, 1)
    assert all(1 not in p["Isr"] for p in c.partitions("t").values())
    end = c.offset - 1  # the last offset of the controlled shutdown's batch
    # the other brokers have not caught up to it: broker 1 waits
    c.heartbeat(2, offset=end - 1)
    c.heartbeat(3, offset=end - 1)
    records, reply = c.heartbeat(1, shutdown=True)
    assert records == [] and reply.in_controlled_shutdown and not reply.should_shut_down
    c.heartbeat(2, offset=end)
    c.heartbeat(3, offset=end + 5)
    records, reply = c.heartbeat(1, shutdown=True)
    assert reply.should_shut_down and reply.is_fenced
    assert kinds(records) == [BROKER_REGISTRATION_CHANGE] and records[0][2]["Fenced"] == 1


def test_a_broker_that_leads_nothing_shuts_down_at_once():
    c = Leadership()
    c.create(topic("elsewhere", -1, -1, assignments=[(0, [3])]))
    c.heartbeat(1)
    records, reply = c.heartbeat(1, shutdown=True)
    assert reply.should_shut_down and kinds(records) == [BROKER_REGISTRATION_CHANGE]


def test_a_new_incarnation_leaves_the_isr_before_it_registers():
    c = Leadership()
    three_way(c, partitions=3)
    c.cluster.mark_fenced(2)  # its old session expired (else: DUPLICATE_BROKER_REGISTRATION)
    body = {"BrokerId": 2, "ClusterId": c.cluster.cluster_id, "IncarnationId": uuid.uuid4(), "Listeners": [],
            "Features": [{"Name": "metadata.version", "MinSupportedVersion": 1, "MaxSupportedVersion": 99}],
            "Rack": None, "IsMigratingZkBroker": False, "LogDirs": [DIRS[2]], "PreviousBrokerEpoch": -1}
    records, _epoch = c.cluster.register_broker(c.image, body, c.offset, 0, c.pc)
    assert kinds([decode_metadata_record(r) for r in records]) == [PARTITION_CHANGE] * 3 + [REGISTER_BROKER]
    c.apply(records)
    assert all(2 not in p["Isr"] and p["Leader"] != 2 for p in c.partitions("t").values())


def test_unregistration_leaves_every_isr_first():
    c = Leadership()
    three_way(c, partitions=2)
    records = [decode_metadata_record(r) for r in c.pc.broker_unregistered(c.image, 3)]
    assert kinds(records)[-1] != PARTITION_CHANGE and kinds(records)[:2] == [PARTITION_CHANGE] * 2


# ---------------------------------------------------------------------- AlterPartition
def alter(bid: int, c: Leadership, tid, pid: int, p: dict, isr: list[int], *, leader_epoch=None,
          partition_epoch=None, recovery: int = 0, epochs: dict[int, int] | None = None) -> dict:
    return {"BrokerId": bid, "BrokerEpoch": c.cluster.brokers[bid]["BrokerEpoch"], "Topics": [{
        "TopicId": tid, "Partitions": [{
            "PartitionIndex": pid,
            "LeaderEpoch": p["LeaderEpoch"] if leader_epoch is None else leader_epoch,
            "PartitionEpoch": p["PartitionEpoch"] if partition_epoch is None else partition_epoch,
            "LeaderRecoveryState": recovery,
            "NewIsrWithEpochs": [{"BrokerId": b, "BrokerEpoch": (epochs or {}).get(b, -1)} for b in isr]}]}]}


def test_alter_partition_shrinks_and_expands_the_isr_and_answers_with_the_new_epochs():
    c = Leadership()
    before = three_way(c, partitions=1)[0]
    tid, leader = c.image.topic_ids["t"], before["Leader"]
    others = [r for r in before["Replicas"] if r != leader]
    records, answer = c.pc.alter_partition(c.image, alter(leader, c, tid, 0, before, [leader, others[0]]), 3)
    c.apply(records)
    got = answer["Topics"][0]["Partitions"][0]
    p = c.partitions("t")[0]
    assert got == {"PartitionIndex": 0, "ErrorCode": Errors.NONE, "LeaderId": leader, "Isr": [leader, others[0]],
                   "LeaderRecoveryState": 0, "LeaderEpoch": p["LeaderEpoch"], "PartitionEpoch": p["PartitionEpoch"]}
    assert p["PartitionEpoch"] == before["PartitionEpoch"] + 1 and p["LeaderEpoch"] == before["LeaderEpoch"]
    # and back (the broker epochs given must be the registered ones)
    epochs = {b: c.cluster.brokers[b]["BrokerEpoch"] for b in before["Replicas"]}
    records, answer = c.pc.alter_partition(c.image, alter(leader, c, tid, 0, p, before["Replicas"], epochs=epochs), 3)
    c.apply(records)
    assert answer["Topics"][0]["Partitions"][0]["Isr"] == before["Replicas"] == c.partitions("t")[0]["Isr"]


def test_alter_partition_refusals():
    c = Leadership()
    p = three_way(c, partitions=1)[0]
    tid, leader = c.image.topic_ids["t"], p["Leader"]
    other = next(r for r in p["Replicas"] if r != leader)

    def code(body, version=3) -> int:
        records, answer = c.pc.alter_partition(c.image, body, version)
        assert records == []
        return answer["Topics"][0]["Partitions"][0]["ErrorCode"]

    assert code(alter(leader, c, uuid.uuid4(), 0, p, [leader])) == Errors.UNKNOWN_TOPIC_ID
    assert code(alter(leader, c, tid, 7, p, [leader])) == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert code(alter(leader, c, tid, 0, p, [leader], leader_epoch=p["LeaderEpoch"] + 1)) == Errors.NOT_CONTROLLER
    assert code(alter(leader, c, tid, 0, p, [leader], partition_epoch=p["PartitionEpoch"] + 1)) == Errors.NOT_CONTROLLER
    assert code(alter(leader, c, tid, 0, p, [leader], leader_epoch=p["LeaderEpoch"] - 1)) == Errors.FENCED_LEADER_EPOCH
    assert code(alter(other, c, tid, 0, p, [other])) == Errors.INVALID_REQUEST  # not the leader
    assert code(alter(leader, c, tid, 0, p, [leader], partition_epoch=p["PartitionEpoch"] - 1)) == \
        Errors.INVALID_UPDATE_VERSION
    assert code(alter(leader, c, tid, 0, p, [leader, 9])) == Errors.INVALID_REQUEST  # not a replica
    assert code(alter(leader, c, tid, 0, p, [leader, leader])) == Errors.INVALID_REQUEST  # twice
    assert code(alter(leader, c, tid, 0, p, [other])) == Errors.INVALID_REQUEST  # without the leader
    assert code(alter(leader, c, tid, 0, p, [leader, other], recovery=1)) == Errors.INVALID_REQUEST
    assert code(alter(leader, c, tid, 0, p, [leader], recovery=1)) == Errors.INVALID_REQUEST  # RECOVERED -> RECOVERING
    assert code(alter(leader, c, tid, 0, p, [leader, other], epochs={other: 12345})) == Errors.INELIGIBLE_REPLICA
    c.apply(c.cluster.fence_records(c.image, other))
    assert code(alter(leader, c, tid, 0, p, [leader, other])) == Errors.INELIGIBLE_REPLICA
    v2 = alter(leader, c, tid, 0, p, [])
    v2["Topics"][0]["Partitions"][0]["NewIsr"] = [leader, other]  # v2: the ISR without broker epochs
    assert code(v2, version=2) == Errors.INELIGIBLE_REPLICA
    body = alter(leader, c, tid, 0, p, [leader])
    body["BrokerEpoch"] += 1
    with pytest.raises(ControllerError) as e:
        c.pc.alter_partition(c.image, body, 3)
    assert e.value.code == Errors.STALE_BROKER_EPOCH


# ---------------------------------------------------------------------- ElectLeaders
def test_preferred_elections_bring_leadership_back_to_the_first_replica():
    c = Leadership()
    before = three_way(c, partitions=3)
    for b in (1, 2, 3):
        c.heartbeat(b)
    c.apply(c.pc.broker_fenced(c.image, 1))
    moved = [pid for pid, p in before.items() if p["Replicas"][0] == 1]
    assert moved and all(c.partitions("t")[pid]["Leader"] != 1 for pid in moved)
    # back, unfenced, but out of the ISR: a preferred election cannot pick it yet
    c.apply(c.pc.broker_unfenced(c.image, 1, c.cluster.brokers[1]["BrokerEpoch"]))
    request = {"ElectionType": 0, "TopicPartitions": [{"Topic": "t", "Partitions": [*moved, 99]},
                                                     {"Topic": "nope", "Partitions": [0]}], "TimeoutMs": 1000}
    records, answer = c.pc.elect_leaders(c.image, request)
    assert records == []
    codes = {(r["Topic"], x["PartitionId"]): x["ErrorCode"] for r in answer["ReplicaElectionResults"]
             for x in r["PartitionResult"]}
    assert codes == {**{("t", pid): Errors.PREFERRED_LEADER_NOT_AVAILABLE for pid in moved},
                     ("t", 99): Errors.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    # in the ISR again (its leaders add it back): now it leads again
    for pid in moved:
        p = c.partitions("t")[pid]
        isr = [*p["Isr"], 1]
        r, _a = c.pc.alter_partition(c.image, alter(p["Leader"], c, c.image.topic_ids["t"], pid, p, isr), 3)
        c.apply(r)
    assert sorted(pid for _t, pid in c.pc.imbalanced(c.image)) == sorted(moved)
    records, answer = c.pc.elect_leaders(c.image, {"ElectionType": 0, "TopicPartitions": None, "TimeoutMs": 1})
    # all partitions asked for: those that need no election are left out
    assert [x["PartitionId"] for x in answer["ReplicaElectionResults"][0]["PartitionResult"]] == sorted(moved)
    c.apply(records)
    assert all(c.partitions("t")[pid]["Leader"] == 1 for pid in moved) and c.pc.imbalanced(c.image) == []


def test_unclean_election_requests():
    c = Leadership()
    c.create(topic("u", -1, -1, assignments=[(0, [2, 1])]))
    tid = c.image.topic_ids["u"]
    p = c.partitions("u")[0]
    r, _a = c.pc.alter_partition(c.image, alter(2, c, tid, 0, p, [2]), 3)
    c.apply(r)
    body = {"ElectionType": 1, "TopicPartitions": [{"Topic": "u", "Partitions": [0]}], "TimeoutMs": 1}
    records, answer = c.pc.elect_leaders(c.image, body)
    assert records == [] and answer["ReplicaElectionResults"][0]["PartitionResult"][0]["ErrorCode"] == \
        Errors.ELECTION_NOT_NEEDED
    c.apply(c.pc.broker_fenced(c.image, 2))  # a clean topic: leaderless
    assert c.partitions("u")[0]["Leader"] == -1
    records, answer = c.pc.elect_leaders(c.image, body)
    assert answer["ReplicaElectionResults"][0]["PartitionResult"][0]["ErrorCode"] == Errors.NONE
    c.apply(records)
    p = c.partitions("u")[0]
    assert (p["Leader"], p["Isr"], p["LeaderRecoveryState"]) == (1, [1], 1)
    with pytest.raises(ControllerError) as e:
        c.pc.elect_leaders(c.image, {**body, "ElectionType": 7})
    assert e.value.code == Errors.INVALID_REQUEST


def test_elr_keeps_the_isr_members_below_min_isr_eligible():
    """With eligible.leader.replicas.version 1 the ISR may empty: the members that left below
    min.insync.replicas stay eligible, and the last leader is remembered."""
    c = Leadership()
    c.apply([encode_metadata_record(FEATURE_LEVEL, 0, {"Name": "eligible.leader.replicas.version", "FeatureLevel": 1})])
    c.create(topic("e", -1, -1, configs={"min.insync.replicas": "2"}, assignments=[(0, [1, 2, 3])]))
    for b in (1, 2, 3):
        c.heartbeat(b)
    c.apply(c.pc.broker_fenced(c.image, 3))
    c.apply(c.pc.broker_fenced(c.image, 2))
    p = c.partitions("e")[0]
    assert (p["Leader"], p["Isr"], p["EligibleLeaderReplicas"]) == (1, [1], [2])
    c.apply(c.pc.broker_fenced(c.image, 1))
    p = c.partitions("e")[0]
    assert (p["Leader"], p["Isr"], sorted(p["EligibleLeaderReplicas"]), p["LastKnownElr"]) == (-1, [], [1, 2], [1])


# ---------------------------------------------------------------------- AssignReplicasToDirs
def assign(c: Leadership, bid: int, moves: dict[uuid.UUID, list[tuple[uuid.UUID, int]]]) -> dict:
    return {"BrokerId": bid, "BrokerEpoch": c.cluster.brokers[bid]["BrokerEpoch"], "Directories": [
        {"Id": d, "Topics": [{"TopicId": tid, "Partitions": [{"PartitionIndex": p}]} for tid, p in parts]}
        for d, parts in moves.items()]}


def test_assign_replicas_to_dirs_records_where_a_broker_with_several_directories_put_its_replicas():
    two = {1: uuid.UUID(int=0xA1), 2: uuid.UUID(int=0xA2)}
    c = Leadership({1: (None, False, [DIRS[1], two[1]]), 2: (None, False, [DIRS[2], two[2]])})
    c.create(topic("m", -1, -1, assignments=[(0, [1, 2]), (1, [2, 1])]))
    tid = c.image.topic_ids["m"]
    from kraftkit.controller.replication import UNASSIGNED_DIR

    assert all(p["Directories"] == [UNASSIGNED_DIR, UNASSIGNED_DIR] for p in c.partitions("m").values())
    records, answer = c.pc.assign_replicas_to_dirs(c.image, assign(c, 1, {two[1]: [(tid, 0), (tid, 1)]}))
    assert [x["ErrorCode"] for d in answer["Directories"] for t in d["Topics"] for x in t["Partitions"]] == [0, 0]
    c.apply(records)
    parts = c.partitions("m")
    assert parts[0]["Directories"] == [two[1], UNASSIGNED_DIR] and parts[1]["Directories"] == [UNASSIGNED_DIR, two[1]]
    assert parts[0]["LeaderEpoch"] == 0 and parts[0]["PartitionEpoch"] == 1  # only the directory changed
    # again: nothing changes, nothing is written
    records, _a = c.pc.assign_replicas_to_dirs(c.image, assign(c, 1, {two[1]: [(tid, 0)]}))
    assert records == []
    # the refusals, per partition
    _r, answer = c.pc.assign_replicas_to_dirs(c.image, assign(c, 1, {two[1]: [(uuid.uuid4(), 0), (tid, 9)]}))
    codes = [x["ErrorCode"] for d in answer["Directories"] for t in d["Topics"] for x in t["Partitions"]]
    assert codes == [Errors.UNKNOWN_TOPIC_ID, Errors.UNKNOWN_TOPIC_OR_PARTITION]
    c.create(topic("only2", -1, -1, assignments=[(0, [2])]))
    _r, answer = c.pc.assign_replicas_to_dirs(c.image, assign(c, 1, {two[1]: [(c.image.topic_ids["only2"], 0)]}))
    assert answer["Directories"][0]["Topics"][0]["Partitions"][0]["ErrorCode"] == Errors.NOT_LEADER_OR_FOLLOWER
    body = assign(c, 1, {two[1]: [(tid, 0)]})
    body["BrokerEpoch"] += 1
    with pytest.raises(ControllerError) as e:
        c.pc.assign_replicas_to_dirs(c.image, body)
    assert e.value.code == Errors.STALE_BROKER_EPOCH


def test_a_replica_assigned_to_an_offline_directory_leaves_the_isr_and_its_leadership():
    c = Leadership({1: (None, False, [DIRS[1]]), 2: (None, False, [DIRS[2]])})
    c.create(topic("o", -1, -1, assignments=[(0, [1, 2])]))
    tid = c.image.topic_ids["o"]
    gone = uuid.UUID(int=0xDEAD)  # not one broker 1 registered: offline
    records, _a = c.pc.assign_replicas_to_dirs(c.image, assign(c, 1, {gone: [(tid, 0)]}))
    c.apply(records)
    p = c.partitions("o")[0]
    assert (p["Leader"], p["Isr"]) == (2, [2])


def test_a_heartbeat_naming_a_failed_directory_moves_the_replicas_in_it():
    a, b = uuid.UUID(int=0xA1), uuid.UUID(int=0xB1)
    c = Leadership({1: (None, False, [a, b]), 2: (None, False, [DIRS[2]])})
    c.create(topic("f", -1, -1, assignments=[(0, [1, 2]), (1, [1, 2])]))
    tid = c.image.topic_ids["f"]
    c.apply(c.pc.assign_replicas_to_dirs(c.image, assign(c, 1, {a: [(tid, 0)], b: [(tid, 1)]}))[0])
    for bid in (1, 2):
        c.heartbeat(bid)
    body = {"BrokerId": 1, "BrokerEpoch": c.cluster.brokers[1]["BrokerEpoch"], "CurrentMetadataOffset": c.offset,
            "WantFence": False, "WantShutDown": False, "OfflineLogDirs": [a, uuid.UUID(int=0x77)]}
    records, reply = c.cluster.heartbeat(c.image, body, c.pc, c.offset)
    decoded = [decode_metadata_record(r) for r in records]
    assert kinds(decoded) == [PARTITION_CHANGE, BROKER_REGISTRATION_CHANGE] and not reply.is_fenced
    assert decoded[1][2]["LogDirs"] == [b]
    c.apply(records)
    parts = c.partitions("f")
    assert (parts[0]["Leader"], parts[0]["Isr"]) == (2, [2])  # its replica was in the failed directory
    assert (parts[1]["Leader"], parts[1]["Isr"]) == (1, [1, 2])
    assert c.cluster.brokers[1]["LogDirs"] == [b] and c.image.brokers[1]["LogDirs"] == [b]
    # the same failure reported again writes nothing
    body["CurrentMetadataOffset"] = c.offset
    assert c.cluster.heartbeat(c.image, body, c.pc, c.offset)[0] == []
