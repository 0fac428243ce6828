"""The one way every ``kraftkit`` command prints ``--json``: JSON lines in Kafka's style.

* One compact JSON document a line (``{"a":1,"b":[2]}``, as ``kafka-dump-log``'s records), in
  UTF-8 without escaping non-ASCII text.
* Field names in Kafka's camelCase (``baseOffset``, ``invalidBatches``); the fields of a decoded
  record as Kafka's generated JsonConverter prints them (the schema's name with its first letter
  lowered: ``PartitionId`` -> ``partitionId``, ``KRaftVersion`` -> ``kRaftVersion``); record
  types as ``kafka-dump-log --cluster-metadata-decoder`` names them (``PARTITION_RECORD``,
  control records as Kafka's ControlRecordType: ``KRAFT_VOTERS``).
* Values JSON cannot hold: bytes as base64 text, a UUID as Kafka's Uuid text (22 characters of
  URL-safe base64), a path as its text, a set or tuple as a list, an enum as its name; a float
  that is not finite as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (what Jackson
  writes by default), never the bare tokens JSON parsers refuse.

Lines of decoded records come as JSON text from the Rust core (its writer follows the same rules;
dump-log's batch lines are written there straight to the output): :func:`with_fields` puts fields
in front of such an object without parsing it.

docs/json.md lists the fields of every command's output; docs/json-schema.json is its
machine-readable form (tests/cli/test_json_schema.py checks every command against it).
"""

from __future__ import annotations

import base64
import enum
import json
import math
import os
import sys
import uuid
from typing import IO, Any

__all__ = ["camel", "camel_keys", "dumps", "emit", "record_fields", "record_type_name", "with_fields"]


def camel(name: str) -> str:
    """``invalid_batches`` -> ``invalidBatches``; ``PartitionId`` -> ``partitionId`` (first letter lowered)."""
    if "_" in name:
        head, *rest = name.split("_")
        return head + "".join(p[:1].upper() + p[1:] for p in rest)
    return name[:1].lower() + name[1:]


def camel_keys(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` with its own keys (not those of nested values) in camelCase."""
    return {camel(k): v for k, v in d.items()}


def record_fields(value: Any) -> Any:
    """A decoded record (nested dicts and lists keyed by schema field names) with every field
    name as Kafka's JsonConverter prints it (first letter lowered)."""
    if isinstance(value, dict):
        return {(k[:1].lower() + k[1:] if isinstance(k, str) else k): record_fields(v) for k, v in value.items()}
    if isinstance(value, list):
        return [record_fields(v) for v in value]
    return value


def record_type_name(name: str) -> str:
    """A record type as dump-log names it: ``PartitionRecord`` -> ``PARTITION_RECORD``, the
    control record labels ``KRaftVoters``/``LeaderChange`` -> ``KRAFT_VOTERS``/``LEADER_CHANGE``."""
    from kraftkit.log.control import ControlType
    from kraftkit.metadata.records import CONTROL_TYPES, _snake

    for control_type, (label, schema) in CONTROL_TYPES.items():
        if name in (label, schema):
            return ControlType(control_type).name
    return _snake(name)


def _uuid_text(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def _default(o: Any) -> Any:
    if isinstance(o, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(o)).decode()
    if isinstance(o, uuid.UUID):
        return _uuid_text(o)
    if isinstance(o, os.PathLike):
        return os.fspath(o)
    if isinstance(o, enum.Enum):
        return o.name
    if isinstance(o, (set, frozenset)):
        return sorted(o, key=str)
    raise TypeError(f"{type(o).__name__} is not JSON")


_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def _finite(o: Any) -> Any:
    """``o`` with every float that is not finite replaced by its Jackson string."""
    if isinstance(o, float) and not math.isfinite(o):
        return "NaN" if math.isnan(o) else _NON_FINITE[o]
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def dumps(obj: Any) -> str:
    """``obj`` as one compact line of JSON (no newline)."""
    kw: dict[str, Any] = {"separators": (",", ":"), "ensure_ascii": False, "default": _default}
    try:
        return json.dumps(obj, allow_nan=False, **kw)
    except ValueError:  # a NaN or an infinity somewhere: rare, so only then walked
        return json.dumps(_finite(obj), allow_nan=False, **kw)


def emit(obj: Any, file: IO[str] | None = None) -> None:
    """Prints ``obj`` as one line of JSON to ``file`` (stdout)."""
    out = sys.stdout if file is None else file
    out.write(dumps(obj) + "\n")


def with_fields(fields: dict[str, Any], obj_text: str) -> str:
    """The text of one JSON object: ``fields`` first, then the fields of ``obj_text`` (the text of a
    JSON object, as the Rust core writes one), which is not parsed."""
    head = dumps(fields)[:-1]
    inner = obj_text.strip()[1:]
    return head + ("," + inner if inner != "}" else "}")
