"""Validating finalized-feature updates as KIP-584 lays them down, with explanations.

A cluster finalizes one level per feature. An update (feature, new level, upgrade type) is
valid only when every registered node -- brokers and controllers -- supports the new level (a
node that lacks the feature supports only level 0; extra features on a node are fine), when
the direction matches the upgrade type, when the levels the feature depends on hold, and, for
metadata.version, when the rules of KIP-778 hold. Every failure says why and what would make
it pass. Updates of one request apply atomically: one failure fails them all, as in Kafka.

The checks and messages follow Kafka's ``FeatureControlManager``; the one deliberate
difference is ``UNSAFE_DOWNGRADE`` of metadata.version across a metadata change: Kafka always
refuses it ("Unsafe metadata downgrade is not supported in this version"), kraftkit accepts it
for an offline rewrite and says what the rewrite may lose.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kraftkit.features.registry import MV_FEATURE, Registry, UnknownVersionError, registry
from kraftkit.metadata.mv_levels import MV_3_3_IV0
from kraftkit.metadata.versions import level_known, newest_known_levels, unknown_label

#: The lowest metadata.version UpdateFeatures accepts (3.3-IV0, the first with FeatureLevelRecord).
MINIMUM_SETTABLE_MV = MV_3_3_IV0


class UpgradeType(enum.IntEnum):
    """``FeatureUpdate.UpgradeType`` (UpdateFeaturesRequest v1+)."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True)
class NodeFeatures:
    """What one registered node supports: feature name -> (min, max) level."""

    node_id: int
    role: str  # "broker" or "controller"
    supported: Mapping[str, tuple[int, int]]

    def __str__(self) -> str:
        return f"{self.role} {self.node_id}"

    def supports(self, name: str, level: int) -> bool:
        rng = self.supported.get(name)
        if rng is None:
            return level == 0
        return rng[0] <= level <= rng[1]

    @classmethod
    def from_registration(cls, role: str, node_id: int, features: Iterable[Mapping]) -> NodeFeatures:
        """From a RegisterBrokerRecord/RegisterControllerRecord ``Features`` list."""
        return cls(node_id, role, {f["Name"]: (f["MinSupportedVersion"], f["MaxSupportedVersion"]) for f in features})


@dataclass(frozen=True)
class FeatureUpdate:
    feature: str
    level: int
    upgrade_type: UpgradeType = UpgradeType.UPGRADE


@dataclass
class UpdateResult:
    update: FeatureUpdate
    current: int
    #: None when valid
    error: str | None = None
    #: what would make it pass
    fix: str | None = None
    #: notes on a valid update (e.g. what an unsafe downgrade may lose)
    notes: list[str] = field(default_factory=list)
    #: valid on its own, failed because another update of the same request failed
    cascaded: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    def __str__(self) -> str:
        u = self.update
        head = f"{u.feature} {self.current} -> {u.level} ({u.upgrade_type.name})"
        if self.ok:
            return head + ": OK" + "".join(f"; {n}" for n in self.notes)
        return head + f": {self.error}" + (f" To fix: {self.fix}" if self.fix else "")


def _level_name(reg: Registry, name: str, level: int) -> str:
    if not level_known(name, level) and name in newest_known_levels():
        return unknown_label(name, level)  # never a guessed name
    if name == MV_FEATURE:
        try:
            return f"{level} ({reg.by_level(level).name})"
        except UnknownVersionError:
            return str(level)
    return str(level)


def validate_updates(
    finalized: Mapping[str, int],
    updates: Iterable[FeatureUpdate],
    nodes: Iterable[NodeFeatures],
    *,
    reg: Registry | None = None,
) -> list[UpdateResult]:
    """Validates ``updates`` against the cluster's ``finalized`` levels (metadata.version
    included; absent = 0) and its registered ``nodes``. One result per update; when any
    fails, the others fail too (Kafka applies a request atomically)."""
    reg = reg or registry()
    updates = list(updates)
    nodes = list(nodes)
    after = dict(finalized)
    for u in updates:
        after[u.feature] = u.level
    results = [_check(reg, finalized, after, u, nodes) for u in updates]
    failed = [r for r in results if not r.ok]
    if failed:
        first = failed[0]
        for r in results:
            if r.ok:
                r.error = f"The update failed for all features since {first.update.feature} had an error: {first.error}"
                r.fix = first.fix
                r.cascaded = True
    return results


def _check(
    reg: Registry, finalized: Mapping[str, int], after: Mapping[str, int], u: FeatureUpdate, nodes: list[NodeFeatures]
) -> UpdateResult:
    cur = finalized.get(u.feature, 0)
    res = UpdateResult(u, cur)
    name, level = u.feature, u.level
    lv = _level_name(reg, name, level)
    if level < 0:
        res.error, res.fix = "A feature version cannot be less than 0.", "Use a level of 0 or more."
        return res
    if level < cur and u.upgrade_type == UpgradeType.UPGRADE:
        res.error = (
            "Can't downgrade the version of this feature without setting the upgrade type to either "
            "safe or unsafe downgrade."
        )
        res.fix = "Ask for a downgrade (--unsafe if it crosses a metadata change)."
        return res
    if level > cur and u.upgrade_type != UpgradeType.UPGRADE:
        res.error, res.fix = "Can't downgrade to a newer version.", "Ask for an upgrade."
        return res
    if not level_known(name, cur) and name in newest_known_levels():
        # what lies between a level the tables lack and the requested one is unknown
        res.error = (
            f"{name} is finalized at {_level_name(reg, name, cur)}: kraftkit cannot tell what changing it "
            "allows, needs or loses."
        )
        res.fix = (
            "Use the tools of the Kafka release that wrote the metadata, or a kraftkit whose tables know the level."
        )
        return res
    if name == MV_FEATURE and level < MINIMUM_SETTABLE_MV:
        # (before the nodes' support: no release "supports" level 0, and none would help)
        res.error = f"Invalid metadata.version {level}. Unable to set a metadata.version less than 3.3-IV0"
        res.fix = "metadata.version cannot be disabled or set below 3.3-IV0 (level 4): choose a level from 3.3-IV0 on."
        return res
    lacking = [n for n in nodes if not n.supports(name, level)]
    if lacking:

        def rng(n: NodeFeatures) -> str:
            r = n.supported.get(name)
            return (
                "does not support it"
                if r is None
                else f"supports {_level_name(reg, name, r[0])}..{_level_name(reg, name, r[1])}"
            )

        res.error = f"{name}={lv} is not supported by " + "; ".join(f"{n} ({rng(n)})" for n in lacking) + "."
        res.fix = (
            f"Upgrade the software of {', '.join(str(n) for n in lacking)} to a release that supports {name}={lv}."
        )
        return res
    if name == MV_FEATURE:
        _check_metadata_version(reg, after, res)
    else:
        _check_feature(reg, after, res)
    return res


