"""Dual writes (KIP-866, Kafka 3.9's ``KRaftMigrationZkWriter``): once the migration is in MIGRATION
the kraftkit controller takes topic creations and deletions, partition changes, topic and broker
configs and producer id blocks, and writes each committed change to ZooKeeper (a ZooKeeper in
memory here, :mod:`tests.migration._fake_zk`) in ZooKeeper's own JSON, every ``multi`` checking
``/controller_epoch`` and setting ``/migration`` to the offset written. Checked: what ZooKeeper
holds afterwards, read back by the converter's ZooKeeper reader and normalized here independently
of the writer, equals the KRaft image; the znodes' JSON is Kafka's (``ZkData``); a ZooKeeper-mode
controller that took ``/controller_epoch`` fails the next write and the driver claims ZooKeeper
again; failed writes are followed by a sync; a new active controller syncs what differs (topics
ZooKeeper has and KRaft not, states changed behind its back, configs of topics that do not exist);
delegation tokens ZooKeeper lost, holds extra or holds changed are brought back to the image's by a
sync, in ``DelegationTokenManagerZk``'s JSON with the token change notification; what is not
dual-written yet is refused, saying what."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid

import pytest

from kraftkit.metadata.image import uuid_text
from kraftkit.migration import driver as drv
from kraftkit.migration import zk_reader
from kraftkit.migration.zk_writer import ZkView, ZkWriter, changes, cluster_view, image_view
from kraftkit.protocol.messages import ApiKey, Errors
from tests.controller.test_registration import call, heartbeat
from tests.raft._cluster import CLUSTER_ID, running, wait_for

from ._fake_zk import TOKEN_ID, FakeZk, zk_cluster
from .test_driver import MV, log_records, start_migrating_controller, zk_registration

pytestmark = pytest.mark.timeout(120)

ZERO = uuid.UUID(int=0)
SET, DELETE = 0, 1


def zk_normalized(zk) -> dict:
    """What ZooKeeper holds, read by the converter's reader, as plain data."""
    c = zk_reader.read_cluster(zk)
    b = c.producer_id_block
    return {
        "topics": {n: (uuid_text(t.topic_id), {p: (part.replicas, part.adding, part.removing, part.state.leader,
                                                     part.state.leader_epoch, part.state.isr)
                                                 for p, part in t.partitions.items()})
                   for n, t in c.topics.items()},
        "topic_configs": {n: t.configs for n, t in c.topics.items() if t.configs},
        "broker_configs": c.broker_configs,
        # (a block KRaft wrote is {broker -1, block_start = KRaft's next id}, one ZooKeeper's controller
        # handed out ends before the next id)
        "next_producer_id": None if b is None else b.block_start if b.broker == -1 else b.block_end + 1,
        "quotas": {tuple(sorted(q.entity)): q.values for q in c.client_quotas},
        "scram": {(s.user, s.mechanism): (s.salt, s.stored_key, s.server_key, s.iterations) for s in c.scram},
        "acls": sorted((a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation,
                        a.permission_type) for a in c.acls),
        "tokens": {t.token_id: (t.owner, t.requester, t.renewers, t.issue_timestamp, t.max_timestamp,
                                t.expiry_timestamp) for t in c.delegation_tokens},
    }


def kraft_normalized(image) -> dict:
    names = {tid: n for n, tid in image.topic_ids.items()}
    return {
        "topics": {names[tid]: (uuid_text(tid), {p: (part["Replicas"], part["AddingReplicas"], part["RemovingReplicas"],
                                                     part["Leader"], part["LeaderEpoch"], part["Isr"])
                                                 for p, part in t.partitions.items()})
                   for tid, t in image.topics.items()},
        "topic_configs": {n: cfg for (rtype, n), cfg in image.configs.items() if rtype == 2 and cfg},
        "broker_configs": {n: cfg for (rtype, n), cfg in image.configs.items() if rtype == 4 and cfg},
        "next_producer_id": image.next_producer_id,
        "quotas": {tuple(sorted(e)): v for e, v in image.client_quotas.items() if v},
        "scram": {(user, mech): (s["Salt"], s["StoredKey"], s["ServerKey"], s["Iterations"])
                  for (mech, user), s in image.scram.items()},
        "acls": sorted((a["ResourceType"], a["ResourceName"], a["PatternType"], a["Principal"], a["Host"],
                        a["Operation"], a["PermissionType"]) for a in image.acls.values()),
        "tokens": {tid: (t["Owner"], t["Requester"], t["Renewers"], t["IssueTimestamp"], t["MaxTimestamp"],
                         t["ExpirationTimestamp"]) for tid, t in image.delegation_tokens.items()},
    }


async def caught_up(node) -> None:
    """The driver wrote every committed change to ZooKeeper."""
    d = node.controller.migration
    await wait_for(lambda: d.state == drv.DUAL_WRITE and d.synced[0] == node.controller.image.provenance.offset
                   and d.metrics()["ZooKeeperBlockingKRaftMillis"] == 0, what="the dual writes")


async def migrated_with_unfenced_brokers(node) -> None:
    await wait_for(lambda: node.controller.active, what="the active controller")
    epochs = {}
    for bid in (1, 2, 3):
        got = await call(node, ApiKey.BROKER_REGISTRATION, zk_registration(bid))
        assert got["ErrorCode"] == Errors.NONE, got
        epochs[bid] = got["BrokerEpoch"]
    await wait_for(lambda: node.controller.migration.state == drv.DUAL_WRITE, what="the migration")
    for bid, epoch in epochs.items():
        hb = await call(node, ApiKey.BROKER_HEARTBEAT, heartbeat(bid, epoch, node.controller.image.provenance.offset))
        assert hb["ErrorCode"] == Errors.NONE


def create(name: str, partitions: int, rf: int, **configs: str) -> dict:
    return {"Topics": [{"Name": name, "NumPartitions": partitions, "ReplicationFactor": rf, "Assignments": [],
                        "Configs": [{"Name": k, "Value": v} for k, v in configs.items()]}],
            "timeoutMs": 5000, "validateOnly": False}


