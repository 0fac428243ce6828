"""``KazooSource.get_many`` against a real ZooKeeper (3.8.4, from Kafka 3.9.2's jars): the
pipelined reads of its own session (``PipelinedReads``, ZooKeeper's wire protocol written by
kraftkit) answer exactly what kazoo's one-by-one ``get`` answers, the oracle: data, versions,
empty znodes, missing ones, under a chroot, and znodes large enough that their answers fill the
socket's buffers while the requests are still being written. A server that has not seen the
kazoo session's last zxid refuses the reading session (ZooKeeper's rule), and the reads then go
through kazoo with the same answers; so do they when the reading session is cut. A session left
idle for a third of its timeout is replaced before it is used."""

from __future__ import annotations

import pytest

from kraftkit.migration import zk_reader
from tests.migration.test_offline_zk import ZooKeeper

pytestmark = [pytest.mark.kafka, pytest.mark.zookeeper, pytest.mark.timeout(300)]


@pytest.fixture
def zookeeper(kafka_jars, tmp_path):
    zk = ZooKeeper(tmp_path / "zk")
    try:
        zk.start()
        yield zk
    finally:
        zk.stop()


def test_pipelined_reads_answer_what_kazoo_answers(zookeeper):
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.connect, timeout=30)
    client.start(timeout=30)
    try:
        client.create("/kk/topics", b"", makepath=True)
        for i in range(300):
            client.create(f"/kk/topics/t{i}", f'{{"version":3,"n":{i}}}'.encode())
        for i in range(0, 300, 7):  # versions other than 0
            client.set(f"/kk/topics/t{i}", f'{{"version":3,"n":{i},"again":true}}'.encode())
        client.create("/kk/empty", b"")
        big = bytes(range(256)) * 3500  # 896,000 bytes: answers larger than the socket buffers
        for i in range(12):
            client.create(f"/kk/big{i}", big[i:] + bytes([i]))
    finally:
        client.stop()
        client.close()

    paths = [
        "/",
        "/kk",
        "/kk/empty",
        "/kk/missing",
        *[f"/kk/topics/t{i}" for i in range(300)],
        *[f"/kk/big{i}" for i in range(12)],
        "/kk/topics/t299/missing",
    ]
    source = zk_reader.KazooSource(zookeeper.connect)
    try:
        want = [source.get(p) for p in paths]
        got = source.get_many(paths)
        assert source._reads is not None  # the pipelined session read them
        assert got == want
        assert got[3] is None and got[2] == (b"", 0) and got[4 + 7][1] == 1 and got[4 + 8][1] == 0
        assert len(got[4 + 300][0]) == len(big) + 1
        # again on the same session
        assert source.get_many(paths[::-1]) == want[::-1]
        # a session idle for a third of its timeout is replaced before it could expire mid-read
        idle = source._reads
        idle.last_used -= idle.timeout
        assert source.get_many(paths[:20]) == want[:20]
        assert source._reads is not None and source._reads is not idle
        # a cut session: these reads go through kazoo, the next through a new session
        assert source._reads is not None
        source._reads.sock.close()
        assert source.get_many(paths[:50]) == want[:50]
        assert source._reads is None
        assert source.get_many(paths[50:]) == want[50:]
        assert source._reads is not None
    finally:
        source.close()

    chrooted = zk_reader.KazooSource(zookeeper.connect + "/kk")
    try:
        sub = ["/", "/topics/t1", "/missing", "/empty"]
        assert chrooted.get_many(sub) == [chrooted.get(p) for p in sub]
        assert chrooted._reads is not None
    finally:
        chrooted.close()


def test_a_server_behind_the_kazoo_session_refuses_the_reading_session(zookeeper):
    source = zk_reader.KazooSource(zookeeper.connect)
    try:
        # (a zxid this server has not reached: it must refuse the session, as ZooKeeper does)
        assert zk_reader.PipelinedReads.open(zookeeper.connect, 1 << 60) is None
        ok = zk_reader.PipelinedReads.open(zookeeper.connect, source.client.last_zxid)
        assert ok is not None
        ok.close()
        source.client.last_zxid = 1 << 60  # what a session that saw a newer server would hold
        paths = ["/", "/zookeeper", "/missing"]
        assert source.get_many(paths) == [source.get(p) for p in paths]
        assert source._reads is None and source._reads_failed  # kazoo read them
    finally:
        source.close()
