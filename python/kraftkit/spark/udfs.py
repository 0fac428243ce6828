"""Arrow UDFs over KRaft record values, for any DataFrame with a binary column of them (the
``value`` column of ``format("kraft")``, a DataFrame read with Spark's Kafka source, Parquet...).
The Rust core reads the Arrow buffers directly and builds the result's buffers; no Python
object is made per row.

    >>> from kraftkit.spark.udfs import decode_record, batch_crc_valid, downgrade_losses
    >>> df.select(decode_record("value").alias("r")).select("r.*")             # doctest: +SKIP
    >>> df.select(downgrade_losses("value", "3.5").alias("lost"))              # doctest: +SKIP

* :func:`decode_record` -- a metadata record value (frame + body) to
  ``struct<record_type, record_version, record (JSON), error>``;
* :func:`batch_crc_valid` -- whether bytes are a whole v2 record batch whose CRC-32C matches
  (null: not a record batch);
* :func:`downgrade_losses` -- what a record would lose if its snapshot were rewritten at a
  target metadata.version, as ``kraftkit features downgrade`` judges it: ``["PartitionRecord.Directories"]``,
  ``["UserScramCredentialRecord"]`` for a record dropped whole, ``[]`` for nothing lost, null
  for a null or undecodable value, and for one kraftkit's tables do not describe (a record type
  or version newer than its schemas, a FeatureLevelRecord at a level or of a feature newer than
  its tables): unknown is never judged by guess.

The ``*_array`` functions are the same on plain ``pyarrow`` arrays, without Spark.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from kraftkit import _core

DECODED_TYPE = "struct<record_type: string, record_version: int, record: string, error: string>"
_DECODED_ARROW = pa.struct(
    [("record_type", pa.string()), ("record_version", pa.int32()), ("record", pa.string()), ("error", pa.string())]
)


def _binary(values: Any) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        values = pa.array(values, pa.binary())
    t = values.type
    if (
        pa.types.is_large_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary_view(t)
    ):
        values = values.cast(pa.binary())
    elif not pa.types.is_binary(t):
        raise TypeError(f"expected a binary array of record values, got {t}")
    return values


def _inputs(a: pa.Array) -> tuple[Any, Any, Any, int, int]:
    validity, offsets, data = a.buffers()
    if offsets is None:
        offsets = pa.py_buffer(bytes(4 * (len(a) + 1)))
    return validity, offsets, data if data is not None else pa.py_buffer(b""), a.offset, len(a)


def _array(typ: pa.DataType, n: int, parts: tuple) -> pa.Array:
    validity, offsets, values, nulls = parts
    v = None if validity is None else pa.py_buffer(validity)
    bufs = [v, pa.py_buffer(values)] if offsets is None else [v, pa.py_buffer(offsets), pa.py_buffer(values)]
    return pa.Array.from_buffers(typ, n, bufs, null_count=nulls)


def decode_array(values: Any) -> pa.StructArray:
    """Decodes metadata record values (see the module docstring)."""
    a = _binary(values)
    n = len(a)
    t, v, j, e = _core.decode_values(*_inputs(a))
    children = [
        _array(pa.string(), n, t),
        _array(pa.int32(), n, v),
        _array(pa.string(), n, j),
        _array(pa.string(), n, e),
    ]
    return pa.StructArray.from_arrays(children, fields=list(_DECODED_ARROW))


def batch_crc_array(values: Any) -> pa.BooleanArray:
    """Whether each value is a whole v2 record batch with a matching CRC (null: not a batch)."""
    a = _binary(values)
    return _array(pa.bool_(), len(a), _core.batch_crc_values(*_inputs(a)))


@functools.lru_cache(maxsize=64)
def _plan(metadata_version: str) -> _core.RewritePlan:
    from kraftkit.features.registry import registry
    from kraftkit.features.rewrite import _plan as plan
    from kraftkit.features.rewrite import target_release

    reg = registry()
    target = reg.metadata_version(metadata_version)
    return plan(target, reg, target_release(target, reg))


def losses_array(values: Any, metadata_version: str | int) -> pa.ListArray:
    """What each metadata record value would lose at ``metadata_version`` (see the module docstring)."""
    a = _binary(values)
    validity, offsets, child, nulls = _core.record_losses(*_inputs(a), _plan(str(metadata_version)))
    strings = _array(pa.string(), (len(memoryview(child[1])) // 4) - 1, child)
    v = None if validity is None else pa.py_buffer(validity)
    return pa.Array.from_buffers(
        pa.list_(pa.string()), len(a), [v, pa.py_buffer(offsets)], null_count=nulls, children=[strings]
    )


# ------------------------------------------------------------------------------------ Spark UDFs


def _arrow_udf(fn: Callable[..., Any], return_type: str) -> Any:
    from pyspark.sql.functions import arrow_udf

    # pyspark's stubs want a functionType in every form; the run time takes it from fn's type hints
    make: Callable[..., Any] = arrow_udf
    return make(fn, return_type)


@functools.cache
def _decode_udf():
    def decode(values: pa.Array) -> pa.Array:
        return decode_array(values)

    return _arrow_udf(decode, DECODED_TYPE)


@functools.cache
def _crc_udf():
    def crc(values: pa.Array) -> pa.Array:
        return batch_crc_array(values)

    return _arrow_udf(crc, "boolean")


@functools.cache
def _loss_udf(metadata_version: str):
    from kraftkit.features.registry import registry

    registry().metadata_version(metadata_version)  # fails early on an unknown version

    def losses(values: pa.Array) -> pa.Array:
        return losses_array(values, metadata_version)

    return _arrow_udf(losses, "array<string>")


def decode_record(col: Any):
    """Column: ``struct<record_type, record_version, record, error>`` of a record value column."""
    return _decode_udf()(col)


def batch_crc_valid(col: Any):
    """Column: whether a binary column holds whole record batches with valid CRCs."""
    return _crc_udf()(col)


def downgrade_losses(col: Any, metadata_version: str | int):
    """Column: ``array<string>`` of what each record value would lose at ``metadata_version``."""
    return _loss_udf(str(metadata_version))(col)
