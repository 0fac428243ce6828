"""Partition reassignments on the controller (kraftkit.controller.reassignments), against an image and
registrations built from records: AlterPartitionReassignments' records and per-partition answers
(validation, cancellation, the replication-factor guard of v1, the record bound),
ListPartitionReassignments, and a reassignment driven to completion by the leader's AlterPartition.

Expected replica lists follow Kafka's rules by hand: moving [1, 2] to [2, 3] makes the replicas the
target followed by the removed ones ([2, 3, 1]), adding [3], removing [1]."""

from __future__ import annotations

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import PARTITION_CHANGE
from kraftkit.controller import reassignments as reassignments_module
from kraftkit.controller.reassignments import PartitionReassignments, reassignment_replicas, revert
from kraftkit.protocol.messages import Errors
from tests.controller.test_create_topics import DIRS, topic
from tests.controller.test_partition_leadership import Leadership, alter

FOUR = {b: (None, False, [DIRS[b]]) for b in (1, 2, 3, 4)}


class Reassigning(Leadership):
    def __init__(self, **kw) -> None:
        super().__init__(FOUR, **kw)
        self.ra = PartitionReassignments(self.pc)

    def reassign(self, *moves: tuple[str, int, list[int] | None], allow_rf_change: bool | None = None,
                 commit: bool = True) -> tuple[list[tuple], dict]:
        topics: dict[str, list] = {}
        for name, pid, replicas in moves:
            topics.setdefault(name, []).append({"PartitionIndex": pid, "Replicas": replicas})
        body: dict = {"TimeoutMs": 60000, "Topics": [{"Name": n, "Partitions": p} for n, p in topics.items()]}
        if allow_rf_change is not None:
            body["AllowReplicationFactorChange"] = allow_rf_change
        records, answer = self.ra.alter_reassignments(self.image, body)
        if commit:
            self.apply(records)
        return [decode_metadata_record(r) for r in records], answer

    def listed(self, topics: list[dict] | None = None) -> dict:
        return self.ra.list_reassignments(self.image, {"TimeoutMs": 60000, "Topics": topics})


def results(answer: dict) -> list[tuple[str, int, int, str | None]]:
    return [(t["Name"], p["PartitionIndex"], p["ErrorCode"], p["ErrorMessage"])
            for t in answer["Responses"] for p in t["Partitions"]]


def made(c: Reassigning, name: str, *assignments: list[int], configs: dict | None = None) -> dict[int, dict]:
    _r, res = c.create(topic(name, -1, -1, configs=configs, assignments=list(enumerate(assignments))))
    assert res[0]["ErrorCode"] == Errors.NONE
    return {pid: dict(p) for pid, p in c.partitions(name).items()}


def test_the_replicas_of_a_reassignment_are_the_target_then_the_removed_ones_sorted():
    assert reassignment_replicas([1, 2, 3], [5, 4, 3]) == ([5, 4, 3, 1, 2], [4, 5], [1, 2])
    assert reassignment_replicas([3, 1], [1, 3]) == ([1, 3], [], [])
    assert revert({"Replicas": [5, 4, 3, 1, 2], "Isr": [3, 4, 1], "AddingReplicas": [4, 5],
                   "RemovingReplicas": [1, 2]}) == ([3, 1, 2], [3, 1], False)
    assert revert({"Replicas": [3, 1], "Isr": [3], "AddingReplicas": [3],
                   "RemovingReplicas": [1]}) == ([1], [1], True)  # unclean: only an adding replica is in sync


def test_a_move_adds_the_new_replica_and_the_leaders_alter_partition_completes_it():
    c = Reassigning()
    before = made(c, "t", [1, 2])[0]
    assert (before["Leader"], before["Isr"]) == (1, [1, 2])
    records, answer = c.reassign(("t", 0, [2, 3]))
    assert answer["ErrorCode"] == Errors.NONE and answer["ErrorMessage"] is None
    assert answer["AllowReplicationFactorChange"] is True  # v0: the field's default
    assert results(answer) == [("t", 0, Errors.NONE, None)]
    assert [k for k, _v, _d in records] == [PARTITION_CHANGE]
    change = records[0][2]
    assert change["Replicas"] == [2, 3, 1] and change["AddingReplicas"] == [3] and change["RemovingReplicas"] == [1]
    assert change["Directories"] == [DIRS[2], DIRS[3], DIRS[1]]  # the new replica in its broker's only directory
    p = c.partitions("t")[0]
    # stage 1: the leader and ISR stay, the partition epoch moves
    assert (p["Leader"], p["Isr"], p["LeaderEpoch"]) == (1, [1, 2], before["LeaderEpoch"])
    assert p["PartitionEpoch"] == before["PartitionEpoch"] + 1
    assert c.listed() == {"ThrottleTimeMs": 0, "ErrorCode": 0, "ErrorMessage": None, "Topics": [
        {"Name": "t", "Partitions": [{"PartitionIndex": 0, "Replicas": [2, 3, 1], "AddingReplicas": [3],
                                      "RemovingReplicas": [1]}]}]}

    # the leader takes the new replica into its ISR: that completes the reassignment, 1 leaves and
    # the leadership moves to the first remaining ISR replica, 2; the leader is told NEW_LEADER_ELECTED
    tid = c.image.topic_ids["t"]
    records, reply = c.pc.alter_partition(c.image, alter(1, c, tid, 0, p, [1, 2, 3]), 3)
    c.apply(records)
    assert reply["Topics"][0]["Partitions"][0] == {"PartitionIndex": 0, "ErrorCode": Errors.NEW_LEADER_ELECTED}
    done = c.partitions("t")[0]
    assert (done["Replicas"], done["Isr"], done["Leader"]) == ([2, 3], [2, 3], 2)
    assert (done["AddingReplicas"], done["RemovingReplicas"]) == ([], [])
    assert done["Directories"] == [DIRS[2], DIRS[3]]
    assert done["LeaderEpoch"] == before["LeaderEpoch"] + 1
    assert c.listed()["Topics"] == []
    assert c.listed([{"Name": "t", "PartitionIndexes": [0]}])["Topics"] == []


