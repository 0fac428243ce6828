"""Reads a ZooKeeper-mode Kafka cluster's metadata out of ZooKeeper into plain data.

The znodes and their JSON are those of Kafka 3.9's ``kafka.zk.ZkData``: ``/cluster/id``,
``/brokers/topics/<topic>`` (topic id and replica assignment, with adding and removing replicas),
``/brokers/topics/<topic>/partitions/<p>/state`` (leader, leader epoch, ISR, leader recovery
state; the znode's version is the partition epoch), ``/config/topics/<topic>``,
``/config/users/<user>[/clients/<client id>]``, ``/config/clients/<client id>`` and
``/config/ips/<ip>`` (client quotas; a user's ``SCRAM-SHA-256``/``-512`` entries are its SCRAM
credentials), ``/kafka-acl/<ResourceType>/<name>`` and
``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` (ACLs), ``/latest_producer_id_block``,
``/feature`` (finalized features), ``/config/brokers/<id>`` (dynamic broker configs),
``/delegation_token/tokens/<token id>`` (delegation tokens: ``DelegationTokenManagerZk``'s JSON,
without the token's HMAC, which every broker derives from ``delegation.token.secret.key``),
``/admin/delete_topics`` and
``/admin/reassign_partitions``.
Everything ZooKeeper hands over is bounded (:class:`ZkLimits`): a znode's size, the children of
one znode, the topics, the partitions and the znodes read in all; a znode past a bound, or one
whose JSON is not what Kafka writes, is an error naming the znode (:class:`ZkInputError`).

What is read but not carried yet (ACLs of an unknown pattern type, a migration in progress) is
listed in :attr:`ZkCluster.not_carried` so the converter can refuse it and say why.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from kraftkit.controller.acls import Acl
from kraftkit.errors import KraftkitError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

#: Kafka's topic name rules (``org.apache.kafka.common.internals.Topic.validate``)
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class ZkError(KraftkitError):
    """Something about the ZooKeeper input."""


class ZkConnectError(ZkError):
    """ZooKeeper cannot be reached, or its data directory holds no data (a usage error: the address,
    the ensemble, the path)."""


class ZkInputError(ZkError):
    """A znode the converter cannot take (too big, too many, not Kafka's JSON); the message
    begins with the znode's path."""


@dataclass(frozen=True)
class ZkLimits:
    """Bounds on what ZooKeeper input can make the converter do."""

    #: a znode's data, at most (ZooKeeper's own jute.maxbuffer default is 1 MiB)
    max_znode_bytes: int = 1024 * 1024
    #: the children of one znode, at most
    max_children: int = 200_000
    #: topics, at most
    max_topics: int = 100_000
    #: partitions of all topics, at most
    max_partitions: int = 2_000_000
    #: znodes read in all, at most
    max_znodes: int = 5_000_000


#: znodes read at a time by :meth:`_Reader.get_many` (pipelined when the source can): a bound on
#: the requests in flight and on what is held before it is parsed
READ_WINDOW = 1000


class ZkSource(Protocol):
    """What the reader needs of ZooKeeper: a znode's data and version, a znode's children."""

    def get(self, path: str) -> tuple[bytes, int] | None:
        """(data, stat version) of ``path``, or None when there is no such znode."""

    def children(self, path: str) -> list[str] | None:
        """The names of ``path``'s children, or None when there is no such znode."""


@dataclass
class PartitionState:
    """``/brokers/topics/<t>/partitions/<p>/state``."""

    leader: int
    leader_epoch: int
    isr: list[int]
    leader_recovery_state: int
    #: the state znode's version (Kafka's partition epoch in ZooKeeper mode)
    partition_epoch: int


@dataclass
class ZkPartition:
    replicas: list[int]
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)
    #: None: the state znode is missing (Kafka's migration then takes the replicas as ISR)
    state: PartitionState | None = None


@dataclass
class ZkTopic:
    name: str
    topic_id: uuid.UUID | None
    partitions: dict[int, ZkPartition]
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class ProducerIdBlock:
    """``/latest_producer_id_block``: the last block handed out."""

    broker: int
    block_start: int
    block_end: int

    @property
    def next_producer_id(self) -> int:
        """``ProducerIdsBlock.nextBlockFirstId``: the first id after the block."""
        return self.block_end + 1


#: ScramMechanism: name -> type (``org.apache.kafka.common.security.scram.internals.ScramMechanism``)
SCRAM_MECHANISMS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
#: ``ZooKeeperInternals.DEFAULT_STRING``: the znode of a default quota entity
DEFAULT_ENTITY = "<default>"


@dataclass
class ClientQuota:
    """One quota entity's values (``ClientQuotaRecord``s): the entity as (type, name) pairs, a
    default entity's name None."""

    entity: tuple[tuple[str, str | None], ...]
    values: dict[str, float]
    znode: str


@dataclass
class ScramCredential:
    """A user's SCRAM credential (``UserScramCredentialRecord``)."""

    user: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
    znode: str


