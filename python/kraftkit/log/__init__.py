"""Kafka logs: record batches (v2), records, control records, segment files and partition logs.

>>> from kraftkit.log import Segment
>>> for batch in Segment("00000000000000000000.log").batches():   # doctest: +SKIP
...     for record in batch:
...         print(record.offset, record.value)
"""

from kraftkit._core import (
    BatchIter,
    ControlRecord,
    Record,
    RecordBatch,
    Segment,
    SegmentWriter,
    crc32c,
    decode_batches,
    encode_batch,
    truncate_segment,
    verify_segments,
)

TYPE_CHECKING = False  # (not typing's: importing typing takes longer than this whole package)
if TYPE_CHECKING:
    from kraftkit.log.checkpoint import read_leader_epochs, write_leader_epochs
    from kraftkit.log.log import Log, list_segments, segment_name

#: Names loaded on first use: the partition-directory layer pulls in pathlib, which a command
#: that only reads segment files (dump-log) does not need at start-up.
_LAZY = {
    "Log": "kraftkit.log.log",
    "list_segments": "kraftkit.log.log",
    "segment_name": "kraftkit.log.log",
    "read_leader_epochs": "kraftkit.log.checkpoint",
    "write_leader_epochs": "kraftkit.log.checkpoint",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kraftkit.log' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "BatchIter",
    "ControlRecord",
    "Log",
    "Record",
    "RecordBatch",
    "Segment",
    "SegmentWriter",
    "crc32c",
    "decode_batches",
    "encode_batch",
    "list_segments",
    "read_leader_epochs",
    "segment_name",
    "truncate_segment",
    "verify_segments",
    "write_leader_epochs",
]
