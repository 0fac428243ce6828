"""Unit tests of the raft core's rules, one core driven by hand-made messages."""

from __future__ import annotations

import random

import pytest

from kraftkit.raft import messages as m
from kraftkit.raft.core import RaftConfig, RaftCore, RaftStateError, end_epoch_backoff_ms
from kraftkit.raft.events import (
    Append, AppendRejected, Appended, Committed, CreateSnapshot, Fsync, FsyncComplete, PeerUnreachable,
    PersistElection, Receive, RequestFailed, Resign, Send, SnapshotLoaded, Start, Tick,
)
from kraftkit.raft.log import Entry, LogError, MemoryLog, SnapshotId
from kraftkit.raft.messages import Errors
from kraftkit.raft.quorum_state import ElectionState, Role

TP = m.METADATA_PARTITION
CID = "cluster"


def make_log(epochs: list[int], flush: bool = True) -> MemoryLog:
    """A log whose entry i has epoch epochs[i]."""
    log = MemoryLog()
    log.append([Entry(i, e, f"p{i}") for i, e in enumerate(epochs)])
    if flush:
        log.flush()
    return log


def make(node_id: int = 1, voters=(1, 2, 3), epochs=(), persisted: ElectionState | None = None,
         **cfg) -> tuple[RaftCore, list]:
    cfg.setdefault("cluster_id", CID)
    core = RaftCore(node_id, voters, make_log(list(epochs)), persisted, RaftConfig(**cfg), random.Random(7))
    return core, core.step(Start(0))


def sends(out: list, api: int | None = None) -> list[Send]:
    return [o for o in out if isinstance(o, Send) and (api is None or o.api == api)]


def part_of(body: dict, api: int, response: bool = True) -> dict:
    one = m.single_partition(body, api, response=response)
    assert one is not None
    return one[1]


def vote(core: RaftCore, now: int, src: int, epoch: int, last_epoch: int, last_offset: int,
         voter_id: int = -1) -> tuple[list, dict]:
    body = m.vote_request(TP, CID, voter_id, epoch, src, last_epoch, last_offset)
    out = core.step(Receive(now, src, m.VOTE, body, 99, False))
    (resp,) = sends(out, m.VOTE)
    assert resp.is_response and resp.correlation_id == 99 and resp.dest == src
    return out, part_of(resp.body, m.VOTE)


def respond(core: RaftCore, now: int, req: Send, body: dict) -> list:
    return core.step(Receive(now, req.dest, req.api, body, req.correlation_id, True))


def elect(core: RaftCore, now: int = 5000) -> list:
    """Drive ``core`` (a voter of 3) through a won pre-vote and a won election; returns the outputs of
    the winning step."""
    out = core.step(Tick(now))
    if core.role is Role.PROSPECTIVE:
        reqs = sends(out, m.VOTE)
        assert reqs and all(part_of(r.body, m.VOTE, response=False)["PreVote"] for r in reqs)
        out = respond(core, now, reqs[0], m.vote_response(TP, 0, -1, core.epoch, True))
    assert core.role is Role.CANDIDATE
    reqs = sends(out, m.VOTE)
    return respond(core, now + 1, reqs[0], m.vote_response(TP, 0, -1, core.epoch, True))


def fetch(core: RaftCore, now: int, src: int, offset: int, last_epoch: int, epoch: int | None = None,
          max_wait: int = 0) -> tuple[list, dict | None]:
    body = m.fetch_request(TP, CID, src, core.epoch if epoch is None else epoch, offset, last_epoch, max_wait)
    out = core.step(Receive(now, src, m.FETCH, body, 500 + now, False))
    rs = sends(out, m.FETCH)
    mine = [r for r in rs if r.correlation_id == 500 + now]
    return out, (part_of(mine[0].body, m.FETCH) if mine else None)


# ------------------------------------------------------------------------------------ start-up


def test_start_states_follow_kafka_initialize():
    assert make(persisted=None)[0].role is Role.UNATTACHED
    c, _ = make(persisted=ElectionState(4, leader_id=1))
    assert (c.role, c.epoch) == (Role.RESIGNED, 4)
    c, _ = make(persisted=ElectionState(4, voted_id=1))
    assert (c.role, c.epoch) == (Role.CANDIDATE, 4)
    c, _ = make(persisted=ElectionState(4, voted_id=2))
    assert (c.role, c.voted_id) == (Role.VOTED, 2)
    c, _ = make(persisted=ElectionState(4, leader_id=3))
    assert (c.role, c.leader_id) == (Role.FOLLOWER, 3)
    # a quorum-state epoch behind the log's last epoch: unattached at the log's epoch, persisted
    c, out = make(epochs=[1, 5], persisted=ElectionState(2, leader_id=3))
    assert (c.role, c.epoch) == (Role.UNATTACHED, 5)
    assert PersistElection(ElectionState(5)) in out


def test_single_voter_elects_itself_at_once_and_commits_after_fsync():
    c, out = make(node_id=1, voters=(1,))
    assert (c.role, c.epoch) == (Role.LEADER, 1)
    assert PersistElection(ElectionState(1, voted_id=1)) in out
    assert PersistElection(ElectionState(1, leader_id=1)) in out
    assert c.high_watermark == 0  # the LeaderChange entry is not flushed yet
    c.log.flush()
    out = c.step(FsyncComplete(1))
    assert Committed(1) in out and c.high_watermark == 1
    assert c.log.entry(0).control and c.log.entry(0).payload["LeaderId"] == 1


