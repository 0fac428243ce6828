"""Opening input files, the one way every Python reader in kraftkit does it.

Opening a FIFO for reading blocks until a writer comes; a character device such as
``/dev/zero`` never ends; a "small" file (``meta.properties``, a checkpoint) may be huge. So
an input file is opened with ``O_NONBLOCK`` (the open of a FIFO returns at once; on a regular
file the flag changes nothing) and ``O_CLOEXEC``, checked with ``fstat`` (the file opened,
not a name checked before), and anything but a regular file is refused with an
:class:`InputFileError` saying what it is. Small files are read with a size bound.

The Rust core opens its inputs the same way (``rust/src/fsutil.rs``). This module is on the
lowest floor (it imports nothing of kraftkit), so every layer can use it.
"""

from __future__ import annotations

import errno
import os
import stat

#: What small text files (meta.properties, checkpoints, quorum-state) may weigh at most.
SMALL_FILE_LIMIT = 1024 * 1024


class InputFileError(OSError):
    """An input file that cannot be read as one: not a regular file, or too large. Its text is
    ``<path>: <reason>``; ``filename`` and ``reason`` are attributes."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{os.fspath(path)}: {reason}")
        self.filename = os.fspath(path)
        self.reason = reason

    def __str__(self) -> str:
        return str(self.args[0])


#: The lock file Kafka keeps in each directory a running node owns (``LogManager.LockFileName``).
LOCK_FILE = ".lock"


class DirectoryLockError(OSError):
    """A directory's :data:`LOCK_FILE` cannot be taken: its text says which file and why."""

    def __str__(self) -> str:
        return str(self.args[0])


class DirectoryLockedError(DirectoryLockError):
    """Another process holds the directory's :data:`LOCK_FILE` (a Kafka or kraftkit node runs on it)."""


class DirectoryLock:
    """Kafka's lock of a node's directory (``FileLock`` on ``DIR/.lock``, taken by ``tryLock``): an
    exclusive ``fcntl`` record lock, the kind the JVM takes on Linux, so a Kafka node and a kraftkit
    node refuse each other's directory as two Kafka nodes do. Held until :meth:`release`. (A POSIX
    lock belongs to the process: a second lock of the same directory in one process is not refused.)"""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        import fcntl

        path = os.path.join(os.fspath(directory), LOCK_FILE)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as e:
            why = "a symbolic link" if e.errno == errno.ELOOP else e.strerror
            raise DirectoryLockError(f"{path}: cannot be opened to lock the directory: {why}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise DirectoryLockError(f"{path}: {not_regular_reason(st.st_mode)}")
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EACCES, errno.EAGAIN):
                    raise
                raise DirectoryLockedError(
                    f"{os.fspath(directory)}: {LOCK_FILE} is locked by another process: a Kafka or kraftkit node "
                    "runs on this directory"
                ) from None
        except BaseException:
            os.close(fd)
            raise
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is: ``a FIFO``, ``a directory``, ..."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a file"


def not_regular_reason(mode: int) -> str:
    """The reason given for a file of ``mode`` that is not a regular file."""
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    return f"not a regular file ({kind_of(mode)})"


def error_text(e: OSError) -> str:
    """``<path>: <reason>`` for any OSError (the system's ``[Errno 13] Permission denied:
    'x'`` becomes ``x: Permission denied``), for messages in the CLI's style."""
    if isinstance(e, InputFileError):
        return str(e)
    if e.filename is not None and e.strerror:
        return f"{os.fsdecode(e.filename)}: {e.strerror}"
    return str(e)


def open_input(path: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    """Opens ``path`` for reading: a regular file (symbolic links followed), never blocking.
    Returns the descriptor (the caller closes it) and its ``fstat``. Raises
    :class:`InputFileError` for anything else, or the system's ``OSError``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if os.path.islink(path):  # say so: "no such file" for a name that is listed misleads
            raise FileNotFoundError(
                errno.ENOENT, f"dangling symbolic link (to {os.readlink(path)})", os.fspath(path)
            ) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(path, not_regular_reason(st.st_mode))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_small(path: str | os.PathLike[str], limit: int = SMALL_FILE_LIMIT, what: str = "this file") -> bytes:
    """The bytes of a small regular file, refusing one larger than ``limit`` bytes (by its size,
    and by what is read: a file growing meanwhile is caught too) without reading it whole."""
    fd, st = open_input(path)
    try:
        if st.st_size > limit:
            raise InputFileError(path, f"{st.st_size} bytes: too large for {what} (at most {limit} bytes)")
        chunks = []
        n = 0
        while n <= limit:
            b = os.read(fd, limit + 1 - n)
            if not b:
                break
            chunks.append(b)
            n += len(b)
        if n > limit:
            raise InputFileError(path, f"more than {limit} bytes: too large for {what} (at most {limit} bytes)")
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_input(path: str | os.PathLike[str]) -> None:
    """Raises what :func:`open_input` would for ``path`` (the file is opened and closed)."""
    fd, _ = open_input(path)
    os.close(fd)
