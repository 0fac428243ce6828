"""The metadata image from hand-made record sequences. Expected states follow Kafka's
documented replay semantics (Kafka's ``MetadataDelta``/``ClusterDelta``/``TopicsDelta`` replay; PartitionChangeRecord.json:
Leader -2 and null lists mean "no change"; every change bumps the partition epoch, a leader
change the leader epoch)."""

from __future__ import annotations

import uuid

import pytest

from kraftkit.metadata.delta import image_delta
from kraftkit.metadata.image import (
    MIGRATING,
    ReplayError,
    UnwritableMetadataError,
    load_image,
    load_snapshot,
    replay_records,
)
from kraftkit.metadata.records import decode_metadata_record
from kraftkit.metadata.snapshot import SnapshotId, SnapshotReader
from kraftkit.metadata.shell import ShellPathError, lookup, render

T1 = uuid.UUID("11111111-1111-1111-1111-111111111111")
T2 = uuid.UUID("22222222-2222-2222-2222-222222222222")
D1 = uuid.UUID("33333333-3333-3333-3333-333333333333")
INC = uuid.UUID("44444444-4444-4444-4444-444444444444")


def mv(level):
    return (12, 0, {"Name": "metadata.version", "FeatureLevel": level})


def broker(bid, epoch, fenced=True, **kw):
    return (0, 3, {"BrokerId": bid, "IncarnationId": INC, "BrokerEpoch": epoch, "Rack": kw.get("rack"),
                   "EndPoints": [{"Name": "PLAINTEXT", "Host": "h", "Port": 9092 + bid, "SecurityProtocol": 0}],
                   "Features": [{"Name": "metadata.version", "MinSupportedVersion": 7, "MaxSupportedVersion": 30}],
                   "Fenced": fenced, "LogDirs": kw.get("dirs", [])})


def topic(name, tid):
    return (2, 0, {"Name": name, "TopicId": tid})


def partition(tid, pid, replicas, leader, **kw):
    return (3, 1, {"PartitionId": pid, "TopicId": tid, "Replicas": replicas, "Isr": kw.get("isr", replicas),
                   "RemovingReplicas": [], "AddingReplicas": [], "Leader": leader, "LeaderEpoch": 0,
                   "PartitionEpoch": 0, "Directories": kw.get("dirs", [])})


def change(tid, pid, **kw):
    return (5, 2, {"PartitionId": pid, "TopicId": tid, **kw})


def base():
    return [mv(17), broker(1, 10), broker(2, 11), topic("a", T1), partition(T1, 0, [1, 2], 1), partition(T1, 1, [2, 1], 2)]


def test_partition_change_semantics():
    img = replay_records(base())

    def part(pid=0):  # views are snapshots of the image: read them again after a replay
        return img.topic("a").partitions[pid]

    p = part()
    assert p["Directories"] == [MIGRATING, MIGRATING]  # empty directories = MIGRATING per replica
    # ISR shrink only: leader unchanged (-2 default), leader epoch kept, partition epoch +1
    replay_records([change(T1, 0, Isr=[1])], img)
    p = part()
    assert (p["Isr"], p["Leader"], p["LeaderEpoch"], p["PartitionEpoch"]) == ([1], 1, 0, 1)
    assert p["Replicas"] == [1, 2]  # null Replicas = unchanged
    # leader change: leader epoch +1 and partition epoch +1
    replay_records([change(T1, 0, Leader=2, Isr=[2])], img)
    p = part()
    assert (p["Leader"], p["LeaderEpoch"], p["PartitionEpoch"]) == (2, 1, 2)
    # Leader -1 (no leader) is a change too
    replay_records([change(T1, 0, Leader=-1, Isr=[], EligibleLeaderReplicas=[1, 2], LastKnownElr=[2])], img)
    p = part()
    assert (p["Leader"], p["LeaderEpoch"], p["PartitionEpoch"]) == (-1, 2, 3)
    assert (p["EligibleLeaderReplicas"], p["LastKnownElr"]) == ([1, 2], [2])
    # unclean recovery state; -1 (the default) keeps it
    replay_records([change(T1, 0, Leader=1, Isr=[1], LeaderRecoveryState=1)], img)
    p = part()
    assert p["LeaderRecoveryState"] == 1
    replay_records([change(T1, 0, Isr=[1, 2])], img)
    p = part()
    assert p["LeaderRecoveryState"] == 1 and p["PartitionEpoch"] == 5
    # reassignment with directories
    replay_records([change(T1, 0, Replicas=[1, 2, 3], AddingReplicas=[3], Directories=[D1, D1, D1])], img)
    p = part()
    assert p["Replicas"] == [1, 2, 3] and p["AddingReplicas"] == [3] and p["Directories"] == [D1] * 3
    # ClearElrRecord for every topic: a change only where there is an ELR
    before = part(1)["PartitionEpoch"]
    replay_records([(28, 0, {"TopicName": ""})], img)
    p = part()
    assert p["EligibleLeaderReplicas"] == [] and p["LastKnownElr"] == [] and p["PartitionEpoch"] == 7
    assert part(1)["PartitionEpoch"] == before


