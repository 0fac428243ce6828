"""A seeded fault simulator for :class:`kraftkit.raft.core.RaftCore` (like Kafka's RaftEventSimulationTest).

Many voters and observers run in one process on a simulated clock. The network delays, loses,
duplicates and reorders messages and can be partitioned (symmetric or one-way); nodes crash (losing
every un-fsynced log entry, as ``MemoryLog.crash`` does) and restart from their quorum-state store
and log; the leader resigns gracefully; every node snapshots its committed prefix and deletes it.
After every single event the invariants below are checked; after the faults heal, a leader must be
elected and a fresh append must commit on every node within a bounded simulated time.

Everything random comes from the seed, so a failing seed replays exactly::

    python -m tests.raft.simulator --seed 1234 --trace     # replay one seed, print the event trace
    python -m tests.raft.simulator --seeds 100000          # the soak (seeds 0..99999)

Invariants (checked after every event; persist-before-send on every message sent):
  * persist-before-send: no message carries an epoch, vote or leadership claim that is not already
    in the sender's quorum-state store;
  * single-leader: at most one leader per epoch (in-memory roles and persisted election states);
  * monotonic-epoch: a node's persisted epoch never goes down; a running node's in-memory epoch
    equals its persisted one;
  * monotonic-hw: a running node's high watermark never goes down, nor does the HW of the
    highest-epoch leader;
  * committed-data: every entry below a node's HW equals the entry any other node committed at that
    offset, and loaded snapshots agree with it (committed data is never lost or changed);
  * leader-completeness: a leader of epoch E holds every entry committed in an earlier epoch;
  * majority-hw: a leader's HW is durable (flushed) on a majority of the voters;
  * snapshot-at-log-start: a node's snapshot ends exactly at its log start, and the leader-epoch
    cache validates it.

The rejoin schedules (:func:`run_rejoin`, KIP-996's disruptive server) check one more, after every
event, on top of those: once a leader has committed, one of its followers is cut off from every
node for a while and then healed, with nothing else going wrong:
  * no-disruption: while the follower is away and after it is back, no node (in memory or in its
    quorum-state) gets past the healthy leader's epoch and that leader stays leader; by the end the
    rejoined node follows it and has committed an append made after it came back. With pre-vote off
    (KIP-595) the returning node's higher epoch forces an election, which this catches.

    python -m tests.raft.simulator --rejoin --seed 7 --trace

The dynamic-quorum schedules (KIP-853 voter changes among these faults, with their own invariants)
are in :mod:`tests.raft.simulator_dynamic`::

    python -m tests.raft.simulator --dynamic --seeds 100000 --jobs 2
    python -m tests.raft.simulator --dynamic --seed 7 --trace
    python -m tests.raft.simulator --dynamic --rejoin --seeds 1000
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import heapq
import multiprocessing
import random
import sys
import time
from typing import Any, Callable

from kraftkit.raft import messages as m
from kraftkit.raft.core import RaftConfig, RaftCore, RaftStateError, RecordsAdapter
from kraftkit.raft.events import (
    Append, Appended, Committed, CreateSnapshot, Fsync, FsyncComplete, PeerUnreachable, PersistElection, Receive,
    RequestFailed, Resign, Send, SnapshotLoaded, Start, StateChanged, Tick,
)
from kraftkit.raft.log import LogError, MemoryLog
from kraftkit.raft.quorum_state import MemoryQuorumStateStore, Role
from kraftkit.raft.state import FollowerState

CORR_STRIDE = 1 << 40  # correlation ids of different incarnations never collide


class Violation(AssertionError):
    """An invariant or liveness failure in one simulated run."""


@dataclasses.dataclass
class Scenario:
    """Everything about one run that the seed decides."""

    seed: int
    voters: int
    observers: int
    fault_ms: int
    liveness_ms: int
    loss: float
    dup: float
    max_delay: int
    fault_every: tuple[int, int]
    append_every: tuple[int, int]
    snapshot_every: int  # entries past the log start before a node snapshots ...
    snapshot_interval_ms: int  # ... and at most this often (Kafka cleans the log only periodically)
    crash_after_persist: float  # chance that a node crashes right after a role change
    config: RaftConfig
    #: rejoin schedules: no appends while the node is away (its log stays as up to date as the others')
    idle_while_away: bool = False
    #: dynamic-quorum schedules (tests/raft/simulator_dynamic.py): the operator's pace, the chance that
    #: a fault wipes a node's directory, and that a leader crashes in the middle of a voter change
    dynamic: bool = False
    admin_every: tuple[int, int] = (1000, 3000)
    wipe: float = 0.0
    change_crash: float = 0.0

    @classmethod
    def from_seed(cls, seed: int, big: bool = False) -> "Scenario":
        r = random.Random(f"scenario-{seed}")
        voters = r.choice([1, 3, 3, 3, 5, 5] if big else [1, 2, 3, 3, 3, 5])
        observers = r.choice([0, 0, 1, 2])
        cfg = RaftConfig(election_timeout_ms=1000, fetch_timeout_ms=2000,
                         election_backoff_max_ms=r.choice([100, 1000]), request_timeout_ms=r.choice([500, 2000]),
                         retry_backoff_ms=20, fetch_max_wait_ms=r.choice([100, 500]),
                         max_fetch_entries=r.choice([3, 50]), snapshot_chunk_bytes=r.choice([7, 64, 1 << 20]),
                         cluster_id="sim-cluster")
        return cls(seed=seed, voters=voters, observers=observers,
                   fault_ms=r.choice([3000, 6000, 10000]) * (2 if big else 1), liveness_ms=30000,
                   loss=r.choice([0.0, 0.02, 0.1, 0.3]), dup=r.choice([0.0, 0.0, 0.05, 0.2]),
                   max_delay=r.choice([2, 10, 40]), fault_every=r.choice([(100, 600), (300, 2000), (1000, 4000)]),
                   append_every=r.choice([(5, 50), (20, 200)]), snapshot_every=r.choice([5, 20, 10**9]),
                   snapshot_interval_ms=r.choice([1000, 3000]),
                   crash_after_persist=r.choice([0.0, 0.0, 0.1]),
                   # (drawn last, so the draws above are those of the schedules before pre-vote)
                   config=dataclasses.replace(cfg, pre_vote=r.random() < 0.75))

    @classmethod
    def rejoin_from_seed(cls, seed: int) -> "Scenario":
        """A rejoin schedule: no loss nor crash, only the one follower cut off (see :func:`run_rejoin`)."""
        sc = cls.from_seed(seed)
        r = random.Random(f"rejoin-{seed}")
        return dataclasses.replace(sc, voters=r.choice([3, 5]), loss=0.0, crash_after_persist=0.0,
                                   fault_ms=r.choice([3000, 8000, 20000]), idle_while_away=r.random() < 0.5,
                                   # (a fetch must outlive the leader's fetch wait, or an idle quorum's
                                   # followers time out while all is well, as with Kafka's defaults; and
                                   # fetches of 3 entries never catch up with 20 s of appends)
                                   config=dataclasses.replace(sc.config, pre_vote=True, request_timeout_ms=2000,
                                                              max_fetch_entries=50))


class Node:
    def __init__(self, sim: "Simulation", node_id: int) -> None:
        self.sim = sim
        self.id = node_id
        self.log = MemoryLog()
        self.store = MemoryQuorumStateStore()
        self.core: RaftCore | None = None
        self.incarnation = 0
        self.tick_at: int | None = None
        self.fsync_pending = False
        # invariant bookkeeping
        self.hw_seen = 0
        self.checked_upto = 0
        self.max_persisted_epoch = -1
        self.last_snapshot_at = -10**9

    @property
    def running(self) -> bool:
        return self.core is not None


class Simulation:
    def __init__(self, scenario: Scenario, trace: bool = False, records: RecordsAdapter | None = None,
                 on_send: Callable[[Node, Send], None] | None = None) -> None:
        self.sc = scenario
        self.records = records
        self.on_send = on_send
        self.rng = random.Random(f"sim-{scenario.seed}")
        self.trace_on = trace
        self.trace: list[str] = []
        self.now = 0
        self.seq = 0
        self.queue: list[tuple[int, int, str, tuple]] = []
        self.voter_ids = list(range(scenario.voters))
        self.nodes = [Node(self, i) for i in range(scenario.voters + scenario.observers)]
        self.blocked: set[tuple[int, int]] = set()  # (src, dst) pairs whose messages are dropped
        # (asker, asked, correlation id) of the pre-votes sent: their answers grant nothing durable
        self.pre_votes: set[tuple[int, int, int]] = set()
        self.loss, self.dup = scenario.loss, scenario.dup
        self.healed = False
        self.heal_at = scenario.fault_ms
        self.ledger: dict[int, tuple[int, Any]] = {}  # offset -> (epoch, payload): the committed history
        self.commit_epoch: dict[int, int] = {}  # offset -> epoch of the leader that committed it first
        self.ledger_order: list[int] = []
        self.leader_of_epoch: dict[int, int] = {}
        self.top_leader_hw = (-1, 0)  # (epoch, hw) of the highest-epoch leader
        self.verified: dict[tuple[int, int], int] = {}  # (leader node, epoch) -> ledger_order index checked
        self.next_value = 0
        self.live_target: int | None = None  # an offset appended after healing that must commit everywhere
        self.appends_paused = False
        self.events = 0
        self.stats = {"refused": 0, "crashes": 0, "partitions": 0, "resigns": 0, "snapshots": 0, "snapshot_loads": 0,
                      "elections": 0, "messages": 0, "dropped": 0}

    # ------------------------------------------------------------------ scheduling

    def push(self, t: int, kind: str, *args: Any) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (t, self.seq, kind, args))

    def log_trace(self, text: str) -> None:
        if self.trace_on:
            self.trace.append(f"{self.now:>7} {text}")

    # ------------------------------------------------------------------ node lifecycle

    def start(self, node: Node) -> None:
        node.incarnation += 1
        rng = random.Random(f"node-{self.sc.seed}-{node.id}-{node.incarnation}")
        node.core = self.make_core(node, rng)
        node.core._next_corr = node.incarnation * CORR_STRIDE
        node.hw_seen = 0
        node.checked_upto = 0
        node.tick_at = None
        node.fsync_pending = False
        self.log_trace(f"start node {node.id} (incarnation {node.incarnation})")
        self.step(node, Start(self.now))

    def make_core(self, node: Node, rng: random.Random) -> RaftCore:
        return RaftCore(node.id, self.voter_ids, node.log, node.store.read(), self.sc.config, rng,
                        records=self.records)

    def crash(self, node: Node) -> None:
        if not node.running:
            return
        self.stats["crashes"] += 1
        node.core = None
        node.log.crash()
        self.log_trace(f"crash node {node.id}: log now ends at {node.log.end_offset}")
        self.check_node(node)

    # ------------------------------------------------------------------ stepping a core

    def step(self, node: Node, event: Any) -> None:
        core = node.core
        assert core is not None
        try:
            outputs = core.step(event)
        except (RaftStateError, LogError) as e:  # a log refusing a write (truncation below its start...) too
            raise Violation(f"core error on node {node.id}: {e}") from e
        snapshot_due = False
        for o in outputs:
            self.on_output(node, o)
            if isinstance(o, Send):
                self.send(node, o)
            elif isinstance(o, PersistElection):
                node.store.write(o.state)
                if o.state.epoch < node.max_persisted_epoch:
                    raise Violation(f"monotonic-epoch: node {node.id} persisted epoch {o.state.epoch} "
                                    f"after {node.max_persisted_epoch}")
                node.max_persisted_epoch = o.state.epoch
                self.log_trace(f"node {node.id} persists {o.state}")
            elif isinstance(o, Fsync):
                if not node.fsync_pending:
                    node.fsync_pending = True
                    self.push(self.now + self.rng.randint(0, 3), "fsync", node.id, node.incarnation)
            elif isinstance(o, Committed):
                snapshot_due = True
            elif isinstance(o, SnapshotLoaded):
                self.stats["snapshot_loads"] += 1
                self.check_snapshot_data(node, o.data)
                self.log_trace(f"node {node.id} loaded snapshot {tuple(o.snapshot_id)}")
            elif isinstance(o, Appended):
                if self.healed and self.live_target is None:
                    self.live_target = o.last_offset
                    self.log_trace(f"liveness target: offset {o.last_offset} must commit everywhere")
            elif isinstance(o, StateChanged):
                if o.role is Role.LEADER:
                    self.stats["elections"] += 1
                if not self.healed and self.rng.random() < self.sc.crash_after_persist:
                    self.push(self.now + self.rng.randint(0, 5), "crash", node.id, node.incarnation)
                self.log_trace(f"node {node.id} -> {o.role.value} epoch {o.epoch} leader {o.leader_id}")
        if snapshot_due:
            self.maybe_snapshot(node)
        self.schedule_tick(node)

    def on_output(self, node: Node, o: Any) -> None:
        """Seen before each output of a step is carried out (the dynamic schedules check more)."""

    def schedule_tick(self, node: Node) -> None:
        core = node.core
        if core is None:
            return
        d = core.next_deadline()
        if d is None:
            return
        if d <= self.now:
            raise Violation(f"node {node.id}: next_deadline {d} is not in the future (now {self.now})")
        if node.tick_at is None or d < node.tick_at or node.tick_at < self.now:
            node.tick_at = d
            self.push(d, "tick", node.id, node.incarnation)

    def maybe_snapshot(self, node: Node) -> None:
        core, log = node.core, node.log
        assert core is not None
        end = min(core.high_watermark, log.flushed_offset)
        if end - log.start_offset < self.sc.snapshot_every or end <= log.start_offset:
            return
        if self.now - node.last_snapshot_at < self.sc.snapshot_interval_ms:
            return
        node.last_snapshot_at = self.now
        data = self.snapshot_data(node, end)
        self.stats["snapshots"] += 1
        self.log_trace(f"node {node.id} snapshots at {end}")
        self.step(node, CreateSnapshot(self.now, end, data))

    def snapshot_data(self, node: Node, end: int) -> bytes:
        """The state machine's snapshot of the log below ``end``: its last entry (checked on load)."""
        e = node.log.entry(end - 1)
        return repr((end, e.epoch, e.payload)).encode()

    # ------------------------------------------------------------------ network

    def send(self, node: Node, o: Send) -> None:
        self.stats["messages"] += 1
        if self.on_send is not None:
            self.on_send(node, o)
        self.check_persisted_before_send(node, o)
        copies = 1
        if not o.is_response and 0 <= o.dest < len(self.nodes) and not self.nodes[o.dest].running \
                and (node.id, o.dest) not in self.blocked and self.rng.random() < 0.5:
            # nothing listens at a crashed node's address: the driver sees the connection refused
            self.push(self.now + 1, "refused", node.id, node.incarnation, o.dest, o.correlation_id)
        if not self.healed:
            if (node.id, o.dest) in self.blocked or self.rng.random() < self.loss:
                self.stats["dropped"] += 1
                return
            if self.rng.random() < self.dup:
                copies = 2
        for _ in range(copies):
            delay = self.rng.randint(1, self.sc.max_delay)
            self.push(self.now + delay, "deliver", o.dest, node.id, o)

    # ------------------------------------------------------------------ faults

    def fault(self) -> None:
        r = self.rng.random()
        running = [n for n in self.nodes if n.running]
        if r < 0.25 and running:
            n = self.rng.choice(running)
            self.crash(n)
            self.push(self.now + self.rng.randint(50, 3000), "restart", n.id)
        elif r < 0.30:
            for n in running:
                self.crash(n)
            for n in self.nodes:
                self.push(self.now + self.rng.randint(50, 2000), "restart", n.id)
        elif r < 0.50:
            ids = [n.id for n in self.nodes]
            self.rng.shuffle(ids)
            cut = self.rng.randint(1, max(1, len(ids) - 1))
            a, b = set(ids[:cut]), set(ids[cut:])
            self.blocked = {(x, y) for x in a for y in b} | {(y, x) for x in a for y in b}
            self.stats["partitions"] += 1
            self.log_trace(f"partition {sorted(a)} | {sorted(b)}")
        elif r < 0.65 and len(self.nodes) > 1:
            x, y = self.rng.sample([n.id for n in self.nodes], 2)
            self.blocked.add((x, y))
            self.stats["partitions"] += 1
            self.log_trace(f"one-way partition {x} -> {y}")
        elif r < 0.80:
            self.blocked = set()
            self.log_trace("partitions healed")
        else:
            leaders = [n for n in running if n.core.role is Role.LEADER]
            if leaders:
                self.stats["resigns"] += 1
                n = self.rng.choice(leaders)
                self.log_trace(f"node {n.id} resigns")
                self.step(n, Resign(self.now))
        self.push(self.now + self.rng.randint(*self.sc.fault_every), "fault")

    def heal(self) -> None:
        self.healed = True
        self.blocked = set()
        self.log_trace("=== faults healed ===")
        for n in self.nodes:
            if not n.running:
                self.start(n)

    # ------------------------------------------------------------------ invariants

    def check_persisted_before_send(self, node: Node, o: Send) -> None:
        """persist-before-send: no message carries an epoch, a vote or a leadership claim that is
        not already in the sender's quorum-state store (outputs are applied in order)."""
        one = m.single_partition(o.body, o.api, response=o.is_response)
        if one is None:
            return
        p = one[1]
        pre_vote = False
        if o.api == m.VOTE and not o.is_response:
            epoch = p["ReplicaEpoch"]
            pre_vote = bool(p.get("PreVote"))
            if pre_vote:
                self.pre_votes.add((node.id, o.dest, o.correlation_id))
        elif o.api == m.VOTE:
            epoch = p["LeaderEpoch"]
            pre_vote = (o.dest, node.id, o.correlation_id) in self.pre_votes
        elif o.api in (m.FETCH, m.FETCH_SNAPSHOT):
            epoch = p["CurrentLeader"]["LeaderEpoch"] if o.is_response else p["CurrentLeaderEpoch"]
        else:
            epoch = p["LeaderEpoch"]
        st = node.store.state
        stored = st.epoch if st is not None else 0
        if epoch > stored:
            raise Violation(f"persist-before-send: node {node.id} sent {api_name(o.api)} with epoch {epoch} "
                            f"while its quorum-state holds epoch {stored}")
        # (a pre-vote, asked or granted, is the exception: it binds nobody)
        granted = o.api == m.VOTE and o.is_response and p["VoteGranted"]
        if granted and not pre_vote and (st is None or st.voted_id != o.dest):
            raise Violation(f"persist-before-send: node {node.id} granted its vote to {o.dest} before storing it")
        if o.api == m.VOTE and not o.is_response and not pre_vote and (st is None or st.voted_id != node.id):
            raise Violation(f"persist-before-send: node {node.id} asked for votes before storing its own")
        if o.api == m.BEGIN_QUORUM_EPOCH and not o.is_response and (st is None or st.leader_id != node.id):
            raise Violation(f"persist-before-send: node {node.id} claimed leadership before storing it")

    def check_snapshot_data(self, node: Node, data: bytes) -> None:
        end, epoch, payload = ast.literal_eval(data.decode())
        got = self.ledger.get(end - 1)
        if got is not None and got != (epoch, payload):
            raise Violation(f"committed-data: node {node.id} loaded a snapshot ending with {(epoch, payload)} at "
                            f"{end - 1}, but {got} was committed there")

    def check_node(self, node: Node) -> None:
        log = node.log
        st = node.store.state
        if st is not None and st.leader_id >= 0:
            self.note_leader(st.epoch, st.leader_id, f"persisted state of node {node.id}")
        snap = log.snapshot()
        if snap is not None:
            if log.start_offset != snap.end_offset:
                raise Violation(f"snapshot-at-log-start: node {node.id} log starts at {log.start_offset}, "
                                f"snapshot ends at {snap.end_offset}")
            if log.validate_offset_and_epoch(snap.end_offset, snap.epoch)[0] != "valid":
                raise Violation(f"snapshot-at-log-start: node {node.id} leader-epoch cache rejects snapshot {snap}")
        core = node.core
        if core is None:
            return
        if st is not None and st.epoch != core.epoch:
            raise Violation(f"monotonic-epoch: node {node.id} runs epoch {core.epoch} but persisted {st.epoch}")
        if core.role is Role.LEADER:
            self.note_leader(core.epoch, node.id, f"role of node {node.id}")
        hw = core.high_watermark
        if hw < node.hw_seen:
            raise Violation(f"monotonic-hw: node {node.id} high watermark {node.hw_seen} -> {hw}")
        node.hw_seen = hw
        if hw > log.end_offset:
            raise Violation(f"node {node.id}: high watermark {hw} beyond its log end {log.end_offset}")
        start = max(node.checked_upto, log.start_offset)
        if hw > start:
            for e in log.read(start, hw - start):
                got = self.ledger.get(e.offset)
                mine = (e.epoch, e.payload)
                if got is None:
                    self.ledger[e.offset] = mine
                    self.commit_epoch[e.offset] = core.epoch
                    self.ledger_order.append(e.offset)
                elif got != mine:
                    raise Violation(f"committed-data: node {node.id} has {mine} at committed offset {e.offset}, "
                                    f"but {got} was committed there")
        node.checked_upto = max(node.checked_upto, hw)

    def note_leader(self, epoch: int, leader: int, where: str) -> None:
        prev = self.leader_of_epoch.setdefault(epoch, leader)
        if prev != leader:
            raise Violation(f"single-leader: epoch {epoch} has leaders {prev} and {leader} ({where})")

    def check_global(self) -> None:
        leaders = [n for n in self.nodes if n.running and n.core.role is Role.LEADER]
        if not leaders:
            return
        top = max(leaders, key=lambda n: n.core.epoch)
        core = top.core
        hw = core.leader_high_watermark()
        if hw is not None:
            ep, last = self.top_leader_hw
            if core.epoch >= ep:
                if hw < last:
                    raise Violation(f"monotonic-hw: leader {top.id} (epoch {core.epoch}) HW {hw} < {last} "
                                    f"seen at epoch {ep}")
                self.top_leader_hw = (core.epoch, hw)
        self.check_majority_hw(leaders)
        # leader completeness: a leader of epoch E holds every entry committed in an epoch below E
        for n in leaders:
            self.check_completeness(n)

    def check_majority_hw(self, leaders: list[Node]) -> None:
        for n in leaders:
            lhw = n.core.leader_high_watermark()
            if lhw is None:
                continue
            durable = sum(1 for v in self.voter_ids if self.nodes[v].log.flushed_offset >= lhw)
            if durable < len(self.voter_ids) // 2 + 1:
                raise Violation(f"majority-hw: leader {n.id} HW {lhw} is durable on only {durable} of "
                                f"{len(self.voter_ids)} voters")

    def check_completeness(self, n: Node) -> None:
        core, log = n.core, n.log
        key = (n.id, core.epoch)
        i = self.verified.get(key, 0)
        while i < len(self.ledger_order):
            off = self.ledger_order[i]
            i += 1
            if off < log.start_offset or self.commit_epoch[off] >= core.epoch:
                continue
            if off >= log.end_offset:
                raise Violation(f"leader-completeness: leader {n.id} (epoch {core.epoch}) ends at "
                                f"{log.end_offset} but offset {off} was committed in epoch {self.commit_epoch[off]}")
            e = log.entry(off)
            if (e.epoch, e.payload) != self.ledger[off]:
                raise Violation(f"leader-completeness: leader {n.id} (epoch {core.epoch}) has {(e.epoch, e.payload)}"
                                f" at {off}, but {self.ledger[off]} was committed there in epoch "
                                f"{self.commit_epoch[off]}")
        self.verified[key] = i

    # ------------------------------------------------------------------ the run

    def run(self, max_events: int = 2_000_000) -> dict:
        for n in self.nodes:
            self.push(n.id, "restart", n.id)  # node i starts at i ms, like Kafka's simulation
        self.push(self.rng.randint(*self.sc.fault_every), "fault")
        self.push(self.rng.randint(*self.sc.append_every), "append")
        self.push(self.heal_at, "heal")
        deadline = self.heal_at + self.sc.liveness_ms
        while self.queue:
            t, _, kind, args = heapq.heappop(self.queue)
            if t > deadline:
                break
            self.now = t
            self.events += 1
            if self.events > max_events:
                raise Violation(f"more than {max_events} events")
            touched = self.dispatch(kind, args)
            if touched is not None:
                self.check_node(touched)
            self.check_global()
            if self.live_target is not None and self.liveness_reached():
                return self.result()
        raise Violation(f"liveness: no append committed on every node within {self.sc.liveness_ms} ms after the "
                        f"faults healed (target offset {self.live_target})")

    def run_rejoin(self, max_events: int = 2_000_000) -> dict:
        """The rejoin schedule: the nodes start and elect; once a leader has committed, one of its
        follower voters is cut off for ``fault_ms``, then the network heals; checks no-disruption
        (module docstring) and the usual invariants after every event."""
        for n in self.nodes:
            self.push(n.id, "restart", n.id)
        self.push(self.rng.randint(*self.sc.append_every), "append")
        return self.rejoin_loop(max_events)

    def rejoin_loop(self, max_events: int) -> dict:
        """:meth:`run_rejoin` once the nodes are started (the dynamic schedules change the voters first)."""
        leader: Node | None = None
        epoch = -1
        away: int | None = None
        back_at = deadline = None
        target: int | None = None
        while self.queue:
            t, _, kind, args = heapq.heappop(self.queue)
            if deadline is not None and t > deadline:
                break
            self.now = t
            self.events += 1
            if self.events > max_events:
                raise Violation(f"more than {max_events} events")
            touched = self.dispatch(kind, args)
            if touched is not None:
                self.check_node(touched)
            self.check_global()
            if back_at is None and self.now > 60_000:
                raise Violation("liveness: no leader committed (or no follower caught up) within 60 s of the start")
            if leader is None:
                lead = [n for n in self.nodes if n.running and n.core.role is Role.LEADER
                        and n.core.leader_high_watermark() is not None and n.core.high_watermark > 0]
                if lead and all(n.core.epoch == lead[0].core.epoch for n in self.nodes if n.id in self.voter_ids):
                    leader, epoch = lead[0], lead[0].core.epoch
                    away = self.rng.choice([v for v in self.voter_ids if v != leader.id])
                    # an idle quorum stops appending first, and the node goes once it holds the whole
                    # log: its pre-votes are then up to date, and only the roles' rules refuse them
                    self.appends_paused = self.sc.idle_while_away
                continue
            assert away is not None
            if back_at is None and not (self.sc.idle_while_away
                                        and self.nodes[away].log.flushed_offset < leader.log.end_offset):
                self.blocked = {(away, n.id) for n in self.nodes} | {(n.id, away) for n in self.nodes}
                back_at = self.now + self.sc.fault_ms
                deadline = back_at + self.sc.liveness_ms // 2
                self.push(back_at, "rejoin")
                self.log_trace(f"=== node {away} cut off (leader {leader.id}, epoch {epoch}) ===")
            self.check_no_disruption(leader, epoch)
            if kind == "rejoin":
                self.blocked = set()
                self.log_trace(f"=== node {away} back ===")
            if self.appends_paused and back_at is not None and self.now >= back_at:
                # an idle quorum stays idle until the node is back following (its log as long as theirs)
                st = self.nodes[away].core.state
                if isinstance(st, FollowerState) and st.fetched and st.leader_id == leader.id:
                    self.appends_paused = False
            if back_at is not None and self.now > back_at and target is None:
                target = leader.log.end_offset  # an append made after the node came back must reach it
            if target is not None and leader.core.high_watermark > target and self.nodes[away].core.high_watermark > target:
                rejoined = self.nodes[away].core
                if (rejoined.role, rejoined.leader_id) == (Role.FOLLOWER, leader.id):
                    return self.result()
        raise Violation(f"liveness: node {away} did not follow leader {leader.id if leader else None} and commit "
                        f"past offset {target} within {self.sc.liveness_ms // 2} ms of coming back")

    def check_no_disruption(self, leader: Node, epoch: int) -> None:
        """no-disruption (module docstring)."""
        for n in self.nodes:
            st = n.store.state
            got = max(n.core.epoch if n.running else -1, st.epoch if st is not None else -1)
            if got > epoch:
                raise Violation(f"no-disruption: node {n.id} moved to epoch {got} while leader {leader.id} of epoch "
                                f"{epoch} was healthy (a node cut off and back forced an election)")
        if not leader.running or leader.core.role is not Role.LEADER or leader.core.epoch != epoch:
            raise Violation(f"no-disruption: leader {leader.id} of epoch {epoch} lost its leadership")

    def liveness_reached(self) -> bool:
        target = self.live_target
        assert target is not None
        for n in self.nodes:
            if not n.running or n.core.high_watermark <= target:
                return False
        # every running node, observers included, has committed past an offset appended after healing
        return True

    def result(self) -> dict:
        return {"seed": self.sc.seed, "events": self.events, "sim_ms": self.now, **self.stats,
                "ledger": len(self.ledger)}

    def dispatch(self, kind: str, args: tuple) -> Node | None:
        if kind == "deliver":
            dest, src, o = args
            node = self.nodes[dest]
            if not node.running:
                return None
            if self.trace_on:  # (the message is costly to format: only when traced)
                self.log_trace(f"{src} -> {dest} {api_name(o.api)}{'Response' if o.is_response else 'Request'} "
                               f"corr={o.correlation_id} {_brief(o.body)}")
            self.step(node, Receive(self.now, src, o.api, o.body, o.correlation_id, o.is_response))
            return node
        if kind == "tick":
            nid, inc = args
            node = self.nodes[nid]
            if not node.running or node.incarnation != inc or node.tick_at != self.now:
                return None
            node.tick_at = None
            self.step(node, Tick(self.now))
            return node
        if kind == "fsync":
            nid, inc = args
            node = self.nodes[nid]
            if not node.running or node.incarnation != inc:
                return None
            node.fsync_pending = False
            node.log.flush()
            self.step(node, FsyncComplete(self.now))
            return node
        if kind == "refused":
            nid, inc, dest, corr = args
            node = self.nodes[nid]
            if not node.running or node.incarnation != inc or self.nodes[dest].running:
                return None
            self.stats["refused"] += 1
            self.step(node, RequestFailed(self.now, dest, corr))
            if node.running and node.incarnation == inc:
                self.step(node, PeerUnreachable(self.now, dest))
            return node
        if kind == "restart":
            node = self.nodes[args[0]]
            if not node.running:
                self.start(node)
            return node
        if kind == "crash":
            node = self.nodes[args[0]]
            if node.running and node.incarnation == args[1] and not self.healed:
                self.crash(node)
                self.push(self.now + self.rng.randint(1, 300), "restart", node.id)
            return None
        if kind == "fault":
            if not self.healed:
                self.fault()
            return None
        if kind == "heal":
            self.heal()
            return None
        if kind == "rejoin":
            return None
        if kind == "append":
            leaders = [n for n in self.nodes if n.running and n.core.role is Role.LEADER]
            if leaders and not self.appends_paused:
                n = self.rng.choice(leaders)
                self.next_value += 1
                payloads = tuple(f"v{self.next_value}.{i}" for i in range(self.rng.randint(1, 3)))
                self.step(n, Append(self.now, payloads))
                self.push(self.now + self.rng.randint(*self.sc.append_every), "append")
                return n
            self.push(self.now + self.rng.randint(*self.sc.append_every), "append")
            return None
        raise AssertionError(kind)


