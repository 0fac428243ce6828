"""``kraftkit demo``: write a realistic metadata-shaped log, then dump and verify it."""

from __future__ import annotations

import argparse
import io
import shutil
import tempfile
import time
from pathlib import Path

from kraftkit.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from kraftkit.log import Log, Segment
from kraftkit.metadata.generate import write_metadata_log
from kraftkit.metadata.image import load_image, mv_name
from kraftkit.metadata.snapshot import SnapshotReader

HELP = (
    "write a metadata-shaped KRaft log with kraftkit, dump and verify it, replay it into the metadata image, "
    "snapshot it, rewrite the snapshot for an older metadata.version, replicate it with a three-node raft quorum, "
    "and audit it with Spark"
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help=HELP, description=HELP + ".")
    p.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="where to write __cluster_metadata-0 (default: a temporary directory, removed after)",
    )
    p.add_argument("--topics", type=int, default=5000, help="topics to create (default 5000)")
    p.add_argument("--partitions", type=int, default=24, help="partitions per topic (default 24)")
    p.add_argument(
        "--segment-bytes", type=int, default=4 * 1024 * 1024, help="roll segments at this size (default 4 MiB)"
    )
    p.set_defaults(func=run)


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def run(args: argparse.Namespace) -> int:
    from kraftkit.cli import verify_log

    tmp = None
    root = args.dir
    if root is None:
        tmp = tempfile.mkdtemp(prefix="kraftkit-demo-")
        root = Path(tmp)
    part = root / "__cluster_metadata-0"
    if part.exists():
        print(f"{part} already exists; choose another --dir")
        return EXIT_USAGE
    try:
        t0 = time.perf_counter()
        stats = write_metadata_log(
            part, topics=args.topics, partitions=args.partitions, segment_bytes=args.segment_bytes
        )
        t_write = time.perf_counter() - t0
        log = Log(part)
        size = sum((part / f"{b:020d}.log").stat().st_size for b in log.segments)
        print(f"1. wrote {part}")
        print(
            f"   {stats.records} records in {stats.batches} batches ({stats.control_batches} LeaderChange control batches, "
            f"{stats.epochs} leader epochs), {stats.topics} topics, {stats.partitions} partitions"
        )
        print(
            f"   {len(log.segments)} segments, {_mb(size)}, offsets {log.log_start_offset}..{log.log_end_offset - 1}, "
            f"leader epochs {log.leader_epochs}  [{t_write:.2f}s]"
        )
        log.close()

        first = part / f"{log.segments[0]:020d}.log"
        t0 = time.perf_counter()
        lines = 0
        for path in [part / f"{b:020d}.log" for b in log.segments]:
            for chunk in Segment(path).dump(deep=True):
                lines += chunk.count(b"\n")
        t_dump = time.perf_counter() - t0
        print(f"2. dump-log --deep over every segment: {lines} lines [{t_dump:.2f}s]; the first lines of {first.name}:")
        out = io.BytesIO()
        for chunk in Segment(first).dump(deep=True):
            out.write(chunk)
            if out.tell() > 4096:
                break
        for line in out.getvalue().decode().splitlines()[:4]:
            print("   " + (line if len(line) < 160 else line[:157] + "..."))

        t0 = time.perf_counter()
        parts, _ = verify_log.find_partitions([str(part)])
        verify_log.verify(parts, deep=True, check_indexes=True)
        t_verify = time.perf_counter() - t0
        p = parts[0]
        verdict = "all valid" if not p.problems else f"{len(p.problems)} problem(s): {p.problems[:3]}"
        print(
            f"3. verify-log --deep: {len(p.files)} files, {p.batches} batches, {p.records} records: {verdict} [{t_verify:.2f}s]"
        )

        t0 = time.perf_counter()
        image = load_image(part)
        t_image = time.perf_counter() - t0
        n_parts = sum(len(t.partitions) for t in image.topics.values())
        print(
            f"4. metadata image: metadata.version {mv_name(image.metadata_version)}, {len(image.brokers)} brokers, "
            f"{len(image.topics)} topics, {n_parts} partitions, {sum(len(c) for c in image.configs.values())} configs "
            f"[{t_image:.2f}s, {stats.records / t_image / 1e3:.0f} k records/s]"
        )

        t0 = time.perf_counter()
        snap = image.write_snapshot(part)
        rep = SnapshotReader(snap).check()
        t_snap = time.perf_counter() - t0
        again = load_image(snap)
        same = (
            "equals the log's image"
            if again.topics == image.topics and again.brokers == image.brokers
            else "DIFFERS from the log's image"
        )
        print(
            f"5. snapshot {snap.name}: {rep['batches']} batches, {rep['data_records']} records, verified; "
            f"its image {same} [{t_snap:.2f}s]"
        )

        # 6. a metadata.version downgrade Kafka refuses: the snapshot rewritten for Kafka 3.5
        from kraftkit.features.rewrite import loss_line, rewrite_snapshot

        older = root / "for-kafka-3.5"
        older.mkdir()
        t0 = time.perf_counter()
        down = rewrite_snapshot(snap, older, "3.5")
        t_down = time.perf_counter() - t0
        SnapshotReader(older / snap.name).check()
        lost = "; ".join(loss_line(x) for x in down.losses) or "nothing"
        print(
            f"6. snapshot rewritten {down.source_metadata_version} -> {down.target} (Kafka refuses this downgrade): "
            f"{down.counts['records_rewritten']} records re-encoded, verified [{t_down:.2f}s]"
        )
        print(f"   lost: {lost if len(lost) < 300 else lost[:297] + '...'}")
        # 7. the log replicated by a three-node raft quorum over Kafka's wire protocol
        quorum_ok = _quorum_step(root / "quorum", part)
        print(
            f"summary: wrote {_mb(size)} at {size / 1e6 / t_write:.0f} MB/s, dumped at {size / 1e6 / t_dump:.0f} MB/s, "
            f"verified at {size / 1e6 / t_verify:.0f} MB/s"
        )
        _spark_audit(part)
        return EXIT_OK if not p.problems and "equals" in same and quorum_ok else EXIT_PROBLEMS
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _quorum_step(root: Path, part: Path, max_records: int = 50_000) -> bool:
    """Three raft nodes on loopback (in this process) replicate the first ``max_records`` data
    records of the demo log; the leader then resigns and the others elect a new one."""
    import asyncio
    import socket

    from kraftkit.features.storage import random_uuid
    from kraftkit.raft.driver import NodeConfig
    from kraftkit.raft.quorum_state import Role
    from kraftkit.raft.server import RaftNode

    values: list[bytes] = []
    with Log(part) as log:
        for batch in log.batches():
            if not batch.is_control:
                values.extend(r.value for r in batch if r.value is not None)  # a metadata record always has one
            if len(values) >= max_records:
                break
    values = values[:max_records]
    socks = [socket.socket() for _ in range(3)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    voters = {i + 1: ("127.0.0.1", s.getsockname()[1]) for i, s in enumerate(socks)}
    for s in socks:
        s.close()
    cid = random_uuid()

    def leader(nodes: list[RaftNode]) -> RaftNode | None:
        ls = [
            n
            for n in nodes
            if n._loop is not None
            and n.replica().core.leader_high_watermark() is not None
            and n.replica().core.role is Role.LEADER
        ]
        return ls[0] if len(ls) == 1 else None

    async def wait(cond, timeout: float = 30.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            got = cond()
            if got:
                return got
            await asyncio.sleep(0.01)
        raise TimeoutError("the quorum did not get there in time")

    async def main() -> bool:
        nodes = [RaftNode(NodeConfig(i, voters, root / f"node{i}", cid, snapshot_every_records=0)) for i in voters]
        t0 = time.perf_counter()
        for n in nodes:
            await n.start()
        try:
            first = await wait(lambda: leader(nodes))
            t_elect = time.perf_counter() - t0
            t0 = time.perf_counter()
            pending = [first.append_nowait(values[i : i + 1000])[1] for i in range(0, len(values), 1000)]
            last = max(await asyncio.gather(*pending))
            t_commit = time.perf_counter() - t0
            await wait(lambda: all(n.replica().log.flushed_offset == first.replica().log.end_offset for n in nodes))
            seg = [(n.replica().dir / "00000000000000000000.log").read_bytes() for n in nodes]
            same = seg[0] == seg[1] == seg[2]
            t0 = time.perf_counter()
            await first.stop()
            rest = [n for n in nodes if n is not first]
            second = await wait(lambda: leader(rest))
            t_fail = time.perf_counter() - t0
            topics = len(second.replica().machine.image.topics)
            print(
                f"7. raft quorum of 3 nodes on loopback (Kafka wire protocol): node {first.node_id} elected in "
                f"{t_elect * 1000:.0f} ms; {len(values)} records committed (offsets up to {last}) at "
                f"{len(values) / t_commit / 1e3:.0f} k records/s, fsynced on each node; the followers' segments are "
                f"{'byte-identical to the leader' + chr(39) + 's' if same else 'DIFFERENT from the leader'}"
            )
            print(
                f"   node {first.node_id} resigned: node {second.node_id} leads epoch {second.replica().core.epoch} after "
                f"{t_fail * 1000:.0f} ms, its image holds {topics} topics  [kraftkit quorum run does this across processes]"
            )
            return same
        finally:
            for n in nodes:
                await n.stop()

    return asyncio.run(main())


def _spark_audit(part: Path) -> None:
    """8. A short Spark audit of what the demo wrote (only with pyspark and Java at hand)."""
    import importlib.util

    from kraftkit.spark.session import java_available

    if importlib.util.find_spec("pyspark") is None or not java_available():
        print("8. Spark audit skipped: needs pyspark (pip install 'kraftkit[spark]') and Java 17+")
        return
    from kraftkit.spark import jobs
    from kraftkit.spark.session import local_session

    t0 = time.perf_counter()
    spark = local_session("local[2]", app="kraftkit-demo", quiet=True)
    t_start = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        n = spark.read.format("kraft").option("columns", "record_type").load(str(part)).count()
        t_scan = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = jobs.audit(spark, str(part), progress=False)
        t_audit = time.perf_counter() - t0
        print(
            f'8. Spark (local[2], session up in {t_start:.0f}s): spark.read.format("kraft") read {n} records '
            f"(log and snapshot) [{t_scan:.2f}s]; kraftkit spark audit [{t_audit:.2f}s]:"
        )
        for line in res.summary().splitlines()[:-1]:
            print("   " + line)
    finally:
        spark.stop()
