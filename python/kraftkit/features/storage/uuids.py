"""Kafka's ``Uuid`` text (URL-safe base64), random cluster ids and directory ids."""

from __future__ import annotations

import base64
import re
import secrets
import uuid as _uuid
from collections.abc import Iterable

from kraftkit.features.storage.errors import StorageInputError
from kraftkit.metadata.image import uuid_text

_RESERVED_UUIDS = {bytes(16), (1).to_bytes(16, "big")}  # Uuid.ZERO_UUID, Uuid.ONE_UUID (METADATA_TOPIC_ID)


def uuid_to_str(raw: bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    if len(raw) != 16:
        raise ValueError("a Kafka Uuid is 16 bytes")
    return uuid_text(_uuid.UUID(bytes=raw))


def parse_uuid(text: str) -> bytes:
    """Kafka's ``Uuid.fromString``: URL-safe base64 (padding optional) of exactly 16 bytes."""
    if not isinstance(text, str) or len(text) > 24:
        raise ValueError(f"{text!r} is too long to be a base64 Kafka Uuid")
    if not re.fullmatch(r"[A-Za-z0-9_-]{22}(==)?", text):
        raise ValueError(f"{text!r} is not a Kafka Uuid (22 characters of URL-safe base64)")
    # Java's decoder ignores the 4 spare bits of the last character, so the text need not be
    # canonical (the docs' example cluster id MkU3OEVBNTcwNTJENDM2Qk is not); toString is.
    return base64.urlsafe_b64decode(text[:22] + "==")


def random_uuid() -> str:
    """Kafka's ``Uuid.randomUuid()``: a random (version 4) UUID, redrawn while it is reserved
    (zero, one) or its text starts with ``-`` (which command-line parsers take for a flag)."""
    while True:
        raw = _uuid.uuid4().bytes
        text = uuid_to_str(raw)
        if raw not in _RESERVED_UUIDS and not text.startswith("-"):
            return text


def directory_id_reserved(raw: bytes) -> bool:
    """``DirectoryId.reserved``: the first 100 ids (most significant half 0, least < 100)."""
    return raw[:8] == bytes(8) and int.from_bytes(raw[8:], "big") < 100


def generate_directory_id(taken: Iterable[str] = ()) -> str:
    """``MetaPropertiesEnsemble.Copier.generateValidDirectoryId``: 128 random bits, redrawn
    while reserved, starting with ``-``, or already used by another directory."""
    used = set(taken)
    while True:
        raw = secrets.token_bytes(16)
        text = uuid_to_str(raw)
        if not (text.startswith("-") or directory_id_reserved(raw) or text in used):
            return text


def validate_cluster_id(cluster_id: str) -> str:
    """kraftkit accepts only cluster ids of the form ``kafka-storage random-uuid`` prints.
    (Kafka's own tool writes any string, even an empty one; nothing else it makes reads so.)"""
    try:
        raw = parse_uuid(cluster_id)
    except ValueError as e:
        raise StorageInputError(
            f"invalid cluster id {cluster_id!r}: {e}. Use `kraftkit storage random-uuid` to make one."
        ) from None
    if raw in _RESERVED_UUIDS:
        raise StorageInputError(f"invalid cluster id {cluster_id!r}: it is a reserved Uuid")
    # (one starting with '-' is accepted: a ZooKeeper-mode cluster's id, which Kafka drew as any
    # base64url Uuid, may start so; `random_uuid` never makes one)
    return cluster_id[:22]
