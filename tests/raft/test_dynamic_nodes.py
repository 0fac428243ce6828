"""KIP-853 on real nodes: a dynamic quorum formatted as ``kafka-storage format --standalone`` /
``--no-initial-controllers`` formats it, grown and shrunk over TCP with AddRaftVoter and
RemoveRaftVoter (kraftkit's admin client), logs byte-identical across the nodes."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from kraftkit.features.storage.format import format_storage
from kraftkit.features.storage.uuids import parse_uuid
from kraftkit.protocol.messages import Errors
from kraftkit.raft.admin import QuorumAdmin
from kraftkit.raft.driver import NodeConfig
from kraftkit.raft.server import RaftNode

from ._cluster import CLUSTER_ID, FAST, NOOP, free_ports, leader_of, verify_log_problems, wait_for

pytestmark = pytest.mark.timeout(180)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 150))


def format_node(root: Path, node_id: int, port: int, standalone: bool) -> uuid.UUID:
    d = root / f"node{node_id}"
    res = format_storage(
        [d],
        cluster_id=CLUSTER_ID,
        node_id=node_id,
        release_version="4.0",
        standalone=standalone,
        no_initial_controllers=not standalone,
        controller_listener=f"CONTROLLER://127.0.0.1:{port}",
    )
    assert res.directories
    text = (d / "meta.properties").read_text()
    dir_id = next(line.split("=", 1)[1] for line in text.splitlines() if line.startswith("directory.id="))
    return uuid.UUID(bytes=parse_uuid(dir_id))


def dynamic_nodes(root: Path, n: int) -> tuple[list[RaftNode], list[int], list[uuid.UUID]]:
    ports = free_ports(n)
    dirs = [format_node(root, i + 1, p, standalone=(i == 0)) for i, p in enumerate(ports)]
    boot = [("127.0.0.1", p) for p in ports]  # (as an operator lists every controller)
    nodes = [
        RaftNode(NodeConfig(i + 1, {}, root / f"node{i + 1}", CLUSTER_ID, listen=("127.0.0.1", p),
                            bootstrap_servers=boot, raft=FAST))
        for i, p in enumerate(ports)
    ]
    return nodes, ports, dirs


def test_a_standalone_quorum_grows_to_three_and_shrinks_back(tmp_path):
    nodes, ports, dirs = dynamic_nodes(tmp_path, 3)

    async def main():
        for n in nodes:
            await n.start()
        try:
            await wait_for(lambda: leader_of(nodes), what="a leader")
            assert leader_of(nodes) is nodes[0]
            assert nodes[0].replica().core.voters == (1,)
            # the others are observers that found the leader through the bootstrap server
            await nodes[0].append([NOOP])
            await wait_for(lambda: all(n.replica().core.leader_id == 1 for n in nodes[1:]), what="observers follow")

            def admin(fn, *args):
                with QuorumAdmin(f"127.0.0.1:{ports[0]}", timeout=20) as a:
                    return getattr(a, fn)(*args)

            for i in (2, 3):
                ans = await asyncio.to_thread(admin, "add_voter", i, dirs[i - 1],
                                              [("CONTROLLER", "127.0.0.1", ports[i - 1])])
                assert ans["ErrorCode"] == Errors.NONE, ans
                await wait_for(lambda i=i: all(n.replica().core.voters == tuple(range(1, i + 1)) for n in nodes),
                               what=f"voters 1..{i} everywhere")
            desc = await asyncio.to_thread(admin, "describe")
            assert sorted(v["id"] for v in desc["voters"]) == [1, 2, 3] and desc["observers"] == []
            # a second add of a voter is refused by the leader, by Kafka's error
            ans = await asyncio.to_thread(admin, "add_voter", 2, dirs[1], [("CONTROLLER", "127.0.0.1", ports[1])])
            assert ans["ErrorCode"] == Errors.DUPLICATE_VOTER
            # remove the leader: it resigns once the change commits, and 2 or 3 leads
            ans = await asyncio.to_thread(admin, "remove_voter", 1, dirs[0])
            assert ans["ErrorCode"] == Errors.NONE, ans
            await wait_for(lambda: leader_of(nodes) is not None and leader_of(nodes).node_id in (2, 3),
                           what="a new leader among 2 and 3")
            leader = leader_of(nodes)
            assert all(n.replica().core.voters == (2, 3) for n in nodes)
            await leader.append([NOOP])
            end = leader.replica().log.end_offset
            await wait_for(lambda: all(n.replica().log.end_offset == end and n.replica().core.high_watermark == end
                                       for n in nodes), what="every node caught up")
        finally:
            for n in nodes:
                await n.stop()

    run(main())
    segs = [sorted((tmp_path / f"node{i}" / "__cluster_metadata-0").glob("*.log")) for i in (1, 2, 3)]
    blobs = [b"".join(p.read_bytes() for p in s) for s in segs]
    assert blobs[0] == blobs[1] == blobs[2]
    assert verify_log_problems(*(tmp_path / f"node{i}" / "__cluster_metadata-0" for i in (1, 2, 3))) == []


def test_a_restarted_node_reads_its_voter_set_back_from_the_log(tmp_path):
    nodes, ports, dirs = dynamic_nodes(tmp_path, 2)

    async def main():
        for n in nodes:
            await n.start()
        await wait_for(lambda: leader_of(nodes) is nodes[0], what="node 1 leads")
        await wait_for(lambda: nodes[1].replica().core.leader_id == 1, what="node 2 follows")

        def add():
            with QuorumAdmin(f"127.0.0.1:{ports[0]}", timeout=20) as a:
                return a.add_voter(2, dirs[1], [("CONTROLLER", "127.0.0.1", ports[1])])

        assert (await asyncio.to_thread(add))["ErrorCode"] == Errors.NONE
        for n in nodes:
            await n.stop()
        again = [RaftNode(NodeConfig(i + 1, {}, tmp_path / f"node{i + 1}", CLUSTER_ID, listen=("127.0.0.1", p),
                                     bootstrap_servers=[("127.0.0.1", ports[0])], raft=FAST))
                 for i, p in enumerate(ports)]
        for n in again:
            await n.start()
        try:
            assert all(n.replica().core.voters == (1, 2) for n in again)
            await wait_for(lambda: leader_of(again), what="a leader after the restart")
        finally:
            for n in again:
                await n.stop()

    run(main())
