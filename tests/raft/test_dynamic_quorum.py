"""KIP-853 dynamic quorums in the raft core: the voter set kept in the log, and the leader's
AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter, on cores joined by an in-memory network.

The expected answers (error codes, what is appended, when a change counts) are Kafka's rules as its
``AddVoterHandler``/``RemoveVoterHandler``/``UpdateVoterHandler`` and ``KRaftControlRecordStateMachine``
apply them; the voter sets are checked against what each log holds, record by record."""

from __future__ import annotations

import dataclasses
import random
import uuid

import pytest

from kraftkit.raft import messages as m
from kraftkit.raft.core import RaftConfig, RaftCore
from kraftkit.raft.events import Fsync, FsyncComplete, Receive, Send, Start, Tick
from kraftkit.raft.log import Entry, MemoryLog
from kraftkit.raft.messages import Errors
from kraftkit.raft.quorum_state import Role
from kraftkit.raft.voters import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    ControlRecord,
    Endpoint,
    KRaftControlState,
    ReplicaKey,
    VoterNode,
    VoterSet,
)

CID = "cluster"
ADMIN = -100  # the source id of an admin client's requests
CFG = dict(election_timeout_ms=300, fetch_timeout_ms=600, election_backoff_max_ms=300, request_timeout_ms=1000,
           fetch_max_wait_ms=100, cluster_id=CID)


def dir_of(i: int) -> uuid.UUID:
    return uuid.UUID(int=1000 + i)


def node(i: int) -> VoterNode:
    return VoterNode(ReplicaKey(i, dir_of(i)), (Endpoint("CONTROLLER", "127.0.0.1", 9000 + i),), (0, 1))


def bootstrap(*ids: int) -> list[ControlRecord]:
    """What ``storage format --standalone`` / ``--initial-controllers`` put in the bootstrap snapshot."""
    return [ControlRecord(KRAFT_VERSION, {"Version": 0, "KRaftVersion": 1}),
            ControlRecord(KRAFT_VOTERS, VoterSet(node(i) for i in ids).to_record())]


class Net:
    """Cores joined by a network that delivers every message at once, in order; fsyncs complete
    at once. Time moves to the next deadline when nothing is in flight."""

    def __init__(self) -> None:
        self.cores: dict[int, RaftCore] = {}
        self.now = 0
        self.queue: list[tuple[int, Send]] = []
        self.admin: dict[int, dict] = {}  # correlation id -> the answer an admin request got
        self.down: set[int] = set()

    def add(self, i: int, log: MemoryLog, bootstrap_ids: tuple[int, ...] = ()) -> RaftCore:
        cfg = RaftConfig(**CFG, endpoints=node(i).endpoints, bootstrap_ids=bootstrap_ids)
        core = RaftCore(i, (), log, None, cfg, random.Random(i), directory_id=dir_of(i))
        self.cores[i] = core
        self.step(i, Start(self.now))
        return core

    def step(self, i: int, event) -> None:
        if i in self.down:
            return
        core = self.cores[i]
        for o in core.step(event):
            if isinstance(o, Send):
                self.queue.append((i, o))
            elif isinstance(o, Fsync):
                core.log.flush()
                self.step(i, FsyncComplete(self.now))

    def deliver(self) -> None:
        while self.queue:
            src, o = self.queue.pop(0)
            if o.dest == ADMIN:
                self.admin[o.correlation_id] = dict(o.body)
            elif o.dest in self.cores and o.dest not in self.down and src not in self.down:
                self.step(o.dest, Receive(self.now, src, o.api, dict(o.body), o.correlation_id, o.is_response))

    def run(self, ms: int) -> None:
        end = self.now + ms
        while True:
            self.deliver()
            deadlines = [d for i, c in self.cores.items() if i not in self.down
                         for d in [c.next_deadline()] if d is not None]
            nxt = min(deadlines, default=end + 1)
            if nxt > end:
                self.now = end
                return
            self.now = max(self.now, nxt)
            for i in list(self.cores):
                self.step(i, Tick(self.now))

    def request(self, i: int, api: int, body: dict, corr: int) -> dict | None:
        self.step(i, Receive(self.now, ADMIN, api, body, corr, False))
        self.deliver()
        return self.admin.get(corr)

    def leader(self) -> RaftCore | None:
        leads = [c for i, c in self.cores.items() if i not in self.down and c.role is Role.LEADER
                 and c.leader_high_watermark() is not None]
        return leads[0] if len(leads) == 1 else None


