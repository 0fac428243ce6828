"""AlterUserScramCredentials decided by kraftkit.controller.scram against an image built from records:
Kafka 4.4's ScramControlManager rules and messages (mechanisms, iterations, duplicates, deletions of
what does not exist, empty names, metadata.version below 3.5-IV2), the UserScramCredentialRecord's
keys, RemoveUserScramCredentialRecord, and what the image holds once they are replayed."""

from __future__ import annotations

import hashlib

import pytest

from kraftkit._core import decode_metadata_record, encode_metadata_record
from kraftkit._kafka import FEATURE_LEVEL, REMOVE_USER_SCRAM_CREDENTIAL, USER_SCRAM_CREDENTIAL
from kraftkit.controller.cluster import ControllerError
from kraftkit.controller.scram import alter_scram_response, alter_user_scram_credentials
from kraftkit.metadata.image import MetadataImage
from kraftkit.metadata.mv_levels import MV_3_5_IV1, MV_3_5_IV2, MV_4_3_IV0
from kraftkit.protocol.messages import Errors

SHA256, SHA512 = 1, 2
SALT = b"salt-bytes"
# PBKDF2 of "pw" with SALT, 8192 iterations, and the keys Kafka 4.4's ScramFormatter derives from it
# (printed by a JVM running org.apache.kafka.common.security.scram.internals.ScramFormatter)
KEYS = {
    SHA256: ("6e12391ff99307d65f431e9dd09bdf37e47950a9de50af2ac2d5c856c5b85107",
             "b5db1114c6720620b174aefd2993b6db7f6e9d694ef348410c0bfd4f67db1fc2"),
    SHA512: ("1f76dff0ccf248b41abb1dcecc1b4ef377d50789e1daf001faef6c83284a6e8d0c8e43804b6f606f74a8a1b61d3fb4d14684f3a"
             "16c417603db58ca5c22f0abc7",
             "0367cd7e29fc1a79bf2c5640d01a6d476ba7003e7d4a869474777497b19e8a73a9ec77296d0a766ebe702bef82a3352bed326b9f"
             "d11d694d97d7e9df5ce905f3"),
}
HASH = {SHA256: "sha256", SHA512: "sha512"}


class Users:
    """An image at ``mv`` and the AlterUserScramCredentials decisions made against it."""

    def __init__(self, mv: int = MV_4_3_IV0) -> None:
        self.image = MetadataImage()
        self.offset = 0
        self.apply([encode_metadata_record(FEATURE_LEVEL, 0, {"Name": "metadata.version", "FeatureLevel": mv})])

    def apply(self, records: list[bytes]) -> None:
        for value in records:
            key, version, data = decode_metadata_record(value)
            self.image.replay(key, version, data, self.offset)
            self.offset += 1

    def alter(self, deletions=(), upsertions=()) -> tuple[list[tuple[int, dict]], list[tuple]]:
        body = {"Deletions": list(deletions), "Upsertions": list(upsertions)}
        records, results = alter_user_scram_credentials(self.image, body)  # type: ignore[arg-type]
        self.apply(records)
        response = alter_scram_response(body, results)  # type: ignore[arg-type]
        decoded = []
        for r in records:
            key, version, data = decode_metadata_record(r)
            assert version == 0
            decoded.append((key, data))
        return decoded, [(r["User"], r["ErrorCode"], r["ErrorMessage"]) for r in response["Results"]]


def upsert(name: str, mechanism: int = SHA256, iterations: int = 8192, password: str = "pw") -> dict:
    salted = hashlib.pbkdf2_hmac(HASH.get(mechanism, "sha256"), password.encode(), SALT, max(iterations, 1))
    return {"Name": name, "Mechanism": mechanism, "Iterations": iterations, "Salt": SALT, "SaltedPassword": salted}


def delete(name: str, mechanism: int = SHA256) -> dict:
    return {"Name": name, "Mechanism": mechanism}


