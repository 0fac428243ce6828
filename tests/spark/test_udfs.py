"""The Arrow UDFs against kraftkit's single-process tools: the metadata codec, RecordBatch CRC
checks and the snapshot rewriter's loss report."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from kraftkit._core import decode_metadata_record, metadata_record_json
from kraftkit.errors import KraftkitError
from kraftkit.features.rewrite import rewrite_snapshot
from kraftkit.log import Segment
from kraftkit.spark.udfs import batch_crc_array, batch_crc_valid, decode_array, decode_record, downgrade_losses, losses_array

pytestmark = pytest.mark.spark


def snapshot_files(fleet) -> list[Path]:
    return sorted(Path(fleet.root).glob("*/node-0/__cluster_metadata-0/*.checkpoint"))


def test_decode_record_equals_the_codec(spark, fleet):
    df = spark.read.format("kraft").option("columns", "is_control,value").load(fleet.root).where("not is_control")
    rows = df.select("value", decode_record("value").alias("r")).collect()
    assert len(rows) > 1000
    bad = 0
    for row in rows:
        v = bytes(row["value"])
        try:
            d = json.loads(metadata_record_json(v))
        except KraftkitError as e:  # a value under the fleet's flipped byte
            assert row["r"]["record"] is None and row["r"]["error"] and e.reason in row["r"]["error"]
            bad += 1
            continue
        api_key, version, _ = decode_metadata_record(v)
        assert d["version"] == version
        assert (row["r"]["record_type"], row["r"]["record_version"]) == (d["type"], version)
        assert json.loads(row["r"]["record"]) == d["data"]
        assert row["r"]["error"] is None
    assert bad <= 3  # one flipped byte on one node: at most a value or so


def test_decode_array_nulls_garbage_and_slices():
    from kraftkit._core import encode_metadata_record

    v = encode_metadata_record(12, 0, {"Name": "metadata.version", "FeatureLevel": 21})
    arr = pa.array([b"x", v, None, v[:-2], v], pa.binary()).slice(1)
    out = decode_array(arr).to_pylist()
    assert out[0] == {"record_type": "FEATURE_LEVEL_RECORD", "record_version": 0,
                      "record": '{"name":"metadata.version","featureLevel":21}', "error": None}
    assert out[1] == {"record_type": None, "record_version": None, "record": None, "error": None}
    assert out[2]["record_type"] == "FEATURE_LEVEL_RECORD" and out[2]["record"] is None and out[2]["error"]
    assert out[3] == out[0]


def test_batch_crc_valid_equals_record_batch_is_valid(spark, fleet):
    batches = []
    for c in fleet.clusters:
        for d in c.damage:
            if d["kind"] == "crc":
                batches += list(Segment(d["file"]).batches())
    assert any(not b.is_valid for b in batches)
    df = spark.createDataFrame([(b.to_bytes(),) for b in batches] + [(b"not a batch",), (None,)], "b binary")
    got = [r[0] for r in df.select(batch_crc_valid("b")).collect()]
    assert got == [b.is_valid for b in batches] + [None, None]
    assert batch_crc_array([batches[0].to_bytes()]).to_pylist() == [batches[0].is_valid]


def test_downgrade_losses_add_up_to_the_rewrite_report(spark, fleet):
    for target in ("3.4", "3.6-IV2"):
        for snap in snapshot_files(fleet):
            report = rewrite_snapshot(snap, None, target)
            want = Counter()
            for loss in report.losses:
                want[f"{loss['record']}.{loss['field']}" if loss["field"] else loss["record"]] += loss["count"]
            df = (spark.read.format("kraft").option("columns", "is_control,value").load(str(snap))
                  .where("not is_control").select(downgrade_losses("value", target).alias("lost")))
            got = Counter(x for r in df.collect() for x in r["lost"])
            assert got == want, (snap, target)


def test_losses_array_without_spark():
    from kraftkit._core import encode_metadata_record

    scram = encode_metadata_record(11, 0, {"Name": "alice", "Mechanism": 1, "Salt": b"s", "StoredKey": b"k",
                                           "ServerKey": b"k", "Iterations": 4096})
    topic = encode_metadata_record(2, 0, {"Name": "t", "TopicId": b"\x01" * 16})
    assert losses_array([scram, topic, None, b"\x07"], "3.4").to_pylist() == [["UserScramCredentialRecord"], [], None, None]
    assert losses_array([scram], "3.5-IV2").to_pylist() == [[]]