def add_voter_body(i: int, listener: str = "CONTROLLER") -> dict:
    return {"ClusterId": CID, "TimeoutMs": 5000, "VoterId": i, "VoterDirectoryId": dir_of(i),
            "Listeners": [{"Name": listener, "Host": "127.0.0.1", "Port": 9000 + i}], "AckWhenCommitted": True}


def remove_voter_body(i: int, directory: uuid.UUID | None = None) -> dict:
    return {"ClusterId": CID, "VoterId": i, "VoterDirectoryId": directory or dir_of(i)}


def standalone() -> Net:
    net = Net()
    net.add(1, MemoryLog(bootstrap=bootstrap(1)))
    net.run(2000)
    assert net.leader() is net.cores[1]
    return net


def voter_records(log: MemoryLog) -> list[tuple[int, list[int]]]:
    return [(e.offset, [v["VoterId"] for v in e.payload.body["Voters"]]) for e in log.entries()
            if e.control and isinstance(e.payload, ControlRecord) and e.payload.type == KRAFT_VOTERS]


def test_standalone_leader_writes_the_bootstrap_voters_after_its_leader_change():
    net = standalone()
    log = net.cores[1].log
    first = log.entries()[:3]
    # the LeaderChangeMessage, then the KRaftVersion and Voters records (one batch in a file log)
    assert isinstance(first[0].payload, dict) and first[0].payload["LeaderId"] == 1
    assert [e.payload.type for e in first[1:]] == [KRAFT_VERSION, KRAFT_VOTERS]
    assert all(e.control and e.epoch == first[0].epoch for e in first)
    assert log.kraft.voters_entry() == (2, VoterSet([node(1)]))
    # a later election in the same log does not write them again (the log has them, unchanged)
    assert voter_records(log) == [(2, [1])]


def grow(net: Net, i: int, corr: int) -> dict | None:
    """Start node ``i`` as an observer that knows node 1 as its bootstrap server, let it catch up,
    then ask the leader to add it."""
    net.add(i, MemoryLog(), bootstrap_ids=(1,))
    net.run(1500)
    leader = net.leader()
    assert leader is not None
    ans = net.request(leader.node_id, m.ADD_RAFT_VOTER, add_voter_body(i), corr)
    net.run(1500)
    return net.admin.get(corr) if ans is None else ans


def test_add_voters_one_at_a_time_each_committed_before_the_next():
    net = standalone()
    assert net.cores[1].is_observer is False
    assert grow(net, 2, 1) == m.voter_change_response(Errors.NONE)
    assert grow(net, 3, 2) == m.voter_change_response(Errors.NONE)
    for c in net.cores.values():
        assert c.voters == (1, 2, 3) and not c.is_observer
        assert [ids for _o, ids in voter_records(c.log)] == [[1], [1, 2], [1, 2, 3]]
    leader = net.leader()
    assert leader is not None and leader.node_id == 1
    # each VotersRecord is committed: the high watermark passed the last one everywhere
    last = voter_records(leader.log)[-1][0]
    net.run(1000)
    assert all(c.high_watermark > last for c in net.cores.values())
    # the new voter set counts: with two of three down no commit, with one down commits go on
    net.down.add(3)
    before = leader.high_watermark
    net.step(1, m_append(net.now))
    net.run(500)
    assert leader.high_watermark > before


def m_append(now: int):
    from kraftkit.raft.events import Append

    return Append(now, (b"x",))


