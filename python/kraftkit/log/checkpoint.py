"""The ``leader-epoch-checkpoint`` file: ``0``, the entry count, then ``epoch startOffset`` lines."""

from __future__ import annotations

from pathlib import Path

from kraftkit._core import write_atomic
from kraftkit.errors import LogError

FILE_NAME = "leader-epoch-checkpoint"
VERSION = 0


def read_leader_epochs(path: Path) -> list[tuple[int, int]]:
    """Reads (epoch, start offset) entries; a missing file has none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
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
        if len(parts) != 2:
            raise LogError(f"{path}: line {n}: expected 'epoch offset', got {line!r}")
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
