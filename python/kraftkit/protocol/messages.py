"""RPC messages: apiKeys by name, the versions kraftkit speaks, request/response codec, and
Kafka's error codes (``Errors``, with their default messages)."""

from __future__ import annotations

import functools

from kraftkit._core import decode_request, decode_response, encode_request, encode_response, rpc_schema
from kraftkit._kafka import ERROR_MESSAGES, ApiKey, Errors

__all__ = [
    "API_KEYS",
    "ERROR_MESSAGES",
    "ApiKey",
    "Errors",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "supported_versions",
]


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
