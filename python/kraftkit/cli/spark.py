"""``kraftkit spark audit|verify|rewrite|scan|generate``: the fleet jobs on Spark.

On a laptop they start a local SparkSession (``--master local[2]`` by default); under
``spark-submit`` (``kraftkit/cli/spark_submit.py``) they use the session spark-submit made, so the
same command runs on YARN, Kubernetes or a standalone cluster with paths on HDFS or S3.
Results go to Parquet under ``--out``; a short summary goes to stdout (``--json``: JSON lines,
field names in Kafka's camelCase). Spark's own log lines stay off the output (a quiet log4j2
configuration for the sessions the CLI starts: errors only).
Exit codes: 0 all good, 1 damage found (corrupt batches, problems, failed rewrites),
2 usage error, no metadata files, or no Spark here (pyspark, pyarrow or Java missing).
"""

from __future__ import annotations

import argparse
import importlib
import re
from typing import Any

from kraftkit.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, fail
from kraftkit.cli.progress import Progress
from kraftkit.errors import KraftkitError

#: the packages of the ``spark`` extra the jobs import (pyspark[sql] brings pyarrow and pandas)
SPARK_PACKAGES = ("pyspark", "pyarrow", "pandas", "py4j")
INSTALL_HINT = "pip install 'kraftkit[spark]'"

HELP = "fleet jobs on Spark: audit, verify and rewrite every cluster's metadata; scan; generate a synthetic fleet"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("spark", help=HELP, description=HELP + ".")
    jobs = p.add_subparsers(dest="job", metavar="JOB", required=True)

    def common(q: argparse.ArgumentParser, out: bool = True) -> None:
        q.add_argument(
            "path", metavar="PATH", help="fleet root, cluster or node directory, glob, or URI (hdfs://, s3://, file://)"
        )
        if out:
            q.add_argument("--out", default=None, help="write the results as Parquet under this directory or URI")
        q.add_argument(
            "--naming",
            choices=["auto", "meta", "path"],
            default="auto",
            help="how clusters and nodes are named: meta = cluster.id and node.id of each log directory's "
            "meta.properties; path = <cluster>/<node>/ directory names; auto (default) = meta where a "
            "meta.properties has both ids, else path (the output says which named each)",
        )
        q.add_argument("--master", default=None, help="Spark master when not under spark-submit (default local[2])")
        q.add_argument("--json", action="store_true", help="JSON lines instead of the text summary")
        _add_quiet(q)

    q = jobs.add_parser(
        "audit", help="per cluster: features, metadata.version, counts, corrupt batches, downgrade losses"
    )
    common(q)
    q.set_defaults(func=run_audit)
    q = jobs.add_parser("verify", help="CRC, record and index integrity of every file, with exact locations")
    common(q)
    q.set_defaults(func=run_verify)
    q = jobs.add_parser("rewrite", help="rewrite every cluster's latest snapshot at a metadata.version")
    common(q)
    q.add_argument(
        "--metadata-version",
        "--release-version",
        dest="metadata_version",
        required=True,
        help="target metadata.version (3.9-IV0, a level, or a release like 3.5)",
    )
    q.add_argument("--dry-run", action="store_true", help="report only; write no snapshot")
    q.set_defaults(func=run_rewrite)
    q = jobs.add_parser("scan", help='read every record with format("kraft") and count them by cluster and type')
    common(q, out=False)
    q.add_argument(
        "--kind",
        choices=["all", "snapshots", "logs"],
        default="all",
        help="which files to scan: all (default), snapshots or log segments",
    )
    q.set_defaults(func=run_scan)
    q = jobs.add_parser("generate", help="write a synthetic fleet (for tests, benchmarks and demos)")
    q.add_argument(
        "root", metavar="PATH", help="directory to write <cluster>/<node>/__cluster_metadata-0/ and fleet.json under"
    )
    q.add_argument("--clusters", type=int, default=8, help="clusters to generate (default 8)")
    q.add_argument("--nodes", type=int, default=3, help="controller nodes per cluster (default 3)")
    q.add_argument("--topics", default="50:400", help="topics per cluster, MIN:MAX (default 50:400)")
    q.add_argument("--partitions", type=int, default=12, help="typical partitions per topic (default 12)")
    q.add_argument("--segment-bytes", type=int, default=1 << 20, help="segment size in bytes (default 1 MiB)")
    q.add_argument("--corrupt", type=int, default=0, help="damage one node of this many clusters")
    q.add_argument("--seed", type=int, default=42, help="random seed: the same seed makes the same fleet")
    q.add_argument("--json", action="store_true", help="one JSON object instead of the text summary")
    _add_quiet(q)
    q.set_defaults(func=run_generate)


