"""Fleet discovery and the Arrow scan without Spark: URIs through pyarrow.fs, file bytes, byte
ranges cut at batch boundaries."""

from __future__ import annotations

import pyarrow as pa

from kraftkit._core import batch_splits
from kraftkit.log import Segment
from kraftkit.spark.datasource import ReadOptions, pack, plan_ranges
from kraftkit.spark.layout import discover, read_bytes
from kraftkit.spark.scan import FileRange, scan_source


def test_uris_list_and_read_what_local_paths_do(fleet):
    local = discover(fleet.root)
    uri = discover(f"file://{fleet.root}")
    assert [(f.path, f.cluster, f.node, f.kind, f.size, f.offset) for f in local] == \
        [(f.path[len("file://"):], f.cluster, f.node, f.kind, f.size, f.offset) for f in uri]
    assert {f.cluster for f in local} == {c.name for c in fleet.clusters}
    assert discover(f"{fleet.root}/cluster-00[01]/node-1", "snapshots") == [f for f in local if f.kind == "snapshot"
                                                                            and f.node == "node-1" and f.cluster in ("cluster-000", "cluster-001")]
    f = uri[0]
    via_fs = pa.Table.from_batches(list(scan_source(read_bytes(f.path), where=FileRange(f.path, f.cluster, f.node, f.kind))))
    direct = pa.Table.from_batches(list(scan_source(f.path[len("file://"):], where=FileRange(f.path, f.cluster, f.node, f.kind))))
    assert via_fs.equals(direct)
    assert via_fs.num_rows == sum(b.count for b in Segment(f.path[len("file://"):]).batches())


def test_ranges_cut_at_batch_boundaries_cover_the_file_once(fleet):
    f = max(discover(fleet.root, "logs"), key=lambda f: f.size)
    cuts = batch_splits(f.path, 4096)
    starts = {b.position for b in Segment(f.path).batches()}
    assert cuts[0] == 0 and cuts[-1] == f.size and set(cuts[1:-1]) <= starts and len(cuts) >= 3
    whole = pa.Table.from_batches(list(scan_source(f.path, ["offset", "record"])))
    parts = [pa.Table.from_batches(list(scan_source(f.path, ["offset", "record"], where=FileRange(f.path, start=a, end=b))))
             for a, b in zip(cuts, cuts[1:])]
    assert pa.concat_tables(parts).equals(whole)
    opts = ReadOptions([fleet.root], partition_bytes=4096, min_partitions=1)
    ranges = plan_ranges(discover(fleet.root), opts)
    assert sum(r.size for r in ranges) == sum(x.size for x in discover(fleet.root))
    assert [r for g in pack(ranges, 1 << 20) for r in g] == ranges
