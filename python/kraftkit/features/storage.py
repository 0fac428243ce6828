"""Storage formatting: what ``kafka-storage format``, ``info`` and ``random-uuid`` do.

``format_storage`` writes the bootstrap records (what ``BootstrapMetadata.fromVersions``
makes: a ``FeatureLevelRecord`` for metadata.version, then one per other finalized feature at
a level above 0, sorted by name, never one for kraft.version) and, in every directory, a
``meta.properties`` (v1: ``cluster.id``, ``node.id`` and a ``directory.id``). Where the
bootstrap records go depends on the release being formatted for (``layout``):

* ``bootstrap-file`` (what ``kafka-storage format`` of Kafka 4.3 and older writes): a
  ``bootstrap.checkpoint`` in every directory, and, for a KIP-853 dynamic quorum
  (``--standalone`` / ``--initial-controllers``), the bootstrap snapshot
  ``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`` holding the KRaftVersion
  and Voters control records in the metadata log directory.
* ``checkpoint`` (Kafka 4.4 and newer): no ``bootstrap.checkpoint``; the metadata log
  directory's bootstrap snapshot ``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint``
  holds everything, for a static quorum too: a control batch (SnapshotHeader, then
  KRaftVersion when kraft.version is 1, then Voters when there are initial voters), a batch of
  the bootstrap records, a SnapshotFooter batch. The other directories get only
  ``meta.properties``.

By default the layout follows the release: ``checkpoint`` when the metadata.version belongs to
4.4 or newer, ``bootstrap-file`` below (the layout that release's own tool writes; Kafka 4.4's
tool writes ``checkpoint`` whatever the release version, which ``layout="checkpoint"`` gives).
Feature levels are chosen as Kafka's ``Formatter`` chooses them
(``calculateEffectiveFeatureLevels``): requested levels first, every other production feature
at its default for the release version (``Feature.defaultLevel``), kraft.version 0 unless the
quorum is dynamic, and every level checked against its dependencies. The rules, messages and
files were checked against the real ``kafka-storage`` of Kafka 4.4.0 and 4.3.1
(``tests/kafka/test_storage_kafka.py``, ``tests/kafka/test_storage_layout_kafka.py``).

Every file is written atomically: a temporary file in the same directory, fsync, rename,
fsync of the directory. ``meta.properties`` is written last in each directory, so a
directory counts as formatted only once everything else is in place.

Errors: :class:`StorageInputError` (bad arguments: unknown release or feature level, failed
dependency, malformed cluster id or voter string) and :class:`StorageStateError` (what is on
disk refuses the request: a formatted directory, a meta.properties of another cluster or
node, an unreadable directory).
"""

from __future__ import annotations

import base64
import ipaddress
import os
import re
import secrets
import stat
import time
import uuid as _uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftkit._core import control_record_key, encode_batch, snapshot_footer_value, snapshot_header_value
from kraftkit._fs import error_text, read_small
from kraftkit.errors import KraftkitError
from kraftkit.features.registry import (
    KRAFT_VERSION_FEATURE,
    MV_FEATURE,
    Feature,
    MetadataVersion,
    UnknownVersionError,
    registry,
)
from kraftkit.log.control import ControlType
from kraftkit.metadata.image import FEATURE_LEVEL, uuid_text
from kraftkit.metadata.versions import level_known, unknown_label, unknown_levels

META_PROPERTIES = "meta.properties"
BOOTSTRAP_FILE = "bootstrap.checkpoint"
CLUSTER_METADATA_DIR = "__cluster_metadata-0"
BOOTSTRAP_SNAPSHOT = "00000000000000000000-0000000000.checkpoint"
#: Where the bootstrap records go (see the module doc).
LAYOUT_BOOTSTRAP_FILE = "bootstrap-file"
LAYOUT_CHECKPOINT = "checkpoint"
LAYOUTS = (LAYOUT_BOOTSTRAP_FILE, LAYOUT_CHECKPOINT)
#: The first release line whose kafka-storage format writes the ``checkpoint`` layout.
CHECKPOINT_LAYOUT_SINCE = (4, 4)
#: KafkaRaftClient.MAX_BATCH_SIZE_BYTES (BatchFileWriter's batches)
MAX_BATCH_BYTES = 8 * 1024 * 1024
DEFAULT_CONTROLLER_LISTENER = "CONTROLLER"


class StorageError(KraftkitError):
    """A storage command that cannot be carried out."""

    exit_code = 2


class StorageInputError(StorageError):
    """Bad input: an unknown release or feature level, a failed dependency, a malformed id."""

    exit_code = 2


class StorageStateError(StorageError):
    """What is on disk refuses the request (formatted already, another cluster or node)."""

    exit_code = 1


# ---------------------------------------------------------------------------------- Uuid

_RESERVED_UUIDS = {bytes(16), (1).to_bytes(16, "big")}  # Uuid.ZERO_UUID, Uuid.ONE_UUID (METADATA_TOPIC_ID)


