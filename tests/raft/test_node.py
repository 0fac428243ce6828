"""Raft nodes in one process over real loopback sockets and real files: election, replication,
commits, snapshots and FetchSnapshot catch-up, two raft partitions side by side, and the listener's
handling of clients (ApiVersions, DescribeQuorum, Produce) and of malformed bytes."""

from __future__ import annotations

import asyncio
import socket
import struct
import uuid

import pytest

from kraftkit.log import Log
from kraftkit.metadata.image import load_image
from kraftkit.protocol import KafkaConnection, encode_request
from kraftkit.protocol.messages import ApiKey
from kraftkit.raft import messages as m
from kraftkit.raft.admin import QuorumAdmin
from kraftkit.raft.driver import NotLeaderError
from kraftkit.raft.quorum_state import FileQuorumStateStore, Role

from ._cluster import FAST, NOOP, leader_of, make_nodes, running, topic_record, verify_log_problems, wait_for

pytestmark = pytest.mark.timeout(120)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def segment_bytes(node) -> bytes:
    d = node.replica().dir
    return b"".join((d / f"{b:020d}.log").read_bytes() for b in Log(d).segments)


def test_three_nodes_elect_replicate_and_agree_byte_for_byte(tmp_path):
    async def main():
        # a small index interval: the followers' multi-batch appends of fetched chunks get index entries
        nodes = make_nodes(tmp_path, snapshot_every_records=0, index_interval_bytes=64)
        async with running(nodes):
            leader = await wait_for(lambda: leader_of(nodes), what="a leader")
            committed = []
            for i in range(20):
                committed.append(await leader.append([topic_record(f"t{i}"), NOOP]))
            assert committed == sorted(committed) and len(set(committed)) == 20
            hw = leader.replica().core.high_watermark
            assert hw > committed[-1]
            await wait_for(lambda: all(n.replica().core.high_watermark >= hw for n in nodes), what="followers' HW")
            # every node's state machine applied the same committed prefix
            for n in nodes:
                img = n.replica().machine.image
                assert sorted(img.topic_ids) == sorted(f"t{i}" for i in range(20))
            # the quorum-state files say who leads, as Kafka's would
            for n in nodes:
                st = FileQuorumStateStore(n.replica().dir / "quorum-state").read()
                assert st is not None and st.epoch == leader.replica().core.epoch
            # committed reads through the API
            seen = [r.value for b in leader.committed_batches() if not b.is_control for r in b]
            assert seen.count(NOOP) == 20
            # the followers store the leader's bytes
            end = leader.replica().log.end_offset
            await wait_for(lambda: all(n.replica().log.flushed_offset == end for n in nodes), what="same log end")
            data = [segment_bytes(n) for n in nodes]
            assert data[0] == data[1] == data[2]
        # and the directory is a Kafka metadata log any reader can replay, its indexes as verify-log wants them
        assert sorted(load_image(nodes[0].replica().dir).topic_ids) == sorted(f"t{i}" for i in range(20))
        assert verify_log_problems(*(n.replica().dir for n in nodes)) == []

    run(main())


def test_a_lagging_follower_catches_up_by_fetch_snapshot(tmp_path):
    async def main():
        nodes = make_nodes(tmp_path, snapshot_every_records=40)
        async with running(nodes):
            leader = await wait_for(lambda: leader_of(nodes), what="a leader")
            lagging = next(n for n in nodes if n is not leader)
            lag_end = lagging.replica().log.end_offset
            await lagging.stop(resign=False)
            for i in range(30):
                await leader.append([topic_record(f"topic-{i}"), NOOP, NOOP])
            rep = leader.replica()

            def snapshots_settled() -> bool:
                # Snapshots are written in a thread, and the commits of that time applied after;
                # the ~90 records make two. Restart the follower once no other one is coming, so
                # that the snapshot it fetches is the leader's last.
                m = rep.machine
                return (rep.log.snapshot() is not None and rep.snapshot_task is None and not rep.snapshot_scheduled
                        and m.applied_offset == rep.core.high_watermark and m.records_since_snapshot < 40)

            await wait_for(snapshots_settled, what="the leader's snapshots")
            assert rep.log.start_offset > lag_end
            # restart it: its log ends before the leader's log start, so the leader sends a SnapshotId
            from kraftkit.raft.server import RaftNode

            fetched = []

            class Watch:
                def handle_load_snapshot(self, path, sid):
                    fetched.append((sid, path.read_bytes()))

            again = RaftNode(lagging.config, listeners=[Watch()])
            nodes[nodes.index(lagging)] = again
            await again.start()
            target = rep.core.high_watermark
            await wait_for(lambda: again.replica().machine.applied_offset >= target, what="catch-up")
            img = again.replica().machine.image
            assert sorted(img.topic_ids) == sorted(f"topic-{i}" for i in range(30))
            # it loaded the leader's snapshot (FetchSnapshot), the file byte for byte, not the log prefix
            assert fetched, "the restarted node never loaded a snapshot"
            sid, data = fetched[0]
            assert sid.end_offset > lag_end
            assert rep.log.snapshot() == sid and data == rep.log.snapshot_path(sid).read_bytes()

    run(main())


