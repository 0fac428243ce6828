"""Byte-level mutations of a valid segment and a valid snapshot, driven by hypothesis, each read
by the commands that check or dump one file, under the runner's limits.

A mutation is a bit flip, a truncation, inserted or deleted bytes, or one batch header field
overwritten (length, count, offsets, epoch, magic, CRC, attributes, timestamps; the count and
lastOffsetDelta also with the CRC made valid again, so that only decoding the records can tell).
What a correct command must answer follows from what the mutation touched, decided
conservatively:

* nothing changed (a field overwritten with its own value): exit 0;
* bytes the CRC covers, the length or the magic, any inserted or deleted byte, or a cut inside a
  batch: exit 1 or 2 from every command (the CRC, the framing or the torn tail gives it away);
* a count changed, or a lastOffsetDelta lowered, under a valid CRC: exit 1 or 2 from every
  command (each decodes the records: the records no longer match the header);
* a segment cut at a batch boundary: still a valid segment, exit 0;
* only base offsets or partition leader epochs (outside the CRC), or a lastOffsetDelta raised
  under a valid CRC: any exit for a segment (a generic log may have gaps and any epochs), but
  ``snapshot verify`` must fail a snapshot (offsets start at 0 and are contiguous, every batch
  carries the file name's epoch, the footer ends it); the same for a snapshot cut at a boundary.

Always: no signal, no timeout, no traceback, exit 0, 1 or 2, and a non-zero exit names the file.
"""

from __future__ import annotations

import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.hostile import batches as B
from tests.hostile import corpus as C
from tests.hostile.runner import run_kraftkit

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    phases=[Phase.explicit, Phase.generate],  # no shrinking: each example costs 3 processes
                    suppress_health_check=[HealthCheck.too_slow])

#: values worth writing into a field of each struct format
SPECIAL_VALUES = {
    ">q": [0, 1, -1, 2**31 - 1, 2**31, 2**62, 2**63 - 1, -(2**63)],
    ">i": [0, 1, -1, 12, 48, 49, 61, 2**28, 2**31 - 1, -(2**31)],
    ">h": [0, 1, 2, 3, 4, 5, 7, 0x08, 0x10, 0x20, 0x40, -1, 0x7FFF],
    ">b": [0, 1, 2, 3, -1, 127],
    ">I": [0, 1, 0xFFFFFFFF],
}
RANGES = {">q": (-(2**63), 2**63 - 1), ">i": (-(2**31), 2**31 - 1), ">h": (-(2**15), 2**15 - 1),
          ">b": (-128, 127), ">I": (0, 2**32 - 1)}


@dataclass(frozen=True)
class Mutation:
    kind: str  # flip, truncate, insert, delete, field
    pos: int = 0
    arg: int = 0  # bit, new length, deleted count or field value
    blob: bytes = b""
    field: str = ""
    batch: int = 0  # index of the batch whose field is overwritten
    fix_crc: bool = False

    def apply(self, data: bytes, batches: list[B.BatchInfo]) -> bytes:
        if self.kind == "flip":
            out = bytearray(data)
            out[self.pos] ^= 1 << self.arg
            return bytes(out)
        if self.kind == "truncate":
            return data[: self.arg]
        if self.kind == "insert":
            return data[: self.pos] + self.blob + data[self.pos:]
        if self.kind == "delete":
            return data[: self.pos] + data[self.pos + self.arg:]
        b = batches[self.batch]
        off, fmt = B.FIELDS[self.field]
        out = bytearray(data)
        struct.pack_into(fmt, out, b.position + off, self.arg)
        if self.fix_crc:
            struct.pack_into(">I", out, b.position + B.CRC, B.crc_of(out[b.position: b.end]))
        return bytes(out)


@st.composite
def mutations(draw: st.DrawFn, data: bytes, batches: list[B.BatchInfo]) -> Mutation:
    kind = draw(st.sampled_from(["flip", "flip", "truncate", "insert", "delete", "field", "field", "field"]))
    n = len(data)
    if kind == "flip":
        return Mutation("flip", pos=draw(st.integers(0, n - 1)), arg=draw(st.integers(0, 7)))
    if kind == "truncate":
        ends = [b.end for b in batches[:-1]]
        return Mutation("truncate", arg=draw(st.sampled_from([0, *ends]) | st.integers(0, n - 1)))
    if kind == "insert":
        return Mutation("insert", pos=draw(st.integers(0, n)), blob=draw(st.binary(min_size=1, max_size=16)))
    if kind == "delete":
        return Mutation("delete", pos=draw(st.integers(0, n - 1)), arg=draw(st.integers(1, 16)))
    i = draw(st.integers(0, len(batches) - 1))
    name = draw(st.sampled_from(sorted(B.FIELDS)))
    fmt = B.FIELDS[name][1]
    value = draw(st.sampled_from(SPECIAL_VALUES[fmt]) | st.integers(*RANGES[fmt]))
    fix = name in ("records_count", "last_offset_delta") and draw(st.booleans())
    return Mutation("field", arg=value, field=name, batch=i, fix_crc=fix)


