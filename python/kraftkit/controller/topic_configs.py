"""TOPIC configs on kraftkit's controller, as Kafka 4.4's controller decides them.

**Definitions.** ``topic_configs.json``, generated from Kafka's jars by ``scripts/gen_topic_configs.py``:
``LogConfig``'s ConfigDef (each key's type, default, validator, in definition order) and the broker
synonyms of each key (``ServerTopicConfigSynonyms``, with the factor a synonym's value is multiplied by:
``log.retention.hours`` gives ``retention.ms`` in hours).

**Validation** (``ControllerConfigurationValidator`` then ``LogConfig.validate``): the resource name must
not be empty (INVALID_REQUEST) and must be a valid topic name (INVALID_TOPIC_EXCEPTION); the first name
Kafka does not know, in the order Kafka's HashMap of the configs gives, is INVALID_CONFIG "Unknown topic
config name: ..."; then every value is parsed as its key's type and checked by its validator in the
ConfigDef's order (INVALID_CONFIG with ConfigDef's message); then ``min.compaction.lag.ms`` may not pass
``max.compaction.lag.ms``, ``remote.storage.enable=true`` is refused while the node's
``remote.log.storage.system.enable`` is false, and remote storage cannot be turned off without
``remote.log.delete.on.disable=true``. Values a key does not set are the controller's own (its
static and dynamic broker configs through the synonyms, else Kafka's defaults).

**Effective configs** (``KafkaConfigSchema.resolveEffectiveTopicConfig``): for every topic config, the
topic's own value (DYNAMIC_TOPIC_CONFIG), else the first synonym the controller's dynamic config
(DYNAMIC_BROKER_CONFIG), the cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG) or its
server.properties (STATIC_BROKER_CONFIG) has, converted by the synonym's factor, else the default
(DEFAULT_CONFIG). CreateTopics lists them (sorted by name, but the internal ones) for a created topic.

What differs from Kafka: with ``remote.log.storage.system.enable=true`` the checks Kafka makes of a
topic that enables remote storage (its cleanup policy, local retention against retention, copy lag)
are not made.

While eligible leader replicas are enabled, a change of a topic's ``min.insync.replicas`` is followed
by a ClearElrRecord of the topic (after the request's ConfigRecords), as Kafka 4.4 writes one.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from kraftkit.controller.cluster import ControllerError
from kraftkit.controller.configs import (
    APPEND,
    BROKER,
    CONFIG_TYPES,
    DEFAULT_CONFIG,
    DELETE,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    OP_NAMES,
    SET,
    STATIC_BROKER_CONFIG,
    SUBTRACT,
    TOPIC,
    ConfigurationControlManager,
    ConfigValueError,
    config_record,
    java_double,
    java_hash_order,
    parse_type,
    render,
)
from kraftkit.metadata.image import MetadataImage
from kraftkit.protocol.messages import Errors

__all__ = [
    "DYNAMIC_TOPIC_CONFIG",
    "TopicConfigSchema",
    "describe_topic",
    "topic_change",
    "topic_schema",
    "validate_topic_configs",
]

TABLE = Path(__file__).with_name("topic_configs.json")
#: DescribeConfigsResponse.ConfigSource id of a topic's own config
DYNAMIC_TOPIC_CONFIG = 1
_THROTTLED = re.compile(r"([0-9]+:[0-9]+)?")
_GZIP_VALIDATOR = "org.apache.kafka.common.config.ConfigDef$LambdaValidator"
_THROTTLED_VALIDATOR = "org.apache.kafka.storage.internals.log.ThrottledReplicaListValidator"
TIERED_DISABLED = (
    "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
)
TURN_OFF_REMOTE = (
    "It is invalid to disable remote storage without deleting remote data. If you want to keep the remote data "
    "and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. If you want to "
    "disable remote storage and delete all remote data, please set "
    "`remote.storage.enable=false,remote.log.delete.on.disable=true`."
)


def _java_text(parsed: Any) -> str:
    """``String.valueOf`` of a parsed config value."""
    if isinstance(parsed, bool):
        return "true" if parsed else "false"
    if isinstance(parsed, float):
        return java_double(parsed)
    if isinstance(parsed, list):
        return "[" + ", ".join(parsed) + "]"
    return str(parsed)


def _invalid(name: str, parsed: Any, reason: str) -> ConfigValueError:
    return ConfigValueError(f"Invalid value {_java_text(parsed)} for configuration {name}: {reason}")


class TopicConfigSchema:
    """Kafka's topic config definitions (``topic_configs.json``)."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        rows = sorted(doc["configs"], key=lambda c: c["order"])
        self.keys: dict[str, dict] = {c["name"]: c for c in rows}

    def type_of(self, name: str) -> str | None:
        key = self.keys.get(name)
        return key["type"] if key else None

    def default(self, name: str) -> str | None:
        """``KafkaConfigSchema.getDefault``: the key's default as a string, None when it has none."""
        key = self.keys.get(name)
        return key.get("default") if key else None

    def parse(self, name: str, value: str) -> Any:
        """``ConfigDef.parseValue`` of ``value`` for the topic config ``name``: its type, then its
        validator; :class:`ConfigValueError` with ConfigDef's message if Kafka would refuse it."""
        key = self.keys[name]
        kind = key["type"]
        parsed = parse_type(kind, value, name)
        if kind == "LIST":
            parsed = list(dict.fromkeys(parsed))  # (ConfigDef drops a list's duplicates)
        self._check(key.get("validator"), name, parsed)
        return parsed

    @staticmethod
    def _check(validator: Mapping[str, Any] | None, name: str, parsed: Any) -> None:
        if validator is None:
            return
        kind = validator["kind"]
        if kind == "range":
            if parsed != parsed:  # NaN: Java's comparisons with it are all false, so a Range takes it
                return
            lo, hi = validator.get("min"), validator.get("max")
            if lo is not None and Decimal(parsed) < Decimal(lo):
                raise _invalid(name, parsed, f"Value must be at least {lo}")
            if hi is not None and Decimal(parsed) > Decimal(hi):
                raise _invalid(name, parsed, f"Value must be no more than {hi}")
        elif kind == "string":
            if parsed not in validator["values"]:
                raise _invalid(name, parsed, "String must be one of: " + ", ".join(validator["values"]))
        elif kind == "string_ci":
            if str(parsed).upper() not in {v.upper() for v in validator["values"]}:
                raise _invalid(
                    name, parsed, "String must be one of (case insensitive): " + ", ".join(validator["values"])
                )
        elif kind == "list":
            allowed = validator.get("values") or []
            if not parsed and not validator.get("emptyAllowed", True):
                raise ConfigValueError(
                    f"Configuration '{name}' must not be empty. Valid values include: "
                    + ("[" + ",".join(allowed) + "]" if allowed else "any non-empty value")
                )
            for v in parsed:
                if v == "":
                    raise ConfigValueError(f"Configuration '{name}' values must not be empty.")
                if allowed and v not in allowed:
                    raise _invalid(name, v, "String must be one of: " + ", ".join(allowed))
        elif validator.get("class") == _THROTTLED_VALIDATOR:
            if not ("".join(parsed) == "*" or all(_THROTTLED.fullmatch(p.strip()) for p in parsed)):
                raise _invalid(
                    name,
                    parsed,
                    f"{name} must be the literal '*' or a list of replicas in the following format: "
                    "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
                )
        elif validator.get("class") == _GZIP_VALIDATOR and name == "compression.gzip.level":
            bad = parsed > 9 or (parsed < 1 and parsed != -1)
            if bad:
                raise _invalid(name, parsed, "Value must be between 1 and 9 or equal to -1")

    # ------------------------------------------------------------------ resolution
    def resolve(
        self,
        static: Mapping[str, str],
        cluster: Mapping[str, str],
        node: Mapping[str, str],
        topic: Mapping[str, str],
    ) -> dict[str, tuple[str | None, int]]:
        """Every topic config's (value, ConfigSource id), as ``resolveEffectiveTopicConfigs`` resolves it."""
        out: dict[str, tuple[str | None, int]] = {}
        for name, key in self.keys.items():
            if name in topic:
                out[name] = (topic[name], DYNAMIC_TOPIC_CONFIG)
                continue
            found = None
            for layer, source in ((node, DYNAMIC_BROKER_CONFIG), (cluster, DYNAMIC_DEFAULT_BROKER_CONFIG),
                                  (static, STATIC_BROKER_CONFIG)):  # fmt: skip
                for s in key["synonyms"]:
                    if s["name"] in layer:
                        found = (_convert(layer[s["name"]], s["factor"]), source)
                        break
                if found:
                    break
            out[name] = found or (key.get("default"), DEFAULT_CONFIG)
        return out

    def created_configs(
        self, static: Mapping[str, str], cluster: Mapping[str, str], node: Mapping[str, str], topic: Mapping[str, str]
    ) -> list[dict]:
        """The ``Configs`` of a CreatableTopicResult: the effective configs but the internal ones, sorted by
        name (none of Kafka's topic configs is sensitive or read-only)."""
        effective = self.resolve(static, cluster, node, topic)
        return [
            {
                "Name": n,
                "Value": v,
                "ReadOnly": False,
                "ConfigSource": src,
                "IsSensitive": self.type_of(n) == "PASSWORD",
            }
            for n, (v, src) in sorted(effective.items())
            if not self.keys[n].get("internal")
        ]

    # ------------------------------------------------------------------ validation
    def validate(
        self,
        existing: Mapping[str, str],
        props: Mapping[str, str],
        node_values: Mapping[str, str | None],
        remote_storage_system: bool,
    ) -> None:
        """``LogConfig.validate(existing, props, the node's log configs, remote_storage_system)``:
        :class:`ConfigValueError` with Kafka's message for the first problem Kafka would find."""
        for name in java_hash_order(list(props)):
            if name not in self.keys:
                raise ConfigValueError(f"Unknown topic config name: {name}")
        values: dict[str, Any] = {}
        for name in self.keys:  # ConfigDef.parse: in definition order
            if name in props:
                values[name] = self.parse(name, props[name])
            else:
                raw = node_values.get(name)
                try:
                    values[name] = None if raw is None else self.parse(name, raw)
                except ConfigValueError:  # (a node value Kafka's KafkaConfig would not have taken)
                    default = self.default(name)
                    values[name] = None if default is None else self.parse(name, default)
        lo, hi = values.get("min.compaction.lag.ms"), values.get("max.compaction.lag.ms")
        if lo is not None and hi is not None and lo > hi:
            raise ConfigValueError(
                f"conflict topic config setting min.compaction.lag.ms ({lo}) > max.compaction.lag.ms ({hi})"
            )
        if values.get("remote.storage.enable"):
            if not remote_storage_system:
                raise ConfigValueError(TIERED_DISABLED)
        else:
            was = (existing.get("remote.storage.enable") or "false").lower() == "true"
            if was and not values.get("remote.log.delete.on.disable"):
                raise ConfigValueError(TURN_OFF_REMOTE)


