"""The live ZooKeeper migration's driver on an in-process kraftkit controller (one voter) against a
ZooKeeper in memory (:mod:`tests.migration._fake_zk`), checked against Kafka 3.9's rules: the
bootstrap transaction carries ZkMigrationStateRecord(PRE_MIGRATION) (``ActivationRecordsGenerator``);
ZooKeeper brokers register only as migrating brokers and KRaft brokers not at all in PRE_MIGRATION
(``ClusterControlManager.registerBroker``); the driver waits for every broker of ZooKeeper
(``/brokers/ids`` and the topic assignments) and says why; it claims ``/controller_epoch`` (the next
epoch, conditional on its zkVersion) and ``/controller`` (``kafka.zk.ControllerZNode``'s JSON with
``kraftControllerEpoch``), copies inside one metadata transaction in batches of
``zookeeper.metadata.migration.min.batch.size`` and ends in MIGRATION, then writes ``/migration``
(``MigrationZNode``). Faults: a ZooKeeper read failing after the transaction began, and another
controller taking ``/controller_epoch`` between two batches, abort the transaction (the image
never shows part of it) and the driver starts over; so does a ZooKeeper connection lost between
two batches (the abort's reason names the ZooKeeper). A controller restarted with a transaction
left open aborts it before it is active."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit.controller.bootstrap import MIGRATION, PRE_MIGRATION
from kraftkit.controller.config import ZkMigrationConfig
from kraftkit.features.registry import registry
from kraftkit.metadata.records import record_type
from kraftkit.migration import driver as drv
from kraftkit.protocol.messages import ApiKey, Errors
from tests.controller._nodes import controller, format_dirs
from tests.controller.test_registration import call, registration
from tests.raft._cluster import CLUSTER_ID, running, wait_for

from ._fake_zk import TOKEN_ID, zk_cluster

pytestmark = pytest.mark.timeout(120)

MV = registry().metadata_version("3.9")


def zk_registration(bid: int, level: int = MV.level, **kw) -> dict:
    """A Kafka 3.9 ZooKeeper-mode broker's BrokerRegistration: its IBP as the metadata.version range."""
    return registration(bid, IsMigratingZkBroker=True,
                        Features=[{"Name": "metadata.version", "MinSupportedVersion": level,
                                   "MaxSupportedVersion": level}], **kw)


def log_records(node) -> list[tuple[int, int, str, dict]]:
    """(batch base offset, offset, record name, fields) of every committed metadata record."""
    out = []
    for batch in node.committed_batches(0):
        if batch.is_control:
            continue
        for r in batch.records():
            key, _v, data = decode_metadata_record(r.value)
            out.append((batch.base_offset, r.offset, record_type(key)[1], data))
    return out


def start_migrating_controller(tmp_path, zk, batch_size: int = 2, **node_kw):
    voters, dirs = format_dirs(tmp_path, 1, release_version="3.9")
    node = controller(voters, dirs[0], 1, zk_migration=True, **node_kw)
    config = ZkMigrationConfig("fake:2181", (("fake", 2181),), "", batch_size=batch_size)
    node.controller.migration = drv.MigrationDriver(node.controller, config, lambda: zk, poll_s=0.05)
    return node


async def register_all(node, ids=(1, 2, 3)) -> None:
    for bid in ids:
        got = await call(node, ApiKey.BROKER_REGISTRATION, zk_registration(bid))
        assert got["ErrorCode"] == Errors.NONE, got


