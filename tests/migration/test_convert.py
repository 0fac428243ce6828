"""The offline ZooKeeper-to-KRaft conversion without Java: znodes as Kafka 3.9's ``ZkData`` writes
them (the JSON below is written out by hand from ``ZkData.scala``'s encoders), the records made
from them decoded back and compared with what the JSON said, the snapshot written and read back;
hostile znodes (bad JSON, too big, too many, wrong types) refused with the znode named; the CLI's
exit codes."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import pytest

from kraftkit._core import decode_metadata_record, encode_metadata_record
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
from kraftkit.cli.main import main
from kraftkit.features.storage import MetaProperties
from kraftkit.metadata.image import load_snapshot, replay_records
from kraftkit.migration import convert, zk_reader
from kraftkit.migration.zk_reader import DictSource, ZkInputError, ZkLimits, read_cluster

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
ORDERS_ID = uuid.UUID("6f1f4bd2-0c1b-4d46-9c43-4a1d3b5e1a01")
AUDIT_ID = uuid.UUID("0a9d64f1-6a2e-4b0c-8f7e-12ab34cd56ef")


def kid(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def j(obj) -> bytes:
    return json.dumps(obj).encode()


def zk_nodes() -> dict:
    """A stopped two-broker 3.9 cluster: ``orders`` (3 partitions, replication 2), ``audit`` (1
    partition whose state znode is missing), topic configs, a producer id block."""
    return {
        "/cluster/id": j({"version": "1", "id": CLUSTER_ID}),
        "/controller_epoch": b"7",
        "/brokers/topics/orders": j({"partitions": {"0": [1, 2], "1": [2, 1], "2": [1, 2]}, "topic_id": kid(ORDERS_ID),
                                     "adding_replicas": {}, "removing_replicas": {}, "version": 3}),
        "/brokers/topics/orders/partitions/0/state": (
            j({"controller_epoch": 7, "leader": 2, "version": 1, "leader_epoch": 4, "isr": [2]}), 9),
        "/brokers/topics/orders/partitions/1/state": (
            j({"controller_epoch": 7, "leader": 2, "version": 1, "leader_epoch": 1, "isr": [2, 1]}), 3),
        "/brokers/topics/orders/partitions/2/state": (
            j({"controller_epoch": 7, "leader": -1, "version": 1, "leader_epoch": 6, "isr": [1],
               "leader_recovery_state": 1}), 12),
        "/brokers/topics/audit": j({"partitions": {"0": [2]}, "topic_id": kid(AUDIT_ID), "version": 3}),
        "/config/topics/orders": j({"version": 1, "config": {"retention.ms": "86400000", "cleanup.policy": "compact"}}),
        "/config/topics/audit": j({"version": 1, "config": {}}),
        "/config/changes/config_change_0000000000": j({"version": 2, "entity_path": "topics/orders"}),
        "/latest_producer_id_block": j({"version": 1, "broker": 1, "block_start": "1000", "block_end": "1999"}),
        "/feature": j({"features": {}, "version": 2, "status": 1}),
        "/admin/delete_topics": b"",
        "/config/brokers": b"",
    }


def decoded(recs):
    """Each record encoded at its version and decoded back: (type, data)."""
    out = []
    for k, v, d in recs:
        key, _ver, data = decode_metadata_record(encode_metadata_record(k, v, d))
        out.append((key, data))
    return out


def test_znodes_become_the_records_kafkas_migration_wrote():
    cluster = read_cluster(DictSource(zk_nodes()))
    assert cluster.cluster_id == CLUSTER_ID
    mv = convert.metadata_version_of_ibp("3.9")
    assert mv.name == "3.9-IV0"
    recs = decoded(convert.records(cluster, mv))
    features = {d["Name"]: d["FeatureLevel"] for k, d in recs if k == FEATURE_LEVEL}
    assert features["metadata.version"] == mv.level
    topics = {d["Name"]: d["TopicId"] for k, d in recs if k == TOPIC}
    assert topics == {"orders": ORDERS_ID, "audit": AUDIT_ID}
    parts = {(d["TopicId"], d["PartitionId"]): d for k, d in recs if k == PARTITION}
    nodes = zk_nodes()
    for p in range(3):
        want = json.loads(nodes[f"/brokers/topics/orders/partitions/{p}/state"][0])
        got = parts[(ORDERS_ID, p)]
        assert got["Replicas"] == json.loads(nodes["/brokers/topics/orders"])["partitions"][str(p)]
        assert got["Isr"] == want["isr"]
        assert got["Leader"] == want["leader"]
        assert got["LeaderEpoch"] == want["leader_epoch"]
        assert got["PartitionEpoch"] == nodes[f"/brokers/topics/orders/partitions/{p}/state"][1]
        assert got["LeaderRecoveryState"] == want.get("leader_recovery_state", 0)
    # no state znode: ZkTopicMigrationClient's defaults
    a = parts[(AUDIT_ID, 0)]
    assert (a["Replicas"], a["Isr"], a["Leader"], a["LeaderEpoch"], a["PartitionEpoch"]) == ([2], [2], 2, 0, 0)
    configs = {(d["ResourceType"], d["ResourceName"], d["Name"]): d["Value"] for k, d in recs if k == CONFIG}
    assert configs == {(2, "orders", "retention.ms"): "86400000", (2, "orders", "cleanup.policy"): "compact"}
    (pid,) = [d for k, d in recs if k == PRODUCER_IDS]
    assert (pid["BrokerId"], pid["BrokerEpoch"], pid["NextProducerId"]) == (1, -1, 2000)


def test_the_written_directories_hold_that_metadata(tmp_path):
    brokers = []
    for b in (1, 2):
        d = tmp_path / f"broker-{b}"
        d.mkdir()
        (d / "meta.properties").write_text(f"#\n#Sat Nov 28 00:00:00 UTC 2026\nbroker.id={b}\nversion=0\n"
                                           f"cluster.id={CLUSTER_ID}\n")
        (d / "orders-0").mkdir()
        brokers.append(d)
    cluster = read_cluster(DictSource(zk_nodes()))
    p = convert.plan(cluster, "3.9-IV0", {3000: tmp_path / "ctl"}, "3000@127.0.0.1:9093", brokers)
    convert.write(p)
    meta = MetaProperties.read(tmp_path / "ctl" / "meta.properties")
    assert (meta.version, meta.cluster_id, meta.node_id) == (1, CLUSTER_ID, 3000) and meta.directory_id
    (snap,) = (tmp_path / "ctl" / "__cluster_metadata-0").glob("*.checkpoint")
    assert snap.name == p.snapshot_id.file_name
    img = load_snapshot(snap)
    s = img.sections()
    assert s["features"]["metadataVersion"] == "3.9-IV0"
    assert s["topics"]["orders"]["id"] == kid(ORDERS_ID)
    p2 = s["topics"]["orders"]["partitions"]["2"]
    assert (p2["Replicas"], p2["Isr"], p2["Leader"], p2["LeaderEpoch"], p2["PartitionEpoch"]) == ([1, 2], [1], -1, 6, 12)
    # no directories given: DirectoryId.MIGRATING (Uuid 0, 0) for each replica, as Kafka's
    # PartitionRegistration.defaultToMigrating makes it; each broker assigns its own
    assert p2["Directories"] == ["AAAAAAAAAAAAAAAAAAAAAA"] * 2
    assert s["configs"]["TOPIC:orders"] == {"cleanup.policy": "compact", "retention.ms": "86400000"}
    assert s["producerIds"]["nextProducerId"] == 2000
    ids = {meta.directory_id}
    for b, d in zip((1, 2), brokers):
        m = MetaProperties.read(d / "meta.properties")
        assert (m.version, m.cluster_id, m.node_id) == (1, CLUSTER_ID, b)
        assert m.directory_id not in ids
        ids.add(m.directory_id)
        assert "broker.id=" in (d / "meta.properties.zk-backup").read_text()
        assert (d / "orders-0").is_dir()
    assert not [x for x in tmp_path.iterdir() if x.name.startswith(".")]


SALT, STORED, SERVER = b"salt-bytes-16...", bytes(range(32)), bytes(range(32, 64))


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def quota_nodes() -> dict:
    """Quotas and SCRAM credentials as ``ZkAdminManager`` and ``ConfigCommand`` store them: a sanitized
    user name (``@`` as ``%40``), default entities as ``<default>``, a user's client id, an IP."""
    cred = f"salt={b64(SALT)},stored_key={b64(STORED)},server_key={b64(SERVER)},iterations=8192"
    return {
        **zk_nodes(),
        "/config/users/alice%40corp": j({"version": 1, "config": {"SCRAM-SHA-256": cred,
                                                                   "producer_byte_rate": "1024"}}),
        "/config/users/bob": j({"version": 1, "config": {"SCRAM-SHA-512": cred}}),
        "/config/users/<default>": j({"version": 1, "config": {"consumer_byte_rate": "2048.0"}}),
        "/config/users/carol": b"",  # only its client id has a quota: Kafka leaves it empty
        "/config/users/carol/clients/<default>": j({"version": 1, "config": {"producer_byte_rate": "5"}}),
        "/config/users/bob/clients/app+1": j({"version": 1, "config": {"request_percentage": "50.5"}}),
        "/config/clients/<default>": j({"version": 1, "config": {"controller_mutation_rate": "1e1"}}),
        "/config/ips/10.0.0.1": j({"version": 1, "config": {"connection_creation_rate": "7"}}),
    }