def test_unknown_partition_and_topic_errors_carry_the_offset():
    with pytest.raises(ReplayError, match=r"offset 6: Unable to find partition .*:7"):
        replay_records([*base(), change(T1, 7, Isr=[1])])
    with pytest.raises(ReplayError, match="Unable to delete topic"):
        replay_records([*base(), (9, 0, {"TopicId": T2})])


def test_brokers_fencing_shutdown_and_epochs():
    img = replay_records(base())
    assert img.brokers[1]["Fenced"] is True
    replay_records([(17, 0, {"BrokerId": 1, "BrokerEpoch": 10, "Fenced": -1})], img)
    assert img.brokers[1]["Fenced"] is False
    replay_records([(17, 1, {"BrokerId": 1, "BrokerEpoch": 10, "Fenced": 0, "InControlledShutdown": 1})], img)
    assert img.brokers[1]["InControlledShutdown"] is True and img.brokers[1]["Fenced"] is False
    replay_records([(7, 0, {"Id": 1, "Epoch": 10})], img)  # FenceBrokerRecord (MV < 3.3-IV2 style)
    assert img.brokers[1]["Fenced"] is True
    replay_records([(8, 0, {"Id": 2, "Epoch": 11})], img)
    assert img.brokers[2]["Fenced"] is False
    replay_records([(17, 2, {"BrokerId": 2, "BrokerEpoch": 11, "LogDirs": [D1]})], img)
    assert img.brokers[2]["LogDirs"] == [D1]
    with pytest.raises(ReplayError, match="did not match the current broker epoch, 10"):
        replay_records([(17, 0, {"BrokerId": 1, "BrokerEpoch": 9, "Fenced": 1})], img)
    with pytest.raises(ReplayError, match="broker 5, but that broker was not registered"):
        replay_records([(8, 0, {"Id": 5, "Epoch": 1})], img)
    # re-registration replaces (new epoch, fenced again); unregister removes
    replay_records([broker(2, 40, rack="r1"), (1, 0, {"BrokerId": 1, "BrokerEpoch": 10})], img)
    assert sorted(img.brokers) == [2] and img.brokers[2]["BrokerEpoch"] == 40 and img.brokers[2]["Rack"] == "r1"


