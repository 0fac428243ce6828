"""How entries travel over the wire between real nodes: Kafka record batches.

The core hands the adapter what its log read (raw :class:`~kraftkit.raft.log.Batch` bytes from a
:class:`~kraftkit.raft.file_log.FileRaftLog`) and gets back what to append. Encoding is a join of the
segment bytes (no re-encoding, so a follower stores exactly the leader's bytes); decoding cuts the
answer at its last complete batch and checks every CRC, keeping the valid prefix: a corrupt batch
is never appended (Kafka's follower fails the append the same way) and the next Fetch asks again.
"""

from __future__ import annotations

import logging
from typing import Any

from kraftkit._core import decode_batches
from kraftkit.errors import CorruptRecordError
from kraftkit.raft.core import RecordsAdapter
from kraftkit.raft.file_log import split_batches
from kraftkit.raft.log import Batch

__all__ = ["KafkaRecords"]

log = logging.getLogger(__name__)


class KafkaRecords(RecordsAdapter):
    """Records as Kafka sends them: concatenated v2 record batches."""

    def __init__(self) -> None:
        self.corrupt_batches = 0

    def encode(self, batches: list[Batch]) -> bytes:  # type: ignore[override]
        if batches and not isinstance(batches[0], Batch):
            raise TypeError("KafkaRecords encodes the raw batches of a FileRaftLog, not in-memory entries")
        return b"".join(b.data for b in batches)

    def decode(self, records: Any) -> list[Batch]:  # type: ignore[override]
        if not records:
            return []
        batches, used = split_batches(records)
        try:
            decode_batches(memoryview(records)[:used], verify_crc=True)  # all at once: the common case
            return batches
        except CorruptRecordError:
            pass  # find the first bad one and keep what comes before it
        good: list[Batch] = []
        for b in batches:
            try:
                decode_batches(b.data, verify_crc=True)
            except CorruptRecordError as e:
                self.corrupt_batches += 1
                log.error("dropping a fetched batch at offset %d and what follows: %s", b.offset, e)
                break
            good.append(b)
        return good
