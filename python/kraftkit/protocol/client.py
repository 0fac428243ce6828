"""A blocking Kafka protocol client: framing, correlation ids, timeouts, ApiVersions."""

from __future__ import annotations

import itertools
import socket
import struct
from typing import Any, Self

from kraftkit.errors import KraftkitError
from kraftkit.protocol.messages import ApiKey, Errors, decode_response, encode_request, supported_versions

#: The largest response this client accepts (a corrupt size must not make it allocate much)
MAX_RESPONSE_BYTES = 256 << 20


class ProtocolError(KraftkitError):
    """The peer closed the connection, timed out, or sent bytes that are not a valid response."""


def negotiate(ours: tuple[int, int], theirs: tuple[int, int]) -> int | None:
    """The highest version both sides support, or None."""
    lo, hi = max(ours[0], theirs[0]), min(ours[1], theirs[1])
    return hi if lo <= hi else None


class KafkaConnection:
    """One TCP connection to a Kafka (or kraftkit) listener.

    ``request(api_key, version, body)`` sends one request and returns the decoded response
    body; ``api_versions()`` asks what the peer supports (retrying at v0 when it does not know
    the version asked, as Kafka's clients do) and ``version_for(api_key)`` picks the highest
    version both sides speak.
    """

    def __init__(self, host: str, port: int, *, timeout: float = 10.0, client_id: str = "kraftkit") -> None:
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.timeout = timeout
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise ProtocolError(f"{self.address}: cannot connect: {e}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._ids = itertools.count(1)
        self.versions: dict[int, tuple[int, int]] | None = None

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            except TimeoutError:
                raise ProtocolError(f"{self.address}: no response within {self.timeout}s") from None
            except OSError as e:
                raise ProtocolError(f"{self.address}: {e}") from None
            if not chunk:
                raise ProtocolError(f"{self.address}: connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        cid = next(self._ids)
        payload = encode_request(int(api_key), version, cid, self.client_id, body)
        try:
            self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        except OSError as e:
            raise ProtocolError(f"{self.address}: send failed: {e}") from None
        (size,) = struct.unpack(">i", self._recv_exact(4))
        if not 0 <= size <= MAX_RESPONSE_BYTES:
            raise ProtocolError(f"{self.address}: response size {size} is not plausible")
        data = self._recv_exact(size)
        try:
            got, resp = decode_response(int(api_key), version, data)
        except KraftkitError as e:
            # a peer that does not know this ApiVersions version answers in v0 (UNSUPPORTED_VERSION
            # and its own ranges); Kafka's ApiVersionsResponse.parse falls back to v0 the same way
            fallback = None
            if api_key == ApiKey.API_VERSIONS and version > 0:
                try:
                    fallback = decode_response(int(api_key), 0, data)
                except KraftkitError:
                    pass
            if fallback is None or fallback[1].get("ErrorCode") != Errors.UNSUPPORTED_VERSION:
                raise ProtocolError(f"{self.address}: bad {ApiKey(api_key).name} v{version} response: {e}") from None
            got, resp = fallback
        if got != cid:
            raise ProtocolError(f"{self.address}: correlation id {got} in the response to request {cid}")
        return resp

    def api_versions(self, version: int | None = None) -> dict[int, tuple[int, int]]:
        ours = supported_versions()[ApiKey.API_VERSIONS]
        v = ours[1] if version is None else version
        body = {"ClientSoftwareName": "kraftkit", "ClientSoftwareVersion": "0"} if v >= 3 else {}
        resp = self.request(ApiKey.API_VERSIONS, v, body)
        if resp["ErrorCode"] == Errors.UNSUPPORTED_VERSION and v > 0:
            # the peer answers in v0 with what it supports (KIP-511); retry at the best common version
            theirs = {a["ApiKey"]: (a["MinVersion"], a["MaxVersion"]) for a in resp["ApiKeys"]}
            retry = negotiate(ours, theirs.get(ApiKey.API_VERSIONS, (0, 0)))
            if retry is None or retry == v:
                raise ProtocolError(f"{self.address}: no common ApiVersions version")
            return self.api_versions(retry)
        if resp["ErrorCode"] != 0:
            raise ProtocolError(f"{self.address}: ApiVersions failed with error code {resp['ErrorCode']}")
        self.versions = {a["ApiKey"]: (a["MinVersion"], a["MaxVersion"]) for a in resp["ApiKeys"]}
        return self.versions

    def version_for(self, api_key: int) -> int:
        if self.versions is None:
            self.api_versions()
        assert self.versions is not None
        theirs = self.versions.get(int(api_key))
        ours = supported_versions().get(int(api_key))
        v = None if theirs is None or ours is None else negotiate(ours, theirs)
        if v is None:
            raise ProtocolError(
                f"{self.address}: no common version of {ApiKey(api_key).name} (ours {ours}, theirs {theirs})"
            )
        return v
