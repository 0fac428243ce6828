"""The metadata image against what real Kafka's admin APIs report.

``metadata_scenario`` drives a real Kafka node through varied metadata (topics with many
partitions, a partition count increase, a deleted and recreated topic, replicas moved between
log dirs, topic / broker / cluster-default / client-metrics / group configs, client quotas,
ACLs, SCRAM credentials, a delegation token) and captures, while the node runs, what
describeTopics, describeConfigs, describeClientQuotas, describeAcls,
describeUserScramCredentials, describeFeatures, describeCluster, describeMetadataQuorum,
describeLogDirs and describeDelegationToken report. kraftkit's image of the node's
``__cluster_metadata-0`` at the broker's metadata offset must say the same, section by
section.
"""

from __future__ import annotations

import collections
import json
import sys
import subprocess

import pytest

from kraftkit.metadata.image import (
    ACCESS_CONTROL_ENTRY, CLIENT_QUOTA, CONFIG, DELEGATION_TOKEN, PARTITION, PARTITION_CHANGE, REMOVE_ACCESS_CONTROL_ENTRY,
    REMOVE_TOPIC, REMOVE_USER_SCRAM_CREDENTIAL, USER_SCRAM_CREDENTIAL, load_image, load_snapshot, uuid_text,
)
from kraftkit.metadata.records import decode_metadata_batch
from kraftkit.metadata.snapshot import list_snapshots
from kraftkit.metadata.source import batches, files_in
from tests.harness import jars, metadata_scenario
from tests.harness.jars import HarnessError

pytestmark = pytest.mark.kafka

#: describeConfigs source of a resource's own dynamic entries
OWN_SOURCE = {"TOPIC": "DYNAMIC_TOPIC_CONFIG", "CLIENT_METRICS": "DYNAMIC_CLIENT_METRICS_CONFIG",
              "GROUP": "DYNAMIC_GROUP_CONFIG"}
#: ConfigResource.Type name -> ConfigRecord ResourceType
CONFIG_TYPE = {"TOPIC": 2, "BROKER": 4, "CLIENT_METRICS": 16, "GROUP": 32}


@pytest.fixture(scope="module", params=[jars.KAFKA_4, jars.KAFKA_NEWEST])
def oracle(request, kafka_jars, tmp_path_factory):
    """The metadata oracle of each 4.x release the tables know (cached in .cache/)."""
    try:
        return metadata_scenario.build_metadata_oracle(tmp_path_factory.mktemp(f"metadata-{request.param}") / "data",
                                                       version=request.param)
    except HarnessError as e:
        pytest.fail(f"kafka harness: {e}", pytrace=False)


@pytest.fixture(scope="module")
def admin(oracle) -> dict:
    return oracle.admin


@pytest.fixture(scope="module")
def image(oracle, admin):
    """The image at the broker's metadata offset when it answered describeFeatures
    (FinalizedFeaturesEpoch is the image's last offset)."""
    img = load_image(oracle.metadata_log_dir, at=admin["features_epoch"] + 1)
    assert img.provenance.offset == admin["features_epoch"]
    return img


def test_capture_offsets_bracket_a_quiet_log(oracle, admin, image):
    """Between the quorum's high watermark before the capture, the broker's offset and the end
    of the log (after the clean shutdown) only NoOpRecords were written: all images agree."""
    d = oracle.metadata_log_dir
    assert admin["quorum_before"] <= admin["features_epoch"] + 1 <= admin["quorum_after"] + 1
    assert load_image(d, at=admin["quorum_before"]) == image
    assert load_image(d, at=admin["quorum_after"]) == image
    assert load_image(d) == image


def test_topics(admin, image):
    want = {name: {"id": t["id"],
                   "partitions": {int(p): (x["leader"], x["replicas"], x["isr"], x["elr"], x["last_known_elr"])
                                  for p, x in t["partitions"].items()}}
            for name, t in admin["topics"].items()}
    got = {t.name: {"id": uuid_text(t.id),
                    "partitions": {p: (x["Leader"], x["Replicas"], x["Isr"], x["EligibleLeaderReplicas"],
                                       x["LastKnownElr"]) for p, x in t.partitions.items()}}
           for t in image.topics.values()}
    assert got == want
    # what the scenario did shows in both
    sizes = {name: len(t["partitions"]) for name, t in want.items()}
    assert sizes == {**{n: p for n, (p, _) in metadata_scenario.TOPICS.items()},
                     "growing": metadata_scenario.GROWN_PARTITIONS, "doomed": metadata_scenario.RECREATED[1]}
    assert sorted(image.topic_ids) == sorted(want)


