"""CreatePartitions decided by kraftkit.controller.topic_changes against an image and registrations
built from records: Kafka 4.4's rules and messages, the new partitions' records (placement, version,
directories), manual assignments, validateOnly, the 10000 bound and the order of the answers."""

from __future__ import annotations

import random
import uuid

import pytest

from kraftkit._core import decode_metadata_record, encode_metadata_record, encode_response
from kraftkit._kafka import BROKER_REGISTRATION_CHANGE, PARTITION, TOPIC
from kraftkit.controller.cluster import ControllerError
from kraftkit.controller.replication import UNASSIGNED_DIR
from kraftkit.controller.topic_changes import create_partitions, create_partitions_response
from kraftkit.features.registry import registry
from kraftkit.metadata.mv_levels import MV_3_7_IV1, MV_4_3_IV0
from kraftkit.protocol.messages import ApiKey, Errors

from .test_create_topics import DIRS, THREE, Cluster, errors, topic


def grow(c: Cluster, *topics: tuple, validate_only: bool = False, commit: bool = True):
    """CreatePartitions for (name, count) or (name, count, assignments): decoded records and results."""
    body = {"Topics": [{"Name": t[0], "Count": t[1], "Assignments": None if len(t) < 3 or t[2] is None else
                        [{"BrokerIds": b} for b in t[2]]} for t in topics],
            "TimeoutMs": 30000, "ValidateOnly": validate_only}
    records, results = create_partitions(c.rc, c.image, body)
    if commit:
        c.apply(records)
    return [decode_metadata_record(r) for r in records], results


def test_new_partitions_are_placed_numbered_on_and_written_as_createtopics_writes_them():
    c = Cluster({1: ("r1", False, [DIRS[1]]), 2: ("r2", False, [DIRS[2], DIRS[5]]), 3: ("r3", True, [DIRS[3]])})
    _r, (res,) = c.create(topic("t", 2, 2))
    records, results = grow(c, ("t", 5))
    assert errors(results) == [("t", Errors.NONE, None)]
    mv = registry().metadata_version(MV_4_3_IV0)
    assert [(k, v, d["PartitionId"]) for k, v, d in records] == [(PARTITION, mv.partition_record_version, i)
                                                                 for i in (2, 3, 4)]
    for _k, _v, p in records:
        assert p["TopicId"] == res["TopicId"] and len(p["Replicas"]) == 2 == len(set(p["Replicas"]))  # the topic's RF
        assert p["Replicas"][0] != 3 and p["Isr"] == [b for b in p["Replicas"] if b != 3]  # fenced: not in sync
        assert p["Leader"] == p["Isr"][0] and (p["LeaderEpoch"], p["PartitionEpoch"]) == (0, 0)
        assert p["Directories"] == [{1: DIRS[1], 2: UNASSIGNED_DIR, 3: DIRS[3]}[b] for b in p["Replicas"]]
    assert sorted(c.image.topic("t").partitions) == [0, 1, 2, 3, 4]
    # before directory assignment: version 0, no directories
    old = Cluster(THREE, mv=MV_3_7_IV1)
    old.create(topic("t", 1))
    records, _results = grow(old, ("t", 3))
    assert [(v, bool(d.get("Directories"))) for _k, v, d in records] == [(0, False), (0, False)]


def test_unknown_topics_and_counts_that_are_no_increase():
    c = Cluster(THREE)
    c.create(topic("t", 3))
    records, results = grow(c, ("nope", 4))
    assert errors(results) == [("nope", Errors.UNKNOWN_TOPIC_OR_PARTITION, None)] and records == []
    for count, message in [(3, "Topic already has 3 partition(s)."),
                           (2, "The topic t currently has 3 partition(s); 2 would not be an increase."),
                           (-1, "The topic t currently has 3 partition(s); -1 would not be an increase.")]:
        records, results = grow(c, ("t", count))
        assert errors(results) == [("t", Errors.INVALID_PARTITIONS, message)] and records == []
    # a TopicRecord without partitions (a hand-made log): Kafka's UnknownServerException, no message
    c.apply([encode_metadata_record(TOPIC, 0, {"Name": "bare", "TopicId": uuid.UUID(int=4242)})])
    _records, results = grow(c, ("bare", 2))
    assert errors(results) == [("bare", Errors.UNKNOWN_SERVER_ERROR, None)]


