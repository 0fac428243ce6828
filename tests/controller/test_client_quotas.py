"""AlterClientQuotas decided by kraftkit.controller.client_quotas against an image built from records:
Kafka 4.4's ClientQuotaControlManager rules and messages (entities, keys, values, duplicates), the
ClientQuotaRecords (Remove=true for a removal, nothing for no change), ValidateOnly, and what the
image holds once they are replayed; both RPCs served by a live quorum."""

from __future__ import annotations

import asyncio
import math

import pytest

from kraftkit._core import decode_metadata_record, encode_metadata_record
from kraftkit._kafka import CLIENT_QUOTA, FEATURE_LEVEL
from kraftkit.controller.client_quotas import alter_client_quotas, alter_client_quotas_response, hash_order
from kraftkit.controller.cluster import ControllerError
from kraftkit.metadata.image import MetadataImage
from kraftkit.metadata.mv_levels import MV_4_3_IV0
from kraftkit.protocol.messages import ApiKey, Errors
from tests.raft._cluster import wait_for

from ._nodes import active_of, call_port, controller, format_dirs, running

BAD = Errors.INVALID_REQUEST


class Quotas:
    """An image at metadata.version 4.3-IV0 and the AlterClientQuotas decisions made against it."""

    def __init__(self) -> None:
        self.image = MetadataImage()
        self.offset = 0
        self.apply([encode_metadata_record(FEATURE_LEVEL, 0, {"Name": "metadata.version", "FeatureLevel": MV_4_3_IV0})])

    def apply(self, records: list[bytes]) -> None:
        for value in records:
            key, version, data = decode_metadata_record(value)
            self.image.replay(key, version, data, self.offset)
            self.offset += 1

    def alter(self, *entries: dict, validate_only: bool = False) -> tuple[list[dict], list[tuple]]:
        body = {"Entries": list(entries), "ValidateOnly": validate_only}
        records, results = alter_client_quotas(self.image, body)  # type: ignore[arg-type]
        self.apply(records)
        response = alter_client_quotas_response(body, results)  # type: ignore[arg-type]
        answers = [({e["EntityType"]: e["EntityName"] for e in r["Entity"]}, r["ErrorCode"], r["ErrorMessage"])
                   for r in response["Entries"]]
        decoded = []
        for r in records:
            key, version, data = decode_metadata_record(r)
            assert (key, version) == (CLIENT_QUOTA, 0)
            decoded.append(data)
        return decoded, answers


def entry(entity: dict, **ops) -> dict:
    """An entry: ``key=value`` sets, ``key=None`` removes."""
    return {"Entity": [{"EntityType": k, "EntityName": v} for k, v in entity.items()],
            "Ops": [{"Key": k, "Value": 0.0 if v is None else v, "Remove": v is None} for k, v in ops.items()]}


def rec(entity: list[tuple[str, str | None]], key: str, value: float = 0.0, remove: bool = False) -> dict:
    return {"Entity": [{"EntityType": t, "EntityName": n} for t, n in entity], "Key": key, "Value": value,
            "Remove": remove}


def test_set_change_and_remove_quotas_of_a_client_a_user_and_their_defaults():
    q = Quotas()
    records, answers = q.alter(entry({"client-id": "c1"}, producer_byte_rate=1024.0),
                               entry({"client-id": None}, consumer_byte_rate=2048.0),
                               entry({"user": "alice", "client-id": "c1"}, request_percentage=12.5))
    assert answers == [({"client-id": "c1"}, Errors.NONE, None), ({"client-id": None}, Errors.NONE, None),
                       ({"user": "alice", "client-id": "c1"}, Errors.NONE, None)]
    # a user and client-id entity's types in the order of Kafka's HashMap(3): client-id, then user
    assert records == [rec([("client-id", "c1")], "producer_byte_rate", 1024.0),
                       rec([("client-id", None)], "consumer_byte_rate", 2048.0),
                       rec([("client-id", "c1"), ("user", "alice")], "request_percentage", 12.5)]
    assert q.image.client_quotas == {(("client-id", "c1"),): {"producer_byte_rate": 1024.0},
                                     (("client-id", None),): {"consumer_byte_rate": 2048.0},
                                     (("client-id", "c1"), ("user", "alice")): {"request_percentage": 12.5}}

    # the same value again writes nothing; a changed one is written; a removal of a key not set writes nothing
    records, answers = q.alter(entry({"client-id": "c1"}, producer_byte_rate=1024.0, consumer_byte_rate=None),
                               entry({"client-id": None}, consumer_byte_rate=4096.0))
    assert [a[1] for a in answers] == [Errors.NONE, Errors.NONE]
    assert records == [rec([("client-id", None)], "consumer_byte_rate", 4096.0)]

    # removals: Remove=true, and an entity with no quota left leaves the image
    records, answers = q.alter(entry({"client-id": "c1"}, producer_byte_rate=None),
                               entry({"user": "alice", "client-id": "c1"}, request_percentage=None))
    assert records == [rec([("client-id", "c1")], "producer_byte_rate", remove=True),
                       rec([("client-id", "c1"), ("user", "alice")], "request_percentage", remove=True)]
    assert q.image.client_quotas == {(("client-id", None),): {"consumer_byte_rate": 4096.0}}