def test_quotas_and_scram_credentials_become_their_records():
    cluster = read_cluster(DictSource(quota_nodes()))
    recs = decoded(convert.records(cluster, convert.metadata_version_of_ibp("3.9")))
    quotas = {(tuple((e["EntityType"], e["EntityName"]) for e in d["Entity"]), d["Key"]): d["Value"]
              for k, d in recs if k == CLIENT_QUOTA and not d["Remove"]}
    assert quotas[(("user", "alice@corp"),), "producer_byte_rate"] == 1024.0
    assert quotas[(("user", None),), "consumer_byte_rate"] == 2048.0
    assert quotas[(("user", "bob"), ("client-id", "app 1")), "request_percentage"] == 50.5
    assert quotas[(("client-id", None),), "controller_mutation_rate"] == 10.0
    assert quotas[(("ip", "10.0.0.1"),), "connection_creation_rate"] == 7.0
    assert quotas[(("user", "carol"), ("client-id", None)), "producer_byte_rate"] == 5.0
    assert len(quotas) == 6
    scram = {(d["Name"], d["Mechanism"]): d for k, d in recs if k == USER_SCRAM_CREDENTIAL}
    assert set(scram) == {("alice@corp", 1), ("bob", 2)}
    for d in scram.values():
        assert (bytes(d["Salt"]), bytes(d["StoredKey"]), bytes(d["ServerKey"]), d["Iterations"]) == (
            SALT, STORED, SERVER, 8192)
    img = replay_records(convert.records(cluster, convert.metadata_version_of_ibp("3.9")))
    assert len(img.scram) == 2 and len(img.client_quotas) == 6


