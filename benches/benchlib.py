"""Timing, CPU pinning and result rows shared by the suites."""

from __future__ import annotations

import gc
import os
import sys
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


def measure_interleaved(fns: dict[str, Callable[[], object]], *, warmup: int = 1, repeat: int = 3) -> dict[str, Timing]:
    """``measure`` of several functions taking turns: round after round, each runs once (GC
    collected before, disabled during), and each gets its best of ``repeat``. On a shared machine
    a busy spell then lands on every function of a comparison rather than on whichever was
    measured while it lasted, so the ratios between them hold better than the rates."""
    results: dict[str, object] = {}
    for _ in range(warmup):
        for k, fn in fns.items():
            results[k] = fn()
    runs: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter()
                results[k] = fn()
                dt = time.perf_counter() - t0
            finally:
                gc.enable()
            runs[k].append(dt)
    out = {}
    for k, rs in runs.items():
        s = sorted(rs)
        out[k] = Timing(best=s[0], median=s[len(s) // 2], runs=rs, result=results.get(k))
    return out


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


def suite_main(a, suite) -> int:
    """A suite module run alone (``benches/<suite>.py``): its ``run_all(a, log)``, then what the main
    runner prints of it (``describe``, ``print_table``) and its targets (``targets``), progress on
    stderr; ``a.json`` names a file for every row, target and extra as JSON."""
    say = lambda m="": print(m, file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.perf_counter()
    rows, extra = suite.run_all(a, say)
    finalize(rows)
    print(suite.describe(extra))
    print()
    print(suite.print_table(rows))
    print_targets(rows, suite.targets(rows), t0, a.json, extra)
    return 0


def large_folio_share(paths: list[str]) -> float | None:
    """The share of the files' page-cache pages that belong to large folios (compound pages), or
    None when it cannot be read (``/proc/kpageflags`` needs root). Mapping a file costs the kernel
    per folio, so this decides what a mapped scan pays: a file written in small appends sits in
    4 KiB folios, one read back by readahead in large ones (benches/README.md, section 2)."""
    import mmap
    import struct

    compound = (1 << 15) | (1 << 16)  # KPF_COMPOUND_HEAD | KPF_COMPOUND_TAIL
    total = large = 0
    try:
        with open("/proc/self/pagemap", "rb") as pm, open("/proc/kpageflags", "rb") as kf:
            for p in paths:
                size = os.path.getsize(p)
                if size == 0:
                    continue
                with open(p, "rb") as f:
                    # a private map (ctypes needs it writable to give its address): reading it maps
                    # the page-cache pages themselves; nothing is written
                    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
                try:
                    m.madvise(getattr(mmap, "MADV_POPULATE_READ", 22))
                    addr = _mmap_address(m)
                    n = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
                    pm.seek(addr // mmap.PAGESIZE * 8)
                    entries = struct.unpack(f"{n}Q", pm.read(8 * n))
                    for e in entries:
                        pfn = e & ((1 << 55) - 1)
                        if not (e >> 63) or pfn == 0:
                            continue
                        kf.seek(pfn * 8)
                        (flags,) = struct.unpack("Q", kf.read(8))
                        total += 1
                        large += bool(flags & compound)
                finally:
                    m.close()
    except (OSError, ValueError):
        return None
    return large / total if total else None


def _mmap_address(m) -> int:
    import ctypes

    buf = (ctypes.c_char * 1).from_buffer(m)
    try:
        return ctypes.addressof(buf)
    finally:
        del buf


def set_page_cache(paths: list[str], state: str) -> None:
    """Puts the files' pages in the page cache in a known state (no root needed: dropping clean
    pages of a file one can read is allowed): ``readahead``, dropped and read back sequentially (as
    after a restart: the kernel's readahead makes large folios), or ``small``, dropped and read
    back 4 KiB at a time without readahead (as a file written in small appends: 4 KiB folios)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            step = 4096 if state == "small" else 1 << 20
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM if state == "small" else os.POSIX_FADV_SEQUENTIAL)
            off = 0
            while k := len(os.pread(fd, step, off)):
                off += k
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_NORMAL)
        finally:
            os.close(fd)
