#!/usr/bin/env python
"""Broker registrations and heartbeats against a KRaft controller quorum: kraftkit's three
``kraftkit controller run`` processes against a real Kafka 4.3.1 three-controller quorum, one
after the other in the same run, driven by the same load generator.

    .venv/bin/python benches/controller.py                  # 1,000 brokers, both quorums (~4 min)
    .venv/bin/python benches/controller.py --brokers 200 --window 10 --probe-seconds 3
    .venv/bin/python benches/run.py --suites controller     # the same rows in the suite table

The load generator (``_controller_load.py``) is one asyncio process (pinned to one core at nice -10,
GC off, apart from the servers, which see every core) speaking the Kafka protocol with kraftkit's codec: it finds the active controller
(DescribeCluster, EndpointType 2), opens one connection per simulated broker to it (a Kafka
broker has one connection to the active controller; ApiVersions first), registers every broker
(BrokerRegistration as a Kafka 4.4 broker sends it: its supported features, one random log
directory, a PLAINTEXT listener) and heartbeats each one every 2 s (BrokerHeartbeat with
CurrentMetadataOffset = its broker epoch, i.e. caught up to its registration, WantFence false;
the next one only once the last is answered, as a broker does). Then, in order:

* registration: time from the first BrokerRegistration sent to the last one answered;
* unfencing: time until every broker's heartbeat answer says IsFenced false;
* steady state: heartbeats/s answered, p50/p99 latency (sent -> answered) over ``--window`` s;
* time to fence a silent broker: ``--fence`` brokers stop heartbeating, a second apart; the
  controller's metadata log (the active node's files, read as they grow) is polled for the
  BrokerRegistrationChangeRecord (or FenceBrokerRecord) fencing each one; the figure is that
  batch's append timestamp minus the broker's last heartbeat sent minus broker.session.timeout.ms;
* capacity: an open-loop probe raises the heartbeat rate (each broker's interval shrinks; a
  heartbeat goes out on schedule whether or not the last was answered) in steps of
  ``--probe-seconds``: 1k/s, doubling until a step fails (p99 over ``--p99-bound-ms``, an error,
  or an unanswered heartbeat; a failed step is tried once more, as another tenant of a shared
  machine can spoil one), then two bisections. The capacity is the highest rate that passed.
  A step where the generator itself fell behind (under 97% of the offered heartbeats sent, or its
  core 85% busy) is marked generator-bound.

broker.session.timeout.ms is Kafka's default 9000 on both (kraftkit's default too). kraftkit's
nodes run with ``--max-connections 5000 --max-connections-per-ip 5000`` (its defaults 1000 / 64 would
refuse 1,000 brokers from one address; Kafka's max.connections.per.ip is unlimited by default) and
``--log-level WARNING``; Kafka's with the test harness's settings (2 network and 2 I/O threads,
-Xmx768m, INFO logging to a file). Both quorums are formatted at Kafka 4.3.1's default
metadata.version (the finalized features both report are printed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
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
from _controller_load import GenError, run_load  # noqa: E402
from benchlib import Row  # noqa: E402

S = "controller"
M_REG = "register every broker (first sent -> last answered)"
M_UNFENCE = "unfence every broker (registered -> last unfenced)"
M_HB = "heartbeats/s answered, one per broker every 2 s"
M_P50 = "p50 heartbeat latency at that load"
M_P99 = "p99 heartbeat latency at that load"
M_CAP = "heartbeat capacity (open loop)"
M_FENCE = "silent broker fenced, from its last heartbeat"



# ---------------------------------------------------------------------------------- the servers
def _pin_generator() -> None:
    """The generator's core, and a higher priority than the servers' (when allowed): it is the
    measuring instrument, and its schedule should not wait behind a server sharing its core."""
    os.sched_setaffinity(0, {max(benchlib.ALL_CPUS)})
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    except OSError:
        pass


def _raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def loadgen_process(spec: dict, log=print) -> dict:
    """Runs the generator in its own process, pinned to one core; its JSON result."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--loadgen", json.dumps(spec)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None, text=True, preexec_fn=_pin_generator,
                       timeout=3600)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        raise GenError(f"load generator exited with {p.returncode}")
    return json.loads(lines[-1])