@pytest.mark.parametrize("path,data,said", [
    ("/config/users/bob", j({"version": 1, "config": {"producer_byte_rate": "lots"}}),
     "/config/users/bob: quota 'producer_byte_rate' is not a number"),
    ("/config/users/bob", j({"version": 1, "config": {"producer_byte_rate": "0x1p3"}}),
     "/config/users/bob: quota 'producer_byte_rate' is not a number"),
    ("/config/users/bob", j({"version": 1, "config": {"SCRAM-SHA-256": "salt=AA==,iterations=1"}}),
     "/config/users/bob: SCRAM-SHA-256 is not a SCRAM credential"),
    ("/config/users/bob", j({"version": 1, "config": {"SCRAM-SHA-256": "salt=*,stored_key=A,server_key=A,"
                                                                       "iterations=1"}}),
     "/config/users/bob: SCRAM-SHA-256: salt, stored_key or server_key is not base64"),
    ("/config/users/bob", j({"version": 1, "config": {"SCRAM-SHA-256": "salt=,stored_key=,server_key=,"
                                                                       "iterations=99999999999"}}),
     "/config/users/bob: SCRAM-SHA-256: iterations is not a whole number"),
    ("/config/users/bad%zz", j({"version": 1, "config": {"producer_byte_rate": "1"}}),
     "/config/users/bad%zz: 'bad%zz' is not a sanitized name"),
    ("/config/users/bad%ff", j({"version": 1, "config": {"producer_byte_rate": "1"}}),
     "/config/users/bad%ff: 'bad%ff' does not decode to UTF-8 text"),
    ("/config/clients/c", j({"version": 1, "config": {"SCRAM-SHA-512": "x"}}),
     "/config/clients/c: a SCRAM credential outside /config/users"),
    ("/config/users/bob/clients/c", b"{", "/config/users/bob/clients/c: not JSON"),
])
def test_a_hostile_quota_or_credential_znode_is_refused_naming_it(path, data, said):
    with pytest.raises(ZkInputError) as e:
        read_cluster(DictSource({**quota_nodes(), path: data}))
    assert str(e.value).startswith(said), str(e.value)


def acl(principal, operation, permission="Allow", host="*"):
    return {"principal": principal, "permissionType": permission, "operation": operation, "host": host}


def acl_nodes() -> dict:
    """ACLs as ``AclAuthorizer`` stores them: literal patterns under /kafka-acl, prefixed ones under
    /kafka-acl-extended/prefixed, resource types Pascal-case; one ACL given twice."""
    return {
        **zk_nodes(),
        "/kafka-acl/Topic/orders": j({"version": 1, "acls": [
            acl("User:alice", "Read"), acl("User:alice", "Read"),
            acl("User:mallory", "Write", "Deny", "10.0.0.1")]}),
        "/kafka-acl/Group/g1": j({"version": 1, "acls": [acl("User:alice", "Read")]}),
        "/kafka-acl/Cluster/kafka-cluster": j({"version": 1, "acls": [acl("User:admin", "AlterConfigs")]}),
        "/kafka-acl/TransactionalId/tx-1": j({"version": 1, "acls": [acl("User:alice", "WRITE", "ALLOW")]}),
        "/kafka-acl/Topic/gone": b"",
        "/kafka-acl-extended/prefixed/Topic/aud": j({"version": 1, "acls": [acl("User:bob@corp", "Describe")]}),
    }