# ------------------------------------------------------------------------------------ voting


def test_vote_granted_to_up_to_date_candidate_and_persisted_before_reply():
    c, _ = make(epochs=[1, 1, 2])
    out, p = vote(c, 10, src=2, epoch=3, last_epoch=2, last_offset=3)
    assert p["VoteGranted"] and p["ErrorCode"] == 0 and p["LeaderEpoch"] == 3
    assert (c.role, c.voted_id, c.epoch) == (Role.VOTED, 2, 3)
    kinds = [type(o).__name__ for o in out if isinstance(o, (PersistElection, Send))]
    # the durable vote precedes the response that reveals it
    assert kinds.index("PersistElection") < kinds.index("Send")
    assert out[[i for i, o in enumerate(out) if isinstance(o, PersistElection)][-1]].state == \
        ElectionState(3, voted_id=2)


@pytest.mark.parametrize("last_epoch,last_offset,granted", [
    (2, 3, True),    # equal logs
    (2, 7, True),    # same last epoch, longer
    (3, 1, True),    # higher last epoch, shorter: epoch is compared first
    (2, 2, False),   # same last epoch, shorter
    (1, 9, False),   # lower last epoch, longer
])
def test_vote_compares_last_epoch_then_end_offset(last_epoch, last_offset, granted):
    c, _ = make(epochs=[1, 1, 2])
    out, p = vote(c, 10, src=2, epoch=4, last_epoch=last_epoch, last_offset=last_offset)
    assert p["VoteGranted"] is granted
    assert c.epoch == 4  # a higher epoch is adopted whether or not the vote is granted
    assert c.role is (Role.VOTED if granted else Role.UNATTACHED)


def test_one_vote_per_epoch_and_repeat_grant():
    c, _ = make()
    assert vote(c, 10, 2, 1, 0, 0)[1]["VoteGranted"]
    assert not vote(c, 11, 3, 1, 0, 0)[1]["VoteGranted"]
    assert vote(c, 12, 2, 1, 0, 0)[1]["VoteGranted"]  # the same candidate may ask again


def test_vote_request_validation():
    c, _ = make(persisted=ElectionState(5))
    assert vote(c, 10, 2, 4, 0, 0)[1]["ErrorCode"] == Errors.FENCED_LEADER_EPOCH
    assert vote(c, 10, 2, 6, 6, 0)[1]["ErrorCode"] == Errors.INVALID_REQUEST  # LastOffsetEpoch >= CandidateEpoch
    assert vote(c, 10, 2, 6, 0, -1)[1]["ErrorCode"] == Errors.INVALID_REQUEST
    assert vote(c, 10, 2, 6, 0, 0, voter_id=3)[1]["ErrorCode"] == Errors.INVALID_VOTER_KEY
    assert c.epoch == 6  # the epoch bump happens before the voter key check, as in Kafka


@pytest.mark.parametrize("persisted,role", [
    (ElectionState(3, leader_id=2), Role.FOLLOWER),
    (ElectionState(3, voted_id=1), Role.CANDIDATE),
    (ElectionState(3, leader_id=1), Role.RESIGNED),
])
def test_no_vote_in_the_same_epoch_from_follower_candidate_or_resigned(persisted, role):
    c, _ = make(persisted=persisted)
    assert c.role is role
    assert not vote(c, 10, 3, 3, 0, 0)[1]["VoteGranted"]


def test_follower_of_live_leader_moves_to_higher_epoch_on_vote():
    c, _ = make(persisted=ElectionState(3, leader_id=2))
    _, p = vote(c, 10, 3, 4, 0, 0)
    assert p["VoteGranted"] and (c.role, c.epoch) == (Role.VOTED, 4)


def test_observer_votes_as_its_role_says_but_never_stands():
    # (Kafka's canGrantVote asks nothing of the voter set: with KIP-853 a candidate may count as a
    # voter a replica that has not replicated the VotersRecord making it one)
    c, _ = make(node_id=9)
    assert c.is_observer
    _, p = vote(c, 10, 2, 1, 0, 0)
    assert p["VoteGranted"] and c.epoch == 1 and (c.role, c.voted_id) == (Role.VOTED, 2)
    _, p = vote(c, 11, 3, 1, 0, 0)
    assert not p["VoteGranted"] and c.voted_id == 2  # one vote an epoch, as any replica
    for t in range(0, 60000, 1000):
        c.step(Tick(t))
        assert c.role in (Role.VOTED, Role.UNATTACHED, Role.FOLLOWER)
    assert c.epoch == 1


# ------------------------------------------------------------------------------------ elections