def test_features_configs_quotas_security_and_removal():
    img = replay_records([
        *base(),
        (12, 0, {"Name": "group.version", "FeatureLevel": 1}),
        (12, 0, {"Name": "transaction.version", "FeatureLevel": 2}),
        (12, 0, {"Name": "transaction.version", "FeatureLevel": 0}),  # level 0 removes the feature
        (4, 0, {"ResourceType": 2, "ResourceName": "a", "Name": "retention.ms", "Value": "1"}),
        (4, 0, {"ResourceType": 2, "ResourceName": "a", "Name": "cleanup.policy", "Value": "compact"}),
        (4, 0, {"ResourceType": 2, "ResourceName": "a", "Name": "retention.ms", "Value": None}),  # null = delete
        (4, 0, {"ResourceType": 4, "ResourceName": "", "Name": "x", "Value": "1"}),
        (4, 0, {"ResourceType": 4, "ResourceName": "", "Name": "x", "Value": None}),  # resource disappears
        (14, 0, {"Entity": [{"EntityType": "user", "EntityName": "u"}], "Key": "producer_byte_rate", "Value": 10.0, "Remove": False}),
        (14, 0, {"Entity": [{"EntityType": "user", "EntityName": "u"}], "Key": "consumer_byte_rate", "Value": 5.0, "Remove": False}),
        (14, 0, {"Entity": [{"EntityType": "user", "EntityName": "u"}], "Key": "consumer_byte_rate", "Value": 0.0, "Remove": True}),
        (15, 0, {"BrokerId": 1, "BrokerEpoch": 10, "NextProducerId": 5000}),
        (18, 0, {"Id": T2, "ResourceType": 2, "ResourceName": "a", "PatternType": 3, "Principal": "User:x",
                 "Host": "*", "Operation": 3, "PermissionType": 3}),
        (11, 0, {"Name": "alice", "Mechanism": 1, "Salt": b"s", "StoredKey": b"k", "ServerKey": b"v", "Iterations": 4096}),
        (10, 0, {"Owner": "User:a", "Requester": "User:a", "Renewers": [], "IssueTimestamp": 1, "MaxTimestamp": 2,
                 "ExpirationTimestamp": 3, "TokenId": "tok"}),
        (21, 0, {"ZkMigrationState": 3}),
    ])
    assert img.finalized_features == {"metadata.version": 17, "group.version": 1}
    assert img.configs == {(2, "a"): {"cleanup.policy": "compact"}}
    assert img.client_quotas == {(("user", "u"),): {"producer_byte_rate": 10.0}}
    assert img.next_producer_id == 5000 and list(img.acls) == [T2] and (1, "alice") in img.scram
    assert img.zk_migration_state == 3 and list(img.delegation_tokens) == ["tok"]
    old = img.copy()
    replay_records([(9, 0, {"TopicId": T1}), (19, 0, {"Id": T2}), (22, 0, {"Name": "alice", "Mechanism": 1}),
                    (26, 0, {"TokenId": "tok"})], img)
    assert img.topics == {} and img.topic_ids == {} and img.configs == {}  # topic configs go with the topic
    assert img.acls == {} and img.scram == {} and img.delegation_tokens == {}
    with pytest.raises(ReplayError, match="Failed to find existing ACL"):
        replay_records([(19, 0, {"Id": T2})], img)
    delta = image_delta(old, img)
    assert set(delta) == {"topics", "configs", "acls", "scram", "delegationTokens"}
    assert set(delta["topics"]["removed"]) == {"a"} and "TOPIC:a" in delta["configs"]["removed"]
    assert image_delta(img, img) == {}


def test_metadata_transactions_apply_at_end_and_not_on_abort():
    img = replay_records([*base(), (23, 0, {"Name": "t"}), topic("b", T2)])
    assert img.topic("b") is None and img.pending_transaction is not None  # open: not applied yet
    replay_records([(24, 0, {})], img)
    assert img.topic("b") is not None
    replay_records([(23, 0, {}), (9, 0, {"TopicId": T2}), (25, 0, {})], img)
    assert img.topic("b") is not None


def test_snapshot_order_versions_and_determinism(tmp_path):
    recs = [*base(), (12, 0, {"Name": "group.version", "FeatureLevel": 1}),
            (4, 0, {"ResourceType": 2, "ResourceName": "a", "Name": "z", "Value": "1"}),
            (4, 0, {"ResourceType": 2, "ResourceName": "a", "Name": "b", "Value": "2"}),
            (15, 0, {"BrokerId": 1, "BrokerEpoch": 10, "NextProducerId": 7})]
    img = replay_records(recs)
    out = img.snapshot_records()
    keys = [k for k, _, _ in out]
    # metadata.version first, other features, ZkMigrationState (3.x MV >= 3.4-IV0), brokers, topics, configs, pids
    assert keys == [12, 12, 21, 0, 0, 2, 3, 3, 4, 4, 15]
    assert out[0][2] == {"Name": "metadata.version", "FeatureLevel": 17}
    assert [v for k, v, _ in out if k == 0] == [3, 3]  # RegisterBrokerRecord v3 at 3.7-IV2
    assert [v for k, v, _ in out if k == 3] == [1, 1]  # PartitionRecord v1 at 3.7-IV2
    assert [d["Name"] for k, _, d in out if k == 4] == ["b", "z"]
    # same image, same bytes; and the snapshot replays to the same image
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    sid = SnapshotId(100, 3)
    pa = img.write_snapshot(a, sid, last_contained_log_timestamp=1234)
    pb = replay_records(list(reversed(recs[-3:])), replay_records(recs[:-3])).write_snapshot(b, sid, last_contained_log_timestamp=1234)
    assert pa.read_bytes() == pb.read_bytes()
    rep = SnapshotReader(pa).check()
    assert rep["data_records"] == len(out) and rep["last_contained_log_timestamp"] == 1234
    back = load_snapshot(pa)
    assert back == img and back.provenance.end_offset == 100 and back.provenance.epoch == 3
    assert [decode_metadata_record(v)[0] for _, v in SnapshotReader(pa).records()] == keys