def test_acls_become_their_records():
    cluster = read_cluster(DictSource(acl_nodes()))
    recs = decoded(convert.records(cluster, convert.metadata_version_of_ibp("3.9")))
    got = [d for k, d in recs if k == ACCESS_CONTROL_ENTRY]
    # codes: ResourceType TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5; PatternType LITERAL 3,
    # PREFIXED 4; AclOperation READ 3, WRITE 4, DESCRIBE 8, ALTER_CONFIGS 11; AclPermissionType DENY 2, ALLOW 3
    assert sorted((d["ResourceType"], d["ResourceName"], d["PatternType"], d["Principal"], d["Host"], d["Operation"],
                   d["PermissionType"]) for d in got) == sorted([
        (2, "orders", 3, "User:alice", "*", 3, 3),
        (2, "orders", 3, "User:mallory", "10.0.0.1", 4, 2),
        (3, "g1", 3, "User:alice", "*", 3, 3),
        (4, "kafka-cluster", 3, "User:admin", "*", 11, 3),
        (5, "tx-1", 3, "User:alice", "*", 4, 3),
        (2, "aud", 4, "User:bob@corp", "*", 8, 3),
    ])
    ids = {d["Id"] for d in got}
    assert len(ids) == 6 and uuid.UUID(int=0) not in ids
    img = replay_records(convert.records(cluster, convert.metadata_version_of_ibp("3.9")))
    assert len(img.acls) == 6


@pytest.mark.parametrize("path,data,said", [
    ("/kafka-acl/Topik/x", j({"version": 1, "acls": []}), "/kafka-acl/Topik: \"Topik\" is not a resource type"),
    ("/kafka-acl/Any/x", j({"version": 1, "acls": []}), "/kafka-acl/Any: \"Any\" is not a resource type"),
    ("/kafka-acl/Topic/x", j({"version": 2, "acls": []}), "/kafka-acl/Topic/x: ACL version 2, not 1"),
    ("/kafka-acl/Topic/x", j({"version": 1, "acls": {}}), "/kafka-acl/Topic/x: acls is not a list"),
    ("/kafka-acl/Topic/x", j({"version": 1, "acls": [acl("alice", "Read")]}),
     "/kafka-acl/Topic/x: principal \"alice\" is not TYPE:NAME"),
    ("/kafka-acl/Topic/x", j({"version": 1, "acls": [acl("User:a", "Reed")]}),
     "/kafka-acl/Topic/x: \"Reed\" is not an ACL operation"),
    ("/kafka-acl/Topic/x", j({"version": 1, "acls": [acl("User:a", "Read", "Maybe")]}),
     "/kafka-acl/Topic/x: \"Maybe\" is not an ACL permission type"),
    ("/kafka-acl/Topic/x", j({"version": 1, "acls": [acl("User:a", "Read", host=5)]}),
     "/kafka-acl/Topic/x: host 5 is not a string"),
    ("/kafka-acl-extended/prefixed/Topic/x", b"{{", "/kafka-acl-extended/prefixed/Topic/x: not JSON"),
])
def test_a_hostile_acl_znode_is_refused_naming_it(path, data, said):
    with pytest.raises(ZkInputError) as e:
        read_cluster(DictSource({**acl_nodes(), path: data}))
    assert str(e.value).startswith(said), str(e.value)


def test_finalized_features_of_the_feature_znode_are_carried_as_format_would_take_them(tmp_path):
    nodes = {**zk_nodes(), "/feature": j({"features": {"group.version": {"max_version_level": 1}}, "version": 2,
                                          "status": 1})}
    recs = decoded(convert.records(read_cluster(DictSource(nodes)), convert.metadata_version_of_ibp("3.9")))
    levels = {d["Name"]: d["FeatureLevel"] for k, d in recs if k == FEATURE_LEVEL}
    assert levels == {"metadata.version": convert.metadata_version_of_ibp("3.9").level, "group.version": 1}
    disabled = {**nodes, "/feature": j({"features": {"group.version": {"max_version_level": 1}}, "version": 2,
                                        "status": 0})}
    assert read_cluster(DictSource(disabled)).finalized_features == {}
    unknown = {**nodes, "/feature": j({"features": {"x.version": {"max_version_level": 1}}, "version": 2,
                                       "status": 1})}
    with pytest.raises(convert.ConversionError, match=r"^/feature: Unsupported feature: x.version"):
        convert.plan(read_cluster(DictSource(unknown)), "3.9", {1: tmp_path / "c"}, "1@h:1")


@pytest.mark.parametrize("data,said", [
    (j({"features": {}, "version": 3, "status": 1}), "/feature: unsupported version 3"),
    (j({"features": {}, "version": 2, "status": 7}), "/feature: status 7 is not 0 (disabled) or 1 (enabled)"),
    (j({"features": {"g": {}}, "version": 2, "status": 1}), "/feature: feature 'g' has no max_version_level"),
    (j({"features": {"g": {"max_version_level": 0}}, "version": 2, "status": 1}),
     "/feature: feature 'g''s max_version_level is out of range"),
    (j({"features": {"g": {"max_version_level": 2}}, "version": 1, "status": 1}),
     "/feature: feature 'g''s min_version_level is not a whole number"),
    (j({"version": 2, "status": 1}), "/feature: features is not a JSON object"),
])
def test_a_hostile_feature_znode_is_refused(data, said):
    with pytest.raises(ZkInputError) as e:
        read_cluster(DictSource({**zk_nodes(), "/feature": data}))
    assert str(e.value).startswith(said), str(e.value)


