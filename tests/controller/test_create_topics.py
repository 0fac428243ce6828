"""CreateTopics decided by the controller's ReplicationControlManager (kraftkit.controller.replication),
against an image and registrations built from records: Kafka's validation rules and messages, the
records and their order, the PartitionRecord version and directories per metadata.version."""

from __future__ import annotations

import random
import uuid

import pytest

from kraftkit._core import decode_metadata_record, encode_metadata_record
from kraftkit._kafka import CONFIG, FEATURE_LEVEL, PARTITION, REGISTER_BROKER, TOPIC
from kraftkit.controller.cluster import ClusterControlManager, ControllerError
from kraftkit.controller.replication import MIGRATING_DIR, UNASSIGNED_DIR, ReplicationControlManager
from kraftkit.features.registry import registry
from kraftkit.features.rewrite import record_versions
from kraftkit.metadata.image import MetadataImage
from kraftkit.metadata.mv_levels import MV_3_7_IV1, MV_4_3_IV0
from kraftkit.protocol.messages import Errors
from tests.raft._cluster import CLUSTER_ID

DIRS = {b: uuid.UUID(int=1000 + b) for b in range(1, 10)}


class Cluster:
    """An image at ``mv`` with brokers registered (id -> (rack, fenced, log dirs)) and an active manager."""

    def __init__(self, brokers: dict[int, tuple[str | None, bool, list[uuid.UUID]]], mv: int = MV_4_3_IV0,
                 config: dict[str, str] | None = None, seed: int = 7) -> None:
        self.image = MetadataImage()
        self.offset = 0
        self.apply([encode_metadata_record(FEATURE_LEVEL, 0, {"Name": "metadata.version", "FeatureLevel": mv})])
        self.cluster = ClusterControlManager(CLUSTER_ID, 9000)
        version = record_versions(registry().metadata_version(mv))[REGISTER_BROKER]
        for bid, (rack, fenced, dirs) in brokers.items():
            rec = encode_metadata_record(REGISTER_BROKER, version, {
                "BrokerId": bid, "IncarnationId": uuid.uuid4(), "BrokerEpoch": 10 + bid, "EndPoints": [],
                "Features": [], "Rack": rack, "Fenced": fenced, "InControlledShutdown": False,
                "LogDirs": dirs if version >= 3 else []})  # (directories from RegisterBrokerRecord v3)
            self.apply([rec])
            self.cluster.replay(rec, self.offset - 1)
        self.cluster.activate(self.image)
        self.rc = ReplicationControlManager(self.cluster, config, random.Random(seed))

    def apply(self, records: list[bytes]) -> None:
        for value in records:
            key, version, data = decode_metadata_record(value)
            self.image.replay(key, version, data, self.offset)
            self.offset += 1

    def create(self, *topics: dict, validate_only: bool = False, commit: bool = True) -> tuple[list, list[dict]]:
        records, results = self.rc.create_topics(self.image, {"Topics": list(topics), "timeoutMs": 30000,
                                                              "validateOnly": validate_only})
        if commit:
            self.apply(records)
        return [decode_metadata_record(r) for r in records], results


def topic(name: str, partitions: int = 1, rf: int = 1, configs: dict | None = None, assignments=None) -> dict:
    return {"Name": name, "NumPartitions": partitions, "ReplicationFactor": rf,
            "Assignments": [{"PartitionIndex": i, "BrokerIds": b} for i, b in (assignments or [])],
            "Configs": [{"Name": k, "Value": v} for k, v in (configs or {}).items()]}


def errors(results: list[dict]) -> list[tuple[str, int, str | None]]:
    return [(r["Name"], r["ErrorCode"], r["ErrorMessage"]) for r in results]


THREE = {1: (None, False, [DIRS[1]]), 2: (None, False, [DIRS[2]]), 3: (None, False, [DIRS[3]])}


