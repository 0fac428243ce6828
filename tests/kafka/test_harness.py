"""Checks of the real-Kafka oracle harness itself (tests/harness)."""

from __future__ import annotations

import random

import pytest

from tests.harness import dumplog, jars, tools
from tests.harness.node import KafkaNode
from tests.harness.scenario import CODECS

pytestmark = pytest.mark.kafka

V4 = jars.KAFKA_4


def test_jars_fetched(kafka_jars):
    for version, libs in kafka_jars.items():
        assert jars.is_fetched(version)
        assert (libs / f"kafka_2.13-{version}.jar").is_file()
        assert (libs / f"kafka-tools-{version}.jar").is_file()
        assert jars.ensure_kafka(version) == libs  # idempotent, no re-download
    assert tools.dump_log_class(jars.KAFKA_4) == "org.apache.kafka.tools.DumpLogSegments"
    assert tools.dump_log_class(jars.KAFKA_3) == "kafka.tools.DumpLogSegments"


def test_segments_rolled_for_every_codec_topic(kafka_oracle):
    for codec in CODECS:
        logs = kafka_oracle.segment_files(f"codec-{codec}")
        assert len(logs) >= 3, (codec, logs)
        assert logs[0].name == "00000000000000000000.log"


def test_metadata_log_exists(kafka_oracle):
    mdir = kafka_oracle.metadata_log_dir
    assert mdir.name == "__cluster_metadata-0" and mdir.is_dir()
    assert list(mdir.glob("*.log"))
    assert (mdir / "quorum-state").is_file()
    assert list(mdir.glob("*-*.checkpoint"))  # metadata snapshots
    assert (kafka_oracle.metadata_dir / "meta.properties").is_file()


def test_dumplog_codec_topics_match_produced(kafka_oracle):
    files = [f for c in CODECS for f in kafka_oracle.segment_files(f"codec-{c}")]
    parsed = tools.dump_log_parsed(V4, files, deep=True)
    assert set(parsed) == {str(f) for f in files}
    for codec in CODECS:
        topic = f"codec-{codec}"
        batches, records = [], []
        for f in kafka_oracle.segment_files(topic):
            fd = parsed[str(f)]
            assert fd["kind"] == "log" and not fd["unparsed"] and not fd["errors"], fd["path"]
            assert fd["start_offset"] == int(f.stem)
            assert fd["batches"], f
            batches += fd["batches"]
            records += dumplog.all_records(fd)
        assert all(b["isvalid"] is True for b in batches)
        assert {b["compresscodec"] for b in batches} == {codec}
        assert all(b["magic"] == 2 and b["timestampType"] == "CreateTime" for b in batches)
        assert all(b["producerId"] >= 0 for b in batches)  # idempotent producer
        assert {b["partitionLeaderEpoch"] for b in batches} == {0, 2}  # restarted mid-way
        produced = kafka_oracle.produced[topic]
        assert [r["offset"] for r in records] == [p["offset"] for p in produced]
        for r, p in zip(records, produced):
            assert r["timestamp"] == p["timestamp"]
            assert r["keySize"] == (-1 if p["key"] is None else len(p["key"]))
            assert r["valueSize"] == (-1 if p["value"] is None else len(p["value"]))
            assert r["headerKeys"] == [k for k, _ in p["headers"]]


def test_dumplog_print_data_payloads(kafka_oracle):
    topic = "codec-zstd"
    first = kafka_oracle.segment_files(topic)[0]
    fd = tools.dump_log_parsed(V4, [first], print_data=True)[str(first)]
    recs = dumplog.all_records(fd)
    by_offset = {p["offset"]: p for p in kafka_oracle.produced[topic]}
    assert recs and not fd["unparsed"]
    for r in recs:
        p = by_offset[r["offset"]]
        assert r.get("key") == (None if p["key"] is None else p["key"].decode())
        assert r.get("payload") == (None if p["value"] is None else p["value"].decode())


def test_dumplog_transactions_and_log_append_time(kafka_oracle):
    files = kafka_oracle.segment_files("txn") + kafka_oracle.segment_files("log-append-time")
    parsed = tools.dump_log_parsed(V4, files, deep=True)
    txn = [b for f in kafka_oracle.segment_files("txn") for b in parsed[str(f)]["batches"]]
    markers = [r["control"]["marker"] for b in txn if b["isControl"] for r in b["records"]]
    assert "COMMIT" in markers and "ABORT" in markers
    assert all(b["isTransactional"] for b in txn)
    lat = [b for f in kafka_oracle.segment_files("log-append-time") for b in parsed[str(f)]["batches"]]
    assert lat and all(b["timestampType"] == "LogAppendTime" for b in lat)
    assert {b["compresscodec"] for b in lat} == {"zstd"}


