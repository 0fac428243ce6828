"""The records of metadata files as Arrow record batches, built by the Rust core.

This module needs ``pyarrow`` but not Spark: the data source (:mod:`kraftkit.spark.datasource`)
runs it on executors, and a single process can use it directly::

    >>> from kraftkit.spark.scan import scan_file
    >>> for batch in scan_file("00000000000000000000.log", columns=["offset", "record_type"]):  # doctest: +SKIP
    ...     print(batch.num_rows)

``kraftkit._core.RecordScan`` walks the batches (CRC checked, decompressed) with the GIL released
and fills column buffers (validity bitmaps, offsets, values); they are wrapped here without a
copy (``pyarrow.Array.from_buffers``). No Python object is made per row.

Columns (``COLUMNS``, Spark types): the location ``cluster``, ``node``, ``file``, ``kind``
(``segment``/``snapshot``) and, per record, ``base_offset``, ``offset``, ``epoch``,
``timestamp`` (ms), ``crc_valid``, ``is_control``, ``control_type``, ``record_type``,
``record_version``, ``record`` (the body as JSON, as ``kafka-dump-log
--cluster-metadata-decoder`` prints its ``data``), ``value`` (raw bytes), ``position`` (the
batch's byte position in the file) and ``error`` (null, or why the batch or record could not be
read; a batch whose records cannot be parsed is one row with its header fields and the error,
bytes that do not frame a batch end the file with one row at their position).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from kraftkit._core import RecordScan

#: (name, Spark SQL type, Arrow type), in the data source's order.
COLUMNS: list[tuple[str, str, pa.DataType]] = [
    ("cluster", "string", pa.string()),
    ("node", "string", pa.string()),
    ("file", "string", pa.string()),
    ("kind", "string", pa.string()),
    ("base_offset", "bigint", pa.int64()),
    ("offset", "bigint", pa.int64()),
    ("epoch", "int", pa.int32()),
    ("timestamp", "bigint", pa.int64()),
    ("crc_valid", "boolean", pa.bool_()),
    ("is_control", "boolean", pa.bool_()),
    ("control_type", "string", pa.string()),
    ("record_type", "string", pa.string()),
    ("record_version", "int", pa.int32()),
    ("record", "string", pa.string()),
    ("value", "binary", pa.binary()),
    ("position", "bigint", pa.int64()),
    ("error", "string", pa.string()),
]
COLUMN_NAMES = [c[0] for c in COLUMNS]
ARROW_TYPES = {c[0]: c[2] for c in COLUMNS}
SQL_TYPES = {c[0]: c[1] for c in COLUMNS}
#: columns that say where a file is (the same for all its rows); the others come from the core.
LOCATION = ("cluster", "node", "file", "kind")


def ddl(columns: Sequence[str] = COLUMN_NAMES) -> str:
    """The Spark DDL schema of these columns (``cluster string, ...``)."""
    unknown = [c for c in columns if c not in SQL_TYPES]
    if unknown:
        raise ValueError(f"unknown column(s) {', '.join(unknown)}; known: {', '.join(COLUMN_NAMES)}")
    return ", ".join(f"`{c}` {SQL_TYPES[c]}" for c in columns)


def arrow_schema(columns: Sequence[str] = COLUMN_NAMES) -> pa.Schema:
    return pa.schema([pa.field(c, ARROW_TYPES[c]) for c in columns])


@dataclass(frozen=True)
class FileRange:
    """A byte range of one metadata file, and where the file sits in the fleet."""

    path: str
    cluster: str = ""
    node: str = ""
    kind: str = "segment"
    start: int = 0
    #: None: to the end of the file
    end: int | None = None
    size: int = 0


def _array(typ: pa.DataType, rows: int, parts: tuple) -> pa.Array:
    validity, offsets, values, nulls = parts
    v = None if validity is None else pa.py_buffer(validity)
    if offsets is None:
        return pa.Array.from_buffers(typ, rows, [v, pa.py_buffer(values)], null_count=nulls)
    return pa.Array.from_buffers(typ, rows, [v, pa.py_buffer(offsets), pa.py_buffer(values)], null_count=nulls)


def scan_source(
    source: str | os.PathLike[str] | bytes,
    columns: Sequence[str] = COLUMN_NAMES,
    *,
    where: FileRange | None = None,
    min_offset: int | None = None,
    max_offset: int | None = None,
    chunk_rows: int = 65536,
    schema: pa.Schema | None = None,
) -> Iterator[pa.RecordBatch]:
    """Record batches of one file (a local path, or its bytes) with ``columns``. ``where``
    gives the location columns and the byte range. Offsets in ``[min_offset, max_offset)``."""
    where = where or FileRange(str(source) if not isinstance(source, bytes) else "")
    core_cols = [c for c in columns if c not in LOCATION]
    schema = schema or arrow_schema(columns)
    scan = RecordScan(
        source,
        start=where.start,
        end=where.end,
        columns=core_cols,
        min_offset=min_offset,
        max_offset=max_offset,
        chunk_rows=chunk_rows,
    )
    location = {"cluster": where.cluster, "node": where.node, "file": where.path, "kind": where.kind}
    for rows, parts in scan:
        built = {name: _array(ARROW_TYPES[name], rows, p) for name, p in parts}
        arrays = []
        for f in schema:
            a = pa.repeat(pa.scalar(location[f.name], pa.string()), rows) if f.name in location else built[f.name]
            arrays.append(a if a.type == f.type else a.cast(f.type))
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def scan_file(path: str | os.PathLike[str], columns: Sequence[str] = COLUMN_NAMES, **kw) -> Iterator[pa.RecordBatch]:
    """Record batches of one local file (see :func:`scan_source`)."""
    return scan_source(path, columns, **kw)
