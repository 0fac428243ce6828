"""Dual writes of the live migration (KIP-866): the KRaft metadata written back to ZooKeeper in
ZooKeeper's own formats while the migration is in state MIGRATION, as Kafka 3.9's
``KRaftMigrationZkWriter`` and its ZooKeeper clients (``ZkTopicMigrationClient``,
``ZkConfigMigrationClient``, ``ZkMigrationClient.writeProducerId``) write it.

Both sides are reduced to one comparable form, a :class:`ZkView` (what ZooKeeper should hold):
:func:`image_view` of the KRaft image, :func:`cluster_view` of what
:func:`~kraftkit.migration.zk_reader.read_cluster` read from ZooKeeper. :func:`changes` turns the
difference of two views into ZooKeeper writes, in Kafka's order (topics deleted, topics created,
topic assignments changed, partitions created and changed, configs, client quotas and SCRAM
credentials, ACLs, the producer id block, delegation tokens). The
driver uses it two ways, as Kafka does: a *sync* (ZooKeeper read and compared with the image: on
taking over and after any failed write) and *deltas* (the view last written compared with the
image's now, after each commit).

What is written:

* a topic created: ``/brokers/topics/<t>`` (``{"version":3,"topic_id":..,"partitions":{..},
  "adding_replicas":{..},"removing_replicas":{..}}``), an empty ``/config/topics/<t>``,
  ``/brokers/topics/<t>/partitions``, and for each partition ``.../partitions/<p>`` and its
  ``.../state`` (``{"controller_epoch":E,"leader":..,"version":1,"leader_epoch":..,"isr":[..]}``,
  ``leader_recovery_state`` when not RECOVERED; ``E`` the KRaft controller's epoch, as Kafka's
  ``ZkTopicMigrationClient`` writes it), all in one ``multi``;
* a topic deleted: every znode under ``/brokers/topics/<t>`` (deepest first), ``/config/topics/<t>``
  and ``/brokers/topics/<t>`` in one ``multi`` (``deleteTopic``);
* an assignment changed: ``/brokers/topics/<t>`` set (``updateTopic``); partitions added or
  changed: their ``state`` znodes created or set (``createTopicPartitions``,
  ``updateTopicPartitions``); partitions ZooKeeper has and KRaft not: deleted;
* topic and broker configs: ``/config/topics/<t>`` and ``/config/brokers/<id>`` (``<default>``
  for the cluster default) set to ``{"version":1,"config":{..}}``, or deleted when none is left,
  each with the ``/config/changes/config_change_NNNNNNNNNN`` notification
  (``{"version":2,"entity_path":"topics/<t>"}``) the ZooKeeper-mode brokers watch, in the same
  ``multi`` (Kafka writes it just after);
* client quotas and SCRAM credentials (``writeClientQuotas``): ``/config/users/<user>``,
  ``/config/users/<user>/clients/<client id>``, ``/config/clients/<client id>``,
  ``/config/ips/<ip>`` (names sanitized as Kafka's ``Sanitizer``, a default entity ``<default>``)
  set to the entity's quotas (LONG and INT quotas as whole numbers, the others as Java prints a
  double) and, for a user, its credentials (``SCRAM-SHA-256``: ``salt=..,stored_key=..,
  server_key=..,iterations=N``); empty when none is left, as Kafka leaves it; with the
  ``/config/changes`` notification;
* ACLs (``ZkAclMigrationClient``): ``/kafka-acl/<ResourceType>/<name>`` (literal) and
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` set to ``{"version":1,"acls":[{"principal":..,
  "permissionType":..,"operation":..,"host":..}]}``, deleted when none is left, with the change
  notification the brokers' ``AclAuthorizer`` watches (``/kafka-acl-changes/acl_changes_N`` holding
  ``Topic:<name>``, ``/kafka-acl-extended-changes/acl_changes_N`` its JSON);
* the producer id block: ``/latest_producer_id_block`` = ``{"version":1,"broker":-1,
  "block_start":"N","block_end":"N+999"}`` with ``N`` KRaft's next producer id (``writeProducerId``);
* delegation tokens (``ZkDelegationTokenMigrationClient``): ``/delegation_token/tokens/<token id>``
  set or created as ``{"version":3,"owner":..,"tokenRequester":..,"renewers":[..],
  "issueTimestamp":..,"maxTimestamp":..,"expiryTimestamp":..,"tokenId":..}`` (principals
  sanitized, ``DelegationTokenManagerZk.toJsonCompatibleMap``; the HMAC is not stored, each broker
  derives it from the token id and ``delegation.token.secret.key``), deleted when KRaft has the
  token no more; each with the ``/delegation_token/token_changes/token_change_N`` notification
  (the token id) the ZooKeeper-mode brokers' ``DelegationTokenManagerZk`` watches to update its
  cache (Kafka's migration client leaves it out, so its ZooKeeper-mode brokers see the change only
  on a restart).

Every ``multi`` begins with a check of ``/controller_epoch`` at the zkVersion this controller
claimed (a ZooKeeper-mode controller that took over fails it) and sets ``/migration``
conditionally on its zkVersion (a second KRaft writer fails it) to the offset and epoch of the last
KRaft record whose changes are all in ZooKeeper once the ``multi`` applies.

kraftkit's controller serves no delegation token request (CreateDelegationToken, Renew, Expire)
and does not expire tokens itself, so in a migration the tokens change only by the copy: the
token writes are those of a sync (a token ZooKeeper lost is written back, one ZooKeeper holds and
KRaft does not is deleted) and of any DelegationTokenRecord or RemoveDelegationTokenRecord
committed otherwise. A round computes the image's view whole, so the driver runs one only when a
record of :data:`VIEWED_RECORDS` was applied since the last.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kraftkit.metadata.image import (
    ACCESS_CONTROL_ENTRY,
    CLIENT_QUOTA,
    CONFIG,
    DELEGATION_TOKEN,
    PARTITION,
    PARTITION_CHANGE,
    PRODUCER_IDS,
    REMOVE_ACCESS_CONTROL_ENTRY,
    REMOVE_DELEGATION_TOKEN,
    REMOVE_TOPIC,
    REMOVE_USER_SCRAM_CREDENTIAL,
    TOPIC,
    USER_SCRAM_CREDENTIAL,
)
from kraftkit.migration.zk_client import (
    CONTROLLER_EPOCH,
    MIGRATION,
    Check,
    Create,
    Delete,
    MigrationZNode,
    Op,
    SetData,
    ZkBadVersion,
    ZkClient,
)
from kraftkit.migration.zk_reader import DEFAULT_ENTITY, ZkCluster, ZkError

__all__ = [
    "DUAL_WRITES",
    "Change",
    "ZkFenced",
    "ZkView",
    "ZkWriter",
    "changes",
    "cluster_view",
    "image_view",
]

log = logging.getLogger(__name__)

#: the controller writes whose changes are written to ZooKeeper (the names the controller's
#: ``check_no_dual_write`` is given)
DUAL_WRITES = frozenset(
    {
        "CreateTopics",
        "DeleteTopics",
        "CreatePartitions",
        "IncrementalAlterConfigs",
        "AlterConfigs",
        "AlterPartition",
        "AlterPartitionReassignments",
        "UnregisterBroker",
        "ElectLeaders",
        "AssignReplicasToDirs",
        "AllocateProducerIds",
        "AlterClientQuotas",
        "AlterUserScramCredentials",
        "CreateAcls",
        "DeleteAcls",
    }
)
#: the metadata records whose changes ZooKeeper keeps (:func:`image_view` reads only what they
#: change): while none of them is applied, a dual-write round has nothing to compare
VIEWED_RECORDS = (
    TOPIC,
    PARTITION,
    CONFIG,
    PARTITION_CHANGE,
    ACCESS_CONTROL_ENTRY,
    REMOVE_ACCESS_CONTROL_ENTRY,
    REMOVE_TOPIC,
    DELEGATION_TOKEN,
    REMOVE_DELEGATION_TOKEN,
    USER_SCRAM_CREDENTIAL,
    REMOVE_USER_SCRAM_CREDENTIAL,
    CLIENT_QUOTA,
    PRODUCER_IDS,
)
#: ConfigResource.Type: the two ZooKeeper keeps (``/config/topics``, ``/config/brokers``)
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
#: ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``
PRODUCER_ID_BLOCK_SIZE = 1000
CONFIG_CHANGES = "/config/changes"


def _js(v: Any) -> bytes:
    """Kafka's ``Json.encodeAsBytes``: compact JSON."""
    return json.dumps(v, separators=(",", ":")).encode()


