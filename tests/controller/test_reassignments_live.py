"""AlterPartitionReassignments and ListPartitionReassignments on three in-process controllers over
loopback: the active controller commits the reassignment (direct and inside an Envelope, at v0 and
v1) and answers per partition; a standby answers Alter with NOT_CONTROLLER (at the envelope level
when forwarded) and List from its committed image, as Kafka's controllers do (a read event on any
controller); a request naming no topic is answered at once on any node."""

from __future__ import annotations

import asyncio

import pytest

from kraftkit.protocol.messages import ApiKey, Errors, decode_response, encode_request
from tests.raft._cluster import wait_for

from ._nodes import controller, format_dirs, running
from .test_registration import call, quiet_leader
from .test_topics_live import envelope, two_unfenced_brokers

pytestmark = pytest.mark.timeout(120)


def alter(*moves: tuple[str, int, list[int] | None]) -> dict:
    return {"TimeoutMs": 10000, "Topics": [{"Name": n, "Partitions": [{"PartitionIndex": p, "Replicas": r}]}
                                           for n, p, r in moves]}


def listing(topics: list[tuple[str, list[int]]] | None = None) -> dict:
    return {"TimeoutMs": 10000, "Topics": None if topics is None else [{"Name": n, "PartitionIndexes": p}
                                                                       for n, p in topics]}


def test_reassignments_on_the_active_controller_and_a_standby(tmp_path):
    async def main():
        voters, dirs = format_dirs(tmp_path, release_version="4.3")
        nodes = [controller(voters, d, i) for i, d in zip(voters, dirs, strict=True)]
        async with running(nodes):
            leader = await quiet_leader(nodes)
            standby = next(n for n in nodes if n is not leader)
            await two_unfenced_brokers(leader)
            got = await call(leader, ApiKey.CREATE_TOPICS, {"Topics": [{
                "Name": "t", "NumPartitions": -1, "ReplicationFactor": -1, "Configs": [],
                "Assignments": [{"PartitionIndex": 0, "BrokerIds": [100]}, {"PartitionIndex": 1, "BrokerIds": [101]}],
            }], "timeoutMs": 10000, "validateOnly": False})
            assert got["Topics"][0]["ErrorCode"] == Errors.NONE

            # direct, at the newest version (v1): 100 -> 101 for t-0, an unknown broker for t-1
            got = await call(leader, ApiKey.ALTER_PARTITION_REASSIGNMENTS, alter(("t", 0, [101]), ("t", 1, [7])))
            assert (got["ErrorCode"], got["ErrorMessage"], got["AllowReplicationFactorChange"]) == (0, None, True)
            assert [(t["Name"], p["PartitionIndex"], p["ErrorCode"], p["ErrorMessage"]) for t in got["Responses"]
                    for p in t["Partitions"]] \
                == [("t", 0, Errors.NONE, None), ("t", 1, Errors.INVALID_REPLICA_ASSIGNMENT,
                                             "The manual partition assignment includes broker 7, but no such broker "
                                             "is registered.")]
            ongoing = [{"Name": "t", "Partitions": [{"PartitionIndex": 0, "Replicas": [101, 100], "AddingReplicas":
                                                     [101], "RemovingReplicas": [100]}]}]
            got = await call(leader, ApiKey.LIST_PARTITION_REASSIGNMENTS, listing())
            assert (got["ErrorCode"], got["Topics"]) == (Errors.NONE, ongoing)
            # a standby answers List from its committed image once it has the change
            await wait_for(lambda: standby.controller.image.topic("t").partitions[0]["AddingReplicas"] == [101],
                           what="the reassignment on the standby")
            got = await call(standby, ApiKey.LIST_PARTITION_REASSIGNMENTS, listing([("t", [1, 0])]))
            assert (got["ErrorCode"], got["Topics"]) == (Errors.NONE, ongoing)
            # ... but Alter is the active controller's: NOT_CONTROLLER for every partition
            got = await call(standby, ApiKey.ALTER_PARTITION_REASSIGNMENTS, alter(("t", 0, None)))
            assert got["ErrorCode"] == Errors.NOT_CONTROLLER
            assert [p["ErrorCode"] for p in got["Responses"][0]["Partitions"]] == [Errors.NOT_CONTROLLER]
            inner = encode_request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 5, "broker-100", alter(("t", 0, None)))
            env = await call(standby, ApiKey.ENVELOPE, envelope(inner))
            assert env == {"ResponseData": None, "ErrorCode": Errors.NOT_CONTROLLER}
            # naming no topic: answered at once, on any node
            got = await call(standby, ApiKey.ALTER_PARTITION_REASSIGNMENTS, {"TimeoutMs": 1, "Topics": []})
            assert (got["ErrorCode"], got["Responses"]) == (Errors.NONE, [])

            # forwarded at v0 (no AllowReplicationFactorChange): the cancellation is committed
            end = leader.replica().log.end_offset
            env = await call(leader, ApiKey.ENVELOPE, envelope(inner))
            assert env["ErrorCode"] == Errors.NONE
            corr, body = decode_response(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, env["ResponseData"])
            assert corr == 5 and body["Responses"] == [{"Name": "t", "Partitions": [
                {"PartitionIndex": 0, "ErrorCode": Errors.NONE, "ErrorMessage": None}]}]
            assert leader.replica().log.end_offset > end
            p = leader.controller.image.topic("t").partitions[0]
            assert (p["Replicas"], p["AddingReplicas"], p["RemovingReplicas"]) == ([100], [], [])
            inner = encode_request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 6, "broker-100", listing())
            env = await call(leader, ApiKey.ENVELOPE, envelope(inner))
            assert decode_response(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, env["ResponseData"]) == \
                (6, {"ThrottleTimeMs": 0, "ErrorCode": Errors.NONE, "ErrorMessage": None, "Topics": []})
            # cancelling again: none in progress
            got = await call(leader, ApiKey.ALTER_PARTITION_REASSIGNMENTS, alter(("t", 0, None)))
            assert [(p["ErrorCode"], p["ErrorMessage"]) for p in got["Responses"][0]["Partitions"]] == \
                [(Errors.NO_REASSIGNMENT_IN_PROGRESS, None)]

    asyncio.run(main())
