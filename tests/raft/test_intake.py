"""The leader's intake of client batches (Produce to __cluster_metadata): the check that they hold
metadata records, and offsets/epoch assigned in place. kafka-python's decoder is the oracle."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftkit._core import (
    assign_offsets, check_metadata_batches, control_record_key, encode_batch, encode_control_record,
    encode_metadata_record,
)
from kraftkit.errors import CorruptRecordError
from kraftkit.metadata.records import record_type
from kraftkit.raft.file_log import split_batches

from ..log._support import KBatch

NOOP = encode_metadata_record(record_type("NoOpRecord")[0], 0, {})


def topic(name: str) -> bytes:
    import uuid

    return encode_metadata_record(record_type("TopicRecord")[0], 0, {"Name": name, "TopicId": uuid.UUID(int=5)})


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 20), min_size=1, max_size=5), st.integers(0, 10**12), st.integers(0, 2**31 - 1),
       st.integers(0, 1))
def test_assigned_offsets_and_epoch_are_what_kafka_python_reads(sizes, base, epoch, compressed):
    data = b"".join(encode_batch([(1000 + i, None, topic(f"t{i}"), [])] * 1 + [(1000, None, NOOP, [])] * (n - 1),
                                 base_offset=0, compression="gzip" if compressed else "none") for i, n in enumerate(sizes))
    assert check_metadata_batches(data) == sum(sizes)
    out, n = assign_offsets(data, base, epoch)
    assert n == sum(sizes) and len(out) == len(data)
    batches, used = split_batches(out)
    assert used == len(out)
    nxt = base
    for b, size in zip(batches, sizes):
        kb = KBatch(b.data)
        assert kb.validate_crc() and kb.base_offset == nxt
        assert struct.unpack(">i", b.data[12:16])[0] == epoch  # PartitionLeaderEpoch (DefaultRecordBatch)
        assert [r.offset for r in kb] == list(range(nxt, nxt + size))
        nxt += size


def test_bad_client_batches_are_refused_with_the_reason():
    good = encode_batch([(0, None, NOOP, [])])
    flipped = bytearray(good)
    flipped[-1] ^= 1
    control = encode_batch([(0, control_record_key(2), encode_control_record(2, {
        "Version": 0, "LeaderId": 1, "Voters": [], "GrantingVoters": []}), [])], control=True)
    cases = {
        "CRC": bytes(flipped),
        "control batch": control,
        "transactional": encode_batch([(0, None, NOOP, [])], transactional=True, producer_id=5, producer_epoch=0,
                                      base_sequence=0),
        "null value": encode_batch([(0, None, None, [])]),
        "record 1": encode_batch([(0, None, NOOP, []), (0, None, b"\x01\xff\xff\x00", [])]),
        "runs past the end": good + good[:20],
    }
    for why, data in cases.items():
        with pytest.raises(CorruptRecordError, match=why):
            check_metadata_batches(data)
    with pytest.raises(CorruptRecordError, match="CRC"):
        assign_offsets(bytes(flipped), 0, 1)
