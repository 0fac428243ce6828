"""Differential: one sequence of AlterClientQuotas and AlterUserScramCredentials requests, valid and
refused (every rule of Kafka's ClientQuotaControlManager and ScramControlManager the wire can reach),
sent to the active controller of a real Kafka 4.4 three-controller quorum and of three ``kraftkit
controller run`` processes, both formatted by Kafka's own ``kafka-storage format`` at release 4.4 (and at 3.4, where SCRAM is refused).
The answers must be the same (error codes and messages; the order of SCRAM results, and of quota
entities once sorted: Kafka's comes from a HashMap of entities), and so must the ClientQuotaRecords
and (Remove)UserScramCredentialRecords each quorum committed, in order."""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import CLIENT_QUOTA, REMOVE_USER_SCRAM_CREDENTIAL, USER_SCRAM_CREDENTIAL
from kraftkit.metadata.source import batches
from kraftkit.protocol import KafkaConnection
from kraftkit.protocol.messages import ApiKey, Errors
from tests._procs import KraftkitProcess
from tests.harness import jars
from tests.harness.node import free_port, random_cluster_id
from tests.harness.quorum import KafkaQuorum

from .test_features_differential import controller_properties

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

VERSION = jars.KAFKA_NEWEST
KEYS = (CLIENT_QUOTA, USER_SCRAM_CREDENTIAL, REMOVE_USER_SCRAM_CREDENTIAL)
QUOTAS, SCRAM = ApiKey.ALTER_CLIENT_QUOTAS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS


def entry(entity: list[tuple[str, str | None]], *ops: tuple[str, float | None]) -> dict:
    return {"Entity": [{"EntityType": t, "EntityName": n} for t, n in entity],
            "Ops": [{"Key": k, "Value": 0.0 if v is None else v, "Remove": v is None} for k, v in ops]}


def quotas(*entries: dict, validate_only: bool = False) -> tuple[int, dict]:
    return QUOTAS, {"Entries": list(entries), "ValidateOnly": validate_only}


def upsert(name: str, mechanism: int = 1, iterations: int = 4096, password: bytes = b"pw") -> dict:
    salted = hashlib.pbkdf2_hmac("sha512" if mechanism == 2 else "sha256", password, b"salt", max(iterations, 1))
    return {"Name": name, "Mechanism": mechanism, "Iterations": iterations, "Salt": b"salt",
            "SaltedPassword": salted}


def delete(name: str, mechanism: int = 1) -> dict:
    return {"Name": name, "Mechanism": mechanism}


def scram(deletions=(), upsertions=()) -> tuple[int, dict]:
    return SCRAM, {"Deletions": list(deletions), "Upsertions": list(upsertions)}


P, C, RP, CM, CCR = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate",
                     "connection_creation_rate")
