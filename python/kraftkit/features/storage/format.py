"""``format_storage``: the directories' files in either layout (see the package doc),
written atomically, ``meta.properties`` last."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftkit._core import control_record_key, encode_batch, snapshot_footer_value, snapshot_header_value
from kraftkit._fs import error_text
from kraftkit.features.registry import KRAFT_VERSION_FEATURE, MV_FEATURE, MetadataVersion
from kraftkit.features.storage.errors import StorageError, StorageExistsError, StorageInputError, StorageStateError
from kraftkit.features.storage.levels import FeatureSet, resolve_features
from kraftkit.features.storage.properties import META_PROPERTIES, MetaProperties
from kraftkit.features.storage.uuids import (
    directory_id_reserved,
    generate_directory_id,
    parse_uuid,
    random_uuid,
    validate_cluster_id,
)
from kraftkit.features.storage.voters import (
    DEFAULT_CONTROLLER_LISTENER,
    ControllerListener,
    DynamicVoter,
    parse_controller_listener,
    parse_voters,
    voters_record,
)
from kraftkit.log.control import ControlType

BOOTSTRAP_FILE = "bootstrap.checkpoint"
CLUSTER_METADATA_DIR = "__cluster_metadata-0"
BOOTSTRAP_SNAPSHOT = "00000000000000000000-0000000000.checkpoint"
#: Where the bootstrap records go (see the package doc).
LAYOUT_BOOTSTRAP_FILE = "bootstrap-file"
LAYOUT_CHECKPOINT = "checkpoint"
LAYOUTS = (LAYOUT_BOOTSTRAP_FILE, LAYOUT_CHECKPOINT)
#: The first release line whose kafka-storage format writes the ``checkpoint`` layout.
CHECKPOINT_LAYOUT_SINCE = (4, 4)
#: KafkaRaftClient.MAX_BATCH_SIZE_BYTES (BatchFileWriter's batches)
MAX_BATCH_BYTES = 8 * 1024 * 1024


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
    out = [
        encode_batch(
            [(ts, control_record_key(ControlType.SNAPSHOT_HEADER), snapshot_header_value(0), ())],
            base_offset=0,
            partition_leader_epoch=0,
            control=True,
        )
    ]
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
    out.append(
        encode_batch(
            [(ts, control_record_key(ControlType.SNAPSHOT_FOOTER), snapshot_footer_value(), ())],
            base_offset=offset,
            partition_leader_epoch=0,
            control=True,
        )
    )
    return b"".join(out)


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
        return {
            "path": self.path,
            "type": self.type,
            "description": DIRECTORY_TYPES.get(self.type or "", "already formatted"),
            "formatted_now": self.formatted_now,
            "meta_properties": None if self.meta is None else self.meta.to_dict(),
            "files": self.files,
        }


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
            "cluster_id": self.cluster_id,
            "node_id": self.node_id,
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
        raise StorageExistsError(f"{d} is not a directory")
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
    listener = (
        controller_listener
        if isinstance(controller_listener, ControllerListener)
        else parse_controller_listener(controller_listener)
    )
    if sum(map(bool, (standalone, initial_controllers is not None, no_initial_controllers))) > 1:
        raise StorageInputError(
            "--standalone, --initial-controllers and --no-initial-controllers are mutually exclusive"
        )
    voters: dict[int, DynamicVoter] | None = None
    if standalone:
        if listener.port is None:
            raise StorageInputError(
                "--standalone needs the controller listener's host and port: "
                "--controller-listener NAME://HOST:PORT (e.g. CONTROLLER://127.0.0.1:9093)"
            )
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
            raise StorageExistsError(f"Invalid cluster.id in: {mp}. Expected {cluster_id}, but read {m.cluster_id}")
        if m.node_id is not None and m.node_id != node_id:
            raise StorageExistsError(
                f"Stored node id {m.node_id} doesn't match previous node id {node_id} in {mp}. If you moved your "
                f"data, make sure your configured node id matches. If you intend to create a new node, you should "
                f"remove all data in your data directories."
            )
        if m.directory_id is not None:
            if directory_id_reserved(parse_uuid(m.directory_id)):
                raise StorageStateError(f"Invalid reserved directory ID {m.directory_id} found in {d}")
            if m.directory_id in seen_ids:
                raise StorageStateError(
                    f"Duplicate directory ID {m.directory_id} found. It was the directory ID of "
                    f"{seen_ids[m.directory_id]}, and also of {d}"
                )
            seen_ids[m.directory_id] = d
    if existing and not ignore_formatted:
        first = sorted(existing)[0]
        raise StorageExistsError(
            f"Log directory {first} is already formatted. Use --ignore-formatted to ignore this "
            f"directory and format the others."
        )
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
        files = _write_directory(
            Path(d),
            meta,
            values,
            voters if kind.startswith("dynamic") else None,
            listener.name,
            fs.levels[KRAFT_VERSION_FEATURE],
            now,
            layout=layout,
            metadata_dir=d == meta_dir,
        )
        results.append(DirectoryResult(d, kind, True, meta, files))
    return FormatResult(
        cluster_id, node_id, fs, meta_dir, results, None if voters is None else list(voters.values()), messages, layout
    )


def default_layout(mv: MetadataVersion) -> str:
    """The layout the ``kafka-storage format`` of ``mv``'s release writes."""
    line = tuple(int(x) for x in mv.release.split("."))
    return LAYOUT_CHECKPOINT if line >= CHECKPOINT_LAYOUT_SINCE else LAYOUT_BOOTSTRAP_FILE


def _encode_record(api_key: int, version: int, data: dict[str, Any]) -> bytes:
    from kraftkit._core import encode_metadata_record

    return encode_metadata_record(api_key, version, data)


def _write_directory(
    d: Path,
    meta: MetaProperties,
    values: Sequence[bytes],
    voters: Mapping[int, DynamicVoter] | None,
    listener_name: str,
    kraft_version: int,
    now: int,
    *,
    layout: str,
    metadata_dir: bool,
) -> list[str]:
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
            raise StorageExistsError(f"{target} already exists in the unformatted directory {d}; remove it first")
        value = (
            None
            if voters is None
            else encode_control_record(ControlType.KRAFT_VOTERS, voters_record(voters.values(), listener_name))
        )
        with SnapshotWriter(
            md,
            BOOTSTRAP_SNAPSHOT_ID,
            last_contained_log_timestamp=now,
            kraft_version=kraft_version,
            voters_value=value,
            time_ms=now,
        ) as w:
            if layout == LAYOUT_CHECKPOINT:
                w.append(values)
        os.chmod(w.final_path, 0o400)  # Kafka: File.setReadOnly on a 0600 temp file
        fsync_dir(d)
        files.append(str(w.final_path))
    write_file_atomic(d / META_PROPERTIES, meta.to_text(ts=now / 1000).encode("utf-8"))
    files.append(str(d / META_PROPERTIES))
    return files
