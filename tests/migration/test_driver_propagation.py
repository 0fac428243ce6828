"""The migration driver's controller-to-broker RPCs on an in-process kraftkit controller against a
ZooKeeper in memory and fake ZooKeeper-mode brokers on loopback (the propagator's own rules are in
test_propagator.py, the real brokers in test_live_zk_propagation.py): once MIGRATED, a migrating
broker the controller unfences gets the UpdateMetadata of every partition and the LeaderAndIsr of
its own, from this controller (isKRaftController, the ZooKeeper controller epoch it claimed); a
broker still fenced gets nothing; the controller's end closes the connections."""

from __future__ import annotations

import asyncio

import pytest

from kraftkit.migration import driver as drv
from kraftkit.migration.propagator import INCREMENTAL
from kraftkit.protocol.messages import ApiKey, Errors
from tests.controller.test_registration import call, heartbeat
from tests.migration.test_driver import start_migrating_controller, zk_registration
from tests.migration.test_propagator import FakeZkBroker
from tests.raft._cluster import CLUSTER_ID, running, wait_for

from ._fake_zk import zk_cluster

pytestmark = pytest.mark.timeout(120)


def test_a_broker_unfenced_after_the_takeover_hears_from_the_controller(tmp_path):
    zk = zk_cluster(CLUSTER_ID)

    async def main():
        fakes = {b: FakeZkBroker() for b in (1, 2, 3)}
        for f in fakes.values():
            await f.start()
        node = start_migrating_controller(tmp_path, zk)
        d = node.controller.migration
        try:
            async with running([node]):
                await wait_for(lambda: node.controller.active, what="the active controller")
                epochs = {}
                for b, f in fakes.items():
                    listeners = [{"Name": "PLAINTEXT", "Host": "127.0.0.1", "Port": f.port, "SecurityProtocol": 0}]
                    got = await call(node, ApiKey.BROKER_REGISTRATION, zk_registration(b, Listeners=listeners))
                    assert got["ErrorCode"] == Errors.NONE, got
                    epochs[b] = got["BrokerEpoch"]
                await wait_for(lambda: d.state == drv.DUAL_WRITE, what="the migration")
                zk_epoch = int(zk.nodes["/controller_epoch"][0])
                # every broker is still fenced (none heartbeated): nobody to send to
                assert d.propagator is not None and d.propagator.channels == {}
                hb = await call(node, ApiKey.BROKER_HEARTBEAT, heartbeat(1, epochs[1], 10**9))
                assert hb["ErrorCode"] == Errors.NONE and not hb["IsFenced"], hb
                await wait_for(lambda: len(fakes[1].got) >= 3, what="broker 1's requests")
                # an UpdateMetadata of every partition, then the incremental batch: its LeaderAndIsr and
                # the UpdateMetadata of the partitions in it
                assert [api for api, _ in fakes[1].got] == [ApiKey.UPDATE_METADATA, ApiKey.LEADER_AND_ISR,
                                                             ApiKey.UPDATE_METADATA]
                umr, lisr = fakes[1].got[0][1], fakes[1].got[1][1]
                # ZooKeeper's alpha has replicas [1, 2] and [2, 1], beta [3]
                held = {(t["TopicName"], p["PartitionIndex"]) for t in lisr["TopicStates"] for p in t["PartitionStates"]}
                assert held == {("alpha", 0), ("alpha", 1)}
                named = {(t["TopicName"], p["PartitionIndex"]) for t in umr["TopicStates"] for p in t["PartitionStates"]}
                assert named == {("alpha", 0), ("alpha", 1), ("beta", 0)}
                assert [b["Id"] for b in umr["LiveBrokers"]] == [1]
                for body in (lisr, umr):
                    assert (body["ControllerId"], body["isKRaftController"], body["ControllerEpoch"]) == \
                        (node.node_id, True, zk_epoch)
                    assert body["BrokerEpoch"] == epochs[1]
                assert lisr["Type"] == INCREMENTAL
                await wait_for(lambda: d.propagator.answered[(1, "LeaderAndIsr")] == 1, what="the answer")
                assert fakes[2].got == [] and fakes[3].got == []
                assert set(d.propagator.channels) == {1}
            assert d.propagator is None  # (the controller's end closed it)
        finally:
            for f in fakes.values():
                await f.stop()

    asyncio.run(main())