def _loadgen_main(spec: dict) -> int:
    import gc

    _raise_nofile()
    gc.disable()  # no collection pauses in the schedule (nothing the generator makes is cyclic)
    say = lambda m="": print(m, file=sys.stderr, flush=True)  # noqa: E731
    kw = dict(spec)
    kw["bootstrap"] = [tuple(x) for x in kw["bootstrap"]]
    kw["log_dirs"] = {int(k): Path(v) for k, v in kw.get("log_dirs", {}).items()}
    res = asyncio.run(run_load(log=say, **kw))
    res["generator_nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    res["generator_cpus"] = sorted(os.sched_getaffinity(0))
    print(json.dumps(res, default=str))
    return 0


class KraftkitControllers:
    """Three ``kraftkit controller run`` processes on storage formatted at ``release``'s default."""

    def __init__(self, root: Path, release: str) -> None:
        from kraftkit.features.storage.format import format_storage

        self.root = root
        self.cluster_id = "QmVuY2hDb250cm9sbGVyQQ"
        self.ports = dict(zip((1, 2, 3), benchlib.free_ports(3), strict=True))
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())
        self.procs: dict[int, subprocess.Popen] = {}
        for i in self.ports:
            format_storage([root / f"node{i}"], cluster_id=self.cluster_id, node_id=i, release_version=release,
                           no_initial_controllers=True)

    def log_dir(self, i: int) -> Path:
        return self.root / f"node{i}" / "__cluster_metadata-0"

    def start(self) -> None:
        for i in self.ports:
            self.procs[i] = subprocess.Popen(
                [sys.executable, "-m", "kraftkit.cli.main", "controller", "run", "--node-id", str(i),
                 "--voters", self.voters, "--log-dir", str(self.root / f"node{i}"),
                 "--max-connections", "5000", "--max-connections-per-ip", "5000", "--log-level", "WARNING"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, preexec_fn=benchlib.unpin_child)
        for p in self.procs.values():
            line = p.stdout.readline()
            if not line:
                raise GenError(f"a kraftkit controller exited at start ({p.wait()})")
            json.loads(line)

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


def _rows(system: str, res: dict, ref: bool) -> list[Row]:
    ds = f"{res['brokers']:,} brokers"
    impl = system
    rows = []

    def add(mode: str, records: float, seconds: float, note: str = "") -> None:
        if seconds and seconds > 0:
            rows.append(Row(S, ds, mode, impl, records, 0, seconds, seconds, is_ref=ref, note=note))

    add(M_REG, res["brokers"], res["register"]["seconds"])
    add(M_UNFENCE, res["brokers"], res["unfence"]["seconds"])
    st = res["steady"]
    add(M_HB, st["answered"], st["seconds"], f"errors {st['errors'] or 0}, lost {st['lost']}")
    if st["p50_ms"] is not None:
        add(M_P50, 1, st["p50_ms"] / 1000)
        add(M_P99, 1, st["p99_ms"] / 1000)
    fenced = [f["after_last_heartbeat_ms"] for f in res.get("fence", []) if f["fenced"]]
    if fenced:
        after = [f["after_timeout_ms"] for f in res["fence"] if f["fenced"]]
        add(M_FENCE, 1, sorted(fenced)[len(fenced) // 2] / 1000,
            f"{len(fenced)}/{len(res['fence'])} fenced; after the timeout: " + ", ".join(f"{x:.0f}" for x in after) + " ms")
    pr = res.get("probe")
    if pr and pr["capacity"]:
        at = pr["at_capacity"]
        add(f"{M_CAP}, p99 <= {pr['p99_bound_ms']:.0f} ms", pr["capacity"], 1.0,
            f"p99 {at['p99_ms']:.1f} ms at it" + (", generator-bound: a lower bound" if pr["generator_bound"] else ""))
    return rows


def run_all(*, brokers: int = 1000, window: float = 20.0, fence: int = 3, probe_seconds: float = 5.0,
            p99_bound_ms: float = 50.0, probe_max: float = 64000.0, kafka_version: str | None = None,
            no_kafka: bool = False, log=print) -> tuple[list[Row], dict]:
    """Both quorums, one after the other; the rows and the raw results."""
    from tests.harness import jars

    version = kafka_version or jars.KAFKA_4
    session_ms = 9000
    prev = os.sched_getaffinity(0)
    os.sched_setaffinity(0, benchlib.ALL_CPUS)  # the servers (the JVMs inherit it) see every core
    _raise_nofile()
    spec = {"brokers": brokers, "window_s": window, "fence": fence, "session_timeout_ms": session_ms,
            "probe_seconds": probe_seconds, "p99_bound_ms": p99_bound_ms, "probe_max": probe_max}
    results: dict = {"loadavg": {}}
    rows: list[Row] = []
    try:
        with tempfile.TemporaryDirectory(prefix="kraftkit-bench-controller-") as tmp:
            log(f"  kraftkit: 3 controllers (kraftkit controller run), {brokers} brokers")
            results["loadavg"]["kraftkit_start"] = os.getloadavg()
            q = KraftkitControllers(Path(tmp) / "kraftkit", version)
            try:
                q.start()
                res = loadgen_process({**spec, "bootstrap": [("127.0.0.1", p) for p in q.ports.values()],
                                       "cluster_id": q.cluster_id,
                                       "log_dirs": {i: str(q.log_dir(i)) for i in q.ports}}, log)
            finally:
                q.stop()
            results["kraftkit"] = res
            rows += _rows("kraftkit controller (Python)", res, True)
            results["loadavg"]["kraftkit_end"] = os.getloadavg()
            if not no_kafka:
                from tests.harness.quorum import KafkaQuorum

                log(f"  Kafka {version}: 3 controllers (process.roles=controller), {brokers} brokers")
                results["loadavg"]["kafka_start"] = os.getloadavg()
                kq = KafkaQuorum(Path(tmp) / "kafka", version, broker=False,
                                 extra_props={"broker.session.timeout.ms": session_ms,
                                              "broker.heartbeat.interval.ms": 2000})
                try:
                    kq.start()
                    res = loadgen_process({**spec, "bootstrap": [("127.0.0.1", p) for p in kq.controller_ports.values()],
                                           "cluster_id": kq.cluster_id,
                                           "log_dirs": {i: str(kq.metadata_log_dir(i)) for i in kq.nodes}}, log)
                finally:
                    kq.stop()
                    shutil.rmtree(Path(tmp) / "kafka", ignore_errors=True)
                results["kafka"] = res
                rows += _rows(f"Kafka {version} controller (JVM)", res, False)
                results["loadavg"]["kafka_end"] = os.getloadavg()
    finally:
        os.sched_setaffinity(0, prev)
    return rows, {"controller": results}


# ---------------------------------------------------------------------------------- the table
def _value(r: Row) -> str:
    if r.mode in (M_P50, M_P99):
        return f"{r.best_s * 1e3:.2f} ms"
    if r.mode == M_FENCE:
        return f"{r.best_s:.3f} s"
    if r.mode in (M_REG, M_UNFENCE):
        return f"{r.best_s:.2f} s ({benchlib.fmt_rate(r.rec_per_s)}/s)"
    return f"{benchlib.fmt_rate(r.rec_per_s)}/s"


def _ratio(r: Row) -> str:
    if r.is_ref:
        return "ref"
    return "" if r.ratio is None else f"{r.ratio:.2f}x"


def print_table(rows: list[Row]) -> str:
    rows = [r for r in rows if r.suite == S]
    if not rows:
        return ""
    out = ["== 6. KRaft controller: broker registrations and heartbeats ('kraftkit x' = kraftkit's rate / this "
           "rate, or this time / kraftkit's time; servers on every core, the load generator pinned to one) =="]
    order = {m: i for i, m in enumerate([M_REG, M_UNFENCE, M_HB, M_P50, M_P99, M_FENCE])}
    rows = sorted(rows, key=lambda r: (order.get(r.mode, 99), not r.is_ref))
    out.append(benchlib.table(rows, ["brokers", "measure", "implementation", "value", "kraftkit x", "detail"],
                              lambda r: [r.dataset, r.mode, r.impl, _value(r), _ratio(r), r.note]))
    out.append("")
    return "\n".join(out)


def targets(rows: list[Row]) -> list[dict]:
    res = []
    for r in rows:
        if r.suite == S and not r.is_ref and r.mode.startswith(M_CAP) and r.ratio is not None:
            res.append({"target": "heartbeat capacity >= Kafka's at equal p99", "dataset": r.dataset,
                        "value": f"{r.ratio:.2f}x", "met": r.ratio >= 1.0})
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--brokers", type=int, default=1000, help="simulated brokers (default 1000)")
    p.add_argument("--window", type=float, default=20.0, help="steady-state window, seconds (default 20)")
    p.add_argument("--fence", type=int, default=3, help="brokers silenced to time their fencing (default 3)")
    p.add_argument("--probe-seconds", type=float, default=5.0, help="seconds per capacity-probe step (default 5)")
    p.add_argument("--p99-bound-ms", type=float, default=50.0, help="the capacity probe's p99 bound (default 50)")
    p.add_argument("--probe-max", type=float, default=64000.0, help="the probe's highest rate (default 64000/s)")
    p.add_argument("--kafka-version", default=None)
    p.add_argument("--no-kafka", action="store_true")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--loadgen", metavar="SPEC", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.loadgen:
        return _loadgen_main(json.loads(a.loadgen))
    say = lambda m="": print(m, file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.perf_counter()
    load0 = os.getloadavg()
    rows, extra = run_all(brokers=a.brokers, window=a.window, fence=a.fence, probe_seconds=a.probe_seconds,
                          p99_bound_ms=a.p99_bound_ms, probe_max=a.probe_max, kafka_version=a.kafka_version,
                          no_kafka=a.no_kafka, log=say)
    benchlib.finalize(rows)
    print(describe(extra, load0))
    print()
    print(print_table(rows))
    benchlib.print_targets(rows, targets(rows), t0, a.json, extra)
    return 0


def describe(extra: dict, load0: tuple | None = None) -> str:
    c = extra.get("controller") or {}
    la = c.get("loadavg", {})
    parts = [f"{k.replace('_', ' ')} {v[0]:.1f}" for k, v in la.items()]
    lines = ["controller suite: load average " + ", ".join(parts)]
    if load0 is not None:
        lines[0] = f"controller suite: load average {load0[0]:.1f} at start; " + ", ".join(parts)
    for name in ("kraftkit", "kafka"):
        res = c.get(name)
        if res:
            s = res["setup"]
            lines.append(f"  {name}: finalized {s['finalized']}; BrokerRegistration v{s['versions']['BrokerRegistration']}, "
                         f"BrokerHeartbeat v{s['versions']['BrokerHeartbeat']}; generator {res['generator_cpu_s']:.0f} "
                         f"cpu s in {res['generator_wall_s']:.0f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