def test_bootstrap_wait_takeover_and_copy_as_kafka_39_does(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="kraftkit.migration.driver")
    zk = zk_cluster(CLUSTER_ID)

    async def main():
        node = start_migrating_controller(tmp_path, zk)
        d = node.controller.migration
        async with running([node]):
            await wait_for(lambda: node.controller.active, what="the active controller")
            # the bootstrap: one transaction ending with PRE_MIGRATION
            recs = log_records(node)
            boot = [(name, data) for base, _o, name, data in recs if base == recs[0][0]]
            assert boot[0] == ("BeginTransactionRecord", {"Name": "Bootstrap records"})
            assert boot[-2:] == [("ZkMigrationStateRecord", {"ZkMigrationState": PRE_MIGRATION}),
                                 ("EndTransactionRecord", {})]
            assert node.controller.image.zk_migration_state == PRE_MIGRATION
            # it waits for brokers 1 and 2 (in /brokers/ids) and 3 (named by beta's assignment)
            await wait_for(lambda: d.state == drv.WAIT_FOR_BROKERS and len(d.waiting) == 3, what="the broker wait")
            assert [w.split(" (")[0] for w in d.waiting] == ["broker 1", "broker 2", "broker 3"]
            assert "registered in ZooKeeper" in d.waiting[0] and "not registered with KRaft yet" in d.waiting[0]
            assert "named by a topic assignment, not in /brokers/ids" in d.waiting[2]
            # a KRaft broker may not register in PRE_MIGRATION; ZooKeeper brokers with another
            # cluster id or IBP are refused, and the wait names the reason
            kraft = await call(node, ApiKey.BROKER_REGISTRATION, registration(7))
            assert kraft["ErrorCode"] == Errors.BROKER_ID_NOT_REGISTERED
            other = await call(node, ApiKey.BROKER_REGISTRATION, zk_registration(1, ClusterId="AAAAAAAAAAAAAAAAAAAAAA"))
            assert other["ErrorCode"] == Errors.INCONSISTENT_CLUSTER_ID
            old_ibp = await call(node, ApiKey.BROKER_REGISTRATION, zk_registration(2, level=MV.level - 1))
            assert old_ibp["ErrorCode"] == Errors.UNSUPPORTED_VERSION
            await wait_for(lambda: "INCONSISTENT_CLUSTER_ID" in d.waiting[0] and "UNSUPPORTED_VERSION" in d.waiting[1],
                           what="the refusals in the wait")
            assert f"does not support finalized version {MV.level} of metadata.version" in d.waiting[1]
            said = [r.getMessage() for r in caplog.records if "waiting for" in r.getMessage()]
            assert any("INCONSISTENT_CLUSTER_ID" in s for s in said)
            assert not any(r.levelno >= logging.ERROR for r in caplog.records)
            epoch_version = zk.nodes["/controller_epoch"][1]

            # with every broker registered it takes over, a partition out of sync in ZooKeeper
            # included (as Kafka: the ZooKeeper-mode leader's AlterPartition brings the replica back
            # into the ISR afterwards, through this controller)
            state = "/brokers/topics/alpha/partitions/1/state"
            in_sync = zk.nodes[state][0]
            zk.set(state, in_sync.replace(b'"isr": [2, 1]', b'"isr": [2]'))
            await register_all(node)
            await wait_for(lambda: d.state == drv.DUAL_WRITE, what="the migration")
            raft_epoch = node.replica().core.epoch
            image = node.controller.image
            assert image.zk_migration_state == MIGRATION

            # the takeover: /controller_epoch one up (conditionally), /controller names this controller
            assert zk.nodes["/controller_epoch"] == (b"5", epoch_version + 1)
            assert zk.json("/controller")["brokerid"] == 1
            assert zk.json("/controller")["kraftControllerEpoch"] == raft_epoch
            assert zk.json("/controller")["version"] == 2
            # the copy: the records of the transaction, in batches of at most 2
            recs = log_records(node)
            begin = max(i for i, r in enumerate(recs) if r[2] == "BeginTransactionRecord")
            tx = recs[begin:]
            assert tx[0][3] == {"Name": "ZK Migration"}
            assert [r[2] for r in tx[-2:]] == ["ZkMigrationStateRecord", "EndTransactionRecord"]
            assert tx[-2][3] == {"ZkMigrationState": MIGRATION}
            data = [r for r in tx[1:-2]]
            sizes: dict[int, int] = {}
            for base, *_ in data:
                sizes[base] = sizes.get(base, 0) + 1
            assert max(sizes.values()) <= 2 and len(sizes) >= 4
            assert "FeatureLevelRecord" not in {r[2] for r in data}
            # /migration: this controller and the offset and epoch of the copy's last record
            migration = zk.json("/migration")
            assert migration == {"version": 0, "kraft_controller_id": 1, "kraft_controller_epoch": raft_epoch,
                                 "kraft_metadata_offset": tx[-1][1], "kraft_metadata_epoch": raft_epoch}
            # the image holds what ZooKeeper held
            ids = image.topic_ids
            assert str(ids["alpha"]) == str(uuid.UUID(bytes=__import__("base64").urlsafe_b64decode("w9dBFJ9cSLmaxVCMRBMZDQ==")))
            alpha = image.topics[ids["alpha"]].partitions
            assert (alpha[0]["Leader"], alpha[0]["LeaderEpoch"], alpha[0]["Isr"], alpha[0]["PartitionEpoch"]) \
                == (1, 3, [1, 2], 5)
            assert (alpha[1]["Leader"], alpha[1]["Isr"], alpha[1]["Replicas"]) == (2, [2], [2, 1])
            assert image.topics[ids["beta"]].partitions[0]["Leader"] == 3
            assert image.configs[(2, "alpha")] == {"retention.ms": "3600000", "cleanup.policy": "compact"}
            assert image.client_quotas == {(("client-id", "app"),): {"producer_byte_rate": 1024.0}}
            assert [(a["Principal"], a["Operation"]) for a in image.acls.values()] == [("User:alice", 3)]
            assert image.next_producer_id == 1000
            # the token: its znode's fields, the principals desanitized ("User%3Aalice" is "User:alice")
            assert image.delegation_tokens == {TOKEN_ID: {
                "Owner": "User:alice", "Requester": "User:alice", "Renewers": ["User:bob"],
                "IssueTimestamp": 1700000000000, "MaxTimestamp": 1700604800000,
                "ExpirationTimestamp": 1700086400000, "TokenId": TOKEN_ID}}

    asyncio.run(main())


