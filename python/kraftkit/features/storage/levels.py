"""The feature levels a format starts the cluster with, chosen as Kafka's ``Formatter`` chooses
them (``calculateEffectiveFeatureLevels``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kraftkit.features.registry import (
    KRAFT_VERSION_FEATURE,
    MV_FEATURE,
    Feature,
    MetadataVersion,
    UnknownVersionError,
    registry,
)
from kraftkit.features.storage.errors import StorageInputError
from kraftkit.features.storage.properties import _parse_int
from kraftkit.metadata.image import FEATURE_LEVEL


def parse_feature_arg(text: str) -> tuple[str, int]:
    """``NAME=LEVEL`` (StorageTool.parseNameAndLevel), with Kafka's messages."""
    eq = text.find("=")
    if eq < 0:
        raise StorageInputError(f"Can't parse feature=level string {text}: equals sign not found.")
    name, level = text[:eq].strip(), text[eq + 1 :].strip()
    try:
        n = _parse_int(level)
        if not -(2**15) <= n < 2**15:
            raise ValueError(level)
    except ValueError:
        raise StorageInputError(
            f"Can't parse feature=level string {text}: unable to parse {level} as a short."
        ) from None
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
        raise StorageInputError(
            f"Unknown metadata.version '{spec}'. Supported metadata.version are: {_mv_names()}"
        ) from None
    return _check_mv(mv)


def _check_mv(mv: MetadataVersion) -> MetadataVersion:
    rel = registry().newest_release
    if mv.level < rel.minimum_bootstrap_version:
        raise StorageInputError(
            f"metadata.version {mv.name} is too old to be supported "
            f"(the minimum is {registry().by_level(rel.minimum_bootstrap_version).name})."
        )
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
    for name, level in features.items() if isinstance(features, Mapping) else features:
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
            raise StorageInputError(
                f"No MetadataVersion with feature level {level}. Valid feature levels are from "
                f"{rel.minimum_bootstrap_version} to {reg.latest.level}."
            ) from None
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
            raise StorageInputError(
                f"{name} could not be set to {level} because it depends on metadata.version=4 (3.3-IV0)"
            )
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
                "(a dynamic quorum needs kraft.version 1). Try removing the --feature flag for kraft.version."
            )
        if configured != 0 and not dynamic_quorum:
            raise StorageInputError(
                f"Cannot set kraft.version to {configured} unless one of --standalone, --initial-controllers or "
                f"--no-initial-controllers is used (a static controller.quorum.voters quorum is kraft.version 0)."
            )
        return configured
    return 1 if dynamic_quorum else 0
