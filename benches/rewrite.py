#!/usr/bin/env python
"""Snapshot rewrite speed (metadata.version downgrades) and its memory, against a Python
rewrite in the same run.

    .venv/bin/python benches/rewrite.py                # 256 MB snapshot, pinned to one core
    .venv/bin/python benches/rewrite.py --size-mb 32   # quicker

The snapshot is written once with kraftkit and cached in .cache/bench/: a 4.3-IV0 image of
brokers and many topics (TopicRecord, ConfigRecords, PartitionRecord v2 with replica
directories, as Kafka 4.3 writes them). Rows:

* the dry runs (loss report only) to 3.9-IV0 (PartitionRecord v2 -> v1, RegisterBrokerRecord
  v4 -> v3: the version patched in place) and to 3.5-IV2 (PartitionRecord -> v0: directories
  cut out, every one counted as lost, batches rebuilt),
* the same rewrites written to tmpfs (/dev/shm: the rewrite and the kernel's page-cache copies,
  no disk), then written and fsynced to the data directory's disk; and a rewrite that changes
  nothing (4.3-IV0 -> 4.3-IV0: every batch checked and copied) to each, the ceiling that the
  kernel's copies and the disk set for any rewrite on the machine,
* the Python peer: the same 3.9-IV0 rewrite written with kraftkit's Python API (decode each
  record to a dict, drop the fields, encode, build batches), on a prefix of the snapshot,
  written to the same tmpfs;
* peak RSS of a process rewriting snapshots of two sizes (bounded memory: it must not grow
  with the snapshot).

Throughput is MB/s of input snapshot (wall time, best of --repeat), and MB/s of the process's
user CPU time in that run (the rewrite's own work, without the kernel's copies and the disk).
Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from benchlib import measure, pin_to_one_core  # noqa: E402

from kraftkit._kafka import FEATURE_LEVEL  # noqa: E402
from kraftkit.features.rewrite import rewrite_snapshot  # noqa: E402
from kraftkit.log import Segment, encode_batch  # noqa: E402
from kraftkit.metadata.records import decode_metadata_record, encode_metadata_record  # noqa: E402
from kraftkit.metadata.mv_levels import MV_4_3_IV0 as MV43  # noqa: E402
from kraftkit.metadata.snapshot import SnapshotId, SnapshotWriter  # noqa: E402

PARTITIONS_PER_TOPIC = 50


def make_snapshot(path: Path, size_mb: int) -> Path:
    """A 4.3-IV0 snapshot of about ``size_mb`` MB (cached)."""
    final = path / f"rewrite-{size_mb}mb" / SnapshotId(1_000_000, 7).file_name
    if final.exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    dirs = [uuid.UUID(int=0xD1 + b) for b in range(6)]
    with SnapshotWriter(final.parent, SnapshotId(1_000_000, 7), last_contained_log_timestamp=1, time_ms=1) as w:
        head = [encode_metadata_record(FEATURE_LEVEL, 0, {"Name": "metadata.version", "FeatureLevel": MV43}),
                encode_metadata_record(12, 0, {"Name": "group.version", "FeatureLevel": 1})]
        for b in range(6):
            head.append(encode_metadata_record(0, 4, {
                "BrokerId": b, "IncarnationId": uuid.UUID(int=b + 1), "BrokerEpoch": 10, "Rack": f"r{b % 3}",
                "EndPoints": [{"Name": "PLAINTEXT", "Host": f"b{b}", "Port": 9092, "SecurityProtocol": 0}],
                "Features": [{"Name": "metadata.version", "MinSupportedVersion": 7, "MaxSupportedVersion": MV43}],
                "Fenced": False, "LogDirs": [dirs[b]], "CordonedLogDirs": []}))
        w.append(head)
        t = 0
        while w._file.tell() < size_mb << 20:
            tid = uuid.UUID(int=(t + 1) << 64)
            recs = [encode_metadata_record(2, 0, {"Name": f"orders-{t:06d}", "TopicId": tid}),
                    encode_metadata_record(4, 0, {"ResourceType": 2, "ResourceName": f"orders-{t:06d}",
                                                  "Name": "retention.ms", "Value": "604800000"})]
            for p in range(PARTITIONS_PER_TOPIC):
                reps = [(p + i) % 6 for i in range(3)]
                recs.append(encode_metadata_record(3, 2, {
                    "PartitionId": p, "TopicId": tid, "Replicas": reps, "Isr": reps, "RemovingReplicas": [],
                    "AddingReplicas": [], "Leader": reps[0], "LeaderEpoch": 3, "PartitionEpoch": 5,
                    "Directories": [dirs[r] for r in reps]}))
            w.append(recs)
            t += 1
    return final


def python_rewrite(src: Path, dst: Path, limit_bytes: int) -> int:
    """The 4.3-IV0 -> 3.9-IV0 rewrite with kraftkit's Python API; returns input bytes read."""
    drop = {3: ("EligibleLeaderReplicas", "LastKnownElr"), 0: ("CordonedLogDirs",)}
    target = {3: 1, 0: 3}
    done = 0
    next_offset = 0
    with open(dst, "wb") as out:
        for b in Segment(src).batches(verify_crc=True):
            if done >= limit_bytes:
                break
            done += b.size_in_bytes
            recs = []
            for r in b.records():
                if b.is_control:
                    recs.append((r.timestamp, r.key, r.value, ()))
                    continue
                key, ver, data = decode_metadata_record(r.value)
                if key in target and ver > target[key]:
                    for f in drop[key]:
                        data.pop(f, None)
                    if key == 12 and data["Name"] == "metadata.version":
                        data["FeatureLevel"] = 21
                    recs.append((r.timestamp, None, encode_metadata_record(key, target[key], data), ()))
                else:
                    recs.append((r.timestamp, None, r.value, ()))
            out.write(encode_batch(recs, base_offset=next_offset, partition_leader_epoch=b.partition_leader_epoch,
                                   control=b.is_control))
            next_offset += len(recs)
    return done


