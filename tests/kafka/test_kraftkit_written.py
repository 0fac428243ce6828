"""Logs that kraftkit WRITES, checked by real Apache Kafka.

1. ``kafka-dump-log`` (4.3.1 and 3.9.2) decodes a multi-segment kraftkit log (every codec,
   null keys/values, headers, non-monotonic timestamps, an idempotent batch, a transaction
   with its COMMIT marker, a LogAppendTime batch, a leader epoch change) and reports
   exactly the batch and record fields we passed to ``encode_batch``, every batch valid;
   its index verification finds no mismatch in kraftkit's ``.index`` / ``.timeindex``.
2. A real Kafka 4.3.1 broker loads a kraftkit-written partition directory in place of its
   own (after a clean shutdown, so it trusts kraftkit's indexes instead of rebuilding
   them) and serves every record back to Kafka's Java consumer unchanged.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import crc32c
import pytest

from kraftkit.log import Log, Segment, encode_batch, read_leader_epochs
from tests.harness import jars, tools
from tests.harness.node import KafkaNode

pytestmark = pytest.mark.kafka

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TS0 = 1_700_000_000_000
COMMIT_KEY = struct.pack(">hh", 0, 1)  # ControlRecordType: version 0, type 1 = COMMIT


def end_txn_value(coordinator_epoch: int) -> bytes:
    """EndTransactionMarker value: int16 version 0 + int32 coordinator epoch."""
    return struct.pack(">hi", 0, coordinator_epoch)


# ------------------------------------------------------------------------------------------
# writing: a list of batch specs -> a kraftkit log; the specs are the expected values


def build_log(directory: Path, specs: list[dict], *, segment_bytes: int,
              index_interval_bytes: int = 4096) -> list[dict]:
    """Encode each spec with ``encode_batch`` and append it (one append call per batch).

    Adds ``base_offset`` and ``bytes`` (the encoded batch) to each spec and returns them.
    """
    log = Log(directory, create=True, segment_bytes=segment_bytes,
              index_interval_bytes=index_interval_bytes)
    try:
        for spec in specs:
            spec["base_offset"] = log.log_end_offset
            spec["bytes"] = encode_batch(
                spec["records"], base_offset=spec["base_offset"], compression=spec["codec"],
                partition_leader_epoch=spec.get("epoch", 0),
                producer_id=spec.get("producer_id", -1),
                producer_epoch=spec.get("producer_epoch", -1),
                base_sequence=spec.get("base_sequence", -1),
                transactional=spec.get("transactional", False),
                control=spec.get("control", False),
                log_append_time=spec.get("log_append_time"))
            log.append(spec["bytes"])
        assert log.log_end_offset == specs[-1]["base_offset"] + len(specs[-1]["records"])
    finally:
        log.close()
    return specs


def expected_batch(spec: dict, position: int) -> dict:
    """The batch line kafka-dump-log should print, from what we passed in (CRC from the
    independent ``crc32c`` package over bytes 21.., as the v2 format defines it)."""
    recs, data = spec["records"], spec["bytes"]
    n = len(recs)
    seq = spec.get("base_sequence", -1)
    lat = spec.get("log_append_time")
    crc = crc32c.crc32c(data[21:])
    assert struct.unpack_from(">I", data, 17)[0] == crc
    return {
        "baseOffset": spec["base_offset"], "lastOffset": spec["base_offset"] + n - 1, "count": n,
        "baseSequence": seq, "lastSequence": -1 if seq < 0 else seq + n - 1,
        "producerId": spec.get("producer_id", -1), "producerEpoch": spec.get("producer_epoch", -1),
        "partitionLeaderEpoch": spec.get("epoch", 0),
        "isTransactional": spec.get("transactional", False), "isControl": spec.get("control", False),
        "deleteHorizonMs": None, "position": position,
        "timestampType": "CreateTime" if lat is None else "LogAppendTime",
        "maxTimestamp": max(r[0] for r in recs) if lat is None else lat,
        "size": len(data), "magic": 2, "compresscodec": spec["codec"], "crc": crc, "isvalid": True,
    }


def expected_records(spec: dict) -> list[dict]:
    seq = spec.get("base_sequence", -1)
    lat = spec.get("log_append_time")
    out = []
    for i, (ts, key, value, headers) in enumerate(spec["records"]):
        rec = {
            "offset": spec["base_offset"] + i,
            "timestampType": "CreateTime" if lat is None else "LogAppendTime",
            "timestamp": ts if lat is None else lat,
            "keySize": -1 if key is None else len(key),
            "valueSize": -1 if value is None else len(value),
            "sequence": -1 if seq < 0 else seq + i,
            "headerKeys": [k for k, _ in headers],
            "control": None,
        }
        if spec.get("control"):
            assert key == COMMIT_KEY
            (epoch,) = struct.unpack(">i", value[2:])
            rec["control"] = {"type": "endTxnMarker", "marker": "COMMIT", "coordinatorEpoch": epoch}
        else:
            if key is not None:
                rec["key"] = key.decode()
            if value is not None:
                rec["payload"] = value.decode()
        out.append(rec)
    return out


# ------------------------------------------------------------------------------------------
# 1. kafka-dump-log reads what kraftkit wrote


def dump_specs() -> list[dict]:
    """~30 batches: every codec several times, then the special batches."""
    rng = random.Random(20261121)
    specs: list[dict] = []
    n_rec = 0

    def records(n: int, *, base_ts: int) -> list[tuple]:
        nonlocal n_rec
        out = []
        for _ in range(n):
            i = n_rec
            n_rec += 1
            key = None if i % 4 == 0 else f"key-{i}".encode()
            if i % 11 == 5:
                value = None
            elif i % 17 == 3:
                value = b""
            elif i % 13 == 7:
                value = "héllo wörld ✓ {}".format(i).encode()  # UTF-8, printed as such
            else:
                value = f"value {i} ".encode() * rng.randint(1, 6)
            headers = [("trace", f"t{i}".encode()), ("empty", b""), ("nil", None)][: i % 4]
            # non-monotonic inside a batch (negative timestamp deltas)
            out.append((base_ts + rng.randint(-3_000, 3_000), key, value, headers))
        return out

    for b in range(25):
        # batch max timestamps go up, but every 4th batch goes back in time, so the
        # time index must only follow the running maximum
        base_ts = TS0 + (b * 10_000 if b % 4 else b * 10_000 - 60_000)
        specs.append({"codec": CODECS[b % 5], "records": records(1 + b % 7, base_ts=base_ts),
                      "epoch": 0 if b < 12 else 3})
    ts = TS0 + 300_000
    # idempotent producer batch
    specs.append({"codec": "lz4", "records": records(5, base_ts=ts), "epoch": 3,
                  "producer_id": 1000, "producer_epoch": 2, "base_sequence": 17})
    # a transaction and its COMMIT marker (coordinator epoch 7)
    specs.append({"codec": "zstd", "records": records(4, base_ts=ts + 1000), "epoch": 3,
                  "producer_id": 2000, "producer_epoch": 5, "base_sequence": 0,
                  "transactional": True})
    specs.append({"codec": "none", "records": [(ts + 2000, COMMIT_KEY, end_txn_value(7), [])],
                  "epoch": 3, "producer_id": 2000, "producer_epoch": 5, "transactional": True,
                  "control": True})
    # broker-assigned timestamps (LogAppendTime); every record reports the batch's time
    specs.append({"codec": "gzip", "records": records(3, base_ts=ts + 3000), "epoch": 3,
                  "log_append_time": ts + 9999})
    for b in range(5):  # every codec once more after the special batches
        specs.append({"codec": CODECS[b], "records": records(3, base_ts=ts + 10_000 + b * 100),
                      "epoch": 3})
    return specs


@pytest.fixture(scope="module")
def written_log(tmp_path_factory) -> tuple[Path, list[dict]]:
    d = tmp_path_factory.mktemp("kraftkit-written") / "kk-dump-0"
    specs = build_log(d, dump_specs(), segment_bytes=1200, index_interval_bytes=250)
    return d, specs


@pytest.mark.parametrize("version", [jars.KAFKA_NEWEST, jars.KAFKA_4, jars.KAFKA_3])
def test_dump_log_reads_kraftkit_log(kafka_jars, written_log, version):
    d, specs = written_log
    logs = sorted(d.glob("*.log"))
    assert len(logs) >= 3, logs
    parsed = tools.dump_log_parsed(version, logs, deep=True, print_data=True)
    assert set(parsed) == {str(f) for f in logs}

    # Concatenate the files in order; positions restart at 0 in each one.
    got_batches = []
    for f in logs:
        fd = parsed[str(f)]
        assert fd["kind"] == "log" and not fd["unparsed"] and not fd["errors"], (f, fd)
        assert fd["invalid_trailing_bytes"] is None
        assert fd["batches"], f
        assert fd["start_offset"] == int(f.stem) == fd["batches"][0]["baseOffset"]
        pos = 0
        for b in fd["batches"]:
            got_batches.append((b, pos))
            pos += b["size"]
        assert pos == f.stat().st_size  # nothing but whole batches in the file

    assert len(got_batches) == len(specs)
    kraftkit_batches = [b for f in logs for b in Segment(f).read_batches(verify_crc=True)]
    for (got, pos), spec, kb in zip(got_batches, specs, kraftkit_batches):
        want = expected_batch(spec, pos)
        records = got.pop("records")
        assert got == want, spec["base_offset"]
        # kraftkit reading back its own bytes agrees with Kafka
        assert (kb.crc, kb.size_in_bytes, kb.position) == (want["crc"], want["size"], pos)
        assert kb.to_bytes() == spec["bytes"]
        assert records == expected_records(spec), spec["base_offset"]

    codecs = {g["compresscodec"] for g, _ in got_batches}
    assert codecs == set(CODECS)
    assert any(g["isControl"] for g, _ in got_batches)
    assert any(g["timestampType"] == "LogAppendTime" for g, _ in got_batches)


@pytest.mark.parametrize("version", [jars.KAFKA_NEWEST, jars.KAFKA_4, jars.KAFKA_3])
def test_dump_log_verifies_kraftkit_indexes(kafka_jars, written_log, version):
    d, specs = written_log
    index = sorted(d.glob("*.index"))
    timeindex = sorted(d.glob("*.timeindex"))
    files = index + timeindex
    assert len(index) == len(timeindex) == len(list(d.glob("*.log")))

    # Full dump: Kafka's entries equal kraftkit's, and Kafka's check (each offset entry
    # points at the batch ending at that offset; each time entry is the running maximum
    # timestamp at the batch holding it, strictly increasing) reports nothing.
    parsed = tools.dump_log_parsed(version, files)
    n_offset_entries = n_time_entries = 0
    for f in files:
        fd = parsed[str(f)]
        assert not fd["errors"] and not fd["unparsed"], fd
        seg = Segment(f.with_suffix(".log"))
        if f.suffix == ".index":
            want = [{"offset": o, "position": p} for o, p in seg.offset_index()]
            n_offset_entries += len(want)
        else:
            want = [{"timestamp": t, "offset": o} for t, o in seg.time_index()]
            n_time_entries += len(want)
        assert fd["entries"] == want, f
        assert fd["empty"] == (not want), f
    # the test is only meaningful with several entries per index kind
    assert n_offset_entries >= 5 and n_time_entries >= 3, (n_offset_entries, n_time_entries)

    # Independently of kraftkit: as Kafka's LogSegment, each segment's time index ends
    # (written at roll/close) with the segment's maximum timestamp and the last offset of
    # the first batch that reached it, and its timestamps strictly increase.
    bases = [int(f.stem) for f in timeindex]
    for f, base, nxt in zip(timeindex, bases, bases[1:] + [2**63 - 1]):
        entries = parsed[str(f)]["entries"]
        ts = [e["timestamp"] for e in entries]
        assert ts == sorted(set(ts)), f
        best = None
        for s in specs:
            if base <= s["base_offset"] < nxt:
                b = expected_batch(s, 0)
                if best is None or b["maxTimestamp"] > best[0]:
                    best = (b["maxTimestamp"], b["lastOffset"])
        assert entries and (entries[-1]["timestamp"], entries[-1]["offset"]) == best, (f, entries, best)

    verify = tools.dump_log_parsed(version, files, verify_index_only=True)
    for f in files:
        fd = verify[str(f)]
        assert not fd["errors"] and not fd["unparsed"] and not fd["entries"], fd

    sanity = tools.dump_log_parsed(version, files, index_sanity=True)
    for f in files:
        fd = sanity[str(f)]
        assert not fd["errors"] and not fd["unparsed"], fd
        assert fd["sanity_ok"] or (fd["empty"] and f.suffix == ".index"), fd


def test_print_data_of_binary_keys_and_values_is_kafka_dump_logs_text(kafka_jars, tmp_path):
    """Keys and values that are not UTF-8 (KRaft metadata records, UUIDs, any binary payload):
    kafka-dump-log --print-data-log prints them through Java's UTF-8 decoder, and kraftkit's text
    equals it byte for byte: uniform random bytes, bytes drawn from the decoder's boundary cases,
    and every sequence of up to three boundary bytes (each value ends where Java's input ends,
    so the truncated-sequence rules are exercised too)."""
    import itertools
    import subprocess
    import sys

    rng = random.Random(20261122)
    edges = [0x0a, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec,
             0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xf7, 0xf8, 0xff]
    values = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200))) for _ in range(2000)]
    values += [bytes(rng.choice(edges) for _ in range(rng.randrange(1, 60))) for _ in range(2000)]
    values += [bytes(t) for n in (1, 2, 3) for t in itertools.product(edges, repeat=n)]
    d = tmp_path / "binary-0"
    with Log(d, create=True, segment_bytes=1 << 20) as log:
        for i in range(0, len(values), 500):
            chunk = values[i:i + 500]
            recs = [(TS0, chunk[-1 - j] if j % 3 == 0 else None, v, ()) for j, v in enumerate(chunk)]
            log.append(encode_batch(recs, base_offset=i))
    logs = sorted(d.glob("*.log"))
    theirs = tools.dump_log(jars.KAFKA_4, logs, deep=True, print_data=True, raw=True).stdout
    ours = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "dump-log", "--deep", "--print-data",
                           *map(str, logs)], capture_output=True, timeout=300, check=True).stdout
    assert ours.count(b"payload: ") == len(values)
    if ours != theirs:
        at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        pytest.fail(f"first difference at byte {at}:\n kraftkit: {ours[at - 80:at + 40]!r}\n"
                    f" kafka:    {theirs[at - 80:at + 40]!r}")


# ------------------------------------------------------------------------------------------
# 2. a real broker serves a kraftkit-written partition


TOPIC = "kk-written"


def serve_specs() -> list[dict]:
    """About 4 MB in 320 batches: segments larger than the consumer's 1 MiB partition
    fetch, so the broker looks fetch offsets up in kraftkit's indexes mid-segment.  (Checked:
    with segment 0's index entries pointing 3 batches too far, this test fails, because
    the broker then skips records.)"""
    rng = random.Random(4242)
    specs: list[dict] = []
    n_rec = 0

    def records(n: int) -> list[tuple]:
        nonlocal n_rec
        out = []
        for _ in range(n):
            i = n_rec
            n_rec += 1
            key = None if rng.random() < 0.2 else f"k-{i}".encode()
            r = rng.random()
            if r < 0.05:
                value = None
            elif r < 0.1:
                value = b""
            elif r < 0.55:
                value = rng.randbytes(rng.randint(1, 1500))  # incompressible
            else:
                value = f"text value {i} ".encode() * rng.randint(1, 80)
            headers = [(f"h{h}", None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 8)))
                       for h in range(rng.randint(0, 3))]
            out.append((TS0 + i * 10 + rng.randint(-5_000, 5_000), key, value, headers))
        return out

    for b in range(320):
        spec = {"codec": CODECS[b % 5], "records": records(rng.randint(1, 40))}
        if b == 60:  # an idempotent producer's batch
            spec.update(producer_id=5000, producer_epoch=1, base_sequence=0)
        elif b == 100:  # broker-assigned time
            spec["log_append_time"] = TS0 + 123_456
        elif b == 120:  # a committed transaction
            spec.update(producer_id=6000, producer_epoch=0, base_sequence=0, transactional=True)
            specs.append(spec)
            spec = {"codec": "none", "records": [(TS0 + 999_999, COMMIT_KEY, end_txn_value(0), [])],
                    "producer_id": 6000, "producer_epoch": 0, "transactional": True,
                    "control": True}
        specs.append(spec)
    return specs


def write_offset_checkpoint(path: Path, entries: dict[tuple[str, int], int]) -> None:
    """Kafka's OffsetCheckpointFile: version 0, the entry count, then ``topic partition offset``."""
    lines = ["0", str(len(entries))] + [f"{t} {p} {o}" for (t, p), o in entries.items()]
    path.write_text("\n".join(lines) + "\n")


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    lines = path.read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2, lines
    out = {}
    for line in lines[2:]:
        t, p, o = line.split()
        out[(t, int(p))] = int(o)
    return out