def test_election_timeout_is_jittered_in_t_2t_and_candidate_persists_before_asking():
    for seed in range(20):
        core = RaftCore(1, (1, 2, 3), MemoryLog(), None, RaftConfig(), random.Random(seed))
        core.step(Start(0))
        d = core.next_deadline()
        assert 1000 <= d < 2000
        assert core.step(Tick(d - 1)) == [] or core.role is Role.UNATTACHED
        out = core.step(Tick(d))
        # first the pre-votes, in epoch 0, with nothing persisted
        assert core.role is Role.PROSPECTIVE and core.epoch == 0
        assert not any(isinstance(o, PersistElection) for o in out)
        pre = sends(out, m.VOTE)
        assert {s.dest for s in pre} == {2, 3}
        p = part_of(pre[0].body, m.VOTE, response=False)
        assert (p["ReplicaEpoch"], p["ReplicaId"], p["PreVote"]) == (0, 1, True)
        out = respond(core, d + 1, pre[0], m.vote_response(TP, 0, -1, 0, True))
        assert core.role is Role.CANDIDATE and core.epoch == 1
        first_send = next(i for i, o in enumerate(out) if isinstance(o, Send))
        persist = next(i for i, o in enumerate(out) if isinstance(o, PersistElection))
        assert persist < first_send
        assert {s.dest for s in sends(out, m.VOTE)} == {2, 3}
        p = part_of(sends(out, m.VOTE)[0].body, m.VOTE, response=False)
        assert (p["ReplicaEpoch"], p["ReplicaId"], p["LastOffsetEpoch"], p["LastOffset"]) == (1, 1, 0, 0)
        assert p["PreVote"] is False


def test_winning_candidate_writes_leader_change_and_begins_quorum_epoch():
    c, _ = make(epochs=[1, 1])
    out = elect(c)
    assert c.role is Role.LEADER and c.epoch == 2
    e = c.log.entry(2)
    assert (e.epoch, e.control, e.payload["LeaderId"]) == (2, True, 1)
    assert [v["VoterId"] for v in e.payload["GrantingVoters"]] == [1, 2]
    begins = sends(out, m.BEGIN_QUORUM_EPOCH)
    assert {b.dest for b in begins} == {2, 3}
    p = part_of(begins[0].body, m.BEGIN_QUORUM_EPOCH, response=False)
    assert (p["LeaderId"], p["LeaderEpoch"]) == (1, 2)
    assert any(isinstance(o, Fsync) for o in out)


def stand(c: RaftCore, now: int, voter: int = 2) -> list:
    """A prospective ``c`` (a voter of 3) gets ``voter``'s pre-vote; returns the candidate's outputs."""
    assert c.role is Role.PROSPECTIVE
    corr = next(k for k, (d, api, _) in c._inflight.items() if api == m.VOTE and d == voter)
    out = c.step(Receive(now, voter, m.VOTE, m.vote_response(TP, 0, -1, c.epoch, True), corr, True))
    assert c.role is Role.CANDIDATE
    return out


def test_candidate_backs_off_when_majority_rejects_then_retries_with_next_epoch():
    c, _ = make(election_backoff_max_ms=300)
    c.step(Tick(5000))
    out = stand(c, 5000)
    reqs = sends(out, m.VOTE)
    for r in reqs:
        respond(c, 5001, r, m.vote_response(TP, 0, -1, 1, False))
    # the wait is 100 * k ms, k uniform in [0, 2^retries), capped at 300 ms; the election timer
    # (>= 1000 ms) is not what ends it; then it asks for pre-votes again, in its epoch
    t = 5001
    while c.role is Role.CANDIDATE:
        assert t <= 5001 + 300
        c.step(Tick(t))
        t += 1
    assert c.role is Role.PROSPECTIVE and c.epoch == 1 and c._retries == 2
    stand(c, t)
    assert c.epoch == 2 and c._retries == 2
    seen = set()
    for seed in range(40):
        c = RaftCore(1, (1, 2, 3), MemoryLog(), None, RaftConfig(election_backoff_max_ms=1000), random.Random(seed))
        c.step(Start(0))
        c._retries = 3
        c._start_backoff()
        seen.add(c._backoff_deadline - c.now)
    assert seen <= {0, 100, 200, 300, 400, 500, 600, 700} and len(seen) > 3


def test_candidate_moving_to_higher_epoch_keeps_its_election_deadline():
    c, _ = make()
    c.step(Tick(5000))
    deadline = c._election_deadline
    vote(c, 5010, 2, 5, 0, 0)
    assert c.role is Role.VOTED  # granting resets the timer (Kafka does too)
    c2, _ = make(epochs=[1, 1])
    c2.step(Tick(5000))
    deadline = c2._election_deadline
    vote(c2, 5010, 2, 5, 0, 0)  # stale candidate log: rejected, and the timer is not pushed back
    assert c2.role is Role.UNATTACHED and c2._election_deadline == deadline


def test_fetch_timeout_makes_a_voter_follower_a_candidate():
    c, _ = make(persisted=ElectionState(3, leader_id=2), fetch_timeout_ms=2000)
    assert c.role is Role.FOLLOWER
    c.step(Tick(1999))
    assert c.role is Role.FOLLOWER
    c.step(Tick(2000))
    assert c.role is Role.PROSPECTIVE and (c.epoch, c.leader_id) == (3, 2)
    stand(c, 2001)
    assert c.epoch == 4


