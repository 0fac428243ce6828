"""kraftkit's PartitionChange against Kafka 4.4's own ``PartitionChangeBuilder``: thousands of seeded
partition states, targets, elections, metadata.versions and eligible-leader-replica settings run
through both; the PartitionChangeRecords (or the absence of one) must be the same, field for field,
at the same record version. Kafka's side runs in one JVM (tests/harness/java/PartitionChanges.java)."""

from __future__ import annotations

import base64
import json
import random
import uuid

import pytest

from kraftkit._core import decode_metadata_record, encode_metadata_record
from kraftkit._kafka import PARTITION_CHANGE
from kraftkit.controller.partition_change import Election, PartitionChange
from kraftkit.features.registry import registry
from kraftkit.metadata.image import uuid_text
from tests.harness import tools

pytestmark = pytest.mark.kafka

NEW = "4.4.0"
SOURCE = tools.HERE / "java" / "PartitionChanges.java"
CASES = 8000
DIRS = [uuid.UUID(int=0), uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=0xD1), uuid.UUID(int=0xD2)]
#: broker id pools: small ids, Kafka-style 1000s, and ids that share Java HashSet buckets (16, 32, 48)
POOLS = [list(range(0, 6)), list(range(1000, 1007)), [1, 2, 16, 17, 32, 33, 48]]
MVS = ["3.4-IV0", "3.5-IV2", "3.6-IV0", "3.7-IV2", "3.9-IV0", "4.0-IV1", "4.4-IV2"]


