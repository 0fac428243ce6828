"""Recovery after a lost majority (``kraftkit.raft.recovery``, ``kraftkit quorum recover``) on logs
kraftkit writes: which survivor is chosen, what each other survivor holds that the recovered log does
not, the directories written (the same image, one snapshot's bytes, a quorum-state above every
epoch seen), damaged tails, and the command's refusals and exit codes. Real Kafka controllers and
brokers booting from recovered directories: tests/kafka/test_recover_kafka.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftkit.features.storage import MetaProperties
from kraftkit.log import Log, encode_batch
from kraftkit.metadata.generate import noop_record, write_metadata_log
from kraftkit.metadata.image import load_image
from kraftkit.metadata.shell import tree
from kraftkit.metadata.snapshot import list_snapshots
from kraftkit.raft.quorum_state import ElectionState, parse_quorum_state, render_quorum_state
from kraftkit.raft.recovery import RecoveryError, Survivor, plan, survey, write_quorum

CLUSTER = "a3JhZnRraXQtcmVjb3Zlcg"
VOTERS = {1: ("127.0.0.1", 9001), 2: ("127.0.0.1", 9002), 3: ("127.0.0.1", 9003)}
VOTERS_TEXT = "1@127.0.0.1:9001,2@127.0.0.1:9002,3@127.0.0.1:9003"
META = "__cluster_metadata-0"


def kraftkit(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftkit.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def log_dir(where: Path, node_id: int, *, epochs: int = 3, cluster: str = CLUSTER) -> Path:
    """A node's log directory: meta.properties and a generated ``__cluster_metadata-0`` log."""
    write_metadata_log(where / META, topics=12, partitions=3, brokers=3, epochs=epochs, segment_bytes=1024,
                       max_batch_records=20)
    (where / "meta.properties").write_text(MetaProperties(1, cluster, node_id, None).to_text())
    return where


def append_noops(d: Path, epoch: int, count: int) -> tuple[int, int]:
    """Appends a batch of ``count`` NoOpRecords in ``epoch``; returns its (first offset, end)."""
    with Log(d / META) as log:
        start = log.log_end_offset
        log.append(encode_batch([(1_700_000_999_000, None, noop_record(), [])] * count, base_offset=start,
                                partition_leader_epoch=epoch))
        return start, log.log_end_offset


def truncate_to(d: Path, end: int) -> None:
    with Log(d / META) as log:
        log.truncate_to(end)


def epoch_ends(d: Path) -> dict[int, int]:
    """epoch -> the end offset of its entries, read batch by batch (an oracle apart from ``survey``)."""
    from kraftkit.log import Segment

    out: dict[int, int] = {}
    for seg in sorted((d / META).glob("*.log")):
        for b in Segment(seg).batches():
            out[b.partition_leader_epoch] = b.last_offset + 1
    return out


# ------------------------------------------------------------------ log matching, as a property


def survivor_of(epochs_by_offset: list[int], name: str) -> Survivor:
    starts = [(e, o) for o, e in enumerate(epochs_by_offset) if o == 0 or epochs_by_offset[o - 1] != e]
    return Survivor(name, Path(name), CLUSTER, 1, len(epochs_by_offset), epochs_by_offset[-1], starts, None)


@st.composite
def two_raft_logs(draw) -> tuple[list[int], list[int], int]:
    """Two logs a Raft history can leave (an epoch per offset, non-decreasing): a common prefix of
    ``k`` entries, then each its own entries, in epochs the other did not write at those offsets (an
    epoch has one leader, which writes each offset once: two logs holding the same epoch at an
    offset agree up to it). Either may go on in the prefix's last epoch, not both. Returns
    (chosen, other, k)."""
    prefix = sorted(draw(st.lists(st.integers(1, 4), min_size=1, max_size=12)))
    top = prefix[-1]
    low, high = (top + 1, top + 3), (top + 4, top + 6)
    if draw(st.booleans()):
        low, high = high, low
    ours = sorted(draw(st.lists(st.integers(*low), max_size=6)))
    theirs = sorted(draw(st.lists(st.integers(*high), max_size=6)))
    go_on = draw(st.sampled_from(["none", "ours", "theirs"]))
    more = [top] * draw(st.integers(1, 3))
    if go_on == "ours":
        ours = more + ours
    elif go_on == "theirs":
        theirs = more + theirs
    return prefix + ours, prefix + theirs, len(prefix)


