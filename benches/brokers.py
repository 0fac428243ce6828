#!/usr/bin/env python
"""Real Kafka brokers on a kraftkit controller quorum against the same brokers on Kafka's own
controllers: three ``kraftkit controller run`` processes, then a real Kafka three-controller quorum
(``process.roles=controller``), each with the same two real Kafka brokers (``process.roles=broker``,
the same version) and the same clients, one after the other in the same run.

    .venv/bin/python benches/brokers.py                       # 1,000 topics x 10 partitions (~5 min)
    .venv/bin/python benches/brokers.py --topics 200 --records 100000
    .venv/bin/python benches/run.py --suites brokers          # the same rows in the suite table

Measured, in order, on each side:

* **topic creation**: ``--topics`` topics of ``--partitions`` partitions, replication factor 2, created
  with Kafka's Admin client in requests of ``--batch`` topics, one after the other (each answered
  once the controller committed it): the time from the first request to the last answer;
* **produce**: Kafka's ``kafka-producer-perf-test`` writes ``--records`` records of 100 bytes with
  ``acks=all`` and the idempotent producer to a topic of 10 partitions on both brokers: its
  records/s (the controller is off this path: the target is equality within noise);
* **failover**: ``kill -9`` of the first broker; a watcher (Kafka's Admin client on the second
  broker, describing 20 topics of 10 partitions every 20 ms) sees the killed broker lead no
  partition any more: the time from the kill. Both controllers fence on the broker's session
  timeout (``broker.session.timeout.ms``, Kafka's default 9000 on both), so most of it is that timeout;
  what differs is how fast the fencing and the leaderships' moves are written and reach the broker.

Targets: creation and failover at least as fast as Kafka's controller (kraftkit's time <= Kafka's);
produce throughput within 10% of it. The load average is printed with each side.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(HERE), str(REPO)):
    if p not in sys.path:
        sys.path.insert(0, p)

import benchlib  # noqa: E402
from benchlib import Row  # noqa: E402
from controller import KraftkitControllers  # noqa: E402

S = "brokers"
M_CREATE = "topic creation"
M_PRODUCE = "produce, acks=all"
M_FAILOVER = "kill -9 of a broker to its leaderships moved"
SESSION_MS = 9000


def _broker_class():
    from tests.harness.node import KafkaNode, free_port

    class Broker(KafkaNode):
        """A ``process.roles=broker`` node whose controllers are ``voters``."""

        def __init__(self, workdir: Path, version: str, voters: str, node_id: int, cluster_id: str) -> None:
            super().__init__(workdir, version, cluster_id=cluster_id, start_timeout=180, stop_timeout=60)
            self.node_id = node_id
            self.voters = voters

        def _ensure_ports(self) -> None:
            if not self.broker_port:
                self.broker_port = free_port()

        def properties(self) -> dict[str, object]:
            props = super().properties()
            props.update({
                "process.roles": "broker",
                "node.id": self.node_id,
                "listeners": f"PLAINTEXT://127.0.0.1:{self.broker_port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.broker_port}",
                "controller.quorum.voters": self.voters,
            })
            return props

    return Broker


def _client(version: str):
    from tests.harness import tools

    classes = tools.compile_java(version, HERE / "BrokersBench.java", "brokers-bench")
    if classes is None:
        raise SystemExit("benches/brokers.py needs javac (a JDK)")
    return classes


def _java(version: str, classes: Path, args: list[str]) -> list[str]:
    from tests.harness import jars, tools

    return [jars.require_java(), *tools.TOOL_JVM_OPTS, "-cp", f"{classes}{os.pathsep}{jars.classpath(version)}",
            "BrokersBench", *map(str, args)]


def measure_side(name: str, version: str, voters: str, cluster_id: str, root: Path, a, log) -> dict:
    """The three measures with two brokers on the controllers of ``voters`` (already running)."""
    from tests.harness import tools

    classes = _client(version)
    broker_cls = _broker_class()
    brokers = [broker_cls(root / f"broker{b}", version, voters, b, cluster_id) for b in (101, 102)]
    out: dict = {"loadavg_start": os.getloadavg()}
    try:
        for b in brokers:
            b.launch()
        for b in brokers:
            b.wait_ready()
        b1, b2 = brokers
        log(f"  {name}: creating {a.topics} topics x {a.partitions} partitions")
        proc = subprocess.run(_java(version, classes, ["create", b1.bootstrap, "bench", a.topics, a.partitions, 2,
                                                       a.batch]),
                              capture_output=True, text=True, timeout=1800, check=True)
        out["create_s"] = float(proc.stdout.split()[-1]) / 1000
        subprocess.run(_java(version, classes, ["create", b1.bootstrap, "fail", 20, 10, 2, 20]), capture_output=True,
                       text=True, timeout=600, check=True)
        subprocess.run(_java(version, classes, ["create", b1.bootstrap, "perf", 1, 10, 2, 1]), capture_output=True,
                       text=True, timeout=600, check=True)
        # both brokers lead and follow every partition of it before the producer starts (a producer that
        # starts while one broker has not applied the topic yet retries, and its idempotent sequence with it)
        from tests.kafka.test_broker_failover_on_kraftkit import describe

        deadline = time.monotonic() + 120
        while not all(len(d := describe(b.bootstrap, "perf0")) == 10 and all(len(v[2]) == 2 for v in d.values())
                      for b in brokers):
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: perf0 never showed on both brokers")
            time.sleep(0.5)
        log(f"  {name}: producing {a.records} records")
        text = tools.producer_perf(version, b1.bootstrap, "perf0", num_records=a.records, record_size=100,
                                   producer_props={"acks": "all", "enable.idempotence": "true"}, timeout=1800)
        m = re.search(r"(\d+) records sent, ([\d.]+) records/sec", text.strip().splitlines()[-1])
        if m is None:
            raise SystemExit(f"producer-perf-test printed no summary:\n{text[-2000:]}")
        out["produce_rps"] = float(m.group(2))
        log(f"  {name}: kill -9 of broker 101")
        watcher = subprocess.Popen(_java(version, classes, ["watch", b2.bootstrap, "fail", 101]),
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = watcher.stdout.readline()
            if not line.startswith("ready"):
                raise SystemExit(f"the watcher did not start: {line!r}")
            out["failover_partitions"] = int(line.split()[1])
            killed_at = time.time()
            b1.kill()
            moved = watcher.stdout.readline().strip()
            out["failover_s"] = int(moved) / 1000 - killed_at
        finally:
            watcher.kill()
            watcher.wait()
            watcher.stdout.close()
    finally:
        for b in brokers:
            b.stop()
    out["loadavg_end"] = os.getloadavg()
    return out


def run_all(a, log=print) -> tuple[list[Row], dict]:
    from tests.harness import jars
    from tests.harness.quorum import KafkaQuorum

    version = a.kafka_version or jars.KAFKA_4
    jars.ensure_kafka(version)
    results: dict = {}
    prev = os.sched_getaffinity(0)
    os.sched_setaffinity(0, benchlib.ALL_CPUS)
    try:
        with tempfile.TemporaryDirectory(prefix="kraftkit-bench-brokers-") as tmp_dir:
            tmp = a.work_dir or tmp_dir
            q = KraftkitControllers(Path(tmp) / "kraftkit", version)
            log("  kraftkit: 3 controllers (kraftkit controller run), 2 Kafka brokers")
            q.start()
            try:
                results["kraftkit"] = measure_side("kraftkit", version, q.voters, q.cluster_id, Path(tmp) / "kk", a,
                                                   log)
            finally:
                q.stop()
            if not a.no_kafka:
                log(f"  Kafka {version}: 3 controllers (process.roles=controller), 2 Kafka brokers")
                kq = KafkaQuorum(Path(tmp) / "kafka", version, broker=False,
                                 extra_props={"broker.session.timeout.ms": SESSION_MS})
                kq.start()
                try:
                    results["kafka"] = measure_side("Kafka", version, kq.voters, kq.cluster_id, Path(tmp) / "kb", a,
                                                    log)
                finally:
                    kq.stop()
    finally:
        os.sched_setaffinity(0, prev)
    rows: list[Row] = []
    ds = f"{a.topics:,} topics x {a.partitions}"
    for side, impl, ref in (("kraftkit", "kraftkit controllers", True), ("kafka", f"Kafka {version} controllers",
                                                                         False)):
        res = results.get(side)
        if not res:
            continue
        rows.append(Row(S, ds, M_CREATE, impl, a.topics * a.partitions, 0, res["create_s"], res["create_s"],
                        is_ref=ref))
        rows.append(Row(S, ds, M_PRODUCE, impl, res["produce_rps"], 0, 1.0, 1.0, is_ref=ref))
        rows.append(Row(S, ds, M_FAILOVER, impl, 1, 0, res["failover_s"], res["failover_s"], is_ref=ref,
                        note=f"{res['failover_partitions']} leaderships watched"))
    return rows, {"brokers": {**results, "version": version}}


def _value(r: Row) -> str:
    if r.mode == M_PRODUCE:
        return f"{benchlib.fmt_rate(r.records)} records/s"
    if r.mode == M_CREATE:
        return f"{r.best_s:.2f} s ({benchlib.fmt_rate(r.rec_per_s)} partitions/s)"
    return f"{r.best_s:.2f} s"


def _ratio(r: Row) -> str:
    return "ref" if r.is_ref else ("" if r.ratio is None else f"{r.ratio:.2f}x")


def print_table(rows: list[Row]) -> str:
    rows = [r for r in rows if r.suite == S]
    if not rows:
        return ""
    out = ["== 7. Real brokers on kraftkit's controllers vs Kafka's ('kraftkit x' = Kafka's time / kraftkit's, "
           "kraftkit's rate / Kafka's) =="]
    order = {m: i for i, m in enumerate([M_CREATE, M_PRODUCE, M_FAILOVER])}
    rows = sorted(rows, key=lambda r: (order.get(r.mode, 9), not r.is_ref))
    out.append(benchlib.table(rows, ["topics", "measure", "implementation", "value", "kraftkit x", "detail"],
                              lambda r: [r.dataset, r.mode, r.impl, _value(r), _ratio(r), r.note]))
    out.append("")
    return "\n".join(out)


def targets(rows: list[Row]) -> list[dict]:
    res = []
    for r in rows:
        if r.suite != S or r.is_ref or r.ratio is None:
            continue
        if r.mode == M_PRODUCE:
            res.append({"target": "produce throughput within 10% of Kafka's controllers'", "dataset": r.dataset,
                        "value": f"{r.ratio:.2f}x", "met": r.ratio >= 0.9})
        else:
            res.append({"target": f"{r.mode}: at least as fast as Kafka's controller", "dataset": r.dataset,
                        "value": f"{r.ratio:.2f}x", "met": r.ratio >= 1.0})
    return res


def describe(extra: dict) -> str:
    b = extra.get("brokers") or {}
    parts = []
    for side in ("kraftkit", "kafka"):
        res = b.get(side)
        if res:
            parts.append(f"{side} {res['loadavg_start'][0]:.1f} -> {res['loadavg_end'][0]:.1f}")
    return f"brokers suite (Kafka {b.get('version')} brokers and clients): load average " + ", ".join(parts)


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topics", type=int, default=1000, help="topics to create (default 1000)")
    p.add_argument("--partitions", type=int, default=10, help="partitions of each (default 10)")
    p.add_argument("--batch", type=int, default=100, help="topics per CreateTopics request (default 100)")
    p.add_argument("--records", type=int, default=500_000, help="records the producer writes (default 500k)")
    p.add_argument("--kafka-version", default=None, help="brokers, clients and Kafka's controllers (default 4.3.1)")
    p.add_argument("--no-kafka", action="store_true", help="kraftkit's side only")
    p.add_argument("--work-dir", metavar="DIR", help="keep the nodes' directories and logs here (default: a temporary one)")
    p.add_argument("--json", metavar="PATH")
    return p.parse_args(argv)


def main(argv=None) -> int:
    return benchlib.suite_main(parse(argv), sys.modules[__name__])


if __name__ == "__main__":
    sys.exit(main())
