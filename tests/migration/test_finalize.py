"""The end of the live ZooKeeper migration on an in-process kraftkit controller (one voter) against a
ZooKeeper in memory (:mod:`tests.migration._fake_zk`), checked against Kafka 3.9's rules:

* during MIGRATION a broker restarted in KRaft mode registers (no ``IsMigratingZkBroker``) in place
  of its ZooKeeper-mode registration (``ClusterControlManager.registerBroker`` refuses KRaft brokers
  only in PRE_MIGRATION); the controller-to-broker RPCs are for ZooKeeper-mode brokers only
  (``MigrationPropagator``), and the dual writes go on;
* a controller restarted with ``zookeeper.metadata.migration.enable=false`` on a log in MIGRATION
  appends ``ZkMigrationStateRecord(POST_MIGRATION)`` on activation when no ZooKeeper-mode broker is
  registered, and otherwise becomes active in MIGRATION, saying which brokers are still ZooKeeper
  ones (``ActivationRecordsGenerator.recordsForNonEmptyLog``); after POST_MIGRATION nothing is
  written to ZooKeeper;
* a controller started again with the migration enabled ignores it (as Kafka does) and its driver
  refuses to run, saying why; a ZooKeeper-mode broker's registration is refused (beyond Kafka: a
  rollback after finalizing)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kraftkit.cli.exits import EXIT_PROBLEMS
from kraftkit.cli.migrate import _kraft_migration_state, _rollback_refused_by
from kraftkit.controller.bootstrap import MIGRATION, POST_MIGRATION
from kraftkit.controller.config import ZkMigrationConfig
from kraftkit.migration import driver as drv
from kraftkit.protocol.messages import ApiKey, Errors
from tests.controller._nodes import controller, format_dirs
from tests.controller.test_registration import call, heartbeat, registration
from tests.raft._cluster import CLUSTER_ID, running, wait_for

from ._fake_zk import zk_cluster
from .test_driver import log_records, zk_registration
from .test_zk_writer import caught_up, create

pytestmark = pytest.mark.timeout(120)

#: broker sessions short enough that a stopped ZooKeeper-mode broker's expires within the test
SESSION_MS = 400
CONFIG = ZkMigrationConfig("fake:2181", (("fake", 2181),), "", batch_size=50)


class Cluster:
    """One controller directory, started again and again with or without the migration."""

    def __init__(self, tmp_path) -> None:
        self.voters, dirs = format_dirs(tmp_path, 1, release_version="3.9")
        self.dir = dirs[0]
        self.zk = zk_cluster(CLUSTER_ID)

    def start(self, *, migration: bool):
        node = controller(self.voters, self.dir, 1, zk_migration=migration, session_timeout_ms=SESSION_MS)
        if migration:
            node.controller.migration = drv.MigrationDriver(node.controller, CONFIG, lambda: self.zk, poll_s=0.05)
        return node


async def register(node, body: dict) -> dict:
    """A broker's registration, sent again while the id is held by the live session of the
    broker's previous incarnation (DUPLICATE_BROKER_REGISTRATION until it expires)."""
    for _ in range(200):
        got = await call(node, ApiKey.BROKER_REGISTRATION, body)
        if got["ErrorCode"] != Errors.DUPLICATE_BROKER_REGISTRATION:
            return got
        await asyncio.sleep(0.05)
    raise AssertionError(f"broker {body['BrokerId']}: its old session never expired")


async def migrate(node) -> dict[int, int]:
    """The takeover with ZooKeeper-mode brokers 1, 2 and 3; their broker epochs."""
    await wait_for(lambda: node.controller.active, what="the active controller")
    epochs = {}
    for bid in (1, 2, 3):
        got = await call(node, ApiKey.BROKER_REGISTRATION, zk_registration(bid))
        assert got["ErrorCode"] == Errors.NONE, got
        epochs[bid] = got["BrokerEpoch"]
    await wait_for(lambda: node.controller.migration.state == drv.DUAL_WRITE, what="the migration")
    return epochs


async def to_kraft(node, bid: int) -> int:
    """Broker ``bid`` restarted in KRaft mode: registered and unfenced; its broker epoch."""
    got = await register(node, registration(bid))
    assert got["ErrorCode"] == Errors.NONE, got
    hb = await call(node, ApiKey.BROKER_HEARTBEAT, heartbeat(bid, got["BrokerEpoch"], 10**9))
    assert hb["ErrorCode"] == Errors.NONE and not hb["IsFenced"], hb
    return got["BrokerEpoch"]


