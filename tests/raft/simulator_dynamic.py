"""The fault simulator's dynamic-quorum schedules (KIP-853): voters added and removed while the
usual faults run (see :mod:`tests.raft.simulator` for the simulation and the invariants it checks).

A cluster is formatted as a dynamic quorum: the first ``Scenario.voters`` nodes hold the bootstrap
snapshot's KRaftVersion (1) and VotersRecord (their ids and directory ids), the other nodes start
empty as observers that know every node as a bootstrap server. An operator sends AddRaftVoter and
RemoveRaftVoter requests to whichever node it believes leads (the leader of the highest epoch, or
now and then any node), one at a time as Kafka asks, and reads their answers. On top of the usual
faults: a crash of the leader right after it probes a new voter (ApiVersions) or appends a
VotersRecord, before it commits; a node whose directory is wiped, which comes back empty with a new
directory id (it must not count as the voter it was: the operator removes the old key, and may add
the new one). Snapshots carry the voter set in force at their last offset (as Kafka's snapshot
header does), and a fetched snapshot restores it (``MemoryLog(snapshot_records=...)``).

The voter sets are read by the simulator itself, out of each log's records (the bootstrap
records, the snapshot's, the VotersRecords), and these invariants are checked after every event, on
top of the static ones (election safety, log matching, committed data never lost, persist before
send, ...):

  * voter-set-view: the log's own voter-set bookkeeping (``log.kraft``) names the same voters as
    the simulator's reading of the log;
  * one-change: every VotersRecord differs from the set before it by at most one voter, and a
    leader's log never holds more than one VotersRecord past the committed offset;
  * vote-once: a replica (id and directory id) votes for one candidate per epoch;
  * elected-by-majority: when a node becomes leader of epoch E, the replicas that stored a vote for
    it in E include a majority of the voter set in force in its log before E (and itself);
  * majority-hw: each time a leader's high watermark moves, it is durable on a majority of the
    voters in force in its log (by id and directory id);
  * acked-change: an AddRaftVoter/RemoveRaftVoter answered NONE has its VotersRecord committed
    (the last one below the answering leader's high watermark, with the change made), and it stays
    committed: after the faults heal it is in the log (or snapshot) of every live voter.

Liveness: after the faults heal, one leader, and an append made after healing commits on every node.

    python -m tests.raft.simulator --dynamic --seed 7 --trace
    python -m tests.raft.simulator --dynamic --seeds 100000 --jobs 2
"""

from __future__ import annotations

import ast
import dataclasses
import heapq
import random
import uuid
import zlib
from typing import Any

from kraftkit.raft import messages as m
from kraftkit.raft.core import RaftConfig, RaftCore
from kraftkit.raft.events import PersistElection, Receive, Send, StateChanged
from kraftkit.raft.log import Entry, MemoryLog
from kraftkit.raft.messages import Errors
from kraftkit.raft.quorum_state import MemoryQuorumStateStore, Role
from kraftkit.raft.voters import KRAFT_VERSION, KRAFT_VOTERS, ControlRecord, Endpoint, ReplicaKey, VoterNode, VoterSet
from tests.raft.simulator import Node, Scenario, Simulation, Violation, api_name, run_range

ADMIN = -100  # the source id of the operator's requests (an admin client)
IN_FLIGHT_MS = 10_000  # how long the operator treats an unanswered request as possibly still acted on

Key = tuple[int, uuid.UUID]


def directory_of(node_id: int, generation: int) -> uuid.UUID:
    return uuid.UUID(int=((node_id + 1) << 64) | (generation + 1))


def endpoint_of(node_id: int) -> Endpoint:
    return Endpoint("CONTROLLER", f"node{node_id}.sim", 9000 + node_id)


def keys_of(body: dict) -> frozenset[Key]:
    return frozenset((int(v["VoterId"]), v["VoterDirectoryId"]) for v in body["Voters"])


def voter_set(members: Any) -> VoterSet:
    """The voters ``((id, directory generation), ...)``, as the simulator's nodes describe themselves."""
    return VoterSet(VoterNode(ReplicaKey(i, directory_of(i, g)), (endpoint_of(i),), (0, 1)) for i, g in members)


def members_of(body: dict) -> tuple[tuple[int, int], ...]:
    """The inverse of :func:`voter_set` (directory ids are ``directory_of``'s)."""
    return tuple(sorted((int(v["VoterId"]), (v["VoterDirectoryId"].int & 0xFFFFFFFFFFFFFFFF) - 1)
                        for v in body["Voters"]))


