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
    "error_response",
    "supported_versions",
]


@functools.cache
def _responses() -> dict[int, dict]:
    return {m["api_key"]: m for m in rpc_schema() if m["kind"] == "response"}


def _in(versions: list[int] | tuple[int, int] | None, version: int) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


def error_response(api: int, version: int, error: int, message: str | None = None) -> dict:
    """A response of ``api`` at ``version`` that only says ``error``: every top-level ErrorCode is
    ``error`` (and ErrorMessage ``message``, where the version has one), every array empty, the other
    fields the schema's defaults. For a request kraftkit can decode and does not serve."""
    body: dict = {}
    for f in _responses()[api]["fields"]:
        if not _in(f["versions"], version) or f["tagged_versions"] is not None:
            continue
        if f["name"] == "ErrorCode" and f["type"]["kind"] == "int16":
            body["ErrorCode"] = error
        elif f["name"] == "ErrorMessage" and _in(f["nullable_versions"], version):
            body["ErrorMessage"] = message
        elif f["type"]["kind"] == "array":
            body[f["name"]] = []
    return body


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
