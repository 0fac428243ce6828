"""The listener's frame reader (:class:`~kraftkit.raft.transport.ServerConnection`, an asyncio
Protocol) on its own, over a transport double: frames split at every byte or several in one read
come out whole and in order; a size over the limit or past the node-wide budget closes the
connection before a body byte is handled; a peer closing inside a frame is a FrameError and
returns its reservation; the in-flight cap, a full write buffer and the end of a connection's
turn stop reading at a frame boundary; a frame begun has a deadline, an idle connection none;
answers keep request order and one turn's answers leave in one write; a half-closed peer has the
requests it sent handled before the close."""

from __future__ import annotations

import asyncio
import struct

import pytest

from kraftkit.protocol import encode_request
from kraftkit.protocol.messages import ApiKey, decode_response
from kraftkit.raft.transport import (
    FRAMES_PER_TURN,
    SMALL_FRAME_BYTES,
    FrameError,
    ListenerLimits,
    RequestBudget,
    RequestLimitError,
    ServerConnection,
)

pytestmark = pytest.mark.timeout(60)


class Transport(asyncio.Transport):
    """What the connection does to its socket, noted."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.reading = True
        self.closed = False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data) -> None:
        self.written.append(bytes(data))

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


class Harness:
    """One connection whose ``handle`` notes each frame (and, with ``answer``, answers it at once
    as an ApiVersions v0 request would be answered: an empty ApiVersions body)."""

    def __init__(self, limits: ListenerLimits | None = None, *, answer: bool = False, hold: bool = False) -> None:
        self.limits = limits or ListenerLimits()
        self.budget = RequestBudget(self.limits.buffered_request_max_bytes)  # type: ignore[arg-type]
        self.frames: list[bytes] = []
        self.held: list[asyncio.Future] = []
        self.lost: list[BaseException | None] = []
        self.answer, self.hold = answer, hold
        self.conn = ServerConnection(self.limits, self.budget, admit=lambda c: True, handle=self.handle,
                                     lost=lambda c, e: self.lost.append(e))
        self.transport = Transport()
        self.conn.connection_made(self.transport)

    def handle(self, conn: ServerConnection, frame: bytes) -> None:
        self.frames.append(frame)
        self.budget_seen = self.budget.used
        if self.answer or self.hold:
            fut = asyncio.get_running_loop().create_future()
            api, version, corr = struct.unpack(">hhi", frame[:8])
            conn.enqueue(fut, api, version, corr)
            if self.hold:
                self.held.append(fut)
            else:
                fut.set_result(body())
            conn.settle(fut)

    def feed(self, data: bytes) -> None:
        self.conn.data_received(data)

    def answers(self) -> list[int]:
        """The correlation ids of the answer frames written, in order."""
        data, out = b"".join(self.transport.written), []
        while data:
            (size,) = struct.unpack(">i", data[:4])
            corr, _body = decode_response(ApiKey.API_VERSIONS, 0, data[4 : 4 + size])
            out.append(corr)
            data = data[4 + size :]
        return out


def body() -> dict:
    return {"ErrorCode": 0, "ApiKeys": [], "ThrottleTimeMs": 0}


def frame(corr: int, pad: int = 0) -> bytes:
    req = encode_request(ApiKey.API_VERSIONS, 0, corr, "c" * pad, {})
    return struct.pack(">i", len(req)) + req


def run(fn):
    async def main():
        return fn()

    return asyncio.run(main())


def test_frames_split_at_every_byte_come_out_whole_and_in_order():
    stream = frame(1) + frame(2, pad=300) + frame(3)

    def check():
        h = Harness()
        for i in range(len(stream)):
            h.feed(stream[i : i + 1])
        return h

    h = run(check)
    assert h.frames == [frame(1)[4:], frame(2, pad=300)[4:], frame(3)[4:]]
    assert h.lost == [] and not h.transport.closed and h.transport.reading


def test_every_split_point_of_two_frames_gives_the_same_frames():
    stream = frame(7) + frame(8, pad=20)

    def check():
        got = []
        for cut in range(len(stream) + 1):
            h = Harness()
            h.feed(stream[:cut])
            h.feed(stream[cut:])
            got.append(h.frames)
        return got

    for frames in run(check):
        assert frames == [frame(7)[4:], frame(8, pad=20)[4:]]


def test_several_frames_in_one_read_are_answered_in_order_a_turn_at_a_time():
    async def check():
        h = Harness(answer=True)
        h.feed(b"".join(frame(i) for i in range(1, 51)) + frame(51)[:5])  # and the start of the next
        first = (len(h.frames), len(h.transport.written), h.transport.reading)
        for _ in range(10):
            await asyncio.sleep(0)  # the loop's next turns: the other connections' turns come between
        return h, first

    h, first = asyncio.run(check())
    # one turn handles FRAMES_PER_TURN requests and answers them in one write, then stops reading
    assert first == (FRAMES_PER_TURN, 1, False)
    assert len(h.frames) == 50 and h.transport.reading
    assert len(h.transport.written) == -(-50 // FRAMES_PER_TURN)
    assert h.answers() == list(range(1, 51))
    assert h.conn._timer is not None  # the frame begun has its deadline


@pytest.mark.parametrize("size", [1001, -1, 2**31 - 1])
def test_a_size_over_the_limit_closes_before_any_body_byte(size):
    def check():
        h = Harness(ListenerLimits(socket_request_max_bytes=1000))
        h.feed(frame(1) + struct.pack(">i", size) + b"\0" * 2000)
        h.conn.connection_lost(None)
        return h

    h = run(check)
    assert h.frames == [frame(1)[4:]]  # the frame before it was handled; nothing of it
    assert h.transport.closed
    assert len(h.lost) == 1 and isinstance(h.lost[0], RequestLimitError)
    assert f"request frame of {size} bytes" in str(h.lost[0]) and "socket.request.max.bytes" in str(h.lost[0])


def test_a_large_frame_is_reserved_from_the_budget_once_its_size_is_in_and_returned_after():
    big = SMALL_FRAME_BYTES + 10
    limits = ListenerLimits(socket_request_max_bytes=2 * big, buffered_request_max_bytes=2 * big)

    def check():
        h = Harness(limits)
        req = b"\0\x12\0\0\0\0\0\1" + b"x" * (big - 8)  # (handled as bytes: never decoded here)
        data = struct.pack(">i", len(req)) + req
        h.feed(data[:4])
        reserved = h.budget.used
        h.feed(data[4:])
        # a second connection may not take what is left plus more
        other = ServerConnection(limits, h.budget, admit=lambda c: True, handle=lambda c, f: None,
                                 lost=lambda c, e: None)
        other.connection_made(Transport())
        h.budget.try_reserve(big)  # a third holds one large frame's worth
        other.data_received(struct.pack(">i", big + 1))
        return h, reserved, len(req), other

    h, reserved, n, other = run(check)
    assert reserved == n
    assert h.budget_seen == n  # held while it was handled
    assert h.budget.used == SMALL_FRAME_BYTES + 10  # only the third's: the frame's was returned
    assert other.closed and isinstance(other.error, RequestLimitError) and "past the node-wide" in str(other.error)
    assert h.lost == [] and not h.transport.closed


def test_a_peer_closing_inside_a_frame_is_a_frame_error_and_returns_its_reservation():
    big = SMALL_FRAME_BYTES + 10

    def check():
        out = []
        for data, want in ((b"\0\0", "after 2 of 4 frame size bytes"),
                           (struct.pack(">i", 100) + b"x" * 30, "after 30 of 100 frame bytes"),
                           (struct.pack(">i", big) + b"x" * 5, f"after 5 of {big} frame bytes")):
            h = Harness()
            h.feed(data)
            used = h.budget.used
            h.conn.connection_lost(None)
            out.append((h, used, want))
        return out

    for h, used, want in run(check):
        assert len(h.lost) == 1 and isinstance(h.lost[0], FrameError), h.lost
        assert want in str(h.lost[0])
        assert h.budget.used == 0
        assert used in (0, big)
        assert h.conn._timer is None


def test_a_clean_close_between_frames_is_no_error():
    def check():
        h = Harness()
        h.feed(frame(1))
        h.conn.connection_lost(None)
        return h

    h = run(check)
    assert h.lost == [None] and len(h.frames) == 1


def test_the_inflight_cap_stops_reading_at_a_frame_boundary_and_resumes_in_order():
    def check():
        h = Harness(ListenerLimits(max_inflight_requests=2), hold=True)
        h.feed(b"".join(frame(i) for i in range(1, 6)))
        paused = (len(h.frames), h.transport.reading, h.conn._timer)
        # answered out of order: nothing leaves until the first is done
        h.held[1].set_result(body())
        h.conn._answered(h.held[1])
        before_first = list(h.transport.written)
        h.held[0].set_result(body())
        h.conn._answered(h.held[0])
        resumed = (len(h.frames), h.transport.reading)
        return h, paused, before_first, resumed

    h, paused, before_first, resumed = run(check)
    assert paused == (2, False, None)  # two handled, reading stopped, no deadline for the waiting frames
    assert before_first == []
    assert resumed == (4, False)  # two more handled from the buffer, and the cap reached again
    assert h.answers() == [1, 2]


def test_a_full_write_buffer_stops_reading_until_it_drains():
    def check():
        h = Harness(answer=True)
        h.conn.pause_writing()
        h.feed(frame(1) + frame(2))
        paused = (len(h.frames), h.transport.reading)
        h.conn.resume_writing()
        return h, paused

    h, paused = run(check)
    assert paused == (0, False)
    assert len(h.frames) == 2 and h.transport.reading
    assert h.answers() == [1, 2]


def test_a_frame_begun_has_a_deadline_and_an_idle_connection_none():
    limits = ListenerLimits(request_read_timeout_ms=5000)

    def check():
        loop = asyncio.get_running_loop()
        h = Harness(limits)
        idle = h.conn._timer
        data = frame(1)
        h.feed(data[:3])
        armed = h.conn._timer
        when = armed.when() - loop.time() if armed is not None else None
        h.feed(data[3:6])
        same = h.conn._timer is armed  # a trickle does not move the deadline
        h.feed(data[6:])
        done = h.conn._timer
        h.feed(data[:6])
        armed._run()  # (cancelled: its callback does nothing)
        h.conn._timer._run()  # the deadline of the second frame passes
        return h, idle, when, same, done

    h, idle, when, same, done = run(check)
    assert idle is None and same and done is None
    assert 4.9 < when <= 5.0
    assert len(h.frames) == 1 and h.transport.closed
    assert isinstance(h.conn.error, RequestLimitError)
    assert "was not complete within 5000 ms" in str(h.conn.error)
    assert f"request frame of {len(frame(1)) - 4} bytes" in str(h.conn.error)


def test_a_peer_that_half_closes_has_its_buffered_requests_handled_before_the_close():
    def check():
        h = Harness(ListenerLimits(max_inflight_requests=2), hold=True)
        h.feed(b"".join(frame(i) for i in range(1, 6)))
        assert h.conn.eof_received() is True  # (the transport stays open to write the answers)
        seen = [(len(h.frames), h.transport.closed)]
        for i in (0, 1, 2, 3):
            h.held[i].set_result(body())
            h.conn._answered(h.held[i])
            seen.append((len(h.frames), h.transport.closed))
        return h, seen

    h, seen = run(check)
    # one more each time an answer makes room; closed once the last whole frame is handled and the
    # cap no longer holds it back
    assert seen == [(2, False), (3, False), (4, False), (5, False), (5, True)]
    assert h.answers() == [1, 2, 3, 4]
    assert h.held[4].cancelled()  # (answers still pending at the close are dropped, as before)


def test_a_peer_that_half_closes_inside_a_frame_is_a_frame_error():
    def check():
        h = Harness(answer=True)
        h.feed(frame(1) + frame(2)[:6])
        h.conn.eof_received()
        closed = h.transport.closed
        h.conn.connection_lost(None)
        return h, closed

    h, closed = run(check)
    assert closed and h.answers() == [1]
    assert len(h.lost) == 1 and isinstance(h.lost[0], FrameError)
    assert f"after 2 of {len(frame(2)) - 4} frame bytes" in str(h.lost[0])
