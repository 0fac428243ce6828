"""``storage_info``: what ``kafka-storage info`` finds in the directories, plus each one's
bootstrap metadata (``read_bootstrap``), and its text (``info_text``)."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from typing import Any

from kraftkit._fs import error_text
from kraftkit.errors import KraftkitError
from kraftkit.features.registry import MV_FEATURE
from kraftkit.features.storage.errors import StorageError, StorageStateError
from kraftkit.features.storage.format import BOOTSTRAP_FILE, BOOTSTRAP_SNAPSHOT, CLUSTER_METADATA_DIR
from kraftkit.features.storage.levels import _mv_name
from kraftkit.features.storage.properties import META_PROPERTIES, MetaProperties
from kraftkit.metadata.image import FEATURE_LEVEL
from kraftkit.metadata.versions import level_known, unknown_label, unknown_levels


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
        raise StorageStateError(
            f"No FeatureLevelRecord for metadata.version was found in the bootstrap metadata from {path}"
        )
    # a level the tables lack has no name (null), and is listed under unknown_levels
    name = _mv_name(mv_level) if level_known(MV_FEATURE, mv_level) else None
    return {
        "file": os.fspath(path),
        "metadata_version": {"level": mv_level, "name": name},
        "features": dict(sorted(features.items())),
        "other_records": others,
        "unknown_levels": unknown_levels({MV_FEATURE: mv_level, **features}),
    }


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
        entry: dict[str, Any] = {
            "path": d,
            "exists": os.path.exists(d),
            "formatted": False,
            "meta_properties": None,
            "bootstrap": None,
            "problems": [],
        }
        dirs_out.append(entry)

        def problem(msg: str, entry: dict[str, Any] = entry) -> None:
            problems.append(msg)
            entry["problems"].append(msg)

        def cannot_read(path: str, e: OSError) -> None:
            unreadable.append(error_text(e))
            problem(f"Error loading {path}: {_reason(e)}")

        try:
            st = os.stat(d)
        except FileNotFoundError:
            problem(
                f"{d} does not exist" if not os.path.islink(d) else f"{d} does not exist (a dangling symbolic link)"
            )
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
    return {
        "directories": dirs_out,
        "found": found,
        "metadata": None if prev is None else prev.to_dict(),
        "problems": problems,
        "unreadable": unreadable,
    }


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
            feats = "".join(
                f", {n}={lv if level_known(n, lv) else unknown_label(n, lv)}" for n, lv in b["features"].items()
            )
            extra = f" (+{b['other_records']} other records)" if b["other_records"] else ""
            mv = b["metadata_version"]
            label = f"{mv['level']} ({mv['name']})" if mv["name"] else unknown_label(MV_FEATURE, mv["level"])
            where = (
                ""
                if os.path.basename(b["file"]) == BOOTSTRAP_FILE
                else f" (in {os.path.relpath(b['file'], d['path'])})"
            )
            lines.append(f"  {d['path']}: metadata.version={label}{feats}{extra}{where}")
        lines.append("")
    if info["problems"]:
        lines.append("Found problem:" if len(info["problems"]) == 1 else "Found problems:")
        lines += [f"  {p}" for p in info["problems"]]
        lines.append("")
    return "\n".join(lines) + "\n"
