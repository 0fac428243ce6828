"""Where a fleet's metadata files are: ``<root>/<cluster>/<node>/__cluster_metadata-0/`` with log
segments (``<offset>.log``) and snapshots (``<end offset>-<epoch>.checkpoint``).

A path may be a fleet root, a cluster or node directory, a ``__cluster_metadata-0`` directory,
one file, or a glob of any of these (``/data/fleet/prod-*``). Local paths are read with ``os``;
URIs (``hdfs://``, ``s3://``, ``file://``, ``viewfs://``...) through ``pyarrow.fs`` (Hadoop's
``libhdfs`` for HDFS, AWS's SDK for S3), so the same job runs on a laptop and on a cluster.

Below a directory, only files in ``__cluster_metadata-*`` directories are taken (a Kafka log
directory also holds topic partitions); a directory that itself holds segments or snapshots is
taken as a metadata partition. Its parent is the node's log directory.

Which cluster and node the files belong to (``naming``, see :data:`NAMINGS`):

* ``meta``: the ``cluster.id`` and ``node.id`` (``broker.id`` in a v0 file) of the log
  directory's ``meta.properties``, which Kafka (and ``kraftkit storage format``) writes there;
  a log directory without one is an error;
* ``path``: the log directory's name is the node, its parent's the cluster
  (``<root>/<cluster>/<node>/__cluster_metadata-0/``), whatever ``meta.properties`` says;
* ``auto`` (the default): ``meta`` where the log directory's ``meta.properties`` has both ids,
  else ``path``. :attr:`FleetFile.named_by` says which rule named each file's cluster and node.

A ``meta.properties`` that cannot be read (a FIFO, over 1 MiB, malformed) is an error naming it.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import posixpath
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from kraftkit.errors import KraftkitError
from kraftkit.metadata.source import classify

METADATA_PREFIX = "__cluster_metadata"
KINDS = ("all", "snapshots", "logs")
#: how clusters and nodes are named (see the module docstring)
NAMINGS = ("auto", "meta", "path")
#: :attr:`FleetFile.named_by` values
BY_META = "meta.properties"
BY_PATH = "path"
META_PROPERTIES = "meta.properties"
#: meta.properties files larger than this are refused (Kafka's are about 150 bytes)
META_LIMIT = 1 << 20


class FleetError(KraftkitError):
    """A fleet path that matches no metadata files, or an unreadable one."""


@dataclass(frozen=True)
class FleetFile:
    path: str
    cluster: str
    node: str
    #: "segment" or "snapshot"
    kind: str
    size: int
    #: a segment's base offset; a snapshot's end offset (None for bootstrap.checkpoint)
    offset: int | None
    #: a snapshot's epoch
    epoch: int | None = None
    #: the node's log directory (the metadata partition directory's parent)
    node_dir: str = ""
    #: the rule that named ``cluster`` and ``node``: "meta.properties" or "path"
    named_by: str = BY_PATH

    @property
    def partition_dir(self) -> str:
        return posixpath.dirname(self.path) if is_uri(self.path) else os.path.dirname(self.path)


def is_uri(path: str) -> bool:
    return "://" in path


def _has_magic(s: str) -> bool:
    return any(c in s for c in "*?[")


def _file(path: str, size: int, partition_named: bool) -> FleetFile | None:
    p = PurePosixPath(path.split("://", 1)[1] if is_uri(path) else path)
    f = classify(p)  # type: ignore[arg-type]
    if f is None:
        return None
    pdir = p.parent
    if pdir.name.startswith(METADATA_PREFIX) or not partition_named:
        node_dir = pdir.parent if pdir.name.startswith(METADATA_PREFIX) else pdir
    else:
        return None
    node, cluster = node_dir.name, node_dir.parent.name
    ndir = f"{path.split('://', 1)[0]}://{node_dir}" if is_uri(path) else str(node_dir)
    if f.kind == "segment":
        return FleetFile(path, cluster, node, "segment", size, f.base_offset, node_dir=ndir)
    sid = f.snapshot_id
    return FleetFile(
        path,
        cluster,
        node,
        "snapshot",
        size,
        None if sid is None else sid.end_offset,
        None if sid is None else sid.epoch,
        node_dir=ndir,
    )


def _join(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}" if is_uri(directory) else os.path.join(directory, name)


def read_meta(node_dir: str) -> tuple[str, str] | None:
    """(cluster.id, node id) of a log directory's ``meta.properties``; None when there is none,
    or when it lacks either id (a v0 file of a ZooKeeper-era broker may have no cluster.id).
    Raises :class:`FleetError` naming the file when it cannot be read or parsed."""
    from kraftkit.features.storage.properties import MetaProperties, parse_properties

    path = _join(node_dir, META_PROPERTIES)
    try:
        if is_uri(path):
            from pyarrow import fs as pafs

            filesystem, p = pafs.FileSystem.from_uri(path)
            info = filesystem.get_file_info(p)
            if info.type == pafs.FileType.NotFound:
                return None
            if info.type != pafs.FileType.File or info.size > META_LIMIT:
                raise FleetError(f"{path}: not a regular file of at most {META_LIMIT} bytes")
            data = read_bytes(path)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = data.decode("latin-1")
            meta = MetaProperties.from_properties(parse_properties(text), path)
        else:
            if not os.path.lexists(path):
                return None
            meta = MetaProperties.read(path)
    except FleetError:
        raise
    except (OSError, KraftkitError) as e:
        reason = str(e)
        raise FleetError(reason if path in reason else f"{path}: {reason}") from None
    if meta.cluster_id is None or meta.node_id is None:
        return None
    return meta.cluster_id, str(meta.node_id)


def name_files(files: list[FleetFile], naming: str = "auto") -> list[FleetFile]:
    """``files`` with cluster and node named by the ``naming`` rule (one ``meta.properties``
    read per log directory)."""
    if naming not in NAMINGS:
        raise FleetError(f"unknown naming {naming!r} (one of {', '.join(NAMINGS)})")
    if naming == "path":
        return files
    metas: dict[str, tuple[str, str] | None] = {}
    out = []
    for f in files:
        if f.node_dir not in metas:
            metas[f.node_dir] = read_meta(f.node_dir)
            if metas[f.node_dir] is None and naming == "meta":
                raise FleetError(
                    f"{_join(f.node_dir, META_PROPERTIES)}: no meta.properties with cluster.id and node.id "
                    "(--naming path names clusters and nodes by their <cluster>/<node>/ directories)"
                )
        ids = metas[f.node_dir]
        out.append(f if ids is None else replace(f, cluster=ids[0], node=ids[1], named_by=BY_META))
    return out


def naming_table(files: list[FleetFile]) -> list[dict[str, str]]:
    """One entry per log directory: its ``directory``, the ``cluster`` and ``node`` it was
    named and the rule that named them (``named_by``: "meta.properties" or "path")."""
    seen: dict[str, dict[str, str]] = {}
    for f in files:
        seen.setdefault(
            f.node_dir, {"directory": f.node_dir, "cluster": f.cluster, "node": f.node, "named_by": f.named_by}
        )
    return [seen[d] for d in sorted(seen, key=lambda d: (seen[d]["cluster"], seen[d]["node"], d))]


def naming_lines(files: list[FleetFile], limit: int = 3) -> list[str]:
    """How the clusters and nodes of ``files`` were named, one line per rule used, with up
    to ``limit`` examples each."""
    lines = []
    entries = naming_table(files)
    for rule, how in (
        (BY_META, "by meta.properties (cluster.id, node.id)"),
        (BY_PATH, "by directory names <cluster>/<node>/ (no meta.properties with both ids)"),
    ):
        hit = [e for e in entries if e["named_by"] == rule]
        if not hit:
            continue
        shown = ", ".join(f"{e['directory']} -> cluster {e['cluster']}, node {e['node']}" for e in hit[:limit])
        more = f" and {len(hit) - limit} more" if len(hit) > limit else ""
        lines.append(f"{len(hit)} node(s) named {how}: {shown}{more}")
    return lines


def _local(pattern: str) -> list[tuple[str, int]]:
    """(file, size) of every file at or below the paths the pattern matches; files named
    directly are marked by a size of -1 - size (they need no __cluster_metadata parent)."""
    matches = sorted(glob.glob(pattern, recursive=True)) if _has_magic(pattern) else [pattern]
    out: list[tuple[str, int]] = []
    for m in matches:
        if os.path.isfile(m):
            out.append((m, -1 - os.path.getsize(m)))
        elif os.path.isdir(m):
            direct = [e for e in os.scandir(m) if e.is_file() and classify(PurePosixPath(e.name)) is not None]  # type: ignore[arg-type]
            if direct and not os.path.basename(os.path.normpath(m)).startswith(METADATA_PREFIX):
                out += [(e.path, -1 - e.stat().st_size) for e in sorted(direct, key=lambda e: e.name)]
                continue
            for dirpath, dirnames, filenames in os.walk(m):
                dirnames.sort()
                for n in sorted(filenames):
                    full = os.path.join(dirpath, n)
                    try:
                        out.append((full, os.path.getsize(full)))
                    except OSError:
                        continue  # removed while listing (a rolled or deleted segment)
    return out


def _remote(pattern: str) -> list[tuple[str, int]]:
    from pyarrow import fs as pafs

    scheme, rest = pattern.split("://", 1)
    parts = rest.split("/")
    static = []
    for p in parts:
        if _has_magic(p):
            break
        static.append(p)
    base_uri = f"{scheme}://{'/'.join(static)}"
    filesystem, base = pafs.FileSystem.from_uri(base_uri)
    prefix = base_uri[: len(base_uri) - len(base)] if base and base_uri.endswith(base) else f"{scheme}://"
    info = filesystem.get_file_info(base)
    if info.type == pafs.FileType.File:
        return [(base_uri, -1 - info.size)]
    if info.type != pafs.FileType.Directory:
        return []
    entries = filesystem.get_file_info(pafs.FileSelector(base, recursive=True))
    glob_rest = "/".join(parts[len(static) :])
    out = []
    for e in sorted(entries, key=lambda e: e.path):
        if e.type != pafs.FileType.File:
            continue
        rel = e.path[len(base) :].lstrip("/")
        if glob_rest:
            depth = glob_rest.count("/") + 1
            head = "/".join(rel.split("/")[:depth])
            if not fnmatch.fnmatchcase(head, glob_rest):
                continue
        out.append((prefix + e.path, e.size))
    return out


def discover(paths: str | list[str], kind: str = "all", naming: str = "auto") -> list[FleetFile]:
    """The metadata files under ``paths`` (comma-separated or a list), sorted by cluster, node,
    then snapshots by end offset before segments by base offset. ``kind``: all, snapshots, logs;
    ``naming``: how clusters and nodes are named (:data:`NAMINGS`, see the module docstring).
    Raises :class:`FleetError` when nothing matches."""
    if kind not in KINDS:
        raise FleetError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
    if naming not in NAMINGS:
        raise FleetError(f"unknown naming {naming!r} (one of {', '.join(NAMINGS)})")
    if isinstance(paths, str):
        paths = [p.strip() for p in paths.split(",") if p.strip()]
    seen: dict[str, FleetFile] = {}
    for pattern in paths:
        listing = _remote(pattern) if is_uri(pattern) else _local(pattern)
        for path, size in listing:
            direct = size < 0
            f = _file(path, -1 - size if direct else size, partition_named=not direct)
            if f is None:
                continue
            if (kind == "snapshots" and f.kind != "snapshot") or (kind == "logs" and f.kind != "segment"):
                continue
            seen.setdefault(f.path, f)
    if not seen:
        raise FleetError(
            f"{', '.join(paths)}: no metadata log segments or snapshots{'' if kind == 'all' else f' ({kind} only)'}"
        )
    return sorted(
        name_files(list(seen.values()), naming),
        key=lambda f: (
            f.cluster,
            f.node,
            f.partition_dir,
            f.kind != "snapshot",
            -1 if f.offset is None else f.offset,
            f.path,
        ),
    )


def read_bytes(path: str) -> bytes:
    """The bytes of a file named by a URI (through ``pyarrow.fs``)."""
    from pyarrow import fs as pafs

    filesystem, p = pafs.FileSystem.from_uri(path)
    with filesystem.open_input_file(p) as f:
        return f.read()


def local_path(path: str) -> str | None:
    """The local path of a local file or ``file://`` URI; None for other file systems."""
    if not is_uri(path):
        return path
    if path.startswith("file://"):
        return path[len("file://") :]
    return None
