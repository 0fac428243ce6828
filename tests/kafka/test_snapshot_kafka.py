"""Snapshots against real Kafka: kraftkit validates Kafka's snapshots, and Kafka's own tool
reads the snapshots kraftkit writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftkit.log import Segment
from kraftkit.metadata.snapshot import SnapshotReader, SnapshotWriter, parse_snapshot_name
from tests.harness import dumplog, jars, tools

pytestmark = pytest.mark.kafka


def real_snapshots(oracle) -> list[Path]:
    snaps = sorted(oracle.metadata_log_dir.glob("*.checkpoint"))
    assert len(snaps) >= 2
    return snaps


def test_kafkas_snapshots_validate(kafka_oracle):
    parsed = tools.dump_log_parsed(jars.KAFKA_4, real_snapshots(kafka_oracle), deep=True)
    for snap in real_snapshots(kafka_oracle):
        rep = SnapshotReader(snap).check()
        fd = parsed[str(snap)]
        assert rep["batches"] == len(fd["batches"])
        assert rep["records"] == len(dumplog.all_records(fd))
        sid, kind = parse_snapshot_name(snap.name)
        assert kind == "immutable" and fd["snapshot_end_offset"] == sid.end_offset and fd["snapshot_epoch"] == sid.epoch


def rewrite(src: Path, out_dir: Path) -> Path:
    """Writes the same snapshot again with kraftkit, from the records of Kafka's file."""
    sid, _ = parse_snapshot_name(src.name)
    batches = list(Segment(src).batches())
    header = batches[0].records()
    ts = int.from_bytes(header[0].value[2:10], "big")
    kraft = [r for r in header if r.control_type_name == "KRAFT_VERSION"]
    voters = [r for r in header if r.control_type_name == "KRAFT_VOTERS"]
    with SnapshotWriter(out_dir, sid, last_contained_log_timestamp=ts,
                        kraft_version=int.from_bytes(kraft[0].value[2:4], "big") if kraft else 0,
                        voters_value=voters[0].value if voters else None,
                        time_ms=batches[0].max_timestamp) as w:
        for b in batches[1:-1]:
            w.append([r.value for r in b.records()])
    return w.final_path


def test_kafka_dump_log_decodes_kraftkit_snapshots(kafka_oracle, tmp_path):
    originals = real_snapshots(kafka_oracle)
    mine = [rewrite(s, tmp_path) for s in originals]
    parsed = tools.dump_log_parsed(jars.KAFKA_4, originals + mine, deep=True, cluster_metadata=True)
    for orig, new in zip(originals, mine):
        a, b = parsed[str(orig)], parsed[str(new)]
        assert not b["errors"] and not b["unparsed"], b["errors"][:3]
        assert all(x["isvalid"] for x in b["batches"])
        ra, rb = dumplog.all_records(a), dumplog.all_records(b)
        assert len(ra) == len(rb)
        for x, y in zip(ra, rb):
            assert x["offset"] == y["offset"]
            assert x["control"] == y["control"]
            assert x.get("payload_json") == y.get("payload_json")
        # Same layout as Kafka: one header batch, the data, one footer batch.
        assert len(a["batches"]) == len(b["batches"])
        assert [x["count"] for x in a["batches"]] == [x["count"] for x in b["batches"]]
        assert SnapshotReader(new).check()["data_records"] == SnapshotReader(orig).check()["data_records"]