def test_dumplog_cluster_metadata(kafka_oracle):
    mdir = kafka_oracle.metadata_log_dir
    files = sorted(mdir.glob("*.log")) + sorted(mdir.glob("*.checkpoint"))
    parsed = tools.dump_log_parsed(V4, files, cluster_metadata=True)
    types, controls = set(), set()
    for fd in parsed.values():
        assert not fd["unparsed"] and not fd["errors"], fd["path"]
        for b in fd["batches"]:
            assert b["isvalid"] is True
            for r in b["records"]:
                if r["control"]:
                    controls.add(r["control"]["type"])
                else:
                    types.add(r["payload_json"]["type"])
    assert {"FEATURE_LEVEL_RECORD", "TOPIC_RECORD", "PARTITION_RECORD", "REGISTER_BROKER_RECORD",
            "NO_OP_RECORD"} <= types
    assert {"SnapshotHeader", "SnapshotFooter", "KRaftVersion", "KRaftVoters", "LeaderChange"} <= controls
    snaps = [fd for p, fd in parsed.items() if p.endswith(".checkpoint")]
    assert all(fd["snapshot_end_offset"] is not None for fd in snaps)


def test_dumplog_indexes(kafka_oracle):
    pdir = kafka_oracle.partition_dir("codec-none")
    idx = sorted(pdir.glob("*.index")) + sorted(pdir.glob("*.timeindex"))
    parsed = tools.dump_log_parsed(V4, idx)
    assert any(fd["entries"] for fd in parsed.values())
    for fd in parsed.values():
        assert not fd["unparsed"] and not fd["errors"], fd
        for e in fd["entries"]:
            assert e["offset"] >= int(fd["path"].rsplit("/", 1)[1].split(".")[0])
    sanity = tools.dump_log_parsed(V4, idx, index_sanity=True)
    assert all(fd["sanity_ok"] or fd["empty"] for fd in sanity.values())


def test_node_restart_kafka3(kafka_jars, tmp_path):
    v = jars.KAFKA_3
    node = KafkaNode(tmp_path / "k3", v, extra_props={"log.segment.bytes": 8192})
    with node:
        tools.create_topics(v, node.bootstrap, [{"name": "t", "configs": {"compression.type": "producer"}}])
        rng = random.Random(3)
        recs = [{"key": b"k%d" % i, "value": rng.randbytes(300), "headers": [("h", b"x")]}
                for i in range(50)]
        acks = tools.produce(v, node.bootstrap, [{"topic": "t", "props": {"compression.type": "lz4", "batch.size": 1024},
                                                  "records": recs}])
    assert [a["offset"] for a in acks] == list(range(50))
    with node:  # restart on the same data dir
        got = tools.consume(v, node.bootstrap, "t")
    assert [(r["key"], r["value"]) for r in got] == [(r["key"], r["value"]) for r in recs]
    logs = sorted(node.partition_dir("t").glob("*.log"))
    assert len(logs) >= 2
    parsed = tools.dump_log_parsed(v, logs + sorted(node.metadata_log_dir.glob("*.log")),
                                   deep=True, cluster_metadata=False)
    data = [b for f in logs for b in parsed[str(f)]["batches"]]
    assert data and all(b["isvalid"] and b["compresscodec"] == "lz4" for b in data)


def test_kafka_restarts_on_oracle_copy(kafka_oracle):
    with kafka_oracle.node() as node:
        got = tools.consume(V4, node.bootstrap, "txn", isolation="read_committed")
    want = kafka_oracle.committed("txn")
    assert len(want) < len(kafka_oracle.produced["txn"])  # some transactions were aborted
    assert [(r["offset"], r["key"], r["value"]) for r in got] == \
        [(r["offset"], r["key"], r["value"]) for r in want]


def test_a_cluster_id_beginning_with_a_dash_is_formatted(kafka_jars, tmp_path):
    # (ZooKeeper-mode Kafka draws such ids, 1 in 64: CoreUtils.generateUuidAsBase64; the harness
    # formats with them, as for a cluster taken over from ZooKeeper)
    from tests.harness.node import random_cluster_id

    cid = "-" + random_cluster_id()[1:]
    node = KafkaNode(tmp_path / "node", jars.KAFKA_3, cluster_id=cid)
    for d in node.log_dirs:
        d.mkdir(parents=True)
    node._ensure_ports()
    node._write_config()
    node.format()
    props = (node.metadata_dir / "meta.properties").read_text()
    assert f"cluster.id={cid}\n" in props, props
