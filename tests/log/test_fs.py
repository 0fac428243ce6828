"""kraftkit._fs: how every Python reader opens its input files (regular files only, without
blocking on a FIFO, small files with a size bound), and the leader epoch checkpoint reader
that uses it."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from kraftkit import _fs
from kraftkit._fs import InputFileError, check_input, error_text, read_small
from kraftkit.errors import LogError
from kraftkit.log.checkpoint import read_leader_epochs


def test_regular_files_are_read_whole(tmp_path: Path) -> None:
    p = tmp_path / "meta.properties"
    p.write_bytes(b"node.id=1\n")
    assert read_small(p) == b"node.id=1\n"
    p.write_bytes(b"")
    assert read_small(p) == b""
    check_input(p)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    # Opening a FIFO for reading blocks until a writer comes: if the open were not
    # non-blocking, this test would hang (no writer ever comes).
    p = tmp_path / "meta.properties"
    os.mkfifo(p)
    with pytest.raises(InputFileError) as e:
        read_small(p)
    assert str(e.value) == f"{p}: not a regular file (a FIFO)"
    assert e.value.filename == str(p) and e.value.reason == "not a regular file (a FIFO)"
    assert isinstance(e.value, OSError)  # callers treat it as unreadable input


def test_devices_and_directories_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match=r"^/dev/zero: not a regular file \(a character device\)$"):
        read_small("/dev/zero")
    link = tmp_path / "meta.properties"
    link.symlink_to("/dev/zero")  # followed, then refused for what it points at
    with pytest.raises(InputFileError, match="a character device"):
        read_small(link)
    with pytest.raises(InputFileError) as e:
        check_input(tmp_path)
    assert str(e.value) == f"{tmp_path}: is a directory, not a file"


def test_a_file_over_the_limit_is_refused_without_being_read(tmp_path: Path) -> None:
    p = tmp_path / "meta.properties"
    with open(p, "wb") as f:
        f.truncate(_fs.SMALL_FILE_LIMIT + 1)  # sparse: nothing to read, only its size
    with pytest.raises(InputFileError) as e:
        read_small(p, what="a meta.properties file")
    assert str(e.value) == (f"{p}: {_fs.SMALL_FILE_LIMIT + 1} bytes: too large for a meta.properties file "
                            f"(at most {_fs.SMALL_FILE_LIMIT} bytes)")
    p.write_bytes(b"x" * 10)
    assert read_small(p, limit=10) == b"x" * 10
    with pytest.raises(InputFileError, match="11 bytes: too large"):
        p.write_bytes(b"x" * 11)
        read_small(p, limit=10)


def test_dangling_links_and_loops_say_what_they_are(tmp_path: Path) -> None:
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError) as e:
        read_small(dangling)
    assert error_text(e.value) == f"{dangling}: dangling symbolic link (to {tmp_path / 'nowhere'})"
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(OSError) as e2:
        read_small(loop)
    assert e2.value.errno == errno.ELOOP
    assert error_text(e2.value) == f"{loop}: Too many levels of symbolic links"
    with pytest.raises(FileNotFoundError) as e3:
        read_small(tmp_path / "missing")
    assert error_text(e3.value) == f"{tmp_path / 'missing'}: No such file or directory"


def test_error_text_of_a_permission_error() -> None:
    # (the tests run as root, which reads any file: the text is checked on the error itself)
    e = PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/x/meta.properties")
    assert str(e) == "[Errno 13] Permission denied: '/x/meta.properties'"
    assert error_text(e) == "/x/meta.properties: Permission denied"


# ------------------------------------------------------------ leader-epoch-checkpoint

def test_leader_epochs_read_and_missing(tmp_path: Path) -> None:
    p = tmp_path / "leader-epoch-checkpoint"
    assert read_leader_epochs(p) == []
    p.write_text("0\n2\n0 0\n3 17\n")
    assert read_leader_epochs(p) == [(0, 0), (3, 17)]


@pytest.mark.parametrize("data,reason", [
    (b"0\n1\n0 \xff\n", "not ASCII text (byte position 6)"),
    (b"0\n1\n0 x\n", "line 3: expected 'epoch offset', got '0 x'"),
    ("0\n1\n0 \u0661\n".encode(), "not ASCII text (byte position 6)"),  # an Arabic-Indic digit one
    (b"0\n1\n" + b"1 " + b"9" * 5000 + b"\n", "line 3: expected 'epoch offset'"),
])
def test_malformed_leader_epochs_are_log_errors(tmp_path: Path, data: bytes, reason: str) -> None:
    p = tmp_path / "leader-epoch-checkpoint"
    p.write_bytes(data)
    with pytest.raises(LogError) as e:
        read_leader_epochs(p)
    assert str(e.value).startswith(f"{p}: ") and reason in str(e.value)


def test_a_fifo_leader_epoch_checkpoint_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "leader-epoch-checkpoint"
    os.mkfifo(p)
    with pytest.raises(InputFileError, match=r"not a regular file \(a FIFO\)"):
        read_leader_epochs(p)
