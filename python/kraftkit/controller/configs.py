"""``ConfigurationControlManager``: dynamic BROKER configs on the controller (KIP-919), and TOPIC
configs, as Kafka 4.4's controller keeps them.

**TOPIC writes.** IncrementalAlterConfigs (SET, DELETE, and APPEND or SUBTRACT of a LIST key, from its
current value or else its default) and the legacy AlterConfigs (the topic's configs become those
given) of a TOPIC resource are checked as :mod:`kraftkit.controller.topic_configs` describes (Kafka's
topic config definitions, with Kafka's messages), then the topic must exist
(UNKNOWN_TOPIC_OR_PARTITION); a ConfigRecord (ResourceType 2) is written only for a value that
changes; a change of a topic's ``min.insync.replicas`` while eligible leader replicas are enabled is
followed by a ClearElrRecord of the topic. DescribeConfigs of a TOPIC resource is answered from the
node's image as Kafka's controller answers it (``ConfigHelper``).

**Writes.** IncrementalAlterConfigs (and the legacy AlterConfigs) of a BROKER resource, a broker id or
``""`` (the cluster-wide default), become ``ConfigRecord``s; a deletion is a ConfigRecord with a null
value. Kafka 4.4's controller checks little of a BROKER change (``ConfigurationControlManager``,
``ControllerConfigurationValidator``, ``QuorumController.ConfigResourceExistenceChecker``), and so does
this module: the name must be ``""`` or a non-negative base-10 id of a registered broker or a
controller; APPEND and SUBTRACT only apply to LIST keys; a name or value is at most 32767 bytes; while
eligible leader replicas are enabled a broker-level ``min.insync.replicas`` cannot change and the
cluster-level one cannot be removed; ``cordoned.log.dirs`` needs metadata.version 4.3-IV0 and may only
shrink. Anything else is accepted as it is, even a name Kafka does not know, a value of the wrong type
or a key that is not dynamically updatable (the broker that is sent the change checks those before
it forwards it; a change sent to a controller directly is not checked). A BROKER record is written
even when it does not change the value.

**Reads.** DescribeConfigs of a BROKER resource is answered by the node itself from its committed
image (as Kafka's controller answers from its own ``KafkaConfig``): for its own id every config
(``--all``), for ``""`` the cluster-wide dynamic ones, each with its synonyms. The dynamic values a
node takes are those a Kafka node would take (``DynamicBrokerConfig.fromPersistentProps``): a value of
the wrong type, a key that is not dynamic, a security key without a listener prefix and (at the
cluster-wide default) a per-broker key are ignored, as Kafka ignores them.

The config definitions (names, types, defaults, the dynamic sets, validators) come from
``broker_configs.json``, generated from Kafka's jars by ``scripts/gen_broker_configs.py``.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from kraftkit._core import encode_metadata_record
from kraftkit._kafka import CLEAR_ELR, CONFIG
from kraftkit.controller.cluster import ControllerError
from kraftkit.metadata.image import MetadataImage
from kraftkit.metadata.mv_levels import MV_4_3_IV0
from kraftkit.protocol.messages import Errors

__all__ = ["BROKER", "ConfigurationControlManager", "alter_response", "broker_schema"]

log = logging.getLogger(__name__)

TABLE = Path(__file__).with_name("broker_configs.json")

# ConfigResource.Type ids
UNKNOWN, TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 0, 2, 4, 8, 16, 32
RESOURCE_TYPES = {TOPIC: "TOPIC", BROKER: "BROKER", BROKER_LOGGER: "BROKER_LOGGER",
                  CLIENT_METRICS: "CLIENT_METRICS", GROUP: "GROUP"}  # fmt: skip
# DescribeConfigsResponse.ConfigSource ids
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 4, 5
# DescribeConfigsResponse.ConfigType ids, by ConfigDef.Type name
CONFIG_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7, "CLASS": 8,
                "PASSWORD": 9}  # fmt: skip
# AlterConfigOp.OpType ids
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
#: ConfigurationControlManager's bound on a value (ConfigRecord's string)
MAX_VALUE_CHARS = 32767
#: the most records one write may hold (Kafka's controller bounds a result's records at 10000)
MAX_RECORDS = 10000
#: the most config entries one DescribeConfigs answer lists (a resource past it gets INVALID_REQUEST)
MAX_DESCRIBE_ENTRIES = 50000
ELR_FEATURE = "eligible.leader.replicas.version"
INT_BOUNDS = {"INT": 2**31, "SHORT": 2**15, "LONG": 2**63}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?)")
_COMMA = re.compile(r"\s*,\s*")


class ConfigValueError(ValueError):
    """A value ``ConfigDef`` would refuse for its key."""


class BrokerConfigSchema:
    """Kafka's broker config definitions (``broker_configs.json``)."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.keys: dict[str, dict] = {c["name"]: c for c in doc["configs"]}
        self.listener_regex = re.compile(doc["listenerConfigRegex"])
        self.per_broker = frozenset(doc["perBroker"])
        self.cluster_level_listener = frozenset(doc["clusterLevelListener"])
        self.dynamic_security = frozenset(doc["dynamicSecurity"])
        #: KafkaConfig's defaults as strings (DynamicBrokerConfig's staticDefaultConfigs)
        self.defaults = {
            n: c["default"] for n, c in self.keys.items() if c["kafkaConfig"] and c.get("default") is not None
        }

    def base_name(self, name: str) -> str:
        """``name`` without a ``listener.name.<listener>.`` prefix."""
        m = self.listener_regex.fullmatch(name)
        return m.group(1) if m else name

    def type_of(self, name: str) -> str | None:
        """ConfigDef.Type name of ``name`` (a listener override has its base key's; None: unknown)."""
        for n in (name, self.base_name(name)):
            key = self.keys.get(n)
            if key is not None:
                return key["type"]
        base = self.base_name(name)
        if base != name and "." in base:  # listener.name.<l>.<mechanism>.<config>
            key = self.keys.get(base.split(".", 1)[1])
            if key is not None:
                return key["type"]
        return None

    def is_dynamic(self, name: str) -> bool:
        key = self.keys.get(name)
        return bool(key and key["dynamic"])

    def synonyms(self, name: str) -> list[str]:
        """``DynamicBrokerConfig.brokerConfigSynonyms(name, matchListenerOverride = true)``."""
        m = self.listener_regex.fullmatch(name)
        if m:
            base = m.group(1)
            return [name, base, base[base.index(".") + 1 :] if "." in base else base]
        key = self.keys.get(name)
        return list(key["synonyms"]) if key and "synonyms" in key else [name]

    def parse(self, name: str, value: str) -> Any:
        """``value`` parsed as ConfigDef parses a dynamic key's value (its type, then its validator);
        :class:`ConfigValueError` if Kafka would refuse it. A key that is not dynamic is not checked."""
        key = self.keys.get(self.base_name(name))
        if key is None or not key["dynamic"]:
            return value
        parsed = parse_type(key["type"], value, key["name"])
        check_validator(key.get("validator"), parsed, key["name"])
        return parsed

    def effective(self, props: Mapping[str, str], per_broker: bool) -> dict[str, str]:
        """The dynamic configs a Kafka node takes of ``props`` (``fromPersistentProps``): a value its
        key's definition refuses, a key that is not dynamic, a security key without a listener prefix
        and, at the cluster-wide default, a per-broker key are left out."""
        out = {}
        for name, value in props.items():
            try:
                self.parse(name, value)
            except ConfigValueError:
                continue
            key = self.keys.get(name)
            if key is not None and key["kafkaConfig"] and not key["dynamic"]:
                continue
            if name in self.dynamic_security:
                continue
            if not per_broker:
                m = self.listener_regex.fullmatch(name)
                if name in self.per_broker or (m and m.group(1) not in self.cluster_level_listener):
                    continue
            out[name] = value
        return out