def uuid_to_str(raw: bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    if len(raw) != 16:
        raise ValueError("a Kafka Uuid is 16 bytes")
    return uuid_text(_uuid.UUID(bytes=raw))


def parse_uuid(text: str) -> bytes:
    """Kafka's ``Uuid.fromString``: URL-safe base64 (padding optional) of exactly 16 bytes."""
    if not isinstance(text, str) or len(text) > 24:
        raise ValueError(f"{text!r} is too long to be a base64 Kafka Uuid")
    if not re.fullmatch(r"[A-Za-z0-9_-]{22}(==)?", text):
        raise ValueError(f"{text!r} is not a Kafka Uuid (22 characters of URL-safe base64)")
    # Java's decoder ignores the 4 spare bits of the last character, so the text need not be
    # canonical (the docs' example cluster id MkU3OEVBNTcwNTJENDM2Qk is not); toString is.
    return base64.urlsafe_b64decode(text[:22] + "==")


def random_uuid() -> str:
    """Kafka's ``Uuid.randomUuid()``: a random (version 4) UUID, redrawn while it is reserved
    (zero, one) or its text starts with ``-`` (which command-line parsers take for a flag)."""
    while True:
        raw = _uuid.uuid4().bytes
        text = uuid_to_str(raw)
        if raw not in _RESERVED_UUIDS and not text.startswith("-"):
            return text


def directory_id_reserved(raw: bytes) -> bool:
    """``DirectoryId.reserved``: the first 100 ids (most significant half 0, least < 100)."""
    return raw[:8] == bytes(8) and int.from_bytes(raw[8:], "big") < 100


def generate_directory_id(taken: Iterable[str] = ()) -> str:
    """``MetaPropertiesEnsemble.Copier.generateValidDirectoryId``: 128 random bits, redrawn
    while reserved, starting with ``-``, or already used by another directory."""
    used = set(taken)
    while True:
        raw = secrets.token_bytes(16)
        text = uuid_to_str(raw)
        if not (text.startswith("-") or directory_id_reserved(raw) or text in used):
            return text


def validate_cluster_id(cluster_id: str) -> str:
    """kraftkit accepts only cluster ids of the form ``kafka-storage random-uuid`` prints.
    (Kafka's own tool writes any string, even an empty one; nothing else it makes reads so.)"""
    try:
        raw = parse_uuid(cluster_id)
    except ValueError as e:
        raise StorageInputError(
            f"invalid cluster id {cluster_id!r}: {e}. Use `kraftkit storage random-uuid` to make one.") from None
    if raw in _RESERVED_UUIDS:
        raise StorageInputError(f"invalid cluster id {cluster_id!r}: it is a reserved Uuid")
    if cluster_id.startswith("-"):
        raise StorageInputError(f"invalid cluster id {cluster_id!r}: it starts with '-'")
    return cluster_id[:22]


# ------------------------------------------------------------------------ dynamic voters

@dataclass(frozen=True)
class DynamicVoter:
    """One ``id@host:port:directoryId`` of ``--initial-controllers`` (``DynamicVoter``)."""

    node_id: int
    host: str
    port: int
    directory_id: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.node_id}@{host}:{self.port}:{self.directory_id}"

    def endpoint_host(self) -> str:
        """The host Kafka stores in the Voters record: ``InetSocketAddress.getHostString()``,
        which turns IP literals into Java's text form (``::1`` -> ``0:0:0:0:0:0:0:1``)."""
        try:
            ip = ipaddress.ip_address(self.host)
        except ValueError:
            return self.host
        if isinstance(ip, ipaddress.IPv6Address):
            if ip.ipv4_mapped is not None:  # Java turns ::ffff:a.b.c.d into an Inet4Address
                return str(ip.ipv4_mapped)
            return ":".join(f"{int(g, 16):x}" for g in ip.exploded.split(":"))
        return str(ip)


def _parse_int(text: str) -> int:
    if not re.fullmatch(r"[+-]?\d{1,20}", text):  # (Java's parseInt takes any Unicode digits too)
        raise ValueError(text)
    n = int(text)
    if not -(2**31) <= n < 2**31:
        raise ValueError(text)
    return n


def parse_voter(text: str) -> DynamicVoter:
    """``DynamicVoter.parse``, with Kafka's messages."""
    s = text.strip()
    at = s.find("@")
    if at < 0:
        raise StorageInputError(f"{text!r}: No @ found in dynamic voter string.")
    if at == 0:
        raise StorageInputError(f"{text!r}: Invalid @ at beginning of dynamic voter string.")
    try:
        node_id = _parse_int(s[:at])
    except ValueError:
        raise StorageInputError(f"{text!r}: Failed to parse node id in dynamic voter string.") from None
    if node_id < 0:
        raise StorageInputError(f"{text!r}: Invalid negative node id {node_id} in dynamic voter string.")
    s = s[at + 1:]
    if not s:
        raise StorageInputError(f"{text!r}: No hostname found after node id.")
    if s.startswith("["):
        end = s.find("]")
        if end < 0:
            raise StorageInputError(f"{text!r}: Hostname began with left bracket, but no right bracket was found.")
        host, s = s[1:end], s[end + 1:]
    else:
        colon = s.find(":")
        if colon < 0:
            raise StorageInputError(f"{text!r}: No colon following hostname could be found.")
        host, s = s[:colon], s[colon:]
    if not s.startswith(":"):
        raise StorageInputError(f"{text!r}: Port section must start with a colon.")
    s = s[1:]
    colon = s.find(":")
    if colon < 0:
        raise StorageInputError(f"{text!r}: No colon following port could be found.")
    try:
        port = _parse_int(s[:colon])
    except ValueError:
        raise StorageInputError(f"{text!r}: Failed to parse port in dynamic voter string.") from None
    if not 0 <= port <= 65535:
        raise StorageInputError(f"{text!r}: Invalid port {port} in dynamic voter string.")
    try:
        directory_id = uuid_to_str(parse_uuid(s[colon + 1:]))
    except ValueError:
        raise StorageInputError(f"{text!r}: Failed to parse directory ID in dynamic voter string.") from None
    return DynamicVoter(node_id, host, port, directory_id)


