"""The offline ZooKeeper-to-KRaft conversion: what :mod:`kraftkit.migration.zk_reader` read, as
KRaft metadata records (as Kafka's own migration wrote them: ``ZkTopicMigrationClient``,
``ZkConfigMigrationClient``, ``ZkMigrationClient.migrateProducerId`` and
``migrateDelegationTokens``), a snapshot of them in each controller's ``__cluster_metadata-0``, and
each broker log directory's ``meta.properties`` rewritten for KRaft.

Nothing is written before everything has been read and checked (:func:`plan`); then
:func:`write` builds each controller directory beside its final name and renames it into place,
and rewrites each broker's ``meta.properties`` atomically, the old one kept beside it as
``meta.properties.zk-backup``.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftkit._kafka import (
    ACCESS_CONTROL_ENTRY,
    CLIENT_QUOTA,
    CONFIG,
    DELEGATION_TOKEN,
    FEATURE_LEVEL,
    PARTITION,
    PRODUCER_IDS,
    TOPIC,
    USER_SCRAM_CREDENTIAL,
)
from kraftkit.errors import KraftkitError
from kraftkit.features.registry import MetadataVersion, UnknownVersionError, registry
from kraftkit.features.storage.errors import StorageError
from kraftkit.features.storage.format import fsync_dir, write_file_atomic
from kraftkit.features.storage.levels import resolve_features
from kraftkit.features.storage.properties import META_PROPERTIES, MetaProperties, parse_properties
from kraftkit.features.storage.uuids import generate_directory_id
from kraftkit.metadata.image import MetadataImage, replay_records
from kraftkit.metadata.snapshot import SnapshotId
from kraftkit.migration.zk_reader import DEFAULT_ENTITY, ZkCluster

METADATA_PARTITION = "__cluster_metadata-0"
#: where a broker's ZooKeeper-mode meta.properties is kept (for a roll back)
BACKUP_SUFFIX = ".zk-backup"
#: ConfigResource.Type.TOPIC and BROKER
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
#: the epoch of the snapshot written (a new quorum's first leader is elected in a later epoch)
SNAPSHOT_EPOCH = 1


class ConversionError(KraftkitError):
    """The cluster cannot be converted as it is (exit 1): something not carried yet, a broker
    directory of another cluster."""


class ConversionInputError(ConversionError):
    """Bad arguments, unreadable input or an existing output (exit 2)."""


Record = tuple[int, int, dict[str, Any]]


def metadata_version_of_ibp(ibp: str) -> MetadataVersion:
    """The metadata.version of an ``inter.broker.protocol.version`` (``3.9`` -> ``3.9-IV0``, as
    Kafka's ``MetadataVersion.fromVersionString``), refused when Kafka's KRaft cannot start at it."""
    try:
        mv = registry().metadata_version(ibp)
    except UnknownVersionError as e:
        raise ConversionInputError(f"inter.broker.protocol.version {ibp!r}: {e}") from None
    try:
        resolve_features(mv.name)
    except StorageError as e:
        raise ConversionError(f"inter.broker.protocol.version {ibp} ({mv.name}): {e}") from None
    return mv


def records(cluster: ZkCluster, mv: MetadataVersion) -> list[Record]:
    """The metadata records of ``cluster`` at ``mv``: feature levels (as ``kafka-storage format
    --release-version`` would start a cluster at ``mv``, with ``--feature`` for each finalized
    feature of ``/feature``), the dynamic broker configs (the cluster default's first, as ``""``), then per topic (by name) its
    TopicRecord, its PartitionRecords and its ConfigRecords, then the ClientQuotaRecords and
    UserScramCredentialRecords (``ZkMigrationClient.migrateClientQuotas``), the
    AccessControlEntryRecords (``migrateAcls``: each a random id), the ProducerIdsRecord, then
    a DelegationTokenRecord per token (``migrateDelegationTokens``; refused below metadata.version
    3.6-IV2, which cannot hold them).
    PartitionRecords are as ``ZkTopicMigrationClient`` made them: the state znode's leader, leader
    epoch, ISR and leader recovery state, its znode version as the partition epoch; no state znode:
    the replicas as ISR, the first as leader, epochs 0. Directories are left out: a replica's
    directory is then ``DirectoryId.MIGRATING`` and each broker assigns its own."""
    try:
        features = resolve_features(mv.name, cluster.finalized_features)
    except StorageError as e:
        raise ConversionError(f"/feature: {e}") from None
    problem = _tokens_problem(cluster, mv)
    if problem:
        raise ConversionError(f"cannot convert: {problem}")
    out: list[Record] = list(features.bootstrap_records())
    for name in sorted(cluster.topics):
        t = cluster.topics[name]
        if t.topic_id is None:
            raise ConversionError(f"/brokers/topics/{name}: no topic_id")
        tid = t.topic_id.bytes
        out.append((TOPIC, 0, {"Name": name, "TopicId": tid}))
        for p in sorted(t.partitions):
            part = t.partitions[p]
            st = part.state
            rec: dict[str, Any] = {
                "PartitionId": p,
                "TopicId": tid,
                "Replicas": part.replicas,
                "RemovingReplicas": part.removing,
                "AddingReplicas": part.adding,
            }
            if st is not None:
                rec.update(
                    Isr=st.isr,
                    Leader=st.leader,
                    LeaderEpoch=st.leader_epoch,
                    PartitionEpoch=st.partition_epoch,
                    LeaderRecoveryState=st.leader_recovery_state,
                )
            else:
                rec.update(Isr=part.replicas, Leader=part.replicas[0], LeaderEpoch=0, PartitionEpoch=0)
            out.append((PARTITION, 0, rec))
        for k in sorted(t.configs):
            out.append(
                (CONFIG, 0, {"ResourceType": TOPIC_RESOURCE, "ResourceName": name, "Name": k, "Value": t.configs[k]})
            )
    for broker in sorted(cluster.broker_configs, key=lambda b: (b != "", len(b), b)):
        cfg = cluster.broker_configs[broker]
        for k in sorted(cfg):
            out.append(
                (CONFIG, 0, {"ResourceType": BROKER_RESOURCE, "ResourceName": broker, "Name": k, "Value": cfg[k]})
            )
    for q in cluster.client_quotas:
        entity = [{"EntityType": t, "EntityName": n} for t, n in q.entity]
        for key, value in q.values.items():
            out.append((CLIENT_QUOTA, 0, {"Entity": entity, "Key": key, "Value": value, "Remove": False}))
    for c in cluster.scram:
        out.append(
            (
                USER_SCRAM_CREDENTIAL,
                0,
                {
                    "Name": c.user,
                    "Mechanism": c.mechanism,
                    "Salt": c.salt,
                    "StoredKey": c.stored_key,
                    "ServerKey": c.server_key,
                    "Iterations": c.iterations,
                },
            )
        )
    ids: set[uuid.UUID] = set()
    for a in cluster.acls:
        acl_id = _random_uuid(ids)
        ids.add(acl_id)
        rec = {
            "Id": acl_id.bytes,
            "ResourceType": a.resource_type,
            "ResourceName": a.resource_name,
            "PatternType": a.pattern_type,
            "Principal": a.principal,
            "Host": a.host,
            "Operation": a.operation,
            "PermissionType": a.permission_type,
        }
        out.append((ACCESS_CONTROL_ENTRY, 0, rec))
    if cluster.producer_id_block is not None:
        b = cluster.producer_id_block
        out.append((PRODUCER_IDS, 0, {"BrokerId": b.broker, "BrokerEpoch": -1, "NextProducerId": b.next_producer_id}))
    for dt in cluster.delegation_tokens:
        tok = {
            "Owner": dt.owner,
            "Requester": dt.requester,
            "Renewers": list(dt.renewers),
            "IssueTimestamp": dt.issue_timestamp,
            "MaxTimestamp": dt.max_timestamp,
            "ExpirationTimestamp": dt.expiry_timestamp,
            "TokenId": dt.token_id,
        }
        out.append((DELEGATION_TOKEN, 0, tok))
    return out


def _tokens_problem(cluster: ZkCluster, mv: MetadataVersion) -> str | None:
    """Delegation tokens at a metadata.version without DelegationTokenRecords (``isDelegationTokenSupported``,
    3.6-IV2): Kafka's snapshot of such an image would lose them."""
    if not cluster.delegation_tokens or mv.supported("delegation_token"):
        return None
    znodes = [t.znode for t in cluster.delegation_tokens]
    more = f" and {len(znodes) - 3} more" if len(znodes) > 3 else ""
    return (
        f"delegation tokens ({', '.join(znodes[:3])}{more}) at metadata.version {mv.name}, which cannot hold them "
        "(DelegationTokenRecord needs 3.6-IV2 or later): raise inter.broker.protocol.version to 3.6 or later first, "
        "or expire the tokens"
    )


def _random_uuid(taken: set[uuid.UUID]) -> uuid.UUID:
    """``Uuid.randomUuid``: 128 random bits, redrawn while reserved (below 100), its text starting
    with ``-``, or taken."""
    import secrets

    while True:
        u = uuid.UUID(bytes=secrets.token_bytes(16))
        if u.int >= 100 and not topic_id_text(u).startswith("-") and u not in taken:
            return u


@dataclass
class BrokerDir:
    path: Path
    broker_id: int
    old: MetaProperties
    old_text: bytes
    new: MetaProperties | None = None


@dataclass
class Plan:
    cluster: ZkCluster
    metadata_version: MetadataVersion
    records: list[Record]
    image: MetadataImage
    controllers: dict[int, Path]
    voters: str
    brokers: list[BrokerDir] = field(default_factory=list)
    #: controller id -> new directory.id
    controller_dir_ids: dict[int, str] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def snapshot_id(self) -> SnapshotId:
        return SnapshotId(len(self.records), SNAPSHOT_EPOCH)

    def counts(self) -> dict[str, int]:
        c = self.cluster
        return {
            "topics": len(c.topics),
            "partitions": c.partition_count,
            "topicConfigs": sum(len(t.configs) for t in c.topics.values()),
            "clientQuotas": sum(len(q.values) for q in c.client_quotas),
            "scramCredentials": len(c.scram),
            "acls": len(c.acls),
            "brokerConfigs": sum(len(v) for v in c.broker_configs.values()),
            "delegationTokens": len(c.delegation_tokens),
            "records": len(self.records),
            "znodesRead": c.znodes_read,
        }

    def report(self) -> list[str]:
        c, n = self.cluster, self.counts()
        lines = [
            f"cluster {c.cluster_id}: metadata.version {self.metadata_version.name} "
            f"(level {self.metadata_version.level}), {n['znodesRead']} znodes read",
            f"carried: {n['topics']} topic(s) with their topic ids, {n['partitions']} partition(s) "
            f"(replicas, ISR, leader, leader epoch), {n['topicConfigs']} topic config(s), "
            f"{n['clientQuotas']} client quota(s), {n['scramCredentials']} SCRAM credential(s), {n['acls']} ACL(s), "
            f"{n['brokerConfigs']} dynamic broker config(s), {n['delegationTokens']} delegation token(s)"
            + (
                f", the producer id block (next producer id {c.producer_id_block.next_producer_id})"
                if c.producer_id_block
                else ""
            ),
            f"snapshot {self.snapshot_id.file_name}: {n['records']} record(s)",
        ]
        lines += self.notes
        return lines

    def to_json(self) -> dict[str, Any]:
        c = self.cluster
        return {
            "clusterId": c.cluster_id,
            "metadataVersion": self.metadata_version.name,
            "metadataVersionLevel": self.metadata_version.level,
            **self.counts(),
            "finalizedFeatures": {d["Name"]: d["FeatureLevel"] for k, _v, d in self.records if k == FEATURE_LEVEL},
            "nextProducerId": c.producer_id_block.next_producer_id if c.producer_id_block else None,
            "snapshot": self.snapshot_id.file_name,
            "controllers": [
                {"nodeId": i, "directory": str(p), "directoryId": self.controller_dir_ids.get(i)}
                for i, p in sorted(self.controllers.items())
            ],
            "brokers": [
                {
                    "nodeId": b.broker_id,
                    "directory": str(b.path),
                    "directoryId": b.new.directory_id if b.new else None,
                    "backup": str(b.path / (META_PROPERTIES + BACKUP_SUFFIX)),
                }
                for b in self.brokers
            ],
            "notes": list(self.notes),
            "written": list(self.written),
        }


def check_carriable(cluster: ZkCluster, mv: MetadataVersion | None = None) -> None:
    """Refuses (ConversionError) what this converter cannot carry yet, naming it (and, given the
    metadata.version, what it cannot hold)."""
    problems: list[str] = []
    if cluster.reassigning:
        problems.append(
            f"partition reassignments in progress ({', '.join(cluster.reassigning[:5])}"
            f"{', ...' if len(cluster.reassigning) > 5 else ''}): let them finish first"
        )
    if cluster.pending_deletions:
        problems.append(
            f"topic deletions in progress (/admin/delete_topics: {', '.join(cluster.pending_deletions[:5])}"
            f"{', ...' if len(cluster.pending_deletions) > 5 else ''}): let them finish first"
        )
    missing_ids = [n for n, t in sorted(cluster.topics.items()) if t.topic_id is None]
    if missing_ids:
        problems.append(
            f"topics without a topic id ({', '.join(missing_ids[:5])}): start the brokers on Kafka 2.8 or later once"
        )
    passwords = _password_configs(cluster)
    if passwords:
        problems.append(
            f"dynamic broker password configs ({', '.join(passwords[:3])}"
            f"{', ...' if len(passwords) > 3 else ''}): ZooKeeper holds them encrypted with the brokers' "
            "password.encoder.secret; not carried yet (remove them, convert, set them again)"
        )
    by_what: dict[str, list[str]] = {}
    for znode, what in cluster.not_carried:
        by_what.setdefault(what, []).append(znode)
    for what, znodes in by_what.items():
        more = f" and {len(znodes) - 3} more" if len(znodes) > 3 else ""
        problems.append(f"{what} ({', '.join(znodes[:3])}{more}): not carried yet")
    tokens = _tokens_problem(cluster, mv) if mv is not None else None
    if tokens:
        problems.append(tokens)
    if problems:
        raise ConversionError("cannot convert: " + "; ".join(problems))


def _password_configs(cluster: ZkCluster) -> list[str]:
    """``DynamicBrokerConfig.isPasswordConfig``: a key ending with the name of a dynamic PASSWORD
    broker config (``listener.name.x.ssl.keystore.password`` too)."""
    if not cluster.broker_configs:
        return []
    from kraftkit.controller.configs import broker_schema

    schema = broker_schema()
    names = [n for n, c in schema.keys.items() if c["type"] == "PASSWORD" and c["dynamic"]]
    out = []
    for broker, cfg in sorted(cluster.broker_configs.items()):
        znode = f"/config/brokers/{broker or DEFAULT_ENTITY}"
        out += [f"{znode} {k}" for k in sorted(cfg) if any(k.endswith(n) for n in names)]
    return out


def _parse_voters(text: str) -> dict[int, tuple[str, int]]:
    from kraftkit.raft.driver import parse_voters

    try:
        return parse_voters(text)
    except ValueError as e:
        raise ConversionInputError(f"--voters: {e}") from None


def _broker_dir(path: Path, cluster_id: str) -> BrokerDir:
    meta = path / META_PROPERTIES
    if not path.is_dir():
        raise ConversionInputError(f"{path}: not a directory")
    if (path / (META_PROPERTIES + BACKUP_SUFFIX)).exists():
        raise ConversionInputError(f"{path}: {META_PROPERTIES}{BACKUP_SUFFIX} exists already (converted before?)")
    try:
        from kraftkit._fs import read_small

        text = read_small(meta, what="a meta.properties file")
        old = MetaProperties.from_properties(parse_properties(text.decode("utf-8")), str(meta))
    except FileNotFoundError:
        raise ConversionInputError(f"{meta}: no such file (not a broker's log directory?)") from None
    except OSError as e:
        from kraftkit._fs import error_text

        raise ConversionInputError(error_text(e)) from None
    except UnicodeDecodeError as e:
        raise ConversionInputError(f"{meta}: not UTF-8 text (byte {e.start})") from None
    except StorageError as e:
        raise ConversionInputError(str(e)) from None
    if old.version != 0:
        raise ConversionError(f"{meta}: version {old.version}, not a ZooKeeper-mode broker's (version 0)")
    if old.node_id is None:
        raise ConversionError(f"{meta}: no broker.id")
    if old.cluster_id is not None and old.cluster_id != cluster_id:
        raise ConversionError(f"{meta}: cluster.id {old.cluster_id}, but ZooKeeper's cluster is {cluster_id}")
    if (path / METADATA_PARTITION).exists():
        raise ConversionError(f"{path}: holds {METADATA_PARTITION} already (a KRaft node's directory?)")
    return BrokerDir(path, old.node_id, old, text)


def plan(
    cluster: ZkCluster,
    ibp: str,
    controllers: Mapping[int, str | os.PathLike[str]],
    voters: str,
    broker_dirs: Sequence[str | os.PathLike[str]] = (),
) -> Plan:
    """Checks everything and builds the records and image; writes nothing."""
    mv = metadata_version_of_ibp(ibp)
    vs = _parse_voters(voters)
    targets = {i: Path(p) for i, p in controllers.items()}
    for i, t in sorted(targets.items()):
        if i not in vs:
            raise ConversionInputError(f"--controller-dir {i}={t}: node {i} is not among --voters {voters}")
        if t.exists() or t.is_symlink():
            raise ConversionInputError(f"{t}: exists already (never overwritten)")
    if len({os.path.abspath(t) for t in targets.values()}) != len(targets):
        raise ConversionInputError("--controller-dir: two controllers given the same directory")
    check_carriable(cluster, mv)
    recs = records(cluster, mv)
    try:
        image = replay_records(recs)
    except KraftkitError as e:
        raise ConversionError(f"the records made from ZooKeeper do not replay: {e}") from None
    p = Plan(cluster, mv, recs, image, targets, voters)
    seen: dict[str, BrokerDir] = {}
    for d in broker_dirs:
        path = Path(d)
        key = os.path.realpath(path)
        if key in seen:
            raise ConversionInputError(f"{path}: given twice")
        b = _broker_dir(path, cluster.cluster_id)
        if b.broker_id in vs:
            raise ConversionInputError(
                f"{path}: broker {b.broker_id} has the node id of a voter (a broker and a controller in one "
                "process is not converted)"
            )
        seen[key] = b
        p.brokers.append(b)
    referenced = sorted({r for t in cluster.topics.values() for part in t.partitions.values() for r in part.replicas})
    if broker_dirs:
        have = {b.broker_id for b in p.brokers}
        missing = [r for r in referenced if r not in have]
        if missing:
            p.notes.append(f"note: no --broker-dir given for broker(s) {missing}, which hold replicas")
    if cluster.orphan_configs:
        p.notes.append(f"note: config znodes of topics that do not exist, skipped: {', '.join(cluster.orphan_configs)}")
    taken = [b.old.directory_id for b in p.brokers if b.old.directory_id]
    for i in sorted(targets):
        p.controller_dir_ids[i] = generate_directory_id(taken)
        taken.append(p.controller_dir_ids[i])
    for b in p.brokers:
        did = b.old.directory_id or generate_directory_id(taken)
        taken.append(did)
        b.new = MetaProperties(1, cluster.cluster_id, b.broker_id, did, dict(b.old.other))
    return p


def write(p: Plan) -> None:
    """Writes the controller directories, then rewrites the brokers' meta.properties."""
    cid = p.cluster.cluster_id
    now_ms = int(time.time() * 1000)
    for i, target in sorted(p.controllers.items()):
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".{target.name}.kraftkit-migrate"
        if tmp.exists():
            shutil.rmtree(tmp)
        part = tmp / METADATA_PARTITION
        part.mkdir(parents=True)
        meta = MetaProperties(1, cid, i, p.controller_dir_ids[i])
        write_file_atomic(tmp / META_PROPERTIES, meta.to_text().encode("utf-8"))
        p.image.write_snapshot(part, p.snapshot_id, last_contained_log_timestamp=now_ms, voters=None)
        fsync_dir(part)
        fsync_dir(tmp)
        if target.exists() or target.is_symlink():
            raise ConversionInputError(f"{target}: exists already (never overwritten)")
        os.rename(tmp, target)
        fsync_dir(target.parent)
        p.written.append(str(target))
    for b in p.brokers:
        assert b.new is not None
        write_file_atomic(b.path / (META_PROPERTIES + BACKUP_SUFFIX), b.old_text)
        write_file_atomic(b.path / META_PROPERTIES, b.new.to_text().encode("utf-8"))
        fsync_dir(b.path)
        p.written.append(str(b.path / META_PROPERTIES))


def topic_id_text(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``."""
    import base64

    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")
