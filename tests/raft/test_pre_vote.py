"""KIP-996 pre-vote in the raft core, one core driven by hand-made messages (the rules of Kafka 4.x's
``KafkaRaftClient`` / ``QuorumState`` / the per-role ``canGrantVote``), and a small loopback-free
network of cores for the rejoining node."""

from __future__ import annotations

import asyncio
import heapq
import random

import pytest

from kraftkit.protocol import decode_request, encode_request, encode_response
from kraftkit.protocol.messages import ApiKey

from kraftkit.raft import messages as m
from kraftkit.raft.core import RaftConfig, RaftCore
from kraftkit.raft.events import Append, Fsync, FsyncComplete, PersistElection, Receive, Send, Start, Tick
from kraftkit.raft.log import MemoryLog
from kraftkit.raft.messages import Errors
from kraftkit.raft.framing import read_frame, write_frame
from kraftkit.raft.quorum_state import ElectionState, Role
from kraftkit.raft.transport import PeerConnection
from tests.raft.test_core import CID, TP, elect, make, part_of, respond, sends


def pre_vote(core: RaftCore, now: int, src: int, epoch: int, last_epoch: int, last_offset: int,
             pre: bool = True) -> tuple[list, dict]:
    """Deliver ``src``'s (pre-)vote request to ``core``; returns the outputs and the answer's partition."""
    body = m.vote_request(TP, CID, -1, epoch, src, last_epoch, last_offset, pre_vote=pre)
    out = core.step(Receive(now, src, m.VOTE, body, 77, False))
    (resp,) = [s for s in sends(out, m.VOTE) if s.is_response]
    assert resp.dest == src and resp.correlation_id == 77
    return out, part_of(resp.body, m.VOTE)


def persists(out: list) -> list:
    return [o for o in out if isinstance(o, PersistElection)]


def quiet(core: RaftCore) -> tuple:
    """Everything a pre-vote must leave alone."""
    return core.role, core.epoch, core.leader_id, core.voted_id, core.election_state()


def vote_reqs(out: list) -> list[Send]:
    return [s for s in sends(out, m.VOTE) if not s.is_response]


def to_prospective(core: RaftCore, now: int = 5000) -> list:
    out = core.step(Tick(now))
    assert core.role is Role.PROSPECTIVE
    return out


# ------------------------------------------------------------------------------------ granting


def test_a_granted_pre_vote_changes_no_role_epoch_vote_nor_file():
    # unattached, voted (for 3), candidate and resigned voters grant an up-to-date pre-vote of their
    # epoch and stay exactly as they were: nothing is persisted (Kafka's canGrantVote of each role)
    unattached, _ = make(persisted=ElectionState(3))
    voted, _ = make(persisted=ElectionState(3, voted_id=3))
    candidate, _ = make(persisted=ElectionState(3, voted_id=1))
    resigned, _ = make(persisted=ElectionState(3, leader_id=1))
    assert [c.role for c in (unattached, voted, candidate, resigned)] == [
        Role.UNATTACHED, Role.VOTED, Role.CANDIDATE, Role.RESIGNED]
    for core in (unattached, voted, candidate, resigned):
        before = quiet(core)
        out, p = pre_vote(core, 10, 2, 3, 0, 0)
        assert (p["ErrorCode"], p["VoteGranted"], p["LeaderEpoch"]) == (0, True, 3)
        assert quiet(core) == before and not persists(out)
    # the voted one still gives its real vote only to the one it voted for
    _, p = pre_vote(voted, 11, 2, 3, 0, 0, pre=False)
    assert p["VoteGranted"] is False and voted.voted_id == 3