@given(two_raft_logs())
@settings(max_examples=300, deadline=None)
def test_a_survivor_agrees_with_the_chosen_log_up_to_their_common_prefix(logs):
    chosen_epochs, other_epochs, k = logs
    chosen, other = survivor_of(chosen_epochs, "chosen"), survivor_of(other_epochs, "other")
    expected = len(other_epochs) if len(other_epochs) == k else k  # a prefix of the chosen log, or k
    assert other.agrees_with(chosen) == expected
    assert chosen.agrees_with(other) == (len(chosen_epochs) if len(chosen_epochs) == k else k)


def test_end_for_epoch_is_kafkas_end_offset_for_epoch():
    s = survivor_of([1, 1, 3, 3, 3, 5], "s")  # epochs 1 from 0, 3 from 2, 5 from 5; end 6
    assert s.end_for_epoch(0) == (-1, -1)
    assert s.end_for_epoch(1) == (1, 2)
    assert s.end_for_epoch(2) == (1, 2)  # the largest epoch not above 2 is 1, whose entries end at 2
    assert s.end_for_epoch(4) == (3, 5)
    assert s.end_for_epoch(9) == (5, 6)


# ------------------------------------------------------------------ survivors on disk


def test_the_recovered_directories_hold_the_survivors_image(tmp_path):
    src = log_dir(tmp_path / "c1", 1)
    before = tree(load_image(src))
    recovery = plan([survey(src)], VOTERS)
    assert (recovery.chosen.end_offset, recovery.chosen.last_epoch) == (max(epoch_ends(src).values()), 3)
    written = write_quorum(recovery, tmp_path / "out")
    assert [p.name for p in written] == ["1", "2", "3"]
    snapshots = []
    ids = set()
    for vid in (1, 2, 3):
        d = tmp_path / "out" / str(vid)
        meta = MetaProperties.read(d / "meta.properties")
        assert (meta.cluster_id, meta.node_id) == (CLUSTER, vid)
        ids.add(meta.directory_id)
        (sid,) = list_snapshots(d / META)
        assert sid == recovery.snapshot_id == (recovery.chosen.end_offset, 3)
        snapshots.append((d / META / sid.file_name).read_bytes())
        assert tree(load_image(d)) == before
        state, _ = parse_quorum_state((d / META / "quorum-state").read_text())
        assert (state.epoch, state.leader_id, state.voted_id) == (3, -1, -1)
    assert len(ids) == 3 and None not in ids
    assert snapshots[0] == snapshots[1] == snapshots[2]
    assert not list((tmp_path / "out").glob(".*"))  # no temporary directory left


def test_the_most_complete_survivor_is_chosen_and_what_the_others_hold_beyond_it_is_said(tmp_path):
    a = log_dir(tmp_path / "a", 1)
    ends = epoch_ends(a)
    # b: a's log up to the end of epoch 2, then entries of epoch 2 that a never got (a's epoch 3 is there)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    truncate_to(b, ends[2])
    b_extra = append_noops(b, 2, 5)
    # c: a prefix of a (a follower that fell behind), and a quorum-state of a later epoch
    c = tmp_path / "c"
    shutil.copytree(a, c)
    truncate_to(c, ends[1])
    (c / META / "quorum-state").write_text(render_quorum_state(ElectionState(7, voters=(1, 2, 3)), 0))

    recovery = plan([survey(b), survey(c), survey(a)], VOTERS)
    assert recovery.chosen.path == str(a)  # the highest last epoch, though b's log is as long
    assert recovery.diverging == {str(b): b_extra}
    assert recovery.epoch == 7
    text = "\n".join(recovery.report())
    assert f"offsets {b_extra[0]}..{b_extra[1] - 1} (5 entries) are not in the recovered log" in text