def touched(m: Mutation, data: bytes, mutated: bytes, batches: list[B.BatchInfo]) -> str:
    """What the mutation changed: "same", "damage" (must fail everywhere), "boundary" (a cut
    between batches), or "outside" (only base offsets, epochs or a raised lastOffsetDelta)."""
    if mutated == data:
        return "same"
    if m.kind in ("insert", "delete"):
        return "damage"
    if m.kind == "truncate":
        return "boundary" if m.arg in {0, *(b.end for b in batches)} else "damage"
    if m.kind == "field" and m.fix_crc:
        old = batches[m.batch].count if m.field == "records_count" else batches[m.batch].last_offset_delta
        return "outside" if m.field == "last_offset_delta" and m.arg > old else "damage"
    where = set()
    for i in (i for i in range(len(data)) if data[i] != mutated[i]):
        b = next(b for b in batches if b.position <= i < b.end)
        rel = i - b.position
        where.add("outside" if rel < B.LENGTH or B.EPOCH <= rel < B.MAGIC else "damage")
    return "damage" if "damage" in where else "outside"


def expected(kind: str, what: str, command: str) -> set[int]:
    if what == "same":
        return {0}
    if what == "damage":
        return {1, 2}
    if kind == "segment":
        return {0} if what == "boundary" else {0, 1, 2}
    return {1, 2} if command == C.SVERIFY else {0, 1, 2}


def check(kind: str, name: str, m: Mutation, data: bytes, batches: list[B.BatchInfo], commands: list[str]) -> None:
    mutated = m.apply(data, batches)
    what = touched(m, data, mutated, batches)
    problems = []
    with tempfile.TemporaryDirectory(prefix="kraftkit-mutation-") as tmp:
        f = Path(tmp) / name
        f.write_bytes(mutated)
        for command in commands:
            args = {C.VERIFY: ["verify-log", "--deep", str(f)], C.DUMP_DEEP: ["dump-log", "--deep", str(f)],
                    C.MDUMP: ["metadata", "dump", str(f)], C.SVERIFY: ["snapshot", "verify", str(f)]}[command]
            res = run_kraftkit(args)
            allowed = expected(kind, what, command)
            bad = []
            if res.hang:
                bad.append("hang")
            elif res.crash:
                bad.append(res.describe().splitlines()[0])
            else:
                if res.returncode not in allowed:
                    bad.append(f"exit {res.returncode}, expected {' or '.join(map(str, sorted(allowed)))} ({what})")
                text = res.stderr + (res.stdout if command in C.REPORTS else "")
                if res.returncode != 0 and name not in text:
                    bad.append("the error does not name the file")
            if "Traceback" in res.stdout + res.stderr:
                bad.append("traceback")
            if bad:
                problems.append(f"{command}: {'; '.join(bad)}\n{res.describe()}")
    assert not problems, f"{kind} mutated by {m}:\n" + "\n".join(problems)


@pytest.fixture(scope="module")
def seeds(hostile_base: C.Base) -> dict[str, tuple[str, bytes, list[B.BatchInfo]]]:
    """The first segment (every codec but one, a control batch) and the snapshot, as bytes."""
    part = hostile_base.root / C.PART
    seg = part / C.seg_name(0)
    snap = part / hostile_base.snapshot
    return {"segment": (seg.name, seg.read_bytes(), hostile_base.segments[0]),
            "snapshot": (snap.name, snap.read_bytes(), hostile_base.snapshot_batches)}


@given(data=st.data())
@SETTINGS
def test_segment_mutations(seeds, data: st.DataObject) -> None:
    name, raw, batches = seeds["segment"]
    m = data.draw(mutations(raw, batches), label="mutation")
    check("segment", name, m, raw, batches, [C.VERIFY, C.DUMP_DEEP, C.MDUMP])


@given(data=st.data())
@SETTINGS
def test_snapshot_mutations(seeds, data: st.DataObject) -> None:
    name, raw, batches = seeds["snapshot"]
    m = data.draw(mutations(raw, batches), label="mutation")
    check("snapshot", name, m, raw, batches, [C.SVERIFY, C.DUMP_DEEP, C.MDUMP])
