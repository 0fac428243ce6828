"""Offsets across the segments of a partition: holes, overlaps, base offsets, the log start
against the newest snapshot; how verify-log, metadata dump/image and snapshot create react.

The damaged logs are made from a metadata log written by ``kraftkit.metadata.generate`` (200 topics, small
segments, three leader epochs); every expected number below is read from the undamaged log.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kraftkit.log import Log, Segment, encode_batch
from kraftkit.log.continuity import check_segments
from kraftkit.metadata.generate import write_metadata_log
from kraftkit.metadata.image import load_image
from kraftkit.metadata.source import ContinuityError
from tests.cli.test_cli import run

TOPICS = 200


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("continuity") / "logdir"
    write_metadata_log(root / "__cluster_metadata-0", topics=TOPICS, partitions=3, segment_bytes=8000, max_batch_records=20)
    return root


@pytest.fixture()
def logdir(pristine: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "logdir"
    shutil.copytree(pristine, dst)
    return dst


def meta(root: Path) -> Path:
    return root / "__cluster_metadata-0"


def segments(root: Path) -> list[Path]:
    return sorted(meta(root).glob("*.log"))


def remove_segment(path: Path) -> None:
    for suffix in (".log", ".index", ".timeindex"):
        path.with_suffix(suffix).unlink(missing_ok=True)


def topic_count(root: Path, *extra: str, check: int = 0) -> int:
    proc = run("metadata", "image", str(root), "--path", "/topics/byName", *extra, check=check)
    return len(proc.stdout.split())


def test_undamaged_log_verifies_clean_everywhere(logdir: Path) -> None:
    proc = run("verify-log", "--deep", str(logdir), check=0)
    assert "all valid" in proc.stdout and "note" not in proc.stdout
    assert topic_count(logdir) == TOPICS
    run("metadata", "dump", str(logdir), check=0)


def test_missing_middle_segment(logdir: Path, tmp_path: Path) -> None:
    segs = segments(logdir)
    gone, after = segs[3], segs[4]
    before_end = Segment(segs[2]).scan()["last_offset"]
    first, last = int(gone.stem), int(after.stem) - 1
    assert before_end + 1 == first
    remove_segment(gone)
    want = (f"{after}: offsets {first}..{last} are missing: the previous segment {segs[2]} ends at offset "
            f"{first - 1} and this one starts at {last + 1} (batch base offset {last + 1}, byte position 0)")
    proc = run("verify-log", "--deep", str(logdir), check=1)
    assert f"  - {want}" in proc.stdout.splitlines() and "1 PROBLEM(S)" in proc.stdout
    for cmd in (["metadata", "image", str(logdir)], ["metadata", "dump", str(logdir)]):
        proc = run(*cmd, check=1)
        assert f"kraftkit {' '.join(cmd[:2])}: {want}" in proc.stderr.splitlines(), proc.stderr
        assert proc.stdout == ""
    end = Segment(segs[-1]).scan()["last_offset"] + 1
    proc = run("snapshot", "create", str(logdir), "--at", str(end), "--out", str(tmp_path), check=1)
    assert f"kraftkit snapshot create: {want}" in proc.stderr.splitlines()
    assert not list(tmp_path.glob("*.checkpoint"))
    # --allow-gaps: the image is built, what is missing is a warning, the exit code 0
    proc = run("metadata", "image", str(logdir), "--path", "/topics/byName", "--allow-gaps", check=0)
    assert f"kraftkit metadata image: warning: {want}" in proc.stderr.splitlines()
    assert 0 < len(proc.stdout.split()) < TOPICS
    # below the hole nothing is missing
    assert topic_count(logdir, "--at", str(first)) == len(load_image(meta(logdir), at=first).topics)


def test_first_segment_cut_at_a_batch_boundary(logdir: Path) -> None:
    seg = segments(logdir)[0]
    batches = Segment(seg).read_batches()
    keep = batches[: len(batches) // 2]
    data = seg.read_bytes()
    seg.write_bytes(data[: keep[-1].position + keep[-1].size_in_bytes])
    nxt = segments(logdir)[1]
    lost = (keep[-1].last_offset + 1, int(nxt.stem) - 1)
    proc = run("verify-log", str(logdir), check=1)
    assert f"offsets {lost[0]}..{lost[1]} are missing: the previous segment {seg} ends at offset {lost[0] - 1}" in proc.stdout
    proc = run("metadata", "image", str(logdir), check=1)
    assert f"{nxt}: offsets {lost[0]}..{lost[1]} are missing" in proc.stderr
    # the head cut off instead: the file name says 0, the first batch is later
    seg.write_bytes(data[batches[2].position:])
    proc = run("metadata", "dump", str(logdir), check=1)
    want = (f"{seg}: offsets 0..{batches[2].base_offset - 1} are missing: the first batch starts at offset "
            f"{batches[2].base_offset}, not at the segment's base offset 0 (batch base offset {batches[2].base_offset}, "
            "byte position 0)")
    assert f"kraftkit metadata dump: {want}" in proc.stderr.splitlines()


def test_duplicated_segment(logdir: Path) -> None:
    segs = segments(logdir)
    end = Segment(segs[-1]).scan()["last_offset"] + 1
    copy = meta(logdir) / f"{end:020d}.log"
    shutil.copy(segs[1], copy)
    first = Segment(segs[1]).read_batches()[0]
    want = (f"{copy}: batch last offset {first.last_offset} cannot be stored relative to the segment's base offset {end} "
            f"(batch base offset {first.base_offset}, byte position 0)")
    for cmd in (["verify-log", str(logdir)], ["metadata", "dump", str(logdir)], ["metadata", "image", str(logdir)]):
        proc = run(*cmd, check=1)
        assert want in proc.stdout + proc.stderr, cmd
    # the same bytes under a name that overlaps the segment before
    copy.unlink()
    overlapping = meta(logdir) / f"{int(segs[2].stem) - 1:020d}.log"
    shutil.copy(segs[2], overlapping)
    remove_segment(segs[2])
    proc = run("metadata", "image", str(logdir), check=1)
    assert (f"{overlapping}: segment base offset {int(segs[2].stem) - 1} overlaps the previous segment {segs[1]}, "
            f"which holds offsets up to {int(segs[2].stem) - 1}") in proc.stderr
    # --allow-gaps: the offsets held twice are used once
    gaps: list = []
    img = load_image(meta(logdir), allow_gaps=True, gaps=gaps)
    assert len(img.topics) == TOPICS and [g.kind for g in gaps] == ["overlap"]


def test_batch_repeated_inside_a_segment(logdir: Path) -> None:
    seg = segments(logdir)[0]
    batches = Segment(seg).read_batches()
    data = seg.read_bytes()
    b = batches[1]
    seg.write_bytes(data + data[b.position:b.position + b.size_in_bytes])
    want = (f"{seg}: batch base offset {b.base_offset} is below the next expected offset {batches[-1].last_offset + 1} "
            f"(batch base offset {b.base_offset}, byte position {len(data)})")
    for cmd in (["metadata", "image", str(logdir)], ["metadata", "dump", str(logdir)]):
        assert f"kraftkit {' '.join(cmd[:2])}: {want}" in run(*cmd, check=1).stderr.splitlines()
    with pytest.raises(ContinuityError):
        load_image(meta(logdir), allow_gaps=True)  # out of order is corrupt, not a gap


def test_log_start_after_the_newest_snapshot(logdir: Path, tmp_path: Path) -> None:
    segs = segments(logdir)
    at = int(segs[3].stem)
    run("snapshot", "create", str(logdir), "--at", str(at), check=0)
    # as Kafka's retention: segments wholly below the snapshot go; the log stays valid
    with Log(meta(logdir)) as log:
        log.delete_segments([int(s.stem) for s in segs[:3]])
    proc = run("verify-log", "--deep", str(logdir), check=0)
    assert "all valid" in proc.stdout
    assert topic_count(logdir) == TOPICS
    # one segment more gone: offsets between the snapshot and the log are lost
    remove_segment(segs[3])
    start = int(segs[4].stem)
    want = (f"{segs[4]}: offsets {at}..{start - 1} are missing: the log starts at offset {start} "
            f"and the snapshot it follows ends at offset {at} (batch base offset {start}, byte position 0)")
    assert f"kraftkit metadata image: {want}" in run("metadata", "image", str(logdir), check=1).stderr.splitlines()
    assert f"  - {want}" in run("verify-log", str(logdir), check=1).stdout.splitlines()


def test_ordinary_partitions_may_have_gaps_but_not_overlaps(tmp_path: Path) -> None:
    d = tmp_path / "orders-0"
    with Log(d, create=True, segment_bytes=2000) as log:
        for i in range(40):
            log.append(encode_batch([(1000 + i, b"k", b"v" * 100, [])], base_offset=log.log_end_offset, partition_leader_epoch=0))
    segs = sorted(d.glob("*.log"))
    assert len(segs) >= 3
    remove_segment(segs[1])  # as if compaction had emptied it
    proc = run("verify-log", str(tmp_path), check=0)
    assert "all valid" in proc.stdout
    reports = [Segment(s).scan() for s in sorted(d.glob("*.log"))]
    assert [x.kind for x in check_segments(reports, dense=True)] == ["gap"]
    # a segment named inside the range of the one before: the offsets below its name overlap
    named = d / f"{int(segs[1].stem) - 1:020d}.log"
    shutil.copy(segs[2], named)
    proc = run("verify-log", str(tmp_path), check=1)
    assert (f"{named}: segment base offset {int(segs[1].stem) - 1} overlaps the previous segment {segs[0]}, which holds "
            f"offsets up to {int(segs[1].stem) - 1}") in proc.stdout


def test_one_flipped_byte_is_one_problem(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    write_metadata_log(d, topics=TOPICS, partitions=3, segment_bytes=64000, max_batch_records=20)
    seg = sorted(d.glob("*.log"))[0]
    index_entries = len(seg.with_suffix(".index").read_bytes()) // 8
    assert index_entries > 5
    for where in (20, len(seg.read_bytes()) // 4):  # in the first batch's header, in a later batch
        data = bytearray(seg.read_bytes())
        data[where] ^= 1
        seg.write_bytes(bytes(data))
        proc = run("verify-log", "--deep", str(tmp_path), check=1)
        lines = proc.stdout.splitlines()
        problems = [x for x in lines if x.startswith("  - ")]
        notes = [x for x in lines if x.startswith("  note: ")]
        assert len(problems) == 1 and str(seg) in problems[0], proc.stdout
        assert "1 problem(s)" in lines[-1]
        assert notes and all("not checked: the log is unreadable from there" in n for n in notes)
        rep = json.loads(run("verify-log", "--json", str(tmp_path), check=1).stdout.splitlines()[0])
        assert len(rep["problems"]) == 1 and len(rep["notes"]) == len(notes)
        data[where] ^= 1
        seg.write_bytes(bytes(data))


def test_malformed_leader_epoch_checkpoint(logdir: Path) -> None:
    path = meta(logdir) / "leader-epoch-checkpoint"
    entries = path.read_text().splitlines()
    assert entries[:2] == ["0", "3"]
    path.write_text("0\n4\n" + "\n".join(entries[2:]) + "\n")
    proc = run("verify-log", str(logdir), check=1)
    assert f"  - {path}: expected 4 entries, found 3" in proc.stdout.splitlines()
    path.write_text("0\n1\n-1 0\n")
    proc = run("verify-log", str(logdir), check=1)
    assert f"  - {path}: line 3: epoch -1 at offset 0: epochs and offsets are never negative" in proc.stdout.splitlines()


def test_numeric_arguments_are_range_checked(logdir: Path) -> None:
    for args in (["metadata", "image", str(logdir), "--at", "-1"],
                 ["snapshot", "create", str(logdir), "--at", "-5"],
                 ["snapshot", "create", str(logdir), "--at", "10", "--time-ms", "-1"],
                 ["metadata", "image", str(logdir), "--at", "x"],
                 ["metadata", "image", str(logdir), "--at", str(2**63)],  # past a long: no OverflowError
                 ["snapshot", "create", str(logdir), "--at", "10", "--time-ms", "9" * 30]):
        proc = run(*args, check=2)
        assert "invalid offset" in proc.stderr, args
    with pytest.raises(ValueError, match="negative"):
        load_image(meta(logdir), at=-1)


@pytest.mark.kafka
def test_real_kafka_metadata_logs_stay_valid(kafka_metadata_oracle, kafka_oracle, tmp_path: Path) -> None:
    """No false positives: metadata logs written by real Kafka (snapshots, rolled segments, an
    untrimmed preallocated index of the active segment) verify clean and load, also after the
    segments below the newest snapshot are deleted, as Kafka's metadata log cleaner does."""
    for n, src in enumerate((kafka_metadata_oracle.metadata_log_dir, kafka_oracle.metadata_log_dir)):
        d = tmp_path / str(n) / "__cluster_metadata-0"
        shutil.copytree(src, d)
        proc = run("verify-log", "--deep", str(d), check=0)
        assert "all valid" in proc.stdout and "note" not in proc.stdout
        full = run("metadata", "image", str(d), "--json", check=0).stdout
        run("metadata", "dump", str(d), check=0)
        newest = max(int(p.name.split("-")[0]) for p in d.glob("*.checkpoint"))
        bases = sorted(int(p.stem) for p in d.glob("*.log"))
        below = [b for i, b in enumerate(bases[:-1]) if bases[i + 1] <= newest]
        assert below, bases
        with Log(d) as log:
            log.delete_segments(below)
        proc = run("verify-log", "--deep", str(d), check=0)
        assert "all valid" in proc.stdout
        assert run("metadata", "image", str(d), "--json", check=0).stdout == full


