"""Every command's ``--json`` against the one schema (docs/json-schema.json), and docs/json.md
against the schema it is generated from (``python -m tests.cli.test_json_schema --write-doc``).

The commands run on the fixtures Kafka wrote (and copies of them made worse), on a directory
``storage format`` makes, and on one ``controller run`` process on 127.0.0.1 for the commands
that ask a running quorum. Every line each command prints must match one of the schema's line
kinds exactly: every field listed there present (unless optional), no other field, each of its
type; field names camelCase; record types named as kafka-dump-log names them."""

from __future__ import annotations

import contextlib
import json
import re
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "docs" / "json-schema.json"
DOC_FILE = ROOT / "docs" / "json.md"
DATA = ROOT / "fixtures" / "kafka-4.4.0" / "data"
META = DATA / "__cluster_metadata-0"
SNAPSHOT = META / "00000000000000000080-0000000001.checkpoint"
CAMEL = re.compile(r"^[a-z][A-Za-z0-9]*$")

pytestmark = pytest.mark.timeout(300)


def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text())


# ------------------------------------------------------------------ the check


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "dict"


def _record_keys(value: Any, where: str, errors: list[str]) -> None:
    """A decoded record: every field name camelCase (Kafka's JsonConverter), at every depth."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not CAMEL.match(k):
                errors.append(f"{where}: record field {k!r} is not camelCase")
            _record_keys(v, f"{where}.{k}", errors)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _record_keys(v, f"{where}[{i}]", errors)


def check(value: Any, spec: dict[str, Any], where: str, errors: list[str]) -> None:
    types = spec["type"].split("|")
    kind = _kind(value)
    if kind == "dict":
        if "object" in types and "fields" in spec:
            fields = spec["fields"]
            for name, sub in fields.items():
                if name in value:
                    check(value[name], sub, f"{where}.{name}", errors)
                elif not sub.get("optional"):
                    errors.append(f"{where}: no field {name!r}")
            errors.extend(f"{where}: field {k!r} is not in the schema" for k in value if k not in fields)
        elif "map" in types:
            for k, v in value.items():
                check(v, spec["values"], f"{where}[{k!r}]", errors)
        elif "record" in types:
            _record_keys(value, where, errors)
        else:
            errors.append(f"{where}: an object where the schema says {spec['type']}")
        return
    if kind == "int" and "number" in types:
        return
    if kind not in types:
        errors.append(f"{where}: {kind} {str(value)[:60]!r} where the schema says {spec['type']}")
        return
    if kind == "array" and "items" in spec:
        for i, v in enumerate(value):
            check(v, spec["items"], f"{where}[{i}]", errors)
    if kind == "string" and "pattern" in spec and not re.match(spec["pattern"], value):
        errors.append(f"{where}: {value!r} does not match {spec['pattern']}")


def _matches(line: dict[str, Any], kind: dict[str, Any]) -> bool:
    match = kind.get("match", {})
    if not isinstance(line, dict):
        return not match
    return all(k in line and (v == "*" or line[k] == v) for k, v in match.items())


def check_output(command: str, stdout: str) -> list[str]:
    """The problems of ``command``'s output (one JSON document a line) against the schema."""
    kinds = schema()["commands"][command]["lines"]
    errors: list[str] = []
    lines = stdout.splitlines()
    if not lines:
        errors.append(f"{command}: no output")
    for n, text in enumerate(lines, 1):
        try:
            line = json.loads(text)
        except ValueError as e:
            errors.append(f"{command}: line {n} is not JSON: {e}")
            continue
        kind = next((k for k in kinds if _matches(line, k)), None)
        if kind is None:
            errors.append(f"{command}: line {n} is no line the schema knows: {text[:100]}")
            continue
        check(line, kind, f"{command}: line {n} ({kind['name']})", errors)
    return errors


# ------------------------------------------------------------------ the doc


def _rows(spec: dict[str, Any], path: str) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    for name, sub in spec.get("fields", {}).items():
        p = f"{path}{name}"
        opt = " (optional)" if sub.get("optional") else ""
        rows.append((p, sub["type"], sub["doc"] + opt))
        rows += _nested(sub, p)
    return rows


