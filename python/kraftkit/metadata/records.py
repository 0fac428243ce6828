"""KRaft metadata records and control records, decoded and encoded by the schema-driven codec.

Every record type comes from tables generated from Apache Kafka's JSON schemas
(``scripts/gen_schemas.py`` -> ``rust/src/schema/generated.rs``; Kafka 4.3.1, see
``rust/src/schema/SOURCES.md``).

**Dict shape.** A record body is a ``dict`` keyed by the schema's own field names
(``"BrokerId"``, ``"IncarnationId"``, ``"EndPoints"`` -- exactly as in Kafka's JSON schema
files), holding the fields that exist at the record's version, in schema order. Values:
integers -> ``int``; float64 -> ``float``; bool -> ``bool``; string -> ``str``; bytes/records ->
``bytes``; uuid -> :class:`uuid.UUID`; arrays -> ``list``; structs -> ``dict``; null -> ``None``.
Tagged fields the schema does not know are kept under ``"_unknown_tags"`` as a list of
``(tag, raw bytes)`` (present only when there are some), so decode -> encode gives the same
bytes. When encoding, missing fields take their schema defaults; uuids may also be given as
Kafka's text form (22 characters of URL-safe base64) or 16 bytes; unknown keys are errors.

**JSON.** :func:`metadata_record_json` prints what ``kafka-dump-log --cluster-metadata-decoder``
prints: ``{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version",
"featureLevel":22}}`` (camelCase names, tagged fields only when not default, uuids in Kafka's
base64 text, bytes in base64). :func:`control_record_json` gives the label and JSON dump-log
prints for control records (``SnapshotHeader {"version":0,...}``).

**Errors.** Malformed values raise :class:`kraftkit.errors.CorruptRecordError`
(:class:`~kraftkit.errors.TruncatedError` when the bytes end early) or
:class:`~kraftkit.errors.UnsupportedFormatError` (unknown record type, version or frame
version), with ``position`` (byte in the value), ``field`` (e.g.
``"PartitionRecord.Replicas[2]"``) and ``reason``; Kafka's messages are kept
(``"Unknown metadata id 13"``, ``"Found 3 byte(s) of garbage after 12"``...). Values that
cannot be encoded raise ``ValueError``/``TypeError``.

**Records of files.** The module is callable: ``kraftkit.metadata.records(path)`` iterates the
decoded records of a metadata log segment, a snapshot or a directory
(:func:`kraftkit.metadata.iterate.records`), while its attributes stay the codec above.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator

from kraftkit._core import (
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

TYPE_CHECKING = False  # (not typing's: importing typing takes longer than this module)
if TYPE_CHECKING:
    from kraftkit.log.continuity import Discontinuity
    from kraftkit.metadata.iterate import MetadataRecord

__all__ = [
    "CONTROL_TYPES",
    "UNKNOWN_TAGS",
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
]

#: Key of a struct's unknown tagged fields in decoded dicts.
UNKNOWN_TAGS = "_unknown_tags"

#: Control record types with a schema: id -> (dump-log label, schema name).
CONTROL_TYPES: dict[int, tuple[str, str]] = {
    c["control_type"]: (c["label"], c["name"]) for c in metadata_schema()["control"]
}


def record_type(key: int | str) -> tuple[int, str, int, int]:
    """``(api_key, name, min_version, max_version)`` of a metadata record type given by apiKey,
    schema name (``"FeatureLevelRecord"``) or dump-log type name (``"FEATURE_LEVEL_RECORD"``)."""
    for t in metadata_record_types():
        api_key, name = t[0], t[1]
        if key in (api_key, name) or (isinstance(key, str) and _snake(name) == key):
            return t
    raise KeyError(f"no metadata record type {key!r}")


def _snake(name: str) -> str:
    out, prev_cap = [], True
    for c in name:
        if c.isupper():
            if not prev_cap:
                out.append("_")
            prev_cap = True
        else:
            prev_cap = False
        out.append(c.upper())
    return "".join(out)


class _CallableModule(types.ModuleType):
    """This module, callable: ``kraftkit.metadata.records(path)`` is :func:`kraftkit.metadata.iterate.records`,
    the decoded records of a metadata file or directory, while ``kraftkit.metadata.records.<name>``
    stays this module's codec API (the package attribute and the module are one object)."""

    def __call__(
        self, path: str | os.PathLike[str], *, allow_gaps: bool = False, gaps: list[Discontinuity] | None = None
    ) -> Iterator[MetadataRecord]:
        from kraftkit.metadata.iterate import records

        return records(path, allow_gaps=allow_gaps, gaps=gaps)


sys.modules[__name__].__class__ = _CallableModule