def test_a_refused_leader_makes_a_voter_stand_at_once_but_nothing_else_does():
    c, _ = make(persisted=ElectionState(3, leader_id=2), fetch_timeout_ms=2000)
    c.step(PeerUnreachable(10, 3))  # another voter is down: no reason to stand
    assert c.role is Role.FOLLOWER
    out = c.step(PeerUnreachable(11, 2))  # the leader's process is gone
    assert c.role is Role.PROSPECTIVE and c.epoch == 3 and sends(out, m.VOTE)
    out = stand(c, 11, voter=3)
    assert c.epoch == 4 and isinstance(out[0], PersistElection) and sends(out, m.VOTE)
    # switched off, it waits out the fetch timeout as Kafka does
    k, _ = make(persisted=ElectionState(3, leader_id=2), fetch_timeout_ms=2000, elect_on_refused_leader=False)
    k.step(PeerUnreachable(11, 2))
    assert k.role is Role.FOLLOWER
    # as a candidate, a refusing voter counts as a lost vote: with the other voter's rejection the
    # election cannot be won, so it backs off now instead of at the election timeout
    rs = sends(out, m.VOTE)
    to3 = next(r for r in rs if r.dest == 3)
    respond(c, 12, to3, m.vote_response(TP, 0, -1, 4, False))
    assert c._backoff_deadline is None
    out = c.step(PeerUnreachable(13, 2))
    # (after a backoff of 0 ms it asks for pre-votes again at once, in epoch 4)
    assert (c.role is Role.CANDIDATE and c._backoff_deadline is not None and c._backoff_deadline <= 13 + 1000) or (
        c.role is Role.PROSPECTIVE and c.epoch == 4 and sends(out, m.VOTE))
    # an observer never stands, but stops asking the dead leader and asks the other voters
    o, out = make(node_id=9, persisted=ElectionState(3, leader_id=2))
    (f,) = sends(out, m.FETCH)
    o.step(RequestFailed(11, 2, f.correlation_id))
    out = o.step(PeerUnreachable(11, 2))
    assert o.role is Role.FOLLOWER and [s.dest for s in sends(out, m.FETCH)] in ([1], [3])


def test_a_failed_fetch_is_retried_after_the_backoff_not_the_request_timeout():
    c, out = make(persisted=ElectionState(3, leader_id=2), retry_backoff_ms=20, request_timeout_ms=2000)
    (f,) = sends(out, m.FETCH)
    assert c.step(RequestFailed(5, 3, f.correlation_id)) == []  # not that request's node: ignored
    c.step(RequestFailed(5, 2, f.correlation_id))
    assert sends(c.step(Tick(24)), m.FETCH) == []
    (again,) = sends(c.step(Tick(25)), m.FETCH)
    assert again.dest == 2 and again.correlation_id != f.correlation_id
    # a late answer to the failed request is ignored
    assert c.step(Receive(30, 2, m.FETCH, m.fetch_response(TP, 0, 2, 3, high_watermark=0), f.correlation_id, True)) == []

def _fetches_until(c: RaftCore, start: int, end: int, answer) -> list[Send]:
    """Ticks ``c`` every 50 ms from ``start`` to ``end``; each Fetch or FetchSnapshot it sends is answered by
    ``answer(send, now)`` (a response body, or None: never answered) at the next tick. Returns the
    fetches sent."""
    sent: list[Send] = []
    todo: list[Send] = []
    def fetches(out: list) -> list[Send]:
        return [s for s in sends(out) if s.api in (m.FETCH, m.FETCH_SNAPSHOT) and not s.is_response]

    for t in range(start, end, 50):
        todo += fetches(c.step(Tick(t)))
        now, todo = todo, []
        for f in now:  # what was sent since the last tick; fetches its answers cause go out at the next one
            sent.append(f)
            body = answer(f, t)
            if body is not None:
                todo += fetches(respond(c, t, f, body))
    return sent


def test_observer_whose_leader_died_asks_the_other_voters_and_follows_the_new_leader():
    # observer 9 follows leader 2 of epoch 3; 2 dies; voter 3 leads epoch 4 and tells so when asked
    c, out = make(node_id=9, persisted=ElectionState(3, leader_id=2), fetch_timeout_ms=2000, request_timeout_ms=2000)
    assert (c.role, c.leader_id) == (Role.FOLLOWER, 2) and [f.dest for f in sends(out, m.FETCH)] == [2]

    def answer(f: Send, now: int) -> dict | None:
        if f.dest == 2:
            return None  # the dead leader never answers
        if part_of(f.body, m.FETCH, response=False)["CurrentLeaderEpoch"] < 4:
            return m.fetch_response(TP, Errors.FENCED_LEADER_EPOCH, 3, 4)
        return m.fetch_response(TP, 0, 3, 4, high_watermark=0) if f.dest == 3 else \
            m.fetch_response(TP, Errors.NOT_LEADER_OR_FOLLOWER, 3, 4)

    sent = _fetches_until(c, 100, 12000, answer)
    assert (c.role, c.epoch, c.leader_id) == (Role.FOLLOWER, 4, 3)
    assert {f.dest for f in sent} - {2}  # asked someone else than the dead leader
    assert sent[-1].dest == 3 and c._fetch_deadline is not None  # back to fetching from the leader