@functools.cache
def broker_schema() -> BrokerConfigSchema:
    return BrokerConfigSchema(json.loads(TABLE.read_text(encoding="utf-8")))


# ---------------------------------------------------------------------------------- values
def parse_type(kind: str, value: str, name: str) -> Any:
    """``ConfigDef.parseType`` of a string ``value`` for a key of type ``kind``."""
    v = value.strip()
    if kind == "BOOLEAN":
        if v.lower() not in ("true", "false"):
            raise ConfigValueError(
                f"Invalid value {v} for configuration {name}: Expected value to be either true or false"
            )
        return v.lower() == "true"
    if kind in INT_BOUNDS:
        bound = INT_BOUNDS[kind]
        # (a value of more than 20 digits is out of range: Python's int() refuses some of those)
        if not _INTEGER.fullmatch(v) or len(v) > 21 or not -bound <= int(v) < bound:
            raise ConfigValueError(f"Invalid value {v} for configuration {name}: Not a number of type {kind}")
        return int(v)
    if kind == "DOUBLE":
        if not _DOUBLE.fullmatch(v):
            raise ConfigValueError(f"Invalid value {v} for configuration {name}: Not a number of type DOUBLE")
        return float(v.rstrip("fFdD").replace("Infinity", "inf"))
    if kind == "LIST":
        return [] if not v else _COMMA.split(v)
    return v