def test_a_voter_that_lost_its_leader_after_the_change_can_be_elected():
    net = standalone()
    grow(net, 2, 1)
    grow(net, 3, 2)
    net.down.add(1)
    net.run(5000)
    leader = net.leader()
    assert leader is not None and leader.node_id in (2, 3)
    assert leader.voters == (1, 2, 3)


def test_remove_the_leader_it_resigns_once_committed_and_the_rest_elect():
    net = standalone()
    grow(net, 2, 1)
    grow(net, 3, 2)
    ans = net.request(1, m.REMOVE_RAFT_VOTER, remove_voter_body(1), 3)
    net.run(200)
    assert (ans or net.admin[3]) == m.voter_change_response(Errors.NONE)
    net.run(5000)
    leader = net.leader()
    assert leader is not None and leader.node_id in (2, 3), [(c.node_id, c.role) for c in net.cores.values()]
    assert all(c.voters == (2, 3) for c in net.cores.values())
    assert net.cores[1].is_observer and net.cores[1].role is not Role.LEADER
    # node 1 keeps fetching as an observer
    net.step(leader.node_id, m_append(net.now))
    net.run(1500)
    assert net.cores[1].log.end_offset == leader.log.end_offset


def test_refusals_name_the_reason():
    net = standalone()
    grow(net, 2, 1)
    # already a voter
    ans = net.request(1, m.ADD_RAFT_VOTER, add_voter_body(2), 10)
    assert ans is not None and ans["ErrorCode"] == Errors.DUPLICATE_VOTER
    # not a voter / a voter's id with another directory (a controller whose disk was replaced)
    ans = net.request(1, m.REMOVE_RAFT_VOTER, remove_voter_body(7), 11)
    assert ans is not None and ans["ErrorCode"] == Errors.VOTER_NOT_FOUND
    ans = net.request(1, m.REMOVE_RAFT_VOTER, remove_voter_body(2, uuid.UUID(int=5)), 12)
    assert ans is not None and ans["ErrorCode"] == Errors.VOTER_NOT_FOUND
    # a follower is not the leader
    ans = net.request(2, m.REMOVE_RAFT_VOTER, remove_voter_body(1), 13)
    assert ans is not None and ans["ErrorCode"] == Errors.NOT_LEADER_OR_FOLLOWER
    # no listener named as the quorum's
    ans = net.request(1, m.ADD_RAFT_VOTER, add_voter_body(3, listener="OTHER"), 14)
    assert ans is not None and ans["ErrorCode"] == Errors.INVALID_REQUEST and "CONTROLLER" in ans["ErrorMessage"]
    # another cluster
    ans = net.request(1, m.ADD_RAFT_VOTER, {**add_voter_body(3), "ClusterId": "other"}, 15)
    assert ans is not None and ans["ErrorCode"] == Errors.INCONSISTENT_CLUSTER_ID


def test_one_change_at_a_time_and_an_observer_that_never_fetched_is_not_added():
    net = standalone()
    net.add(2, MemoryLog(), bootstrap_ids=(1,))
    net.down.add(2)  # never fetches: the leader has not seen it catch up
    ans = net.request(1, m.ADD_RAFT_VOTER, add_voter_body(2), 20)
    assert ans is None  # waiting for the new voter's ApiVersions answer
    ans2 = net.request(1, m.REMOVE_RAFT_VOTER, remove_voter_body(1), 21)
    assert ans2 is not None and ans2["ErrorCode"] == Errors.REQUEST_TIMED_OUT and "earlier voter change" in ans2["ErrorMessage"]
    net.run(1500)  # the ApiVersions request times out: the change is aborted
    assert net.admin[20]["ErrorCode"] == Errors.REQUEST_TIMED_OUT and "ApiVersions" in net.admin[20]["ErrorMessage"]
    assert net.cores[1].voters == (1,) and net.cores[1].state.voter_change is None
    # a node that answers ApiVersions but has never fetched from the leader is not caught up
    net.cores[3] = RaftCore(3, (), MemoryLog(), None, RaftConfig(**CFG), random.Random(3), directory_id=dir_of(3))
    net.step(3, Start(net.now))
    ans = net.request(1, m.ADD_RAFT_VOTER, add_voter_body(3), 22)
    assert ans is not None and ans["ErrorCode"] == Errors.REQUEST_TIMED_OUT and "caught up" in ans["ErrorMessage"]
    # up again, node 2 fetches as an observer and is then added
    net.down.discard(2)
    net.run(1500)
    ans = net.request(1, m.ADD_RAFT_VOTER, add_voter_body(2), 23)
    net.run(1000)
    assert (ans or net.admin[23]) == m.voter_change_response(Errors.NONE)
    assert net.cores[2].voters == (1, 2)


