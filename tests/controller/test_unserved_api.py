"""A request for an API the controller does not serve (not in its ApiVersions) is answered, not
dropped: when kraftkit knows the API's schema, with a response at the request's version whose
top-level ErrorCode is UNSUPPORTED_VERSION and whose arrays are empty (a Produce with acks=0 gets no
answer, as none is awaited, and the connection goes on); otherwise the connection is closed with a
log line naming the peer. Driven by a raw socket client."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct

import pytest

from kraftkit.protocol.messages import ApiKey, Errors, decode_response, encode_request, supported_versions

from ._nodes import make_controllers, running

pytestmark = pytest.mark.timeout(60)

FIND_COORDINATOR = 10  # an API kraftkit has no schema for


def frame(api: int, version: int, corr: int, body: dict) -> bytes:
    req = encode_request(api, version, corr, "raw", body)
    return struct.pack(">i", len(req)) + req


def frame_raw_header(api: int, version: int, corr: int) -> bytes:
    """A v1 request header only (api key, version, correlation id, client id)."""
    req = struct.pack(">hhih", api, version, corr, 3) + b"raw"
    return struct.pack(">i", len(req)) + req


def read_answer(s: socket.socket) -> bytes | None:
    """The next response frame, or None if the node closed the connection."""
    def exact(n: int) -> bytes | None:
        out = b""
        while len(out) < n:
            try:
                got = s.recv(n - len(out))
            except ConnectionResetError:
                return None
            if not got:
                return None
            out += got
        return out

    head = exact(4)
    return None if head is None else exact(struct.unpack(">i", head)[0])


def test_unserved_apis_are_answered_or_closed_with_a_reason(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="kraftkit.raft.server")
    acls = {"ResourceTypeFilter": 1, "ResourceNameFilter": None, "PatternTypeFilter": 1, "PrincipalFilter": None,
            "HostFilter": None, "Operation": 1, "PermissionType": 1}
    produce = {"TransactionalId": None, "Acks": 0, "TimeoutMs": 1000, "TopicData": []}
    assert FIND_COORDINATOR not in supported_versions()

    async def main():
        # one node of three: it answers requests without a quorum
        node = make_controllers(tmp_path, release_version="4.4", layout="checkpoint")[0]
        async with running([node]):
            port = node.address[1]

            def client() -> dict:
                out = {}
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    s.sendall(frame(ApiKey.DESCRIBE_ACLS, 3, 7, acls))
                    out["acls"] = decode_response(ApiKey.DESCRIBE_ACLS, 3, read_answer(s))
                    s.sendall(frame(ApiKey.ALTER_CLIENT_QUOTAS, 1, 8, {"Entries": [], "ValidateOnly": False}))
                    out["quotas"] = decode_response(ApiKey.ALTER_CLIENT_QUOTAS, 1, read_answer(s))
                    # acks=0: no answer; the next request's answer is the next frame
                    s.sendall(frame(ApiKey.PRODUCE, 9, 9, produce))
                    s.sendall(frame(ApiKey.API_VERSIONS, 0, 10, {}))
                    out["after_acks0"] = decode_response(ApiKey.API_VERSIONS, 0, read_answer(s))
                    s.sendall(frame(ApiKey.PRODUCE, 9, 11, {**produce, "Acks": -1}))
                    out["produce"] = decode_response(ApiKey.PRODUCE, 9, read_answer(s))
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    s.sendall(frame_raw_header(FIND_COORDINATOR, 4, 12))
                    out["unknown"] = read_answer(s)
                    out["unknown_peer"] = s.getsockname()
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    s.sendall(frame_raw_header(ApiKey.DESCRIBE_ACLS, 99, 13))
                    out["bad_version"] = read_answer(s)
                return out

            return await asyncio.get_running_loop().run_in_executor(None, client)

    out = asyncio.run(asyncio.wait_for(main(), 45))
    corr, acls_answer = out["acls"]
    assert corr == 7
    assert acls_answer["ErrorCode"] == Errors.UNSUPPORTED_VERSION and acls_answer["Resources"] == []
    assert "does not serve DESCRIBE_ACLS" in acls_answer["ErrorMessage"]
    assert out["quotas"] == (8, {"ThrottleTimeMs": 0, "Entries": []})  # (AlterClientQuotas has no top-level ErrorCode)
    corr, versions = out["after_acks0"]
    assert corr == 10 and versions["ErrorCode"] == Errors.NONE
    assert ApiKey.DESCRIBE_ACLS not in {k["ApiKey"] for k in versions["ApiKeys"]}  # not listed
    corr, produce_answer = out["produce"]
    assert corr == 11 and produce_answer["Responses"] == []
    # no schema, or a version kraftkit cannot speak: closed, and the log says who and why
    assert out["unknown"] is None and out["bad_version"] is None
    host, cport = out["unknown_peer"]
    assert any(f"{host}:{cport}" in r.getMessage() and f"apiKey {FIND_COORDINATOR} v4" in r.getMessage()
               for r in caplog.records)
    assert any("DESCRIBE_ACLS v99" in r.getMessage() and "closing" in r.getMessage() for r in caplog.records)
