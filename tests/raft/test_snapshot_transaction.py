"""A raft replica does not snapshot its metadata image while a metadata transaction is open: the
image holds the transaction's records back, so a snapshot then would leave them out (Kafka takes
snapshots only of what its loader published); the commit that ends the transaction brings it."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kraftkit.metadata.records import record_type
from tests.controller._nodes import format_dirs
from tests.raft._cluster import CLUSTER_ID, running, wait_for

pytestmark = pytest.mark.timeout(120)


def test_no_snapshot_is_taken_inside_a_metadata_transaction(tmp_path):
    """A snapshot taken while the copy's transaction is open would leave out the records the image
    holds back (Kafka snapshots only what its loader published): the replica waits for the end."""
    from kraftkit._core import encode_metadata_record
    from kraftkit.controller import ControllerNode, read_bootstrap_metadata
    from kraftkit.metadata.image import load_snapshot
    from kraftkit.raft.driver import NodeConfig
    from tests.raft._cluster import FAST

    voters, dirs = format_dirs(tmp_path, 1, release_version="3.9")

    def enc(name: str, data: dict) -> bytes:
        return encode_metadata_record(record_type(name)[0], 0, data)

    def snapshots() -> list:
        return sorted((dirs[0] / "__cluster_metadata-0").glob("*.checkpoint"))

    async def main():
        node = ControllerNode(NodeConfig(1, voters, dirs[0], CLUSTER_ID, raft=FAST, snapshot_every_records=3),
                              read_bootstrap_metadata(dirs[0]))
        async with running([node]):
            await wait_for(lambda: node.controller.active, what="the active controller")
            await wait_for(lambda: node.controller.image.controllers, what="its registration")
            await wait_for(lambda: node.replica().snapshot_task is None and not node.replica().snapshot_scheduled)
            before = snapshots()
            _b, c = node.append_nowait([enc("BeginTransactionRecord", {"Name": "ZK Migration"})])
            await c
            for i in range(8):
                _b, c = node.append_nowait([enc("TopicRecord", {"Name": f"t{i}", "TopicId": uuid.uuid4()})])
                await c
            await asyncio.sleep(0.3)
            assert snapshots() == before and node.controller.image.in_transaction
            _b, c = node.append_nowait([enc("EndTransactionRecord", {})])
            await c
            await wait_for(lambda: snapshots() != before, what="a snapshot after the transaction")
            img = load_snapshot(snapshots()[-1])
            assert sorted(img.topic_ids) == [f"t{i}" for i in range(8)]

    asyncio.run(main())
