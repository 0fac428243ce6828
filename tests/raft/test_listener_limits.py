"""The listener's limits, in process and over loopback: a request over socket.request.max.bytes, the
node-wide budget of request bytes being read, the deadline to complete a frame, the caps on
connections per address and in all, pipelined requests, and the Produce path's bounds (batch size,
bytes waiting for their commit). Each limit closes the offending connection or answers an error; the
node keeps serving."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct

import pytest

from kraftkit._core import encode_batch
from kraftkit.protocol import KafkaConnection, encode_request
from kraftkit.protocol.messages import ApiKey
from kraftkit.raft import messages as m
from kraftkit.raft.admin import QuorumAdmin
from kraftkit.raft.transport import SMALL_FRAME_BYTES, ListenerLimits

from ._cluster import NOOP, leader_of, make_nodes, wait_for

pytestmark = pytest.mark.timeout(120)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def closed_by_peer(s: socket.socket) -> bool:
    """True once the node closed the connection (waits up to the socket's timeout)."""
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def api_versions_frame(corr: int) -> bytes:
    req = encode_request(ApiKey.API_VERSIONS, 0, corr, "t", {})
    return struct.pack(">i", len(req)) + req


def read_answer(s: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        out = b""
        while len(out) < n:
            got = s.recv(n - len(out))
            assert got, "connection closed"
            out += got
        return out

    (size,) = struct.unpack(">i", exact(4))
    return exact(size)


def produce_frame(records: bytes, timeout_ms: int = 5000, corr: int = 1) -> bytes:
    body = {"TransactionalId": None, "Acks": -1, "TimeoutMs": timeout_ms, "TopicData": [{
        "Name": "__cluster_metadata", "TopicId": m.METADATA_TOPIC_ID, "PartitionData": [{"Index": 0, "Records": records}]}]}
    req = encode_request(ApiKey.PRODUCE, 9, corr, "t", body)
    return struct.pack(">i", len(req)) + req


async def one_node(tmp_path, **kw):
    nodes = make_nodes(tmp_path, n=1, snapshot_every_records=0, **kw)
    await nodes[0].start()
    await wait_for(lambda: leader_of(nodes), what="a one-node leader")
    return nodes[0]


def test_limits_must_be_coherent():
    with pytest.raises(ValueError, match="below the socket request max bytes"):
        ListenerLimits(socket_request_max_bytes=1000, buffered_request_max_bytes=999)
    with pytest.raises(ValueError, match="max connections per ip"):
        ListenerLimits(max_connections_per_ip=0)
    assert ListenerLimits(socket_request_max_bytes=300 << 20).buffered_request_max_bytes == 300 << 20
    assert ListenerLimits().buffered_request_max_bytes == 100 << 20


def test_oversized_frames_and_the_buffered_budget_close_connections_not_the_node(tmp_path, caplog):
    big = 3 * SMALL_FRAME_BYTES
    limits = ListenerLimits(socket_request_max_bytes=big, buffered_request_max_bytes=big)

    async def main():
        node = await one_node(tmp_path, limits=limits)
        port = node.address[1]
        try:
            def attack():
                out = {}
                # over socket.request.max.bytes: closed before any body byte is read
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    s.sendall(struct.pack(">i", big + 1))
                    out["oversized"] = closed_by_peer(s)
                # one connection holds a partial frame of the largest size: the budget is taken
                holder = socket.create_connection(("127.0.0.1", port), timeout=10)
                holder.sendall(struct.pack(">i", big) + b"\0" * 100)
                out["held"] = wait_used(lambda: node._budget.used == big)
                # every other large frame is refused while it lasts; small frames (what peers send) are not
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    s.sendall(struct.pack(">i", SMALL_FRAME_BYTES + 1) + b"\0" * 10)
                    out["over_budget"] = closed_by_peer(s)
                with QuorumAdmin(f"127.0.0.1:{port}") as admin:
                    out["describe_meanwhile"] = admin.describe()["leader_id"]
                holder.close()  # closed mid-frame: the reservation is returned
                out["released"] = wait_used(lambda: node._budget.used == 0)
                # a large frame now fits: it is read and answered (a batch that is no metadata record)
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    batch = encode_batch([(0, None, b"x" * (big - 1000), [])])
                    s.sendall(produce_frame(batch))
                    out["large_answered"] = read_answer(s)
                out["after"] = wait_used(lambda: node._budget.used == 0)
                return out

            def wait_used(cond):
                import time
                for _ in range(500):
                    if cond():
                        return True
                    time.sleep(0.01)
                return False

            out = await asyncio.get_running_loop().run_in_executor(None, attack)
            assert out["oversized"] and out["held"] and out["over_budget"] and out["released"] and out["after"]
            assert out["describe_meanwhile"] == node.node_id
            assert b"metadata record" in out["large_answered"]  # INVALID_RECORD, with the reason
            assert node.failed is None
        finally:
            await node.stop()
        warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("127.0.0.1:" in w and f"request frame of {big + 1} bytes" in w for w in warned), warned
        assert any("past the node-wide" in w for w in warned), warned

    with caplog.at_level(logging.WARNING, logger="kraftkit.raft.node"):
        run(main())


def test_a_frame_must_be_completed_in_time_but_idle_connections_stay(tmp_path):
    limits = ListenerLimits(request_read_timeout_ms=300)

    async def main():
        node = await one_node(tmp_path, limits=limits)
        port = node.address[1]
        try:
            def attack():
                import time
                with socket.create_connection(("127.0.0.1", port), timeout=10) as idle, \
                        socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
                    slow.sendall(struct.pack(">i", 1000) + b"\0\0")  # a size, then a trickle that stops
                    closed = closed_by_peer(slow)
                    time.sleep(0.5)  # longer than the frame deadline, with no frame begun
                    idle.sendall(api_versions_frame(5))
                    answer = read_answer(idle)
                return closed, answer

            closed, answer = await asyncio.get_running_loop().run_in_executor(None, attack)
            assert closed
            assert struct.unpack(">i", answer[:4])[0] == 5
        finally:
            await node.stop()

    run(main())


def test_connections_per_address_and_in_all_are_capped(tmp_path):
    async def main():
        for limits, what in ((ListenerLimits(max_connections_per_ip=3), "per ip"),
                             (ListenerLimits(max_connections=3), "in all")):
            node = await one_node(tmp_path / what.replace(" ", "_"), limits=limits)
            port = node.address[1]
            try:
                def attack():
                    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
                    try:
                        for s in held:  # the three are served
                            s.sendall(api_versions_frame(1))
                            read_answer(s)
                        with socket.create_connection(("127.0.0.1", port), timeout=10) as extra:
                            refused = closed_by_peer(extra)
                    finally:
                        held.pop().close()
                    # one left: a new connection is served again
                    import time
                    for _ in range(200):
                        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                            s.sendall(api_versions_frame(2))
                            try:
                                answer = read_answer(s)
                                break
                            except (AssertionError, ConnectionResetError):
                                time.sleep(0.02)  # the node has not seen the close yet
                    for s in held:
                        s.close()
                    return refused, answer

                refused, answer = await asyncio.get_running_loop().run_in_executor(None, attack)
                assert refused, what
                assert struct.unpack(">i", answer[:4])[0] == 2
                assert node.failed is None
            finally:
                await node.stop()

    run(main())


def test_pipelined_requests_are_all_answered_in_order_with_a_small_inflight_cap(tmp_path):
    async def main():
        node = await one_node(tmp_path, limits=ListenerLimits(max_inflight_requests=2))
        port = node.address[1]
        try:
            def client():
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    s.sendall(b"".join(api_versions_frame(i) for i in range(100)))
                    return [struct.unpack(">i", read_answer(s)[:4])[0] for _ in range(100)]

            assert await asyncio.get_running_loop().run_in_executor(None, client) == list(range(100))
        finally:
            await node.stop()

    run(main())


def test_a_client_that_half_closes_after_pipelining_gets_every_answer(tmp_path):
    async def main():
        node = await one_node(tmp_path, limits=ListenerLimits(max_inflight_requests=2))
        port = node.address[1]
        try:
            def client():
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    s.sendall(b"".join(api_versions_frame(i) for i in range(20)))
                    s.shutdown(socket.SHUT_WR)
                    answers = [struct.unpack(">i", read_answer(s)[:4])[0] for _ in range(20)]
                    return answers, closed_by_peer(s)

            answers, closed = await asyncio.get_running_loop().run_in_executor(None, client)
            assert answers == list(range(20)) and closed
        finally:
            await node.stop()

    run(main())


def test_produce_refuses_oversized_batches_and_too_many_bytes_waiting_for_commit(tmp_path):
    async def main():
        nodes = make_nodes(tmp_path, snapshot_every_records=0, produce_pending_max_bytes=150)
        for n in nodes:
            await n.start()
        try:
            leader = await wait_for(lambda: leader_of(nodes), what="a leader")
            port = leader.address[1]

            def produce(records: bytes, timeout_ms: int) -> dict:
                with KafkaConnection("127.0.0.1", port) as conn:
                    body = {"TransactionalId": None, "Acks": -1, "TimeoutMs": timeout_ms, "TopicData": [{
                        "Name": "__cluster_metadata", "TopicId": m.METADATA_TOPIC_ID,
                        "PartitionData": [{"Index": 0, "Records": records}]}]}
                    resp = conn.request(ApiKey.PRODUCE, conn.version_for(ApiKey.PRODUCE), body)
                    return resp["Responses"][0]["PartitionResponses"][0]

            loop = asyncio.get_running_loop()
            # a batch over KRaft's 8 MiB batch limit: refused before any record is looked at
            huge = encode_batch([(0, None, b"\0" * (8 * 1024 * 1024), [])])
            third = await loop.run_in_executor(None, produce, huge, 1000)
            assert third["ErrorCode"] == 10 and "8388608" in third["ErrorMessage"]
            for n in nodes:
                if n is not leader:
                    await n.stop(resign=False)  # nothing commits any more: produced bytes stay pending
            one = encode_batch([(0, None, NOOP, [])] * 3)
            assert len(one) <= 150 < 2 * len(one)  # one fits in the limit, two do not
            waiting = loop.run_in_executor(None, produce, one, 3000)  # holds its bytes until it times out
            await wait_for(lambda: leader._produce_pending == len(one), what="the first produce pending")
            second = await loop.run_in_executor(None, produce, one, 3000)
            assert second["ErrorCode"] == 89 and "retry later" in second["ErrorMessage"]
            first = await waiting
            # timed out, or failed when the leader without followers resigned: either way answered, and
            # its bytes are no longer held
            assert first["ErrorCode"] in (6, 7)
            assert leader._produce_pending == 0
            assert leader.failed is None
        finally:
            for n in nodes:
                await n.stop(resign=False)

    run(main())