def test_observer_after_a_fetch_timeout_does_not_stick_to_a_voter_that_is_not_the_leader():
    # the leader 2 is alive but one answer was lost: the observer asks around; a voter that says
    # NOT_LEADER_OR_FOLLOWER (same epoch, same leader) is not asked again and again, another one is
    def answer(f: Send, now: int) -> dict:
        if f.dest == 2:
            return m.fetch_response(TP, 0, 2, 3, high_watermark=0)
        return m.fetch_response(TP, Errors.NOT_LEADER_OR_FOLLOWER, 2, 3)

    for seed in range(10):  # whichever voter the observer happens to ask first
        c = RaftCore(9, (1, 2, 3, 4, 5), MemoryLog(), ElectionState(3, leader_id=2),
                     RaftConfig(cluster_id=CID, fetch_timeout_ms=2000, request_timeout_ms=2000), random.Random(seed))
        c.step(Start(0))
        c.step(Tick(2100))  # the first fetch timed out unanswered, and so did the fetch timeout
        dests = [f.dest for f in _fetches_until(c, 2150, 6000, answer)]
        assert 2 in dests, (seed, dests)  # (the old code asked its first pick forever)
        assert (c.role, c.epoch, c.leader_id) == (Role.FOLLOWER, 3, 2)
        assert dests[-3:] == [2, 2, 2] and c._fetch_deadline is not None


def test_observer_fetching_a_snapshot_does_not_stick_to_a_voter_that_is_not_the_leader():
    # the leader 2 says "take snapshot (10, 3)"; its first FetchSnapshot answer is lost, the fetch
    # timeout passes, and the observer asks around: a voter refusing FetchSnapshot (not the leader)
    # must not be asked forever (found by simulator seed 1000633 --big)
    asked_around = []
    for seed in range(10):
        lost = [True]

        def answer(f: Send, now: int) -> dict | None:
            if f.api == m.FETCH:
                if f.dest == 2:
                    return m.fetch_response(TP, 0, 2, 3, snapshot_id=(10, 3), high_watermark=10)
                return m.fetch_response(TP, Errors.NOT_LEADER_OR_FOLLOWER, 2, 3)
            if f.dest != 2:
                return m.fetch_snapshot_response(TP, Errors.NOT_LEADER_OR_FOLLOWER, 2, 3)
            if lost[0]:
                lost[0] = False
                return None
            return m.fetch_snapshot_response(TP, 0, 2, 3, snapshot_id=(10, 3), size=4, position=0, data=b"snap")

        c = RaftCore(9, (1, 2, 3, 4, 5), MemoryLog(), ElectionState(3, leader_id=2),
                     RaftConfig(cluster_id=CID, fetch_timeout_ms=2000, request_timeout_ms=2000), random.Random(seed))
        out = c.step(Start(0))
        sent = _fetches_until(c, 50, 12000, answer) if not sends(out, m.FETCH) else []
        if not sent:
            (first,) = sends(out, m.FETCH)
            follow = sends(respond(c, 10, first, answer(first, 10)), m.FETCH_SNAPSHOT)
            assert [f.dest for f in follow] == [2] and answer(follow[0], 10) is None  # that answer is lost
            sent = _fetches_until(c, 50, 12000, answer)
        assert c.log.snapshot() == (10, 3), (seed, [(f.api, f.dest) for f in sent])
        asked_around.append(bool({f.dest for f in sent if f.api == m.FETCH_SNAPSHOT} - {2}))
    assert any(asked_around)  # (for some seeds its first pick is the leader itself)


def test_begin_quorum_epoch_is_resent_until_each_voter_fetches():
    c, _ = make(fetch_timeout_ms=2000, request_timeout_ms=300)
    elect(c, 5000)
    resent = []
    for t in range(5002, 9000, 50):
        out = c.step(Tick(t))
        resent += [(t, s.dest) for s in sends(out, m.BEGIN_QUORUM_EPOCH)]
        if t == 6952:
            fetch(c, t, 2, 0, 0)  # voter 2 fetches: it has acknowledged the leader
    to2 = [t for t, d in resent if d == 2]
    to3 = [t for t, d in resent if d == 3]
    # the first send is immediate (in the election step); then every fetch.timeout/2 until acknowledged
    assert to3 == [6002, 7002, 8002]
    assert to2 == [6002]


def test_begin_quorum_epoch_makes_a_voter_follow():
    c, _ = make()
    body = m.begin_quorum_epoch_request(TP, CID, 1, 3, 7)
    out = c.step(Receive(10, 3, m.BEGIN_QUORUM_EPOCH, body, 4, False))
    assert (c.role, c.epoch, c.leader_id) == (Role.FOLLOWER, 7, 3)
    assert PersistElection(ElectionState(7, leader_id=3)) in out
    (r,) = sends(out, m.BEGIN_QUORUM_EPOCH)
    assert part_of(r.body, m.BEGIN_QUORUM_EPOCH)["ErrorCode"] == 0
    (f,) = sends(out, m.FETCH)
    assert f.dest == 3


def test_two_leaders_in_one_epoch_is_fatal():
    c, _ = make(persisted=ElectionState(3, leader_id=2))
    with pytest.raises(RaftStateError, match="two leaders"):
        c.step(Receive(10, 3, m.BEGIN_QUORUM_EPOCH, m.begin_quorum_epoch_request(TP, CID, 1, 3, 3), 4, False))


# ------------------------------------------------------------------------------------ replication and HW