def _nested(sub: dict[str, Any], p: str) -> list[tuple[str, str, str]]:
    if "fields" in sub and "object" in sub["type"].split("|"):
        return _rows(sub, f"{p}.")
    if "items" in sub:
        item = sub["items"]
        return [(f"{p}[]", item["type"], item["doc"]), *_nested(item, f"{p}[]")] if "fields" in item or "items" in item else []
    if "values" in sub:
        val = sub["values"]
        return [(f"{p}.*", val["type"], val["doc"]), *_nested(val, f"{p}.*")]
    return []


def doc_text() -> str:
    s = schema()
    out = [
        "# JSON output",
        "",
        "<!-- generated from docs/json-schema.json by `python -m tests.cli.test_json_schema --write-doc`: edit that -->",
        "",
        *[f"* {c}" for c in s["conventions"]],
    ]
    for command, c in s["commands"].items():
        out += ["", f"## kraftkit {command}", "", c["doc"]]
        for kind in c["lines"]:
            match = ", ".join(f"{k} = {json.dumps(v)}" if v != "*" else f"has {k}" for k, v in kind.get("match", {}).items())
            out += ["", f"### {kind['name']}: {kind['doc']}" + (f" ({match})" if match else ""), ""]
            rows = _rows(kind, "") if "fields" in kind else [("(the line)", kind["type"], kind["doc"])]
            out += ["| field | type | meaning |", "|---|---|---|"]
            out += [f"| `{p}` | {t.replace('|', ' or ')} | {d.replace('|', '/')} |" for p, t, d in rows]
    return "\n".join(out) + "\n"


def test_the_doc_is_generated_from_the_schema():
    assert DOC_FILE.read_text() == doc_text(), "run: python -m tests.cli.test_json_schema --write-doc"


def test_every_field_name_in_the_schema_is_camel_case_and_documented():
    def walk(spec: dict[str, Any], where: str) -> None:
        assert spec.get("doc"), where
        for name, sub in spec.get("fields", {}).items():
            assert CAMEL.match(name), f"{where}.{name}"
            walk(sub, f"{where}.{name}")
        for key in ("items", "values"):
            if key in spec:
                walk(spec[key], f"{where}[]")

    for command, c in schema()["commands"].items():
        for kind in c["lines"]:
            walk(kind, f"{command}/{kind['name']}")


def test_the_check_refuses_what_the_schema_does_not_say():
    """The check itself: a snake_case field, a missing one, a wrong type and a record type in
    another naming are each caught."""
    good = {"type": "summary", "file": "f", "records": 1}
    assert check_output("metadata dump", json.dumps(good)) == []
    assert check_output("metadata dump", json.dumps({**good, "records_total": 1}))
    assert check_output("metadata dump", json.dumps({"type": "summary", "file": "f"}))
    assert check_output("metadata dump", json.dumps({**good, "records": "1"}))
    rec = {"offset": 1, "type": "PARTITION_RECORD", "version": 0, "data": {"partitionId": 0}}
    assert check_output("metadata dump", json.dumps(rec)) == []
    assert check_output("metadata dump", json.dumps({**rec, "type": "PartitionRecord"}))
    assert check_output("metadata dump", json.dumps({**rec, "data": {"PartitionId": 0}}))


def test_the_one_json_writer_handles_what_json_cannot_hold():
    import uuid

    from kraftkit.cli.jsonout import camel, dumps, record_type_name, with_fields

    u = uuid.UUID(bytes=bytes(range(16)))
    text = dumps({"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": b"\x00\xff", "d": u,
                  "e": Path("/x"), "f": "é"})
    # Jackson's strings for what JSON has no number for; base64 bytes; Kafka's Uuid text
    assert text == '{"a":"NaN","b":["Infinity","-Infinity",1.5],"c":"AP8=","d":"AAECAwQFBgcICQoLDA0ODw","e":"/x","f":"é"}'
    assert json.loads(text)["d"] == "AAECAwQFBgcICQoLDA0ODw"
    assert [camel(x) for x in ("invalid_batches", "PartitionId", "KRaftVersion")] == [
        "invalidBatches", "partitionId", "kRaftVersion"]
    assert [record_type_name(x) for x in ("PartitionRecord", "KRaftVoters", "LeaderChange")] == [
        "PARTITION_RECORD", "KRAFT_VOTERS", "LEADER_CHANGE"]
    assert with_fields({"offset": 3}, '{"type":"X","data":{}}') == '{"offset":3,"type":"X","data":{}}'
    assert with_fields({"offset": 3}, "{}") == '{"offset":3}'


