"""KRaft metadata: records (``kraftkit.metadata.records``) and snapshots (``kraftkit.metadata.snapshot``).

``kraftkit.metadata.records(path)`` iterates the decoded records of a metadata log segment, a
snapshot or a directory (:func:`kraftkit.metadata.iterate.records`); the module of the same name
(``kraftkit.metadata.records.decode_metadata_record`` ...) is the record codec, whose names are
also this package's.
"""

from kraftkit.metadata.records import (
    CONTROL_TYPES,
    UNKNOWN_TAGS,
    control_record_json,
    decode_control_record,
    decode_metadata_batch,
    decode_metadata_record,
    encode_control_record,
    encode_metadata_record,
    metadata_record_json,
    metadata_record_types,
    metadata_schema,
    record_type,
)

TYPE_CHECKING = False  # (not typing's: importing typing takes longer than this whole package)
if TYPE_CHECKING:
    # what type checkers see: records is the function (at run time it is the codec module, callable)
    from kraftkit.metadata.iterate import MetadataBatch, MetadataRecord, records
else:
    from kraftkit.metadata import records

#: Names loaded on first use (the iterator's module imports the log and snapshot readers)
_LAZY = {"MetadataBatch": "kraftkit.metadata.iterate", "MetadataRecord": "kraftkit.metadata.iterate"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kraftkit.metadata' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "CONTROL_TYPES",
    "UNKNOWN_TAGS",
    "MetadataBatch",
    "MetadataRecord",
    "control_record_json",
    "decode_control_record",
    "decode_metadata_batch",
    "decode_metadata_record",
    "encode_control_record",
    "encode_metadata_record",
    "metadata_record_json",
    "metadata_record_types",
    "metadata_schema",
    "record_type",
    "records",
]
