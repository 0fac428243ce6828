"""The fleet ``rewrite`` job: every cluster's latest snapshot rewritten at a target
metadata.version (downgrade or upgrade), each output written atomically, with a per-cluster
loss report and a summary table (see :mod:`kraftkit.spark.jobs`)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kraftkit.spark import layout
from kraftkit.spark.layout import discover
from kraftkit.spark.runner import Progress, task_rdd, write_result

REWRITE_SCHEMA = (
    "cluster string, node string, source string, destination string, from_version string, "
    "to_version string, direction string, lossy boolean, records_in bigint, records_out bigint, "
    "records_rewritten bigint, bytes_in bigint, bytes_out bigint, losses array<string>, "
    "feature_changes array<string>, error string"
)


def latest_snapshots(files: list[layout.FleetFile]) -> dict[str, layout.FleetFile]:
    """Per cluster, the snapshot with the highest end offset over its nodes (the first node's
    copy when several hold it)."""
    best: dict[str, layout.FleetFile] = {}
    for f in files:
        if f.kind != "snapshot" or f.offset is None:
            continue
        cur = best.get(f.cluster)
        if cur is None or (f.offset, f.epoch or 0) > (cur.offset, cur.epoch or 0):
            best[f.cluster] = f
    return dict(sorted(best.items()))


def rewrite_cluster(cluster: str, node: str, source: str, dest_dir: str | None, target: str) -> dict:
    """Rewrites one snapshot at ``target`` into ``dest_dir`` (None: dry run); the report row."""
    from kraftkit.features.rewrite import loss_line, rewrite_snapshot

    row: dict[str, Any] = {
        "cluster": cluster,
        "node": node,
        "source": source,
        "destination": None,
        "from_version": None,
        "to_version": None,
        "direction": None,
        "lossy": None,
        "records_in": None,
        "records_out": None,
        "records_rewritten": None,
        "bytes_in": None,
        "bytes_out": None,
        "losses": None,
        "feature_changes": None,
        "error": None,
    }
    name = os.path.basename(source)
    try:
        with tempfile.TemporaryDirectory(prefix="kraftkit-rewrite-") as tmp:
            local_src = layout.local_path(source)
            if local_src is None:
                local_src = os.path.join(tmp, name)
                with open(local_src, "wb") as f:
                    f.write(layout.read_bytes(source))
            dest = None  # where the rewritten snapshot is written
            upload_to = None  # and where it goes when dest_dir is not a local path
            if dest_dir is not None:
                dest_local = layout.local_path(dest_dir)
                if dest_local is None:
                    dest_local, upload_to = os.path.join(tmp, "out"), dest_dir.rstrip("/") + "/" + name
                os.makedirs(dest_local, exist_ok=True)
                dest = os.path.join(dest_local, name)
            rep = rewrite_snapshot(local_src, dest, target)
            if dest is not None and upload_to is not None:
                _upload(dest, upload_to)
            c = rep.counts
            row.update(
                destination=None if dest_dir is None else dest_dir.rstrip("/") + "/" + name,
                from_version=None if rep.source_metadata_version is None else rep.source_metadata_version.name,
                to_version=rep.target.name,
                direction=rep.direction,
                lossy=rep.lossy,
                records_in=c["records_in"],
                records_out=c["records_out"],
                records_rewritten=c["records_rewritten"],
                bytes_in=c["bytes_in"],
                bytes_out=c["bytes_out"],
                losses=[loss_line(x) for x in rep.losses],
                feature_changes=[f"{x['name']}: {x['from']} -> {x['to']}" for x in rep.feature_changes],
            )
    except Exception as e:
        row["error"] = str(e)
    return row


def _upload(local: str, uri: str) -> None:
    """Copies a file to a URI as ``<uri>.part``, then moves it to its name."""
    from pyarrow import fs as pafs

    filesystem, path = pafs.FileSystem.from_uri(uri)
    with open(local, "rb") as src, filesystem.open_output_stream(path + ".part") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    filesystem.move(path + ".part", path)


def _rewrite_task(item: tuple[str, str, str, str | None, str]) -> Iterator[dict]:
    yield rewrite_cluster(*item)


@dataclass
class RewriteResult:
    report: Any
    paths: dict[str, str | None]

    def summary(self) -> str:
        rows = sorted(self.report.collect(), key=lambda r: r["cluster"])
        lines = [f"{'cluster':<16} {'from':<9} {'to':<9} {'direction':<10} {'records':>8} {'rewritten':>9}  lost"]
        for r in rows:
            if r["error"]:
                lines.append(f"{r['cluster']:<16} ERROR {r['error'][:100]}")
                continue
            lost = "; ".join(r["losses"]) or "nothing"
            lines.append(
                f"{r['cluster']:<16} {r['from_version'] or '?':<9} {r['to_version']:<9} {r['direction']:<10} "
                f"{r['records_in']:>8} {r['records_rewritten']:>9}  {lost[:100]}"
            )
        lossy = sum(1 for r in rows if r["lossy"])
        errors = sum(1 for r in rows if r["error"])
        lines.append(
            f"{len(rows)} snapshot(s) rewritten to {rows[0]['to_version'] if rows else '?'}: {lossy} lossy, "
            f"{errors} failed" + "".join(f"; {k}: {v}" for k, v in self.paths.items() if v)
        )
        return "\n".join(lines)


def rewrite(
    spark: Any,
    paths: str | list[str],
    metadata_version: str,
    out: str | None = None,
    *,
    dry_run: bool = False,
    progress: bool | None = None,
    naming: str = "auto",
) -> RewriteResult:
    """Rewrites every cluster's latest snapshot at ``metadata_version`` into
    ``<out>/snapshots/<cluster>/`` (see the module docstring); ``dry_run`` writes no snapshot;
    ``naming``: how clusters and nodes are named (:data:`kraftkit.spark.layout.NAMINGS`)."""
    from kraftkit.features.registry import registry

    target = registry().metadata_version(metadata_version).name  # fails early on an unknown version
    if out is None and not dry_run:
        raise ValueError("rewrite needs an output directory (or dry_run=True)")
    snaps = latest_snapshots(discover(paths, "snapshots", naming))
    items = [
        (c, f.node, f.path, None if dry_run or out is None else f"{out.rstrip('/')}/snapshots/{c}", target)
        for c, f in snaps.items()
    ]
    with Progress(spark, "rewrite", progress):
        rdd = task_rdd(spark, items, _rewrite_task)
        report = spark.createDataFrame(rdd, REWRITE_SCHEMA).cache()
        written = {"report": write_result(report, out, "rewrite/report")}
    return RewriteResult(report, written)
