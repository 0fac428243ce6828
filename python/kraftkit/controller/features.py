"""Kafka's ``FeatureControlManager`` for kraftkit's controller: what this node supports, what the
committed log finalized (read from the metadata image the raft state machine keeps), the epoch of
the finalized features, and UpdateFeatures turned into FeatureLevelRecords or into Kafka's error.

The validation itself is :func:`kraftkit.features.validation.validate_updates`, fed with the
registered brokers and controllers the image knows; while no other controller has registered (or
below 3.7-IV0, where controllers do not register) the other voters are taken to support what this
one supports, the quorum running one software. An unsafe metadata.version downgrade across a change
of the metadata format, which Kafka refuses, is accepted with the dry run of the rewrite every
replica makes once it is committed (:mod:`kraftkit.raft.state_machine`): what it will lose.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kraftkit.controller.bootstrap import feature_level_value
from kraftkit.errors import KraftkitError
from kraftkit.features.registry import MV_FEATURE, registry
from kraftkit.features.rewrite import RewriteReport, rewrite_image
from kraftkit.features.validation import FeatureUpdate, NodeFeatures, UpgradeType, validate_updates
from kraftkit.metadata.image import MetadataImage
from kraftkit.metadata.snapshot import SnapshotId
from kraftkit.protocol import types as t
from kraftkit.protocol.messages import Errors

__all__ = ["FeatureChange", "FeatureControlManager", "local_supported_features"]

KRAFT_VERSION_FEATURE = "kraft.version"


def local_supported_features() -> dict[str, tuple[int, int]]:
    """What this controller supports, as Kafka's ``QuorumFeatures.defaultSupportedFeatureMap``:
    metadata.version from the newest release's minimum to its latest production level, and each
    production feature of that release (name -> (min, max))."""
    release = registry().newest_release
    out: dict[str, tuple[int, int]] = {}
    for name in [MV_FEATURE, *sorted(release.features)]:
        rng = release.supported_range(name)
        if rng is not None:
            out[name] = rng
    return out


@dataclass
class FeatureChange:
    """What an UpdateFeatures request comes to: Kafka's error (``Errors.NONE`` and no message
    when valid) and the records to commit (none for ``validate_only`` or an error)."""

    error_code: int
    message: str | None
    records: list[bytes] = field(default_factory=list)
    features: list[str] = field(default_factory=list)
    #: a lossy metadata.version downgrade: what rewriting the image at the new level loses (dry run)
    report: RewriteReport | None = None


class FeatureControlManager:
    """The feature state of one controller node (``node_id``, in a quorum of ``voters``)."""

    def __init__(self, node_id: int, voters: Iterable[int] | Callable[[], Iterable[int]]) -> None:
        self.node_id = node_id
        #: the voter ids, or a function giving the voters in force (a dynamic quorum's change)
        self._voters = voters if callable(voters) else sorted(voters)
        self.supported = local_supported_features()
        #: the offset of the last committed FeatureLevelRecord (-1: none seen)
        self.epoch = -1

    # ------------------------------------------------------------------ what was committed
    def replay_feature_level(self, offset: int) -> None:
        """A FeatureLevelRecord was committed at ``offset``."""
        self.epoch = max(self.epoch, offset)

    def load_snapshot(self, image: MetadataImage, end_offset: int) -> None:
        """A snapshot replaced the image: the finalized features stand as of its last offset."""
        self.epoch = end_offset - 1 if image.finalized_features else -1

    @staticmethod
    def finalized(image: MetadataImage) -> dict[str, int]:
        """The finalized levels (metadata.version included when set; disabled features left out)."""
        return {k: v for k, v in sorted(image.finalized_features.items()) if v != 0}

    # ------------------------------------------------------------------ ApiVersions
    def api_versions_fields(self, image: MetadataImage, version: int) -> dict:
        """SupportedFeatures, FinalizedFeaturesEpoch and FinalizedFeatures for ApiVersions at
        ``version``: below v4 a supported range starting at 0 is left out (KAFKA-17492: older
        clients cannot read it), as Kafka's ``ApiVersionsResponse`` does."""
        supported = [
            {"Name": n, "MinVersion": lo, "MaxVersion": hi}
            for n, (lo, hi) in sorted(self.supported.items())
            if version >= 4 or lo != 0
        ]
        finalized = [{"Name": n, "MaxVersionLevel": v, "MinVersionLevel": v} for n, v in self.finalized(image).items()]
        return {"SupportedFeatures": supported, "FinalizedFeaturesEpoch": self.epoch, "FinalizedFeatures": finalized}

    @property
    def voters(self) -> list[int]:
        v = self._voters
        return sorted(v()) if callable(v) else list(v)

    # ------------------------------------------------------------------ UpdateFeatures
    def nodes(self, image: MetadataImage) -> list[NodeFeatures]:
        """The nodes a new level must be supported by: this controller, the registered brokers
        and controllers, and (while no other controller has registered) the other voters with
        this node's ranges."""
        out = [NodeFeatures(self.node_id, "controller", self.supported)]
        controllers = image.controllers
        for cid, c in sorted(controllers.items()):
            if cid != self.node_id:
                out.append(NodeFeatures.from_registration("controller", cid, c["Features"]))
        if not any(cid != self.node_id for cid in controllers):
            out += [NodeFeatures(v, "controller", self.supported) for v in self.voters if v != self.node_id]
        for bid, b in sorted(image.brokers.items()):
            out.append(NodeFeatures.from_registration("broker", bid, b["Features"]))
        return out

    def auto_finalize_request(self, image: MetadataImage) -> t.UpdateFeaturesRequest | None:
        """The UpdateFeatures request ``--auto-finalize`` makes (KIP-778 thread, point 16), or None:
        once every voter has registered, metadata.version up to the highest production level
        every registered node supports; at the finalized metadata.version, each feature up to its
        default level there when every node supports it (kraft.version is the raft layer's)."""
        finalized = self.finalized(image)
        mv = finalized.get(MV_FEATURE)
        if mv is None or not set(self.voters) <= set(image.controllers):
            return None
        nodes = self.nodes(image)
        reg = registry()
        ceiling = reg.latest_production.level
        for n in nodes:
            rng = n.supported.get(MV_FEATURE)
            ceiling = min(ceiling, rng[1] if rng else 0)
        if ceiling > mv:
            return _upgrade_request({MV_FEATURE: ceiling})
        wanted = {}
        for name, feature in sorted(reg.features.items()):
            level = feature.default_level(mv)
            raise_it = name != KRAFT_VERSION_FEATURE and level > finalized.get(name, 0)
            if raise_it and all(n.supports(name, level) for n in nodes):
                wanted[name] = level
        return _upgrade_request(wanted) if wanted else None

    def reason_not_supported(self, image: MetadataImage, name: str, level: int) -> str | None:
        """Kafka's reason for refusing ``name`` at ``level`` (> 0) for lack of support, checked as
        its ``FeatureControlManager`` does: this controller first, then the registered brokers,
        then the other controllers (None when all support it)."""
        if level <= 0:
            return None

        def why(who: str, rng: tuple[int, int] | None) -> str | None:
            if rng is None:
                return f"{who} does not support this feature."
            if not rng[0] <= level <= rng[1]:
                return f"{who} only supports versions {_version_range(rng)}"
            return None

        reason = why(f"Local controller {self.node_id}", self.supported.get(name))
        for bid, b in sorted(image.brokers.items()):
            reason = reason or why(f"Broker {bid}", _ranges(b["Features"]).get(name))
        for cid, c in sorted(image.controllers.items()):
            if cid != self.node_id:
                reason = reason or why(f"Controller {cid}", _ranges(c["Features"]).get(name))
        return reason

    def update_features(self, image: MetadataImage, body: Mapping, version: int) -> FeatureChange:
        """An UpdateFeatures request (``body`` as decoded at ``version``) against the image: the
        records to commit, or Kafka's INVALID_UPDATE_VERSION with why and what would fix it."""
        updates: dict[str, FeatureUpdate] = {}
        for u in body.get("FeatureUpdates") or []:
            name, level = u.get("Feature", ""), u.get("MaxVersionLevel", 0)
            if version == 0:
                kind = UpgradeType.SAFE_DOWNGRADE if u.get("AllowDowngrade") else UpgradeType.UPGRADE
            else:
                code = u.get("UpgradeType", 1)
                if code not in (1, 2, 3):
                    return _refused(name, level, "The controller does not support the given upgrade type.")
                kind = UpgradeType(code)
            updates[name] = FeatureUpdate(name, level, kind)
        if KRAFT_VERSION_FEATURE in updates:
            u = updates[KRAFT_VERSION_FEATURE]
            return _refused(
                u.feature,
                u.level,
                "kraft.version is changed by the raft layer (KIP-853), which kraftkit's controller does not do yet.",
            )
        finalized = self.finalized(image)
        results = validate_updates(finalized, updates.values(), self.nodes(image))
        failed = [r for r in results if not r.ok and not r.cascaded]
        if failed:
            r = failed[0]
            text = r.error or ""
            fix = r.fix
            kafka_reason = self.reason_not_supported(image, r.update.feature, r.update.level)
            if kafka_reason is not None:
                # Kafka's words first (the tools and their users know them), kraftkit's detail after
                fix = f"{fix} ({text.rstrip('.')})" if fix else text
                text = kafka_reason
            if r.update.feature == MV_FEATURE and kafka_reason is not None:
                text = f"Invalid metadata.version {r.update.level}. {text}"
            elif not text.startswith("Invalid metadata.version"):
                text = f"Invalid update version {r.update.level} for feature {r.update.feature}. {text}"
            if fix:
                text += f" To fix: {fix}"
            return FeatureChange(Errors.INVALID_UPDATE_VERSION, _all_failed(text))
        report = None
        mv = updates.get(MV_FEATURE)
        cur = finalized.get(MV_FEATURE, 0)
        if mv is not None and mv.level < cur and registry().metadata_changed(mv.level, cur):
            # (a SAFE_DOWNGRADE across a metadata change was refused by the validation above) the
            # lossy downgrade Kafka refuses: once the record is committed every replica rewrites its
            # image at the new level (kraftkit.raft.state_machine); the same rewrite, dry, says now
            # what that loses, and a rewrite that cannot be done is refused before anything is written
            others = {n: u.level for n, u in updates.items() if n != MV_FEATURE}
            prov = image.provenance
            sid = SnapshotId(max(prov.end_offset, 1), max(prov.epoch, 0))
            try:
                report = rewrite_image(image, None, mv.level, sid, feature_levels=others)
            except KraftkitError as e:
                return _refused(MV_FEATURE, mv.level, f"The metadata cannot be rewritten at that level: {e}")
        records = [feature_level_value(u.feature, u.level) for u in updates.values()]
        return FeatureChange(Errors.NONE, None, records, list(updates), report)


def _upgrade_request(levels: Mapping[str, int]) -> t.UpdateFeaturesRequest:
    return {
        "timeoutMs": 30000,
        "ValidateOnly": False,
        "FeatureUpdates": [
            {"Feature": n, "MaxVersionLevel": lv, "UpgradeType": UpgradeType.UPGRADE} for n, lv in levels.items()
        ],
    }


def _ranges(features: list[dict]) -> dict[str, tuple[int, int]]:
    return {f["Name"]: (f["MinSupportedVersion"], f["MaxSupportedVersion"]) for f in features}


def _version_range(rng: tuple[int, int]) -> str:
    """Kafka's ``VersionRange.toString``: ``3``, ``1-3``, or ``1+`` up to the largest int16."""
    lo, hi = rng
    return str(lo) if lo == hi else f"{lo}+" if hi == 32767 else f"{lo}-{hi}"


def _all_failed(text: str) -> str:
    return "The update failed for all features since the following feature had an error: " + text


def _refused(name: str, level: int, why: str) -> FeatureChange:
    return FeatureChange(
        Errors.INVALID_UPDATE_VERSION, _all_failed(f"Invalid update version {level} for feature {name}. {why}")
    )
