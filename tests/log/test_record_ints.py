"""The offset and timestamp ints of records come from a freelist (rust/src/py/record/ints.rs):
an int that a dead or recycled record held the only reference to is rewritten with the next
offset or timestamp of the same number of digits. None of it may be visible: an offset or
timestamp the caller keeps keeps its value, every record equals what was encoded, and ints of
every size (CPython's cached small ints, 1-3 digits of 30 bits, negative timestamps) come out
right, through iteration (recycled records) and through ``records()`` lists (fresh records, the
dead ones' ints reused). The oracle is the input rows.
"""

from __future__ import annotations

import gc
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

import kraftkit.log as L

# offsets and timestamps across the int sizes: small (cached), 1, 2 and 3 digits of 30 bits
EDGES = [0, 1, 255, 256, 257, (1 << 30) - 1, 1 << 30, (1 << 60) - 1, 1 << 60, (1 << 63) - 10_000]


def _log(groups):
    """One batch per (base_offset, timestamps): records numbered base_offset.., one per timestamp."""
    data = b"".join(
        L.encode_batch([(ts, b"k", b"v%d" % i, ()) for i, ts in enumerate(tss)], base_offset=base)
        for base, tss in groups
    )
    expected = [(base + i, ts) for base, tss in groups for i, ts in enumerate(tss)]
    return L.decode_batches(data), expected


timestamps = st.lists(
    st.one_of(st.sampled_from([-1, 0, 1, 256, 257, 1_700_000_000_000, (1 << 62)]), st.integers(-1, (1 << 63) - 1)),
    min_size=1,
    max_size=40,
)
groups = st.lists(st.tuples(st.sampled_from(EDGES) | st.integers(0, (1 << 62)), timestamps), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(groups, st.integers(0, 7))
def test_ints_equal_the_input_whatever_the_caller_keeps(gs, keep_every):
    batches, expected = _log(gs)
    kept, seen = [], []
    for b in batches:
        for i, r in enumerate(b):
            o, t = r.offset, r.timestamp
            seen.append((o, t))
            if keep_every and i % keep_every == 0:
                kept.append((len(seen) - 1, o, t))  # the ints themselves, not copies
            del o, t
    assert seen == expected
    # ints held across the rest of the iteration were never rewritten
    for at, o, t in kept:
        assert (o, t) == expected[at]
    # the records() lists (fresh records; dead ones' ints reused) give the same
    assert [(r.offset, r.timestamp) for b in batches for r in b.records()] == expected
    gc.collect()
    assert [(r.offset, r.timestamp) for b in batches for r in b] == expected


def test_kept_records_and_ints_survive_later_batches():
    batches, expected = _log(
        [
            (1 << 40, [1_700_000_000_000 + i for i in range(50)]),
            ((1 << 40) + 50, [1_700_000_000_500 + i for i in range(50)]),
        ]
    )
    first = batches[0].records()
    offsets = [r.offset for r in first]
    del first
    gc.collect()
    later = [(r.offset, r.timestamp) for r in batches[1]] + [(r.offset, r.timestamp) for r in batches[1].records()]
    assert offsets == [o for o, _ in expected[:50]]
    assert later == expected[50:] * 2


def test_ints_are_plain_ints_and_small_ones_are_cpythons_own():
    batches, _ = _log([(0, [5, 5, 300, -1]), (1 << 31, [1 << 40])])
    recs = [r for b in batches for r in b.records()]
    assert all(type(r.offset) is int and type(r.timestamp) is int for r in recs)
    assert recs[0].offset is 0 and recs[0].timestamp is 5  # noqa: F632 (the cached small ints)
    assert recs[3].timestamp == -1
    # arithmetic, hashing and comparisons see the values (compact and multi-digit ints)
    assert recs[4].offset + 1 == (1 << 31) + 1 and hash(recs[4].timestamp) == hash(1 << 40)
    assert sys.getrefcount(recs[4].offset) >= 2