def test_dynamic_broker_configs_become_broker_config_records():
    nodes = {**zk_nodes(), "/config/brokers/<default>": j({"version": 1, "config": {"log.cleaner.threads": "2"}}),
             "/config/brokers/1": j({"version": 1, "config": {"log.cleaner.backoff.ms": "20000",
                                                             "message.max.bytes": "2000000"}}),
             "/config/brokers/2": b""}
    recs = decoded(convert.records(read_cluster(DictSource(nodes)), convert.metadata_version_of_ibp("3.9")))
    got = {(d["ResourceName"], d["Name"]): d["Value"] for k, d in recs if k == CONFIG and d["ResourceType"] == 4}
    assert got == {("", "log.cleaner.threads"): "2", ("1", "log.cleaner.backoff.ms"): "20000",
                   ("1", "message.max.bytes"): "2000000"}
    with pytest.raises(ZkInputError, match=r"^/config/brokers/01: '01' is neither a broker id nor <default>"):
        read_cluster(DictSource({**nodes, "/config/brokers/01": j({"version": 1, "config": {}})}))


def _with(**changes) -> dict:
    nodes = zk_nodes()
    for k, v in changes.items():
        path = k
        if v is None:
            nodes.pop(path, None)
        else:
            nodes[path] = v
    return nodes


@pytest.mark.parametrize("path,data,said", [
    ("/brokers/topics/orders", b"{not json", "/brokers/topics/orders: not JSON"),
    ("/brokers/topics/orders", b"\xff\xfe", "/brokers/topics/orders: not UTF-8"),
    ("/brokers/topics/orders", j([1, 2]), "/brokers/topics/orders: the znode is not a JSON object"),
    ("/brokers/topics/orders", j({"partitions": {"0": [1, "2"]}, "topic_id": kid(ORDERS_ID)}),
     "/brokers/topics/orders: partition 0's replicas entry is not a whole number"),
    ("/brokers/topics/orders", j({"partitions": {"0": [1, 1]}, "topic_id": kid(ORDERS_ID)}),
     "/brokers/topics/orders: partition 0's replicas names a broker twice"),
    ("/brokers/topics/orders", j({"partitions": {"0": [1], "2": [1]}, "topic_id": kid(ORDERS_ID)}),
     "/brokers/topics/orders: partitions are not numbered 0 to 1"),
    ("/brokers/topics/orders", j({"partitions": {"x": [1]}, "topic_id": kid(ORDERS_ID)}),
     "/brokers/topics/orders: partition 'x' is not a partition number"),
    ("/brokers/topics/orders", j({"partitions": {"0": []}, "topic_id": kid(ORDERS_ID)}),
     "/brokers/topics/orders: partition 0 has no replicas"),
    ("/brokers/topics/orders", j({"partitions": {"0": [1]}, "topic_id": "nope"}),
     "/brokers/topics/orders: topic_id is not a Kafka Uuid"),
    ("/brokers/topics/orders/partitions/0/state", j({"leader": 1, "leader_epoch": 2**40, "isr": [1]}),
     "/brokers/topics/orders/partitions/0/state: leader_epoch is out of range"),
    ("/brokers/topics/orders/partitions/0/state", j({"leader": 1, "isr": [1]}),
     "/brokers/topics/orders/partitions/0/state: no 'leader_epoch' in it"),
    ("/brokers/topics/orders/partitions/0/state", b"[" * 100_000,
     "/brokers/topics/orders/partitions/0/state: not JSON"),
    ("/config/topics/orders", j({"version": 1, "config": {"retention.ms": 5}}),
     "/config/topics/orders: config 'retention.ms' is not a string"),
    ("/config/topics/orders", b"NaN", "/config/topics/orders: not JSON"),
    ("/latest_producer_id_block", j({"broker": 1, "block_start": "x", "block_end": "1"}),
     "/latest_producer_id_block: block_start and block_end are not numbers"),
    ("/cluster/id", j({"version": "1"}), "/cluster/id: no cluster id string in it"),
    ("/brokers/topics/bad name", j({"partitions": {}}), "/brokers/topics/bad name: not a legal Kafka topic name"),
])
def test_a_hostile_znode_is_refused_naming_it(path, data, said):
    with pytest.raises(ZkInputError) as e:
        read_cluster(DictSource(_with(**{path: data})))
    assert str(e.value).startswith(said), str(e.value)


