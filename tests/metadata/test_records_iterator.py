"""``kraftkit.metadata.records(path)``: the decoded records of a metadata file or directory, in log order,
checked against what Kafka's own ``kafka-dump-log`` reported about the files Kafka wrote (fixtures/)."""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import kraftkit.metadata
from kraftkit._core import metadata_record_json, metadata_record_types
from kraftkit.errors import CorruptRecordError
from kraftkit.log import Log, encode_batch, segment_name
from kraftkit.metadata import MetadataRecord, records
from kraftkit.metadata.records import encode_metadata_record
from kraftkit.metadata.source import ContinuityError, MetadataSourceError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MANIFEST = json.loads((FIXTURES / "MANIFEST.json").read_text())["files"]
RELEASES = sorted(MANIFEST[k]["release"] for k in MANIFEST if k.endswith("__cluster_metadata-0/00000000000000000000.log"))

T1 = uuid.UUID("11111111-1111-1111-1111-111111111111")
#: (apiKey, version, body) of the records of the logs written here, 2 per batch
BODIES = [
    (12, 0, {"Name": "metadata.version", "FeatureLevel": 17}),
    (2, 0, {"Name": "orders", "TopicId": T1}),
    (4, 0, {"ResourceType": 2, "ResourceName": "orders", "Name": "retention.ms", "Value": "1000"}),
    (4, 0, {"ResourceType": 2, "ResourceName": "orders", "Name": "cleanup.policy", "Value": "delete"}),
    (12, 0, {"Name": "kraft.version", "FeatureLevel": 0}),
    (4, 0, {"ResourceType": 2, "ResourceName": "orders", "Name": "retention.ms", "Value": "2000"}),
]


def _batch(base: int, bodies: list[tuple[int, int, dict]], epoch: int = 3) -> bytes:
    vals = [encode_metadata_record(k, v, data) for k, v, data in bodies]
    return encode_batch([(1000 + base + i, None, v, ()) for i, v in enumerate(vals)], base_offset=base,
                        partition_leader_epoch=epoch)


@pytest.fixture()
def metalog(tmp_path: Path) -> Path:
    d = tmp_path / "__cluster_metadata-0"
    with Log(d, create=True) as log:
        for i in range(0, len(BODIES), 2):
            log.append(_batch(i, BODIES[i : i + 2]))
    return d


@pytest.mark.parametrize("release", RELEASES)
def test_every_file_of_a_kafka_log_dir_as_kafka_dump_log_counted_it(release: str) -> None:
    """Per file: the record types and their counts, the number of records and the first and last
    offsets are those Kafka's dump-log reported (MANIFEST.json); the data directory, the
    partition directory and the files one by one give the same records."""
    data = FIXTURES / f"kafka-{release}" / "data"
    by_file: dict[str, list[MetadataRecord]] = defaultdict(list)
    for r in records(data):
        by_file[r.batch.file].append(r)
    part = data / "__cluster_metadata-0"
    want_files = sorted(str(p) for p in part.iterdir() if p.suffix in (".log", ".checkpoint"))
    assert sorted(by_file) == want_files
    for name, recs in by_file.items():
        kafka = MANIFEST[str(Path(name).relative_to(FIXTURES))]["kafka"]
        assert dict(Counter(r.type for r in recs)) == kafka["types"], name
        assert len(recs) == kafka["records"]
        assert (recs[0].offset, recs[-1].offset) == (kafka["first_offset"], kafka["last_offset"])
        assert [r.offset for r in recs] == list(range(recs[0].offset, recs[-1].offset + 1))  # log order, dense
        assert list(records(name)) == recs
    assert list(records(part)) == [r for recs in by_file.values() for r in recs]
    # snapshots first (oldest first), then the log
    kinds = [recs[0].batch.kind for recs in by_file.values()]
    assert kinds == sorted(kinds, key=lambda k: k != "snapshot") and kinds[-1] == "segment"


