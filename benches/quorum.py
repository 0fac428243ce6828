#!/usr/bin/env python
"""A three-node raft quorum on loopback: committed records/s, commit latency and leader failover,
kraftkit against PySyncObj in the same run.

    .venv/bin/python benches/quorum.py                 # the full table (about two minutes)
    .venv/bin/python benches/quorum.py --seconds 2     # quicker

kraftkit: three ``kraftkit quorum run`` processes with Kafka's default raft timeouts, every append
fsynced by the leader and each follower before it counts (as KRaft does). A client process
pipelines Produce requests (acks=-1: answered once committed) of B records each, C requests in
flight, each record a 64-byte ConfigRecord value. Latency is request sent -> committed answer.

PySyncObj (pip ``pysyncobj``): three processes replicating a ``@replicated`` append of 64-byte
values; the leader's process issues the commands itself (its API has no wire client), B x C
commands in flight so both hold the same number of records in flight. Its log is kept in memory
(its default) or in its journal file (mmap, never fsynced): it does less durable work per record.
Its leader sends AppendEntries every ``appendEntriesPeriod`` (100 ms by default, which bounds its
latency); a row with 5 ms shows it tuned for latency.

Failover: SIGKILL the kraftkit leader, then time until an append is committed by a new leader
(client retrying every 5 ms on the survivors), three times, restarting the killed node between.

Prints the table with ratios and one JSON line. Numbers on this 2-core machine are shared with the
client and all three nodes of each system: they say how the two compare, not what a real
deployment with a core per node does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import benchlib  # noqa: E402

from kraftkit._core import encode_batch, encode_metadata_record  # noqa: E402
from kraftkit.metadata.records import record_type  # noqa: E402
from kraftkit.protocol.messages import ApiKey, decode_response, encode_request  # noqa: E402
from kraftkit.raft import messages as m  # noqa: E402
from kraftkit.raft.admin import QuorumAdmin  # noqa: E402

CLUSTER_ID = "QmVuY2hRdW9ydW1DbHVzdA"
PRODUCE_VERSION = 12
RECORD_BYTES = 64


def config_value() -> bytes:
    key = record_type("ConfigRecord")[0]
    base = {"ResourceType": 2, "ResourceName": "bench", "Name": "retention.ms", "Value": ""}
    fixed = len(encode_metadata_record(key, 0, base))
    base["Value"] = "9" * (RECORD_BYTES - fixed)
    v = encode_metadata_record(key, 0, base)
    assert len(v) == RECORD_BYTES, len(v)
    return v


def produce_frame(batch: int) -> bytes:
    records = encode_batch([(0, None, config_value(), [])] * batch)
    body = {"TransactionalId": None, "Acks": -1, "TimeoutMs": 30000, "TopicData": [{
        "Name": m.METADATA_PARTITION.topic, "TopicId": m.METADATA_TOPIC_ID,
        "PartitionData": [{"Index": 0, "Records": records}]}]}
    payload = encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, 0, "bench", body)
    return struct.pack(">i", len(payload)) + payload


class KraftkitQuorum:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.ports = dict(zip((1, 2, 3), benchlib.free_ports(3)))
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())
        self.procs: dict[int, subprocess.Popen] = {}

    def start(self, i: int) -> None:
        p = subprocess.Popen(
            [sys.executable, "-m", "kraftkit.cli.main", "quorum", "run", "--node-id", str(i), "--voters", self.voters,
             "--log-dir", str(self.root / f"node{i}"), "--cluster-id", CLUSTER_ID, "--snapshot-every", "1000000",
             "--log-level", "WARNING"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        json.loads(p.stdout.readline())
        self.procs[i] = p

    def kill(self, i: int) -> None:
        p = self.procs.pop(i)
        p.send_signal(signal.SIGKILL)
        p.wait()
        p.stdout.close()

    def stop(self) -> None:
        for i in list(self.procs):
            p = self.procs.pop(i)
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            p.stdout.close()

    def describe(self, via: int | None = None) -> dict:
        port = self.ports[via] if via else next(iter(self.ports.values()))
        with QuorumAdmin(f"127.0.0.1:{port}", timeout=30) as admin:
            return admin.describe()


async def load(port: int, batch: int, concurrency: int, seconds: float) -> dict:
    frame = bytearray(produce_frame(batch))
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent: list[tuple[int, float]] = []
    lat: list[float] = []
    committed = 0
    errors = 0
    corr = 0
    stop_at = time.perf_counter() + seconds

    def send() -> None:
        nonlocal corr
        corr += 1
        struct.pack_into(">i", frame, 8, corr)
        writer.write(frame)
        sent.append((corr, time.perf_counter()))

    t0 = time.perf_counter()
    for _ in range(concurrency):
        send()
    head = 0
    while head < len(sent):
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        data = await reader.readexactly(size)
        cid, t = sent[head]
        head += 1
        now = time.perf_counter()
        _, resp = decode_response(ApiKey.PRODUCE, PRODUCE_VERSION, data)
        part = resp["Responses"][0]["PartitionResponses"][0]
        if part["ErrorCode"] == 0:
            committed += batch
            lat.append(now - t)
        else:
            errors += 1
        if now < stop_at:
            send()
    elapsed = time.perf_counter() - t0
    writer.close()
    lat.sort()
    return {"committed": committed, "errors": errors, "seconds": elapsed,
            "p50_ms": 1000 * lat[len(lat) // 2] if lat else None,
            "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else None}


def try_append(ports: list[int], frame: bytes) -> bool:
    for port in ports:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
                s.settimeout(3.0)
                s.sendall(frame)
                size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
                data = s.recv(size, socket.MSG_WAITALL)
            _, resp = decode_response(ApiKey.PRODUCE, PRODUCE_VERSION, data)
            if resp["Responses"][0]["PartitionResponses"][0]["ErrorCode"] == 0:
                return True
        except (OSError, struct.error, ValueError, Exception):
            continue
    return False


def failover(q: KraftkitQuorum, rounds: int) -> list[float]:
    out = []
    frame = produce_frame(1)
    for _ in range(rounds):
        d = q.describe()
        leader = d["leader_id"]
        survivors = [q.ports[i] for i in q.ports if i != leader]
        t0 = time.perf_counter()
        q.kill(leader)
        while not try_append(survivors, frame):
            time.sleep(0.005)
        out.append(time.perf_counter() - t0)
        q.start(leader)
        hw = q.describe()["high_watermark"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            d = q.describe()
            if all(v["log_end_offset"] >= hw for v in d["voters"]):
                break
            time.sleep(0.1)
    return out


def pysyncobj_run(batch: int, concurrency: int, seconds: float, journal: bool, period: float | None = None) -> dict:
    ports = benchlib.free_ports(3)
    addrs = [f"127.0.0.1:{p}" for p in ports]
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, me in enumerate(addrs):
            args = [sys.executable, str(HERE / "_pysyncobj_node.py"), "--me", me,
                    "--partners", ",".join(a for a in addrs if a != me), "--seconds", str(seconds),
                    "--concurrency", str(batch * concurrency), "--size", str(RECORD_BYTES), "--linger", "2"]
            if period is not None:
                args += ["--period", str(period)]
            if journal:
                os.makedirs(f"{tmp}/n{i}")
                args += ["--journal", f"{tmp}/n{i}"]
            procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        result = None
        for p in procs:
            out, _ = p.communicate(timeout=seconds + 90)
            for line in out.splitlines():
                if line.startswith("{"):
                    result = json.loads(line)
    if result is None:
        raise RuntimeError("PySyncObj: no leader ran the load")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=4.0, help="per measurement")
    ap.add_argument("--failovers", type=int, default=3)
    ap.add_argument("--configs", default="1x1,1x32,10x32,100x32", help="BATCHxCONCURRENCY,...")
    ap.add_argument("--no-pysyncobj", action="store_true")
    a = ap.parse_args()
    configs = [tuple(int(x) for x in c.split("x")) for c in a.configs.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        q = KraftkitQuorum(Path(tmp))
        try:
            for i in q.ports:
                q.start(i)
            d = q.describe()
            for batch, conc in configs:
                r = asyncio.run(load(q.ports[d["leader_id"]], batch, conc, a.seconds))
                rows.append({"system": "kraftkit (fsync)", "batch": batch, "concurrency": conc, **r})
            fo = failover(q, a.failovers) if a.failovers else []
        finally:
            q.stop()
    if not a.no_pysyncobj:
        variants = [("PySyncObj (memory)", False, None), ("PySyncObj (memory, 5 ms period)", False, 0.005),
                    ("PySyncObj (journal, no fsync)", True, None)]
        for batch, conc in configs:
            for name, journal, period in variants:
                r = pysyncobj_run(batch, conc, a.seconds, journal, period)
                rows.append({"system": name, "batch": batch, "concurrency": conc, **r})
    print(f"{'system':<32} {'records in flight':>17} {'records/s':>11} {'p50 ms':>8} {'p99 ms':>8} {'kraftkit x':>10}")
    for r in rows:
        rate = r["committed"] / r["seconds"]
        r["records_per_s"] = rate
        mine = next(x for x in rows if x["system"].startswith("kraftkit") and (x["batch"], x["concurrency"]) ==
                    (r["batch"], r["concurrency"]))
        ratio = (mine["committed"] / mine["seconds"]) / rate if rate else float("inf")
        flight = f"{r['batch']}x{r['concurrency']}" if r["system"].startswith("kraftkit") else f"{r['batch'] * r['concurrency']}"
        p50 = f"{r['p50_ms']:.2f}" if r["p50_ms"] is not None else "-"
        p99 = f"{r['p99_ms']:.2f}" if r["p99_ms"] is not None else "-"
        print(f"{r['system']:<32} {flight:>17} {rate:>11,.0f} {p50:>8} {p99:>8} "
              f"{'' if r['system'].startswith('kraftkit') else f'{ratio:.1f}x':>10}")
    if fo:
        print(f"kraftkit failover after SIGKILL of the leader (Kafka's default timeouts): "
              + ", ".join(f"{x * 1000:.0f} ms" for x in fo) + f"; worst {max(fo) * 1000:.0f} ms")
    print(json.dumps({"rows": rows, "failover_s": fo}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
