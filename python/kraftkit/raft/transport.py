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

The listener's side bounds what a client can make the node hold (:class:`ListenerLimits`): a
request frame larger than ``socket.request.max.bytes`` closes its connection before its body is
read; the bytes of request frames being read and handled are reserved from one node-wide
:class:`RequestBudget` before a body is read (frames up to :data:`SMALL_FRAME_BYTES`, which is
everything the raft peers send, are admitted without it: they cost at most the connection limit
times that size), so N slow connections cannot hold N x 100 MiB; a frame whose first byte arrived must
be complete within ``request_read_timeout_ms`` (slowloris); connections are capped per client
address (``max.connections.per.ip``) and in all; and a connection has at most
``max_inflight_requests`` requests waiting for their answers before the node stops reading it (as
Kafka mutes a channel while its request is handled).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import struct
from collections.abc import Callable, Mapping
from typing import Any, cast

from kraftkit.errors import KraftkitError
from kraftkit.protocol.messages import ApiKey, Errors, decode_response, encode_request, encode_response
from kraftkit.raft.framing import (
    MAX_FRAME_BYTES,
    SMALL_FRAME_BYTES,
    FrameError,
    ListenerLimits,
    RequestBudget,
    RequestLimitError,
    read_frame,
    request_header,
    write_frame,
)

__all__ = [
    "MAX_FRAME_BYTES",
    "SMALL_FRAME_BYTES",
    "FrameError",
    "RequestLimitError",
    "ListenerLimits",
    "RequestBudget",
    "read_frame",
    "write_frame",
    "PeerConnection",
    "ServerConnection",
    "request_header",
]

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 2.0
RECONNECT_BACKOFF_S = 0.05


ResponseCallback = Callable[[dict[str, Any] | None], None]