def test_writing_a_snapshot_does_not_stop_the_replica(tmp_path):
    """The leader writes its snapshot in another thread: while the file is written (held open
    here for several fetch timeouts), the replica goes on replicating and committing, nobody
    starts an election, and the commits of that time reach the state machine afterwards."""
    import threading
    import time

    async def main():
        nodes = make_nodes(tmp_path, snapshot_every_records=10)
        async with running(nodes):
            leader = await wait_for(lambda: leader_of(nodes), what="a leader")
            rep = leader.replica()
            epoch = rep.core.epoch
            started, release = threading.Event(), threading.Event()
            real_job = rep.machine.snapshot_job

            def slow_job(sid):
                job = real_job(sid)

                def run():
                    started.set()
                    release.wait(30)  # the file is "being written" until the test says
                    return job()
                return run

            rep.machine.snapshot_job = slow_job
            for i in range(12):
                await leader.append([topic_record(f"before-{i}")])
            await wait_for(started.is_set, what="a snapshot being written")
            applied = rep.machine.applied_offset
            t0 = time.monotonic()
            during = [await leader.append([topic_record(f"during-{i}")]) for i in range(5)]
            await asyncio.sleep(4 * FAST.fetch_timeout_ms / 1000)  # followers would have stood by now
            assert time.monotonic() - t0 < 29 and not release.is_set()
            # committed (the followers fetched and acknowledged) while the snapshot was held
            assert rep.core.high_watermark > during[-1] and rep.machine.applied_offset == applied
            assert rep.core.epoch == epoch and rep.core.role is Role.LEADER
            assert all(n.replica().core.epoch == epoch for n in nodes)
            release.set()
            await wait_for(lambda: rep.log.snapshot() is not None and rep.log.snapshot().end_offset == applied,
                           what="the snapshot taken")
            await wait_for(lambda: rep.machine.applied_offset > during[-1], what="the commits applied after it")
            assert {f"during-{i}" for i in range(5)} <= set(rep.machine.image.topic_ids)

    run(main())


def test_two_raft_partitions_side_by_side_share_the_nodes(tmp_path):
    other = m.TopicPartition("__other_metadata", 0, uuid.UUID(int=7))

    async def main():
        nodes = make_nodes(tmp_path, partitions=(m.METADATA_PARTITION, other), snapshot_every_records=0)
        async with running(nodes):
            l1 = await wait_for(lambda: leader_of(nodes, m.METADATA_PARTITION), what="leader of partition 1")
            l2 = await wait_for(lambda: leader_of(nodes, other), what="leader of partition 2")
            a = await l1.append([topic_record("in-first")], m.METADATA_PARTITION)
            b = await l2.append([topic_record("in-second"), NOOP], other)
            assert a >= 1 and b >= 2
            for n in nodes:
                await wait_for(lambda n=n: n.replica(other).core.high_watermark > b, what="partition 2 HW")
                await wait_for(lambda n=n: n.replica(m.METADATA_PARTITION).core.high_watermark > a, what="p1 HW")
                assert list(n.replica(m.METADATA_PARTITION).machine.image.topic_ids) == ["in-first"]
                assert list(n.replica(other).machine.image.topic_ids) == ["in-second"]
            # two directories, one per partition, each with its own quorum-state
            for n in nodes:
                assert (n.config.log_dir / "__other_metadata-0" / "quorum-state").is_file()
                assert (n.config.log_dir / "__cluster_metadata-0" / "quorum-state").is_file()

    run(main())


