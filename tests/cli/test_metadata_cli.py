"""``kraftkit metadata dump|image`` and ``kraftkit snapshot create`` as a user runs them."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from kraftkit.log import Log, encode_batch
from kraftkit.metadata.image import load_image
from kraftkit.metadata.records import encode_metadata_record
from tests.cli.test_cli import run

T1 = uuid.UUID("11111111-1111-1111-1111-111111111111")
INC = uuid.UUID("44444444-4444-4444-4444-444444444444")
RECORDS = [
    (12, 0, {"Name": "metadata.version", "FeatureLevel": 17}),
    (0, 3, {"BrokerId": 1, "IncarnationId": INC, "BrokerEpoch": 5, "Rack": None, "EndPoints": [], "Features": [],
            "Fenced": True}),
    (2, 0, {"Name": "orders", "TopicId": T1}),
    (3, 1, {"PartitionId": 0, "TopicId": T1, "Replicas": [1], "Isr": [1], "RemovingReplicas": [],
            "AddingReplicas": [], "Leader": 1, "LeaderEpoch": 0, "PartitionEpoch": 0}),
    (4, 0, {"ResourceType": 2, "ResourceName": "orders", "Name": "retention.ms", "Value": "1000"}),
    (5, 0, {"PartitionId": 0, "TopicId": T1, "Isr": [1], "Leader": 1}),
]


@pytest.fixture()
def metalog(tmp_path: Path) -> Path:
    d = tmp_path / "__cluster_metadata-0"
    with Log(d, create=True) as log:
        for i in range(0, len(RECORDS), 2):
            vals = [encode_metadata_record(k, v, data) for k, v, data in RECORDS[i:i + 2]]
            log.append(encode_batch([(5000 + i, None, v, ()) for v in vals], base_offset=i, partition_leader_epoch=4))
    return d


def test_dump_text_and_json(metalog: Path) -> None:
    out = run("metadata", "dump", str(metalog), check=0).stdout.splitlines()
    recs = [line for line in out if not line.startswith("Dumping")]
    assert len(recs) == len(RECORDS)
    assert recs[0] == '0  FEATURE_LEVEL_RECORD v0  {"name":"metadata.version","featureLevel":17}'
    assert recs[2].startswith("2  TOPIC_RECORD v0  ") and json.loads(recs[2].split("  ", 2)[2])["name"] == "orders"
    lines = [json.loads(x) for x in run("metadata", "dump", "--json", str(metalog.parent), check=0).stdout.splitlines()]
    data = [x for x in lines if "offset" in x]
    assert [x["offset"] for x in data] == list(range(len(RECORDS)))
    assert data[5]["type"] == "PARTITION_CHANGE_RECORD" and data[5]["data"]["leader"] == 1
    assert lines[-1] == {"type": "summary", "file": str(metalog / "00000000000000000000.log"), "records": len(RECORDS)}


def test_dump_exit_codes(metalog: Path, tmp_path: Path) -> None:
    assert run("metadata", "dump", str(tmp_path / "missing")).returncode == 2
    seg = metalog / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's records: CRC mismatch
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / seg.name).write_bytes(bytes(data))
    proc = run("metadata", "dump", str(bad / seg.name))
    assert proc.returncode == 1 and "CRC" in proc.stderr and "base offset 0" in proc.stderr


def test_image_ls_cat_and_at(metalog: Path) -> None:
    assert run("metadata", "image", str(metalog), "--path", "/topics", check=0).stdout.split() == ["byName", "byId"]
    part = json.loads(run("metadata", "image", str(metalog), "--path", "/topics/orders/0", check=0).stdout)
    assert part["leaderEpoch"] == 1 and part["partitionEpoch"] == 1
    part = json.loads(run("metadata", "image", str(metalog), "--at", "4", "--path", "/topics/orders/0", check=0).stdout)
    assert part["leaderEpoch"] == 0
    assert json.loads(run("metadata", "image", str(metalog), "--path", "/configs/TOPIC:orders/retention.ms", check=0).stdout) == "1000"
    whole = json.loads(run("metadata", "image", str(metalog), "--json", check=0).stdout)
    assert whole["features"]["metadataVersion"] == "3.7-IV2" and whole["provenance"]["offset"] == 5
    assert run("metadata", "image", str(metalog), "--path", "/nope").returncode == 2


def test_snapshot_create(metalog: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    # MV 3.7-IV2: FeatureLevel, ZkMigrationState, broker, topic, partition
    res = json.loads(run("snapshot", "create", str(metalog), "--at", "4", "--out", str(out), "--json", check=0).stdout)
    assert res["snapshotId"] == "4-4" and res["dataRecords"] == 5 and res["lastContainedLogTimestamp"] == 5002
    snap = out / "00000000000000000004-0000000004.checkpoint"
    assert load_image(snap) == load_image(metalog, at=4)
    assert run("snapshot", "verify", str(snap), check=0)
    assert "batch boundary" in run("snapshot", "create", str(metalog), "--at", "3", "--out", str(out), check=2).stderr
    assert run("snapshot", "create", str(metalog), "--at", "4", "--out", str(out), check=2)  # already exists
    # written into the log directory, then used by the image as its starting point
    run("snapshot", "create", str(metalog), "--at", "6", check=0)
    assert load_image(metalog) == load_image(metalog, use_snapshots=False)