def _convert(value: str, factor: int) -> str:
    """A synonym's converter: the value itself, or ``ConfigSynonym``'s hours/minutes to milliseconds
    (an int; 0 when the value does not parse as one)."""
    if factor == 1:
        return value
    v = value.strip()
    n = int(v) if re.fullmatch(r"[+-]?[0-9]{1,11}", v) and -(2**31) <= int(v) < 2**31 else 0
    return str(n * factor)


@functools.cache
def topic_schema() -> TopicConfigSchema:
    return TopicConfigSchema(json.loads(TABLE.read_text(encoding="utf-8")))


def node_layers(
    configs: Mapping[tuple[int, str], Mapping[str, str]], node_id: int | None
) -> tuple[Mapping[str, str], Mapping[str, str]]:
    """(the cluster-wide dynamic BROKER configs, this node's own dynamic BROKER configs) of an image's configs."""
    cluster = configs.get((BROKER, ""), {})
    node = configs.get((BROKER, str(node_id)), {}) if node_id is not None else {}
    return cluster, node


def validate_topic_configs(
    name: str,
    existing: Mapping[str, str],
    props: Mapping[str, str],
    static: Mapping[str, str],
    configs: Mapping[tuple[int, str], Mapping[str, str]],
    node_id: int | None,
) -> None:
    """ControllerConfigurationValidator's checks of the configs ``props`` a topic ``name`` is to have
    (its ``existing`` ones before the change): :class:`ControllerError` with Kafka's error and message."""
    from kraftkit.controller.replication import validate_topic_name  # (replication imports this module)

    if name == "":
        raise ControllerError(Errors.INVALID_REQUEST, "Default topic resources are not allowed.")
    why = validate_topic_name(name)
    if why is not None:
        raise ControllerError(Errors.INVALID_TOPIC_EXCEPTION, why)
    schema = topic_schema()
    cluster, node = node_layers(configs, node_id)
    node_values = {n: v for n, (v, _src) in schema.resolve(static, cluster, node, {}).items()}
    remote = (static.get("remote.log.storage.system.enable") or "false").strip().lower() == "true"
    try:
        schema.validate(existing, props, node_values, remote)
    except ConfigValueError as e:
        raise ControllerError(Errors.INVALID_CONFIG, str(e)) from None