@dataclass
class DelegationToken:
    """``/delegation_token/tokens/<token id>`` (``DelegationTokenManagerZk.fromBytes``), as a
    ``DelegationTokenRecord``'s fields: the principals as ``KafkaPrincipal.toString`` gives them
    (``User:alice``, desanitized). No HMAC: ZooKeeper never held it."""

    token_id: str
    owner: str
    requester: str
    renewers: list[str]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int
    znode: str


@dataclass
class ZkCluster:
    cluster_id: str
    topics: dict[str, ZkTopic]
    producer_id_block: ProducerIdBlock | None = None
    client_quotas: list[ClientQuota] = field(default_factory=list)
    scram: list[ScramCredential] = field(default_factory=list)
    acls: list[Acl] = field(default_factory=list)
    #: dynamic broker configs: ``/config/brokers/<id>`` by broker id, ``<default>``'s under ""
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    #: delegation tokens, by token id
    delegation_tokens: list[DelegationToken] = field(default_factory=list)
    #: ``/feature``'s finalized features (when its status is enabled): name -> level
    finalized_features: dict[str, int] = field(default_factory=dict)
    #: topics queued for deletion (``/admin/delete_topics``)
    pending_deletions: list[str] = field(default_factory=list)
    #: partitions being reassigned: ``/admin/reassign_partitions`` or adding/removing replicas
    reassigning: list[str] = field(default_factory=list)
    #: what ZooKeeper holds that this converter does not carry yet: (znode, what)
    not_carried: list[tuple[str, str]] = field(default_factory=list)
    #: topic config znodes of topics that do not exist (Kafka ignores them too)
    orphan_configs: list[str] = field(default_factory=list)
    znodes_read: int = 0

    @property
    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics.values())


# ------------------------------------------------------------------ JSON checks


def _json(path: str, data: bytes) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ZkInputError(f"{path}: not UTF-8 text (byte {e.start})") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError as e:
        raise ZkInputError(f"{path}: not JSON: {e}") from None
    except RecursionError:
        raise ZkInputError(f"{path}: not JSON: nested too deeply") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _obj(path: str, v: Any, what: str = "the znode") -> dict[str, Any]:
    if not isinstance(v, dict):
        raise ZkInputError(f"{path}: {what} is not a JSON object")
    return v


