"""asyncio TCP with Kafka's framing: outgoing connections to peers and the listener's connections.

Kafka frames every request and response as a 4-byte big-endian size followed by that many bytes
(header, then body). A Kafka client expects the responses of one connection in the order of its
requests; :class:`ServerConnection` keeps that order even when an answer waits (a Fetch held until
data arrives) while later requests are already answered. :class:`PeerConnection` is one connection
to a peer node shared by every raft partition of this process (Kafka's ``KafkaNetworkChannel``):
it connects lazily, says ApiVersions first as Kafka's clients do, and matches answers to requests
by correlation id (a wire id of its own, so the core's ids never reach the wire).

Nothing here decides anything: bytes in, decoded bodies out, errors logged and turned into a
closed connection (a malformed request never takes the node down).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from kraftkit.errors import KraftkitError
from kraftkit.protocol.messages import ApiKey, decode_response, encode_request, encode_response

__all__ = ["MAX_FRAME_BYTES", "FrameError", "read_frame", "write_frame", "PeerConnection", "ServerConnection",
           "request_header"]

log = logging.getLogger(__name__)

#: The largest frame accepted (Kafka's ``socket.request.max.bytes`` default is 100 MiB)
MAX_FRAME_BYTES = 100 * 1024 * 1024
CONNECT_TIMEOUT_S = 2.0
RECONNECT_BACKOFF_S = 0.05


class FrameError(KraftkitError):
    """A frame whose size is not plausible, or a connection closed in the middle of one."""


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One frame's bytes, or None at a clean end of stream."""
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


ResponseCallback = Callable[[dict[str, Any] | None], None]