def test_snapshot_at_an_older_metadata_version_reports_losses():
    img = replay_records([*base(), (27, 0, {"ControllerId": 9, "IncarnationId": INC, "ZkMigrationReady": False,
                                            "EndPoints": [], "Features": []})])
    assert [v for k, v, _ in replay_records(base()).snapshot_records(8) if k == 0] == [2, 2]  # v2 at 3.4-IV0
    with pytest.raises(UnwritableMetadataError, match="controller registration data"):
        img.snapshot_records(14)
    img2 = replay_records(base())
    replay_records([change(T1, 0, Directories=[D1, D1])], img2)
    with pytest.raises(UnwritableMetadataError, match="directory assignment state"):
        img2.snapshot_records(14)


def test_shell_tree():
    img = replay_records([*base(), (4, 0, {"ResourceType": 4, "ResourceName": "", "Name": "x", "Value": "1"})])
    assert render(img, "/").split() == ["provenance", "features", "cluster", "topics", "configs", "clientQuotas",
                                        "producerIds", "acls", "scram", "delegationToken"]
    assert render(img, "/topics/a").split() == ["name", "id", "0", "1"]
    assert lookup(img, "/image/topics/byName/a/1")[1]["Leader"] == 2
    assert lookup(img, "/features/metadataVersion")[1] == "3.7-IV2"
    assert render(img, "/configs/BROKER").split() == ["x"]
    assert render(img, "/cluster/brokers").split() == ["1", "2"]
    with pytest.raises(ShellPathError):
        lookup(img, "/topics/nope")


def test_load_image_from_a_written_log(tmp_path):
    """A log written with kraftkit's own Log: the image at each batch end equals replaying
    the same records by hand, and a snapshot in the directory is used as the starting point."""
    from kraftkit.log import Log, encode_batch
    from kraftkit.metadata.records import encode_metadata_record

    recs = [*base(), change(T1, 0, Isr=[1]), change(T1, 1, Leader=1), topic("b", T2), partition(T2, 0, [2], 2)]
    d = tmp_path / "__cluster_metadata-0"
    with Log(d, create=True) as log:
        for i in range(0, len(recs), 2):
            vals = [encode_metadata_record(k, v, data) for k, v, data in recs[i:i + 2]]
            log.append(encode_batch([(1000 + i, None, v, ()) for v in vals], base_offset=i, partition_leader_epoch=i // 4))
    full = load_image(tmp_path)
    assert full == replay_records(recs) and full.provenance.end_offset == len(recs)
    assert full.provenance.epoch == (len(recs) - 2) // 4
    for at in range(2, len(recs) + 1, 2):
        assert load_image(d, at=at) == replay_records(recs[:at])
    # a snapshot at 6, then the log after it
    load_image(d, at=6).write_snapshot(d)
    assert load_image(d) == full
    assert load_image(d, at=6) == replay_records(recs[:6])


def test_controller_registration_and_unregistration():
    """ControllerRegistrationRecord registers; UnregisterControllerRecord (api key 29, Kafka
    4.4-IV2: ``ClusterDelta.replay``) removes the registration, and an unknown id is no error."""
    reg = (27, 0, {"ControllerId": 3000, "IncarnationId": INC, "ZkMigrationReady": False,
                   "EndPoints": [{"Name": "CONTROLLER", "Host": "h", "Port": 9093, "SecurityProtocol": 0}],
                   "Features": [{"Name": "metadata.version", "MinSupportedVersion": 7, "MaxSupportedVersion": 33}]})
    img = replay_records([mv(33), reg, (27, 0, {**reg[2], "ControllerId": 3001})])
    assert sorted(img.controllers) == [3000, 3001]
    replay_records([(29, 0, {"ControllerId": 3000}), (29, 0, {"ControllerId": 4000})], img)
    assert sorted(img.controllers) == [3001]
