#!/usr/bin/env python
"""Fleet scan benchmark: ``spark.read.format("kraft")`` on Spark ``local[1]`` and ``local[2]``
against single-process kraftkit and a naive reader that yields a Python tuple per record, all
in the same run, on the same synthetic fleet (``kraftkit.spark.fleet``, cached in
``.cache/bench/``). Prints a table with rows/s, MB/s and ratios.

    .venv/bin/python benches/spark_scan.py                  # ~8 M rows, a few minutes on 2 cores
    .venv/bin/python benches/spark_scan.py --quick          # ~0.5 M rows, about a minute

Rows (each reads every log segment and snapshot of the fleet; MB/s are on-disk bytes):

* ``kraftkit scan, 1 process``: ``kraftkit.spark.scan.scan_source`` over every file in this
  process, Arrow batches built by the Rust core (what each Spark task runs), no Spark;
* ``naive tuples, 1 process``: ``kraftkit.log.Segment`` batches and records iterated in Python,
  one tuple per record (the per-row Python objects the data source avoids);
* ``format("kraft") JVM local[N]``: the JVM reader (``kraftkit.spark.jvm``: a DataSource V2
  whose tasks call the Rust core through JNI into Arrow vectors, columnar batches), all rows
  materialized by Spark's ``noop`` sink (``df.write.format("noop")``), N executor cores; left
  out when its jar was not built (``scripts/build_spark_jvm.sh``);
* ``format("kraft_python") local[N]``: the Python data source (Spark 4's Python Data Source API,
  Arrow batches from the same core), what ``format("kraft")`` reads without the jar;
* ``naive source local[2]``: a Python data source yielding the naive reader's tuples;
* ``Spark alone: spark.range ... local[2]``: no file read at all: ``spark.range`` made into rows
  of the typed columns' shape (the same cluster and file strings, a record type, ints, a boolean)
  and materialized by the same ``noop`` sink: what Spark's own row path (columnar batches to
  rows, the write task's loop) costs, a ceiling for any reader on this machine in this run.

For the JVM rows the CPU time of the JVM (driver and executors are one process on ``local``) is
printed too, as rows per CPU-second: less sensitive to a busy machine than the wall time.

Column sets: ``typed`` = cluster, file, offset, timestamp, crc_valid, record_type,
record_version (no JSON); ``full`` = all 17 columns, the record decoded to JSON and the raw value.
The ratio column is the rate of the JVM reader on ``local[2]`` (the Python source's without the
jar) divided by the row's rate. The last lines say whether the JVM reader met the target of
10 M typed rows/s on ``local[2]`` (MET/MISS), and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
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
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

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


def best(fn, repeat: int) -> tuple[float, object]:
    fn()  # warm-up (page cache, Python workers)
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--clusters", type=int, default=None)
    p.add_argument("--topics", type=int, default=None, help="typical topics per cluster (24 partitions each)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--data-dir", default=str(REPO / ".cache" / "bench"))
    args = p.parse_args(argv)
    args.clusters = args.clusters or (4 if args.quick else 16)
    args.topics = args.topics or (400 if args.quick else 2000)

    load_before = os.getloadavg()
    root, files, size = fleet(args)
    from kraftkit.spark.scan import COLUMN_NAMES, FileRange, scan_source

    results = []

    def single(cols):
        def run():
            n = 0
            for f in files:
                for b in scan_source(f.path, cols, where=FileRange(f.path, f.cluster, f.node, f.kind)):
                    n += b.num_rows
            return n
        return run

    for label, cols in (("typed", TYPED), ("full", COLUMN_NAMES)):
        t, n = best(single(cols), args.repeat)
        results.append((label, "kraftkit scan, 1 process (Arrow, no Spark)", n, t))
    t, n = best(lambda: sum(1 for _ in naive_rows(files, TYPED)), 1)
    results.append(("typed", "naive tuples, 1 process", n, t))

    from kraftkit.spark import PYTHON_NAME, jvm
    from kraftkit.spark.session import local_session

    jvm_label = 'format("kraft") JVM local[2]'
    py_label = f'format("{PYTHON_NAME}") local[2]'
    cpu = {}
    for cores in (1, 2):
        spark = local_session(f"local[{cores}]", app=f"bench-{cores}",
                              conf={"spark.sql.execution.arrow.maxRecordsPerBatch": "65536"})
        spark.dataSource.register(make_naive_source())
        sources = [("kraft", "JVM ")] if jvm.active(spark) else []
        sources.append((PYTHON_NAME, ""))
        for fmt, tag in sources:
            for label, cols in (("typed", TYPED), ("full", COLUMN_NAMES)):
                df = (spark.read.format(fmt).option("columns", ",".join(cols)).load(root))
                n = df.count()
                c0 = jvm_cpu(spark)
                t, _ = best(lambda: df.write.format("noop").mode("overwrite").save(), args.repeat)
                impl = f'format("{fmt}") {tag}local[{cores}]'
                results.append((label, impl, n, t))
                if tag:
                    cpu[(label, impl)] = (jvm_cpu(spark) - c0) / (args.repeat + 1)
        if cores == 2:
            n = results[-1][2]
            df = floor_frame(spark, files, n)
            c0 = jvm_cpu(spark)
            t, _ = best(lambda: df.write.format("noop").mode("overwrite").save(), args.repeat)
            impl = "Spark alone: spark.range, no read, local[2]"
            results.append(("typed", impl, n, t))
            cpu[("typed", impl)] = (jvm_cpu(spark) - c0) / (args.repeat + 1)
            df = spark.read.format("kraft_naive").load(root)
            n = df.count()
            t, _ = best(lambda: df.write.format("noop").mode("overwrite").save(), 1)
            results.append(("typed", "naive source local[2] (Python tuples)", n, t))
        spark.stop()

    ref_impl = jvm_label if any(impl == jvm_label for _l, impl, _n, _t in results) else py_label
    ref = {label: n / t for label, impl, n, t in results if impl == ref_impl}
    print(f"fleet: {root}: {len(files)} files, {size / 1e6:.0f} MB; machine: {os.cpu_count()} cores, "
          f"load average {load_before[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(f"{'columns':<7} {'implementation':<44} {'rows':>10} {'seconds':>8} {'M rows/s':>9} {'MB/s':>7} {'ref x':>9}")
    for label, impl, n, t in results:
        rate = n / t
        print(f"{label:<7} {impl:<44} {n:>10} {t:>8.2f} {rate / 1e6:>9.2f} {size / 1e6 / t:>7.0f} {ref[label] / rate:>8.2f}x")
    print(f"(ref: {ref_impl})")
    for (label, impl), c in cpu.items():
        n = next(x[2] for x in results if x[0] == label and x[1] == impl)
        print(f"{label:<7} {impl:<44} JVM CPU {c:.2f} s a run: {n / c / 1e6:.2f} M rows per CPU-second")
    rates = {(label, impl): n / t for label, impl, n, t in results}
    got = rates.get(("typed", jvm_label))
    if got is None:
        print("target 10 M typed rows/s on local[2]: MISS (the JVM reader was not built)")
    else:
        verdict = "MET" if got >= 10e6 else "MISS"
        print(f"target 10 M typed rows/s on local[2]: {verdict} ({got / 1e6:.2f} M rows/s, "
              f"{got / rates[('typed', py_label)]:.2f}x the Python source)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
