"""``ScramControlManager``: AlterUserScramCredentials (api 51) decided as Kafka 4.4's controller decides it.

A request deletes credentials (a user and a mechanism) and upserts them (a user, a mechanism, the
iterations, the salt and the salted password the client computed). Kafka's rules, in its order:

- a user named twice in one request (in the deletions, or in both lists, or twice in the upsertions)
  is refused with DUPLICATE_RESOURCE "A user credential cannot be altered twice in the same request",
  and the user's other alterations in the request are dropped;
- below metadata.version 3.5-IV2 every user is refused with UNSUPPORTED_VERSION;
- an empty user name is UNACCEPTABLE_CREDENTIAL, a mechanism other than SCRAM-SHA-256 (1) or
  SCRAM-SHA-512 (2) UNSUPPORTED_SASL_MECHANISM; a deletion of a credential the image does not hold is
  RESOURCE_NOT_FOUND; an upsertion's iterations must be in [4096, 16384] (UNACCEPTABLE_CREDENTIAL
  "Too few iterations" / "Too many iterations").

A deletion writes ``RemoveUserScramCredentialRecord``; an upsertion ``UserScramCredentialRecord`` with
the salt, the iterations and the keys derived from the salted password as RFC 5802 derives them
(StoredKey = H(HMAC(salted password, "Client Key")), ServerKey = HMAC(salted password, "Server Key")):
the password itself is never in the log. An empty salted password cannot key an HMAC (Kafka's answer:
UNKNOWN_SERVER_ERROR, no message). All records of a request go in one batch. The records and the
results come in the order of Kafka's ``HashMap``s: deletions, upsertions, then the errors.

One difference: Kafka's ScramControlManager does not bound a write's records; kraftkit refuses a request
that would write more than 10,000 as a whole, as Kafka's controller refuses other such writes
(POLICY_VIOLATION).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from typing import Generic, TypeVar

from kraftkit._core import encode_metadata_record
from kraftkit._kafka import REMOVE_USER_SCRAM_CREDENTIAL, USER_SCRAM_CREDENTIAL
from kraftkit.controller.client_quotas import TOO_LARGE, hash_order
from kraftkit.controller.cluster import ControllerError
from kraftkit.controller.configs import MAX_RECORDS
from kraftkit.metadata.image import MetadataImage
from kraftkit.metadata.mv_levels import MV_3_5_IV2
from kraftkit.protocol import types as t
from kraftkit.protocol.messages import ERROR_MESSAGES, Errors

__all__ = ["MAX_ITERATIONS", "MECHANISMS", "MIN_ITERATIONS", "alter_scram_response", "alter_user_scram_credentials"]

log = logging.getLogger(__name__)

#: ScramMechanism type -> (name, hash)
MECHANISMS = {1: ("SCRAM-SHA-256", "sha256"), 2: ("SCRAM-SHA-512", "sha512")}
#: ``ScramMechanism.minIterations()`` (both mechanisms) and ``ScramControlManager.MAX_ITERATIONS``
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
TWICE = "A user credential cannot be altered twice in the same request"
NO_SCRAM = "The current metadata.version does not support SCRAM"

Result = tuple[str, int, str | None]  # (user, error code, message)
V = TypeVar("V")


class _Map(Generic[V]):
    """A ``java.util.HashMap`` keyed by user name: its iteration order is :func:`hash_order` over the
    names in it, given the most it ever held."""

    def __init__(self) -> None:
        self.items: dict[str, V] = {}
        self.peak = 0

    def put(self, k: str, v: V) -> None:
        self.items[k] = v
        self.peak = max(self.peak, len(self.items))

    def pop(self, k: str) -> bool:
        return self.items.pop(k, None) is not None

    def ordered(self) -> list[str]:
        return hash_order(list(self.items), 16, self.peak)


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[int, str] | None:
    if name == "":
        return Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISMS:
        return Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def credential_record(upsertion: t.AlterUserScramCredentialsRequestScramCredentialUpsertion) -> bytes:
    """The UserScramCredentialRecord of an upsertion (ValueError: an empty salted password)."""
    mechanism = upsertion.get("Mechanism", 0)
    digest = MECHANISMS[mechanism][1]
    salted = bytes(upsertion.get("SaltedPassword") or b"")
    if not salted:
        raise ValueError("Empty key")  # (Java's SecretKeySpec refuses an empty HMAC key)
    client_key = hmac.digest(salted, b"Client Key", digest)
    record: t.UserScramCredentialRecord = {
        "Name": upsertion.get("Name", ""),
        "Mechanism": mechanism,
        "Salt": bytes(upsertion.get("Salt") or b""),
        "StoredKey": hashlib.new(digest, client_key).digest(),
        "ServerKey": hmac.digest(salted, b"Server Key", digest),
        "Iterations": upsertion.get("Iterations", 0),
    }
    return encode_metadata_record(USER_SCRAM_CREDENTIAL, 0, dict(record))


def alter_user_scram_credentials(
    image: MetadataImage, body: t.AlterUserScramCredentialsRequest
) -> tuple[list[bytes], list[Result]]:
    """The records of an AlterUserScramCredentials request against the committed ``image`` and the
    result of each user named, in Kafka's order."""
    level = image.metadata_version
    supported = level is not None and level >= MV_3_5_IV2
    held = set(image.scram)  # {(mechanism, user)}
    deletions: _Map[t.AlterUserScramCredentialsRequestScramCredentialDeletion] = _Map()
    upserts: _Map[t.AlterUserScramCredentialsRequestScramCredentialUpsertion] = _Map()
    errors: _Map[tuple[int, str | None]] = _Map()

    for d in body.get("Deletions") or []:
        name, mechanism = d.get("Name", ""), d.get("Mechanism", 0)
        if name in errors.items:
            continue
        if deletions.pop(name):
            errors.put(name, (Errors.DUPLICATE_RESOURCE, TWICE))
        elif not supported:
            errors.put(name, (Errors.UNSUPPORTED_VERSION, NO_SCRAM))
        elif (problem := _check_name_and_mechanism(name, mechanism)) is not None:
            errors.put(name, problem)
        elif (mechanism, name) not in held:
            errors.put(name, (Errors.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"))
        else:
            deletions.put(name, d)
    for u in body.get("Upsertions") or []:
        name, mechanism, iterations = u.get("Name", ""), u.get("Mechanism", 0), u.get("Iterations", 0)
        if name in errors.items:
            continue
        if deletions.pop(name) or upserts.pop(name):
            errors.put(name, (Errors.DUPLICATE_RESOURCE, TWICE))
        elif not supported:
            errors.put(name, (Errors.UNSUPPORTED_VERSION, NO_SCRAM))
        elif (problem := _check_name_and_mechanism(name, mechanism)) is not None:
            errors.put(name, problem)
        elif iterations < MIN_ITERATIONS:
            errors.put(name, (Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"))
        elif iterations > MAX_ITERATIONS:
            errors.put(name, (Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations"))
        else:
            upserts.put(name, u)

    records: list[bytes] = []
    results: list[Result] = []
    for name in deletions.ordered():
        d = deletions.items[name]
        record: t.RemoveUserScramCredentialRecord = {"Name": name, "Mechanism": d.get("Mechanism", 0)}
        records.append(encode_metadata_record(REMOVE_USER_SCRAM_CREDENTIAL, 0, dict(record)))
        results.append((name, Errors.NONE, None))
    for name in upserts.ordered():
        try:
            records.append(credential_record(upserts.items[name]))
        except ValueError:
            errors.put(name, (Errors.UNKNOWN_SERVER_ERROR, None))
            continue
        results.append((name, Errors.NONE, None))
    for name in errors.ordered():
        code, message = errors.items[name]
        results.append((name, code, message))
    if len(records) > MAX_RECORDS:
        raise ControllerError(Errors.POLICY_VIOLATION, TOO_LARGE)
    if records:
        done = [f"{n}" for n, code, _ in results if code == Errors.NONE]
        log.info("SCRAM credentials altered: %d record(s) for %s", len(records), ", ".join(done))
    return records, results


def alter_scram_response(
    body: t.AlterUserScramCredentialsRequest, results: list[Result] | None, error: ControllerError | None = None
) -> t.AlterUserScramCredentialsResponse:
    """The AlterUserScramCredentialsResponse: one result per user decided, or when the whole request
    failed (NOT_CONTROLLER, a timeout) ``error`` for each user named, in Java's string order (as Kafka's
    getErrorResponse)."""
    if results is None:
        code = error.code if error else Errors.UNKNOWN_SERVER_ERROR
        # (ApiError.fromThrowable: no message for UNKNOWN_SERVER_ERROR nor one that is the error's default)
        message = error.message if error else None
        if code == Errors.UNKNOWN_SERVER_ERROR or message == {int(k): v for k, v in ERROR_MESSAGES.items()}.get(code):
            message = None
        names = [d.get("Name", "") for d in body.get("Deletions") or []]
        names += [u.get("Name", "") for u in body.get("Upsertions") or []]
        ordered = sorted(set(names), key=lambda n: n.encode("utf-16-be", "surrogatepass"))
        results = [(n, code, message) for n in ordered]
    return {
        "ThrottleTimeMs": 0,
        "Results": [{"User": n, "ErrorCode": code, "ErrorMessage": message} for n, code, message in results],
    }