def test_a_pre_vote_is_refused_to_a_stale_log_and_to_an_older_epoch_without_any_change():
    core, _ = make(epochs=[3, 3, 3], persisted=ElectionState(3))
    before = quiet(core)
    out, p = pre_vote(core, 10, 2, 3, 2, 2)  # log ends at (epoch 2, offset 2) < (3, 3)
    assert (p["ErrorCode"], p["VoteGranted"]) == (0, False)
    out2, p = pre_vote(core, 11, 2, 3, 3, 2)  # same epoch, shorter
    assert (p["ErrorCode"], p["VoteGranted"]) == (0, False)
    out3, p = pre_vote(core, 12, 2, 2, 2, 9)  # an older epoch
    assert (p["ErrorCode"], p["VoteGranted"], p["LeaderEpoch"]) == (Errors.FENCED_LEADER_EPOCH, False, 3)
    assert quiet(core) == before and not persists(out + out2 + out3)
    # an up-to-date log whose last epoch is the prospective's own epoch is a valid pre-vote (a
    # prospective does not bump its epoch), not a valid vote
    _, p = pre_vote(core, 13, 2, 3, 3, 3)
    assert (p["ErrorCode"], p["VoteGranted"]) == (0, True)
    _, p = pre_vote(core, 14, 2, 3, 3, 3, pre=False)
    assert p["ErrorCode"] == Errors.INVALID_REQUEST
    _, p = pre_vote(core, 15, 2, 3, 4, 3)  # a log epoch above the asker's epoch: invalid
    assert p["ErrorCode"] == Errors.INVALID_REQUEST
    assert quiet(core) == before


def test_a_follower_that_heard_from_its_leader_refuses_pre_votes_and_a_leader_always_does():
    f, out = make(persisted=ElectionState(2, leader_id=3))
    assert f.role is Role.FOLLOWER
    # before any fetch succeeded it may grant (Kafka's FollowerState.hasFetchedFromLeader)
    _, p = pre_vote(f, 10, 2, 2, 0, 0)
    assert (p["VoteGranted"], p["LeaderId"]) == (True, 3)
    (fr,) = sends(out, m.FETCH)
    respond(f, 20, fr, m.fetch_response(TP, 0, 3, 2, high_watermark=0))
    before = quiet(f)
    out, p = pre_vote(f, 21, 2, 2, 0, 0)
    assert (p["ErrorCode"], p["VoteGranted"], p["LeaderId"], p["LeaderEpoch"]) == (0, False, 3, 2)
    assert quiet(f) == before and not persists(out)
    # a leader refuses a pre-vote of its epoch and stays leader
    leader, _ = make()
    elect(leader)
    assert leader.role is Role.LEADER
    before = quiet(leader)
    out, p = pre_vote(leader, 6000, 2, leader.epoch, 0, 0)
    assert (p["VoteGranted"], p["LeaderId"]) == (False, 1)
    assert quiet(leader) == before and not persists(out)


def test_a_pre_vote_of_a_higher_epoch_moves_the_receiver_to_that_epoch_as_any_request_does():
    # (Kafka's testHandlePreVoteRequestAsFollowerWithElectedLeader: the epoch is news; the vote is not given)
    f, _ = make(persisted=ElectionState(2, leader_id=3))
    out, p = pre_vote(f, 10, 2, 5, 2, 0)
    assert (p["VoteGranted"], p["LeaderEpoch"], p["LeaderId"]) == (True, 5, -1)
    assert (f.role, f.epoch, f.voted_id) == (Role.UNATTACHED, 5, -1)
    assert [o.state for o in persists(out)] == [ElectionState(5)]


def test_a_prospective_grants_one_real_vote_which_it_stores_and_keeps_asking():
    c, _ = make(persisted=ElectionState(4))
    to_prospective(c)
    assert c.election_state() == ElectionState(4)
    out, p = pre_vote(c, 5001, 3, 5, 0, 0, pre=False)  # a candidate of epoch 5: epoch news first
    assert p["VoteGranted"] is True and (c.role, c.epoch, c.voted_id) == (Role.VOTED, 5, 3)
    c2, _ = make(persisted=ElectionState(4))
    to_prospective(c2)
    # a candidate of the prospective's own epoch (one that lost a race at it) gets the vote
    out, p = pre_vote(c2, 5001, 3, 4, 0, 0, pre=False)
    assert p["VoteGranted"] is True
    assert (c2.role, c2.epoch, c2.voted_id) == (Role.PROSPECTIVE, 4, 3)
    assert [o.state for o in persists(out)] == [ElectionState(4, voted_id=3)]
    assert persists(out)[0] is out[0]  # stored before the answer leaves
    _, p = pre_vote(c2, 5002, 2, 4, 0, 0, pre=False)
    assert p["VoteGranted"] is False
    assert {s.dest for s in vote_reqs(out)} == {2, 3}  # a new round of pre-votes


# ------------------------------------------------------------------------------------ the prospective


