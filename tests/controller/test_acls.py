"""CreateAcls and DeleteAcls decided by the controller's AclControlManager (kraftkit.controller.acls),
against an image built from records: Kafka 4.4's validation rules and messages, duplicates without
records, ids that no ACL has, AclBindingFilter's ANY/MATCH semantics, the records and the per-filter
results, the bound of records per request; and the same through three in-process controllers, directly
and inside an Envelope."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from kraftkit._core import decode_metadata_record, encode_metadata_record, encode_request
from kraftkit._kafka import ACCESS_CONTROL_ENTRY, FEATURE_LEVEL, REMOVE_ACCESS_CONTROL_ENTRY
from kraftkit.controller.acls import (
    MAX_ACL_COMPARISONS,
    MAX_RECORDS_PER_USER_OP,
    AclControlManager,
    create_acls_response,
    delete_acls_response,
)
from kraftkit.controller.cluster import ControllerError
from kraftkit.metadata.image import MetadataImage
from kraftkit.metadata.mv_levels import MV_4_3_IV0, MV_4_4_IV1
from kraftkit.protocol.messages import ApiKey, Errors, decode_response
from tests.raft._cluster import wait_for

from ._nodes import make_controllers, running
from .test_registration import call, quiet_leader
from .test_topics_live import envelope

# the codes of Kafka's enums (ResourceType, PatternType, AclOperation, AclPermissionType)
ANY = 1
TOPIC, GROUP, CLUSTER = 2, 3, 4
MATCH, LITERAL, PREFIXED = 2, 3, 4
ALL, READ, WRITE = 2, 3, 4
DENY, ALLOW = 2, 3


class Image:
    """An image at ``mv`` and a manager whose ids come from ``rng``."""

    def __init__(self, mv: int = MV_4_4_IV1, rng: random.Random | None = None) -> None:
        self.image = MetadataImage()
        self.offset = 0
        self.apply([encode_metadata_record(FEATURE_LEVEL, 0, {"Name": "metadata.version", "FeatureLevel": mv})])
        self.acls = AclControlManager(rng or random.Random(3))

    def apply(self, records: list[bytes]) -> None:
        for value in records:
            key, version, data = decode_metadata_record(value)
            self.image.replay(key, version, data, self.offset)
            self.offset += 1

    def create(self, *creations: dict, commit: bool = True) -> tuple[list[tuple[int, int, dict]], list[dict]]:
        records, results = self.acls.create_acls(self.image, {"Creations": list(creations)})
        if commit:
            self.apply(records)
        return [decode_metadata_record(r) for r in records], results

    def delete(self, *filters: dict, commit: bool = True) -> tuple[list[tuple[int, int, dict]], list[dict]]:
        records, results = self.acls.delete_acls(self.image, {"Filters": list(filters)})
        if commit:
            self.apply(records)
        return [decode_metadata_record(r) for r in records], results


def creation(rt: int = TOPIC, name: str = "t", pt: int = LITERAL, principal: str = "User:alice", host: str = "*",
             op: int = WRITE, perm: int = ALLOW) -> dict:
    return {"ResourceType": rt, "ResourceName": name, "ResourcePatternType": pt, "Principal": principal,
            "Host": host, "Operation": op, "PermissionType": perm}


def acl_filter(rt: int = ANY, name: str | None = None, pt: int = ANY, principal: str | None = None,
               host: str | None = None, op: int = ANY, perm: int = ANY) -> dict:
    return {"ResourceTypeFilter": rt, "ResourceNameFilter": name, "PatternTypeFilter": pt,
            "PrincipalFilter": principal, "HostFilter": host, "Operation": op, "PermissionType": perm}


def as_record_fields(c: dict) -> dict:
    """A creation's fields as an AccessControlEntryRecord names them."""
    return {"ResourceType": c["ResourceType"], "ResourceName": c["ResourceName"],
            "PatternType": c["ResourcePatternType"], "Principal": c["Principal"], "Host": c["Host"],
            "Operation": c["Operation"], "PermissionType": c["PermissionType"]}


OK = {"ErrorCode": Errors.NONE, "ErrorMessage": ""}


