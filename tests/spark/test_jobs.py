"""The fleet jobs against the single-process tools on the same data (the oracle):
``kraftkit.metadata.image``/``features.offline`` for the audit, ``kraftkit verify-log``'s
``verify`` for the verify job, ``features.rewrite.rewrite_snapshot`` for the rewrite job."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kraftkit.cli import verify_log
from kraftkit.errors import KraftkitError
from kraftkit.features.offline import describe
from kraftkit.features.registry import MV_FEATURE, registry
from kraftkit.features.rewrite import loss_line, rewrite_snapshot
from kraftkit.log import Segment
from kraftkit.metadata.image import load_image
from kraftkit.metadata.snapshot import list_snapshots
from kraftkit.spark import jobs

pytestmark = pytest.mark.spark


def partition_dirs(root: str) -> dict[str, dict[str, Path]]:
    out: dict[str, dict[str, Path]] = {}
    for cluster in sorted(Path(root).iterdir()):
        if cluster.is_dir():
            out[cluster.name] = {n.name: n / "__cluster_metadata-0" for n in sorted(cluster.iterdir())}
    return out


def bad_batches(path: Path) -> int:
    """Batches of a file that fail their CRC, plus one for bytes that frame no batch."""
    n = 0
    try:
        for b in Segment(path).batches():
            n += not b.is_valid
    except KraftkitError:
        n += 1
    return n


@pytest.fixture(scope="module")
def audit(spark, fleet, tmp_path_factory):
    out = tmp_path_factory.mktemp("audit-out")
    return jobs.audit(spark, fleet.root, str(out), progress=False), out


def test_audit_equals_the_single_process_tools(fleet, audit):
    result, out = audit
    rows = {r["cluster"]: r for r in result.clusters.collect()}
    assert sorted(rows) == sorted(partition_dirs(fleet.root))
    reg = registry()
    for cluster, nodes in partition_dirs(fleet.root).items():
        # oracle: the image at the end of the log of each whole node; the job audits the one reaching furthest
        images = {}
        for node, d in nodes.items():
            try:
                images[node] = load_image(d)
            except KraftkitError:
                pass
        node = max(images, key=lambda n: (images[n].provenance.end_offset, -sorted(images).index(n)))
        img = images[node]
        state = describe(nodes[node])
        r = rows[cluster]
        assert r["node"] == node
        assert r["features"] == state.finalized
        assert r["metadata_version"] == reg.by_level(state.finalized[MV_FEATURE]).name
        assert (r["topics"], r["partitions"], r["brokers"]) == (len(img.topics), sum(len(t.partitions) for t in img.topics.values()), len(img.brokers))
        assert r["end_offset"] == state.end_offset
        assert r["corrupt_batches"] == sum(bad_batches(p) for d in nodes.values() for p in sorted(d.iterdir())
                                           if p.suffix in (".log", ".checkpoint"))
        assert r["snapshot"] == list_snapshots(nodes[node])[-1].file_name
    damaged = {c.name for c in fleet.clusters if any(d["kind"] in ("crc", "torn") for d in c.damage)}
    assert {c for c, r in rows.items() if r["corrupt_batches"]} == damaged
    assert (out / "audit" / "clusters").is_dir() and (out / "audit" / "downgrades").is_dir()


def test_audit_downgrades_equal_dry_run_rewrites(fleet, audit, tmp_path):
    result, _ = audit
    reg = registry()
    got = {(d["cluster"], d["to_version"]): d for d in result.downgrades.collect()}
    audited = {r["cluster"]: r["node"] for r in result.clusters.collect()}
    for cluster, nodes in partition_dirs(fleet.root).items():
        img = load_image(nodes[audited[cluster]])
        (tmp_path / cluster).mkdir()
        snap = img.write_snapshot(tmp_path / cluster)
        mv = img.metadata_version
        levels = [m for m in reg.metadata_versions if m.level < mv]
        assert {k[1] for k in got if k[0] == cluster} == {m.name for m in levels}
        for m in levels[:: max(1, len(levels) // 6)] + levels[-2:]:
            rep = rewrite_snapshot(snap, None, m)
            d = got[(cluster, m.name)]
            assert d["error"] is None
            assert (d["lossy"], d["losses"]) == (rep.lossy, [loss_line(x) for x in rep.losses]), (cluster, m.name)
            assert d["records_lost"] == sum(x["count"] for x in rep.losses)


def test_verify_equals_verify_log(spark, fleet, tmp_path):
    result = jobs.verify(spark, fleet.root, str(tmp_path), progress=False)
    parts, _ = verify_log.find_partitions([fleet.root])
    verify_log.verify(parts, deep=True, check_indexes=True)
    want = sorted(p for part in parts for p in part.problems)
    probs = result.problems.collect()
    assert sorted(r["message"] for r in probs) == want
    assert want  # the fleet has damage
    files = result.files.collect()
    assert sum(r["batches"] for r in files) == sum(p.batches for p in parts)
    assert sum(r["records"] for r in files) == sum(p.records for p in parts)
    assert sorted(r["file"] for r in files) == sorted(str(f) for p in parts for f in p.files)
    # exact locations, as the generator recorded the damage it did
    for c in fleet.clusters:
        for d in c.damage:
            mine = [r for r in probs if r["file"] == d["file"]]
            assert mine, d
            if d["kind"] in ("crc", "torn"):
                assert any(r["position"] == d["position"] and r["offset"] == d["base_offset"] for r in mine), (d, mine)
            else:
                assert any(r["kind"] == "index" for r in mine)
    assert "problem(s)" in result.summary()


@pytest.mark.parametrize("target", ["3.5", "4.1-IV1"])
def test_rewrite_equals_single_process_rewrites(spark, fleet, tmp_path, target):
    out = tmp_path / "out"
    result = jobs.rewrite(spark, fleet.root, target, str(out), progress=False)
    rows = {r["cluster"]: r for r in result.report.collect()}
    assert sorted(rows) == sorted(partition_dirs(fleet.root))
    for cluster, nodes in partition_dirs(fleet.root).items():
        # oracle: the newest snapshot of the cluster (the first node holding it), rewritten in this process
        sid, node = None, None
        for n, d in nodes.items():  # in node order: the first node holding the newest snapshot
            last = list_snapshots(d)[-1]
            if sid is None or (last.end_offset, last.epoch) > (sid.end_offset, sid.epoch):
                sid, node = last, n
        src = nodes[node] / sid.file_name
        mine = tmp_path / "oracle" / cluster
        mine.mkdir(parents=True)
        rep = rewrite_snapshot(src, mine, target)
        r = rows[cluster]
        assert r["error"] is None and r["source"] == str(src)
        assert r["destination"] == str(out / "snapshots" / cluster / sid.file_name)
        assert Path(r["destination"]).read_bytes() == (mine / sid.file_name).read_bytes()
        assert (r["lossy"], r["losses"], r["direction"]) == (rep.lossy, [loss_line(x) for x in rep.losses], rep.direction)
        assert (r["records_in"], r["records_out"], r["records_rewritten"]) == (
            rep.counts["records_in"], rep.counts["records_out"], rep.counts["records_rewritten"])
        assert not [p for p in os.listdir(out / "snapshots" / cluster) if p.endswith(".part")]
    assert "rewritten to" in result.summary()
