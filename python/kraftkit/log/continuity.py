"""Continuity of a partition's segments: do their offsets follow on from one another?

Kafka's rules (``LogSegment``/``LogLoader``): a segment's file name is its base offset; every
batch in it has a base offset at or above it (a first batch *above* it is legitimate: the
cleaner keeps a merged segment's base offset after removing its first records); segments do
not overlap. In an ordinary partition compaction leaves gaps, between segments and between
batches, so only overlaps and offsets below a segment's base offset are problems there.

A KRaft log (``__cluster_metadata``) is never compacted: its offsets are *dense*. Every batch
starts where the one before it ended, the first batch of every segment at the segment's base
offset, and every batch holds ``lastOffsetDelta + 1`` records. A hole there is lost metadata.

The checks work on the scan reports of ``Segment.scan``/``verify_segments`` (first and last
offset, gaps between batches, the first error), so they cost nothing beyond the scan.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftkit._fs import not_regular_reason
from kraftkit.errors import LogError
from kraftkit.log.checkpoint import FILE_NAME as EPOCH_FILE
from kraftkit.log.checkpoint import read_leader_epochs
from kraftkit.log.log import SEGMENT_RE

#: A leader-epoch-checkpoint holds one short line per leader epoch of the partition's log.
MAX_EPOCH_FILE_BYTES = 16 * 1024 * 1024
#: The partition directory of the KRaft metadata log.
METADATA_TOPIC = "__cluster_metadata"


@dataclass(frozen=True)
class Discontinuity:
    """Offsets that are missing (``kind`` "gap"), held twice ("overlap"), below a segment's
    base offset ("base"), or a snapshot that does not match the log ("snapshot").
    ``offset`` and ``position`` locate the batch where it shows (None when there is none);
    ``missing`` is the first and last offset missing, for gaps."""

    file: str
    offset: int | None
    position: int | None
    reason: str
    kind: str
    missing: tuple[int, int] | None = None

    def __str__(self) -> str:
        where = []
        if self.offset is not None:
            where.append(f"batch base offset {self.offset}")
        if self.position is not None:
            where.append(f"byte position {self.position}")
        return f"{self.file}: {self.reason}" + (f" ({', '.join(where)})" if where else "")


def is_metadata_partition(directory: str | os.PathLike[str]) -> bool:
    """``__cluster_metadata-<n>`` (a KRaft log: dense offsets)."""
    name = os.path.basename(os.path.normpath(os.fspath(directory)))
    topic, _, part = name.rpartition("-")
    return topic == METADATA_TOPIC and part.isdigit()


def segment_base(path: str | os.PathLike[str]) -> int | None:
    """The base offset in a segment file name; None for any other name."""
    m = SEGMENT_RE.match(os.path.basename(os.fspath(path)))
    return int(m.group(1)) if m else None


def _span(first: int, last: int) -> str:
    return f"offset {first} is" if first == last else f"offsets {first}..{last} are"


def check_segments(reports: Iterable[dict[str, Any]], *, dense: bool) -> list[Discontinuity]:
    """Checks the scan reports of one partition's ``.log`` files, given in base-offset order.

    Always: a first batch below the segment's base offset, a segment that overlaps the one
    before it. With ``dense`` (a KRaft log) also: a first batch above the segment's base
    offset, offsets missing between segments and between batches of a segment. A segment
    whose scan stopped at an error is not compared with the next one (the error is the
    problem, and where the segment really ends is unknown)."""
    out: list[Discontinuity] = []
    prev: tuple[str, int] | None = None  # (file, offset after its last batch)
    for rep in reports:
        f = str(rep["file"])
        base = segment_base(f)
        first, last = rep["first_offset"], rep["last_offset"]
        if base is not None and first is not None:
            if first < base:
                out.append(
                    Discontinuity(
                        f,
                        first,
                        0,
                        f"first batch starts at offset {first}, below the segment's base offset {base} (its file name)",
                        "base",
                    )
                )
            elif dense and first > max(base, prev[1] if prev else base):
                # (offsets between the base offset and the first batch that the segment before
                # holds are not missing: that is an overlap, reported below)
                lo = max(base, prev[1] if prev else base)
                reason = (
                    f"{_span(lo, first - 1)} missing: the first batch starts at offset {first}, not at the "
                    f"segment's base offset {base}"
                )
                out.append(Discontinuity(f, first, 0, reason, "gap", (lo, first - 1)))
        if prev is not None and base is not None:
            pf, pend = prev
            if base < pend:
                out.append(
                    Discontinuity(
                        f,
                        first,
                        0 if first is not None else None,
                        f"segment base offset {base} overlaps the previous segment {pf}, which holds "
                        f"offsets up to {pend - 1}",
                        "overlap",
                    )
                )
            elif dense and base > pend:
                reason = (
                    f"{_span(pend, base - 1)} missing: the previous segment {pf} ends at offset {pend - 1} "
                    f"and this one starts at {base}"
                )
                out.append(Discontinuity(f, first, 0 if first is not None else None, reason, "gap", (pend, base - 1)))
        if dense:
            for pos, boff, expected in rep.get("gaps", ()):
                out.append(
                    Discontinuity(
                        f,
                        boff,
                        pos,
                        f"{_span(expected, boff - 1)} missing: the batch before ends at offset {expected - 1}",
                        "gap",
                        (expected, boff - 1),
                    )
                )
            more = rep.get("gap_count", 0) - len(rep.get("gaps", ()))
            if more > 0:
                out.append(Discontinuity(f, None, None, f"{more} more gaps between batches (not listed)", "gap"))
        if rep["error"] is not None:
            prev = None
        elif last is not None:
            prev = (f, last + 1)
        elif base is not None and (prev is None or base >= prev[1]):
            prev = (f, base)  # an empty segment: the log end is its base offset
    return out


def check_leader_epochs(directory: str | os.PathLike[str]) -> list[Discontinuity]:
    """The partition's ``leader-epoch-checkpoint``, where present: a file Kafka cannot read
    (malformed lines, a count that does not match) or an entry it refuses on load (a negative
    epoch or start offset) takes the log directory offline in Kafka."""
    path = os.path.join(os.fspath(directory), EPOCH_FILE)
    if not os.path.exists(path):
        return []
    if not os.path.isfile(path):
        return [Discontinuity(path, None, None, not_regular_reason(os.stat(path).st_mode), "corrupt")]
    if os.path.getsize(path) > MAX_EPOCH_FILE_BYTES:
        return [
            Discontinuity(
                path,
                None,
                None,
                f"{os.path.getsize(path)} bytes: far more than a leader epoch checkpoint holds (not read)",
                "corrupt",
            )
        ]
    try:
        entries = read_leader_epochs(Path(path))
    except (LogError, ValueError, UnicodeDecodeError) as e:
        reason = str(e).removeprefix(f"{path}: ")
        return [Discontinuity(path, None, None, reason, "corrupt")]
    return [
        Discontinuity(
            path, None, None, f"line {n}: epoch {e} at offset {o}: epochs and offsets are never negative", "corrupt"
        )
        for n, (e, o) in enumerate(entries, start=3)
        if e < 0 or o < 0
    ]
