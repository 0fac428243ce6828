"""The live ZooKeeper-to-KRaft migration (KIP-866) with a kraftkit controller as the KRaft side, against
real parts: a real ZooKeeper (3.8.4, from Kafka 3.9.2's jars) holding a Kafka 3.9.2 ZooKeeper-mode
cluster of two brokers, with topics made by Kafka's kafka-topics (configs, replication factors 2
and 1), records produced by Kafka's producer, a client quota and a SCRAM user set with
kafka-configs, an ACL added with kafka-acls. Then ``kraftkit controller run --config`` with
``zookeeper.metadata.migration.enable=true`` (one voter, formatted at the brokers' IBP 3.9): it
waits, naming the two brokers; the brokers are restarted with the migration enabled and the
quorum's connection configs, register with it as migrating ZooKeeper brokers, and the controller
takes over: ``/controller`` names it with its KRaft epoch, ``/controller_epoch`` is one above the
ZooKeeper controllers', ``/migration`` holds its id and the copy's end; the KRaft image of its log
directory (``kraftkit metadata image``) is in ZK migration state MIGRATION and holds what ZooKeeper
holds (read by the converter's ZooKeeper reader: topic ids, also as Kafka's kafka-topics described
them, partition states, configs, the quota, the SCRAM credential, the ACL, the producer id block),
its brokers are the two, registered as migrating ZooKeeper brokers; every produced record is
consumed back from the ZooKeeper-mode brokers, which keep serving their partitions, and kafka-acls
lists the same ACL. The controller takes over only once ZooKeeper shows every partition led and in
sync (it takes no ISR change during the migration yet), which the brokers' restarts otherwise race."""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid

import pytest

from kraftkit.features.storage.format import format_storage
from kraftkit.metadata.image import load_image, uuid_text
from kraftkit.migration import zk_reader
from kraftkit.protocol import KafkaConnection
from kraftkit.protocol.messages import ApiKey
from tests._procs import KraftkitProcess
from tests.cli.test_json_schema import check_output
from tests.harness import jars, tools
from tests.harness.node import free_port
from tests.migration.test_offline_zk import ZkBroker, ZooKeeper, acl_list, describe, kafka_acls, kafka_configs, kraftkit

pytestmark = [pytest.mark.kafka, pytest.mark.zookeeper, pytest.mark.timeout(900)]

CONTROLLER_ID = 3000
BROKERS = (1, 2)
TOPICS = {
    "orders": {"partitions": 3, "rf": 2, "configs": {"retention.ms": "86400000"}},
    "audit": {"partitions": 2, "rf": 1, "configs": {"cleanup.policy": "compact"}},
}
#: the topic created through the kraftkit controller once it dual-writes
NEW_TOPIC = "fresh"


class MigratingZkBroker(ZkBroker):
    """A Kafka 3.9.2 ZooKeeper-mode broker, with the migration's configs once ``migrate_to`` is set."""

    migrate_to: str | None = None  # the quorum's controller.quorum.voters

    def properties(self) -> dict[str, object]:
        props = super().properties()
        if self.migrate_to is not None:
            props.update({
                "zookeeper.metadata.migration.enable": "true",
                "controller.quorum.voters": self.migrate_to,
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            })
        return props


