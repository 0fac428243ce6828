"""``AclControlManager``: CreateAcls and DeleteAcls decided as Kafka 4.4's controller decides them.

Kafka's controller changes ACLs only through the ``StandardAuthorizer`` configured on it
(``authorizer.class.name``; without one CreateAcls and DeleteAcls are SECURITY_DISABLED). kraftkit's
controller has no authorizer: it always takes them, as a Kafka controller with a ``StandardAuthorizer``
does, but it authorizes nobody: the principal of the request (or of the Envelope that forwarded it)
is not checked for ALTER on the cluster. The brokers' own ``StandardAuthorizer`` enforces the ACLs
the controller committed, from the metadata log.

**CreateAcls.** A creation Kafka cannot make an ``AclBinding`` of (resource type ANY, pattern type
ANY or MATCH, operation or permission type ANY) fails the whole request, as in Kafka's ``AclApis``:
every creation UNKNOWN_SERVER_ERROR without a message, nothing written. Otherwise each creation is
checked as ``AclApis`` does first (a CLUSTER resource must be named ``kafka-cluster``; the name must
not be empty), then as the controller's ``AclControlManager`` does, in this order: the resource type
(a code Kafka does not know is UNKNOWN, refused), the pattern type (LITERAL or PREFIXED), the
operation, the permission type (ALLOW or DENY), the principal (``Type:Name``: a colon), the host (not
empty; ``*`` or any string without ``/``; a CIDR ``address/prefix`` only from metadata.version
4.4-IV1, and it must parse as Kafka's ``CidrUtils`` parses it). A refused creation has INVALID_REQUEST
(UNSUPPORTED_VERSION for a CIDR host below 4.4-IV1) with Kafka's message; the others succeed. An ACL
equal in every field to one in the image, or to one earlier in the request, succeeds without a
record; each other is an ``AccessControlEntryRecord`` with a random id that no ACL has. More than
10000 records refuse the whole request (POLICY_VIOLATION, every creation that passed ``AclApis``).

**DeleteAcls.** Each filter (Kafka's ``AclBindingFilter``) must be known (its resource and pattern
types, its operation and permission type: codes Kafka knows, UNKNOWN refused: INVALID_REQUEST). It
matches an ACL when: its resource type is ANY or the ACL's; its pattern type is ANY, MATCH or the
ACL's; with a name, ANY or the ACL's pattern type compares names exactly, while MATCH also takes a
LITERAL ``*`` ACL and a PREFIXED ACL whose name begins the filter's; a principal or host given must be
equal; an operation or permission type other than ANY must be equal. Every matching ACL gets a
``RemoveAccessControlEntryRecord`` (one per ACL, however many filters match it) and is listed in the
filter's result with its fields. More than 10000 records refuse the whole request (INVALID_REQUEST).

**Differences.** Kafka refuses a CreateAcls or DeleteAcls carrying the code 0 (UNKNOWN) for a type,
an operation or a permission when it parses the request (it closes the connection, or answers a
forwarded one with an INVALID_REQUEST Envelope); kraftkit answers it, every creation or filter with
INVALID_REQUEST and the reason, and writes nothing (on any controller node, active or not). And it
bounds the work of one DeleteAcls (a filter given again is compared once; a filter with a name only
with the ACLs its name can match): more than ``MAX_ACL_COMPARISONS`` comparisons of a filter with an
ACL and matches listed refuse the whole request (INVALID_REQUEST, saying so), where Kafka goes on.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import IPv6Address
from typing import Any

from kraftkit._core import encode_metadata_record
from kraftkit._kafka import ACCESS_CONTROL_ENTRY, REMOVE_ACCESS_CONTROL_ENTRY
from kraftkit.controller.cluster import ControllerError
from kraftkit.features.registry import registry
from kraftkit.metadata.image import MetadataImage, uuid_text
from kraftkit.protocol import types as t
from kraftkit.protocol.messages import Errors

__all__ = [
    "MAX_ACL_COMPARISONS",
    "MAX_RECORDS_PER_USER_OP",
    "AclControlManager",
    "create_acls_response",
    "delete_acls_response",
]

#: Kafka's ``QuorumController.MAX_RECORDS_PER_USER_OP``
MAX_RECORDS_PER_USER_OP = 10000
#: kraftkit's bound of the work of one DeleteAcls: comparisons of a filter with an ACL, and matches listed
MAX_ACL_COMPARISONS = 1_000_000
#: Kafka's ``Resource.CLUSTER_NAME``
CLUSTER_NAME = "kafka-cluster"

#: the codes of Kafka's enums (``fromCode`` of any other code is UNKNOWN)
RESOURCE_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                  6: "DELEGATION_TOKEN", 7: "USER"}  # fmt: skip
PATTERN_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
OPERATIONS = {0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER",
              8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE",
              13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS", 15: "TWO_PHASE_COMMIT"}  # fmt: skip
PERMISSION_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}
UNKNOWN, ANY = 0, 1
CLUSTER = 4
MATCH, LITERAL, PREFIXED = 2, 3, 4
DENY, ALLOW = 2, 3
#: Kafka's ``ResourcePattern.WILDCARD_RESOURCE``
WILDCARD = "*"

_IPV4_CIDR = re.compile(r"([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})/([0-9]{1,2})")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_INT_MAX = 2**31 - 1


def _known(codes: Mapping[int, str], code: int) -> int:
    """Kafka's ``fromCode``: the code, or UNKNOWN (0) for one the enum does not have."""
    return code if code in codes else UNKNOWN


