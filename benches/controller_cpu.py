#!/usr/bin/env python
"""Where a kraftkit controller's time per heartbeat goes: three ``kraftkit controller run``
processes, the controller suite's load generator (``_controller_load.LoadGen``, 1,000 brokers
registered and unfenced) in this process, pinned to the last core at nice -10 as the suite pins
it; then one open-loop step per rate. Each step prints the heartbeats answered per second, p50,
p99 and max latency, the active node's CPU (``/proc/PID/stat``: user + system, as a share of a
core and per heartbeat answered) and how long it was runnable but waiting for a CPU
(``/proc/PID/schedstat``: other tenants of the machine). No Kafka, no bisection: for profiling and
A/B comparisons of kraftkit's own code (the suite, ``controller.py``, compares with Kafka).

    .venv/bin/python benches/controller_cpu.py --rates 10000,20000,30000,45000 --seconds 4
    .venv/bin/python benches/controller_cpu.py --rates 15000 --seconds 8 --py-spy /tmp/hb.txt

``--py-spy FILE`` records the active node during each step (``py-spy record --format raw``;
py-spy is not a dependency: ``pip install py-spy``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
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
from _controller_load import LoadGen  # noqa: E402
from controller import KraftkitControllers, _raise_nofile  # noqa: E402


def _proc(pid: int | str) -> tuple[float, float, float]:
    """(CPU seconds, seconds run, seconds waited runnable) of a process."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    run, wait, _slices = (int(x) for x in Path(f"/proc/{pid}/schedstat").read_text().split())
    return cpu, run / 1e9, wait / 1e9


def _py_spy() -> str:
    beside = Path(sys.executable).parent / "py-spy"  # (a virtualenv's, when its bin is not on PATH)
    return str(beside) if beside.exists() else shutil.which("py-spy") or "py-spy"


def _q(lat: list[float], p: float) -> float | None:
    lat = sorted(lat)
    return round(1000 * lat[min(len(lat) - 1, int(len(lat) * p))], 2) if lat else None


async def _steps(q: KraftkitControllers, rates: list[float], seconds: float, brokers: int, spy: str | None) -> None:
    gen = LoadGen([("127.0.0.1", p) for p in q.ports.values()], q.cluster_id, brokers=brokers,
                  log=lambda m="": print(m, file=sys.stderr))
    try:
        await gen.setup()
        await gen.register_all()
        await gen.unfence_all()
        pid = q.procs[gen.active_id].pid
        for i, rate in enumerate(rates):
            prof = None
            if spy:
                out = spy if len(rates) == 1 else f"{spy}.{i}"
                prof = subprocess.Popen([_py_spy(), "record", "-p", str(pid), "-d",
                                         str(max(1, int(seconds))), "-r", "200", "-f", "raw", "-o", out, "--nonblocking"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            st = gen.set_rate(rate, open_loop=True)
            srv0, gen0, t0 = _proc(pid), _proc("self"), time.perf_counter()
            await asyncio.sleep(seconds)
            srv1, gen1, dt = _proc(pid), _proc("self"), time.perf_counter() - t0
            answered_in_step = st.ok
            gen.set_rate(brokers / gen.interval, open_loop=False)
            drained = await gen.drain(30)
            if prof is not None:
                prof.wait()
            cpu = (srv1[0] - srv0[0]) / dt
            print(json.dumps({
                "offered_per_s": rate, "answered_per_s": round(answered_in_step / dt), "sent": st.sent,
                "answered": st.ok, "drained": drained, "errors": {str(k): v for k, v in st.errors.items()},
                "p50_ms": _q(st.lat, 0.5), "p99_ms": _q(st.lat, 0.99),
                "max_ms": round(1000 * max(st.lat), 2) if st.lat else None,
                "server_cpu": round(cpu, 3),
                "server_us_per_heartbeat": round(1e6 * cpu / (answered_in_step / dt), 1) if answered_in_step else None,
                "server_waiting_for_cpu": round((srv1[2] - srv0[2]) / dt, 3),
                "generator_cpu": round((gen1[0] - gen0[0]) / dt, 3),
                "loadavg": os.getloadavg()[0],
            }), flush=True)
            await asyncio.sleep(1.0)
    finally:
        await gen.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rates", default="10000,20000,30000", help="offered heartbeats/s, one step each")
    p.add_argument("--seconds", type=float, default=4.0, help="seconds per step (default 4)")
    p.add_argument("--brokers", type=int, default=1000)
    p.add_argument("--py-spy", metavar="FILE", help="record the active node with py-spy (raw format)")
    a = p.parse_args(argv)
    from tests.harness import jars

    _raise_nofile()
    with tempfile.TemporaryDirectory(prefix="kraftkit-bench-controller-cpu-") as tmp:
        q = KraftkitControllers(Path(tmp), jars.KAFKA_4)
        q.start()  # (the servers see every core)
        try:
            os.sched_setaffinity(0, {max(benchlib.ALL_CPUS)})
            try:
                os.setpriority(os.PRIO_PROCESS, 0, -10)
            except OSError:
                pass
            asyncio.run(_steps(q, [float(r) for r in a.rates.split(",")], a.seconds, a.brokers, a.py_spy))
        finally:
            q.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