def parse_voters(text: str) -> dict[int, DynamicVoter]:
    """``DynamicVoters.parse``: comma-separated voters, by node id (ascending)."""
    voters: dict[int, DynamicVoter] = {}
    for part in text.strip().split(","):
        if not part:
            continue
        v = parse_voter(part)
        if v.node_id in voters:
            raise StorageInputError(f"Node id {v.node_id} was specified more than once.")
        voters[v.node_id] = v
    if not voters:
        raise StorageInputError("No voters given.")
    return dict(sorted(voters.items()))


@dataclass(frozen=True)
class ControllerListener:
    """``NAME`` or ``NAME://HOST:PORT`` (``--controller-listener``)."""

    name: str
    host: str | None = None
    port: int | None = None


def parse_controller_listener(text: str) -> ControllerListener:
    m = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:://(\[[^\]]*\]|[^:/\[\]]*):([0-9]{1,20}))?", text.strip())
    if not m:
        raise StorageInputError(f"invalid controller listener {text!r} (expected NAME or NAME://HOST:PORT, "
                                f"e.g. CONTROLLER://127.0.0.1:9093)")
    name, host, port = m.group(1), m.group(2), m.group(3)
    if port is None:
        return ControllerListener(name.upper())
    p = int(port)
    if p > 65535:
        raise StorageInputError(f"invalid controller listener {text!r}: port {p} out of range")
    if host and host.startswith("["):
        host = host[1:-1]
    # Kafka: a listener without a host advertises "localhost" (StorageTool.createStandaloneDynamicVoters)
    return ControllerListener(name.upper(), host or "localhost", p)


# ----------------------------------------------------------------------- feature levels

def parse_feature_arg(text: str) -> tuple[str, int]:
    """``NAME=LEVEL`` (StorageTool.parseNameAndLevel), with Kafka's messages."""
    eq = text.find("=")
    if eq < 0:
        raise StorageInputError(f"Can't parse feature=level string {text}: equals sign not found.")
    name, level = text[:eq].strip(), text[eq + 1:].strip()
    try:
        n = _parse_int(level)
        if not -(2**15) <= n < 2**15:
            raise ValueError(level)
    except ValueError:
        raise StorageInputError(f"Can't parse feature=level string {text}: unable to parse {level} as a short.") from None
    return name, n


def supported_features() -> dict[str, Feature]:
    """``Feature.PRODUCTION_FEATURES`` of the newest release in the registry (Kafka 4.3.1)."""
    return {name: f for name, f in sorted(registry().newest_release.features.items()) if f.production}


def bootstrap_metadata_versions() -> list[MetadataVersion]:
    """The metadata.versions ``kafka-storage format`` accepts: from the newest release's
    minimum bootstrap version (3.3-IV3) to its latest production level."""
    reg, rel = registry(), registry().newest_release
    return [m for m in reg.metadata_versions if rel.minimum_bootstrap_version <= m.level <= rel.latest_production]


def _mv_names() -> str:
    return ", ".join(m.name for m in bootstrap_metadata_versions())


def resolve_release_version(spec: str | int | None) -> MetadataVersion:
    """A ``--release-version`` (``3.9``, ``3.9-IV0``, ``3.9.2`` or a level) as Kafka resolves
    it; None: the latest production version. Refuses unknown, too old and unstable levels."""
    reg, rel = registry(), registry().newest_release
    if spec is None:
        return reg.by_level(rel.latest_production)
    try:
        mv = reg.metadata_version(spec)
    except UnknownVersionError:
        raise StorageInputError(f"Unknown metadata.version '{spec}'. Supported metadata.version are: {_mv_names()}") from None
    return _check_mv(mv)


def _check_mv(mv: MetadataVersion) -> MetadataVersion:
    rel = registry().newest_release
    if mv.level < rel.minimum_bootstrap_version:
        raise StorageInputError(f"metadata.version {mv.name} is too old to be supported "
                                f"(the minimum is {registry().by_level(rel.minimum_bootstrap_version).name}).")
    if mv.level > rel.latest_production or not mv.production:
        raise StorageInputError(f"metadata.version {mv.name} is not yet stable.")
    return mv


@dataclass(frozen=True)
class FeatureSet:
    """The finalized features a format starts the cluster with."""

    metadata_version: MetadataVersion
    #: every supported feature (metadata.version and kraft.version included), sorted by name
    levels: dict[str, int]

    def bootstrap_levels(self) -> dict[str, int]:
        """The features ``BootstrapMetadata.fromVersions`` writes a record for (level > 0,
        kraft.version never), metadata.version first and the others sorted by name."""
        out = {MV_FEATURE: self.metadata_version.level}
        for name, level in sorted(self.levels.items()):
            if name not in (MV_FEATURE, KRAFT_VERSION_FEATURE) and level > 0:
                out[name] = level
        return out

    def bootstrap_records(self) -> list[tuple[int, int, dict[str, Any]]]:
        """``(api key, version, data)`` of every bootstrap record (FeatureLevelRecord v0)."""
        return [(FEATURE_LEVEL, 0, {"Name": n, "FeatureLevel": lv}) for n, lv in self.bootstrap_levels().items()]