def wait_log(proc: KraftkitProcess, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = proc.log_path.read_text(errors="replace")
        if text in log:
            return log
        if proc.proc.poll() is not None:
            break
        time.sleep(0.5)
    pytest.fail(f"the controller's log never said {text!r}:\n{proc.log_tail(80)}")


def status(zk: str, controller: str, *more: object) -> dict:
    """``kraftkit migrate status --json``, checked against docs/json-schema.json."""
    got = kraftkit("migrate", "status", "--zookeeper", zk, "--bootstrap-controller", controller, "--json", *more)
    assert got.returncode == 0, got.stderr
    assert check_output("migrate status", got.stdout) == []
    return json.loads(got.stdout)


def zk_view(cluster: zk_reader.ZkCluster) -> dict:
    """What ZooKeeper holds, normalized for the comparison with the KRaft image."""
    return {
        "topics": {
            name: (uuid_text(t.topic_id), {p: (part.replicas, part.state.leader, part.state.leader_epoch, part.state.isr,
                                         part.state.partition_epoch)
                                     for p, part in t.partitions.items() if part.state is not None})
            for name, t in cluster.topics.items()
        },
        "topic_configs": {name: t.configs for name, t in cluster.topics.items() if t.configs},
        "quotas": {q.entity: q.values for q in cluster.client_quotas},
        "scram": {(c.user, c.mechanism): (c.salt, c.stored_key, c.server_key, c.iterations) for c in cluster.scram},
        "acls": sorted((a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation,
                        a.permission_type) for a in cluster.acls),
        "next_producer_id": _next_producer_id(cluster.producer_id_block),
    }


def _next_producer_id(block: zk_reader.ProducerIdBlock | None) -> int | None:
    """The first producer id not handed out, by ``/latest_producer_id_block``: after the block a
    ZooKeeper controller gave a broker; the block's start when a KRaft controller wrote it (broker
    -1: Kafka's ``ZkMigrationClient.writeProducerId`` writes ``ProducerIdsBlock(-1, nextProducerId,
    1000)``)."""
    if block is None:
        return None
    return block.block_start if block.broker == -1 else block.next_producer_id


def kraft_view(image) -> dict:
    names = {tid: name for name, tid in image.topic_ids.items()}
    return {
        "topics": {
            names[tid]: (uuid_text(tid), {p: (part["Replicas"], part["Leader"], part["LeaderEpoch"], part["Isr"],
                                        part["PartitionEpoch"]) for p, part in t.partitions.items()})
            for tid, t in image.topics.items()
        },
        "topic_configs": {name: cfg for (rtype, name), cfg in image.configs.items() if rtype == 2 and cfg},
        "quotas": dict(image.client_quotas),
        "scram": {(user, mech): (s["Salt"], s["StoredKey"], s["ServerKey"], s["Iterations"])
                  for (mech, user), s in image.scram.items()},
        "acls": sorted((a["ResourceType"], a["ResourceName"], a["PatternType"], a["Principal"], a["Host"],
                        a["Operation"], a["PermissionType"]) for a in image.acls.values()),
        "next_producer_id": image.next_producer_id,
    }


def test_a_live_migration_takes_a_zookeeper_cluster_over_into_a_kraftkit_controller(kafka_jars, tmp_path):
    zk = ZooKeeper(tmp_path / "zk")
    brokers = {b: MigratingZkBroker(tmp_path / f"broker-{b}", b, zk.connect) for b in BROKERS}
    controller: KraftkitProcess | None = None
    client = None
    try:
        zk.start()
        for n in brokers.values():
            n.launch()
        for n in brokers.values():
            n.wait_ready()
        boot = ",".join(n.bootstrap for n in brokers.values())
        for name, t in TOPICS.items():
            args = ["--create", "--topic", name, "--partitions", t["partitions"], "--replication-factor", t["rf"]]
            for k, v in t["configs"].items():
                args += ["--config", f"{k}={v}"]
            tools.topic_command(jars.KAFKA_3, boot, [str(a) for a in args])
        jobs = [{"topic": name, "props": {"acks": "all"},
                 "records": [{"key": f"{name}-k{i}".encode(), "value": f"{name}-v{i}".encode(),
                              "partition": i % t["partitions"]} for i in range(40)]}
                for name, t in TOPICS.items()]
        assert len(tools.produce(jars.KAFKA_3, boot, jobs)) == 40 * len(TOPICS)
        kafka_configs(jars.KAFKA_3, boot, "--alter", "--add-config", "producer_byte_rate=1048576",
                      "--entity-type", "clients", "--entity-name", "app")
        kafka_configs(jars.KAFKA_3, boot, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=pw]",
                      "--entity-type", "users", "--entity-name", "alice")
        kafka_acls(jars.KAFKA_3, boot, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                   "--topic", "orders")
        acls_before = acl_list(jars.KAFKA_3, boot)
        before = describe(jars.KAFKA_3, boot)

        from kazoo.client import KazooClient

        client = KazooClient(hosts=zk.connect, timeout=10)
        client.start(timeout=10)
        cluster_id = json.loads(client.get("/cluster/id")[0])["id"]
        zk_epoch_before = int(client.get("/controller_epoch")[0])

        # the kraftkit controller, formatted at the brokers' IBP, with the migration enabled
        port = free_port()
        meta = tmp_path / "controller"
        format_storage([meta], cluster_id=cluster_id, node_id=CONTROLLER_ID, release_version="3.9",
                       no_initial_controllers=True)
        voters = f"{CONTROLLER_ID}@127.0.0.1:{port}"
        config = tmp_path / "controller.properties"
        config.write_text("\n".join([
            "process.roles=controller", f"node.id={CONTROLLER_ID}", f"controller.quorum.voters={voters}",
            f"listeners=CONTROLLER://127.0.0.1:{port}", "controller.listener.names=CONTROLLER",
            f"metadata.log.dir={meta}", "zookeeper.metadata.migration.enable=true",
            f"zookeeper.connect={zk.connect}", "zookeeper.metadata.migration.min.batch.size=3", ""]))
        controller = KraftkitProcess(["controller", "run"], ["--config", str(config)], tmp_path / "controller.log",
                                     timeout=120)
        log = wait_log(controller, "waiting for broker 1 (registered in ZooKeeper): not registered with KRaft yet", 60)
        assert "broker 2 (registered in ZooKeeper): not registered with KRaft yet" in log
        waiting = status(zk.connect, controller.address)
        assert waiting["zkMigrationState"] == "PRE_MIGRATION" and waiting["zkMigrationReady"] is True
        assert waiting["controller"]["id"] in BROKERS and waiting["controller"]["kraftControllerEpoch"] == -1
        assert waiting["migration"]["kraftMetadataOffset"] == -1 and waiting["zkBrokers"] == list(BROKERS)

        # the brokers restarted with the migration enabled register and the controller takes over
        for n in brokers.values():
            n.stop()
            n.migrate_to = voters
            n.start()
        log = wait_log(controller, "Completed migration of metadata from ZooKeeper to KRaft", 180)
        ctl = json.loads(client.get("/controller")[0])
        assert ctl["brokerid"] == CONTROLLER_ID and ctl["kraftControllerEpoch"] >= 1
        # (the restarts elected ZooKeeper controllers: the claim took the epoch after the last one)
        data, stat = client.get("/controller_epoch")
        claimed = re.search(r"ZooKeeper controller epoch (\d+) \(/controller_epoch zkVersion (\d+)\)", log)
        assert claimed is not None, log
        assert (int(data), stat.version) == (int(claimed[1]), int(claimed[2]))
        assert int(data) > zk_epoch_before
        for name, t in TOPICS.items():
            for p in range(t["partitions"]):
                state = json.loads(client.get(f"/brokers/topics/{name}/partitions/{p}/state")[0])
                assert state["controller_epoch"] < int(data)
        migration = json.loads(client.get("/migration")[0])
        assert (migration["kraft_controller_id"], migration["kraft_controller_epoch"]) == \
            (CONTROLLER_ID, ctl["kraftControllerEpoch"])
        assert migration["kraft_metadata_offset"] > 0

        # a replica out of the ISR at the takeover (the takeover waits for registrations only, as
        # Kafka's) is back through its leader's AlterPartition to this controller, dual-written
        deadline = time.monotonic() + 60
        done = status(zk.connect, controller.address)
        while done["partitionsOutOfSync"] and time.monotonic() < deadline:
            time.sleep(1)
            done = status(zk.connect, controller.address)
        assert done["zkMigrationState"] == "MIGRATION" and done["partitionsOutOfSync"] == []
        assert done["controller"] == {"id": CONTROLLER_ID, "kraftControllerEpoch": ctl["kraftControllerEpoch"]}
        # (/migration moves on with each dual write: status showed it between the two reads)
        assert migration["kraft_metadata_offset"] <= done["migration"]["kraftMetadataOffset"] \
            <= json.loads(client.get("/migration")[0])["kraft_metadata_offset"]
        text = kraftkit("migrate", "status", "--zookeeper", zk.connect)
        assert text.returncode == 0 and "ZK migration state: MIGRATION" in text.stdout, text
        assert f"/controller: KRaft controller {CONTROLLER_ID}" in text.stdout

        # the ZooKeeper-mode brokers still serve their data
        for name in TOPICS:
            got = tools.consume(jars.KAFKA_3, boot, name)
            assert sorted((r["key"], r["value"]) for r in got) == \
                sorted((f"{name}-k{i}".encode(), f"{name}-v{i}".encode()) for i in range(40))
        assert acl_list(jars.KAFKA_3, boot) == acls_before

        # dual writes: through the kraftkit controller, a topic created (Kafka's admin protocol), a
        # topic config altered (Kafka's kafka-configs --bootstrap-controller), a topic deleted
        host, port_text = controller.address.rsplit(":", 1)
        with KafkaConnection(host, int(port_text), timeout=30) as conn:
            created = conn.request(ApiKey.CREATE_TOPICS, conn.version_for(ApiKey.CREATE_TOPICS), {
                "Topics": [{"Name": NEW_TOPIC, "NumPartitions": 2, "ReplicationFactor": 2, "Assignments": [],
                            "Configs": [{"Name": "retention.ms", "Value": "3600000"}]}],
                "timeoutMs": 30000, "validateOnly": False})
        assert created["Topics"][0]["ErrorCode"] == 0, created
        configs_command = tools.find_class(jars.KAFKA_3, "org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand")
        tools.run_tool(jars.KAFKA_3, configs_command, ["--bootstrap-controller", controller.address, "--alter",
                       "--add-config", "retention.ms=172800000", "--entity-type", "topics", "--entity-name", "orders"],
                       timeout=120)
        with KafkaConnection(host, int(port_text), timeout=30) as conn:
            deleted = conn.request(ApiKey.DELETE_TOPICS, conn.version_for(ApiKey.DELETE_TOPICS), {
                "Topics": [{"Name": "audit", "TopicId": uuid.UUID(int=0)}], "TimeoutMs": 30000})
        assert deleted["Responses"][0]["ErrorCode"] == 0, deleted
        log = wait_log(controller, "delete topic audit", 60)
        new_id = json.loads(client.get(f"/brokers/topics/{NEW_TOPIC}")[0])["topic_id"]
        state = json.loads(client.get(f"/brokers/topics/{NEW_TOPIC}/partitions/0/state")[0])
        assert state["controller_epoch"] == ctl["kraftControllerEpoch"] and state["version"] == 1
        assert json.loads(client.get("/config/topics/orders")[0]) == \
            {"version": 1, "config": {"retention.ms": "172800000"}}
        entity_paths = [json.loads(client.get(f"/config/changes/{c}")[0])["entity_path"]
                        for c in sorted(client.get_children("/config/changes"))]
        assert entity_paths[-2:] == [f"topics/{NEW_TOPIC}", "topics/orders"]
        assert client.exists("/brokers/topics/audit") is None and client.exists("/config/topics/audit") is None
        # every write checked the claimed epoch: /controller_epoch is as the claim left it
        assert (int(client.get("/controller_epoch")[0]), client.get("/controller_epoch")[1].version) == \
            (int(claimed[1]), int(claimed[2]))
        # a client quota, a SCRAM credential and an ACL through the kraftkit controller; the ZooKeeper-mode
        # brokers read them back from ZooKeeper (describe reads its znodes; the AclAuthorizer follows the
        # ACL change notification)
        salt = b"kraftkit-dual-write-salt"
        with KafkaConnection(host, int(port_text), timeout=30) as conn:
            quota = conn.request(ApiKey.ALTER_CLIENT_QUOTAS, conn.version_for(ApiKey.ALTER_CLIENT_QUOTAS), {
                "Entries": [{"Entity": [{"EntityType": "user", "EntityName": "carol"}],
                             "Ops": [{"Key": "consumer_byte_rate", "Value": 2048.0, "Remove": False}]}],
                "ValidateOnly": False})
            scram = conn.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                                 conn.version_for(ApiKey.ALTER_USER_SCRAM_CREDENTIALS), {
                "Deletions": [], "Upsertions": [{"Name": "carol", "Mechanism": 2, "Iterations": 4096, "Salt": salt,
                                                 "SaltedPassword": hashlib.pbkdf2_hmac("sha512", b"pw2", salt, 4096)}]})
            acl = conn.request(ApiKey.CREATE_ACLS, conn.version_for(ApiKey.CREATE_ACLS), {"Creations": [{
                "ResourceType": 2, "ResourceName": "orders", "ResourcePatternType": 3, "Principal": "User:carol",
                "Host": "*", "Operation": 4, "PermissionType": 3}]})
        assert [e["ErrorCode"] for e in quota["Entries"]] == [0], quota
        assert [r["ErrorCode"] for r in scram["Results"]] == [0], scram
        assert [r["ErrorCode"] for r in acl["Results"]] == [0], acl
        wait_log(controller, "write the ACLs of /kafka-acl/Topic/orders", 60)
        carol = kafka_configs(jars.KAFKA_3, boot, "--describe", "--entity-type", "users", "--entity-name", "carol")
        assert "consumer_byte_rate=2048.0" in carol and "SCRAM-SHA-512=iterations=4096" in carol, carol
        orders = kafka_configs(jars.KAFKA_3, boot, "--describe", "--entity-type", "topics", "--entity-name", "orders")
        assert "retention.ms=172800000" in orders, orders
        deadline = time.monotonic() + 60
        want_acls = acls_before | {("TOPIC", "orders", "LITERAL", "User:carol", "*", "WRITE", "ALLOW")}
        while (seen_acls := acl_list(jars.KAFKA_3, boot)) != want_acls and time.monotonic() < deadline:
            time.sleep(1)
        assert seen_acls == want_acls

        # migrate status: /migration names the last change written; the controller's metrics say the same
        deadline = time.monotonic() + 30
        while True:
            dual = status(zk.connect, controller.address, "--controller-dir", meta)
            metrics = dual["dualWrite"]
            if metrics["lastWrittenOffset"] == dual["migration"]["kraftMetadataOffset"] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert dual["migration"]["kraftMetadataOffset"] > migration["kraft_metadata_offset"]
        assert (metrics["nodeId"], metrics["state"]) == (CONTROLLER_ID, "DUAL_WRITE")
        assert metrics["lastWrittenOffset"] == dual["migration"]["kraftMetadataOffset"]
        assert metrics["zooKeeperBlockingKRaftMillis"] >= 0
        text = kraftkit("migrate", "status", "--zookeeper", zk.connect, "--controller-dir", meta)
        assert text.returncode == 0 and "ZooKeeperBlockingKRaftMillis=" in text.stdout, text

        # what ZooKeeper holds now, against the controller's KRaft image
        source = zk_reader.KazooSource(zk.connect)
        try:
            cluster = zk_reader.read_cluster(source)
        finally:
            source.close()
        assert controller.stop() == 0
        controller = None
        shown = kraftkit("metadata", "image", meta, "--path", "/features", "--json", "-q")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["zkMigrationState"] == "MIGRATION"
        image = load_image(meta)
        kview = kraft_view(image)
        zview = zk_view(cluster)
        assert kview == zview
        assert set(zview["topics"]) == {"orders", NEW_TOPIC}
        assert kview["topics"][NEW_TOPIC][0] == new_id
        # and against Kafka's own tools: the topic ids and partition counts kafka-topics described
        tid, parts = kview["topics"]["orders"]
        assert tid == before["orders"]["id"]
        assert {p: part[0] for p, part in parts.items()} == before["orders"]["replicas"]
        assert len(parts) == TOPICS["orders"]["partitions"]
        assert kview["topic_configs"] == {"orders": {"retention.ms": "172800000"}, NEW_TOPIC: {"retention.ms": "3600000"}}
        assert kview["quotas"] == {(("client-id", "app"),): {"producer_byte_rate": 1048576.0},
                                   (("user", "carol"),): {"consumer_byte_rate": 2048.0}}
        assert sorted(kview["scram"]) == [("alice", 1), ("carol", 2)]
        assert len(kview["acls"]) == len(acls_before) + 1 == 2
        assert {n for n in image.brokers} == set(BROKERS)
        assert all(b["IsMigratingZkBroker"] for b in image.brokers.values())
    finally:
        if client is not None:
            client.stop()
            client.close()
        if controller is not None:
            controller.stop()
        for n in brokers.values():
            n.stop()
        zk.stop()