def digest(epoch: int, payload: Any) -> int:
    return zlib.crc32(repr((epoch, payload)).encode())


def read_snapshot(data: bytes) -> tuple[int, int, int, dict | None]:
    """``(end offset, epoch and digest of its last entry, voters record or None)`` of a snapshot."""
    end, epoch, dig, members = ast.literal_eval(data.decode())
    return end, epoch, dig, voter_set(members).to_record() if members is not None else None


def snapshot_control_records(data: bytes) -> list[ControlRecord]:
    """What a fetched snapshot's header holds: the kraft.version and the voter set (the simulator's
    snapshot format, read back by ``MemoryLog(snapshot_records=...)``)."""
    voters = read_snapshot(data)[3]
    if voters is None:
        return []
    return [ControlRecord(KRAFT_VERSION, {"Version": 0, "KRaftVersion": 1}), ControlRecord(KRAFT_VOTERS, voters)]


class VoterView:
    """The voter sets in one node's log as the simulator reads them: ``base`` (the snapshot's, else
    the bootstrap's) and ``recs``, the VotersRecords of the log, ``(offset, epoch, keys, body)``."""

    def __init__(self, bootstrap: dict | None) -> None:
        self.bootstrap = bootstrap
        self.base_keys: frozenset[Key] | None = None
        self._base: dict | None = None
        self.base = bootstrap
        self.recs: list[tuple[int, int, frozenset[Key], dict]] = []
        self.end = -1  # scanned up to here
        self.last: Entry | None = None
        self.snap: Any = None

    @property
    def base(self) -> dict | None:
        return self._base

    @base.setter
    def base(self, body: dict | None) -> None:
        self._base = body
        self.base_keys = keys_of(body) if body is not None else None

    def latest(self) -> frozenset[Key] | None:
        return self.recs[-1][2] if self.recs else self.base_keys

    def body_at(self, offset: int) -> dict | None:
        found = self.base
        for off, _e, _k, body in self.recs:
            if off > offset:
                break
            found = body
        return found

    def before_epoch(self, epoch: int) -> frozenset[Key] | None:
        found = self.base_keys
        for _o, e, keys, _b in self.recs:
            if e >= epoch:
                break
            found = keys
        return found


@dataclasses.dataclass
class DynamicNode:
    """What the dynamic schedules keep per node beyond :class:`Node`."""

    directory: uuid.UUID
    generation: int
    view: VoterView
    #: (epoch, incarnation, high watermark) the last majority-hw check saw of it as leader
    hw_checked: tuple[int, int, int] = (-1, -1, -1)
    #: (log, generation) of the log's voter-set bookkeeping last read, and the voters it named
    kraft_seen: tuple[int, int] = (-1, -1)
    kraft_keys: frozenset[Key] | None = None


def dynamic_scenario(seed: int) -> Scenario:
    """The dynamic schedule of ``seed``: 1-3 bootstrap voters and 1-3 more nodes, an operator
    changing the voters every so often, wiped directories and crashes in the middle of changes."""
    sc = Scenario.from_seed(seed)
    r = random.Random(f"dynamic-{seed}")
    voters = r.choice([1, 1, 2, 3, 3])
    extra = r.choice([1, 2, 2, 3]) if voters < 3 else r.choice([1, 1, 2])
    admin_every = r.choice([(100, 800), (300, 2000), (1000, 3000)])
    wipe, change_crash = r.choice([0.0, 0.1, 0.2]), r.choice([0.0, 0.1, 0.3])
    r.random()  # (drawn as before, when a quarter of these schedules ran without pre-vote)
    # Always with pre-vote (KIP-996, Kafka 4.x). Without it, a removed voter whose log is stale (cut
    # off while the voters changed) stands again and again in the old voter set, and every replica it
    # asks, voter or observer, moves to its epoch: an observer so moved is above the leader's epoch,
    # whose fetches the leader answers UNKNOWN_LEADER_EPOCH for good, and the removed one never hears
    # of the leader (seed 69387 of the soak). This is the Raft thesis' "disruptive servers" (section
    # 4.2.3), which Kafka 3.9 (KIP-853 without KIP-996) shares; pre-vote is its cure. The static
    # schedules keep a quarter without pre-vote (Kafka 3.9 peers).
    return dataclasses.replace(
        sc, voters=voters, observers=extra, dynamic=True, admin_every=admin_every, wipe=wipe,
        change_crash=change_crash, config=dataclasses.replace(sc.config, pre_vote=True))