def alter(rtype: int, name: str, *configs: tuple[str, int, str | None]) -> dict:
    return {"Resources": [{"ResourceType": rtype, "ResourceName": name, "Configs": [
        {"Name": n, "ConfigOperation": op, "Value": v} for n, op, v in configs]}], "ValidateOnly": False}


def notifications(zk) -> list[str]:
    """The entity paths of ``/config/changes``'s notifications, in their order."""
    kids = sorted(p for p in zk.nodes if p.startswith("/config/changes/config_change_"))
    return [zk.json(p)["entity_path"] for p in kids]


def test_topic_and_config_changes_are_written_to_zookeeper_in_kafkas_json(tmp_path):
    zk = zk_cluster(CLUSTER_ID)

    async def main():
        node = start_migrating_controller(tmp_path, zk)
        async with running([node]):
            await migrated_with_unfenced_brokers(node)
            await caught_up(node)
            c = node.controller
            raft_epoch = node.replica().core.epoch
            epoch_version = zk.nodes["/controller_epoch"][1]
            # the copy's sync found nothing to change
            assert zk_normalized(zk) == kraft_normalized(c.image)

            got = await call(node, ApiKey.CREATE_TOPICS, create("gamma", 3, 2, **{"retention.ms": "1000"}))
            assert got["Topics"][0]["ErrorCode"] == Errors.NONE, got
            got = await call(node, ApiKey.INCREMENTAL_ALTER_CONFIGS,
                             alter(2, "alpha", ("retention.ms", SET, "7200000"), ("cleanup.policy", DELETE, None)))
            assert got["Responses"][0]["ErrorCode"] == Errors.NONE, got
            got = await call(node, ApiKey.INCREMENTAL_ALTER_CONFIGS, alter(4, "", ("log.cleaner.threads", SET, "2")))
            assert got["Responses"][0]["ErrorCode"] == Errors.NONE, got
            got = await call(node, ApiKey.DELETE_TOPICS, {"Topics": [{"Name": "beta", "TopicId": ZERO}],
                                                          "TimeoutMs": 5000})
            assert got["Responses"][0]["ErrorCode"] == Errors.NONE, got
            got = await call(node, ApiKey.ALLOCATE_PRODUCER_IDS, {"BrokerId": 1, "BrokerEpoch": c.image.brokers[1]
                                                                  ["BrokerEpoch"]})
            assert got["ErrorCode"] == Errors.NONE and got["ProducerIdStart"] == 1000, got
            await caught_up(node)
            image = c.image
            assert zk_normalized(zk) == kraft_normalized(image)
            assert set(kraft_normalized(image)["topics"]) == {"alpha", "gamma"}

            # Kafka's JSON: the topic znode with its id, the partition states with the KRaft epoch
            gamma = image.topics[image.topic_ids["gamma"]]
            topic = zk.json("/brokers/topics/gamma")
            tid = base64.urlsafe_b64encode(gamma.id.bytes).decode().rstrip("=")
            assert topic == {"version": 3, "topic_id": tid,
                             "partitions": {str(p): part["Replicas"] for p, part in gamma.partitions.items()},
                             "adding_replicas": {}, "removing_replicas": {}}
            for p, part in gamma.partitions.items():
                assert zk.json(f"/brokers/topics/gamma/partitions/{p}/state") == {
                    "controller_epoch": raft_epoch, "leader": part["Leader"], "version": 1,
                    "leader_epoch": part["LeaderEpoch"], "isr": part["Isr"]}
            assert zk.json("/config/topics/gamma") == {"version": 1, "config": {"retention.ms": "1000"}}
            assert zk.json("/config/topics/alpha") == {"version": 1, "config": {"retention.ms": "7200000"}}
            assert zk.json("/config/brokers/<default>") == {"version": 1, "config": {"log.cleaner.threads": "2"}}
            # beta is gone whole: its partitions, its state znodes
            assert not [p for p in zk.nodes if p.startswith("/brokers/topics/beta")]
            assert zk.json("/latest_producer_id_block") == {"version": 1, "broker": -1, "block_start": "2000",
                                                            "block_end": "2999"}
            # a config change notification for each config write, in order
            assert notifications(zk) == ["topics/gamma", "topics/alpha", "brokers/<default>"]
            # every write was conditional on the claimed epoch, and /migration names the last offset
            assert zk.nodes["/controller_epoch"][1] == epoch_version
            migration = zk.json("/migration")
            last_change = max(o for _b, o, name, _d in log_records(node) if name == "ProducerIdsRecord")
            assert image.provenance.offset >= migration["kraft_metadata_offset"] >= last_change
            assert migration["kraft_metadata_epoch"] == raft_epoch
            assert migration["kraft_controller_id"] == 1 and migration["kraft_controller_epoch"] == raft_epoch
            metrics = node.controller.migration.metrics()
            assert metrics["lastWrittenOffset"] == migration["kraft_metadata_offset"]
            # the metrics file migrate status --controller-dir reads (rewritten within a second of a change)
            from kraftkit.cli.migrate import _dual_write_metrics

            log_dir = node.config.log_dir
            await wait_for(lambda: isinstance(got := _dual_write_metrics(log_dir), dict)
                           and got["lastWrittenOffset"] == metrics["lastWrittenOffset"], timeout=10,
                           what="the metrics file")
            shown = _dual_write_metrics(log_dir)
            assert isinstance(shown, dict) and (shown["nodeId"], shown["state"]) == (1, drv.DUAL_WRITE)
            assert shown["zooKeeperBlockingKRaftMillis"] >= 0

            # a topic config emptied: its znode goes (Kafka's deleteConfigs), with a notification
            got = await call(node, ApiKey.INCREMENTAL_ALTER_CONFIGS, alter(2, "gamma", ("retention.ms", DELETE, None)))
            assert got["Responses"][0]["ErrorCode"] == Errors.NONE, got
            await caught_up(node)
            assert "/config/topics/gamma" not in zk.nodes and notifications(zk)[-1] == "topics/gamma"
            assert zk_normalized(zk) == kraft_normalized(c.image)

    asyncio.run(main())


