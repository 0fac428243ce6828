"""kraftkit's CreateAcls and DeleteAcls decisions (kraftkit.controller.acls) against Kafka 4.4's own
``AclControlManager`` on the same random cases: every creation's result (error and message, including
the CIDR hosts and the metadata.version they need), the ACLs created, every filter's matching ACLs (the
ANY/MATCH semantics of ``AclBindingFilter``) or its error, the number of removals and of ACLs left.
Kafka's side runs in one JVM (tests/harness/java/AclDecisions.java).

The cases leave out what Kafka refuses before its AclControlManager sees a request (the code 0 of
the request parse; the CLUSTER name and the empty name of ``AclApis``): those are unit tests."""

from __future__ import annotations

import json
import random

import pytest

from kraftkit._core import decode_metadata_record, encode_metadata_record
from kraftkit._kafka import FEATURE_LEVEL
from kraftkit.controller.acls import AclControlManager
from kraftkit.metadata.image import MetadataImage
from kraftkit.metadata.mv_levels import MV_4_3_IV0, MV_4_4_IV1
from kraftkit.protocol.messages import Errors
from tests.harness import jars, tools

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

V = jars.KAFKA_NEWEST
SOURCE = tools.HERE / "java" / "AclDecisions.java"
CASES = 300

# ResourceType, PatternType, AclOperation and AclPermissionType codes, with some Kafka does not know (ANY
# and MATCH, which fail a whole CreateAcls, are put in a few cases only)
RESOURCE_TYPES = [2, 2, 2, 3, 4, 5, 6, 7, 99]
PATTERN_TYPES = [3, 3, 3, 4, 4, 9]
OPERATIONS = [*range(2, 16), 42]
PERMISSIONS = [2, 3, 3, 7]
UNBINDABLE = [("rt", 1), ("pt", 1), ("pt", 2), ("op", 1), ("perm", 1)]
NAMES = ["t", "tt", "t-1", "*", "x"]
PRINCIPALS = ["User:alice", "User:alice", "User:bob", "Group:g", "alice", "User:"]
HOSTS = ["*", "*", "10.0.0.1", "h", "10.0.0.0/8", "0.0.0.0/0", "10.0.0.0/33", "300.1.1.1/8", "1.2.3/4", "1.2.3.4/5/6",
         "fe80::/10", "fe80::/129", "fe80::/x", "fe80::/+64", "zz::/3", "::ffff:1.2.3.4/120", "[fe80::1]/64", "::1.2.3.4/96",
         ""]  # fmt: skip
FILTER_NAMES = [None, None, "t", "tt", "t-1", "t-12", "*", "x", "kafka-cluster"]
FILTER_PRINCIPALS = [None, None, "User:alice", "User:bob", "Group:g"]
FILTER_HOSTS = [None, None, "*", "10.0.0.1", "h"]
FILTER_OPERATIONS = [1, 1, 2, 3, 4, 5, 42]


def make_creation(rng: random.Random, valid: bool) -> dict:
    rt = rng.choice([2, 3, 4, 5, 7] if valid else RESOURCE_TYPES)
    return {
        "rt": rt,
        # (AclApis refuses a CLUSTER not named kafka-cluster before the controller: left out)
        "name": "kafka-cluster" if rt == 4 else rng.choice(NAMES),
        "pt": rng.choice([3, 4] if valid else PATTERN_TYPES),
        "principal": rng.choice(PRINCIPALS[:4] if valid else PRINCIPALS),
        "host": rng.choice(HOSTS[:4] if valid else HOSTS),
        "op": rng.choice(OPERATIONS[:-1] if valid else OPERATIONS),
        "perm": rng.choice([2, 3] if valid else PERMISSIONS),
    }


def make_filter(rng: random.Random) -> dict:
    def often(any_code, others: list):  # the filter's ANY (or None) half the time, so that filters match
        return any_code if rng.random() < 0.5 else rng.choice(others)

    return {
        "rt": often(1, RESOURCE_TYPES),
        "name": often(None, FILTER_NAMES),
        "pt": often(rng.choice([1, 2]), PATTERN_TYPES),
        "principal": often(None, FILTER_PRINCIPALS),
        "host": often(None, FILTER_HOSTS),
        "op": often(1, FILTER_OPERATIONS),
        "perm": often(1, PERMISSIONS),
    }


def make_case(rng: random.Random) -> dict:
    case = {
        "level": rng.choice([MV_4_3_IV0, MV_4_4_IV1, MV_4_4_IV1]),
        "acls": [make_creation(rng, True) for _ in range(rng.randint(0, 12))],
        "create": [make_creation(rng, rng.random() < 0.3) for _ in range(rng.randint(0, 6))],
        "delete": [make_filter(rng) for _ in range(rng.randint(1, 4))],
    }
    if case["create"] and rng.random() < 0.1:
        field, code = rng.choice(UNBINDABLE)
        rng.choice(case["create"])[field] = code
    return case


