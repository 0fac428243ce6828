"""The JSON written straight from the bytes (``rust/src/schema/json_direct.rs``: ``metadata dump``,
``decode_metadata_batch(json=True)``, the Spark ``record`` column) against the path it replaced:
the record decoded into the value tree and printed by ``metadata_record_json`` /
``control_record_json``, and ``metadata dump``'s old batch-by-batch Python loop (kept here as the
oracle, word for word). Every metadata and control record type at every version with
hypothesis-drawn values, then damaged bytes: the same text, or the same error (type, message,
file, offset, position, reason)."""

from __future__ import annotations

import base64
import json
import math
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftkit._core import control_record_key, decode_batches, metadata_dump
from kraftkit.cli.jsonout import with_fields
from kraftkit.errors import KraftkitError
from kraftkit.log import Segment, encode_batch
from kraftkit.log.control import control_type_name
from kraftkit.metadata import records as mr
from tests.metadata.test_roundtrip_hypothesis import CASES, _has, struct_strategy


def old_dump_lines(path: Path, as_json: bool) -> tuple[list[str], int, BaseException | None]:
    """``metadata dump``'s lines of one file as its Python loop printed them before, each record's
    JSON from the tree path; (lines, records, the exception that ended it)."""
    lines: list[str] = []
    expected = None
    try:
        for batch in Segment(path).batches(verify_crc=True):
            if expected is not None and batch.base_offset < expected:
                raise KraftkitError(
                    f"{path}: batch base offset {batch.base_offset} is below the next expected "
                    f"offset {expected}: offsets are held twice (byte position {batch.position})"
                )
            expected = batch.last_offset + 1
            batch_lines = []
            for offset, api_key, ver, text in _tree_decode(batch):
                if api_key is None:
                    name = control_type_name(ver, unknown=f"CONTROL_{ver}")
                    body = text if text is not None else "null"
                    cver = json.loads(body).get("version", 0) if text is not None else 0
                    if as_json:
                        head = {"offset": offset, "control": True, "type": name, "version": cver}
                        batch_lines.append(with_fields(head, f'{{"data":{body}}}'))
                    else:
                        batch_lines.append(f"{offset}  {name} v{cver}  {body}")
                elif as_json:
                    batch_lines.append(with_fields({"offset": offset}, text))
                else:
                    cut = text.index(',"data":')
                    name = text[9 : text.index('"', 9)]
                    batch_lines.append(f"{offset}  {name} v{ver}  {text[cut + 8 : -1]}")
            lines += batch_lines
    except KraftkitError as e:
        return lines, len(lines), e
    return lines, len(lines), None


def _tree_decode(batch):
    """(offset, api_key or None, version or control type, JSON text) of every record of a batch,
    through the value tree: decode_metadata_batch (dicts: its errors, in its order), then the
    tree printers on each value."""
    decoded = mr.decode_metadata_batch(batch)  # raises what the batch's first bad record raises
    out = []
    for (offset, api_key, ver, data), rec in zip(decoded, batch.records(), strict=True):
        if api_key is None:
            text = None if data is None else mr.control_record_json(ver, rec.value)[1]
        else:
            text = mr.metadata_record_json(rec.value)
        out.append((offset, api_key, ver, text))
    return out


def new_dump_lines(path: Path, as_json: bool) -> tuple[list[str], int, BaseException | None]:
    it = metadata_dump(str(path), json=as_json)
    text = b""
    err = None
    try:
        for chunk in it:
            text += chunk
    except KraftkitError as e:
        err = e
    # (not splitlines: U+0085 and U+2028 inside a string value are not line ends)
    assert text == b"" or text.endswith(b"\n")
    return text.decode().split("\n")[:-1], it.records, err


def same_error(a: BaseException | None, b: BaseException | None) -> None:
    assert type(a) is type(b), (a, b)
    if a is None:
        return
    assert str(a) == str(b)
    for attr in ("file", "offset", "position", "reason", "field"):
        assert getattr(a, attr, None) == getattr(b, attr, None), attr


def assert_dump_agrees(path: Path) -> None:
    for as_json in (False, True):
        old, new = old_dump_lines(path, as_json), new_dump_lines(path, as_json)
        assert new[0] == old[0]
        assert new[1] == old[1]
        same_error(new[2], old[2])
        if as_json:
            for line in new[0]:
                json.loads(line)  # each line is one JSON document


def _encode(kind: str, m: dict, v: int, d: dict) -> bytes:
    if kind == "metadata":
        return mr.encode_metadata_record(m["api_key"], v, d)
    d["Version"] = v
    return mr.encode_control_record(m["control_type"], d)


def _batch(kind: str, m: dict, values: list[bytes], base: int) -> bytes:
    if kind == "metadata":
        return encode_batch([(1000, None, x, ()) for x in values], base_offset=base, partition_leader_epoch=1)
    key = control_record_key(m["control_type"])
    return encode_batch([(1000, key, x, ()) for x in values], base_offset=base, partition_leader_epoch=1, control=True)