class PeerConnection:
    """A lazily connected, self-healing connection to one peer. ``send`` never blocks and never
    raises: a request that cannot be delivered gets ``callback(None)`` (the raft core's request
    timeout handles the rest, as Kafka's does)."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        *,
        client_id: str,
        versions: dict[int, int],
        on_refused: Callable[[int], None] | None = None,
    ) -> None:
        self.node_id = node_id
        self.address = (host, port)
        self.client_id = client_id
        self.versions = dict(versions)
        self._queue: collections.deque[tuple[int, Mapping[str, Any], ResponseCallback]] = collections.deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._closed = False
        self._ids = itertools.count(1)
        self.peer_versions: dict[int, tuple[int, int]] | None = None
        #: the peer's SupportedFeatures from its ApiVersions answer (name -> (min, max))
        self.peer_features: dict[str, tuple[int, int]] | None = None
        self._on_refused = on_refused
        self._answered_versions = False  # whether the current connection got its ApiVersions answer

    def send(self, api: int, body: Mapping[str, Any], callback: ResponseCallback) -> None:
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
        backoff = RECONNECT_BACKOFF_S
        while not self._closed:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(*self.address), CONNECT_TIMEOUT_S)
            except (TimeoutError, OSError) as e:
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
            # a peer that accepts and closes at once (one over its connection limit, one stopping)
            # is not hammered: each connection that ended before its ApiVersions answer doubles the
            # wait before the next, up to a second; one that got its answer waits the base time
            backoff = RECONNECT_BACKOFF_S if self._answered_versions else min(1.0, backoff * 2)
            await asyncio.sleep(backoff)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._answered_versions = False
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

            def answered(b: dict[str, Any] | None) -> None:
                if not got.done():
                    got.set_result(b)

            inflight[cid] = (ApiKey.API_VERSIONS, 3, answered)
            write_frame(
                writer,
                encode_request(
                    ApiKey.API_VERSIONS,
                    3,
                    cid,
                    self.client_id,
                    {"ClientSoftwareName": "kraftkit", "ClientSoftwareVersion": "0"},
                ),
            )
            done, _ = await asyncio.wait({got, reading}, return_when=asyncio.FIRST_COMPLETED)
            if got not in done or got.result() is None:
                raise FrameError("no ApiVersions answer")
            resp = got.result()
            if resp.get("ErrorCode"):
                raise FrameError(f"ApiVersions error {resp['ErrorCode']}")
            self.peer_versions = {a["ApiKey"]: (a["MinVersion"], a["MaxVersion"]) for a in resp["ApiKeys"]}
            self._answered_versions = True
            self.peer_features = {
                f["Name"]: (f["MinVersion"], f["MaxVersion"]) for f in resp.get("SupportedFeatures") or []
            }
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
                        # (a typed body is a dict at run time: the codec reads dicts)
                        payload = encode_request(api, version, cid, self.client_id, cast(dict, body))
                    except (KraftkitError, ValueError) as e:  # (the codec refuses a body with ValueError)
                        if version < self.versions[api]:
                            # the body needs a newer version than the peer speaks (a pre-vote to a
                            # voter whose Vote stops at v1): answered here with UNSUPPORTED_VERSION,
                            # as Kafka's network client does, so the sender can fall back
                            log.info("peer %d takes %s up to v%d only: %s", self.node_id, api, version, e)
                            cb({"ErrorCode": Errors.UNSUPPORTED_VERSION})
                        else:
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
            if reading is not None:
                if not reading.done():
                    reading.cancel()
                elif not reading.cancelled():
                    reading.exception()  # retrieved: the connection's end is reported by the caller
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


#: the answers to one read's requests are gathered into one write up to this many bytes (then
#: written at once, so a client pipelining small requests cannot make the node hold more than the
#: transport's write buffer before it stops reading, as a drain after every answer did)
WRITE_BATCH_BYTES = 64 * 1024
#: the requests of one connection handled in one turn of the event loop: a client that pipelines
#: more waits for the next turn, after the other connections ready meanwhile (as Kafka reads one
#: request of a connection at a time), so an overloaded node still answers its raft peers in time
FRAMES_PER_TURN = 4


class ServerConnection(asyncio.Protocol):
    """One accepted connection, an :class:`asyncio.Protocol`: frames are cut out of the bytes as
    they arrive and handed to ``handle(conn, frame)`` in order; answers go out in request order,
    whatever order they complete in (those of one read's requests in one write).

    The limits hold as they did with a stream reader: a frame's size is checked (and, over
    :data:`SMALL_FRAME_BYTES`, reserved from ``budget``) once its 4 bytes are in, before its body;
    a frame begun must be complete within ``request_read_timeout_ms``; with ``max_inflight_requests``
    answers waiting, or the write buffer full, reading stops at the next frame boundary. It buffers
    at most the frame being read and one read of the socket. ``admit(conn)`` is asked once connected
    (False: closed at once); ``lost(conn, error)`` is told when an admitted connection ends (the
    :class:`FrameError` that closed it, the socket's error, or None)."""

    _ids = itertools.count(1)

    def __init__(
        self,
        limits: ListenerLimits,
        budget: RequestBudget,
        *,
        admit: Callable[[ServerConnection], bool],
        handle: Callable[[ServerConnection, bytes], None],
        lost: Callable[[ServerConnection, BaseException | None], None],
    ) -> None:
        self.id = next(ServerConnection._ids)
        self.limits = limits
        self.budget = budget
        self._admit, self._handle, self._lost = admit, handle, lost
        self.transport: asyncio.Transport | None = None
        self.ip = self.peer = "?"
        self._buf = bytearray()
        self._size = -1  # the size of the frame being read, once its 4 size bytes are in
        self._charged = 0  # the bytes of that frame reserved from the budget
        self._timer: asyncio.TimerHandle | None = None  # the deadline of the frame being read
        self._slots: collections.deque[tuple[asyncio.Future, int, int, int]] = collections.deque()
        self._out: list[bytes] | None = None  # answers gathered while a read is handled
        self._out_bytes = 0
        self._write_paused = False
        self._reading_paused = False
        self._processing = False
        self._next_turn = False  # a _process is scheduled for the next loop turn
        self._eof = False  # the peer sent its last byte: closed once the frames buffered are handled
        self._admitted = False
        self.error: BaseException | None = None
        self.closed = False

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.ip, self.peer = str(peer[0]), f"{peer[0]}:{peer[1]}"
        if self._admit(self):
            self._admitted = True
        else:
            self.close()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self._buf += data
        self._process()

    def eof_received(self) -> bool:
        if not self._eof:
            self._eof = True
            self._process()
        return True  # (closed by _process, which may first answer the requests buffered)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.error is None:
            if self._size >= 0:
                self.error = FrameError(f"connection closed after {len(self._buf) - 4} of {self._size} frame bytes")
            elif 0 < len(self._buf) < 4 and not self._reading_paused:
                self.error = FrameError(f"connection closed after {len(self._buf)} of 4 frame size bytes")
            else:
                self.error = exc
        self.close()
        if self._admitted:
            self._admitted = False
            self._lost(self, self.error)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if (self._reading_paused or self._eof) and not self._processing:
            self._process()

    # ------------------------------------------------------------------ requests
    def _process(self) -> None:
        """Hands every complete frame buffered to ``handle`` while the connection may take more,
        then reads on (or stops reading, or arms the deadline of the frame begun)."""
        if self._processing or self.closed:
            return
        self._processing = True
        self._out = []
        buf, pos, completed, blocked, turn = self._buf, 0, False, False, FRAMES_PER_TURN
        limits, slots = self.limits, self._slots
        try:
            while not self.closed:
                size = self._size
                if size < 0:
                    if len(slots) >= limits.max_inflight_requests or self._write_paused or not turn:
                        blocked = True  # (between frames: a frame begun is read to its end first)
                        break
                    if len(buf) - pos < 4:
                        break
                    size = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
                    if not 0 <= size <= limits.socket_request_max_bytes:
                        raise RequestLimitError(
                            f"request frame of {size} bytes: the limit (socket.request.max.bytes) is "
                            f"{limits.socket_request_max_bytes}"
                        )
                    if size > SMALL_FRAME_BYTES:
                        if not self.budget.try_reserve(size):
                            raise RequestLimitError(
                                f"request frame of {size} bytes would take the bytes of requests being "
                                f"read past the node-wide {self.budget.limit} ({self.budget.used} in use)"
                            )
                        self._charged = size
                    self._size = size
                if len(buf) - pos - 4 < size:
                    break
                if size <= SMALL_FRAME_BYTES:
                    frame = bytes(buf[pos + 4 : pos + 4 + size])
                else:  # (one copy, not a slice and its copy, of a frame of up to socket.request.max.bytes)
                    with memoryview(buf) as view:
                        frame = bytes(view[pos + 4 : pos + 4 + size])
                pos += 4 + size
                completed, turn = True, turn - 1
                self._size = -1
                charged, self._charged = self._charged, 0
                try:
                    self._handle(self, frame)
                finally:
                    del frame
                    if charged:
                        self.budget.release(charged)
        except FrameError as e:
            self._fail(e)
        except Exception as e:  # a defect: it costs this connection, not the node
            log.exception("%s: request handling failed", self.peer)
            self._fail(e)
        finally:
            if pos:
                del buf[:pos]
            self._processing = False
            out, self._out = self._out, None
            if out and not self.closed:
                self._send(out)
        if self.closed:
            return
        # the frame whose first bytes are in (if the connection reads) must be complete by its deadline
        if completed or blocked or not buf:
            self._cancel_timer()
        if not turn and not self._next_turn:
            self._next_turn = True
            asyncio.get_running_loop().call_soon(self._turn)
        if self._eof:
            if not blocked:
                self.close()  # every whole frame handled: what is left is a frame cut short (or nothing)
            return
        if buf and not blocked and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(limits.request_read_timeout_ms / 1000, self._timed_out)
        if blocked != self._reading_paused:
            self._reading_paused = blocked
            assert self.transport is not None
            if blocked:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()

    def _turn(self) -> None:
        self._next_turn = False
        self._process()

    def _timed_out(self) -> None:
        self._timer = None
        size = self._size
        self._fail(
            RequestLimitError(
                f"a request frame{'' if size < 0 else f' of {size} bytes'} was not complete "
                f"within {self.limits.request_read_timeout_ms} ms"
            )
        )

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        self.close()

    # ------------------------------------------------------------------ answers
    @property
    def inflight(self) -> int:
        """Requests read whose answers have not gone out yet."""
        return len(self._slots)

    def enqueue(self, fut: asyncio.Future, api: int, version: int, corr: int) -> None:
        """Reserves the next answer slot; ``fut`` resolves to the body (None: send nothing). The
        caller then calls :meth:`settle` once it has started the answer."""
        self._slots.append((fut, api, version, corr))

    def settle(self, fut: asyncio.Future) -> None:
        """Writes ``fut``'s answer (and those ready behind it) now if it is done, else once it is."""
        if fut.done():
            self.flush()
        else:
            fut.add_done_callback(self._answered)

    def _answered(self, _fut: asyncio.Future) -> None:
        self.flush()
        if (self._reading_paused or self._eof) and not self._processing and not self.closed:
            self._process()  # room again: the requests buffered behind the answers

    def flush(self) -> None:
        """Writes the answers that are ready, in request order."""
        slots = self._slots
        while slots and slots[0][0].done():
            fut, api, version, corr = slots.popleft()
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
                payload = encode_response(api, version, corr, body)
            except (KraftkitError, ValueError, TypeError, OverflowError) as e:  # a body the codec refuses
                log.error("%s: cannot encode the %s v%d answer: %s", self.peer, api, version, e)
                self.close()
                return
            self.write_answer(payload)

    def write_answer(self, payload: bytes) -> None:
        """Writes one answer frame (gathered with the others of the read being handled)."""
        head = len(payload).to_bytes(4, "big")
        out = self._out
        if out is None:
            assert self.transport is not None
            self.transport.write(head + payload)
            return
        out += (head, payload)
        self._out_bytes += 4 + len(payload)
        if self._out_bytes >= WRITE_BATCH_BYTES:
            self._send(out)
            out.clear()

    def _send(self, out: list[bytes]) -> None:
        self._out_bytes = 0
        assert self.transport is not None
        self.transport.write(out[0] + out[1] if len(out) == 2 else b"".join(out))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._cancel_timer()
        if self._charged:
            self.budget.release(self._charged)
            self._charged = 0
        for fut, *_ in self._slots:
            fut.cancel()
        self._slots.clear()
        if self.transport is not None:
            self.transport.close()
