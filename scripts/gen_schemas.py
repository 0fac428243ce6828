#!/usr/bin/env python3
"""Generate ``rust/src/schema/generated.rs`` (static schema tables and Kafka's constants) and
``python/kraftkit/_kafka.py`` (the same constants for Python) from Kafka's jars.

The source is the Kafka jars the oracle uses (``.cache/kafka/<KAFKA_4>/libs/``, fetched by
``python -m tests.harness fetch``): ``kafka-metadata-<v>.jar`` (``common/metadata/*.json``,
every metadata record type) and ``kafka-clients-<v>.jar`` (``common/message/``: the control
record schemas LeaderChangeMessage, SnapshotHeaderRecord, SnapshotFooterRecord,
KRaftVersionRecord, VotersRecord, and the RPC messages kraftkit speaks), and, from the 3.9
release's ``kafka-clients-<v>.jar``, the ZooKeeper-mode controller RPCs Kafka 4.0 removed
(LeaderAndIsr, StopReplica, UpdateMetadata: what a migrating controller sends to ZooKeeper-mode
brokers). The constants that are
not in those schemas (``ControlRecordType``'s type ids, the ``Errors`` codes, names and messages)
are read from kafka-clients by ``scripts/java/KafkaConstants.java`` (run with ``java``). Nothing
outside the repository and what it fetches itself is read.

Every Kafka constant kraftkit uses comes from here, once: the metadata record api keys
(``MetadataRecordType``), the api keys of the RPCs kraftkit speaks (``ApiKeys``), the control
record types and the error codes. Rust takes them from ``generated.rs``, Python from
``kraftkit._kafka``; neither spells them out by hand.

Besides the Rust tables it writes ``rust/src/schema/SOURCES.md``: where every schema came
from, with a SHA-256 of its bytes.

Usage::

    python scripts/gen_schemas.py            # (re)write generated.rs, SOURCES.md and _kafka.py
    python scripts/gen_schemas.py --check    # regenerate in memory; exit 1 with a diff if the
                                             # committed files differ (CI), 2 if the jars
                                             # or java are not available

Output is deterministic: records sorted by apiKey, control records by control type, fields
in schema order; nothing depends on time, paths or dict ordering of the host.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "rust" / "src" / "schema"
OUT_RS = OUT_DIR / "generated.rs"
OUT_MD = OUT_DIR / "SOURCES.md"
OUT_PY = REPO / "python" / "kraftkit" / "_kafka.py"
CONSTANTS_JAVA = REPO / "scripts" / "java" / "KafkaConstants.java"

KAFKA_VERSION = "4.4.0"  # tests/harness/jars.py KAFKA_NEWEST (kept literal: the script must not need the harness)
#: the 3.9 release whose kafka-clients jar gives the ZooKeeper-mode controller RPCs Kafka 4.0 removed
KAFKA_3_VERSION = "3.9.2"  # tests/harness/jars.py KAFKA_3 (kept literal, as above)

# The RPC messages kraftkit speaks (KRaft's quorum RPCs, ApiVersions, the headers, Produce and
# DescribeCluster), from
# kafka-clients' common/message/.
RPC_MESSAGES = [
    "RequestHeader", "ResponseHeader",
    "ApiVersionsRequest", "ApiVersionsResponse",
    "VoteRequest", "VoteResponse",
    "BeginQuorumEpochRequest", "BeginQuorumEpochResponse",
    "EndQuorumEpochRequest", "EndQuorumEpochResponse",
    "FetchRequest", "FetchResponse",
    "FetchSnapshotRequest", "FetchSnapshotResponse",
    "DescribeQuorumRequest", "DescribeQuorumResponse",
    "AddRaftVoterRequest", "AddRaftVoterResponse",
    "RemoveRaftVoterRequest", "RemoveRaftVoterResponse",
    "UpdateRaftVoterRequest", "UpdateRaftVoterResponse",
    # served by the quorum node: appends (Produce to __cluster_metadata) and the controller
    # discovery Kafka's Admin client does before DescribeQuorum (kafka-metadata-quorum.sh)
    "ProduceRequest", "ProduceResponse",
    "DescribeClusterRequest", "DescribeClusterResponse",
    # served by the controller (KIP-584 feature updates, kafka-features.sh --bootstrap-controller)
    "UpdateFeaturesRequest", "UpdateFeaturesResponse",
    # served by the controller: registration and liveness of controllers and brokers
    "ControllerRegistrationRequest", "ControllerRegistrationResponse",
    "BrokerRegistrationRequest", "BrokerRegistrationResponse",
    "BrokerHeartbeatRequest", "BrokerHeartbeatResponse",
    "UnregisterBrokerRequest", "UnregisterBrokerResponse",
    # served by the controller: dynamic broker configs (KIP-919, kafka-configs.sh --bootstrap-controller)
    "DescribeConfigsRequest", "DescribeConfigsResponse",
    "IncrementalAlterConfigsRequest", "IncrementalAlterConfigsResponse",
    "AlterConfigsRequest", "AlterConfigsResponse",
    # served by the controller: topics (brokers forward admin requests inside Envelope)
    "EnvelopeRequest", "EnvelopeResponse",
    "CreateTopicsRequest", "CreateTopicsResponse",
    # served by the controller: producer id blocks for brokers (idempotent and transactional producers)
    "AllocateProducerIdsRequest", "AllocateProducerIdsResponse",
    # served by the controller: more partitions for a topic (DeleteTopics, below, is served too)
    "CreatePartitionsRequest", "CreatePartitionsResponse",
    # not served: known so that a request for one is answered with UNSUPPORTED_VERSION at its own
    # version rather than by closing the connection (the admin tools' common requests to a controller)
    "MetadataRequest", "MetadataResponse",
    "AssignReplicasToDirsRequest", "AssignReplicasToDirsResponse",
    "AlterPartitionRequest", "AlterPartitionResponse",
    "DeleteTopicsRequest", "DeleteTopicsResponse",
    "DescribeAclsRequest", "DescribeAclsResponse",
    "AlterClientQuotasRequest", "AlterClientQuotasResponse",
    # the rest of the admin requests brokers forward to the controller, and partition leadership
    "ElectLeadersRequest", "ElectLeadersResponse",
    "AlterPartitionReassignmentsRequest", "AlterPartitionReassignmentsResponse",
    "ListPartitionReassignmentsRequest", "ListPartitionReassignmentsResponse",
    "CreateAclsRequest", "CreateAclsResponse",
    "DeleteAclsRequest", "DeleteAclsResponse",
    "AlterUserScramCredentialsRequest", "AlterUserScramCredentialsResponse",
]

# The controller-to-broker RPCs of ZooKeeper mode, which Kafka 4.0 removed: sent (never served) by
# the controller to ZooKeeper-mode brokers during a live ZooKeeper migration (KIP-866), at the
# versions a 3.9 broker speaks (LeaderAndIsr v7, StopReplica v4 and UpdateMetadata v8 carry
# isKRaftController). From kafka-clients-<KAFKA_3_VERSION>.jar's common/message/.
RPC_MESSAGES_KAFKA_3 = [
    "LeaderAndIsrRequest", "LeaderAndIsrResponse",
    "StopReplicaRequest", "StopReplicaResponse",
    "UpdateMetadataRequest", "UpdateMetadataResponse",
]

# The control record types that carry a schema, by their ControlRecordType name (the type ids
# come from the enum itself, read by KafkaConstants.java):
# name -> (label kafka-dump-log prints, schema file name)
CONTROL_SCHEMAS = {
    "LEADER_CHANGE": ("LeaderChange", "LeaderChangeMessage"),
    "SNAPSHOT_HEADER": ("SnapshotHeader", "SnapshotHeaderRecord"),
    "SNAPSHOT_FOOTER": ("SnapshotFooter", "SnapshotFooterRecord"),
    "KRAFT_VERSION": ("KRaftVersion", "KRaftVersionRecord"),
    "KRAFT_VOTERS": ("KRaftVoters", "VotersRecord"),
}

I16_MAX = 32767


# --------------------------------------------------------------------------------------------
# Reading Kafka's JSON-with-comments


def strip_comments(text: str) -> str:
    """Removes ``//`` comments that are outside JSON strings."""
    out = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_schema(raw: bytes, where: str) -> dict:
    try:
        return json.loads(strip_comments(raw.decode("utf-8")))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SystemExit(f"gen_schemas: cannot parse {where}: {e}")