def test_bounds_name_the_znode():
    big = {**zk_nodes(), "/config/topics/orders": j({"version": 1, "config": {"x": "y" * 5000}})}
    with pytest.raises(ZkInputError, match=r"^/config/topics/orders: \d+ bytes, more than 4096 \(the bound\)"):
        read_cluster(DictSource(big), ZkLimits(max_znode_bytes=4096))
    many = zk_nodes()
    for i in range(20):
        many[f"/brokers/topics/t{i}"] = j({"partitions": {"0": [1]}, "topic_id": kid(uuid.uuid4())})
    with pytest.raises(ZkInputError, match=r"^/brokers/topics: 22 topics, more than 10"):
        read_cluster(DictSource(many), ZkLimits(max_topics=10))
    with pytest.raises(ZkInputError, match=r"^/brokers/topics: 22 children, more than 5"):
        read_cluster(DictSource(many), ZkLimits(max_children=5))
    with pytest.raises(ZkInputError, match=r"^/brokers/topics/\S+: more than 3 partitions in all"):
        read_cluster(DictSource(zk_nodes()), ZkLimits(max_partitions=3))
    with pytest.raises(ZkInputError, match=r"^/\S*: more than 3 znodes to read"):
        read_cluster(DictSource(zk_nodes()), ZkLimits(max_znodes=3))


@pytest.mark.parametrize("changes,said", [
    ({"/admin/reassign_partitions": j({"version": 1, "partitions": []})}, "partition reassignments in progress"),
    ({"/brokers/topics/audit": j({"partitions": {"0": [2, 1]}, "adding_replicas": {"0": [1]},
                                  "topic_id": kid(AUDIT_ID)})}, "partition reassignments in progress (audit-0)"),
    ({"/admin/delete_topics/audit": b""}, "topic deletions in progress (/admin/delete_topics: audit)"),
    ({"/brokers/topics/audit": j({"partitions": {"0": [2]}})}, "topics without a topic id (audit)"),
    ({"/config/brokers/1": j({"version": 1, "config": {"listener.name.x.ssl.keystore.password": "[encrypted]"}})},
     "dynamic broker password configs (/config/brokers/1 listener.name.x.ssl.keystore.password)"),
    ({"/kafka-acl-extended/match/Topic/x": j({"version": 1, "acls": []})},
     "ACLs of a pattern type Kafka does not store (/kafka-acl-extended/match)"),
    ({"/migration": j({"version": 0})}, "a ZooKeeper-to-KRaft migration already begun"),
])
def test_what_is_not_carried_is_refused_saying_why(changes, said, tmp_path):
    cluster = read_cluster(DictSource(_with(**changes)))
    with pytest.raises(convert.ConversionError) as e:
        convert.plan(cluster, "3.9", {1: tmp_path / "c"}, "1@h:1")
    assert "cannot convert: " in str(e.value) and said in str(e.value), str(e.value)
    assert not (tmp_path / "c").exists()


def token_nodes() -> dict:
    """Delegation tokens as ``DelegationTokenManagerZk.toJsonCompatibleMap`` stores them (principals
    sanitized by ``Sanitizer.sanitize``; version 3 with the requester, version 2 without it, whose
    requester is its owner); an empty token znode (Kafka reads it as no token)."""
    return {
        **zk_nodes(),
        "/delegation_token/token_changes/token_change_0000000000": b"Ab3dE_fGh-IjKlMnOpQrSt",
        "/delegation_token/tokens/Ab3dE_fGh-IjKlMnOpQrSt": j({
            "version": 3, "owner": "User%3Aalice%40corp", "tokenRequester": "User%3Aadmin",
            "renewers": ["User%3Abob", "Group%3Aops+team"], "issueTimestamp": 1764288000000,
            "maxTimestamp": 1764892800000, "expiryTimestamp": 1764374400000, "tokenId": "Ab3dE_fGh-IjKlMnOpQrSt"}),
        "/delegation_token/tokens/old": j({
            "version": 2, "owner": "User%3Acarol", "renewers": [], "issueTimestamp": 1, "maxTimestamp": 3,
            "expiryTimestamp": 2, "tokenId": "old"}),
        "/delegation_token/tokens/blank": b"",
    }


#: the DelegationTokenRecords of token_nodes (the principals desanitized by hand: %40 "@", %3A ":", + " ")
TOKEN_RECORDS = [
    {"Owner": "User:alice@corp", "Requester": "User:admin", "Renewers": ["User:bob", "Group:ops team"],
     "IssueTimestamp": 1764288000000, "MaxTimestamp": 1764892800000, "ExpirationTimestamp": 1764374400000,
     "TokenId": "Ab3dE_fGh-IjKlMnOpQrSt"},
    {"Owner": "User:carol", "Requester": "User:carol", "Renewers": [], "IssueTimestamp": 1, "MaxTimestamp": 3,
     "ExpirationTimestamp": 2, "TokenId": "old"},
]