def test_a_timed_out_voter_asks_for_pre_votes_in_its_epoch_and_stands_on_a_majority():
    c, _ = make(voters=(1, 2, 3, 4, 5), epochs=[2, 2], persisted=ElectionState(2, voted_id=4))
    assert c.role is Role.VOTED
    out = to_prospective(c)
    assert (c.epoch, c.voted_id) == (2, 4) and not persists(out)  # the file still says: voted for 4 in 2
    reqs = vote_reqs(out)
    assert {r.dest for r in reqs} == {2, 3, 4, 5}
    for r in reqs:
        p = part_of(r.body, m.VOTE, response=False)
        assert (p["PreVote"], p["ReplicaEpoch"], p["ReplicaId"], p["LastOffsetEpoch"], p["LastOffset"]) == (
            True, 2, 1, 2, 2)
    out = respond(c, 5001, reqs[0], m.vote_response(TP, 0, -1, 2, True))
    assert c.role is Role.PROSPECTIVE  # 2 of 5
    out = respond(c, 5002, reqs[1], m.vote_response(TP, 0, -1, 2, True))
    assert (c.role, c.epoch, c.voted_id) == (Role.CANDIDATE, 3, 1)  # 3 of 5: stands
    assert [o.state for o in persists(out)] == [ElectionState(3, voted_id=1)]
    votes = vote_reqs(out)
    assert {v.dest for v in votes} == {2, 3, 4, 5}
    assert all(part_of(v.body, m.VOTE, response=False)["PreVote"] is False for v in votes)
    assert out.index(persists(out)[0]) < out.index(votes[0])
    # a late pre-vote answer (epoch 2) is ignored by the candidate of epoch 3
    respond(c, 5003, reqs[2], m.vote_response(TP, 0, -1, 2, True))
    assert (c.role, c.epoch) == (Role.CANDIDATE, 3)


def test_a_prospective_refused_by_a_majority_goes_back_to_its_leader_or_to_unattached():
    # from a follower: back to following the leader it knew, nothing persisted on the way
    f, _ = make(persisted=ElectionState(5, leader_id=2))
    out = f.step(Tick(2000))
    assert (f.role, f.epoch, f.leader_id) == (Role.PROSPECTIVE, 5, 2)
    reqs = vote_reqs(out)
    out2 = respond(f, 2001, reqs[0], m.vote_response(TP, 0, 2, 5, False))
    assert f.role is Role.PROSPECTIVE
    out3 = respond(f, 2002, reqs[1], m.vote_response(TP, 0, 2, 5, False))
    assert (f.role, f.epoch, f.leader_id) == (Role.FOLLOWER, 5, 2)
    assert sends(out3, m.FETCH) and not persists(out + out2 + out3)
    # without a leader: unattached in the same epoch, a fresh election timer
    u, _ = make(persisted=ElectionState(5))
    out = to_prospective(u)
    for r in vote_reqs(out):
        respond(u, 5001, r, m.vote_response(TP, 0, -1, 5, False))
    assert (u.role, u.epoch) == (Role.UNATTACHED, 5) and u.election_state() == ElectionState(5)
    assert 5001 + 1000 <= u._election_deadline < 5001 + 2000


def test_a_prospective_out_of_time_goes_back_and_asks_again():
    f, _ = make(persisted=ElectionState(5, leader_id=2))
    f.step(Tick(2000))
    deadline = f._election_deadline
    f.step(Tick(deadline))
    assert (f.role, f.leader_id) == (Role.FOLLOWER, 2)  # (Kafka's testProspectiveWithLeaderTransitionsToFollower)
    f.step(Tick(deadline + 2000))
    assert f.role is Role.PROSPECTIVE and f.epoch == 5
    # an unattached prospective out of time keeps its expired timer, so it asks again at once
    u, _ = make(persisted=ElectionState(5))
    to_prospective(u)
    out = u.step(Tick(u._election_deadline))
    assert u.role is Role.PROSPECTIVE and u.epoch == 5 and vote_reqs(out) and not persists(out)


