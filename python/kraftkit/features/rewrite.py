"""Rewriting snapshots to another metadata.version (KIP-778 downgrades Kafka refuses, and
upgrades), with an exact report of what the target cannot carry.

The policy lives here; the byte work is ``kraftkit._core.rewrite_snapshot`` (streaming, GIL
released). For a target metadata.version the plan says:

* the version of each record type, from the registry's record-version helpers (Kafka's
  ``registerBrokerRecordVersion()``, ``partitionRecordVersion()`` ...) and ``is...Supported``
  flags: a record type the target cannot write (``UserScramCredentialRecord`` below 3.5-IV2,
  ``RegisterControllerRecord`` below 3.7-IV0, ...) is dropped, and reported unless every
  field holds its default;
* a field the target version lacks is dropped silently only when it holds its default (a
  replica-directory list of only ``MIGRATING`` uuids counts as default, as in Kafka's image
  writer); anything else is a loss, counted per record type and field with sample keys;
* ``metadata.version`` becomes the target level; every other finalized feature is lowered to
  the highest level the target allows (its dependencies hold, its bootstrap metadata.version
  is not above the target, and the target release, when the registry knows it, supports it);
  level 0 removes the feature;
* KRaftVersion/KRaftVoters control records are dropped below the metadata.version that
  introduced kraft.version 1 (KIP-853), reported when they carried a voter set;
* unknown is never guessed: a snapshot holding a metadata.version or feature level the
  tables lack (a newer Kafka's), a feature they lack, a kraft.version level they lack, or a
  record type or record version the schemas lack is refused (``UnsupportedFormatError``
  naming the level and the newest known, nothing written).

Upgrades keep every record as it is (any older record version stays valid) and raise the
feature level: lossless, and checked to be.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kraftkit import _kafka as K  # metadata record api keys
from kraftkit._core import RewritePlan
from kraftkit._core import rewrite_snapshot as _rewrite
from kraftkit._fs import InputFileError, check_input, kind_of
from kraftkit.errors import KraftkitError
from kraftkit.features.registry import KRAFT_VERSION_FEATURE, MV_FEATURE, MetadataVersion, Registry, Release, registry
from kraftkit.metadata.mv_levels import MV_3_3_IV0
from kraftkit.metadata.versions import newest_text

if TYPE_CHECKING:
    from kraftkit.metadata.image import MetadataImage
    from kraftkit.metadata.snapshot import SnapshotId

#: Values that carry nothing although they are not the schema default: replica directories
#: that are all ``MIGRATING`` (Kafka's image writer drops them without a loss) and an empty
#: list of cordoned log directories (the same as none).
SEMANTIC_DEFAULTS = [
    ("PartitionRecord", "Directories", "all-zero-uuids"),
    ("RegisterBrokerRecord", "CordonedLogDirs", "empty"),
    ("RegisterBrokerRecord", "LogDirs", "empty"),
]


class LossError(KraftkitError):
    """``fail_on_loss`` was set and the rewrite would lose metadata."""

    def __init__(self, report: RewriteReport) -> None:
        super().__init__(
            f"{report.source}: rewriting to metadata.version {report.target} would lose: "
            + "; ".join(loss_line(x) for x in report.losses)
        )
        self.report = report


def record_versions(mv: MetadataVersion) -> dict[int, int | None]:
    """The version each metadata record type is written at in ``mv`` (None: not at all)."""

    def when(cap: str, v: int = 0) -> int | None:
        return v if mv.supported(cap) else None

    if mv.supported("cordoned_log_dirs"):
        brc: int | None = 3
    elif mv.supported("directory_assignment"):
        brc = 2
    elif mv.supported("in_controlled_shutdown"):
        brc = 1
    else:
        brc = when("broker_registration_change_record")
    return {
        K.REGISTER_BROKER: mv.register_broker_record_version,
        K.UNREGISTER_BROKER: 0,
        K.TOPIC: 0,
        K.CONFIG: 0,
        K.FENCE_BROKER: 0,
        K.UNFENCE_BROKER: 0,
        K.REMOVE_TOPIC: 0,
        K.CLIENT_QUOTA: 0,
        K.PRODUCER_IDS: 0,
        K.ACCESS_CONTROL_ENTRY: 0,
        K.REMOVE_ACCESS_CONTROL_ENTRY: 0,
        K.PARTITION: mv.partition_record_version,
        K.PARTITION_CHANGE: mv.partition_change_record_version,
        K.DELEGATION_TOKEN: when("delegation_token"),
        K.REMOVE_DELEGATION_TOKEN: when("delegation_token"),
        K.USER_SCRAM_CREDENTIAL: when("scram"),
        K.REMOVE_USER_SCRAM_CREDENTIAL: when("scram"),
        K.FEATURE_LEVEL: 0 if mv.level >= MV_3_3_IV0 else None,
        K.BROKER_REGISTRATION_CHANGE: brc,
        K.NO_OP: when("noop_record"),
        K.ZK_MIGRATION_STATE: when("migration"),
        K.BEGIN_TRANSACTION: when("metadata_transaction"),
        K.END_TRANSACTION: when("metadata_transaction"),
        K.ABORT_TRANSACTION: when("metadata_transaction"),
        K.REGISTER_CONTROLLER: mv.register_controller_record_version,
        K.CLEAR_ELR: when("elr"),
        K.UNREGISTER_CONTROLLER: when("controller_unregistration"),
    }


def target_release(mv: MetadataVersion, reg: Registry | None = None) -> Release | None:
    """The Kafka release of ``mv``'s line the registry knows (3.9-IV0 -> 3.9.2), if any."""
    reg = reg or registry()
    try:
        return reg.release(mv.release)
    except KraftkitError:
        return None