def _uuid(text: str) -> uuid.UUID:
    """The UUID of Kafka's text form of one (URL-safe base64 of its 16 bytes)."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def _subset(rng: random.Random, items: list[int], allow_empty: bool = True) -> list[int]:
    out = [x for x in items if rng.random() < 0.5]
    if not out and not allow_empty:
        out = [rng.choice(items)]
    rng.shuffle(out)
    return out


def make_case(rng: random.Random, index: int) -> dict:
    pool = rng.choice(POOLS)
    mv = registry().metadata_version(rng.choice(MVS))
    elr = mv.supported("elr") and rng.random() < 0.6
    replicas = rng.sample(pool, rng.randint(1, min(5, len(pool))))
    isr = _subset(rng, replicas, allow_empty=elr)
    leader = rng.choice([*isr, -1]) if isr else -1
    outside = [r for r in replicas if r not in isr]
    elr_members = _subset(rng, outside) if elr else []
    last_known = rng.choice([[], [rng.choice(replicas)], _subset(rng, replicas)]) if elr else []
    adding: list[int] = []
    removing: list[int] = []
    target_replicas = None
    if rng.random() < 0.15 and len(replicas) > 1:  # a reassignment in progress
        k = rng.randint(1, len(replicas) - 1)
        adding, removing = replicas[:k], replicas[k:]
        rng.shuffle(adding)
        if rng.random() < 0.3:
            removing = []
    elif rng.random() < 0.15:  # a new replica set
        target_replicas = rng.sample(pool, rng.randint(1, min(5, len(pool))))
    recovery = 1 if (len(isr) == 1 and rng.random() < 0.2) else 0
    target_set = target_replicas or replicas
    return {
        "topicId": uuid_text(uuid.UUID(int=rng.getrandbits(128))),
        "partitionId": index,
        "replicas": replicas,
        "dirs": [uuid_text(rng.choice(DIRS)) for _ in replicas],
        "isr": isr,
        "removing": removing,
        "adding": adding,
        "elr": elr_members,
        "lastKnownElr": last_known,
        "leader": leader,
        "recovery": recovery,
        "leaderEpoch": rng.randint(0, 20),
        "partitionEpoch": rng.randint(0, 40),
        "acceptable": _subset(rng, pool),
        "mv": mv.level,
        "minIsr": rng.randint(1, len(replicas)),
        "elrEnabled": elr,
        "election": rng.choice([e.name for e in Election]),
        "targetIsr": _subset(rng, target_set, allow_empty=elr or rng.random() < 0.2) if rng.random() < 0.8 else None,
        "targetReplicas": target_replicas,
        "targetRemoving": None,
        "targetAdding": None,
        "uncleanShutdown": [rng.choice(replicas)] if rng.random() < 0.15 else None,
        "targetRecovery": rng.choice([0, 1]) if rng.random() < 0.1 else None,
        "defaultDir": uuid_text(DIRS[3]),
    }


def kraftkit_change(case: dict) -> str:
    """Our record for ``case``, printed as Kafka's JSON converter prints it (field names, order
    and defaults come from decoding our own bytes at the record version)."""
    mv = registry().metadata_version(case["mv"])
    partition = {
        "Replicas": case["replicas"], "Isr": case["isr"], "RemovingReplicas": case["removing"],
        "AddingReplicas": case["adding"], "Leader": case["leader"], "LeaderRecoveryState": case["recovery"],
        "LeaderEpoch": case["leaderEpoch"], "PartitionEpoch": case["partitionEpoch"],
        "Directories": [_uuid(d) for d in case["dirs"]], "EligibleLeaderReplicas": case["elr"],
        "LastKnownElr": case["lastKnownElr"],
    }
    acceptable = set(case["acceptable"])
    b = PartitionChange(partition, _uuid(case["topicId"]), case["partitionId"], acceptable.__contains__, mv,
                        case["minIsr"], elr=case["elrEnabled"], election=Election[case["election"]],
                        default_dir=lambda _b: _uuid(case["defaultDir"]))
    if case["targetIsr"] is not None:
        b.target_isr = list(case["targetIsr"])
    if case["targetReplicas"] is not None:
        b.target_replicas = list(case["targetReplicas"])
    if case["uncleanShutdown"] is not None:
        b.unclean_shutdown = list(case["uncleanShutdown"])
    if case["targetRecovery"] is not None:
        b.target_recovery = case["targetRecovery"]
    change = b.build()
    if change is None:
        return "null"
    version = mv.partition_change_record_version
    _key, _v, data = decode_metadata_record(encode_metadata_record(PARTITION_CHANGE, version, change))
    out = {}
    for name, value in data.items():
        key = name[0].lower() + name[1:]
        if isinstance(value, uuid.UUID):
            value = uuid_text(value)
        elif isinstance(value, list):
            value = [uuid_text(v) if isinstance(v, uuid.UUID) else v for v in value]
        out[key] = value
    return json.dumps(out, separators=(",", ":")) + f" {version}"


#: PartitionChangeRecord's defaults: its tagged fields, which Kafka's JSON converter leaves out when they have them
DEFAULTS = {"leader": -2, "leaderRecoveryState": -1}


def _normalize(line: str) -> tuple[dict | None, int | None]:
    if line == "null":
        return None, None
    text, _, version = line.rpartition(" ")
    fields = {k: v for k, v in json.loads(text).items() if v is not None and (k not in DEFAULTS or DEFAULTS[k] != v)}
    return fields, int(version)


def test_partition_changes_match_kafka(tmp_path):
    rng = random.Random(20261125)
    cases = [make_case(rng, i) for i in range(CASES)]
    spec = tmp_path / "cases.jsonl"
    spec.write_text("".join(json.dumps(c) + "\n" for c in cases))
    classes = tools.compile_java(NEW, SOURCE, "partition-changes")
    if classes is None:
        proc = tools.run_tool(NEW, SOURCE, [spec], timeout=300)
    else:
        proc = tools.run_tool(NEW, "PartitionChanges", [spec], timeout=300, extra_classpath=[classes])
    theirs = proc.stdout.splitlines()
    assert len(theirs) == CASES
    changes = 0
    mismatches = []
    for case, kafka_line in zip(cases, theirs, strict=True):
        expected = _normalize(kafka_line)
        got = _normalize(kraftkit_change(case))
        changes += expected[0] is not None
        if got != expected:
            mismatches.append((case, kafka_line, got))
    assert not mismatches, f"{len(mismatches)} of {CASES} differ; first: {mismatches[:3]}"
    assert changes > CASES // 2  # most cases change something: the comparison is not of empties
