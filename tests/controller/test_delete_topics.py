"""DeleteTopics decided by kraftkit.controller.topic_changes against an image and registrations built
from records: Kafka 4.4's rules and messages (names and ids, duplicates, unknown topics,
delete.topic.enable), the RemoveTopicRecords and their order, and the image after their replay."""

from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest

from kraftkit._core import decode_metadata_record, encode_metadata_record, encode_response
from kraftkit._kafka import PARTITION, REMOVE_TOPIC, TOPIC
from kraftkit.controller.cluster import ControllerError
from kraftkit.controller.topic_changes import delete_topics, delete_topics_response
from kraftkit.protocol.messages import ApiKey, Errors, decode_response

from .test_create_topics import THREE, Cluster, topic

ZERO = uuid.UUID(int=0)
UNKNOWN_NAME = (Errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
UNKNOWN_ID = (Errors.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")


def delete(c: Cluster, names=(), ids=(), *, version: int = 6, commit: bool = True, state=None):
    """Deletes topics by name (and, from v6, by (name, id) pairs in ``state``): the decoded records and
    the results sorted (their order is random, as Kafka's)."""
    if version >= 6:
        body = {"Topics": state if state is not None else [{"Name": n, "TopicId": ZERO} for n in names]
                + [{"Name": None, "TopicId": i} for i in ids], "TimeoutMs": 30000}
    else:
        body = {"TopicNames": list(names), "TimeoutMs": 30000}
    records, results = delete_topics(c.rc, c.image, body, version)
    if commit:
        c.apply(records)
    return [decode_metadata_record(r) for r in records], results


def answers(results: list[dict]) -> list[tuple]:
    return sorted((r["Name"] or "", str(r["TopicId"]), r["ErrorCode"], r["ErrorMessage"] or "") for r in results)


def add_topic(c: Cluster, name: str, tid: uuid.UUID, partitions: int = 1) -> None:
    c.apply([encode_metadata_record(TOPIC, 0, {"Name": name, "TopicId": tid})] + [
        encode_metadata_record(PARTITION, 0, {"PartitionId": i, "TopicId": tid, "Replicas": [1], "Isr": [1],
                                              "RemovingReplicas": [], "AddingReplicas": [], "Leader": 1,
                                              "LeaderEpoch": 0, "PartitionEpoch": 0}) for i in range(partitions)])


def test_by_name_removes_the_topic_its_partitions_and_configs_as_kafkas_replay_does():
    c = Cluster(THREE)
    _r, (a, b) = c.create(topic("a", 3, 2, configs={"retention.ms": "1"}),
                          topic("b", 2, configs={"cleanup.policy": "compact"}))
    before_b = (c.image.topic("b"), dict(c.image.configs[(2, "b")]))
    for version in (1, 5, 6):
        if c.image.topic("a") is None:
            _r, _res = c.create(topic("a", 3, 2, configs={"retention.ms": "1"}))
        tid = c.image.topic_ids["a"]
        records, results = delete(c, ["a"], version=version)
        # one RemoveTopicRecord, nothing for the partitions or the configs
        assert records == [(REMOVE_TOPIC, 0, {"TopicId": tid})]
        assert [(r["Name"], r["TopicId"], r["ErrorCode"], r["ErrorMessage"]) for r in results] == \
            [("a", tid, Errors.NONE, None)]
        assert c.image.topic("a") is None and tid not in c.image.topics and (2, "a") not in c.image.configs
        assert (c.image.topic("b"), c.image.configs[(2, "b")]) == before_b
    # the image equals one that never had the topic (what Kafka's replay of the same records gives)
    fresh = Cluster(THREE)
    fresh.apply([encode_metadata_record(TOPIC, 0, {"Name": "b", "TopicId": b["TopicId"]})])
    assert set(c.image.topics) == {b["TopicId"]} and c.image.topic_ids == fresh.image.topic_ids
    assert {k: v for k, v in c.image.configs.items() if k[0] == 2} == {(2, "b"): {"cleanup.policy": "compact"}}
    assert a["TopicId"] not in c.image.topics


def test_by_id_and_every_refusal_with_kafkas_messages():
    c = Cluster(THREE)
    _r, res = c.create(topic("a"), topic("b"), topic("c"), topic("d"), topic("e"))
    ids = {r["Name"]: r["TopicId"] for r in res}
    nowhere = uuid.UUID(int=12345)
    state = [
        {"Name": None, "TopicId": ids["a"]},  # by id
        {"Name": "b", "TopicId": ZERO},  # by name
        {"Name": None, "TopicId": ZERO},  # neither
        {"Name": "c", "TopicId": ids["c"]},  # both
        {"Name": "gone", "TopicId": ZERO},  # unknown name
        {"Name": None, "TopicId": nowhere},  # unknown id
        {"Name": "__cluster_metadata", "TopicId": ZERO},  # no topic of the image
        {"Name": "d", "TopicId": ZERO}, {"Name": "d", "TopicId": ZERO}, {"Name": "d", "TopicId": ZERO},
        {"Name": None, "TopicId": ids["e"]}, {"Name": None, "TopicId": ids["e"]},
    ]
    records, results = delete(c, state=state)
    assert answers(results) == answers([
        {"Name": "a", "TopicId": ids["a"], "ErrorCode": Errors.NONE, "ErrorMessage": None},
        {"Name": "b", "TopicId": ids["b"], "ErrorCode": Errors.NONE, "ErrorMessage": None},
        {"Name": None, "TopicId": ZERO, "ErrorCode": Errors.INVALID_REQUEST,
         "ErrorMessage": "Neither topic name nor id were specified."},
        {"Name": "c", "TopicId": ids["c"], "ErrorCode": Errors.INVALID_REQUEST,
         "ErrorMessage": "You may not specify both topic name and topic id."},
        {"Name": "gone", "TopicId": ZERO, "ErrorCode": UNKNOWN_NAME[0], "ErrorMessage": UNKNOWN_NAME[1]},
        {"Name": None, "TopicId": nowhere, "ErrorCode": UNKNOWN_ID[0], "ErrorMessage": UNKNOWN_ID[1]},
        {"Name": "__cluster_metadata", "TopicId": ZERO, "ErrorCode": UNKNOWN_NAME[0], "ErrorMessage": UNKNOWN_NAME[1]},
        {"Name": "d", "TopicId": ZERO, "ErrorCode": Errors.INVALID_REQUEST, "ErrorMessage": "Duplicate topic name."},
        {"Name": None, "TopicId": ids["e"], "ErrorCode": Errors.INVALID_REQUEST, "ErrorMessage": "Duplicate topic id."},
    ])
    assert sorted(d["TopicId"] for _k, _v, d in records) == sorted([ids["a"], ids["b"]])
    assert sorted(c.image.topic_ids) == ["c", "d", "e"]


def test_a_name_that_maps_to_an_id_also_given():
    c = Cluster(THREE)
    _r, res = c.create(topic("a"), topic("b"))
    ida, idb = (r["TopicId"] for r in res)
    # the name's answer says so; the id's own entry gets no answer at all (Kafka drops it), nothing is deleted
    records, results = delete(c, state=[{"Name": None, "TopicId": ida}, {"Name": "a", "TopicId": ZERO},
                                        {"Name": None, "TopicId": idb}])
    assert answers(results) == answers([
        {"Name": "a", "TopicId": ida, "ErrorCode": Errors.INVALID_REQUEST,
         "ErrorMessage": "The provided topic name maps to an ID that was already supplied."},
        {"Name": "b", "TopicId": idb, "ErrorCode": Errors.NONE, "ErrorMessage": None},
    ])
    assert [d["TopicId"] for _k, _v, d in records] == [idb] and c.image.topic("a") is not None


def test_before_v6_names_only_and_a_topic_named_twice():
    c = Cluster(THREE)
    c.create(topic("a"), topic("b"))
    idb = c.image.topic_ids["b"]
    records, results = delete(c, ["a", "b", "a", "zz", "a"], version=4)
    assert answers(results) == answers([
        {"Name": "a", "TopicId": ZERO, "ErrorCode": Errors.INVALID_REQUEST, "ErrorMessage": "Duplicate topic name."},
        {"Name": "b", "TopicId": idb, "ErrorCode": Errors.NONE, "ErrorMessage": None},
        {"Name": "zz", "TopicId": ZERO, "ErrorCode": UNKNOWN_NAME[0], "ErrorMessage": UNKNOWN_NAME[1]},
    ])
    assert records == [(REMOVE_TOPIC, 0, {"TopicId": idb})] and sorted(c.image.topic_ids) == ["a"]
    # the answer encodes at v4 (no TopicId, no ErrorMessage there)
    out = encode_response(ApiKey.DELETE_TOPICS, 4, 1, delete_topics_response({}, 4, results))
    assert sorted(x["Name"] for x in decode_response(ApiKey.DELETE_TOPICS, 4, out)[1]["Responses"]) == ["a", "b", "zz"]


@pytest.mark.parametrize(("value", "enabled"), [("false", False), (" FALSE\t", False), ("true", True),
                                                 ("no", True)])  # not a boolean: Kafka's default, true
def test_delete_topic_enable_false_refuses_the_whole_request(value, enabled):
    c = Cluster(THREE, config={"delete.topic.enable": value})
    c.create(topic("a"))
    if enabled:
        records, _results = delete(c, ["a"])
        assert len(records) == 1
        return
    for version, code, message in [(6, Errors.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."),
                                   (3, Errors.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."),
                                   (2, Errors.INVALID_REQUEST, "This version does not support topic deletion.")]:
        with pytest.raises(ControllerError) as e:
            delete(c, ["a"], version=version)
        assert (e.value.code, e.value.message) == (code, message)
    assert c.image.topic("a") is not None


def test_a_whole_request_error_lists_every_topic_of_the_request_without_a_message():
    tid = uuid.UUID(int=777)
    body6 = {"Topics": [{"Name": "a", "TopicId": ZERO}, {"Name": None, "TopicId": tid}, {"Name": "a", "TopicId": ZERO}],
             "TimeoutMs": 1}
    err = ControllerError(Errors.NOT_CONTROLLER, "not the active controller")
    assert delete_topics_response(body6, 6, None, err) == {"ThrottleTimeMs": 0, "Responses": [
        {"Name": "a", "TopicId": ZERO, "ErrorCode": Errors.NOT_CONTROLLER, "ErrorMessage": None},
        {"Name": None, "TopicId": tid, "ErrorCode": Errors.NOT_CONTROLLER, "ErrorMessage": None},
        {"Name": "a", "TopicId": ZERO, "ErrorCode": Errors.NOT_CONTROLLER, "ErrorMessage": None}]}
    assert [r["Name"] for r in delete_topics_response({"TopicNames": ["x", "y"]}, 5, None, err)["Responses"]] == \
        ["x", "y"]


def test_not_the_active_controller():
    c = Cluster(THREE)
    c.cluster.deactivate()
    with pytest.raises(ControllerError) as e:
        delete(c, ["a"])
    assert e.value.code == Errors.NOT_CONTROLLER


def test_records_in_javas_hashmap_order_and_answers_shuffled():
    c = Cluster(THREE)
    r = random.Random(11)
    ids = [uuid.UUID(int=r.getrandbits(128)) for _ in range(12)]
    for i, tid in enumerate(ids):
        add_topic(c, f"t{i}", tid)
    records, results = delete(c, ids=ids, commit=False)
    # the order java.util.HashMap<Uuid, String> iterates these twelve ids in Kafka's deleteTopics (by
    # the bucket of Kafka's Uuid.hashCode, request order within a bucket), checked with a JDK and
    # kafka-clients 4.4.0
    assert [ids.index(d["TopicId"]) for _k, _v, d in records] == [2, 7, 8, 9, 1, 5, 0, 4, 3, 10, 11, 6]
    assert sorted(x["TopicId"] for x in results) == sorted(ids)
    # the answers are shuffled by the controller's generator, as Kafka's Collections.shuffle does
    orders = set()
    for seed in range(6):
        c.rc.random = random.Random(seed)
        _records, results = delete(c, ids=ids, commit=False)
        orders.add(tuple(x["TopicId"] for x in results))
    assert len(orders) > 1


def test_past_ten_thousand_records_a_topic_is_an_unknown_server_error_and_stays():
    c = Cluster(THREE)
    r = random.Random(3)
    ids = [uuid.UUID(int=r.getrandbits(128)) for _ in range(10002)]
    c.apply([encode_metadata_record(TOPIC, 0, {"Name": f"t{i}", "TopicId": tid}) for i, tid in enumerate(ids)])
    records, results = delete(c, [f"t{i}" for i in range(10002)])
    codes = Counter(x["ErrorCode"] for x in results)
    assert len(records) == 10000 and codes == {Errors.NONE: 10000, Errors.UNKNOWN_SERVER_ERROR: 2}
    left = sorted(x["Name"] for x in results if x["ErrorCode"] == Errors.UNKNOWN_SERVER_ERROR)
    assert sorted(c.image.topic_ids) == left
    assert all(x["ErrorMessage"] is None for x in results)


def test_arbitrary_requests_get_an_answer_the_codec_encodes_and_records_the_image_replays():
    rng = random.Random(9)
    c = Cluster(THREE)
    for round_ in range(60):
        if len(c.image.topic_ids) < 3:
            c.create(*(topic(f"t{round_}-{i}") for i in range(4)))
        known = list(c.image.topic_ids.items())
        pool_names = [n for n, _ in known] + ["", "nope", "__cluster_metadata", None]
        pool_ids = [i for _, i in known] + [ZERO, uuid.UUID(int=rng.getrandbits(128))]
        version = rng.choice([1, 2, 3, 4, 5, 6])
        state = [{"Name": rng.choice(pool_names), "TopicId": rng.choice(pool_ids)} for _ in range(rng.randrange(6))]
        names = [n for n in (rng.choice(pool_names) for _ in range(rng.randrange(5))) if n is not None]
        records, results = delete(c, names, version=version, state=state)
        assert all(k == REMOVE_TOPIC for k, _v, _d in records)
        out = encode_response(ApiKey.DELETE_TOPICS, version, 1, delete_topics_response({}, version, results))
        assert len(decode_response(ApiKey.DELETE_TOPICS, version, out)[1]["Responses"]) == len(results)