# ------------------------------------------------------------------ the commands


def kraftkit(*args: Any, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftkit.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _damaged_copy(tmp: Path) -> Path:
    """The 4.4 fixture with a flipped byte in the metadata log's second batch (a CRC mismatch)."""
    d = tmp / "damaged"
    shutil.copytree(DATA, d)
    seg = d / "__cluster_metadata-0" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[200] ^= 0xFF
    seg.write_bytes(bytes(data))
    return d


def offline_runs(tmp: Path) -> list[tuple[str, list[Any]]]:
    """(schema command, argv) of every offline command's --json."""
    damaged = _damaged_copy(tmp)
    codec = DATA / "codec-none-0"
    (tmp / "created").mkdir()
    downgrade = tmp / "downgrade"
    shutil.copytree(DATA, downgrade)
    return [
        ("dump-log", ["dump-log", "--json", "--deep", "--print-data", codec / "00000000000000000000.log",
                      codec / "00000000000000000000.index", codec / "00000000000000000000.timeindex",
                      META / "00000000000000000000.log", SNAPSHOT]),
        ("dump-log", ["dump-log", "--json", "--deep", damaged / "__cluster_metadata-0" / "00000000000000000000.log"]),
        ("verify-log", ["verify-log", "--json", DATA, damaged]),
        ("snapshot verify", ["snapshot", "verify", "--json", *sorted(META.glob("*.checkpoint"))]),
        ("snapshot create", ["snapshot", "create", "--json", DATA, "--at", 80, "--out", tmp / "created"]),
        ("snapshot rewrite", ["snapshot", "rewrite", "--json", "--dry-run", "--metadata-version", "3.5", SNAPSHOT]),
        ("snapshot rewrite", ["snapshot", "rewrite", "--json", "--fail-on-loss", "--metadata-version", "3.5", SNAPSHOT,
                              tmp / "rewritten"]),
        ("metadata dump", ["metadata", "dump", "--json", META]),
        ("metadata records", ["metadata", "records", "--json", META]),
        ("metadata image", ["metadata", "image", "--json", DATA]),
        ("metadata image", ["metadata", "image", "--json", DATA, "--path", "/topics/orders/0"]),
        ("metadata image", ["metadata", "image", "--json", DATA, "--path", "/cluster/brokers/1"]),
        ("features describe", ["features", "describe", "--json", DATA]),
        ("features describe", ["features", "describe", "--json", META / "00000000000000000000-0000000000.checkpoint"]),
        ("features upgrade|downgrade|disable", ["features", "downgrade", "--json", "--dry-run", "--unsafe",
                                                "--release-version", "3.5", downgrade]),
        ("features upgrade|downgrade|disable", ["features", "downgrade", "--json", "--release-version", "3.5",
                                                downgrade]),
        ("storage format", ["storage", "format", "--json", "-t", "MkU3OEVBNTcwNTJENDM2Qg", "--node-id", 1,
                            "-d", tmp / "formatted", "--standalone", "--controller-listener",
                            "CONTROLLER://127.0.0.1:9093"]),
        ("storage info", ["storage", "info", "--json", DATA, tmp / "formatted", tmp / "missing"]),
        ("quorum recover", ["quorum", "recover", "--json", "--from", DATA, "--from", downgrade, "--voters",
                            "1@127.0.0.1:9093,2@127.0.0.1:9094", "--out", tmp / "recovered"]),
    ]


def test_every_offline_command_prints_the_schemas_json(tmp_path):
    errors: list[str] = []
    seen = set()
    for command, argv in offline_runs(tmp_path):
        proc = kraftkit(*argv)
        assert "Traceback" not in proc.stderr, proc.stderr
        errors += check_output(command, proc.stdout)
        seen.add(command)
    assert errors == []
    # (the commands that ask a running quorum are below; the Spark jobs in tests/spark/test_cli.py;
    # migrate from-zookeeper reads a running ZooKeeper: tests/migration/test_offline_zk.py checks its --json,
    # tests/migration/test_live_zk.py migrate status's and tests/migration/test_live_zk_rollback.py migrate
    # rollback's; quorum add-voter|remove-voter change a dynamic quorum: tests/raft/test_dynamic_cli.py checks theirs)
    elsewhere = {"quorum describe", "quorum append", "migrate from-zookeeper", "migrate status",
                 "migrate rollback", "quorum add-voter|remove-voter"}
    assert seen == {c for c in schema()["commands"] if c not in elsewhere and not c.startswith("spark ")}


def test_every_command_that_takes_json_is_in_the_schema():
    """The schema names every command with a --json option (features upgrade, downgrade and disable
    share one entry), so that the checks of this module and tests/spark cover each of them."""
    import argparse

    from kraftkit.cli.main import build_parser

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for a in subs:
            for name, sp in a.choices.items():
                yield from walk(sp, (*path, name))
        if any("--json" in a.option_strings for a in parser._actions):
            yield " ".join(path)

    documented = set()
    for command in schema()["commands"]:
        head, _, alternatives = command.rpartition(" ")
        documented |= {f"{head} {a}".strip() for a in alternatives.split("|")}
    with_json = set(walk(build_parser(["--help"]), ()))
    assert len(with_json) > 20 and with_json == documented


@contextlib.contextmanager
def running_node(kind: str, d: Path):
    """``kraftkit controller run`` or ``quorum run`` (which takes appends) of one formatted 3.9 node
    in ``d`` on 127.0.0.1; yields its HOST:PORT, stops it (SIGTERM, then kill) afterwards."""
    from tests.raft._cluster import CLUSTER_ID, free_ports

    assert kraftkit("storage", "format", "-t", CLUSTER_ID, "--node-id", 1, "-d", d, "-r", "3.9",
                    "--layout", "bootstrap-file").returncode == 0
    (port,) = free_ports(1)
    proc = subprocess.Popen([sys.executable, "-m", "kraftkit.cli.main", kind, "run", "--node-id", "1",
                             "--voters", f"1@127.0.0.1:{port}", "--log-dir", str(d)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "no start-up line within 60 s"
        assert json.loads(proc.stdout.readline())["port"] == port  # type: ignore[union-attr]
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=30)


@pytest.fixture(scope="module", params=["controller", "quorum"])
def node(request, tmp_path_factory):
    """A controller node and a quorum node: (which, its HOST:PORT)."""
    with running_node(request.param, tmp_path_factory.mktemp(request.param)) as address:
        yield request.param, address


def test_every_command_that_asks_a_running_quorum_prints_the_schemas_json(node):
    which, address = node
    runs = [("quorum describe", ["quorum", "describe", "--json", "--bootstrap-controller", address])]
    if which == "quorum":  # a controller takes no Produce: appends go to a quorum node
        runs.append(("quorum append", ["quorum", "append", "--json", "--bootstrap", address, "--count", 3]))
    else:
        runs += [
            ("features describe", ["features", "describe", "--json", "--bootstrap-controller", address]),
            ("features upgrade|downgrade|disable", ["features", "upgrade", "--json", "--dry-run",
                                                    "--bootstrap-controller", address, "--release-version", "4.0"]),
        ]
    errors: list[str] = []
    for command, argv in runs:
        proc = kraftkit(*argv, "--timeout", 30)
        assert proc.returncode == 0, (argv, proc.stderr)
        errors += check_output(command, proc.stdout)
    assert errors == []


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-doc"]:
        DOC_FILE.write_text(doc_text())
        print(f"wrote {DOC_FILE}")
    else:
        sys.exit("usage: python -m tests.cli.test_json_schema --write-doc")
