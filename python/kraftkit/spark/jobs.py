"""Fleet jobs on Spark: ``audit``, ``verify`` and ``rewrite`` over every cluster of a fleet
(``<root>/<cluster>/<node>/__cluster_metadata-0/``), with the Rust core doing the bytes on the
executors. Each job is a plain function of a SparkSession, usable from ``kraftkit spark ...``,
from ``spark-submit`` (``kraftkit/cli/spark_submit.py``) or from a notebook; it returns its
result DataFrames, writes them as Parquet under ``out`` when given, and renders a short human
summary.

* :func:`audit` -- per cluster: the finalized features and metadata.version, topic, partition
  and broker counts, corrupt batches (over all nodes, from the ``kraft`` data source), and for
  every older metadata.version what a downgrade would lose (a dry-run rewrite of the image at
  the end of the log, as ``kraftkit features downgrade --dry-run`` judges it);
* :func:`verify` -- every segment and snapshot: CRC, sizes, offsets, record parsing and the
  ``.index``/``.timeindex`` entries, one row per problem with its exact location (file, batch
  base offset, byte position or index entry), as ``kraftkit verify-log --deep`` checks them;
* :func:`rewrite` -- every cluster's latest snapshot rewritten at a target metadata.version
  (downgrade or upgrade), each output written atomically (``.part``, fsync, rename), with a
  per-cluster loss report and a summary table.

Damaged input never fails a job: it becomes a row that says what and where.
"""

from __future__ import annotations

import os
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftkit.spark.layout import FleetFile, discover
from kraftkit.spark.rewrite_job import (  # noqa: F401  (the fleet jobs' API in one place)
    REWRITE_SCHEMA,
    RewriteResult,
    latest_snapshots,
    rewrite,
    rewrite_cluster,
)
from kraftkit.spark.runner import LocalCopy, Progress, partition_dirs, task_rdd, write_result

AUDIT_SCHEMA = (
    "cluster string, node string, nodes int, metadata_version string, metadata_version_level int, "
    "features map<string,int>, topics int, partitions int, brokers int, controllers int, end_offset bigint, "
    "snapshot string, corrupt_batches bigint, error string"
)
DOWNGRADE_SCHEMA = (
    "cluster string, from_version string, to_version string, to_level int, lossy boolean, "
    "records_lost bigint, losses array<string>, feature_changes array<string>, error string"
)
VERIFY_FILES_SCHEMA = (
    "cluster string, node string, file string, kind string, batches bigint, records bigint, "
    "bytes bigint, first_offset bigint, last_offset bigint, problems int"
)
VERIFY_PROBLEMS_SCHEMA = (
    "cluster string, node string, file string, kind string, offset bigint, position bigint, "
    "entry bigint, reason string, message string"
)


# --------------------------------------------------------------------------------- audit