def test_a_reordering_completes_at_once_and_keeps_the_leader():
    c = Reassigning()
    made(c, "t", [1, 2])
    records, answer = c.reassign(("t", 0, [2, 1]))
    assert results(answer) == [("t", 0, Errors.NONE, None)]
    change = records[0][2]
    assert change["Replicas"] == [2, 1] and change["Directories"] == [DIRS[2], DIRS[1]]
    # (None: no change; -2: no leader change)
    assert (change["AddingReplicas"], change["RemovingReplicas"], change["Leader"], change["Isr"]) == (None, None, -2, None)
    p = c.partitions("t")[0]
    assert (p["Replicas"], p["Leader"], p["AddingReplicas"], p["RemovingReplicas"]) == ([2, 1], 1, [], [])


def test_a_reassignment_to_the_current_replicas_writes_nothing_and_succeeds():
    c = Reassigning()
    made(c, "t", [1, 2])
    records, answer = c.reassign(("t", 0, [1, 2]))
    assert records == [] and results(answer) == [("t", 0, Errors.NONE, None)]


def test_a_new_target_during_a_reassignment_replaces_it():
    c = Reassigning()
    made(c, "t", [1, 2])
    c.reassign(("t", 0, [2, 3]))
    records, _answer = c.reassign(("t", 0, [2, 4]))
    change = records[0][2]
    # the current replicas [2, 3, 1]: 3 and 1 go, 4 comes
    assert (change["Replicas"], change["AddingReplicas"], change["RemovingReplicas"]) == ([2, 4, 1, 3], [4], [1, 3])


