"""TOPIC configs on kraftkit's controller (kraftkit.controller.topic_configs and the TOPIC path of
ConfigurationControlManager): IncrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT, ValidateOnly) and
the legacy AlterConfigs of a topic's configs become ConfigRecords of ResourceType 2 only for the values
that change, refused as Kafka 4.4's controller refuses them; CreateTopics checks a new topic's configs
and lists its effective configs. The messages are Kafka's (tests/kafka/test_topic_configs_kafka.py runs
the validation cases through Kafka's own LogConfig.validate); the defaults come from the table generated
from Kafka's jars."""

from __future__ import annotations

from kraftkit._core import decode_metadata_record, encode_metadata_record
from kraftkit._kafka import CLEAR_ELR, CONFIG, FEATURE_LEVEL, PARTITION
from kraftkit._kafka import TOPIC as TOPIC_RECORD
from kraftkit.controller.configs import (
    APPEND,
    DEFAULT_CONFIG,
    DELETE,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    SET,
    STATIC_BROKER_CONFIG,
    SUBTRACT,
    ConfigurationControlManager,
)
from kraftkit.controller.topic_configs import DYNAMIC_TOPIC_CONFIG, topic_schema
from kraftkit.protocol.messages import Errors

from .test_create_topics import THREE, Cluster, errors, topic

TOPIC = 2
BROKER = 4


def alter(name: str, *configs: tuple[str, int, str | None], validate_only: bool = False) -> dict:
    return {"Resources": [{"ResourceType": TOPIC, "ResourceName": name, "Configs": [
        {"Name": n, "ConfigOperation": op, "Value": v} for n, op, v in configs]}], "ValidateOnly": validate_only}


def legacy(name: str, **configs: str) -> dict:
    return {"Resources": [{"ResourceType": TOPIC, "ResourceName": name,
                           "Configs": [{"Name": n, "Value": v} for n, v in configs.items()]}], "ValidateOnly": False}


def results(res: list[dict]) -> list[tuple[str, int, str | None]]:
    return [(r["ResourceName"], r["ErrorCode"], r["ErrorMessage"]) for r in res]


def decoded(records: list[bytes]) -> list[tuple[int, str, str, str | None]]:
    out = []
    for r in records:
        key, _v, d = decode_metadata_record(r)
        assert key == CONFIG
        out.append((d["ResourceType"], d["ResourceName"], d["Name"], d["Value"]))
    return out


def setup(static: dict[str, str] | None = None) -> tuple[Cluster, ConfigurationControlManager]:
    c = Cluster(THREE, config=static)
    _r, res = c.create(topic("t", configs={"retention.ms": "1000"}), topic("u"))
    assert [r["ErrorCode"] for r in res] == [Errors.NONE, Errors.NONE]
    return c, ConfigurationControlManager(1, [1], static)


def run(c: Cluster, mgr: ConfigurationControlManager, body: dict, incremental: bool = True):
    records, res = (mgr.incremental_alter if incremental else mgr.legacy_alter)(c.image, body)
    c.apply(records)
    return decoded(records), results(res)


def test_incremental_alter_writes_only_the_values_that_change():
    c, mgr = setup()
    steps = [
        (alter("t", ("retention.ms", SET, "2000"), ("segment.ms", SET, "100000")),
         {("retention.ms", "2000"), ("segment.ms", "100000")}),
        (alter("t", ("retention.ms", SET, "2000")), set()),  # unchanged: no record (a BROKER one would be written)
        (alter("t", ("flush.ms", DELETE, None)), set()),  # never set
        (alter("t", ("segment.ms", DELETE, None)), {("segment.ms", None)}),
        # APPEND to a LIST key without a value starts from its default ("delete"); SUBTRACT from the value
        (alter("t", ("cleanup.policy", APPEND, "compact")), {("cleanup.policy", "delete,compact")}),
        (alter("t", ("cleanup.policy", SUBTRACT, "delete")), {("cleanup.policy", "compact")}),
        (alter("t", ("cleanup.policy", APPEND, "compact")), set()),
        (alter("u", ("leader.replication.throttled.replicas", APPEND, "0:1,1:2")),
         {("leader.replication.throttled.replicas", "0:1,1:2")}),
    ]
    for body, want in steps:
        got, res = run(c, mgr, body)
        name = body["Resources"][0]["ResourceName"]
        assert res == [(name, Errors.NONE, None)]
        assert {(n, v) for _t, r, n, v in got} == want and all(t == TOPIC and r == name for t, r, _n, _v in got)
    assert c.image.configs[(TOPIC, "t")] == {"retention.ms": "2000", "cleanup.policy": "compact"}
    assert c.image.configs[(TOPIC, "u")] == {"leader.replication.throttled.replicas": "0:1,1:2"}
    # ValidateOnly: the same answer, nothing written
    records, res = mgr.incremental_alter(c.image, alter("t", ("retention.ms", SET, "5"), validate_only=True))
    assert records == [] and results(res) == [("t", Errors.NONE, None)]


