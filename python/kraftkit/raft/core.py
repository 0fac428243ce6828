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

Rules follow KIP-595 as Kafka's ``KafkaRaftClient``/``QuorumState`` implement it; the deviations
are listed in docs/architecture.md ("The raft replica").
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Mapping
from typing import Any

from kraftkit.metadata.snapshot import SnapshotId
from kraftkit.raft import messages as m
from kraftkit.raft.elections import Elections
from kraftkit.raft.events import (
    Append,
    Appended,
    AppendRejected,
    CreateSnapshot,
    Event,
    Fsync,
    FsyncComplete,
    Output,
    PeerUnreachable,
    PersistElection,
    Receive,
    RequestFailed,
    Resign,
    Send,
    Start,
    StateChanged,
    Tick,
)
from kraftkit.raft.handlers import Handlers, end_epoch_backoff_ms
from kraftkit.raft.log import Entry, RaftLog
from kraftkit.raft.messages import Errors, TopicPartition
from kraftkit.raft.quorum_state import ElectionState, Role
from kraftkit.raft.reconfig import VoterChanges
from kraftkit.raft.state import (
    STATE_OF_ROLE,
    CandidateState,
    EpochState,
    FetchingState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    RaftStateError,
    ResignedState,
    UnattachedState,
    VotedState,
)
from kraftkit.raft.voters import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    ZERO_UUID,
    ControlRecord,
    Endpoint,
    ReplicaKey,
    VoterNode,
    VoterSet,
)

__all__ = ["RaftConfig", "RaftCore", "RaftStateError", "RecordsAdapter", "Role", "end_epoch_backoff_ms"]


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
    #: KIP-996: a voter whose timer runs out first asks the voters for pre-votes (as a prospective,
    #: in its epoch, nothing persisted) and stands for election only with a majority of them, so a
    #: node cut off from a healthy quorum cannot force an election when it comes back. False: it
    #: stands at once (KIP-595). Pre-votes from other nodes are answered either way.
    pre_vote: bool = True
    #: KIP-853: this node's listeners (what a dynamic quorum's VotersRecord says of it when it leads),
    #: the name of the one the voters talk on, and the ids standing for
    #: ``controller.quorum.bootstrap.servers`` (negative: -2, -3, ...), which an observer without a
    #: leader asks instead of the voters
    endpoints: tuple[Endpoint, ...] = ()
    listener: str = "CONTROLLER"
    bootstrap_ids: tuple[int, ...] = ()


class RecordsAdapter:
    """How a log's records travel in ``Records``. The default, for a log of :class:`Entry` items
    (the memory log), keeps them as a list of ``[offset, epoch, payload, control]`` (fine for the
    simulator); a node swaps in :class:`~kraftkit.raft.records.KafkaRecords`, which sends a file log's
    record batches as they are."""

    def encode(self, entries: list[Entry]) -> Any:
        return [list(e) for e in entries]

    def decode(self, records: Any) -> list[Entry]:
        if not records:
            return []
        return [Entry(int(o), int(e), p, bool(c)) for o, e, p, c in records]


