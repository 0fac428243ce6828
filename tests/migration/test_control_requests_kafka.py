"""kraftkit's codec of the ZooKeeper-mode controller RPCs (LeaderAndIsr, StopReplica, UpdateMetadata,
requests and responses, at the versions a migrating controller sends to Kafka 3.9 brokers and every
other flexible version) against Kafka 3.9.2's own message classes, in one JVM
(tests/harness/java/ControlRequests.java):

* what kraftkit encodes, Kafka parses (no byte left over) into the same fields (Kafka's JSON
  converter's form of them, compared with kraftkit's body put into that form) and writes back to
  the very same bytes;
* what Kafka writes from that JSON, kraftkit decodes into the body it started from.

The bodies are seeded random ones drawn from the generated schema tables, and the requests the
propagator builds from a metadata image."""

from __future__ import annotations

import base64
import json
import random
import struct
import uuid

import pytest

from kraftkit._core import rpc_schema
from kraftkit.metadata import records as mr
from kraftkit.migration.propagator import View, delta_batches, image_batches
from kraftkit.protocol import decode_request, decode_response, encode_request, encode_response
from tests.harness import jars, tools
from tests.migration.test_propagator import broker, topic

pytestmark = pytest.mark.kafka

SOURCE = tools.HERE / "java" / "ControlRequests.java"
APIS = (4, 5, 6)
PER_VERSION = 12
INTS = {"int8": 7, "int16": 15, "uint16": 16, "int32": 31, "uint32": 32, "int64": 63}


def _value(rng: random.Random, t: dict, v: int, depth: int = 0):
    kind = t["kind"]
    if kind in INTS:
        bits = INTS[kind]
        lo, hi = (0, (1 << bits) - 1) if kind.startswith("uint") else (-(1 << bits), (1 << bits) - 1)
        return rng.choice([lo, hi, 0, -1 if lo < 0 else 1, rng.randint(lo, hi)])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "string":
        return "".join(rng.choice("abc-_.Zé") for _ in range(rng.randint(0, 8)))
    if kind == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if kind == "array":
        return [_value(rng, t["element"], v, depth + 1) for _ in range(rng.randint(0, 3 if depth < 2 else 1))]
    if kind == "struct":
        return _body(rng, t["fields"], v, depth + 1)
    raise AssertionError(kind)


def _has(r, v: int) -> bool:
    return r is not None and r[0] <= v <= r[1]


def _body(rng: random.Random, fields: list[dict], v: int, depth: int = 0) -> dict:
    out = {}
    for f in fields:
        if not _has(f["versions"], v):
            continue
        if _has(f["nullable_versions"], v) and rng.random() < 0.2:
            out[f["name"]] = None
        else:
            out[f["name"]] = _value(rng, f["type"], v, depth)
    return out


def kafka_json(x):
    """A kraftkit body in the form Kafka's generated JSON converter writes it: field names with a
    lowercase first letter, UUIDs in Kafka's base64 text form."""
    if isinstance(x, dict):
        return {k[0].lower() + k[1:]: kafka_json(val) for k, val in x.items() if k != mr.UNKNOWN_TAGS}
    if isinstance(x, list):
        return [kafka_json(e) for e in x]
    if isinstance(x, uuid.UUID):
        return base64.urlsafe_b64encode(x.bytes).decode().rstrip("=")
    return x


def _cases() -> list[tuple[int, str, int, dict]]:
    rng = random.Random(20261128)
    cases = []
    for m in rpc_schema():
        if m["api_key"] not in APIS:
            continue
        flex = m["flexible_versions"]
        for v in range(max(m["valid_versions"][0], flex[0]), m["valid_versions"][1] + 1):
            cases += [(m["api_key"], m["kind"], v, _body(rng, m["fields"], v)) for _ in range(PER_VERSION)]
    # and what the propagator sends, from an image: a full publication and a change
    brokers = {1: broker(1, 11), 2: broker(2, 12), 3: broker(3, 13)}
    before = View(brokers, {t.id: t for t in (topic("orders", {0: (1, [1, 2]), 1: (2, [2, 3])}),
                                               topic("gone", {0: (3, [3, 1])}))}, 5)
    moved = topic("orders", {0: (2, [2, 3]), 1: (2, [2, 3])}, tid=next(iter(before.topics)))
    after = View(brokers, {moved.id: moved}, 6)
    for batch in image_batches(before, 3000, 7) + delta_batches(before, after, 3000, 7):
        cases += [(r.api, "request", r.version, r.body) for r in batch]
    return cases


def _body_bytes(api: int, kind: str, v: int, body: dict) -> bytes:
    """The body's bytes, without the header (flexible headers: request v2 with client id "k",
    response v1, each with an empty tagged-field section)."""
    if kind == "request":
        return encode_request(api, v, 1, "k", body)[12:]
    return encode_response(api, v, 1, body)[5:]


def _decode(api: int, kind: str, v: int, raw: bytes) -> dict:
    if kind == "request":
        return decode_request(struct.pack(">hhi", api, v, 1) + b"\x00\x01k\x00" + raw)[4]
    return decode_response(api, v, b"\x00\x00\x00\x01\x00" + raw)[1]


def test_control_requests_match_kafka_3_9(tmp_path):
    cases = _cases()
    assert {(a, k) for a, k, _v, _b in cases} == {(a, k) for a in APIS for k in ("request", "response")}
    assert {(a, v) for a, k, v, _b in cases if k == "request"} >= {(4, 7), (5, 4), (6, 8)}
    ours = [_body_bytes(api, kind, v, body) for api, kind, v, body in cases]
    spec = tmp_path / "read.txt"
    spec.write_text("".join(f"read {a} {k} {v} {raw.hex()}\n" for (a, k, v, _b), raw in zip(cases, ours, strict=True)))
    classes = tools.compile_java(jars.KAFKA_3, SOURCE, "control-requests")
    main = SOURCE if classes is None else "ControlRequests"
    extra = [] if classes is None else [classes]
    read = tools.run_tool(jars.KAFKA_3, main, [spec], timeout=300, extra_classpath=extra).stdout.splitlines()
    assert len(read) == len(cases)
    bad = []
    back = []
    for (api, kind, v, body), raw, line in zip(cases, ours, read, strict=True):
        text, _, again = line.rpartition(" ")
        theirs = json.loads(text)
        want = kafka_json(body)
        if api == 6 and kind == "request" and want.get("type", 0) == 0:
            want.pop("type", None)  # (Kafka's converter leaves out a tagged field at its default, as the wire does)
        if theirs != want or bytes.fromhex(again) != raw:
            bad.append((api, kind, v, body, line))
        back.append(f"write {api} {kind} {v} {text}\n")
    assert not bad, f"{len(bad)} of {len(cases)} differ; first: {bad[:2]}"

    # the other way: Kafka writes, kraftkit decodes
    spec2 = tmp_path / "write.txt"
    spec2.write_text("".join(back))
    written = tools.run_tool(jars.KAFKA_3, main, [spec2], timeout=300, extra_classpath=extra).stdout.splitlines()
    assert len(written) == len(cases)
    for (api, kind, v, body), hexed in zip(cases, written, strict=True):
        assert _decode(api, kind, v, bytes.fromhex(hexed)) == body, (api, kind, v)
