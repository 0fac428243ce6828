"""kraftkit reads what real Apache Kafka wrote exactly as Kafka's own tools do.

Oracle: the real ``kafka-dump-log`` (DumpLogSegments) of Kafka 4.3.1 and 3.9.2 run on the
very files a real KRaft node wrote (tests/harness), and the index files Kafka itself built.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kraftkit.log import ControlRecord, Segment
from tests.harness import jars, tools

pytestmark = pytest.mark.kafka

BATCH_FIELDS = {
    "baseOffset": "base_offset",
    "lastOffset": "last_offset",
    "count": "count",
    "baseSequence": "base_sequence",
    "lastSequence": "last_sequence",
    "producerId": "producer_id",
    "producerEpoch": "producer_epoch",
    "partitionLeaderEpoch": "partition_leader_epoch",
    "isTransactional": "is_transactional",
    "isControl": "is_control",
    "deleteHorizonMs": "delete_horizon_ms",
    "position": "position",
    "timestampType": "timestamp_type",
    "maxTimestamp": "max_timestamp",
    "size": "size_in_bytes",
    "magic": "magic",
    "compresscodec": "compression",
    "crc": "crc",
    "isvalid": "is_valid",
}


def all_log_files(oracle) -> list[Path]:
    files = [f for t in oracle.topics for f in oracle.segment_files(t)]
    files += sorted(oracle.metadata_log_dir.glob("*.log"))
    return files


def snapshot_files(oracle) -> list[Path]:
    return sorted(oracle.metadata_log_dir.glob("*.checkpoint"))


def kraftkit_view(path: Path) -> list[dict]:
    """Every batch and record of a file as kraftkit reads it, in dump-log's vocabulary."""
    out = []
    for b in Segment(path).batches():
        d = {k: getattr(b, attr) for k, attr in BATCH_FIELDS.items()}
        recs = []
        for r in b.records():
            rec = {
                "offset": r.offset,
                "timestamp": r.timestamp,
                "keySize": r.key_size,
                "valueSize": r.value_size,
                "sequence": r.sequence,
                "headerKeys": [k for k, _ in r.headers],
            }
            if isinstance(r, ControlRecord):
                rec["control_type"] = r.control_type_name
                if r.control_type_name in ("COMMIT", "ABORT"):
                    rec["coordinatorEpoch"] = int.from_bytes(r.value[2:6], "big", signed=True)
            else:
                rec["key"] = text_or_binary(r.key)
                rec["payload"] = text_or_binary(r.value)
            recs.append(rec)
        d["records"] = recs
        out.append(d)
    return out


BINARY = object()


def text_or_binary(b: bytes | None):
    """The text dump-log prints for UTF-8 data; binary data (e.g. metadata records, which
    dump-log prints through Java's lossy decoder) is compared by size only."""
    if b is None:
        return None
    try:
        t = b.decode("utf-8")
    except UnicodeDecodeError:
        return BINARY
    return BINARY if "\r" in t else t


CONTROL_NAMES = {"LeaderChange": "LEADER_CHANGE", "SnapshotHeader": "SNAPSHOT_HEADER", "SnapshotFooter": "SNAPSHOT_FOOTER",
                 "KRaftVersion": "KRAFT_VERSION", "KRaftVoters": "KRAFT_VOTERS"}


def kafka_control_name(ctl: dict) -> str:
    if ctl["type"] == "endTxnMarker":
        return ctl["marker"]
    if ctl["type"] == "controlType":
        return ctl["name"]
    return CONTROL_NAMES[ctl["type"]]


