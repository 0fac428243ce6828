"""kraftkit's topic config validation (kraftkit.controller.topic_configs) against Kafka 4.4's own:
every case is decided by ``LogConfig.validate`` in the real jars with a controller's KafkaConfig
(tests/harness/java/TopicConfigValidate.java, as Kafka's ControllerConfigurationValidator calls it)
and by kraftkit; the verdicts and the messages must be the same."""

from __future__ import annotations

import subprocess

import pytest

from kraftkit.controller.cluster import ControllerError
from kraftkit.controller.topic_configs import validate_topic_configs
from kraftkit.protocol.messages import Errors
from tests.harness import jars, tools

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

VERSION = jars.KAFKA_NEWEST
SOURCE = tools.HERE / "java" / "TopicConfigValidate.java"

#: (the topic's existing configs, the configs it is to have, tiered storage enabled on the node)
CASES: list[tuple[dict[str, str], dict[str, str], bool]] = [
    ({}, {}, False),
    ({}, {"retention.ms": "1000", "cleanup.policy": "compact"}, False),
    ({}, {"bogus.key": "1"}, False),
    ({}, {"zzz": "1", "aaa": "2", "retention.ms": "x"}, False),  # the first unknown name in HashMap order
    ({}, {"retention.ms": "x", "segment.bytes": "y"}, False),  # the first bad value in ConfigDef order
    ({}, {"retention.ms": "abc"}, False),
    ({}, {"retention.ms": "-5"}, False),
    ({}, {"retention.ms": " 100 "}, False),
    ({}, {"retention.ms": "+5"}, False),
    ({}, {"retention.ms": "9223372036854775808"}, False),
    ({}, {"segment.bytes": "99999999999"}, False),
    ({}, {"segment.bytes": "1024"}, False),
    ({}, {"max.decompressed.message.bytes": "2147483640"}, False),
    ({}, {"min.insync.replicas": "0"}, False),
    ({}, {"unclean.leader.election.enable": "yes"}, False),
    ({}, {"unclean.leader.election.enable": " TRUE "}, False),
    ({}, {"min.cleanable.dirty.ratio": "x"}, False),
    ({}, {"min.cleanable.dirty.ratio": "2"}, False),
    ({}, {"min.cleanable.dirty.ratio": "-0.5"}, False),
    ({}, {"min.cleanable.dirty.ratio": "1e400"}, False),
    ({}, {"min.cleanable.dirty.ratio": "NaN"}, False),
    ({}, {"min.cleanable.dirty.ratio": "1d"}, False),
    ({}, {"compression.type": "ZSTD"}, False),
    ({}, {"compression.type": " gzip"}, False),
    ({}, {"message.timestamp.type": "logappendtime"}, False),
    ({}, {"cleanup.policy": "bogus"}, False),
    ({}, {"cleanup.policy": ""}, False),
    ({}, {"cleanup.policy": "compact,,delete"}, False),
    ({}, {"cleanup.policy": "compact,compact"}, False),
    ({}, {"cleanup.policy": " compact , delete "}, False),
    ({}, {"cleanup.policy": "compact,bogus"}, False),
    ({}, {"cleanup.policy": "bogus,"}, False),
    ({}, {"cleanup.policy": ","}, False),
    ({}, {"compression.gzip.level": "0"}, False),
    ({}, {"compression.gzip.level": "10"}, False),
    ({}, {"compression.gzip.level": "-1"}, False),
    ({}, {"compression.lz4.level": "18"}, False),
    ({}, {"compression.zstd.level": "-131073"}, False),
    ({}, {"leader.replication.throttled.replicas": "x"}, False),
    ({}, {"leader.replication.throttled.replicas": "*"}, False),
    ({}, {"leader.replication.throttled.replicas": "0:1,1:2"}, False),
    ({}, {"follower.replication.throttled.replicas": "*,0:1"}, False),
    ({}, {"follower.replication.throttled.replicas": " 0:1 , 1:2"}, False),
    ({}, {"follower.replication.throttled.replicas": "0:1:2"}, False),
    ({}, {"leader.replication.throttled.replicas": ""}, False),
    ({}, {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, False),
    ({}, {"max.compaction.lag.ms": "0"}, False),
    ({}, {"min.compaction.lag.ms": "604800001"}, False),
    ({}, {"remote.storage.enable": "true"}, False),
    ({}, {"remote.storage.enable": "true"}, True),
    ({"remote.storage.enable": "true"}, {"remote.storage.enable": "false"}, False),
    ({"remote.storage.enable": "true"}, {}, False),
    ({"remote.storage.enable": "true"}, {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"},
     False),
    ({}, {"internal.segment.bytes": "5"}, False),
    ({}, {"segment.ms": "0"}, False),
    ({}, {"message.timestamp.after.max.ms": "-1"}, False),
]


def kafka_verdicts() -> list[tuple[str, str]]:
    lines = []
    for existing, props, remote in CASES:
        fields = ["\x01".join(f"{k}={v}" for k, v in d.items()) for d in (existing, props)]
        lines.append("\t".join([*fields, "remote" if remote else ""]))
    got = subprocess.run([jars.require_java(), "-Xmx256m", "-XX:+UseSerialGC", "-cp", jars.classpath(VERSION),
                          str(SOURCE)], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=240)
    assert got.returncode == 0, got.stderr[-3000:]
    out = [tuple(line.split("\t", 1)) if "\t" in line else (line, "") for line in got.stdout.splitlines()]
    assert len(out) == len(CASES)
    return out  # type: ignore[return-value]


def test_topic_config_validation_matches_kafkas_logconfig_validate(kafka_jars):
    jars.ensure_kafka(VERSION)
    theirs = kafka_verdicts()
    assert sum(v == "OK" for v, _m in theirs) >= 10 and sum(v != "OK" for v, _m in theirs) >= 30
    differ = []
    for (existing, props, remote), (verdict, message) in zip(CASES, theirs, strict=True):
        static = {"remote.log.storage.system.enable": "true"} if remote else {}
        try:
            validate_topic_configs("t", existing, props, static, {}, None)
            ours = ("OK", "")
        except ControllerError as e:
            assert e.code == Errors.INVALID_CONFIG
            ours = ("INVALID_CONFIG", e.message)
        want = ("OK", "") if verdict == "OK" else ("INVALID_CONFIG", message)
        assert verdict in ("OK", "ConfigException", "InvalidConfigurationException"), (props, verdict, message)
        if ours != want:
            differ.append(f"{existing} {props} remote={remote}:\n  Kafka:    {want}\n  kraftkit: {ours}")
    assert not differ, "\n".join(differ)
