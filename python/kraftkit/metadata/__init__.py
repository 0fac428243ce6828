"""KRaft metadata: records (``kraftkit.metadata.records``) and snapshots (``kraftkit.metadata.snapshot``)."""

from kraftkit.metadata.records import (
    control_record_json,
    decode_control_record,
    decode_metadata_batch,
    decode_metadata_record,
    encode_control_record,
    encode_metadata_record,
    metadata_record_json,
    metadata_record_types,
    metadata_schema,
)

__all__ = [
    "control_record_json",
    "decode_control_record",
    "decode_metadata_batch",
    "decode_metadata_record",
    "encode_control_record",
    "encode_metadata_record",
    "metadata_record_json",
    "metadata_record_types",
    "metadata_schema",
]