def test_manual_assignments_validated_as_createtopics_validates_them():
    c = Cluster({**THREE, 4: (None, True, [DIRS[4]])})
    c.create(topic("t", -1, -1, assignments=[(0, [1, 2])]))
    records, results = grow(c, ("t", 3, [[4, 3], [2, 1]]))
    assert errors(results) == [("t", Errors.NONE, None)]
    assert [(d["PartitionId"], d["Replicas"], d["Isr"], d["Leader"]) for _k, _v, d in records] == \
        [(1, [4, 3], [3], 3), (2, [2, 1], [2, 1], 2)]  # the fenced broker 4 out of the ISR
    for count, assignments, code, message in [
        (5, [[1, 2]], Errors.INVALID_REPLICA_ASSIGNMENT,
         "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
        (4, [], Errors.INVALID_REPLICA_ASSIGNMENT,
         "Attempted to add 1 additional partition(s), but only 0 assignment(s) were specified."),
        (4, [[]], Errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."),
        (4, [[1, 9]], Errors.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes broker 9, but no such broker is registered."),
        (4, [[2, 2]], Errors.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes the broker 2 more than once."),
        (4, [[1, 2, 3]], Errors.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes a partition with 3 replica(s), but this is not consistent with "
         "previous partitions, which have 2 replica(s)."),
        (5, [[1, 2], [4, 4]], Errors.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes the broker 4 more than once."),
        (4, [[4]], Errors.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with "
         "previous partitions, which have 2 replica(s)."),
    ]:
        records, results = grow(c, ("t", count, assignments))
        assert errors(results) == [("t", code, message)] and records == [], assignments
    d = Cluster({1: (None, False, [DIRS[1]]), 2: (None, True, [DIRS[2]]), 3: (None, True, [DIRS[3]])})
    d.create(topic("t", -1, -1, assignments=[(0, [1, 2])]))
    records, results = grow(d, ("t", 3, [[1, 3], [3, 2]]))
    assert errors(results) == [("t", Errors.INVALID_REPLICA_ASSIGNMENT, "All brokers specified in the manual "
                                "partition assignment for partition 2 are fenced or in controlled shutdown.")]
    assert records == [] and sorted(d.image.topic("t").partitions) == [0]


def test_placement_errors_carry_the_placers_message_and_write_nothing():
    c = Cluster(THREE)
    c.create(topic("t", 1, 3))
    c.cluster.brokers[3]["InControlledShutdown"] = True  # no longer usable by a placement
    _records, results = grow(c, ("t", 2))
    assert errors(results) == [("t", Errors.INVALID_REPLICATION_FACTOR, "The target replication factor of 3 cannot "
                                "be reached because only 2 broker(s) are registered.")]
    d = Cluster({1: (None, False, [DIRS[1]])})
    d.create(topic("t", 1, 1))
    d.cluster.sessions[1].fenced = True
    _records, results = grow(d, ("t", 2))
    assert errors(results) == [("t", Errors.INVALID_REPLICATION_FACTOR, "All brokers are currently fenced.")]
    # placed on a broker whose session is unfenced but whose registration is not (yet): no active replica
    e = Cluster({1: (None, False, [DIRS[1]])})
    e.create(topic("t", 1, 1))
    e.cluster.brokers[1]["Fenced"] = True
    records, results = grow(e, ("t", 3))
    assert errors(results) == [("t", Errors.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 1 time(s): "
                                "All brokers are currently fenced or in controlled shutdown.")]
    assert records == []


def test_duplicates_first_then_javas_hashset_order():
    c = Cluster(THREE)
    names = ["zeta", "alpha", "dup", "beta", "gamma", "dup", "delta", "epsilon", "omega", "x.y", "d2", "d2"]
    c.create(*(topic(n) for n in dict.fromkeys(names)))
    records, results = grow(c, *((n, 2) for n in names))
    # the iteration orders of Kafka's HashSets of these names (ControllerApis.createPartitions), checked with a JDK
    assert errors(results) == [("dup", Errors.INVALID_REQUEST, "Duplicate topic name."),
                               ("d2", Errors.INVALID_REQUEST, "Duplicate topic name.")] + [
        (n, Errors.NONE, None) for n in ["zeta", "epsilon", "x.y", "alpha", "delta", "beta", "gamma", "omega"]]
    by_topic = {c.image.topic_ids[n]: n for n in names}
    assert [by_topic[d["TopicId"]] for _k, _v, d in records] == \
        ["zeta", "epsilon", "x.y", "alpha", "delta", "beta", "gamma", "omega"]
    assert len(c.image.topic("dup").partitions) == 1 and len(c.image.topic("alpha").partitions) == 2


def test_validate_only_answers_the_same_and_writes_nothing():
    c = Cluster(THREE)
    c.create(topic("t", 1, 2))
    records, results = grow(c, ("t", 4), ("u", 2), validate_only=True)
    assert records == [] and len(c.image.topic("t").partitions) == 1
    assert sorted(errors(results)) == [("t", Errors.NONE, None), ("u", Errors.UNKNOWN_TOPIC_OR_PARTITION, None)]


def test_more_than_ten_thousand_new_partitions_or_topics_is_refused_whole():
    c = Cluster(THREE)
    c.create(topic("a", 2), topic("b", 1))
    for topics in ([("a", 5002), ("b", 5002)],  # 5000 + 5001
                   [("a", 10003)]):
        with pytest.raises(ControllerError) as e:
            grow(c, *topics)
        assert (e.value.code, e.value.message) == (Errors.POLICY_VIOLATION,
                                                   "Excessively large number of additional partitions per request.")
    # unknown topics, negative counts and no increase count for nothing: exactly 10000 new ones pass
    records, results = grow(c, ("a", 5002), ("b", 5001), ("zz", 2**31 - 1), ("a2", -5))
    assert [r["ErrorCode"] for r in results if r["Name"] in ("a", "b")] == [Errors.NONE, Errors.NONE]
    assert len(records) == 10000 and len(c.image.topic("b").partitions) == 5001
    with pytest.raises(ControllerError) as e:
        grow(c, *((f"n{i}", 1) for i in range(10001)))
    assert (e.value.code, e.value.message) == (Errors.POLICY_VIOLATION,
                                               "Unable to perform excessively large batch operation.")


def test_a_whole_request_error_lists_every_topic_and_not_the_active_controller():
    body = {"Topics": [{"Name": "a", "Count": 2, "Assignments": None}, {"Name": "a", "Count": 3, "Assignments": None}],
            "TimeoutMs": 1, "ValidateOnly": False}
    err = ControllerError(Errors.POLICY_VIOLATION, "Excessively large number of additional partitions per request.")
    assert create_partitions_response(body, None, err) == {"ThrottleTimeMs": 0, "Results": [
        {"Name": "a", "ErrorCode": Errors.POLICY_VIOLATION, "ErrorMessage": err.message}] * 2}
    c = Cluster(THREE)
    c.cluster.deactivate()
    with pytest.raises(ControllerError) as e:
        grow(c, ("t", 2))
    assert e.value.code == Errors.NOT_CONTROLLER


def test_a_broker_whose_log_directories_are_all_cordoned_takes_no_new_partition():
    # Kafka 4.4 (KIP-1066): such a broker is neither usable by a placement nor valid in a manual assignment,
    # for CreateTopics and CreatePartitions alike; one with a directory left uncordoned still is
    c = Cluster({1: (None, False, [DIRS[1]]), 2: (None, False, [DIRS[2], DIRS[5]]), 3: (None, False, [DIRS[3]])})
    c.create(topic("t", 1, 1))
    for bid, cordoned in ((1, [DIRS[1]]), (2, [DIRS[2]])):
        c.apply([encode_metadata_record(BROKER_REGISTRATION_CHANGE, 3, {"BrokerId": bid, "BrokerEpoch": 10 + bid,
                                                                         "CordonedLogDirs": cordoned})])
    records, results = grow(c, ("t", 9))
    assert errors(results) == [("t", Errors.NONE, None)]
    assert {b for _k, _v, d in records for b in d["Replicas"]} == {2, 3}
    _records, created = c.create(topic("x", 3, 3))
    assert errors(created)[0] == ("x", Errors.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 3 "
                                  "time(s): The target replication factor of 3 cannot be reached because only 2 "
                                  "broker(s) are registered.")
    refused = "The manual partition assignment includes broker 1, but all its log directories are cordoned."
    _records, results = grow(c, ("t", 10, [[1]]))
    assert errors(results) == [("t", Errors.INVALID_REPLICA_ASSIGNMENT, refused)]
    _records, created = c.create(topic("y", -1, -1, assignments=[(0, [3, 1])]))
    assert errors(created) == [("y", Errors.INVALID_REPLICA_ASSIGNMENT, refused)]


def test_arbitrary_requests_get_an_answer_the_codec_encodes_and_records_the_image_replays():
    rng = random.Random(5)
    c = Cluster({**THREE, 4: (None, True, [DIRS[4]])})
    c.create(topic("a", 2, 2), topic("b", 1, 3), topic("c.d", 1, 1))
    names = ["a", "b", "c.d", "c_d", "", "zz", "a" * 300]
    for _ in range(300):
        topics = [(rng.choice(names), rng.choice([-(2**31), -1, 0, 1, 2, 3, 5, 40, 2**31 - 1]),
                   rng.choice([None, [], [[rng.randrange(-2, 6) for _ in range(rng.randrange(4))]
                                          for _ in range(rng.randrange(4))]]))
                  for _ in range(rng.randrange(5))]
        try:
            records, results = grow(c, *topics, validate_only=rng.random() < 0.3, commit=True)
        except ControllerError as e:
            assert e.code == Errors.POLICY_VIOLATION
            continue
        assert sorted(r["Name"] for r in results) == sorted(set(t[0] for t in topics))
        for version in (0, 3):
            encode_response(ApiKey.CREATE_PARTITIONS, version, 1, create_partitions_response({}, results))
        assert all(k == PARTITION for k, _v, _d in records)
    assert all(sorted(t.partitions) == list(range(len(t.partitions))) for t in c.image.topics.values())
