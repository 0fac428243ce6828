"""The three suites: CRC verification, record decoding into Python objects, dump-log processes.

Each ``run_*`` function takes a dataset and returns ``Row``s. Every row of a suite/dataset/mode
group processes the same bytes (or a stated prefix of them, see ``note``), and the kraftkit
row marked ``is_ref`` is what the group's ratios are computed against.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

from benchlib import Row, Timing, measure, measure_interleaved, row, unpin_child
from datasets import Dataset

import kraftkit.log as kl

REPO = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------------------- peers


def load_peers() -> dict[str, object]:
    """Imports the peer libraries; a missing one is reported, not fatal."""
    peers: dict[str, object] = {}
    try:
        import crc32c

        peers["crc32c"] = crc32c
        peers["crc32c_version"] = getattr(crc32c, "__version__", "?")
        peers["crc32c_hw"] = bool(getattr(crc32c, "hardware_based", False))
    except ImportError:
        pass
    try:
        import aiokafka
        import aiokafka.record.default_records as adr
        from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords

        mod = adr.DefaultRecordBatch.__module__
        peers["aiokafka"] = AioMemoryRecords
        peers["aiokafka_version"] = aiokafka.__version__
        peers["aiokafka_batch_class"] = f"{mod}.{adr.DefaultRecordBatch.__name__}"
        peers["aiokafka_memory_records_class"] = f"{AioMemoryRecords.__module__}.{AioMemoryRecords.__name__}"
        # The Cython accelerator must be the one loaded, or we would compare with the
        # pure-Python fallback (~50x slower), which is not aiokafka's real speed.
        peers["aiokafka_cython"] = "_crecords" in mod and "_crecords" in AioMemoryRecords.__module__
    except ImportError:
        pass
    try:
        import kafka
        from kafka.record.memory_records import MemoryRecords as KPMemoryRecords

        peers["kafka-python"] = KPMemoryRecords
        peers["kafka-python_version"] = kafka.__version__
    except ImportError:
        pass
    return peers


def read_files(ds: Dataset) -> list[bytes]:
    return [Path(p).read_bytes() for p in ds.segments]


def prefix(ds: Dataset, max_bytes: int) -> tuple[bytes, int, int]:
    """The first whole batches of the first segment, up to ``max_bytes``: (bytes, records, batches)."""
    seg = kl.Segment(ds.segments[0])
    end = recs = nb = 0
    for b in seg.batches():
        if end and end + b.size_in_bytes > max_bytes:
            break
        end += b.size_in_bytes
        recs += b.count
        nb += 1
    return Path(ds.segments[0]).read_bytes()[:end], recs, nb


# ------------------------------------------------------------------------------- 2. CRC

# Batch header: baseOffset int64 @0, batchLength int32 @8, partitionLeaderEpoch @12,
# magic @16, crc uint32 @17; the CRC covers [21, 12 + batchLength).
_HDR = struct.Struct(">8xi5xI")


def run_crc(ds: Dataset, peers: dict, *, warmup: int, repeat: int, log=print) -> list[Row]:
    """Every implementation takes turns, round after round (``measure_interleaved``): the ratios
    of the targets (scan vs raw CRC, scan vs the crc32c loop) compare runs from the same moments."""
    rows: list[Row] = []
    paths = ds.segments
    n_rec, n_bytes = ds.records, ds.bytes
    S = "crc"
    verify = "verify every batch CRC"
    raw_mode = "raw CRC-32C, one call per file (upper bound)"

    def kk_scan():
        total = 0
        for p in paths:
            rep = kl.Segment(p).scan()
            if rep["error"] is not None:
                raise RuntimeError(rep["error"])
            total += rep["records"]
        return total

    def kk_verify():
        reps = kl.verify_segments(paths, check_indexes=False)
        for r in reps:
            if r["error"] is not None:
                raise RuntimeError(r["error"])
        return sum(r["records"] for r in reps)

    # (mode, impl, fn, expected result or None, is_ref, note)
    cases: list[tuple] = [
        (verify, "kraftkit Segment(p).scan()", kk_scan, n_rec, True,
         "mmap (populated in one call, truncation guarded) + header/offset checks + CRC of every batch, GIL released, 1 core"),
        (verify, "kraftkit verify_segments(paths) [1 core]", kk_verify, n_rec, False,
         "process pinned to one core, so rayon runs one thread"),
    ]

    # The peers verify what a Python program would: it reads each file (from the page cache,
    # as kraftkit's mmap does) and walks its batches. One ICRAR row on preloaded bytes too.
    crc_mod = peers.get("crc32c")
    datas = read_files(ds)
    if crc_mod is not None:
        crc = crc_mod.crc32c
        hdr = _HDR.unpack_from

        def icrar_walk_buf(buf) -> int:
            mv = memoryview(buf)
            n = len(buf)
            pos = nb = 0
            while pos < n:
                length, stored = hdr(buf, pos)
                end = pos + 12 + length
                if crc(mv[pos + 21:end]) != stored:
                    raise RuntimeError(f"CRC mismatch at {pos}")
                pos = end
                nb += 1
            return nb

        def icrar_walk_files():
            nb = 0
            for p in paths:
                with open(p, "rb") as f:
                    nb += icrar_walk_buf(f.read())
            return nb

        cases.append((verify, "crc32c (ICRAR) per batch, Python loop", icrar_walk_files, ds.batches, False,
                      "open+read() each file, then struct header read + crc32c(memoryview slice) + compare per batch"))
        cases.append((verify, "  same, bytes preloaded (read not timed)", lambda: sum(icrar_walk_buf(b) for b in datas),
                      ds.batches, False, "as above but the files were read into memory beforehand: the in-memory speed"))

    def file_bytes():
        for p in paths:
            with open(p, "rb") as f:
                yield f.read()

    aio = peers.get("aiokafka")
    if aio is not None:
        def aio_crc():
            nb = 0
            for buf in file_bytes():
                mr = aio(buf)
                while (b := mr.next_batch()) is not None:
                    if not b.validate_crc():
                        raise RuntimeError("aiokafka: CRC mismatch")
                    nb += 1
            return nb

        cases.append((verify, "aiokafka MemoryRecords + validate_crc() (Cython)", aio_crc, ds.batches, False,
                      "open+read() each file, then per batch"))

    kp = peers.get("kafka-python")
    if kp is not None:
        def kp_crc():
            nb = 0
            for buf in file_bytes():
                mr = kp(buf)
                while (b := mr.next_batch()) is not None:
                    if not b.validate_crc():
                        raise RuntimeError("kafka-python: CRC mismatch")
                    nb += 1
            return nb

        cases.append((verify, "kafka-python MemoryRecords + validate_crc()", kp_crc, ds.batches, False,
                      "open+read() each file; pure Python batch parsing, CRC by the crc32c package"))

    # Raw CRC kernels: one call over each whole file (upper bound, not a verification).
    cases.append((raw_mode, "kraftkit.log.crc32c(whole file)", lambda: [kl.crc32c(d) for d in datas], None, True,
                  "not a verification: the kernel alone"))
    if crc_mod is not None:
        cases.append((raw_mode, "crc32c (ICRAR) crc32c(whole file)", lambda: [crc_mod.crc32c(d) for d in datas], None,
                      False, "not a verification: the kernel alone"))

    ts = measure_interleaved({c[1]: c[2] for c in cases}, warmup=warmup, repeat=repeat)
    for mode, impl, _fn, expected, ref, note in cases:
        t = ts[impl]
        if expected is not None:
            assert t.result == expected, (impl, t.result, expected)
        t.result = None
        rows.append(row(S, ds.name, mode, impl, n_rec, n_bytes, t, is_ref=ref, note=note))
        log(f"    {impl:<48} {t.best * 1e3:9.1f} ms  {n_bytes / t.best / 1e9:6.2f} GB/s")
    return rows


def run_crc_all_cores(ds: Dataset, *, warmup: int, repeat: int, log=print) -> Row | None:
    """verify_segments with every core, in a child process that is not pinned."""
    code = (
        "import json,sys,time\n"
        "import kraftkit.log as kl\n"
        "paths=json.loads(sys.argv[1]); w,r=int(sys.argv[2]),int(sys.argv[3])\n"
        "f=lambda: kl.verify_segments(paths, check_indexes=False)\n"
        "[f() for _ in range(w)]\n"
        "ts=[]\n"
        "for _ in range(r):\n"
        "    t=time.perf_counter(); rep=f(); ts.append(time.perf_counter()-t)\n"
        "    assert all(x['error'] is None for x in rep)\n"
        "print(json.dumps(ts))\n"
    )
    import json

    out = subprocess.run([sys.executable, "-c", code, json.dumps(ds.segments), str(warmup), str(repeat)],
                         capture_output=True, text=True, preexec_fn=unpin_child, check=True)
    runs = json.loads(out.stdout)
    s = sorted(runs)
    t = Timing(best=s[0], median=s[len(s) // 2], runs=runs)
    from benchlib import ALL_CPUS

    r = row("crc", ds.name, "verify every batch CRC", f"kraftkit verify_segments(paths) [{len(ALL_CPUS)} cores]",
            ds.records, ds.bytes, t, note=f"separate unpinned process; {len(ds.segments)} segment files in parallel")
    log(f"    {r.impl:<48} {t.best * 1e3:9.1f} ms  {ds.bytes / t.best / 1e9:6.2f} GB/s")
    return r


# ------------------------------------------------------------------------------- 3. decode

MODE_KV = "offset+timestamp+key+value"
MODE_IT = "offset+timestamp (iterate)"
MODE_OBJ = "record objects built, no field read"
MODE_CRC = "CRC check + offset+timestamp+key+value"
MODE_RUST = "records parsed in Rust only (no Python objects)"


def run_decode(ds: Dataset, peers: dict, *, warmup: int, repeat: int, slow_peer_mb: float,
               floor_records: int, log=print) -> list[Row]:
    rows: list[Row] = []
    paths = ds.segments
    n_rec, n_bytes = ds.records, ds.bytes
    S = "decode"

    def add(mode, impl, t: Timing, *, ref=False, note="", nbytes=n_bytes, nrec=n_rec):
        rows.append(row(S, ds.name, mode, impl, nrec, nbytes, t, is_ref=ref, note=note))
        log(f"    {mode[:30]:<30} {impl:<40} {t.best * 1e3:9.1f} ms  {nrec / t.best / 1e6:6.2f} M rec/s")

    Segment = kl.Segment

    # -- kraftkit: iterating a batch decodes its records one at a time, as aiokafka's does
    def kk_kv(verify_crc=False):
        n = 0
        for p in paths:
            for b in Segment(p).batches(verify_crc=verify_crc):
                for r in b:
                    r.offset; r.timestamp; r.key; r.value  # noqa: B018
                n += len(b)
        return n

    def kk_it():
        n = 0
        for p in paths:
            for b in Segment(p).batches():
                for r in b:
                    r.offset; r.timestamp  # noqa: B018
                n += len(b)
        return n

    def kk_obj():
        n = 0
        for p in paths:
            for b in Segment(p).batches():
                n += len(b.records())
        return n

    def kk_crc():
        return kk_kv(verify_crc=True)

    def kk_list_kv():
        n = 0
        for p in paths:
            for b in Segment(p).batches():
                recs = b.records()
                for r in recs:
                    r.offset; r.timestamp; r.key; r.value  # noqa: B018
                n += len(recs)
        return n

    def kk_rust():
        n = 0
        for p in paths:
            rep = Segment(p).scan(deep=True, verify_crc=False)
            if rep["error"] is not None:
                raise RuntimeError(rep["error"])
            n += rep["records"]
        return n

    datas = read_files(ds)

    # -- aiokafka (Cython)
    aio = peers.get("aiokafka")
    aio_fns: dict = {}
    if aio is not None:
        def aio_kv():
            n = 0
            for buf in datas:
                mr = aio(buf)
                while (b := mr.next_batch()) is not None:
                    for r in b:
                        r.offset; r.timestamp; r.key; r.value  # noqa: B018
                    n += b.last_offset_delta + 1
            return n

        def aio_it():
            n = 0
            for buf in datas:
                mr = aio(buf)
                while (b := mr.next_batch()) is not None:
                    for r in b:
                        r.offset; r.timestamp  # noqa: B018
                    n += b.last_offset_delta + 1
            return n

        def aio_obj():
            n = 0
            for buf in datas:
                mr = aio(buf)
                while (b := mr.next_batch()) is not None:
                    n += len(list(b))  # aiokafka decodes each record as it iterates
            return n

        def aio_crc():
            n = 0
            for buf in datas:
                mr = aio(buf)
                while (b := mr.next_batch()) is not None:
                    if not b.validate_crc():
                        raise RuntimeError("aiokafka: CRC mismatch")
                    for r in b:
                        r.offset; r.timestamp; r.key; r.value  # noqa: B018
                    n += b.last_offset_delta + 1
            return n

        aio_fns = {MODE_KV: aio_kv, MODE_IT: aio_it, MODE_OBJ: aio_obj, MODE_CRC: aio_crc}

    # kraftkit and aiokafka take turns, round after round, in each mode (``measure_interleaved``):
    # the ratio compares runs from the same moments of a shared machine
    label = "aiokafka MemoryRecords (Cython)" if peers.get("aiokafka_cython") else "aiokafka (PURE PYTHON fallback!)"
    later = []
    for mode, fn, how in ((MODE_KV, kk_kv, "for r in batch"), (MODE_IT, kk_it, "for r in batch"),
                          (MODE_OBJ, kk_obj, "batch.records()"), (MODE_CRC, kk_crc, "for r in batch")):
        fns = {"kk": fn, **({"aio": aio_fns[mode]} if mode in aio_fns else {})}
        ts = measure_interleaved(fns, warmup=warmup, repeat=repeat)
        for k, t in ts.items():
            assert t.result == n_rec, (mode, k, t.result, n_rec)
            t.result = None
        add(mode, f"kraftkit Segment.batches(), {how}", ts["kk"], ref=True)
        if "aio" in ts:
            later.append((mode, ts["aio"]))
    t = measure(kk_list_kv, warmup=warmup, repeat=repeat)
    assert t.result == n_rec
    add(MODE_KV, "kraftkit Segment.batches(), batch.records()", t,
        note="the list API: every record made and kept until the list goes (no recycling)")
    t = measure(kk_rust, warmup=warmup, repeat=repeat)
    assert t.result == n_rec
    add(MODE_RUST, "kraftkit Segment.scan(deep=True)", t, ref=True,
        note="every record parsed (and decompressed) in Rust, nothing handed to Python: the ceiling")

    for mode, t in later:
        add(mode, label, t, note="bytes preloaded; records are decoded eagerly (key/value bytes made while iterating)")

    # -- kafka-python (pure Python): a prefix, it is ~20x slower
    kp = peers.get("kafka-python")
    pre, pre_rec, _ = prefix(ds, int(slow_peer_mb * (1 << 20)))
    if kp is not None:
        def kp_kv():
            n = 0
            mr = kp(pre)
            while (b := mr.next_batch()) is not None:
                for r in b:
                    r.offset; r.timestamp; r.key; r.value  # noqa: B018
                    n += 1
            return n

        t = measure(kp_kv, warmup=1, repeat=max(1, min(repeat, 2)))
        assert t.result == pre_rec
        add(MODE_KV, "kafka-python MemoryRecords (pure Python)", t, nrec=pre_rec, nbytes=len(pre),
            note=f"first {len(pre) / 1e6:.1f} MB ({pre_rec} records) only: pure Python is slow")

    # -- the cost of the Python loop alone: pre-built objects, nothing decoded
    class Rec:
        __slots__ = ("offset", "timestamp", "key", "value")

    objs = []
    for p in paths:
        for b in Segment(p).batches():
            for r in b.records():
                o = Rec()
                o.offset, o.timestamp, o.key, o.value = r.offset, r.timestamp, r.key, r.value
                objs.append(o)
            if len(objs) >= floor_records:
                break
        if len(objs) >= floor_records:
            break

    def floor():
        for r in objs:
            r.offset; r.timestamp; r.key; r.value  # noqa: B018
        return len(objs)

    t = measure(floor, warmup=warmup, repeat=repeat)
    nb_floor = int(n_bytes * len(objs) / n_rec)
    add(MODE_KV, "reference: Python loop over pre-built objects", t, nrec=len(objs), nbytes=nb_floor,
        note=f"{len(objs)} records already decoded (__slots__ objects): the loop + 4 attribute reads alone")
    del objs
    return rows


# ------------------------------------------------------------------------------- 4. dump-log

DUMP_MODES = [
    ("batches only", []),
    ("--deep-iteration", ["--deep-iteration"]),
    ("--deep-iteration --print-data-log", ["--deep-iteration", "--print-data-log"]),
]

# bin/kafka-run-class.sh defaults (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS).
KAFKA_RUN_CLASS_OPTS = ["-Xmx256M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                        "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                        "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]


def kafka_dump_cmd(version: str | None = None) -> tuple[list[str], str]:
    """``java ... DumpLogSegments`` as bin/kafka-dump-log.sh runs it; (argv prefix, description)."""
    sys.path.insert(0, str(REPO)) if str(REPO) not in sys.path else None
    from tests.harness import jars  # noqa: PLC0415 (optional dependency of the benchmark)
    from tests.harness.node import tool_log4j_files
    from tests.harness.tools import dump_log_class

    version = version or jars.DEFAULT_VERSION
    jars.ensure_kafka(version)
    java = jars.require_java()
    cls = dump_log_class(version)
    log4j = tool_log4j_files(jars.kafka_home(version) / "tool-config")
    return [java, *KAFKA_RUN_CLASS_OPTS, *log4j, "-cp", jars.classpath(version), cls], f"Kafka {version} {cls}"


def kraftkit_dump_cmd() -> tuple[list[str], str]:
    exe = Path(sys.executable).with_name("kraftkit")
    if exe.exists() and (REPO / "python" / "kraftkit" / "cli" / "dump_log.py").exists():
        return [str(exe), "dump-log"], "kraftkit dump-log (CLI)"
    # Fallback while the CLI does not exist: the same renderer driven by python -c.
    code = ("import sys\nfrom kraftkit.log import Segment\na=sys.argv[1:]\nd='--deep-iteration' in a\n"
            "p='--print-data-log' in a\nw=sys.stdout.buffer.write\n"
            "for f in [x for x in a if not x.startswith('--')]:\n"
            "    w(f'Dumping {f}\\n'.encode())\n"
            "    for c in Segment(f).dump(deep=d, print_data=p): w(c)\n")
    return [sys.executable, "-c", code], "python -c Segment.dump (CLI missing)"


def _run_proc(argv: list[str], timeout: float) -> float:
    with open(os.devnull, "wb") as devnull:
        t0 = time.perf_counter()
        p = subprocess.run(argv, stdout=devnull, stderr=subprocess.PIPE, preexec_fn=unpin_child, timeout=timeout)
        dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{argv[:3]}... exited {p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}")
    return dt


def measure_proc(argv: list[str], *, repeat: int, timeout: float = 900.0) -> Timing:
    runs = [_run_proc(argv, timeout) for _ in range(repeat)]
    s = sorted(runs)
    return Timing(best=s[0], median=s[len(s) // 2], runs=runs)


def check_dump_output(kk: list[str], java: list[str], path: str, log=print) -> dict:
    """Same number of output lines for the first MB of one file (deep + print data)."""
    args = ["--deep-iteration", "--print-data-log", "--max-bytes", str(1 << 20)]
    a = subprocess.run([*kk, path, *args], capture_output=True, check=True).stdout
    b = subprocess.run([*java, "--files", path, *args], capture_output=True, check=True).stdout
    res = {"file": path, "kraftkit_lines": a.count(b"\n"), "kafka_lines": b.count(b"\n"),
           "identical": a == b}
    log(f"    output check (first 1 MB, deep + print data): kraftkit {res['kraftkit_lines']} lines, "
        f"kafka-dump-log {res['kafka_lines']} lines, identical={res['identical']}")
    return res


def run_dump(ds: Dataset, kk: list[str], java: list[str] | None, *, repeat_kk: int, repeat_java: int,
             modes=DUMP_MODES, log=print) -> list[Row]:
    rows: list[Row] = []
    files = ds.segments
    for mode, flags in modes:
        runs = [("kraftkit dump-log", [*kk, *files, *flags], repeat_kk, True,
                 "whole process incl. interpreter start; stdout to /dev/null")]
        if java is not None:
            runs.append(("kafka-dump-log (JVM)", [*java, "--files", ",".join(files), *flags], repeat_java, False,
                         "whole process incl. JVM start, kafka-run-class.sh JVM options; stdout to /dev/null"))
        for impl, argv, rep, ref, note in runs:
            try:
                t = measure_proc(argv, repeat=rep)
            except Exception as e:  # a failing tool must not lose the rest of the run
                log(f"    {mode:<36} {impl}: FAILED: {e}")
                continue
            rows.append(row("dump", ds.name, mode, impl, ds.records, ds.bytes, t, is_ref=ref, note=note))
            log(f"    {mode:<36} {impl:<22} {t.best:7.2f} s  (runs {', '.join(f'{x:.2f}' for x in t.runs)})")
    return rows


def have_java() -> bool:
    return shutil.which("java") is not None