STEPS: list[tuple[int, dict]] = [
    quotas(entry([("client-id", "c1")], (P, 1024.0)),
           entry([("client-id", None)], (C, 2048.0), (RP, 50.0)),
           entry([("user", "alice"), ("client-id", "c1")], (RP, 12.5), (CM, 3.0), (P, 10.0), (C, 20.0)),
           entry([("client-id", None), ("user", None)], (P, 1000.0)),
           entry([("ip", "192.168.1.7")], (CCR, 20.0)),
           entry([("ip", None)], (CCR, 5.0)),
           entry([("ip", "::1")], (CCR, 1.0)),
           # IP literals in Java's forms (a name that is none would cost Kafka's controller a DNS lookup)
           entry([("ip", "127.1")], (CCR, 2.0)),
           entry([("ip", "01.2.3.4")], (CCR, 3.0)),
           entry([("ip", "[::1]")], (CCR, 4.0)),
           entry([("ip", "::01.2.3.4")], (CCR, 5.0)),
           entry([("user", "x"), ("user", "y")], (P, 7.0))),
    quotas(entry([], (P, 1.0)),
           entry([("group", "g")], (P, 1.0)),
           entry([("user", "")], (P, 1.0)),
           entry([("client-id", "")], (P, 1.0)),
           entry([("ip", "")], (CCR, 1.0)),
           entry([("ip", "10.0.0.1"), ("user", "u")], (CCR, 1.0)),
           entry([("ip", "10.0.0.2")], (P, 1.0)),
           entry([("ip", "10.0.0.3")], (CCR, 2.5)),
           entry([("ip", "10.0.0.4")], (CCR, 2147483648.0)),
           entry([("user", "u1")], (CCR, 1.0)),
           entry([("user", "u2")], (P, 0.0)),
           entry([("user", "u3")], (RP, -1.5)),
           entry([("user", "u4")], (RP, float("inf"))),
           entry([("user", "u5")], (P, float("nan"))),
           entry([("user", "u6")], (C, 1.5)),
           entry([("user", "u7")], (C, 1e19)),
           entry([("user", "u8")], (RP, 5.0), ("nope", 1.0)),
           entry([("user", "u9")], (P, 1000.0000001), (RP, 1e300)),
           entry([("user", "dup")], (P, 1.0), (P, 2.0)),
           entry([("user", "twice")], (P, 1.0)),
           entry([("user", "twice")], (C, 1.0))),
    # no change, a change, a removal of a key set, of one not set, of an unknown key
    quotas(entry([("client-id", "c1")], (P, 1024.0), (C, None)),
           entry([("client-id", None)], (C, 4096.0), (RP, None)),
           entry([("user", "alice"), ("client-id", "c1")], (RP, None), (CM, None), ("whatever", None)),
           entry([("ip", None)], (CCR, None))),
    quotas(entry([("user", "v")], (P, 5.0)), entry([("user", "")], (P, 5.0)), validate_only=True),
    # seven ops: Kafka's HashMap(7) of them grows to 16 buckets (the records' order follows it)
    quotas(entry([("user", "big")], ("a", None), (P, 1.0), ("b", None), (C, 2.0), (RP, 3.0), ("c", None), (CM, 4.0))),
    scram(upsertions=[upsert(n) for n in ("carol", "bob", "alice", "dave", "erin")] + [upsert("frank", 2, 16384)]),
    scram(deletions=[delete("alice"), delete("bob", 2), delete(""), delete("x", 7)],
          upsertions=[upsert("g", iterations=4095), upsert("h", iterations=16385), upsert("", iterations=4096),
                      upsert("i", mechanism=3), upsert("j", mechanism=0), upsert("bob"),
                      {**upsert("k"), "SaltedPassword": b""}, upsert("carol", 2, password=b"new")]),
    scram(deletions=[delete("a1"), delete("carol"), delete("carol", 2), delete("dave")],
          upsertions=[upsert("dave"), upsert("erin"), upsert("erin", 2), upsert("frank", 2, password=b"again")]),
    # twenty users (a HashMap of 32 buckets), some deleted then named again (the map held more than it ends with)
    scram(deletions=[delete("erin"), delete("frank", 2)] + [delete(f"gone{i}") for i in range(3)],
          upsertions=[upsert(f"user{i}") for i in range(20)] + [upsert("erin", 2), upsert("frank")]),
    scram(),
]


def ask(ports: list[int], api: int, body: dict) -> dict:
    """The answer of the active controller (a node that is not tells NOT_CONTROLLER for each item)."""
    deadline = time.monotonic() + 60
    answer: dict = {}
    while True:
        for port in ports:
            try:
                with KafkaConnection("127.0.0.1", port, timeout=30) as conn:
                    answer = conn.request(api, conn.version_for(api), body)
            except OSError as e:  # (not listening yet)
                answer = {"error": str(e)}
                continue
            items = answer.get("Entries", answer.get("Results")) or []
            if not items or any(i["ErrorCode"] != Errors.NOT_CONTROLLER for i in items):
                return answer
        assert time.monotonic() < deadline, f"no active controller among {ports}: {answer}"
        time.sleep(0.5)


