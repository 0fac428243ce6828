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

import pytest

from kraftkit.controller.bootstrap import MIGRATION
from kraftkit.metadata.image import load_image
from tests.harness import jars

from .live import COMPLETED, LiveCluster, MigratingZkBroker, read_zk, roll, wait_log
from .test_offline_zk_tokens import TokenZkBroker, alices_token, client_config, delegation_tokens, token_login

pytestmark = [pytest.mark.kafka, pytest.mark.zookeeper, pytest.mark.timeout(900)]

CONTROLLER_ID = 3000
BROKER = 1


class MigratingTokenZkBroker(MigratingZkBroker, TokenZkBroker):
    """:class:`TokenZkBroker` with the migration's configs once ``migrate_to`` is set."""


def test_a_live_migration_carries_a_delegation_token_into_the_kraft_image(kafka_jars, tmp_path):
    with LiveCluster(tmp_path, (BROKER,), broker_cls=MigratingTokenZkBroker) as live:
        zk, broker, client = live.zk, live.brokers[BROKER], live.client
        sasl, alice, created = alices_token(broker, tmp_path)
        assert len(created) == 1, created
        token_id, hmac = created[0][0], created[0][1]

        path = f"/delegation_token/tokens/{token_id}"
        znode, stat = client.get(path)
        held = json.loads(znode)

        quorum = live.quorum()
        meta = quorum.dirs[CONTROLLER_ID]
        quorum.start()
        controller = quorum.procs[CONTROLLER_ID]
        wait_log(controller, "waiting for broker 1 (registered in ZooKeeper): not registered with KRaft yet", 60)
        roll(broker, migrate_to=quorum.voters)
        log = wait_log(controller, COMPLETED, 180)
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

        (read,) = read_zk(zk.connect).delegation_tokens
        assert quorum.stop() == {CONTROLLER_ID: 0}
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