@pytest.mark.parametrize("kind,m,v", CASES)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                                                   HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_type_and_version(kind, m, v, data, tmp_path: Path):
    flexible = _has(m["flexible_versions"], v)
    values = [_encode(kind, m, v, data.draw(struct_strategy(m["fields"], v, flexible))) for _ in range(3)]
    for value in values:
        if kind == "metadata":
            want = mr.metadata_record_json(value)  # the tree path
            assert mr.decode_metadata_batch(_one_batch(_batch(kind, m, [value], 0)), json=True)[0][3] == want
        else:
            want = mr.control_record_json(m["control_type"], value)[1]
            got = mr.decode_metadata_batch(_one_batch(_batch(kind, m, [value], 0)), json=True)[0][3]
            assert got == want
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(_batch(kind, m, values[:2], 0) + _batch(kind, m, values[2:], 2))
    assert_dump_agrees(seg)


# ---------------------------------------------------------------------------------------------
# independent oracle: the parsed JSON against the dict the tree decoder gives, field by field


def _expect(t: dict, x):
    """A decoded value as Kafka's JsonConverter prints it (parsed back by json.loads)."""
    if x is None:
        return None
    kind = t["kind"]
    if kind == "uuid":
        return base64.urlsafe_b64encode(x.bytes).decode().rstrip("=")
    if kind in ("bytes", "records"):
        return base64.b64encode(x).decode()
    if kind == "float64":
        return x if math.isfinite(x) else ("Infinity" if x > 0 else "-Infinity")
    if kind == "array":
        return [_expect(t["element"], e) for e in x]
    if kind == "struct":
        return _expect_struct(t["fields"], x)
    return x


def _is_default(f: dict, x) -> bool:
    """Java's equals against the schema's default (``metadata_schema()``: None, a number, text,
    b"", the zero UUID, [] -- -0.0 equals 0.0 here as in Java)."""
    return x == f["default"]


def _expect_struct(fields: list[dict], d: dict) -> dict:
    out = {}
    for f in fields:
        if f["name"] not in d:
            continue
        x = d[f["name"]]
        if f.get("_tagged") and _is_default(f, x):
            continue
        out[f["json_name"]] = _expect(f["type"], x)
    return out


