"""RPC messages: apiKeys by name, the versions kraftkit speaks, request/response codec."""

from __future__ import annotations

import enum
import functools

from kraftkit._core import decode_request, decode_response, encode_request, encode_response, rpc_schema

__all__ = ["API_KEYS", "ApiKey", "decode_request", "decode_response", "encode_request", "encode_response",
           "supported_versions"]


class ApiKey(enum.IntEnum):
    """The apiKeys kraftkit speaks (Kafka's ``ApiKeys``)."""

    PRODUCE = 0
    FETCH = 1
    API_VERSIONS = 18
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82


@functools.cache
def _table() -> dict[int, tuple[int, int]]:
    out = {}
    for m in rpc_schema():
        if m["kind"] == "request":
            out[m["api_key"]] = tuple(m["valid_versions"])
    return out


#: apiKey -> name of the request schema without "Request" (``Vote``)
API_KEYS: dict[int, str] = {k.value: k.name for k in ApiKey}


def supported_versions() -> dict[int, tuple[int, int]]:
    """apiKey -> (min, max) request version kraftkit can encode and decode."""
    return dict(_table())
