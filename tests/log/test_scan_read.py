"""``Segment.scan()`` and ``verify_segments`` read the file through a reused buffer
(rust/src/segment/read.rs) rather than mapping it. They must report what a scan of the mapped
file reports (``Segment.rebuild_indexes``, which maps the file and scans it the way ``scan`` did
before, is the oracle): the same batches, records, offsets, epochs and gaps, and on a damaged or
cut file the same error (kind, file, position, offset, reason). A file that shrinks or grows after
it was opened is read as far as it goes (never a crash: a map would raise SIGBUS).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kraftkit.log as L

NAME = "00000000000000000000.log"
KEYS = (
    "batches",
    "records",
    "valid_bytes",
    "total_bytes",
    "first_offset",
    "last_offset",
    "max_timestamp",
    "epochs",
    "gaps",
    "gap_count",
)


def _log(sizes, value_len, gap_at=None):
    out, off = bytearray(), 0
    for i, n in enumerate(sizes):
        if i == gap_at:
            off += 7
        recs = [(1_000 + off + j, b"k%d" % j, bytes([j % 251]) * value_len, ()) for j in range(n)]
        out += L.encode_batch(recs, base_offset=off, partition_leader_epoch=i // 2)
        off += n
    return bytes(out)


def _view(rep):
    e = rep["error"]
    err = None if e is None else (type(e), str(e), getattr(e, "position", None), getattr(e, "offset", None))
    return {k: rep[k] for k in KEYS}, err


def _same_as_mapped(path):
    seg = L.Segment(path)
    got = _view(seg.scan())
    assert got == _view(seg.rebuild_indexes()[0])
    (rep,) = L.verify_segments([str(path)], check_indexes=False)
    assert _view(rep) == got
    return got


logs = st.builds(
    _log,
    st.lists(st.integers(1, 60), min_size=1, max_size=12),
    st.sampled_from([1, 50, 3000, 70_000, 300_000]),
    st.none() | st.integers(1, 5),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(logs, st.data())
def test_cut_or_damaged_files_report_as_the_mapped_scan(tmp_path, data, draw):
    p = tmp_path / NAME
    cut = draw.draw(st.integers(0, len(data)))
    buf = bytearray(data[:cut])
    for _ in range(draw.draw(st.integers(0, 3))):
        if buf:
            at = draw.draw(st.integers(0, len(buf) - 1))
            buf[at] ^= draw.draw(st.integers(1, 255))
    p.write_bytes(bytes(buf))
    stats, err = _same_as_mapped(p)
    if err is None:
        assert stats["valid_bytes"] == stats["total_bytes"] == len(buf)
    else:
        assert str(p) in err[1]


def test_a_file_truncated_after_it_was_opened_is_a_truncated_file(tmp_path):
    data = _log([40] * 6, 3000)
    p = tmp_path / NAME
    p.write_bytes(data)
    seg = L.Segment(p)  # mapped, at its full length
    os.truncate(p, len(data) - 200_000)  # pages past the new end: a map would fault there
    rep = seg.scan()
    assert type(rep["error"]).__name__ == "TruncatedError"
    assert rep["valid_bytes"] < len(data) - 200_000 and rep["total_bytes"] == len(data) - 200_000
    assert str(p) in str(rep["error"])
    os.truncate(p, 0)
    rep = seg.scan()
    assert (rep["batches"], rep["total_bytes"], rep["error"]) == (0, 0, None)


def test_a_file_growing_after_it_was_opened_is_read_as_it_was(tmp_path):
    data = _log([10] * 4, 100)
    p = tmp_path / NAME
    p.write_bytes(data)
    seg = L.Segment(p)
    with open(p, "ab") as f:
        f.write(_log([10], 100)[:-5])  # a torn batch appended meanwhile: not read
    rep = seg.scan()
    assert rep["error"] is None and rep["total_bytes"] == len(data) and rep["batches"] == 4


_CHILD = """
import faulthandler, mmap, os, sys
import kraftkit.log as L
p = sys.argv[1]
size = os.path.getsize(p)
seg = L.Segment(p)
if sys.argv[2] == "faulthandler-later":
    L.Segment(p).scan()  # the guard is installed by the first scan
    faulthandler.enable()  # ...and replaced: scans then read through a buffer
os.truncate(p, 4096)
rep = seg.scan()
assert type(rep["error"]).__name__ == "TruncatedError" and rep["total_bytes"] == 4096, rep
if sys.argv[2] == "foreign":
    # a SIGBUS that is not the scan's (a Python mmap of the shrunk file) still ends the process
    with open(p, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    os.truncate(p, 0)
    print("touching", flush=True)
    m[100]
print("ok", flush=True)
"""


@pytest.mark.parametrize("mode", ["plain", "faulthandler-later", "foreign"])
def test_the_sigbus_guard_in_a_fresh_interpreter(tmp_path, mode):
    import signal
    import subprocess
    import sys

    p = tmp_path / NAME
    p.write_bytes(_log([40] * 6, 3000))
    r = subprocess.run([sys.executable, "-c", _CHILD, str(p), mode], capture_output=True, text=True, timeout=60)
    if mode == "foreign":
        assert r.returncode == -signal.SIGBUS and r.stdout == "touching\n", (r.returncode, r.stdout, r.stderr)
    else:
        assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr
