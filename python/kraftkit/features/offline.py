"""Finalized features of a stopped node's metadata, and changing them offline.

``describe`` reads the finalized levels from a log directory, a snapshot or a
``bootstrap.checkpoint``, with the ranges every registered node supports. ``change`` is the
offline UpdateFeatures of KIP-778's log-level downgrade: it validates the request as a
controller would (:mod:`kraftkit.features.validation`), then writes the effect as a new
snapshot at the end of the metadata log -- the image there, rewritten at the new levels
(:mod:`kraftkit.features.rewrite`) -- so the node reloads from it on start. The log below
stays as it is; ``bootstrap.checkpoint`` files above the new metadata.version are rewritten
too (Kafka reads them at startup and refuses a level it does not know). Metadata at a level
kraftkit's tables lack (a newer Kafka's metadata.version or feature level) is described with
that level shown as unknown, and never changed: what it allows, needs or loses is unknown.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftkit._core import commit_part
from kraftkit.errors import KraftkitError
from kraftkit.features.registry import KRAFT_VERSION_FEATURE, MV_FEATURE, Registry, registry
from kraftkit.features.rewrite import RewriteReport, rewrite_snapshot
from kraftkit.features.validation import FeatureUpdate, NodeFeatures, UpdateResult, UpgradeType, validate_updates
from kraftkit.metadata.versions import NewerThanKnownError, check_known, level_known, unknown_levels


class FeatureChangeError(KraftkitError):
    """The requested feature change is invalid; ``results`` say why, update by update."""

    def __init__(self, message: str, results: list[UpdateResult] | None = None) -> None:
        super().__init__(message)
        self.results = results or []


@dataclass
class FeatureState:
    source: str
    finalized: dict[str, int]
    nodes: list[NodeFeatures]
    end_offset: int
    epoch: int

    def to_json(self, reg: Registry | None = None) -> dict[str, Any]:
        reg = reg or registry()
        mv = self.finalized.get(MV_FEATURE)
        return {
            "source": self.source,
            # a level the tables lack has no name: null, and it is listed under unknownLevels
            "metadataVersion": None if mv is None or not level_known(MV_FEATURE, mv) else reg.by_level(mv).name,
            "metadataVersionLevel": mv,
            "finalized": dict(sorted(self.finalized.items())),
            "unknownLevels": unknown_levels(self.finalized),
            "endOffset": self.end_offset,
            "nodes": [
                {"id": n.node_id, "role": n.role, "supported": {k: list(v) for k, v in sorted(n.supported.items())}}
                for n in self.nodes
            ],
            "kraftkitSupports": {k: list(v) for k, v in reg.supported_ranges().items()},
        }


def describe(path: str | os.PathLike[str]) -> FeatureState:
    """The finalized features at the end of a log directory, snapshot or bootstrap file."""
    from kraftkit.metadata.image import load_image

    return state_of(load_image(path), str(path))


def state_of(img, source: str) -> FeatureState:
    """The feature state of a loaded :class:`~kraftkit.metadata.image.MetadataImage`."""
    fin = dict(img.finalized_features)
    if img.kraft_version is not None:
        fin[KRAFT_VERSION_FEATURE] = img.kraft_version
    nodes = [NodeFeatures.from_registration("broker", i, b["Features"]) for i, b in sorted(img.brokers.items())]
    nodes += [
        NodeFeatures.from_registration("controller", i, c["Features"]) for i, c in sorted(img.controllers.items())
    ]
    return FeatureState(source, fin, nodes, img.provenance.end_offset, img.provenance.epoch)


def requested_updates(
    state: FeatureState,
    *,
    release_version: str | None,
    features: dict[str, int],
    upgrade_type: UpgradeType,
    reg: Registry | None = None,
) -> list[FeatureUpdate]:
    """The updates a request means: ``--release-version`` sets metadata.version and every
    production feature to the release's default level (as ``kafka-features --release-version``);
    ``--feature NAME=LEVEL`` sets one. kraft.version is the raft layer's and is never set here.
    Updates that change nothing are left out."""
    reg = reg or registry()
    want: dict[str, int] = {}
    if release_version is not None:
        mv = reg.metadata_version(release_version)
        want[MV_FEATURE] = mv.level
        for name, f in reg.features.items():
            if f.production and name != KRAFT_VERSION_FEATURE:
                want[name] = f.default_level(mv.level)
    for name, level in features.items():
        if name == KRAFT_VERSION_FEATURE:
            raise FeatureChangeError("kraft.version is changed through the KRaft quorum (KIP-853), not offline here")
        want[name] = level
    return [
        FeatureUpdate(name, level, upgrade_type)
        for name, level in sorted(want.items())
        if state.finalized.get(name, 0) != level
        and not (upgrade_type == UpgradeType.UPGRADE and level < state.finalized.get(name, 0))
    ]


@dataclass
class ChangeResult:
    state: FeatureState
    results: list[UpdateResult]
    report: RewriteReport | None = None
    snapshot: str | None = None
    bootstrap_rewritten: list[str] = field(default_factory=list)
    backup: str | None = None
    #: files moved out of the partition directory into the backup
    moved: list[str] = field(default_factory=list)


def change(
    path: str | os.PathLike[str],
    updates: list[FeatureUpdate],
    *,
    dry_run: bool = False,
    backup: str | os.PathLike[str] | None = None,
    image=None,
) -> ChangeResult:
    """Validates ``updates`` against the node's metadata and, unless ``dry_run``, writes a
    snapshot at the end of its log with the new levels. An existing snapshot with the same id
    is replaced only when ``backup`` names a directory to keep it in. ``image`` is the image at the
    end of ``path``'s log when the caller has already loaded it.

    A metadata.version downgrade also needs ``backup``: the log below the new snapshot holds
    records the older release cannot read (and releases before 3.7 replay the log from its
    start when it is there), so the segments, their indexes, older snapshots and the
    leader-epoch cache move to the backup; below kraft.version 1 (KIP-853) the quorum-state,
    which is in the newer format, moves too. The node starts from the snapshot alone."""
    from kraftkit.metadata.image import load_image
    from kraftkit.metadata.snapshot import SnapshotId
    from kraftkit.metadata.source import metadata_dir

    d = metadata_dir(path)
    if not d.is_dir():
        raise FeatureChangeError(f"{path}: not a metadata log directory")
    # replayed once: the state to validate and the image to snapshot (``image``: already loaded from d)
    img = load_image(d) if image is None else image
    state = state_of(img, str(d))
    # what a level the tables lack allows, needs or loses is unknown: refused, never guessed
    # (the bootstrap.checkpoint too: it may be rewritten below, after the new snapshot)
    for where, finalized in [(d, state.finalized)] + [(b, describe(b).finalized) for b in _bootstrap_files(d)]:
        try:
            check_known(finalized, "change features offline")
        except NewerThanKnownError as e:
            raise FeatureChangeError(f"{where}: {e}") from None
    if not updates:
        raise FeatureChangeError(f"{d}: nothing to change (the finalized levels already are the requested ones)")
    results = validate_updates(state.finalized, updates, state.nodes)
    if not all(r.ok for r in results):
        raise FeatureChangeError(f"{d}: invalid feature change", results)
    if state.end_offset <= 0:
        raise FeatureChangeError(
            f"{d}: the metadata log is empty: the node was formatted but never ran, so there "
            "is nothing to rewrite; format it again with the release version you want "
            "(kraftkit storage format --release-version ...)"
        )
    new = {u.feature: u.level for u in updates}
    reg = registry()
    target = reg.by_level(new.get(MV_FEATURE, state.finalized[MV_FEATURE]))
    others = {k: v for k, v in new.items() if k != MV_FEATURE}
    sid = SnapshotId(state.end_offset, state.epoch)
    out = ChangeResult(state, results)
    with tempfile.TemporaryDirectory(prefix="kraftkit-features-") as tmp:
        current = img.write_snapshot(tmp, sid)
        final = d / sid.file_name
        downgrade = target.level < state.finalized.get(MV_FEATURE, 0)
        if downgrade and not dry_run and backup is None:
            raise FeatureChangeError(
                f"{d}: a metadata.version downgrade moves the log below the new snapshot out of "
                "the way; pass a backup directory to keep it in"
            )
        if dry_run:
            out.report = rewrite_snapshot(current, None, target, feature_levels=others)
            out.report.source = f"{d} (image at offset {sid.end_offset})"
            return out
        if downgrade:
            assert backup is not None  # refused above
            bdir = Path(backup) / d.name
            if bdir.exists() and any(bdir.iterdir()):
                raise FeatureChangeError(f"{bdir}: the backup directory is not empty")
            bdir.mkdir(parents=True, exist_ok=True)
            kraft1 = reg.features[KRAFT_VERSION_FEATURE].level(1).bootstrap_metadata_version
            for p in sorted(d.iterdir()):
                if _log_file(p) or (p.name == "quorum-state" and target.level < kraft1):
                    shutil.move(str(p), str(bdir / p.name))
                    out.moved.append(p.name)
            out.backup = str(bdir)
        elif final.exists():
            if backup is None:
                raise FeatureChangeError(
                    f"{final} exists (the log ends where Kafka last took a snapshot); pass a "
                    "backup directory to keep it and replace it"
                )
            Path(backup).mkdir(parents=True, exist_ok=True)
            kept = Path(backup) / final.name
            shutil.copy2(final, kept)
            out.backup = str(kept)
        # written next to its final name (.part), fsynced, renamed over it
        out.report = rewrite_snapshot(current, final, target, feature_levels=others)
        out.report.source = f"{d} (image at offset {sid.end_offset})"
        out.snapshot = str(final)
    for boot in _bootstrap_files(d):
        bstate = describe(boot)
        if bstate.finalized.get(MV_FEATURE, 0) > target.level:
            tmp_boot = boot.with_name(boot.name + ".kraftkit")
            rewrite_snapshot(boot, tmp_boot, target, feature_levels=others)
            commit_part(tmp_boot, boot)
            out.bootstrap_rewritten.append(str(boot))
    return out


def _log_file(p: Path) -> bool:
    """Segments, their indexes, producer snapshots, metadata snapshots, the leader-epoch cache."""
    from kraftkit.metadata.snapshot import parse_snapshot_name

    stem, _, ext = p.name.partition(".")
    if stem.isdigit() and ext in ("log", "index", "timeindex", "snapshot", "txnindex"):
        return True
    return parse_snapshot_name(p.name) is not None or p.name == "leader-epoch-checkpoint"


def _bootstrap_files(partition_dir: Path) -> list[Path]:
    p = partition_dir.parent / "bootstrap.checkpoint"
    return [p] if p.is_file() else []