def test_a_static_quorum_refuses_voter_changes():
    net = Net()
    core = RaftCore(1, (1,), MemoryLog(), None, RaftConfig(**CFG), random.Random(1))
    net.cores[1] = core
    net.step(1, Start(0))
    net.run(1000)
    ans = net.request(1, m.ADD_RAFT_VOTER, add_voter_body(2), 30)
    assert ans is not None and ans["ErrorCode"] == Errors.UNSUPPORTED_VERSION
    assert "kraft.version is 0" in ans["ErrorMessage"]


def test_update_voter_rewrites_the_endpoints_and_checks_the_epoch():
    net = standalone()
    grow(net, 2, 1)
    leader = net.cores[1]
    body = {"ClusterId": CID, "CurrentLeaderEpoch": leader.epoch, "VoterId": 2, "VoterDirectoryId": dir_of(2),
            "Listeners": [{"Name": "CONTROLLER", "Host": "10.0.0.2", "Port": 19092}],
            "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}}
    ans = net.request(1, m.UPDATE_RAFT_VOTER, body, 40)
    assert ans is not None and ans["ErrorCode"] == Errors.NONE
    assert ans["CurrentLeader"] == {"LeaderId": 1, "LeaderEpoch": leader.epoch, "Host": "127.0.0.1", "Port": 9001}
    net.run(1000)
    assert net.cores[2].endpoint_of(2) == ("10.0.0.2", 19092)
    stale = {**body, "CurrentLeaderEpoch": leader.epoch - 1}
    ans = net.request(1, m.UPDATE_RAFT_VOTER, stale, 41)
    assert ans is not None and ans["ErrorCode"] == Errors.FENCED_LEADER_EPOCH


def test_voter_set_history_follows_truncation_and_snapshots():
    k = KRaftControlState()
    assert k.voters() is None and k.kraft_version() == 0
    k.note_snapshot_records(-1, bootstrap(1))
    k.note(5, ControlRecord(KRAFT_VOTERS, VoterSet([node(1), node(2)]).to_record()))
    k.note(9, ControlRecord(KRAFT_VOTERS, VoterSet([node(1), node(2), node(3)]).to_record()))
    assert k.voters().ids == (1, 2, 3) and k.voters_at(6).ids == (1, 2) and k.voters_at(0).ids == (1,)
    k.truncate(9)  # the uncommitted change is cut: the set before it is back in force
    assert k.voters().ids == (1, 2) and k.kraft_version() == 1
    k.compact(8)
    assert k.voters_entry() == (5, VoterSet([node(1), node(2)]))
    k.truncate(0)
    assert k.voters() is None  # (a log truncated below its bootstrap voters: none left)

    log = MemoryLog(bootstrap=bootstrap(1))
    rec = ControlRecord(KRAFT_VOTERS, VoterSet([node(1), node(2)]).to_record())
    log.append([Entry(0, 1, {"LeaderId": 1}, True), Entry(1, 1, rec, True)])
    assert log.kraft.voters().ids == (1, 2)
    log.truncate_to(1)
    assert log.kraft.voters().ids == (1,)


def test_voter_keys_match_kafka_rules():
    static = VoterSet.of_ids([1, 2])
    assert static.is_voter(ReplicaKey(1, dir_of(9)))  # no directory id: any directory
    dyn = VoterSet([node(1), node(2)])
    assert dyn.is_voter(ReplicaKey(1, dir_of(1))) and not dyn.is_voter(ReplicaKey(1, dir_of(9)))
    assert dyn.remove(ReplicaKey(1, dir_of(9))) is None and dyn.add(node(2)) is None
    assert VoterSet([node(1)]).remove(ReplicaKey(1, dir_of(1))) is None  # never the last voter
    assert VoterSet.from_record(dyn.to_record()) == dyn
    with pytest.raises(ValueError, match="twice"):
        VoterSet([node(1), node(1)])


def test_a_file_log_reads_its_voter_sets_back_and_refuses_a_voters_record_it_cannot_take(tmp_path):
    from kraftkit.raft.file_log import FileRaftLog
    from kraftkit.raft.log import LogError

    log = FileRaftLog(tmp_path / "p")
    two = ControlRecord(KRAFT_VOTERS, VoterSet([node(1), node(2)]).to_record())
    log.append(log.entries_for_append(0, 1, [{"Version": 0, "LeaderId": 1, "Voters": [], "GrantingVoters": []},
                                             ControlRecord(KRAFT_VERSION, {"Version": 0, "KRaftVersion": 1}), two],
                                      control=True))
    log.append(log.entries_for_append(3, 1, [b"data"]))
    # the leader's control records share one batch, as Kafka writes them
    assert [b.offset for b in log.read(0, 10) for _ in [0]] == [0]
    assert log.kraft.voters_entry() == (2, VoterSet([node(1), node(2)])) and log.kraft.kraft_version() == 1
    log.flush()
    log.close()
    again = FileRaftLog(tmp_path / "p")
    assert again.kraft.voters_entry() == (2, VoterSet([node(1), node(2)])) and again.kraft.kraft_version() == 1
    again.truncate_to(3)  # (the data batch goes; the control batch and its voter set stay)
    assert again.kraft.voters_entry() == (2, VoterSet([node(1), node(2)]))
    again.truncate_to(0)
    assert again.kraft.voters() is None and again.kraft.kraft_version() == 0
    # a VotersRecord naming a voter twice (CRC-valid: only its meaning is wrong): the log says where
    bad = two.body | {"Voters": two.body["Voters"] * 2}
    with pytest.raises(LogError, match=r"p: a KRaft control record kraftkit cannot take: offset 0: a VotersRecord "
                                       r"that cannot be a voter set: voter id 1 is given twice"):
        again.append(again.entries_for_append(0, 1, [ControlRecord(KRAFT_VOTERS, bad)], control=True))
    assert again.end_offset == 0  # refused before anything was written


def restart(net: Net, i: int, bootstrap_ids: tuple[int, ...] = ()) -> RaftCore:
    """Node ``i`` crashes (every write was flushed: the net fsyncs at once) and starts again from
    its log and its quorum-state."""
    old = net.cores[i]
    cfg = RaftConfig(**CFG, endpoints=node(i).endpoints, bootstrap_ids=bootstrap_ids)
    core = RaftCore(i, (), old.log, old.election_state(), cfg, random.Random(100 + i), directory_id=dir_of(i))
    net.cores[i] = core
    net.step(i, Start(net.now))
    return core


def test_a_leader_that_crashed_with_an_uncommitted_add_is_elected_with_the_new_voters_vote():
    """Simulator (dynamic seed 35, first schedules): the leader of {1} appended {1, 2} and crashed
    before node 2 fetched it. Node 1 needs node 2's vote, and node 2 is an observer in its own log,
    the follower of node 1's old epoch: Kafka's rules elect node 1 all the same. The restarted leader
    resigns, then moves to the next epoch (pollResigned); its pre-votes carry that epoch, which
    moves node 2 out of its old epoch; an observer answers (pre-)votes as its role says."""
    net = standalone()
    net.add(2, MemoryLog(), bootstrap_ids=(1,))
    net.run(1500)
    assert net.request(1, m.ADD_RAFT_VOTER, add_voter_body(2), 1) is None  # appended, not committed
    assert net.cores[1].voters == (1, 2) and net.cores[2].voters == (1,) and net.cores[2].is_observer
    epoch = net.cores[1].epoch
    restarted = restart(net, 1)
    assert restarted.role is Role.RESIGNED and restarted.voters == (1, 2)
    net.run(5000)
    leader = net.leader()
    assert leader is restarted and leader.epoch > epoch
    assert net.cores[2].voters == (1, 2) and not net.cores[2].is_observer
    last = voter_records(leader.log)[-1][0]
    assert all(c.high_watermark > last for c in net.cores.values())


def test_a_leader_that_removed_itself_and_crashed_restarts_resigned_and_moves_the_others_on():
    """Simulator (dynamic seed 1236): node 1 led {1, 2, 3}, node 3 had not fetched the VotersRecord
    adding it (an observer in its own log, following node 1), and node 1 appended {2, 3} and crashed
    before anyone fetched it. Node 2 needs a second vote: node 1's log is longer, and node 3 refuses
    pre-votes in the epoch of the leader it fetched from. Node 1 restarts resigned (Kafka's
    QuorumState.initialize, observer or not), then moves to the next epoch, which its answers carry
    to node 2; node 3 follows there and votes."""
    net = standalone()
    grow(net, 2, 1)
    net.add(3, MemoryLog(), bootstrap_ids=(1,))
    net.run(1500)
    assert net.request(1, m.ADD_RAFT_VOTER, add_voter_body(3), 2) is None
    net.down.add(3)
    net.run(300)
    assert net.admin[2] == m.voter_change_response(Errors.NONE)
    assert net.cores[2].voters == (1, 2, 3) and net.cores[3].voters == (1, 2) and net.cores[3].is_observer
    assert net.request(1, m.REMOVE_RAFT_VOTER, remove_voter_body(1), 3) is None
    assert net.cores[1].voters == (2, 3)
    restarted = restart(net, 1, bootstrap_ids=(2, 3))
    assert restarted.is_observer and restarted.role is Role.RESIGNED
    net.down.discard(3)
    net.run(10000)
    leader = net.leader()
    assert leader is not None and leader.node_id in (2, 3)
    # the removal was never committed: it is cut from node 1's log, and the three vote again
    assert all(c.voters == (1, 2, 3) for c in net.cores.values())
    assert all(c.log.end_offset == leader.log.end_offset for c in net.cores.values())


def test_add_voter_without_ack_when_committed_is_answered_once_appended():
    """Simulator (the acked-change check's own test, tests/raft/test_simulation.py): an AddRaftVoter
    with AckWhenCommitted false was never answered (the answer's correlation id was cleared before
    it went out). Kafka answers it once the VotersRecord is appended, and still takes no other change
    until that one commits."""
    net = standalone()
    net.add(2, MemoryLog(), bootstrap_ids=(1,))
    net.run(1500)
    leader = net.cores[1]
    ans = net.request(1, m.ADD_RAFT_VOTER, {**add_voter_body(2), "AckWhenCommitted": False}, 50)
    assert ans == m.voter_change_response(Errors.NONE)
    last = voter_records(leader.log)[-1][0]
    assert leader.voters == (1, 2) and leader.high_watermark <= last  # answered before the commit
    ans = net.request(1, m.REMOVE_RAFT_VOTER, remove_voter_body(2), 51)
    assert ans is not None and ans["ErrorCode"] == Errors.REQUEST_TIMED_OUT
    net.run(1000)
    assert leader.high_watermark > last and net.cores[2].voters == (1, 2)
    ans = net.request(1, m.REMOVE_RAFT_VOTER, remove_voter_body(2), 52)
    net.run(1000)
    assert (ans or net.admin[52]) == m.voter_change_response(Errors.NONE)


def test_a_leader_whose_own_removal_timed_out_resigns_when_it_commits_all_the_same():
    """Simulator (dynamic seed 2947): the leader's RemoveRaftVoter of itself timed out (answered
    REQUEST_TIMED_OUT) before it committed; when it did, the leader did not resign (only the waiting
    request made it), went on leading a voter set without it and took the next change, which left
    the only voter of the new set unable to be elected. A leader outside the committed voter set
    resigns, whatever became of the request."""
    net = standalone()
    grow(net, 2, 1)
    grow(net, 3, 2)
    leader = net.cores[1]
    # (a request timeout so short that it runs out before the followers' next fetches)
    leader.cfg = dataclasses.replace(leader.cfg, request_timeout_ms=1)
    assert net.request(1, m.REMOVE_RAFT_VOTER, remove_voter_body(1), 3) is None
    net.run(1)
    assert net.admin[3]["ErrorCode"] == Errors.REQUEST_TIMED_OUT
    assert leader.role is Role.LEADER and leader.voters == (2, 3) and leader.is_observer
    assert leader.high_watermark <= voter_records(leader.log)[-1][0]
    net.run(300)
    assert leader.high_watermark > voter_records(leader.log)[-1][0]  # committed ...
    assert leader.role is not Role.LEADER  # ... and the leader resigned
    ans = net.request(1, m.REMOVE_RAFT_VOTER, remove_voter_body(2), 4)
    assert ans is not None and ans["ErrorCode"] == Errors.NOT_LEADER_OR_FOLLOWER
    net.run(5000)
    new = net.leader()
    assert new is not None and new.node_id in (2, 3) and all(c.voters == (2, 3) for c in net.cores.values())


def test_an_observer_takes_the_leaders_answer_to_a_fetch_sent_to_its_bootstrap_alias():
    """An observer knows the leader only as a bootstrap server (``controller.quorum.bootstrap.servers``
    lists it under an id of its own): the leader's answer to that fetch feeds the observer, which then
    fetches from the leader by id; before, every such answer was dropped and the observer fetched
    through the alias again at once, forever, never appending."""
    net = standalone()
    alias = -(1 << 30)
    obs = RaftCore(2, (), MemoryLog(), None, RaftConfig(**CFG, bootstrap_ids=(alias,)), random.Random(2),
                   directory_id=dir_of(2))
    out = obs.step(Start(net.now))
    out += obs.step(Tick(net.now + 1))
    fetches = [o for o in out if isinstance(o, Send) and o.api == m.FETCH]
    assert fetches and fetches[0].dest == alias
    leader = net.cores[1]
    answers = [o for o in leader.step(Receive(net.now, 2, m.FETCH, dict(fetches[0].body), 77, False))
               if isinstance(o, Send) and o.is_response]
    (answer,) = answers
    obs.step(Receive(net.now + 2, alias, m.FETCH, dict(answer.body), fetches[0].correlation_id, True))
    assert obs.role is Role.FOLLOWER and obs.leader_id == 1  # (an answer of a newer epoch: news only)
    assert obs.endpoint_of(1) == ("127.0.0.1", 9001)  # (from the answer's NodeEndpoints)
    # its fetches to the leader go unanswered past the fetch timeout: it asks the bootstrap servers again
    t = net.now + 2 + CFG["fetch_timeout_ms"] + CFG["request_timeout_ms"] + 10
    out = obs.step(Tick(t))
    fetches = [o for o in out if isinstance(o, Send) and o.api == m.FETCH]
    assert fetches and fetches[-1].dest == alias
    answers = [o for o in leader.step(Receive(t, 2, m.FETCH, dict(fetches[-1].body), 78, False))
               if isinstance(o, Send) and o.is_response]
    obs.step(Receive(t, alias, m.FETCH, dict(answers[0].body), fetches[-1].correlation_id, True))
    assert obs.log.end_offset == leader.log.end_offset  # the leader's records were appended
