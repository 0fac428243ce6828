#!/usr/bin/env python
"""Fleet scan benchmark: ``spark.read.format("kraft")`` on Spark ``local[1]`` and ``local[2]``
against its peers, all in the same run, on the same synthetic fleet (``kraftkit.spark.fleet``,
cached in ``.cache/bench/``): rows/s, MB/s, ratios, and a MET/MISS line for each target.

    .venv/bin/python benches/run.py --suites spark          # through the main runner (./dev bench)
    .venv/bin/python benches/spark_scan.py                  # this suite alone: ~6 M rows, ~5 min on 2 cores
    .venv/bin/python benches/spark_scan.py --quick          # ~0.5 M rows, about a minute

Rows (each reads every log segment and snapshot of the fleet; MB/s are on-disk bytes):

* ``format("kraft") JVM local[N]``: the JVM reader (``kraftkit.spark.jvm``: a DataSource V2
  whose tasks call the Rust core through JNI, Spark reading the core's column buffers in place),
  all rows materialized by Spark's ``noop`` sink (``df.write.format("noop")``), N executor cores;
  the reference row of each group. Left out when its jar was not built
  (``scripts/build_spark_jvm.sh``);
* ``format("kraft_python") local[N]``: the Python data source (Spark 4's Python Data Source API,
  Arrow batches from the same core), what ``format("kraft")`` reads without the jar;
* ``Spark alone: spark.range ... local[2]``: no file read at all: ``spark.range`` made into rows
  of the typed columns' shape (the same cluster and file strings, a record type, ints, a boolean)
  and materialized by the same ``noop`` sink: what Spark's own row path costs, a ceiling for any
  reader on this machine in this run;
* ``naive Python source local[2]``: a Python data source yielding a tuple per record;
* ``kraftkit scan, 1 process``: ``kraftkit.spark.scan.scan_source`` over every file in this
  process (Arrow batches built by the Rust core, no Spark), and ``naive tuples, 1 process``:
  ``kraftkit.log.Segment`` records iterated in Python, one tuple per record.

The Spark rows of one session take turns, round after round (``benchlib.measure_interleaved``),
so a busy spell lands on all of them. For the JVM rows the JVM's CPU time per run is noted too
(driver and executors are one process on ``local``).

Column sets (the ``columns`` option): ``typed`` = cluster, file, offset, timestamp, crc_valid,
record_type, record_version; ``json`` = the same and ``record``, the record decoded to JSON;
``all`` = all 17 columns (also the raw value, position, error...). Every row of a set must count
the same rows, or the run fails. Targets (issue 23): the JVM reader at least 10 M typed rows/s
on ``local[2]``, and at least 2 M rows/s with the record as JSON.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import benchlib  # noqa: E402
from benchlib import Row, Timing, measure, measure_interleaved, row  # noqa: E402

S = "spark"
IMPL_JVM2 = 'format("kraft") JVM local[2]'
IMPL_FLOOR = "Spark alone: spark.range, no read, local[2]"
IMPL_SCAN = "kraftkit scan, 1 process (Rust into Arrow, no Spark)"
TYPED = ["cluster", "file", "offset", "timestamp", "crc_valid", "record_type", "record_version"]


def fleet(args) -> tuple[str, list, int]:
    from kraftkit.spark.fleet import Fleet, generate_fleet
    from kraftkit.spark.layout import discover

    root = Path(args.data_dir) / f"spark-fleet-{args.clusters}c-{args.topics}t-s{args.seed}"
    if not (root / "fleet.json").exists():
        print(f"generating {root} ...", file=sys.stderr)
        t0 = time.perf_counter()
        generate_fleet(root, clusters=args.clusters, nodes=3, topics=(args.topics // 2, args.topics * 3 // 2), partitions=24,
                       segment_bytes=8 << 20, seed=args.seed)
        print(f"  {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    Fleet.load(root)
    files = discover(str(root))
    return str(root), files, sum(f.size for f in files)


def naive_rows(files, columns):
    """The naive reader: a Python tuple per record (kraftkit.log objects per batch and record)."""
    from kraftkit.log import Segment
    from kraftkit.log.control import control_type_name

    types = {}
    from kraftkit._core import metadata_record_types

    for t in metadata_record_types():
        types[t[0]] = t[1]
    for f in files:
        for batch in Segment(f.path).batches():
            valid = batch.is_valid
            for r in batch:
                v = r.value
                if batch.is_control:
                    rt, ver = control_type_name(r.control_type), None
                else:
                    # frame: uvarint 1, uvarint api key, uvarint version (single bytes for every known key)
                    rt, ver = types.get(v[1]), v[2]
                yield (f.cluster, f.path, r.offset, r.timestamp, valid, rt, ver)


def make_naive_source():
    from pyspark import cloudpickle
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    # the Python workers cannot import this script (benches/ is not on their path): its
    # classes and functions travel by value when it is imported by run.py
    cloudpickle.register_pickle_by_value(sys.modules[__name__])

    class NaiveReader(DataSourceReader):
        def __init__(self, paths):
            self.paths = paths

        def partitions(self):
            from kraftkit.spark.layout import discover

            files = discover(self.paths)
            n = 8
            return [InputPartition([f for i, f in enumerate(files) if i % n == k]) for k in range(n)]

        def read(self, partition):
            yield from naive_rows(partition.value, TYPED)

    class NaiveSource(DataSource):
        @classmethod
        def name(cls):
            return "kraft_naive"

        def schema(self):
            return "cluster string, file string, offset bigint, timestamp bigint, crc_valid boolean, record_type string, record_version int"

        def reader(self, schema):
            return NaiveReader(self.options["path"])

    return NaiveSource


def jvm_cpu(spark) -> float:
    """CPU seconds used so far by the session's JVM (user + system, from /proc)."""
    pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def floor_frame(spark, files, n: int):
    """``n`` rows of the typed columns' shape made by ``spark.range`` (no file read)."""
    path = max((f.path for f in files), key=len).replace("'", "")
    return spark.range(0, n, 1, 4).selectExpr(
        f"'{files[0].cluster}' as cluster", f"'{path}' as file", "id as offset", "1700000000000 + id as timestamp",
        "id % 1000 != 7 as crc_valid", "if(id % 3 = 0, 'FEATURE_LEVEL_RECORD', 'PARTITION_RECORD') as record_type",
        "cast(id % 2 as int) as record_version")


