"""``meta.properties``: Java's properties text (``Properties.store`` and ``load``) and
``MetaProperties``."""

from __future__ import annotations

import bisect
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kraftkit._fs import read_small
from kraftkit.features.storage.errors import StorageStateError
from kraftkit.features.storage.uuids import parse_uuid

META_PROPERTIES = "meta.properties"


def _parse_int(text: str) -> int:
    if not re.fullmatch(r"[+-]?\d{1,20}", text):  # (Java's parseInt takes any Unicode digits too)
        raise ValueError(text)
    n = int(text)
    if not -(2**31) <= n < 2**31:
        raise ValueError(text)
    return n


def _java_string_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def java_properties_order(keys: Sequence[str]) -> list[str]:
    """The order ``java.util.Properties.store`` writes keys in on Java 9-17: the iteration
    order of its ``ConcurrentHashMap`` (16 bins for up to 12 keys; a bin keeps insertion
    order). Kafka 4.3.1 on Java 17 writes ``node.id, directory.id, version, cluster.id``."""
    n = 16
    while len(keys) > n * 3 // 4:
        n *= 2

    def spread(k: str) -> int:
        h = _java_string_hash(k)
        return (h ^ (h >> 16)) & 0x7FFFFFFF

    return [k for _, _, k in sorted((spread(k) & (n - 1), i, k) for i, k in enumerate(keys))]


def _java_escape(s: str, *, key: bool) -> str:
    """``Properties.saveConvert`` (store(Writer): no \\u escapes)."""
    out = []
    for i, ch in enumerate(s):
        if ch == " ":
            out.append("\\ " if i == 0 or key else " ")
        elif ch in "\\=:#!":
            out.append("\\" + ch)
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        else:
            out.append(ch)
    return "".join(out)


def java_date(ts: float | None = None) -> str:
    """``java.util.Date.toString()`` in the local time zone: ``Sat Nov 21 18:08:26 UTC 2026``."""
    t = time.localtime(ts)
    days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    return (
        f"{days[t.tm_wday]} {months[t.tm_mon - 1]} {t.tm_mday:02d} {t.tm_hour:02d}:{t.tm_min:02d}:"
        f"{t.tm_sec:02d} {t.tm_zone or 'UTC'} {t.tm_year}"
    )


def properties_text(props: Mapping[str, str], *, ts: float | None = None) -> str:
    """What ``Properties.store(writer, "")`` writes: ``#``, the date, then the entries."""
    lines = ["#", "#" + java_date(ts)]
    for k in java_properties_order(list(props)):
        lines.append(f"{_java_escape(k, key=True)}={_java_escape(props[k], key=False)}")
    return "\n".join(lines) + "\n"