def test_a_prospective_that_learns_of_a_leader_follows_it():
    # a pre-vote answer naming the leader of its epoch (Kafka's testProspectiveWithoutLeaderTransitionsToFollower)
    c, _ = make(persisted=ElectionState(5))
    out = to_prospective(c)
    out = respond(c, 5001, vote_reqs(out)[0], m.vote_response(TP, 0, 3, 5, True))
    assert (c.role, c.epoch, c.leader_id) == (Role.FOLLOWER, 5, 3)
    assert sends(out, m.FETCH)
    # a BeginQuorumEpoch of its epoch
    c, _ = make(persisted=ElectionState(5))
    to_prospective(c)
    c.step(Receive(5001, 2, m.BEGIN_QUORUM_EPOCH, m.begin_quorum_epoch_request(TP, CID, 1, 2, 5), 8, False))
    assert (c.role, c.epoch, c.leader_id) == (Role.FOLLOWER, 5, 2)
    # an answer from a higher epoch with its leader (FENCED_LEADER_EPOCH: the asker is behind)
    c, _ = make(persisted=ElectionState(5, leader_id=2))
    out = c.step(Tick(2000))
    respond(c, 2001, vote_reqs(out)[0], m.vote_response(TP, Errors.FENCED_LEADER_EPOCH, 3, 6, False))
    assert (c.role, c.epoch, c.leader_id) == (Role.FOLLOWER, 6, 3)


def test_unsupported_version_from_a_peer_falls_back_to_a_standard_election():
    c, _ = make(persisted=ElectionState(5))
    reqs = vote_reqs(to_prospective(c))
    # what the transport answers when the peer's Vote stops below v2 (a Kafka 3.9 voter)
    out = respond(c, 5001, reqs[0], {"ErrorCode": Errors.UNSUPPORTED_VERSION})
    assert (c.role, c.epoch, c.voted_id) == (Role.CANDIDATE, 6, 1)
    votes = vote_reqs(out)
    assert {v.dest for v in votes} == {2, 3}
    assert all(part_of(v.body, m.VOTE, response=False)["PreVote"] is False for v in votes)
    # the other pre-vote's answer comes late and counts for nothing
    respond(c, 5002, reqs[1], m.vote_response(TP, 0, -1, 5, True))
    assert (c.role, c.epoch) == (Role.CANDIDATE, 6)
    # a candidate that gets it (from a real vote) just retries later, as for any error
    respond(c, 5003, votes[0], {"ErrorCode": Errors.UNSUPPORTED_VERSION})
    assert (c.role, c.epoch) == (Role.CANDIDATE, 6)


def test_a_lost_election_asks_for_pre_votes_again_with_one_more_retry():
    c, _ = make(persisted=ElectionState(5, voted_id=1))  # a restart as candidate of epoch 5
    assert c.role is Role.CANDIDATE and c._retries == 1
    c.step(Tick(c._election_deadline))
    assert (c.role, c.epoch, c.voted_id, c._retries) == (Role.PROSPECTIVE, 5, 1, 2)
    assert c.election_state() == ElectionState(5, voted_id=1)


def test_a_resigned_leader_moves_to_the_next_epoch_then_asks_for_pre_votes_there():
    # Kafka 4's pollResigned: once its election timer is out, unattached in the next epoch with that
    # timer (so at once a prospective there): its pre-votes carry the new epoch, which moves every
    # replica it asks to it (a follower of its old epoch, an observer, would refuse one in the old)
    c, _ = make(persisted=ElectionState(7, leader_id=1))  # a restarted leader: resigned
    assert c.role is Role.RESIGNED
    out = c.step(Tick(c._election_deadline))
    assert (c.role, c.epoch, c.leader_id) == (Role.PROSPECTIVE, 8, -1)
    assert c.election_state() == ElectionState(8) and persists(out) == [PersistElection(ElectionState(8))]
    reqs = vote_reqs(out)
    assert sorted(r.dest for r in reqs) == [2, 3]
    assert all(part_of(r.body, m.VOTE)["ReplicaEpoch"] == 8 and part_of(r.body, m.VOTE)["PreVote"] for r in reqs)
    for r in reqs:
        respond(c, c.now, r, m.vote_response(TP, 0, -1, 8, False))
    # refused: unattached in epoch 8, free to vote for another there
    assert (c.role, c.epoch) == (Role.UNATTACHED, 8) and c.election_state() == ElectionState(8)
    _, p = pre_vote(c, c.now, 2, 8, 7, 0, pre=False)
    assert p["VoteGranted"] is True and c.election_state() == ElectionState(8, voted_id=2)