def test_records_of_one_entity_in_the_order_of_kafkas_hashmap_of_its_keys():
    q = Quotas()
    keys = ["request_percentage", "controller_mutation_rate", "consumer_byte_rate", "producer_byte_rate"]
    records, _answers = q.alter(entry({"user": None}, **dict.fromkeys(keys, 100.0)))
    # (Java's HashMap(4) of these keys iterates producer_byte_rate, consumer_byte_rate,
    # controller_mutation_rate, request_percentage: printed by a JVM)
    assert [r["Key"] for r in records] == ["producer_byte_rate", "consumer_byte_rate", "controller_mutation_rate",
                                           "request_percentage"]
    assert hash_order(keys, 4) == [r["Key"] for r in records]
    assert q.image.client_quotas == {(("user", None),): dict.fromkeys(keys, 100.0)}


def test_ip_quotas():
    q = Quotas()
    records, answers = q.alter(entry({"ip": "192.168.1.7"}, connection_creation_rate=20.0),
                               entry({"ip": None}, connection_creation_rate=5.0),
                               entry({"ip": "::1"}, connection_creation_rate=1.0),
                               entry({"ip": "[fe80::1]"}, connection_creation_rate=1.0),
                               entry({"ip": "10.0.0.300"}, connection_creation_rate=1.0),
                               entry({"ip": "[10.0.0.1]"}, connection_creation_rate=1.0),
                               entry({"ip": "10.0.0.2"}, producer_byte_rate=1.0),
                               entry({"ip": "10.0.0.3"}, connection_creation_rate=2.5),
                               entry({"ip": "10.0.0.4"}, connection_creation_rate=2147483648.0),
                               entry({"ip": "10.0.0.5", "user": "u"}, connection_creation_rate=1.0))
    assert answers == [
        ({"ip": "192.168.1.7"}, Errors.NONE, None),
        ({"ip": None}, Errors.NONE, None),
        ({"ip": "::1"}, Errors.NONE, None),
        ({"ip": "[fe80::1]"}, Errors.NONE, None),
        ({"ip": "10.0.0.300"}, BAD, "10.0.0.300 is not a valid IP or resolvable host."),
        ({"ip": "[10.0.0.1]"}, BAD, "[10.0.0.1] is not a valid IP or resolvable host."),
        ({"ip": "10.0.0.2"}, BAD, "Invalid configuration key producer_byte_rate"),
        ({"ip": "10.0.0.3"}, BAD, "connection_creation_rate cannot be a fractional value."),
        ({"ip": "10.0.0.4"}, BAD, "Proposed value for connection_creation_rate is too large for an INT."),
        ({"ip": "10.0.0.5", "user": "u"}, BAD,
         "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ]
    assert [(r["Entity"], r["Value"]) for r in records] == [
        ([{"EntityType": "ip", "EntityName": "192.168.1.7"}], 20.0), ([{"EntityType": "ip", "EntityName": None}], 5.0),
        ([{"EntityType": "ip", "EntityName": "::1"}], 1.0), ([{"EntityType": "ip", "EntityName": "[fe80::1]"}], 1.0)]
    assert q.image.client_quotas[(("ip", "192.168.1.7"),)] == {"connection_creation_rate": 20.0}


# what Java 17's InetAddress.getByName makes of each (printed by a JVM; the refused ones are no
# literal, and none of them resolves as a host name)
@pytest.mark.parametrize(("ip", "valid"), [
    ("127.1", True), ("1", True), ("01.2.3.4", True), ("1.2.3.04", True), ("00", True), ("4294967295", True),
    ("1.16777215", True), ("255.255.65535", True), ("000000000000001", True), ("0000000000001.1", True),
    ("0.0.0.0", True), ("::", True), ("[::1]", True), ("::ffff:1.2.3.4", True), ("::1.2.3.4", True),
    ("::01.2.3.4", True), ("0001::1", True), ("fe80::1%1", True), ("[fe80::1%1]", True),
    ("0x7f.1", False), ("1.2.3.4.5", False), ("[1.2.3.4]", False), ("10.0.0.300", False), ("1.2.3.4 ", False),
    (" 1.2.3.4", False), ("::1]", False), ("[::1", False), ("4294967296", False), ("1::2::3", False),
    ("1.2.3.", False), ("0000000000000001", False), ("1.2.3.4%1", False), ("1.2.3.256", False), ("256.1", False),
    ("1.2.65536", False), ("::ffff:1.2.3", False), ("[]", False), ("+1", False), ("\uff11", False),
    ("fe80::1%no-such-interface", False),
])
def test_ip_literals_as_java_takes_them(ip, valid):
    _records, answers = Quotas().alter(entry({"ip": ip}, connection_creation_rate=1.0))
    assert answers == [({"ip": ip}, Errors.NONE, None) if valid else
                       ({"ip": ip}, BAD, f"{ip} is not a valid IP or resolvable host.")]


@pytest.mark.parametrize(("entity", "ops", "message"), [
    ({}, {"producer_byte_rate": 1.0}, "Invalid empty client quota entity"),
    ({"group": "g"}, {"producer_byte_rate": 1.0}, "Unhandled client quota entity type: group"),
    ({"user": ""}, {"producer_byte_rate": 1.0}, "Empty user not supported"),
    ({"client-id": ""}, {"producer_byte_rate": 1.0}, "Empty client-id not supported"),
    ({"ip": ""}, {"connection_creation_rate": 1.0}, "Empty ip not supported"),
    ({"user": "u"}, {"connection_creation_rate": 1.0}, "Invalid configuration key connection_creation_rate"),
    ({"user": "u"}, {"producer_byte_rate": 0.0}, "Quota producer_byte_rate must be greater than 0"),
    ({"user": "u"}, {"request_percentage": -1.5}, "Quota request_percentage must be greater than 0"),
    ({"user": "u"}, {"request_percentage": math.inf}, "Quota request_percentage must be a finite number"),
    ({"user": "u"}, {"producer_byte_rate": math.nan}, "Quota producer_byte_rate must be a finite number"),
    ({"user": "u"}, {"consumer_byte_rate": 1.5}, "consumer_byte_rate cannot be a fractional value."),
    ({"user": "u"}, {"consumer_byte_rate": 1e19}, "Proposed value for consumer_byte_rate is too large for a LONG."),
    # a valid key first does not save the entry: no record of it is written
    ({"client-id": "c"}, {"request_percentage": 5.0, "nope": 1.0}, "Invalid configuration key nope"),
])
def test_each_refusal_and_its_message(entity, ops, message):
    q = Quotas()
    records, answers = q.alter(entry(entity, **ops), entry({"user": "ok"}, producer_byte_rate=10.0))
    assert answers == [(entity, BAD, message), ({"user": "ok"}, Errors.NONE, None)]
    assert records == [rec([("user", "ok")], "producer_byte_rate", 10.0)]


def test_a_fraction_within_a_millionth_and_the_largest_values_are_accepted():
    q = Quotas()
    records, answers = q.alter(entry({"user": "a"}, producer_byte_rate=1000.0000001, request_percentage=1e300),
                               entry({"ip": "1.2.3.4"}, connection_creation_rate=2147483647.0))
    assert [a[1] for a in answers] == [Errors.NONE, Errors.NONE]
    assert sorted(r["Value"] for r in records) == [1000.0000001, 2147483647.0, 1e300]


def test_a_removal_is_not_validated():
    q = Quotas()
    records, answers = q.alter(entry({"user": "u"}, whatever=None))
    assert answers == [({"user": "u"}, Errors.NONE, None)] and records == []


def test_duplicate_keys_and_entities():
    q = Quotas()
    twice = {"Entity": [{"EntityType": "user", "EntityName": "bob"}],
             "Ops": [{"Key": "producer_byte_rate", "Value": 1.0, "Remove": False},
                     {"Key": "producer_byte_rate", "Value": 2.0, "Remove": False}]}
    records, answers = q.alter(entry({"user": "alice"}, producer_byte_rate=1.0), twice,
                               entry({"user": "alice"}, consumer_byte_rate=3.0))
    # a duplicate key marks the entity, which then is told it is a duplicate entity (Kafka's
    # alterClientQuotas overwrites its first message); the second entry of alice is refused, but the
    # records of the first stay in the write
    assert answers == [
        ({"user": "alice"}, BAD, "Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})"),
        ({"user": "bob"}, BAD, "Ignoring duplicate entity ClientQuotaEntity(entries={user=bob})"),
    ]
    assert records == [rec([("user", "alice")], "producer_byte_rate", 1.0)]
    assert q.image.client_quotas == {(("user", "alice"),): {"producer_byte_rate": 1.0}}


def test_an_entity_type_given_twice_takes_the_last_name():
    q = Quotas()
    e = {"Entity": [{"EntityType": "user", "EntityName": "x"}, {"EntityType": "user", "EntityName": "y"}],
         "Ops": [{"Key": "producer_byte_rate", "Value": 7.0, "Remove": False}]}
    records, answers = q.alter(e)
    assert answers == [({"user": "y"}, Errors.NONE, None)]
    assert records == [rec([("user", "y")], "producer_byte_rate", 7.0)]


def test_validate_only_writes_nothing_and_answers_the_same():
    q = Quotas()
    records, answers = q.alter(entry({"user": "u"}, producer_byte_rate=5.0),
                               entry({"user": ""}, producer_byte_rate=5.0), validate_only=True)
    assert records == [] and q.image.client_quotas == {}
    assert answers == [({"user": "u"}, Errors.NONE, None), ({"user": ""}, BAD, "Empty user not supported")]


def test_the_whole_request_refused_answers_every_entry_as_given_with_the_errors_default_message():
    twice = {"Entity": [{"EntityType": "user", "EntityName": "a"}, {"EntityType": "user", "EntityName": "b"}],
             "Ops": []}
    body = {"Entries": [entry({"user": "u"}, producer_byte_rate=5.0), entry({"user": "u"}, producer_byte_rate=6.0),
                        twice]}
    response = alter_client_quotas_response(body, None, ControllerError(Errors.NOT_CONTROLLER, "not me"))  # type: ignore[arg-type]
    message = "This is not the correct controller for this cluster."  # (Kafka's Errors.NOT_CONTROLLER.message())
    assert [(r["ErrorCode"], r["ErrorMessage"], r["Entity"]) for r in response["Entries"]] == [
        (Errors.NOT_CONTROLLER, message, [{"EntityType": "user", "EntityName": "u"}]),
        (Errors.NOT_CONTROLLER, message, [{"EntityType": "user", "EntityName": "u"}]),
        (Errors.NOT_CONTROLLER, message, twice["Entity"])]


def test_a_write_past_ten_thousand_records_is_refused():
    q = Quotas()
    many = [entry({"user": f"u{i}"}, producer_byte_rate=1.0, consumer_byte_rate=1.0) for i in range(5001)]
    with pytest.raises(ControllerError) as e:
        q.alter(*many)
    assert (e.value.code, e.value.message) == (Errors.POLICY_VIOLATION,
                                               "Unable to perform excessively large batch operation.")
    # ten thousand are one write
    records, _answers = q.alter(*many[:5000])
    assert len(records) == 10000


def test_served_by_the_active_controller_committed_before_the_answer(tmp_path):
    voters, dirs = format_dirs(tmp_path, release_version="4.3")
    nodes = [controller(voters, d, i) for i, d in zip(voters, dirs, strict=True)]
    body = {"Entries": [entry({"user": "alice"}, producer_byte_rate=1024.0), entry({"ip": "x"}, nope=1.0)],
            "ValidateOnly": False}
    scram = {"Deletions": [], "Upsertions": [{"Name": "alice", "Mechanism": 1, "Iterations": 4096, "Salt": b"s",
                                              "SaltedPassword": b"k" * 32}]}

    async def main() -> tuple:
        loop = asyncio.get_running_loop()
        async with running(nodes):
            leader = await wait_for(lambda: active_of(nodes), what="an active controller")

            async def rpc(node, api, b):
                return await loop.run_in_executor(None, call_port, node.address[1], api, b)

            answer = await rpc(leader, ApiKey.ALTER_CLIENT_QUOTAS, body)
            quotas = leader.controller.image.client_quotas
            scram_answer = await rpc(leader, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, scram)
            users = set(leader.controller.image.scram)
            follower = next(n for n in nodes if n is not leader)
            elsewhere = await rpc(follower, ApiKey.ALTER_CLIENT_QUOTAS, body)
            empty = await rpc(follower, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {"Deletions": [], "Upsertions": []})
            return answer, quotas, scram_answer, users, elsewhere, empty

    answer, quotas, scram_answer, users, elsewhere, empty = asyncio.run(main())
    assert [(e["ErrorCode"], e["ErrorMessage"]) for e in answer["Entries"]] == \
        [(Errors.NONE, None), (BAD, "x is not a valid IP or resolvable host.")]
    assert quotas == {(("user", "alice"),): {"producer_byte_rate": 1024.0}}
    assert scram_answer["Results"] == [{"User": "alice", "ErrorCode": Errors.NONE, "ErrorMessage": None}]
    assert users == {(1, "alice")}
    assert [e["ErrorCode"] for e in elsewhere["Entries"]] == [Errors.NOT_CONTROLLER] * 2
    # (Kafka's controller answers an empty request at once, active or not)
    assert empty["Results"] == []