def audit_cluster(cluster: str, nodes: dict[str, str]) -> tuple[dict, list[dict]]:
    """One cluster's audit row (without corrupt batches) and its downgrade rows: the node whose
    log reaches furthest is audited; its image at the end of the log is written as a snapshot
    and rewritten, dry run, at every older metadata.version."""
    from kraftkit.features.offline import state_of
    from kraftkit.features.registry import MV_FEATURE, registry
    from kraftkit.features.rewrite import loss_line, rewrite_snapshot
    from kraftkit.metadata.image import load_image, mv_name
    from kraftkit.metadata.snapshot import list_snapshots
    from kraftkit.metadata.versions import unknown_levels

    row: dict[str, Any] = {
        "cluster": cluster,
        "node": None,
        "nodes": len(nodes),
        "metadata_version": None,
        "metadata_version_level": None,
        "features": None,
        "topics": None,
        "partitions": None,
        "brokers": None,
        "controllers": None,
        "end_offset": None,
        "snapshot": None,
        "corrupt_batches": None,
        "error": None,
    }
    best = None
    errors = []
    for node, pdir in nodes.items():
        try:
            with LocalCopy(pdir) as local:
                img = load_image(local)
                snaps = list_snapshots(local)
        except Exception as e:  # a damaged node: another replica may be whole
            errors.append(f"{node}: {e}")
            continue
        end = img.provenance.end_offset
        if best is None or end > best[2].provenance.end_offset:
            best = (node, pdir, img, snaps)
    if best is None:
        row["error"] = "; ".join(errors) or "no readable node"
        return row, []
    node, pdir, img, snaps = best
    reg = registry()
    state = state_of(img, pdir)
    mv = state.finalized.get(MV_FEATURE)
    row.update(
        node=node,
        metadata_version=None if mv is None else mv_name(mv),
        metadata_version_level=mv,
        features=dict(sorted(state.finalized.items())),
        topics=img.topic_count,
        partitions=img.partition_count,
        brokers=len(img.brokers),
        controllers=len(img.controllers),
        end_offset=state.end_offset,
        snapshot=None if not snaps else snaps[-1].file_name,
        error=None if not errors else "; ".join(errors),
    )
    downs: list[dict] = []
    if mv is None:
        return row, downs
    bad = unknown_levels(state.finalized)
    if bad:  # what a downgrade from a level the tables lack loses is unknown: no guessed rows
        why = "; ".join(b["reason"] for b in bad) + "; refusing to audit downgrades"
        row["error"] = why if row["error"] is None else f"{row['error']}; {why}"
        return row, downs
    with tempfile.TemporaryDirectory(prefix="kraftkit-audit-") as tmp:
        snap = img.write_snapshot(tmp)
        for target in reg.metadata_versions:
            if target.level >= mv:
                continue
            d = {
                "cluster": cluster,
                "from_version": mv_name(mv),
                "to_version": target.name,
                "to_level": target.level,
                "lossy": None,
                "records_lost": None,
                "losses": None,
                "feature_changes": None,
                "error": None,
            }
            try:
                rep = rewrite_snapshot(snap, None, target)
                d.update(
                    lossy=rep.lossy,
                    records_lost=sum(x["count"] for x in rep.losses),
                    losses=[loss_line(x) for x in rep.losses],
                    feature_changes=[f"{c['name']}: {c['from']} -> {c['to']}" for c in rep.feature_changes],
                )
            except Exception as e:
                d["error"] = str(e)
            downs.append(d)
    return row, downs


def _audit_task(item: tuple[str, dict[str, str]]) -> Iterator[tuple[str, dict]]:
    row, downs = audit_cluster(*item)
    yield "cluster", row
    for d in downs:
        yield "downgrade", d


@dataclass
class AuditResult:
    clusters: Any
    downgrades: Any
    corrupt: Any
    paths: dict[str, str | None]

    def summary(self) -> str:
        rows = sorted(self.clusters.collect(), key=lambda r: r["cluster"])
        downs = defaultdict(list)
        for d in self.downgrades.collect():
            downs[d["cluster"]].append(d)
        cw = max([16] + [len(r["cluster"]) for r in rows])
        nw = max([8] + [len(str(r["node"])) for r in rows])
        lines = [
            f"{'cluster':<{cw}} {'node':<{nw}} {'metadata.version':<17} {'topics':>7} {'parts':>7} {'brokers':>7} "
            f"{'corrupt':>7}  safe downgrade floor"
        ]
        for r in rows:
            ds = sorted(downs[r["cluster"]], key=lambda d: -d["to_level"])
            floor = r["metadata_version"]
            for d in ds:  # the lowest version reachable without a loss, going down
                if d["lossy"] or d["error"]:
                    break
                floor = d["to_version"]
            mv = r["metadata_version"] or "?"
            lines.append(
                f"{r['cluster']:<{cw}} {r['node']!s:<{nw}} {mv:<17} {_n(r['topics']):>7} {_n(r['partitions']):>7} "
                f"{_n(r['brokers']):>7} {_n(r['corrupt_batches']):>7}  {floor or '-'}"
                + (
                    f"  (skipped {r['error'][:80]})"
                    if r["error"] and r["metadata_version"]
                    else f"  ERROR {r['error'][:80]}"
                    if r["error"]
                    else ""
                )
            )
        lines.append(
            f"{len(rows)} cluster(s); {sum(r['corrupt_batches'] or 0 for r in rows)} corrupt batch(es)"
            + "".join(f"; {k}: {v}" for k, v in self.paths.items() if v)
        )
        return "\n".join(lines)


def _n(v: Any) -> str:
    return "-" if v is None else str(v)