def _int(path: str, v: Any, what: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ZkInputError(f"{path}: {what} is not a whole number: {_short(v)}")
    if not lo <= v <= hi:
        raise ZkInputError(f"{path}: {what} is out of range ({lo} to {hi}): {v}")
    return v


def _ids(path: str, v: Any, what: str) -> list[int]:
    if not isinstance(v, list):
        raise ZkInputError(f"{path}: {what} is not a list of broker ids: {_short(v)}")
    out = [_int(path, x, f"{what} entry", 0, INT32_MAX) for x in v]
    if len(set(out)) != len(out):
        raise ZkInputError(f"{path}: {what} names a broker twice: {out}")
    return out


def _short(v: Any) -> str:
    text = json.dumps(v)
    return text if len(text) <= 60 else text[:50] + f"... ({len(text)} characters)"


# ------------------------------------------------------------------ the reader


class _Reader:
    def __init__(self, source: ZkSource, limits: ZkLimits) -> None:
        self.source = source
        self.limits = limits
        self.read = 0

    def _count(self, path: str) -> None:
        self.read += 1
        if self.read > self.limits.max_znodes:
            raise ZkInputError(f"{path}: more than {self.limits.max_znodes} znodes to read (the bound)")

    def get(self, path: str) -> tuple[bytes, int] | None:
        self._count(path)
        got = self.source.get(path)
        if got is not None and len(got[0]) > self.limits.max_znode_bytes:
            raise ZkInputError(f"{path}: {len(got[0])} bytes, more than {self.limits.max_znode_bytes} (the bound)")
        return got

    def get_many(self, paths: list[str]) -> Iterator[tuple[str, tuple[bytes, int] | None]]:
        """``(path, get(path))`` for each of ``paths``, in order: read ``READ_WINDOW`` at a time,
        pipelined when the source can (``get_many``: one round trip's wait for the window instead
        of one per znode), one by one otherwise. Bounded as :meth:`get`."""
        many = getattr(self.source, "get_many", None)
        for i in range(0, len(paths), READ_WINDOW):
            window = paths[i : i + READ_WINDOW]
            for path in window:
                self._count(path)
            got = many(window) if many is not None else [self.source.get(path) for path in window]
            for path, one in zip(window, got, strict=True):
                if one is not None and len(one[0]) > self.limits.max_znode_bytes:
                    raise ZkInputError(
                        f"{path}: {len(one[0])} bytes, more than {self.limits.max_znode_bytes} (the bound)"
                    )
                yield path, one

    def json(self, path: str) -> tuple[Any, int] | None:
        got = self.get(path)
        if got is None:
            return None
        return _json(path, got[0]), got[1]

    def children(self, path: str) -> list[str]:
        self._count(path)
        kids = self.source.children(path)
        if kids is None:
            return []
        if len(kids) > self.limits.max_children:
            raise ZkInputError(f"{path}: {len(kids)} children, more than {self.limits.max_children} (the bound)")
        return sorted(kids)


def read_cluster(source: ZkSource, limits: ZkLimits | None = None) -> ZkCluster:
    """Reads what the converter carries (and notes what it does not) from ``source``."""
    r = _Reader(source, limits or ZkLimits())
    cluster_id = _cluster_id(r)
    names = r.children("/brokers/topics")
    if len(names) > r.limits.max_topics:
        raise ZkInputError(f"/brokers/topics: {len(names)} topics, more than {r.limits.max_topics} (the bound)")
    deletions = r.children("/admin/delete_topics")
    topics: dict[str, ZkTopic] = {}
    partitions = 0
    reassigning: list[str] = []
    for name in names:
        path = f"/brokers/topics/{name}"
        if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
            raise ZkInputError(f"{path}: not a legal Kafka topic name")
    for path, got in r.get_many([f"/brokers/topics/{name}" for name in names]):
        name = path.rsplit("/", 1)[1]
        topic = _topic(path, name, got)
        if topic is None:
            continue  # deleted while we listed (the cluster should be stopped)
        partitions += len(topic.partitions)
        if partitions > r.limits.max_partitions:
            raise ZkInputError(f"{path}: more than {r.limits.max_partitions} partitions in all (the bound)")
        for p, part in sorted(topic.partitions.items()):
            if part.adding or part.removing:
                reassigning.append(f"{name}-{p}")
        topics[name] = topic
    states = [(t, p) for t in topics.values() for p in sorted(t.partitions)]
    for (t, p), (path, got) in zip(states, r.get_many([_state_path(t.name, p) for t, p in states]), strict=True):
        t.partitions[p].state = _state(path, got)
    orphans = []
    configs = []
    for name in r.children("/config/topics"):
        path = f"/config/topics/{name}"
        if name not in topics:
            orphans.append(path)
        else:
            configs.append(path)
    for path, got in r.get_many(configs):
        topics[path.rsplit("/", 1)[1]].configs = _configs_of(path, got)
    if r.get("/admin/reassign_partitions") is not None:
        reassigning.insert(0, "/admin/reassign_partitions")
    cluster = ZkCluster(
        cluster_id,
        topics,
        _producer_ids(r),
        pending_deletions=deletions,
        reassigning=reassigning,
        orphan_configs=orphans,
    )
    _quotas_and_scram(r, cluster)
    cluster.acls = _acls(r)
    cluster.finalized_features = _features(r)
    cluster.broker_configs = _broker_configs(r)
    cluster.delegation_tokens = _delegation_tokens(r)
    cluster.not_carried = _not_carried(r)
    cluster.znodes_read = r.read
    return cluster


def read_cluster_id(source: ZkSource, limits: ZkLimits | None = None) -> str:
    """The cluster id of ``/cluster/id`` (what the KRaft controllers of a migration are formatted with)."""
    return _cluster_id(_Reader(source, limits or ZkLimits()))


def _cluster_id(r: _Reader) -> str:
    path = "/cluster/id"
    got = r.json(path)
    if got is None:
        raise ZkConnectError(f"{path}: no such znode (is this the ZooKeeper, and chroot, of a Kafka cluster?)")
    cid = _obj(path, got[0]).get("id")
    if not isinstance(cid, str):
        raise ZkInputError(f"{path}: no cluster id string in it")
    from kraftkit.features.storage.uuids import validate_cluster_id

    try:
        return validate_cluster_id(cid)
    except (KraftkitError, ValueError) as e:
        raise ZkInputError(f"{path}: {e}") from None


def _topic(path: str, name: str, got: tuple[bytes, int] | None) -> ZkTopic | None:
    """``/brokers/topics/<name>`` as read (None: no such znode)."""
    if got is None:
        return None
    js = _obj(path, _json(path, got[0]))
    tid: uuid.UUID | None = None
    if "topic_id" in js:
        raw = js["topic_id"]
        tid = _topic_id(path, raw)
    parts_js = _obj(path, js.get("partitions", {}), "partitions")
    adding = _obj(path, js.get("adding_replicas") or {}, "adding_replicas")
    removing = _obj(path, js.get("removing_replicas") or {}, "removing_replicas")
    parts: dict[int, ZkPartition] = {}
    for key, reps in parts_js.items():
        if not re.fullmatch(r"0|[1-9][0-9]{0,9}", key) or int(key) > INT32_MAX:
            raise ZkInputError(f"{path}: partition {key!r} is not a partition number")
        p = int(key)
        replicas = _ids(path, reps, f"partition {p}'s replicas")
        if not replicas:
            raise ZkInputError(f"{path}: partition {p} has no replicas")
        parts[p] = ZkPartition(
            replicas,
            _ids(path, adding.get(key, []), f"partition {p}'s adding_replicas"),
            _ids(path, removing.get(key, []), f"partition {p}'s removing_replicas"),
        )
    if sorted(parts) != list(range(len(parts))):
        raise ZkInputError(f"{path}: partitions are not numbered 0 to {len(parts) - 1}: {sorted(parts)[:10]}")
    return ZkTopic(name, tid, parts)


def _topic_id(path: str, raw: Any) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``: 22 characters of URL-safe base64 without padding."""
    import base64

    if not isinstance(raw, str) or not re.fullmatch(r"[A-Za-z0-9_-]{22}", raw):
        raise ZkInputError(f"{path}: topic_id is not a Kafka Uuid: {_short(raw)}")
    u = uuid.UUID(bytes=base64.urlsafe_b64decode(raw + "=="))
    if u.int == 0 or u.int == 1:  # Uuid.ZERO_UUID and Uuid.METADATA_TOPIC_ID are reserved
        raise ZkInputError(f"{path}: topic_id {raw} is reserved")
    return u


def _state_path(topic: str, p: int) -> str:
    return f"/brokers/topics/{topic}/partitions/{p}/state"


def _state(path: str, got: tuple[bytes, int] | None) -> PartitionState | None:
    """A partition's ``.../state`` znode as read (None: no such znode)."""
    if got is None:
        return None
    js = _obj(path, _json(path, got[0]))
    for key in ("leader", "leader_epoch", "isr"):
        if key not in js:
            raise ZkInputError(f"{path}: no {key!r} in it")
    lrs = _int(path, js.get("leader_recovery_state", 0), "leader_recovery_state", 0, 1)
    return PartitionState(
        _int(path, js["leader"], "leader", -1),
        _int(path, js["leader_epoch"], "leader_epoch", 0),
        _ids(path, js["isr"], "isr"),
        lrs,
        got[1],
    )


def _entity_configs(r: _Reader, path: str) -> dict[str, str]:
    """A config znode's configs; an empty znode has none (Kafka creates a user's znode empty when
    only its client ids have quotas, and ``ConfigEntityZNode.decode`` reads empty data as none)."""
    return _configs_of(path, r.get(path))


def _configs_of(path: str, got: tuple[bytes, int] | None) -> dict[str, str]:
    if got is None or not got[0]:
        return {}
    return _configs(path, _json(path, got[0]))


def _configs(path: str, js: Any) -> dict[str, str]:
    """``ConfigEntityZNode.decode``: ``{"version":1,"config":{name: value}}``, values strings."""
    cfg = _obj(path, js).get("config", {})
    cfg = _obj(path, cfg, "config")
    out = {}
    for k, v in cfg.items():
        if not isinstance(v, str):
            raise ZkInputError(f"{path}: config {k!r} is not a string: {_short(v)}")
        out[k] = v
    return out


def _producer_ids(r: _Reader) -> ProducerIdBlock | None:
    path = "/latest_producer_id_block"
    got = r.get(path)
    if got is None or not got[0]:
        return None  # Kafka creates the znode empty
    js = _obj(path, _json(path, got[0]))
    try:
        # (-1: the block a KRaft controller wrote during a migration, ``KRaftMigrationZkWriter``)
        broker = _int(path, js["broker"], "broker", -1)
        start, end = int(js["block_start"]), int(js["block_end"])
    except KeyError as e:
        raise ZkInputError(f"{path}: no {e.args[0]!r} in it") from None
    except (TypeError, ValueError):
        raise ZkInputError(f"{path}: block_start and block_end are not numbers") from None
    if not 0 <= start <= end < 2**63 - 1:
        raise ZkInputError(f"{path}: the block {start}..{end} is not a range of producer ids")
    return ProducerIdBlock(broker, start, end)


def desanitize(path: str, name: str) -> str:
    """``Sanitizer.desanitize`` (Java's ``URLDecoder.decode``, UTF-8): ``+`` is a space, ``%XX``
    a byte. A malformed escape is refused, as Java refuses it; bytes that are not UTF-8 are refused
    too (Java would put U+FFFD in their place, a name nobody wrote)."""
    if re.search(r"%(?![0-9A-Fa-f]{2})", name):
        raise ZkInputError(f"{path}: {name!r} is not a sanitized name (a malformed %-escape)")
    from urllib.parse import unquote_to_bytes

    try:
        return unquote_to_bytes(name.replace("+", " ")).decode("utf-8")
    except UnicodeDecodeError:
        raise ZkInputError(f"{path}: {name!r} does not decode to UTF-8 text") from None


#: Java's ``Double.valueOf`` for decimal text (hexadecimal floats are refused)
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?)")


