"""``spark.read.format("kraft")`` against kraftkit's single-process readers (the oracle):
``kraftkit.log.Segment`` batches decoded by ``decode_metadata_batch``, on a synthetic fleet and
on the metadata log and snapshots of a real Kafka 4.3.1 node."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kraftkit._core import decode_metadata_batch
from kraftkit.log import Segment
from kraftkit.log.control import control_type_name

pytestmark = pytest.mark.spark


def oracle_rows(path: Path) -> list[tuple]:
    """(offset, record_type, record_version, record JSON as dict, crc_valid) of every record of
    a whole file, read by kraftkit.log and the metadata codec."""
    out = []
    for batch in Segment(path).batches():
        for offset, api_key, v, js in decode_metadata_batch(batch, json=True):
            if api_key is None:  # control: v is the control type, js the body
                body = None if js is None else json.loads(js)
                out.append((offset, control_type_name(v), None if body is None else body.get("version"), body, batch.is_valid))
            else:
                d = json.loads(js)
                out.append((offset, d["type"], d["version"], d["data"], batch.is_valid))
    return out


def metadata_files(root: Path) -> list[Path]:
    out = []
    for dirpath, _dirs, names in os.walk(root):
        if os.path.basename(dirpath).startswith("__cluster_metadata"):
            out += [Path(dirpath) / n for n in names if n.endswith(".log") or n.endswith(".checkpoint")]
    return sorted(out)


def spark_rows(spark, path, **options) -> dict[str, list[tuple]]:
    reader = spark.read.format("kraft")
    for k, v in options.items():
        reader = reader.option(k, v)
    rows = reader.load(str(path)).select("file", "offset", "record_type", "record_version", "record", "crc_valid").collect()
    by_file: dict[str, list[tuple]] = {}
    for r in rows:
        by_file.setdefault(r["file"], []).append((r["offset"], r["record_type"], r["record_version"],
                                                   None if r["record"] is None else json.loads(r["record"]), r["crc_valid"]))
    return {f: sorted(v, key=lambda t: (t[0] is None, t[0] or 0)) for f, v in by_file.items()}


def srt(rows) -> list:
    """Rows in a stable order (nulls allowed)."""
    return sorted(rows, key=repr)


def damaged_files(fleet) -> set[str]:
    return {d["file"].replace(".index", ".log") for c in fleet.clusters for d in c.damage}


def test_every_record_of_the_fleet_equals_the_single_process_read(spark, fleet):
    got = spark_rows(spark, fleet.root)
    files = metadata_files(Path(fleet.root))
    assert sorted(got) == sorted(map(str, files))
    bad = damaged_files(fleet)
    for f in files:
        if str(f) in bad and f.suffix == ".log":
            continue  # damaged bytes: below
        assert got[str(f)] == oracle_rows(f), f


def test_damage_is_rows_with_the_location_never_a_failed_job(spark, fleet):
    df = spark.read.format("kraft").load(fleet.root)
    for c in fleet.clusters:
        for d in c.damage:
            if d["kind"] == "crc":
                rows = df.where(df.file == d["file"]).where("position = %d" % d["position"]).collect()
                # the flipped batch: every record row says its CRC does not match
                want = [b for b in Segment(d["file"]).batches() if b.position == d["position"]][0]
                assert not want.is_valid
                assert rows and all(r["crc_valid"] is False for r in rows)
                assert {r["base_offset"] for r in rows} == {want.base_offset}
            elif d["kind"] == "torn":
                rows = df.where(df.file == d["file"]).where("error is not null").collect()
                assert [(r["position"], r["base_offset"], r["offset"]) for r in rows] == [(d["position"], d["base_offset"], None)]
                assert "runs past the end" in rows[0]["error"]
                # every whole batch before the tear is read, as Segment reads them
                good = [b for b in Segment(d["file"]).batches(max_bytes=d["position"])]
                n = df.where(df.file == d["file"]).where("offset is not null").count()
                assert n == sum(b.count for b in good)


def test_snapshots_logs_and_offset_range_options(spark, fleet):
    df = spark.read.format("kraft").load(fleet.root)
    snaps = spark.read.format("kraft").option("kind", "snapshots").load(fleet.root)
    logs = spark.read.format("kraft").option("logsOnly", "true").load(fleet.root)
    assert snaps.count() == df.where("kind = 'snapshot'").count() > 0
    assert logs.count() == df.where("kind = 'segment'").count() > 0
    assert set(r["file"] for r in snaps.select("file").distinct().collect()) == {str(p) for p in metadata_files(Path(fleet.root)) if p.suffix == ".checkpoint"}
    ranged = (spark.read.format("kraft").option("logsOnly", "true").option("startOffset", 100).option("endOffset", 250)
              .load(fleet.root))
    want = logs.where("offset >= 100 and offset < 250")
    cols = ["file", "offset", "record_type", "record"]
    assert srt(ranged.where("offset is not null").select(*cols).collect()) == srt(want.select(*cols).collect())


def test_column_pruning_by_option_and_by_schema(spark, fleet):
    full = spark.read.format("kraft").load(fleet.root).select("cluster", "offset", "record_type")
    pruned = spark.read.format("kraft").option("columns", "cluster,offset,record_type").load(fleet.root)
    assert pruned.columns == ["cluster", "offset", "record_type"]
    assert srt(pruned.collect()) == srt(full.collect())
    by_schema = spark.read.format("kraft").schema("record_type string, cluster string").load(fleet.root)
    assert by_schema.columns == ["record_type", "cluster"]
    assert srt(by_schema.collect()) == srt(full.select("record_type", "cluster").collect())
    with pytest.raises(Exception, match="unknown column"):
        spark.read.format("kraft").option("columns", "nope").load(fleet.root).collect()


def test_big_files_are_cut_at_batch_boundaries_into_partitions(spark, fleet):
    node = Path(fleet.root) / fleet.clusters[2].name / fleet.clusters[2].nodes[0]
    whole = spark.read.format("kraft").option("partitionBytes", 1 << 40).option("minPartitions", 1).load(str(node))
    split = spark.read.format("kraft").option("partitionBytes", 4096).load(str(node))
    assert whole.rdd.getNumPartitions() == 1
    assert split.rdd.getNumPartitions() > len(metadata_files(node))
    cols = ["file", "offset", "position", "record"]
    assert srt(split.select(*cols).collect()) == srt(whole.select(*cols).collect())


def test_globs_uris_and_location_columns(spark, fleet):
    c = fleet.clusters[2]
    glob = spark.read.format("kraft").option("columns", "cluster,node,kind").load(f"{fleet.root}/{c.name}/node-*")
    uri = spark.read.format("kraft").option("columns", "cluster,node,kind").load(f"file://{fleet.root}/{c.name}")
    got = {(r["cluster"], r["node"], r["kind"]) for r in glob.distinct().collect()}
    assert got == {(c.name, n, k) for n in c.nodes for k in ("segment", "snapshot")}
    assert srt(uri.collect()) == srt(glob.collect())


@pytest.mark.kafka
def test_reads_the_metadata_of_a_real_kafka_node(spark, kafka_oracle):
    d = kafka_oracle.metadata_log_dir
    got = spark_rows(spark, d)
    files = sorted(p for p in d.iterdir() if p.suffix in (".log", ".checkpoint") and not p.name.endswith(".deleted"))
    assert files and any(p.suffix == ".checkpoint" for p in files)
    assert sorted(got) == sorted(map(str, files))
    for f in files:
        assert got[str(f)] == oracle_rows(f), f


def test_pushed_filters_spare_reading_and_change_nothing(spark, fleet):
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThan
    from pyspark.sql.types import LongType, StructField, StructType

    from kraftkit.spark.datasource import KraftPushdownReader, ReadOptions

    q = "cluster = 'cluster-001' and offset >= 50 and offset < 120"
    conf = "spark.sql.python.filterPushdown.enabled"
    def rows(push: bool) -> list:
        df = spark.read.format("kraft").option("pushFilters", str(push).lower()).load(fleet.root)
        return srt(df.where(q).select("file", "offset", "record").collect())

    base = rows(False)
    spark.conf.set(conf, "true")
    try:
        pushed = rows(True)
    finally:
        spark.conf.unset(conf)
    assert pushed == base and len(base) > 70
    r = KraftPushdownReader(ReadOptions.parse({"path": fleet.root}), StructType([StructField("offset", LongType())]))
    filters = [EqualTo(("cluster",), "cluster-001"), GreaterThanOrEqual(("offset",), 50), LessThan(("offset",), 120)]
    assert list(r.pushFilters(filters)) == filters
    files = {x.path for p in r.partitions() for x in p.value}
    assert files and all("/cluster-001/" in f for f in files)
    assert (r.pushed_lo, r.pushed_hi) == (50, 120)