class _RoleField:
    """``core._<name>`` read and written as the current role's ``<name>`` (None when the role has
    none): the private names tests reach into, kept from before the role states."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, core: Any, owner: Any = None) -> Any:
        return self if core is None else getattr(core.state, self.name, None)

    def __set__(self, core: Any, value: Any) -> None:
        setattr(core.state, self.name, value)


class RaftCore(Handlers, Elections, VoterChanges):
    """One raft replica of ``tp``. ``voters`` is the static voter set (kraft.version 0); a dynamic
    quorum's (kraft.version 1, KIP-853) is the last one in the log (``log.kraft``), and replaces it.
    A node that is not in the voter set in force is an observer (it fetches but never votes or
    stands). ``directory_id`` is the directory id of its metadata log (meta.properties), half of its
    :class:`~kraftkit.raft.voters.ReplicaKey`.

    The quorum state is :attr:`state`, one of :mod:`kraftkit.raft.state`'s per-role objects; the
    transitions below replace it. The request and response handlers are in
    :class:`~kraftkit.raft.handlers.Handlers`."""

    def __init__(
        self,
        node_id: int,
        voters: list[int] | tuple[int, ...],
        log: RaftLog,
        persisted: ElectionState | None = None,
        config: RaftConfig | None = None,
        rng: random.Random | None = None,
        tp: TopicPartition = m.METADATA_PARTITION,
        records: RecordsAdapter | None = None,
        directory_id: uuid.UUID = ZERO_UUID,
    ) -> None:
        self.node_id = node_id
        self.directory_id = directory_id
        self.key = ReplicaKey(node_id, directory_id)
        self._static = VoterSet.of_ids(set(voters))
        self._voters_gen = -1
        self._seen_voters_gen = log.kraft.generation
        self._voter_set: VoterSet = self._static
        self._is_voter = False
        #: endpoints heard of in answers (NodeEndpoints, LeaderEndpoints) and AddRaftVoter requests
        self.heard_endpoints: dict[int, tuple[str, int]] = {}
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
        self.state: EpochState = UnattachedState(0)
        self.high_watermark: int = 0
        # requests
        self._next_corr = 1
        self._inflight: dict[int, tuple[int, int, int]] = {}  # corr -> (dest, api, deadline)
        self._retry_at: dict[tuple[int, int], int] = {}  # (dest, api) -> earliest resend
        self._out: list[Output] = []

    # ------------------------------------------------------------------------------ accessors

    @property
    def role(self) -> Role:
        return self.state.role

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id

    @property
    def voted_id(self) -> int:
        return self.state.voted_id

    @property
    def voter_set(self) -> VoterSet:
        """The voter set in force: the log's last (a dynamic quorum), else the static one."""
        kraft = self.log.kraft
        if kraft.generation != self._voters_gen:
            self._voters_gen = kraft.generation
            self._voter_set = kraft.voters() or self._static
            self._is_voter = self._voter_set.is_voter(self.key)
        return self._voter_set

    @property
    def voters(self) -> tuple[int, ...]:
        return self.voter_set.ids

    @property
    def dynamic(self) -> bool:
        """Whether the voter set comes from the log (KIP-853), not from the configuration."""
        return self.log.kraft.voters() is not None

    @property
    def is_observer(self) -> bool:
        self.voter_set  # noqa: B018  (refreshes _is_voter)
        return not self._is_voter

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def voter_dir(self, node_id: int) -> uuid.UUID:
        """A voter's directory id (zero: unknown, or not a voter)."""
        n = self.voter_set.node(node_id)
        return n.key.directory_id if n is not None else ZERO_UUID

    def endpoint_of(self, node_id: int) -> tuple[str, int] | None:
        """Where ``node_id`` listens on the quorum's listener, as far as this replica knows (its
        voter set, else what answers and requests said): None for a static quorum's voters (the
        driver's configuration has them) and unknown nodes."""
        n = self.voter_set.node(node_id)
        e = n.endpoint(self.cfg.listener) if n is not None else None
        if e is not None:
            return e.host, e.port
        return self.heard_endpoints.get(node_id)

    def election_state(self) -> ElectionState:
        """What is (or is about to be) in the quorum-state file."""
        return self._persisted if self._persisted is not None else ElectionState(0)

    def leader_high_watermark(self) -> int | None:
        """The leader's HW in the current epoch (None before it commits its LeaderChange entry)."""
        return self.state.high_watermark if isinstance(self.state, LeaderState) else None

    @property
    def resignation_pending(self) -> bool:
        """A resigned leader still waiting for voters to acknowledge its EndQuorumEpoch."""
        return isinstance(self.state, ResignedState) and bool(self.state.unacked_end)

    def quorum_info(self) -> dict[str, Any] | None:
        """What the leader knows of the replicas (DescribeQuorum's answer); None unless leader.
        Times are the core's milliseconds (-1: never)."""
        st = self.state
        if not isinstance(st, LeaderState):
            return None

        def state(r: int, end: int) -> dict[str, Any]:
            if r == self.node_id:
                return {
                    "id": r,
                    "directory_id": self.directory_id,
                    "end_offset": self.log.end_offset,
                    "last_fetch": self.now,
                    "last_caught_up": self.now,
                }
            fetched, caught = st.fetch_times.get(r, (-1, -1))
            d = st.observer_dirs.get(r, ZERO_UUID)
            return {"id": r, "directory_id": d, "end_offset": end, "last_fetch": fetched, "last_caught_up": caught}

        return {
            "leader_id": self.node_id,
            "epoch": self.epoch,
            "high_watermark": st.high_watermark if st.high_watermark is not None else -1,
            "voters": [state(v, st.replica_end.get(v, -1)) for v in self.voters],
            "observers": [state(o, end) for o, (end, _t) in sorted(st.observers.items()) if o not in self.voters],
        }

    def next_deadline(self) -> int | None:
        """The earliest time at which a :class:`Tick` could change something (None: only events will)."""
        cands = [d for _, _, d in self._inflight.values()]
        cands.extend(self._retry_at.values())
        cands.extend(d for d in self.state.deadlines() if d is not None)
        return min(cands) if cands else None

    # ------------------------------------------------------------------------------ stepping

    def step(self, event: Event) -> list[Output]:
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
        self.state = UnattachedState(st.epoch)
        if st.epoch < log_epoch:
            self._become_unattached(log_epoch)
        elif st.leader_id == self.node_id:
            # (an observer too: a leader that removed itself and restarted before the change
            # committed; after its election timeout it moves to the next epoch, which its fetches
            # and answers carry to the voters that still follow it: Kafka's QuorumState.initialize)
            self._become_resigned([], persist=False)
        elif st.voted_id == self.node_id and not self.is_observer:
            cand = self._set_role(Role.CANDIDATE, st.epoch, -1, self.node_id)
            cand.retries = 1
            cand.granted = {self.node_id}
            cand.election_deadline = self.now + self._random_election_timeout()
            self._maybe_won()
        elif st.voted_id >= 0:
            voted = self._set_role(Role.VOTED, st.epoch, -1, st.voted_id)
            voted.election_deadline = self._unattached_timeout()
        elif st.leader_id >= 0 and st.leader_id != self.node_id:
            self._become_follower(st.epoch, st.leader_id)
        else:
            self._become_unattached(st.epoch)
        if self.voters == (self.node_id,) and self.role in (Role.UNATTACHED, Role.RESIGNED):
            self._become_candidate()

    # ------------------------------------------------------------------------------ transitions

    def _set_role(self, role: Role, epoch: int, leader_id: int, voted_id: int, persist: bool = True) -> Any:
        """Replaces the quorum state by a fresh one of ``role`` (returned, for the caller to fill in)."""
        if epoch < self.epoch:
            raise RaftStateError(f"node {self.node_id}: epoch would go back from {self.epoch} to {epoch}")
        old = self.state
        held = old.purgatory if isinstance(old, LeaderState) else []
        new = STATE_OF_ROLE[role](epoch, leader_id, voted_id)
        if persist:
            st = new.election()
            if st != self._persisted:
                self._persisted = st
                self._out.append(PersistElection(st))
        self.state = new
        self._out.append(StateChanged(role, epoch, leader_id))
        for _d, src, corr, _body in held:  # fetches parked by the old leader learn the news now
            self._respond(
                src, m.FETCH, corr, m.fetch_response(self.tp, Errors.NOT_LEADER_OR_FOLLOWER, self.leader_id, self.epoch)
            )
        return new

    def _random_election_timeout(self) -> int:
        t = self.cfg.election_timeout_ms
        return t + self.rng.randrange(t) if t > 0 else 0

    def _unattached_timeout(self) -> int | None:
        return None if self.is_observer else self.now + self._random_election_timeout()

    def _become_unattached(self, epoch: int, leader_id: int = -1) -> None:
        # Kafka keeps the remaining election time when a candidate or an unattached voter moves to a
        # higher epoch: otherwise a candidate with a stale log could hold off every election forever.
        # (a prospective keeps it too, unless a majority refused it, and a resigned leader: Kafka's
        # transitionToUnattached)
        old = self.state
        kept = (CandidateState, UnattachedState, VotedState, ResignedState)
        keep = old.election_deadline if isinstance(old, kept) else None
        if isinstance(old, ProspectiveState) and not self._lost(old.rejected):
            keep = old.election_deadline
        new: UnattachedState = self._set_role(Role.UNATTACHED, epoch, leader_id, -1)
        new.election_deadline = keep if keep is not None and not self.is_observer else self._unattached_timeout()

    def _become_voted(self, candidate: int) -> None:
        new: VotedState = self._set_role(Role.VOTED, self.epoch, -1, candidate)
        new.election_deadline = self._unattached_timeout()

    def _become_follower(self, epoch: int, leader_id: int) -> None:
        if leader_id == self.node_id:
            raise RaftStateError(f"node {self.node_id} asked to follow itself in epoch {epoch}")
        if epoch == self.epoch and self.role is Role.LEADER:
            raise RaftStateError(f"two leaders in epoch {epoch}: {self.node_id} and {leader_id}")
        if (
            epoch == self.epoch
            and self.leader_id >= 0
            and self.leader_id != leader_id
            and self.started
            and self.role in (Role.FOLLOWER, Role.RESIGNED, Role.PROSPECTIVE)
        ):
            raise RaftStateError(f"two leaders in epoch {epoch}: {self.leader_id} and {leader_id}")
        new: FollowerState = self._set_role(Role.FOLLOWER, epoch, leader_id, -1)
        new.fetch_deadline = self.now + self.cfg.fetch_timeout_ms

    def _become_leader(self) -> None:
        old = self.state
        assert isinstance(old, CandidateState)
        granting = sorted(old.granted)
        new: LeaderState = self._set_role(Role.LEADER, self.epoch, self.node_id, -1)
        self.log.initialize_leader_epoch(self.epoch)
        new.epoch_start_offset = self.log.end_offset
        new.replica_end = {v: -1 for v in self.voters if v != self.node_id}
        new.begin_resend_at = {v: self.now for v in self.voters if v != self.node_id}
        if self.cfg.check_quorum and len(self.voters) > 1:
            new.check_quorum_deadline = self.now + self.cfg.fetch_timeout_ms * 3 // 2
        # the LeaderChangeMessage: the first entry of the epoch; nothing commits before it does
        payload = {
            "Version": 0,
            "LeaderId": self.node_id,
            "Voters": [{"VoterId": v} for v in self.voters],
            "GrantingVoters": [{"VoterId": v} for v in granting],
        }
        payloads: list[Any] = [payload, *self._epoch_start_voter_records()]
        self.log.append(self.log.entries_for_append(new.epoch_start_offset, self.epoch, payloads, control=True))
        self._out.append(Fsync(self.log.end_offset))

    def _epoch_start_voter_records(self) -> list[ControlRecord]:
        """KIP-853: a leader of a dynamic quorum writes the voter set after its LeaderChangeMessage,
        in the same batch, when the log has none yet (only the bootstrap snapshot's, at offset -1) or
        when what the set says of the leader (its endpoints, its kraft.version range) is out of date
        (Kafka's ``appendStartOfEpochControlRecords``)."""
        kraft = self.log.kraft
        entry = kraft.voters_entry()
        if entry is None or kraft.kraft_version() < 1:
            return []
        offset, voters = entry
        mine = voters.node(self.node_id)
        assert mine is not None
        local = VoterNode(self.key, self.cfg.endpoints or mine.endpoints, (0, 1))
        if offset >= 0 and local == mine:
            return []
        updated = voters.update(local) or voters
        return [
            ControlRecord(KRAFT_VERSION, {"Version": 0, "KRaftVersion": kraft.kraft_version()}),
            ControlRecord(KRAFT_VOTERS, updated.to_record()),
        ]

    def _become_resigned(self, preferred: list[int], persist: bool = False) -> None:
        new: ResignedState = self._set_role(Role.RESIGNED, self.epoch, self.node_id, -1, persist=persist)
        new.preferred = list(preferred)
        new.unacked_end = {v for v in self.voters if v != self.node_id}
        new.election_deadline = self.now + self._random_election_timeout()

    def _preferred_successors(self) -> list[int]:
        st = self.state
        assert isinstance(st, LeaderState)
        others = [v for v in self.voters if v != self.node_id]
        return sorted(others, key=lambda v: (-st.replica_end.get(v, -1), v))

    # ------------------------------------------------------------------------------ timers

    def _poll(self) -> None:
        now = self.now
        fetching = self.state if isinstance(self.state, FetchingState) else None
        for corr, (_dest, _api, deadline) in list(self._inflight.items()):
            if deadline <= now:
                del self._inflight[corr]
                if fetching is not None and corr == fetching.fetch_corr:
                    fetching.fetch_corr = None
                    fetching.bootstrap_target = None
        for key, t in list(self._retry_at.items()):
            if t <= now:
                del self._retry_at[key]
        st = self.state
        if isinstance(st, LeaderState):
            self._poll_leader(st)
        elif isinstance(st, (CandidateState, ProspectiveState)):
            if self._poll_nominee(st):
                return self._poll()
        elif isinstance(st, ResignedState):
            if st.election_deadline is not None and st.election_deadline <= now:
                # the next epoch, unattached, its election timer already out (Kafka's pollResigned): a
                # voter then asks for pre-votes in that epoch, which moves every replica it asks to it
                self._become_unattached(self.epoch + 1)
                return self._poll()
            for v in sorted(st.unacked_end):
                self._send_once(
                    v,
                    m.END_QUORUM_EPOCH,
                    m.end_quorum_epoch_request(self.tp, self.cfg.cluster_id, self.node_id, self.epoch, st.preferred),
                )
        elif isinstance(st, FollowerState):
            if st.fetch_deadline is not None and st.fetch_deadline <= now:
                if not self.is_observer:
                    self._stand()
                    return self._poll()
                st.fetch_deadline = None  # an observer asks the bootstrap voters until it hears back
            self._maybe_send_fetch()
        else:  # UNATTACHED / VOTED
            deadline = st.election_deadline  # type: ignore[attr-defined]
            if deadline is not None and deadline <= now and not self.is_observer:
                self._stand()
                return self._poll()
            if self.is_observer:
                self._maybe_send_fetch()

    def _poll_leader(self, st: LeaderState) -> None:
        now = self.now
        self._expire_voter_change()
        if st.check_quorum_deadline is not None and st.check_quorum_deadline <= now:
            self._become_resigned(self._preferred_successors())
            return self._poll()
        for v, t in sorted(st.begin_resend_at.items()):
            if v in st.acked:
                del st.begin_resend_at[v]
            elif t <= now:
                blocked = self._blocked_until(v, m.BEGIN_QUORUM_EPOCH)
                if blocked is None:
                    self._send(
                        v,
                        m.BEGIN_QUORUM_EPOCH,
                        m.begin_quorum_epoch_request(
                            self.tp,
                            self.cfg.cluster_id,
                            v,
                            self.node_id,
                            self.epoch,
                            self.voter_dir(v),
                            [{"Name": e.name, "Host": e.host, "Port": e.port} for e in self.cfg.endpoints],
                        ),
                    )
                    st.begin_resend_at[v] = now + self.cfg.fetch_timeout_ms // 2
                else:
                    st.begin_resend_at[v] = blocked
        if st.purgatory:
            due = [p for p in st.purgatory if p[0] <= now]
            if due:
                st.purgatory = [p for p in st.purgatory if p[0] > now]
                for _d, src, corr, body in due:
                    self._on_fetch_request(src, corr, body, may_wait=False)

    # ------------------------------------------------------------------------------ sending

    def _send(self, dest: int, api: int, body: Mapping[str, Any]) -> int:
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

    def _send_once(self, dest: int, api: int, body: Mapping[str, Any]) -> bool:
        """Send unless a request of this api to ``dest`` is in flight or backing off."""
        if self._blocked_until(dest, api) is not None:
            return False
        self._send(dest, api, body)
        return True

    def _respond(self, dest: int, api: int, corr: int, body: Mapping[str, Any]) -> None:
        self._out.append(Send(dest, api, body, corr, True))

    def _backing_off(self, node: int) -> bool:
        return (node, m.FETCH) in self._retry_at or (node, m.FETCH_SNAPSHOT) in self._retry_at

    def _maybe_send_fetch(self) -> None:
        st = self.state
        assert isinstance(st, FetchingState)
        if st.fetch_corr is not None:
            return
        if self.log.flushed_offset < self.log.end_offset:
            return  # fsync first: the next FetchOffset tells the leader this data is durable
        # a follower fetches from its leader; an observer whose fetch timeout expired (deadline None) asks
        # the bootstrap voters instead until one names the leader (Kafka's pollFollowerAsObserver)
        follower = st if isinstance(st, FollowerState) else None
        if follower is not None and follower.fetch_deadline is not None and follower.fetch_deadline > self.now:
            target = self.leader_id
        else:
            # a voter that just answered with an error (e.g. NOT_LEADER_OR_FOLLOWER in the same epoch)
            # is backing off: ask another one (Kafka's findReadyBootstrapServer), not it again
            # (whichever request it refused: a FetchSnapshot of a snapshot fetch counts too)
            if st.bootstrap_target is None or self._backing_off(st.bootstrap_target):
                pool = self.cfg.bootstrap_ids if self.cfg.bootstrap_ids and self.is_observer else self.voters
                ready = [v for v in pool if v != self.node_id and not self._backing_off(v)]
                if not ready:
                    return
                st.bootstrap_target = self.rng.choice(ready)
            target = st.bootstrap_target
        if self._backing_off(target):
            return
        if follower is not None and follower.snapshot_fetch is not None:
            sid, buf = follower.snapshot_fetch
            st.fetch_corr = self._send(
                target,
                m.FETCH_SNAPSHOT,
                m.fetch_snapshot_request(
                    self.tp,
                    self.cfg.cluster_id,
                    self.node_id,
                    self.epoch,
                    (sid.end_offset, sid.epoch),
                    len(buf),
                    self.cfg.snapshot_chunk_bytes,
                    self.directory_id,
                ),
            )
        else:
            st.fetch_corr = self._send(
                target,
                m.FETCH,
                m.fetch_request(
                    self.tp,
                    self.cfg.cluster_id,
                    self.node_id,
                    self.epoch,
                    self.log.end_offset,
                    self.log.last_epoch(),
                    self.cfg.fetch_max_wait_ms,
                    self.directory_id,
                ),
            )

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
            raise ValueError(
                f"node {self.node_id}: snapshot at {end} outside ({self.log.start_offset}, "
                f"min(HW {self.high_watermark}, flushed {self.log.flushed_offset})]"
            )
        self.log.create_snapshot(SnapshotId(end, self.log.epoch_of(end - 1)), ev.data)

    def _on_request_failed(self, dest: int, corr: int) -> None:
        req = self._inflight.get(corr)
        if req is None or req[0] != dest:
            return
        del self._inflight[corr]
        st = self.state
        if isinstance(st, FetchingState) and corr == st.fetch_corr:
            st.fetch_corr = None
            st.bootstrap_target = None
        self._retry_at[(dest, req[1])] = self.now + self.cfg.retry_backoff_ms

    def _on_unreachable(self, node: int) -> None:
        if not self.cfg.elect_on_refused_leader:
            return
        st = self.state
        if isinstance(st, FollowerState) and node == st.leader_id and st.fetch_deadline is not None:
            # a voter stands (asks for pre-votes) at once; an observer asks the other voters who leads now
            st.fetch_deadline = min(st.fetch_deadline, self.now)
        elif isinstance(st, (CandidateState, ProspectiveState)) and node in self.voters and node not in st.granted:
            # a voter that is down cannot vote in time: when too few are left to win, back off now
            # rather than at the election timeout (a split vote after a leader crash ends sooner); a
            # prospective gives up its round then (in _poll)
            st.rejected.add(node)
            if isinstance(st, CandidateState) and self._lost(st.rejected) and st.backoff_deadline is None:
                self._start_backoff()

    def _after_log_change(self) -> None:
        gen = self.log.kraft.generation
        if gen != self._seen_voters_gen:
            self._seen_voters_gen = gen
            self._voters_changed()
        if self.role is Role.LEADER:
            self._update_leader_hw()
            self._voter_change_progress()

    # ------------------------------------------------------------------------------ test access
    # the private names the tests (and their deliberately broken rules) use, mapped onto the role state
    _election_deadline = _RoleField("election_deadline")
    _backoff_deadline = _RoleField("backoff_deadline")
    _fetch_deadline = _RoleField("fetch_deadline")
    _retries = _RoleField("retries")
    _leader_hw = _RoleField("high_watermark")
    _replica_end = _RoleField("replica_end")
    _epoch_start_offset = _RoleField("epoch_start_offset")