def test_delegation_tokens_become_delegation_token_records_and_the_snapshot_holds_them(tmp_path):
    cluster = read_cluster(DictSource(token_nodes()))
    recs = decoded(convert.records(cluster, convert.metadata_version_of_ibp("3.9")))
    assert [d for k, d in recs if k == DELEGATION_TOKEN] == TOKEN_RECORDS
    assert recs[-2:] == [(DELEGATION_TOKEN, d) for d in TOKEN_RECORDS]  # (migrateDelegationTokens comes last)
    p = convert.plan(cluster, "3.9", {3000: tmp_path / "ctl"}, "3000@127.0.0.1:9093")
    assert p.counts()["delegationTokens"] == 2 and p.image.delegation_tokens == {
        t["TokenId"]: t for t in TOKEN_RECORDS}
    assert "2 delegation token(s)" in p.report()[1]
    convert.write(p)
    (snap,) = (tmp_path / "ctl" / "__cluster_metadata-0").glob("*.checkpoint")
    assert load_snapshot(snap).delegation_tokens == {t["TokenId"]: t for t in TOKEN_RECORDS}


def test_delegation_tokens_below_metadata_version_3_6_iv2_are_refused_saying_why(tmp_path):
    """A DelegationTokenRecord needs metadata.version 3.6-IV2 (``isDelegationTokenSupported``): at
    3.5 the tokens could not be kept, so the conversion (and the live copy) refuses them."""
    cluster = read_cluster(DictSource(token_nodes()))
    with pytest.raises(convert.ConversionError) as e:
        convert.plan(cluster, "3.5", {1: tmp_path / "c"}, "1@h:1")
    said = str(e.value)
    assert said.startswith("cannot convert: delegation tokens (/delegation_token/tokens/Ab3dE_fGh-IjKlMnOpQrSt, "
                           "/delegation_token/tokens/old) at metadata.version 3.5-IV2, which cannot hold them"), said
    assert "inter.broker.protocol.version to 3.6" in said and not (tmp_path / "c").exists()
    with pytest.raises(convert.ConversionError, match=r"at metadata\.version 3\.5-IV2"):
        convert.records(cluster, convert.metadata_version_of_ibp("3.5"))
    # at 3.6-IV2 they are carried; without tokens 3.5 is fine
    assert len(convert.plan(cluster, "3.6", {1: tmp_path / "c"}, "1@h:1").image.delegation_tokens) == 2
    convert.plan(read_cluster(DictSource(zk_nodes())), "3.5", {1: tmp_path / "c"}, "1@h:1")


TOKEN = "/delegation_token/tokens/t1"
GOOD_TOKEN = {"version": 3, "owner": "User%3Aa", "tokenRequester": "User%3Aa", "renewers": [], "issueTimestamp": 1,
              "maxTimestamp": 2, "expiryTimestamp": 2, "tokenId": "t1"}


@pytest.mark.parametrize("data,said", [
    (b"{not json", "not JSON"),
    (j([1]), "the znode is not a JSON object"),
    (j({**GOOD_TOKEN, "version": 4}), "version 4, not 1 to 3"),
    (j({**GOOD_TOKEN, "version": "3"}), "version is not a whole number"),
    (j({k: v for k, v in GOOD_TOKEN.items() if k != "owner"}), "no 'owner' in it"),
    (j({k: v for k, v in GOOD_TOKEN.items() if k != "tokenRequester"}), "no 'tokenRequester' in it (version 3)"),
    (j({**GOOD_TOKEN, "owner": "alice"}), 'owner "alice" is not a principal (TYPE:NAME)'),
    (j({**GOOD_TOKEN, "owner": 7}), "owner is not a string"),
    (j({**GOOD_TOKEN, "owner": "User%3"}), "is not a sanitized name (a malformed %-escape)"),
    (j({**GOOD_TOKEN, "renewers": "User%3Ab"}), "renewers is not a list"),
    (j({**GOOD_TOKEN, "renewers": ["bob"]}), 'a renewer "bob" is not a principal'),
    (j({**GOOD_TOKEN, "maxTimestamp": "2"}), "maxTimestamp is not a whole number"),
    (j({**GOOD_TOKEN, "expiryTimestamp": 2**63}), "expiryTimestamp is out of range"),
    (j({**GOOD_TOKEN, "issueTimestamp": 1.5}), "issueTimestamp is not a whole number"),
    (j({**GOOD_TOKEN, "tokenId": "t2"}), "tokenId \"t2\" is not the znode's name"),
    (j({**GOOD_TOKEN, "tokenId": None}), "tokenId is not a string"),
])
def test_a_hostile_delegation_token_znode_is_refused_naming_it(data, said):
    with pytest.raises(ZkInputError) as e:
        read_cluster(DictSource({**zk_nodes(), TOKEN: data}))
    assert str(e.value).startswith(f"{TOKEN}: ") and said in str(e.value), str(e.value)


def test_the_delegation_token_znodes_are_bounded():
    small = {"/cluster/id": j({"version": "1", "id": CLUSTER_ID}), TOKEN: j(GOOD_TOKEN)}
    assert len(small["/cluster/id"]) < 100 < len(small[TOKEN])
    with pytest.raises(ZkInputError, match=rf"^{TOKEN}: \d+ bytes, more than 100 \(the bound\)"):
        read_cluster(DictSource(small), ZkLimits(max_znode_bytes=100))
    with pytest.raises(ZkInputError, match=r"^/delegation_token/tokens: 30 children, more than 25"):
        read_cluster(DictSource({**zk_nodes(), **{f"/delegation_token/tokens/t{i}": b"" for i in range(30)}}),
                     ZkLimits(max_children=25))