def resolve_features(
    release_version: str | int | None = None,
    features: Mapping[str, int] | Iterable[tuple[str, int]] = (),
    *,
    dynamic_quorum: bool = False,
) -> FeatureSet:
    """Kafka's ``Formatter.calculateEffectiveReleaseVersion`` + ``calculateEffectiveFeatureLevels``.

    ``features`` are the ``--feature`` settings (a later setting of a name wins, as in Kafka);
    ``dynamic_quorum`` is true with ``--standalone``, ``--initial-controllers`` or
    ``--no-initial-controllers``."""
    requested: dict[str, int] = {}
    for name, level in (features.items() if isinstance(features, Mapping) else features):
        requested[name] = int(level)
    reg = registry()
    if MV_FEATURE in requested:
        if release_version is not None:
            raise StorageInputError(f"Use --release-version instead of --feature {MV_FEATURE}=X to avoid ambiguity.")
        level = requested[MV_FEATURE]
        try:
            mv = _check_mv(reg.by_level(level))
        except UnknownVersionError:
            rel = reg.newest_release
            raise StorageInputError(f"No MetadataVersion with feature level {level}. Valid feature levels are from "
                                    f"{rel.minimum_bootstrap_version} to {reg.latest.level}.") from None
    else:
        mv = resolve_release_version(release_version)
    supported = supported_features()
    for name in requested:
        if name != MV_FEATURE and name not in supported:
            raise StorageInputError(f"Unsupported feature: {name}. Supported features are: {', '.join(supported)}")
    levels: dict[str, int] = dict(requested)
    levels[MV_FEATURE] = mv.level
    for name, f in supported.items():
        if name == KRAFT_VERSION_FEATURE:
            levels[name] = _effective_kraft_version(requested.get(name), dynamic_quorum)
        elif name not in levels:
            levels[name] = f.default_level(mv.level)
    levels = dict(sorted(levels.items()))
    for name, level in levels.items():
        if name == MV_FEATURE:
            continue
        f = supported[name]
        known = [lv for lv in f.levels if lv.level == level and level <= f.latest_production]
        if not known:
            valid = [str(lv.level) for lv in f.levels if lv.level <= f.latest_production]
            raise StorageInputError(f"No feature:{name} with feature level {level} (levels: {', '.join(valid)})")
        if level >= 1 and mv.level < 4:  # Features.validateVersion: any level >= 1 needs 3.3-IV0
            raise StorageInputError(f"{name} could not be set to {level} because it depends on metadata.version=4 (3.3-IV0)")
        for dep, need in known[0].dependencies.items():
            have = levels.get(dep)
            if have is None or have < need:
                what = f"{dep} level {need}"
                if dep == MV_FEATURE:
                    what += f" ({_mv_name(need)}; the release version is {mv.name})"
                raise StorageInputError(f"{name} could not be set to {level} because it depends on {what}")
    return FeatureSet(mv, levels)


def _mv_name(level: int) -> str:
    try:
        return registry().by_level(level).name
    except UnknownVersionError:
        return f"level {level}"


def _effective_kraft_version(configured: int | None, dynamic_quorum: bool) -> int:
    """``Formatter.effectiveKRaftFeatureLevel``."""
    if configured is not None:
        if configured == 0 and dynamic_quorum:
            raise StorageInputError(
                "Cannot set kraft.version to 0 with --standalone, --initial-controllers or --no-initial-controllers "
                "(a dynamic quorum needs kraft.version 1). Try removing the --feature flag for kraft.version.")
        if configured != 0 and not dynamic_quorum:
            raise StorageInputError(
                f"Cannot set kraft.version to {configured} unless one of --standalone, --initial-controllers or "
                f"--no-initial-controllers is used (a static controller.quorum.voters quorum is kraft.version 0).")
        return configured
    return 1 if dynamic_quorum else 0


# ------------------------------------------------------------------------ file writing

