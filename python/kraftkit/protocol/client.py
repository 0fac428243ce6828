"""A blocking Kafka protocol client: framing, correlation ids, timeouts, ApiVersions, and the
client side of KIP-584: a feature cache fed by every ApiVersions answer."""

from __future__ import annotations

import itertools
import socket
import struct
import threading
from dataclasses import dataclass
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


@dataclass(frozen=True)
class FeatureAnswer:
    """The feature fields of one node's ApiVersions answer (v3+): its supported ranges, the
    finalized levels it knows (``MaxVersionLevel``; disabled features are not listed) and their
    ``FinalizedFeaturesEpoch`` (-1: none yet)."""

    address: str
    supported: dict[str, tuple[int, int]]
    finalized: dict[str, int]
    epoch: int

    @classmethod
    def from_response(cls, address: str, resp: dict[str, Any]) -> FeatureAnswer:
        return cls(
            address,
            {f["Name"]: (f["MinVersion"], f["MaxVersion"]) for f in resp.get("SupportedFeatures") or []},
            {f["Name"]: f["MaxVersionLevel"] for f in resp.get("FinalizedFeatures") or []},
            resp.get("FinalizedFeaturesEpoch", -1),
        )


class FeatureCache:
    """What a client knows of a cluster's features (KIP-584, as Kafka's ``ApiVersions`` holder):
    each node's latest supported ranges, and the finalized levels of the answer with the highest
    ``FinalizedFeaturesEpoch`` seen. The finalized levels only move to a higher epoch: an answer
    from a node that lags (or restarted behind) never rolls them back, and an answer with epoch -1
    (nothing finalized yet) never sets them. One cache is shared by all the connections of a
    client or admin object, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.epoch = -1
        self.finalized: dict[str, int] = {}
        #: the answer the finalized levels come from (None until an answer with epoch >= 0)
        self.newest: FeatureAnswer | None = None
        #: each node's latest answer, by address
        self.nodes: dict[str, FeatureAnswer] = {}

    def update(self, answer: FeatureAnswer) -> bool:
        """Records ``answer``; True if it moved the finalized levels to a higher epoch."""
        with self._lock:
            self.nodes[answer.address] = answer
            if answer.epoch <= self.epoch:
                return False
            self.epoch, self.finalized, self.newest = answer.epoch, dict(answer.finalized), answer
            return True

    def snapshot(self) -> tuple[int, dict[str, int], FeatureAnswer | None]:
        """``(epoch, finalized levels, the answer they come from)``, read together."""
        with self._lock:
            return self.epoch, dict(self.finalized), self.newest


class KafkaConnection:
    """One TCP connection to a Kafka (or kraftkit) listener.

    ``request(api_key, version, body)`` sends one request and returns the decoded response
    body; ``api_versions()`` asks what the peer supports (retrying at v0 when it does not know
    the version asked, as Kafka's clients do) and ``version_for(api_key)`` picks the highest
    version both sides speak. Every ApiVersions answer at v3+ feeds ``features`` (a
    :class:`FeatureCache`, shared with other connections when given) and ``feature_answer``.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float = 10.0,
        client_id: str = "kraftkit",
        features: FeatureCache | None = None,
    ) -> None:
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
        self.features = features if features is not None else FeatureCache()
        self.feature_answer: FeatureAnswer | None = None

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
        if v >= 3:  # the feature fields are v3's tagged fields
            self.feature_answer = FeatureAnswer.from_response(self.address, resp)
            self.features.update(self.feature_answer)
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