def _quota_value(path: str, key: str, text: str) -> float:
    t = text.strip(" \t\n\r\x0b\x0c\x00")  # String.trim: every char <= ' '
    if not _JAVA_DOUBLE.fullmatch(t) or len(t) > 400:
        raise ZkInputError(f"{path}: quota {key!r} is not a number: {_short(text)}")
    t = t.rstrip("fFdD") if t[-1:] in "fFdD" and not t.endswith("Infinity") else t
    return float(t.replace("Infinity", "inf"))


def _scram(path: str, user: str, mechanism: str, text: str) -> ScramCredential:
    """``ScramCredentialUtils.credentialFromString``: ``salt=..,stored_key=..,server_key=..,iterations=N``."""
    import base64
    import binascii

    props: dict[str, str] = {}
    for token in text.split(","):
        i = token.find("=")
        if i <= 0:
            raise ZkInputError(f"{path}: {mechanism} is not a SCRAM credential")
        props[token[:i]] = token[i + 1 :]
    if sorted(props) != ["iterations", "salt", "server_key", "stored_key"]:
        raise ZkInputError(f"{path}: {mechanism} is not a SCRAM credential (fields {sorted(props)})")
    try:
        raw = {k: base64.b64decode(props[k], validate=True) for k in ("salt", "stored_key", "server_key")}
    except (binascii.Error, ValueError):
        raise ZkInputError(f"{path}: {mechanism}: salt, stored_key or server_key is not base64") from None
    if not re.fullmatch(r"[+-]?[0-9]{1,10}", props["iterations"]):
        raise ZkInputError(f"{path}: {mechanism}: iterations is not a whole number")
    iterations = _int(path, int(props["iterations"]), f"{mechanism} iterations")
    return ScramCredential(
        user, SCRAM_MECHANISMS[mechanism], raw["salt"], raw["stored_key"], raw["server_key"], iterations, path
    )