@dataclass
class Source:
    name: str  # schema file stem, e.g. "FeatureLevelRecord"
    origin: str  # human-readable origin, e.g. "kafka-metadata-4.3.1.jar!common/metadata/X.json"
    raw: bytes
    schema: dict = field(init=False)

    def __post_init__(self) -> None:
        self.schema = parse_schema(self.raw, self.origin)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()


def jar_paths() -> tuple[Path, Path]:
    libs = REPO / ".cache" / "kafka" / KAFKA_VERSION / "libs"
    return libs / f"kafka-metadata-{KAFKA_VERSION}.jar", libs / f"kafka-clients-{KAFKA_VERSION}.jar"


def kafka_3_clients_jar() -> Path:
    return REPO / ".cache" / "kafka" / KAFKA_3_VERSION / "libs" / f"kafka-clients-{KAFKA_3_VERSION}.jar"


Sources = tuple[list[Source], list[Source], list[Source]]  # metadata, control, rpc


def read_jar_sources() -> Sources | None:
    meta_jar, clients_jar = jar_paths()
    old_jar = kafka_3_clients_jar()
    if not (meta_jar.is_file() and clients_jar.is_file() and old_jar.is_file()):
        return None
    metadata = []
    with zipfile.ZipFile(meta_jar) as z:
        for n in sorted(z.namelist()):
            if re.fullmatch(r"common/metadata/[A-Za-z0-9]+\.json", n):
                metadata.append(Source(Path(n).stem, f"{meta_jar.name}!{n}", z.read(n)))
    control, rpc = [], []
    with zipfile.ZipFile(clients_jar) as z:
        for _, stem in CONTROL_SCHEMAS.values():
            n = f"common/message/{stem}.json"
            control.append(Source(stem, f"{clients_jar.name}!{n}", z.read(n)))
        for stem in RPC_MESSAGES:
            n = f"common/message/{stem}.json"
            rpc.append(Source(stem, f"{clients_jar.name}!{n}", z.read(n)))
    with zipfile.ZipFile(old_jar) as z:
        for stem in RPC_MESSAGES_KAFKA_3:
            n = f"common/message/{stem}.json"
            rpc.append(Source(stem, f"{old_jar.name}!{n}", z.read(n)))
    return metadata, control, rpc