def _noop(df):
    def run():
        df.write.format("noop").mode("overwrite").save()
    return run


def column_sets() -> dict[str, list[str]]:
    from kraftkit.spark.scan import COLUMN_NAMES

    return {"typed": TYPED, "json": [*TYPED, "record"], "all": list(COLUMN_NAMES)}


def single_process(a, files, log) -> list[tuple[str, str, Timing]]:
    """The scan without Spark, pinned to one core: (mode, implementation, timing with the row count)."""
    from kraftkit.spark.scan import FileRange, scan_source

    def scan(cols):
        def run():
            n = 0
            for f in files:
                for b in scan_source(f.path, cols, where=FileRange(f.path, f.cluster, f.node, f.kind)):
                    n += b.num_rows
            return n
        return run

    out = []
    cpu = benchlib.pin_to_one_core()
    for mode in ("typed", "json"):
        log(f"  kraftkit scan, 1 process (CPU {cpu}), {mode}")
        out.append((mode, IMPL_SCAN, measure(scan(column_sets()[mode]), warmup=1, repeat=a.repeat)))
    log("  naive tuples, 1 process")
    out.append(("typed", "naive tuples, 1 process", measure(lambda: sum(1 for _ in naive_rows(files, TYPED)), warmup=0, repeat=1)))
    return out


def spark_rows(a, cores: int, root: str, files, log) -> tuple[list[tuple[str, str, Timing, str]], bool]:
    """The Spark rows of one ``local[cores]`` session, taking turns: (mode, implementation, timing
    with the row count, note), and whether the JVM reader read."""
    from kraftkit.spark import PYTHON_NAME, jvm
    from kraftkit.spark.session import local_session

    log(f"  Spark local[{cores}]")
    spark = local_session(f"local[{cores}]", app=f"bench-{cores}", quiet=True)
    try:
        spark.dataSource.register(make_naive_source())
        on_jvm = jvm.active(spark)
        fns, counts, cpu_runs = {}, {}, {}
        for mode in ("typed",) if cores == 1 else ("typed", "json", "all"):
            for fmt, tag in ([("kraft", "JVM ")] if on_jvm else []) + [(PYTHON_NAME, "")]:
                if fmt == PYTHON_NAME and mode == "all":
                    continue  # ~25 s a run; its json row says what the record costs it
                df = spark.read.format(fmt).option("columns", ",".join(column_sets()[mode])).load(root)
                key = (mode, f'format("{fmt}") {tag}local[{cores}]')
                counts[key] = df.count()
                fns[key] = _timed_cpu(spark, _noop(df), cpu_runs.setdefault(key, [])) if tag else _noop(df)
        if cores == 2:
            key = ("typed", IMPL_FLOOR)
            counts[key] = counts[("typed", f'format("{PYTHON_NAME}") local[2]')]
            fns[key] = _timed_cpu(spark, _noop(floor_frame(spark, files, counts[key])), cpu_runs.setdefault(key, []))
        log(f"    {len(fns)} rows taking turns, {a.repeat} rounds after a warm-up")
        timings = measure_interleaved({f"{m}|{i}": fn for (m, i), fn in fns.items()}, warmup=1, repeat=a.repeat)
        out = []
        for key in fns:
            t = timings["|".join(key)]
            t.result = counts[key]
            runs = cpu_runs.get(key)
            note = ""
            if runs:
                c = min(runs[1:] or runs)  # the warm-up's first run compiles
                note = f"JVM {c:.2f} CPU-s a run ({counts[key] / c / 1e6:.2f} M rows per CPU-second)"
            out.append((*key, t, note))
        if cores == 2:
            log("    naive Python source (one run)")
            df = spark.read.format("kraft_naive").load(root)
            n = df.count()
            t = measure(_noop(df), warmup=0, repeat=1)
            t.result = n
            out.append(("typed", "naive Python source local[2]", t, ""))
        return out, on_jvm
    finally:
        spark.stop()


