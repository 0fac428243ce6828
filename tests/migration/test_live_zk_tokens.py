"""A delegation token through the live ZooKeeper-to-KRaft migration, against real parts: a real
ZooKeeper and a Kafka 3.9.2 ZooKeeper-mode broker with a SASL_PLAINTEXT SCRAM listener and
``delegation.token.secret.key``, a token created with Kafka's ``kafka-delegation-tokens --create``.
``kraftkit controller run`` with the migration enabled takes the cluster over (the broker restarted
with the migration's configs); the copy carries the token into the KRaft image (``kraftkit``'s
image of the controller's log: the token's fields as ZooKeeper held them, desanitized), the dual
writes' first sync finds ZooKeeper's token equal to the image's and leaves its znode as it was, and
the migrating ZooKeeper-mode broker still lists the token and authenticates a client with it."""

from __future__ import annotations

import json
import time

import pytest

from kraftkit.controller.bootstrap import MIGRATION
from kraftkit.features.storage.format import format_storage
from kraftkit.metadata.image import load_image
from kraftkit.migration import zk_reader
from tests._procs import KraftkitProcess
from tests.harness import jars
from tests.harness.node import free_port

from .test_live_zk import wait_log
from .test_offline_zk import ZooKeeper, kafka_configs
from .test_offline_zk_tokens import PASSWORD, USER, TokenZkBroker, client_config, delegation_tokens, token_login

pytestmark = [pytest.mark.kafka, pytest.mark.zookeeper, pytest.mark.timeout(900)]

CONTROLLER_ID = 3000
BROKER = 1


class MigratingTokenZkBroker(TokenZkBroker):
    """:class:`TokenZkBroker` with the migration's configs once ``migrate_to`` is set."""

    migrate_to: str | None = None

    def properties(self) -> dict[str, object]:
        props = super().properties()
        if self.migrate_to is not None:
            props.update(
                {
                    "zookeeper.metadata.migration.enable": "true",
                    "controller.quorum.voters": self.migrate_to,
                    "controller.listener.names": "CONTROLLER",
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                    "CONTROLLER:PLAINTEXT",
                }
            )
        return props


def test_a_live_migration_carries_a_delegation_token_into_the_kraft_image(kafka_jars, tmp_path):
    zk = ZooKeeper(tmp_path / "zk")
    broker = MigratingTokenZkBroker(tmp_path / "broker", BROKER, zk.connect)
    controller: KraftkitProcess | None = None
    client = None
    try:
        zk.start()
        broker.start()
        kafka_configs(
            jars.KAFKA_3,
            broker.bootstrap,
            "--alter",
            "--add-config",
            f"SCRAM-SHA-256=[iterations=8192,password={PASSWORD}]",
            "--entity-type",
            "users",
            "--entity-name",
            USER,
        )
        sasl = f"127.0.0.1:{broker.sasl_port}"
        alice = client_config(tmp_path / "alice.properties", USER, PASSWORD)
        deadline = time.monotonic() + 60
        while not token_login(jars.KAFKA_3, sasl, alice):
            assert time.monotonic() < deadline, "alice's SCRAM credential never worked"
            time.sleep(1)
        created = delegation_tokens(
            jars.KAFKA_3, sasl, alice, "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:bob"
        )
        assert len(created) == 1, created
        token_id, hmac = created[0][0], created[0][1]

        from kazoo.client import KazooClient

        client = KazooClient(hosts=zk.connect, timeout=10)
        client.start(timeout=10)
        cluster_id = json.loads(client.get("/cluster/id")[0])["id"]
        path = f"/delegation_token/tokens/{token_id}"
        znode, stat = client.get(path)
        held = json.loads(znode)

        port = free_port()
        meta = tmp_path / "controller"
        format_storage(
            [meta], cluster_id=cluster_id, node_id=CONTROLLER_ID, release_version="3.9", no_initial_controllers=True
        )
        voters = f"{CONTROLLER_ID}@127.0.0.1:{port}"
        config = tmp_path / "controller.properties"
        config.write_text(
            "\n".join(
                [
                    "process.roles=controller",
                    f"node.id={CONTROLLER_ID}",
                    f"controller.quorum.voters={voters}",
                    f"listeners=CONTROLLER://127.0.0.1:{port}",
                    "controller.listener.names=CONTROLLER",
                    f"metadata.log.dir={meta}",
                    "zookeeper.metadata.migration.enable=true",
                    f"zookeeper.connect={zk.connect}",
                    "",
                ]
            )
        )
        controller = KraftkitProcess(
            ["controller", "run"], ["--config", str(config)], tmp_path / "controller.log", timeout=120
        )
        wait_log(controller, "waiting for broker 1 (registered in ZooKeeper): not registered with KRaft yet", 60)
        broker.stop()
        broker.migrate_to = voters
        broker.start()
        log = wait_log(controller, "Completed migration of metadata from ZooKeeper to KRaft", 180)
        assert "1 DelegationTokenRecord" in log, log[-3000:]
        log = wait_log(controller, "synced ZooKeeper with the image", 60)
        assert "delegation token" not in log.split("synced ZooKeeper with the image", 1)[1].split("\n", 1)[0]
        # ZooKeeper's token znode as Kafka wrote it (the sync found it equal to the image's)
        assert client.get(path)[0] == znode and client.get(path)[1].version == stat.version

        # the migrating ZooKeeper-mode broker still lists the token and takes it as a credential
        listed = delegation_tokens(jars.KAFKA_3, sasl, alice, "--describe", "--owner-principal", "User:alice")
        assert listed == created
        token = client_config(tmp_path / "token.properties", token_id, hmac, token=True)
        assert token_login(jars.KAFKA_3, sasl, token)

        source = zk_reader.KazooSource(zk.connect)
        try:
            (read,) = zk_reader.read_cluster(source).delegation_tokens
        finally:
            source.close()
        assert controller.stop() == 0
        controller = None
        image = load_image(meta)
        assert image.zk_migration_state == MIGRATION
        # the record: ZooKeeper's fields, the principals desanitized ("User%3Aalice" is "User:alice")
        assert held["owner"] == "User%3Aalice" and held["renewers"] == ["User%3Abob"]
        assert image.delegation_tokens == {
            token_id: {
                "Owner": "User:alice",
                "Requester": "User:alice",
                "Renewers": ["User:bob"],
                "IssueTimestamp": held["issueTimestamp"],
                "MaxTimestamp": held["maxTimestamp"],
                "ExpirationTimestamp": held["expiryTimestamp"],
                "TokenId": token_id,
            }
        }
        assert (read.owner, read.renewers, read.expiry_timestamp) == (
            "User:alice",
            ["User:bob"],
            held["expiryTimestamp"],
        )
    finally:
        if client is not None:
            client.stop()
            client.close()
        if controller is not None:
            controller.stop()
        broker.stop()
        zk.stop()
