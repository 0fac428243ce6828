"""Fleet discovery and the Arrow scan without Spark: URIs through pyarrow.fs, file bytes, byte
ranges cut at batch boundaries, clusters and nodes named by meta.properties or by path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftkit._core import batch_splits
from kraftkit.log import Segment
from kraftkit.spark.datasource import ReadOptions, pack, plan_ranges
from kraftkit.spark.layout import FleetError, discover, naming_lines, naming_table, read_bytes
from kraftkit.spark.planning import _target
from kraftkit.spark.runner import partition_dirs
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


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(0, 64 << 20), max_size=200), cores=st.integers(1, 16),
       partition_bytes=st.sampled_from([1 << 20, 64 << 20, 256 << 20]))
def test_partitions_keep_file_order_and_are_even(sizes, cores, partition_bytes):
    """What every core gets: consecutive ranges in file order; as many partitions as the smallest
    multiple of the cores whose share fits partitionBytes (when that share is over 1 MiB, the
    least a partition is given, and every range is smaller than a share); no partition larger
    than its share by more than one range."""
    ranges = [FileRange(f"/f{i}", size=s) for i, s in enumerate(sizes)]
    groups = pack(ranges, _target(sum(max(s, 64 << 10) for s in sizes),
                                  ReadOptions(["/"], partition_bytes=partition_bytes, min_partitions=cores)))
    assert [r for g in groups for r in g] == ranges
    assert all(groups) or groups == [[]]
    costs = [max(s, 64 << 10) for s in sizes]
    total, biggest = sum(costs), max(costs, default=0)
    n = cores
    while -(-total // n) > partition_bytes:
        n += cores
    if total // n > 1 << 20 and biggest * n < total:
        assert len(groups) == n
    for g in groups:
        assert sum(max(r.size, 64 << 10) for r in g) <= -(-total // len(groups)) + biggest


def names(files) -> set[tuple[str, str, str]]:
    return {(f.cluster, f.node, f.named_by) for f in files}


def test_meta_properties_name_clusters_and_nodes(formatted_fleet):
    """A fleet at .../ux/demo is cluster <cluster.id>, node <node.id> (what Kafka wrote), not
    cluster "ux", node "demo"; the directory names only when asked for."""
    root, cid, nodes = formatted_fleet
    assert (root / "ux" / "demo" / "meta.properties").read_text().count(f"cluster.id={cid}") == 1
    files = discover(str(root))
    assert names(files) == {(cid, "1", "meta.properties"), (cid, "2", "meta.properties")}
    assert {f.node_dir for f in files} == {str(d) for d in nodes}
    assert names(discover(f"file://{root}")) == names(files)
    # one node's directory named directly: still its meta.properties
    assert names(discover(str(root / "ux" / "demo" / "__cluster_metadata-0"))) == {(cid, "1", "meta.properties")}
    assert names(discover(str(root), naming="path")) == {("ux", "demo", "path"), ("ux", "other", "path")}
    assert names(discover(str(root), naming="meta")) == names(files)
    lines = naming_lines(files)
    assert len(lines) == 1 and lines[0].startswith("2 node(s) named by meta.properties (cluster.id, node.id): ")
    assert f"{root}/ux/demo -> cluster {cid}, node 1" in lines[0]


def test_without_meta_properties_auto_names_by_path_and_says_so(formatted_fleet, fleet):
    root, cid, _ = formatted_fleet
    bare = root / "ux" / "bare" / "__cluster_metadata-0"
    shutil.copytree(sorted((Path(fleet.root) / fleet.clusters[2].name).glob("node-*/__cluster_metadata-0"))[1], bare)
    files = discover(str(root))
    assert names(files) == {(cid, "1", "meta.properties"), (cid, "2", "meta.properties"), ("ux", "bare", "path")}
    table = naming_table(files)
    # ordered by cluster then node; the random cluster id may sort either side of "ux"
    assert [(e["cluster"], e["node"], e["named_by"]) for e in table] == sorted(
        [(cid, "1", "meta.properties"), (cid, "2", "meta.properties"), ("ux", "bare", "path")])
    lines = naming_lines(files)
    assert lines[1] == (f"1 node(s) named by directory names <cluster>/<node>/ (no meta.properties with both ids): "
                        f"{root}/ux/bare -> cluster ux, node bare")
    with pytest.raises(FleetError) as e:
        discover(str(root), naming="meta")
    assert str(e.value).startswith(f"{root}/ux/bare/meta.properties: no meta.properties with cluster.id and node.id")
    assert "--naming path" in str(e.value)


def test_unreadable_meta_properties_is_an_error_naming_it(formatted_fleet):
    root, _, _ = formatted_fleet
    meta = root / "ux" / "demo" / "meta.properties"
    meta.write_text("version=7\ncluster.id=x\nnode.id=1\n")
    with pytest.raises(FleetError, match=f"^{meta}: Unknown meta.properties version number 7$"):
        discover(str(root))
    meta.unlink()
    os.mkfifo(meta)  # never opened for reading: no hang
    with pytest.raises(FleetError) as e:
        discover(str(root))
    assert str(e.value).startswith(f"{meta}: ") and "FIFO" in str(e.value)
    assert names(discover(str(root), naming="path")) == {("ux", "demo", "path"), ("ux", "other", "path")}


def test_two_directories_of_one_node_are_refused_by_the_jobs(formatted_fleet):
    """Two log directories claiming one node of one cluster: a job names both instead of
    reading one of them."""
    root, cid, _ = formatted_fleet
    copy = root / "backup" / "demo"
    shutil.copytree(root / "ux" / "demo", copy)
    files = discover(str(root))
    with pytest.raises(FleetError) as e:
        partition_dirs(files)
    assert str(e.value) == (f"{root}/backup/demo/__cluster_metadata-0 and {root}/ux/demo/__cluster_metadata-0 are both "
                            f"node 1 of cluster {cid} (named by meta.properties); give the job one of them")