def test_a_broker_restarted_in_kraft_mode_registers_during_the_migration_and_dual_writes_go_on(tmp_path):
    c = Cluster(tmp_path)

    async def main():
        node = c.start(migration=True)
        d = node.controller.migration
        async with running([node]):
            await migrate(node)
            await to_kraft(node, 1)
            reg = node.controller.image.brokers[1]
            assert not reg["IsMigratingZkBroker"] and not reg["Fenced"]
            assert node.controller.zk_brokers() == [2, 3]
            # ZooKeeper-mode brokers 2 and 3 come back (heartbeats of their registrations)
            for bid in (2, 3):
                got = await register(node, zk_registration(bid))
                assert got["ErrorCode"] == Errors.NONE, got
                hb = await call(node, ApiKey.BROKER_HEARTBEAT, heartbeat(bid, got["BrokerEpoch"], 10**9))
                assert not hb["IsFenced"], hb
            # the controller-to-broker RPCs go to the ZooKeeper-mode brokers only
            await wait_for(lambda: d.propagator is not None and set(d.propagator.channels) == {2, 3},
                           what="the ZooKeeper-mode brokers' channels")
            # a topic created now (on the KRaft broker, the only one whose session lives for sure)
            body = create("kappa", -1, -1)
            body["Topics"][0]["Assignments"] = [{"PartitionIndex": 0, "BrokerIds": [1]}]
            got = await call(node, ApiKey.CREATE_TOPICS, body)
            assert got["Topics"][0]["ErrorCode"] == Errors.NONE, got
            await caught_up(node)
            assert c.zk.json("/brokers/topics/kappa")["partitions"] == {"0": [1]}
            assert node.controller.image.zk_migration_state == MIGRATION
            assert 1 not in d.propagator.channels

    asyncio.run(main())


def test_a_controller_without_the_migration_finalizes_once_every_broker_runs_in_kraft_mode(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    c = Cluster(tmp_path)

    async def main():
        node = c.start(migration=True)
        async with running([node]):
            await migrate(node)
            await caught_up(node)
            # `kraftkit migrate rollback --controller-dir`: every broker in ZooKeeper mode, MIGRATION: allowed
            assert _rollback_refused_by(c.dir) is None
            await to_kraft(node, 1)
            await caught_up(node)
        zk_before = dict(c.zk.nodes)
        # ... and refused once a broker runs in KRaft mode, naming it
        code, why = _rollback_refused_by(c.dir)
        assert code == EXIT_PROBLEMS and "broker(s) 1 run in KRaft mode" in why, why

        # brokers 2 and 3 still in ZooKeeper mode: it becomes active in MIGRATION, says which, and
        # takes no write ZooKeeper would miss
        node = c.start(migration=False)
        async with running([node]):
            await wait_for(lambda: node.controller.active, what="the active controller")
            assert node.controller.image.zk_migration_state == MIGRATION
            said = [r.getMessage() for r in caplog.records if "cannot complete the ZK migration" in r.getMessage()]
            assert len(said) == 1 and "[2, 3]" in said[0]
            got = await call(node, ApiKey.CREATE_TOPICS, create("early", 1, 1))
            assert got["Topics"][0]["ErrorCode"] == Errors.UNSUPPORTED_VERSION
            assert "zookeeper.metadata.migration.enable=false" in got["Topics"][0]["ErrorMessage"]
            # a ZooKeeper-mode broker cannot register with it (Kafka's zkRegistrationAllowed)
            refused = await call(node, ApiKey.BROKER_REGISTRATION, zk_registration(4))
            assert refused["ErrorCode"] == Errors.BROKER_ID_NOT_REGISTERED
            for bid in (2, 3):
                await to_kraft(node, bid)
            assert node.controller.zk_brokers() == []
            assert node.controller.image.zk_migration_state == MIGRATION  # (only an activation finalizes)

        # restarted: now it finalizes before it is active
        node = c.start(migration=False)
        async with running([node]):
            await wait_for(lambda: node.controller.active, what="the active controller")
            assert node.controller.image.zk_migration_state == POST_MIGRATION
            states = [(o, data["ZkMigrationState"]) for _b, o, name, data in log_records(node)
                      if name == "ZkMigrationStateRecord"]
            assert states[-1][1] == POST_MIGRATION and [s for _o, s in states].count(POST_MIGRATION) == 1
            # writes are taken, and ZooKeeper is not written any more
            got = await call(node, ApiKey.CREATE_TOPICS, create("after", 1, 1))
            assert got["Topics"][0]["ErrorCode"] == Errors.NONE, got
            assert "after" in node.controller.image.topic_ids
        assert c.zk.nodes == zk_before
        # what `kraftkit migrate status --controller-dir` reads of the controller's log
        assert _kraft_migration_state(c.dir) == "POST_MIGRATION"
        code, why = _rollback_refused_by(c.dir)
        assert code == EXIT_PROBLEMS and "finalized (POST_MIGRATION)" in why and "refused" in why, why

        # started again with the migration enabled: Kafka ignores the setting; the driver refuses
        # to run (a rollback is too late) and so does a ZooKeeper-mode broker's registration
        caplog.clear()
        node = c.start(migration=True)
        async with running([node]):
            await wait_for(lambda: node.controller.active, what="the active controller")
            await wait_for(lambda: any("the ZK migration was finalized" in r.getMessage() for r in caplog.records),
                           what="the driver's refusal")
            assert any("ignoring zookeeper.metadata.migration.enable=true" in r.getMessage() for r in caplog.records)
            assert node.controller.migration.state == drv.INACTIVE
            refused = await register(node, zk_registration(2))
            assert refused["ErrorCode"] == Errors.BROKER_ID_NOT_REGISTERED
            assert "finalized (POST_MIGRATION)" in node.controller.apis.refused_registrations[2]
            assert node.controller.image.zk_migration_state == POST_MIGRATION
        assert c.zk.nodes == zk_before

    asyncio.run(main())