def topic_change(
    mgr: ConfigurationControlManager, image: MetadataImage, rname: str, res: Mapping, incremental: bool
) -> tuple[list[bytes], bool]:
    """The ConfigRecords of a TOPIC resource's change (:mod:`kraftkit.controller.topic_configs`): only
    those that change a value, after Kafka's topic config validation and the topic's existence check;
    and whether one of them is the topic's ``min.insync.replicas``."""
    schema = topic_schema()
    current = dict(image.configs.get((TOPIC, rname), {}))
    changes: dict[str, str | None] = {}
    if incremental:
        for c in res.get("Configs") or []:
            name, op, value = c.get("Name", ""), c.get("ConfigOperation", SET), c.get("Value")
            if op == SET:
                changes[name] = value
            elif op == DELETE:
                changes[name] = None
            elif op in (APPEND, SUBTRACT):
                if schema.type_of(name) != "LIST":
                    raise ControllerError(
                        Errors.INVALID_CONFIG, f"Can't {OP_NAMES[op]} to key {name} because its type is not LIST."
                    )
                changes[name] = mgr._split_op(op, current.get(name), name, value or "", schema.default(name))
            else:
                raise ControllerError(Errors.INVALID_REQUEST, f"Unknown operation type {op}")
        deleted: list[str] = []
    else:
        changes = {c.get("Name", ""): c.get("Value") for c in res.get("Configs") or []}
        deleted = [k for k in current if k not in changes]
    mgr._check_sizes(changes)
    after = {k: v for k, v in current.items() if k not in deleted}
    for k, v in changes.items():
        if v is None:
            after.pop(k, None)
        else:
            after[k] = v
    validate_topic_configs(rname, current, after, mgr.static_config, image.configs, mgr.node_id)
    if rname not in image.topic_ids:  # QuorumController's ConfigResourceExistenceChecker
        raise ControllerError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{rname}' does not exist.")
    altered = [k for k in java_hash_order(list(changes)) if current.get(k) != changes[k]]
    records = [config_record(rname, k, changes[k], TOPIC) for k in altered]
    records += [config_record(rname, k, None, TOPIC) for k in deleted]
    return records, "min.insync.replicas" in altered or "min.insync.replicas" in deleted


