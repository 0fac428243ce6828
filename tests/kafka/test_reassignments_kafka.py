"""kraftkit's reassignment decisions against Kafka 4.4's own: thousands of seeded partitions (some with
a reassignment in progress), each given a new target or cancelled, run through kraftkit's
``plan_reassignment`` / ``plan_cancellation`` and PartitionChange, and through Kafka's
``PartitionReassignmentReplicas`` / ``PartitionReassignmentRevert`` and PartitionChangeBuilder set up
as ``ReplicationControlManager.changePartitionReassignment`` / ``cancelPartitionReassignment`` set
them up (tests/harness/java/Reassignments.java). The PartitionChangeRecords (or the absence of one,
or the refusal) must be the same, field for field, at the same record version."""

from __future__ import annotations

import json
import random
import uuid

import pytest

from kraftkit._core import decode_metadata_record, encode_metadata_record
from kraftkit._kafka import PARTITION_CHANGE
from kraftkit.controller.cluster import ControllerError
from kraftkit.controller.partition_change import Election, PartitionChange
from kraftkit.controller.reassignments import plan_cancellation, plan_reassignment
from kraftkit.features.registry import registry
from kraftkit.metadata.image import uuid_text
from kraftkit.protocol.messages import Errors
from tests.harness import tools
from tests.kafka.test_partition_change_kafka import DIRS, MVS, NEW, POOLS, _normalize, _subset, _uuid

pytestmark = pytest.mark.kafka

SOURCE = tools.HERE / "java" / "Reassignments.java"
CASES = 3000


def make_case(rng: random.Random, index: int) -> dict:
    pool = rng.choice(POOLS)
    mv = registry().metadata_version(rng.choice(MVS))
    elr = mv.supported("elr") and rng.random() < 0.5
    original = rng.sample(pool, rng.randint(1, min(4, len(pool))))
    replicas, adding, removing = original, [], []
    if rng.random() < 0.5:  # a reassignment in progress, as Kafka writes one
        goal = rng.sample(pool, rng.randint(1, min(4, len(pool))))
        removing = sorted(set(original) - set(goal))
        adding = sorted(set(goal) - set(original))
        replicas = goal + removing
    isr = _subset(rng, replicas, allow_empty=elr)
    leader = rng.choice([*isr, -1]) if isr else -1
    outside = [r for r in replicas if r not in isr]
    kind = rng.random()
    if kind < 0.3:
        target = None  # a cancellation
    elif kind < 0.4:
        target = list(replicas)
    elif kind < 0.5:
        target = rng.sample(replicas, len(replicas))  # a reordering
    else:
        target = rng.sample(pool, rng.randint(1, min(4, len(pool))))
    return {
        "topicId": uuid_text(uuid.UUID(int=rng.getrandbits(128))),
        "partitionId": index,
        "replicas": replicas,
        "dirs": [uuid_text(rng.choice(DIRS)) for _ in replicas],
        "isr": isr,
        "removing": removing,
        "adding": adding,
        "elr": _subset(rng, outside) if elr else [],
        "lastKnownElr": rng.choice([[], [rng.choice(replicas)]]) if elr else [],
        "leader": leader,
        "recovery": 1 if (len(isr) == 1 and rng.random() < 0.1) else 0,
        "leaderEpoch": rng.randint(0, 20),
        "partitionEpoch": rng.randint(0, 40),
        "acceptable": _subset(rng, pool) if rng.random() < 0.5 else list(pool),
        "mv": mv.level,
        "minIsr": rng.randint(1, len(replicas)),
        "elrEnabled": elr,
        "uncleanAllowed": rng.random() < 0.3,
        "target": target,
        "defaultDir": uuid_text(DIRS[3]),
    }


def kraftkit_line(case: dict) -> str:
    mv = registry().metadata_version(case["mv"])
    partition = {
        "Replicas": case["replicas"], "Isr": case["isr"], "RemovingReplicas": case["removing"],
        "AddingReplicas": case["adding"], "Leader": case["leader"], "LeaderRecoveryState": case["recovery"],
        "LeaderEpoch": case["leaderEpoch"], "PartitionEpoch": case["partitionEpoch"],
        "Directories": [_uuid(d) for d in case["dirs"]], "EligibleLeaderReplicas": case["elr"],
        "LastKnownElr": case["lastKnownElr"],
    }
    acceptable = set(case["acceptable"])
    unclean = case["uncleanAllowed"]
    # built as the controller builds it (the topic's election), the plan then sets its own
    b = PartitionChange(partition, _uuid(case["topicId"]), case["partitionId"], acceptable.__contains__, mv,
                        case["minIsr"], elr=case["elrEnabled"], election=Election.UNCLEAN if unclean else Election.ONLINE,
                        default_dir=lambda _b: _uuid(case["defaultDir"]))
    try:
        if case["target"] is None:
            plan_cancellation(b, unclean, f"t:{case['partitionId']}")
        else:
            plan_reassignment(b, case["target"])
    except ControllerError as e:
        return {Errors.NO_REASSIGNMENT_IN_PROGRESS: "none-in-progress",
                Errors.INVALID_REPLICA_ASSIGNMENT: "unclean-refused"}[Errors(e.code)]
    change = b.build()
    if change is None:
        return "null"
    version = mv.partition_change_record_version
    _key, _v, data = decode_metadata_record(encode_metadata_record(PARTITION_CHANGE, version, change))
    out = {}
    for name, value in data.items():
        if isinstance(value, uuid.UUID):
            value = uuid_text(value)
        elif isinstance(value, list):
            value = [uuid_text(v) if isinstance(v, uuid.UUID) else v for v in value]
        out[name[0].lower() + name[1:]] = value
    return json.dumps(out, separators=(",", ":")) + f" {version}"


def _outcome(line: str):
    return line if line in ("none-in-progress", "unclean-refused") else _normalize(line)


def test_reassignment_records_match_kafka(tmp_path):
    rng = random.Random(20261125)
    cases = [make_case(rng, i) for i in range(CASES)]
    spec = tmp_path / "cases.jsonl"
    spec.write_text("".join(json.dumps(c) + "\n" for c in cases))
    classes = tools.compile_java(NEW, SOURCE, "reassignments")
    if classes is None:
        proc = tools.run_tool(NEW, SOURCE, [spec], timeout=300)
    else:
        proc = tools.run_tool(NEW, "Reassignments", [spec], timeout=300, extra_classpath=[classes])
    theirs = proc.stdout.splitlines()
    assert len(theirs) == CASES, proc.stderr[-2000:]
    mismatches = []
    outcomes: dict[str, int] = {}
    for case, kafka_line in zip(cases, theirs, strict=True):
        expected = _outcome(kafka_line)
        got = _outcome(kraftkit_line(case))
        kind = expected if isinstance(expected, str) else ("null" if expected[0] is None else "record")
        outcomes[kind] = outcomes.get(kind, 0) + 1
        if got != expected:
            mismatches.append((case, kafka_line, got))
    assert not mismatches, f"{len(mismatches)} of {CASES} differ; first: {mismatches[:3]}"
    # every outcome is exercised, most cases write a record: the comparison is not of empties
    assert set(outcomes) == {"record", "null", "none-in-progress", "unclean-refused"}, outcomes
    assert outcomes["record"] > CASES // 2, outcomes
