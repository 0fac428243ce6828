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
from kraftkit.log.checkpoint import read_leader_epochs, write_leader_epochs
from kraftkit.log.log import Log, list_segments, segment_name

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