def run_all(a, log=print) -> tuple[list[Row], dict]:
    from kraftkit.spark import PYTHON_NAME

    root, files, size = fleet(a)
    log(f"  fleet {root}: {len(files)} files, {size / 1e6:.0f} MB")
    load_start = os.getloadavg()
    prev = os.sched_getaffinity(0)
    try:
        measured = [(*m, "") for m in single_process(a, files, log)]
        os.sched_setaffinity(0, benchlib.ALL_CPUS)  # Spark's JVM inherits it
        have_jvm = False
        for cores in (1, 2):
            got, on_jvm = spark_rows(a, cores, root, files, log)
            measured += got
            have_jvm = have_jvm or on_jvm
    finally:
        os.sched_setaffinity(0, prev)
    by_mode: dict[str, dict[str, int]] = {}
    for mode, impl, t, _note in measured:
        by_mode.setdefault(mode, {})[impl] = t.result
    for mode, counts in by_mode.items():
        if len(set(counts.values())) > 1:
            raise SystemExit(f"spark bench: the {mode} rows counted different rows: {counts}")
    ref = IMPL_JVM2 if have_jvm else f'format("{PYTHON_NAME}") local[2]'
    dataset = f"{len(files)} files"
    rows = [row(S, dataset, mode, impl, t.result, size, t, is_ref=impl == ref, note=note) for mode, impl, t, note in measured]
    extra = {"spark": {"fleet": root, "files": len(files), "bytes": size, "jvm": have_jvm,
                       "loadavg_start": load_start, "loadavg_end": os.getloadavg()}}
    return rows, extra


def _timed_cpu(spark, fn, out: list[float]):
    def run():
        c0 = jvm_cpu(spark)
        fn()
        out.append(jvm_cpu(spark) - c0)
    return run


def print_table(rows: list[Row]) -> str:
    rows = [r for r in rows if r.suite == S]
    if not rows:
        return ""
    out = ["== 9. Spark fleet scan: format(\"kraft\") and its peers, rows materialized by the noop sink "
           "('kraft x' = the JVM reader's local[2] rate / this rate) =="]
    order = {m: i for i, m in enumerate(("typed", "json", "all"))}
    rows = sorted(rows, key=lambda r: (order[r.mode], -r.rec_per_s))
    out.append(benchlib.table(rows, ["fleet", "columns", "implementation", "M rows/s", "MB/s", "best s", "kraft x", "note"],
                              lambda r: [r.dataset, r.mode, r.impl, f"{r.rec_per_s / 1e6:.2f}", f"{r.mb_per_s:.0f}",
                                         f"{r.best_s:.2f}", "ref" if r.is_ref else (f"{r.ratio:.2f}x" if r.ratio else "-"),
                                         r.note]))
    out.append("")
    return "\n".join(out)


def targets(rows: list[Row]) -> list[dict]:
    res = []
    got = {r.mode: r for r in rows if r.suite == S and r.impl == IMPL_JVM2}
    for mode, goal, what in (("typed", 10e6, "Spark JVM reader local[2] >= 10 M typed rows/s"),
                             ("json", 2e6, "Spark JVM reader local[2] >= 2 M rows/s with JSON")):
        r = got.get(mode)
        if r is None:
            if any(x.suite == S for x in rows):
                res.append({"target": what, "dataset": "-", "value": "the JVM reader was not built", "met": False})
            continue
        res.append({"target": what, "dataset": r.dataset, "value": f"{r.rec_per_s / 1e6:.2f} M rows/s",
                    "met": r.rec_per_s >= goal})
    return res


def describe(extra: dict) -> str:
    s = extra.get("spark") or {}
    return (f"spark suite: fleet {s.get('fleet')} ({s.get('files')} files, {s.get('bytes', 0) / 1e6:.0f} MB), "
            f"JVM reader {'built' if s.get('jvm') else 'NOT built'}; load average "
            f"{s.get('loadavg_start', [0])[0]:.1f} -> {s.get('loadavg_end', [0])[0]:.1f}")


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="4 clusters x 400 topics (~0.5 M rows)")
    p.add_argument("--clusters", type=int, default=None, help="clusters in the fleet (default 16, quick 4)")
    p.add_argument("--topics", type=int, default=None, help="typical topics per cluster, 24 partitions each (default 2000, quick 400)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3, help="timed rounds (best is reported; default 3)")
    p.add_argument("--data-dir", default=str(REPO / ".cache" / "bench"))
    p.add_argument("--json", metavar="PATH")
    a = p.parse_args(argv)
    a.clusters = a.clusters or (4 if a.quick else 16)
    a.topics = a.topics or (400 if a.quick else 2000)
    return a


def main(argv=None) -> int:
    return benchlib.suite_main(parse(argv), sys.modules[__name__])


if __name__ == "__main__":
    sys.exit(main())
