"""Worked examples with independently derived bytes, and precise errors on malformed input."""

from __future__ import annotations

import json
import uuid

import pytest

from kraftkit.errors import CorruptRecordError, KraftkitError, TruncatedError, UnsupportedFormatError
from kraftkit.log import decode_batches
from kraftkit.metadata import records as mr

# The FeatureLevelRecord data batch, worked out by hand from the v2 format and Kafka's schema,
# checked byte for byte against kafka-python's v2 batch builder.
FEATURE_LEVEL_BATCH = bytes.fromhex(
    "0000000000000000 0000004f 00000001 02 37ef5bec 0000 00000000"
    "0000018bcfe56800 0000018bcfe56800 ffffffffffffffff ffff ffffffff 00000001"
    "3a 00 00 00 01 2e  01 0c 00  11 6d657461646174612e76657273696f6e  0016  00  00".replace(" ", "")
)
FEATURE_LEVEL_VALUE = bytes.fromhex("010c00" + "11" + b"metadata.version".hex() + "0016" + "00")


def test_feature_level_worked_example():
    (batch,) = decode_batches(FEATURE_LEVEL_BATCH, verify_crc=True)
    (rec,) = batch.records()
    assert rec.value == FEATURE_LEVEL_VALUE and len(rec.value) == 23
    assert mr.decode_metadata_record(rec.value) == (12, 0, {"Name": "metadata.version", "FeatureLevel": 22})
    assert mr.encode_metadata_record(12, 0, {"Name": "metadata.version", "FeatureLevel": 22}) == rec.value
    assert mr.metadata_record_json(rec.value) == (
        '{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":22}}')
    assert mr.decode_metadata_batch(batch) == [(0, 12, 0, {"Name": "metadata.version", "FeatureLevel": 22})]


def test_control_worked_examples():
    # a SnapshotHeader value and a LeaderChange v0 value, laid out by hand
    header = bytes.fromhex("0000" "0000018bcfe56800" "00")
    assert mr.decode_control_record(3, header) == {"Version": 0, "LastContainedLogTimestamp": 1700000000000}
    assert mr.control_record_json(3, header) == ("SnapshotHeader", '{"version":0,"lastContainedLogTimestamp":1700000000000}')
    lc = bytes.fromhex("0000 00000001 04 00000001 00 00000002 00 00000003 00 03 00000001 00 00000002 00 00".replace(" ", ""))
    d = mr.decode_control_record(2, lc)
    assert d == {"Version": 0, "LeaderId": 1, "Voters": [{"VoterId": 1}, {"VoterId": 2}, {"VoterId": 3}],
                 "GrantingVoters": [{"VoterId": 1}, {"VoterId": 2}]}
    assert mr.encode_control_record(2, d) == lc


def test_defaults_and_value_forms():
    # missing fields take defaults; PartitionChangeRecord's Leader defaults to -2 and is tagged
    b = mr.encode_metadata_record(5, 0, {"PartitionId": 3})
    _, _, d = mr.decode_metadata_record(b)
    assert d["Leader"] == -2 and d["Isr"] is None and d["TopicId"] == uuid.UUID(int=0)
    # uuid as Kafka text, uuid.UUID or 16 bytes
    u = uuid.UUID(int=1)
    for form in (u, "AAAAAAAAAAAAAAAAAAAAAQ", u.bytes):
        assert mr.decode_metadata_record(mr.encode_metadata_record(2, 0, {"Name": "t", "TopicId": form}))[2]["TopicId"] == u
    j = json.loads(mr.metadata_record_json(mr.encode_metadata_record(2, 0, {"Name": "t", "TopicId": u})))
    assert j["data"] == {"name": "t", "topicId": "AAAAAAAAAAAAAAAAAAAAAQ"}
    assert mr.record_type("FEATURE_LEVEL_RECORD") == mr.record_type(12) == (12, "FeatureLevelRecord", 0, 0)


def test_unknown_tags_survive_and_are_not_printed():
    value = FEATURE_LEVEL_VALUE[:-1] + bytes.fromhex("02 05 02 abcd 09 00".replace(" ", ""))
    api_key, v, d = mr.decode_metadata_record(value)
    assert d[mr.UNKNOWN_TAGS] == [(5, b"\xab\xcd"), (9, b"")]
    assert mr.encode_metadata_record(api_key, v, d) == value
    assert json.loads(mr.metadata_record_json(value))["data"] == {"name": "metadata.version", "featureLevel": 22}


@pytest.mark.parametrize("value,exc,reason,position", [
    (b"\x00\x0c\x00", UnsupportedFormatError,
     "Could not deserialize metadata record with frame version 0. Note that upgrades from the preview release "
     "of KRaft in 2.8 to newer versions are not supported.", 0),
    (b"\x02\x0c\x00", UnsupportedFormatError,
     "Could not deserialize metadata record due to unknown frame version 2(only frame version 1 is supported)", 0),
    (b"\x80\x80\x02\x0c\x00", CorruptRecordError, "Value for frame version was too large.", 0),
    (b"\x01\x80\x80\x02\x00", CorruptRecordError, "Value for type was too large.", 1),
    (b"\x01\x0c\xff\xff\x03", CorruptRecordError, "Value for version was too large.", 2),
    (b"\x01\x0d\x00\x00", UnsupportedFormatError, "Unknown metadata id 13", 1),
    (b"\x01\x63\x00\x00", UnsupportedFormatError, "Unknown metadata id 99", 1),
    (b"\x01\x0c\x01\x00", UnsupportedFormatError, "Can't read version 1 of FeatureLevelRecord", 3),
    (FEATURE_LEVEL_VALUE + b"\x01\x02\x03", CorruptRecordError, "Found 3 byte(s) of garbage after 12", 23),
    (b"", TruncatedError, "Could not read frame version: truncated unsigned varint (frame version)", 0),
    (b"\x01\x8c", TruncatedError, "Could not read type: truncated unsigned varint (type)", 1),
    (b"\x01\xff\xff\xff\xff\xff\x00", CorruptRecordError,
     "Could not read type: invalid unsigned varint (type): more than 32 bits", 1),
])
def test_frame_errors(value, exc, reason, position):
    with pytest.raises(exc) as ei:
        mr.decode_metadata_record(value)
    assert ei.value.reason == reason
    assert ei.value.position == position