def normalized(api: int, answer: dict) -> list:
    if api == SCRAM:
        return [(r["User"], r["ErrorCode"], r["ErrorMessage"]) for r in answer["Results"]]
    return sorted(((sorted((e["EntityType"], e["EntityName"] or "") for e in r["Entity"]),
                    r["ErrorCode"], r["ErrorMessage"]) for r in answer["Entries"]), key=repr)


def run_steps(ports: list[int]) -> list:
    ask(ports, QUOTAS, {"Entries": [], "ValidateOnly": True})
    # a first write that waits for the active controller (the others answer NOT_CONTROLLER)
    ask(ports, QUOTAS, {"Entries": [entry([("user", "warmup")], (P, 1.0))], "ValidateOnly": True})
    return [normalized(api, ask(ports, api, body)) for api, body in STEPS]


def records(log_dir: Path) -> list[tuple[int, dict]]:
    out = []
    for seg in sorted(log_dir.glob("*.log")):
        for batch in batches(seg):
            if batch.is_control:
                continue
            for r in batch.records():
                key, _v, data = decode_metadata_record(r.value)
                if key in KEYS:
                    out.append((key, data))
    return out


@pytest.mark.parametrize("release", ["4.4", "3.4"])  # (3.4: below 3.5-IV2, no SCRAM)
def test_the_same_quota_and_scram_answers_and_records_from_kafkas_controller_and_kraftkits(kafka_jars, tmp_path,
                                                                                           release):
    jars.ensure_kafka(VERSION)
    java = jars.require_java()
    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    procs: list[KraftkitProcess] = []
    try:
        for i, port in ports.items():
            props = tmp_path / f"k{i}.properties"
            props.write_text(controller_properties(i, port, voters, tmp_path / f"k{i}"))
            subprocess.run([java, "-Xmx256m", "-cp", jars.classpath(VERSION), "kafka.tools.StorageTool", "format",
                            "--cluster-id", cid, "--config", str(props), "--release-version", release],
                           check=True, capture_output=True, timeout=120)
        for i in ports:
            procs.append(KraftkitProcess(["controller", "run"], ["--config", str(tmp_path / f"k{i}.properties")],
                                         tmp_path / f"k{i}.log"))
        ours = run_steps(list(ports.values()))
        deadline = time.monotonic() + 30
        while len(records(tmp_path / "k2" / "__cluster_metadata-0")) < len(records(tmp_path / "k1" /
                                                                                  "__cluster_metadata-0")):
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0], "\n".join(p.log_tail() for p in procs)
    our_records = records(tmp_path / "k1" / "__cluster_metadata-0")

    with KafkaQuorum(tmp_path / "kafka", VERSION, broker=False, release_version=release) as q:
        theirs = run_steps(list(q.controller_ports.values()))
        kafka_log = q.metadata_log_dir(1)
        deadline = time.monotonic() + 30
        while (their_records := records(kafka_log)) != our_records and time.monotonic() < deadline:
            time.sleep(0.2)  # (node 1 may be a follower a little behind the last commit)

    differ = [f"step {i}:\nKafka:    {k}\nkraftkit: {o}" for i, (k, o) in enumerate(zip(theirs, ours, strict=True))
              if k != o]
    assert not differ, "\n".join(differ)
    assert their_records == our_records
    # the sequence reached what it is about: records of every kind, and refusals of many kinds
    assert {k for k, _d in our_records} == (set(KEYS) if release == "4.4" else {CLIENT_QUOTA})
    assert len(our_records) > 20 and len({code for step in ours for *_x, code, _m in step}) >= 3
    if release == "4.4":
        assert len({code for step in ours for *_x, code, _m in step}) >= 6
    else:
        assert {code for step in ours[5:] for *_x, code, _m in step} == {Errors.UNSUPPORTED_VERSION}