def api_name(api: int) -> str:
    return m.API_NAMES.get(api) or str(getattr(api, "name", api))


def _brief(body: dict) -> str:
    one = None
    for k in ("Topics", "Responses"):
        if body.get(k):
            parts = body[k][0].get("Partitions") or []
            one = parts[0] if parts else None
    if one is None:
        return f"error={body.get('ErrorCode')}"
    shown = {k: v for k, v in one.items() if k not in ("Records", "UnalignedRecords", "PartitionIndex",
                                                       "Partition", "Index", "AbortedTransactions")}
    recs = one.get("Records")
    if isinstance(recs, list) and recs:
        shown["Records"] = f"{len(recs)} entries from {recs[0][0]}"
    return repr(shown)


def replay_command(seed: int, big: bool = False) -> str:
    return f".venv/bin/python -m tests.raft.simulator --seed {seed}{' --big' if big else ''} --trace"


def run_seed(seed: int, big: bool = False, trace: bool = False) -> dict:
    """Run one seed; raise :class:`Violation` (whose message names the seed and the replay command)."""
    sim = Simulation(Scenario.from_seed(seed, big), trace=trace)
    try:
        return sim.run()
    except Violation as e:
        tail = "\n".join(sim.trace[-60:]) if trace else ""
        raise Violation(f"raft simulation seed {seed} failed at t={sim.now} ms after {sim.events} events: {e}\n"
                        f"replay: {replay_command(seed, big)}" + (f"\n--- trace tail ---\n{tail}" if tail else "")) \
            from e