class PeerConnection:
    """A lazily connected, self-healing connection to one peer. ``send`` never blocks and never
    raises: a request that cannot be delivered gets ``callback(None)`` (the raft core's request
    timeout handles the rest, as Kafka's does)."""

    def __init__(self, node_id: int, host: str, port: int, *, client_id: str,
                 versions: dict[int, int], on_refused: Callable[[int], None] | None = None) -> None:
        self.node_id = node_id
        self.address = (host, port)
        self.client_id = client_id
        self.versions = dict(versions)
        self._queue: collections.deque[tuple[int, dict, ResponseCallback]] = collections.deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._closed = False
        self._ids = itertools.count(1)
        self.peer_versions: dict[int, tuple[int, int]] | None = None
        self._on_refused = on_refused

    def send(self, api: int, body: dict, callback: ResponseCallback) -> None:
        if self._closed:
            callback(None)
            return
        self._queue.append((api, body, callback))
        self._wake.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"peer-{self.node_id}")

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        while self._queue:
            self._queue.popleft()[2](None)

    async def _run(self) -> None:
        while not self._closed:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(*self.address), CONNECT_TIMEOUT_S)
            except (OSError, asyncio.TimeoutError) as e:
                log.debug("peer %d at %s:%d: cannot connect: %s", self.node_id, *self.address, e)
                if isinstance(e, ConnectionRefusedError) and self._on_refused is not None:
                    self._on_refused(self.node_id)
                while self._queue:
                    self._queue.popleft()[2](None)
                await asyncio.sleep(RECONNECT_BACKOFF_S)
                continue
            try:
                await self._serve(reader, writer)
            except (OSError, FrameError, KraftkitError, asyncio.IncompleteReadError) as e:
                log.debug("peer %d: connection lost: %s", self.node_id, e)
            finally:
                writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        inflight: dict[int, tuple[int, int, ResponseCallback]] = {}
        reading: asyncio.Task | None = None
        try:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                import socket

                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            reading = asyncio.get_running_loop().create_task(self._read(reader, inflight))
            # ApiVersions first, as Kafka's clients do; the versions used are capped by the peer's
            cid = next(self._ids)
            got: asyncio.Future = asyncio.get_running_loop().create_future()
            inflight[cid] = (ApiKey.API_VERSIONS, 3, lambda b: got.done() or got.set_result(b))
            write_frame(writer, encode_request(ApiKey.API_VERSIONS, 3, cid, self.client_id,
                                               {"ClientSoftwareName": "kraftkit", "ClientSoftwareVersion": "0"}))
            done, _ = await asyncio.wait({got, reading}, return_when=asyncio.FIRST_COMPLETED)
            if got not in done or got.result() is None:
                raise FrameError("no ApiVersions answer")
            resp = got.result()
            if resp.get("ErrorCode"):
                raise FrameError(f"ApiVersions error {resp['ErrorCode']}")
            self.peer_versions = {a["ApiKey"]: (a["MinVersion"], a["MaxVersion"]) for a in resp["ApiKeys"]}
            while not self._closed:
                while self._queue:
                    api, body, cb = self._queue.popleft()
                    version = self._version(api)
                    if version is None:
                        log.error("peer %d does not speak %s at a version kraftkit knows", self.node_id, api)
                        cb(None)
                        continue
                    cid = next(self._ids) & 0x7FFFFFFF
                    try:
                        payload = encode_request(api, version, cid, self.client_id, body)
                    except KraftkitError as e:
                        log.error("cannot encode %s v%d for peer %d: %s", api, version, self.node_id, e)
                        cb(None)
                        continue
                    inflight[cid] = (api, version, cb)
                    write_frame(writer, payload)
                await writer.drain()
                if reading.done():
                    reading.result()
                    return
                self._wake.clear()
                waiter = asyncio.get_running_loop().create_task(self._wake.wait())
                done, _ = await asyncio.wait({waiter, reading}, return_when=asyncio.FIRST_COMPLETED)
                if reading in done:
                    waiter.cancel()
                    reading.result()
                    return
        finally:
            if reading is not None and not reading.done():
                reading.cancel()
            for _api, _v, cb in inflight.values():
                cb(None)
            inflight.clear()

    def _version(self, api: int) -> int | None:
        ours = self.versions.get(api)
        if ours is None:
            return None
        theirs = (self.peer_versions or {}).get(api)
        if theirs is None:
            return ours
        v = min(ours, theirs[1])
        return v if v >= theirs[0] else None

    async def _read(self, reader: asyncio.StreamReader, inflight: dict) -> None:
        while True:
            frame = await read_frame(reader)
            if frame is None:
                raise FrameError("peer closed the connection")
            if len(frame) < 4:
                raise FrameError("response without a correlation id")
            (cid,) = struct.unpack(">i", frame[:4])
            entry = inflight.pop(cid, None)
            if entry is None:
                raise FrameError(f"response to unknown correlation id {cid}")
            api, version, cb = entry
            try:
                _, body = decode_response(api, version, frame)
            except KraftkitError as e:
                log.error("peer %d: undecodable %s v%d response: %s", self.node_id, api, version, e)
                cb(None)
                continue
            cb(body)


Handler = Callable[[int, int, dict, "ServerConnection"], Awaitable[dict | None] | dict | None]


class ServerConnection:
    """One accepted connection: answers go out in request order, whatever order they complete in."""

    _ids = itertools.count(1)

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.id = next(ServerConnection._ids)
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._slots: collections.deque[tuple[asyncio.Future, int, int, int]] = collections.deque()
        self.closed = False

    def enqueue(self, fut: asyncio.Future, api: int, version: int, corr: int) -> None:
        """Reserves the next answer slot; ``fut`` resolves to the body (None: send nothing)."""
        self._slots.append((fut, api, version, corr))
        fut.add_done_callback(lambda _f: self._flush())

    def _flush(self) -> None:
        while self._slots and self._slots[0][0].done():
            fut, api, version, corr = self._slots.popleft()
            if fut.cancelled() or self.closed:
                continue
            exc = fut.exception()
            if exc is not None:
                log.error("%s: %s v%d request failed: %s", self.peer, api, version, exc)
                self.close()
                return
            body = fut.result()
            if body is None:
                continue
            try:
                write_frame(self.writer, encode_response(api, version, corr, body))
            except KraftkitError as e:
                log.error("%s: cannot encode the %s v%d answer: %s", self.peer, api, version, e)
                self.close()
                return

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            for fut, *_ in self._slots:
                fut.cancel()
            self._slots.clear()
            self.writer.close()