def feature_level_at(
    name: str, level: int, target: MetadataVersion, reg: Registry | None = None, release: Release | None = None
) -> int:
    """What finalized ``level`` of feature ``name`` becomes at ``target``: the highest level at
    most ``level`` whose dependencies hold and whose bootstrap metadata.version is not above
    the target, within what the target release supports (0: the feature is removed)."""
    reg = reg or registry()
    if name == MV_FEATURE:
        return target.level
    f = reg.features.get(name)
    if f is None:
        return level  # unknown to this registry: left alone (reported by the caller)
    if target.level < MV_3_3_IV0:
        return 0
    cap = level
    if release is not None:
        rng = release.supported_range(name)
        cap = min(cap, rng[1]) if rng is not None else 0
    best = 0
    for lv in f.levels:
        if lv.level > cap or lv.bootstrap_metadata_version > target.level:
            continue
        if lv.dependencies.get(MV_FEATURE, 0) > target.level:
            continue
        best = max(best, lv.level)
    return best


@dataclass
class RewriteReport:
    source: str
    target: MetadataVersion
    destination: str | None
    source_metadata_version: MetadataVersion | None
    losses: list[dict[str, Any]]
    feature_changes: list[dict[str, Any]]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def lossy(self) -> bool:
        return bool(self.losses)

    @property
    def direction(self) -> str:
        if self.source_metadata_version is None:
            return "unknown"
        s, t = self.source_metadata_version.level, self.target.level
        return "downgrade" if t < s else "upgrade" if t > s else "same"

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "destination": self.destination,
            "from": None if self.source_metadata_version is None else self.source_metadata_version.name,
            "to": self.target.name,
            "toLevel": self.target.level,
            "direction": self.direction,
            "lossy": self.lossy,
            "losses": self.losses,
            "featureChanges": self.feature_changes,
            **self.counts,
        }

    def text(self) -> str:
        src = self.source_metadata_version
        head = (
            f"{self.source}: metadata.version {src.name if src else '?'} -> {self.target.name} "
            f"({self.direction}){' -> ' + self.destination if self.destination else ' (dry run)'}"
        )
        lines = [head]
        c = self.counts
        lines.append(
            f"  records: {c.get('records_in', 0)} in, {c.get('records_out', 0)} out, "
            f"{c.get('records_rewritten', 0)} re-encoded, "
            f"{c.get('records_dropped_silently', 0)} dropped without loss"
        )
        for ch in self.feature_changes:
            if ch["name"] == MV_FEATURE:
                continue
            what = (
                "removed"
                if ch["to"] == 0
                else f"lowered to {ch['to']}"
                if ch["to"] < ch["from"]
                else f"raised to {ch['to']}"
            )
            lines.append(f"  feature {ch['name']}: {ch['from']} {what}")
        if not self.losses:
            lines.append("  nothing lost")
        for loss in self.losses:
            lines.append("  LOST " + loss_line(loss))
        return "\n".join(lines)


