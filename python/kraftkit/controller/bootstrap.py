"""The bootstrap metadata a new controller leader commits into an empty log (KIP-778).

Where it comes from, in Kafka's order: ``bootstrap.checkpoint`` in the metadata log directory
(``kafka-storage format`` of Kafka 4.3 and older); else the data records of the bootstrap snapshot
``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`` (Kafka 4.4 writes the
FeatureLevelRecords there; the snapshot of 3.9..4.3 holds only the voters, and counts as none);
else, as Kafka's ``BootstrapMetadata.fromDirectory`` does, "the default bootstrap": one
FeatureLevelRecord for the latest production metadata.version. The records are kept as the
framed values the file holds, and appended as they are.

What a new leader appends (:meth:`BootstrapMetadata.activation_records`) is what Kafka 4.4's
``ActivationRecordsGenerator`` writes into an empty log: at a metadata.version with metadata
transactions (3.6-IV1 and later) a BeginTransactionRecord ("Bootstrap records"), the bootstrap
records, with eligible.leader.replicas.version above 0 the cluster-wide ``min.insync.replicas``
ConfigRecord (KIP-966), and an EndTransactionRecord. Kafka may spread those over several batches;
kraftkit appends them as one batch, which commits whole or not at all, so no partial bootstrap
transaction is ever left for a new leader to abort.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kraftkit._core import encode_metadata_record
from kraftkit.errors import KraftkitError
from kraftkit.features.registry import MV_FEATURE, registry
from kraftkit.features.storage.format import BOOTSTRAP_FILE, BOOTSTRAP_SNAPSHOT, CLUSTER_METADATA_DIR
from kraftkit.features.storage.info import read_bootstrap
from kraftkit.metadata.image import FEATURE_LEVEL
from kraftkit.metadata.records import record_type
from kraftkit.metadata.snapshot import SnapshotReader

__all__ = ["BootstrapError", "BootstrapMetadata", "feature_level_value", "read_bootstrap_metadata"]

DEFAULT_SOURCE = "the default bootstrap"
ELR_FEATURE = "eligible.leader.replicas.version"
#: Kafka's ConfigResource.Type.BROKER (the cluster-wide default: resource name "")
BROKER_RESOURCE = 4
#: ZkMigrationState ids (Kafka's ``ZkMigrationState``)
NONE, MIGRATION, PRE_MIGRATION, POST_MIGRATION = 0, 1, 2, 3


class BootstrapError(KraftkitError):
    """Bootstrap metadata that cannot be read or that this controller cannot run."""


def feature_level_value(name: str, level: int) -> bytes:
    """A framed FeatureLevelRecord (version 0, the only one)."""
    return encode_metadata_record(FEATURE_LEVEL, 0, {"Name": name, "FeatureLevel": level})


@dataclass(frozen=True)
class BootstrapMetadata:
    """The bootstrap records (framed values, in file order), their metadata.version and features,
    and where they came from (a file, or :data:`DEFAULT_SOURCE`)."""

    records: tuple[bytes, ...]
    metadata_version: int
    features: dict[str, int]
    source: str

    def activation_records(self, min_insync_replicas: int = 1, *, zk_migration: bool = False) -> list[bytes]:
        """The records a new leader appends into an empty log (see the module docstring);
        ``min_insync_replicas`` is the controller's ``min.insync.replicas`` (Kafka's default 1);
        ``zk_migration``: the controller migrates a ZooKeeper cluster (:class:`BootstrapError` when
        the bootstrap metadata.version cannot)."""
        tx = registry().by_level(self.metadata_version).supported("metadata_transaction")
        if zk_migration and not tx:
            raise BootstrapError(
                f"{self.source}: the bootstrap metadata.version {self.metadata_version} does not support ZK "
                "migrations (metadata transactions, 3.6-IV1 and later, are needed): cannot continue with "
                "zookeeper.metadata.migration.enable=true"
            )
        out = []
        if tx:
            out.append(_encode("BeginTransactionRecord", {"Name": "Bootstrap records"}))
        out += self.records
        if self.features.get(ELR_FEATURE, 0) > 0:
            out.append(
                _encode(
                    "ConfigRecord",
                    {
                        "ResourceType": BROKER_RESOURCE,
                        "ResourceName": "",
                        "Name": "min.insync.replicas",
                        "Value": str(min_insync_replicas),
                    },
                )
            )
        if zk_migration:
            out.append(_encode("ZkMigrationStateRecord", {"ZkMigrationState": PRE_MIGRATION}))
        if tx:
            out.append(_encode("EndTransactionRecord", {}))
        return out

    @classmethod
    def default(cls) -> BootstrapMetadata:
        mv = registry().latest_production.level
        return cls((feature_level_value(MV_FEATURE, mv),), mv, {}, DEFAULT_SOURCE)


def _encode(name: str, data: dict) -> bytes:
    return encode_metadata_record(record_type(name)[0], 0, data)


def _from_file(path: Path, *, optional: bool) -> BootstrapMetadata | None:
    try:
        info = read_bootstrap(path, optional=optional)
        if info is None:
            return None
        values = tuple(value for _offset, value in SnapshotReader(path).records())
    except (OSError, KraftkitError) as e:
        text = str(e)
        raise BootstrapError(text if os.fspath(path) in text else f"{path}: {text}") from None
    return BootstrapMetadata(values, info["metadata_version"]["level"], dict(info["features"]), os.fspath(path))


def read_bootstrap_metadata(log_dir: str | os.PathLike[str]) -> BootstrapMetadata:
    """The bootstrap metadata of a controller whose metadata log directory is ``log_dir``.
    Raises :class:`BootstrapError` (naming the file) for a file that cannot be read, holds damage,
    lacks the metadata.version record, or sets a level this software does not support."""
    d = Path(log_dir)
    checkpoint = d / BOOTSTRAP_FILE
    snapshot = d / CLUSTER_METADATA_DIR / BOOTSTRAP_SNAPSHOT
    boot = None
    if os.path.lexists(checkpoint):
        boot = _from_file(checkpoint, optional=False)
    elif os.path.lexists(snapshot):
        boot = _from_file(snapshot, optional=True)
    if boot is None:
        return BootstrapMetadata.default()
    release = registry().newest_release
    for name, level in {MV_FEATURE: boot.metadata_version, **boot.features}.items():
        rng = release.supported_range(name)
        if level != 0 and (rng is None or not rng[0] <= level <= rng[1]):
            have = "does not support it" if rng is None else f"supports {rng[0]}..{rng[1]}"
            raise BootstrapError(
                f"{boot.source}: the bootstrap sets {name}={level} but this controller (Kafka "
                f"{release.version}'s levels) {have}"
            )
    return boot