def _own_dynamic(resource: str, entries: dict) -> dict[str, str]:
    rtype, name = resource.split(":", 1)
    source = OWN_SOURCE.get(rtype) or ("DYNAMIC_DEFAULT_BROKER_CONFIG" if name == "" else "DYNAMIC_BROKER_CONFIG")
    out = {}
    for k, e in entries.items():
        if e["source"] == source:
            assert not e["sensitive"], (resource, k)
            out[k] = e["value"]
    return out


def test_configs(admin, image):
    want = {}
    for resource, entries in admin["configs"].items():
        rtype, name = resource.split(":", 1)
        own = _own_dynamic(resource, entries)
        if own:
            want[(CONFIG_TYPE[rtype], name)] = own
    # every config resource of the image was described (no other broker, no logger configs)
    assert image.configs == want
    assert (4, "") in want and (4, "1") in want and (16, "producer-metrics") in want and (32, "app-group") in want
    # the deleted keys are gone (ConfigRecord with a null value) ...
    assert "log.cleaner.io.max.bytes.per.second" not in want[(4, "")]
    assert "min.insync.replicas" not in want[(2, "events")]
    # ... and so are the configs of the deleted topic (RemoveTopicRecord), not those of its successor
    assert want[(2, "doomed")] == metadata_scenario.RECREATED[2]
    # broker 1 inherits the cluster default: describeConfigs of broker 1 shows those entries too
    inherited = {k: e["value"] for k, e in admin["configs"]["BROKER:1"].items()
                 if e["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"}
    assert inherited == {k: v for k, v in want[(4, "")].items() if k not in want[(4, "1")]}


def test_client_quotas(admin, image):
    want = {tuple(sorted(q["entity"].items())): q["values"] for q in admin["client_quotas"]}
    assert image.client_quotas == want
    assert len(want) == 10
    assert image.client_quotas[(("user", "alice"),)] == {"producer_byte_rate": 1048576.0}  # one key removed


def test_acls(admin, image):
    want = sorted((a["resource_type_code"], a["resource_name"], a["pattern_type_code"], a["principal"], a["host"],
                   a["operation_code"], a["permission_code"]) for a in admin["acls"])
    got = sorted((a["ResourceType"], a["ResourceName"], a["PatternType"], a["Principal"], a["Host"],
                  a["Operation"], a["PermissionType"]) for a in image.acls.values())
    assert got == want
    assert len(want) == 8  # 9 added, 1 removed
    assert len({a["Id"] for a in image.acls.values()}) == len(image.acls)


def test_scram(admin, image):
    want = sorted((s["user"], s["mechanism_code"], s["iterations"]) for s in admin["scram"])
    got = sorted((c["Name"], c["Mechanism"], c["Iterations"]) for c in image.scram.values())
    assert got == want
    assert ("alice", 1, 8192) in want and ("alice", 2, 4096) in want and ("bob", 2, 10000) in want
    assert not any(u == "carol" for u, _, _ in want)  # removed again
    for (mech, user), c in image.scram.items():
        assert (c["Mechanism"], c["Name"]) == (mech, user)
        assert len(c["StoredKey"]) == len(c["ServerKey"]) == (32 if mech == 1 else 64)
        assert c["Salt"]


def test_features(admin, image):
    fin = {k: v["max"] for k, v in admin["features"]["finalized"].items()}
    assert fin.pop("kraft.version") == image.kraft_version == 1
    assert image.finalized_features == fin
    assert image.metadata_version == fin["metadata.version"]


def test_delegation_token(oracle, admin, image):
    (tok,) = admin["delegation_tokens"]
    assert tok == oracle.token  # describe == what createDelegationToken returned
    assert image.delegation_tokens == {tok["token_id"]: {
        "Owner": tok["owner"], "Requester": tok["requester"], "Renewers": tok["renewers"],
        "IssueTimestamp": tok["issue_timestamp"], "MaxTimestamp": tok["max_timestamp"],
        "ExpirationTimestamp": tok["expiry_timestamp"], "TokenId": tok["token_id"]}}


def test_cluster_quorum_and_log_dirs(oracle, admin, image):
    # describeCluster: the one broker, its PLAINTEXT endpoint, unfenced
    (node,) = admin["cluster"]["brokers"]
    assert sorted(image.brokers) == [node["id"]] == [admin["cluster"]["controller"]]
    b = image.brokers[node["id"]]
    ep = {e["Name"]: (e["Host"], e["Port"]) for e in b["EndPoints"]}
    assert ep["PLAINTEXT"] == (node["host"], node["port"])
    assert set(ep) == {"PLAINTEXT", "SASL_PLAINTEXT"}
    assert (b["Rack"], b["Fenced"]) == (node["rack"], node["fenced"]) == (None, False)
    # describeMetadataQuorum: the voter set
    q = admin["quorum"]
    assert [(v["VoterId"], uuid_text(v["VoterDirectoryId"])) for v in image.voters["Voters"]] == \
        [(v["id"], v["directory_id"]) for v in q["voters"]]
    assert sorted(image.controllers) == [q["leader_id"]]
    # describeLogDirs: where each replica lives == the partition's Directories in the image
    dir_ids = oracle.directory_ids()
    assert sorted(uuid_text(u) if not isinstance(u, str) else u for u in b["LogDirs"]) == sorted(dir_ids.values())
    where = {tp: dir_ids[path] for path, tps in admin["log_dirs"].items() for tp in tps}
    got = {f"{t.name}-{p}": [uuid_text(d) for d in x["Directories"]]
           for t in image.topics.values() for p, x in t.partitions.items()}
    assert got == {tp: [d] for tp, d in where.items()}
    # the moves to the other log dir are PartitionChangeRecords with Directories
    names = {t.id: t.name for t in image.topics.values()}
    moved = {(names.get(r["TopicId"]), r["PartitionId"]) for k, _, r in _records(oracle)
             if k == PARTITION_CHANGE and r.get("Directories")}
    assert set(metadata_scenario.MOVED) <= moved


def _records(oracle) -> list[tuple[int, int, dict]]:
    """Every metadata record of the log (not the snapshots), in order."""
    out = []
    for f in files_in(oracle.metadata_log_dir):
        if f.kind != "segment":
            continue
        for batch in batches(f.path):
            for _, api_key, ver, data in decode_metadata_batch(batch):
                if api_key is not None:
                    out.append((api_key, ver, data))
    return out


def test_every_record_decodes(oracle):
    files = files_in(oracle.metadata_log_dir)
    kinds = collections.Counter(f.kind for f in files)
    assert kinds["snapshot"] >= 3 and kinds["segment"] >= 3, kinds
    n = 0
    types: collections.Counter = collections.Counter()
    for f in files:
        for batch in batches(f.path):
            for _, api_key, _, data in decode_metadata_batch(batch):
                n += 1
                types[api_key] += 1
                assert api_key is not None or data is None or isinstance(data, dict)
    assert n > 500
    # the scenario wrote the record types that remove and replace things
    for k in (PARTITION, PARTITION_CHANGE, CONFIG, CLIENT_QUOTA, ACCESS_CONTROL_ENTRY, REMOVE_ACCESS_CONTROL_ENTRY,
              USER_SCRAM_CREDENTIAL, REMOVE_USER_SCRAM_CREDENTIAL,
              REMOVE_TOPIC, DELEGATION_TOKEN):
        assert types[k] > 0, k
    deleted = [d for k, _, d in _records(oracle) if k == CONFIG and d["Value"] is None]
    assert {(d["ResourceType"], d["ResourceName"], d["Name"]) for d in deleted} >= {
        (4, "", "log.cleaner.io.max.bytes.per.second"), (2, "events", "min.insync.replicas")}
    assert any(d["Remove"] for k, _, d in _records(oracle) if k == CLIENT_QUOTA)
    # and kraftkit's CLI dumps all of it
    proc = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "metadata", "dump", "--json",
                           str(oracle.metadata_log_dir)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert sum(1 for x in lines if "offset" in x) == n


def test_snapshots_plus_log_equal_log_alone(oracle):
    d = oracle.metadata_log_dir
    assert min(int(p.name[:20]) for p in d.glob("*.log")) == 0, "the log still covers everything"
    snaps = [s for s in list_snapshots(d) if s.end_offset > 0]
    assert len(snaps) >= 3
    log_alone = load_image(d, use_snapshots=False)
    newest = load_image(d)  # newest snapshot + the log after it
    assert newest == log_alone
    assert newest.provenance == log_alone.provenance
    for sid in snaps:
        assert load_snapshot(d / sid.file_name) == load_image(d, at=sid.end_offset, use_snapshots=False), sid


def test_kraftkit_snapshots_equal_kafkas(oracle, tmp_path):
    """At each of Kafka's snapshot points, the snapshot kraftkit writes from the log holds the
    same records as Kafka's (a multiset: Kafka's order within a section is hash order) --
    ACLs, SCRAM credentials, quotas, client-metrics/group configs and the token included."""
    from kraftkit.metadata.records import decode_metadata_record
    from kraftkit.metadata.snapshot import SnapshotReader
    from tests.kafka.test_image_kafka import _canon

    d = oracle.metadata_log_dir
    for sid in [s for s in list_snapshots(d) if s.end_offset > 0]:
        img = load_image(d, at=sid.end_offset, use_snapshots=False)
        out = tmp_path / str(sid)
        out.mkdir()
        mine = img.write_snapshot(out, sid)

        def recs(p):
            return sorted(repr(_canon(decode_metadata_record(v))) for _, v in SnapshotReader(p).records())

        assert recs(mine) == recs(d / sid.file_name), sid