def test_a_restart_in_the_middle_of_a_pre_vote_comes_back_as_the_role_its_file_names():
    for persisted, role in ((ElectionState(5, leader_id=2), Role.FOLLOWER), (ElectionState(5, voted_id=3), Role.VOTED),
                            (ElectionState(5), Role.UNATTACHED)):
        c, _ = make(persisted=persisted)
        c.step(Tick(c.next_deadline()))
        if c.role is not Role.PROSPECTIVE:  # (a follower's fetch timer ends after its fetch request's)
            c.step(Tick(c.next_deadline()))
        assert c.role is Role.PROSPECTIVE and c.election_state() == persisted
        again = RaftCore(1, (1, 2, 3), c.log, c.election_state(), c.cfg, random.Random(1))
        again.step(Start(0))
        assert (again.role, again.epoch, again.leader_id, again.voted_id) == (
            role, 5, persisted.leader_id, persisted.voted_id)


def test_a_single_voter_stands_at_once_and_pre_vote_off_stands_at_once_too():
    solo, out = make(voters=(1,), persisted=ElectionState(3))
    assert (solo.role, solo.epoch) == (Role.LEADER, 4)
    k, _ = make(persisted=ElectionState(3), pre_vote=False)
    out = k.step(Tick(5000))
    assert (k.role, k.epoch) == (Role.CANDIDATE, 4)
    assert all(part_of(v.body, m.VOTE, response=False)["PreVote"] is False for v in vote_reqs(out))
    # switched off, it still answers pre-votes as Kafka does
    before = quiet(k)
    _, p = pre_vote(k, 5001, 2, 4, 0, 0)
    assert p["VoteGranted"] is True and quiet(k) == before


# ------------------------------------------------------------------------------------ a rejoining node


class Net:
    """Three cores wired by a perfect network that can cut one node off; a tick per deadline."""

    def __init__(self, **cfg) -> None:
        config = RaftConfig(cluster_id=CID, **cfg)
        self.cores = {i: RaftCore(i, (1, 2, 3), MemoryLog(), None, config, random.Random(i)) for i in (1, 2, 3)}
        self.now = 0
        self.seq = 0
        self.queue: list = []
        self.cut: int | None = None
        self.persisted: dict[int, list[ElectionState]] = {i: [] for i in self.cores}
        for i in self.cores:
            self.step(i, Start(0))

    def push(self, t: int, *what) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (t, self.seq, what))

    def step(self, i: int, ev) -> None:
        core = self.cores[i]
        for o in core.step(ev):
            if isinstance(o, Send) and self.cut not in (i, o.dest):
                self.push(self.now + 1, "deliver", o.dest, Receive(self.now + 1, i, o.api, o.body, o.correlation_id,
                                                                  o.is_response))
            elif isinstance(o, Fsync):
                self.push(self.now + 1, "fsync", i)
            elif isinstance(o, PersistElection):
                self.persisted[i].append(o.state)
        d = core.next_deadline()
        if d is not None:
            self.push(d, "tick", i)

    def run(self, until: int) -> None:
        while self.queue and self.queue[0][0] <= until:
            t, _, what = heapq.heappop(self.queue)
            self.now = t
            if what[0] == "deliver":
                self.step(what[1], what[2])
            elif what[0] == "fsync":
                self.cores[what[1]].log.flush()
                self.step(what[1], FsyncComplete(t))
            elif self.cores[what[1]].next_deadline() == t:
                self.step(what[1], Tick(t))
        self.now = until

    def leader(self) -> RaftCore:
        (lead,) = [c for c in self.cores.values() if c.role is Role.LEADER]
        return lead


def rejoin(**cfg) -> tuple[Net, int, int]:
    """Elect, cut a follower off for ten election timeouts, heal, run on; (net, follower, epoch before)."""
    net = Net(**cfg)
    net.run(10_000)
    lead = net.leader()
    net.step(lead.node_id, Append(net.now, ("a", "b")))
    net.run(12_000)
    epoch = lead.epoch
    follower = min(i for i in net.cores if i != lead.node_id)
    net.cut = follower
    net.run(22_000)
    net.cut = None
    net.run(40_000)
    return net, follower, epoch


def test_a_node_cut_off_and_back_does_not_bump_the_epoch_of_a_healthy_quorum():
    net, follower, epoch = rejoin()
    lead = net.leader()
    assert lead.epoch == epoch  # the same leader, in the same epoch, all along
    cut = net.cores[follower]
    assert (cut.role, cut.epoch, cut.leader_id) == (Role.FOLLOWER, epoch, lead.node_id)
    assert max(s.epoch for states in net.persisted.values() for s in states) == epoch
    assert cut.high_watermark == lead.high_watermark >= 3
    # without pre-vote the same schedule forces an election on rejoin (KIP-595's disruptive server)
    net, follower, epoch = rejoin(pre_vote=False)
    assert max(c.epoch for c in net.cores.values()) > epoch


