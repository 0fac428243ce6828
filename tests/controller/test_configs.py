"""Dynamic BROKER configs on kraftkit's controller (KIP-919): IncrementalAlterConfigs and the legacy
AlterConfigs become ConfigRecords committed through the active controller (ValidateOnly writes
nothing; a follower answers NOT_CONTROLLER), refused as Kafka 4.4's controller refuses them;
DescribeConfigs answers from each node's image; a restart replays the configs. The expected error
messages are Kafka's (read from its jars); the defaults come from the table generated from them."""

from __future__ import annotations

import asyncio
import math

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import CONFIG
from kraftkit.controller.configs import (
    APPEND,
    BROKER,
    DEFAULT_CONFIG,
    DELETE,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    SET,
    SUBTRACT,
    broker_schema,
    java_double,
    java_hash_order,
    java_string_hash,
)
from kraftkit.protocol import KafkaConnection
from kraftkit.protocol.messages import ApiKey, Errors
from tests.raft._cluster import wait_for

from ._nodes import active_of, controller, format_dirs, running

pytestmark = pytest.mark.timeout(180)

TOPIC = 2


def config_records(node) -> list[tuple[str, str, str | None]]:
    out = []
    for batch in node.committed_batches(0):
        if batch.is_control:
            continue
        for r in batch.records():
            key, _v, data = decode_metadata_record(r.value)
            if key == CONFIG:
                assert data["ResourceType"] == BROKER
                out.append((data["ResourceName"], data["Name"], data["Value"]))
    return out


def alter(name: str, *configs: tuple[str, int, str | None], rtype: int = BROKER, validate_only: bool = False) -> dict:
    return {
        "Resources": [{"ResourceType": rtype, "ResourceName": name, "Configs": [
            {"Name": n, "ConfigOperation": op, "Value": v} for n, op, v in configs]}],
        "ValidateOnly": validate_only,
    }


def describe(*names: str, keys: list[str] | None = None) -> dict:
    return {"Resources": [{"ResourceType": BROKER, "ResourceName": n, "ConfigurationKeys": keys} for n in names],
            "IncludeSynonyms": True, "IncludeDocumentation": False}


async def call(node, api: int, version: int, body: dict) -> dict:
    def go() -> dict:
        with KafkaConnection("127.0.0.1", node.address[1]) as conn:
            return conn.request(api, version, body)

    return await asyncio.get_running_loop().run_in_executor(None, go)


def errors(answer: dict) -> list[tuple[str, int, str | None]]:
    return [(r["ResourceName"], r["ErrorCode"], r["ErrorMessage"]) for r in answer["Responses"]]


def test_java_double_renders_as_kafka_does():
    # Double.toString: decimal between 10^-3 and 10^7, else computerized scientific notation
    assert [java_double(x) for x in (1000.5, 1000.0, 0.05, 1e7, 1.5e-4, 12345678.9, -2.0)] == [
        "1000.5", "1000.0", "0.05", "1.0E7", "1.5E-4", "1.23456789E7", "-2.0"]


def test_java_hash_map_order():
    # "hello".hashCode() is 99162322 in every JVM; "Aa" and "BB" collide (2112) and keep insertion order
    assert java_string_hash("hello") == 99162322 and java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # a surrogate pair: two UTF-16 code units
    # buckets of a 16-slot table: "hello" (h ^ h >>> 16) & 15 = 11, "BB" and "Aa" 0 (in insertion order)
    assert java_hash_order(["hello", "BB", "Aa"]) == ["BB", "Aa", "hello"]


