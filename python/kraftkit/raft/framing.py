"""Kafka's framing and the listener's limits, for :mod:`kraftkit.raft.transport` (which re-exports
every name here): a frame is a 4-byte big-endian size followed by that many bytes (header, then
body); :class:`ListenerLimits` and :class:`RequestBudget` bound what a client can make a node's
listener hold (see the transport's module docstring)."""

from __future__ import annotations

import asyncio
import dataclasses
import struct

from kraftkit.errors import KraftkitError

__all__ = [
    "MAX_FRAME_BYTES",
    "SMALL_FRAME_BYTES",
    "FrameError",
    "RequestLimitError",
    "ListenerLimits",
    "RequestBudget",
    "read_frame",
    "write_frame",
    "request_header",
]

#: The largest frame accepted (Kafka's ``socket.request.max.bytes`` default is 100 MiB)
MAX_FRAME_BYTES = 100 * 1024 * 1024


#: Request frames up to this size are read without reserving from the node-wide budget (every
#: request a raft peer sends is far smaller): their memory is bounded by the connection limit
SMALL_FRAME_BYTES = 64 * 1024


class FrameError(KraftkitError):
    """A frame whose size is not plausible, or a connection closed in the middle of one."""


class RequestLimitError(FrameError):
    """A request that breaks one of the listener's limits (its connection is closed)."""


@dataclasses.dataclass(frozen=True)
class ListenerLimits:
    """What one client can make a node's listener hold (see :mod:`kraftkit.raft.transport`).

    * ``socket_request_max_bytes``: the largest request frame (Kafka's ``socket.request.max.bytes``);
    * ``buffered_request_max_bytes``: node-wide, the bytes of request frames larger than
      :data:`SMALL_FRAME_BYTES` being read or handled at once (default: 100 MiB, and never below
      the request limit, so that one request of the largest size always fits);
    * ``max_connections_per_ip`` (Kafka's ``max.connections.per.ip``) and ``max_connections``:
      connections over them are closed at once;
    * ``request_read_timeout_ms``: the time a connection has to complete a frame once its first
      byte arrived (idle connections between frames are not cut);
    * ``max_inflight_requests``: requests of one connection waiting for their answers before the
      listener stops reading that connection (answers keep request order, so this bounds them).
    """

    socket_request_max_bytes: int = MAX_FRAME_BYTES
    buffered_request_max_bytes: int | None = None
    max_connections_per_ip: int = 64
    max_connections: int = 1000
    request_read_timeout_ms: int = 30_000
    max_inflight_requests: int = 16

    def __post_init__(self) -> None:
        largest = self.socket_request_max_bytes
        if not 1 <= largest <= 2**31 - 1:
            raise ValueError(f"socket request max bytes {largest} is outside 1..{2**31 - 1}")
        if self.buffered_request_max_bytes is None:
            object.__setattr__(self, "buffered_request_max_bytes", max(MAX_FRAME_BYTES, largest))
        elif self.buffered_request_max_bytes < largest:
            raise ValueError(
                f"buffered request max bytes {self.buffered_request_max_bytes} is below the socket "
                f"request max bytes {largest}: a request of the largest size could never be read"
            )
        for name in ("max_connections_per_ip", "max_connections", "request_read_timeout_ms", "max_inflight_requests"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', ' ')} must be at least 1, not {getattr(self, name)}")


class RequestBudget:
    """The node-wide bytes of request frames being read or handled (:class:`ListenerLimits`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def try_reserve(self, n: int) -> bool:
        if self.used + n > self.limit:
            return False
        self.used += n
        return True

    def release(self, n: int) -> None:
        self.used -= n
        assert self.used >= 0


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One frame's bytes, or None at a clean end of stream (the node's own connections to its peers)."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise FrameError(f"connection closed inside a frame size ({len(e.partial)} of 4 bytes)") from None
    (size,) = struct.unpack(">i", head)
    if not 0 <= size <= MAX_FRAME_BYTES:
        raise FrameError(f"frame size {size} is not plausible (limit {MAX_FRAME_BYTES})")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as e:
        raise FrameError(f"connection closed after {len(e.partial)} of {size} frame bytes") from None


def write_frame(writer: asyncio.StreamWriter, payload: bytes) -> None:
    writer.write(struct.pack(">i", len(payload)) + payload)


def request_header(frame: bytes) -> tuple[int, int, int]:
    """``(api key, api version, correlation id)`` from the fixed start of any request header."""
    if len(frame) < 8:
        raise FrameError(f"a request of {len(frame)} bytes has no header")
    return struct.unpack(">hhi", frame[:8])
