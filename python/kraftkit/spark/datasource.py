"""``spark.read.format("kraft")``: a fleet's KRaft metadata logs and snapshots as a DataFrame,
one row per record, read by the Rust core into Arrow record batches (Spark 4's Python Data
Source API).

    >>> import kraftkit.spark
    >>> kraftkit.spark.register(spark)                                   # doctest: +SKIP
    >>> df = spark.read.format("kraft").load("/data/fleet")              # doctest: +SKIP
    >>> df.groupBy("cluster", "record_type").count().show()              # doctest: +SKIP

Options:

* ``kind``: ``all`` (default), ``snapshots`` or ``logs`` (also ``snapshotsOnly``/``logsOnly`` = true);
* ``startOffset``, ``endOffset``: log records with offsets in ``[startOffset, endOffset)``
  only; segments outside the range are not read; snapshots are read when their end offset lies
  within ``[startOffset, endOffset]``;
* ``columns``: the columns to read, comma separated (column pruning: only these are built; the
  JSON of ``record`` costs the most). A user schema (``.schema("cluster string, offset bigint")``)
  prunes the same way: Spark's Python sources receive no pruning from the optimizer, so the
  columns read are the columns declared;
* ``partitionBytes`` (default 256 MiB) and ``minPartitions`` (default: the session's default
  parallelism as :func:`kraftkit.spark.register` saw it, else 2): the files are packed into a
  multiple of ``minPartitions`` partitions of at most about ``partitionBytes`` each; larger local
  files are cut at batch boundaries, so one big segment spreads over several tasks. Few large
  partitions are best: a Python data source task costs Spark about 80 ms whatever it reads;
* ``chunkRows``: rows per Arrow batch (default 65536);
* ``naming``: how the ``cluster`` and ``node`` columns are named: ``auto`` (default: from each
  log directory's ``meta.properties``, ``cluster.id`` and ``node.id``, where it has one, else
  from the ``<cluster>/<node>/`` directory names), ``meta`` (``meta.properties`` required) or
  ``path`` (directory names only); see :mod:`kraftkit.spark.layout`.

With the option ``pushFilters=true`` and ``spark.sql.python.filterPushdown.enabled`` (Spark
4.1+; Spark refuses a reader that pushes filters without that setting), ``where`` clauses on ``offset``
(bounds, equality) and on ``cluster``, ``node``, ``kind`` (equality, ``IN``) are pushed: files
of other clusters, nodes or kinds and segments outside the offset range are not read, and records
outside the range are not built. Spark still applies every filter, so results never change.
"""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kraftkit.spark import layout
from kraftkit.spark.planning import ReadOptions, pack, plan_partitions, plan_ranges
from kraftkit.spark.scan import COLUMN_NAMES, FileRange, ddl

__all__ = ["NAME", "KraftDataSource", "KraftPartition", "ReadOptions", "pack", "plan_ranges"]

NAME = "kraft"


class KraftPartition(InputPartition):
    """Byte ranges of one or more files (``value``: a list of :class:`FileRange`), read by one task."""

    def __init__(self, ranges: list[FileRange]) -> None:
        super().__init__(ranges)


class KraftDataSource(DataSource):
    """The ``kraft`` data source (see the module docstring)."""

    #: minPartitions when the option is not given (``register`` sets the session's parallelism)
    default_min_partitions = 2

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        cols = ReadOptions.parse(dict(self.options), self.default_min_partitions).columns or COLUMN_NAMES
        return ddl(cols)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = ReadOptions.parse(dict(self.options), self.default_min_partitions)
        cls = KraftPushdownReader if opts.push_filters else KraftReader
        return cls(opts, schema)


def _check_schema(schema: StructType) -> list[str]:
    names = schema.fieldNames()
    unknown = [n for n in names if n not in COLUMN_NAMES]
    if unknown:
        raise ValueError(f"kraft: unknown column(s) {', '.join(unknown)}; known: {', '.join(COLUMN_NAMES)}")
    from kraftkit.spark.scan import SQL_TYPES

    for f in schema.fields:
        want = SQL_TYPES[f.name]
        got = f.dataType.simpleString()
        if got != want:
            raise ValueError(f"kraft: column {f.name} is {want}, not {got}")
    return names


class KraftReader(DataSourceReader):
    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.columns = _check_schema(schema)
        #: pushed filters (with spark.sql.python.filterPushdown.enabled): an offset range for
        #: every record, and the clusters, nodes and kinds of file to read
        self.pushed_lo: int | None = None
        self.pushed_hi: int | None = None
        self.pushed_in: dict[str, set] = {}

    def partitions(self) -> list[InputPartition]:
        groups = plan_partitions(self.opts, self.pushed_in, self.pushed_lo, self.pushed_hi)
        return [KraftPartition(g) for g in groups]

    def read(self, partition: InputPartition) -> Iterator:
        from kraftkit.spark.scan import arrow_schema, scan_source

        schema = arrow_schema(self.columns)
        for r in partition.value:
            local = layout.local_path(r.path)
            source = local if local is not None else layout.read_bytes(r.path)
            seg = r.kind == "segment"
            los = [x for x in (self.opts.start_offset if seg else None, self.pushed_lo) if x is not None]
            his = [x for x in (self.opts.end_offset if seg else None, self.pushed_hi) if x is not None]
            yield from scan_source(
                source,
                self.columns,
                where=r,
                schema=schema,
                min_offset=max(los) if los else None,
                max_offset=min(his) if his else None,
                chunk_rows=self.opts.chunk_rows,
            )


class KraftPushdownReader(KraftReader):
    """The reader with ``pushFilters`` (option ``pushFilters=true``; Spark refuses a reader that
    has the method while ``spark.sql.python.filterPushdown.enabled`` is false)."""

    def pushFilters(self, filters: list) -> Iterator:
        """Takes what spares reading (offset bounds, cluster/node/kind equality) and hands every
        filter back: Spark still evaluates them all, so pushing never changes a result."""
        from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual

        for f in filters:
            col = f.attribute[0] if len(getattr(f, "attribute", ())) == 1 else None
            v = getattr(f, "value", None)
            if col == "offset" and isinstance(v, int) and not isinstance(v, bool):
                lo = {GreaterThan: v + 1, GreaterThanOrEqual: v, EqualTo: v}.get(type(f))
                hi = {LessThan: v, LessThanOrEqual: v + 1, EqualTo: v + 1}.get(type(f))
                if lo is not None:
                    self.pushed_lo = lo if self.pushed_lo is None else max(self.pushed_lo, lo)
                if hi is not None:
                    self.pushed_hi = hi if self.pushed_hi is None else min(self.pushed_hi, hi)
            elif col in ("cluster", "node", "kind") and isinstance(f, (EqualTo, In)):
                vals = set(f.value) if isinstance(f, In) else {v}
                self.pushed_in[col] = self.pushed_in.get(col, vals) & vals
            yield f
