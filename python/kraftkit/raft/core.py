"""The KIP-595 replica as a deterministic state machine.

:class:`RaftCore` owns no socket, thread or clock. A driver (the simulator in ``tests/raft``, the
asyncio node in :mod:`kraftkit.raft.driver`) feeds it events and carries out what it returns::

    outputs = core.step(Receive(now_ms, src, api, body, correlation_id, is_response))

The events and outputs are in :mod:`kraftkit.raft.events`; outputs are executed **in order**
(a :class:`~kraftkit.raft.events.PersistElection` must be durable before anything after it is done).
``core.next_deadline()`` says when the core next wants a :class:`~kraftkit.raft.events.Tick`.

The core reads and writes the log through the :class:`~kraftkit.raft.log.RaftLog` interface
directly (writes are volatile until the driver fsyncs and reports
:class:`~kraftkit.raft.events.FsyncComplete`); only flushed offsets count toward the high watermark,
and a follower fetches again only after its appends are flushed. Randomness (election jitter,
backoff, bootstrap choice) comes from the ``random.Random`` the core is given, so a seed replays
exactly.

Rules follow Kafka's ``KafkaRaftClient``/``QuorumState`` at the reference commit
(kafka-formats.md §9); the deviations are listed in the README's raft section.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Callable

from kraftkit.raft import messages as m
from kraftkit.raft.events import (
    Append, Appended, AppendRejected, Committed, CreateSnapshot, Fsync, FsyncComplete, PeerUnreachable,
    PersistElection, Receive, RequestFailed, Resign, Send, SnapshotLoaded, Start, StateChanged, Tick,
)
from kraftkit.raft.log import Entry, RaftLog, SnapshotId
from kraftkit.raft.messages import Errors, TopicPartition
from kraftkit.raft.quorum_state import ElectionState, Role

__all__ = ["RaftConfig", "RaftCore", "RaftStateError", "RecordsAdapter", "Role", "end_epoch_backoff_ms"]

RETRY_BACKOFF_BASE_MS = 100


class RaftStateError(Exception):
    """An impossible situation (two leaders in one epoch, truncation below the high watermark...).
    Kafka treats these as fatal; so does the core."""


@dataclasses.dataclass(frozen=True)
class RaftConfig:
    """Kafka's ``controller.quorum.*`` settings and constants, with Kafka's defaults."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = 500  # MAX_FETCH_WAIT_MS
    max_fetch_entries: int = 1000  # stands in for MAX_FETCH_SIZE_BYTES when records are entries
    snapshot_chunk_bytes: int = 8388608  # FetchSnapshot MaxBytes
    cluster_id: str | None = None
    check_quorum: bool = True
    #: a follower whose leader refuses connections (its process is gone) stands for election at once
    #: instead of waiting out fetch_timeout_ms, and a candidate counts a refusing voter as a lost vote;
    #: a partition or a hung host still waits the timeouts out. Kafka waits in every case; the
    #: difference is listed in the README.
    elect_on_refused_leader: bool = True


class RecordsAdapter:
    """How entries travel in ``Records``. The default keeps them as a list of
    ``[offset, epoch, payload, control]`` (fine for the simulator); a transport swaps in one that
    builds record batches with ``kraftkit.log``."""

    def encode(self, entries: list[Entry]) -> Any:
        return [list(e) for e in entries]

    def decode(self, records: Any) -> list[Entry]:
        if not records:
            return []
        return [Entry(int(o), int(e), p, bool(c)) for o, e, p, c in records]


def end_epoch_backoff_ms(preferred: list[int], node_id: int, max_ms: int) -> int:
    """Kafka's ``endEpochElectionBackoff``: position 0 -> 0 ms; then ``(max >> (n-1)) << (p-1)``;
    absent -> max."""
    if node_id not in preferred:
        return max_ms
    p = preferred.index(node_id)
    if p == 0:
        return 0
    n = len(preferred)
    return min(max_ms, (max_ms >> (n - 1)) << (p - 1))