class DynamicSimulation(Simulation):
    def __init__(self, scenario: Scenario, trace: bool = False, **kw: Any) -> None:
        super().__init__(scenario, trace=trace, **kw)
        self.dyn: dict[int, DynamicNode] = {}
        first = VoterSet(VoterNode(ReplicaKey(i, directory_of(i, 0)), (endpoint_of(i),), (0, 1))
                         for i in self.voter_ids)
        bootstrap = [ControlRecord(KRAFT_VERSION, {"Version": 0, "KRaftVersion": 1}),
                     ControlRecord(KRAFT_VOTERS, first.to_record())]
        self.all_ids = tuple(n.id for n in self.nodes)
        for n in self.nodes:
            boot = n.id in self.voter_ids
            n.log = MemoryLog(bootstrap=bootstrap if boot else None, snapshot_records=snapshot_control_records)
            self.dyn[n.id] = DynamicNode(directory_of(n.id, 0), 0, VoterView(first.to_record() if boot else None))
        #: epoch -> replica key -> the candidate it stored its vote for
        self.votes: dict[int, dict[Key, int]] = {}
        #: what a wiped replica (id, old directory) had flushed: the majority-hw check counts it (the
        #: leader counted its acknowledgements, and a lost disk is the fault, not the count)
        self.wiped_flushed: dict[Key, int] = {}
        self.commit_end = 0  # every offset below this is committed (the highest HW any node reached)
        self.admin_corr = 0
        self.admin_reqs: dict[int, tuple[int, Key, int]] = {}  # corr -> (api, key, sent at)
        self.add_requested: dict[Key, int] = {}  # key -> when an AddRaftVoter for it was last sent
        #: (offset, entry) of the VotersRecord of each change answered NONE; checked against the ledger
        self.acked: list[tuple[int, Entry]] = []
        self.acked_pending: list[tuple[int, Entry]] = []
        self.stats.update({"adds": 0, "removes": 0, "changes_acked": 0, "change_refusals": 0, "wipes": 0,
                           "change_crashes": 0, "leader_removals": 0})

    # ------------------------------------------------------------------ nodes

    def make_core(self, node: Node, rng: random.Random) -> RaftCore:
        d = self.dyn[node.id]
        cfg: RaftConfig = dataclasses.replace(self.sc.config, endpoints=(endpoint_of(node.id),),
                                              bootstrap_ids=self.all_ids)
        return RaftCore(node.id, (), node.log, node.store.read(), cfg, rng, records=self.records,
                        directory_id=d.directory)

    def key(self, node: Node) -> Key:
        return node.id, self.dyn[node.id].directory

    def wipe(self, node: Node) -> None:
        """The node's disk is replaced: it comes back empty, with a new directory id."""
        if node.running:
            self.crash(node)
        d = self.dyn[node.id]
        self.wiped_flushed[self.key(node)] = node.log.flushed_offset
        d.generation += 1
        d.directory = directory_of(node.id, d.generation)
        d.view = VoterView(None)
        d.hw_checked = (-1, -1, -1)
        node.log = MemoryLog(snapshot_records=snapshot_control_records)
        node.store = MemoryQuorumStateStore()
        node.max_persisted_epoch = -1
        node.last_snapshot_at = -10**9
        self.stats["wipes"] += 1
        self.log_trace(f"node {node.id} wiped: new directory {d.directory}")

    def refresh(self, node: Node) -> VoterView:
        """Brings the simulator's reading of ``node``'s voter sets up to date with its log."""
        v = self.dyn[node.id].view
        log = node.log
        snap = log.snapshot()
        if (v.snap != snap or v.end > log.end_offset or v.end < log.start_offset
                or (v.end > log.start_offset and log.entry(v.end - 1) != v.last)):
            v.snap = snap
            v.base = read_snapshot(log.read_snapshot())[3] if snap is not None else v.bootstrap
            v.recs = []
            v.end = log.start_offset
        if v.end < log.end_offset:
            for e in log.read(v.end, log.end_offset - v.end):
                if e.control and isinstance(e.payload, ControlRecord) and e.payload.type == KRAFT_VOTERS:
                    keys = keys_of(e.payload.body)
                    prev = v.latest()
                    if prev is not None and len(prev ^ keys) > 1:
                        raise Violation(f"one-change: node {node.id}'s VotersRecord at {e.offset} "
                                        f"{sorted(keys)} differs from the set before it {sorted(prev)} by more "
                                        "than one voter")
                    v.recs.append((e.offset, e.epoch, keys, e.payload.body))
            v.end = log.end_offset
        v.last = log.entry(v.end - 1) if v.end > log.start_offset else None
        return v

    # ------------------------------------------------------------------ snapshots

    def snapshot_data(self, node: Node, end: int) -> bytes:
        """Small (a follower fetches it in chunks of a few bytes): the last entry's epoch and digest,
        and the voter set in force at ``end - 1`` as ``(id, directory generation)`` pairs."""
        e = node.log.entry(end - 1)
        voters = self.refresh(node).body_at(end - 1)
        members = members_of(voters) if voters is not None else None
        if voters is not None and voter_set(members) != VoterSet.from_record(voters):
            raise AssertionError(f"the simulator's snapshot format cannot hold the voters {voters}")
        return repr((end, e.epoch, digest(e.epoch, e.payload), members)).encode()

    def check_snapshot_data(self, node: Node, data: bytes) -> None:
        end, epoch, dig, _voters = read_snapshot(data)
        got = self.ledger.get(end - 1)
        if got is not None and digest(*got) != dig:
            raise Violation(f"committed-data: node {node.id} loaded a snapshot ending with epoch {epoch} at "
                            f"{end - 1}, but {got} was committed there")

    # ------------------------------------------------------------------ outputs and messages

    def on_output(self, node: Node, o: Any) -> None:
        if isinstance(o, PersistElection) and o.state.voted_id >= 0:
            votes = self.votes.setdefault(o.state.epoch, {})
            k = self.key(node)
            prev = votes.setdefault(k, o.state.voted_id)
            if prev != o.state.voted_id:
                raise Violation(f"vote-once: replica {k} voted for {prev} and {o.state.voted_id} in epoch "
                                f"{o.state.epoch}")
        elif isinstance(o, StateChanged) and o.role is Role.LEADER:
            self.check_elected(node, o.epoch)
        elif (isinstance(o, Send) and o.api == m.API_VERSIONS and not o.is_response and not self.healed
              and self.rng.random() < self.sc.change_crash):  # the leader dies while it probes a new voter
            self.stats["change_crashes"] += 1
            self.push(self.now + self.rng.randint(0, 5), "crash", node.id, node.incarnation)

    def check_elected(self, node: Node, epoch: int) -> None:
        """elected-by-majority (module docstring)."""
        voters = self.refresh(node).before_epoch(epoch)
        k = self.key(node)
        if voters is None or k not in voters:
            raise Violation(f"elected-by-majority: node {k} leads epoch {epoch} but is not in the voter set in "
                            f"force in its log {sorted(voters) if voters else None}")
        granted = {v for v, cand in self.votes.get(epoch, {}).items() if cand == node.id and v in voters}
        if len(granted) < len(voters) // 2 + 1:
            raise Violation(f"elected-by-majority: node {node.id} leads epoch {epoch} with the votes of "
                            f"{sorted(granted)}, not a majority of the voters {sorted(voters)}")

    def send(self, node: Node, o: Send) -> None:
        if o.dest == ADMIN:
            self.stats["messages"] += 1
            self.on_admin_answer(node, o)
            return
        super().send(node, o)

    def on_admin_answer(self, node: Node, o: Send) -> None:
        req = self.admin_reqs.pop(o.correlation_id, None)
        if req is None:
            raise Violation(f"node {node.id} answered an admin request it was never sent: {o}")
        api, key, _sent = req
        err = o.body["ErrorCode"]
        self.log_trace(f"node {node.id} answers {api_name(api)} {key}: error {err} {o.body.get('ErrorMessage')}")
        if err != Errors.NONE:
            self.stats["change_refusals"] += 1
            return
        self.stats["changes_acked"] += 1
        core = node.core
        assert core is not None
        v = self.refresh(node)
        hw = core.high_watermark
        below = [r for r in v.recs if r[0] < hw]
        if not below or any(r[0] >= hw for r in v.recs):
            raise Violation(f"acked-change: node {node.id} answered {api_name(api)} {key} NONE with its voter "
                            f"records at {[r[0] for r in v.recs]} and high watermark {hw}")
        off, _epoch, keys, _body = below[-1]
        done = key in keys if api == m.ADD_RAFT_VOTER else key not in keys
        if not done:
            raise Violation(f"acked-change: node {node.id} answered {api_name(api)} {key} NONE but the last "
                            f"committed voter set (offset {off}) is {sorted(keys)}")
        self.acked_pending.append((off, node.log.entry(off)))

    # ------------------------------------------------------------------ the operator and the faults

    def admin(self) -> Node | None:
        self.push(self.now + self.rng.randint(*self.sc.admin_every), "admin")
        if self.healed:
            return None
        running = [n for n in self.nodes if n.running]
        if not running:
            return None
        leaders = [n for n in running if n.core.role is Role.LEADER]
        if leaders and self.rng.random() < 0.9:
            target = max(leaders, key=lambda n: n.core.epoch)
        else:
            target = self.rng.choice(running)
        view = self.refresh(target).latest()
        if view is None:
            return None
        stale = sorted(k for k in view if self.dyn[k[0]].directory != k[1])
        ids = {i for i, _ in view}
        joiners = [n for n in self.nodes if n.id not in ids]
        if stale:
            api, key = m.REMOVE_RAFT_VOTER, stale[0]
        elif joiners and len(view) < 5 and (len(view) == 1 or self.rng.random() < 0.5):
            api, key = m.ADD_RAFT_VOTER, self.key(self.rng.choice(joiners))
        elif len(view) > 2:
            # (never one out of two: should the new set reach one voter's log and not the other's, the
            # voter left in it is the one without it: it needs the removed one's vote, whose log is
            # longer, and the removed one, an observer in its own log, never stands: Kafka's rules)
            api, key = m.REMOVE_RAFT_VOTER, self.rng.choice(sorted(view))
        else:
            return None
        return self.ask(target, api, key)

    def ask(self, target: Node, api: int, key: Key) -> Node:
        """The operator sends ``target`` an AddRaftVoter or RemoveRaftVoter for ``key``."""
        self.admin_corr += 1
        corr = self.admin_corr
        if api == m.ADD_RAFT_VOTER:
            self.stats["adds"] += 1
            self.add_requested[key] = self.now
            e = endpoint_of(key[0])
            body = {"ClusterId": self.sc.config.cluster_id, "TimeoutMs": 3000, "VoterId": key[0],
                    "VoterDirectoryId": key[1], "Listeners": [{"Name": e.name, "Host": e.host, "Port": e.port}],
                    "AckWhenCommitted": True}
        else:
            self.stats["removes"] += 1
            if key[0] == target.id and target.core.role is Role.LEADER:
                self.stats["leader_removals"] += 1
            body = {"ClusterId": self.sc.config.cluster_id, "VoterId": key[0], "VoterDirectoryId": key[1]}
        self.admin_reqs[corr] = (api, key, self.now)
        self.log_trace(f"operator asks node {target.id}: {api_name(api)} {key}")
        self.step(target, Receive(self.now, ADMIN, api, body, corr, False))
        return target

    def fault(self) -> None:
        if self.rng.random() < self.sc.wipe:
            self.push(self.now + self.rng.randint(*self.sc.fault_every), "fault")
            n = self.wipe_candidate()
            if n is not None:
                self.wipe(n)
                self.push(self.now + self.rng.randint(50, 3000), "restart", n.id)
            return
        super().fault()

    def wipe_candidate(self) -> Node | None:
        """A node whose disk can be lost without the quorum losing a majority for good: one in no
        voter set of any log, or a voter of sets of three or more with no other stale voter while no
        voter change is in flight and every log holds the same voter set (the operator then removes
        its old key). A voter set some logs hold and others not may need the wiped node's vote: a
        replica outside the set in its own log never stands, under Kafka's rules too."""
        sets = [self.refresh(n).latest() for n in self.nodes]
        stale_anywhere = any(self.dyn[i].directory != d for s in sets if s for i, d in s)
        diverged = len({frozenset(s) for s in sets if s}) > 1
        in_flight = any(self.now - sent < IN_FLIGHT_MS for _a, _k, sent in self.admin_reqs.values())
        cands = []
        for n in self.nodes:
            k = self.key(n)
            if self.now - self.add_requested.get(k, -IN_FLIGHT_MS) < IN_FLIGHT_MS:
                continue
            holding = [s for s in sets if s and k in s]
            if holding and (in_flight or stale_anywhere or diverged or any(len(s) < 3 for s in holding)):
                continue
            cands.append(n)
        return self.rng.choice(cands) if cands else None

    def dispatch(self, kind: str, args: tuple) -> Node | None:
        if kind == "admin":
            return self.admin()
        return super().dispatch(kind, args)

    # ------------------------------------------------------------------ invariants

    def check_node(self, node: Node) -> None:
        super().check_node(node)
        d = self.dyn[node.id]
        before = len(d.view.recs)
        v = self.refresh(node)
        mine = v.latest()
        seen = (id(node.log), node.log.kraft.generation)
        if d.kraft_seen != seen:
            kraft = node.log.kraft.voters()
            d.kraft_keys = frozenset((n.key.id, n.key.directory_id) for n in kraft) if kraft is not None else None
            d.kraft_seen = seen
        theirs = d.kraft_keys
        if theirs != mine:
            raise Violation(f"voter-set-view: node {node.id}'s log says the voters are "
                            f"{sorted(theirs) if theirs else None}, its records say {sorted(mine) if mine else None}")
        core = node.core
        if core is None:
            return
        self.commit_end = max(self.commit_end, core.high_watermark)
        if (core.role is Role.LEADER and len(v.recs) > before and v.recs[-1][1] == core.epoch and not self.healed
                and self.rng.random() < self.sc.change_crash):
            # the leader dies right after appending a VotersRecord, before it commits
            self.stats["change_crashes"] += 1
            self.push(self.now + self.rng.randint(0, 5), "crash", node.id, node.incarnation)

    def check_global(self) -> None:
        super().check_global()
        for n in self.nodes:
            if n.running and n.core.role is Role.LEADER:
                tail = [r[0] for r in self.refresh(n).recs if r[0] >= self.commit_end]
                if len(tail) > 1:
                    raise Violation(f"one-change: leader {n.id} (epoch {n.core.epoch}) holds VotersRecords at "
                                    f"{tail}, more than one past the committed offset {self.commit_end}")
        if self.acked_pending:
            left = []
            for off, e in self.acked_pending:
                got = self.ledger.get(off)
                if got is None:
                    left.append((off, e))
                elif got != (e.epoch, e.payload):
                    raise Violation(f"acked-change: the change answered at offset {off} is not what was committed "
                                    f"there: {got}")
                else:
                    self.acked.append((off, e))
            self.acked_pending = left

    def check_majority_hw(self, leaders: list[Node]) -> None:
        for n in leaders:
            lhw = n.core.leader_high_watermark()
            d = self.dyn[n.id]
            if lhw is None or d.hw_checked == (n.core.epoch, n.incarnation, lhw):
                continue
            d.hw_checked = (n.core.epoch, n.incarnation, lhw)
            voters = self.refresh(n).latest() or frozenset()
            durable = [k for k in voters
                       if (self.nodes[k[0]].log.flushed_offset if self.dyn[k[0]].directory == k[1]
                           else self.wiped_flushed.get(k, -1)) >= lhw]
            if len(durable) < len(voters) // 2 + 1:
                raise Violation(f"majority-hw: leader {n.id} HW {lhw} is durable on {sorted(durable)}, not a "
                                f"majority of the voters {sorted(voters)}")

    # ------------------------------------------------------------------ the run

    def run_rejoin(self, max_events: int = 2_000_000) -> dict:
        """The rejoin schedule (no-disruption) on a dynamic quorum whose voters changed first: once
        a leader has committed, the operator adds the observer and removes a bootstrap voter other
        than the leader (each retried until answered NONE); then a follower of the new voter set is
        cut off and healed as in :meth:`Simulation.run_rejoin`."""
        for n in self.nodes:
            self.push(n.id, "restart", n.id)
        self.push(self.rng.randint(*self.sc.append_every), "append")
        joiner = self.nodes[-1]
        steps = [m.ADD_RAFT_VOTER, m.REMOVE_RAFT_VOTER]
        removed: Key | None = None
        next_ask = 0
        while steps:
            if not self.queue or self.events > max_events or self.now > 60_000:
                raise Violation(f"liveness: the voter changes before the cut did not complete ({steps} left)")
            t, _, kind, args = heapq.heappop(self.queue)
            self.now = t
            self.events += 1
            touched = self.dispatch(kind, args)
            if touched is not None:
                self.check_node(touched)
            self.check_global()
            acked = len(self.acked) + len(self.acked_pending)
            if acked == 2 - len(steps) + 1:
                steps.pop(0)
                continue
            leaders = [n for n in self.nodes if n.running and n.core.role is Role.LEADER
                       and n.core.leader_high_watermark() is not None]
            if not leaders or self.now < next_ask or self.admin_reqs:
                continue
            leader = leaders[0]
            next_ask = self.now + 500
            if steps[0] == m.ADD_RAFT_VOTER:
                self.ask(leader, m.ADD_RAFT_VOTER, self.key(joiner))
            else:
                if removed is None:
                    removed = self.key(self.rng.choice([n for n in self.nodes[:-1] if n is not leader]))
                self.ask(leader, m.REMOVE_RAFT_VOTER, removed)
        leader = next(n for n in self.nodes if n.running and n.core.role is Role.LEADER)
        voters = self.refresh(leader).latest() or frozenset()
        self.voter_ids = sorted(i for i, _ in voters)
        self.log_trace(f"=== voters now {self.voter_ids}: the rejoin schedule starts ===")
        return self.rejoin_loop(max_events)

    def run(self, max_events: int = 2_000_000) -> dict:
        self.push(self.rng.randint(*self.sc.admin_every), "admin")
        return super().run(max_events)

    def liveness_reached(self) -> bool:
        if not super().liveness_reached():
            return False
        leaders = [n for n in self.nodes if n.core.role is Role.LEADER]
        if len(leaders) != 1:
            return False
        voters = self.refresh(leaders[0]).latest() or frozenset()
        for off, e in self.acked + self.acked_pending:
            for i, d in voters:
                n = self.nodes[i]
                if self.dyn[i].directory != d:
                    continue
                # every voter has committed past the liveness target, appended after healing: below
                # its high watermark it holds the change (a change acknowledged after the target may
                # still be on its way to a voter that lags by a fetch: seeds 85209, 89571)
                if n.log.start_offset <= off < n.core.high_watermark and (
                        off >= n.log.end_offset or n.log.entry(off) != e):
                    raise Violation(f"acked-change: voter {i} lacks the change committed at offset {off}")
        return True