def test_a_zookeeper_read_failing_after_the_transaction_began_aborts_it_then_the_copy_starts_over(tmp_path):
    zk = zk_cluster(CLUSTER_ID)
    zk.fail_on(lambda what, path: what == "get" and path == "/config/topics/alpha")

    async def main():
        node = start_migrating_controller(tmp_path, zk)
        d = node.controller.migration
        async with running([node]):
            await wait_for(lambda: node.controller.active, what="the active controller")
            await register_all(node)
            await wait_for(lambda: any(r[2] == "AbortTransactionRecord" for r in log_records(node)), what="the abort")
            names = [r[2] for r in log_records(node)]
            at = names.index("BeginTransactionRecord", 1)
            assert names[at:] == ["BeginTransactionRecord", "AbortTransactionRecord"]
            image = node.controller.image
            assert image.zk_migration_state == PRE_MIGRATION and not image.in_transaction and not image.topic_ids
            zk.fail_on(None)
            await wait_for(lambda: d.state == drv.DUAL_WRITE, what="the migration, started over")
            assert sorted(node.controller.image.topic_ids) == ["alpha", "beta"]
            assert node.controller.image.zk_migration_state == MIGRATION

    asyncio.run(main())


def test_another_controller_taking_zookeeper_between_two_batches_aborts_the_copy(tmp_path):
    zk = zk_cluster(CLUSTER_ID)
    reads = []

    def zk_controller_moves(what: str, path: str) -> bool:
        if what == "get" and path == "/controller_epoch":
            reads.append(path)
            if len(reads) == 3:  # (1: the claim, 2: before the first batch, 3: before the second)
                _data, version = zk.nodes[path]
                # a ZooKeeper-mode controller (broker 2) elected meanwhile, as KafkaController registers
                zk.nodes[path] = (b"9", version + 1)
                zk.nodes["/controller"] = (json.dumps({"version": 2, "brokerid": 2, "timestamp": "2",
                                                       "kraftControllerEpoch": -1}).encode(), 0)
        return False

    zk.fail_on(zk_controller_moves)

    async def main():
        node = start_migrating_controller(tmp_path, zk)
        d = node.controller.migration
        async with running([node]):
            await wait_for(lambda: node.controller.active, what="the active controller")
            await register_all(node)
            await wait_for(lambda: any(r[2] == "AbortTransactionRecord" for r in log_records(node)), what="the abort")
            recs = log_records(node)
            at = [r[2] for r in recs].index("BeginTransactionRecord", 1)
            tx = [r[2] for r in recs[at:]]
            assert tx[0] == "BeginTransactionRecord" and tx[-1] == "AbortTransactionRecord" and len(tx) == 4
            assert "another controller claimed ZooKeeper" in recs[at + 3][3]["Reason"]
            assert not node.controller.image.topic_ids
            # the driver starts over: it claims the epoch after the other controller's
            await wait_for(lambda: d.state == drv.DUAL_WRITE, what="the migration, started over")
            assert zk.nodes["/controller_epoch"][0] == b"10"
            assert sorted(node.controller.image.topic_ids) == ["alpha", "beta"]

    asyncio.run(main())


