"""The offset and time indexes a raft log writes pass ``kraftkit verify-log``, whatever path wrote
them: local appends (one batch per call), a leader's intake of client batches (several batches in
one append), a follower's appends of fetched chunks (several batches in one append), flushes,
truncations, segment rolls, clean reopens and crashes (the process gone without a close)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftkit._core import Segment, encode_batch
from kraftkit.raft.file_log import ClientBatches, FileRaftLog, split_batches
from kraftkit.raft.log import Entry

from ._cluster import verify_log_problems

LEADER_CHANGE = {"Version": 0, "LeaderId": 1, "Voters": [{"VoterId": 1}], "GrantingVoters": []}


def batches_of(d: Path) -> list[bytes]:
    """Every batch of a partition directory, read from the files without opening it as a log."""
    return [b.to_bytes() for f in sorted(d.glob("*.log")) for b in Segment(f).batches()]


def client_batches(sizes: list[list[int]], ts: int) -> ClientBatches:
    """Batches as a client sends them (offsets from 0, no epoch), one per list of value sizes."""
    data = b"".join(encode_batch([(ts + i, None, b"c" * n, []) for i, n in enumerate(batch)]) for batch in sizes)
    return ClientBatches(data, sum(len(b) for b in sizes))


values = st.lists(st.integers(1, 150), min_size=1, max_size=5)
OPS = st.lists(st.one_of(
    st.tuples(st.just("entries"), values),
    st.tuples(st.just("client"), st.lists(values, min_size=1, max_size=5)),
    st.tuples(st.just("replicate"), st.integers(1, 2000)),   # one fetch of at most that many bytes
    st.tuples(st.just("truncate"), st.floats(0, 1)),         # the follower cuts its log (a divergence)
    st.tuples(st.sampled_from(["flush", "epoch", "reopen", "crash"]), st.none()),
), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, interval=st.sampled_from([1, 100, 700]), segment_bytes=st.sampled_from([900, 3000, 1 << 20]))
def test_every_append_path_writes_indexes_that_verify_log_accepts(ops, interval, segment_bytes):
    with tempfile.TemporaryDirectory() as tmp:
        ldir, fdir = Path(tmp) / "leader" / "m-0", Path(tmp) / "follower" / "m-0"
        clock = iter(range(1000, 10**9, 7))
        opts = {"segment_bytes": segment_bytes, "index_interval_bytes": interval, "clock": lambda: next(clock)}
        leader, follower = FileRaftLog(ldir, **opts), FileRaftLog(fdir, **opts)
        epoch = 1
        leader.initialize_leader_epoch(epoch)

        def replicate(max_bytes: int) -> None:
            if follower.end_offset >= leader.end_offset:
                return
            leader.max_fetch_bytes = max_bytes
            chunks = leader.read(follower.end_offset, 1)
            batches, _ = split_batches(chunks[0].data)
            assert batches and batches[0].offset == follower.end_offset
            follower.append(chunks)  # the fetched bytes as they are: one or more batches in one append

        for op, arg in ops:
            if op == "entries":
                base = leader.end_offset
                leader.append(leader.entries_for_append(base, epoch, [b"e" * n for n in arg]))
            elif op == "client":
                cb = client_batches(arg, next(clock))
                leader.append(leader.entries_for_append(leader.end_offset, epoch, cb))
            elif op == "replicate":
                replicate(arg)
            elif op == "truncate":
                if follower.end_offset > follower.start_offset:
                    follower.truncate_to(follower.start_offset + int(arg * (follower.end_offset - follower.start_offset)))
            elif op == "epoch":
                epoch += 1
                leader.initialize_leader_epoch(epoch)
                leader.append([Entry(leader.end_offset, epoch, LEADER_CHANGE, True)])
            elif op == "flush":
                leader.flush()
                follower.flush()
                # the index files as they are on disk now (the active segments' included)
                assert verify_log_problems(ldir, fdir) == []
            elif op in ("reopen", "crash"):
                if op == "reopen":
                    leader.close()
                    follower.close()
                # a crash: the old objects are dropped unclosed, what they wrote is what is on disk
                leader, follower = FileRaftLog(ldir, **opts), FileRaftLog(fdir, **opts)
        while follower.end_offset < leader.end_offset:
            replicate(5000)
        leader.flush()
        follower.flush()
        assert verify_log_problems(ldir, fdir) == []
        leader.close()
        follower.close()
        assert verify_log_problems(ldir, fdir) == []
        # the follower stores the leader's batches byte for byte
        assert batches_of(ldir) == batches_of(fdir)


def test_a_multi_batch_append_indexes_each_batch_at_its_own_position(tmp_path):
    """The reported case: one append of several batches with a small index interval. Every entry
    must name the last offset of the batch that starts at its position."""
    log = FileRaftLog(tmp_path / "m-0", index_interval_bytes=100, clock=lambda: 5)
    log.initialize_leader_epoch(1)
    for _ in range(10):
        log.append(log.entries_for_append(log.end_offset, 1, client_batches([[50, 50]] * 3, 1000)))
    log.flush()
    log.close()
    assert verify_log_problems(tmp_path / "m-0") == []
    seg = Segment(tmp_path / "m-0" / "00000000000000000000.log")
    starts, pos = {}, 0  # batch start position -> that batch's last offset, walked independently of the index
    for b in seg.batches():
        starts[pos] = b.last_offset
        pos += b.size_in_bytes
    entries = seg.offset_index()
    assert len(entries) >= 10
    assert all(starts.get(pos) == off for off, pos in entries), (entries, starts)