def test_records_hold_what_was_written(metalog: Path) -> None:
    got = list(records(metalog))
    assert [(r.api_key, r.version, r.data) for r in got] == BODIES
    assert [r.offset for r in got] == list(range(len(BODIES)))
    names = {t[0]: json.loads(metadata_record_json(encode_metadata_record(t[0], t[3], {})))["type"]
             for t in metadata_record_types()}
    assert [r.type for r in got] == [names[k] for k, _, _ in BODIES]
    assert all(not r.is_control and r.control_type is None for r in got)
    # the batch: two records each, the second batch after the first one's bytes
    assert [(r.batch.base_offset, r.batch.last_offset) for r in got[:4]] == [(0, 1), (0, 1), (2, 3), (2, 3)]
    assert got[0].batch is got[1].batch
    assert got[0].batch.position == 0 and got[2].batch.position == len(_batch(0, BODIES[:2]))
    assert {r.batch.partition_leader_epoch for r in got} == {3}
    assert got[0].batch.file == str(metalog / segment_name(0)) and got[0].batch.kind == "segment"
    assert got[3].batch.max_timestamp == 1000 + 3


def test_the_codec_module_stays_as_it_was() -> None:
    """``kraftkit.metadata.records`` is both the iterator (called) and the codec module (its names)."""
    from kraftkit.metadata import records as mr
    from kraftkit.metadata.records import decode_metadata_record

    assert mr is kraftkit.metadata.records and callable(mr)
    assert mr.decode_metadata_record is decode_metadata_record
    value = encode_metadata_record(*BODIES[0])
    assert mr.decode_metadata_record(value) == BODIES[0]


def test_a_corrupt_batch_raises_where_it_is_after_the_records_before_it(metalog: Path) -> None:
    seg = metalog / segment_name(0)
    first = len(_batch(0, BODIES[:2]))
    data = bytearray(seg.read_bytes())
    data[first + 70] ^= 0xFF  # inside the second batch's records: its CRC no longer matches
    seg.write_bytes(bytes(data))
    it = records(metalog)
    assert [next(it).offset, next(it).offset] == [0, 1]
    with pytest.raises(CorruptRecordError) as e:
        next(it)
    assert (e.value.file, e.value.offset, e.value.position) == (str(seg), 2, first)
    assert "CRC" in str(e.value)


def test_a_hole_is_refused_before_the_first_record_unless_allowed(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    d.mkdir()
    (d / segment_name(0)).write_bytes(_batch(0, BODIES[:2]) + _batch(4, BODIES[4:]))  # 2..3 missing
    with pytest.raises(ContinuityError) as e:
        records(d)
    assert [p.kind for p in e.value.problems] == ["gap"] and e.value.problems[0].missing == (2, 3)
    gaps: list = []
    assert [r.offset for r in records(d, allow_gaps=True, gaps=gaps)] == [0, 1, 4, 5]
    assert [p.missing for p in gaps] == [(2, 3)]


def test_offsets_held_twice_are_given_once_when_allowed(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    d.mkdir()
    (d / segment_name(0)).write_bytes(_batch(0, BODIES[:2]) + _batch(2, BODIES[2:4]))  # 0..3
    (d / segment_name(2)).write_bytes(_batch(2, BODIES[4:], epoch=4) + _batch(4, BODIES[4:], epoch=4))  # 2..5
    with pytest.raises(ContinuityError):
        records(d)
    got = list(records(d, allow_gaps=True, gaps=[]))
    assert [r.offset for r in got] == [0, 1, 2, 3, 4, 5]
    assert [r.batch.partition_leader_epoch for r in got] == [3, 3, 3, 3, 4, 4]  # 2 and 3: the first time


def test_paths_that_are_not_metadata(tmp_path: Path) -> None:
    with pytest.raises(MetadataSourceError, match=f"^{tmp_path / 'missing'}: no such file or directory$"):
        records(tmp_path / "missing")
    fifo = tmp_path / segment_name(0)
    os.mkfifo(fifo)
    with pytest.raises(MetadataSourceError, match=r"not a regular file \(a FIFO\)$"):
        records(fifo)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(MetadataSourceError, match="no metadata log segments"):
        records(empty)