def test_a_controller_restarted_with_a_transaction_left_open_aborts_it_before_it_is_active(tmp_path):
    from kraftkit._core import encode_metadata_record

    voters, dirs = format_dirs(tmp_path, 1, release_version="3.9")

    def enc(name: str, data: dict) -> bytes:
        return encode_metadata_record(record_type(name)[0], 0, data)

    async def main():
        node = controller(voters, dirs[0], 1)
        async with running([node]):
            await wait_for(lambda: node.controller.active, what="the active controller")
            await wait_for(lambda: node.controller.image.controllers, what="its registration")  # (nothing after)
            _base, committed = node.append_nowait([enc("BeginTransactionRecord", {"Name": "ZK Migration"}),
                                                   enc("TopicRecord", {"Name": "half", "TopicId": uuid.uuid4()})])
            await committed
            assert node.controller.image.in_transaction
        again = controller(voters, dirs[0], 1)
        async with running([again]):
            await wait_for(lambda: again.controller.active, what="the active controller after the restart")
            names = [(r[2], r[3]) for r in log_records(again)]
            half = next(i for i, (n, d) in enumerate(names) if n == "TopicRecord" and d["Name"] == "half")
            # the next record is the abort, before anything the restarted controller writes as active
            assert names[half + 1] == ("AbortTransactionRecord", {"Reason": "Controller failover"})
            assert not again.controller.image.in_transaction and "half" not in again.controller.image.topic_ids

    asyncio.run(main())


def test_a_kraft_cluster_is_not_taken_over_by_a_controller_with_the_migration_enabled(tmp_path, caplog):
    voters, dirs = format_dirs(tmp_path, 1, release_version="3.9")

    async def main():
        node = controller(voters, dirs[0], 1)
        async with running([node]):
            await wait_for(lambda: node.controller.active, what="the active controller")
        again = controller(voters, dirs[0], 1, zk_migration=True)
        async with running([again]):
            await wait_for(lambda: any("created in KRaft mode" in r.getMessage() for r in caplog.records),
                           what="the refusal")
            await asyncio.sleep(0.3)
            assert not again.controller.active

    asyncio.run(main())


def test_the_zookeeper_json_of_the_takeover_is_kafkas():
    from kraftkit.migration.zk_client import MigrationZNode, controller_json, parse_controller

    assert json.loads(controller_json(3000, 1700000000123, 7)) == \
        {"version": 2, "brokerid": 3000, "timestamp": "1700000000123", "kraftControllerEpoch": 7}
    assert parse_controller(b'{"version":1,"brokerid":2,"timestamp":"1"}') == (2, None)
    state = MigrationZNode(3000, 7, 120, 7)
    assert MigrationZNode.decode(state.encode()) == state
    for bad in (b"[]", b'{"version":1}', b'{"version":0,"kraft_controller_id":"x","kraft_controller_epoch":1,'
                b'"kraft_metadata_offset":1,"kraft_metadata_epoch":1}', b"\xff"):
        with pytest.raises(Exception, match="/migration: not Kafka's migration JSON"):
            MigrationZNode.decode(bad)



