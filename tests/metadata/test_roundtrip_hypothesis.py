"""Round trips for every metadata and control record type at every version, with values drawn
from strategies built from the generated schema tables (``_core.metadata_schema()``):
encode -> decode gives the input back, and decode -> encode gives the same bytes, unknown tagged
fields (at every struct level) included."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftkit.errors import KraftkitError
from kraftkit.metadata import records as mr

SCHEMA = mr.metadata_schema()
I16_MAX = 32767

INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}


def _has(r, v: int) -> bool:
    return r is not None and r[0] <= v <= r[1]


def _ints(kind: str) -> st.SearchStrategy:
    lo, hi = INT_RANGES[kind]
    return st.one_of(st.sampled_from([lo, hi, -1 if lo < 0 else 0, 0, 1]), st.integers(lo, hi))


def value_strategy(t: dict, v: int, flexible: bool = True) -> st.SearchStrategy:
    kind = t["kind"]
    if kind in INT_RANGES:
        return _ints(kind)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "string":
        return st.text(max_size=12)
    if kind in ("bytes", "records"):
        return st.binary(max_size=12)
    if kind == "uuid":
        return st.binary(min_size=16, max_size=16).map(lambda b: uuid.UUID(bytes=b))
    if kind == "array":
        return st.lists(value_strategy(t["element"], v, flexible), max_size=3)
    if kind == "struct":
        return struct_strategy(t["fields"], v, flexible=flexible)
    raise AssertionError(kind)


def struct_strategy(fields: list[dict], v: int, flexible: bool) -> st.SearchStrategy:
    parts = {}
    for f in fields:
        if not _has(f["versions"], v):
            continue
        s = value_strategy(f["type"], v, flexible)
        if _has(f["nullable_versions"], v):
            s = st.one_of(st.none(), s)
        if flexible and _has(f["tagged_versions"], v) and f["type"]["kind"] != "struct":
            # (a tagged struct's default is the struct of its fields' defaults, drawn anyway)
            s = st.one_of(st.just(f["default"]), s)
        parts[f["name"]] = s
    known_tags = {f["tag"] for f in fields if _has(f["versions"], v) and _has(f["tagged_versions"], v)}
    base = st.fixed_dictionaries(parts)
    if not flexible:
        return base
    unknown = st.dictionaries(
        st.one_of(st.integers(0, 40), st.integers(0, (1 << 32) - 1)).filter(lambda t: t not in known_tags),
        st.binary(max_size=6),
        max_size=3,
    ).map(lambda d: sorted(d.items()))

    def attach(pair):
        d, tags = pair
        if tags:
            d = {**d, mr.UNKNOWN_TAGS: tags}
        return d

    return st.tuples(base, unknown).map(attach)


def _cases():
    for m in SCHEMA["metadata"]:
        lo, hi = m["valid_versions"]
        for v in range(lo, hi + 1):
            yield pytest.param("metadata", m, v, id=f"{m['name']}-v{v}")
    for m in SCHEMA["control"]:
        lo, hi = m["valid_versions"]
        for v in range(lo, hi + 1):
            yield pytest.param("control", m, v, id=f"{m['name']}-v{v}")


CASES = list(_cases())


def test_every_type_and_version_is_covered():
    names = {p.values[1]["name"] for p in CASES}
    assert len([p for p in CASES if p.values[0] == "metadata"]) == sum(
        m["valid_versions"][1] - m["valid_versions"][0] + 1 for m in SCHEMA["metadata"])
    assert {"RegisterBrokerRecord", "PartitionChangeRecord", "ClearElrRecord", "VotersRecord"} <= names
    assert [t[0] for t in mr.metadata_record_types()] == [m["api_key"] for m in SCHEMA["metadata"]]


@pytest.mark.parametrize("kind,m,v", CASES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_roundtrip(kind, m, v, data):
    flexible = _has(m["flexible_versions"], v)
    d = data.draw(struct_strategy(m["fields"], v, flexible))
    if kind == "metadata":
        b = mr.encode_metadata_record(m["api_key"], v, d)
        api_key, version, back = mr.decode_metadata_record(b)
        assert (api_key, version) == (m["api_key"], v)
        assert back == d
        assert mr.encode_metadata_record(api_key, version, back) == b
        # the JSON form is valid JSON with the dump-log wrapper
        j = json.loads(mr.metadata_record_json(b))
        assert (j["type"], j["version"]) == (m["type_name"], v)
    else:
        d["Version"] = v
        b = mr.encode_control_record(m["control_type"], d)
        back = mr.decode_control_record(m["control_type"], b)
        assert back == d
        assert mr.encode_control_record(m["control_type"], back) == b


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from([m["api_key"] for m in SCHEMA["metadata"]] + [6, 13, 16, 99]),
       version=st.integers(0, 6), body=st.binary(max_size=40))
def test_random_bodies_decode_or_raise_kraftkit_errors(key, version, body):
    value = bytes([1, key, version]) + body
    try:
        api_key, v, d = mr.decode_metadata_record(value)
    except KraftkitError as e:
        assert e.reason and (e.position is None or 0 <= e.position <= len(value))
        return
    # whatever decodes re-encodes, and that encoding is stable (bytes, not dicts: NaN != NaN)
    again = mr.encode_metadata_record(api_key, v, d)
    assert mr.encode_metadata_record(*mr.decode_metadata_record(again)) == again