RSS_CHILD = """
import resource, sys
from kraftkit.features.rewrite import rewrite_snapshot
rewrite_snapshot(sys.argv[1], sys.argv[2], "3.5")
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss_kb(src: Path, out_dir: Path) -> int:
    dst = out_dir / ("rss-" + src.name)
    proc = subprocess.run([sys.executable, "-c", RSS_CHILD, str(src), str(dst)], capture_output=True, text=True,
                          check=True, timeout=600)
    dst.unlink()
    return int(proc.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--python-mb", type=int, default=16, help="prefix the Python peer rewrites")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-dir", default=str(REPO / ".cache" / "bench"))
    a = ap.parse_args()
    cpu = pin_to_one_core()
    data = Path(a.data_dir)
    src = make_snapshot(data, a.size_mb)
    size = src.stat().st_size
    small = make_snapshot(data, max(8, a.size_mb // 8))
    rows = []
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=data) as tmp, tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else data) as tmpfs:
        out, fast = Path(tmp), Path(tmpfs)

        rows_result = None

        user_times: list[float] = []

        def rw(target, dst):
            def run():
                u0 = resource.getrusage(resource.RUSAGE_SELF).ru_utime
                r = rewrite_snapshot(src, dst, target)
                user_times.append(resource.getrusage(resource.RUSAGE_SELF).ru_utime - u0)
                return r
            return run

        for label, target, dst in (("dry run 4.3-IV0 -> 3.9-IV0 (report only)", "3.9", None),
                                   ("dry run 4.3-IV0 -> 3.5-IV2 (loss report only)", "3.5", None),
                                   ("rewrite 4.3-IV0 -> 3.9-IV0 (tmpfs file)", "3.9", fast / src.name),
                                   ("rewrite 4.3-IV0 -> 3.5-IV2 (tmpfs file)", "3.5", fast / src.name),
                                   ("rewrite 4.3-IV0 -> 4.3-IV0 (no change, tmpfs file)", "4.3", fast / src.name),
                                   ("rewrite 4.3-IV0 -> 3.9-IV0 (fsynced file on disk)", "3.9", out / src.name),
                                   ("rewrite 4.3-IV0 -> 3.5-IV2 (fsynced file on disk)", "3.5", out / src.name),
                                   ("rewrite 4.3-IV0 -> 4.3-IV0 (no change, fsynced on disk)", "4.3", out / src.name)):
            user_times.clear()
            t = measure(rw(target, dst), repeat=a.repeat)
            rows.append((label, "kraftkit (Rust, streaming)", size, t.best, min(user_times)))
            if target == "3.5" and dst is None:
                rows_result = t.result
            if dst is not None:
                dst.unlink()
        limit = a.python_mb << 20
        t = measure(lambda: python_rewrite(src, fast / "py.checkpoint", limit), repeat=1)
        rows.append(("rewrite 4.3-IV0 -> 3.9-IV0 (tmpfs file)", "Python (kraftkit decode/encode per record)", t.result, t.best, None))
        rep = rows_result
        rss_small = peak_rss_kb(small, out)
        rss_big = peak_rss_kb(src, out)
    kk = size / rows[2][3]  # the 3.9 rewrite to tmpfs: the Python peer's conditions
    py = rows[-1][2] / rows[-1][3]
    print(f"snapshot {size / 1e6:.0f} MB ({rep.counts['records_in']} records), pinned to CPU {cpu}")
    print(f"| {'row':<56} | {'implementation':<44} | {'MB/s':>6} | {'MB/s of user CPU':>16} | ratio |")
    print(f"|{'-' * 58}|{'-' * 46}|{'-' * 8}|{'-' * 18}|-------|")
    for label, impl, nbytes, secs, user in rows:
        rate = nbytes / secs / 1e6
        ratio = f"{kk / (nbytes / secs):.1f}x" if impl.startswith("Python") else ""
        ucpu = f"{nbytes / user / 1e6:.0f}" if user else ""
        print(f"| {label:<56} | {impl:<44} | {rate:6.0f} | {ucpu:>16} | {ratio:>5} |")
    print(f"peak RSS of a rewrite process: {rss_small / 1024:.0f} MB for a {small.stat().st_size / 1e6:.0f} MB snapshot, "
          f"{rss_big / 1024:.0f} MB for {size / 1e6:.0f} MB")
    print(json.dumps({"snapshot_bytes": size, "rows": [{"row": r[0], "impl": r[1], "bytes": r[2], "seconds": r[3], "user_seconds": r[4]} for r in rows],
                      "python_ratio": kk / py, "peak_rss_kb": {"small": rss_small, "big": rss_big},
                      "losses": rep.losses[:3]}))


if __name__ == "__main__":
    main()
