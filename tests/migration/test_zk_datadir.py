"""A ZooKeeper data directory read without ZooKeeper: snapshot and transaction log files written here
by hand from ZooKeeper's jute definitions (``zookeeper.jute``: FileHeader, TxnHeader, CreateTxn,
SetDataTxn, DeleteTxn, MultiTxn; ``DataTree.serialize``; ``FileTxnLog``'s entry framing), replayed,
and damaged files refused naming the file and the byte. The real oracle (a real ZooKeeper's data
directory read the same as the running ZooKeeper) is in test_offline_zk.py."""

from __future__ import annotations

import struct
import zlib

import pytest

from kraftkit.migration.zk_datadir import DataDirSource
from kraftkit.cli.main import main
from kraftkit.migration.zk_reader import ZkConnectError, ZkInputError


def i32(n):
    return struct.pack(">i", n)


def i64(n):
    return struct.pack(">q", n)


def buf(b):
    return i32(-1) if b is None else i32(len(b)) + b


def s(text):
    return buf(text.encode())


NO_ACL = i32(0)


def snapshot(nodes):
    """FileHeader ZKSN, no sessions, an empty ACL cache, (path, DataNode)..., "/"."""
    out = i32(int.from_bytes(b"ZKSN", "big")) + i32(2) + i64(0) + i32(0) + i32(0)
    for path, data, version in nodes:
        stat = i64(1) + i64(1) + i64(0) + i64(0) + i32(version) + i32(0) + i32(0) + i64(0) + i64(1)
        out += s(path) + buf(data) + i64(-1) + stat
    return out + s("/") + i64(0) + i32(2) + i64(0)  # then (unread) digest bytes


def header(zxid, kind, client=7):
    return i64(client) + i32(1) + i64(zxid) + i64(0) + i32(kind)


def create(path, data, ephemeral=False):
    return s(path) + buf(data) + NO_ACL + bytes([ephemeral]) + i32(0)


def set_data(path, data, version):
    return s(path) + buf(data) + i32(version)


def log(entries, torn=b""):
    out = i32(int.from_bytes(b"ZKLG", "big")) + i32(2) + i64(0)
    for body in entries:
        out += i64(zlib.adler32(body)) + buf(body) + b"B"
    return out + torn + bytes(64)  # preallocated zeros


def datadir(tmp_path, snap, logs):
    d = tmp_path / "zk" / "version-2"
    d.mkdir(parents=True)
    (d / "snapshot.0").write_bytes(snap)
    for zxid, data in logs:
        (d / f"log.{zxid:x}").write_bytes(data)
    return tmp_path / "zk"


def test_the_snapshot_and_the_logs_after_it_are_replayed(tmp_path):
    snap = snapshot([("", b"", 0), ("/cluster", b"", 0), ("/cluster/id", b'{"id":"x"}', 0)])
    multi = (i32(4) + i32(13) + buf(s("/brokers") + i32(0))  # a check
             + i32(1) + buf(create("/brokers/topics/t/partitions/0", b""))
             + i32(1) + buf(create("/brokers/topics/t/partitions/0/state", b"{}"))
             + i32(5) + buf(set_data("/brokers/topics/t/partitions/0/state", b'{"leader":1}', 3)))
    failed = i32(2) + i32(-1) + buf(i32(-101)) + i32(-1) + buf(i32(-2))  # a failed multi: error txns only
    entries = [
        header(1, 1) + create("/brokers", b""),
        header(2, 1) + create("/brokers/topics", b""),
        header(3, 15) + create("/brokers/topics/t", b'{"partitions":{}}'),
        header(4, 1) + create("/brokers/topics/t/partitions", b""),
        header(5, 14) + multi,
        header(6, 1) + create("/gone", b"x"),
        header(6, 14) + failed,
        header(7, 2) + s("/gone"),
        header(8, 1, client=99) + create("/brokers/ids", b""),
        header(9, 1, client=99) + create("/brokers/ids/1", b"eph", ephemeral=True),
        header(10, -11, client=99) + i32(0),
        header(11, 5) + set_data("/cluster/id", b'{"id":"y"}', 1),
        header(12, 1) + create("/cluster", b"again"),  # exists: skipped, as a fuzzy snapshot needs
    ]
    src = DataDirSource(datadir(tmp_path, snap, [(1, log(entries[:7])), (7, log(entries[7:], torn=i64(1) + i32(50)))]))
    assert src.get("/cluster/id") == (b'{"id":"y"}', 1)
    assert src.get("/brokers/topics/t/partitions/0/state") == (b'{"leader":1}', 3)
    assert src.children("/brokers/topics") == ["t"]
    assert src.get("/gone") is None and src.children("/brokers/ids") == []
    assert src.get("/cluster") == (b"", 0) and src.children("/") == ["brokers", "cluster"]
    chrooted = DataDirSource(tmp_path / "zk" / "version-2", chroot="/brokers")
    assert chrooted.children("/topics") == ["t"]