def _entity_name(path: str, znode_name: str) -> str | None:
    return None if znode_name == DEFAULT_ENTITY else desanitize(path, znode_name)


def _quotas_and_scram(r: _Reader, cluster: ZkCluster) -> None:
    """``ZkConfigMigrationClient.iterateClientQuotas``: users (their SCRAM mechanisms are credentials,
    the rest quotas), client ids, users' client ids, IPs."""

    for ztype, etype in (("users", "user"), ("clients", "client-id"), ("ips", "ip")):
        for name in r.children(f"/config/{ztype}"):
            path = f"/config/{ztype}/{name}"
            props = _entity_configs(r, path)
            for mech in SCRAM_MECHANISMS:
                if mech in props:
                    if ztype != "users":
                        raise ZkInputError(f"{path}: a SCRAM credential outside /config/users")
                    cluster.scram.append(_scram(path, desanitize(path, name), mech, props.pop(mech)))
            values = {k: _quota_value(path, k, v) for k, v in sorted(props.items())}
            if values:
                cluster.client_quotas.append(ClientQuota(((etype, _entity_name(path, name)),), values, path))
            if ztype == "users":
                for kid in r.children(f"{path}/clients"):
                    cpath = f"{path}/clients/{kid}"
                    cprops = _entity_configs(r, cpath)
                    cvalues = {k: _quota_value(cpath, k, v) for k, v in sorted(cprops.items())}
                    if cvalues:
                        entity = (("user", _entity_name(path, name)), ("client-id", _entity_name(cpath, kid)))
                        cluster.client_quotas.append(ClientQuota(entity, cvalues, cpath))


def _pascal(name: str) -> str:
    """``SecurityUtils.toPascalCase``: ``TRANSACTIONAL_ID`` -> ``TransactionalId``."""
    return "".join(part[:1] + part[1:].lower() for part in name.split("_"))


def _names(codes: dict[int, str]) -> dict[str, int]:
    """``SecurityUtils``'s lookup: the Pascal-case name, or it upper-cased (``valueFromMap``)."""
    out = {}
    for code, name in codes.items():
        out[_pascal(name)] = code
        out[_pascal(name).upper()] = code
    return out


def _code(path: str, table: dict[str, int], name: Any, what: str) -> int:
    """A concrete enum value by name; UNKNOWN (an unknown name) and ANY refused, naming the znode."""
    code = None
    if isinstance(name, str):
        code = table.get(name)
        if code is None and name.isascii():
            code = table.get(name.upper())
    if code is None or code in (0, 1):
        raise ZkInputError(f"{path}: {_short(name)} is not {what}")
    return code


#: the codes of Kafka's enums (``ResourceType``, ``AclOperation``, ``AclPermissionType``)
_RESOURCE_TYPES = _names({0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                          6: "DELEGATION_TOKEN", 7: "USER"})  # fmt: skip
_OPERATIONS = _names({0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER",
                      8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
                      12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS",
                      15: "TWO_PHASE_COMMIT"})  # fmt: skip