def rejoin_scenario(seed: int) -> Scenario:
    """A rejoin schedule (KIP-996's disruptive server) on a dynamic quorum of 3 or 5 bootstrap voters
    and one observer, which the voter changes before the cut bring in."""
    return dataclasses.replace(Scenario.rejoin_from_seed(seed), observers=1, dynamic=True)


def run_dynamic_rejoin(seed: int, trace: bool = False) -> dict:
    """Run one dynamic rejoin schedule; raise :class:`Violation` naming the seed and the replay command."""
    sim = DynamicSimulation(rejoin_scenario(seed), trace=trace)
    try:
        return sim.run_rejoin()
    except Violation as e:
        tail = "\n".join(sim.trace[-80:]) if trace else ""
        raise Violation(f"raft dynamic rejoin seed {seed} failed at t={sim.now} ms after {sim.events} events: {e}\n"
                        f"replay: .venv/bin/python -m tests.raft.simulator --dynamic --rejoin --seed {seed} --trace"
                        + (f"\n--- trace tail ---\n{tail}" if tail else "")) from e


def run_dynamic_rejoins(first: int, count: int) -> tuple[list[tuple[int, str]], int]:
    return run_range(run_dynamic_rejoin, range(first, first + count))


def replay_command(seed: int) -> str:
    return f".venv/bin/python -m tests.raft.simulator --dynamic --seed {seed} --trace"


def run_dynamic(seed: int, trace: bool = False) -> dict:
    """Run one dynamic schedule; raise :class:`Violation` naming the seed and the replay command."""
    sim = DynamicSimulation(dynamic_scenario(seed), trace=trace)
    try:
        return sim.run()
    except Violation as e:
        tail = "\n".join(sim.trace[-80:]) if trace else ""
        raise Violation(f"raft dynamic seed {seed} failed at t={sim.now} ms after {sim.events} events: {e}\n"
                        f"replay: {replay_command(seed)}" + (f"\n--- trace tail ---\n{tail}" if tail else "")) from e


def worker(args: tuple[int, int]) -> tuple[list[tuple[int, str]], int]:
    return run_range(run_dynamic, range(*args))