def describe_topic(
    mgr: ConfigurationControlManager, image: MetadataImage, rname: str, keys: list[str] | None, with_synonyms: bool
) -> list[dict]:
    """The entries of a DescribeConfigs answer for a TOPIC resource, as Kafka's controller answers one
    (``ConfigHelper``): every topic config that is not internal and every config the topic has, its value
    (the topic's own, else this node's value of it), its source and synonyms (the topic's own, then the
    broker config it falls back to with that config's broker synonyms). An invalid name is
    INVALID_TOPIC_EXCEPTION; a topic the image lacks, UNKNOWN_TOPIC_OR_PARTITION."""
    from kraftkit.controller.replication import validate_topic_name  # (replication imports this module)

    why = validate_topic_name(rname)
    if why is not None:
        raise ControllerError(Errors.INVALID_TOPIC_EXCEPTION, why)
    if rname not in image.topic_ids:
        raise ControllerError(Errors.UNKNOWN_TOPIC_OR_PARTITION, "")
    schema = topic_schema()
    props = image.configs.get((TOPIC, rname), {})
    mine, default = mgr.dynamic_configs(image)
    node = {n: v for n, (v, _s) in schema.resolve(mgr.static_config, default, mine, {}).items()}
    names = {n for n, k in schema.keys.items() if not k.get("internal")} | set(props)
    if keys:
        names &= set(keys)
    layers = (
        (mine, DYNAMIC_BROKER_CONFIG),
        (default, DYNAMIC_DEFAULT_BROKER_CONFIG),
        (mgr.static_config, STATIC_BROKER_CONFIG),
        (mgr.schema.defaults, DEFAULT_CONFIG),
    )
    entries = []
    for name in sorted(names):
        kind = schema.type_of(name)
        sensitive = kind is None or kind == "PASSWORD"
        raw = props[name] if name in props else node.get(name)
        value = None if sensitive or raw is None else render(kind, raw)
        syns: list[dict[str, Any]] = []
        if name in props:
            syns.append({"Name": name, "Value": value, "Source": DYNAMIC_TOPIC_CONFIG})
        key = schema.keys.get(name)
        if key and key["synonyms"]:
            primary = key["synonyms"][0]["name"]
            found = [
                {"Name": s, "Value": None if sensitive else layer[s], "Source": source}
                for layer, source in layers
                for s in mgr.schema.synonyms(primary)
                if s in layer
            ]
            while found and found[0]["Name"] != primary:
                found.pop(0)
            syns += found
        entries.append({
            "Name": name,
            "Value": value,
            "ReadOnly": False,
            "IsSensitive": sensitive,
            "ConfigSource": syns[0]["Source"] if syns else DEFAULT_CONFIG,
            "Synonyms": syns if with_synonyms else [],
            "ConfigType": CONFIG_TYPES.get(kind or "", 0),
            "Documentation": None,
        })  # fmt: skip
    return entries