class RaftCore:
    """One raft replica of ``tp``. ``voters`` is the static voter set (kraft.version 0); a node
    whose id is not in it is an observer (it fetches but never votes or stands)."""

    def __init__(self, node_id: int, voters: list[int] | tuple[int, ...], log: RaftLog,
                 persisted: ElectionState | None = None, config: RaftConfig | None = None,
                 rng: random.Random | None = None, tp: TopicPartition = m.METADATA_PARTITION,
                 records: RecordsAdapter | None = None) -> None:
        self.node_id = node_id
        self.voters = tuple(sorted(set(voters)))
        self.log = log
        self.cfg = config or RaftConfig()
        self.rng = rng or random.Random(0)
        self.tp = tp
        self.records = records or RecordsAdapter()
        self._persisted_at_start = persisted
        self._persisted: ElectionState | None = persisted
        self.now = 0
        self.started = False
        # quorum state
        self.role = Role.UNATTACHED
        self.epoch = 0
        self.leader_id = -1
        self.voted_id = -1
        self.high_watermark = 0
        # requests
        self._next_corr = 1
        self._inflight: dict[int, tuple[int, int, int]] = {}  # corr -> (dest, api, deadline)
        self._retry_at: dict[tuple[int, int], int] = {}  # (dest, api) -> earliest resend
        self._out: list = []
        self._reset_role_state()

    # ------------------------------------------------------------------------------ accessors

    @property
    def is_observer(self) -> bool:
        return self.node_id not in self.voters

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def election_state(self) -> ElectionState:
        """What is (or is about to be) in the quorum-state file."""
        return self._persisted if self._persisted is not None else ElectionState(0)

    def leader_high_watermark(self) -> int | None:
        """The leader's HW in the current epoch (None before it commits its LeaderChange entry)."""
        return self._leader_hw if self.role is Role.LEADER else None

    @property
    def resignation_pending(self) -> bool:
        """A resigned leader still waiting for voters to acknowledge its EndQuorumEpoch."""
        return self.role is Role.RESIGNED and bool(self._unacked_end)

    def quorum_info(self) -> dict[str, Any] | None:
        """What the leader knows of the replicas (DescribeQuorum's answer); None unless leader.
        Times are the core's milliseconds (-1: never)."""
        if self.role is not Role.LEADER:
            return None

        def state(r: int, end: int) -> dict[str, int]:
            if r == self.node_id:
                return {"id": r, "end_offset": self.log.end_offset, "last_fetch": self.now, "last_caught_up": self.now}
            fetched, caught = self._fetch_times.get(r, (-1, -1))
            return {"id": r, "end_offset": end, "last_fetch": fetched, "last_caught_up": caught}

        return {"leader_id": self.node_id, "epoch": self.epoch,
                "high_watermark": self._leader_hw if self._leader_hw is not None else -1,
                "voters": [state(v, self._replica_end.get(v, -1)) for v in self.voters],
                "observers": [state(o, end) for o, (end, _t) in sorted(self._observers.items())]}

    def next_deadline(self) -> int | None:
        """The earliest time at which a :class:`Tick` could change something (None: only events will)."""
        cands = [d for _, _, d in self._inflight.values()]
        cands.extend(self._retry_at.values())
        election = self._election_deadline if self._backoff_deadline is None else None
        for d in (election, self._fetch_deadline, self._backoff_deadline, self._check_quorum_deadline):
            if d is not None:
                cands.append(d)
        if self.role is Role.LEADER:
            cands.extend(d for d, *_ in self._purgatory)
            cands.extend(self._begin_resend_at.values())
        return min(cands) if cands else None

    # ------------------------------------------------------------------------------ stepping

    def step(self, event) -> list:
        self._out = []
        self.now = max(self.now, event.now)
        if isinstance(event, Start):
            self._start()
        elif not self.started:
            raise RaftStateError("step() before Start")
        elif isinstance(event, Receive):
            if event.is_response:
                self._on_response(event)
            else:
                self._on_request(event)
        elif isinstance(event, Append):
            self._on_append(event)
        elif isinstance(event, Resign):
            if self.role is Role.LEADER:
                self._become_resigned(self._preferred_successors())
        elif isinstance(event, CreateSnapshot):
            self._on_create_snapshot(event)
        elif isinstance(event, PeerUnreachable):
            self._on_unreachable(event.node)
        elif isinstance(event, RequestFailed):
            self._on_request_failed(event.dest, event.correlation_id)
        elif not isinstance(event, (Tick, FsyncComplete)):
            raise TypeError(f"unknown event {event!r}")
        self._after_log_change()
        self._poll()
        out, self._out = self._out, []
        return out

    # ------------------------------------------------------------------------------ start-up

    def _start(self) -> None:
        if self.started:
            return
        self.started = True
        st = self._persisted_at_start or ElectionState(0)
        log_epoch = self.log.last_epoch()
        self.epoch = st.epoch
        if st.epoch < log_epoch:
            self._become_unattached(log_epoch)
        elif st.leader_id == self.node_id and not self.is_observer:
            self._become_resigned([], persist=False)
        elif st.voted_id == self.node_id and not self.is_observer:
            self._set_role(Role.CANDIDATE, st.epoch, -1, self.node_id)
            self._retries = 1
            self._granted = {self.node_id}
            self._election_deadline = self.now + self._random_election_timeout()
            self._maybe_won()
        elif st.voted_id >= 0:
            self._set_role(Role.VOTED, st.epoch, -1, st.voted_id)
            self._election_deadline = self._unattached_timeout()
        elif st.leader_id >= 0 and st.leader_id != self.node_id:
            self._become_follower(st.epoch, st.leader_id)
        else:
            self._become_unattached(st.epoch)
        if self.voters == (self.node_id,) and self.role in (Role.UNATTACHED, Role.RESIGNED):
            self._become_candidate()

    # ------------------------------------------------------------------------------ transitions

    def _reset_role_state(self) -> None:
        self._election_deadline: int | None = None
        self._fetch_deadline: int | None = None
        self._backoff_deadline: int | None = None
        self._check_quorum_deadline: int | None = None
        self._retries = 0
        self._granted: set[int] = set()
        self._rejected: set[int] = set()
        self._leader_hw: int | None = None
        self._epoch_start_offset = -1
        self._replica_end: dict[int, int] = {}
        self._acked: set[int] = set()
        self._begin_resend_at: dict[int, int] = {}
        self._window: set[int] = set()
        self._observers: dict[int, tuple[int, int]] = {}
        self._fetch_times: dict[int, tuple[int, int]] = {}  # replica -> (last fetch, last caught up)
        self._purgatory: list[tuple[int, int, int, dict]] = []  # (deadline, src, corr, body)
        self._unacked_end: set[int] = set()
        self._preferred: list[int] = []
        self._fetch_corr: int | None = None
        self._snapshot_fetch: tuple[SnapshotId, bytearray] | None = None
        self._bootstrap_target: int | None = None

    def _set_role(self, role: Role, epoch: int, leader_id: int, voted_id: int, persist: bool = True) -> None:
        if epoch < self.epoch:
            raise RaftStateError(f"node {self.node_id}: epoch would go back from {self.epoch} to {epoch}")
        held = self._purgatory if self.role is Role.LEADER else []
        if persist:
            st = ElectionState(epoch, leader_id if role is not Role.VOTED else -1,
                               voted_id if role in (Role.VOTED, Role.CANDIDATE) else -1)
            if st != self._persisted:
                self._persisted = st
                self._out.append(PersistElection(st))
        self._reset_role_state()
        self.role, self.epoch, self.leader_id, self.voted_id = role, epoch, leader_id, voted_id
        self._out.append(StateChanged(role, epoch, leader_id))
        for _d, src, corr, _body in held:  # fetches parked by the old leader learn the news now
            self._respond(src, m.FETCH, corr, m.fetch_response(
                self.tp, Errors.NOT_LEADER_OR_FOLLOWER, self.leader_id, self.epoch))

    def _random_election_timeout(self) -> int:
        t = self.cfg.election_timeout_ms
        return t + self.rng.randrange(t) if t > 0 else 0

    def _unattached_timeout(self) -> int | None:
        return None if self.is_observer else self.now + self._random_election_timeout()

    def _become_unattached(self, epoch: int, leader_id: int = -1) -> None:
        # Kafka keeps the remaining election time when a candidate or an unattached voter moves to a
        # higher epoch: otherwise a candidate with a stale log could hold off every election forever.
        keep = self._election_deadline if self.role in (Role.CANDIDATE, Role.UNATTACHED, Role.VOTED) else None
        self._set_role(Role.UNATTACHED, epoch, leader_id, -1)
        self._election_deadline = keep if keep is not None else self._unattached_timeout()

    def _become_voted(self, candidate: int) -> None:
        self._set_role(Role.VOTED, self.epoch, -1, candidate)
        self._election_deadline = self._unattached_timeout()

    def _become_follower(self, epoch: int, leader_id: int) -> None:
        if leader_id == self.node_id:
            raise RaftStateError(f"node {self.node_id} asked to follow itself in epoch {epoch}")
        if epoch == self.epoch and self.role is Role.LEADER:
            raise RaftStateError(f"two leaders in epoch {epoch}: {self.node_id} and {leader_id}")
        if epoch == self.epoch and self.leader_id >= 0 and self.leader_id != leader_id and self.started \
                and self.role in (Role.FOLLOWER, Role.RESIGNED):
            raise RaftStateError(f"two leaders in epoch {epoch}: {self.leader_id} and {leader_id}")
        self._set_role(Role.FOLLOWER, epoch, leader_id, -1)
        self._fetch_deadline = self.now + self.cfg.fetch_timeout_ms

    def _become_candidate(self) -> None:
        if self.is_observer:
            raise RaftStateError(f"observer {self.node_id} cannot stand for election")
        retries = self._retries + 1 if self.role is Role.CANDIDATE else 1
        self._set_role(Role.CANDIDATE, self.epoch + 1, -1, self.node_id)
        self._retries = retries
        self._granted = {self.node_id}
        self._election_deadline = self.now + self._random_election_timeout()
        self._maybe_won()

    def _maybe_won(self) -> None:
        if self.role is Role.CANDIDATE and len(self._granted) >= self.majority:
            self._become_leader()

    def _become_leader(self) -> None:
        granting = sorted(self._granted)
        self._set_role(Role.LEADER, self.epoch, self.node_id, -1)
        self.log.initialize_leader_epoch(self.epoch)
        self._epoch_start_offset = self.log.end_offset
        self._replica_end = {v: -1 for v in self.voters if v != self.node_id}
        self._acked = set()
        self._begin_resend_at = {v: self.now for v in self.voters if v != self.node_id}
        if self.cfg.check_quorum and len(self.voters) > 1:
            self._check_quorum_deadline = self.now + self.cfg.fetch_timeout_ms * 3 // 2
        # the LeaderChangeMessage: the first entry of the epoch; nothing commits before it does
        payload = {"Version": 0, "LeaderId": self.node_id, "Voters": [{"VoterId": v} for v in self.voters],
                   "GrantingVoters": [{"VoterId": v} for v in granting]}
        self.log.append([Entry(self._epoch_start_offset, self.epoch, payload, True)])
        self._out.append(Fsync(self.log.end_offset))

    def _become_resigned(self, preferred: list[int], persist: bool = False) -> None:
        epoch = self.epoch
        self._set_role(Role.RESIGNED, epoch, self.node_id, -1, persist=persist)
        self._preferred = list(preferred)
        self._unacked_end = {v for v in self.voters if v != self.node_id}
        self._election_deadline = self.now + self._random_election_timeout()

    def _preferred_successors(self) -> list[int]:
        others = [v for v in self.voters if v != self.node_id]
        return sorted(others, key=lambda v: (-self._replica_end.get(v, -1), v))

    # ------------------------------------------------------------------------------ timers

    def _poll(self) -> None:
        now = self.now
        for corr, (_dest, _api, deadline) in list(self._inflight.items()):
            if deadline <= now:
                del self._inflight[corr]
                if corr == self._fetch_corr:
                    self._fetch_corr = None
                    self._bootstrap_target = None
        for key, t in list(self._retry_at.items()):
            if t <= now:
                del self._retry_at[key]
        role = self.role
        if role is Role.LEADER:
            self._poll_leader()
        elif role is Role.CANDIDATE:
            if self._backoff_deadline is None and self._election_deadline is not None \
                    and self._election_deadline <= now:
                self._start_backoff()
            if self._backoff_deadline is not None and self._backoff_deadline <= now:
                self._become_candidate()
                return self._poll()
            if self.role is Role.CANDIDATE and self._backoff_deadline is None:
                for v in self.voters:
                    if v != self.node_id and v not in self._granted and v not in self._rejected:
                        self._send_once(v, m.VOTE, m.vote_request(
                            self.tp, self.cfg.cluster_id, v, self.epoch, self.node_id,
                            self.log.last_epoch(), self.log.end_offset))
        elif role is Role.RESIGNED:
            if self._election_deadline is not None and self._election_deadline <= now:
                if self.is_observer:
                    self._become_unattached(self.epoch + 1)
                else:
                    self._become_candidate()
                return self._poll()
            for v in sorted(self._unacked_end):
                self._send_once(v, m.END_QUORUM_EPOCH, m.end_quorum_epoch_request(
                    self.tp, self.cfg.cluster_id, self.node_id, self.epoch, self._preferred))
        elif role is Role.FOLLOWER:
            if self._fetch_deadline is not None and self._fetch_deadline <= now:
                if not self.is_observer:
                    self._become_candidate()
                    return self._poll()
                self._fetch_deadline = None  # an observer asks the bootstrap voters until it hears back
            self._maybe_send_fetch()
        else:  # UNATTACHED / VOTED
            if self._election_deadline is not None and self._election_deadline <= now and not self.is_observer:
                self._become_candidate()
                return self._poll()
            if self.is_observer:
                self._maybe_send_fetch()

    def _start_backoff(self) -> None:
        k = self.rng.randrange(1 << min(21, max(self._retries, 1)))
        self._backoff_deadline = self.now + min(RETRY_BACKOFF_BASE_MS * k, self.cfg.election_backoff_max_ms)

    def _poll_leader(self) -> None:
        now = self.now
        if self._check_quorum_deadline is not None and self._check_quorum_deadline <= now:
            self._become_resigned(self._preferred_successors())
            return self._poll()
        for v, t in sorted(self._begin_resend_at.items()):
            if v in self._acked:
                del self._begin_resend_at[v]
            elif t <= now:
                blocked = self._blocked_until(v, m.BEGIN_QUORUM_EPOCH)
                if blocked is None:
                    self._send(v, m.BEGIN_QUORUM_EPOCH, m.begin_quorum_epoch_request(
                        self.tp, self.cfg.cluster_id, v, self.node_id, self.epoch))
                    self._begin_resend_at[v] = now + self.cfg.fetch_timeout_ms // 2
                else:
                    self._begin_resend_at[v] = blocked
        if self._purgatory:
            due = [p for p in self._purgatory if p[0] <= now]
            if due:
                self._purgatory = [p for p in self._purgatory if p[0] > now]
                for _d, src, corr, body in due:
                    self._on_fetch_request(src, corr, body, may_wait=False)

    # ------------------------------------------------------------------------------ sending

    def _send(self, dest: int, api: int, body: dict) -> int:
        corr = self._next_corr
        self._next_corr += 1
        self._inflight[corr] = (dest, api, self.now + self.cfg.request_timeout_ms)
        self._out.append(Send(dest, api, body, corr, False))
        return corr

    def _blocked_until(self, dest: int, api: int) -> int | None:
        """When a request of ``api`` to ``dest`` may go out again (None: now)."""
        times = [d for dd, a, d in self._inflight.values() if dd == dest and a == api]
        if (dest, api) in self._retry_at:
            times.append(self._retry_at[(dest, api)])
        return max(times) if times else None

    def _send_once(self, dest: int, api: int, body: dict) -> bool:
        """Send unless a request of this api to ``dest`` is in flight or backing off."""
        if self._blocked_until(dest, api) is not None:
            return False
        self._send(dest, api, body)
        return True

    def _respond(self, dest: int, api: int, corr: int, body: dict) -> None:
        self._out.append(Send(dest, api, body, corr, True))

    def _backing_off(self, node: int) -> bool:
        return (node, m.FETCH) in self._retry_at or (node, m.FETCH_SNAPSHOT) in self._retry_at

    def _maybe_send_fetch(self) -> None:
        if self._fetch_corr is not None:
            return
        if self.log.flushed_offset < self.log.end_offset:
            return  # fsync first: the next FetchOffset tells the leader this data is durable
        # a follower fetches from its leader; an observer whose fetch timeout expired (deadline None) asks
        # the bootstrap voters instead until one names the leader (Kafka's pollFollowerAsObserver)
        if self.role is Role.FOLLOWER and self._fetch_deadline is not None and self._fetch_deadline > self.now:
            target = self.leader_id
        else:
            # a voter that just answered with an error (e.g. NOT_LEADER_OR_FOLLOWER in the same epoch)
            # is backing off: ask another one (Kafka's findReadyBootstrapServer), not it again
            # (whichever request it refused: a FetchSnapshot of a snapshot fetch counts too)
            if self._bootstrap_target is None or self._backing_off(self._bootstrap_target):
                ready = [v for v in self.voters if v != self.node_id and not self._backing_off(v)]
                if not ready:
                    return
                self._bootstrap_target = self.rng.choice(ready)
            target = self._bootstrap_target
        if self._backing_off(target):
            return
        if self._snapshot_fetch is not None and self.role is Role.FOLLOWER:
            sid, buf = self._snapshot_fetch
            self._fetch_corr = self._send(target, m.FETCH_SNAPSHOT, m.fetch_snapshot_request(
                self.tp, self.cfg.cluster_id, self.node_id, self.epoch, tuple(sid), len(buf),
                self.cfg.snapshot_chunk_bytes))
        else:
            self._fetch_corr = self._send(target, m.FETCH, m.fetch_request(
                self.tp, self.cfg.cluster_id, self.node_id, self.epoch, self.log.end_offset,
                self.log.last_epoch(), self.cfg.fetch_max_wait_ms))

    # ------------------------------------------------------------------------------ requests

    def _on_request(self, ev: Receive) -> None:
        api, body = ev.api, ev.body
        handler: Callable | None = {m.VOTE: self._on_vote_request, m.BEGIN_QUORUM_EPOCH: self._on_begin_request,
                                    m.END_QUORUM_EPOCH: self._on_end_request}.get(api)
        cid = body.get("ClusterId")
        if api == m.FETCH:
            if cid is not None and cid != self.cfg.cluster_id:
                return self._respond(ev.src, api, ev.correlation_id, m.fetch_response(
                    self.tp, 0, -1, -1, top_error=Errors.INCONSISTENT_CLUSTER_ID))
            return self._on_fetch_request(ev.src, ev.correlation_id, body, may_wait=True)
        if api == m.FETCH_SNAPSHOT:
            if cid is not None and cid != self.cfg.cluster_id:
                return self._respond(ev.src, api, ev.correlation_id, m.fetch_snapshot_response(
                    self.tp, 0, -1, -1, top_error=Errors.INCONSISTENT_CLUSTER_ID))
            return self._on_fetch_snapshot_request(ev.src, ev.correlation_id, body)
        if handler is None:
            return
        build = {m.VOTE: lambda e, top=0: m.vote_response(self.tp, e, self.leader_id, self.epoch, False, top),
                 m.BEGIN_QUORUM_EPOCH: lambda e, top=0: m.begin_quorum_epoch_response(
                     self.tp, e, self.leader_id, self.epoch, top),
                 m.END_QUORUM_EPOCH: lambda e, top=0: m.end_quorum_epoch_response(
                     self.tp, e, self.leader_id, self.epoch, top)}[api]
        if cid is not None and cid != self.cfg.cluster_id:
            return self._respond(ev.src, api, ev.correlation_id, build(0, Errors.INCONSISTENT_CLUSTER_ID))
        one = m.single_partition(body, api)
        if one is None or not m.topic_matches(self.tp, api, one[0], one[1]):
            return self._respond(ev.src, api, ev.correlation_id, build(0, Errors.INVALID_REQUEST))
        handler(ev.src, ev.correlation_id, body, one[1])

    def _can_grant(self, candidate: int, last_epoch: int, last_offset: int) -> bool:
        if self.is_observer:
            return False
        up_to_date = (last_epoch, last_offset) >= (self.log.last_epoch(), self.log.end_offset)
        if self.role is Role.VOTED:
            return self.voted_id == candidate
        if self.role is Role.UNATTACHED:
            return self.leader_id < 0 and up_to_date
        return False

    def _on_vote_request(self, src: int, corr: int, body: dict, part: dict) -> None:
        cand_epoch, cand = part["ReplicaEpoch"], part["ReplicaId"]
        last_epoch, last_offset = part["LastOffsetEpoch"], part["LastOffset"]

        def reply(error: int, granted: bool = False) -> None:
            self._respond(src, m.VOTE, corr, m.vote_response(self.tp, error, self.leader_id, self.epoch, granted))

        if last_offset < 0 or last_epoch < 0 or last_epoch >= cand_epoch:
            return reply(Errors.INVALID_REQUEST)
        if cand_epoch < self.epoch:
            return reply(Errors.FENCED_LEADER_EPOCH)
        if cand < 0:
            return reply(Errors.INVALID_REQUEST)
        if cand_epoch > self.epoch:
            self._become_unattached(cand_epoch)
        voter_id = body.get("VoterId", -1)
        if voter_id >= 0 and voter_id != self.node_id:
            return reply(Errors.INVALID_VOTER_KEY)
        granted = self._can_grant(cand, last_epoch, last_offset)
        if granted and self.role is Role.UNATTACHED:
            self._become_voted(cand)
        reply(Errors.NONE, granted)

    def _on_begin_request(self, src: int, corr: int, body: dict, part: dict) -> None:
        leader, epoch = part["LeaderId"], part["LeaderEpoch"]
        if epoch < self.epoch:
            err = Errors.FENCED_LEADER_EPOCH
        elif leader < 0:
            err = Errors.INVALID_REQUEST
        else:
            self._maybe_follow(leader, epoch)
            voter_id = body.get("VoterId", -1)
            err = Errors.INVALID_VOTER_KEY if voter_id >= 0 and voter_id != self.node_id else Errors.NONE
        self._respond(src, m.BEGIN_QUORUM_EPOCH, corr,
                      m.begin_quorum_epoch_response(self.tp, err, self.leader_id, self.epoch))

    def _on_end_request(self, src: int, corr: int, body: dict, part: dict) -> None:
        leader, epoch = part["LeaderId"], part["LeaderEpoch"]
        if epoch < self.epoch:
            err = Errors.FENCED_LEADER_EPOCH
        else:
            err = Errors.NONE
            if leader >= 0 and leader != self.node_id:
                self._maybe_follow(leader, epoch)
            if self.role is Role.FOLLOWER and self.leader_id == leader and not self.is_observer:
                preferred = [c["CandidateId"] for c in part.get("PreferredCandidates") or []] \
                    or list(part.get("PreferredSuccessors") or [])
                self._fetch_deadline = self.now + end_epoch_backoff_ms(
                    preferred, self.node_id, self.cfg.election_backoff_max_ms)
        self._respond(src, m.END_QUORUM_EPOCH, corr,
                      m.end_quorum_epoch_response(self.tp, err, self.leader_id, self.epoch))

    def _maybe_follow(self, leader: int, epoch: int) -> None:
        """A message names ``leader`` for ``epoch`` (>= ours): follow it if that is news."""
        if leader == self.node_id:
            if epoch > self.epoch:
                raise RaftStateError(f"node {self.node_id} told it leads epoch {epoch} > {self.epoch}")
            return
        if epoch > self.epoch:
            self._become_follower(epoch, leader)
        elif epoch == self.epoch:
            if self.role is Role.LEADER or (self.role is Role.RESIGNED):
                raise RaftStateError(f"two leaders in epoch {epoch}: {self.node_id} and {leader}")
            if self.role is Role.FOLLOWER:
                if self.leader_id != leader:
                    raise RaftStateError(f"two leaders in epoch {epoch}: {self.leader_id} and {leader}")
            else:
                self._become_follower(epoch, leader)

    # -- Fetch (leader side)

    def _leader_check(self, cur_epoch: int) -> int:
        if cur_epoch < self.epoch:
            return Errors.FENCED_LEADER_EPOCH
        if cur_epoch > self.epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        if self.role is not Role.LEADER:
            return Errors.NOT_LEADER_OR_FOLLOWER
        return Errors.NONE

    def _fetch_reply(self, src: int, corr: int, error: int, **kw: Any) -> None:
        if error == Errors.NONE:
            kw.setdefault("high_watermark", self._leader_hw if self._leader_hw is not None else -1)
            kw.setdefault("log_start_offset", self.log.start_offset)
        self._respond(src, m.FETCH, corr, m.fetch_response(self.tp, error, self.leader_id, self.epoch, **kw))

    def _on_fetch_request(self, src: int, corr: int, body: dict, may_wait: bool) -> None:
        one = m.single_partition(body, m.FETCH)
        if one is None or not m.topic_matches(self.tp, m.FETCH, one[0], one[1]):
            return self._respond(src, m.FETCH, corr, m.fetch_response(
                self.tp, 0, -1, -1, top_error=Errors.INVALID_REQUEST))
        part = one[1]
        offset, last_epoch, cur_epoch = part["FetchOffset"], part["LastFetchedEpoch"], part["CurrentLeaderEpoch"]
        replica = (body.get("ReplicaState") or {}).get("ReplicaId", body.get("ReplicaId", -1))
        if body.get("MaxWaitMs", 0) < 0 or offset < 0 or last_epoch < 0 or last_epoch > cur_epoch:
            return self._fetch_reply(src, corr, Errors.INVALID_REQUEST)
        err = self._leader_check(cur_epoch)
        if err:
            return self._fetch_reply(src, corr, err)
        log = self.log
        snap = log.snapshot()
        if offset == 0 and snap is not None and tuple(snap) != (0, 0):
            return self._fetch_reply(src, corr, Errors.NONE, snapshot_id=tuple(snap))
        status, arg = log.validate_offset_and_epoch(offset, last_epoch)
        if status == "snapshot":
            return self._fetch_reply(src, corr, Errors.NONE, snapshot_id=arg)
        if status == "diverging":
            return self._fetch_reply(src, corr, Errors.NONE, diverging=arg)
        hw_before = self._leader_hw
        if replica >= 0 and replica != self.node_id:
            caught_up = self.now if offset >= log.end_offset else self._fetch_times.get(replica, (0, -1))[1]
            self._fetch_times[replica] = (self.now, caught_up)
        if replica in self._replica_end:
            self._replica_end[replica] = offset
            self._acked.add(replica)
            self._note_fetcher(replica)
            self._update_leader_hw()
        elif replica >= 0 and replica != self.node_id:
            self._observers[replica] = (offset, self.now)
        entries = log.read(offset, self.cfg.max_fetch_entries) if offset < log.end_offset else []
        # (unlike Kafka, a fetch that itself moved the HW is answered at once, so the news travels)
        if not entries and may_wait and body.get("MaxWaitMs", 0) > 0 and self._leader_hw == hw_before:
            self._purgatory.append((self.now + body["MaxWaitMs"], src, corr, body))
            return
        self._fetch_reply(src, corr, Errors.NONE, records=self.records.encode(entries) if entries else None)

    def _note_fetcher(self, replica: int) -> None:
        if self._check_quorum_deadline is None:
            return
        self._window.add(replica)
        if len(self._window) >= self.majority - 1:
            self._window = set()
            self._check_quorum_deadline = self.now + self.cfg.fetch_timeout_ms * 3 // 2

    def _complete_purgatory(self) -> None:
        if self._purgatory:
            held, self._purgatory = self._purgatory, []
            for _d, src, corr, body in held:
                self._on_fetch_request(src, corr, body, may_wait=False)

    def _update_leader_hw(self) -> None:
        if self.role is not Role.LEADER:
            return
        offsets = sorted((self.log.flushed_offset if v == self.node_id else self._replica_end.get(v, -1)
                          for v in self.voters), reverse=True)
        cand = offsets[len(self.voters) // 2]
        if cand <= self._epoch_start_offset:
            return
        if self._leader_hw is not None and cand <= self._leader_hw:
            return
        self._leader_hw = cand
        self._set_hw(cand)
        self._complete_purgatory()

    def _set_hw(self, hw: int) -> None:
        if hw < self.high_watermark:
            raise RaftStateError(f"node {self.node_id}: high watermark would go back {self.high_watermark} -> {hw}")
        if hw > self.high_watermark:
            self.high_watermark = hw
            self._out.append(Committed(hw))

    # -- FetchSnapshot (leader side)

    def _on_fetch_snapshot_request(self, src: int, corr: int, body: dict) -> None:
        one = m.single_partition(body, m.FETCH_SNAPSHOT)
        if one is None or not m.topic_matches(self.tp, m.FETCH_SNAPSHOT, one[0], one[1]):
            return self._respond(src, m.FETCH_SNAPSHOT, corr, m.fetch_snapshot_response(
                self.tp, Errors.UNKNOWN_TOPIC_OR_PARTITION, self.leader_id, self.epoch))
        part = one[1]

        def reply(err: int, **kw: Any) -> None:
            self._respond(src, m.FETCH_SNAPSHOT, corr,
                          m.fetch_snapshot_response(self.tp, err, self.leader_id, self.epoch, **kw))

        err = self._leader_check(part["CurrentLeaderEpoch"])
        if err:
            return reply(err)
        want = (part["SnapshotId"]["EndOffset"], part["SnapshotId"]["Epoch"])
        snap = self.log.snapshot()
        if snap is None or tuple(snap) != want or want == (0, 0):
            return reply(Errors.SNAPSHOT_NOT_FOUND)
        data = self.log.read_snapshot()
        pos = part["Position"]
        if pos < 0 or pos >= len(data):
            return reply(Errors.POSITION_OUT_OF_RANGE)
        replica = body.get("ReplicaId", -1)
        if replica in self._replica_end:
            self._note_fetcher(replica)
        n = min(body.get("MaxBytes", self.cfg.snapshot_chunk_bytes), self.cfg.snapshot_chunk_bytes)
        reply(Errors.NONE, snapshot_id=want, size=len(data), position=pos, data=data[pos:pos + n])

    # ------------------------------------------------------------------------------ responses

    def _on_response(self, ev: Receive) -> None:
        req = self._inflight.pop(ev.correlation_id, None)
        if req is None or req[0] != ev.src or req[1] != ev.api:
            if req is not None:
                self._inflight[ev.correlation_id] = req
            return  # unknown, duplicated or timed-out response
        is_fetch = ev.correlation_id == self._fetch_corr
        if is_fetch:
            self._fetch_corr = None
        body = ev.body
        if body.get("ErrorCode", 0) != 0:
            self._retry_at[(ev.src, ev.api)] = self.now + self.cfg.retry_backoff_ms
            return
        one = m.single_partition(body, ev.api, response=True)
        if one is None or not m.topic_matches(self.tp, ev.api, one[0], one[1], response=True):
            return
        part = one[1]
        if ev.api in (m.FETCH, m.FETCH_SNAPSHOT):
            cl = part.get("CurrentLeader") or {}
            leader, epoch = cl.get("LeaderId", -1), cl.get("LeaderEpoch", -1)
        else:
            leader, epoch = part.get("LeaderId", -1), part.get("LeaderEpoch", -1)
        error = part.get("ErrorCode", 0)
        if not self._handle_response_epoch(leader, epoch):
            if error:
                self._retry_at[(ev.src, ev.api)] = self.now + self.cfg.retry_backoff_ms
            return
        if error and error not in (Errors.SNAPSHOT_NOT_FOUND,):
            self._retry_at[(ev.src, ev.api)] = self.now + self.cfg.retry_backoff_ms
            return
        if ev.api == m.VOTE:
            self._on_vote_response(ev.src, part)
        elif ev.api == m.BEGIN_QUORUM_EPOCH:
            if self.role is Role.LEADER:
                self._acked.add(ev.src)
        elif ev.api == m.END_QUORUM_EPOCH:
            if self.role is Role.RESIGNED:
                self._unacked_end.discard(ev.src)
        elif ev.api == m.FETCH and is_fetch:
            self._on_fetch_response(ev.src, part)
        elif ev.api == m.FETCH_SNAPSHOT and is_fetch:
            self._on_fetch_snapshot_response(ev.src, part, error)

    def _handle_response_epoch(self, leader: int, epoch: int) -> bool:
        """Kafka's ``maybeHandleCommonResponse``: returns True if the response is for the current
        epoch and should be handled further."""
        if epoch < self.epoch:
            return False
        if epoch > self.epoch:
            if leader >= 0 and leader != self.node_id:
                self._become_follower(epoch, leader)
            else:
                self._become_unattached(epoch)
            return False
        if leader >= 0 and leader != self.node_id and self.leader_id < 0 and self.role is not Role.LEADER:
            self._maybe_follow(leader, epoch)
        return True

    def _on_vote_response(self, src: int, part: dict) -> None:
        if self.role is not Role.CANDIDATE or src not in self.voters:
            return
        if part.get("VoteGranted"):
            self._granted.add(src)
            self._maybe_won()
        else:
            self._rejected.add(src)
            if len(self.voters) - len(self._rejected) < self.majority and self._backoff_deadline is None:
                self._start_backoff()

    def _follower_accepts(self, src: int) -> bool:
        if self.role is Role.FOLLOWER:
            return src == self.leader_id
        return False

    def _on_fetch_response(self, src: int, part: dict) -> None:
        if not self._follower_accepts(src):
            return
        self._fetch_deadline = self.now + self.cfg.fetch_timeout_ms
        self._bootstrap_target = None
        log = self.log
        div = part.get("DivergingEpoch") or {}
        sid = part.get("SnapshotId") or {}
        if div.get("Epoch", -1) >= 0:
            end = div["EndOffset"]
            if end < self.high_watermark:
                raise RaftStateError(f"node {self.node_id}: leader {src} asked for truncation to {end}, "
                                     f"below the high watermark {self.high_watermark}")
            log.truncate_to_end_offset(div["Epoch"], end)
            if log.end_offset < self.high_watermark:
                raise RaftStateError(f"node {self.node_id}: truncated to {log.end_offset}, below the high "
                                     f"watermark {self.high_watermark}")
            return
        if sid.get("EndOffset", -1) >= 0 or sid.get("Epoch", -1) >= 0:
            if sid.get("EndOffset", -1) < 0 or sid.get("Epoch", -1) < 0:
                return
            want = SnapshotId(sid["EndOffset"], sid["Epoch"])
            if self._snapshot_fetch is None or self._snapshot_fetch[0] != want:
                self._snapshot_fetch = (want, bytearray())
            return
        entries = self.records.decode(part.get("Records"))
        if entries:
            if entries[0].offset != log.end_offset:
                return  # not where we are any more; the next fetch asks again
            log.append(entries)
            self._out.append(Fsync(log.end_offset))
        leader_hw = part.get("HighWatermark", -1)
        if leader_hw >= 0:
            new = min(leader_hw, log.end_offset)
            if new > self.high_watermark:
                self._set_hw(new)

    def _on_fetch_snapshot_response(self, src: int, part: dict, error: int) -> None:
        if not self._follower_accepts(src) or self._snapshot_fetch is None:
            return
        sid, buf = self._snapshot_fetch
        got = part.get("SnapshotId") or {}
        if error == Errors.SNAPSHOT_NOT_FOUND or got.get("EndOffset", -1) < 0 or got.get("Epoch", -1) < 0:
            self._snapshot_fetch = None
            return
        if (got["EndOffset"], got["Epoch"]) != tuple(sid) or part.get("Position") != len(buf):
            raise RaftStateError(f"node {self.node_id}: FetchSnapshot answer for {got} at {part.get('Position')}"
                                 f" but the partial snapshot is {tuple(sid)} at {len(buf)}")
        self._fetch_deadline = self.now + self.cfg.fetch_timeout_ms
        buf.extend(part.get("UnalignedRecords") or b"")
        if len(buf) >= part.get("Size", 0):
            if sid.end_offset < self.high_watermark:
                raise RaftStateError(f"node {self.node_id}: snapshot {tuple(sid)} below the HW {self.high_watermark}")
            self.log.install_snapshot(sid, bytes(buf))
            self._snapshot_fetch = None
            self._set_hw(sid.end_offset)
            self._out.append(SnapshotLoaded(sid, bytes(buf)))

    # ------------------------------------------------------------------------------ local events

    def _on_append(self, ev: Append) -> None:
        if self.role is not Role.LEADER:
            self._out.append(AppendRejected(f"not the leader (role {self.role.value}, epoch {self.epoch})"))
            return
        base = self.log.end_offset
        n = len(ev.payloads)
        if not n:
            self._out.append(AppendRejected("nothing to append"))
            return
        self.log.append(self.log.entries_for_append(base, self.epoch, ev.payloads))
        self._out.append(Fsync(self.log.end_offset))
        self._out.append(Appended(base, base + n - 1, self.epoch))
        self._complete_purgatory()

    def _on_create_snapshot(self, ev: CreateSnapshot) -> None:
        end = ev.end_offset
        if end > self.high_watermark or end > self.log.flushed_offset or end <= self.log.start_offset:
            raise ValueError(f"node {self.node_id}: snapshot at {end} outside ({self.log.start_offset}, "
                                 f"min(HW {self.high_watermark}, flushed {self.log.flushed_offset})]")
        self.log.create_snapshot(SnapshotId(end, self.log.epoch_of(end - 1)), ev.data)

    def _on_request_failed(self, dest: int, corr: int) -> None:
        req = self._inflight.get(corr)
        if req is None or req[0] != dest:
            return
        del self._inflight[corr]
        if corr == self._fetch_corr:
            self._fetch_corr = None
            self._bootstrap_target = None
        self._retry_at[(dest, req[1])] = self.now + self.cfg.retry_backoff_ms

    def _on_unreachable(self, node: int) -> None:
        if not self.cfg.elect_on_refused_leader:
            return
        if self.role is Role.FOLLOWER and node == self.leader_id and self._fetch_deadline is not None:
            # a voter stands at once; an observer asks the other voters who leads now
            self._fetch_deadline = min(self._fetch_deadline, self.now)
        elif self.role is Role.CANDIDATE and node in self.voters and node not in self._granted:
            # a voter that is down cannot vote in time: when too few are left to win, back off now
            # rather than at the election timeout (a split vote after a leader crash ends sooner)
            self._rejected.add(node)
            if len(self.voters) - len(self._rejected) < self.majority and self._backoff_deadline is None:
                self._start_backoff()

    def _after_log_change(self) -> None:
        if self.role is Role.LEADER:
            self._update_leader_hw()
