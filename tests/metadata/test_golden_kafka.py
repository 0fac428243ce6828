"""Golden bytes from a real Kafka run: every record of the oracle's metadata log and snapshots
decodes, re-encodes to the same bytes, and prints the same JSON as Kafka's own
``kafka-dump-log --cluster-metadata-decoder`` (4.3.1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraftkit.log import Segment
from kraftkit.metadata import records as mr
from tests.harness import dumplog, jars, tools

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def metadata_files(kafka_oracle) -> list[Path]:
    d = kafka_oracle.metadata_log_dir
    files = sorted(d.glob("*.log")) + sorted(d.glob("*.checkpoint"))
    assert any(f.suffix == ".log" for f in files) and any(f.suffix == ".checkpoint" for f in files)
    return files


@pytest.fixture(scope="module")
def kafka_dump(metadata_files) -> dict:
    proc = tools.dump_log(jars.KAFKA_4, metadata_files, deep=True, cluster_metadata=True)
    return dumplog.parse(proc.stdout, proc.stderr)


def _ours(path: Path) -> dict[int, tuple]:
    """offset -> ("data", json dict, value bytes, json text) | ("control", label, json dict, value bytes, type)."""
    out: dict[int, tuple] = {}
    for batch in Segment(path).batches(verify_crc=True):
        for rec in batch:
            if rec.is_control:
                if rec.control_type in mr.CONTROL_TYPES:
                    label, text = mr.control_record_json(rec.control_type, rec.value)
                    out[rec.offset] = ("control", label, json.loads(text), rec.value, rec.control_type)
            else:
                text = mr.metadata_record_json(rec.value)
                out[rec.offset] = ("data", json.loads(text), rec.value, text)
    return out


def test_every_real_record_matches_kafka_dump_log(metadata_files, kafka_dump):
    by_name = {Path(p).name: fd for p, fd in kafka_dump.items()}
    compared = {"data": 0, "control": 0}
    types_seen: set[str] = set()
    mismatches = []
    for path in metadata_files:
        fd = by_name[path.name]
        ours = _ours(path)
        kafka_records = [r for b in fd["batches"] for r in b["records"]]
        assert kafka_records, path
        for r in kafka_records:
            mine = ours.get(r["offset"])
            if r["control"] is None:
                assert "payload_json" in r, (path.name, r)
                assert mine is not None and mine[0] == "data", (path.name, r["offset"])
                compared["data"] += 1
                types_seen.add(r["payload_json"]["type"])
                # same JSON, and the very same text (key order, number and string formatting)
                if mine[1] != r["payload_json"] or mine[3] != r["payload"]:
                    mismatches.append((path.name, r["offset"], mine[3], r["payload"]))
            elif "json" in r["control"]:
                assert mine is not None and mine[0] == "control", (path.name, r["offset"])
                compared["control"] += 1
                if (mine[1], mine[2]) != (r["control"]["type"], r["control"]["json"]):
                    mismatches.append((path.name, r["offset"], mine[1:3], r["control"]))
        # every record we decoded is one Kafka printed
        assert len(ours) == sum(1 for r in kafka_records if r["control"] is None or "json" in r["control"])
    assert not mismatches, mismatches[:5]
    assert compared["data"] > 300 and compared["control"] > 20, compared
    # the oracle exercises records of the newest schema versions (REGISTER_BROKER_RECORD v4 ...)
    assert {"REGISTER_BROKER_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD", "FEATURE_LEVEL_RECORD"} <= types_seen


def test_real_records_reencode_to_the_same_bytes(metadata_files):
    n = 0
    for path in metadata_files:
        for offset, item in _ours(path).items():
            if item[0] == "data":
                value = item[2]
                api_key, version, data = mr.decode_metadata_record(value)
                assert mr.encode_metadata_record(api_key, version, data) == value, (path.name, offset)
            else:
                value, ctype = item[3], item[4]
                assert mr.encode_control_record(ctype, mr.decode_control_record(ctype, value)) == value
            n += 1
    assert n > 300


def test_bulk_batch_decoding_agrees(metadata_files):
    for path in metadata_files:
        ours = _ours(path)
        for batch in Segment(path).batches():
            for offset, api_key, version, text in mr.decode_metadata_batch(batch, json=True):
                if api_key is None:
                    if text is not None:
                        assert json.loads(text) == ours[offset][2]
                    continue
                assert json.loads(text) == ours[offset][1]
                assert ours[offset][1]["version"] == version
            for offset, api_key, version, data in mr.decode_metadata_batch(batch):
                if api_key is not None:
                    assert mr.encode_metadata_record(api_key, version, data) == ours[offset][2]