def test_damaged_files_are_refused_naming_the_file_and_byte(tmp_path):
    good = snapshot([("", b"", 0)])
    body = header(1, 1) + create("/a", b"")
    bad_crc = log([body]).replace(i64(zlib.adler32(body)), i64(zlib.adler32(body) ^ 1))
    d = datadir(tmp_path / "crc", good, [(1, bad_crc)])
    with pytest.raises(ZkInputError, match=r"log\.1: byte 16: CRC mismatch"):
        DataDirSource(d)
    d = datadir(tmp_path / "magic", b"NOPE" + good[4:], [])
    with pytest.raises(ZkInputError, match=r"snapshot\.0: not a ZooKeeper snapshot"):
        DataDirSource(d)
    d = datadir(tmp_path / "cut", good[:30], [])
    with pytest.raises(ZkInputError, match=r"snapshot\.0: byte \d+: ends inside a record"):
        DataDirSource(d)
    orphan = snapshot([("", b"", 0), ("/a/b", b"", 0)])
    with pytest.raises(ZkInputError, match=r"znode '/a/b' comes before its parent"):
        DataDirSource(datadir(tmp_path / "orphan", orphan, []))
    huge = log([header(1, 1) + s("/a") + i32(2**30)])
    with pytest.raises(ZkInputError, match=r"log\.1: byte \d+: a length of 1073741824 bytes"):
        DataDirSource(datadir(tmp_path / "huge", good, [(1, huge)]))
    unknown = log([header(1, 77)])
    with pytest.raises(ZkInputError, match=r"a transaction of unknown type 77"):
        DataDirSource(datadir(tmp_path / "unknown", good, [(1, unknown)]))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ZkConnectError, match=r"no ZooKeeper snapshot or transaction log"):
        DataDirSource(tmp_path / "empty")


def test_the_command_reads_a_data_directory(tmp_path, capsys):
    cid = b'{"version":"1","id":"MkU3OEVBNTcwNTJENDM2Qg"}'
    snap = snapshot([("", b"", 0), ("/kafka", b"", 0), ("/kafka/cluster", b"", 0), ("/kafka/cluster/id", cid, 0)])
    d = datadir(tmp_path, snap, [])
    argv = ["migrate", "from-zookeeper", "--zookeeper-data-dir", str(d), "--controller-dir", f"1={tmp_path / 'c'}",
            "--voters", "1@h:1", "--inter-broker-protocol-version", "3.9", "--dry-run"]
    assert main([*argv, "--zookeeper-chroot", "/kafka"]) == 0
    out, _ = capsys.readouterr()
    assert "cluster MkU3OEVBNTcwNTJENDM2Qg" in out and "carried: 0 topic(s)" in out
    assert main(argv) == 2  # no chroot: no /cluster/id, no Kafka cluster there
    assert "/cluster/id: no such znode" in capsys.readouterr().err
    assert main([*argv[:3], str(tmp_path / "missing"), *argv[4:]]) == 2
    assert capsys.readouterr().err == f"kraftkit migrate from-zookeeper: {tmp_path / 'missing'}: not a directory\n"
    assert main([*argv, "--zookeeper-chroot", "kafka"]) == 2
