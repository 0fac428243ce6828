"""Rust's I/O errors reach Python as Python's own OSError subclasses (errno, reason, file name),
without the " (os error N)" suffix Rust's display appends."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from kraftkit._core import Segment


def test_a_missing_segment_is_file_not_found_without_rusts_suffix(tmp_path: Path) -> None:
    missing = tmp_path / "00000000000000000000.log"
    with pytest.raises(FileNotFoundError) as e:
        Segment(str(missing)).read_batches()
    assert e.value.errno == errno.ENOENT and e.value.filename == str(missing)
    assert "os error" not in str(e.value)