def compare_file(path: Path, fd: dict) -> int:
    """Asserts kraftkit's view of ``path`` equals Kafka's parsed dump; returns records compared."""
    assert not fd["unparsed"], (path, fd["unparsed"][:3])
    mine = kraftkit_view(path)
    assert len(mine) == len(fd["batches"]), path
    n = 0
    for kb, jb in zip(mine, fd["batches"]):
        for field in BATCH_FIELDS:
            assert kb[field] == jb[field], (path, jb["baseOffset"], field, kb[field], jb[field])
        jrecs = jb.get("records", [])
        assert len(kb["records"]) == len(jrecs), (path, jb["baseOffset"])
        for kr, jr in zip(kb["records"], jrecs):
            for field in ("offset", "timestamp", "keySize", "valueSize", "sequence", "headerKeys"):
                assert kr[field] == jr[field], (path, jr["offset"], field, kr[field], jr[field])
            if jr["control"] is not None:
                assert kr["control_type"] == kafka_control_name(jr["control"]), (path, jr["offset"])
                if jr["control"]["type"] == "endTxnMarker":
                    assert kr["coordinatorEpoch"] == jr["control"]["coordinatorEpoch"]
            else:
                assert "control_type" not in kr
                if "payload" in jr and kr["payload"] is not BINARY:
                    assert kr["payload"] == jr["payload"], (path, jr["offset"])
                if kr["key"] is not BINARY:
                    assert kr["key"] == jr.get("key"), (path, jr["offset"])
            n += 1
    return n


def test_every_batch_and_record_matches_kafka_dump_log(kafka_oracle):
    files = all_log_files(kafka_oracle) + snapshot_files(kafka_oracle)
    parsed = tools.dump_log_parsed(jars.KAFKA_4, files, deep=True, print_data=True)
    total = 0
    for f in files:
        total += compare_file(f, parsed[str(f)])
    produced = sum(len(v) for v in kafka_oracle.produced.values())
    assert total > produced  # every produced record plus markers and metadata records


def test_codec_topics_decode_to_what_was_produced(kafka_oracle):
    """Independent of dump-log: records equal what the harness produced through Kafka's client."""
    for topic, produced in kafka_oracle.produced.items():
        got = {}
        for f in kafka_oracle.segment_files(topic):
            for b in Segment(f).batches(verify_crc=True):
                if b.is_control:
                    continue
                for r in b:
                    got[r.offset] = r
        for p in produced:
            r = got.get(p["offset"])
            if r is None:  # compacted topics may have dropped it; none here are cleaned
                pytest.fail(f"{topic}: offset {p['offset']} missing")
            assert r.key == p["key"] and r.value == p["value"], (topic, p["offset"])
            assert r.headers == [tuple(h) for h in p["headers"]], (topic, p["offset"])
            if kafka_oracle.topics[topic].timestamp_type == "CreateTime":
                assert r.timestamp == p["timestamp"], (topic, p["offset"])


def test_text_output_identical_to_kafka_dump_log(kafka_oracle):
    """kraftkit dump-log --deep --print-data prints the very text Kafka 4.3.1's tool prints,
    for every topic segment, metadata segment and snapshot (stdout; Kafka's stderr notes are
    separate)."""
    topic_files = [f for t in kafka_oracle.topics for f in kafka_oracle.segment_files(t)]
    metadata_files = sorted(kafka_oracle.metadata_log_dir.glob("*.log")) + snapshot_files(kafka_oracle)
    # Metadata record values are binary: Kafka prints them through Java's lossy UTF-8 decoder,
    # and kraftkit reproduces its replacement characters exactly.
    for files, print_data in ((topic_files, True), (metadata_files, True), (metadata_files, False)):
        java = tools.dump_log(jars.KAFKA_4, files, deep=True, print_data=print_data)
        flags = ["--deep"] + (["--print-data"] if print_data else [])
        mine = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "dump-log", *flags, *map(str, files)],
                              capture_output=True, timeout=300, check=True)
        kafka_lines = java.stdout.splitlines()
        our_lines = mine.stdout.decode().splitlines()
        assert len(our_lines) == len(kafka_lines)
        for i, (a, b) in enumerate(zip(our_lines, kafka_lines)):
            assert a == b, f"line {i}:\n kraftkit: {a}\n kafka:    {b}"


