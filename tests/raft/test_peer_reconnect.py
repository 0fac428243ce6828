"""A peer connection to a node that accepts and closes at once (over its connection limit, or
stopping): the reconnects back off, doubling up to a second, and the lost connections leave no
unretrieved task exception behind."""

from __future__ import annotations

import asyncio
import gc

import pytest

from kraftkit.protocol.messages import ApiKey
from kraftkit.raft import transport
from kraftkit.raft.transport import PeerConnection

pytestmark = pytest.mark.timeout(60)


def test_reconnects_to_a_peer_that_closes_at_once_back_off_and_leave_no_stray_exception(monkeypatch):
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def recorded_sleep(delay: float, *a, **kw):
        waits.append(delay)
        await real_sleep(0)

    errors: list[dict] = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx))
        accepted = 0

        async def close_at_once(reader, writer):
            nonlocal accepted
            accepted += 1
            writer.close()

        server = await asyncio.start_server(close_at_once, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        monkeypatch.setattr(transport.asyncio, "sleep", recorded_sleep)
        conn = PeerConnection(2, "127.0.0.1", port, client_id="t", versions={ApiKey.VOTE: 1})
        answers: list[object] = []
        try:
            for _ in range(1000):  # bounded: without a backoff no wait is ever recorded
                if len(waits) >= 8:
                    break
                conn.send(ApiKey.VOTE, {}, answers.append)
                await real_sleep(0.005)
        finally:
            monkeypatch.undo()
            await conn.close()
            server.close()
            await server.wait_closed()
        gc.collect()
        await real_sleep(0)
        return accepted, answers

    accepted, answers = asyncio.run(main())
    assert accepted >= 8
    assert waits[:6] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert answers and all(a is None for a in answers)  # nothing was ever answered
    assert not [e for e in errors if "never retrieved" in e.get("message", "")], errors