def check_validator(validator: Mapping[str, Any] | None, parsed: Any, name: str) -> None:
    if validator is None:
        return
    kind = validator["kind"]
    if kind == "range":
        lo, hi = validator.get("min"), validator.get("max")
        if parsed != parsed:  # NaN: Java's comparisons with it are all false, so a Range takes it
            return
        if (lo is not None and parsed < Decimal(lo)) or (hi is not None and parsed > Decimal(hi)):
            raise ConfigValueError(f"Invalid value {parsed} for configuration {name}: out of range [{lo},{hi}]")
    elif kind in ("string", "string_ci"):
        allowed = validator["values"]
        ok = parsed in allowed if kind == "string" else str(parsed).upper() in {a.upper() for a in allowed}
        if not ok:
            raise ConfigValueError(f"Invalid value {parsed} for configuration {name}: String must be one of {allowed}")
    elif kind == "list":
        if not parsed and not validator.get("emptyAllowed", True):
            raise ConfigValueError(f"Invalid value for configuration {name}: empty list")
        allowed = validator.get("values") or []
        if allowed and any(p not in allowed for p in parsed):
            raise ConfigValueError(f"Invalid value {parsed} for configuration {name}: must be in {allowed}")


def java_double(d: float) -> str:
    """``Double.toString(d)``."""
    if d != d:
        return "NaN"
    if d in (float("inf"), float("-inf")):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if str(d).startswith("-") else "0.0"
    sign = "-" if d < 0 else ""
    _s, digits, exp = Decimal(repr(abs(d))).normalize().as_tuple()
    s = "".join(map(str, digits))
    e = len(s) - 1 + int(exp)  # d = s[0].s[1:] x 10^e
    if 1e-3 <= abs(d) < 1e7:
        if e >= 0:
            whole, frac = s[: e + 1].ljust(e + 1, "0"), s[e + 1 :] or "0"
            return f"{sign}{whole}.{frac}"
        return f"{sign}0.{'0' * (-e - 1)}{s}"
    return f"{sign}{s[0]}.{s[1:] or '0'}E{e}"