def test_clients_produce_describe_and_get_told_who_leads(tmp_path):
    async def main():
        nodes = make_nodes(tmp_path, snapshot_every_records=0)
        async with running(nodes):
            leader = await wait_for(lambda: leader_of(nodes), what="a leader")
            follower = next(n for n in nodes if n is not leader)
            loop = asyncio.get_running_loop()

            def client_work():
                out = {}
                with QuorumAdmin(f"127.0.0.1:{follower.address[1]}") as admin:
                    out["append"] = admin.append([topic_record("via-produce"), NOOP])
                    out["describe"] = admin.describe()
                    out["cluster"] = admin.cluster_id()
                with KafkaConnection("127.0.0.1", follower.address[1]) as conn:
                    v = conn.version_for(ApiKey.PRODUCE)
                    out["follower_produce"] = conn.request(ApiKey.PRODUCE, v, produce_body([NOOP]))
                with KafkaConnection("127.0.0.1", leader.address[1]) as conn:
                    v = conn.version_for(ApiKey.PRODUCE)
                    out["garbage"] = conn.request(ApiKey.PRODUCE, v, produce_body([b"not a metadata record"]))
                return out

            out = await loop.run_in_executor(None, client_work)
            base, last = out["append"]
            assert last == base + 1
            assert base < leader.replica().core.high_watermark
            d = out["describe"]
            assert d["leader_id"] == leader.node_id and d["leader_epoch"] == leader.replica().core.epoch
            assert sorted(v["id"] for v in d["voters"]) == [1, 2, 3] and d["high_watermark"] > last
            assert out["cluster"] == leader.config.cluster_id
            part = out["follower_produce"]["Responses"][0]["PartitionResponses"][0]
            assert part["ErrorCode"] == 6 and part["CurrentLeader"]["LeaderId"] == leader.node_id
            part = out["garbage"]["Responses"][0]["PartitionResponses"][0]
            assert part["ErrorCode"] == 87 and "metadata record" in part["ErrorMessage"]
            assert "via-produce" in leader.replica().machine.image.topic_ids

    run(main())


def produce_body(values: list[bytes]) -> dict:
    from kraftkit._core import encode_batch

    data = encode_batch([(0, None, v, []) for v in values])
    return {"TransactionalId": None, "Acks": -1, "TimeoutMs": 5000, "TopicData": [{
        "Name": "__cluster_metadata", "TopicId": m.METADATA_TOPIC_ID,
        "PartitionData": [{"Index": 0, "Records": data}]}]}


def test_malformed_requests_close_the_connection_not_the_node(tmp_path):
    async def main():
        nodes = make_nodes(tmp_path, n=1, snapshot_every_records=0)
        node = nodes[0]
        await node.start()
        try:
            await wait_for(lambda: leader_of(nodes), what="a one-node leader")
            port = node.address[1]
            loop = asyncio.get_running_loop()

            def attack():
                results = []
                good = encode_request(ApiKey.DESCRIBE_QUORUM, 1, 7, "x", {"Topics": [
                    {"TopicName": "__cluster_metadata", "Partitions": [{"PartitionIndex": 0}]}]})
                bad_frames = [
                    struct.pack(">i", 3) + b"\x00\x01\x02",                      # shorter than a header
                    struct.pack(">i", 12) + struct.pack(">hhi", 55, 1, 9) + b"\xff\xff\xff\xff",  # truncated body
                    struct.pack(">i", 8) + struct.pack(">hhi", 9999, 0, 1),      # unknown api key
                    struct.pack(">i", 8) + struct.pack(">hhi", 52, 99, 1),       # Vote v99
                    struct.pack(">i", -5),                                       # negative size
                    struct.pack(">i", 1 << 30),                                  # implausible size
                    struct.pack(">i", len(good) - 3) + good[:-3],               # body cut short
                ]
                for frame in bad_frames:
                    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                        s.sendall(frame)
                        s.shutdown(socket.SHUT_WR)
                        try:
                            results.append(s.recv(100))
                        except OSError:
                            results.append(b"")
                # ApiVersions at a version the node does not know: answered in v0 with error 35 (KIP-511)
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    req = struct.pack(">hhi", 18, 99, 42) + struct.pack(">h", -1)
                    s.sendall(struct.pack(">i", len(req)) + req)
                    size = struct.unpack(">i", s.recv(4))[0]
                    body = b""
                    while len(body) < size:
                        body += s.recv(size - len(body))
                # and the node still answers properly
                with QuorumAdmin(f"127.0.0.1:{port}") as admin:
                    desc = admin.describe()
                return results, body, desc

            results, body, desc = await loop.run_in_executor(None, attack)
            assert all(r == b"" for r in results)  # closed without an answer
            corr, err = struct.unpack(">ih", body[:6])
            assert (corr, err) == (42, 35)
            assert desc["leader_id"] == node.node_id and node.failed is None
        finally:
            await node.stop()

    run(main())