def test_every_rule_answers_its_own_partition_and_only_the_valid_ones_write():
    c = Reassigning()
    made(c, "t", [1, 2], [2, 3])
    records, answer = c.reassign(
        ("nope", 0, [1]),
        ("t", 7, [1]),
        ("t", 0, []),
        ("t", 0, [3, 9]),
        ("t", 0, [3, 1, 3]),
        ("t", 1, [3, 4]),
    )
    assert results(answer) == [
        ("nope", 0, Errors.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope."),
        ("t", 7, Errors.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:7."),
        ("t", 0, Errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."),
        ("t", 0, Errors.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes broker 9, but no such broker is registered."),
        ("t", 0, Errors.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes the broker 3 more than once."),
        ("t", 1, Errors.NONE, None),
    ]
    assert answer["ErrorCode"] == Errors.NONE
    assert [(d["PartitionId"], d["AddingReplicas"]) for _k, _v, d in records] == [(1, [4])]


def test_the_replication_factor_guard_of_v1():
    c = Reassigning()
    made(c, "t", [1, 2], [1, 2])
    _r, answer = c.reassign(("t", 0, [1, 2, 3]), ("t", 1, [3]), ("t", 1, [3, 4]), allow_rf_change=False)
    assert answer["AllowReplicationFactorChange"] is False
    assert results(answer) == [
        ("t", 0, Errors.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 3"),
        ("t", 1, Errors.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 1"),
        ("t", 1, Errors.NONE, None),
    ]
    # while partition 1 moves to [3, 4] its replicas are [3, 4, 1, 2]: the factor is the target's, 2
    assert c.partitions("t")[1]["Replicas"] == [3, 4, 1, 2]
    _r, answer = c.reassign(("t", 1, [1, 2, 3]), ("t", 1, [2, 3]), allow_rf_change=False, commit=False)
    assert results(answer) == [
        ("t", 1, Errors.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 3"),
        ("t", 1, Errors.NONE, None),
    ]
    # allowed (the default): a third replica is added
    records, answer = c.reassign(("t", 0, [1, 2, 3]))
    assert results(answer) == [("t", 0, Errors.NONE, None)] and records[0][2]["AddingReplicas"] == [3]


def test_cancelling_reverts_to_the_original_replicas_and_without_one_it_is_refused():
    c = Reassigning()
    before = made(c, "t", [1, 2], [3, 4])
    _r, answer = c.reassign(("t", 0, None), ("t", 1, [4, 1]))
    assert results(answer) == [("t", 0, Errors.NO_REASSIGNMENT_IN_PROGRESS, None), ("t", 1, Errors.NONE, None)]
    assert c.partitions("t")[1]["Replicas"] == [4, 1, 3]
    records, answer = c.reassign(("t", 1, None))
    assert results(answer) == [("t", 1, Errors.NONE, None)]
    change = records[0][2]
    assert (change["Replicas"], change["AddingReplicas"], change["RemovingReplicas"]) == ([4, 3], [], [])
    p = c.partitions("t")[1]
    assert (p["Replicas"], p["Isr"], p["Leader"]) == ([4, 3], [3, 4], before[1]["Leader"])
    assert p["Directories"] == [DIRS[4], DIRS[3]]
    assert c.listed()["Topics"] == []


@pytest.mark.parametrize("unclean", [False, True])
def test_a_cancellation_that_needs_an_unclean_election_only_when_the_topic_allows_one(unclean):
    c = Reassigning()
    configs = {"unclean.leader.election.enable": "true"} if unclean else None
    made(c, "t", [1, 2], configs=configs)
    c.reassign(("t", 0, [3, 4]))
    tid = c.image.topic_ids["t"]
    # the leader takes 3 in (not yet 4: the reassignment goes on), then 1 is fenced: 3 leads with ISR [3]
    records, _reply = c.pc.alter_partition(c.image, alter(1, c, tid, 0, c.partitions("t")[0], [1, 3]), 3)
    c.apply(records)
    c.apply(c.pc.broker_fenced(c.image, 1))
    p = c.partitions("t")[0]
    assert (p["Replicas"], p["Isr"], p["Leader"], p["AddingReplicas"]) == ([3, 4, 1, 2], [3], 3, [3, 4])
    records, answer = c.reassign(("t", 0, None))
    if not unclean:
        assert records == []
        assert results(answer) == [("t", 0, Errors.INVALID_REPLICA_ASSIGNMENT, "Unable to revert partition "
                                    "assignment for t:0 because it would require an unclean leader election.")]
        return
    assert results(answer) == [("t", 0, Errors.NONE, None)]
    p = c.partitions("t")[0]
    # back to [1, 2] with ISR [1]; 1 is fenced, so the unclean election takes 2, RECOVERING
    assert (p["Replicas"], p["Isr"], p["Leader"], p["LeaderRecoveryState"]) == ([1, 2], [2], 2, 1)


def test_list_names_partitions_in_the_order_asked_and_leaves_out_the_rest():
    c = Reassigning()
    made(c, "a", [1], [1], [1])
    made(c, "b", [2])
    c.reassign(("a", 2, [3]), ("a", 0, [4]), ("b", 0, [1, 2]))
    every = c.listed()["Topics"]
    assert [(t["Name"], [p["PartitionIndex"] for p in t["Partitions"]]) for t in every] == [("a", [0, 2]), ("b", [0])]
    asked = c.listed([{"Name": "zz", "PartitionIndexes": [0]}, {"Name": "b", "PartitionIndexes": [3]},
                      {"Name": "a", "PartitionIndexes": [2, 1, 9, 0]}])
    assert asked["Topics"] == [{"Name": "a", "Partitions": [
        {"PartitionIndex": 2, "Replicas": [3, 1], "AddingReplicas": [3], "RemovingReplicas": [1]},
        {"PartitionIndex": 0, "Replicas": [4, 1], "AddingReplicas": [4], "RemovingReplicas": [1]}]}]
    assert c.listed([])["Topics"] == []


def test_a_request_naming_no_topic_writes_nothing():
    c = Reassigning()
    records, answer = c.ra.alter_reassignments(c.image, {"TimeoutMs": 1, "Topics": []})
    assert records == [] and answer["Responses"] == [] and answer["ErrorCode"] == Errors.NONE


def test_the_records_of_one_request_are_bounded(monkeypatch):
    monkeypatch.setattr(reassignments_module, "MAX_RECORDS", 2)
    c = Reassigning()
    made(c, "t", [1], [1], [1], [1])
    records, answer = c.reassign(("t", 0, [2]), ("t", 1, [2]), ("t", 2, [2]), ("t", 3, [1]), ("t", 9, [2]))
    assert results(answer) == [
        ("t", 0, Errors.NONE, None),
        ("t", 1, Errors.NONE, None),
        ("t", 2, Errors.UNKNOWN_SERVER_ERROR, None),
        ("t", 3, Errors.NONE, None),  # no change, no record: still room
        ("t", 9, Errors.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:9."),
    ]
    assert [d["PartitionId"] for _k, _v, d in records] == [0, 1]