def render(kind: str | None, value: str) -> str:
    """``ConfigDef.convertToString`` of ``value`` parsed as ``kind`` (the text itself if it does not parse)."""
    if kind is None or kind in ("PASSWORD",):
        return value
    try:
        parsed = parse_type(kind, value, "")
    except ConfigValueError:
        return value
    if isinstance(parsed, bool):
        return "true" if parsed else "false"
    if isinstance(parsed, float):
        return java_double(parsed)
    if isinstance(parsed, list):
        return ",".join(parsed)
    return str(parsed)


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` (over UTF-16 code units, as a signed 32-bit int)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_hash_order(keys: list[str]) -> list[str]:
    """The iteration order of a ``java.util.HashMap`` the distinct ``keys`` were put in, in order:
    by bucket (the spread hash masked by the table size, which doubles past 3/4 full from 16), then
    by insertion within a bucket."""
    keys = list(dict.fromkeys(keys))
    cap = 16
    while len(keys) > cap * 3 // 4:
        cap *= 2

    def bucket(k: str) -> int:
        h = java_string_hash(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (cap - 1)

    return sorted(keys, key=bucket)  # (sorted is stable: insertion order within a bucket)


# ---------------------------------------------------------------------------------- the manager
def config_record(resource_name: str, name: str, value: str | None, resource_type: int = BROKER) -> bytes:
    return encode_metadata_record(
        CONFIG, 0, {"ResourceType": resource_type, "ResourceName": resource_name, "Name": name, "Value": value}
    )


def _result(rtype: int, rname: str, code: int = Errors.NONE, message: str | None = None) -> dict:
    return {"ErrorCode": code, "ErrorMessage": message, "ResourceType": rtype, "ResourceName": rname}


def alter_response(body: Mapping, results: list[dict] | None, error: ControllerError | None = None) -> dict:
    """An (Incremental)AlterConfigsResponse: the per-resource ``results``, or when the whole request
    failed (NOT_CONTROLLER, a timeout) ``error`` for every resource, as Kafka's getErrorResponse."""
    if results is None:
        assert error is not None
        results = [
            _result(r.get("ResourceType", UNKNOWN), r.get("ResourceName") or "", error.code, error.message)
            for r in body.get("Resources") or []
        ]
    return {"ThrottleTimeMs": 0, "Responses": results}


class ConfigurationControlManager:
    """The BROKER configs of one controller node: ``node_id`` (its own resource), ``controller_ids``
    (ids a change may name besides registered brokers) and ``static_config`` (its server.properties,
    the STATIC_BROKER_CONFIG synonyms; empty when it has none)."""

    def __init__(
        self,
        node_id: int,
        controller_ids: Iterable[int] | Callable[[], Iterable[int]],
        static_config: Mapping[str, str] | None = None,
    ):
        self.node_id = node_id
        #: the voter ids, or a function giving the voters in force (a dynamic quorum's change)
        self._controller_ids = controller_ids if callable(controller_ids) else frozenset(controller_ids)
        self.static_config = dict(static_config or {})
        # KafkaConfig.populateSynonyms: node.id and broker.id stand for each other (a node started
        # without a server.properties has its id all the same)
        ident = self.static_config.get("node.id", self.static_config.get("broker.id", str(node_id)))
        self.static_config.setdefault("node.id", ident)
        self.static_config.setdefault("broker.id", ident)
        self.schema = broker_schema()

    def controller_ids(self) -> frozenset[int]:
        c = self._controller_ids
        return frozenset(c()) if callable(c) else c

    # -------------------------------------------------------------- writes
    def incremental_alter(self, image: MetadataImage, body: Mapping) -> tuple[list[bytes], list[dict]]:
        """The records (none with ValidateOnly) and the per-resource results of an
        IncrementalAlterConfigs request (a refused resource's result carries its error, the others NONE)."""
        return self._alter(image, body, incremental=True)

    def legacy_alter(self, image: MetadataImage, body: Mapping) -> tuple[list[bytes], list[dict]]:
        """As :meth:`incremental_alter` for an AlterConfigs request: the resource's configs become
        exactly those given (a key it had and the request does not name is deleted)."""
        return self._alter(image, body, incremental=False)

    def _alter(self, image: MetadataImage, body: Mapping, *, incremental: bool) -> tuple[list[bytes], list[dict]]:
        records, results = self._alter_all(image, body, incremental=incremental)
        if len(records) > MAX_RECORDS:
            raise ControllerError(
                Errors.INVALID_REQUEST,
                f"the request would write {len(records)} ConfigRecords; one write holds at most {MAX_RECORDS}",
            )
        if records and not body.get("ValidateOnly"):
            done = [r["ResourceName"] or "<default>" for r in results if r["ErrorCode"] == Errors.NONE]
            log.info("node %d: configs of %s altered: %d ConfigRecord(s)", self.node_id, done, len(records))
        return ([] if body.get("ValidateOnly") else records), results

    def _alter_all(self, image: MetadataImage, body: Mapping, *, incremental: bool) -> tuple[list[bytes], list[dict]]:
        records: list[bytes] = []
        results: list[dict] = []
        clear_elr: list[str] = []  # topics whose min.insync.replicas record is written
        seen: set[tuple[int, str]] = set()
        duplicates: set[tuple[int, str]] = set()
        planned: list[tuple[tuple[int, str], Mapping]] = []
        for res in body.get("Resources") or []:
            rtype, rname = res.get("ResourceType", UNKNOWN), res.get("ResourceName") or ""
            if rtype not in RESOURCE_TYPES:
                results.append(_result(rtype, rname, Errors.UNSUPPORTED_VERSION, f"Unknown resource type {rtype}."))
                continue
            key = (rtype, rname)
            if key in duplicates:
                continue
            if key in seen:
                duplicates.add(key)
                planned = [p for p in planned if p[0] != key]
                results.append(_result(rtype, rname, Errors.INVALID_REQUEST, "Duplicate resource."))
                continue
            seen.add(key)
            planned.append((key, res))
        for (rtype, rname), res in planned:
            if rtype == TOPIC:
                try:
                    out, min_isr = self._topic_change(image, rname, res, incremental)
                except ControllerError as e:
                    results.append(_result(rtype, rname, e.code, e.message))
                    continue
                records.extend(out)
                results.append(_result(rtype, rname))
                if min_isr:
                    clear_elr.append(rname)
                continue
            if rtype != BROKER:
                results.append(
                    _result(rtype, rname, Errors.INVALID_REQUEST,
                            f"kraftkit's controller keeps BROKER and TOPIC configs only, not {RESOURCE_TYPES[rtype]} ones")
                )  # fmt: skip
                continue
            try:
                out = self._broker_change(image, rname, res, incremental)
            except ControllerError as e:
                results.append(_result(rtype, rname, e.code, e.message))
                continue
            records.extend(out)
            results.append(_result(rtype, rname))
        if clear_elr and (image.features.get(ELR_FEATURE) or 0) >= 1:
            # Kafka 4.4's createClearElrRecordsAsNeeded: a topic's new min.insync.replicas clears its ELRs
            records += [encode_metadata_record(CLEAR_ELR, 0, {"TopicName": name}) for name in clear_elr]
        return records, results

    def _broker_change(self, image: MetadataImage, rname: str, res: Mapping, incremental: bool) -> list[bytes]:
        current = dict(image.configs.get((BROKER, rname), {}))
        changes: dict[str, str | None] = {}
        if incremental:
            for c in res.get("Configs") or []:
                name, op, value = c.get("Name", ""), c.get("ConfigOperation", SET), c.get("Value")
                if op == SET:
                    changes[name] = value
                elif op == DELETE:
                    changes[name] = None
                elif op in (APPEND, SUBTRACT):
                    if self.schema.type_of(name) != "LIST" or name not in self.schema.keys:
                        raise ControllerError(
                            Errors.INVALID_CONFIG, f"Can't {OP_NAMES[op]} to key {name} because its type is not LIST."
                        )
                    changes[name] = self._split_op(op, current.get(name), name, value or "")
                else:
                    raise ControllerError(Errors.INVALID_REQUEST, f"Unknown operation type {op}")
        else:
            given = {c.get("Name", ""): c.get("Value") for c in res.get("Configs") or []}
            changes = dict(given)
            changes.update({k: None for k in current if k not in given})
        self._validate(image, rname, current, changes)
        # (Kafka's controller reads the changes from a java.util.HashMap: its records come in that order)
        order = java_hash_order(list(changes)) if incremental else list(changes)
        return [config_record(rname, name, changes[name]) for name in order]

    def _topic_change(
        self, image: MetadataImage, rname: str, res: Mapping, incremental: bool
    ) -> tuple[list[bytes], bool]:
        from kraftkit.controller.topic_configs import topic_change  # (it imports this module)

        return topic_change(self, image, rname, res, incremental)

    @staticmethod
    def _check_sizes(changes: Mapping[str, str | None]) -> None:
        for name, value in changes.items():
            if value is not None and len(value.encode("utf-8", "surrogatepass")) > MAX_VALUE_CHARS:
                raise ControllerError(
                    Errors.INVALID_CONFIG,
                    "The configuration value cannot be added because it exceeds the maximum value size of 32767 bytes.",
                )
            if len(name.encode("utf-8", "surrogatepass")) > MAX_VALUE_CHARS:
                raise ControllerError(
                    Errors.INVALID_CONFIG, f"The configuration name {name[:80]!r}... is over 32767 bytes in UTF-8."
                )

    def _split_op(self, op: int, current: str | None, name: str, value: str, default: str | None = None) -> str:
        """APPEND or SUBTRACT of the comma-separated ``value`` to the key's current value (its
        default when it has none), as ConfigurationControlManager does it."""
        base = current if current is not None else (default if default is not None else self.schema.defaults.get(name))
        parts = [p for p in (base or "").split(",") if p]
        for v in value.split(","):
            if op == APPEND and v not in parts:
                parts.append(v)
            elif op == SUBTRACT and v in parts:
                parts.remove(v)
        return ",".join(parts)

    def _validate(self, image: MetadataImage, rname: str, current: Mapping[str, str], changes: Mapping) -> None:
        elr = (image.features.get(ELR_FEATURE) or 0) >= 1
        mv = image.metadata_version or 0
        for name, value in changes.items():
            if name == "min.insync.replicas" and elr:
                if rname:
                    raise ControllerError(
                        Errors.INVALID_CONFIG,
                        "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
                    )
                if value is None:
                    raise ControllerError(
                        Errors.INVALID_CONFIG,
                        "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
                    )
            if name == "cordoned.log.dirs":
                if mv < MV_4_3_IV0:
                    raise ControllerError(
                        Errors.INVALID_CONFIG,
                        "The cordoned.log.dirs configuration value cannot be set because it requires "
                        "metadata.version >= 4.3-IV0",
                    )
                if value is not None and value.strip():
                    had = current.get(name)
                    old = [] if had is None else _COMMA.split(had.strip())
                    if not set(_COMMA.split(value.strip())) <= set(old):
                        raise ControllerError(
                            Errors.INVALID_CONFIG,
                            "When updating cordoned.log.dirs via controllers,  the new value must be a subset of "
                            "the current configuration value.",
                        )
            if value is not None and len(value.encode("utf-8", "surrogatepass")) > MAX_VALUE_CHARS:
                raise ControllerError(
                    Errors.INVALID_CONFIG,
                    "The configuration value cannot be added because it exceeds the maximum value size of 32767 bytes.",
                )
            if len(name.encode("utf-8", "surrogatepass")) > MAX_VALUE_CHARS:
                # (a ConfigRecord's Name is a string of at most 32767 bytes too: refused, not a failed encoding)
                raise ControllerError(
                    Errors.INVALID_CONFIG, f"The configuration name {name[:80]!r}... is over 32767 bytes in UTF-8."
                )
        if rname:  # ControllerConfigurationValidator, then the existence check
            if not re.fullmatch(r"[+-]?[0-9]+", rname) or not -(2**31) <= int(rname) < 2**31:
                raise ControllerError(Errors.INVALID_REQUEST, "Unable to parse broker name as a base 10 number.")
            bid = int(rname)
            if bid < 0:
                raise ControllerError(Errors.INVALID_REQUEST, "Invalid negative broker ID.")
            if bid not in image.brokers and bid not in self.controller_ids() and bid != self.node_id:
                raise ControllerError(Errors.BROKER_ID_NOT_REGISTERED, f"No node with id {bid} found.")

    # -------------------------------------------------------------- reads
    def describe(self, image: MetadataImage, body: Mapping, version: int) -> dict:
        """A DescribeConfigsResponse (without ThrottleTimeMs) for ``body``, from ``image``."""
        resources = body.get("Resources") or []
        synonyms, docs = bool(body.get("IncludeSynonyms")), bool(body.get("IncludeDocumentation"))
        bad = next((r for r in resources if r.get("ResourceType") not in RESOURCE_TYPES), None)
        results = []
        listed = 0  # entries in the answer so far
        memo: dict[tuple[str, tuple[str, ...] | None], list[dict]] = {}
        for res in resources:
            rtype, rname = res.get("ResourceType", UNKNOWN), res.get("ResourceName") or ""
            out = {"ResourceType": rtype, "ResourceName": rname, "ErrorCode": Errors.NONE, "ErrorMessage": None}
            keys = res.get("ConfigurationKeys")
            try:
                if listed > MAX_DESCRIBE_ENTRIES:
                    raise ControllerError(
                        Errors.INVALID_REQUEST,
                        f"the answer would list more than {MAX_DESCRIBE_ENTRIES} configs; ask for fewer resources",
                    )
                if bad is not None:  # (Kafka fails the whole request on the first such resource)
                    raise ControllerError(
                        Errors.INVALID_REQUEST,
                        f"Unexpected resource type UNKNOWN for resource {bad.get('ResourceName') or ''}",
                    )
                if rtype == TOPIC:
                    from kraftkit.controller.topic_configs import describe_topic  # (it imports this module)

                    out["Configs"] = describe_topic(self, image, rname, keys, synonyms)
                    out["ErrorMessage"] = ""  # (ConfigHelper leaves a TOPIC result's message at its default)
                    listed += len(out["Configs"])
                    results.append(out)
                    continue
                if rtype != BROKER:
                    raise ControllerError(
                        Errors.INVALID_REQUEST,
                        f"kraftkit's controller describes BROKER and TOPIC configs only, not {RESOURCE_TYPES[rtype]} "
                        "ones",
                    )
                memo_key = (rname, None if keys is None else tuple(keys))
                if memo_key not in memo:
                    memo[memo_key] = self._describe_broker(image, rname, keys, synonyms, docs, version)
                out["Configs"] = memo[memo_key]
                listed += len(out["Configs"])
            except ControllerError as e:
                out.update(ErrorCode=e.code, ErrorMessage=e.message, Configs=[])
            results.append(out)
        return {"ThrottleTimeMs": 0, "Results": results}

    def dynamic_configs(self, image: MetadataImage) -> tuple[dict[str, str], dict[str, str]]:
        """(this node's dynamic configs, the cluster-wide dynamic defaults) a Kafka node would take."""
        configs = image.configs
        mine = self.schema.effective(configs.get((BROKER, str(self.node_id)), {}), per_broker=True)
        default = self.schema.effective(configs.get((BROKER, ""), {}), per_broker=False)
        return mine, default

    def _describe_broker(
        self, image: MetadataImage, rname: str, keys: list[str] | None, with_synonyms: bool, docs: bool, version: int
    ) -> list[dict]:
        mine, default = self.dynamic_configs(image)
        per_broker = bool(rname)
        if per_broker:
            if not re.fullmatch(r"[+-]?[0-9]+", rname) or not -(2**31) <= int(rname) < 2**31:
                raise ControllerError(Errors.INVALID_REQUEST, f"Broker id must be an integer, but it is: {rname}")
            if int(rname) != self.node_id:
                raise ControllerError(
                    Errors.INVALID_REQUEST,
                    f"Unexpected broker id, expected {self.node_id} or empty string, but received {rname}",
                )
            names = {n for n, c in self.schema.keys.items() if c["kafkaConfig"] and not c.get("internal")}
            names |= set(self.static_config) | set(mine) | set(default)
        else:
            names = set(default)
        if keys:
            names &= set(keys)
        layers = (
            (mine, DYNAMIC_BROKER_CONFIG),
            (default, DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static_config, STATIC_BROKER_CONFIG),
            (self.schema.defaults, DEFAULT_CONFIG),
        )
        entries = []
        for name in sorted(names):
            kind = self.schema.type_of(name)
            sensitive = kind is None or kind == "PASSWORD"
            syns: list[dict[str, Any]] = []
            for layer, source in layers:
                for s in self.schema.synonyms(name):
                    if s in layer:
                        syns.append({"Name": s, "Value": None if sensitive else layer[s], "Source": source})
            while syns and syns[0]["Name"] != name:
                syns.pop(0)  # (a listener override's base keys, when describing the base key)
            if not per_broker:
                syns = [s for s in syns if s["Source"] == DYNAMIC_DEFAULT_BROKER_CONFIG]
            raw = default.get(name) if not per_broker else self._effective_value(name, mine, default)
            value = None if sensitive or raw is None else render(kind, raw)
            source = syns[0]["Source"] if syns else DEFAULT_CONFIG
            entry = {
                "Name": name,
                "Value": value,
                "ReadOnly": not self.schema.is_dynamic(name),
                "IsSensitive": sensitive,
                "ConfigSource": source,
                "Synonyms": syns if with_synonyms else [],
                "ConfigType": CONFIG_TYPES.get(kind or "", 0),
                "Documentation": None,
            }
            entries.append(entry)
        return entries

    def _effective_value(self, name: str, mine: Mapping[str, str], default: Mapping[str, str]) -> str | None:
        """The value this node runs with: its dynamic config, else the cluster-wide one, else its
        server.properties, else Kafka's default (a value set through a synonym key, such as
        ``log.retention.hours`` for ``log.retention.ms``, is not converted: see the synonyms)."""
        for layer in (mine, default, self.static_config):
            if name in layer:
                return layer[name]
        return self.schema.defaults.get(name)