def topic_id_text(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``."""
    import base64

    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


# ------------------------------------------------------------------ the views

#: a client quota entity: ((type, name or None), ...) in the order user, client-id, ip
Entity = tuple[tuple[str, str | None], ...]
_ENTITY_ORDER = {"user": 0, "client-id": 1, "ip": 2}
#: ``ScramMechanism``: type -> name
SCRAM_NAMES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}


def _entity(entity: Any) -> Entity:
    return tuple(sorted(((t, n) for t, n in entity), key=lambda e: _ENTITY_ORDER.get(e[0], 9)))


#: a delegation token: (owner, requester, renewers, issue, max and expiry timestamps), the
#: principals as ``KafkaPrincipal.toString`` writes them
Token = tuple[str, str, tuple[str, ...], int, int, int]
#: a partition's assignment: (replicas, adding replicas, removing replicas)
Assignment = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
#: a partition's state: (leader, leader epoch, ISR, leader recovery state)
State = tuple[int, int, tuple[int, ...], int]


@dataclass
class TopicView:
    topic_id: uuid.UUID
    assignment: dict[int, Assignment]
    #: partitions without a state znode are missing here
    states: dict[int, State] = field(default_factory=dict)


@dataclass
class ZkView:
    """What ZooKeeper holds (or should hold) of the metadata the dual writes keep."""

    topics: dict[str, TopicView] = field(default_factory=dict)
    #: (``topics`` | ``brokers``, ZooKeeper entity name) -> configs, only non-empty ones
    configs: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    #: config znodes to delete whatever they hold (of topics that do not exist)
    stale_configs: set[tuple[str, str]] = field(default_factory=set)
    #: the first producer id not handed out (None: no block)
    next_producer_id: int | None = None
    #: client quota entities (canonical: user, client-id, ip; a default's name None) -> their
    #: quotas (float) and, for users, SCRAM credentials (mechanism name -> (salt, stored key,
    #: server key, iterations)); only non-empty ones
    entities: dict[Entity, dict[str, Any]] = field(default_factory=dict)
    #: where ZooKeeper keeps each entity (read from it; the others go where Kafka would put them)
    entity_paths: dict[Entity, str] = field(default_factory=dict)
    #: ACLs by resource (resource type, pattern type, name) -> {(principal, host, operation, permission)}
    acls: dict[tuple[int, int, str], frozenset[tuple[str, str, int, int]]] = field(default_factory=dict)
    #: delegation tokens by token id
    tokens: dict[str, Token] = field(default_factory=dict)

    def comparable(self) -> dict[str, Any]:
        """The view as plain data, for an equality check of two views."""
        return {
            "topics": {
                n: (topic_id_text(t.topic_id), dict(sorted(t.assignment.items())), dict(sorted(t.states.items())))
                for n, t in sorted(self.topics.items())
            },
            "configs": dict(sorted(self.configs.items())),
            "next_producer_id": self.next_producer_id,
            "entities": dict(self.entities),
            "acls": dict(self.acls),
            "tokens": dict(sorted(self.tokens.items())),
        }


def image_view(image: Any) -> ZkView:
    """What ZooKeeper should hold for the KRaft ``image`` (a :class:`~kraftkit.metadata.image.MetadataImage`)."""
    view = ZkView()
    for tid, t in image.topics.items():
        tv = TopicView(tid, {})
        for p, part in t.partitions.items():
            tv.assignment[p] = (
                tuple(part["Replicas"]),
                tuple(part.get("AddingReplicas") or ()),
                tuple(part.get("RemovingReplicas") or ()),
            )
            tv.states[p] = (part["Leader"], part["LeaderEpoch"], tuple(part["Isr"]), part.get("LeaderRecoveryState", 0))
        view.topics[t.name] = tv
    for (rtype, name), cfg in image.configs.items():
        if not cfg:
            continue
        if rtype == TOPIC_RESOURCE:
            view.configs[("topics", name)] = dict(cfg)
        elif rtype == BROKER_RESOURCE:
            view.configs[("brokers", name or DEFAULT_ENTITY)] = dict(cfg)
    nxt = image.next_producer_id
    view.next_producer_id = nxt if nxt > 0 else None
    for entity, values in image.client_quotas.items():
        if values:
            view.entities.setdefault(_entity(entity), {}).update(values)
    for (mech, user), c in image.scram.items():
        props = view.entities.setdefault((("user", user),), {})
        props[SCRAM_NAMES.get(mech, str(mech))] = (
            bytes(c["Salt"]),
            bytes(c["StoredKey"]),
            bytes(c["ServerKey"]),
            c["Iterations"],
        )
    acls: dict[tuple[int, int, str], set[tuple[str, str, int, int]]] = {}
    for a in image.acls.values():
        key = (a["ResourceType"], a["PatternType"], a["ResourceName"])
        acls.setdefault(key, set()).add((a["Principal"], a["Host"], a["Operation"], a["PermissionType"]))
    view.acls = {k: frozenset(v) for k, v in acls.items()}
    for tid, tok in image.delegation_tokens.items():
        view.tokens[tid] = (
            tok["Owner"],
            tok["Requester"],
            tuple(tok["Renewers"]),
            tok["IssueTimestamp"],
            tok["MaxTimestamp"],
            tok["ExpirationTimestamp"],
        )
    return view


def cluster_view(cluster: ZkCluster) -> ZkView:
    """What ZooKeeper holds, as :func:`~kraftkit.migration.zk_reader.read_cluster` read it."""
    view = ZkView()
    for name, t in cluster.topics.items():
        if t.topic_id is None:
            raise ZkError(f"/brokers/topics/{name}: no topic_id (a topic the migration could not have copied)")
        tv = TopicView(t.topic_id, {})
        for p, part in t.partitions.items():
            tv.assignment[p] = (tuple(part.replicas), tuple(part.adding), tuple(part.removing))
            st = part.state
            if st is not None:
                tv.states[p] = (st.leader, st.leader_epoch, tuple(st.isr), st.leader_recovery_state)
        view.topics[name] = tv
        if t.configs:
            view.configs[("topics", name)] = dict(t.configs)
    for path in cluster.orphan_configs:
        view.stale_configs.add(("topics", path.rsplit("/", 1)[1]))
    for broker, cfg in cluster.broker_configs.items():
        view.configs[("brokers", broker or DEFAULT_ENTITY)] = dict(cfg)
    b = cluster.producer_id_block
    if b is not None:
        # a block this writer wrote (broker -1) starts at KRaft's next id; one a ZooKeeper-mode
        # controller handed out ends before it
        view.next_producer_id = b.block_start if b.broker == -1 else b.next_producer_id
    for q in cluster.client_quotas:
        e = _entity(q.entity)
        view.entities.setdefault(e, {}).update(q.values)
        view.entity_paths[e] = q.znode
    for c in cluster.scram:
        e = (("user", c.user),)
        view.entities.setdefault(e, {})[SCRAM_NAMES[c.mechanism]] = (c.salt, c.stored_key, c.server_key, c.iterations)
        view.entity_paths[e] = c.znode
    acls: dict[tuple[int, int, str], set[tuple[str, str, int, int]]] = {}
    for a in cluster.acls:
        key = (a.resource_type, a.pattern_type, a.resource_name)
        acls.setdefault(key, set()).add((a.principal, a.host, a.operation, a.permission_type))
    view.acls = {k: frozenset(v) for k, v in acls.items()}
    for dt in cluster.delegation_tokens:
        view.tokens[dt.token_id] = (
            dt.owner,
            dt.requester,
            tuple(dt.renewers),
            dt.issue_timestamp,
            dt.max_timestamp,
            dt.expiry_timestamp,
        )
    return view


# ------------------------------------------------------------------ the changes


@dataclass
class Change:
    """One ZooKeeper ``multi`` (besides the epoch check and the ``/migration`` update): ``build``
    makes its operations in the worker thread, just before it is applied, from what ZooKeeper
    holds then (a create where a znode is missing, a set where it is there)."""

    what: str
    build: Callable[[ZkClient], list[Op]]


def _topic_json(tv: TopicView) -> bytes:
    """``TopicZNode.encode``."""
    parts = sorted(tv.assignment.items())
    return _js(
        {
            "version": 3,
            "topic_id": topic_id_text(tv.topic_id),
            "partitions": {str(p): list(a[0]) for p, a in parts},
            "adding_replicas": {str(p): list(a[1]) for p, a in parts if a[1]},
            "removing_replicas": {str(p): list(a[2]) for p, a in parts if a[2]},
        }
    )


def state_json(state: State, controller_epoch: int) -> bytes:
    """``TopicPartitionStateZNode.encode``."""
    leader, leader_epoch, isr, lrs = state
    out: dict[str, Any] = {
        "controller_epoch": controller_epoch,
        "leader": leader,
        "version": 1,
        "leader_epoch": leader_epoch,
        "isr": list(isr),
    }
    if lrs != 0:
        out["leader_recovery_state"] = lrs
    return _js(out)


def config_json(configs: dict[str, str]) -> bytes:
    """``ConfigEntityZNode.encode``."""
    return _js({"version": 1, "config": dict(sorted(configs.items()))})


def producer_id_json(next_id: int) -> bytes:
    """``ProducerIdBlockZNode.generateProducerIdBlockJson`` of ``ProducerIdsBlock(-1, next, 1000)``."""
    return _js(
        {
            "version": 1,
            "broker": -1,
            "block_start": str(next_id),
            "block_end": str(next_id + PRODUCER_ID_BLOCK_SIZE - 1),
        }
    )


def _put(zk: ZkClient, path: str, data: bytes) -> Op:
    """A set of ``path`` when it exists, else its create."""
    return SetData(path, data, -1) if zk.get(path) is not None else Create(path, data)


def _subtree(zk: ZkClient, path: str, out: list[str], budget: list[int]) -> None:
    """The znodes under ``path``, deepest first (bounded by ``budget``)."""
    for kid in sorted(zk.children(path) or []):
        budget[0] -= 1
        if budget[0] < 0:
            raise ZkError(f"{path}: too many znodes under it to delete in one multi")
        p = f"{path}/{kid}"
        _subtree(zk, p, out, budget)
        out.append(p)


def ensure_path(zk: ZkClient, path: str) -> None:
    """Creates ``path`` and its parents where missing, empty (Kafka's ``createRecursive``)."""
    from kraftkit.migration.zk_client import ZkNodeExists

    parts = path.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        p = "/" + "/".join(parts[:i])
        if zk.get(p) is None:
            try:
                zk.multi([Create(p, b"")])
            except ZkNodeExists:
                pass


def _create_topic(name: str, tv: TopicView, controller_epoch: int) -> Change:
    def build(zk: ZkClient) -> list[Op]:
        ensure_path(zk, "/brokers/topics")
        ensure_path(zk, "/config/topics")
        base = f"/brokers/topics/{name}"
        ops: list[Op] = [Create(base, _topic_json(tv))]
        if zk.get(f"/config/topics/{name}") is None:
            ops.append(Create(f"/config/topics/{name}", config_json({})))
        ops.append(Create(f"{base}/partitions", b""))
        for p in sorted(tv.assignment):
            ops.append(Create(f"{base}/partitions/{p}", b""))
            ops.append(Create(f"{base}/partitions/{p}/state", state_json(_state_of(tv, p), controller_epoch)))
        return ops

    return Change(f"create topic {name} (id {topic_id_text(tv.topic_id)}, {len(tv.assignment)} partitions)", build)


def _state_of(tv: TopicView, p: int) -> State:
    st = tv.states.get(p)
    if st is not None:
        return st
    replicas = tv.assignment[p][0]
    return (replicas[0] if replicas else -1, 0, replicas, 0)


def _delete_topic(name: str, max_znodes: int) -> Change:
    def build(zk: ZkClient) -> list[Op]:
        base = f"/brokers/topics/{name}"
        below: list[str] = []
        _subtree(zk, base, below, [max_znodes])
        ops: list[Op] = [Delete(p, -1) for p in below]
        if zk.get(f"/config/topics/{name}") is not None:
            ops.append(Delete(f"/config/topics/{name}", -1))
        if zk.get(base) is not None:
            ops.append(Delete(base, -1))
        return ops

    return Change(f"delete topic {name}", build)


def _update_topic(name: str, tv: TopicView) -> Change:
    return Change(
        f"update the assignment of topic {name}",
        lambda zk: [SetData(f"/brokers/topics/{name}", _topic_json(tv), -1)],
    )


def _partitions(name: str, tv: TopicView, parts: list[int], controller_epoch: int) -> Change:
    def build(zk: ZkClient) -> list[Op]:
        base = f"/brokers/topics/{name}/partitions"
        ops: list[Op] = []
        if zk.get(base) is None:
            ops.append(Create(base, b""))
        for p in parts:
            state = state_json(_state_of(tv, p), controller_epoch)
            if zk.get(f"{base}/{p}") is None:
                ops += [Create(f"{base}/{p}", b""), Create(f"{base}/{p}/state", state)]
            else:
                ops.append(_put(zk, f"{base}/{p}/state", state))
        return ops

    return Change(f"write the state of partitions {parts} of topic {name}", build)


def _delete_partitions(name: str, parts: list[int], max_znodes: int) -> Change:
    def build(zk: ZkClient) -> list[Op]:
        ops: list[Op] = []
        for p in parts:
            path = f"/brokers/topics/{name}/partitions/{p}"
            below: list[str] = []
            _subtree(zk, path, below, [max_znodes])
            ops += [Delete(q, -1) for q in below]
            if zk.get(path) is not None:
                ops.append(Delete(path, -1))
        return ops

    return Change(f"delete the extraneous partitions {parts} of topic {name}", build)


def _notification(entity_path: str) -> Op:
    """``KafkaZkClient.createConfigChangeNotification``."""
    return Create(f"{CONFIG_CHANGES}/config_change_", _js({"version": 2, "entity_path": entity_path}), sequential=True)


def _write_configs(kind: str, name: str, configs: dict[str, str]) -> Change:
    def build(zk: ZkClient) -> list[Op]:
        ensure_path(zk, f"/config/{kind}")
        ensure_path(zk, CONFIG_CHANGES)
        return [_put(zk, f"/config/{kind}/{name}", config_json(configs)), _notification(f"{kind}/{name}")]

    return Change(f"write the configs of {kind}/{name}", build)


def _delete_configs(kind: str, name: str) -> Change:
    def build(zk: ZkClient) -> list[Op]:
        path = f"/config/{kind}/{name}"
        if zk.get(path) is None:
            return []
        ensure_path(zk, CONFIG_CHANGES)
        return [Delete(path, -1), _notification(f"{kind}/{name}")]

    return Change(f"delete the configs of {kind}/{name}", build)


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: Java's ``URLEncoder`` (letters, digits and ``.-_*`` kept,
    every other UTF-8 byte ``%XX``), then ``*`` as ``%2A`` and a space as ``%20``."""
    out = []
    for ch in name:
        if ch.isascii() and (ch.isalnum() or ch in ".-_"):
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def _zk_name(name: str | None, *, raw: bool = False) -> str:
    """``toZkEntityName``: the default entity's ``<default>``, else the name (sanitized)."""
    if name is None:
        return DEFAULT_ENTITY
    return name if raw else sanitize(name)


def entity_path(e: Entity) -> str:
    """Where Kafka keeps a client quota entity's configs, under ``/config`` (``writeClientQuotas``)."""
    d = dict(e)
    if "user" in d and "client-id" in d:
        return f"users/{_zk_name(d['user'])}/clients/{_zk_name(d['client-id'])}"
    if "user" in d:
        return f"users/{_zk_name(d['user'])}"
    if "client-id" in d:
        return f"clients/{_zk_name(d['client-id'])}"
    return f"ips/{_zk_name(d.get('ip'), raw=True)}"


#: ``DynamicConfig``'s quota keys of type LONG or INT (the others are DOUBLE)
_WHOLE_QUOTAS = {"producer_byte_rate", "consumer_byte_rate", "connection_creation_rate"}


def java_double(v: float) -> str:
    """Java's ``Double.toString`` (``1024.0``, ``0.5``, ``1.0E7``), with the shortest digits."""
    import math
    from decimal import Decimal

    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0.0" if math.copysign(1, v) < 0 else "0.0"
    if 1e-3 <= abs(v) < 1e7:
        text = repr(v)
        return text if "e" not in text else format(Decimal(text), "f")
    sign, digits, exp = Decimal(repr(v)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    e = len(digits) + int(exp) - 1
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{e}"


def _quota_text(key: str, v: float) -> str:
    """``ZkConfigMigrationClient.writeClientQuotas``: a LONG or INT quota as a whole number."""
    import math

    if key in _WHOLE_QUOTAS and math.isfinite(v) and abs(v - round(v)) <= 1e-6:
        return str(round(v))
    return java_double(v)


def scram_text(c: tuple[bytes, bytes, bytes, int]) -> str:
    """``ScramCredentialUtils.credentialToString``."""
    import base64

    salt, stored, server, iterations = c
    b64 = lambda b: base64.b64encode(b).decode("ascii")  # noqa: E731
    return f"salt={b64(salt)},stored_key={b64(stored)},server_key={b64(server)},iterations={iterations}"


def _write_entity(e: Entity, props: dict[str, Any], known: str | None) -> Change:
    """A quota entity's configs (quotas and SCRAM credentials) written, empty when none is left
    (Kafka writes empty configs rather than deleting the znode)."""
    rel = known[len("/config/") :] if known is not None and known.startswith("/config/") else entity_path(e)

    def build(zk: ZkClient) -> list[Op]:
        ensure_path(zk, f"/config/{rel.rsplit('/', 1)[0]}")
        ensure_path(zk, CONFIG_CHANGES)
        texts = {k: scram_text(v) if isinstance(v, tuple) else _quota_text(k, v) for k, v in props.items()}
        return [_put(zk, f"/config/{rel}", config_json(texts)), _notification(rel)]

    return Change(f"write the quotas and SCRAM credentials of {rel}", build)


#: ``ResourceType``, ``AclOperation``, ``AclPermissionType`` names as ``SecurityUtils`` writes them
_RESOURCE_NAMES = {2: "Topic", 3: "Group", 4: "Cluster", 5: "TransactionalId", 6: "DelegationToken", 7: "User"}
_OPERATION_NAMES = {2: "All", 3: "Read", 4: "Write", 5: "Create", 6: "Delete", 7: "Alter", 8: "Describe",
                    9: "ClusterAction", 10: "DescribeConfigs", 11: "AlterConfigs", 12: "IdempotentWrite",
                    13: "CreateTokens", 14: "DescribeTokens", 15: "TwoPhaseCommit"}  # fmt: skip
_PERMISSION_NAMES = {2: "Deny", 3: "Allow"}
LITERAL, PREFIXED = 3, 4


def acl_path(key: tuple[int, int, str]) -> str:
    """``ZkAclStore``: ``/kafka-acl/<Type>/<name>`` (LITERAL), ``/kafka-acl-extended/prefixed/<Type>/<name>``."""
    rtype, pattern, name = key
    store = "/kafka-acl" if pattern == LITERAL else "/kafka-acl-extended/prefixed"
    return f"{store}/{_RESOURCE_NAMES.get(rtype, str(rtype))}/{name}"


def _acl_change(key: tuple[int, int, str]) -> Op:
    """``ZkAclChangeStore.createChangeNode``: ``/kafka-acl-changes/acl_changes_N`` (``Type:name``)
    for a literal resource, ``/kafka-acl-extended-changes/acl_changes_N`` (JSON) for a prefixed one."""
    rtype, pattern, name = key
    tname = _RESOURCE_NAMES.get(rtype, str(rtype))
    if pattern == LITERAL:
        return Create("/kafka-acl-changes/acl_changes_", f"{tname}:{name}".encode(), sequential=True)
    data = _js({"version": 1, "resourceType": tname, "name": name, "patternType": "PREFIXED"})
    return Create("/kafka-acl-extended-changes/acl_changes_", data, sequential=True)


def _write_acls(key: tuple[int, int, str], acls: frozenset[tuple[str, str, int, int]]) -> Change:
    """A resource's ACLs (``ZkAclMigrationClient.writeResourceAcls``), its znode deleted when none
    is left (``deleteResource``), with the change notification the authorizers watch."""
    path = acl_path(key)

    def build(zk: ZkClient) -> list[Op]:
        change = _acl_change(key)
        ensure_path(zk, change.path.rsplit("/", 1)[0])
        if not acls:
            return [Delete(path, -1), change] if zk.get(path) is not None else []
        ensure_path(zk, path.rsplit("/", 1)[0])
        entries = [
            {"principal": p, "permissionType": _PERMISSION_NAMES.get(perm, str(perm)),
             "operation": _OPERATION_NAMES.get(op, str(op)), "host": h}
            for p, h, op, perm in sorted(acls)
        ]  # fmt: skip
        return [_put(zk, path, _js({"version": 1, "acls": entries})), change]

    return Change(f"write the ACLs of {path}", build)


TOKENS = "/delegation_token/tokens"
TOKEN_CHANGES = "/delegation_token/token_changes"


def token_json(token_id: str, t: Token) -> bytes:
    """``DelegationTokenInfoZNode.encode`` (``DelegationTokenManagerZk.toJsonCompatibleMap``)."""
    owner, requester, renewers, issue, max_ts, expiry = t
    return _js(
        {
            "version": 3,
            "owner": sanitize(owner),
            "tokenRequester": sanitize(requester),
            "renewers": [sanitize(r) for r in renewers],
            "issueTimestamp": issue,
            "maxTimestamp": max_ts,
            "expiryTimestamp": expiry,
            "tokenId": token_id,
        }
    )


def _token_path(token_id: str) -> str:
    if not token_id or "/" in token_id or token_id in (".", "..") or "\x00" in token_id:
        raise ZkError(f"delegation token {token_id!r}: not a znode name, not written to ZooKeeper")
    return f"{TOKENS}/{token_id}"


def _token_change(token_id: str) -> Op:
    """``KafkaZkClient.createTokenChangeNotification``."""
    return Create(f"{TOKEN_CHANGES}/token_change_", token_id.encode("utf-8"), sequential=True)


def _write_token(token_id: str, t: Token | None) -> Change:
    """A token written (``ZkDelegationTokenMigrationClient.writeDelegationToken``: set, or created
    when missing) or, ``t`` None, deleted (``deleteDelegationToken``; already gone: nothing to do)."""

    def build(zk: ZkClient) -> list[Op]:
        path = _token_path(token_id)
        ensure_path(zk, TOKEN_CHANGES)
        if t is None:
            return [Delete(path, -1), _token_change(token_id)] if zk.get(path) is not None else []
        ensure_path(zk, TOKENS)
        return [_put(zk, path, token_json(token_id, t)), _token_change(token_id)]

    return Change(f"{'delete' if t is None else 'write'} the delegation token {token_id}", build)


def changes(old: ZkView, new: ZkView, controller_epoch: int, *, max_znodes: int = 1_000_000) -> list[Change]:
    """The ZooKeeper writes that take ZooKeeper from ``old`` to ``new``, in Kafka's order.
    ``controller_epoch`` is what the partition state znodes written carry (the KRaft
    controller's epoch); ``max_znodes`` bounds the znodes one topic deletion lists."""
    out: list[Change] = []
    for name in sorted(old.topics):
        t = new.topics.get(name)
        if t is None or t.topic_id != old.topics[name].topic_id:
            out.append(_delete_topic(name, max_znodes))
    for name in sorted(new.topics):
        t = new.topics[name]
        o = old.topics.get(name)
        if o is None or o.topic_id != t.topic_id:
            out.append(_create_topic(name, t, controller_epoch))
            continue
        if o.assignment != t.assignment:
            out.append(_update_topic(name, t))
        changed = [p for p in sorted(t.assignment) if p not in o.states or o.states[p] != _state_of(t, p)]
        if changed:
            out.append(_partitions(name, t, changed, controller_epoch))
        extra = sorted(set(o.assignment) - set(t.assignment))
        if extra:
            out.append(_delete_partitions(name, extra, max_znodes))
    gone = {name for name, t in old.topics.items() if name not in new.topics or new.topics[name].topic_id != t.topic_id}
    for key in sorted(set(old.configs) | set(new.configs) | old.stale_configs):
        kind, name = key
        want = new.configs.get(key)
        had = None if kind == "topics" and name in gone else old.configs.get(key)  # (deleted with its topic)
        if want:
            if had != want:
                out.append(_write_configs(kind, name, want))
        elif had is not None or key in old.stale_configs:
            out.append(_delete_configs(kind, name))  # (none left: the znode goes, as Kafka's deleteConfigs)
    for e in sorted(set(old.entities) | set(new.entities), key=repr):
        props = new.entities.get(e, {})
        if old.entities.get(e, {}) != props:
            out.append(_write_entity(e, props, old.entity_paths.get(e)))
    for resource in sorted(set(old.acls) | set(new.acls)):
        want_acls = new.acls.get(resource, frozenset())
        if old.acls.get(resource, frozenset()) != want_acls:
            out.append(_write_acls(resource, want_acls))
    if new.next_producer_id is not None and new.next_producer_id != old.next_producer_id:
        nxt = new.next_producer_id
        out.append(
            Change(
                f"write the producer id block from {nxt}",
                lambda zk: [_put(zk, "/latest_producer_id_block", producer_id_json(nxt))],
            )
        )
    for token_id in sorted(set(old.tokens) | set(new.tokens)):
        want_token = new.tokens.get(token_id)
        if old.tokens.get(token_id) != want_token:
            out.append(_write_token(token_id, want_token))
    return out


# ------------------------------------------------------------------ applying them


class ZkFenced(ZkError):
    """``/controller_epoch`` is not at the zkVersion this controller claimed: another controller
    took ZooKeeper over, and this one must claim it again before writing."""


class ZkWriter:
    """Applies :class:`Change`\\ s for the KRaft controller ``controller_id`` (epoch
    ``kraft_epoch``) that claimed ZooKeeper with ``/controller_epoch`` at ``epoch_zk_version``.
    Its methods block: the driver calls them in a worker thread."""

    def __init__(self, controller_id: int, kraft_epoch: int, epoch_zk_version: int) -> None:
        self.controller_id = controller_id
        self.kraft_epoch = kraft_epoch
        self.epoch_zk_version = epoch_zk_version
        #: ``/migration``'s zkVersion as this writer last saw or set it (None: read it first)
        self.migration_version: int | None = None
        #: the offset and epoch ``/migration`` names (the last KRaft record fully in ZooKeeper)
        self.written: tuple[int, int] = (-1, -1)

    def load(self, zk: ZkClient) -> None:
        """Reads ``/migration`` (its offset and zkVersion) before the writes."""
        got = zk.get(MIGRATION)
        if got is None:
            raise ZkError(f"{MIGRATION}: no such znode")
        m = MigrationZNode.decode(got[0])
        self.migration_version = got[1]
        self.written = (m.kraft_metadata_offset, m.kraft_metadata_epoch)

    def apply(self, zk: ZkClient, change: Change, offset: int, epoch: int) -> bool:
        """Applies ``change`` in one ``multi`` with the epoch check and ``/migration`` set to
        ``offset`` and ``epoch``; False when there was nothing to write. Raises
        :class:`ZkFenced`, or the ZooKeeper error (the caller then syncs)."""
        if self.migration_version is None:
            self.load(zk)
        ops = change.build(zk)
        if not ops:
            return False
        assert self.migration_version is not None
        state = MigrationZNode(self.controller_id, self.kraft_epoch, offset, epoch)
        try:
            versions = zk.multi(
                [
                    Check(CONTROLLER_EPOCH, self.epoch_zk_version),
                    SetData(MIGRATION, state.encode(), self.migration_version),
                    *ops,
                ]
            )
        except ZkBadVersion:
            got = zk.get(CONTROLLER_EPOCH)
            if got is None or got[1] != self.epoch_zk_version:
                raise ZkFenced(
                    f"{CONTROLLER_EPOCH} changed (zkVersion {None if got is None else got[1]}, this controller set "
                    f"{self.epoch_zk_version}): another controller claimed ZooKeeper"
                ) from None
            self.migration_version = None  # (/migration written by someone else: read again)
            raise
        self.migration_version = versions[1]
        self.written = (offset, epoch)
        return True

    def mark(self, zk: ZkClient, offset: int, epoch: int) -> None:
        """Sets ``/migration`` alone to ``offset`` and ``epoch`` (everything up to it is in ZooKeeper)."""
        self.apply(
            zk,
            Change("record the offset written", lambda _zk: [Check(CONTROLLER_EPOCH, self.epoch_zk_version)]),
            offset,
            epoch,
        )