@dataclass(frozen=True)
class Acl:
    """Kafka's ``StandardAcl``: the fields of an ACL, equal when all are."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    @classmethod
    def of_record(cls, r: Mapping[str, Any]) -> Acl:
        return cls(r["ResourceType"], r["ResourceName"], r["PatternType"], r["Principal"], r["Host"],
                   r["Operation"], r["PermissionType"])  # fmt: skip

    @classmethod
    def of_creation(cls, c: t.CreateAclsRequestAclCreation) -> Acl:
        return cls(
            _known(RESOURCE_TYPES, c.get("ResourceType", 0)),
            c.get("ResourceName") or "",
            _known(PATTERN_TYPES, c.get("ResourcePatternType", LITERAL)),
            c.get("Principal") or "",
            c.get("Host") or "",
            _known(OPERATIONS, c.get("Operation", 0)),
            _known(PERMISSION_TYPES, c.get("PermissionType", 0)),
        )

    def record(self, acl_id: uuid.UUID) -> dict[str, Any]:
        return {"Id": acl_id, "ResourceType": self.resource_type, "ResourceName": self.resource_name,
                "PatternType": self.pattern_type, "Principal": self.principal, "Host": self.host,
                "Operation": self.operation, "PermissionType": self.permission_type}  # fmt: skip

    def matching(self) -> t.DeleteAclsResponseDeleteAclsFilterResultDeleteAclsMatchingAcl:
        """The ACL as DeleteAcls lists it (Kafka's ``DeleteAclsResponse.matchingAcl``: no error, a null message)."""
        return {"ErrorCode": Errors.NONE, "ErrorMessage": None, "ResourceType": self.resource_type,
                "ResourceName": self.resource_name, "PatternType": self.pattern_type, "Principal": self.principal,
                "Host": self.host, "Operation": self.operation, "PermissionType": self.permission_type}  # fmt: skip


@dataclass(frozen=True)
class AclFilter:
    """Kafka's ``AclBindingFilter`` (a ``ResourcePatternFilter`` and an ``AccessControlEntryFilter``)."""

    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    @classmethod
    def of(cls, f: t.DeleteAclsRequestDeleteAclsFilter) -> AclFilter:
        return cls(
            _known(RESOURCE_TYPES, f.get("ResourceTypeFilter", 0)),
            f.get("ResourceNameFilter"),
            _known(PATTERN_TYPES, f.get("PatternTypeFilter", LITERAL)),
            f.get("PrincipalFilter"),
            f.get("HostFilter"),
            _known(OPERATIONS, f.get("Operation", 0)),
            _known(PERMISSION_TYPES, f.get("PermissionType", 0)),
        )

    def check(self) -> None:
        """Kafka's ``AclControlManager.validateFilter``."""
        if self.resource_type == UNKNOWN or self.pattern_type == UNKNOWN:
            raise ControllerError(Errors.INVALID_REQUEST, "Unknown patternFilter.")
        if self.operation == UNKNOWN or self.permission_type == UNKNOWN:
            raise ControllerError(Errors.INVALID_REQUEST, "Unknown entryFilter.")

    def matches(self, acl: Acl) -> bool:
        if self.resource_type != ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (ANY, MATCH) and self.pattern_type != acl.pattern_type:
            return False
        if not self._name_matches(acl):
            return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != ANY and self.operation != acl.operation:
            return False
        return self.permission_type == ANY or self.permission_type == acl.permission_type

    def _name_matches(self, acl: Acl) -> bool:
        if self.name is None:
            return True
        if self.pattern_type in (ANY, acl.pattern_type):
            return self.name == acl.resource_name
        # a MATCH filter against a LITERAL or PREFIXED ACL
        if acl.pattern_type == LITERAL:
            return self.name == acl.resource_name or acl.resource_name == WILDCARD
        if acl.pattern_type == PREFIXED:
            return self.name.startswith(acl.resource_name)
        # (Kafka throws IllegalArgumentException: the filter's result is UNKNOWN_SERVER_ERROR, no message)
        raise ControllerError(Errors.UNKNOWN_SERVER_ERROR, "")


def _name(codes: Mapping[int, str], code: int) -> str:
    return codes.get(code, "UNKNOWN")


def _request_refusal(body: t.CreateAclsRequest) -> tuple[int, str | None] | None:
    """What refuses a whole CreateAcls request before its creations are looked at, as (error, message):
    a code 0 (UNKNOWN) anywhere (Kafka's request parse; the module's difference), then a creation Kafka
    cannot make an ``AclBinding`` of (resource type ANY, pattern type ANY or MATCH, operation or permission
    type ANY: ``IllegalArgumentException`` in ``AclApis``, every creation UNKNOWN_SERVER_ERROR, no message)."""
    creations = body.get("Creations") or []
    fields = (("resource pattern type", "ResourcePatternType"), ("resource type", "ResourceType"),
              ("permission type", "PermissionType"), ("operation", "Operation"))  # fmt: skip
    for i, c in enumerate(creations):
        unknown = [
            what for what, field in fields if c.get(field, LITERAL if field == "ResourcePatternType" else 0) == UNKNOWN
        ]
        if unknown:
            return Errors.INVALID_REQUEST, f"CreatableAcls contain unknown elements: creation {i}: {', '.join(unknown)}"
    for c in creations:
        if (
            c.get("ResourceType") == ANY
            or c.get("ResourcePatternType", LITERAL) in (ANY, MATCH)
            or c.get("Operation") == ANY
            or c.get("PermissionType") == ANY
        ):
            return Errors.UNKNOWN_SERVER_ERROR, None
    return None


def _pre_check(c: t.CreateAclsRequestAclCreation) -> ControllerError | None:
    """What Kafka's ``AclApis`` refuses in a creation before the controller sees it."""
    name = c.get("ResourceName") or ""
    if c.get("ResourceType") == CLUSTER and name != CLUSTER_NAME:
        return ControllerError(
            Errors.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        )
    if not name:
        return ControllerError(Errors.INVALID_REQUEST, "Invalid empty resource name")
    return None


def _check_new(acl: Acl, cidr_supported: bool) -> None:
    """Kafka's ``AclControlManager.validateNewAcl``."""
    if acl.resource_type in (UNKNOWN, ANY):
        raise ControllerError(
            Errors.INVALID_REQUEST, f"Invalid resourceType {_name(RESOURCE_TYPES, acl.resource_type)}"
        )
    if acl.pattern_type not in (LITERAL, PREFIXED):
        raise ControllerError(Errors.INVALID_REQUEST, f"Invalid patternType {_name(PATTERN_TYPES, acl.pattern_type)}")
    if acl.operation in (UNKNOWN, ANY):
        raise ControllerError(Errors.INVALID_REQUEST, f"Invalid operation {_name(OPERATIONS, acl.operation)}")
    if acl.permission_type not in (DENY, ALLOW):
        raise ControllerError(
            Errors.INVALID_REQUEST, f"Invalid permissionType {_name(PERMISSION_TYPES, acl.permission_type)}"
        )
    if not acl.resource_name:
        raise ControllerError(Errors.INVALID_REQUEST, "Resource name should not be empty")
    if ":" not in acl.principal:
        raise ControllerError(
            Errors.INVALID_REQUEST,
            f"Could not parse principal from `{acl.principal}` "
            "(no colon is present separating the principal type from the principal name)",
        )
    _check_host(acl.host, cidr_supported)


def _check_host(host: str, cidr_supported: bool) -> None:
    """Kafka's ``validateHostPattern``: a CIDR host (one with ``/``) is validated as Kafka's
    ``CidrUtils`` does (commons-net's SubnetUtils for IPv4, SubnetUtils6 when it has a ``:``)."""
    if not host:
        raise ControllerError(Errors.INVALID_REQUEST, "Host pattern cannot be null or empty")
    if host == "*" or "/" not in host:
        return
    if not cidr_supported:
        first = next(m.name for m in registry().metadata_versions if m.supported("cidr_acl"))
        raise ControllerError(
            Errors.UNSUPPORTED_VERSION, f"CIDR-based ACL host patterns require metadata version {first} or higher."
        )
    why = _cidr_error(host)
    if why is not None:
        raise ControllerError(Errors.INVALID_REQUEST, f"Invalid CIDR notation '{host}': {why}")


def _cidr_error(cidr: str) -> str | None:
    if ":" not in cidr:
        m = _IPV4_CIDR.fullmatch(cidr)
        if m is None:
            return f"Could not parse [{cidr}]"
        for i, top in ((1, 255), (2, 255), (3, 255), (4, 255), (5, 32)):
            value = int(m.group(i))
            if value > top:
                return f"Value [{value}] not in range [0,{top}]"
        return None
    slash = cidr.index("/")
    address, prefix = cidr[:slash], cidr[slash + 1 :]
    if not _JAVA_INT.fullmatch(prefix) or not -(2**31) <= int(prefix) <= _INT_MAX:
        return f"Could not parse [{cidr}] - invalid prefix length"
    if not 0 <= int(prefix) <= 128:
        return f"Could not parse [{cidr}] - prefix length must be between 0 and 128"
    literal = address[1:-1] if address.startswith("[") and address.endswith("]") else address
    try:
        parsed = IPv6Address(literal)
    except ValueError:
        return f"Could not parse [{address}]"
    if parsed.ipv4_mapped is not None:  # (Java's InetAddress gives an Inet4Address for those)
        return f"Could not parse [{address}] - not an IPv6 address"
    return None


def _random_acl_id(taken: Mapping[uuid.UUID, Any] | set[uuid.UUID], rng: random.Random) -> uuid.UUID:
    """A random id as Kafka's ``Uuid.randomUuid`` makes one (not a reserved id, its text not starting
    with '-'), that no ACL has."""
    while True:
        u = uuid.UUID(int=rng.getrandbits(128), version=4)
        if u.int >= 100 and not uuid_text(u).startswith("-") and u not in taken:
            return u


class AclControlManager:
    """CreateAcls and DeleteAcls against the committed image (see the module's rules). ``rng`` makes
    the ids of new ACLs (a system source by default)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.random = rng if rng is not None else random.SystemRandom()

    def create_acls(
        self, image: MetadataImage, body: t.CreateAclsRequest
    ) -> tuple[list[bytes], list[t.CreateAclsResponseAclCreationResult]]:
        """The AccessControlEntryRecords of a CreateAclsRequest and its per-creation results."""
        level = image.metadata_version
        if level is None:
            raise ControllerError(Errors.NOT_CONTROLLER, "the metadata log holds no metadata.version yet")
        cidr = registry().metadata_version(level).supported("cidr_acl")
        creations = body.get("Creations") or []
        refused_all = _request_refusal(body)
        if refused_all is not None:
            code, message = refused_all
            return [], [{"ErrorCode": code, "ErrorMessage": message} for _ in creations]
        existing = {Acl.of_record(r) for r in image.acls.values()}
        taken = set(image.acls)
        new: set[Acl] = set()
        records: list[bytes] = []
        results: list[t.CreateAclsResponseAclCreationResult] = []
        for creation in creations:
            refused = _pre_check(creation)
            acl = Acl.of_creation(creation)
            if refused is None:
                try:
                    _check_new(acl, cidr)
                except ControllerError as e:
                    refused = e
            if refused is not None:
                results.append({"ErrorCode": refused.code, "ErrorMessage": refused.message})
                continue
            if acl not in existing and acl not in new:
                if len(records) >= MAX_RECORDS_PER_USER_OP:
                    raise ControllerError(
                        Errors.POLICY_VIOLATION, "Unable to perform excessively large batch operation."
                    )
                new.add(acl)
                acl_id = _random_acl_id(taken, self.random)
                taken.add(acl_id)
                records.append(encode_metadata_record(ACCESS_CONTROL_ENTRY, 0, acl.record(acl_id)))
            results.append({"ErrorCode": Errors.NONE, "ErrorMessage": ""})
        return records, results

    def delete_acls(
        self, image: MetadataImage, body: t.DeleteAclsRequest
    ) -> tuple[list[bytes], list[t.DeleteAclsResponseDeleteAclsFilterResult]]:
        """The RemoveAccessControlEntryRecords of a DeleteAclsRequest and its per-filter results."""
        filters = body.get("Filters") or []
        unknown = _unknown_filter(body)
        if unknown is not None:
            return [], [
                {"ErrorCode": Errors.INVALID_REQUEST, "ErrorMessage": unknown, "MatchingAcls": []} for _ in filters
            ]
        index = _AclIndex(image)
        removed: dict[uuid.UUID, bytes] = {}
        results: list[t.DeleteAclsResponseDeleteAclsFilterResult] = []
        seen: dict[AclFilter, list[tuple[uuid.UUID, Acl]] | ControllerError] = {}  # (a filter given again)
        work = 0
        for f in filters:
            matching: list[t.DeleteAclsResponseDeleteAclsFilterResultDeleteAclsMatchingAcl] = []
            flt = AclFilter.of(f)
            try:
                found = seen.get(flt)
                if found is None:
                    try:
                        flt.check()
                        candidates = index.candidates(flt)
                        work += len(candidates)
                        if work > MAX_ACL_COMPARISONS:
                            raise _TooMuchWork(len(filters), len(index.acls))
                        found = [(acl_id, acl) for acl_id, acl in candidates if flt.matches(acl)]
                    except _TooMuchWork:
                        raise
                    except ControllerError as e:
                        found = e
                    seen[flt] = found
                if isinstance(found, ControllerError):
                    raise found
                work += len(found)
                if work > MAX_ACL_COMPARISONS:
                    raise _TooMuchWork(len(filters), len(index.acls))
                for acl_id, acl in found:
                    if len(removed) >= MAX_RECORDS_PER_USER_OP:
                        raise _TooMany()
                    matching.append(acl.matching())
                    if acl_id not in removed:
                        removed[acl_id] = encode_metadata_record(REMOVE_ACCESS_CONTROL_ENTRY, 0, {"Id": acl_id})
            except (_TooMany, _TooMuchWork):
                raise  # (the whole request fails)
            except ControllerError as e:
                results.append({"ErrorCode": e.code, "ErrorMessage": e.message or None, "MatchingAcls": []})
                continue
            results.append({"ErrorCode": Errors.NONE, "ErrorMessage": None, "MatchingAcls": matching})
        return list(removed.values()), results


class _AclIndex:
    """The image's ACLs (in its order), and by name: a filter with a name is compared only with the
    ACLs it can match (that name, the literal ``*``, and for MATCH the PREFIXED ACLs named by one of
    its prefixes)."""

    def __init__(self, image: MetadataImage) -> None:
        self.acls = [(acl_id, Acl.of_record(r)) for acl_id, r in image.acls.items()]
        self.by_name: dict[str, list[int]] = {}
        for i, (_id, acl) in enumerate(self.acls):
            self.by_name.setdefault(acl.resource_name, []).append(i)
        self.prefix_lengths = sorted({len(acl.resource_name) for _id, acl in self.acls if acl.pattern_type == PREFIXED})

    def candidates(self, flt: AclFilter) -> list[tuple[uuid.UUID, Acl]]:
        if flt.name is None:
            return self.acls
        names = {flt.name, WILDCARD} if flt.pattern_type == MATCH else {flt.name}
        if flt.pattern_type == MATCH:
            names.update(flt.name[:n] for n in self.prefix_lengths if n <= len(flt.name))
        positions = sorted(i for name in names for i in self.by_name.get(name, ()))
        return [self.acls[i] for i in positions]


class _TooMany(ControllerError):
    """More matching ACLs than one request may remove: the whole request fails."""

    def __init__(self) -> None:
        super().__init__(
            Errors.INVALID_REQUEST,
            f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete operation.",
        )


class _TooMuchWork(ControllerError):
    """A DeleteAcls whose filters would be compared with more ACLs than kraftkit's bound (the module's
    differences): the whole request is refused."""

    def __init__(self, filters: int, acls: int) -> None:
        super().__init__(
            Errors.INVALID_REQUEST,
            f"DeleteAcls of {filters} filters against {acls} ACLs: more than {MAX_ACL_COMPARISONS} comparisons "
            "of a filter with an ACL (kraftkit's bound per request)",
        )


def _unknown_filter(body: t.DeleteAclsRequest) -> str | None:
    """Why Kafka's request parse refuses a DeleteAcls (a filter carrying the code 0, UNKNOWN: the
    module's difference), None if it does not."""
    fields = ("PatternTypeFilter", "ResourceTypeFilter", "Operation", "PermissionType")
    for i, f in enumerate(body.get("Filters") or []):
        unknown = [x for x in fields if f.get(x, LITERAL if x == "PatternTypeFilter" else 0) == UNKNOWN]
        if unknown:
            return f"Filters contain UNKNOWN elements: filter {i}: {', '.join(unknown)}"
    return None