def test_alter_validate_describe_and_restart(tmp_path):
    schema = broker_schema()
    cleaner_default = schema.defaults["log.cleaner.threads"]  # KafkaConfig's default, from the jars
    sasl_default = schema.defaults["sasl.enabled.mechanisms"]

    async def main():
        voters, dirs = format_dirs(tmp_path, release_version="4.4", layout="checkpoint")
        nodes = [controller(voters, d, i) for i, d in zip(voters, dirs, strict=True)]
        async with running(nodes):
            leader = await wait_for(lambda: active_of(nodes), what="an active controller")
            follower = next(n for n in nodes if n is not leader)
            lid, fid = str(leader.node_id), str(follower.node_id)
            # the bootstrap's cluster-wide min.insync.replicas (ELR is on at 4.4)
            base = config_records(leader)
            assert base == [("", "min.insync.replicas", "1")]

            got = await call(follower, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter(lid, ("log.cleaner.threads", SET, "2")))
            assert [e[:2] for e in errors(got)] == [(lid, Errors.NOT_CONTROLLER)]

            got = await call(leader, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1,
                             alter(lid, ("log.cleaner.threads", SET, "2"), validate_only=True))
            assert errors(got) == [(lid, Errors.NONE, None)]
            assert config_records(leader) == base  # nothing written

            steps = [
                (alter(lid, ("log.cleaner.threads", SET, "2")), [(lid, "log.cleaner.threads", "2")]),
                # (several keys: their records come in the order of Java's HashMap, as Kafka writes them)
                (alter(fid, ("log.cleaner.threads", SET, "abc"), ("no.such", SET, "x")),
                 [(fid, "no.such", "x"), (fid, "log.cleaner.threads", "abc")]),
                (alter("", ("log.cleaner.threads", SET, "3"), ("ssl.keystore.type", SET, "PKCS12")),
                 [("", "ssl.keystore.type", "PKCS12"), ("", "log.cleaner.threads", "3")]),
                (alter(lid, ("sasl.enabled.mechanisms", APPEND, "PLAIN,GSSAPI")),
                 [(lid, "sasl.enabled.mechanisms", f"{sasl_default},PLAIN")]),
                (alter(lid, ("sasl.enabled.mechanisms", SUBTRACT, sasl_default)),
                 [(lid, "sasl.enabled.mechanisms", "PLAIN")]),
                # a BROKER record is written even when nothing changes, as Kafka does
                (alter(fid, ("never.set", DELETE, None)), [(fid, "never.set", None)]),
            ]
            want = list(base)
            for body, records in steps:
                got = await call(leader, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
                assert [e[1] for e in errors(got)] == [Errors.NONE]
                want += records
                assert config_records(leader) == want

            refusals = [
                (alter(lid, ("log.cleaner.threads", APPEND, "1")), Errors.INVALID_CONFIG,
                 "Can't APPEND to key log.cleaner.threads because its type is not LIST."),
                (alter(lid, ("no.such", SUBTRACT, "1")), Errors.INVALID_CONFIG,
                 "Can't SUBTRACT to key no.such because its type is not LIST."),
                (alter(lid, ("min.insync.replicas", SET, "2")), Errors.INVALID_CONFIG,
                 "Broker-level min.insync.replicas cannot be altered while ELR is enabled."),
                (alter("", ("min.insync.replicas", DELETE, None)), Errors.INVALID_CONFIG,
                 "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."),
                # (only an APPEND can make a value longer than a request's string may be)
                (alter(lid, ("sasl.enabled.mechanisms", APPEND, "v" * 32767)), Errors.INVALID_CONFIG,
                 "The configuration value cannot be added because it exceeds the maximum value size of 32767 bytes."),
                # the bound is on UTF-8 bytes (a ConfigRecord string's): an APPEND of 16383 two-byte characters
                # (32766 bytes, as much as a request string holds) to a non-empty value is over it
                (alter(lid, ("sasl.enabled.mechanisms", APPEND, "é" * 16383)), Errors.INVALID_CONFIG,
                 "The configuration value cannot be added because it exceeds the maximum value size of 32767 bytes."),
                (alter("abc", ("k", SET, "v")), Errors.INVALID_REQUEST, "Unable to parse broker name as a base 10 number."),
                (alter("-1", ("k", SET, "v")), Errors.INVALID_REQUEST, "Invalid negative broker ID."),
                (alter("7", ("k", SET, "v")), Errors.BROKER_ID_NOT_REGISTERED, "No node with id 7 found."),
                # (TOPIC configs are checked against Kafka's topic config definitions: test_topic_configs.py)
                (alter("t", ("k", SET, "v"), rtype=TOPIC), Errors.INVALID_CONFIG, "Unknown topic config name: k"),
                (alter("x", ("k", SET, "v"), rtype=99), Errors.UNSUPPORTED_VERSION, "Unknown resource type 99."),
            ]
            for body, code, message in refusals:
                got = await call(leader, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
                assert [e[1:] for e in errors(got)] == [(code, message)], body
            dup = alter(lid, ("a", SET, "1"))
            dup["Resources"] *= 2
            got = await call(leader, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, dup)
            assert errors(got) == [(lid, Errors.INVALID_REQUEST, "Duplicate resource.")]
            # hostile sizes: more records than one write holds; more configs than one answer lists
            many = alter(lid, *((f"k{i}", SET, "v") for i in range(10001)))
            got = await call(leader, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, many)
            assert errors(got) == [(lid, Errors.INVALID_REQUEST, "the request would write 10001 ConfigRecords; one "
                                    "write holds at most 10000")]
            assert config_records(leader) == want  # none of them wrote anything
            full = len(broker_schema().defaults)  # at least this many entries in a describe of all configs
            n = 50000 // full + 2
            got = await call(leader, ApiKey.DESCRIBE_CONFIGS, 4, describe(*[lid] * n))
            codes = [r["ErrorCode"] for r in got["Results"]]
            assert codes[0] == Errors.NONE and codes[-1] == Errors.INVALID_REQUEST and len(codes) == n

            # legacy AlterConfigs: the resource's configs become exactly those given
            legacy = {"Resources": [{"ResourceType": BROKER, "ResourceName": fid,
                                     "Configs": [{"Name": "log.cleaner.threads", "Value": "4"}]}], "ValidateOnly": False}
            got = await call(leader, ApiKey.ALTER_CONFIGS, 2, legacy)
            assert errors(got) == [(fid, Errors.NONE, None)]
            want += [(fid, "log.cleaner.threads", "4"), (fid, "no.such", None)]
            assert config_records(leader) == want

            hw = leader.replica().core.high_watermark
            await wait_for(lambda: all(n.replica().machine.applied_offset >= hw for n in nodes), what="replayed")
            answers = await check_describe(nodes, leader, follower, cleaner_default)
        return voters, dirs, answers

    voters, dirs, answers = asyncio.run(asyncio.wait_for(main(), 120))

    async def restart():
        nodes = [controller(voters, d, i) for i, d in zip(voters, dirs, strict=True)]
        async with running(nodes):
            await wait_for(lambda: active_of(nodes), what="an active controller after the restart")
            by_id = {n.node_id: n for n in nodes}
            for node_id, (body, answer) in answers.items():
                node = by_id[node_id]
                await wait_for(lambda node=node: node.controller.image.configs, what="the configs replayed")
                assert await call(node, ApiKey.DESCRIBE_CONFIGS, 4, body) == answer

    asyncio.run(asyncio.wait_for(restart(), 60))


async def check_describe(nodes, leader, follower, cleaner_default: str) -> dict:
    """DescribeConfigs on each node; returns {node id: (request, answer)} to compare after a restart."""
    lid, fid = str(leader.node_id), str(follower.node_id)

    def entry(answer: dict, name: str) -> dict | None:
        (res,) = answer["Results"]
        return next((c for c in res["Configs"] if c["Name"] == name), None)

    # the leader's own: its dynamic log.cleaner.threads over the cluster-wide one over the default
    mine = await call(leader, ApiKey.DESCRIBE_CONFIGS, 4, describe(lid))
    c = entry(mine, "log.cleaner.threads")
    assert c["Value"] == "2" and c["ConfigSource"] == DYNAMIC_BROKER_CONFIG and not c["ReadOnly"]
    assert [(s["Source"], s["Value"]) for s in c["Synonyms"]] == [
        (DYNAMIC_BROKER_CONFIG, "2"), (DYNAMIC_DEFAULT_BROKER_CONFIG, "3"), (DEFAULT_CONFIG, cleaner_default)]
    c = entry(mine, "sasl.enabled.mechanisms")
    assert (c["Value"], c["ConfigSource"]) == ("PLAIN", DYNAMIC_BROKER_CONFIG)
    assert entry(mine, "log.dirs")["ReadOnly"] is True
    # the follower's: "abc" is no int, so a Kafka node ignores it (the cluster-wide 3 applies);
    # ssl.keystore.type is per-broker, so it is ignored at the cluster-wide default
    theirs = await call(follower, ApiKey.DESCRIBE_CONFIGS, 4, describe(fid, keys=["log.cleaner.threads", "no.such"]))
    c = entry(theirs, "log.cleaner.threads")
    assert (c["Value"], c["ConfigSource"]) == ("4", DYNAMIC_BROKER_CONFIG)
    assert entry(theirs, "no.such") is None  # deleted by the legacy AlterConfigs
    default = await call(follower, ApiKey.DESCRIBE_CONFIGS, 4, describe(""))
    (res,) = default["Results"]
    assert [(c["Name"], c["Value"]) for c in res["Configs"]] == [("log.cleaner.threads", "3"),
                                                                 ("min.insync.replicas", "1")]
    # a node answers for itself and the default only
    other = await call(leader, ApiKey.DESCRIBE_CONFIGS, 4, describe(fid, "x"))
    assert [(r["ErrorCode"], r["ErrorMessage"]) for r in other["Results"]] == [
        (Errors.INVALID_REQUEST, f"Unexpected broker id, expected {lid} or empty string, but received {fid}"),
        (Errors.INVALID_REQUEST, "Broker id must be an integer, but it is: x")]
    return {leader.node_id: (describe(lid), mine), follower.node_id: (describe(""), default)}


def test_a_nan_passes_a_range_as_in_java():
    # (Range.ensureValid compares with < and >, both false for NaN: a broker takes it; the check must not fail)
    schema = broker_schema()
    assert math.isnan(schema.parse("log.cleaner.min.cleanable.ratio", "NaN"))
    assert "log.cleaner.min.cleanable.ratio" in schema.effective({"log.cleaner.min.cleanable.ratio": "NaN"}, True)