def test_high_watermark_waits_for_an_entry_of_the_leaders_own_epoch():
    # the leader has 4 entries from epoch 1 that were never committed; a follower already has them
    c, _ = make(epochs=[1, 1, 1, 1])
    elect(c)
    assert c.epoch == 2 and c.log.end_offset == 5  # the LeaderChange entry sits at offset 4
    c.log.flush()
    c.step(FsyncComplete(5003))
    _, p = fetch(c, 5004, 2, 4, 1)  # the follower holds 0..3 (epoch 1): a majority, but not of epoch 2
    assert p["HighWatermark"] == -1 and c.high_watermark == 0 and c.leader_high_watermark() is None
    _, p = fetch(c, 5005, 2, 5, 2)  # now it holds the LeaderChange entry too
    assert c.leader_high_watermark() == 5 and c.high_watermark == 5
    assert p["HighWatermark"] == 5


def test_leader_counts_only_flushed_entries_and_only_voters():
    c, _ = make()
    elect(c)
    c.log.flush()
    c.step(FsyncComplete(5002))
    fetch(c, 5003, 2, 1, 1)
    assert c.high_watermark == 1
    out = c.step(Append(5004, ("a", "b")))
    assert Appended(1, 2, 1) in out and Fsync(3) in out
    fetch(c, 5005, 9, 3, 1)  # an observer's fetch does not count
    assert c.high_watermark == 1
    fetch(c, 5006, 2, 3, 1)  # a voter has both, but the leader has not flushed them
    assert c.high_watermark == 1
    c.log.flush()
    out = c.step(FsyncComplete(5007))
    assert Committed(3) in out and c.high_watermark == 3


def test_append_rejected_unless_leader():
    c, _ = make()
    (o,) = [x for x in c.step(Append(10, ("x",))) if isinstance(x, AppendRejected)]
    assert "not the leader" in o.reason


def test_follower_appends_fsyncs_then_fetches_again_and_takes_min_hw():
    c, out = make(persisted=ElectionState(1, leader_id=2))
    (f,) = sends(out, m.FETCH)
    p = part_of(f.body, m.FETCH, response=False)
    assert (p["FetchOffset"], p["LastFetchedEpoch"], p["CurrentLeaderEpoch"]) == (0, 0, 1)
    recs = [[0, 1, "x", False], [1, 1, "y", False]]
    out = respond(c, 10, f, m.fetch_response(TP, 0, 2, 1, high_watermark=5, records=recs))
    assert c.log.end_offset == 2 and Fsync(2) in out
    assert c.high_watermark == 2  # min(leader HW, local end)
    assert not sends(out, m.FETCH)  # waits for the fsync before reporting the new offset
    c.log.flush()
    (f2,) = sends(c.step(FsyncComplete(11)), m.FETCH)
    assert part_of(f2.body, m.FETCH, response=False)["FetchOffset"] == 2


def test_leader_answers_diverging_epoch_and_follower_truncates():
    # leader log: epochs [1,1,2,2] + its LeaderChange in epoch 4; follower: [1,1,2,2,3,3] (epoch 3 lost)
    leader, _ = make(node_id=1, epochs=[1, 1, 2, 2], persisted=ElectionState(3))
    elect(leader)
    assert (leader.role, leader.epoch) == (Role.LEADER, 4)
    _, p = fetch(leader, 5002, 2, 6, 3)
    assert p["DivergingEpoch"] == {"Epoch": 2, "EndOffset": 4}
    _, p = fetch(leader, 5002, 2, 5, 2)  # offset past the end of epoch 2 on the leader
    assert p["DivergingEpoch"] == {"Epoch": 2, "EndOffset": 4}
    _, p = fetch(leader, 5002, 2, 4, 2)
    assert p["DivergingEpoch"] == {"Epoch": -1, "EndOffset": -1} and p["Records"][0][:2] == [4, 4]
    follower, out = make(node_id=2, epochs=[1, 1, 2, 2, 3, 3], persisted=ElectionState(4, leader_id=1))
    (f,) = sends(out, m.FETCH)
    respond(follower, 10, f, m.fetch_response(TP, 0, 1, 4, diverging=(2, 4)))
    assert follower.log.end_offset == 4 and follower.log.last_epoch() == 2
    # a follower with fewer epoch-2 entries truncates to its own end of epoch 2
    short, out = make(node_id=2, epochs=[1, 1, 2, 3, 3, 3], persisted=ElectionState(4, leader_id=1))
    (f,) = sends(out, m.FETCH)
    respond(short, 10, f, m.fetch_response(TP, 0, 1, 4, diverging=(2, 4)))
    assert short.log.end_offset == 3
    # truncation below the high watermark is fatal
    bad, out = make(node_id=2, epochs=[1, 1, 2, 3], persisted=ElectionState(4, leader_id=1))
    bad.high_watermark = 3
    (f,) = sends(out, m.FETCH)
    with pytest.raises(RaftStateError, match="below the high watermark"):
        respond(bad, 10, f, m.fetch_response(TP, 0, 1, 4, diverging=(1, 2)))