def loss_line(loss: dict[str, Any]) -> str:
    what = f"{loss['record']}.{loss['field']}" if loss["field"] else f"{loss['record']} (whole record)"
    samples = ", ".join(loss["samples"])
    return f"{what}: {loss['count']} record(s){', e.g. ' + samples if samples else ''}"


def _plan(
    target: MetadataVersion, reg: Registry, release: Release | None, feature_levels: dict[str, int] | None = None
) -> RewritePlan:
    features: dict[str, dict[int, int]] = {MV_FEATURE: {m.level: target.level for m in reg.metadata_versions}}
    for name, f in reg.features.items():
        if name == KRAFT_VERSION_FEATURE:
            continue
        features[name] = {
            lv.level: feature_level_at(name, lv.level, target, reg, release) for lv in f.levels if lv.level > 0
        }
    for name, new in (feature_levels or {}).items():
        if name in (MV_FEATURE, KRAFT_VERSION_FEATURE):
            raise KraftkitError(
                f"{name} cannot be set as a feature level here (metadata.version is the rewrite "
                "target; kraft.version lives in KRaft control records)"
            )
        known = reg.features.get(name)
        levels = [lv.level for lv in known.levels] if known is not None else list(range(1, 64))
        features[name] = {lv: new for lv in levels if lv > 0}
    # kraft.version is not rewritten here; its known levels are named so that an unknown one is refused
    kv_levels = reg.features[KRAFT_VERSION_FEATURE].levels
    features[KRAFT_VERSION_FEATURE] = {lv.level: lv.level for lv in kv_levels if lv.level > 0}
    kraft1 = reg.features[KRAFT_VERSION_FEATURE].level(1).bootstrap_metadata_version
    # unknown is never guessed: a level, feature, record type or version the tables lack is refused
    newest = {name: newest_text(name) for name in features}
    # a CIDR host (4.4-IV1) is matched literally by older releases: such an ACL is reported lost
    return RewritePlan(
        record_versions(target),
        features,
        drop_kraft_control=target.level < kraft1,
        semantic_defaults=SEMANTIC_DEFAULTS,
        refuse_unknown=True,
        newest=newest,
        drop_cidr_acls=not target.supported("cidr_acl"),
    )


def rewrite_snapshot(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str] | None,
    metadata_version: str | int | MetadataVersion,
    *,
    fail_on_loss: bool = False,
    release: Release | bool | None = True,
    feature_levels: dict[str, int] | None = None,
    samples: int = 5,
) -> RewriteReport:
    """Rewrites snapshot ``src`` at ``metadata_version`` into ``dst`` (a file, or a directory
    to write a file of the same name in; None: dry run, only the report). ``release``: the
    Kafka release whose feature support caps the other features (True: the registry's release
    of the target's line, when it has one). With ``fail_on_loss``, nothing is written when
    anything would be lost (:class:`LossError` carries the report). ``feature_levels`` sets
    other finalized features explicitly (name -> level, 0 removes), overriding what the target
    would allow. The input is never modified; the output appears atomically or not at all."""
    reg = registry()
    target = reg.metadata_version(metadata_version)
    if release is True:
        release = target_release(target, reg)
    src = Path(src)
    check_input(src)  # a regular file, or an OSError naming it (a FIFO, a symlink loop, ...)
    if dst is not None:
        dst = Path(dst)
        if dst.is_dir():
            dst = dst / src.name
        _check_output(src, dst)
    plan = _plan(target, reg, release or None, feature_levels)

    from kraftkit.metadata.snapshot import BOOTSTRAP_FILE, parse_snapshot_name

    parsed = parse_snapshot_name(src.name)
    epoch = 0 if src.name == BOOTSTRAP_FILE else parsed[0].epoch if parsed else None

    def run(out: Path | None) -> dict[str, Any]:
        return _rewrite(str(src), None if out is None else str(out), plan, samples=samples, epoch=epoch)

    raw = run(None) if (fail_on_loss or dst is None) else None
    if raw is not None and fail_on_loss and raw["losses"]:
        raise LossError(_report(raw, src, None, target, reg))
    if dst is not None:
        raw = run(dst)
    assert raw is not None
    rep = _report(raw, src, None if dst is None else str(dst), target, reg)
    if rep.direction == "upgrade" and rep.lossy:
        raise KraftkitError(f"{src}: internal error: an upgrade to {target.name} reported losses: {rep.losses}")
    return rep