def test_append_on_a_follower_is_refused_with_the_leader(tmp_path):
    async def main():
        nodes = make_nodes(tmp_path, snapshot_every_records=0)
        async with running(nodes):
            leader = await wait_for(lambda: leader_of(nodes), what="a leader")
            follower = next(n for n in nodes if n is not leader)
            await wait_for(lambda: follower.replica().core.leader_id == leader.node_id, what="follower knows")
            with pytest.raises(NotLeaderError) as e:
                await follower.append([NOOP])
            assert e.value.leader_id == leader.node_id
            assert follower.replica().core.role is Role.FOLLOWER

    run(main())


def test_an_uncommittable_produce_times_out_with_request_timed_out(tmp_path):
    async def main():
        nodes = make_nodes(tmp_path, snapshot_every_records=0)
        async with running(nodes):
            leader = await wait_for(lambda: leader_of(nodes), what="a leader")
            for n in nodes:
                if n is not leader:
                    await n.stop(resign=False)  # no majority left: nothing more can commit
            loop = asyncio.get_running_loop()

            def produce():
                with KafkaConnection("127.0.0.1", leader.address[1]) as conn:
                    body = produce_body([NOOP, NOOP])
                    body["TimeoutMs"] = 200
                    return conn.request(ApiKey.PRODUCE, conn.version_for(ApiKey.PRODUCE), body)

            resp = await loop.run_in_executor(None, produce)
            part = resp["Responses"][0]["PartitionResponses"][0]
            assert part["ErrorCode"] == 7 and "200 ms" in part["ErrorMessage"]
            assert leader.replica().log.end_offset > part["BaseOffset"] >= 1  # appended, never committed

    run(main())


def test_update_raft_voter_is_answered_as_kafkas_leader_answers_it_at_kraft_version_0(tmp_path):
    """Kafka 4.x voters send their leader UpdateRaftVoter (KIP-853). This static quorum answers as a
    Kafka leader at kraft.version 0 does (KafkaRaftClient's checks, then UpdateVoterHandler's), never
    INVALID_REQUEST (which stops a Kafka voter): UNSUPPORTED_VERSION from the leader, the epoch checks
    first, NOT_LEADER_OR_FOLLOWER from a follower, INCONSISTENT_CLUSTER_ID for another cluster; each
    answer names the leader, its epoch and its address."""

    async def main():
        nodes = make_nodes(tmp_path, snapshot_every_records=0)
        async with running(nodes):
            leader = await wait_for(lambda: leader_of(nodes), what="a leader")
            await wait_for(lambda: leader.replica().core.high_watermark > 0, what="the epoch committed")
            follower = next(n for n in nodes if n is not leader)
            epoch = leader.replica().core.epoch
            cid = leader.config.cluster_id

            def ask(node, **over):
                body = {"ClusterId": cid, "CurrentLeaderEpoch": epoch, "VoterId": follower.node_id,
                        "VoterDirectoryId": uuid.uuid4(),
                        "Listeners": [{"Name": "CONTROLLER", "Host": "127.0.0.1", "Port": follower.address[1]}],
                        "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}, **over}
                with KafkaConnection("127.0.0.1", node.address[1]) as conn:
                    assert conn.version_for(ApiKey.UPDATE_RAFT_VOTER) == 0
                    return conn.request(ApiKey.UPDATE_RAFT_VOTER, 0, body)

            def client_work():
                return {
                    "leader": ask(leader),
                    "follower": ask(follower),
                    "older": ask(leader, CurrentLeaderEpoch=epoch - 1),
                    "newer": ask(leader, CurrentLeaderEpoch=epoch + 1),
                    "cluster": ask(leader, ClusterId="b3RoZXItY2x1c3Rlci1pZA"),
                }

            out = await asyncio.get_running_loop().run_in_executor(None, client_work)
            codes = {k: v["ErrorCode"] for k, v in out.items()}
            assert codes == {"leader": 35, "follower": 6, "older": 74, "newer": 75, "cluster": 104}, codes
            for answer in out.values():
                assert answer["CurrentLeader"] == {"LeaderId": leader.node_id, "LeaderEpoch": epoch,
                                                   "Host": "127.0.0.1", "Port": leader.address[1]}, answer

    run(main())