def corrupt_batches(spark: Any, paths: str | list[str], naming: str = "auto") -> Any:
    """Per file: the batches whose CRC does not match or that cannot be read, from the ``kraft``
    source (``cluster, node, file, position, base_offset, error``), one row per batch."""
    from pyspark.sql import functions as F

    df = (
        spark.read.format("kraft")
        .option("columns", "cluster,node,file,offset,position,base_offset,crc_valid,error")
        .option("naming", naming)
        .load(paths if isinstance(paths, str) else ",".join(paths))
    )
    bad = df.where((F.col("crc_valid") == F.lit(False)) | (F.col("offset").isNull() & F.col("error").isNotNull()))
    return bad.groupBy("cluster", "node", "file", "position").agg(
        F.first("base_offset").alias("base_offset"), F.max("error").alias("error")
    )


def audit(
    spark: Any, paths: str | list[str], out: str | None = None, *, progress: bool | None = None, naming: str = "auto"
) -> AuditResult:
    """Audits every cluster under ``paths`` (see the module docstring; ``naming``: how clusters
    and nodes are named, :data:`kraftkit.spark.layout.NAMINGS`)."""
    from pyspark.sql import functions as F

    files = discover(paths, naming=naming)
    clusters = partition_dirs(files)
    with Progress(spark, "audit", progress):
        rdd = task_rdd(spark, list(clusters.items()), _audit_task).cache()
        rows = spark.createDataFrame(rdd.filter(lambda kv: kv[0] == "cluster").map(lambda kv: kv[1]), AUDIT_SCHEMA)
        downs = spark.createDataFrame(
            rdd.filter(lambda kv: kv[0] == "downgrade").map(lambda kv: kv[1]), DOWNGRADE_SCHEMA
        )
        bad = corrupt_batches(spark, paths, naming).cache()
        counts = bad.groupBy("cluster").agg(F.count(F.lit(1)).alias("n"))
        rows = (
            rows.drop("corrupt_batches")
            .join(counts, "cluster", "left")
            .withColumn("corrupt_batches", F.coalesce(F.col("n"), F.lit(0)).cast("bigint"))
            .drop("n")
            .select(*[c.split()[0] for c in AUDIT_SCHEMA.split(", ")])
        )
        rows = rows.cache()
        written = {
            "clusters": write_result(rows, out, "audit/clusters"),
            "downgrades": write_result(downs, out, "audit/downgrades"),
            "corrupt": write_result(bad, out, "audit/corrupt_batches"),
        }
    return AuditResult(rows, downs, bad, written)


# --------------------------------------------------------------------------------- verify


def verify_directory(cluster: str, node: str, pdir: str, files: list[tuple[str, str]]) -> tuple[list[dict], list[dict]]:
    """Checks the files of one partition directory as ``kraftkit verify-log --deep`` does:
    (file rows, problem rows). ``files``: (path, kind), in offset order."""
    from kraftkit.log import verify_segments
    from kraftkit.log.continuity import check_segments, is_metadata_partition

    dense = is_metadata_partition(pdir)  # a KRaft log: no gaps allowed
    with LocalCopy(pdir) as local:
        paths = [os.path.join(local, os.path.basename(p)) for p, _ in files]
        reports = verify_segments(paths, deep=True, check_indexes=True, dense=dense)
    by_file = {r["file"]: r for r in reports}
    shown_of = {
        p: orig for (orig, _), p in zip(files, paths, strict=True)
    }  # locations name the fleet's path, not a local copy
    file_rows, problems = [], []
    counts: dict[str, int] = {}

    def problem(
        f: str, kind: str, message: str, offset=None, position=None, entry=None, reason=None, of: str | None = None
    ) -> None:
        counts[of or f] = counts.get(of or f, 0) + 1  # the segment's row counts its indexes' problems
        problems.append(
            {
                "cluster": cluster,
                "node": node,
                "file": f,
                "kind": kind,
                "offset": offset,
                "position": position,
                "entry": entry,
                "reason": reason or message,
                "message": message,
            }
        )

    for (orig, _kind), p in zip(files, paths, strict=True):
        rep = by_file[p]
        err = rep["error"]
        if err is not None:
            problem(
                orig,
                type(err).__name__,
                str(err).replace(p, orig),
                getattr(err, "offset", None),
                getattr(err, "position", None),
                None,
                getattr(err, "reason", None),
            )
        for suffix, entry, reason in rep["index_problems"]:
            idx = str(Path(orig).with_suffix("." + suffix))
            problem(idx, "index", f"{idx}: entry {entry}: {reason}", entry=entry, reason=reason, of=orig)
    # offsets across segments (and, in a KRaft log, between batches): verify-log's continuity rules
    for d in check_segments(
        [by_file[p] for (_o, kind), p in zip(files, paths, strict=True) if kind == "segment"], dense=dense
    ):
        f = shown_of.get(d.file, d.file)
        problem(f, "offsets", str(d).replace(d.file, f), d.offset, d.position, None, d.reason)
    for (orig, kind), p in zip(files, paths, strict=True):
        rep = by_file[p]
        file_rows.append(
            {
                "cluster": cluster,
                "node": node,
                "file": orig,
                "kind": kind,
                "batches": rep["batches"],
                "records": rep["records"],
                "bytes": rep["total_bytes"],
                "first_offset": rep["first_offset"],
                "last_offset": rep["last_offset"],
                "problems": counts.get(orig, 0),
            }
        )
    return file_rows, problems