def rewrite_image(
    image: MetadataImage,
    dst: str | os.PathLike[str] | None,
    metadata_version: int,
    snapshot_id: SnapshotId,
    *,
    written_at: int | None = None,
    feature_levels: dict[str, int] | None = None,
) -> RewriteReport:
    """Rewrites a live image at ``metadata_version`` into the snapshot file ``dst`` (None: a dry
    run, only the report), as the snapshot ``snapshot_id``: the image is written first, at
    ``written_at`` (default: its own metadata.version; the level its records were replayed at when
    a lower one was finalized since), into a scratch directory outside ``dst``'s (a leftover in a
    log directory would be taken for a partition by Kafka), then rewritten. No release caps the
    other features (a controller validated them against the live nodes): only the level does."""
    with tempfile.TemporaryDirectory(prefix="kraftkit-rewrite-") as tmp:
        src = image.write_snapshot(tmp, snapshot_id, metadata_version=written_at)
        return rewrite_snapshot(src, dst, metadata_version, release=None, feature_levels=feature_levels)


def _check_output(src: Path, dst: Path) -> None:
    """Refuses an output that is the input (by name or by inode: a hard or symbolic link) or
    that exists as anything but a regular file: the output is renamed into place, which would
    replace a FIFO or a device node there."""
    try:
        st = os.stat(dst)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise InputFileError(dst, f"cannot write there: {e.strerror}") from None
    # realpath does not raise on a symbolic link loop (Path.resolve does)
    if os.path.realpath(dst) == os.path.realpath(src) or (st is not None and os.path.samefile(src, dst)):
        raise KraftkitError(f"{src}: refusing to rewrite a snapshot onto itself; write it elsewhere first")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise InputFileError(dst, f"the output exists and is {kind_of(st.st_mode)}, not a regular file")


def _report(raw: dict[str, Any], src: Path, dst: str | None, target: MetadataVersion, reg: Registry) -> RewriteReport:
    source_mv = None
    changes = []
    for ch in raw["feature_changes"]:
        if ch["name"] == MV_FEATURE:
            try:
                source_mv = reg.by_level(ch["from"])
            except KraftkitError:
                source_mv = None
        changes.append(dict(ch))
    if source_mv is None and not any(ch["name"] == MV_FEATURE for ch in changes):
        source_mv = target  # the metadata.version record already had the target level
    counts = {
        k: raw[k]
        for k in (
            "batches_in",
            "batches_out",
            "records_in",
            "records_out",
            "bytes_in",
            "bytes_out",
            "records_rewritten",
            "records_dropped_silently",
        )
    }
    return RewriteReport(str(src), target, dst, source_mv, [dict(x) for x in raw["losses"]], changes, counts)


def rewrite_snapshots(
    jobs: Sequence[tuple[str | os.PathLike[str], str | os.PathLike[str] | None]],
    metadata_version: str | int | MetadataVersion,
    *,
    workers: int | None = None,
    **kw: Any,
) -> list[RewriteReport | KraftkitError | OSError]:
    """Rewrites many snapshots in parallel (the Rust core releases the GIL); one report, or
    the error, per job, in order."""

    def one(job):
        try:
            return rewrite_snapshot(job[0], job[1], metadata_version, **kw)
        except (KraftkitError, OSError) as e:
            return e

    with ThreadPoolExecutor(max_workers=workers or min(len(jobs), os.cpu_count() or 1) or 1) as ex:
        return list(ex.map(one, jobs))
