"""metadata.version and the other finalized features (KIP-584, KIP-778): the registry of
every level Kafka defines, validation of feature updates, storage formatting and the
snapshot rewrites that move metadata.version down or up."""

from kraftkit.features.registry import (
    KRAFT_VERSION_FEATURE,
    MV_FEATURE,
    Feature,
    FeatureLevel,
    MetadataVersion,
    Registry,
    Release,
    UnknownVersionError,
    registry,
)

__all__ = [
    "KRAFT_VERSION_FEATURE",
    "MV_FEATURE",
    "Feature",
    "FeatureLevel",
    "MetadataVersion",
    "Registry",
    "Release",
    "UnknownVersionError",
    "registry",
]