class SparkUnavailable(KraftkitError):
    """No Spark here: a package of the ``spark`` extra or Java is missing (exit code 2)."""


def _missing(e: ImportError) -> str | None:
    """The package of the ``spark`` extra an import error is about, if it is one."""
    name = (e.name or "").split(".")[0]
    return name if name in SPARK_PACKAGES else None


def _unavailable(package: str) -> SparkUnavailable:
    return SparkUnavailable(f"needs {package}, which this Python cannot import ({INSTALL_HINT})")


def require_spark() -> None:
    """Raises :class:`SparkUnavailable` naming the first package of the ``spark`` extra that
    cannot be imported (checked before a session starts, so no traceback reaches the user)."""
    for name in ("pyspark", "pyarrow"):
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise _unavailable(_missing(e) or name) from None


def session(args: argparse.Namespace) -> Any:
    """The session a job runs in: spark-submit's when ``args.ambient_session`` (set by
    ``kraftkit.cli.spark_submit``, no command-line option), else a local one at ``--master``
    with Spark's log lines below ERROR kept off the output."""
    require_spark()
    if getattr(args, "ambient_session", False):
        from kraftkit.spark.session import ambient_session

        return ambient_session()
    from kraftkit.spark.session import java_available, local_session

    if not java_available():
        raise SparkUnavailable("Spark needs Java 17+ (set JAVA_HOME or put java on PATH)")
    return local_session(args.master or "local[2]", quiet=True)


_CAMEL = re.compile(r"_([a-z0-9])")
#: fields whose value is a map of data (feature name -> level): its keys are kept as they are
_DATA_MAPS = frozenset({"features"})