def test_delegation_tokens_at_a_metadata_version_without_their_record_abort_the_copy_saying_why(tmp_path):
    """At metadata.version 3.6-IV1 (the lowest a migration starts at) there is no
    DelegationTokenRecord (``isDelegationTokenSupported`` is 3.6-IV2): a ZooKeeper holding a token
    is not copied, the transaction is aborted with the reason, and once the token is gone (expired)
    the copy starts over and completes."""
    mv = registry().metadata_version("3.6-IV1")
    assert not mv.supported("delegation_token") and registry().metadata_version("3.6-IV2").supported("delegation_token")
    zk = zk_cluster(CLUSTER_ID)
    voters, dirs = format_dirs(tmp_path, 1, release_version=mv.name)
    node = controller(voters, dirs[0], 1, zk_migration=True)
    config = ZkMigrationConfig("fake:2181", (("fake", 2181),), "", batch_size=50)
    node.controller.migration = d = drv.MigrationDriver(node.controller, config, lambda: zk, poll_s=0.05)

    async def main():
        async with running([node]):
            await wait_for(lambda: node.controller.active, what="the active controller")
            for bid in (1, 2, 3):
                got = await call(node, ApiKey.BROKER_REGISTRATION, zk_registration(bid, level=mv.level))
                assert got["ErrorCode"] == Errors.NONE, got
            await wait_for(lambda: any(r[2] == "AbortTransactionRecord" for r in log_records(node)), what="the abort")
            abort = next(r[3] for r in log_records(node) if r[2] == "AbortTransactionRecord")
            assert abort["Reason"].startswith(f"cannot migrate: delegation tokens (/delegation_token/tokens/{TOKEN_ID}) "
                                              "at metadata.version 3.6-IV1, which cannot hold them"), abort
            image = node.controller.image
            assert image.zk_migration_state == PRE_MIGRATION and not image.topic_ids and not image.delegation_tokens
            del zk.nodes[f"/delegation_token/tokens/{TOKEN_ID}"]
            await wait_for(lambda: d.state == drv.DUAL_WRITE, what="the migration, started over")
            assert sorted(node.controller.image.topic_ids) == ["alpha", "beta"]

    asyncio.run(main())


def test_a_zookeeper_connection_lost_between_two_batches_aborts_the_copy_naming_zookeeper(tmp_path, caplog):
    from kazoo.exceptions import ConnectionLoss

    zk = zk_cluster(CLUSTER_ID)
    reads = []

    def connection_lost_once(what: str, path: str) -> bool:
        if what == "get" and path == "/controller_epoch":
            reads.append(path)
            if len(reads) == 3:  # (1: the claim, 2: before the first batch, 3: before the second)
                raise ConnectionLoss()  # (what kazoo raises for a call in flight when the connection drops)
        return False

    zk.fail_on(connection_lost_once)

    async def main():
        node = start_migrating_controller(tmp_path, zk)
        d = node.controller.migration
        async with running([node]):
            await wait_for(lambda: node.controller.active, what="the active controller")
            await register_all(node)
            await wait_for(lambda: d.state == drv.DUAL_WRITE, what="the migration, started over")
            recs = log_records(node)
            at = [r[2] for r in recs].index("BeginTransactionRecord", 1)
            tx = [r[2] for r in recs[at:at + 4]]
            # the first batch committed, then the abort, saying which ZooKeeper and what
            assert tx[0] == "BeginTransactionRecord" and tx[-1] == "AbortTransactionRecord", tx
            assert recs[at + 3][3]["Reason"] == "ZooKeeper fake:2181: ConnectionLoss"
            assert [r[2] for r in recs].count("BeginTransactionRecord") == 3  # (the bootstrap's, two copies)
            assert sorted(node.controller.image.topic_ids) == ["alpha", "beta"]

    with caplog.at_level(logging.INFO, logger="kraftkit.migration.driver"):
        asyncio.run(main())
    said = [r.getMessage() for r in caplog.records]
    assert "node 1: ZK migration: aborting the copy: ZooKeeper fake:2181: ConnectionLoss" in said
    batches = [m for m in said if "ZK migration: copy batch" in m]
    # each copy says its first batch and its last (the batches in between at most once a second)
    assert sum("copy batch 1 of" in m for m in batches) == 2
    n = int(batches[-1].split(" of ")[1].split()[0])
    assert f"node 1: ZK migration: copy batch {n} of {n} committed" in batches[-1]
