"""Which files and byte ranges a ``kraft`` scan reads: the options of ``spark.read.format("kraft")``
parsed (:class:`ReadOptions`), the fleet's files discovered (:mod:`kraftkit.spark.layout`), cut at
batch boundaries and packed into partitions. Spark-free: the Python data source
(:mod:`kraftkit.spark.datasource`) plans with it on the driver, and so does the JVM reader
(through :mod:`kraftkit.spark.plan`)."""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from kraftkit.spark import layout
from kraftkit.spark.scan import FileRange, ddl

_TRUE = ("true", "1", "yes")


@dataclass(frozen=True)
class ReadOptions:
    paths: list[str]
    kind: str = "all"
    start_offset: int | None = None
    end_offset: int | None = None
    columns: list[str] | None = None
    partition_bytes: int = 256 << 20
    min_partitions: int = 2
    chunk_rows: int = 65536
    push_filters: bool = False
    naming: str = "auto"

    @classmethod
    def parse(cls, options: dict[str, str], default_min_partitions: int = 2) -> ReadOptions:
        o = {k.lower(): v for k, v in options.items()}
        if o.get("paths"):
            # DataFrameReader.load([a, b]) passes a JSON list
            paths = [str(p) for p in json.loads(o["paths"])]
        else:
            paths = [p.strip() for p in o.get("path", "").split(",") if p.strip()]
        if not paths:
            raise ValueError('kraft: no path; use spark.read.format("kraft").load(PATH_OR_GLOB)')
        kind = o.get("kind", "all").lower()
        if o.get("snapshotsonly", "").lower() in _TRUE:
            kind = "snapshots"
        if o.get("logsonly", "").lower() in _TRUE:
            kind = "logs"
        if kind not in layout.KINDS:
            raise ValueError(f"kraft: kind must be one of {', '.join(layout.KINDS)}, not {kind!r}")
        naming = o.get("naming", "auto").lower()
        if naming not in layout.NAMINGS:
            raise ValueError(f"kraft: naming must be one of {', '.join(layout.NAMINGS)}, not {naming!r}")
        cols = [c.strip() for c in o["columns"].split(",") if c.strip()] if o.get("columns") else None
        if cols is not None:
            ddl(cols)  # checks the names
        return cls(
            paths=paths,
            kind=kind,
            start_offset=int(o["startoffset"]) if o.get("startoffset") else None,
            end_offset=int(o["endoffset"]) if o.get("endoffset") else None,
            columns=cols,
            partition_bytes=int(o.get("partitionbytes", 256 << 20)),
            min_partitions=int(o.get("minpartitions", default_min_partitions)),
            chunk_rows=int(o.get("chunkrows", 65536)),
            push_filters=o.get("pushfilters", "").lower() in _TRUE,
            naming=naming,
        )


def _target(total: int, opts: ReadOptions) -> int:
    """Bytes per partition: total / n for the smallest multiple n of minPartitions that keeps
    partitions within partitionBytes; at least 1 MiB unless partitionBytes asks for less."""
    m = max(1, opts.min_partitions)
    n = max(m, math.ceil(total / max(1, opts.partition_bytes)))
    n = -(-n // m) * m
    floor = min(1 << 20, opts.partition_bytes)
    return max(floor, math.ceil(total / n))


def plan_ranges(files: Sequence[layout.FleetFile], opts: ReadOptions) -> list[FileRange]:
    """The byte ranges to read: files outside the offset range left out, large local files cut
    at batch boundaries."""
    by_dir: dict[str, list[layout.FleetFile]] = defaultdict(list)
    for f in files:
        by_dir[f.partition_dir].append(f)
    lo = opts.start_offset
    hi = opts.end_offset
    chosen: list[layout.FleetFile] = []
    for fs in by_dir.values():
        segs = [f for f in fs if f.kind == "segment"]
        nexts = {s.path: (segs[i + 1].offset if i + 1 < len(segs) else None) for i, s in enumerate(segs)}
        for f in fs:
            if f.kind == "snapshot":
                if f.offset is not None and ((lo is not None and f.offset < lo) or (hi is not None and f.offset > hi)):
                    continue
            else:
                nxt = nexts[f.path]
                if hi is not None and f.offset is not None and f.offset >= hi:
                    continue
                if lo is not None and nxt is not None and nxt <= lo:
                    continue
            chosen.append(f)
    total = sum(f.size for f in chosen)
    target = _target(total, opts)
    ranges: list[FileRange] = []
    for f in chosen:
        local = layout.local_path(f.path)
        if local is not None and f.size > target * 3 // 2:
            from kraftkit._core import batch_splits

            cuts = batch_splits(local, target)
            for a, b in itertools.pairwise(cuts):
                ranges.append(FileRange(f.path, f.cluster, f.node, f.kind, a, b, b - a))
        else:
            ranges.append(FileRange(f.path, f.cluster, f.node, f.kind, 0, None, f.size))
    return ranges


def pack(ranges: Sequence[FileRange], target: int) -> list[list[FileRange]]:
    """Consecutive ranges packed into about ``total / target`` groups of even size (each range
    costs at least 64 KiB, the price of opening a file): a range goes to the group its middle
    byte falls in, so groups differ by at most about one range and a multiple of the cores asked
    for (``_target``) keeps every core busy to the end."""
    costs = [max(r.size, 64 << 10) for r in ranges]
    total = sum(costs)
    n = max(1, -(-total // max(1, target)))
    groups: list[list[FileRange]] = [[] for _ in range(n)]
    at = 0
    for r, cost in zip(ranges, costs, strict=True):
        groups[min(n - 1, (2 * at + cost) * n // (2 * total))].append(r)
        at += cost
    return [g for g in groups if g] or [[]]


def plan_partitions(
    opts: ReadOptions,
    pushed_in: dict[str, set] | None = None,
    pushed_lo: int | None = None,
    pushed_hi: int | None = None,
) -> list[list[FileRange]]:
    """The byte ranges of each partition (at least one partition, maybe empty): the fleet's files,
    those of other clusters, nodes or kinds (``pushed_in``) and segments wholly outside a pushed
    offset range left out."""
    files = layout.discover(opts.paths, opts.kind, opts.naming)
    files = [f for f in files if all(getattr(f, c) in vals for c, vals in (pushed_in or {}).items())]
    if pushed_hi is not None or pushed_lo is not None:
        # segments hold log offsets: those wholly outside the pushed range are not read
        narrowed = ReadOptions(opts.paths, "all", pushed_lo, pushed_hi)
        keep = {r.path for r in plan_ranges([f for f in files if f.kind == "segment"], narrowed)}
        files = [f for f in files if f.kind != "segment" or f.path in keep]
    if not files:
        return [[]]
    ranges = plan_ranges(files, opts)
    total = sum(max(r.size, 64 << 10) for r in ranges)
    return pack(ranges, _target(total, opts))
