"""One PySyncObj node for benches/quorum.py (run as a subprocess; not a test).

Every node replicates a list of byte strings through a ``@replicated`` append. The node that is
leader once the cluster is up runs the load: ``--concurrency`` commands in flight, each callback
issuing the next, for ``--seconds``; it prints one JSON line (commands committed, latencies).
``--journal DIR`` stores the log in PySyncObj's journal file (written through mmap, never fsynced)
instead of in memory.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from pysyncobj import SyncObj, SyncObjConf, replicated


class Store(SyncObj):
    def __init__(self, me: str, partners: list[str], conf: SyncObjConf) -> None:
        super().__init__(me, partners, conf)
        self.items = 0

    @replicated
    def append(self, value: bytes) -> int:
        self.items += 1
        return self.items


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--me", required=True)
    p.add_argument("--partners", required=True)
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--journal", default=None)
    p.add_argument("--linger", type=float, default=0.0, help="stay up this long after the load (followers)")
    p.add_argument("--period", type=float, default=None, help="appendEntriesPeriod in seconds (PySyncObj's default 0.1)")
    a = p.parse_args()
    tuning = {} if a.period is None else {"appendEntriesPeriod": a.period}
    conf = SyncObjConf(journalFile=f"{a.journal}/journal.bin" if a.journal else None, dynamicMembershipChange=False,
                       **tuning)
    obj = Store(a.me, a.partners.split(","), conf)
    deadline = time.monotonic() + 30
    while obj._getLeader() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    if not obj._isLeader():
        time.sleep(a.seconds + a.linger)
        obj.destroy()
        return 0
    value = b"x" * a.size
    lat: list[float] = []
    done = 0
    errors = 0
    lock = threading.Lock()
    stop_at = time.monotonic() + a.seconds
    finished = threading.Event()
    inflight = [0]

    def issue() -> None:
        t0 = time.perf_counter()

        def cb(result, err, t0=t0) -> None:
            nonlocal done, errors
            with lock:
                if err == 0:
                    done += 1
                    lat.append(time.perf_counter() - t0)
                else:
                    errors += 1
                inflight[0] -= 1
                again = time.monotonic() < stop_at
                if again:
                    inflight[0] += 1
                elif inflight[0] == 0:
                    finished.set()
            if again:
                issue()

        obj.append(value, callback=cb)

    t_start = time.perf_counter()
    with lock:
        inflight[0] = a.concurrency
    for _ in range(a.concurrency):
        issue()
    finished.wait(a.seconds + 30)
    elapsed = time.perf_counter() - t_start
    lat.sort()
    print(json.dumps({"committed": done, "errors": errors, "seconds": elapsed,
                      "p50_ms": 1000 * lat[len(lat) // 2] if lat else None,
                      "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else None}), flush=True)
    time.sleep(a.linger)
    obj.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