@pytest.mark.parametrize("kind,m,v", [c for c in CASES if c.values[0] == "metadata"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_parsed_json_is_the_decoded_record(kind, m, v, data):
    flexible = _has(m["flexible_versions"], v)
    value = mr.encode_metadata_record(m["api_key"], v, data.draw(struct_strategy(m["fields"], v, flexible)))
    _, _, d = mr.decode_metadata_record(value)
    fields = [{**f, "_tagged": flexible and _has(f["tagged_versions"], v)} for f in m["fields"] if _has(f["versions"], v)]
    got = json.loads(mr.decode_metadata_batch(_one_batch(encode_batch([(1000, None, value, ())])), json=True)[0][3])
    want = _expect_struct(fields, d)
    # tagged fields the oracle cannot judge alone (a struct's default) are left to the tree check
    for f in fields:
        if f["_tagged"] and f["type"]["kind"] == "struct":
            got["data"].pop(f["json_name"], None)
            want.pop(f["json_name"], None)
    assert list(got["data"]) == list(want) and got["data"] == want


def _one_batch(b: bytes):
    (batch,) = decode_batches(b, verify_crc=True)
    return batch


# ---------------------------------------------------------------------------------------------
# damaged input


@settings(max_examples=400, deadline=None)
@given(key=st.sampled_from([m["api_key"] for m in mr.metadata_schema()["metadata"]] + [6, 99]),
       version=st.integers(0, 6), body=st.binary(max_size=48))
def test_random_bodies_same_text_or_same_error(key, version, body):
    value = bytes([1, key, version]) + body
    try:
        want: str | BaseException = mr.metadata_record_json(value)
    except KraftkitError as e:
        want = e
    try:
        got: str | BaseException = mr.decode_metadata_batch(_one_batch(encode_batch([(1000, None, value, ())])), json=True)[0][3]
    except KraftkitError as e:
        got = e
    if isinstance(want, str):
        assert got == want
    else:
        assert isinstance(got, BaseException)
        assert type(got) is type(want)
        assert str(got) == f"record at offset 0: {want}"
        for attr in ("position", "reason", "field"):
            assert getattr(got, attr) == getattr(want, attr), attr


def test_damaged_segments_same_lines_same_error(tmp_path: Path):
    """Every byte of a small log changed in turn, and every cut: the same lines before the same
    error (CRC mismatch, torn batch, offsets held twice, a bad record behind a valid CRC)."""
    recs = [mr.encode_metadata_record(12, 0, {"Name": "metadata.version", "FeatureLevel": 7}),
            mr.encode_metadata_record(3, 1, {"PartitionId": 1, "Replicas": [1, 2], "Isr": [1], "Leader": 1})]
    lc = mr.encode_control_record(2, {"Version": 0, "LeaderId": 1, "Voters": [{"VoterId": 1}]})
    log = (encode_batch([(1, None, r, ()) for r in recs], base_offset=0)
           + encode_batch([(2, control_record_key(2), lc, ())], base_offset=2, control=True)
           + encode_batch([(3, None, recs[1] + b"\x00", ())], base_offset=3)  # garbage after the record
           + encode_batch([(4, None, recs[0], ())], base_offset=2))  # held twice
    p = tmp_path / "00000000000000000000.log"
    cases = [log[:cut] for cut in range(0, len(log), 7)]
    cases += [log[:i] + bytes([log[i] ^ 0x5A]) + log[i + 1:] for i in range(0, len(log), 3)]
    seen = set()
    for c in cases:
        p.write_bytes(c)
        assert_dump_agrees(p)
        seen.add(type(old_dump_lines(p, False)[2]).__name__)
    assert {"NoneType", "CorruptRecordError", "KraftkitError"} <= seen, seen


def test_bad_records_behind_valid_crcs(tmp_path: Path):
    """Records the codec refuses inside batches whose CRC is right: the same lines, then the same
    error naming file, offset, position and reason."""
    good = mr.encode_metadata_record(2, 0, {"Name": "t"})
    bad = [b"", b"\x00\x02\x00", b"\x01\x63\x00", b"\x01\x02\x00\x00", good + b"\x01", good[:-3],
           bytes([1, 3, 1]) + b"\x00\x00\x00\x01" + bytes(16) + b"\x7f\xff\xff\xff"]
    p = tmp_path / "00000000000000000000.log"
    for i, b in enumerate(bad):
        p.write_bytes(encode_batch([(1, None, good, ())], base_offset=0)
                      + encode_batch([(1, None, good, ()), (1, None, b, ())], base_offset=1))
        old = old_dump_lines(p, True)
        assert old[2] is not None, i
        assert_dump_agrees(p)
    # a control record the codec refuses, and one with a key too short
    for key, value in [(control_record_key(3), b"\x00"), (b"\x00\x00", b""), (control_record_key(9), b"")]:
        p.write_bytes(encode_batch([(1, key, value, ())], base_offset=0, control=True))
        assert_dump_agrees(p)


def test_cli_without_a_file_descriptor_prints_the_same(tmp_path: Path, monkeypatch, capsys):
    """``metadata dump`` into a stream with no file descriptor (the chunks written as bytes, or as
    text where there is no binary buffer) prints what it prints into a pipe: the old loop's lines,
    between the file and summary lines."""
    import io
    import subprocess
    import sys

    from kraftkit.cli.main import main

    recs = [mr.encode_metadata_record(12, 0, {"Name": "metadata.version", "FeatureLevel": 7}),
            mr.encode_metadata_record(2, 0, {"Name": "é\n\u2028", "TopicId": uuid.UUID(int=5)})]
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(encode_batch([(1, None, r, ()) for r in recs], base_offset=0))
    for args in (["metadata", "dump", str(p)], ["metadata", "dump", "--json", str(p)]):
        piped = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", *args], capture_output=True, check=True).stdout
        capsys.readouterr()
        assert main(args) == 0
        assert capsys.readouterr().out.encode() == piped
        text = io.StringIO()
        monkeypatch.setattr(sys, "stdout", text)
        assert main(args) == 0
        monkeypatch.undo()
        assert text.getvalue().encode() == piped
        old = old_dump_lines(p, "--json" in args)[0]
        assert [x for x in piped.decode().split("\n")[:-1] if x in old] == old


def test_a_log_of_many_steps_iterates_as_it_writes(tmp_path: Path):
    """A log several times the input an iteration step renders (512 KiB), with a damaged batch
    near its end: the bytes objects given out, joined, are what ``write_chunk`` writes into a file
    and the old per-batch loop's lines, and both stop at the same error."""
    recs = [mr.encode_metadata_record(3, 1, {"PartitionId": i, "TopicId": uuid.UUID(int=i), "Replicas": [1, 2, 3],
                                             "Isr": [1, 2], "Leader": 1 + i % 3}) for i in range(50)]
    log = bytearray()
    for b in range(600):
        log += encode_batch([(b, None, r, ()) for r in recs], base_offset=b * len(recs))
    assert len(log) > 4 * (512 << 10)
    log[-100] ^= 0x20  # the last batch's CRC no longer matches
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(bytes(log))
    for as_json in (False, True):
        lines, records, err = new_dump_lines(p, as_json)
        old = old_dump_lines(p, as_json)
        assert (lines, records) == (old[0], old[1]) and records == 599 * len(recs)
        same_error(err, old[2])
        out = tmp_path / "written"
        with out.open("wb") as f:
            it = metadata_dump(str(p), json=as_json)
            with pytest.raises(KraftkitError) as raised:
                while it.write_chunk(f.fileno()):
                    pass
        same_error(raised.value, err)
        assert out.read_bytes().decode().split("\n")[:-1] == lines