# ---------------------------------------------------------------------------------------------- CreateAcls
def test_a_creation_is_one_record_with_its_fields_and_a_random_id_replayed_into_the_image():
    img = Image()
    c = creation()
    records, results = img.create(c)
    assert results == [OK]
    ((key, version, rec),) = records
    assert (key, version) == (ACCESS_CONTROL_ENTRY, 0)
    assert {k: v for k, v in rec.items() if k != "Id"} == as_record_fields(c)
    assert isinstance(rec["Id"], uuid.UUID) and rec["Id"].version == 4
    assert img.image.acls == {rec["Id"]: rec}


def test_an_existing_acl_and_a_duplicate_in_the_request_succeed_without_a_record():
    img = Image()
    img.create(creation())
    records, results = img.create(creation())
    assert (records, results) == ([], [OK])
    # twice in one request: one record, two successes; another host is another ACL
    records, results = img.create(creation(name="u"), creation(name="u"), creation(name="u", host="10.1.1.1"))
    assert results == [OK, OK, OK]
    assert [(r["ResourceName"], r["Host"]) for _k, _v, r in records] == [("u", "*"), ("u", "10.1.1.1")]
    assert len(img.image.acls) == 3


class Replay(random.Random):
    """A random source whose 128-bit draws are given (then a seeded sequence)."""

    def __init__(self, draws: list[int]) -> None:
        super().__init__(1)
        self.draws = list(draws)

    def getrandbits(self, k: int) -> int:
        return self.draws.pop(0) if self.draws else super().getrandbits(k)