def test_body_errors_name_field_and_position():
    # every truncation of a real-shaped record fails with the field and byte where it stopped
    value = mr.encode_metadata_record(3, 2, {
        "PartitionId": 1, "TopicId": uuid.UUID(int=5), "Replicas": [1, 2, 3], "Isr": [1, 2],
        "Leader": 1, "Directories": [uuid.UUID(int=7)] * 3, "EligibleLeaderReplicas": [3]})
    for cut in range(len(value)):
        with pytest.raises(KraftkitError) as ei:
            mr.decode_metadata_record(value[:cut])
        assert isinstance(ei.value, (TruncatedError, CorruptRecordError)), (cut, ei.value)
        assert ei.value.position is not None and ei.value.position <= cut
    with pytest.raises(TruncatedError) as ei:
        mr.decode_metadata_record(value[:3 + 4 + 16 + 1 + 8])  # inside Replicas[2]
    assert ei.value.field == "PartitionRecord.Replicas[2]"
    assert ei.value.position == 3 + 4 + 16 + 1 + 8
    # a bad compact length: 0 = null for a non-nullable array
    bad = value[:3 + 4 + 16] + b"\x00" + value[3 + 4 + 16 + 1:]
    with pytest.raises(CorruptRecordError) as ei:
        mr.decode_metadata_record(bad)
    assert ei.value.field == "PartitionRecord.Replicas"
    assert ei.value.reason == "non-nullable field was serialized as null"
    # an array count larger than the bytes left
    bad = value[:3 + 4 + 16] + b"\xff\xff\x03" + value[3 + 4 + 16 + 1:]
    with pytest.raises(CorruptRecordError, match="cannot fit"):
        mr.decode_metadata_record(bad)


def test_control_errors():
    with pytest.raises(UnsupportedFormatError, match="control type 1 has no schema"):
        mr.decode_control_record(1, b"\x00\x00")
    with pytest.raises(UnsupportedFormatError, match="Can't read version 7 of SnapshotHeaderRecord"):
        mr.decode_control_record(3, b"\x00\x07" + bytes(9))
    with pytest.raises(TruncatedError) as ei:
        mr.decode_control_record(3, b"\x00\x00\x00")
    assert ei.value.field == "SnapshotHeaderRecord.LastContainedLogTimestamp"
    with pytest.raises(CorruptRecordError, match="garbage"):
        mr.decode_control_record(4, b"\x00\x00\x00\x00")


def test_encode_errors():
    with pytest.raises(ValueError, match="no field 'Nope'|no field \"Nope\""):
        mr.encode_metadata_record(12, 0, {"Nope": 1})
    with pytest.raises(ValueError, match="out of range for int16"):
        mr.encode_metadata_record(12, 0, {"FeatureLevel": 1 << 15})
    with pytest.raises(TypeError, match="expected int"):
        mr.encode_metadata_record(12, 0, {"FeatureLevel": "1"})
    with pytest.raises(ValueError, match="non-nullable"):
        mr.encode_metadata_record(12, 0, {"Name": None})
    with pytest.raises(ValueError, match="Attempted to write a non-default Directories at version 0"):
        mr.encode_metadata_record(3, 0, {"Directories": [uuid.UUID(int=1)]})
    with pytest.raises(UnsupportedFormatError, match="Unknown metadata id 13"):
        mr.encode_metadata_record(13, 0, {})
    with pytest.raises(UnsupportedFormatError, match="Can't write version 5 of RegisterBrokerRecord"):
        mr.encode_metadata_record(0, 5, {})
    with pytest.raises(ValueError, match="collides with known tagged field Leader"):
        mr.encode_metadata_record(5, 0, {mr.UNKNOWN_TAGS: [(1, b"\x00\x00\x00\x01")]})


def test_schema_tables():
    s = mr.metadata_schema()
    by_name = {m["name"]: m for m in s["metadata"]}
    rb = by_name["RegisterBrokerRecord"]
    assert rb["api_key"] == 0 and rb["valid_versions"] == (0, 4) and rb["flexible_versions"] == (0, 32767)
    f = {x["name"]: x for x in rb["fields"]}
    assert f["Rack"]["nullable_versions"] == (0, 32767) and f["Rack"]["default"] == ""  # no "default": ""
    assert f["LogDirs"]["tag"] == 0 and f["LogDirs"]["tagged_versions"] == (3, 32767)
    assert f["EndPoints"]["type"]["element"]["name"] == "BrokerEndpoint"
    pc = {x["name"]: x for x in by_name["PartitionChangeRecord"]["fields"]}
    assert pc["Leader"]["default"] == -2 and pc["LeaderRecoveryState"]["default"] == -1
    assert [c["control_type"] for c in s["control"]] == [2, 3, 4, 5, 6]
    assert mr.CONTROL_TYPES[6] == ("KRaftVoters", "VotersRecord")