# ------------------------------------------------------------------------------------ on the wire


def test_vote_bodies_encode_at_v2_and_a_standard_vote_also_at_v0_and_v1():
    pre = m.vote_request(TP, CID, 2, 5, 1, 4, 10, pre_vote=True)
    std = m.vote_request(TP, CID, 2, 6, 1, 4, 10)
    assert m.VERSIONS[m.VOTE] == 2
    for body in (pre, std):
        wire = encode_request(m.VOTE, 2, 9, "raft-client-1", body)
        assert decode_request(wire) == (m.VOTE, 2, 9, "raft-client-1", body)
    for v in (0, 1):
        got = decode_request(encode_request(m.VOTE, v, 9, "c", std))[4]
        p = got["Topics"][0]["Partitions"][0]
        assert (p["ReplicaEpoch"], p["ReplicaId"], p["LastOffsetEpoch"], p["LastOffset"]) == (6, 1, 4, 10)
        assert "PreVote" not in p  # (absent below v2: the receiver reads a standard vote)
        assert got.get("VoterId", -1) == (2 if v == 1 else -1)  # (v1 added it)
        # a pre-vote cannot be said below v2 (a non-default field the version lacks, as in Kafka)
        with pytest.raises(ValueError, match="non-default PreVote at version"):
            encode_request(m.VOTE, v, 9, "c", pre)


async def _old_voter(seen: list[tuple[int, dict]], writers: list):
    """A peer whose ApiVersions says Vote v0..v1 (as a Kafka 3.9 controller's does); it answers the
    Vote requests it gets, granting them, and records their version and body."""

    async def serve(reader, writer):
        writers.append(writer)
        while (frame := await read_frame(reader)) is not None:
            api, version, corr, _client, body = decode_request(frame)
            if api == ApiKey.API_VERSIONS:
                keys = [{"ApiKey": ApiKey.API_VERSIONS, "MinVersion": 0, "MaxVersion": 3},
                        {"ApiKey": ApiKey.VOTE, "MinVersion": 0, "MaxVersion": 1}]
                write_frame(writer, encode_response(api, version, corr, {"ErrorCode": 0, "ApiKeys": keys}))
            else:
                seen.append((version, body))
                answer = m.vote_response(TP, 0, -1, body["Topics"][0]["Partitions"][0]["ReplicaEpoch"], True)
                write_frame(writer, encode_response(api, version, corr, answer))
            await writer.drain()
        writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0)


@pytest.mark.timeout(60)
def test_a_pre_vote_to_a_peer_without_vote_v2_is_answered_unsupported_version_and_a_vote_goes_at_v1():
    seen: list[tuple[int, dict]] = []

    async def main():
        writers: list = []
        server = await _old_voter(seen, writers)
        port = server.sockets[0].getsockname()[1]
        conn = PeerConnection(2, "127.0.0.1", port, client_id="raft-client-1", versions=m.VERSIONS)
        loop = asyncio.get_running_loop()
        try:
            answers = []
            for body in (m.vote_request(TP, CID, 2, 5, 1, 4, 10, pre_vote=True), m.vote_request(TP, CID, 2, 6, 1, 4, 10)):
                fut = loop.create_future()
                conn.send(m.VOTE, body, fut.set_result)
                answers.append(await asyncio.wait_for(fut, 30))
            return answers
        finally:
            await conn.close()
            server.close()
            for w in writers:
                w.close()
                await w.wait_closed()
            await server.wait_closed()

    pre_answer, vote_answer = asyncio.run(main())
    assert pre_answer == {"ErrorCode": Errors.UNSUPPORTED_VERSION}
    assert [v for v, _ in seen] == [1]  # only the standard vote went out, at v1
    p = seen[0][1]["Topics"][0]["Partitions"][0]
    assert p["ReplicaEpoch"] == 6 and "PreVote" not in p
    assert vote_answer["ErrorCode"] == 0 and vote_answer["Topics"][0]["Partitions"][0]["VoteGranted"] is True