def creation_body(c: dict) -> dict:
    return {"ResourceType": c["rt"], "ResourceName": c["name"], "ResourcePatternType": c["pt"],
            "Principal": c["principal"], "Host": c["host"], "Operation": c["op"], "PermissionType": c["perm"]}


def result_text(r: dict) -> str:
    if r["ErrorCode"] == Errors.NONE:
        return "NONE"
    message = "null" if r["ErrorMessage"] is None else r["ErrorMessage"]  # (as Java concatenates it)
    return f"{Errors(r['ErrorCode']).name}: {message}"


def acl_fields(r: dict, pattern: str = "PatternType") -> list:
    return [r["ResourceType"], r["ResourceName"], r[pattern], r["Principal"], r["Host"], r["Operation"],
            r["PermissionType"]]


def kraftkit_decisions(case: dict) -> dict:
    image = MetadataImage()
    offset = 0

    def apply(records: list[bytes]) -> None:
        nonlocal offset
        for value in records:
            key, version, data = decode_metadata_record(value)
            image.replay(key, version, data, offset)
            offset += 1

    apply([encode_metadata_record(FEATURE_LEVEL, 0, {"Name": "metadata.version", "FeatureLevel": case["level"]})])
    manager = AclControlManager(random.Random(5))
    records, _ = manager.create_acls(image, {"Creations": [creation_body(c) for c in case["acls"]]})
    apply(records)
    records, results = manager.create_acls(image, {"Creations": [creation_body(c) for c in case["create"]]})
    apply(records)
    out: dict = {"create": [result_text(r) for r in results],
                 "created": [acl_fields(decode_metadata_record(r)[2]) for r in records]}
    filters = [{"ResourceTypeFilter": f["rt"], "ResourceNameFilter": f["name"], "PatternTypeFilter": f["pt"],
                "PrincipalFilter": f["principal"], "HostFilter": f["host"], "Operation": f["op"],
                "PermissionType": f["perm"]} for f in case["delete"]]
    records, results = manager.delete_acls(image, {"Filters": filters})
    apply(records)
    out["delete"] = [
        [acl_fields(m) for m in r["MatchingAcls"]] if r["ErrorCode"] == Errors.NONE else result_text(r)
        for r in results
    ]
    out["removed"] = len(records)
    out["left"] = len(image.acls)
    return out


def normalized(d: dict) -> dict:
    """The order of matching ACLs is a hash order on Kafka's side (a map by random id): sorted."""
    return {**d, "delete": [sorted(x) if isinstance(x, list) else x for x in d["delete"]]}


def test_acl_decisions_match_kafkas_acl_control_manager(tmp_path):
    jars.ensure_kafka(V)
    rng = random.Random(20261125)
    cases = [make_case(rng) for _ in range(CASES)]
    spec = tmp_path / "cases.jsonl"
    spec.write_text("".join(json.dumps(c) + "\n" for c in cases))
    classes = tools.compile_java(V, SOURCE, "acl-decisions")
    if classes is None:
        proc = tools.run_tool(V, SOURCE, [spec], timeout=240)
    else:
        proc = tools.run_tool(V, "AclDecisions", [spec], timeout=240, extra_classpath=[classes])
    theirs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(theirs) == CASES, proc.stderr[-3000:]
    mismatches = [(case, kafka, ours) for case, kafka in zip(cases, theirs, strict=True)
                  if normalized(kafka) != normalized(ours := kraftkit_decisions(case))]
    assert not mismatches, f"{len(mismatches)} of {CASES} differ; first: {mismatches[:2]}"
    # the comparison is not of empties: refusals of each kind, creations, matches and removals happen
    refusals = {r for k in theirs for r in k["create"]}
    for kind in ["NONE", "UNKNOWN_SERVER_ERROR: null", "INVALID_REQUEST: Invalid resourceType UNKNOWN",
                 "INVALID_REQUEST: Invalid patternType UNKNOWN", "INVALID_REQUEST: Invalid operation UNKNOWN",
                 "INVALID_REQUEST: Invalid permissionType UNKNOWN", "INVALID_REQUEST: Could not parse principal",
                 "INVALID_REQUEST: Host pattern cannot be null or empty", "INVALID_REQUEST: Invalid CIDR notation",
                 "UNSUPPORTED_VERSION: CIDR-based ACL host patterns"]:
        assert any(r.startswith(kind) for r in refusals), (kind, refusals)
    assert sum(len(k["created"]) for k in theirs) > CASES // 2
    assert sum(k["removed"] for k in theirs) > CASES // 2
    assert any(isinstance(x, str) for k in theirs for x in k["delete"])