def test_a_new_id_collides_with_no_acl_of_the_image_nor_of_the_request():
    first = uuid.UUID("6f1c2e44-8a0b-4c1d-9e2f-3a4b5c6d7e8f")
    img = Image(rng=Replay([first.int]))
    ((_k, _v, rec),) = img.create(creation())[0]
    assert rec["Id"] == first
    # the next draws repeat that id (taken by the image), then repeat a new one within the request
    second = uuid.UUID("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
    img.acls.random = Replay([first.int, second.int, second.int, first.int])
    records, _ = img.create(creation(name="a"), creation(name="b"))
    ids = [r["Id"] for _k, _v, r in records]
    assert ids[0] == second and ids[1] not in (first, second)
    assert len(img.image.acls) == 3


CIDR_REFUSED = "CIDR-based ACL host patterns require metadata version 4.4-IV1 or higher."


@pytest.mark.parametrize(("fields", "code", "message"), [
    # Kafka's AclApis, before the controller
    ({"rt": CLUSTER, "name": "c"}, Errors.INVALID_REQUEST,
     "The only valid name for the CLUSTER resource is kafka-cluster"),
    ({"name": ""}, Errors.INVALID_REQUEST, "Invalid empty resource name"),
    # AclControlManager.validateNewAcl, in its order
    ({"rt": 99}, Errors.INVALID_REQUEST, "Invalid resourceType UNKNOWN"),
    ({"rt": 99, "pt": 9}, Errors.INVALID_REQUEST, "Invalid resourceType UNKNOWN"),
    ({"pt": 9}, Errors.INVALID_REQUEST, "Invalid patternType UNKNOWN"),
    ({"op": 42}, Errors.INVALID_REQUEST, "Invalid operation UNKNOWN"),
    ({"op": 42, "perm": 7}, Errors.INVALID_REQUEST, "Invalid operation UNKNOWN"),
    ({"perm": 7}, Errors.INVALID_REQUEST, "Invalid permissionType UNKNOWN"),
    ({"principal": "alice"}, Errors.INVALID_REQUEST,
     "Could not parse principal from `alice` (no colon is present separating the principal type from the "
     "principal name)"),
    ({"host": ""}, Errors.INVALID_REQUEST, "Host pattern cannot be null or empty"),
    # CIDR hosts (4.4-IV1)
    ({"host": "10.0.0.0/33"}, Errors.INVALID_REQUEST, "Invalid CIDR notation '10.0.0.0/33': Value [33] not in range [0,32]"),
    ({"host": "300.0.0.0/8"}, Errors.INVALID_REQUEST,
     "Invalid CIDR notation '300.0.0.0/8': Value [300] not in range [0,255]"),
    ({"host": "10.0.0/8"}, Errors.INVALID_REQUEST, "Invalid CIDR notation '10.0.0/8': Could not parse [10.0.0/8]"),
    ({"host": "10.0.0.0/8/8"}, Errors.INVALID_REQUEST,
     "Invalid CIDR notation '10.0.0.0/8/8': Could not parse [10.0.0.0/8/8]"),
    ({"host": "fe80::/129"}, Errors.INVALID_REQUEST,
     "Invalid CIDR notation 'fe80::/129': Could not parse [fe80::/129] - prefix length must be between 0 and 128"),
    ({"host": "fe80::/x"}, Errors.INVALID_REQUEST,
     "Invalid CIDR notation 'fe80::/x': Could not parse [fe80::/x] - invalid prefix length"),
    ({"host": "zz::/10"}, Errors.INVALID_REQUEST, "Invalid CIDR notation 'zz::/10': Could not parse [zz::]"),
    ({"host": "::ffff:1.2.3.4/120"}, Errors.INVALID_REQUEST,
     "Invalid CIDR notation '::ffff:1.2.3.4/120': Could not parse [::ffff:1.2.3.4] - not an IPv6 address"),
])  # fmt: skip
def test_a_refused_creation_has_kafkas_error_and_writes_nothing(fields, code, message):
    img = Image()
    records, results = img.create(creation(**fields))
    assert (records, results) == ([], [{"ErrorCode": code, "ErrorMessage": message}])


@pytest.mark.parametrize("fields", [
    {"rt": CLUSTER, "name": "kafka-cluster", "op": ALL},
    {"rt": GROUP, "pt": PREFIXED, "perm": DENY},
    {"host": "somehost"},  # no '/': any host string
    {"host": "10.0.0.0/8"},
    {"host": "0.0.0.0/0"},
    {"host": "fe80::/10"},
    {"host": "[fe80::1]/128"},
    {"principal": "User:"},  # a colon is all Kafka's controller asks of a principal
])  # fmt: skip
def test_accepted_creations(fields):
    img = Image()
    records, results = img.create(creation(**fields))
    assert results == [OK] and len(records) == 1


def test_a_cidr_host_below_4_4_iv1_is_unsupported_version():
    img = Image(mv=MV_4_3_IV0)
    records, results = img.create(creation(host="10.0.0.0/8"), creation(host="10.0.0.1"))
    assert results == [{"ErrorCode": Errors.UNSUPPORTED_VERSION, "ErrorMessage": CIDR_REFUSED}, OK]
    assert [r["Host"] for _k, _v, r in records] == ["10.0.0.1"]


@pytest.mark.parametrize("fields", [{"rt": ANY}, {"pt": ANY}, {"pt": MATCH}, {"op": ANY}, {"perm": ANY}])
def test_a_creation_kafka_cannot_bind_fails_the_whole_request(fields):
    """Kafka's AclApis makes an AclBinding of each creation first: ResourcePattern and AccessControlEntry
    throw IllegalArgumentException for these, and the request's error response has it for every creation."""
    img = Image()
    records, results = img.create(creation(name="ok"), creation(**fields), creation(name=""))
    assert records == [] and results == [{"ErrorCode": Errors.UNKNOWN_SERVER_ERROR, "ErrorMessage": None}] * 3
    answer = create_acls_response({"Creations": [creation(**fields)]}, None, ControllerError(Errors.NOT_CONTROLLER, ""))
    assert answer["Results"] == [{"ErrorCode": Errors.UNKNOWN_SERVER_ERROR, "ErrorMessage": None}]


@pytest.mark.parametrize("field", ["ResourceType", "ResourcePatternType", "Operation", "PermissionType"])
def test_an_unknown_code_refuses_the_whole_request_as_its_parse_would(field):
    img = Image()
    c = creation()
    c[field] = 0
    records, results = img.create(creation(name="ok"), c)
    assert records == [] and [r["ErrorCode"] for r in results] == [Errors.INVALID_REQUEST] * 2
    assert all(r["ErrorMessage"].startswith("CreatableAcls contain unknown elements: creation 1: ") for r in results)
    answer = create_acls_response({"Creations": [creation(name="ok"), c]}, None, ControllerError(Errors.NOT_CONTROLLER, ""))
    assert answer["Results"] == results


def test_refusals_do_not_stop_the_other_creations_and_results_keep_the_order():
    img = Image()
    records, results = img.create(creation(name="a"), creation(principal="bad"), creation(name="b"))
    assert [r["ErrorCode"] for r in results] == [Errors.NONE, Errors.INVALID_REQUEST, Errors.NONE]
    assert [r["ResourceName"] for _k, _v, r in records] == ["a", "b"]


def test_more_than_the_bound_of_new_acls_refuses_the_whole_request():
    img = Image()
    many = [creation(name=f"t{i}") for i in range(MAX_RECORDS_PER_USER_OP)]
    records, results = img.acls.create_acls(img.image, {"Creations": many})
    assert len(records) == MAX_RECORDS_PER_USER_OP and all(r == OK for r in results)
    # duplicates and refusals do not count; one more new ACL does
    more = [*many, creation(name="t0"), creation(name=""), creation(name="x")]
    with pytest.raises(ControllerError) as e:
        img.acls.create_acls(img.image, {"Creations": more})
    assert (e.value.code, e.value.message) == (Errors.POLICY_VIOLATION,
                                               "Unable to perform excessively large batch operation.")
    # the answer: every creation the controller saw has the error, those refused before keep theirs
    body = {"Creations": [creation(name="a"), creation(name=""), creation(rt=99)]}
    answer = create_acls_response(body, None, e.value)
    violation = {"ErrorCode": Errors.POLICY_VIOLATION, "ErrorMessage": e.value.message}
    assert answer == {"ThrottleTimeMs": 0, "Results": [
        violation, {"ErrorCode": Errors.INVALID_REQUEST, "ErrorMessage": "Invalid empty resource name"}, violation]}


# ---------------------------------------------------------------------------------------------- DeleteAcls
ACLS = {
    "A1": creation(TOPIC, "foo", LITERAL, "User:alice", "*", WRITE, ALLOW),
    "A2": creation(TOPIC, "*", LITERAL, "User:bob", "*", READ, ALLOW),
    "A3": creation(TOPIC, "fo", PREFIXED, "User:alice", "10.0.0.1", READ, DENY),
    "A4": creation(GROUP, "foo", LITERAL, "User:alice", "*", READ, ALLOW),
    "A5": creation(TOPIC, "bar", PREFIXED, "User:carol", "*", ALL, ALLOW),
}


def key_of(r: dict) -> tuple:
    """An ACL record's fields but its id, in the order of ``as_record_fields``."""
    return tuple(r[k] for k in ("ResourceType", "ResourceName", "PatternType", "Principal", "Host", "Operation",
                                "PermissionType"))


def five_acls() -> tuple[Image, dict[tuple, str]]:
    img = Image()
    _records, results = img.create(*ACLS.values())
    assert all(r == OK for r in results)
    by_fields = {tuple(as_record_fields(c).values()): name for name, c in ACLS.items()}
    return img, by_fields


def matched(result: dict, by_fields: dict[tuple, str]) -> list[str]:
    names = []
    for m in result["MatchingAcls"]:
        assert (m["ErrorCode"], m["ErrorMessage"]) == (Errors.NONE, None)
        names.append(by_fields[(m["ResourceType"], m["ResourceName"], m["PatternType"], m["Principal"], m["Host"],
                                m["Operation"], m["PermissionType"])])
    return sorted(names)


@pytest.mark.parametrize(("flt", "expected"), [
    (acl_filter(), ["A1", "A2", "A3", "A4", "A5"]),
    (acl_filter(TOPIC), ["A1", "A2", "A3", "A5"]),
    (acl_filter(TOPIC, "foo", LITERAL), ["A1"]),
    # ANY and a pattern type compare names exactly
    (acl_filter(TOPIC, "foo", ANY), ["A1"]),
    (acl_filter(TOPIC, "fo", PREFIXED), ["A3"]),
    (acl_filter(TOPIC, "foo", PREFIXED), []),
    (acl_filter(TOPIC, None, PREFIXED), ["A3", "A5"]),
    # MATCH: the literal name, the literal wildcard, and the prefixes of the name
    (acl_filter(TOPIC, "foo", MATCH), ["A1", "A2", "A3"]),
    (acl_filter(ANY, "foo", MATCH), ["A1", "A2", "A3", "A4"]),
    (acl_filter(TOPIC, "*", MATCH), ["A2"]),
    (acl_filter(TOPIC, "barn", MATCH), ["A2", "A5"]),
    (acl_filter(TOPIC, None, MATCH), ["A1", "A2", "A3", "A5"]),
    # the entry filter: principal and host exactly, ALL is an operation (not ANY)
    (acl_filter(principal="User:alice"), ["A1", "A3", "A4"]),
    (acl_filter(principal="alice"), []),
    (acl_filter(host="10.0.0.1"), ["A3"]),
    (acl_filter(op=READ), ["A2", "A3", "A4"]),
    (acl_filter(op=ALL), ["A5"]),
    (acl_filter(perm=DENY), ["A3"]),
    (acl_filter(GROUP, "foo", LITERAL, "User:alice", "*", READ, ALLOW), ["A4"]),
    (acl_filter(GROUP, "foo", LITERAL, "User:alice", "*", READ, DENY), []),
])  # fmt: skip
def test_filter_semantics(flt, expected):
    img, by_fields = five_acls()
    ids = {by_fields[key_of(r)]: i for i, r in img.image.acls.items()}
    records, (result,) = img.delete(flt)
    assert (result["ErrorCode"], result["ErrorMessage"]) == (Errors.NONE, None)
    assert matched(result, by_fields) == expected
    assert sorted(r["Id"] for _k, _v, r in records) == sorted(ids[n] for n in expected)
    assert all((k, v) == (REMOVE_ACCESS_CONTROL_ENTRY, 0) for k, v, _r in records)
    assert sorted(by_fields[key_of(r)] for r in img.image.acls.values()) == \
        sorted(set(ACLS) - set(expected))


def test_an_acl_matched_by_two_filters_is_removed_once_and_listed_by_both():
    img, by_fields = five_acls()
    records, results = img.delete(acl_filter(op=READ), acl_filter(principal="User:alice"), acl_filter(rt=GROUP))
    assert [matched(r, by_fields) for r in results] == [["A2", "A3", "A4"], ["A1", "A3", "A4"], ["A4"]]
    assert len(records) == 4 and len({r["Id"] for _k, _v, r in records}) == 4
    assert [by_fields[key_of(r)] for r in img.image.acls.values()] == ["A5"]


@pytest.mark.parametrize(("fields", "message"), [
    ({"rt": 99}, "Unknown patternFilter."),
    ({"pt": 9}, "Unknown patternFilter."),
    ({"op": 99}, "Unknown entryFilter."),
    ({"perm": 9}, "Unknown entryFilter."),
])  # fmt: skip
def test_an_unknown_filter_is_invalid_request_and_the_others_go_on(fields, message):
    img, by_fields = five_acls()
    records, results = img.delete(acl_filter(**fields), acl_filter(perm=DENY))
    assert results[0] == {"ErrorCode": Errors.INVALID_REQUEST, "ErrorMessage": message, "MatchingAcls": []}
    assert matched(results[1], by_fields) == ["A3"] and len(records) == 1


@pytest.mark.parametrize("field", ["ResourceTypeFilter", "PatternTypeFilter", "Operation", "PermissionType"])
def test_a_filter_with_an_unknown_code_refuses_the_whole_request_as_its_parse_would(field):
    img, _ = five_acls()
    f = acl_filter()
    f[field] = 0
    records, results = img.delete(acl_filter(), f)
    assert records == [] and len(img.image.acls) == len(ACLS)
    assert [(r["ErrorCode"], r["MatchingAcls"]) for r in results] == [(Errors.INVALID_REQUEST, [])] * 2
    assert all(r["ErrorMessage"].startswith(f"Filters contain UNKNOWN elements: filter 1: {field}") for r in results)
    # also on a controller that is not the active one (as Kafka's parse, before anything else)
    answer = delete_acls_response({"Filters": [acl_filter(), f]}, None, ControllerError(Errors.NOT_CONTROLLER, "no"))
    assert answer["FilterResults"] == results
    answer = delete_acls_response({"Filters": [acl_filter()]}, None, ControllerError(Errors.NOT_CONTROLLER, "no"))
    assert answer["FilterResults"] == [{"ErrorCode": Errors.NOT_CONTROLLER, "ErrorMessage": "no", "MatchingAcls": []}]


def test_no_match_and_no_filter():
    img, _ = five_acls()
    assert img.delete(acl_filter(TOPIC, "nothing", LITERAL)) == \
        ([], [{"ErrorCode": Errors.NONE, "ErrorMessage": None, "MatchingAcls": []}])
    assert img.delete() == ([], [])


def test_more_matches_than_the_bound_refuse_the_whole_request():
    img = Image()
    img.create(*[creation(name=f"t{i}") for i in range(MAX_RECORDS_PER_USER_OP)])
    # exactly the bound: one request
    records, (result,) = img.delete(acl_filter(), commit=False)
    assert len(records) == len(result["MatchingAcls"]) == MAX_RECORDS_PER_USER_OP
    # Kafka checks the bound before each match, also one already removed by an earlier filter
    with pytest.raises(ControllerError) as e:
        img.acls.delete_acls(img.image, {"Filters": [acl_filter(), acl_filter(TOPIC, "t0", LITERAL)]})
    too_many = (Errors.INVALID_REQUEST,
                f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete operation.")
    assert (e.value.code, e.value.message) == too_many
    img.create(creation(name="last"))
    with pytest.raises(ControllerError) as e:
        img.acls.delete_acls(img.image, {"Filters": [acl_filter(TOPIC, "last", LITERAL), acl_filter()]})
    assert (e.value.code, e.value.message) == too_many
    answer = delete_acls_response({"Filters": [acl_filter(), acl_filter()]}, None, e.value)
    assert answer["FilterResults"] == [{"ErrorCode": Errors.INVALID_REQUEST, "ErrorMessage": e.value.message,
                                        "MatchingAcls": []}] * 2
    assert len(img.image.acls) == MAX_RECORDS_PER_USER_OP + 1


def test_the_work_of_one_delete_is_bounded():
    """kraftkit's bound (not Kafka's): filters compared with ACLs, a repeated filter once, a named
    filter only with the ACLs its name can match."""
    img = Image()
    n = 1001
    img.create(*[creation(name=f"n{i}", principal=f"User:u{i}") for i in range(n)])
    # distinct filters without a name: each is compared with every ACL, more than the bound in all
    filters = [acl_filter(principal=f"User:x{i}") for i in range(MAX_ACL_COMPARISONS // n + 1)]
    with pytest.raises(ControllerError) as e:
        img.acls.delete_acls(img.image, {"Filters": filters})
    assert e.value.code == Errors.INVALID_REQUEST
    assert e.value.message == (f"DeleteAcls of {len(filters)} filters against {n} ACLs: more than "
                               f"{MAX_ACL_COMPARISONS} comparisons of a filter with an ACL (kraftkit's bound per request)")
    # the same filter again and again: compared once, each answered alike
    records, results = img.delete(*[acl_filter(principal="User:nobody")] * (2 * MAX_ACL_COMPARISONS // n))
    assert records == [] and all(r["MatchingAcls"] == [] and r["ErrorCode"] == Errors.NONE for r in results)
    # named filters: compared with the ACLs of that name only (and MATCH with the wildcard and prefixes)
    named = [acl_filter(TOPIC, f"n{i}", LITERAL, principal="User:nobody") for i in range(2 * n)]
    records, results = img.delete(*named, acl_filter(TOPIC, "n7", MATCH), acl_filter(TOPIC, "n8", ANY))
    assert all(r["MatchingAcls"] == [] for r in results[:-2])
    assert [[m["ResourceName"] for m in r["MatchingAcls"]] for r in results[-2:]] == [["n7"], ["n8"]]
    assert len(records) == 2 and len(img.image.acls) == n - 2


# ---------------------------------------------------------------------------------------------- live
def acl_batches(node) -> list[list[tuple[int, dict]]]:
    """The committed batches holding ACL records: (api key, fields) of each of their records."""
    out = []
    for batch in node.committed_batches(0):
        if batch.is_control:
            continue
        recs = [decode_metadata_record(r.value) for r in batch.records()]
        if any(k in (ACCESS_CONTROL_ENTRY, REMOVE_ACCESS_CONTROL_ENTRY) for k, _v, _d in recs):
            out.append([(k, d) for k, _v, d in recs])
    return out


@pytest.mark.timeout(120)
def test_create_and_delete_acls_direct_and_forwarded_on_three_controllers(tmp_path):
    async def main():
        nodes = make_controllers(tmp_path, release_version="4.3")
        async with running(nodes):
            leader = await quiet_leader(nodes)
            follower = next(n for n in nodes if n is not leader)

            # direct: one batch of the new ACLs, committed before the answer; a refusal writes nothing
            body = {"Creations": [creation(name="t"), creation(name="t"), creation(principal="alice"),
                                  creation(rt=GROUP, name="g", op=READ)]}
            got = await call(leader, ApiKey.CREATE_ACLS, body)
            assert [r["ErrorCode"] for r in got["Results"]] == \
                [Errors.NONE, Errors.NONE, Errors.INVALID_REQUEST, Errors.NONE]
            (batch,) = acl_batches(leader)
            assert [(k, d["ResourceName"]) for k, d in batch] == [(ACCESS_CONTROL_ENTRY, "t"),
                                                                  (ACCESS_CONTROL_ENTRY, "g")]
            assert sorted(leader.controller.image.acls) == sorted(d["Id"] for _k, d in batch)

            # forwarded inside an Envelope: the answer, with its response header, in ResponseData
            inner = encode_request(ApiKey.DELETE_ACLS, 3, 77, "broker-100", {"Filters": [acl_filter(rt=TOPIC)]})
            env = await call(leader, ApiKey.ENVELOPE, envelope(inner))
            assert env["ErrorCode"] == Errors.NONE
            corr, answer = decode_response(ApiKey.DELETE_ACLS, 3, env["ResponseData"])
            assert corr == 77
            ((_k, t_acl), (_k2, g_acl)) = batch
            (result,) = answer["FilterResults"]
            assert (result["ErrorCode"], result["ErrorMessage"]) == (Errors.NONE, None)
            assert result["MatchingAcls"] == [{
                "ErrorCode": 0, "ErrorMessage": None, "ResourceType": TOPIC, "ResourceName": "t",
                "PatternType": LITERAL, "Principal": "User:alice", "Host": "*", "Operation": WRITE,
                "PermissionType": ALLOW}]
            removed = acl_batches(leader)[1]
            assert removed == [(REMOVE_ACCESS_CONTROL_ENTRY, {"Id": t_acl["Id"]})]
            assert list(leader.controller.image.acls) == [g_acl["Id"]]

            # a follower: NOT_CONTROLLER for every creation directly, at the envelope level when forwarded
            got = await call(follower, ApiKey.CREATE_ACLS, {"Creations": [creation(name="f"), creation(name="")]})
            assert [r["ErrorCode"] for r in got["Results"]] == [Errors.NOT_CONTROLLER, Errors.INVALID_REQUEST]
            got = await call(follower, ApiKey.DELETE_ACLS, {"Filters": [acl_filter()]})
            assert [r["ErrorCode"] for r in got["FilterResults"]] == [Errors.NOT_CONTROLLER]
            inner = encode_request(ApiKey.CREATE_ACLS, 3, 1, "broker-100", {"Creations": [creation(name="f")]})
            env = await call(follower, ApiKey.ENVELOPE, envelope(inner))
            assert env == {"ResponseData": None, "ErrorCode": Errors.NOT_CONTROLLER}

            # every node replays the committed ACLs
            await wait_for(lambda: all(list(n.controller.image.acls) == [g_acl["Id"]] for n in nodes),
                           what="the ACLs on every node")
    asyncio.run(main())
