"""Where a fleet's metadata files are: ``<root>/<cluster>/<node>/__cluster_metadata-0/`` with log
segments (``<offset>.log``) and snapshots (``<end offset>-<epoch>.checkpoint``).

A path may be a fleet root, a cluster or node directory, a ``__cluster_metadata-0`` directory,
one file, or a glob of any of these (``/data/fleet/prod-*``). Local paths are read with ``os``;
URIs (``hdfs://``, ``s3://``, ``file://``, ``viewfs://``...) through ``pyarrow.fs`` (Hadoop's
``libhdfs`` for HDFS, AWS's SDK for S3), so the same job runs on a laptop and on a cluster.

Below a directory, only files in ``__cluster_metadata-*`` directories are taken (a Kafka log
directory also holds topic partitions); a directory that itself holds segments or snapshots is
taken as a metadata partition. The node is the name of the partition directory's parent, the
cluster the name of the one above.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import posixpath
from dataclasses import dataclass
from pathlib import PurePosixPath

from kraftkit.errors import KraftkitError
from kraftkit.metadata.source import classify

METADATA_PREFIX = "__cluster_metadata"
KINDS = ("all", "snapshots", "logs")


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
    if f.kind == "segment":
        return FleetFile(path, cluster, node, "segment", size, f.base_offset)
    sid = f.snapshot_id
    return FleetFile(
        path,
        cluster,
        node,
        "snapshot",
        size,
        None if sid is None else sid.end_offset,
        None if sid is None else sid.epoch,
    )


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


def discover(paths: str | list[str], kind: str = "all") -> list[FleetFile]:
    """The metadata files under ``paths`` (comma-separated or a list), sorted by cluster, node,
    then snapshots by end offset before segments by base offset. ``kind``: all, snapshots, logs.
    Raises :class:`FleetError` when nothing matches."""
    if kind not in KINDS:
        raise FleetError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
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
        seen.values(),
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