def test_metadata_version_of_the_inter_broker_protocol():
    assert convert.metadata_version_of_ibp("3.9").name == "3.9-IV0"
    assert convert.metadata_version_of_ibp("3.7-IV4").name == "3.7-IV4"
    assert convert.metadata_version_of_ibp("3.6").name == "3.6-IV2"
    with pytest.raises(convert.ConversionInputError, match="inter.broker.protocol.version '2.x'"):
        convert.metadata_version_of_ibp("2.x")
    with pytest.raises(convert.ConversionError, match="too old"):
        convert.metadata_version_of_ibp("3.0")


# ------------------------------------------------------------------ the command


@pytest.fixture
def fake_zk(monkeypatch):
    nodes = zk_nodes()
    monkeypatch.setattr(zk_reader, "KazooSource", lambda connect, timeout: DictSource(nodes))
    return nodes


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def base(tmp_path: Path, *more) -> list:
    return ["migrate", "from-zookeeper", "--zookeeper", "zk:2181", "--controller-dir", f"3000={tmp_path / 'ctl'}",
            "--voters", "3000@127.0.0.1:9093", "--inter-broker-protocol-version", "3.9", *more]


def test_the_command_writes_and_an_existing_controller_dir_is_exit_2(fake_zk, tmp_path, capsys):
    code, out, err = run(capsys, *base(tmp_path, "--dry-run"))
    assert code == 0, err
    assert "carried: 2 topic(s) with their topic ids, 4 partition(s)" in out and "dry run: nothing written" in out
    assert not (tmp_path / "ctl").exists()
    code, out, err = run(capsys, *base(tmp_path))
    assert code == 0, err
    assert f"wrote controller 3000: {tmp_path / 'ctl'}" in out
    code, out, err = run(capsys, *base(tmp_path))
    assert code == 2
    assert err == f"kraftkit migrate from-zookeeper: {tmp_path / 'ctl'}: exists already (never overwritten)\n"


def test_the_command_refuses_what_it_cannot_carry_with_1(fake_zk, tmp_path, capsys):
    fake_zk["/config/brokers/<default>"] = j({"version": 1, "config": {"sasl.jaas.config": "[encrypted]"}})
    code, out, err = run(capsys, *base(tmp_path))
    assert code == 1
    assert err.startswith("kraftkit migrate from-zookeeper: cannot convert: dynamic broker password configs "
                          "(/config/brokers/<default> sasl.jaas.config)")
    assert "Traceback" not in err and not (tmp_path / "ctl").exists()


def test_a_hostile_znode_is_exit_1_naming_it(fake_zk, tmp_path, capsys):
    fake_zk["/brokers/topics/orders"] = b'{"partitions": '
    code, out, err = run(capsys, *base(tmp_path))
    assert code == 1
    assert err.startswith("kraftkit migrate from-zookeeper: /brokers/topics/orders: not JSON")


def test_bad_arguments_and_broker_dirs_are_exit_2(fake_zk, tmp_path, capsys):
    code, _, err = run(capsys, "migrate", "from-zookeeper", "--zookeeper", "zk:2181", "--controller-dir",
                       f"7={tmp_path / 'c'}", "--voters", "3000@h:1", "--inter-broker-protocol-version", "3.9")
    assert code == 2 and "node 7 is not among --voters" in err
    code, _, err = run(capsys, *base(tmp_path, "--broker-dir", tmp_path / "missing"))
    assert code == 2 and f"{tmp_path / 'missing'}: not a directory" in err
    other = tmp_path / "other"
    other.mkdir()
    (other / "meta.properties").write_text("version=0\nbroker.id=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAQ\n")
    code, _, err = run(capsys, *base(tmp_path, "--broker-dir", other))
    assert code == 1 and "cluster.id AAAAAAAAAAAAAAAAAAAAAQ, but ZooKeeper's cluster is" in err
    with pytest.raises(SystemExit) as e:
        main(["migrate", "from-zookeeper", "--zookeeper", "zk:2181", "--controller-dir", "x", "--voters", "1@h:1",
              "--inter-broker-protocol-version", "3.9"])
    assert e.value.code == 2
    assert not (tmp_path / "ctl").exists()


def test_an_unreachable_zookeeper_is_exit_2(tmp_path, capsys):
    from tests.harness.node import free_port

    port = free_port()
    code, _, err = run(capsys, "migrate", "from-zookeeper", "--zookeeper", f"127.0.0.1:{port}", "--controller-dir",
                       f"1={tmp_path / 'c'}", "--voters", "1@h:1", "--inter-broker-protocol-version", "3.9",
                       "--zookeeper-timeout", "1")
    assert code == 2
    assert err == f"kraftkit migrate from-zookeeper: 127.0.0.1:{port}: no ZooKeeper answered within 1 s\n"
