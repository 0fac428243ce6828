"""AllocateProducerIds on three in-process controllers, as Kafka's ProducerIdControlManager answers it:
blocks of 1,000 ids from 0, one ProducerIdsRecord committed for each before the answer, the broker
checked at its epoch (STALE_BROKER_EPOCH), NOT_CONTROLLER on a follower, and no block handed out
twice after a restart of the whole quorum."""

from __future__ import annotations

import asyncio

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import PRODUCER_IDS
from kraftkit.protocol.messages import ApiKey, Errors
from tests.raft._cluster import wait_for

from ._nodes import active_of, call_port, controller, format_dirs, running
from .test_registration import registration

pytestmark = pytest.mark.timeout(120)


def producer_ids_records(node) -> list[dict]:
    return [decode_metadata_record(r.value)[2] for b in node.committed_batches(0) if not b.is_control
            for r in b.records() if decode_metadata_record(r.value)[0] == PRODUCER_IDS]


def test_blocks_of_a_thousand_ids_committed_before_the_answer(tmp_path):
    voters, dirs = format_dirs(tmp_path, release_version="4.3")
    nodes = [controller(voters, d, i) for i, d in zip(voters, dirs, strict=True)]

    async def main(nodes) -> list[dict]:
        loop = asyncio.get_running_loop()
        async with running(nodes):
            leader = await wait_for(lambda: active_of(nodes), what="an active controller")

            async def rpc(node, api, body):
                return await loop.run_in_executor(None, call_port, node.address[1], api, body)

            reg = await rpc(leader, ApiKey.BROKER_REGISTRATION, registration(7))
            assert reg["ErrorCode"] == Errors.NONE
            epoch = reg["BrokerEpoch"]
            answers = [await rpc(leader, ApiKey.ALLOCATE_PRODUCER_IDS, {"BrokerId": 7, "BrokerEpoch": epoch})
                       for _ in range(2)]
            # its record is committed when the answer comes
            recs = producer_ids_records(leader)
            stale = await rpc(leader, ApiKey.ALLOCATE_PRODUCER_IDS, {"BrokerId": 7, "BrokerEpoch": epoch + 1})
            unknown = await rpc(leader, ApiKey.ALLOCATE_PRODUCER_IDS, {"BrokerId": 8, "BrokerEpoch": epoch})
            follower = next(n for n in nodes if n is not leader)
            elsewhere = await rpc(follower, ApiKey.ALLOCATE_PRODUCER_IDS, {"BrokerId": 7, "BrokerEpoch": epoch})
            return [*answers, stale, unknown, elsewhere, recs, epoch]

    first, second, stale, unknown, elsewhere, recs, epoch = asyncio.run(main(nodes))
    assert (first["ErrorCode"], first["ProducerIdStart"], first["ProducerIdLen"]) == (Errors.NONE, 0, 1000)
    assert (second["ErrorCode"], second["ProducerIdStart"], second["ProducerIdLen"]) == (Errors.NONE, 1000, 1000)
    assert recs == [{"BrokerId": 7, "BrokerEpoch": epoch, "NextProducerId": 1000},
                    {"BrokerId": 7, "BrokerEpoch": epoch, "NextProducerId": 2000}]
    assert stale["ErrorCode"] == Errors.STALE_BROKER_EPOCH and stale["ProducerIdLen"] == 0
    assert unknown["ErrorCode"] == Errors.STALE_BROKER_EPOCH
    assert elsewhere["ErrorCode"] == Errors.NOT_CONTROLLER

    # the whole quorum restarted: the next block follows the last one committed
    again = [controller(voters, d, i) for i, d in zip(voters, dirs, strict=True)]

    async def after_restart() -> dict:
        loop = asyncio.get_running_loop()
        async with running(again):
            leader = await wait_for(lambda: active_of(again), what="an active controller after the restart")
            await wait_for(lambda: 7 in leader.controller.image.brokers, what="the registration replayed")
            return await loop.run_in_executor(None, call_port, leader.address[1], ApiKey.ALLOCATE_PRODUCER_IDS,
                                              {"BrokerId": 7, "BrokerEpoch": epoch})

    third = asyncio.run(after_restart())
    assert (third["ErrorCode"], third["ProducerIdStart"]) == (Errors.NONE, 2000)
