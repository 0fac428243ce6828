"""The ``leader-epoch-checkpoint`` file: ``0``, the entry count, then ``epoch startOffset`` lines."""

from __future__ import annotations

from pathlib import Path

from kraftkit._core import write_atomic
from kraftkit._fs import read_small
from kraftkit.errors import LogError

FILE_NAME = "leader-epoch-checkpoint"
VERSION = 0


#: A checkpoint is a few bytes per epoch; anything larger than this is not one.
MAX_BYTES = 16 * 1024 * 1024


def read_leader_epochs(path: Path) -> list[tuple[int, int]]:
    """Reads (epoch, start offset) entries; a missing file has none. A FIFO, a device or a file
    over 16 MiB is refused (:class:`~kraftkit._fs.InputFileError`) without being read."""
    try:
        data = read_small(path, MAX_BYTES, "a leader epoch checkpoint")
    except FileNotFoundError:
        return []
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as e:
        raise LogError(f"{path}: malformed leader epoch checkpoint: not ASCII text (byte position {e.start})") from None
    lines = text.splitlines()
    if len(lines) < 2:
        raise LogError(f"{path}: malformed leader epoch checkpoint: fewer than 2 lines")
    try:
        version = int(lines[0].strip())
        count = int(lines[1].strip())
    except ValueError as e:
        raise LogError(f"{path}: malformed leader epoch checkpoint header: {e}") from None
    if version != VERSION:
        raise LogError(f"{path}: unsupported leader epoch checkpoint version {version}")
    entries = []
    for n, line in enumerate(lines[2 : 2 + count], start=3):
        parts = line.split()
        if len(parts) != 2 or not all(p.lstrip("-").isdigit() and len(p) < 21 for p in parts):
            raise LogError(f"{path}: line {n}: expected 'epoch offset', got {line[:100]!r}")
        entries.append((int(parts[0]), int(parts[1])))
    if len(entries) != count:
        raise LogError(f"{path}: expected {count} entries, found {len(entries)}")
    return entries


def format_leader_epochs(entries: list[tuple[int, int]]) -> bytes:
    lines = [str(VERSION), str(len(entries))] + [f"{e} {o}" for e, o in entries]
    return ("\n".join(lines) + "\n").encode()


def write_leader_epochs(path: Path, entries: list[tuple[int, int]]) -> None:
    """Writes the file atomically (temp file, fsync, rename), as Kafka does."""
    write_atomic(path, format_leader_epochs(entries))