def test_fetch_request_validation_and_epoch_checks():
    c, _ = make()
    elect(c)
    assert fetch(c, 5002, 2, 0, 0, epoch=0)[1]["ErrorCode"] == Errors.FENCED_LEADER_EPOCH
    assert fetch(c, 5002, 2, 0, 0, epoch=9)[1]["ErrorCode"] == Errors.UNKNOWN_LEADER_EPOCH
    assert fetch(c, 5002, 2, 0, 5, epoch=1)[1]["ErrorCode"] == Errors.INVALID_REQUEST
    f, _ = make(persisted=ElectionState(1, leader_id=2))
    p = fetch(f, 10, 3, 0, 0, epoch=1)[1]
    assert p["ErrorCode"] == Errors.NOT_LEADER_OR_FOLLOWER and p["CurrentLeader"] == {"LeaderId": 2, "LeaderEpoch": 1}


def test_fetch_waits_in_purgatory_until_new_data():
    c, _ = make()
    elect(c)
    c.log.flush()
    c.step(FsyncComplete(5002))
    out, p = fetch(c, 5003, 2, 1, 1, max_wait=500)
    assert c.high_watermark == 1
    # the HW moved, so the parked fetch was answered at once with the new HW
    assert p is not None and p["HighWatermark"] == 1
    out, p = fetch(c, 5004, 2, 1, 1, max_wait=500)
    assert p is None  # parked: nothing new
    out = c.step(Append(5010, ("z",)))
    (r,) = sends(out, m.FETCH)
    assert part_of(r.body, m.FETCH)["Records"][0][2] == "z"
    _, p = fetch(c, 5011, 2, 2, 1, max_wait=500)
    assert p is None
    (r,) = sends(c.step(Tick(5511)), m.FETCH)  # MaxWaitMs expired: an empty answer
    assert part_of(r.body, m.FETCH)["Records"] is None


# ------------------------------------------------------------------------------------ resignation


def test_resignation_orders_successors_by_replicated_offset():
    c, _ = make(node_id=1, voters=(1, 2, 3, 4))
    out = c.step(Tick(5000))
    for s in sends(out, m.VOTE)[:2]:
        out = respond(c, 5000, s, m.vote_response(TP, 0, -1, 0, True)) or out
    assert c.role is Role.CANDIDATE
    for s in sends(out, m.VOTE)[:2]:
        respond(c, 5001, s, m.vote_response(TP, 0, -1, 1, True))
    assert c.role is Role.LEADER
    c.step(Append(5002, ("a", "b", "c")))
    fetch(c, 5003, 2, 1, 1)
    fetch(c, 5003, 3, 4, 1)
    fetch(c, 5003, 4, 2, 1)
    out = c.step(Resign(5004))
    assert c.role is Role.RESIGNED and c.epoch == 1
    assert not any(isinstance(o, PersistElection) for o in out)  # resigned is a memory-only state
    ends = sends(out, m.END_QUORUM_EPOCH)
    assert {e.dest for e in ends} == {2, 3, 4}
    p = part_of(ends[0].body, m.END_QUORUM_EPOCH, response=False)
    assert p["PreferredSuccessors"] == [3, 4, 2]
    assert [x["CandidateId"] for x in p["PreferredCandidates"]] == [3, 4, 2]


def test_end_epoch_backoff_positions():
    pref = [3, 4, 2]
    assert end_epoch_backoff_ms(pref, 3, 1000) == 0
    assert end_epoch_backoff_ms(pref, 4, 1000) == (1000 >> 2) << 0
    assert end_epoch_backoff_ms(pref, 2, 1000) == (1000 >> 2) << 1
    assert end_epoch_backoff_ms(pref, 7, 1000) == 1000


def test_first_preferred_successor_stands_at_once_others_wait():
    def got_end(node_id: int) -> RaftCore:
        c, _ = make(node_id=node_id, voters=(1, 2, 3), persisted=ElectionState(4, leader_id=1))
        body = m.end_quorum_epoch_request(TP, CID, 1, 4, [3, 2])
        out = c.step(Receive(100, 1, m.END_QUORUM_EPOCH, body, 8, False))
        assert part_of(sends(out, m.END_QUORUM_EPOCH)[0].body, m.END_QUORUM_EPOCH)["ErrorCode"] == 0
        return c
    first = got_end(3)
    assert first.role is Role.PROSPECTIVE and first.epoch == 4  # position 0: no wait
    second = got_end(2)
    assert second.role is Role.FOLLOWER
    second.step(Tick(100 + (1000 >> 1) - 1))
    assert second.role is Role.FOLLOWER
    second.step(Tick(100 + (1000 >> 1)))
    assert second.role is Role.PROSPECTIVE


def test_check_quorum_resigns_a_leader_nobody_fetches_from():
    c, _ = make(fetch_timeout_ms=2000)
    elect(c, 5000)
    c.step(Tick(5000 + 2999))
    assert c.role is Role.LEADER
    c.step(Tick(5001 + 3000))
    assert c.role is Role.RESIGNED


# ------------------------------------------------------------------------------------ snapshots