def test_kafka_serves_kraftkit_written_log(kafka_jars, tmp_path):
    v = jars.KAFKA_4
    node = KafkaNode(tmp_path / "node", v)
    with node:
        tools.create_topics(v, node.bootstrap, [{"name": TOPIC}])
    # Clean shutdown: the data dir has .kafka_cleanshutdown, which we keep so the broker
    # loads the segments as they are (sanity check of OUR indexes, no recovery/rebuild).
    data_dir = node.log_dirs[0]
    assert (data_dir / ".kafka_cleanshutdown").is_file()
    pdir = node.partition_dir(TOPIC)
    assert (pdir / "partition.metadata").is_file()  # topic id: must stay
    for p in pdir.iterdir():
        if p.name != "partition.metadata":  # Kafka's empty segment, indexes, epoch cache
            p.unlink()

    # Leader epoch 0: the epoch the controller gave the partition at creation.
    specs = build_log(pdir, serve_specs(), segment_bytes=1_300_000)
    leo = specs[-1]["base_offset"] + len(specs[-1]["records"])
    bases = sorted(int(f.stem) for f in pdir.glob("*.log"))
    assert len(bases) >= 3, bases
    before = {p.name: p.read_bytes() for p in pdir.iterdir()
              if p.suffix in (".log", ".index", ".timeindex")}

    # The broker checkpoints the recovery point and high watermark per partition; both
    # were 0 for the empty partition.  Our log is complete and flushed: both = log end.
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        cp = data_dir / name
        entries = read_offset_checkpoint(cp)
        assert entries[(TOPIC, 0)] == 0
        entries[(TOPIC, 0)] = leo
        write_offset_checkpoint(cp, entries)

    log_start = node.server_log.stat().st_size
    node.start()
    try:
        got = tools.consume(v, node.bootstrap, TOPIC)
        got_committed = tools.consume(v, node.bootstrap, TOPIC, isolation="read_committed")
    finally:
        node.stop()
    with open(node.server_log, "rb") as fh:
        fh.seek(log_start)
        log_text = fh.read().decode("utf-8", "replace")
    ours = "\n".join(ln for ln in log_text.splitlines() if f"{TOPIC}-0" in ln)

    # The broker loaded our segments as they are and found our log end offset.
    assert f"logEndOffset={leo})" in ours and f"with {len(bases)} segments" in ours, ours
    for bad in ("rebuilding index", "Corrupt", "Recovering unflushed segment",
                "corrupted index", "Found invalid"):
        assert bad not in ours, (bad, ours)

    want = []
    for spec in specs:
        if spec.get("control"):
            continue  # consumers never see control records
        lat = spec.get("log_append_time")
        for i, (ts, key, value, headers) in enumerate(spec["records"]):
            want.append({"topic": TOPIC, "partition": 0, "offset": spec["base_offset"] + i,
                         "timestamp": ts if lat is None else lat,
                         "timestamp_type": "CreateTime" if lat is None else "LogAppendTime",
                         "key": key, "value": value, "headers": list(headers)})
    assert len(got) == len(want) == leo - 1  # one offset is the COMMIT marker
    for g, w in zip(got, want):
        assert g == w, w["offset"]
    assert got_committed == got  # committed transaction, no open one: all records visible

    # Kafka served the data without changing a byte of our segment and index files (it
    # trims the active segment's preallocated indexes back on shutdown).
    after = {name: (pdir / name).read_bytes() for name in before}
    assert after == before
    # Kafka loaded kraftkit's leader-epoch-checkpoint (epoch 0 from offset 0; on a clean
    # shutdown it does not rebuild the cache from the log) and only added the epochs it
    # started as leader/follower at our log end offset.
    epochs = read_leader_epochs(pdir / "leader-epoch-checkpoint")
    assert epochs[0] == (0, 0) and all(o == leo and e > 0 for e, o in epochs[1:]), epochs