def write_file_atomic(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Temp file in the same directory (created with ``mode``, less the umask, as Kafka's files
    are), write, fsync, rename over ``path``, fsync the directory."""
    from kraftkit._core import write_atomic

    write_atomic(path, data, mode=mode)


def fsync_dir(path: Path) -> None:
    from kraftkit._core import fsync_dir as sync_dir

    sync_dir(path)


def bootstrap_checkpoint_bytes(record_values: Sequence[bytes], *, time_ms: int | None = None) -> bytes:
    """The bytes of ``bootstrap.checkpoint`` as Kafka's ``BatchFileWriter`` writes them: a
    control batch with ``SnapshotHeader{LastContainedLogTimestamp 0}``, the framed records in
    data batches of at most 8 MiB (offsets 1..n), a ``SnapshotFooter`` control batch; epoch 0,
    no compression. Batch timestamps are ``time_ms`` (default: the wall clock)."""
    ts = int(time.time() * 1000) if time_ms is None else time_ms
    out = [encode_batch([(ts, control_record_key(ControlType.SNAPSHOT_HEADER), snapshot_header_value(0), ())],
                        base_offset=0, partition_leader_epoch=0, control=True)]
    offset = 1
    batch: list[bytes] = []
    size = 61
    for v in record_values:
        rec = len(v) + 15  # at most: length, attributes, deltas, null key, value length, headers
        if batch and size + rec > MAX_BATCH_BYTES:
            out.append(encode_batch([(ts, None, x, ()) for x in batch], base_offset=offset, partition_leader_epoch=0))
            offset += len(batch)
            batch, size = [], 61
        batch.append(v)
        size += rec
    if batch:
        out.append(encode_batch([(ts, None, x, ()) for x in batch], base_offset=offset, partition_leader_epoch=0))
        offset += len(batch)
    out.append(encode_batch([(ts, control_record_key(ControlType.SNAPSHOT_FOOTER), snapshot_footer_value(), ())],
                            base_offset=offset, partition_leader_epoch=0, control=True))
    return b"".join(out)


# ----------------------------------------------------------------------- meta.properties

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
    return (f"{days[t.tm_wday]} {months[t.tm_mon - 1]} {t.tm_mday:02d} {t.tm_hour:02d}:{t.tm_min:02d}:"
            f"{t.tm_sec:02d} {t.tm_zone or 'UTC'} {t.tm_year}")


def properties_text(props: Mapping[str, str], *, ts: float | None = None) -> str:
    """What ``Properties.store(writer, "")`` writes: ``#``, the date, then the entries."""
    lines = ["#", "#" + java_date(ts)]
    for k in java_properties_order(list(props)):
        lines.append(f"{_java_escape(k, key=True)}={_java_escape(props[k], key=False)}")
    return "\n".join(lines) + "\n"


_UNESCAPE = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """``Properties.load`` for the files Kafka writes: comments (``#``, ``!``), ``key=value``,
    ``key:value`` or ``key value``, backslash escapes and continuation lines."""
    out: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in re.split(r"\r\n|\r|\n", text):
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        key, i = [], 0
        while i < len(line):
            ch = line[i]
            if ch == "\\" and i + 1 < len(line):
                key.append(_unescape_char(line, i))
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
                val.append(_unescape_char(line, j))
                j += 2 if line[j + 1] != "u" else 6
            else:
                val.append(line[j])
                j += 1
        out["".join(key)] = "".join(val)
    return out


def _unescape_char(line: str, i: int) -> str:
    c = line[i + 1]
    if c == "u":
        digits = line[i + 2:i + 6]
        # exactly four hex digits, as Properties.loadConvert reads them (int() would take "12",
        # "+1_2" or " 1f ")
        if len(digits) != 4 or not all(ch in "0123456789abcdefABCDEF" for ch in digits):
            shown = line if len(line) <= 80 else line[:80] + "..."
            raise StorageStateError(f"malformed \\uxxxx encoding in {shown!r}")
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


# ---------------------------------------------------------------------------------- format

DIRECTORY_TYPES = {
    "log": "data directory",
    "metadata": "metadata directory",
    "dynamic-metadata": "dynamic metadata directory",
    "dynamic-metadata-voter": "dynamic metadata voter directory",
}


@dataclass
class DirectoryResult:
    path: str
    #: ``log``, ``metadata``, ``dynamic-metadata``, ``dynamic-metadata-voter``; None: left alone
    type: str | None
    formatted_now: bool
    meta: MetaProperties | None
    files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "type": self.type,
                "description": DIRECTORY_TYPES.get(self.type or "", "already formatted"),
                "formatted_now": self.formatted_now,
                "meta_properties": None if self.meta is None else self.meta.to_dict(), "files": self.files}


@dataclass
class FormatResult:
    cluster_id: str
    node_id: int
    features: FeatureSet
    metadata_log_dir: str
    directories: list[DirectoryResult]
    voters: list[DynamicVoter] | None
    #: the lines ``kafka-storage format`` prints (stdout)
    messages: list[str]
    #: where the bootstrap records went: ``bootstrap-file`` or ``checkpoint``
    layout: str = LAYOUT_BOOTSTRAP_FILE

    def to_dict(self) -> dict[str, Any]:
        mv = self.features.metadata_version
        return {
            "cluster_id": self.cluster_id, "node_id": self.node_id,
            "metadata_version": {"level": mv.level, "name": mv.name},
            "features": self.features.levels,
            "bootstrap_records": [{"name": n, "level": lv} for n, lv in self.features.bootstrap_levels().items()],
            "metadata_log_dir": self.metadata_log_dir,
            "initial_voters": None if self.voters is None else [str(v) for v in self.voters],
            "layout": self.layout,
            "directories": [d.to_dict() for d in self.directories],
        }


def _norm(path: str | os.PathLike[str]) -> str:
    return os.path.normpath(os.path.abspath(os.fspath(path)))