def test_client_quotas_scram_credentials_and_acls_are_written_to_zookeeper_in_kafkas_json(tmp_path):
    zk = zk_cluster(CLUSTER_ID)

    async def main():
        node = start_migrating_controller(tmp_path, zk)
        async with running([node]):
            await migrated_with_unfenced_brokers(node)
            await caught_up(node)
            c = node.controller
            got = await call(node, ApiKey.ALTER_CLIENT_QUOTAS, {"Entries": [
                {"Entity": [{"EntityType": "user", "EntityName": "alice smith"}],
                 "Ops": [{"Key": "producer_byte_rate", "Value": 2048.0, "Remove": False},
                         {"Key": "request_percentage", "Value": 12.5, "Remove": False}]},
                {"Entity": [{"EntityType": "client-id", "EntityName": "app"}],
                 "Ops": [{"Key": "producer_byte_rate", "Value": 0.0, "Remove": True}]},
                {"Entity": [{"EntityType": "user", "EntityName": "bob"}, {"EntityType": "client-id", "EntityName": None}],
                 "Ops": [{"Key": "consumer_byte_rate", "Value": 4096.0, "Remove": False}]},
                {"Entity": [{"EntityType": "ip", "EntityName": None}],
                 "Ops": [{"Key": "connection_creation_rate", "Value": 10.0, "Remove": False}]}],
                "ValidateOnly": False})
            assert [e["ErrorCode"] for e in got["Entries"]] == [Errors.NONE] * 4, got
            got = await call(node, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {"Deletions": [], "Upsertions": [
                {"Name": "alice smith", "Mechanism": 2, "Iterations": 8192, "Salt": b"0123456789abcdef",
                 "SaltedPassword": bytes(range(64))}]})
            assert [r["ErrorCode"] for r in got["Results"]] == [Errors.NONE], got
            got = await call(node, ApiKey.CREATE_ACLS, {"Creations": [{
                "ResourceType": 2, "ResourceName": "or", "ResourcePatternType": 4, "Principal": "User:bob",
                "Host": "*", "Operation": 3, "PermissionType": 3}]})
            assert [r["ErrorCode"] for r in got["Results"]] == [Errors.NONE], got
            got = await call(node, ApiKey.DELETE_ACLS, {"Filters": [{
                "ResourceTypeFilter": 2, "ResourceNameFilter": "alpha", "PatternTypeFilter": 3,
                "PrincipalFilter": "User:alice", "HostFilter": "*", "Operation": 3, "PermissionType": 3}]})
            assert [r["ErrorCode"] for r in got["FilterResults"]] == [Errors.NONE], got
            await caught_up(node)
            assert zk_normalized(zk) == kraft_normalized(c.image)
            assert len(kraft_normalized(c.image)["acls"]) == 1 and len(kraft_normalized(c.image)["scram"]) == 1

            # Kafka's JSON: sanitized entity names, whole LONG quotas, the SCRAM credential's text
            cred = next(iter(c.image.scram.values()))
            b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
            assert zk.json("/config/users/alice%20smith") == {"version": 1, "config": {
                "producer_byte_rate": "2048", "request_percentage": "12.5",
                "SCRAM-SHA-512": f"salt={b64(cred['Salt'])},stored_key={b64(cred['StoredKey'])},"
                                 f"server_key={b64(cred['ServerKey'])},iterations=8192"}}
            assert zk.json("/config/clients/app") == {"version": 1, "config": {}}
            assert zk.json("/config/users/bob/clients/<default>") == \
                {"version": 1, "config": {"consumer_byte_rate": "4096"}}
            assert zk.json("/config/ips/<default>") == {"version": 1, "config": {"connection_creation_rate": "10"}}
            assert set(notifications(zk)) == {"users/alice%20smith", "clients/app", "users/bob/clients/<default>",
                                              "ips/<default>"}
            # ACLs: the prefixed resource's znode, the literal one gone, the change notifications
            assert zk.json("/kafka-acl-extended/prefixed/Topic/or") == {"version": 1, "acls": [
                {"principal": "User:bob", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
            assert "/kafka-acl/Topic/alpha" not in zk.nodes
            assert [zk.nodes[p][0] for p in sorted(zk.nodes) if p.startswith("/kafka-acl-changes/acl_changes_")] == \
                [b"Topic:alpha"]
            (ext,) = [p for p in zk.nodes if p.startswith("/kafka-acl-extended-changes/acl_changes_")]
            assert zk.json(ext) == {"version": 1, "resourceType": "Topic", "name": "or", "patternType": "PREFIXED"}

    asyncio.run(main())


DOUBLES = [1024.0, 0.5, 12.5, 1e7, 1.5e-4, 123456789.0, -2.0, 0.001, 9999999.0, 1e-300, 2.5e300, 0.1 + 0.2]
NAMES = ["alice smith", "a*b", "x~y", "é/ü", "user@corp.com", "plain.name-1_2", "1.2.3.4", "::1"]


@pytest.mark.kafka
def test_java_double_and_sanitize_as_kafka_writes_them(kafka_jars):
    """Against Java's ``Double.toString`` and Kafka's ``Sanitizer.sanitize`` themselves (Kafka 3.9.2's
    clients jar), run on the same inputs."""
    from kraftkit.migration.zk_writer import java_double, sanitize
    from tests.harness import jars, tools

    source = tools.HERE / "java" / "ZkTexts.java"
    out = tools.run_tool(jars.KAFKA_3, source, ["--doubles", *map(repr, DOUBLES), "--names", *NAMES],
                         timeout=120).stdout.splitlines()
    assert [java_double(v) for v in DOUBLES] == out[:len(DOUBLES)]
    assert [sanitize(n) for n in NAMES] == out[len(DOUBLES):]
    assert [zk_reader.desanitize("p", sanitize(n)) for n in NAMES] == NAMES


def test_reassignments_and_unregistrations_are_written_to_zookeeper(tmp_path):
    """A partition reassignment in progress is in the topic znode's ``adding_replicas`` and
    ``removing_replicas`` (Kafka's ``TopicZNode``), and a broker unregistered leaves the ISRs in the
    state znodes, as the KRaft image has them."""
    zk = zk_cluster(CLUSTER_ID)

    async def main():
        node = start_migrating_controller(tmp_path, zk)
        async with running([node]):
            await migrated_with_unfenced_brokers(node)
            image = node.controller.image
            alpha = image.topics[image.topic_ids["alpha"]].partitions[0]
            assert alpha["Replicas"] == [1, 2]  # (the fake ZooKeeper's alpha-0)
            got = await call(node, ApiKey.ALTER_PARTITION_REASSIGNMENTS, {"TimeoutMs": 5000, "Topics": [{
                "Name": "alpha", "Partitions": [{"PartitionIndex": 0, "Replicas": [3, 1]}]}]})
            assert got["ErrorCode"] == Errors.NONE, got
            assert got["Responses"][0]["Partitions"][0]["ErrorCode"] == Errors.NONE, got
            await caught_up(node)
            topic = zk.json("/brokers/topics/alpha")
            # replicas 3 joins and 2 leaves: it stays in progress until 3 is in the ISR
            assert topic["adding_replicas"] == {"0": [3]} and topic["removing_replicas"] == {"0": [2]}
            assert sorted(topic["partitions"]["0"]) == [1, 2, 3]
            assert zk_normalized(zk) == kraft_normalized(node.controller.image)

            got = await call(node, ApiKey.UNREGISTER_BROKER, {"BrokerId": 2})
            assert got["ErrorCode"] == Errors.NONE, got
            await caught_up(node)
            image = node.controller.image
            assert 2 not in image.brokers
            states = [zk.json(f"/brokers/topics/{t}/partitions/{p}/state")
                      for t in zk.children("/brokers/topics") for p in zk.children(f"/brokers/topics/{t}/partitions")]
            # (an ISR never empties: a partition whose only ISR member was 2 keeps it, leaderless)
            assert all(s["isr"] == [2] and s["leader"] == -1 for s in states if 2 in s["isr"]), states
            assert zk_normalized(zk) == kraft_normalized(image)

    asyncio.run(main())


def test_hybrid_mode_fencing_moves_leaderships_and_zookeeper_follows(tmp_path):
    """In MIGRATION the controller's own partition changes are made (Kafka 3.9's hybrid mode) and
    dual-written: a broker fenced leaves the ISRs and its leaderships move to an in-sync replica.
    A broker registered but fenced at the takeover keeps what ZooKeeper says it leads, also once its
    heartbeats stop (Kafka 3.9 fences only unfenced brokers on session expiry)."""
    zk = zk_cluster(CLUSTER_ID)

    async def main():
        node = start_migrating_controller(tmp_path, zk, session_timeout_ms=1000)
        c = node.controller
        async with running([node]):
            await wait_for(lambda: c.active, what="the active controller")
            epochs = {}
            for bid in (1, 2, 3):
                got = await call(node, ApiKey.BROKER_REGISTRATION, zk_registration(bid))
                assert got["ErrorCode"] == Errors.NONE, got
                epochs[bid] = got["BrokerEpoch"]
            await wait_for(lambda: c.migration.state == drv.DUAL_WRITE, what="the migration")
            for bid in (1, 2):
                hb = await call(node, ApiKey.BROKER_HEARTBEAT, heartbeat(bid, epochs[bid], c.image.provenance.offset))
                assert hb["ErrorCode"] == Errors.NONE and not hb["IsFenced"], hb
            # broker 3 heartbeats once, still fenced (behind its registration), then stops
            hb = await call(node, ApiKey.BROKER_HEARTBEAT, heartbeat(3, epochs[3], -1))
            assert hb["ErrorCode"] == Errors.NONE and hb["IsFenced"], hb
            ids = c.image.topic_ids
            beta = c.image.topics[ids["beta"]].partitions[0]
            assert (beta["Leader"], beta["Isr"], c.image.brokers[3]["Fenced"]) == (3, [3], True)
            alpha = c.image.topics[ids["alpha"]].partitions[0]
            assert (alpha["Leader"], sorted(alpha["Isr"])) == (1, [1, 2])

            # broker 1 asks to be fenced: it leaves alpha-0's ISR, broker 2 leads it, in ZooKeeper too
            hb = await call(node, ApiKey.BROKER_HEARTBEAT, heartbeat(1, epochs[1], c.image.provenance.offset,
                                                                     fence=True))
            assert hb["ErrorCode"] == Errors.NONE and hb["IsFenced"], hb
            await wait_for(lambda: c.image.brokers[1]["Fenced"], what="broker 1's fencing")
            await caught_up(node)
            alpha = c.image.topics[ids["alpha"]].partitions[0]
            assert (alpha["Leader"], alpha["Isr"]) == (2, [2])
            state = zk.json("/brokers/topics/alpha/partitions/0/state")
            assert (state["leader"], state["isr"]) == (2, [2])
            assert zk_normalized(zk) == kraft_normalized(c.image)

            # broker 3's session (it never got unfenced) expires, broker 2's is kept alive: 3 keeps beta
            for _ in range(8):
                hb = await call(node, ApiKey.BROKER_HEARTBEAT, heartbeat(2, epochs[2], c.image.provenance.offset))
                assert hb["ErrorCode"] == Errors.NONE and not hb["IsFenced"], hb
                await asyncio.sleep(0.25)
            assert c.cluster.stale_broker() is None  # (its session ended: nothing left to fence)
            beta = c.image.topics[ids["beta"]].partitions[0]
            assert (beta["Leader"], beta["Isr"]) == (3, [3])
            await caught_up(node)
            assert zk.json("/brokers/topics/beta/partitions/0/state")["leader"] == 3

    asyncio.run(main())


def test_a_controlled_shutdown_moves_leaderships_when_it_begins(tmp_path):
    """As Kafka's controller (3.9's hybrid mode included): a ZooKeeper-mode broker that asks to shut
    down while it leads is in controlled shutdown and its leaderships move at once (ZooKeeper and
    its ISR too); the shutdown is granted once the other active brokers report an offset past those
    records."""
    zk = zk_cluster(CLUSTER_ID)

    async def main():
        node = start_migrating_controller(tmp_path, zk)
        c = node.controller
        async with running([node]):
            await wait_for(lambda: c.active, what="the active controller")
            epochs = {}
            for bid in (1, 2, 3):
                got = await call(node, ApiKey.BROKER_REGISTRATION, zk_registration(bid))
                assert got["ErrorCode"] == Errors.NONE, got
                epochs[bid] = got["BrokerEpoch"]
            await wait_for(lambda: c.migration.state == drv.DUAL_WRITE, what="the migration")
            for bid in (1, 2, 3):
                hb = await call(node, ApiKey.BROKER_HEARTBEAT, heartbeat(bid, epochs[bid], c.image.provenance.offset))
                assert hb["ErrorCode"] == Errors.NONE and not hb["IsFenced"], hb
            alpha = c.image.topics[c.image.topic_ids["alpha"]].partitions[0]
            assert (alpha["Leader"], sorted(alpha["Isr"])) == (1, [1, 2])

            hb = await call(node, ApiKey.BROKER_HEARTBEAT, heartbeat(1, epochs[1], c.image.provenance.offset,
                                                                     shutdown=True))
            assert hb["ErrorCode"] == Errors.NONE and not hb["ShouldShutDown"] and not hb["IsFenced"], hb
            await caught_up(node)
            alpha = c.image.topics[c.image.topic_ids["alpha"]].partitions[0]
            assert (alpha["Leader"], alpha["Isr"]) == (2, [2])
            assert c.image.brokers[1]["InControlledShutdown"] and not c.image.brokers[1]["Fenced"]
            state = zk.json("/brokers/topics/alpha/partitions/0/state")
            assert (state["leader"], state["isr"]) == (2, [2])
            # granted once brokers 2 and 3 have read past the shutdown's records
            moved_at = c.image.provenance.offset
            for bid in (2, 3):
                hb = await call(node, ApiKey.BROKER_HEARTBEAT, heartbeat(bid, epochs[bid], moved_at + 1))
                assert hb["ErrorCode"] == Errors.NONE, hb
            hb = await call(node, ApiKey.BROKER_HEARTBEAT, heartbeat(1, epochs[1], moved_at, shutdown=True))
            assert hb["ErrorCode"] == Errors.NONE and hb["ShouldShutDown"], hb
            await wait_for(lambda: c.image.brokers[1]["Fenced"], what="broker 1 fenced")
            await caught_up(node)
            assert zk_normalized(zk) == kraft_normalized(c.image)

    asyncio.run(main())


def test_records_zookeeper_does_not_keep_cost_no_comparison_with_the_image(tmp_path, monkeypatch):
    """A dual-write round compares the whole image with what ZooKeeper holds: it runs only when a
    record ZooKeeper keeps was applied, not for the NoOpRecord written every 500 ms in MIGRATION."""
    zk = zk_cluster(CLUSTER_ID)
    views = []

    def counted(image):
        views.append(image.provenance.offset)
        return image_view(image)

    async def main():
        node = start_migrating_controller(tmp_path, zk)
        c = node.controller
        async with running([node]):
            await migrated_with_unfenced_brokers(node)
            await caught_up(node)
            monkeypatch.setattr(drv.zk_writer, "image_view", counted)
            start = c.image.provenance.offset
            await wait_for(lambda: c.image.provenance.offset >= start + 3, what="three NoOpRecords", timeout=30)
            await caught_up(node)
            assert views == [] and c.migration.synced[0] == c.image.provenance.offset > start
            got = await call(node, ApiKey.CREATE_TOPICS, create("delta", 1, 2))
            assert got["Topics"][0]["ErrorCode"] == Errors.NONE, got
            await caught_up(node)
            assert len(views) == 1 and "/brokers/topics/delta" in zk.nodes
            assert zk_normalized(zk) == kraft_normalized(c.image)

    asyncio.run(main())


def test_heartbeats_keep_sessions_alive_while_a_write_holds_the_queue(tmp_path):
    """A write that holds the controller's queue longer than the brokers' session timeout (the
    copy of a big ZooKeeper) fences no broker that kept heartbeating: a heartbeat counts as contact
    when it arrives, before it waits its turn (Kafka's BrokerHeartbeatTracker), also behind the
    fencing queued when the session seemed to expire."""
    zk = zk_cluster(CLUSTER_ID)

    async def main():
        node = start_migrating_controller(tmp_path, zk, session_timeout_ms=1000)
        c = node.controller
        async with running([node]):
            await migrated_with_unfenced_brokers(node)
            await caught_up(node)
            epochs = {bid: c.image.brokers[bid]["BrokerEpoch"] for bid in (1, 2, 3)}
            ids = c.image.topic_ids

            def leaders_of(bids):
                return {(name, p): (part["Leader"], part["LeaderEpoch"], tuple(part["Isr"]))
                        for name, tid in ids.items() for p, part in c.image.topics[tid].partitions.items()
                        if part["Leader"] in bids}

            led = leaders_of({1, 2})
            assert led  # (brokers 1 and 2 lead partitions: a fencing would move them)
            loop = asyncio.get_running_loop()
            released = loop.create_future()
            long_write = c.submit("a long write", lambda: ([drv._encode("NoOpRecord", {})], None), 30_000,
                                  hold=lambda _end: released)
            beats = []
            await asyncio.sleep(1.5)  # past the session timeout: the fencing of 1, 2 and 3 is queued
            for _ in range(5):  # then heartbeats of 1 and 2 every 0.3 s, queued behind it
                for bid in (1, 2):
                    beats.append(asyncio.ensure_future(call(node, ApiKey.BROKER_HEARTBEAT,
                                                            heartbeat(bid, epochs[bid], c.image.provenance.offset))))
                await asyncio.sleep(0.3)
            assert not long_write.done()
            released.set_result(None)
            await long_write
            await asyncio.gather(*beats)
            await caught_up(node)
            assert not c.image.brokers[1]["Fenced"] and not c.image.brokers[2]["Fenced"]
            assert leaders_of({1, 2}) == led  # never fenced: not a leadership moved, not an ISR shrunk
            # broker 3, silent all along, is fenced
            await wait_for(lambda: c.image.brokers[3]["Fenced"], what="broker 3 fenced")

    asyncio.run(main())


def test_writes_not_dual_written_yet_are_refused_saying_what(tmp_path):
    zk = zk_cluster(CLUSTER_ID)

    async def main():
        node = start_migrating_controller(tmp_path, zk)
        async with running([node]):
            # before the copy (PRE_MIGRATION): refused
            await wait_for(lambda: node.controller.active, what="the active controller")
            got = await call(node, ApiKey.CREATE_TOPICS, create("early", 1, 1))
            assert got["Topics"][0]["ErrorCode"] == Errors.UNSUPPORTED_VERSION
            assert "PRE_MIGRATION" in got["Topics"][0]["ErrorMessage"]
            await migrated_with_unfenced_brokers(node)
            got = await call(node, ApiKey.INCREMENTAL_ALTER_CONFIGS, alter(32, "group-1",
                                                                         ("consumer.session.timeout.ms", SET, "50000")))
            assert got["Responses"][0]["ErrorCode"] == Errors.UNSUPPORTED_VERSION
            assert "GROUP configs" in got["Responses"][0]["ErrorMessage"]

    asyncio.run(main())


def test_a_zookeeper_controller_taking_the_epoch_fails_the_write_and_the_driver_claims_again(tmp_path):
    zk = zk_cluster(CLUSTER_ID)

    async def main():
        node = start_migrating_controller(tmp_path, zk)
        d = node.controller.migration
        async with running([node]):
            await migrated_with_unfenced_brokers(node)
            await caught_up(node)
            claimed = zk.nodes["/controller_epoch"]
            # a ZooKeeper-mode controller elected meanwhile (as KafkaController registers)
            zk.set("/controller_epoch", str(int(claimed[0]) + 1).encode())
            zk.nodes["/controller"] = (json.dumps({"version": 2, "brokerid": 2, "timestamp": "2",
                                                   "kraftControllerEpoch": -1}).encode(), 0)
            got = await call(node, ApiKey.CREATE_TOPICS, create("delta", 2, 1))
            assert got["Topics"][0]["ErrorCode"] == Errors.NONE
            # the write failed its check; the driver claimed the next epoch and synced ZooKeeper
            await wait_for(lambda: zk.nodes["/controller_epoch"][0] == str(int(claimed[0]) + 2).encode(),
                           what="the claim")
            await caught_up(node)
            assert zk.json("/controller")["brokerid"] == 1
            assert d.zk_epoch is not None and d.zk_epoch[1] == zk.nodes["/controller_epoch"][1]
            assert zk_normalized(zk) == kraft_normalized(node.controller.image)
            assert "delta" in zk_normalized(zk)["topics"]

    asyncio.run(main())


def test_failed_writes_are_followed_by_a_sync_that_writes_what_differs(tmp_path):
    zk = zk_cluster(CLUSTER_ID)

    async def main():
        node = start_migrating_controller(tmp_path, zk)
        async with running([node]):
            await migrated_with_unfenced_brokers(node)
            await caught_up(node)
            fails = []
            failing = [True]

            def lost(what: str, path: str) -> bool:
                if what == "check" and failing[0]:
                    fails.append(path)
                    return True
                return False

            zk.fail_on(lost)
            got = await call(node, ApiKey.CREATE_TOPICS, create("eps", 1, 1, **{"cleanup.policy": "compact"}))
            assert got["Topics"][0]["ErrorCode"] == Errors.NONE
            await wait_for(lambda: len(fails) >= 3, what="the failed writes")
            # the metrics (and so migrate status) say why ZooKeeper is behind
            d = node.controller.migration
            offset = node.controller.image.provenance.offset
            assert d.metrics()["lastError"] == (
                f"ZooKeeper fake:2181: ConnectionLoss: check /controller_epoch: connection loss (offset {offset} not "
                "written)")
            assert d.metrics()["ZooKeeperBlockingKRaftMillis"] > 0
            failing[0] = False
            await caught_up(node)
            assert d.metrics()["lastError"] is None
            assert zk_normalized(zk) == kraft_normalized(node.controller.image)
            assert zk.json("/config/topics/eps") == {"version": 1, "config": {"cleanup.policy": "compact"}}

    asyncio.run(main())


def test_a_sync_writes_what_zookeeper_holds_that_differs_from_the_image():
    """The reconciliation of a new active controller, on its own: ZooKeeper changed behind KRaft's
    back (an extra topic, a partition state, a config, a config znode of no topic) is brought to
    the image, and a second sync finds nothing."""
    from kraftkit.metadata.image import replay_records
    from kraftkit.migration import convert

    zk = zk_cluster(CLUSTER_ID)
    image = replay_records(convert.records(zk_reader.read_cluster(zk), MV))
    zk.set("/brokers/topics/zeta", json.dumps({"version": 3, "topic_id": "AAAAAAAAAAAAAAAAAAAAAg",
                                               "partitions": {"0": [1]}}).encode())
    zk.set("/brokers/topics/zeta/partitions/0/state", json.dumps({"controller_epoch": 1, "leader": 1, "version": 1,
                                                                  "leader_epoch": 0, "isr": [1]}).encode())
    zk.set("/brokers/topics/alpha/partitions/1/state", json.dumps({"controller_epoch": 9, "leader": 1, "version": 1,
                                                                   "leader_epoch": 7, "isr": [1]}).encode())
    zk.set("/config/topics/alpha", json.dumps({"version": 1, "config": {"retention.ms": "1"}}).encode())
    zk.set("/config/topics/ghost", json.dumps({"version": 1, "config": {"retention.ms": "1"}}).encode())
    zk.set("/migration", b'{"version":0,"kraft_controller_id":1,"kraft_controller_epoch":3,'
                         b'"kraft_metadata_offset":10,"kraft_metadata_epoch":3}')
    assert zk_normalized(zk) != kraft_normalized(image)
    writer = ZkWriter(1, 3, zk.nodes["/controller_epoch"][1])
    writer.load(zk)
    todo = changes(cluster_view(zk_reader.read_cluster(zk)), image_view(image), 3)
    assert [c.what.split(" (")[0] for c in todo] == [
        "delete topic zeta", "write the state of partitions [1] of topic alpha", "write the configs of topics/alpha",
        "delete the configs of topics/ghost"]
    for i, c in enumerate(todo):
        assert writer.apply(zk, c, 20 + i, 3)
    assert zk_normalized(zk) == kraft_normalized(image)
    assert "/config/topics/ghost" not in zk.nodes and json.loads(zk.nodes["/migration"][0])["kraft_metadata_offset"] == 23
    assert changes(cluster_view(zk_reader.read_cluster(zk)), image_view(image), 3) == []
    # from nothing, a sync writes every topic (with its partitions' state znodes) and config
    empty = FakeZk({"/cluster/id": zk.nodes["/cluster/id"][0], "/controller_epoch": b"1",
                    "/migration": zk.nodes["/migration"][0]})
    writer = ZkWriter(1, 3, 0)
    for c in changes(ZkView(), image_view(image), 3):
        writer.apply(empty, c, 30, 3)
    assert zk_normalized(empty) == kraft_normalized(image)


def test_migrate_status_refuses_a_metrics_file_it_cannot_read(tmp_path):
    from kraftkit.cli.migrate import _dual_write_metrics
    from kraftkit.migration.driver import METRICS_FILE

    assert "no such file" in _dual_write_metrics(tmp_path)
    (tmp_path / METRICS_FILE).write_text('{"nodeId": 1}')
    assert "not the dual writes' metrics JSON" in _dual_write_metrics(tmp_path)
    (tmp_path / METRICS_FILE).write_bytes(b"\xff")
    assert "not the dual writes' metrics JSON" in _dual_write_metrics(tmp_path)
    (tmp_path / METRICS_FILE).write_text(json.dumps({"nodeId": 1, "state": "DUAL_WRITE", "syncedOffset": 9,
                                                     "ZooKeeperBlockingKRaftMillis": True, "lastWrittenOffset": 7,
                                                     "lastWrittenEpoch": 2}))
    assert "not an integer" in _dual_write_metrics(tmp_path)
    # a file without lastError (a controller before it) reads as none
    (tmp_path / METRICS_FILE).write_text(json.dumps({"nodeId": 1, "state": "DUAL_WRITE", "syncedOffset": 9,
                                                     "ZooKeeperBlockingKRaftMillis": 0, "lastWrittenOffset": 7,
                                                     "lastWrittenEpoch": 2}))
    assert _dual_write_metrics(tmp_path)["lastError"] is None


def test_a_restarted_controller_claims_zookeeper_again_and_syncs_what_it_missed(tmp_path):
    """A failover, as Kafka's driver resumes it: the next active controller (here the same node,
    restarted on its log) is in MIGRATION, claims ``/controller_epoch`` again and reconciles all of
    ZooKeeper with its image: a topic whose write ZooKeeper lost is created, a topic ZooKeeper holds
    and KRaft does not is deleted."""
    from kraftkit.controller.config import ZkMigrationConfig
    from tests.controller._nodes import controller, format_dirs

    zk = zk_cluster(CLUSTER_ID)
    voters, dirs = format_dirs(tmp_path, 1, release_version="3.9")
    config = ZkMigrationConfig("fake:2181", (("fake", 2181),), "", batch_size=50)

    def make():
        node = controller(voters, dirs[0], 1, zk_migration=True)
        node.controller.migration = drv.MigrationDriver(node.controller, config, lambda: zk, poll_s=0.05)
        return node

    async def main():
        node = make()
        async with running([node]):
            await migrated_with_unfenced_brokers(node)
            got = await call(node, ApiKey.CREATE_TOPICS, create("kappa", 2, 1))
            assert got["Topics"][0]["ErrorCode"] == Errors.NONE
            await caught_up(node)
            claimed = zk.nodes["/controller_epoch"]
        # no active controller: ZooKeeper loses kappa, and gains a topic KRaft never had
        for path in [p for p in zk.nodes if p.startswith("/brokers/topics/kappa") or p == "/config/topics/kappa"]:
            del zk.nodes[path]
        zk.set("/brokers/topics/stray", json.dumps({"version": 3, "topic_id": "AAAAAAAAAAAAAAAAAAAAAw",
                                                    "partitions": {"0": [1]}}).encode())
        again = make()
        async with running([again]):
            await wait_for(lambda: again.controller.active, what="the active controller after the restart")
            await caught_up(again)
            image = again.controller.image
            assert zk_normalized(zk) == kraft_normalized(image)
            assert "kappa" in zk_normalized(zk)["topics"] and "/brokers/topics/stray" not in zk.nodes
            assert zk.nodes["/controller_epoch"] == (str(int(claimed[0]) + 1).encode(), claimed[1] + 1)
            assert zk.json("/controller")["kraftControllerEpoch"] == again.replica().core.epoch
            assert zk.json("/migration")["kraft_controller_epoch"] == again.replica().core.epoch

    asyncio.run(main())


def test_a_sync_brings_zookeepers_delegation_tokens_to_the_images():
    """kraftkit's controller serves no delegation token request, so the tokens are written by a sync
    (``KRaftMigrationZkWriter.handleDelegationTokenSnapshot``): one ZooKeeper lost is written back,
    one it holds and KRaft does not is deleted, one changed behind KRaft's back is set again, each
    with the ``/delegation_token/token_changes`` notification (its token id) the ZooKeeper-mode
    brokers' ``DelegationTokenManagerZk`` reads to update its cache."""
    from kraftkit.metadata.image import replay_records
    from kraftkit.migration import convert

    zk = zk_cluster(CLUSTER_ID)
    mine = "mytoken_2-xyz"
    zk.set(f"/delegation_token/tokens/{mine}", json.dumps({
        "version": 3, "owner": "User%3Acarol+smith", "tokenRequester": "User%3Aadmin", "renewers": [],
        "issueTimestamp": 5, "maxTimestamp": 9, "expiryTimestamp": 7, "tokenId": mine}).encode())
    image = replay_records(convert.records(zk_reader.read_cluster(zk), MV))
    # (Sanitizer.desanitize: "+" is a space, "%3A" a colon)
    assert image.delegation_tokens[mine]["Owner"] == "User:carol smith"
    assert image.delegation_tokens[mine]["Requester"] == "User:admin"
    assert set(image.delegation_tokens) == {TOKEN_ID, mine}
    assert changes(cluster_view(zk_reader.read_cluster(zk)), image_view(image), 3) == []
    # behind KRaft's back: TOKEN_ID gone, mine renewed, a stray token added
    original = zk.nodes[f"/delegation_token/tokens/{TOKEN_ID}"][0]
    del zk.nodes[f"/delegation_token/tokens/{TOKEN_ID}"]
    renewed = json.loads(zk.nodes[f"/delegation_token/tokens/{mine}"][0])
    renewed["expiryTimestamp"] = 8
    zk.set(f"/delegation_token/tokens/{mine}", json.dumps(renewed).encode())
    zk.set("/delegation_token/tokens/stray", json.dumps({
        "version": 2, "owner": "User%3Aeve", "renewers": [], "issueTimestamp": 1, "maxTimestamp": 2,
        "expiryTimestamp": 2, "tokenId": "stray"}).encode())
    zk.set("/migration", b'{"version":0,"kraft_controller_id":1,"kraft_controller_epoch":3,'
                         b'"kraft_metadata_offset":10,"kraft_metadata_epoch":3}')
    assert zk_normalized(zk)["tokens"] != kraft_normalized(image)["tokens"]
    writer = ZkWriter(1, 3, zk.nodes["/controller_epoch"][1])
    writer.load(zk)
    todo = changes(cluster_view(zk_reader.read_cluster(zk)), image_view(image), 3)
    assert [c.what for c in todo] == [f"write the delegation token {TOKEN_ID}", f"write the delegation token {mine}",
                                      "delete the delegation token stray"]
    for i, c in enumerate(todo):
        assert writer.apply(zk, c, 20 + i, 3)
    assert zk_normalized(zk) == kraft_normalized(image)
    assert "/delegation_token/tokens/stray" not in zk.nodes
    # Kafka's JSON (DelegationTokenInfoZNode.encode): version 3, the principals sanitized again, no HMAC
    assert zk.json(f"/delegation_token/tokens/{TOKEN_ID}") == json.loads(original)
    assert zk.json(f"/delegation_token/tokens/{mine}") == {
        "version": 3, "owner": "User%3Acarol%20smith", "tokenRequester": "User%3Aadmin", "renewers": [],
        "issueTimestamp": 5, "maxTimestamp": 9, "expiryTimestamp": 7, "tokenId": mine}
    kids = sorted(p for p in zk.nodes if p.startswith("/delegation_token/token_changes/"))
    assert [p.rsplit("/", 1)[1] for p in kids] == [f"token_change_{i:010d}" for i in range(3)]
    assert [zk.nodes[p][0] for p in kids] == [TOKEN_ID.encode(), mine.encode(), b"stray"]
    assert json.loads(zk.nodes["/migration"][0])["kraft_metadata_offset"] == 22
    assert changes(cluster_view(zk_reader.read_cluster(zk)), image_view(image), 3) == []
    # from nothing (no /delegation_token at all), a sync creates the paths and every token
    empty = FakeZk({"/cluster/id": zk.nodes["/cluster/id"][0], "/controller_epoch": b"1",
                    "/migration": zk.nodes["/migration"][0]})
    writer = ZkWriter(1, 3, 0)
    for c in changes(ZkView(), image_view(image), 3):
        writer.apply(empty, c, 30, 3)
    assert zk_normalized(empty)["tokens"] == kraft_normalized(image)["tokens"]


def test_the_dual_writes_keep_the_copied_token_and_a_restarted_controller_writes_back_one_zookeeper_lost(tmp_path):
    """Through the driver: the copy carries the token into the image, the first sync finds ZooKeeper
    equal to it; the token znode deleted while no controller is active is written back by the next
    active controller's sync."""
    from kraftkit.controller.config import ZkMigrationConfig
    from tests.controller._nodes import controller, format_dirs

    zk = zk_cluster(CLUSTER_ID)
    path = f"/delegation_token/tokens/{TOKEN_ID}"
    original = zk.nodes[path][0]
    voters, dirs = format_dirs(tmp_path, 1, release_version="3.9")
    config = ZkMigrationConfig("fake:2181", (("fake", 2181),), "", batch_size=50)

    def make():
        node = controller(voters, dirs[0], 1, zk_migration=True)
        node.controller.migration = drv.MigrationDriver(node.controller, config, lambda: zk, poll_s=0.05)
        return node

    async def main():
        node = make()
        async with running([node]):
            await migrated_with_unfenced_brokers(node)
            await caught_up(node)
            assert set(node.controller.image.delegation_tokens) == {TOKEN_ID}
            assert zk_normalized(zk) == kraft_normalized(node.controller.image)
            assert zk.nodes[path][0] == original  # (equal: nothing written)
        del zk.nodes[path]
        again = make()
        async with running([again]):
            await wait_for(lambda: again.controller.active, what="the active controller after the restart")
            await caught_up(again)
            assert zk_normalized(zk) == kraft_normalized(again.controller.image)
            assert zk.json(path) == json.loads(original)

    asyncio.run(main())


def test_a_token_id_that_is_no_znode_name_is_refused_naming_it():
    """A token id with a ``/`` (none Kafka makes, but the image is input) would write some other
    znode: the write is refused, naming the token, and ZooKeeper is left as it was."""
    from kraftkit.migration.zk_reader import ZkError

    zk = zk_cluster(CLUSTER_ID)
    zk.set("/migration", b'{"version":0,"kraft_controller_id":1,"kraft_controller_epoch":3,'
                         b'"kraft_metadata_offset":10,"kraft_metadata_epoch":3}')
    before = dict(zk.nodes)
    view = ZkView(tokens={"../../controller": ("User:a", "User:a", (), 1, 2, 2)})
    (change,) = changes(ZkView(), view, 3)
    writer = ZkWriter(1, 3, zk.nodes["/controller_epoch"][1])
    with pytest.raises(ZkError, match=r"^delegation token '\.\./\.\./controller': not a znode name"):
        writer.apply(zk, change, 20, 3)
    assert zk.nodes == before