def test_upsertions_write_the_keys_kafkas_scram_formatter_derives_never_the_password():
    u = Users()
    records, answers = u.alter(upsertions=[upsert("alice"), upsert("bob", SHA512)])
    assert sorted(answers) == [("alice", Errors.NONE, None), ("bob", Errors.NONE, None)]
    by_name = {d["Name"]: (k, d) for k, d in records}
    for name, mech in (("alice", SHA256), ("bob", SHA512)):
        key, d = by_name[name]
        assert key == USER_SCRAM_CREDENTIAL
        assert (d["Mechanism"], d["Iterations"], d["Salt"]) == (mech, 8192, SALT)
        assert (d["StoredKey"].hex(), d["ServerKey"].hex()) == KEYS[mech]
    assert set(u.image.scram) == {(SHA256, "alice"), (SHA512, "bob")}
    assert u.image.scram[(SHA256, "alice")]["StoredKey"].hex() == KEYS[SHA256][0]

    # a second mechanism for alice, then a new password replaces the first
    u.alter(upsertions=[upsert("alice", SHA512)])
    records, answers = u.alter(upsertions=[upsert("alice", password="other")])
    assert answers == [("alice", Errors.NONE, None)] and len(records) == 1
    assert set(u.image.scram) == {(SHA256, "alice"), (SHA512, "alice"), (SHA512, "bob")}
    assert u.image.scram[(SHA256, "alice")]["StoredKey"].hex() != KEYS[SHA256][0]


