"""Partition leadership on three in-process controllers over loopback: a broker that asks to be
fenced loses its leaderships and its ISR places (committed on every node), AlterPartition from a
partition leader puts it back, the periodic preferred-leader rebalance (every
``leader.imbalance.check.interval.seconds``) gives the leaderships back to the first replicas, and a
new active controller after the old one is stopped carries on from the log: ElectLeaders and
AlterPartition answered by it with the epochs the old one committed."""

from __future__ import annotations

import asyncio

import pytest

from kraftkit.protocol.messages import ApiKey, Errors
from tests.raft._cluster import wait_for

from ._nodes import active_of, controller, format_dirs, running
from .test_registration import call, heartbeat, quiet_leader, registration
from .test_topics_live import create

pytestmark = pytest.mark.timeout(120)


def leaders(node, name: str = "t") -> dict[int, tuple[int, list[int], list[int]]]:
    t = node.controller.image.topic(name)
    return {pid: (p["Leader"], list(p["Replicas"]), list(p["Isr"])) for pid, p in (t.partitions if t else {}).items()}


def alter_isr(node, bid: int, epoch: int, name: str, pid: int, isr: list[int]) -> dict:
    t = node.controller.image.topic(name)
    p = t.partitions[pid]
    return {"BrokerId": bid, "BrokerEpoch": epoch, "Topics": [{"TopicId": t.id, "Partitions": [{
        "PartitionIndex": pid, "LeaderEpoch": p["LeaderEpoch"], "PartitionEpoch": p["PartitionEpoch"],
        "LeaderRecoveryState": 0, "NewIsrWithEpochs": [{"BrokerId": b, "BrokerEpoch": -1} for b in isr]}]}]}


def test_fencing_alter_partition_rebalance_and_a_new_active_controller(tmp_path):
    async def main():
        voters, dirs = format_dirs(tmp_path, release_version="4.3")
        config = {"leader.imbalance.check.interval.seconds": "1"}
        nodes = [controller(voters, d, i, static_config=config) for i, d in zip(voters, dirs, strict=True)]
        async with running(nodes):
            leader = await quiet_leader(nodes)
            epochs = {}
            for bid in (100, 101):
                got = await call(leader, ApiKey.BROKER_REGISTRATION, registration(bid))
                epochs[bid] = got["BrokerEpoch"]
                hb = await call(leader, ApiKey.BROKER_HEARTBEAT, heartbeat(bid, epochs[bid], epochs[bid]))
                assert hb["IsFenced"] is False
            got = await call(leader, ApiKey.CREATE_TOPICS, create(("t", 4, 2)))
            assert got["Topics"][0]["ErrorCode"] == Errors.NONE
            first = leaders(leader)
            preferred = {pid: r[0] for pid, (_l, r, _i) in first.items()}
            assert {pid: v[0] for pid, v in first.items()} == preferred and set(preferred.values()) == {100, 101}

            # broker 100 asks to be fenced: every partition led by 101, ISR [101], on every node
            end = leader.replica().log.end_offset
            hb = await call(leader, ApiKey.BROKER_HEARTBEAT, heartbeat(100, epochs[100], end, fence=True))
            assert hb["IsFenced"] is True
            await wait_for(lambda: all(leaders(n) and all(v[0] == 101 and v[2] == [101] for v in leaders(n).values())
                                       for n in nodes), 10)
            # unfenced again, then its leaders take it back into their ISRs
            end = leader.replica().log.end_offset
            hb = await call(leader, ApiKey.BROKER_HEARTBEAT, heartbeat(100, epochs[100], end))
            assert hb["IsFenced"] is False
            for pid in first:
                got = await call(leader, ApiKey.ALTER_PARTITION, alter_isr(leader, 101, epochs[101], "t", pid,
                                                                           [101, 100]))
                part = got["Topics"][0]["Partitions"][0]
                assert (part["ErrorCode"], part["LeaderId"], part["Isr"]) == (Errors.NONE, 101, [101, 100])
            # the rebalance (every second) gives the leaderships back to the preferred replicas
            await wait_for(lambda: all({pid: v[0] for pid, v in leaders(n).items()} == preferred for n in nodes), 15)

            # the active controller stops: another one takes over from the log and answers
            await leader.stop()
            rest = [n for n in nodes if n is not leader]
            new = await wait_for(lambda: active_of(rest), what="a new active controller")
            for bid in (100, 101):
                end = new.replica().log.end_offset
                hb = await call(new, ApiKey.BROKER_HEARTBEAT, heartbeat(bid, epochs[bid], end))
                assert (hb["ErrorCode"], hb["IsFenced"]) == (Errors.NONE, False)
            pid, (lead, _r, isr) = next(iter(leaders(new).items()))
            got = await call(new, ApiKey.ALTER_PARTITION, alter_isr(new, lead, epochs[lead], "t", pid, [lead]))
            assert got["Topics"][0]["Partitions"][0]["Isr"] == [lead]
            # an old leader epoch is fenced, as on the first controller
            body = alter_isr(new, lead, epochs[lead], "t", pid, isr)
            body["Topics"][0]["Partitions"][0]["LeaderEpoch"] -= 1
            got = await call(new, ApiKey.ALTER_PARTITION, body)
            assert got["Topics"][0]["Partitions"][0]["ErrorCode"] == Errors.FENCED_LEADER_EPOCH
            got = await call(new, ApiKey.ELECT_LEADERS, {"ElectionType": 0, "TimeoutMs": 1000,
                                                         "TopicPartitions": [{"Topic": "t", "Partitions": [pid]}]})
            assert got["ReplicaElectionResults"][0]["PartitionResult"][0]["ErrorCode"] == Errors.ELECTION_NOT_NEEDED
            # a follower refuses: NOT_CONTROLLER for the whole request
            follower = next(n for n in rest if n is not new)
            got = await call(follower, ApiKey.ALTER_PARTITION, alter_isr(follower, lead, epochs[lead], "t", pid, [lead]))
            assert (got["ErrorCode"], got["Topics"]) == (Errors.NOT_CONTROLLER, [])
            await asyncio.sleep(0)

    asyncio.run(main())
