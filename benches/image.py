"""Metadata image replay speed: records/s of ``MetadataImage`` replaying a metadata-shaped log.

    python benches/image.py [--topics N] [--partitions N] [--changes N]

Writes a __cluster_metadata-0 log with kraftkit (TopicRecord + PartitionRecords + configs,
then PartitionChangeRecords), then times ``load_image`` (decode in Rust, replay in Python)
and writing a snapshot of the result. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from kraftkit.log import Log, encode_batch  # noqa: E402
from kraftkit.metadata.image import load_image  # noqa: E402
from kraftkit.metadata.records import encode_metadata_record  # noqa: E402


def records(topics: int, partitions: int, changes: int):
    yield 12, 0, {"Name": "metadata.version", "FeatureLevel": 21}
    yield 0, 3, {"BrokerId": 1, "IncarnationId": uuid.UUID(int=7), "BrokerEpoch": 1, "Rack": None,
                 "EndPoints": [], "Features": [], "Fenced": False}
    ids = []
    for t in range(topics):
        tid = uuid.UUID(int=t + 1)
        ids.append(tid)
        yield 2, 0, {"Name": f"topic-{t}", "TopicId": tid}
        yield 4, 0, {"ResourceType": 2, "ResourceName": f"topic-{t}", "Name": "retention.ms", "Value": "1000"}
        for p in range(partitions):
            yield 3, 1, {"PartitionId": p, "TopicId": tid, "Replicas": [1, 2, 3], "Isr": [1, 2, 3],
                         "RemovingReplicas": [], "AddingReplicas": [], "Leader": 1, "LeaderEpoch": 0, "PartitionEpoch": 0}
    for i in range(changes):
        yield 5, 1, {"PartitionId": i % partitions, "TopicId": ids[i % topics], "Isr": [1, 2] if i % 2 else [1, 2, 3],
                     "Leader": -2 if i % 3 else 2}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", type=int, default=2000)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--changes", type=int, default=400_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "__cluster_metadata-0"
        vals = [encode_metadata_record(k, v, data) for k, v, data in records(a.topics, a.partitions, a.changes)]
        with Log(d, create=True, segment_bytes=64 << 20) as log:
            for i in range(0, len(vals), 1000):
                chunk = vals[i:i + 1000]
                log.append(encode_batch([(0, None, v, ()) for v in chunk], base_offset=i, partition_leader_epoch=0))
        best = None
        for _ in range(3):
            t0 = time.perf_counter()
            img = load_image(d)
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        out = Path(tmp) / "snap"
        out.mkdir()
        t0 = time.perf_counter()
        img.write_snapshot(out)
        snap_s = time.perf_counter() - t0
        print(json.dumps({"records": len(vals), "replay_s": round(best, 3),
                          "replay_records_per_s": round(len(vals) / best),
                          "snapshot_records": a.topics * (a.partitions + 2) + 2, "snapshot_write_s": round(snap_s, 3)}))


if __name__ == "__main__":
    main()