_UNESCAPE = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesSyntaxError(StorageStateError):
    """Properties text ``Properties.load`` refuses (a malformed ``\\uxxxx`` escape); ``line`` is
    the 1-based line the escape is on."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def parse_properties(text: str) -> dict[str, str]:
    """``Properties.load`` for the files Kafka writes: comments (``#``, ``!``), ``key=value``,
    ``key:value`` or ``key value``, backslash escapes and continuation lines. A key given twice
    keeps its last value, as ``Properties`` does."""
    return {key: value for _line, key, value in properties_entries(text)}


def properties_entries(text: str) -> list[tuple[int, str, str]]:
    """``(line, key, value)`` of each entry of properties text in file order (``line``: where the
    entry begins), read as ``Properties.load`` reads it: lines end at ``\\n``, ``\\r\\n`` or
    ``\\r``; leading spaces, tabs and form feeds of every line are skipped; a line whose first
    other character is ``#`` or ``!`` is a comment unless it continues an entry; an odd number of
    backslashes at the end of a line continues the entry on the next line. Raises
    :class:`PropertiesSyntaxError` (with the line) for a malformed ``\\uxxxx`` escape."""
    entries: list[tuple[int, str, str]] = []
    parts: list[str] = []  # the logical line so far, one part per natural line
    starts: list[int] = []  # the line number of each part
    size = 0
    for number, raw in enumerate(re.split(r"\r\n|\r|\n", text), 1):
        line = raw.lstrip(" \t\f")
        if not size:
            if not line or line[0] in "#!":  # blank, or a comment: only where an entry would begin
                continue
            parts, starts = [], []
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1
        parts.append(line[:-1] if continued else line)
        starts.append(number)
        size += len(parts[-1])
        if continued:
            continue
        if size:
            entries.append(_entry(parts, starts))
        size = 0
    if size:  # the text ended in a continuation
        entries.append(_entry(parts, starts))
    return entries


def _entry(parts: list[str], starts: list[int]) -> tuple[int, str, str]:
    """``(line, key, value)`` of one logical line (its natural lines' ``parts``, on lines ``starts``)."""
    line = "".join(parts)
    offsets = []
    at = 0
    for p in parts:
        offsets.append(at)
        at += len(p)

    def line_of(i: int) -> int:
        return starts[bisect.bisect_right(offsets, i) - 1]

    key, i = [], 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line):
            key.append(_unescape_char(line, i, line_of))
            i += 2 if line[i + 1] != "u" else 6
            continue
        if ch in "=: \t\f":
            break
        key.append(ch)
        i += 1
    while i < len(line) and line[i] in " \t\f":
        i += 1
    if i < len(line) and line[i] in "=:":
        i += 1
        while i < len(line) and line[i] in " \t\f":
            i += 1
    val, j = [], i
    while j < len(line):
        if line[j] == "\\" and j + 1 < len(line):
            val.append(_unescape_char(line, j, line_of))
            j += 2 if line[j + 1] != "u" else 6
        else:
            val.append(line[j])
            j += 1
    return starts[0], "".join(key), "".join(val)


def _unescape_char(line: str, i: int, line_of: Callable[[int], int]) -> str:
    c = line[i + 1]
    if c == "u":
        digits = line[i + 2 : i + 6]
        # exactly four hex digits, as Properties.loadConvert reads them (int() would take "12",
        # "+1_2" or " 1f ")
        if len(digits) != 4 or not all(ch in "0123456789abcdefABCDEF" for ch in digits):
            shown = line if len(line) <= 80 else line[:80] + "..."
            raise PropertiesSyntaxError(f"malformed \\uxxxx encoding in {shown!r}", line_of(i))
        return chr(int(digits, 16))
    return _UNESCAPE.get(c, c)


@dataclass(frozen=True)
class MetaProperties:
    """A ``meta.properties`` file (``MetaProperties``): v1 (KRaft: ``node.id``) or v0
    (ZooKeeper: ``broker.id``)."""

    version: int
    cluster_id: str | None
    node_id: int | None
    directory_id: str | None = None
    #: keys Kafka does not know, kept as read
    other: dict[str, str] = field(default_factory=dict)

    def to_properties(self) -> dict[str, str]:
        """Entries in ``MetaProperties.toProperties`` insertion order."""
        props = {"version": str(self.version)}
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        if self.node_id is not None:
            props["broker.id" if self.version == 0 else "node.id"] = str(self.node_id)
        if self.directory_id is not None:
            props["directory.id"] = self.directory_id
        return props

    def to_text(self, *, ts: float | None = None) -> str:
        return properties_text(self.to_properties(), ts=ts)

    def to_dict(self) -> dict[str, str]:
        """All entries, sorted by key (what ``kafka-storage info`` prints)."""
        return dict(sorted({**self.other, **self.to_properties()}.items()))

    @classmethod
    def from_properties(cls, props: Mapping[str, str], source: str = "meta.properties") -> MetaProperties:
        """``MetaProperties.Builder(props).build()``, with Kafka's checks."""
        ver = props.get("version", "0").strip()
        if ver not in ("0", "1"):
            raise StorageStateError(f"{source}: Unknown meta.properties version number {ver}")
        version = int(ver)
        cluster_id = props.get("cluster.id")
        key = "node.id" if version == 1 else "broker.id"
        node_id = None
        if key in props:
            try:
                node_id = _parse_int(props[key].strip())  # Integer.parseInt: ASCII digits, an int32
            except ValueError:
                raise StorageStateError(f"{source}: Failed to parse {key} property as an int: {props[key]!r}") from None
        if version == 1:
            if cluster_id is None:
                raise StorageStateError(f"{source}: cluster.id was not found.")
            if node_id is None:
                raise StorageStateError(f"{source}: node.id was not found.")
        directory_id = props.get("directory.id")
        if directory_id is not None:
            try:
                parse_uuid(directory_id)
            except ValueError as e:
                raise StorageStateError(f"{source}: invalid directory.id: {e}") from None
        known = {"version", "cluster.id", "node.id", "broker.id", "directory.id"}
        return cls(version, cluster_id, node_id, directory_id, {k: v for k, v in props.items() if k not in known})

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> MetaProperties:
        """Reads a meta.properties file: a regular file of at most 1 MiB (a FIFO, a device or a
        larger file raises :class:`~kraftkit._fs.InputFileError`, an OSError, without being
        read), UTF-8 or else ISO-8859-1 (what Java's ``Properties.load`` reads)."""
        data = read_small(path, what="a meta.properties file")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("latin-1")
        return cls.from_properties(parse_properties(text), os.fspath(path))