@pytest.mark.parametrize(("name", "message"), [
    ("", "the empty string is not allowed"),
    (".", "'.' is not allowed"),
    ("..", "'..' is not allowed"),
    ("x" * 250, f"the length of '{'x' * 250}' is longer than the max allowed length 249"),
    ("é" * 125 + "\U0001F600" * 63, f"the length of '{'é' * 125 + chr(0x1F600) * 63}' is longer than the max "
                                    "allowed length 249"),  # 188 characters, 251 UTF-16 units (Java's length)
    ("a b", "'a b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ("t/1", "'t/1' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
])
def test_invalid_names_get_kafkas_topic_validate_message(name, message):
    c = Cluster(THREE)
    records, results = c.create(topic(name), topic("ok"))
    assert errors(results)[0] == (name, Errors.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {message}")
    assert results[1]["ErrorCode"] == Errors.NONE and [k for k, _v, _d in records] == [TOPIC, PARTITION]


def test_a_name_of_249_characters_is_valid():
    _records, results = Cluster(THREE).create(topic("y" * 249))
    assert results[0]["ErrorCode"] == Errors.NONE


def test_duplicates_cluster_metadata_existing_and_colliding_names():
    c = Cluster(THREE)
    c.create(topic("a_b"), topic("x.y"), topic("old"))
    records, results = c.create(topic("d"), topic("new"), topic("d"), topic("__cluster_metadata"), topic("d"),
                                topic("a.b"), topic("old"), topic("x.y"), topic("x_y"))
    assert errors(results) == [
        ("new", Errors.NONE, None),
        ("a.b", Errors.INVALID_TOPIC_EXCEPTION, "Topic 'a.b' collides with existing topic: a_b"),
        ("old", Errors.TOPIC_ALREADY_EXISTS, "Topic 'old' already exists."),
        ("x.y", Errors.TOPIC_ALREADY_EXISTS, "Topic 'x.y' already exists."),  # (the existence check comes last)
        ("x_y", Errors.INVALID_TOPIC_EXCEPTION, "Topic 'x_y' collides with existing topic: x.y"),
        ("d", Errors.INVALID_REQUEST, "Duplicate topic name."),
        ("__cluster_metadata", Errors.INVALID_REQUEST, "Creation of internal topic __cluster_metadata is prohibited."),
    ]
    assert [d["Name"] for k, _v, d in records if k == TOPIC] == ["new"]


def test_replication_factor_and_partition_rules():
    c = Cluster({**THREE, 4: (None, True, [DIRS[4]])})
    _r, results = c.create(topic("rf0", rf=0), topic("rfneg", rf=-2), topic("p0", partitions=0),
                           topic("pneg", partitions=-5), topic("rf5", rf=5), topic("nulls", configs={"a": None,
                                                                                                    "b": "1", "c": None}),
                           topic("big", configs={"x": "v" * 32768}), topic("wide", configs={"x": "é" * 20000}),
                           topic("long", configs={"n" * 32768: "1"}))
    assert errors(results) == [
        ("rf0", Errors.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default "
                                                   "value."),
        ("rfneg", Errors.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the "
                                                     "default value."),
        ("p0", Errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."),
        ("pneg", Errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."),
        ("rf5", Errors.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 5 time(s): The target "
                                                   "replication factor of 5 cannot be reached because only 4 broker(s) "
                                                   "are registered."),
        ("nulls", Errors.INVALID_CONFIG, "Null value not supported for topic configs: a,c"),
        ("big", Errors.INVALID_CONFIG, "The configuration value cannot be added because it exceeds the maximum value "
                                       "size of 32767 bytes."),
        # 20000 characters, 40000 bytes: no ConfigRecord can hold it (Kafka's serializer would throw)
        ("wide", Errors.INVALID_CONFIG, "The configuration value is 40000 bytes in UTF-8; a ConfigRecord holds at "
                                        "most 32767."),
        ("long", Errors.INVALID_CONFIG, "The configuration name is 32768 bytes in UTF-8; a ConfigRecord holds at "
                                        "most 32767."),
    ]


def test_all_brokers_fenced_or_none_registered():
    _r, results = Cluster({1: (None, True, [DIRS[1]])}).create(topic("t"))
    assert errors(results) == [("t", Errors.INVALID_REPLICATION_FACTOR,
                                "Unable to replicate the partition 1 time(s): All brokers are currently fenced.")]
    _r, results = Cluster({}).create(topic("t"))
    assert results[0]["ErrorCode"] == Errors.INVALID_REPLICATION_FACTOR


def test_records_their_order_and_the_answer():
    c = Cluster({1: ("r1", False, [DIRS[1]]), 2: ("r2", False, [DIRS[2], DIRS[5]]), 3: ("r3", True, [DIRS[3]])})
    records, results = c.create(topic("t", partitions=4, rf=3, configs={"retention.ms": "1000",
                                                                        "cleanup.policy": "compact"}))
    (res,) = results
    kinds = [k for k, _v, _d in records]
    assert kinds == [TOPIC, CONFIG, CONFIG, PARTITION, PARTITION, PARTITION, PARTITION]
    (_k, _v, rec) = records[0]
    assert rec == {"Name": "t", "TopicId": res["TopicId"]} and res["TopicId"].int >= 100
    assert (res["ErrorCode"], res["NumPartitions"], res["ReplicationFactor"], res["TopicConfigErrorCode"]) == \
        (Errors.NONE, 4, 3, Errors.NONE)
    # ConfigRecords of the TOPIC resource, in the order Java's HashMap iterates them (by bucket of the
    # String hash: "cleanup.policy" and "retention.ms" in a 16-bucket table; what java.util.HashMap
    # iterates for these two keys, checked with a JDK)
    assert [(d["ResourceType"], d["ResourceName"], d["Name"], d["Value"]) for _k, _v, d in records[1:3]] == \
        [(2, "t", "cleanup.policy", "compact"), (2, "t", "retention.ms", "1000")]
    assert c.image.configs[(2, "t")] == {"retention.ms": "1000", "cleanup.policy": "compact"}
    mv = registry().metadata_version(MV_4_3_IV0)
    for i, (_k, v, p) in enumerate(records[3:]):
        assert v == mv.partition_record_version and p["PartitionId"] == i and p["TopicId"] == res["TopicId"]
        assert sorted(p["Replicas"]) == [1, 2, 3]
        assert p["Isr"] == [b for b in p["Replicas"] if b != 3]  # the fenced broker is not in sync
        assert p["Leader"] == p["Isr"][0] and p["Replicas"][0] != 3
        assert (p["LeaderEpoch"], p["PartitionEpoch"], p["LeaderRecoveryState"]) == (0, 0, 0)
        assert p["Directories"] == [{1: DIRS[1], 2: UNASSIGNED_DIR, 3: DIRS[3]}[b] for b in p["Replicas"]]
    # the image replays them: the topic, its partitions
    t = c.image.topic("t")
    assert t is not None and t.id == res["TopicId"] and sorted(t.partitions) == [0, 1, 2, 3]


def test_before_directory_assignment_partition_records_are_version_0_without_directories():
    c = Cluster(THREE, mv=MV_3_7_IV1)
    records, _results = c.create(topic("t", partitions=2))
    assert [(k, v) for k, v, _d in records] == [(TOPIC, 0), (PARTITION, 0), (PARTITION, 0)]
    assert all(not d.get("Directories") for _k, _v, d in records[1:])


def test_a_broker_registered_without_directories_gets_migrating():
    c = Cluster({1: (None, False, [])})
    assert c.rc.default_dir(1) == MIGRATING_DIR and c.rc.default_dir(99) == UNASSIGNED_DIR


def test_defaults_come_from_the_static_config():
    c = Cluster(THREE, config={"num.partitions": "5", "default.replication.factor": "2"})
    _records, (res,) = c.create(topic("t", partitions=-1, rf=-1))
    assert (res["NumPartitions"], res["ReplicationFactor"]) == (5, 2)
    d = Cluster(THREE)
    _records, (res,) = d.create(topic("t", partitions=-1, rf=-1))
    assert (res["NumPartitions"], res["ReplicationFactor"]) == (1, 1)  # Kafka's num.partitions, default.replication.factor


def test_manual_assignments():
    c = Cluster({**THREE, 4: (None, True, [DIRS[4]])})
    records, results = c.create(
        topic("ok", -1, -1, assignments=[(1, [4, 2]), (0, [3, 1])]),
        topic("rf", -1, 2, assignments=[(0, [1])]),
        topic("np", 1, -1, assignments=[(0, [1])]),
        topic("again", -1, -1, assignments=[(0, [1]), (0, [2])]),
        topic("empty", -1, -1, assignments=[(0, [])]),
        topic("unknown", -1, -1, assignments=[(0, [1, 9])]),
        topic("twice", -1, -1, assignments=[(0, [2, 1, 2])]),
        topic("sizes", -1, -1, assignments=[(0, [1, 2]), (1, [3])]),
        topic("fenced", -1, -1, assignments=[(0, [4])]),
        topic("gap", -1, -1, assignments=[(0, [1]), (2, [2])]),
    )
    assert errors(results) == [
        ("ok", Errors.NONE, None),
        ("rf", Errors.INVALID_REQUEST, "A manual partition assignment was specified, but replication factor was not "
                                       "set to -1."),
        ("np", Errors.INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions was not set to "
                                       "-1."),
        ("again", Errors.INVALID_REPLICA_ASSIGNMENT, "Found multiple manual partition assignments for partition 0"),
        ("empty", Errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."),
        ("unknown", Errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes broker 9, but no such "
                                                       "broker is registered."),
        ("twice", Errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes the broker 2 more than "
                                                     "once."),
        ("sizes", Errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes a partition with 1 "
                                                     "replica(s), but this is not consistent with previous partitions, "
                                                     "which have 2 replica(s)."),
        ("fenced", Errors.INVALID_REPLICA_ASSIGNMENT, "All brokers specified in the manual partition assignment for "
                                                      "partition 0 are fenced or in controlled shutdown."),
        ("gap", Errors.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"),
    ]
    parts = [(d["PartitionId"], d["Replicas"], d["Isr"], d["Leader"]) for k, _v, d in records if k == PARTITION]
    assert parts == [(0, [3, 1], [3, 1], 3), (1, [4, 2], [2], 2)]  # the fenced broker 4 out of the ISR
    assert (results[0]["NumPartitions"], results[0]["ReplicationFactor"]) == (2, 2)


def test_validate_only_answers_the_same_and_writes_nothing():
    c = Cluster(THREE)
    records, results = c.create(topic("t", 3, 2), topic("t2", 0), validate_only=True)
    assert records == [] and c.image.topic("t") is None
    assert errors(results) == [("t", Errors.NONE, None), ("t2", Errors.INVALID_PARTITIONS,
                                                        "Number of partitions was set to an invalid non-positive value.")]
    assert (results[0]["NumPartitions"], results[0]["ReplicationFactor"]) == (3, 2)


def test_a_request_over_ten_thousand_partitions_or_records_is_refused_whole_without_placing():
    c = Cluster(THREE, config={"num.partitions": "3"})
    for topics in ([topic("small", 5), topic("huge", 2**31 - 1)],
                   [topic("a", 9999), topic("b", -1)],  # 9999 + the default 3
                   [topic("a", 9998), topic("m", -1, -1, assignments=[(0, [1]), (1, [2]), (2, [3])])]):
        with pytest.raises(ControllerError) as e:
            c.create(*topics)
        assert (e.value.code, e.value.message) == (Errors.POLICY_VIOLATION,
                                                   "Excessively large number of partitions per request."), topics
    # 10000 partitions pass that check, not the bound on one write's records (each topic adds its TopicRecord)
    with pytest.raises(ControllerError) as e:
        c.create(topic("a", 5000), topic("b", 5000))
    assert (e.value.code, e.value.message) == (Errors.POLICY_VIOLATION,
                                               "Unable to perform excessively large batch operation.")
    # refused, invalid or duplicated topics count as Kafka counts them: a non-positive count adds nothing
    _records, results = c.create(topic("fits", 9999), topic("bad", 0), topic("neg", -7))
    assert [r["ErrorCode"] for r in results] == [Errors.NONE, Errors.INVALID_PARTITIONS, Errors.INVALID_PARTITIONS]
    assert len(c.image.topic("fits").partitions) == 9999  # one TopicRecord and 9999 PartitionRecords


def test_not_the_active_controller():
    c = Cluster(THREE)
    c.cluster.deactivate()
    with pytest.raises(ControllerError) as e:
        c.create(topic("t"))
    assert e.value.code == Errors.NOT_CONTROLLER


def test_a_record_the_codec_refuses_fails_its_topic_only_and_leaves_no_partial_records(monkeypatch):
    import kraftkit.controller.replication as replication

    real = replication.encode_metadata_record

    def refusing(key, version, data):
        if key == CONFIG and data["Name"] == "retention.ms":  # (a name Kafka knows: the configs are checked first)
            raise ValueError("ConfigRecord.Name: refused by the codec")
        return real(key, version, data)

    monkeypatch.setattr(replication, "encode_metadata_record", refusing)
    c = Cluster(THREE)
    records, results = c.create(topic("a"), topic("b", configs={"retention.ms": "1"}), topic("c"))
    assert errors(results) == [("a", Errors.NONE, None), ("b", Errors.INVALID_REQUEST,
                                "Topic 'b' cannot be written: ConfigRecord.Name: refused by the codec"),
                               ("c", Errors.NONE, None)]
    assert [d["Name"] for k, _v, d in records if k == TOPIC] == ["a", "c"]
    assert [k for k, _v, _d in records] == [TOPIC, PARTITION, TOPIC, PARTITION]