def run_rejoin(seed: int, trace: bool = False) -> dict:
    """Run one rejoin schedule (module docstring); raise :class:`Violation` naming the seed."""
    sim = Simulation(Scenario.rejoin_from_seed(seed), trace=trace)
    try:
        return sim.run_rejoin()
    except Violation as e:
        tail = "\n".join(sim.trace[-60:]) if trace else ""
        raise Violation(f"raft rejoin seed {seed} failed at t={sim.now} ms after {sim.events} events: {e}\n"
                        f"replay: .venv/bin/python -m tests.raft.simulator --rejoin --seed {seed} --trace"
                        + (f"\n--- trace tail ---\n{tail}" if tail else "")) from e


def run_range(run: Callable[[int], dict], seeds: range) -> tuple[list[tuple[int, str]], int]:
    """``run`` (one schedule of a seed) over ``seeds`` in this process; returns (failures, events)."""
    failures: list[tuple[int, str]] = []
    events = 0
    for seed in seeds:
        try:
            events += run(seed)["events"]
        except Violation as e:
            failures.append((seed, str(e)))
    return failures, events


def _worker(args: tuple[int, int, bool]) -> tuple[list[tuple[int, str]], int]:
    start, stop, big = args
    return run_range(lambda seed: run_seed(seed, big), range(start, stop))