def create_acls_response(
    body: t.CreateAclsRequest,
    results: list[t.CreateAclsResponseAclCreationResult] | None,
    error: ControllerError | None = None,
) -> t.CreateAclsResponse:
    """A CreateAclsResponse: the per-creation ``results``, or when the whole request failed
    (NOT_CONTROLLER, a timeout, too many records) ``error`` for every creation but those refused
    before the controller saw them, which keep their own (Kafka's ``ClusterMetadataAuthorizer``)."""
    if results is None:
        assert error is not None
        creations = body.get("Creations") or []
        refused_all = _request_refusal(body)
        if refused_all is not None:  # (refused before the controller was asked)
            code, message = refused_all
            return {"ThrottleTimeMs": 0, "Results": [{"ErrorCode": code, "ErrorMessage": message} for _ in creations]}
        results = []
        for c in creations:
            e = _pre_check(c) or error
            results.append({"ErrorCode": e.code, "ErrorMessage": e.message})
    return {"ThrottleTimeMs": 0, "Results": results}


def delete_acls_response(
    body: t.DeleteAclsRequest,
    results: list[t.DeleteAclsResponseDeleteAclsFilterResult] | None,
    error: ControllerError | None = None,
) -> t.DeleteAclsResponse:
    """A DeleteAclsResponse: the per-filter ``results``, or ``error`` for every filter when the whole
    request failed (the refusal of its parse when it has an UNKNOWN code)."""
    if results is None:
        assert error is not None
        unknown = _unknown_filter(body)
        code, message = (error.code, error.message) if unknown is None else (Errors.INVALID_REQUEST, unknown)
        results = [{"ErrorCode": code, "ErrorMessage": message, "MatchingAcls": []} for _ in body.get("Filters") or []]
    return {"ThrottleTimeMs": 0, "FilterResults": results}