def _check_metadata_version(reg: Registry, after: Mapping[str, int], res: UpdateResult) -> None:
    u, cur = res.update, res.current
    try:
        target = reg.by_level(u.level)
    except UnknownVersionError:
        res.error = f"Invalid metadata.version {u.level}. Unknown metadata.version."
        res.fix = f"Use a level between {reg.minimum.level} and {reg.latest.level}."
        return
    if u.level < cur:
        changes = reg.changes_between(u.level, cur)
        if changes:
            names = ", ".join(m.name for m in changes)
            if u.upgrade_type == UpgradeType.SAFE_DOWNGRADE:
                res.error = (
                    f"Invalid metadata.version {u.level}. Refusing to perform the requested downgrade because "
                    f"it might delete metadata information (the metadata format changed at {names})."
                )
                res.fix = (
                    "Downgrade only to a level with no metadata change in between, or ask for an unsafe "
                    "downgrade (--unsafe, in kraftkit's tools and kafka-features.sh: kraftkit rewrites the "
                    "metadata and reports what is lost)."
                )
                return
            res.notes.append(
                f"unsafe: the metadata format changed at {names}; kraftkit rewrites the metadata at "
                f"{target.name} and reports what it cannot carry (Kafka refuses this downgrade)"
            )
    # every other finalized feature's dependencies on metadata.version must still hold
    for other, level in after.items():
        if other == MV_FEATURE or level == 0:
            continue
        f = reg.features.get(other)
        if f is None:
            continue
        try:
            need = f.level(level).dependencies.get(MV_FEATURE, 0)
        except UnknownVersionError:
            continue
        if need > u.level:
            res.error = (
                f"Invalid metadata.version {u.level}. {other}={level} depends on metadata.version="
                f"{_level_name(reg, MV_FEATURE, need)}."
            )
            res.fix = f"Lower {other} in the same request (e.g. --feature {other}=0)."
            return


def _check_feature(reg: Registry, after: Mapping[str, int], res: UpdateResult) -> None:
    u = res.update
    f = reg.features.get(u.feature)
    if f is None:
        res.notes.append(f"{u.feature} is unknown to kraftkit's registry; only node support was checked")
        return
    try:
        spec = f.level(u.level)
    except UnknownVersionError as e:
        res.error, res.fix = str(e) + ".", f"Use one of the levels {', '.join(str(x.level) for x in f.levels)}."
        return
    mv = after.get(MV_FEATURE, 0)
    if u.level >= 1 and mv < MINIMUM_SETTABLE_MV:
        res.error = (
            f"{u.feature} could not be set to {u.level} because it depends on metadata.version="
            f"{_level_name(reg, MV_FEATURE, MINIMUM_SETTABLE_MV)}"
        )
        res.fix = "Upgrade metadata.version to 3.3-IV0 or later first."
        return
    for dep, need in sorted(spec.dependencies.items()):
        have = after.get(dep, 0)
        if have < need:
            res.error = (
                f"{u.feature} could not be set to {u.level} because it depends on {dep} level "
                f"{_level_name(reg, dep, need)} (finalized: {_level_name(reg, dep, have)})"
            )
            res.fix = f"Raise {dep} to {need} in the same request or first."
            return


def incompatibilities(node: NodeFeatures, finalized: Mapping[str, int], *, reg: Registry | None = None) -> list[str]:
    """Why ``node`` may not join a cluster with these finalized levels (empty: it may). A
    node must support every finalized level; a finalized feature it does not know at all
    makes it incompatible unless the level is 0; features only the node knows are fine."""
    reg = reg or registry()
    out = []
    for name, level in sorted(finalized.items()):
        if level == 0 or node.supports(name, level):
            continue
        rng = node.supported.get(name)
        have = (
            "does not know it"
            if rng is None
            else (f"supports {_level_name(reg, name, rng[0])}..{_level_name(reg, name, rng[1])}")
        )
        out.append(f"{node} cannot join: {name} is finalized at {_level_name(reg, name, level)} but it {have}")
    return out


def effective_metadata_version(*, software_max: int | None, ibp: int | None, finalized: int | None) -> int:
    """The metadata.version a node acts on (the KIP-778 discussion): 0 when its software has
    no metadata.version (too old), when its inter.broker.protocol is older than the first
    KRaft level (ZooKeeper mode), or when no level is finalized; otherwise the finalized level,
    which the node must support."""
    if software_max is None or ibp is None or finalized is None or ibp < 1 or finalized < 1:
        return 0
    if finalized > software_max:
        raise UnknownVersionError(
            f"finalized metadata.version {finalized} is above what this software supports "
            f"({software_max}): the node must not run"
        )
    return finalized
