"""FileRaftLog: the raft log on disk behaves as the in-memory log the simulator proves, and stores
what Kafka stores (independent readers: kraftkit.log's segment reader, kafka-python's batch decoder)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftkit._core import decode_batches, decode_control_record, encode_batch
from kraftkit.errors import LogError
from kraftkit.log import Log
from kraftkit.metadata.snapshot import parse_snapshot_name
from kraftkit.raft.file_log import FileRaftLog, split_batches
from kraftkit.raft.log import Batch, Entry, MemoryLog, SnapshotId
from kraftkit.raft.records import KafkaRecords

from ..log._support import KBatch as DefaultRecordBatch  # kafka-python's decoder (imported once, quietly)

LEADER_CHANGE = {"Version": 0, "LeaderId": 1, "Voters": [{"VoterId": 1}, {"VoterId": 2}], "GrantingVoters": [{"VoterId": 2}]}


def entries(base: int, epoch: int, n: int) -> list[Entry]:
    return [Entry(base + i, epoch, f"v{base + i}".encode()) for i in range(n)]


def test_local_appends_become_one_batch_per_call_with_the_epoch(tmp_path):
    log = FileRaftLog(tmp_path / "p", clock=lambda: 1234)
    log.initialize_leader_epoch(1)
    log.append([Entry(0, 1, LEADER_CHANGE, True)])
    log.append(entries(1, 1, 3))
    assert (log.start_offset, log.end_offset, log.flushed_offset) == (0, 4, 0)
    assert log.flush() == 4
    log.close()
    # an independent reader of the segment: kafka-python's v2 batch decoder
    data = (tmp_path / "p" / "00000000000000000000.log").read_bytes()
    batches, used = split_batches(data)
    assert used == len(data) and [(b.offset, b.last_offset, b.epoch) for b in batches] == [(0, 0, 1), (1, 3, 1)]
    control = DefaultRecordBatch(batches[0].data)
    assert control.is_control_batch and control.validate_crc()
    (rec,) = list(control)
    assert decode_control_record(2, rec.value) == LEADER_CHANGE
    data_batch = DefaultRecordBatch(batches[1].data)
    assert data_batch.validate_crc() and not data_batch.is_control_batch
    assert [(r.offset, r.value, r.timestamp) for r in data_batch] == [(i, f"v{i}".encode(), 1234) for i in (1, 2, 3)]
    assert Log(tmp_path / "p").leader_epochs == [(1, 0)]


def test_read_returns_segment_bytes_and_a_follower_stores_them_unchanged(tmp_path):
    leader = FileRaftLog(tmp_path / "leader")
    leader.initialize_leader_epoch(3)
    leader.append(entries(0, 3, 2))
    leader.append(entries(2, 3, 5))
    leader.flush()
    (chunk,) = leader.read(0, 1000)
    assert (chunk.offset, chunk.last_offset, chunk.epoch) == (0, 6, 3)
    wire = KafkaRecords().encode([chunk])
    follower = FileRaftLog(tmp_path / "follower")
    follower.append(KafkaRecords().decode(wire))
    follower.flush()
    assert follower.end_offset == 7 and follower.epoch_starts() == [(3, 0)]
    leader.close()
    follower.close()
    seg = "00000000000000000000.log"
    assert (tmp_path / "leader" / seg).read_bytes() == (tmp_path / "follower" / seg).read_bytes()
    # reads from a batch boundary in the middle start there
    leader = FileRaftLog(tmp_path / "leader")
    (chunk,) = leader.read(2, 1000)
    assert chunk.offset == 2 and [b.offset for b in split_batches(chunk.data)[0]] == [2]


def test_decode_keeps_complete_valid_batches_only(tmp_path):
    one = encode_batch([(0, None, b"a", [])], base_offset=0, partition_leader_epoch=1)
    two = encode_batch([(0, None, b"b", [])], base_offset=1, partition_leader_epoch=1)
    adapter = KafkaRecords()
    # a Fetch answer may end inside a batch (Kafka cuts at the byte limit): the partial one is dropped
    assert [b.offset for b in adapter.decode(one + two[:30])] == [0]
    # a flipped byte in the second batch: the first is kept, the corrupt one and the rest are not
    bad = bytearray(two)
    bad[-1] ^= 0xFF
    three = encode_batch([(0, None, b"c", [])], base_offset=2, partition_leader_epoch=1)
    assert [b.offset for b in adapter.decode(one + bytes(bad) + three)] == [0]
    assert adapter.corrupt_batches == 1
    with pytest.raises(TypeError):
        adapter.encode(entries(0, 1, 1))


def test_truncation_epochs_and_validation_match_the_memory_log(tmp_path):
    disk, mem = FileRaftLog(tmp_path / "p"), MemoryLog()
    for log in (disk, mem):
        log.initialize_leader_epoch(1)
        log.append(entries(0, 1, 3))
        log.initialize_leader_epoch(4)
        log.append(entries(3, 4, 2))
        log.initialize_leader_epoch(6)
        log.append(entries(5, 6, 4))
        log.flush()
    for log in (disk, mem):
        assert log.epoch_starts() == [(1, 0), (4, 3), (6, 5)]
        assert log.end_offset_for_epoch(5) == (4, 5)
        assert log.validate_offset_and_epoch(4, 4) == ("valid", None)
        assert log.validate_offset_and_epoch(9, 5) == ("diverging", (4, 5))
    assert disk.truncate_to_end_offset(4, 5) == mem.truncate_to_end_offset(4, 5) == 5
    assert disk.end_offset == mem.end_offset == 5 and disk.flushed_offset == mem.flushed_offset == 5
    assert disk.epoch_starts() == mem.epoch_starts() == [(1, 0), (4, 3)]
    with pytest.raises(LogError):
        disk.append(entries(5, 2, 1))  # an older epoch after epoch 4
    with pytest.raises(LogError):
        disk.append(entries(7, 4, 1))  # a gap
    disk.close()
    reopened = FileRaftLog(tmp_path / "p")
    assert (reopened.end_offset, reopened.epoch_starts(), reopened.last_epoch()) == (5, [(1, 0), (4, 3)], 4)


def test_snapshot_moves_the_start_deletes_covered_segments_and_survives_a_restart(tmp_path):
    log = FileRaftLog(tmp_path / "p", segment_bytes=200)
    log.initialize_leader_epoch(2)
    for base in range(0, 30, 3):
        log.append(entries(base, 2, 3))
    log.flush()
    segments_before = log.log_dir.segments
    assert len(segments_before) > 2
    with pytest.raises(LogError, match="inside a batch"):
        log.create_snapshot(SnapshotId(13, 2), b"x")
    with pytest.raises(LogError, match="does not match the epoch"):
        log.create_snapshot(SnapshotId(12, 1), b"x")
    log.create_snapshot(SnapshotId(12, 2), b"snapshot-bytes")
    assert log.start_offset == 12 and log.snapshot() == (12, 2)
    assert bytes(log.read_snapshot()) == b"snapshot-bytes"
    assert all(b <= 12 for b in log.log_dir.segments[:1]) and log.log_dir.segments[0] > 0
    assert log.validate_offset_and_epoch(3, 2) == ("snapshot", (12, 2))
    assert log.epoch_starts() == [(2, 12)]
    with pytest.raises(LogError):
        log.read(11, 10)
    assert log.read(12, 10)[0].offset == 12
    log.close()
    again = FileRaftLog(tmp_path / "p", segment_bytes=200)
    assert (again.start_offset, again.end_offset, again.snapshot()) == (12, 30, (12, 2))
    assert [parse_snapshot_name(n) for n in os.listdir(tmp_path / "p") if n.endswith(".checkpoint")] == [
        ((12, 2), "immutable")]


def test_a_batch_that_sets_metadata_version_ends_its_segment(tmp_path):
    """The next batch after one holding a FeatureLevelRecord for metadata.version starts a segment
    (a lossy downgrade's rewritten snapshot there leaves no older record in a segment kept); a
    registration that only lists metadata.version among its features, or another feature's level,
    does not; a follower appending the same bytes rolls the same way."""
    from kraftkit._core import encode_metadata_record
    from kraftkit._kafka import FEATURE_LEVEL, REGISTER_CONTROLLER

    level = encode_metadata_record(FEATURE_LEVEL, 0, {"Name": "metadata.version", "FeatureLevel": 21})
    other = encode_metadata_record(FEATURE_LEVEL, 0, {"Name": "group.version", "FeatureLevel": 1})
    reg = encode_metadata_record(REGISTER_CONTROLLER, 0, {
        "ControllerId": 1, "IncarnationId": "AAAAAAAAAAAAAAAAAAAAAA", "ZkMigrationReady": False, "EndPoints": [],
        "Features": [{"Name": "metadata.version", "MinSupportedVersion": 7, "MaxSupportedVersion": 21}]})
    leader = FileRaftLog(tmp_path / "leader")
    leader.initialize_leader_epoch(1)
    for i, payloads in enumerate([[reg], [other], [b"x", level], [b"y"], [level], [reg]]):
        leader.append([Entry(leader.end_offset + j, 1, v) for j, v in enumerate(payloads)])
    # offsets: reg 0, other 1, x 2 and level 3, y 4, level 5, reg 6
    assert i == 5 and leader.log_dir.segments == [0, 4, 6]
    assert leader.start_segment_at(4) and not leader.start_segment_at(2)
    follower = FileRaftLog(tmp_path / "follower")
    while follower.end_offset < leader.end_offset:  # the same batches, as fetched (a segment at a time)
        follower.append(leader.read(follower.end_offset, 100))
    assert follower.log_dir.segments == [0, 4, 6]
    # a log that ends at an offset can start a segment there
    assert follower.start_segment_at(7) and follower.log_dir.segments == [0, 4, 6, 7]


def test_install_snapshot_replaces_the_log_and_a_snapshot_ahead_of_the_log_wins_at_open(tmp_path):
    log = FileRaftLog(tmp_path / "p")
    log.initialize_leader_epoch(1)
    log.append(entries(0, 1, 5))
    log.flush()
    log.install_snapshot(SnapshotId(40, 3), b"fetched")
    assert (log.start_offset, log.end_offset, log.flushed_offset, log.last_epoch()) == (40, 40, 40, 3)
    assert log.epoch_starts() == [] and log.log_dir.segments == [40]
    log.initialize_leader_epoch(4)
    log.append(entries(40, 4, 2))
    log.close()
    # a crash after the snapshot file landed but before the old segments were replaced
    p = tmp_path / "q"
    old = FileRaftLog(p)
    old.append(entries(0, 1, 3))
    old.flush()
    old.close()
    (p / SnapshotId(9, 2).file_name).write_bytes(b"newer")
    (p / "00000000000000000009-0000000002.checkpoint.part").write_bytes(b"half")
    reopened = FileRaftLog(p)
    assert (reopened.start_offset, reopened.end_offset, reopened.last_epoch()) == (9, 9, 2)
    assert not list(p.glob("*.part"))


def test_a_torn_tail_is_cut_at_open_and_reported(tmp_path):
    log = FileRaftLog(tmp_path / "p")
    log.initialize_leader_epoch(1)
    log.append(entries(0, 1, 2))
    log.append(entries(2, 1, 2))
    log.flush()
    log.close()
    seg = tmp_path / "p" / "00000000000000000000.log"
    data = seg.read_bytes()
    seg.write_bytes(data[:-7])  # the last batch half-written when the process died
    again = FileRaftLog(tmp_path / "p")
    assert again.end_offset == 2 and again.recovery is not None and again.recovery["error"] is not None
    assert "position" in str(again.recovery["error"]) or "offset" in str(again.recovery["error"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["append", "epoch", "truncate", "flush"]), st.integers(1, 4)), max_size=25))
def test_random_operation_sequences_agree_with_the_memory_log(tmp_path_factory, ops):
    disk = FileRaftLog(tmp_path_factory.mktemp("p"))
    mem = MemoryLog()
    epoch = 0
    for op, n in ops:
        if op == "epoch":
            epoch += n
            disk.initialize_leader_epoch(epoch)
            mem.initialize_leader_epoch(epoch)
        elif op == "append" and epoch > 0:
            batch = entries(mem.end_offset, epoch, n)
            disk.append(batch)
            mem.append(batch)
        elif op == "truncate":
            # truncation happens at epoch boundaries (DivergingEpoch answers): pick one
            starts = [s for _e, s in mem.epoch_starts() if s >= mem.start_offset and s < mem.end_offset]
            if starts:
                at = starts[n % len(starts)]
                disk.truncate_to(at)
                mem.truncate_to(at)
        elif op == "flush":
            assert disk.flush() == mem.flush()
        assert (disk.end_offset, disk.last_epoch()) == (mem.end_offset, mem.last_epoch())
        assert disk.flushed_offset == mem.flushed_offset
        # cache entries without data after them (an epoch started, nothing appended yet) may differ
        # only at the end, as in Kafka; everything that has data agrees
        with_data = [(e, s) for e, s in mem.epoch_starts() if s < mem.end_offset]
        assert [(e, s) for e, s in disk.epoch_starts() if s < disk.end_offset] == with_data
    got = [b for c in disk.read(0, 10**6) for b in split_batches(c.data)[0]] if disk.end_offset else []
    values = [r.value for b in got for r in decode_batches(b.data, verify_crc=True)[0]]
    assert values == [e.payload for e in mem.entries()]
    disk.close()


def test_batches_are_raw_kafka_batches():
    data = encode_batch([(5, None, b"x", []), (6, None, b"y", [])], base_offset=10, partition_leader_epoch=7)
    (b,), used = split_batches(data)
    assert b == Batch(10, 7, data, 11) and used == len(data)
    assert split_batches(data[:-1]) == ([], 0)
