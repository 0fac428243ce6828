"""Storage formatting: what ``kafka-storage format``, ``info`` and ``random-uuid`` do.

``format_storage`` writes the bootstrap records (what ``BootstrapMetadata.fromVersions``
makes: a ``FeatureLevelRecord`` for metadata.version, then one per other finalized feature at
a level above 0, sorted by name, never one for kraft.version) and, in every directory, a
``meta.properties`` (v1: ``cluster.id``, ``node.id`` and a ``directory.id``). Where the
bootstrap records go depends on the release being formatted for (``layout``):

* ``bootstrap-file`` (what ``kafka-storage format`` of Kafka 4.3 and older writes): a
  ``bootstrap.checkpoint`` in every directory, and, for a KIP-853 dynamic quorum
  (``--standalone`` / ``--initial-controllers``), the bootstrap snapshot
  ``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`` holding the KRaftVersion
  and Voters control records in the metadata log directory.
* ``checkpoint`` (Kafka 4.4 and newer): no ``bootstrap.checkpoint``; the metadata log
  directory's bootstrap snapshot ``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint``
  holds everything, for a static quorum too: a control batch (SnapshotHeader, then
  KRaftVersion when kraft.version is 1, then Voters when there are initial voters), a batch of
  the bootstrap records, a SnapshotFooter batch. The other directories get only
  ``meta.properties``.

By default the layout follows the release: ``checkpoint`` when the metadata.version belongs to
4.4 or newer, ``bootstrap-file`` below (the layout that release's own tool writes; Kafka 4.4's
tool writes ``checkpoint`` whatever the release version, which ``layout="checkpoint"`` gives).
Feature levels are chosen as Kafka's ``Formatter`` chooses them
(``calculateEffectiveFeatureLevels``): requested levels first, every other production feature
at its default for the release version (``Feature.defaultLevel``), kraft.version 0 unless the
quorum is dynamic, and every level checked against its dependencies. The rules, messages and
files were checked against the real ``kafka-storage`` of Kafka 4.4.0 and 4.3.1
(``tests/kafka/test_storage_kafka.py``).

Every file is written atomically: a temporary file in the same directory, fsync, rename,
fsync of the directory. ``meta.properties`` is written last in each directory, so a
directory counts as formatted only once everything else is in place.

Errors: :class:`StorageInputError` (bad arguments: unknown release or feature level, failed
dependency, malformed cluster id or voter string) and :class:`StorageStateError` (what is on
disk refuses the request: a damaged meta.properties, a reserved or duplicate directory id),
and of it :class:`StorageExistsError` (the output exists: a formatted directory, a
meta.properties of another cluster or node; exit 2 as every command's existing output).
"""

from kraftkit.features.storage.errors import (
    StorageError,
    StorageExistsError,
    StorageInputError,
    StorageStateError,
)
from kraftkit.features.storage.format import (
    BOOTSTRAP_FILE,
    BOOTSTRAP_SNAPSHOT,
    CHECKPOINT_LAYOUT_SINCE,
    CLUSTER_METADATA_DIR,
    DIRECTORY_TYPES,
    LAYOUT_BOOTSTRAP_FILE,
    LAYOUT_CHECKPOINT,
    LAYOUTS,
    MAX_BATCH_BYTES,
    DirectoryResult,
    FormatResult,
    bootstrap_checkpoint_bytes,
    default_layout,
    format_storage,
    fsync_dir,
    write_file_atomic,
)
from kraftkit.features.storage.info import (
    info_text,
    read_bootstrap,
    storage_info,
)
from kraftkit.features.storage.levels import (
    FeatureSet,
    bootstrap_metadata_versions,
    parse_feature_arg,
    resolve_features,
    resolve_release_version,
    supported_features,
)
from kraftkit.features.storage.properties import (
    META_PROPERTIES,
    MetaProperties,
    java_date,
    java_properties_order,
    parse_properties,
    properties_text,
)
from kraftkit.features.storage.properties import (
    _java_string_hash as _java_string_hash,
)
from kraftkit.features.storage.uuids import (
    directory_id_reserved,
    generate_directory_id,
    parse_uuid,
    random_uuid,
    uuid_to_str,
    validate_cluster_id,
)
from kraftkit.features.storage.voters import (
    DEFAULT_CONTROLLER_LISTENER,
    ControllerListener,
    DynamicVoter,
    parse_controller_listener,
    parse_voter,
    parse_voters,
    voters_record,
)

__all__ = [
    "BOOTSTRAP_FILE",
    "BOOTSTRAP_SNAPSHOT",
    "CHECKPOINT_LAYOUT_SINCE",
    "CLUSTER_METADATA_DIR",
    "ControllerListener",
    "DEFAULT_CONTROLLER_LISTENER",
    "DIRECTORY_TYPES",
    "DirectoryResult",
    "DynamicVoter",
    "FeatureSet",
    "FormatResult",
    "LAYOUTS",
    "LAYOUT_BOOTSTRAP_FILE",
    "LAYOUT_CHECKPOINT",
    "MAX_BATCH_BYTES",
    "META_PROPERTIES",
    "MetaProperties",
    "StorageError",
    "StorageInputError",
    "StorageExistsError",
    "StorageStateError",
    "bootstrap_checkpoint_bytes",
    "bootstrap_metadata_versions",
    "default_layout",
    "directory_id_reserved",
    "format_storage",
    "fsync_dir",
    "generate_directory_id",
    "info_text",
    "java_date",
    "java_properties_order",
    "parse_controller_listener",
    "parse_feature_arg",
    "parse_properties",
    "parse_uuid",
    "parse_voter",
    "parse_voters",
    "properties_text",
    "random_uuid",
    "read_bootstrap",
    "resolve_features",
    "resolve_release_version",
    "storage_info",
    "supported_features",
    "uuid_to_str",
    "validate_cluster_id",
    "voters_record",
    "write_file_atomic",
]