def test_deletions_write_remove_records_and_unknown_credentials_are_not_found():
    u = Users()
    u.alter(upsertions=[upsert("alice"), upsert("bob", SHA512)])
    records, answers = u.alter(deletions=[delete("alice"), delete("bob"), delete("carol", SHA512)])
    assert records == [(REMOVE_USER_SCRAM_CREDENTIAL, {"Name": "alice", "Mechanism": SHA256})]
    # results: the deletions done, then the errors in the order of Kafka's HashMap of user names
    assert answers == [
        ("alice", Errors.NONE, None),
        ("carol", Errors.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        ("bob", Errors.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
    ]
    assert set(u.image.scram) == {(SHA512, "bob")}


def test_the_order_of_records_and_results_is_kafkas_hashmap_order():
    u = Users()
    names = ["carol", "bob", "alice", "dave", "erin"]
    records, answers = u.alter(upsertions=[upsert(n) for n in names])
    # (a Java HashMap of these five names iterates carol, dave, bob, alice, erin: printed by a JVM)
    assert [d["Name"] for _k, d in records] == ["carol", "dave", "bob", "alice", "erin"]
    assert [a[0] for a in answers] == ["carol", "dave", "bob", "alice", "erin"]


@pytest.mark.parametrize(("upsertion", "code", "message"), [
    (upsert("u", iterations=4095), Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
    (upsert("u", iterations=16385), Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
    (upsert("u", iterations=-1), Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
    (upsert("", iterations=4096), Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
    (upsert("u", mechanism=3), Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    (upsert("u", mechanism=0), Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    (upsert("", mechanism=3), Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
    ({**upsert("u"), "SaltedPassword": b""}, Errors.UNKNOWN_SERVER_ERROR, None),
])
def test_upsertion_refusals(upsertion, code, message):
    u = Users()
    records, answers = u.alter(upsertions=[upsertion, upsert("ok", iterations=16384)])
    assert answers == [("ok", Errors.NONE, None), (upsertion["Name"], code, message)]
    assert [d["Name"] for _k, d in records] == ["ok"] and set(u.image.scram) == {(SHA256, "ok")}


def test_the_iteration_bounds_are_inclusive():
    _records, answers = Users().alter(upsertions=[upsert("lo", iterations=4096), upsert("hi", iterations=16384)])
    assert sorted(answers) == [("hi", Errors.NONE, None), ("lo", Errors.NONE, None)]


@pytest.mark.parametrize(("deletion", "code", "message"), [
    (delete(""), Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
    (delete("x", mechanism=7), Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    (delete("x", mechanism=SHA512), Errors.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not "
                                                                "exist"),
])
def test_deletion_refusals(deletion, code, message):
    u = Users()
    u.alter(upsertions=[upsert("x")])
    records, answers = u.alter(deletions=[deletion])
    assert answers == [(deletion["Name"], code, message)] and records == []


def test_a_user_altered_twice_in_one_request_is_a_duplicate_resource():
    u = Users()
    u.alter(upsertions=[upsert("a"), upsert("b"), upsert("c", SHA512)])
    twice = "A user credential cannot be altered twice in the same request"
    records, answers = u.alter(
        deletions=[delete("a"), delete("a", SHA512), delete("c", SHA512)],
        upsertions=[upsert("b"), upsert("b", SHA512), upsert("c"), upsert("d"), upsert("a")])
    # a: twice in the deletions; b: twice in the upsertions; c: deleted and upserted; d alone is done;
    # a's upsertion is dropped (a already failed)
    assert records == [(USER_SCRAM_CREDENTIAL, records[0][1])] and records[0][1]["Name"] == "d"
    assert answers == [("d", Errors.NONE, None), ("a", Errors.DUPLICATE_RESOURCE, twice),
                       ("b", Errors.DUPLICATE_RESOURCE, twice), ("c", Errors.DUPLICATE_RESOURCE, twice)]
    assert set(u.image.scram) == {(SHA256, "a"), (SHA256, "b"), (SHA512, "c"), (SHA256, "d")}


def test_below_3_5_iv2_every_user_is_refused_and_a_refused_user_is_not_looked_at_again():
    u = Users(MV_3_5_IV1)
    records, answers = u.alter(deletions=[delete("x")], upsertions=[upsert("x"), upsert("y")])
    assert records == []
    # x: refused for the version at its deletion, and its upsertion then skipped
    assert sorted(answers) == [("x", Errors.UNSUPPORTED_VERSION, "The current metadata.version does not support SCRAM"),
                               ("y", Errors.UNSUPPORTED_VERSION, "The current metadata.version does not support SCRAM")]
    # a user named twice: the first refusal is the answer (a duplicate is only seen after an accepted one)
    records, answers = u.alter(upsertions=[upsert("z"), upsert("z")])
    assert answers == [("z", Errors.UNSUPPORTED_VERSION, "The current metadata.version does not support SCRAM")]
    records, answers = Users().alter(upsertions=[upsert("z", iterations=1), upsert("z")])
    assert answers == [("z", Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")] and records == []


def test_scram_from_metadata_version_3_5_iv2():
    records, answers = Users(MV_3_5_IV2).alter(upsertions=[upsert("x", iterations=1)])
    assert answers == [("x", Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")]
    records, answers = Users(MV_3_5_IV2).alter(upsertions=[upsert("x")])
    assert answers == [("x", Errors.NONE, None)] and len(records) == 1


def test_the_whole_request_refused_answers_each_user_once_in_javas_string_order():
    body = {"Deletions": [delete("zed"), delete("b")], "Upsertions": [upsert("b"), upsert("Ab"), upsert("\U0001F600"),
                                                                      upsert("\uffee")]}
    response = alter_scram_response(body, None, ControllerError(Errors.NOT_CONTROLLER, "elsewhere"))  # type: ignore[arg-type]
    # (String.compareTo compares UTF-16 units: the surrogate pair of U+1F600 sorts before U+FFEE)
    assert [(r["User"], r["ErrorCode"], r["ErrorMessage"]) for r in response["Results"]] == [
        ("Ab", Errors.NOT_CONTROLLER, "elsewhere"), ("b", Errors.NOT_CONTROLLER, "elsewhere"),
        ("zed", Errors.NOT_CONTROLLER, "elsewhere"), ("\U0001F600", Errors.NOT_CONTROLLER, "elsewhere"),
        ("\uffee", Errors.NOT_CONTROLLER, "elsewhere")]


def test_a_write_past_ten_thousand_records_is_refused():
    u = Users()
    fast = {"Mechanism": SHA256, "Iterations": 4096, "Salt": SALT, "SaltedPassword": b"k" * 32}
    with pytest.raises(ControllerError) as e:
        u.alter(upsertions=[{**fast, "Name": f"u{i}"} for i in range(10001)])
    assert (e.value.code, e.value.message) == (Errors.POLICY_VIOLATION,
                                               "Unable to perform excessively large batch operation.")
    records, _answers = u.alter(upsertions=[{**fast, "Name": f"u{i}"} for i in range(10000)])
    assert len(records) == 10000 and len(u.image.scram) == 10000


def test_a_whole_request_refused_with_the_errors_default_message_or_unknown_carries_none():
    body = {"Deletions": [delete("a")], "Upsertions": []}
    default = ControllerError(Errors.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
    unknown = ControllerError(Errors.UNKNOWN_SERVER_ERROR, "boom")
    for error in (default, unknown):
        response = alter_scram_response(body, None, error)  # type: ignore[arg-type]
        assert response["Results"] == [{"User": "a", "ErrorCode": error.code, "ErrorMessage": None}]