def _load_dir(d: str) -> tuple[str, MetaProperties | None]:
    """(state, props): state "empty" (no meta.properties: formattable), "formatted" or an error."""
    p = Path(d)
    try:
        st = os.stat(d)
    except FileNotFoundError:
        if os.path.islink(d):  # mkdir would fail on it, as Java's createDirectories does
            raise StorageError(f"{d} is a dangling symbolic link (to {os.readlink(d)})") from None
        return "empty", None
    except OSError as e:  # a symbolic link loop, a file where a parent directory should be, ...
        raise StorageError(f"I/O error trying to read log directory {d}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise StorageStateError(f"{d} is not a directory")
    mp = p / META_PROPERTIES
    if not os.path.lexists(mp):
        return "empty", None
    try:
        return "formatted", MetaProperties.read(mp)
    except OSError as e:  # unreadable input (a FIFO, too large, no permission): exit 2
        raise StorageError(f"I/O error trying to read log directory {d}: {error_text(e)}") from None


def format_storage(
    directories: Sequence[str | os.PathLike[str]],
    *,
    cluster_id: str,
    node_id: int,
    release_version: str | int | None = None,
    features: Mapping[str, int] | Iterable[tuple[str, int]] = (),
    metadata_log_dir: str | os.PathLike[str] | None = None,
    standalone: bool = False,
    initial_controllers: str | None = None,
    no_initial_controllers: bool = False,
    controller_listener: str | ControllerListener = DEFAULT_CONTROLLER_LISTENER,
    ignore_formatted: bool = False,
    time_ms: int | None = None,
    layout: str | None = None,
) -> FormatResult:
    """Format storage directories as ``kafka-storage format`` does (see the module doc).

    ``directories`` are the node's log directories; ``metadata_log_dir`` (default: the
    first of them, as Kafka's ``metadata.log.dir`` defaults) is formatted too. With
    ``standalone``, ``controller_listener`` must carry the host and port
    (``CONTROLLER://127.0.0.1:9093``); with ``initial_controllers`` only its name is used.
    ``layout`` (``bootstrap-file`` or ``checkpoint``; default: the one the release's own tool
    writes) says where the bootstrap records go."""
    if not isinstance(node_id, int) or isinstance(node_id, bool) or not 0 <= node_id < 2**31:
        raise StorageInputError(f"invalid node id {node_id!r}: you must specify a valid non-negative node ID.")
    cluster_id = validate_cluster_id(cluster_id)
    dirs = [_norm(d) for d in directories]
    if not dirs:
        raise StorageInputError("You must specify at least one directory to format")
    meta_dir = _norm(metadata_log_dir) if metadata_log_dir is not None else dirs[0]
    all_dirs = sorted(set(dirs) | {meta_dir})
    listener = (controller_listener if isinstance(controller_listener, ControllerListener)
                else parse_controller_listener(controller_listener))
    if sum(map(bool, (standalone, initial_controllers is not None, no_initial_controllers))) > 1:
        raise StorageInputError("--standalone, --initial-controllers and --no-initial-controllers are mutually exclusive")
    voters: dict[int, DynamicVoter] | None = None
    if standalone:
        if listener.port is None:
            raise StorageInputError("--standalone needs the controller listener's host and port: "
                                    "--controller-listener NAME://HOST:PORT (e.g. CONTROLLER://127.0.0.1:9093)")
        voters = {node_id: DynamicVoter(node_id, listener.host or "localhost", listener.port, random_uuid())}
    elif initial_controllers is not None:
        voters = parse_voters(initial_controllers)
    dynamic = voters is not None or no_initial_controllers
    fs = resolve_features(release_version, features, dynamic_quorum=dynamic)
    layout = default_layout(fs.metadata_version) if layout is None else layout
    if layout not in LAYOUTS:
        raise StorageInputError(f"unknown layout {layout!r} (known: {', '.join(LAYOUTS)})")

    # MetaPropertiesEnsemble.Loader.load + verify
    loaded = {d: _load_dir(d) for d in all_dirs}
    existing = {d: m for d, (state, m) in loaded.items() if state == "formatted" and m is not None}
    seen_ids: dict[str, str] = {}
    for d, m in existing.items():
        mp = os.path.join(d, META_PROPERTIES)
        if m.cluster_id is not None and m.cluster_id != cluster_id:
            raise StorageStateError(f"Invalid cluster.id in: {mp}. Expected {cluster_id}, but read {m.cluster_id}")
        if m.node_id is not None and m.node_id != node_id:
            raise StorageStateError(
                f"Stored node id {m.node_id} doesn't match previous node id {node_id} in {mp}. If you moved your "
                f"data, make sure your configured node id matches. If you intend to create a new node, you should "
                f"remove all data in your data directories.")
        if m.directory_id is not None:
            if directory_id_reserved(parse_uuid(m.directory_id)):
                raise StorageStateError(f"Invalid reserved directory ID {m.directory_id} found in {d}")
            if m.directory_id in seen_ids:
                raise StorageStateError(f"Duplicate directory ID {m.directory_id} found. It was the directory ID of "
                                        f"{seen_ids[m.directory_id]}, and also of {d}")
            seen_ids[m.directory_id] = d
    if existing and not ignore_formatted:
        first = sorted(existing)[0]
        raise StorageStateError(f"Log directory {first} is already formatted. Use --ignore-formatted to ignore this "
                                f"directory and format the others.")
    messages: list[str] = []
    results: list[DirectoryResult] = []
    empty = [d for d in all_dirs if loaded[d][0] == "empty"]
    if not empty:
        messages.append("All of the log directories are already formatted.")
    now = int(time.time() * 1000) if time_ms is None else time_ms
    values = [_encode_record(k, v, data) for k, v, data in fs.bootstrap_records()]
    taken = set(seen_ids)
    for d in all_dirs:
        if d not in empty:
            results.append(DirectoryResult(d, None, False, existing.get(d)))
            continue
        if d != meta_dir:
            kind = "log"
        elif voters is None:
            kind = "metadata"
        elif node_id in voters:
            kind = "dynamic-metadata-voter"
        else:
            kind = "dynamic-metadata"
        if kind == "dynamic-metadata-voter":
            assert voters is not None
            dir_id = voters[node_id].directory_id
        else:
            dir_id = generate_directory_id(taken | ({v.directory_id for v in voters.values()} if voters else set()))
        taken.add(dir_id)
        meta = MetaProperties(1, cluster_id, node_id, dir_id)
        messages.append(f"Formatting {DIRECTORY_TYPES[kind]} {d} with {MV_FEATURE} {fs.metadata_version.name}.")
        files = _write_directory(Path(d), meta, values, voters if kind.startswith("dynamic") else None,
                                 listener.name, fs.levels[KRAFT_VERSION_FEATURE], now,
                                 layout=layout, metadata_dir=d == meta_dir)
        results.append(DirectoryResult(d, kind, True, meta, files))
    return FormatResult(cluster_id, node_id, fs, meta_dir, results,
                        None if voters is None else list(voters.values()), messages, layout)


def default_layout(mv: MetadataVersion) -> str:
    """The layout the ``kafka-storage format`` of ``mv``'s release writes."""
    line = tuple(int(x) for x in mv.release.split("."))
    return LAYOUT_CHECKPOINT if line >= CHECKPOINT_LAYOUT_SINCE else LAYOUT_BOOTSTRAP_FILE


def _encode_record(api_key: int, version: int, data: dict[str, Any]) -> bytes:
    from kraftkit._core import encode_metadata_record

    return encode_metadata_record(api_key, version, data)


def voters_record(voters: Iterable[DynamicVoter], listener_name: str) -> dict[str, Any]:
    """The ``VotersRecord`` ``DynamicVoters.toVoterSet`` makes: one endpoint per voter on the
    controller listener, kraft.version range 0-1, ascending node id."""
    return {"Version": 0, "Voters": [
        {"VoterId": v.node_id, "VoterDirectoryId": v.directory_id,
         "Endpoints": [{"Name": listener_name, "Host": v.endpoint_host(), "Port": v.port}],
         "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}}
        for v in sorted(voters, key=lambda v: v.node_id)]}


def _write_directory(d: Path, meta: MetaProperties, values: Sequence[bytes], voters: Mapping[int, DynamicVoter] | None,
                     listener_name: str, kraft_version: int, now: int, *, layout: str, metadata_dir: bool) -> list[str]:
    """One directory's files; meta.properties last. ``values``: the bootstrap records."""
    from kraftkit._core import encode_control_record
    from kraftkit.metadata.snapshot import BOOTSTRAP_SNAPSHOT_ID, SnapshotWriter

    d.mkdir(parents=True, exist_ok=True)
    files = []
    if layout == LAYOUT_BOOTSTRAP_FILE:
        write_file_atomic(d / BOOTSTRAP_FILE, bootstrap_checkpoint_bytes(values, time_ms=now))
        files.append(str(d / BOOTSTRAP_FILE))
    # the bootstrap snapshot: a dynamic quorum's voters (bootstrap-file layout), or everything in
    # the metadata directory (checkpoint layout)
    if (metadata_dir and layout == LAYOUT_CHECKPOINT) or (layout == LAYOUT_BOOTSTRAP_FILE and voters is not None):
        md = d / CLUSTER_METADATA_DIR
        md.mkdir(exist_ok=True)
        target = md / BOOTSTRAP_SNAPSHOT
        if target.exists():
            raise StorageStateError(f"{target} already exists in the unformatted directory {d}; remove it first")
        value = (None if voters is None else
                 encode_control_record(ControlType.KRAFT_VOTERS, voters_record(voters.values(), listener_name)))
        with SnapshotWriter(md, BOOTSTRAP_SNAPSHOT_ID, last_contained_log_timestamp=now, kraft_version=kraft_version,
                            voters_value=value, time_ms=now) as w:
            if layout == LAYOUT_CHECKPOINT:
                w.append(values)
        os.chmod(w.final_path, 0o400)  # Kafka: File.setReadOnly on a 0600 temp file
        fsync_dir(d)
        files.append(str(w.final_path))
    write_file_atomic(d / META_PROPERTIES, meta.to_text(ts=now / 1000).encode("utf-8"))
    files.append(str(d / META_PROPERTIES))
    return files


# ------------------------------------------------------------------------------------ info

def read_bootstrap(path: str | os.PathLike[str], *, optional: bool = False) -> dict[str, Any] | None:
    """The metadata.version and features of a ``bootstrap.checkpoint`` or of a 4.4 bootstrap
    snapshot (what the controller reads from it: its FeatureLevelRecords), the count of other
    records, and the file (``file``). ``optional``: a file without metadata records (the
    voters-only bootstrap snapshot of Kafka 3.9..4.3) gives None instead of an error."""
    from kraftkit._core import decode_metadata_record
    from kraftkit.metadata.snapshot import SnapshotReader

    reader = SnapshotReader(path)
    rep = reader.verify()
    if rep["error"] is not None:
        raise StorageStateError(_naming(path, rep["error"]))
    features: dict[str, int] = {}
    others = 0
    for offset, value in reader.records():
        try:
            api_key, _version, data = decode_metadata_record(value)
        except KraftkitError as e:
            raise StorageStateError(f"{os.fspath(path)}: record at offset {offset}: {e}") from None
        if api_key == FEATURE_LEVEL:
            features[data["Name"]] = data["FeatureLevel"]
        else:
            others += 1
    mv_level = features.pop(MV_FEATURE, None)
    if mv_level is None and optional and not features and not others:
        return None
    if mv_level is None:
        raise StorageStateError(f"No FeatureLevelRecord for metadata.version was found in the bootstrap metadata from {path}")
    # a level the tables lack has no name (null), and is listed under unknown_levels
    name = _mv_name(mv_level) if level_known(MV_FEATURE, mv_level) else None
    return {"file": os.fspath(path), "metadata_version": {"level": mv_level, "name": name},
            "features": dict(sorted(features.items())), "other_records": others,
            "unknown_levels": unknown_levels({MV_FEATURE: mv_level, **features})}


def _naming(path: str | os.PathLike[str], e: Exception) -> str:
    """``<path>: <reason>`` for an error whose text may already start with the path."""
    text, name = str(e), os.fspath(path)
    return text if text.startswith(f"{name}: ") else f"{name}: {text}"


def storage_info(directories: Sequence[str | os.PathLike[str]]) -> dict[str, Any]:
    """What ``kafka-storage info`` finds (directories, the first meta.properties, problems),
    plus each directory's meta.properties and bootstrap metadata. Files that cannot be read
    (a FIFO or a device in place of meta.properties, a meta.properties over 1 MiB, no
    permission, a symbolic link loop) are problems too, and also listed in ``unreadable``
    (``<path>: <reason>``): that is bad input rather than bad data."""
    problems: list[str] = []
    unreadable: list[str] = []
    found: list[str] = []
    dirs_out: list[dict[str, Any]] = []
    prev: MetaProperties | None = None
    for d in sorted(os.fspath(x) for x in directories):
        entry: dict[str, Any] = {"path": d, "exists": os.path.exists(d), "formatted": False,
                                 "meta_properties": None, "bootstrap": None, "problems": []}
        dirs_out.append(entry)

        def problem(msg: str) -> None:
            problems.append(msg)
            entry["problems"].append(msg)

        def cannot_read(path: str, e: OSError) -> None:
            unreadable.append(error_text(e))
            problem(f"Error loading {path}: {_reason(e)}")

        try:
            st = os.stat(d)
        except FileNotFoundError:
            problem(f"{d} does not exist" if not os.path.islink(d) else f"{d} does not exist (a dangling symbolic link)")
            continue
        except OSError as e:
            cannot_read(d, e)
            continue
        if not stat.S_ISDIR(st.st_mode):
            problem(f"{d} is not a directory")
            continue
        found.append(d)
        mp = os.path.join(d, META_PROPERTIES)
        try:
            cur = MetaProperties.read(mp)
        except FileNotFoundError as e:
            if os.path.islink(mp):
                cannot_read(mp, e)
            else:
                problem(f"{d} is not formatted.")
        except OSError as e:
            cannot_read(mp, e)
        except StorageError as e:
            problem(f"Error loading {mp}: {e}")
        else:
            entry["formatted"] = True
            entry["meta_properties"] = cur.to_dict()
            if prev is None:
                prev = cur
            elif prev.cluster_id != cur.cluster_id:
                problem("Mismatched cluster IDs between storage directories.")
            elif prev.node_id != cur.node_id:
                problem("Mismatched node IDs between storage directories.")
        # bootstrap.checkpoint (Kafka 4.3 and older), else the bootstrap snapshot when it holds
        # metadata records (4.4 and newer); a voters-only snapshot of 3.9..4.3 holds none
        bp = os.path.join(d, BOOTSTRAP_FILE)
        snap = os.path.join(d, CLUSTER_METADATA_DIR, BOOTSTRAP_SNAPSHOT)
        if os.path.lexists(snap):
            entry["bootstrap_snapshot"] = snap
        for path, optional in ((bp, False), (snap, True)):
            if not os.path.lexists(path):
                continue
            try:
                entry["bootstrap"] = read_bootstrap(path, optional=optional)
            except OSError as e:
                cannot_read(path, e)
            except KraftkitError as e:
                problem(f"Error loading {_naming(path, e)}")
            if entry["bootstrap"] is not None or path == bp:
                break
    if prev is not None and prev.version == 0:
        problems.append("The directories are formatted for legacy (ZooKeeper) mode, not KRaft.")
    return {"directories": dirs_out, "found": found,
            "metadata": None if prev is None else prev.to_dict(), "problems": problems, "unreadable": unreadable}


def _reason(e: OSError) -> str:
    """An OSError's reason without the path in front (``not a regular file (a FIFO)``)."""
    return getattr(e, "reason", None) or e.strerror or str(e)


def info_text(info: Mapping[str, Any]) -> str:
    """``kafka-storage info``'s text, then kraftkit's bootstrap lines."""
    lines: list[str] = []
    if not info["directories"]:
        return "No directories specified.\n"
    if info["found"]:
        lines.append("Found log directory:" if len(info["found"]) == 1 else "Found log directories:")
        lines += [f"  {d}" for d in info["found"]]
        lines.append("")
    if info["metadata"] is not None:
        lines.append("Found metadata: {" + ", ".join(f"{k}={v}" for k, v in info["metadata"].items()) + "}")
        lines.append("")
    boots = [d for d in info["directories"] if d.get("bootstrap")]
    if boots:
        lines.append("Found bootstrap metadata:")
        for d in boots:
            b = d["bootstrap"]
            feats = "".join(f", {n}={lv if level_known(n, lv) else unknown_label(n, lv)}"
                            for n, lv in b["features"].items())
            extra = f" (+{b['other_records']} other records)" if b["other_records"] else ""
            mv = b["metadata_version"]
            label = f"{mv['level']} ({mv['name']})" if mv["name"] else unknown_label(MV_FEATURE, mv["level"])
            where = "" if os.path.basename(b["file"]) == BOOTSTRAP_FILE else f" (in {os.path.relpath(b['file'], d['path'])})"
            lines.append(f"  {d['path']}: metadata.version={label}{feats}{extra}{where}")
        lines.append("")
    if info["problems"]:
        lines.append("Found problem:" if len(info["problems"]) == 1 else "Found problems:")
        lines += [f"  {p}" for p in info["problems"]]
        lines.append("")
    return "\n".join(lines) + "\n"