_PERMISSIONS = _names({0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"})
#: ``PatternType``: where ``ZkAclStore`` keeps each specific pattern type
_ACL_STORES = (("/kafka-acl", 3), ("/kafka-acl-extended/prefixed", 4))


def _acls(r: _Reader) -> list[Acl]:
    """``AclAuthorizer.loadAllAcls``: ``<store>/<ResourceType>/<resource name>`` holding
    ``AclEntry`` JSON (``{"version": 1, "acls": [{principal, permissionType, operation, host}]}``);
    an empty znode holds none; the same ACL twice is one (a set)."""
    out: list[Acl] = []
    seen: set[Acl] = set()
    for store, pattern in _ACL_STORES:
        for rtype in r.children(store):
            tpath = f"{store}/{rtype}"
            code = _code(tpath, _RESOURCE_TYPES, rtype, "a resource type")
            for name in r.children(tpath):
                path = f"{tpath}/{name}"
                got = r.get(path)
                if got is None or not got[0]:
                    continue
                js = _obj(path, _json(path, got[0]))
                if js.get("version") != 1:
                    raise ZkInputError(f"{path}: ACL version {_short(js.get('version'))}, not 1")
                entries = js.get("acls")
                if not isinstance(entries, list):
                    raise ZkInputError(f"{path}: acls is not a list")
                for e in entries:
                    e = _obj(path, e, "an ACL")
                    principal, host = e.get("principal"), e.get("host")
                    if not isinstance(principal, str) or ":" not in principal or principal.startswith(":"):
                        raise ZkInputError(f"{path}: principal {_short(principal)} is not TYPE:NAME")
                    if not isinstance(host, str):
                        raise ZkInputError(f"{path}: host {_short(host)} is not a string")
                    acl = Acl(
                        code,
                        name,
                        pattern,
                        principal,
                        host,
                        _code(path, _OPERATIONS, e.get("operation"), "an ACL operation"),
                        _code(path, _PERMISSIONS, e.get("permissionType"), "an ACL permission type"),
                    )
                    if acl not in seen:
                        seen.add(acl)
                        out.append(acl)
    return out


def _features(r: _Reader) -> dict[str, int]:
    """``FeatureZNode.decode``: ``{"version": 1|2, "status": 0|1, "features": {name: {"max_version_level":
    N[, "min_version_level": M]}}}``; the finalized level is the max. Disabled (status 0): none."""
    path = "/feature"
    got = r.get(path)
    if got is None or not got[0]:
        return {}
    js = _obj(path, _json(path, got[0]))
    version = _int(path, js.get("version"), "version")
    if version not in (1, 2):
        raise ZkInputError(f"{path}: unsupported version {version} (Kafka writes 1 or 2)")
    status = js.get("status")
    if status not in (0, 1) or isinstance(status, bool):
        raise ZkInputError(f"{path}: status {_short(status)} is not 0 (disabled) or 1 (enabled)")
    feats = _obj(path, js.get("features"), "features")
    out: dict[str, int] = {}
    for name, info in feats.items():
        info = _obj(path, info, f"feature {name!r}")
        if "max_version_level" not in info:
            raise ZkInputError(f"{path}: feature {name!r} has no max_version_level")
        level = _int(path, info["max_version_level"], f"feature {name!r}'s max_version_level", 1, 2**15 - 1)
        if version == 1:
            _int(path, info.get("min_version_level"), f"feature {name!r}'s min_version_level", 1, level)
        out[name] = level
    return out if status == 1 else {}


def _broker_configs(r: _Reader) -> dict[str, dict[str, str]]:
    """``ZkConfigMigrationClient.iterateBrokerConfigs``: ``/config/brokers/<id>`` (a broker id) and
    ``/config/brokers/<default>`` (the cluster default, "" in KRaft)."""
    out: dict[str, dict[str, str]] = {}
    for name in r.children("/config/brokers"):
        path = f"/config/brokers/{name}"
        if name == DEFAULT_ENTITY:
            key = ""
        elif re.fullmatch(r"0|[1-9][0-9]{0,9}", name) and int(name) <= INT32_MAX:
            key = name
        else:
            raise ZkInputError(f"{path}: {name!r} is neither a broker id nor {DEFAULT_ENTITY}")
        configs = _entity_configs(r, path)
        if configs:
            out[key] = configs
    return out


#: ``DelegationTokenManagerZk.CurrentVersion``
TOKEN_ZNODE_VERSION = 3
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _principal(path: str, v: Any, what: str) -> str:
    """``SecurityUtils.parseKafkaPrincipal(Sanitizer.desanitize(v))``, kept as its text
    (``KafkaPrincipal.toString`` of the result is that text again)."""
    if not isinstance(v, str):
        raise ZkInputError(f"{path}: {what} is not a string: {_short(v)}")
    text = desanitize(path, v)
    if ":" not in text:
        raise ZkInputError(f"{path}: {what} {_short(text)} is not a principal (TYPE:NAME)")
    return text


def _delegation_tokens(r: _Reader) -> list[DelegationToken]:
    """``ZkMigrationClient.migrateDelegationTokens``: each ``/delegation_token/tokens/<id>`` as
    ``DelegationTokenManagerZk.fromBytes`` reads it (``{"version": 1..3, "owner", "tokenRequester"
    (version 3; before, the owner), "renewers", "issueTimestamp", "maxTimestamp", "expiryTimestamp",
    "tokenId"}``, principals sanitized); an empty znode holds none."""
    out = []
    for name in r.children("/delegation_token/tokens"):
        path = f"/delegation_token/tokens/{name}"
        got = r.get(path)
        if got is None or not got[0]:
            continue
        js = _obj(path, _json(path, got[0]))
        version = _int(path, js.get("version"), "version")
        if not 0 < version <= TOKEN_ZNODE_VERSION:
            raise ZkInputError(f"{path}: version {version}, not 1 to {TOKEN_ZNODE_VERSION}")
        for key in ("owner", "renewers", "issueTimestamp", "maxTimestamp", "expiryTimestamp", "tokenId"):
            if key not in js:
                raise ZkInputError(f"{path}: no {key!r} in it")
        owner = _principal(path, js["owner"], "owner")
        if version >= 3:
            if "tokenRequester" not in js:
                raise ZkInputError(f"{path}: no 'tokenRequester' in it (version {version})")
            requester = _principal(path, js["tokenRequester"], "tokenRequester")
        else:
            requester = owner
        renewers = js["renewers"]
        if not isinstance(renewers, list):
            raise ZkInputError(f"{path}: renewers is not a list: {_short(renewers)}")
        token_id = js["tokenId"]
        if not isinstance(token_id, str):
            raise ZkInputError(f"{path}: tokenId is not a string: {_short(token_id)}")
        if token_id != name:
            raise ZkInputError(f"{path}: tokenId {_short(token_id)} is not the znode's name")
        out.append(
            DelegationToken(
                token_id,
                owner,
                requester,
                [_principal(path, x, "a renewer") for x in renewers],
                _int(path, js["issueTimestamp"], "issueTimestamp", INT64_MIN, INT64_MAX),
                _int(path, js["maxTimestamp"], "maxTimestamp", INT64_MIN, INT64_MAX),
                _int(path, js["expiryTimestamp"], "expiryTimestamp", INT64_MIN, INT64_MAX),
                path,
            )
        )
    return out


def _not_carried(r: _Reader) -> list[tuple[str, str]]:
    out = []
    for kid in r.children("/kafka-acl-extended"):
        if kid != "prefixed":
            out.append((f"/kafka-acl-extended/{kid}", "ACLs of a pattern type Kafka does not store"))
    if r.get("/migration") is not None:
        out.append(("/migration", "a ZooKeeper-to-KRaft migration already begun"))
    return out


# ------------------------------------------------------------------ sources


class DictSource:
    """ZooKeeper as a dict (path -> data, or (data, version)): for tests and for input read
    elsewhere. Parents are implied by their children."""

    def __init__(self, nodes: dict[str, bytes | tuple[bytes, int]]) -> None:
        self.nodes = {p: (v if isinstance(v, tuple) else (v, 0)) for p, v in nodes.items()}

    def get(self, path: str) -> tuple[bytes, int] | None:
        return self.nodes.get(path)

    def children(self, path: str) -> list[str] | None:
        prefix = path.rstrip("/") + "/"
        kids = {p[len(prefix) :].split("/", 1)[0] for p in self.nodes if p.startswith(prefix)}
        if not kids and path not in self.nodes:
            return None
        return sorted(kids)

    def close(self) -> None:
        pass


class KazooSource:
    """A running ZooKeeper through kazoo (the ``zookeeper`` extra): ``HOST:PORT[,HOST:PORT...][/chroot]``."""

    def __init__(
        self, connect: str, timeout: float = 15.0, *, read_only: bool = True, session_timeout: float | None = None
    ) -> None:
        """``timeout`` bounds the connection; ``session_timeout`` is the session's (default ``timeout``)."""
        try:
            from kazoo.client import KazooClient
            from kazoo.handlers.threading import KazooTimeoutError
        except ImportError:
            raise ZkConnectError("reading ZooKeeper needs kazoo: pip install 'kraftkit[zookeeper]'") from None
        import logging

        logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # the errors are ours to say
        self.connect = connect
        self._reads: PipelinedReads | None = None
        self._reads_failed = False
        self.client = KazooClient(
            hosts=connect, timeout=timeout if session_timeout is None else session_timeout, read_only=read_only
        )
        try:
            self.client.start(timeout=timeout)
        except KazooTimeoutError:
            self.client.close()
            raise ZkConnectError(f"{connect}: no ZooKeeper answered within {timeout:g} s") from None
        except ValueError as e:
            self.client.close()
            raise ZkConnectError(f"{connect}: {e}") from None

    def get(self, path: str) -> tuple[bytes, int] | None:
        from kazoo.exceptions import NoNodeError

        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            return None
        return (data or b""), stat.version

    def get_many(self, paths: list[str]) -> list[tuple[bytes, int] | None]:
        """:meth:`get` of each of ``paths``, pipelined: every request sent before the first
        answer is awaited (ZooKeeper answers a session's requests in order). Through a reading
        session of this module's own (:class:`PipelinedReads`: kazoo hands each request to its
        I/O thread one at a time, ~0.4 ms a znode on a busy machine), else through kazoo."""
        if self._reads is not None and time.monotonic() - self._reads.last_used > self._reads.timeout / 3:
            # (idle for long: ZooKeeper may expire it before these reads end; a new one instead)
            self._reads.close()
            self._reads = None
        if self._reads is None and not self._reads_failed:
            self._reads = PipelinedReads.open(self.connect, self.client.last_zxid)
            self._reads_failed = self._reads is None  # (no server takes it: kazoo reads from then on)
        if self._reads is not None:
            try:
                return self._reads.get_many(paths)
            except (OSError, ZkPipelineError):
                # (its session expired while idle, or its server went: kazoo reads these, a new one the next)
                self._reads.close()
                self._reads = None
        from kazoo.exceptions import NoNodeError

        pending = [self.client.get_async(path) for path in paths]
        out: list[tuple[bytes, int] | None] = []
        for one in pending:
            try:
                data, stat = one.get()
            except NoNodeError:
                out.append(None)
                continue
            out.append(((data or b""), stat.version))
        return out

    def children(self, path: str) -> list[str] | None:
        from kazoo.exceptions import NoNodeError

        try:
            return list(self.client.get_children(path))
        except NoNodeError:
            return None

    def close(self) -> None:
        if self._reads is not None:
            self._reads.close()
            self._reads = None
        try:
            self.client.stop()
        finally:
            self.client.close()


# ------------------------------------------------------------------ pipelined reads


class ZkPipelineError(ZkError):
    """The reading session broke or ZooKeeper answered what it should not (the reads then go through kazoo)."""


_GET_DATA, _CLOSE_SESSION, _NO_NODE = 4, -11, -101
#: Stat: czxid, mzxid, ctime, mtime (longs), version, cversion, aversion (ints), ephemeralOwner (long),
#: dataLength, numChildren (ints), pzxid (long)
_STAT = struct.Struct(">qqqqiiiqiiq")


class PipelinedReads:
    """A ZooKeeper session of its own on one socket, for reading many znodes at once: every
    ``getData`` request of a window is written before the answers are read (ZooKeeper answers a
    session's requests in order, each with its request's xid), with no thread in between. It
    connects with the kazoo session's last zxid, so a server that has not seen what that session
    saw refuses it (ZooKeeper's own rule) and the next server of the connect string is tried.
    Jute encoding as ZooKeeper's ``ConnectRequest``, ``RequestHeader``, ``GetDataRequest``,
    ``ReplyHeader``, ``GetDataResponse`` and ``Stat`` define it."""

    def __init__(self, sock: socket.socket, chroot: str, timeout: float) -> None:
        self.sock = sock
        self.chroot = chroot
        #: the session timeout asked for (s)
        self.timeout = timeout
        self.last_used = time.monotonic()
        self.xid = 0
        self.buf = bytearray()

    @classmethod
    def open(cls, connect: str, last_zxid: int, timeout: float = 15.0) -> PipelinedReads | None:
        """A session on the first server of ``connect`` that takes it; None when none does."""
        try:
            from kazoo.hosts import collect_hosts

            hosts, chroot = collect_hosts(connect)
        except Exception:
            return None
        for host, port in hosts:
            try:
                sock = socket.create_connection((host, port), timeout=timeout)
            except OSError:
                continue
            reads = cls(sock, (chroot or "").rstrip("/"), timeout)
            try:
                passwd = bytes(16)
                body = struct.pack(">iqiqi", 0, last_zxid, int(timeout * 1000), 0, len(passwd)) + passwd + b"\x00"
                sock.sendall(struct.pack(">i", len(body)) + body)
                frame = reads._frame()
                if len(frame) < 20 or struct.unpack_from(">q", frame, 8)[0] == 0:
                    raise ZkPipelineError("the server refused the session")
                return reads
            except (OSError, ZkPipelineError, struct.error):
                reads.close()
        return None

    def _frame(self) -> bytes:
        while True:
            if len(self.buf) >= 4:
                n = struct.unpack_from(">i", self.buf)[0]
                if n < 0 or n > 16 * 1024 * 1024:
                    raise ZkPipelineError(f"a reply of {n} bytes")
                if len(self.buf) >= 4 + n:
                    frame = bytes(self.buf[4 : 4 + n])
                    del self.buf[: 4 + n]
                    return frame
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ZkPipelineError("the server closed the session")
            self.buf += chunk

    def get_many(self, paths: list[str]) -> list[tuple[bytes, int] | None]:
        self.last_used = time.monotonic()
        first = self.xid + 1
        out_frames = []
        for path in paths:
            self.xid += 1
            raw = (self.chroot + path if path != "/" or not self.chroot else self.chroot).encode()
            body = struct.pack(">iii", self.xid, _GET_DATA, len(raw)) + raw + b"\x00"
            out_frames.append(struct.pack(">i", len(body)) + body)
        # (the requests are written by a thread of their own, so that answers that fill this
        # socket's receive buffer cannot stop the writing: both are read and written at once)
        data = b"".join(out_frames)
        failed: list[BaseException] = []

        def write() -> None:
            try:
                self.sock.sendall(data)
            except OSError as e:
                failed.append(e)

        writer = threading.Thread(target=write, name="zk-pipelined-reads", daemon=True)
        writer.start()
        out: list[tuple[bytes, int] | None] = []
        ok = False
        try:
            for i, path in enumerate(paths):
                frame = self._frame()
                xid, _zxid, err = struct.unpack_from(">iqi", frame)
                if xid != first + i:
                    raise ZkPipelineError(f"{path}: the answer of request {xid}, not {first + i}")
                if err == _NO_NODE:
                    out.append(None)
                    continue
                if err != 0:
                    raise ZkPipelineError(f"{path}: ZooKeeper error {err}")
                (n,) = struct.unpack_from(">i", frame, 16)
                value = b"" if n < 0 else frame[20 : 20 + n]
                stat = _STAT.unpack_from(frame, 20 + max(n, 0))
                out.append((value, stat[4]))
            ok = True
        except struct.error as e:
            raise ZkPipelineError(f"an answer cut short: {e}") from None
        finally:
            if not ok:  # (a writer blocked on a server that stopped reading is released)
                try:
                    self.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # (already closed by the peer)
            writer.join()
        if failed:
            raise ZkPipelineError(f"writing the requests: {failed[0]}")
        return out

    def close(self) -> None:
        try:
            self.xid += 1
            self.sock.sendall(struct.pack(">iii", 8, self.xid, _CLOSE_SESSION))
        except OSError:
            pass
        finally:
            self.sock.close()