def _verify_task(item: tuple[str, str, str, list[tuple[str, str]]]) -> Iterator[tuple[str, dict]]:
    try:
        rows, problems = verify_directory(*item)
    except Exception as e:  # an unreadable directory is a finding, not a failed job
        cluster, node, pdir, _ = item
        yield (
            "problem",
            {
                "cluster": cluster,
                "node": node,
                "file": pdir,
                "kind": type(e).__name__,
                "offset": None,
                "position": None,
                "entry": None,
                "reason": str(e),
                "message": f"{pdir}: {e}",
            },
        )
        return
    for r in rows:
        yield "file", r
    for p in problems:
        yield "problem", p


@dataclass
class VerifyResult:
    files: Any
    problems: Any
    paths: dict[str, str | None]

    def summary(self) -> str:
        from pyspark.sql import functions as F

        per = (
            self.files.groupBy("cluster")
            .agg(
                F.count(F.lit(1)).alias("files"),
                F.sum("batches").alias("batches"),
                F.sum("records").alias("records"),
                F.sum("bytes").alias("bytes"),
                F.sum("problems").alias("problems"),
            )
            .orderBy("cluster")
            .collect()
        )
        lines = [f"{'cluster':<16} {'files':>6} {'batches':>9} {'records':>10} {'MB':>8} {'problems':>8}"]
        for r in per:
            lines.append(
                f"{r['cluster']:<16} {r['files']:>6} {r['batches']:>9} {r['records']:>10} "
                f"{r['bytes'] / 1e6:>8.1f} {r['problems']:>8}"
            )
        probs = self.problems.orderBy("cluster", "node", "file").collect()
        for p in probs[:20]:
            lines.append(f"  - {p['message']}")
        if len(probs) > 20:
            lines.append(f"  ... and {len(probs) - 20} more")
        lines.append(
            f"{sum(r['files'] for r in per)} file(s) in {len(per)} cluster(s): "
            + ("all valid" if not probs else f"{len(probs)} problem(s)")
            + "".join(f"; {k}: {v}" for k, v in self.paths.items() if v)
        )
        return "\n".join(lines)


def verify(
    spark: Any, paths: str | list[str], out: str | None = None, *, progress: bool | None = None, naming: str = "auto"
) -> VerifyResult:
    """Verifies every metadata file under ``paths`` (see the module docstring; ``naming``: how
    clusters and nodes are named, :data:`kraftkit.spark.layout.NAMINGS`)."""
    files = discover(paths, naming=naming)
    dirs: dict[str, list[FleetFile]] = defaultdict(list)
    for f in files:
        dirs[f.partition_dir].append(f)
    items = [(fs[0].cluster, fs[0].node, d, [(f.path, f.kind) for f in fs]) for d, fs in sorted(dirs.items())]
    with Progress(spark, "verify", progress):
        rdd = task_rdd(spark, items, _verify_task).cache()
        frows = spark.createDataFrame(
            rdd.filter(lambda kv: kv[0] == "file").map(lambda kv: kv[1]), VERIFY_FILES_SCHEMA
        ).cache()
        probs = spark.createDataFrame(
            rdd.filter(lambda kv: kv[0] == "problem").map(lambda kv: kv[1]), VERIFY_PROBLEMS_SCHEMA
        ).cache()
        written = {
            "files": write_result(frows, out, "verify/files"),
            "problems": write_result(probs, out, "verify/problems"),
        }
    return VerifyResult(frows, probs, written)