def test_refusals_with_kafkas_errors_and_messages():
    c, mgr = setup()
    run(c, mgr, alter("u", ("leader.replication.throttled.replicas", SET, "0:1")))
    before = {k: dict(v) for k, v in c.image.configs.items()}
    refusals = [
        (alter("nope", ("retention.ms", SET, "1")), Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist."),
        # the configs are checked before the topic's existence
        (alter("nope", ("no.such", SET, "1")), Errors.INVALID_CONFIG, "Unknown topic config name: no.such"),
        (alter("", ("retention.ms", SET, "1")), Errors.INVALID_REQUEST, "Default topic resources are not allowed."),
        (alter("a b", ("retention.ms", SET, "1")), Errors.INVALID_TOPIC_EXCEPTION,
         "Topic name is invalid: 'a b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
        (alter("t", ("retention.ms", SET, "abc")), Errors.INVALID_CONFIG,
         "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
        # (a number of more digits than Python's int() takes is no number of the type either)
        (alter("t", ("retention.ms", SET, "1" * 5000)), Errors.INVALID_CONFIG,
         f"Invalid value {'1' * 5000} for configuration retention.ms: Not a number of type LONG"),
        (alter("t", ("min.insync.replicas", SET, "0")), Errors.INVALID_CONFIG,
         "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
        (alter("t", ("cleanup.policy", SET, "bogus")), Errors.INVALID_CONFIG,
         "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete"),
        (alter("t", ("cleanup.policy", APPEND, "bogus")), Errors.INVALID_CONFIG,
         "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete"),
        (alter("t", ("retention.ms", APPEND, "1")), Errors.INVALID_CONFIG,
         "Can't APPEND to key retention.ms because its type is not LIST."),
        (alter("t", ("no.such", SUBTRACT, "1")), Errors.INVALID_CONFIG,
         "Can't SUBTRACT to key no.such because its type is not LIST."),
        (alter("t", ("min.compaction.lag.ms", SET, "10"), ("max.compaction.lag.ms", SET, "5")), Errors.INVALID_CONFIG,
         "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
        (alter("t", ("remote.storage.enable", SET, "true")), Errors.INVALID_CONFIG,
         "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."),
        # (only an APPEND to a value can make one longer than a request's string may be; the bound comes
        # before the values are checked)
        (alter("u", ("leader.replication.throttled.replicas", APPEND, "v" * 32767)), Errors.INVALID_CONFIG,
         "The configuration value cannot be added because it exceeds the maximum value size of 32767 bytes."),
    ]
    for body, code, message in refusals:
        records, res = mgr.incremental_alter(c.image, body)
        assert records == [] and [r[1:] for r in results(res)] == [(code, message)], body
    # a refused resource does not stop the others of the request
    body = alter("t", ("retention.ms", SET, "abc"))
    body["Resources"] += alter("u", ("retention.ms", SET, "7"))["Resources"]
    got, res = run(c, mgr, body)
    assert [r[1] for r in res] == [Errors.INVALID_CONFIG, Errors.NONE] and got == [(TOPIC, "u", "retention.ms", "7")]
    del c.image.configs[(TOPIC, "u")]["retention.ms"]
    assert {k: dict(v) for k, v in c.image.configs.items()} == before


def test_a_stored_unknown_config_fails_every_change_of_its_topic_as_in_kafka():
    c, mgr = setup()
    # (a config written before kraftkit checked them: Kafka validates the topic's whole resulting set)
    c.apply([encode_metadata_record(CONFIG, 0, {"ResourceType": TOPIC, "ResourceName": "t", "Name": "old.key",
                                                "Value": "1"})])
    _got, res = run(c, mgr, alter("t", ("retention.ms", SET, "1")))
    assert res == [("t", Errors.INVALID_CONFIG, "Unknown topic config name: old.key")]
    got, res = run(c, mgr, alter("t", ("old.key", DELETE, None)))
    assert res == [("t", Errors.NONE, None)] and got == [(TOPIC, "t", "old.key", None)]


def test_remote_storage_needs_tiered_storage_and_delete_on_disable_to_turn_off():
    c, mgr = setup({"remote.log.storage.system.enable": "true"})
    got, res = run(c, mgr, alter("t", ("remote.storage.enable", SET, "true")))
    assert res == [("t", Errors.NONE, None)] and got == [(TOPIC, "t", "remote.storage.enable", "true")]
    _got, res = run(c, mgr, alter("t", ("remote.storage.enable", SET, "false")))
    assert res[0][1] == Errors.INVALID_CONFIG and res[0][2].startswith(
        "It is invalid to disable remote storage without deleting remote data.")
    got, res = run(c, mgr, alter("t", ("remote.storage.enable", SET, "false"),
                                 ("remote.log.delete.on.disable", SET, "true")))
    assert res == [("t", Errors.NONE, None)] and len(got) == 2


def test_legacy_alter_configs_replaces_the_topics_configs():
    c, mgr = setup()
    run(c, mgr, alter("t", ("cleanup.policy", SET, "compact"), ("segment.ms", SET, "100000")))
    got, res = run(c, mgr, legacy("t", **{"retention.ms": "1000", "segment.ms": "200000"}), incremental=False)
    assert res == [("t", Errors.NONE, None)]
    # retention.ms is unchanged: no record; cleanup.policy is not given: deleted
    assert sorted(got, key=str) == [(TOPIC, "t", "cleanup.policy", None), (TOPIC, "t", "segment.ms", "200000")]
    assert c.image.configs[(TOPIC, "t")] == {"retention.ms": "1000", "segment.ms": "200000"}
    got, res = run(c, mgr, legacy("t", **{"retention.ms": "x"}), incremental=False)
    assert got == [] and res == [("t", Errors.INVALID_CONFIG,
                                  "Invalid value x for configuration retention.ms: Not a number of type LONG")]
    got, res = run(c, mgr, legacy("nope"), incremental=False)
    assert got == [] and res == [("nope", Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.")]


def test_create_topics_checks_the_configs_before_the_placement():
    c = Cluster(THREE)
    _records, res = c.create(
        topic("a", configs={"no.such": "1"}),
        topic("b", configs={"retention.ms": "abc"}),
        topic("c", rf=5, configs={"cleanup.policy": "bogus"}),  # (a config error comes before the placement's)
        topic("d", rf=5, configs={"cleanup.policy": "compact"}),
        topic("e", configs={"retention.ms": "5", "cleanup.policy": " compact , delete "}),
    )
    assert errors(res) == [
        ("a", Errors.INVALID_CONFIG, "Unknown topic config name: no.such"),
        ("b", Errors.INVALID_CONFIG, "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
        ("c", Errors.INVALID_CONFIG,
         "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete"),
        ("d", Errors.INVALID_REPLICATION_FACTOR,
         "Unable to replicate the partition 5 time(s): The target replication factor of 5 cannot be reached because "
         "only 3 broker(s) are registered."),
        ("e", Errors.NONE, None),
    ]
    assert c.image.topic_ids.keys() == {"e"}
    assert c.image.configs[(TOPIC, "e")] == {"retention.ms": "5", "cleanup.policy": " compact , delete "}
    assert all(r["Configs"] == [] for r in res[:4])


def test_create_topics_lists_the_effective_configs():
    static = {"log.retention.hours": "2", "log.segment.bytes": "2000000", "message.max.bytes": "5000",
              "log.roll.hours": "9" * 5000}  # (not an int: ConfigSynonym's converter makes it 0)
    c = Cluster(THREE, config=static)
    c.rc.node_id = 1
    # the controller's own dynamic config and the cluster-wide one (BROKER resources 1 and "")
    c.apply([encode_metadata_record(CONFIG, 0, {"ResourceType": BROKER, "ResourceName": r, "Name": n, "Value": v})
             for r, n, v in [("", "log.segment.bytes", "3000000"), ("", "log.cleaner.min.cleanable.ratio", "0.25"),
                             ("1", "log.segment.bytes", "4000000"), ("2", "log.cleanup.policy", "compact")]])
    _r, res = c.create(topic("t", configs={"max.message.bytes": "100"}))
    (r,) = res
    assert r["ErrorCode"] == Errors.NONE and r["TopicConfigErrorCode"] == Errors.NONE
    configs = {e["Name"]: (e["Value"], e["ConfigSource"]) for e in r["Configs"]}
    # every topic config but the internal ones, by name
    assert [e["Name"] for e in r["Configs"]] == sorted(n for n, k in topic_schema().keys.items() if not k.get("internal"))
    assert "internal.segment.bytes" not in configs and "retention.bytes" in configs
    assert not any(e["ReadOnly"] or e["IsSensitive"] for e in r["Configs"])
    assert configs["max.message.bytes"] == ("100", DYNAMIC_TOPIC_CONFIG)  # its own over the static 5000
    assert configs["segment.bytes"] == ("4000000", DYNAMIC_BROKER_CONFIG)  # this node's over the cluster's
    assert configs["min.cleanable.dirty.ratio"] == ("0.25", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert configs["retention.ms"] == (str(2 * 3600 * 1000), STATIC_BROKER_CONFIG)  # hours, converted
    assert configs["cleanup.policy"] == ("delete", DEFAULT_CONFIG)  # (broker 2's config is not this node's)
    assert configs["retention.bytes"] == ("-1", DEFAULT_CONFIG)
    assert configs["segment.ms"] == ("0", STATIC_BROKER_CONFIG)
    # a validate-only creation answers the same configs
    _r, res2 = c.create(topic("v", configs={"max.message.bytes": "100"}), validate_only=True)
    assert res2[0]["Configs"] == r["Configs"]


def test_a_new_min_insync_replicas_clears_the_topics_elrs_while_elr_is_enabled():
    c, mgr = setup()
    records, _res = mgr.incremental_alter(c.image, alter("t", ("min.insync.replicas", SET, "2")))
    assert [decode_metadata_record(r)[0] for r in records] == [CONFIG]  # ELR is not enabled
    c.apply([encode_metadata_record(FEATURE_LEVEL, 0, {"Name": "eligible.leader.replicas.version", "FeatureLevel": 1})])
    body = alter("t", ("min.insync.replicas", SET, "2"), ("retention.ms", SET, "9"))
    body["Resources"] += alter("u", ("min.insync.replicas", SET, "2"))["Resources"]
    records, res = mgr.incremental_alter(c.image, body)
    assert [r[1] for r in results(res)] == [Errors.NONE, Errors.NONE]
    got = [decode_metadata_record(r) for r in records]
    # the request's ConfigRecords, then a ClearElrRecord per topic whose min.insync.replicas changes
    assert [k for k, _v, _d in got] == [CONFIG, CONFIG, CONFIG, CLEAR_ELR, CLEAR_ELR]
    assert [d for k, _v, d in got if k == CLEAR_ELR] == [{"TopicName": "t"}, {"TopicName": "u"}]
    c.apply(records)
    records, _res = mgr.incremental_alter(c.image, alter("t", ("min.insync.replicas", SET, "2")))
    assert records == []  # unchanged: no ConfigRecord, so nothing to clear
    records, _res = mgr.incremental_alter(c.image, alter("t", ("min.insync.replicas", DELETE, None)))
    assert [decode_metadata_record(r)[0] for r in records] == [CONFIG, CLEAR_ELR]


def test_describe_of_topic_configs_on_the_controller():
    static = {"log.retention.hours": "2"}
    c, mgr = setup(static)
    mgr.node_id = 1
    c.apply([encode_metadata_record(CONFIG, 0, {"ResourceType": BROKER, "ResourceName": "", "Name": n, "Value": v})
             for n, v in [("log.retention.ms", "60000"), ("min.insync.replicas", "1")]])
    run(c, mgr, alter("t", ("cleanup.policy", SET, " compact , delete "), ("retention.ms", DELETE, None)))
    body = {"Resources": [{"ResourceType": TOPIC, "ResourceName": n, "ConfigurationKeys": k}
                          for n, k in [("t", None), ("t", ["retention.ms", "no.such"]), ("nope", None),
                                       ("a/b", None)]],
            "IncludeSynonyms": True, "IncludeDocumentation": False}
    res = mgr.describe(c.image, body, 4)["Results"]
    assert [(r["ErrorCode"], r["ErrorMessage"]) for r in res] == [
        (Errors.NONE, ""), (Errors.NONE, ""),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, ""),
        (Errors.INVALID_TOPIC_EXCEPTION,
         "Topic name is invalid: 'a/b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ]
    entries = {e["Name"]: e for e in res[0]["Configs"]}
    assert sorted(entries) == sorted(n for n, k in topic_schema().keys.items() if not k.get("internal"))
    # the topic's own value, as ConfigDef renders it, then the broker config it falls back to
    e = entries["cleanup.policy"]
    assert (e["Value"], e["ConfigSource"], e["ReadOnly"], e["IsSensitive"]) == ("compact,delete", DYNAMIC_TOPIC_CONFIG,
                                                                               False, False)
    assert [(s["Name"], s["Value"], s["Source"]) for s in e["Synonyms"]] == [
        ("cleanup.policy", "compact,delete", DYNAMIC_TOPIC_CONFIG), ("log.cleanup.policy", "delete", DEFAULT_CONFIG)]
    # retention.ms: this node's cluster-wide dynamic log.retention.ms over its static log.retention.hours
    e = entries["retention.ms"]
    assert (e["Value"], e["ConfigSource"]) == ("60000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert [(s["Name"], s["Value"], s["Source"]) for s in e["Synonyms"]][:2] == [
        ("log.retention.ms", "60000", DYNAMIC_DEFAULT_BROKER_CONFIG), ("log.retention.hours", "2", STATIC_BROKER_CONFIG)]
    assert entries["retention.bytes"]["ConfigSource"] == DEFAULT_CONFIG
    assert [e["Name"] for e in res[1]["Configs"]] == ["retention.ms"]  # the keys asked for that exist


def test_a_topic_created_with_min_insync_replicas_gets_a_clear_elr_record_while_elr_is_enabled():
    c = Cluster(THREE)
    records, _res = c.create(topic("a", configs={"min.insync.replicas": "1"}))
    assert CLEAR_ELR not in [k for k, _v, _d in records]  # ELR is not enabled
    c.apply([encode_metadata_record(FEATURE_LEVEL, 0, {"Name": "eligible.leader.replicas.version", "FeatureLevel": 1})])
    records, res = c.create(topic("b", 2, configs={"min.insync.replicas": "1", "retention.ms": "5"}),
                            topic("c", configs={"retention.ms": "5"}))
    assert [r["ErrorCode"] for r in res] == [Errors.NONE, Errors.NONE]
    assert [k for k, _v, _d in records] == [TOPIC_RECORD, CONFIG, CONFIG, CLEAR_ELR, PARTITION, PARTITION,
                                            TOPIC_RECORD, CONFIG, PARTITION]
    assert [d for k, _v, d in records if k == CLEAR_ELR] == [{"TopicName": "b"}]