def test_the_spark_verify_job_applies_the_same_continuity_rules(logdir: Path) -> None:
    """The fleet job's per-directory check (run here without Spark) finds the missing segment
    verify-log finds, at the same place."""
    from kraftkit.spark.jobs import verify_directory

    def files() -> list[tuple[str, str]]:
        return [(str(p), "segment") for p in segments(logdir)]

    _rows, problems = verify_directory("c", "n", str(meta(logdir)), files())
    assert problems == []
    gone = segments(logdir)[2]
    after = segments(logdir)[3]
    remove_segment(gone)
    rows, problems = verify_directory("c", "n", str(meta(logdir)), files())
    gaps = [p for p in problems if p["kind"] == "offsets"]
    assert len(gaps) == 1 and gaps[0]["file"] == str(after)
    assert "missing" in gaps[0]["message"] and str(after) in gaps[0]["message"]
    expected = run("verify-log", str(logdir), check=1).stdout
    assert gaps[0]["reason"] in expected
    assert next(r for r in rows if r["file"] == str(after))["problems"] == 1


def test_an_offset_inside_a_batch_names_the_boundaries_that_would_do(logdir: Path) -> None:
    seg = segments(logdir)[1]
    b = Segment(seg).read_batches()[2]  # a batch of several records, not the first of the log
    assert b.last_offset > b.base_offset > 0
    inside = b.base_offset + 1
    err = run("snapshot", "create", str(logdir), "--at", str(inside), check=2).stderr
    assert f"offset {inside} is inside the batch {b.base_offset}..{b.last_offset}" in err
    assert f"use {b.base_offset} (its start) or {b.last_offset + 1} (its end)" in err, err
    run("snapshot", "create", str(logdir), "--at", str(b.last_offset + 1), check=0)