def test_a_torn_tail_is_cut_and_said(tmp_path):
    src = log_dir(tmp_path / "c1", 1)
    end = max(epoch_ends(src).values())
    clean = tmp_path / "clean"
    shutil.copytree(src, clean)
    last = sorted((src / META).glob("*.log"))[-1]
    with open(last, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x40half a batch")
    s = survey(src)
    assert s.end_offset == end and s.damage is not None and last.name in s.damage
    write_quorum(plan([s], VOTERS), tmp_path / "out")
    assert tree(load_image(tmp_path / "out" / "1")) == tree(load_image(clean))


def test_damage_with_more_log_after_it_is_refused(tmp_path):
    src = log_dir(tmp_path / "c1", 1)
    segs = sorted((src / META).glob("*.log"))
    assert len(segs) > 2
    data = bytearray(segs[0].read_bytes())
    data[100] ^= 0xFF  # inside the first batch: its CRC no longer matches
    segs[0].write_bytes(bytes(data))
    with pytest.raises(RecoveryError, match="cannot be trusted past offset"):
        survey(src)
    proc = kraftkit("quorum", "recover", "--from", src, "--voters", VOTERS_TEXT, "--out", tmp_path / "out")
    assert proc.returncode == 1 and str(segs[0]) in proc.stderr, proc
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ the command


def test_recover_prints_what_it_wrote_and_refuses_to_overwrite(tmp_path):
    src = log_dir(tmp_path / "c1", 1)
    out = tmp_path / "out"
    dry = kraftkit("quorum", "recover", "--from", src, "--voters", VOTERS_TEXT, "--dry-run")
    assert dry.returncode == 0 and "dry run: nothing written" in dry.stdout, dry
    proc = kraftkit("quorum", "recover", "--from", src, "--voters", VOTERS_TEXT, "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["written"] == [str(out / str(i)) for i in (1, 2, 3)] and doc["clusterId"] == CLUSTER
    snap = (out / "2" / META / "quorum-state").read_bytes()
    again = kraftkit("quorum", "recover", "--from", src, "--voters", VOTERS_TEXT, "--out", out)
    assert again.returncode == 2 and f"{out / '1'}: exists already" in again.stderr, again
    assert (out / "2" / META / "quorum-state").read_bytes() == snap


@pytest.mark.parametrize("argv, code, message", [
    (["--voters", VOTERS_TEXT, "--out", "OUT"], 2, "no such directory"),  # --from a missing directory
    (["--voters", "1@nohost", "--out", "OUT"], 2, "--voters: bad voter"),
    (["--voters", VOTERS_TEXT], 2, "--out DIR is required"),
])
def test_recover_usage_errors(tmp_path, argv, code, message):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    proc = kraftkit("quorum", "recover", "--from", tmp_path / "missing" if "no such" in message else
                    log_dir(tmp_path / "c1", 1), *argv)
    assert proc.returncode == code and message in proc.stderr and "Traceback" not in proc.stderr, proc


def test_recover_refuses_survivors_of_two_clusters(tmp_path):
    a = log_dir(tmp_path / "a", 1)
    b = log_dir(tmp_path / "b", 2, cluster="b3RoZXItY2x1c3Rlci1pZA")
    proc = kraftkit("quorum", "recover", "--from", a, "--from", b, "--voters", VOTERS_TEXT, "--out", tmp_path / "o")
    assert proc.returncode == 1, proc
    assert "different clusters" in proc.stderr and CLUSTER in proc.stderr and "b3RoZXItY2x1c3Rlci1pZA" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_a_survivor_without_meta_properties_needs_the_cluster_id(tmp_path):
    src = log_dir(tmp_path / "c1", 1)
    (src / "meta.properties").unlink()
    proc = kraftkit("quorum", "recover", "--from", src, "--voters", VOTERS_TEXT, "--dry-run")
    assert proc.returncode == 1 and "--cluster-id" in proc.stderr, proc
    proc = kraftkit("quorum", "recover", "--from", src, "--voters", VOTERS_TEXT, "--out", tmp_path / "out",
                    "--cluster-id", CLUSTER)
    assert proc.returncode == 0, proc.stderr
    assert MetaProperties.read(tmp_path / "out" / "3" / "meta.properties").cluster_id == CLUSTER