def run_rejoins(first: int, count: int) -> tuple[list[tuple[int, str]], int]:
    """Rejoin schedules ``first .. first+count-1`` in this process; returns (failures, events)."""
    return run_range(run_rejoin, range(first, first + count))


def _dynamic_worker(args: tuple[int, int, bool]) -> tuple[list[tuple[int, str]], int]:
    from tests.raft import simulator_dynamic

    return simulator_dynamic.worker(args[:2])


def run_many(first: int, count: int, big: bool = False, jobs: int = 1,
             dynamic: bool = False, progress: bool = False) -> tuple[list[tuple[int, str]], int]:
    """Run seeds ``first .. first+count-1`` over ``jobs`` processes; returns (failures, events).
    ``dynamic``: the dynamic-quorum schedules (tests/raft/simulator_dynamic.py). ``progress``: a
    line on stderr every 1,000 seeds (seeds done, failures so far and their seeds)."""
    chunk = 50
    tasks = [(s, min(s + chunk, first + count), big) for s in range(first, first + count, chunk)]
    work = _dynamic_worker if dynamic else _worker
    failures: list[tuple[int, str]] = []
    events = 0
    if jobs <= 1:
        results = map(work, tasks)
    else:
        pool = multiprocessing.get_context("fork").Pool(jobs)
        results = pool.imap_unordered(work, tasks)
    done = 0
    t0 = time.monotonic()
    try:
        for fails, ev in results:
            events += ev
            failures.extend(fails)
            done_before, done = done, done + chunk
            if progress and (done // 1000 > done_before // 1000 or fails):
                print(f"{min(done, count)}/{count} seeds, {len(failures)} failed "
                      f"{sorted(s for s, _ in failures)[:20]}, {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    finally:
        if jobs > 1:
            pool.close()
            pool.join()
    return sorted(failures), events


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.raft.simulator", description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, help="replay one seed")
    p.add_argument("--seeds", type=int, default=1000, help="number of seeds to run (default 1000)")
    p.add_argument("--first", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--big", action="store_true", help="bigger clusters and longer fault phases")
    p.add_argument("--jobs", type=int, default=multiprocessing.cpu_count(), help="worker processes")
    p.add_argument("--trace", action="store_true", help="with --seed: print the event trace tail on failure")
    p.add_argument("--rejoin", action="store_true", help="the rejoin schedules (no-disruption) instead")
    p.add_argument("--dynamic", action="store_true",
                   help="the dynamic-quorum schedules (KIP-853 voter changes among the faults) instead")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    a = p.parse_args(argv)
    if a.rejoin and a.seed is None:
        if a.dynamic:
            from tests.raft.simulator_dynamic import run_dynamic_rejoins

            failures, events = run_dynamic_rejoins(a.first, a.seeds)
        else:
            failures, events = run_rejoins(a.first, a.seeds)
        for seed, err in failures:
            print(err, file=sys.stderr)
        print(f"{a.seeds} rejoin seeds from {a.first}: {len(failures)} failed {[s for s, _ in failures][:20]}")
        return 1 if failures else 0
    if a.seed is not None:
        try:
            if a.dynamic:
                from tests.raft.simulator_dynamic import run_dynamic, run_dynamic_rejoin

                res = run_dynamic_rejoin(a.seed, a.trace) if a.rejoin else run_dynamic(a.seed, a.trace)
            else:
                res = run_rejoin(a.seed, a.trace) if a.rejoin else run_seed(a.seed, a.big, a.trace)
        except Violation as e:
            print(e, file=sys.stderr)
            return 1
        print(res)
        return 0
    t0 = time.monotonic()
    failures, events = run_many(a.first, a.seeds, a.big, a.jobs, a.dynamic, progress=not a.quiet)
    dt = time.monotonic() - t0
    for seed, err in failures:
        print(err, file=sys.stderr)
    kind = " (big)" if a.big else " (dynamic)" if a.dynamic else ""
    print(f"{a.seeds} seeds from {a.first}{kind}: {len(failures)} failed "
          f"{[seed for seed, _ in failures][:20]}, {events} events, {dt:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
