"""Timing, CPU pinning and result rows shared by the suites."""

from __future__ import annotations

import gc
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

ALL_CPUS: set[int] = set(os.sched_getaffinity(0))


def pin_to_one_core() -> int:
    """Pins this process (and threads it starts later, e.g. rayon's pool) to one CPU."""
    cpu = max(ALL_CPUS)
    os.sched_setaffinity(0, {cpu})
    return cpu


def unpin_child() -> None:
    """``preexec_fn`` for subprocesses that should see every core (a user's real process)."""
    os.sched_setaffinity(0, ALL_CPUS)


@dataclass
class Timing:
    best: float
    median: float
    runs: list[float]
    result: object = None


def measure(fn: Callable[[], object], *, warmup: int = 1, repeat: int = 3, max_seconds: float | None = None) -> Timing:
    """Best-of-``repeat`` wall time of ``fn()`` (perf_counter) after ``warmup`` untimed calls.

    The GC is disabled while timing (and collected before each run) so a collection that
    happens to land in one library's run does not skew it. ``max_seconds`` stops repeating
    early once that much time was spent (at least one timed run always happens).
    """
    result = None
    for _ in range(warmup):
        result = fn()
    runs = []
    spent = 0.0
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            result = fn()
            dt = time.perf_counter() - t0
        finally:
            gc.enable()
        runs.append(dt)
        spent += dt
        if max_seconds is not None and spent > max_seconds:
            break
    s = sorted(runs)
    return Timing(best=s[0], median=s[len(s) // 2], runs=runs, result=result)


@dataclass
class Row:
    suite: str  # crc | decode | dump
    dataset: str
    mode: str  # what is measured, e.g. "scan", "offset+ts+key+value", "--deep-iteration"
    impl: str  # implementation label
    records: int
    bytes: int
    best_s: float
    median_s: float
    runs: list[float] = field(default_factory=list)
    is_ref: bool = False  # the kraftkit row its group's ratios are computed against
    note: str = ""
    ratio: float | None = None  # filled in by finalize(): ref rate / this rate

    @property
    def rec_per_s(self) -> float:
        return self.records / self.best_s if self.best_s > 0 else float("nan")

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.best_s / 1e6 if self.best_s > 0 else float("nan")

    @property
    def group(self) -> tuple[str, str, str]:
        return (self.suite, self.dataset, self.mode)

    def to_json(self) -> dict:
        d = asdict(self)
        d["records_per_s"] = self.rec_per_s
        d["mb_per_s"] = self.mb_per_s
        return d


def row(suite: str, dataset: str, mode: str, impl: str, records: int, nbytes: int, t: Timing, **kw) -> Row:
    return Row(suite=suite, dataset=dataset, mode=mode, impl=impl, records=records, bytes=nbytes,
               best_s=t.best, median_s=t.median, runs=[round(x, 6) for x in t.runs], **kw)


def finalize(rows: list[Row], group_key=lambda r: r.group) -> None:
    """Sets ``ratio`` = (reference kraftkit rate) / (this row's rate) within each group."""
    refs = {}
    for r in rows:
        if r.is_ref:
            refs[group_key(r)] = r
    for r in rows:
        ref = refs.get(group_key(r))
        if ref is not None and r.best_s > 0:
            # Rates per record when both count records, else per byte.
            if ref.records and r.records:
                r.ratio = ref.rec_per_s / r.rec_per_s
            else:
                r.ratio = ref.mb_per_s / r.mb_per_s


def fmt_rate(x: float) -> str:
    if x != x:  # nan
        return "-"
    if x >= 1e9:
        return f"{x / 1e9:.2f} G"
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


def fmt_mb(x: float) -> str:
    if x != x:
        return "-"
    if x >= 1000:
        return f"{x / 1000:.2f} GB/s"
    return f"{x:.1f} MB/s"


def table(rows: list[Row], headers: list[str], cells) -> str:
    data = [headers] + [cells(r) for r in rows]
    widths = [max(len(str(line[i])) for line in data) for i in range(len(headers))]
    right = [False, False, False] + [True] * (len(headers) - 3)

    def line(vals):
        out = []
        for i, v in enumerate(vals):
            v = str(v)
            out.append(v.rjust(widths[i]) if right[i] else v.ljust(widths[i]))
        return "  ".join(out).rstrip()

    sep = "  ".join("-" * w for w in widths)
    body = []
    prev = None
    for r, vals in zip(rows, data[1:]):
        key = (r.suite, r.dataset)
        if prev is not None and key != prev:
            body.append("")
        prev = key
        body.append(line(vals))
    return "\n".join([line(headers), sep, *body])


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1 (held open together while picked)."""
    import socket

    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def print_targets(rows: list[Row], targets: list[dict], t0: float, json_path: str | None, extra: dict) -> None:
    """The MET/MISS lines, the total time, and (with ``json_path``) every row, target and ``extra`` as JSON."""
    import json
    from pathlib import Path

    for t in targets:
        print(f"  [{'MET ' if t['met'] else 'MISS'}] {t['target']:<58} {t['dataset']:<11} {t['value']}")
    print(f"total time {time.perf_counter() - t0:.0f} s")
    if json_path:
        Path(json_path).write_text(json.dumps({"results": [r.to_json() for r in rows], "targets": targets, **extra},
                                              indent=1, default=str))
