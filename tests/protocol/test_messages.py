"""Kafka RPC messages: round trips of every request and response schema at every version
(values drawn from the generated tables), header versions, golden bytes derived by hand from
the protocol rules, and garbage that must give errors, not crashes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftkit._core import rpc_schema
from kraftkit.errors import KraftkitError
from kraftkit.protocol import ApiKey, decode_request, decode_response, encode_request, encode_response, negotiate
from kraftkit.protocol import supported_versions
from kraftkit.metadata import records as mr
from tests.metadata.test_roundtrip_hypothesis import struct_strategy

SCHEMAS = [m for m in rpc_schema() if m["kind"] in ("request", "response")]


def _cases():
    for m in SCHEMAS:
        lo, hi = m["valid_versions"]
        for v in range(lo, hi + 1):
            yield pytest.param(m, v, id=f"{m['name']}-v{v}")


def test_every_quorum_rpc_is_there():
    assert {ApiKey(k) for k in supported_versions()} == set(ApiKey)
    names = {m["name"] for m in SCHEMAS}
    for k in ApiKey:
        stem = "".join(w.capitalize() for w in k.name.split("_")).replace("Api", "Api")
        assert any(n.lower() == (stem + "Request").lower() for n in names), k


@pytest.mark.parametrize("m,v", list(_cases()))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_roundtrip(m, v, data):
    flexible = m["flexible_versions"] is not None and m["flexible_versions"][0] <= v <= m["flexible_versions"][1]
    body = data.draw(struct_strategy(m["fields"], v, flexible))
    cid = data.draw(st.integers(-(1 << 31), (1 << 31) - 1))
    if m["kind"] == "request":
        client = data.draw(st.one_of(st.none(), st.text(max_size=10)))
        b = encode_request(m["api_key"], v, cid, client, body)
        assert decode_request(b) == (m["api_key"], v, cid, client, body)
    else:
        b = encode_response(m["api_key"], v, cid, body)
        assert decode_response(m["api_key"], v, b) == (cid, body)
        assert encode_response(m["api_key"], v, cid, decode_response(m["api_key"], v, b)[1]) == b
    body.pop(mr.UNKNOWN_TAGS, None)


def test_golden_api_versions_v3_request():
    # header v2: int16 apiKey 18, int16 version 3, int32 correlation id, ClientId as a classic
    # int16-length string even in flexible headers, an empty tagged-field section; body (flexible):
    # compact strings (length + 1) ClientSoftwareName and ClientSoftwareVersion, empty tags
    want = (bytes.fromhex("0012" "0003" "00000007" "0008") + b"kraftkit" + b"\x00"
            + b"\x09" + b"kraftkit" + b"\x04" + b"0.1" + b"\x00")
    got = encode_request(18, 3, 7, "kraftkit", {"ClientSoftwareName": "kraftkit", "ClientSoftwareVersion": "0.1"})
    assert got == want


def test_response_header_versions():
    # ApiVersions responses always use header v0 (no tagged fields), others v1 when flexible
    body = {"ErrorCode": 0, "ApiKeys": [], "ThrottleTimeMs": 0}
    assert encode_response(18, 3, 5, body)[:4] == b"\x00\x00\x00\x05"
    assert encode_response(18, 3, 5, body)[4:6] == b"\x00\x00"  # body starts right away: ErrorCode 0
    vote = {"ErrorCode": 0, "Topics": []}
    assert encode_response(52, 1, 5, vote)[:5] == b"\x00\x00\x00\x05\x00"  # header v1: its tag section


def test_negotiation():
    assert negotiate((0, 4), (0, 3)) == 3
    assert negotiate((4, 18), (0, 3)) is None


@settings(max_examples=400, deadline=None)
@given(key=st.sampled_from([k.value for k in ApiKey] + [0, 99]), version=st.integers(-1, 20),
       body=st.binary(max_size=64))
def test_garbage_gives_errors_not_crashes(key, version, body):
    try:
        decode_response(key, version, body)
    except KraftkitError:
        pass
    try:
        decode_request(key.to_bytes(2, "big", signed=True) + version.to_bytes(2, "big", signed=True) + body)
    except KraftkitError:
        pass