@dataclass
class Constants:
    """What KafkaConstants.java read from kafka-clients."""

    control_types: list[tuple[int, str]]  # (type id, ControlRecordType name), by id; no UNKNOWN
    errors: list[tuple[int, str, str]]  # (code, Errors name, default message), by code


def find_java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").is_file():
        return str(Path(home, "bin", "java"))
    return shutil.which("java")


def read_constants() -> Constants:
    """Runs KafkaConstants.java on the Kafka jars; its JSON checked before it is used."""
    java = find_java()
    if java is None:
        raise SystemExit("gen_schemas: java is needed to read Kafka's ControlRecordType and Errors (set JAVA_HOME)")
    libs = jar_paths()[1].parent
    try:
        proc = subprocess.run([java, "-Xmx256m", "-XX:+UseSerialGC", "-cp", f"{libs}/*", str(CONSTANTS_JAVA)],
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SystemExit(f"gen_schemas: cannot run {CONSTANTS_JAVA.name}: {e}")
    if proc.returncode != 0:
        raise SystemExit(f"gen_schemas: {CONSTANTS_JAVA.name} failed:\n{proc.stderr[-3000:]}")
    try:
        raw = json.loads(proc.stdout)
        control = sorted((int(c["type"]), str(c["name"])) for c in raw["controlRecordTypes"] if int(c["type"]) >= 0)
        errors = sorted((int(e["code"]), str(e["name"]), str(e["message"])) for e in raw["errors"])
    except (ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"gen_schemas: unexpected output of {CONSTANTS_JAVA.name}: {e}")
    for what, rows in (("control record type", control), ("error", errors)):
        names = [r[1] for r in rows]
        ids = [r[0] for r in rows]
        bad = [n for n in names if not re.fullmatch(r"[A-Z][A-Z0-9_]*", n)]
        if bad or len(set(names)) != len(names) or len(set(ids)) != len(ids) or not all(-I16_MAX <= i <= I16_MAX for i in ids):
            raise SystemExit(f"gen_schemas: {CONSTANTS_JAVA.name}: bad {what} table (names {bad}, ids {ids})")
    missing = sorted(set(CONTROL_SCHEMAS) - {n for _, n in control})
    if missing:
        raise SystemExit(f"gen_schemas: ControlRecordType lacks {missing}")
    return Constants(control, errors)


# --------------------------------------------------------------------------------------------
# Schema model


def parse_versions(s, what: str) -> tuple[int, int] | None:
    """Kafka version range text -> (min, max) inclusive, max 32767 for ``N+``; None = "none"."""
    if s is None:
        return None
    s = str(s).strip()
    if s == "none" or s == "":
        return None
    if s.endswith("+"):
        return int(s[:-1]), I16_MAX
    if "-" in s:
        a, b = s.split("-", 1)
        return int(a), int(b)
    return int(s), int(s)


def intersect(a, b):
    if a is None or b is None:
        return None
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else None


PRIMITIVES = {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "string", "bytes", "uuid", "records"}
INT_RANGES = {"int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1), "uint16": (0, (1 << 16) - 1),
              "int32": (-(1 << 31), (1 << 31) - 1), "uint32": (0, (1 << 32) - 1), "int64": (-(1 << 63), (1 << 63) - 1)}


def rust_ident(*parts: str) -> str:
    s = "_".join(parts)
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", s)
    return re.sub(r"[^A-Za-z0-9_]", "_", s).upper()


def snake_upper(name: str) -> str:
    """MetadataRecordType constant name: an underscore before each capital that follows a non-capital."""
    out = []
    prev_cap = True
    for c in name:
        if c.isupper():
            if not prev_cap:
                out.append("_")
            out.append(c)
            prev_cap = True
        else:
            out.append(c.upper())
            prev_cap = False
    return "".join(out)


def rust_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


class Generator:
    def __init__(self) -> None:
        self.statics: list[str] = []  # struct statics, in emission order

    # ---- defaults
    def default_expr(self, f: dict, base: str, is_array: bool, nullable) -> str:
        d = f.get("default")
        if d is None:
            return "DefaultValue::Zero"
        d = str(d).strip() if not isinstance(d, bool) else ("true" if d else "false")
        where = f"field {f['name']}"
        if is_array:
            if d == "null":
                if nullable is None:
                    raise SystemExit(f"gen_schemas: {where}: null default on a non-nullable array")
                return "DefaultValue::Null"
            raise SystemExit(f"gen_schemas: {where}: arrays take only a null default, got {d!r}")
        if base in INT_RANGES:
            v = int(d, 16) if d.lower().startswith(("0x", "-0x")) else int(d)
            lo, hi = INT_RANGES[base]
            if not lo <= v <= hi:
                raise SystemExit(f"gen_schemas: {where}: default {v} out of range for {base}")
            return "DefaultValue::Zero" if v == 0 else f"DefaultValue::Int({v})"
        if base == "bool":
            if d not in ("true", "false"):
                raise SystemExit(f"gen_schemas: {where}: bad bool default {d!r}")
            return "DefaultValue::Zero" if d == "false" else "DefaultValue::Bool(true)"
        if base == "float64":
            v = float(d)
            return "DefaultValue::Zero" if v == 0.0 and not str(d).startswith("-") else f"DefaultValue::Float({v!r})"
        if base == "string":
            if d == "null":
                if nullable is None:
                    raise SystemExit(f"gen_schemas: {where}: null default on a non-nullable string")
                return "DefaultValue::Null"
            return "DefaultValue::Zero" if d == "" else f"DefaultValue::Str({rust_str(d)})"
        if base in ("bytes", "records", "uuid"):
            if d == "null" and base != "uuid":
                return "DefaultValue::Null"
            raise SystemExit(f"gen_schemas: {where}: unsupported default {d!r} for {base}")
        # struct
        if d == "null":
            if nullable is None:
                raise SystemExit(f"gen_schemas: {where}: null default on a non-nullable struct")
            return "DefaultValue::Null"
        raise SystemExit(f"gen_schemas: {where}: unsupported struct default {d!r}")

    # ---- types
    def type_expr(self, msg: str, f: dict, structs: dict, common: dict, versions) -> tuple[str, str, bool]:
        """-> (FieldType expr, base type name, is_array)."""
        t = f["type"]
        is_array = t.startswith("[]")
        base = t[2:] if is_array else t
        if base in PRIMITIVES:
            if "fields" in f:
                raise SystemExit(f"gen_schemas: {msg}.{f['name']}: primitive type with fields")
            inner = f"FieldType::{self.prim_variant(base)}"
        else:
            if "fields" in f:
                if base in structs or base in common:
                    raise SystemExit(f"gen_schemas: {msg}: struct {base} defined twice")
                ident = self.emit_struct(msg, base, f["fields"], versions, structs, common)
                structs[base] = ident
            elif base in structs:
                ident = structs[base]
            elif base in common:
                ident = common[base]
            else:
                raise SystemExit(f"gen_schemas: {msg}.{f['name']}: unknown type {t}")
            inner = f"FieldType::Struct(&{ident})"
        if is_array:
            return f"FieldType::Array(&{inner})", base, True
        return inner, base, False

    @staticmethod
    def prim_variant(base: str) -> str:
        return {"bool": "Bool", "int8": "Int8", "int16": "Int16", "uint16": "Uint16", "int32": "Int32",
                "uint32": "Uint32", "int64": "Int64", "float64": "Float64", "string": "String",
                "bytes": "Bytes", "uuid": "Uuid", "records": "Records"}[base]

    def field_expr(self, msg: str, f: dict, structs: dict, common: dict, indent: str) -> str:
        name = f["name"]
        versions = parse_versions(f.get("versions"), "versions")
        if versions is None:
            raise SystemExit(f"gen_schemas: {msg}.{name}: field without versions")
        nullable = parse_versions(f.get("nullableVersions"), "nullableVersions")
        tagged = parse_versions(f.get("taggedVersions"), "taggedVersions")
        tag = f.get("tag")
        if (tag is None) != (tagged is None):
            raise SystemExit(f"gen_schemas: {msg}.{name}: tag and taggedVersions go together")
        flex = f.get("flexibleVersions")
        ty, base, is_array = self.type_expr(msg, f, structs, common, versions)
        default = self.default_expr(f, base, is_array, nullable)

        def v(r):
            return "Versions::NONE" if r is None else f"Versions::new({r[0]}, {r[1]})"

        flex_expr = "None" if flex is None else ("Some(Versions::NONE)" if parse_versions(flex, "") is None
                                                   else f"Some({v(parse_versions(flex, ''))})")
        return (
            f"{indent}Field {{\n"
            f"{indent}    name: {rust_str(name)},\n"
            f"{indent}    json_name: {rust_str(name[:1].lower() + name[1:])},\n"
            f"{indent}    type_name: {rust_str(f['type'])},\n"
            f"{indent}    ty: {ty},\n"
            f"{indent}    versions: {v(versions)},\n"
            f"{indent}    nullable_versions: {v(nullable)},\n"
            f"{indent}    tagged_versions: {v(tagged)},\n"
            f"{indent}    tag: {'None' if tag is None else f'Some({int(tag)})'},\n"
            f"{indent}    flexible_versions: {flex_expr},\n"
            f"{indent}    default: {default},\n"
            f"{indent}    ignorable: {'true' if f.get('ignorable') else 'false'},\n"
            f"{indent}}},\n"
        )

    def emit_struct(self, msg: str, sname: str, fields: list, versions, structs: dict, common: dict) -> str:
        ident = rust_ident("S", msg, sname) if sname != msg else rust_ident("S", msg)
        body = "".join(self.field_expr(msg, f, structs, common, "        ") for f in fields)
        v = "Versions::NONE" if versions is None else f"Versions::new({versions[0]}, {versions[1]})"
        self.statics.append(
            f"static {ident}: StructSchema = StructSchema {{\n"
            f"    name: {rust_str(sname)},\n"
            f"    versions: {v},\n"
            f"    fields: &[\n{body}    ],\n}};\n"
        )
        return ident

    def message(self, src: Source) -> tuple[str, dict]:
        s = src.schema
        name = s["name"]
        valid = parse_versions(s.get("validVersions"), "validVersions")
        flexible = parse_versions(s.get("flexibleVersions"), "flexibleVersions")
        structs: dict[str, str] = {}
        common: dict[str, str] = {}
        # commonStructs may reference each other; emit them first, in file order.
        for cs in s.get("commonStructs", []):
            common[cs["name"]] = self.emit_struct(name, cs["name"], cs["fields"],
                                                  parse_versions(cs.get("versions", "0+"), ""), structs, common)
        body_ident = self.emit_struct(name, name, s.get("fields", []), valid, structs, common)
        ident = rust_ident("M", name)
        api_key = s.get("apiKey")

        def v(r):
            return "Versions::NONE" if r is None else f"Versions::new({r[0]}, {r[1]})"

        self.statics.append(
            f"pub static {ident}: MessageSchema = MessageSchema {{\n"
            f"    name: {rust_str(name)},\n"
            f"    api_key: {-1 if api_key is None else int(api_key)},\n"
            f"    kind: {rust_str(s.get('type', ''))},\n"
            f"    type_name: {rust_str(snake_upper(name))},\n"
            f"    valid_versions: {v(valid)},\n"
            f"    flexible_versions: {v(flexible)},\n"
            f"    body: &{body_ident},\n"
            f"    source: {rust_str(src.origin)},\n}};\n"
        )
        return ident, s


def metadata_key_names(meta: list[Source]) -> list[tuple[int, str]]:
    """(apiKey, name) of every metadata record type, by apiKey: ``MetadataRecordType``'s constant
    name without its ``_RECORD`` suffix (``REGISTER_BROKER`` for RegisterBrokerRecord)."""
    out: dict[int, str] = {}
    for src in meta:
        s = src.schema
        if s.get("type") != "metadata":
            continue
        key, name = int(s["apiKey"]), s["name"]
        if key in out:
            raise SystemExit(f"gen_schemas: apiKey {key} used by {out[key]} and {name}")
        if not name.endswith("Record"):
            raise SystemExit(f"gen_schemas: metadata record type {name} does not end in Record")
        out[key] = snake_upper(name[: -len("Record")])
    return sorted(out.items())


def rpc_key_names(rpc: list[Source]) -> list[tuple[int, str]]:
    """(apiKey, ``ApiKeys`` name) of the RPCs kraftkit speaks, by apiKey (``VOTE`` for VoteRequest)."""
    out: dict[int, str] = {}
    for src in rpc:
        s = src.schema
        if s.get("type") == "request":
            out[int(s["apiKey"])] = snake_upper(s["name"][: -len("Request")])
    return sorted(out.items())


def generate(meta: list[Source], control: list[Source], rpc: list[Source], consts: Constants, origin_note: str) -> str:
    g = Generator()
    by_key = []
    for src in meta:
        if src.schema.get("type") == "metadata":
            by_key.append((int(src.schema["apiKey"]), src))
    by_key.sort(key=lambda t: t[0])
    meta_keys = metadata_key_names(meta)  # refuses duplicate api keys
    meta_idents = [(key, g.message(src)[0]) for key, src in by_key]
    ctrl_by_stem = {c.name: c for c in control}
    ctrl_idents = [(t, CONTROL_SCHEMAS[name][0], g.message(ctrl_by_stem[CONTROL_SCHEMAS[name][1]])[0])
                   for t, name in consts.control_types if name in CONTROL_SCHEMAS]
    rpc_idents = [g.message(src)[0] for src in rpc]

    out = [
        "// @generated by scripts/gen_schemas.py -- DO NOT EDIT BY HAND.\n",
        "// Regenerate with `python scripts/gen_schemas.py`; CI runs `--check` and fails on any difference.\n",
        f"// Sources: {origin_note} (see SOURCES.md for every file and its SHA-256).\n",
        "// Schemas: Apache Kafka (Apache License 2.0); these tables are derived data.\n",
        "\n",
        "#![allow(clippy::all)]\n",
        "use super::types::*;\n",
        "\n",
    ]
    out.extend(s + "\n" for s in g.statics)
    out.append("/// Every metadata record type, sorted by apiKey.\n")
    out.append("pub static METADATA_RECORDS: &[&MessageSchema] = &[\n")
    out.extend(f"    &{ident},\n" for _, ident in meta_idents)
    out.append("];\n\n")
    out.append("/// Every KRaft control record type with a schema: (control type id, dump-log label, schema).\n")
    out.append("pub static CONTROL_RECORDS: &[ControlSchema] = &[\n")
    out.extend(f"    ControlSchema {{ control_type: {t}, label: {rust_str(label)}, schema: &{ident} }},\n"
               for t, label, ident in ctrl_idents)
    out.append("];\n\n")
    out.append("/// The RPC messages kraftkit speaks: headers, ApiVersions and KRaft's quorum RPCs.\n")
    out.append("pub static RPC_MESSAGES: &[&MessageSchema] = &[\n")
    out.extend(f"    &{ident},\n" for ident in rpc_idents)
    out.append("];\n\n")
    for module, doc, rows in (
        ("api_keys", "The api keys of the metadata record types: `MetadataRecordType`'s names without `_RECORD`.",
         meta_keys),
        ("rpc_api_keys", "The api keys of the RPCs kraftkit speaks (`ApiKeys`).", rpc_key_names(rpc)),
        ("control_types", "The control record types (`ControlRecordType`, without its `UNKNOWN` sentinel).",
         consts.control_types),
    ):
        out.append(f"/// {doc}\npub mod {module} {{\n")
        out.extend(f"    pub const {name}: i16 = {value};\n" for value, name in rows)
        out.append("}\n\n")
    out.append("/// `ControlRecordType`'s name of a control type id; None for an id it does not define.\n")
    out.append("pub fn control_type_name(control_type: i16) -> Option<&'static str> {\n")
    out.append("    match control_type {\n")
    out.extend(f"        control_types::{name} => Some({rust_str(name)}),\n" for _, name in consts.control_types)
    out.append("        _ => None,\n    }\n}\n")
    return "".join(out)


def generate_python(meta: list[Source], rpc: list[Source], consts: Constants, origin_note: str) -> str:
    """``kraftkit._kafka``: the constants of ``generate``'s Rust tables, for Python."""
    out = [
        "# @generated by scripts/gen_schemas.py -- DO NOT EDIT BY HAND.\n",
        "# Regenerate with `python scripts/gen_schemas.py`; CI runs `--check` and fails on any difference.\n",
        f"# Sources: {origin_note}.\n",
        "# ruff: noqa: E501\n",
        '"""Kafka\'s constants, read from its jars by ``scripts/gen_schemas.py`` in the same run that\n',
        "writes the Rust core's tables (``rust/src/schema/generated.rs``): the metadata record api keys,\n",
        "the api keys of the RPCs kraftkit speaks, the control record types and the protocol error codes.\n",
        "The modules that use them re-export them (``kraftkit.log.control.ControlType``,\n",
        '``kraftkit.protocol.messages.ApiKey``, ...)."""\n',
        "\n",
        "from __future__ import annotations\n",
        "\n",
        "import enum\n",
        "\n",
        "# The api keys of the metadata record types: MetadataRecordType's names without _RECORD.\n",
    ]
    out.extend(f"{name} = {key}\n" for key, name in metadata_key_names(meta))
    for cls, doc, rows in (
        ("ApiKey", "The apiKeys kraftkit speaks (Kafka's ``ApiKeys``).", rpc_key_names(rpc)),
        ("ControlType", "Control record types (Kafka's ``ControlRecordType``, without its ``UNKNOWN`` sentinel):\n"
                        "    the int16 type in a control record's key.", consts.control_types),
        ("Errors", "Kafka's protocol error codes (``Errors``).", [(code, name) for code, name, _ in consts.errors]),
    ):
        out.append(f'\n\nclass {cls}(enum.IntEnum):\n    """{doc}"""\n\n')
        out.extend(f"    {name} = {value}\n" for value, name in rows)
    out.append("\n\n#: Kafka's default message of each error (``Errors.message()``)\n")
    out.append("ERROR_MESSAGES: dict[Errors, str] = {\n")
    out.extend(f"    Errors.{name}: {json.dumps(msg, ensure_ascii=False)},\n" for _, name, msg in consts.errors)
    out.append("}\n")
    return "".join(out)


def sources_md(used: Sources, consts: Constants, origin_note: str) -> str:
    lines = [
        "# Schema sources of `generated.rs`",
        "",
        "Generated by `scripts/gen_schemas.py` -- do not edit by hand. "
        f"Tables generated from: {origin_note}.",
        "",
        "| schema | apiKey / control type | validVersions | source | SHA-256 |",
        "|---|---|---|---|---|",
    ]
    ctrl_ids = {CONTROL_SCHEMAS[name][1]: t for t, name in consts.control_types if name in CONTROL_SCHEMAS}
    rows = []
    for s in used[0]:
        rows.append((0, int(s.schema.get("apiKey", -1)), s))
    for s in used[1]:
        rows.append((1, ctrl_ids[s.name], s))
    for i, s in enumerate(used[2]):
        rows.append((2, i, s))
    for kind, key, s in sorted(rows, key=lambda r: (r[0], r[1])):
        if kind == 2:
            api = s.schema.get("apiKey")
            k = f"RPC {s.schema.get('type')}" + ("" if api is None else f", apiKey {api}")
        else:
            k = f"apiKey {key}" if kind == 0 else f"control {key}"
        lines.append(f"| {s.schema['name']} | {k} | {s.schema.get('validVersions')} | `{s.origin}` | `{s.sha256[:16]}` |")
    lines.append("")
    lines.append(f"The control record type ids and the error codes come from `{clients_jar_name()}` "
                 "(`ControlRecordType`, `Errors`), read by `scripts/java/KafkaConstants.java`.")
    lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------


def clients_jar_name() -> str:
    return jar_paths()[1].name


def build() -> dict[Path, str]:
    """Every output -> its text, from the Kafka jars."""
    jar = read_jar_sources()
    if jar is None:
        raise SystemExit(f"gen_schemas: Kafka {KAFKA_VERSION} (and {KAFKA_3_VERSION}) jars not found under .cache/kafka/ "
                         "(run `python -m tests.harness fetch`)")
    consts = read_constants()
    meta_jar, clients_jar = jar_paths()
    note = f"Kafka {KAFKA_VERSION} jars ({meta_jar.name}, {clients_jar.name}) and {kafka_3_clients_jar().name}"
    return {
        OUT_RS: generate(jar[0], jar[1], jar[2], consts, note),
        OUT_MD: sources_md(jar, consts, note),
        OUT_PY: generate_python(jar[0], jar[2], consts, note),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    args = ap.parse_args(argv)

    if args.check and (read_jar_sources() is None or find_java() is None):
        print(f"gen_schemas: the Kafka {KAFKA_VERSION} and {KAFKA_3_VERSION} jars {OUT_RS.relative_to(REPO)} is generated from, or java to "
              "read their constants, are not available here; run `python -m tests.harness fetch` first",
              file=sys.stderr)
        return 2
    outputs = build()
    names = ", ".join(str(path.relative_to(REPO)) for path in outputs)
    if args.check:
        bad = False
        for path, text in outputs.items():
            old = path.read_text(encoding="utf-8") if path.is_file() else ""
            if old != text:
                bad = True
                rel = str(path.relative_to(REPO))
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                           f"{rel} (committed)", f"{rel} (regenerated)"))
        if bad:
            print("gen_schemas: generated files are out of date; run `python scripts/gen_schemas.py`", file=sys.stderr)
            return 1
        print(f"gen_schemas: {names} are up to date (Kafka {KAFKA_VERSION} and {KAFKA_3_VERSION} jars)")
        return 0
    for path, text in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"gen_schemas: wrote {names} (Kafka {KAFKA_VERSION} and {KAFKA_3_VERSION} jars)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
