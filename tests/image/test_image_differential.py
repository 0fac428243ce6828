"""The Rust image engine against the pure-Python image it replaced (``reference_image``, the
oracle): the same record sequences, hand-written and generated, must give the same image
(``sections()``, provenance, KRaft state, counters), the same errors (class, message, offset),
the same snapshot records and byte-identical snapshot files.

Records are fed to both as the codec decodes them (encoded, then decoded), which is what a log
holds; the engine reads dicts that way by design (missing fields take their defaults)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftkit.log import Log, Segment, encode_batch
from kraftkit.metadata import image as face
from kraftkit.metadata.records import decode_metadata_record, encode_control_record, encode_metadata_record
from kraftkit.metadata.snapshot import SnapshotId
from tests.image import reference_image as ref

T = [uuid.UUID(int=0x1111 * (i + 1)) for i in range(3)]
T_UNKNOWN = uuid.UUID(int=0x9999)
D = [uuid.UUID(int=0), uuid.UUID(int=0x3333), uuid.UUID(int=0x4444)]
A = [uuid.UUID(int=0xA1), uuid.UUID(int=0xA2)]
INC = uuid.UUID("44444444-4444-4444-4444-444444444444")
ELR = "eligible.leader.replicas.version"
MVS = [1, 4, 7, 8, 11, 14, 15, 17, 21, 22, 23, 25, 30]


def norm(k: int, v: int, d: dict) -> tuple[int, int, dict]:
    """The record as it reads back from a log."""
    k2, v2, d2 = decode_metadata_record(encode_metadata_record(k, v, d))
    return k2, v2, d2


def outcome(fn, *args, **kw):
    try:
        return ("ok", fn(*args, **kw))
    except Exception as e:  # noqa: BLE001 -- the comparison is the point
        return ("error", type(e), str(e), getattr(e, "offset", None))


def state(img) -> tuple:
    p = img.provenance
    pending = img.pending_transaction
    return (img.sections(), (p.offset, p.epoch, p.timestamp), img.kraft_version, img.voters, img.records_replayed,
            None if pending is None else [(k, v, d, o) for k, v, d, o in pending])


def assert_same(a, b) -> None:
    """``a`` is the engine's image, ``b`` the oracle's."""
    assert state(a) == state(b)
    for mv in [None, *MVS]:
        assert outcome(a.snapshot_records, mv) == outcome(b.snapshot_records, mv), mv


def assert_same_snapshot(a, b, tmp: Path, **kw) -> None:
    da, db = tmp / "engine", tmp / "oracle"
    da.mkdir(parents=True, exist_ok=True)
    db.mkdir(parents=True, exist_ok=True)
    sid = SnapshotId(1000, 7)
    ra = outcome(a.write_snapshot, da, sid, last_contained_log_timestamp=1234, **kw)
    rb = outcome(b.write_snapshot, db, sid, last_contained_log_timestamp=1234, **kw)
    if ra[0] == "ok" and rb[0] == "ok":
        assert ra[1].name == rb[1].name
        assert ra[1].read_bytes() == rb[1].read_bytes()
        assert sorted(p.name for p in da.iterdir()) == sorted(p.name for p in db.iterdir()) == [sid.file_name]
        ra[1].chmod(0o644), rb[1].chmod(0o644)
        ra[1].unlink(), rb[1].unlink()
    else:
        assert ra == rb
        assert list(da.iterdir()) == list(db.iterdir()) == []  # nothing left behind


def assert_same_outcome(a, b) -> None:
    """Outcomes of the same call on the engine (``a``) and the oracle (``b``)."""
    if a[0] == "ok" and b[0] == "ok":
        assert_same(a[1], b[1])
    else:
        assert a == b


def replay_both(records, offsets=True):
    a, b = face.MetadataImage(), ref.MetadataImage()
    for i, (k, v, d) in enumerate(records):
        off = i if offsets else None
        ra = outcome(a.replay, k, v, d, off)
        rb = outcome(b.replay, k, v, d, off)
        assert ra == rb, (i, k, v, d)
    return a, b


# ----------------------------------------------------------------------------- hand-written


def broker(bid, epoch, version=3, fenced=True, **kw):
    d = {"BrokerId": bid, "IncarnationId": INC, "BrokerEpoch": epoch, "Rack": kw.get("rack"),
         "EndPoints": kw.get("endpoints", [{"Name": "SSL", "Host": "h", "Port": 9093, "SecurityProtocol": 1},
                                           {"Name": "PLAINTEXT", "Host": "h", "Port": 9092, "SecurityProtocol": 0}]),
         "Features": [{"Name": "metadata.version", "MinSupportedVersion": 7, "MaxSupportedVersion": 30}],
         "Fenced": fenced}
    if version >= 1:
        d["InControlledShutdown"] = kw.get("shutdown", False)
    if version >= 2:
        d["IsMigratingZkBroker"] = kw.get("zk", False)
    if version >= 3:
        d["LogDirs"] = kw.get("dirs", [])
    if version >= 4:
        d["CordonedLogDirs"] = kw.get("cordoned")
    return norm(0, version, d)


def partition(tid, pid, replicas, version=2, **kw):
    d = {"PartitionId": pid, "TopicId": tid, "Replicas": replicas, "Isr": kw.get("isr", replicas),
         "RemovingReplicas": [], "AddingReplicas": [], "Leader": replicas[0], "LeaderEpoch": 3, "PartitionEpoch": 4,
         "LeaderRecoveryState": kw.get("lrs", 0)}
    if version >= 1:
        d["Directories"] = kw.get("dirs", [])
    if version >= 2:
        d["EligibleLeaderReplicas"] = kw.get("elr")
        d["LastKnownElr"] = kw.get("lke")
    return norm(3, version, d)


def change(tid, pid, version=2, **kw):
    return norm(5, version, {"PartitionId": pid, "TopicId": tid, **kw})


def rich() -> list:
    """Every kind of record the image keeps, at the newest versions."""
    return [
        norm(12, 0, {"Name": "metadata.version", "FeatureLevel": 30}),
        norm(12, 0, {"Name": ELR, "FeatureLevel": 1}),
        norm(12, 0, {"Name": "group.version", "FeatureLevel": 1}),
        broker(1, 10, version=4, rack="r1", dirs=[D[1]], cordoned=[D[1]]),
        broker(2, 11, version=4, fenced=False, shutdown=True, zk=True, dirs=[D[2], D[1]]),
        norm(27, 0, {"ControllerId": 9, "IncarnationId": INC, "ZkMigrationReady": True,
                     "EndPoints": [{"Name": "CONTROLLER", "Host": "c", "Port": 9093, "SecurityProtocol": 0}],
                     "Features": [{"Name": "kraft.version", "MinSupportedVersion": 0, "MaxSupportedVersion": 1}]}),
        norm(2, 0, {"Name": "b", "TopicId": T[1]}),
        norm(2, 0, {"Name": "a", "TopicId": T[0]}),
        partition(T[0], 1, [1, 2], dirs=[D[1], D[2]], elr=[2], lke=[1], lrs=1),
        partition(T[0], 0, [2, 1]),
        partition(T[1], 0, [1], version=0),
        change(T[0], 0, Isr=[2], Leader=2, EligibleLeaderReplicas=[1]),
        norm(4, 0, {"ResourceType": 2, "ResourceName": "a", "Name": "z", "Value": "1"}),
        norm(4, 0, {"ResourceType": 2, "ResourceName": "a", "Name": "b", "Value": "2"}),
        norm(4, 0, {"ResourceType": 4, "ResourceName": "", "Name": "x", "Value": "1"}),
        norm(14, 0, {"Entity": [{"EntityType": "user", "EntityName": "u"}, {"EntityType": "client-id", "EntityName": None}],
                     "Key": "producer_byte_rate", "Value": 10.5, "Remove": False}),
        norm(14, 0, {"Entity": [{"EntityType": "user", "EntityName": ""}], "Key": "k", "Value": 1.0, "Remove": False}),
        norm(14, 0, {"Entity": [{"EntityType": "user", "EntityName": None}], "Key": "k", "Value": 2.0, "Remove": False}),
        norm(15, 0, {"BrokerId": 1, "BrokerEpoch": 10, "NextProducerId": 5000}),
        norm(18, 0, {"Id": A[1], "ResourceType": 2, "ResourceName": "a", "PatternType": 3, "Principal": "User:x",
                     "Host": "*", "Operation": 3, "PermissionType": 3}),
        norm(18, 0, {"Id": A[0], "ResourceType": 2, "ResourceName": "b", "PatternType": 3, "Principal": "User:y",
                     "Host": "*", "Operation": 2, "PermissionType": 3}),
        norm(11, 0, {"Name": "alice", "Mechanism": 1, "Salt": b"s'", "StoredKey": b"k", "ServerKey": b"v", "Iterations": 4096}),
        norm(11, 0, {"Name": "bob", "Mechanism": 2, "Salt": b"\x00", "StoredKey": b"k", "ServerKey": b"v", "Iterations": 8192}),
        norm(10, 0, {"Owner": "User:a", "Requester": "User:a", "Renewers": ["User:b"], "IssueTimestamp": 1,
                     "MaxTimestamp": 2, "ExpirationTimestamp": 3, "TokenId": "tok"}),
        norm(21, 0, {"ZkMigrationState": 0}),
    ]


VOTERS = {"Version": 0, "Voters": [{"VoterId": 9, "VoterDirectoryId": D[1],
                                    "Endpoints": [{"Name": "CONTROLLER", "Host": "c", "Port": 9093}],
                                    "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}}]}


def test_rich_image_same_state_records_and_snapshot_bytes(tmp_path):
    a, b = replay_both(rich())
    for img in (a, b):
        img.replay_control(5, {"Version": 0, "KRaftVersion": 1})
        img.replay_control(6, VOTERS)
        img.provenance = type(img.provenance)(999, 7, 1700000000000)
    assert_same(a, b)
    for mv in [None, *MVS]:
        assert_same_snapshot(a, b, tmp_path / str(mv), metadata_version=mv)
    assert_same_snapshot(a, b, tmp_path / "nokv", kraft_version=0, voters=None)
    assert_same_snapshot(a, b, tmp_path / "small", batch_records=3)
    assert_same_snapshot(a, b, tmp_path / "voters", voters=VOTERS)
    # and the snapshot reads back into the same image through both
    path = a.write_snapshot(tmp_path, SnapshotId(1000, 7))
    assert state(face.load_snapshot(path)) == state(ref.load_snapshot(path))


def test_many_partitions_span_several_batches(tmp_path):
    recs = [norm(12, 0, {"Name": "metadata.version", "FeatureLevel": 25})]
    for t in range(40):
        tid = uuid.UUID(int=t + 1)
        recs.append(norm(2, 0, {"Name": f"topic-{t:03d}", "TopicId": tid}))
        recs += [partition(tid, p, [1, 2, 3], dirs=[D[1], D[2], D[1]]) for p in range(200)]
    a, b = replay_both(recs)
    for img in (a, b):
        img.provenance = type(img.provenance)(10, 1, 5)
    assert_same_snapshot(a, b, tmp_path)
    assert_same_snapshot(a, b, tmp_path / "1k", batch_records=1000)


ERROR_CASES = {
    "unknown partition": [*rich(), change(T[0], 7, Isr=[1])],
    "unknown topic": [change(T_UNKNOWN, 0, Isr=[1])],
    "partition of an unknown topic": [partition(T_UNKNOWN, 0, [1])],
    "delete an unknown topic": [norm(9, 0, {"TopicId": T_UNKNOWN})],
    "lengths differ (PartitionRecord)": [norm(2, 0, {"Name": "a", "TopicId": T[0]}), partition(T[0], 0, [1, 2], dirs=[D[1]])],
    "lengths differ (PartitionChangeRecord)": [*rich(), change(T[0], 0, Replicas=[1, 2], Directories=[D[1]])],
    "bad leader recovery state after other changes": [*rich(), change(T[0], 0, Isr=[1], Leader=1, LeaderRecoveryState=5), change(T[0], 0, Isr=[2])],
    "fence an unknown broker": [norm(7, 0, {"Id": 5, "Epoch": 1})],
    "unfence with the wrong epoch": [broker(1, 10), norm(8, 0, {"Id": 1, "Epoch": 9})],
    "bad fenced value": [broker(1, 10), norm(17, 0, {"BrokerId": 1, "BrokerEpoch": 10, "Fenced": 3})],
    "bad shutdown value": [broker(1, 10), norm(17, 1, {"BrokerId": 1, "BrokerEpoch": 10, "InControlledShutdown": 2})],
    "remove an unknown ACL": [norm(19, 0, {"Id": A[0]})],
    "clear ELR of an unknown topic": [norm(28, 0, {"TopicName": "nope"})],
    "nested transaction": [norm(23, 0, {}), norm(23, 0, {})],
    "end without begin": [norm(24, 0, {})],
    "abort without begin": [norm(25, 0, {"Reason": "x"})],
    "error inside a committed transaction": [norm(23, 0, {}), norm(2, 0, {"Name": "a", "TopicId": T[0]}),
                                             change(T[0], 0, Isr=[1]), norm(24, 0, {})],
    "aborted transaction": [norm(23, 0, {}), norm(2, 0, {"Name": "a", "TopicId": T[0]}), norm(25, 0, {}),
                            norm(2, 0, {"Name": "b", "TopicId": T[1]})],
    "open transaction": [norm(23, 0, {"Name": "t"}), norm(2, 0, {"Name": "a", "TopicId": T[0]})],
    "unknown metadata id": [(99, 0, {})],
    "unknown metadata id in a transaction": [norm(23, 0, {}), (99, 0, {}), norm(24, 0, {})],
    "topic renamed and reused names": [norm(2, 0, {"Name": "a", "TopicId": T[0]}), norm(2, 0, {"Name": "a", "TopicId": T[1]}),
                                       norm(2, 0, {"Name": "b", "TopicId": T[0]}), norm(2, 0, {"Name": "b", "TopicId": T[2]}),
                                       norm(9, 0, {"TopicId": T[2]}), norm(28, 0, {"TopicName": "b"})],
}


@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_error_cases(name, tmp_path):
    a, b = replay_both(ERROR_CASES[name])
    assert_same(a, b)
    a, b = replay_both(ERROR_CASES[name], offsets=False)
    assert_same(a, b)


def test_quota_entity_with_a_null_and_a_named_entry_of_one_type():
    rec = norm(14, 0, {"Entity": [{"EntityType": "user", "EntityName": "u"}, {"EntityType": "user", "EntityName": None}],
                       "Key": "k", "Value": 1.0, "Remove": False})
    a, b = replay_both([rec])
    assert_same(a, b)


# ----------------------------------------------------------------------------- generated

tid = st.sampled_from([*T, T_UNKNOWN])
pid = st.integers(0, 2)
bid = st.integers(1, 3)
epoch = st.sampled_from([10, 10, 10, 9, 11])  # mostly the registered brokers' epoch
ints = st.lists(st.integers(0, 3), max_size=3)
opt_ints = st.none() | ints
dirs = st.lists(st.sampled_from(D), max_size=3)
opt_dirs = st.none() | dirs
name = st.sampled_from(["a", "b", "c"])


@st.composite
def record(draw):
    k = draw(st.sampled_from([0, 0, 1, 2, 2, 3, 3, 3, 4, 5, 5, 5, 5, 5, 7, 8, 9, 10, 11, 12, 14, 15, 17, 17, 17, 18, 19,
                              20, 21, 22, 23, 24, 25, 26, 27, 28]))
    if k == 0:
        v = draw(st.integers(0, 4))
        d = {"BrokerId": draw(bid), "IncarnationId": INC, "BrokerEpoch": draw(epoch), "Rack": draw(st.none() | st.just("r")),
             "EndPoints": [{"Name": n, "Host": "h", "Port": 1, "SecurityProtocol": 0}
                           for n in draw(st.lists(st.sampled_from(["SSL", "PLAINTEXT"]), max_size=2))],
             "Features": [], "Fenced": draw(st.booleans())}
        if v >= 1:
            d["InControlledShutdown"] = draw(st.booleans())
        if v >= 2:
            d["IsMigratingZkBroker"] = draw(st.booleans())
        if v >= 3:
            d["LogDirs"] = draw(dirs)
        if v >= 4:
            d["CordonedLogDirs"] = draw(opt_dirs)
        return norm(0, v, d)
    if k == 1:
        return norm(1, 0, {"BrokerId": draw(bid), "BrokerEpoch": draw(epoch)})
    if k == 2:
        return norm(2, 0, {"Name": draw(name), "TopicId": draw(tid)})
    if k == 3:
        v = draw(st.integers(0, 2))
        reps = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
        d = {"PartitionId": draw(pid), "TopicId": draw(tid), "Replicas": reps, "Isr": draw(ints), "RemovingReplicas": [],
             "AddingReplicas": draw(ints), "Leader": draw(st.integers(-1, 3)), "LeaderRecoveryState": draw(st.integers(0, 1)),
             "LeaderEpoch": draw(st.integers(0, 5)), "PartitionEpoch": draw(st.integers(0, 5))}
        if v >= 1:
            d["Directories"] = draw(dirs)
        if v >= 2:
            d["EligibleLeaderReplicas"] = draw(opt_ints)
            d["LastKnownElr"] = draw(opt_ints)
        return norm(3, v, d)
    if k == 4:
        return norm(4, 0, {"ResourceType": draw(st.sampled_from([2, 4])), "ResourceName": draw(st.sampled_from(["a", "b", ""])),
                           "Name": draw(st.sampled_from(["x", "y"])), "Value": draw(st.none() | st.sampled_from(["1", "2"]))})
    if k == 5:
        v = draw(st.integers(0, 2))
        d = {"PartitionId": draw(pid), "TopicId": draw(tid)}
        for f in ("Isr", "Replicas", "RemovingReplicas", "AddingReplicas"):
            if draw(st.booleans()):
                d[f] = draw(ints)
        d["Leader"] = draw(st.integers(-2, 3))
        d["LeaderRecoveryState"] = draw(st.sampled_from([-1, -1, 0, 1, 2]))
        if v >= 1:
            d["Directories"] = draw(opt_dirs)
        if v >= 2:
            d["EligibleLeaderReplicas"] = draw(opt_ints)
            d["LastKnownElr"] = draw(opt_ints)
        return norm(5, v, d)
    if k in (7, 8):
        return norm(k, 0, {"Id": draw(bid), "Epoch": draw(epoch)})
    if k == 9:
        return norm(9, 0, {"TopicId": draw(tid)})
    if k == 10:
        return norm(10, 0, {"Owner": "User:a", "Requester": "User:b", "Renewers": draw(st.lists(st.sampled_from(["x", "y"]))),
                            "IssueTimestamp": 1, "MaxTimestamp": 2, "ExpirationTimestamp": 3,
                            "TokenId": draw(st.sampled_from(["t1", "t2"]))})
    if k == 11:
        return norm(11, 0, {"Name": draw(st.sampled_from(["alice", "bob"])), "Mechanism": draw(st.integers(1, 2)),
                            "Salt": draw(st.binary(max_size=3)), "StoredKey": b"k", "ServerKey": b"s", "Iterations": 4096})
    if k == 12:
        return norm(12, 0, {"Name": draw(st.sampled_from(["metadata.version", ELR, "group.version"])),
                            "FeatureLevel": draw(st.sampled_from([0, 1, 2, 7, 14, 17, 23, 30]))})
    if k == 14:
        types = draw(st.lists(st.sampled_from(["user", "client-id", "ip"]), min_size=1, max_size=2, unique=True))
        return norm(14, 0, {"Entity": [{"EntityType": t, "EntityName": draw(st.none() | st.sampled_from(["u", ""]))} for t in types],
                            "Key": draw(st.sampled_from(["k1", "k2"])), "Value": draw(st.floats(0, 100)),
                            "Remove": draw(st.booleans())})
    if k == 15:
        return norm(15, 0, {"BrokerId": 1, "BrokerEpoch": 1, "NextProducerId": draw(st.integers(0, 10**6))})
    if k == 17:
        v = draw(st.integers(0, 3))
        d = {"BrokerId": draw(bid), "BrokerEpoch": draw(epoch), "Fenced": draw(st.integers(-2, 2))}
        if v >= 1:
            d["InControlledShutdown"] = draw(st.integers(0, 2))
        if v >= 2:
            d["LogDirs"] = draw(dirs)
        if v >= 3:
            d["CordonedLogDirs"] = draw(opt_dirs)
        return norm(17, v, d)
    if k == 18:
        return norm(18, 0, {"Id": draw(st.sampled_from(A)), "ResourceType": 2, "ResourceName": draw(name), "PatternType": 3,
                            "Principal": "User:x", "Host": "*", "Operation": draw(st.integers(0, 5)), "PermissionType": 3})
    if k == 19:
        return norm(19, 0, {"Id": draw(st.sampled_from(A))})
    if k == 21:
        return norm(21, 0, {"ZkMigrationState": draw(st.integers(0, 5))})
    if k == 22:
        return norm(22, 0, {"Name": draw(st.sampled_from(["alice", "bob"])), "Mechanism": draw(st.integers(1, 2))})
    if k == 26:
        return norm(26, 0, {"TokenId": draw(st.sampled_from(["t1", "t2"]))})
    if k == 27:
        return norm(27, 0, {"ControllerId": draw(st.integers(1, 2)), "IncarnationId": INC, "ZkMigrationReady": draw(st.booleans()),
                            "EndPoints": [], "Features": []})
    if k == 28:
        return norm(28, 0, {"TopicName": draw(st.sampled_from(["", "a", "zz"]))})
    return norm(k, 0, {})  # NoOp, Begin/End/AbortTransaction


@st.composite
def prefix_and_records(draw):
    """A plausible start (features, brokers, topics with partitions) then random records."""
    start = [norm(12, 0, {"Name": "metadata.version", "FeatureLevel": draw(st.sampled_from([7, 14, 17, 23, 30]))}),
             broker(1, 10), broker(2, 10), norm(2, 0, {"Name": "a", "TopicId": T[0]}), partition(T[0], 0, [1, 2]),
             partition(T[0], 1, [2, 1], elr=[1]), norm(2, 0, {"Name": "b", "TopicId": T[1]}), partition(T[1], 0, [1])]
    return start + draw(st.lists(record(), max_size=40))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(recs=prefix_and_records())
def test_generated_record_sequences(recs, tmp_path_factory):
    a, b = replay_both(recs)
    assert_same(a, b)
    for img in (a, b):
        img.provenance = type(img.provenance)(len(recs) - 1, 3, 1000)
    assert_same_snapshot(a, b, tmp_path_factory.mktemp("snap"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(recs=prefix_and_records(), sizes=st.lists(st.integers(1, 7), min_size=1), data=st.data())
def test_generated_logs_loaded_at_every_offset(recs, sizes, data, tmp_path_factory):
    """The same records as a log of batches of random sizes (with a KRaft control batch):
    load_image at random end offsets, from the log alone and from a snapshot plus the log."""
    d = tmp_path_factory.mktemp("log") / "__cluster_metadata-0"
    batches, i, j = [], 0, 0
    with Log(d, create=True) as lg:
        lg.append(encode_batch([(5, b"\x00\x00\x00\x05", encode_control_record(5, {"Version": 0, "KRaftVersion": 1}), ()),
                                (5, b"\x00\x00\x00\x06", encode_control_record(6, VOTERS), ())],
                               base_offset=0, partition_leader_epoch=1, control=True))
        off = 2
        while i < len(recs):
            n = sizes[j % len(sizes)]
            vals = [encode_metadata_record(*r) for r in recs[i:i + n]]
            lg.append(encode_batch([(100 + off, None, v, ()) for v in vals], base_offset=off, partition_leader_epoch=1 + off // 10))
            batches.append((off, off + len(vals)))
            off += len(vals)
            i += n
            j += 1
    end = off
    # batch by batch through replay_batch (errors do not stop the replay: the state after each
    # partly applied batch must agree too)
    a, b = face.MetadataImage(), ref.MetadataImage()
    for batch in Segment(d / "00000000000000000000.log").batches(verify_crc=True):
        assert outcome(a.replay_batch, batch) == outcome(b.replay_batch, batch)
        assert state(a) == state(b)
    ats = [None, *data.draw(st.lists(st.integers(1, end + 1), max_size=4))]
    for at in ats:
        a = outcome(face.load_image, d, at)
        b = outcome(ref.load_image, d, at)
        if a[0] == "ok" and b[0] == "ok":
            assert_same(a[1], b[1])
        else:
            assert a == b, at
    # a snapshot at a batch end (written by the oracle), then the log after it
    cut = data.draw(st.sampled_from([e for _, e in batches]))
    img = outcome(ref.load_image, d, cut)
    if img[0] != "ok" or outcome(img[1].snapshot_records)[0] != "ok" or img[1].pending_transaction is not None:
        return
    img[1].write_snapshot(d)
    for at in [None, cut, *[x for x in ats if x is not None and x > cut]]:
        a = outcome(face.load_image, d, at)
        b = outcome(ref.load_image, d, at)
        if a[0] == "ok" and b[0] == "ok":
            assert_same(a[1], b[1])
        else:
            assert a == b, at


def test_corrupt_batches_and_records_give_the_same_errors(tmp_path):
    d = tmp_path / "__cluster_metadata-0"
    recs = rich()
    with Log(d, create=True) as lg:
        for i in range(0, len(recs), 4):
            vals = [encode_metadata_record(*r) for r in recs[i:i + 4]]
            lg.append(encode_batch([(7, None, v, ()) for v in vals], base_offset=i, partition_leader_epoch=2))
    seg = d / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    good = bytes(data)
    # a flipped byte in the third batch (CRC mismatch), then a torn tail
    third = 0
    for _ in range(2):
        third += int.from_bytes(good[third + 8:third + 12], "big") + 12
    data[third + 70] ^= 0xFF
    seg.write_bytes(bytes(data))
    for at in (None, 4, 8, 9):
        assert_same_outcome(outcome(face.load_image, d, at), outcome(ref.load_image, d, at))
        assert_same_outcome(outcome(face.load_image, seg, at), outcome(ref.load_image, seg, at))
    assert outcome(face.load_image, d)[0] == "error"
    seg.write_bytes(good[:-5])
    assert_same_outcome(outcome(face.load_image, d), outcome(ref.load_image, d))
    assert outcome(face.load_image, d)[0] == "error"
    # a record value the codec rejects (an unknown apiKey), inside a valid batch
    seg.write_bytes(good + encode_batch([(7, None, b"\x01\x63\x00", ())], base_offset=len(recs), partition_leader_epoch=2))
    e = outcome(face.load_image, d)
    assert e == outcome(ref.load_image, d) and e[0] == "error" and "Unknown metadata id 99" in e[2]
