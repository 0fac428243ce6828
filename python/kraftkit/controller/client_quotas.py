"""``ClientQuotaControlManager``: AlterClientQuotas (api 49) decided as Kafka 4.4's controller decides it.

An entry names an entity (a map of entity type to name: ``user``, ``client-id`` or ``ip``; a null
name is the type's default entity) and the quota keys to set or remove. Kafka's rules, in its order:

- a key given twice in one entry refuses the entry ("Duplicate quota key ..."); an entity given
  twice in one request is refused the second time ("Ignoring duplicate entity ...") and an entity whose
  entry already failed on a duplicate key is answered that way too (the records of its first entry
  stay in the write, as on Kafka's controller);
- an entity with no entries, of an unknown type or with an empty name is refused, and ``ip`` cannot
  be combined with ``user`` or ``client-id``; an ``ip`` name must be an IP address;
- a key set must be one of the entity's quota keys (``producer_byte_rate``, ``consumer_byte_rate``
  (LONG), ``request_percentage``, ``controller_mutation_rate`` (DOUBLE) for users and client ids,
  ``connection_creation_rate`` (INT) for an ip) with a finite value above 0 that fits the key's type
  and, for an integral type, has no fraction;
- a removal writes ``ClientQuotaRecord(Remove=true)`` only when the key is set; a value is written
  only when it differs from the one set.

Every error is INVALID_REQUEST with Kafka's message, per entity; the other entities' records are
committed (all in one batch, none with ValidateOnly). A request that would write more than 10,000
records is refused as a whole (POLICY_VIOLATION), as Kafka's controller refuses it. The records' order, and the order of an entity's
types inside them, are those of Kafka's ``HashMap``s.

One difference: Kafka accepts an ``ip`` name that resolves as a host name (``InetAddress.getByName``,
a DNS lookup on the controller's thread); kraftkit does no lookups on its controller and accepts the
IP address literals Java's ``getByName`` takes without one (``127.1`` and ``01.2.3.4`` too, an IPv6
address also in brackets or with a scope), so ``localhost`` or another host name is refused.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import socket
from collections.abc import Mapping
from typing import Any

from kraftkit._core import encode_metadata_record
from kraftkit._kafka import CLIENT_QUOTA
from kraftkit.controller.cluster import ControllerError
from kraftkit.controller.configs import MAX_RECORDS, java_string_hash
from kraftkit.metadata.image import MetadataImage
from kraftkit.protocol import types as t
from kraftkit.protocol.messages import ERROR_MESSAGES, Errors

__all__ = [
    "IP_QUOTAS",
    "TOO_LARGE",
    "USER_CLIENT_QUOTAS",
    "alter_client_quotas",
    "alter_client_quotas_response",
    "hash_order",
]

log = logging.getLogger(__name__)

USER, CLIENT_ID, IP = "user", "client-id", "ip"
#: ``QuotaConfig.userAndClientQuotaConfigs()``: key -> ConfigDef.Type
USER_CLIENT_QUOTAS = {
    "producer_byte_rate": "LONG",
    "consumer_byte_rate": "LONG",
    "request_percentage": "DOUBLE",
    "controller_mutation_rate": "DOUBLE",
}
#: ``QuotaConfig.ipConfigs()``
IP_QUOTAS = {"connection_creation_rate": "INT"}
#: the largest value of each integral type, as Java compares a double with it
_TYPE_MAX = {"SHORT": (32767.0, "a SHORT"), "INT": (2147483647.0, "an INT"), "LONG": (float(2**63), "a LONG")}

#: the whole request's refusal when it would write more than MAX_RECORDS records
TOO_LARGE = "Unable to perform excessively large batch operation."

Entity = tuple[tuple[str, str | None], ...]  # the image's key of an entity: (type, name) pairs sorted


def hash_order(keys: list[str], initial: int = 16, peak: int | None = None) -> list[str]:
    """The iteration order of a ``java.util.HashMap(initial)`` holding the distinct ``keys`` (put in
    this order), whose size once reached ``peak`` (default: as many as ``keys``): by bucket, then by
    insertion within a bucket. The table is ``initial`` rounded up to a power of two and doubles each
    time the map grows past 3/4 of it."""
    keys = list(dict.fromkeys(keys))
    cap = 1
    while cap < initial:
        cap *= 2
    size = len(keys) if peak is None else max(peak, len(keys))
    while size > cap * 3 // 4:
        cap *= 2

    def bucket(k: str) -> int:
        h = java_string_hash(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (cap - 1)

    return sorted(keys, key=bucket)


def _key(entity: Mapping[str, str | None]) -> Entity:
    return tuple(sorted(entity.items(), key=lambda kv: (kv[0], kv[1] is not None, kv[1] or "")))


def _java_map(entity: dict[str, str | None], order: list[str]) -> str:
    return "{" + ", ".join(f"{k}={'null' if entity[k] is None else entity[k]}" for k in order) + "}"


class _Entry:
    """One request entry as Kafka's ``AlterClientQuotasRequest.entries()`` makes it a ClientQuotaAlteration:
    the entity a map (a type given twice: the last name), the ops a list (a removal's value null)."""

    def __init__(self, data: t.AlterClientQuotasRequestEntryData) -> None:
        given = data.get("Entity") or []
        self.entity: dict[str, str | None] = {}
        for e in given:
            self.entity[e.get("EntityType") or ""] = e.get("EntityName")
        self.order = hash_order(list(self.entity), max(len(given), 1))
        self.ops: list[tuple[str, float | None]] = [
            (op.get("Key") or "", None if op.get("Remove") else float(op.get("Value", 0.0)))
            for op in data.get("Ops") or []
        ]
        self.key = _key(self.entity)

    def __str__(self) -> str:
        return f"ClientQuotaEntity(entries={_java_map(self.entity, self.order)})"


def _java_ipv4(s: str) -> bytes | None:
    """``IPAddressUtil.textToNumericFormatV4``: 1 to 4 decimal parts (leading zeros allowed), the last
    filling the remaining bytes (``127.1`` is 127.0.0.1), at most 15 characters; None if not one."""
    if not 0 < len(s) <= 15:
        return None
    parts = s.split(".")
    if len(parts) > 4 or any(not p or not all("0" <= c <= "9" for c in p) for p in parts):
        return None
    values = [int(p) for p in parts]
    last = values.pop()
    if any(v > 255 for v in values) or last >= 1 << (8 * (4 - len(values))):
        return None
    return bytes(values) + last.to_bytes(4 - len(values), "big")


def _java_ipv6(s: str) -> bool:
    """An IPv6 literal as ``InetAddress.getByName`` takes it: an IPv4 tail in Java's dotted form and a
    ``%scope``, numeric or the name of an interface of this host (Java also wants the interface to have
    an IPv6 address)."""
    address, _, scope = s.partition("%")
    if "%" in s and not (scope.isascii() and scope.isdigit()):
        try:
            socket.if_nametoindex(scope)
        except (OSError, ValueError):
            return False
    head, _, tail = address.rpartition(":")
    if "." in tail:
        v4 = _java_ipv4(tail) if tail.count(".") == 3 else None
        if v4 is None:
            return False
        address = f"{head}:{v4[:2].hex()}:{v4[2:].hex()}"
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return True


def _valid_ip(name: str | None) -> bool:
    """Kafka's ``isValidIpEntity`` for literals: null (the default ip), an IPv4 or IPv6 address (the
    latter also in brackets). Host names are not looked up (see the module's note)."""
    if name is None:
        return True
    if name.startswith("[") and name.endswith("]"):
        return ":" in name and _java_ipv6(name[1:-1])
    if ":" in name:
        return _java_ipv6(name)
    return _java_ipv4(name) is not None


def _check_entity(entry: _Entry) -> dict[str, str] | str:
    """The entity's quota keys, or the message of Kafka's refusal (validateEntity, configKeysForEntityType)."""
    if not entry.entity:
        return "Invalid empty client quota entity"
    for etype in entry.order:  # (Kafka walks the entity's HashMap: the first problem met is the one told)
        if etype not in (USER, CLIENT_ID, IP):
            return f"Unhandled client quota entity type: {etype}"
        if entry.entity[etype] == "":
            return f"Empty {etype} not supported"
    if IP in entry.entity:
        if USER in entry.entity or CLIENT_ID in entry.entity:
            # (sic: Kafka's message has no space between "should" and "not")
            return "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
        ip = entry.entity[IP]
        if not _valid_ip(ip):
            return f"{ip} is not a valid IP or resolvable host."
        return IP_QUOTAS
    return USER_CLIENT_QUOTAS


def _check_value(keys: dict[str, str], key: str, value: float) -> str | None:
    """Kafka's ``validateQuotaKeyValue``: None, or why ``value`` cannot be set for ``key``."""
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if not math.isfinite(value):
        return f"Quota {key} must be a finite number"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == "DOUBLE":
        return None
    top, name = _TYPE_MAX[kind]
    if value > top:
        return f"Proposed value for {key} is too large for {name}."
    if abs(math.fmod(value, 1.0)) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


def _record(entity: dict[str, str | None], order: list[str], key: str, value: float | None) -> bytes:
    return encode_metadata_record(
        CLIENT_QUOTA,
        0,
        {
            "Entity": [{"EntityType": k, "EntityName": entity[k]} for k in order],
            "Key": key,
            "Value": 0.0 if value is None else value,
            "Remove": value is None,
        },
    )


def alter_client_quotas(
    image: MetadataImage, body: t.AlterClientQuotasRequest
) -> tuple[list[bytes], list[tuple[_Entry, int, str | None]]]:
    """The ClientQuotaRecords of an AlterClientQuotas request against the committed ``image`` (none
    with ValidateOnly) and the result of each distinct entity, in the order first given:
    ``(entry, error code, message)``."""
    current: dict[Any, dict[str, float]] = image.client_quotas
    records: list[bytes] = []
    results: dict[Entity, tuple[_Entry, int, str | None]] = {}

    def refuse(entry: _Entry, message: str) -> None:
        results[entry.key] = (entry, Errors.INVALID_REQUEST, message)

    for data in body.get("Entries") or []:
        entry = _Entry(data)
        alterations: dict[str, float | None] = {}
        for key, value in entry.ops:
            if key in alterations:
                refuse(entry, f"Duplicate quota key {key} not updating quota for this entity {entry}")
            else:
                alterations[key] = value
        if entry.key in results:
            refuse(entry, f"Ignoring duplicate entity {entry}")
            continue
        keys = _check_entity(entry)
        if isinstance(keys, str):
            refuse(entry, keys)
            continue
        # the record's entity: a HashMap(3) of the validated types
        order = hash_order(list(entry.entity), 3)
        have = current.get(entry.key, {})
        mine: list[bytes] = []
        problem = None
        for key in hash_order(list(alterations), max(len(entry.ops), 1)):
            value = alterations[key]
            if value is None:
                if key in have:
                    mine.append(_record(entry.entity, order, key, None))
                continue
            problem = _check_value(keys, key, value)
            if problem is not None:
                break
            if have.get(key) != value:
                mine.append(_record(entry.entity, order, key, value))
        if problem is not None:
            refuse(entry, problem)
            continue
        records += mine
        results[entry.key] = (entry, Errors.NONE, None)
    if len(records) > MAX_RECORDS:  # (Kafka's BoundedList of a write's records, refused as its controller does)
        raise ControllerError(Errors.POLICY_VIOLATION, TOO_LARGE)
    if records and not body.get("ValidateOnly"):
        changed = [str(e) for e, code, _ in results.values() if code == Errors.NONE]
        log.info("client quotas altered: %d ClientQuotaRecord(s) for %s", len(records), ", ".join(changed))
    return ([] if body.get("ValidateOnly") else records), list(results.values())


def _entity_data(entry: _Entry) -> list[t.AlterClientQuotasResponseEntryDataEntityData]:
    return [{"EntityType": k, "EntityName": entry.entity[k]} for k in entry.order]


def alter_client_quotas_response(
    body: t.AlterClientQuotasRequest,
    results: list[tuple[_Entry, int, str | None]] | None,
    error: ControllerError | None = None,
) -> t.AlterClientQuotasResponse:
    """The AlterClientQuotasResponse: one entry per entity decided, or when the whole request failed
    (NOT_CONTROLLER, a timeout, too many records) ``error`` for every entry of the request, as Kafka's
    getErrorResponse answers: each entry's entity as given, the error's default message."""
    if results is None:
        code = error.code if error else Errors.UNKNOWN_SERVER_ERROR
        message = {int(k): v for k, v in ERROR_MESSAGES.items()}.get(code)
        failed: list[t.AlterClientQuotasResponseEntryData] = [
            {
                "ErrorCode": code,
                "ErrorMessage": message,
                "Entity": [
                    {"EntityType": e.get("EntityType") or "", "EntityName": e.get("EntityName")}
                    for e in d.get("Entity") or []
                ],
            }
            for d in body.get("Entries") or []
        ]
        return {"ThrottleTimeMs": 0, "Entries": failed}
    entries: list[t.AlterClientQuotasResponseEntryData] = [
        {"ErrorCode": code, "ErrorMessage": message, "Entity": _entity_data(entry)} for entry, code, message in results
    ]
    return {"ThrottleTimeMs": 0, "Entries": entries}