def test_snapshot_deletes_prefix_and_behind_follower_fetches_it_in_chunks():
    leader, _ = make(node_id=1, snapshot_chunk_bytes=4)
    elect(leader)
    leader.step(Append(5002, tuple(f"v{i}" for i in range(6))))
    leader.log.flush()
    leader.step(FsyncComplete(5003))
    fetch(leader, 5004, 2, 7, 1)
    assert leader.high_watermark == 7
    with pytest.raises(ValueError):
        leader.step(CreateSnapshot(5005, 8, b"too far"))
    leader.step(CreateSnapshot(5005, 5, b"state-at-5"))
    assert leader.log.start_offset == 5 and leader.log.snapshot() == SnapshotId(5, 1)
    # a follower at offset 0 is sent to the snapshot
    _, p = fetch(leader, 5006, 3, 0, 0)
    assert p["SnapshotId"] == {"EndOffset": 5, "Epoch": 1}
    follower, out = make(node_id=3, persisted=ElectionState(1, leader_id=1), snapshot_chunk_bytes=4)
    (f,) = sends(out, m.FETCH)
    out = respond(follower, 10, f, m.fetch_response(TP, 0, 1, 1, snapshot_id=(5, 1)))
    t = 11
    loaded = []
    while True:
        (req,) = sends(out, m.FETCH_SNAPSHOT) or sends(out, m.FETCH)
        if req.api == m.FETCH:
            break
        lo = leader.step(Receive(t, 3, m.FETCH_SNAPSHOT, req.body, req.correlation_id, False))
        (ans,) = sends(lo, m.FETCH_SNAPSHOT)
        assert len(part_of(ans.body, m.FETCH_SNAPSHOT)["UnalignedRecords"]) <= 4
        out = follower.step(Receive(t, 1, m.FETCH_SNAPSHOT, ans.body, req.correlation_id, True))
        loaded += [o for o in out if isinstance(o, SnapshotLoaded)]
        t += 1
    assert loaded == [SnapshotLoaded(SnapshotId(5, 1), b"state-at-5")]
    assert follower.log.start_offset == follower.log.end_offset == 5 and follower.high_watermark == 5
    assert part_of(req.body, m.FETCH, response=False)["FetchOffset"] == 5
    _, p = fetch(leader, t, 3, 5, 1)
    assert p["ErrorCode"] == 0 and p["Records"][0][0] == 5


def test_fetch_snapshot_errors():
    leader, _ = make(node_id=1)
    elect(leader)
    body = m.fetch_snapshot_request(TP, CID, 2, 1, (3, 1), 0, 100)
    out = leader.step(Receive(5002, 2, m.FETCH_SNAPSHOT, body, 1, False))
    assert part_of(sends(out)[0].body, m.FETCH_SNAPSHOT)["ErrorCode"] == Errors.SNAPSHOT_NOT_FOUND


# ------------------------------------------------------------------------------------ memory log


def test_memory_log_epoch_cache_and_crash():
    log = make_log([1, 1, 3, 3, 3, 5], flush=False)
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (1, 2)
    assert log.end_offset_for_epoch(3) == (3, 5)
    assert log.end_offset_for_epoch(9) == (5, 6)
    assert log.epoch_of(4) == 3
    assert log.validate_offset_and_epoch(5, 3) == ("valid", None)
    assert log.validate_offset_and_epoch(6, 3) == ("diverging", (3, 5))
    assert log.validate_offset_and_epoch(3, 2) == ("diverging", (1, 2))
    log.flush()
    log.append([Entry(6, 5, "lost")])
    log.crash()
    assert log.end_offset == 6
    with pytest.raises(LogError):
        log.append([Entry(9, 5, "gap")])
    log.create_snapshot(SnapshotId(4, 3), b"s")
    assert log.start_offset == 4 and log.end_offset_for_epoch(3) == (3, 5)
    assert log.validate_offset_and_epoch(4, 3) == ("valid", None)
    assert log.validate_offset_and_epoch(2, 1) == ("snapshot", (4, 3))
    with pytest.raises(LogError):
        log.truncate_to(3)


# ------------------------------------------------------------------------------------ partition keying


def test_core_is_keyed_by_topic_partition():
    other = m.TopicPartition("__other", 3, m.METADATA_TOPIC_ID)
    core = RaftCore(1, (1, 2, 3), MemoryLog(), None, RaftConfig(cluster_id=CID), random.Random(1), tp=other)
    core.step(Start(0))
    # a vote for the metadata partition is not for this replica
    body = m.vote_request(TP, CID, 1, 9, 2, 0, 0)
    out = core.step(Receive(6000, 2, m.VOTE, body, 1, False))
    (r,) = [s for s in sends(out) if s.is_response]
    assert r.body["ErrorCode"] == Errors.INVALID_REQUEST and core.epoch < 9
    # its own requests name its partition
    out += core.step(Tick(9000))
    reqs = [s for s in sends(out, m.VOTE) if not s.is_response]
    assert reqs
    for s in reqs:
        p = s.body["Topics"][0]
        assert (p["TopicName"], p["Partitions"][0]["PartitionIndex"]) == ("__other", 3)


def test_cluster_id_mismatch_is_rejected():
    c, _ = make()
    body = m.vote_request(TP, "someone-else", 1, 5, 2, 0, 0)
    (r,) = sends(c.step(Receive(10, 2, m.VOTE, body, 1, False)))
    assert r.body["ErrorCode"] == Errors.INCONSISTENT_CLUSTER_ID and c.epoch == 0
    body = m.fetch_request(TP, "someone-else", 2, 0, 0, 0, 0)
    (r,) = sends(c.step(Receive(10, 2, m.FETCH, body, 2, False)))
    assert r.body["ErrorCode"] == Errors.INCONSISTENT_CLUSTER_ID
