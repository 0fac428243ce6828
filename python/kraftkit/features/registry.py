"""The feature registry: every metadata.version level and every finalized feature Apache
Kafka defines, as data.

The facts come from real Kafka releases: ``scripts/gen_features.py`` runs
``scripts/java/FeatureTable.java`` against each release's jars (fetched from Maven Central)
and writes ``kraftkit/metadata/kafka_features.json``; ``kraftkit.metadata.versions`` reads it and
says which release describes each metadata.version level.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from kraftkit.errors import KraftkitError
from kraftkit.metadata.versions import kafka_releases, metadata_version_rows

MV_FEATURE = "metadata.version"
KRAFT_VERSION_FEATURE = "kraft.version"


class UnknownVersionError(KraftkitError):
    """A metadata.version, release or feature level that the registry does not know."""


@dataclass(frozen=True)
class MetadataVersion:
    """One ``metadata.version`` level (Kafka's ``MetadataVersion`` enum constant)."""

    level: int
    #: ``3.7-IV4``
    name: str
    #: the release line that introduced it, ``3.7``
    release: str
    #: whether the metadata format changed at this level (a downgrade across it loses data)
    did_metadata_change: bool
    #: production-ready in the newest release that lists it
    production: bool
    #: record versions this level writes (None: the record type cannot be written at all)
    register_broker_record_version: int
    register_controller_record_version: int | None
    partition_record_version: int
    partition_change_record_version: int
    #: the ``is...Supported`` helpers of the enum (``scram``, ``delegation_token``, ...)
    supports: frozenset[str] = field(default_factory=frozenset)

    def __str__(self) -> str:
        return self.name

    def __lt__(self, other: MetadataVersion) -> bool:
        return self.level < other.level

    def __le__(self, other: MetadataVersion) -> bool:
        return self.level <= other.level

    def supported(self, capability: str) -> bool:
        """``mv.supported("scram")`` is Kafka's ``isScramSupported()``."""
        return capability in self.supports


@dataclass(frozen=True)
class FeatureLevel:
    level: int
    #: the metadata.version from which this level is the default (Kafka's ``bootstrapMetadataVersion``)
    bootstrap_metadata_version: int
    #: feature name -> minimum level this level needs
    dependencies: dict[str, int]


@dataclass(frozen=True)
class Feature:
    """A finalized feature other than metadata.version (``transaction.version``, ...)."""

    name: str
    production: bool
    minimum_production: int
    latest_production: int
    latest_testing: int
    levels: tuple[FeatureLevel, ...]

    def level(self, n: int) -> FeatureLevel:
        for lv in self.levels:
            if lv.level == n:
                return lv
        raise UnknownVersionError(
            f"{self.name} has no level {n} (known: {', '.join(str(lv.level) for lv in self.levels)})"
        )

    def default_level(self, mv: int) -> int:
        """The highest level whose bootstrap metadata.version is at most ``mv`` (``defaultLevel``)."""
        best = 0
        for lv in self.levels:
            if lv.bootstrap_metadata_version <= mv:
                best = max(best, lv.level)
        return best


@dataclass(frozen=True)
class Release:
    """What one Kafka release supports (its ``MetadataVersion`` range and feature ranges)."""

    version: str
    minimum_metadata_version: int
    minimum_bootstrap_version: int
    latest_production: int
    latest_testing: int
    features: dict[str, Feature]

    @property
    def line(self) -> str:
        """``3.9`` for ``3.9.2``."""
        return ".".join(self.version.split(".")[:2])

    def supported_range(self, name: str, *, unstable: bool = False) -> tuple[int, int] | None:
        """The (min, max) level this release advertises for a feature, as a node's
        ``SupportedFeatures`` would (``QuorumFeatures.defaultSupportedFeatureMap``); None if it
        does not know the feature."""
        if name == MV_FEATURE:
            return (self.minimum_metadata_version, self.latest_testing if unstable else self.latest_production)
        f = self.features.get(name)
        if f is None or (not f.production and not unstable):
            return None
        hi = f.latest_testing if unstable else f.latest_production
        return (f.minimum_production, hi) if hi > 0 else None


_CAPABILITIES = {
    "isControllerRegistrationSupported": "controller_registration",
    "isCordonedLogDirsSupported": "cordoned_log_dirs",
    "isDelegationTokenSupported": "delegation_token",
    "isDirectoryAssignmentSupported": "directory_assignment",
    "isElrSupported": "elr",
    "isLeaderEpochBumpRequiredOnIsrShrink": "leader_epoch_bump_on_isr_shrink",
    "isMetadataTransactionSupported": "metadata_transaction",
    "isMigrationSupported": "migration",
    "isScramSupported": "scram",
    "isBrokerRegistrationChangeRecordSupported": "broker_registration_change_record",
    "isInControlledShutdownStateSupported": "in_controlled_shutdown",
    "isNoOpRecordSupported": "noop_record",
    "isLeaderRecoverySupported": "leader_recovery",
    "isCidrAclSupported": "cidr_acl",
    "isControllerUnregistrationSupported": "controller_unregistration",
}


@dataclass(frozen=True)
class Registry:
    metadata_versions: tuple[MetadataVersion, ...]
    releases: tuple[Release, ...]
    features: dict[str, Feature]

    # ------------------------------------------------------------------ metadata.version
    @functools.cached_property
    def _by_level(self) -> dict[int, MetadataVersion]:
        return {m.level: m for m in self.metadata_versions}

    @property
    def minimum(self) -> MetadataVersion:
        return self.metadata_versions[0]

    @property
    def latest(self) -> MetadataVersion:
        return self.metadata_versions[-1]

    @property
    def latest_production(self) -> MetadataVersion:
        return self.by_level(self.newest_release.latest_production)

    @property
    def newest_release(self) -> Release:
        return self.releases[0]

    def by_level(self, level: int) -> MetadataVersion:
        mv = self._by_level.get(level)
        if mv is None:
            if level > self.latest.level:
                raise UnknownVersionError(
                    f"metadata.version level {level} is newer than kraftkit knows "
                    f"(newest: {self.latest.name} = {self.latest.level})"
                )
            raise UnknownVersionError(
                f"unknown metadata.version level {level} (known: {self.minimum.level}..{self.latest.level})"
            )
        return mv

    def metadata_version(self, spec: str | int | MetadataVersion) -> MetadataVersion:
        """A metadata.version from a level (``21``), a name (``3.9-IV0``) or a release
        (``3.9``, ``3.9.2``: its highest production level, as Kafka's ``fromVersionString``)."""
        if isinstance(spec, MetadataVersion):
            return spec
        if isinstance(spec, int):
            return self.by_level(spec)
        s = spec.strip()
        if s.isascii() and s.isdigit() and len(s) <= 10:  # a level (not "²", not 5000 digits)
            return self.by_level(int(s))
        for m in self.metadata_versions:
            if m.name == s:
                return m
        parts = s.split(".")
        line = ".".join(parts[:2])
        candidates = [m for m in self.metadata_versions if m.release == line and m.production]
        if candidates and len(parts) <= 3 and all(p.isascii() and p.isdigit() for p in parts):
            return candidates[-1]
        lines = sorted({m.release for m in self.metadata_versions}, key=lambda r: tuple(map(int, r.split("."))))
        raise UnknownVersionError(
            f"unknown metadata.version or release {spec!r} (levels {self.minimum.level}..{self.latest.level}, "
            f"names like 3.9-IV0, releases {lines[0]}..{lines[-1]})"
        )

    def metadata_changed(self, a: int, b: int) -> bool:
        """Kafka's ``checkIfMetadataChanged``: True if some level in (min, max] changed the
        metadata format, i.e. moving between ``a`` and ``b`` cannot be a safe downgrade."""
        lo, hi = sorted((a, b))
        return any(m.did_metadata_change for m in self.metadata_versions if lo < m.level <= hi)

    def changes_between(self, a: int, b: int) -> list[MetadataVersion]:
        """The levels in (min, max] that changed the metadata format."""
        lo, hi = sorted((a, b))
        return [m for m in self.metadata_versions if lo < m.level <= hi and m.did_metadata_change]

    # ------------------------------------------------------------------ releases and features
    def release(self, version: str) -> Release:
        """A release the registry was generated from (``4.3.1``), or the one of a line (``3.9``)."""
        for r in self.releases:
            if r.version == version or r.line == version:
                return r
        raise UnknownVersionError(
            f"no feature table for Kafka {version} (known: {', '.join(r.version for r in self.releases)})"
        )

    def feature(self, name: str) -> Feature:
        f = self.features.get(name)
        if f is None:
            raise UnknownVersionError(f"unknown feature {name!r} (known: {', '.join(sorted(self.features))})")
        return f

    def supported_ranges(self, *, unstable: bool = False) -> dict[str, tuple[int, int]]:
        """What this software (kraftkit) supports: every level of the newest release."""
        r = self.newest_release
        out = {MV_FEATURE: (self.minimum.level, self.latest.level if unstable else r.latest_production)}
        for name in sorted(self.features):
            rng = r.supported_range(name, unstable=unstable)
            if rng is not None:
                out[name] = rng
        return out


def _mv(row: dict[str, Any]) -> MetadataVersion:
    return MetadataVersion(
        level=row["level"],
        name=row["version"],
        release=row["shortVersion"],
        did_metadata_change=row["didMetadataChange"],
        production=row.get("isProduction", True),  # 3.5 and older: every level is production
        register_broker_record_version=row.get("registerBrokerRecordVersion", 0),
        register_controller_record_version=row.get("registerControllerRecordVersion"),
        # 3.5 and older have no helper for these: every level writes version 0
        partition_record_version=row.get("partitionRecordVersion", 0),
        partition_change_record_version=row.get("partitionChangeRecordVersion", 0),
        supports=frozenset(cap for key, cap in _CAPABILITIES.items() if row.get(key)),
    )


def _feature(row: dict[str, Any]) -> Feature:
    return Feature(
        name=row["name"],
        production=row["production"],
        minimum_production=row["minimumProduction"],
        latest_production=row["latestProduction"],
        latest_testing=row["latestTesting"],
        levels=tuple(
            FeatureLevel(lv["level"], lv["bootstrapMetadataVersion"], dict(lv["dependencies"]))
            for lv in sorted(row["levels"], key=lambda x: x["level"])
        ),
    )


def _with_capabilities_of_older(mv: MetadataVersion, older: dict[int, MetadataVersion]) -> MetadataVersion:
    """4.x dropped the helpers that are true for every level it supports (NoOpRecord,
    BrokerRegistrationChangeRecord, InControlledShutdown, leader recovery): take them from the
    3.x description of the same level, or from the newest 3.x level below it."""
    base = older.get(mv.level) or older[max(lv for lv in older if lv <= mv.level)]
    legacy = {"broker_registration_change_record", "in_controlled_shutdown", "noop_record", "leader_recovery"}
    return MetadataVersion(**{**mv.__dict__, "supports": mv.supports | (base.supports & legacy)})


@functools.cache
def registry() -> Registry:
    """The registry, loaded once from the Kafka releases ``kraftkit.metadata.versions`` reads."""
    rel_rows = kafka_releases()  # newest first
    releases = []
    for r in rel_rows:
        feats = {f["name"]: _feature(f) for f in r["features"]}
        releases.append(
            Release(
                r["release"],
                r["minimumVersion"],
                r["minimumBootstrapVersion"],
                r["latestProduction"],
                r["latestTesting"],
                feats,
            )
        )
    levels: dict[int, MetadataVersion] = {lv: _mv(row) for lv, row in metadata_version_rows().items()}
    # fill in the 3.x-only capability helpers on the levels the newest release describes
    older: dict[int, MetadataVersion] = {}
    for r in rel_rows[1:]:
        if not r["release"].startswith("3."):
            continue  # a 4.x release lacks those helpers as the newest does
        for row in r["metadataVersions"]:
            if row["level"] <= r["latestProduction"]:
                older.setdefault(row["level"], _mv(row))
    if older:
        newest_min = rel_rows[0]["minimumVersion"]
        for lv, mv in list(levels.items()):
            if lv >= newest_min:
                levels[lv] = _with_capabilities_of_older(mv, older)
    features: dict[str, Feature] = {}
    for rel in releases:  # newest first: the newest description of each feature wins
        for name, f in rel.features.items():
            features.setdefault(name, f)
    return Registry(tuple(levels[k] for k in sorted(levels)), tuple(releases), features)