def camel(value: Any) -> Any:
    """``value`` with every field name in camelCase (``invalid_batches`` -> ``invalidBatches``),
    the style of Kafka's JSON; lists and nested dicts too, but not the keys of data maps
    (``features``: feature names)."""
    if isinstance(value, dict):
        return {
            _CAMEL.sub(lambda m: m.group(1).upper(), str(k)): v if k in _DATA_MAPS else camel(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


def _print_json(obj: dict[str, Any]) -> None:
    """One line of --json through the one writer of every command (compact, UTF-8; docs/json.md)."""
    from kraftkit.cli.jsonout import emit

    emit(camel(obj))


def _emit_rows(df: Any, kind: str) -> None:
    for r in df.toLocalIterator():
        _print_json({"type": kind, **r.asDict(recursive=True)})


def _guard(fn):
    """Runs a job; a bad fleet layout or argument (any kraftkit error) is exit code 2, and so is
    a package of the ``spark`` extra missing (one line naming it and how to install it)."""

    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except KraftkitError as e:
            return fail(f"spark {args.job}", str(e))
        except ImportError as e:
            package = _missing(e)
            if package is None:
                raise
            return fail(f"spark {args.job}", str(_unavailable(package)), EXIT_USAGE)

    return run


def _add_quiet(p: argparse.ArgumentParser) -> None:
    """``--quiet`` as every other command spells it; ``--no-progress``, its first name here, still works."""
    p.add_argument(
        "--quiet", "-q", "--no-progress", dest="quiet", action="store_true", help="no progress line on stderr"
    )


def _progress(args: argparse.Namespace) -> bool | None:
    return False if args.quiet else None


def _fleet(args: argparse.Namespace, kind: str = "all") -> list[Any]:
    """The fleet's files as the job will find them (a path without metadata files fails here,
    before a Spark session starts), named by ``--naming``."""
    from kraftkit.spark.layout import discover

    return discover(args.path, kind, args.naming)


def _report_naming(args: argparse.Namespace, files: list[Any]) -> None:
    """Which rule named each node's cluster and node: meta.properties or the directory names
    (--json: one ``naming`` line per log directory)."""
    from kraftkit.spark.layout import naming_lines, naming_table

    if args.json:
        for entry in naming_table(files):
            _print_json({"type": "naming", **entry})
    else:
        for line in naming_lines(files):
            print(line)


def _report(args: argparse.Namespace, res: Any, files: list[Any], *tables: tuple[Any, str]) -> None:
    """How the clusters and nodes were named, then the job's result: its tables as JSON lines
    with --json, else its summary."""
    _report_naming(args, files)
    if args.json:
        for df, kind in tables:
            _emit_rows(df, kind)
    else:
        print(res.summary())


@_guard
def run_audit(args: argparse.Namespace) -> int:
    from kraftkit.spark import jobs

    files = _fleet(args)
    res = jobs.audit(session(args), args.path, args.out, progress=_progress(args), naming=args.naming)
    rows = res.clusters.collect()
    _report(args, res, files, (res.clusters, "cluster"), (res.downgrades, "downgrade"), (res.corrupt, "corrupt_batch"))
    return EXIT_PROBLEMS if any(r["corrupt_batches"] or r["error"] for r in rows) else EXIT_OK


@_guard
def run_verify(args: argparse.Namespace) -> int:
    from kraftkit.spark import jobs

    files = _fleet(args)
    res = jobs.verify(session(args), args.path, args.out, progress=_progress(args), naming=args.naming)
    n = res.problems.count()
    _report(args, res, files, (res.files, "file"), (res.problems, "problem"))
    return EXIT_PROBLEMS if n else EXIT_OK


@_guard
def run_rewrite(args: argparse.Namespace) -> int:
    from kraftkit.spark import jobs

    if args.out is None and not args.dry_run:
        return fail("spark rewrite", "--out is required (or --dry-run)")
    files = _fleet(args, "snapshots")
    res = jobs.rewrite(
        session(args),
        args.path,
        args.metadata_version,
        args.out,
        dry_run=args.dry_run,
        progress=_progress(args),
        naming=args.naming,
    )
    rows = res.report.collect()
    _report(args, res, files, (res.report, "rewrite"))
    return EXIT_PROBLEMS if any(r["error"] for r in rows) else EXIT_OK


@_guard
def run_scan(args: argparse.Namespace) -> int:
    import time

    files = _fleet(args, args.kind)
    spark = session(args)
    t0 = time.perf_counter()
    df = (
        spark.read.format("kraft")
        .option("columns", "cluster,record_type,crc_valid,error")
        .option("kind", args.kind)
        .option("naming", args.naming)
        .load(args.path)
    )
    rows = df.groupBy("cluster", "record_type").count().orderBy("cluster", "record_type").collect()
    bad = df.where("crc_valid = false or error is not null").count()
    secs = time.perf_counter() - t0
    total = sum(r["count"] for r in rows)
    _report_naming(args, files)
    if args.json:
        for r in rows:
            _print_json({"type": "count", **r.asDict()})
        _print_json({"type": "total", "rows": total, "damaged_rows": bad, "seconds": round(secs, 3)})
    else:
        for r in rows:
            print(f"{r['cluster']:<20} {r['record_type']!s:<36} {r['count']:>10}")
        print(f"{total} records ({bad} in damaged batches) in {secs:.1f}s")
    return EXIT_PROBLEMS if bad else EXIT_OK


def run_generate(args: argparse.Namespace) -> int:
    from kraftkit.spark.fleet import generate_fleet

    try:
        lo, hi = (int(x) for x in args.topics.split(":"))
    except ValueError:
        return fail("spark generate", "--topics is MIN:MAX")

    line = Progress("generated", total=args.clusters, unit="clusters", quiet=args.quiet)

    def progress(done: int, total: int) -> None:
        line.total = total
        line.update(done)

    with line:
        fleet = generate_fleet(
            args.root,
            clusters=args.clusters,
            nodes=args.nodes,
            topics=(lo, hi),
            partitions=args.partitions,
            segment_bytes=args.segment_bytes,
            corrupt=args.corrupt,
            seed=args.seed,
            progress=progress,
        )
    size = fleet.bytes
    if args.json:
        _print_json(
            {
                "root": fleet.root,
                "clusters": len(fleet.clusters),
                "bytes": size,
                "records": sum(c.records for c in fleet.clusters),
                "damage": [d for c in fleet.clusters for d in c.damage],
            }
        )
    else:
        print(
            f"{fleet.root}: {len(fleet.clusters)} clusters x {args.nodes} nodes, "
            f"{sum(c.records for c in fleet.clusters)} records per node set, {size / 1e6:.1f} MB; manifest fleet.json"
        )
        for c in fleet.clusters:
            for d in c.damage:
                print(f"  damaged {c.name}/{d['node']}: {d['kind']} in {d['file']}")
    return EXIT_OK