def test_rebuilt_indexes_identical_to_kafkas_own(kafka_oracle):
    """Segments whose index Kafka built by appends (not spanning the mid-scenario restart) and
    every metadata-log segment (Kafka recovers those at every start)."""
    compared = 0
    for f in all_log_files(kafka_oracle):
        _, idx, tidx = Segment(f).rebuild_indexes()
        kidx = f.with_suffix(".index").read_bytes()
        ktidx = f.with_suffix(".timeindex").read_bytes()
        if idx == kidx and tidx == ktidx:
            compared += 1
    # Only a segment that was active across the restart may legitimately differ (Kafka resets
    # its index interval counter when it loads a segment); there is one per partition at most.
    partitions = len(kafka_oracle.topics) + 1
    assert compared >= len(all_log_files(kafka_oracle)) - partitions


def test_rebuilt_indexes_identical_to_kafka_recovery(kafka_oracle, tmp_path):
    """Delete every index, let real Kafka rebuild them all on start-up (its recovery path), and
    compare with kraftkit's rebuild for every segment, byte for byte."""
    before = {}
    for f in all_log_files(kafka_oracle):
        f.with_suffix(".index").unlink()
        f.with_suffix(".timeindex").unlink()
        before[f] = f.read_bytes()
    with kafka_oracle.node():
        pass
    # The metadata segment that was active grew while the node ran (the controller appends),
    # so its index mixes recovery and appends; every file that did not change is compared.
    unchanged = [f for f in all_log_files(kafka_oracle) if before.get(f) == f.read_bytes()]
    assert len(unchanged) >= len(before) - 1
    for f in unchanged:
        _, idx, tidx = Segment(f).rebuild_indexes()
        assert idx == f.with_suffix(".index").read_bytes(), f
        assert tidx == f.with_suffix(".timeindex").read_bytes(), f
    for f in sorted(kafka_oracle.metadata_log_dir.glob("*.log")):
        assert Segment(f).verify_indexes() == [], f


def test_kafka_index_checks_agree_with_kraftkit(kafka_oracle):
    """Kafka's --verify-index-only on its own indexes reports nothing; neither does kraftkit."""
    files = all_log_files(kafka_oracle)
    for f in files:
        assert Segment(f).verify_indexes() == [], f
        assert Segment(f).scan(deep=True)["error"] is None, f
    idx_files = [f.with_suffix(s) for f in files for s in (".index", ".timeindex")]
    parsed = tools.dump_log_parsed(jars.KAFKA_4, idx_files, verify_index_only=True)
    for p in idx_files:
        assert not parsed[str(p)]["errors"], (p, parsed[str(p)]["errors"])


def test_verify_log_cli_on_real_kafka_data(kafka_oracle):
    dirs = [str(d) for d in kafka_oracle.log_dirs] + [str(kafka_oracle.metadata_dir)]
    proc = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "verify-log", "--deep", *dict.fromkeys(dirs)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "all valid" in proc.stdout


def test_dump_log_of_empty_indexes_prints_what_kafka_prints(kafka_oracle, tmp_path):
    """An empty offset index is '<file> is empty.' for kafka-dump-log and for kraftkit; an empty
    time index prints nothing for either (Kafka's time index dump has no such line)."""
    src = kafka_oracle.segment_files("codec-zstd")[0]
    shutil.copy(src, tmp_path / src.name)
    files = [tmp_path / src.with_suffix(s).name for s in (".index", ".timeindex")]
    for f in files:
        f.write_bytes(b"")
    for f in files:
        kafka = tools.dump_log(jars.KAFKA_4, [f]).stdout
        ours = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "dump-log", str(f)],
                              capture_output=True, text=True, timeout=60)
        assert ours.returncode == 0 and ours.stderr == ""
        assert ours.stdout == kafka, (f, ours.stdout, kafka)
