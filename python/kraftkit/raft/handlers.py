"""How the raft core answers the quorum RPCs and takes in their answers (Kafka's
``KafkaRaftClient.handle*Request`` / ``handle*Response``).

:class:`Handlers` is a part of :class:`~kraftkit.raft.core.RaftCore` (which inherits it): it reads
and changes the core's quorum state through the per-role objects of :mod:`kraftkit.raft.state` and
moves between roles through the core's ``_become_*`` transitions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from kraftkit.metadata.snapshot import SnapshotId
from kraftkit.protocol import types as t
from kraftkit.raft import messages as m
from kraftkit.raft.events import Committed, Fsync, Receive, SnapshotLoaded
from kraftkit.raft.messages import Errors
from kraftkit.raft.quorum_state import Role
from kraftkit.raft.state import (
    CandidateState,
    FetchingState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    RaftStateError,
    ResignedState,
)
from kraftkit.raft.voters import ReplicaKey

if TYPE_CHECKING:
    from kraftkit.raft.core import RaftCore

__all__ = ["Handlers", "end_epoch_backoff_ms"]


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


# the partitions of the bodies the handlers read (Kafka's schemas' struct names, generated types)
VotePart = t.VoteRequestTopicDataPartitionData
BeginRequest = t.BeginQuorumEpochRequest
BeginPart = t.BeginQuorumEpochRequestTopicDataPartitionData
EndPart = t.EndQuorumEpochRequestTopicDataPartitionData
FetchedPart = t.FetchResponseFetchableTopicResponsePartitionData
SnapshotPart = t.FetchSnapshotResponseTopicSnapshotPartitionSnapshot


class Handlers:
    """The request and response handlers of :class:`~kraftkit.raft.core.RaftCore`."""

    # Each method takes ``self: RaftCore`` so that its body is checked against the core it is a
    # part of; mypy takes only a supertype (or a protocol) there, hence the ignore[misc] on each.

    # ------------------------------------------------------------------------------ requests

    def _on_request(self: RaftCore, ev: Receive) -> None:  # type: ignore[misc]  # RaftCore's mixin
        api, body = ev.api, ev.body
        handlers: dict[int, Callable] = {
            m.VOTE: self._on_vote_request,
            m.BEGIN_QUORUM_EPOCH: self._on_begin_request,
            m.END_QUORUM_EPOCH: self._on_end_request,
        }
        handler = handlers.get(api)
        cid = body.get("ClusterId")
        voter_changes: dict[int, Callable] = {
            m.ADD_RAFT_VOTER: self._on_add_voter_request,
            m.REMOVE_RAFT_VOTER: self._on_remove_voter_request,
        }
        if api in voter_changes:
            if cid is not None and cid != self.cfg.cluster_id:
                return self._respond(
                    ev.src,
                    api,
                    ev.correlation_id,
                    m.voter_change_response(
                        Errors.INCONSISTENT_CLUSTER_ID, f"cluster id {cid!r} is not this cluster's"
                    ),
                )
            return voter_changes[api](ev.src, ev.correlation_id, body)
        if api == m.UPDATE_RAFT_VOTER:
            return self._on_update_voter_request(ev.src, ev.correlation_id, body)
        if api == m.API_VERSIONS:
            return self._on_api_versions_request(ev.src, ev.correlation_id)
        if api == m.FETCH:
            if cid is not None and cid != self.cfg.cluster_id:
                return self._respond(
                    ev.src,
                    api,
                    ev.correlation_id,
                    m.fetch_response(self.tp, 0, -1, -1, top_error=Errors.INCONSISTENT_CLUSTER_ID),
                )
            return self._on_fetch_request(ev.src, ev.correlation_id, cast(t.FetchRequest, body), may_wait=True)
        if api == m.FETCH_SNAPSHOT:
            if cid is not None and cid != self.cfg.cluster_id:
                return self._respond(
                    ev.src,
                    api,
                    ev.correlation_id,
                    m.fetch_snapshot_response(self.tp, 0, -1, -1, top_error=Errors.INCONSISTENT_CLUSTER_ID),
                )
            return self._on_fetch_snapshot_request(ev.src, ev.correlation_id, cast(t.FetchSnapshotRequest, body))
        if handler is None:
            return
        builders: dict[int, Callable[..., Mapping[str, Any]]] = {
            m.VOTE: lambda e, top=0: m.vote_response(self.tp, e, self.leader_id, self.epoch, False, top),
            m.BEGIN_QUORUM_EPOCH: lambda e, top=0: m.begin_quorum_epoch_response(
                self.tp, e, self.leader_id, self.epoch, top
            ),
            m.END_QUORUM_EPOCH: lambda e, top=0: m.end_quorum_epoch_response(
                self.tp, e, self.leader_id, self.epoch, top
            ),
        }
        build = builders[api]
        if cid is not None and cid != self.cfg.cluster_id:
            return self._respond(ev.src, api, ev.correlation_id, build(0, Errors.INCONSISTENT_CLUSTER_ID))
        one = m.single_partition(body, api)
        if one is None or not m.topic_matches(self.tp, api, one[0], one[1]):
            return self._respond(ev.src, api, ev.correlation_id, build(0, Errors.INVALID_REQUEST))
        handler(ev.src, ev.correlation_id, body, one[1])

    def _can_grant(self: RaftCore, candidate: int, last_epoch: int, last_offset: int, pre_vote: bool = False) -> bool:  # type: ignore[misc]  # RaftCore's mixin
        """Kafka's ``canGrantVote`` of each role. A pre-vote is granted to an up-to-date log by every
        role but a leader and a follower that has fetched from its leader in this role; a vote only
        by a replica without a leader that has not voted for another in this epoch. An observer
        answers as its role says too (KIP-853): a candidate may count it as a voter by a VotersRecord
        the observer has not replicated yet, and only its vote can then elect a leader."""
        up_to_date = (last_epoch, last_offset) >= (self.log.last_epoch(), self.log.end_offset)
        st = self.state
        if pre_vote:
            if isinstance(st, LeaderState):
                return False
            if isinstance(st, FollowerState):
                return up_to_date and not st.fetched
            return up_to_date
        if self.role in (Role.VOTED, Role.PROSPECTIVE) and self.voted_id >= 0:
            return self.voted_id == candidate
        if self.role in (Role.UNATTACHED, Role.PROSPECTIVE):
            return self.leader_id < 0 and up_to_date
        return False

    def _on_vote_request(self: RaftCore, src: int, corr: int, body: t.VoteRequest, part: VotePart) -> None:  # type: ignore[misc]  # RaftCore's mixin
        cand_epoch, cand = part["ReplicaEpoch"], part["ReplicaId"]
        last_epoch, last_offset = part["LastOffsetEpoch"], part["LastOffset"]
        # (absent below v2: a standard vote)
        pre_vote = bool(part.get("PreVote", False))

        def reply(error: int, granted: bool = False) -> None:
            self._respond(src, m.VOTE, corr, m.vote_response(self.tp, error, self.leader_id, self.epoch, granted))

        # a candidate stands in an epoch above its log's; a prospective asks in its own epoch, which
        # its log may have reached (Kafka's handleVoteRequest)
        if last_offset < 0 or last_epoch < 0 or last_epoch > cand_epoch or (last_epoch == cand_epoch and not pre_vote):
            return reply(Errors.INVALID_REQUEST)
        if cand_epoch < self.epoch:
            return reply(Errors.FENCED_LEADER_EPOCH)
        if cand < 0:
            return reply(Errors.INVALID_REQUEST)
        if cand_epoch > self.epoch:
            self._become_unattached(cand_epoch)
        if not self._addressed_to_me(body.get("VoterId", -1), part.get("VoterDirectoryId")):
            return reply(Errors.INVALID_VOTER_KEY)
        # (a higher epoch is news even in a pre-vote: the receiver moved to it above, as in Kafka)
        granted = self._can_grant(cand, last_epoch, last_offset, pre_vote)
        if granted and not pre_vote:  # a pre-vote granted changes nothing here, and stores nothing
            if self.role is Role.UNATTACHED:
                self._become_voted(cand)
            elif self.role is Role.PROSPECTIVE and self.voted_id < 0:
                self._become_prospective(voted_id=cand)
        reply(Errors.NONE, granted)

    def _on_begin_request(self: RaftCore, src: int, corr: int, body: BeginRequest, part: BeginPart) -> None:  # type: ignore[misc]  # RaftCore's mixin
        leader, epoch = part["LeaderId"], part["LeaderEpoch"]
        if epoch < self.epoch:
            err = Errors.FENCED_LEADER_EPOCH
        elif leader < 0:
            err = Errors.INVALID_REQUEST
        else:
            self._learn_endpoints(leader, body.get("LeaderEndpoints"))
            self._maybe_follow(leader, epoch)
            ok = self._addressed_to_me(body.get("VoterId", -1), part.get("VoterDirectoryId"))
            err = Errors.NONE if ok else Errors.INVALID_VOTER_KEY
        self._respond(
            src, m.BEGIN_QUORUM_EPOCH, corr, m.begin_quorum_epoch_response(self.tp, err, self.leader_id, self.epoch)
        )

    def _on_end_request(self: RaftCore, src: int, corr: int, body: t.EndQuorumEpochRequest, part: EndPart) -> None:  # type: ignore[misc]  # RaftCore's mixin
        leader, epoch = part["LeaderId"], part["LeaderEpoch"]
        if epoch < self.epoch:
            err = Errors.FENCED_LEADER_EPOCH
        else:
            err = Errors.NONE
            if leader >= 0 and leader != self.node_id:
                self._maybe_follow(leader, epoch)
            st = self.state
            if isinstance(st, FollowerState) and st.leader_id == leader and not self.is_observer:
                preferred = [c["CandidateId"] for c in part.get("PreferredCandidates") or []] or list(
                    part.get("PreferredSuccessors") or []
                )
                st.fetch_deadline = self.now + end_epoch_backoff_ms(
                    preferred, self.node_id, self.cfg.election_backoff_max_ms
                )
        self._respond(
            src, m.END_QUORUM_EPOCH, corr, m.end_quorum_epoch_response(self.tp, err, self.leader_id, self.epoch)
        )

    def _addressed_to_me(self: RaftCore, voter_id: int, voter_dir: Any) -> bool:  # type: ignore[misc]  # RaftCore's mixin
        """Whether a request's voter key (VoterId, VoterDirectoryId: KIP-853) names this replica
        (-1 and the zero directory id name anyone, as older senders leave them)."""
        if voter_id >= 0 and voter_id != self.node_id:
            return False
        return voter_dir in (None, m.ZERO_UUID) or self.directory_id in (m.ZERO_UUID, voter_dir)

    def _learn_endpoints(self: RaftCore, node: int, endpoints: Any) -> None:  # type: ignore[misc]  # RaftCore's mixin
        """A request or answer said where ``node`` listens (LeaderEndpoints, NodeEndpoints)."""
        for e in endpoints or []:
            name = e.get("Name")
            if e.get("NodeId", node) == node and (name is None or name == self.cfg.listener) and e.get("Host"):
                self.heard_endpoints[node] = (e["Host"], int(e["Port"]))

    def _leader_node_endpoints(self: RaftCore) -> list[dict]:  # type: ignore[misc]  # RaftCore's mixin
        """The NodeEndpoints of an answer: the leader's address, when this replica knows it from its
        voter set or from what it heard (static quorums: none, as before KIP-853)."""
        leader = self.leader_id
        where = self.endpoint_of(leader) if leader >= 0 and self.dynamic else None
        if where is None:
            return []
        return [{"NodeId": leader, "Host": where[0], "Port": where[1], "Rack": None}]

    def _maybe_follow(self: RaftCore, leader: int, epoch: int) -> None:  # type: ignore[misc]  # RaftCore's mixin
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
            if self.role is Role.PROSPECTIVE and self.leader_id >= 0 and self.leader_id != leader:
                raise RaftStateError(f"two leaders in epoch {epoch}: {self.leader_id} and {leader}")
            if self.role is Role.FOLLOWER:
                if self.leader_id != leader:
                    raise RaftStateError(f"two leaders in epoch {epoch}: {self.leader_id} and {leader}")
            else:
                self._become_follower(epoch, leader)

    # -- Fetch (leader side)

    def _leader_check(self: RaftCore, cur_epoch: int) -> int:  # type: ignore[misc]  # RaftCore's mixin
        if cur_epoch < self.epoch:
            return Errors.FENCED_LEADER_EPOCH
        if cur_epoch > self.epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        if self.role is not Role.LEADER:
            return Errors.NOT_LEADER_OR_FOLLOWER
        return Errors.NONE

    def _fetch_reply(self: RaftCore, src: int, corr: int, error: int, **kw: Any) -> None:  # type: ignore[misc]  # RaftCore's mixin
        if error == Errors.NONE:
            hw = self.state.high_watermark if isinstance(self.state, LeaderState) else None
            kw.setdefault("high_watermark", hw if hw is not None else -1)
            kw.setdefault("log_start_offset", self.log.start_offset)
        kw.setdefault("node_endpoints", self._leader_node_endpoints())
        self._respond(src, m.FETCH, corr, m.fetch_response(self.tp, error, self.leader_id, self.epoch, **kw))

    def _on_fetch_request(self: RaftCore, src: int, corr: int, body: t.FetchRequest, may_wait: bool) -> None:  # type: ignore[misc]  # RaftCore's mixin
        one = m.single_partition(body, m.FETCH)
        if one is None or not m.topic_matches(self.tp, m.FETCH, one[0], one[1]):
            return self._respond(
                src, m.FETCH, corr, m.fetch_response(self.tp, 0, -1, -1, top_error=Errors.INVALID_REQUEST)
            )
        part = one[1]
        offset, last_epoch, cur_epoch = part["FetchOffset"], part["LastFetchedEpoch"], part["CurrentLeaderEpoch"]
        replica = (body.get("ReplicaState") or {}).get("ReplicaId", body.get("ReplicaId", -1))
        if body.get("MaxWaitMs", 0) < 0 or offset < 0 or last_epoch < 0 or last_epoch > cur_epoch:
            return self._fetch_reply(src, corr, Errors.INVALID_REQUEST)
        err = self._leader_check(cur_epoch)
        if err:
            return self._fetch_reply(src, corr, err)
        st = self.state
        assert isinstance(st, LeaderState)
        log = self.log
        snap = log.snapshot()
        if offset == 0 and snap is not None and tuple(snap) != (0, 0):
            return self._fetch_reply(src, corr, Errors.NONE, snapshot_id=tuple(snap))
        status, arg = log.validate_offset_and_epoch(offset, last_epoch)
        if status == "snapshot":
            return self._fetch_reply(src, corr, Errors.NONE, snapshot_id=arg)
        if status == "diverging":
            return self._fetch_reply(src, corr, Errors.NONE, diverging=arg)
        hw_before = st.high_watermark
        replica_dir = part.get("ReplicaDirectoryId") or m.ZERO_UUID
        if replica >= 0 and replica != self.node_id:
            caught_up = self.now if offset >= log.end_offset else st.fetch_times.get(replica, (0, -1))[1]
            st.fetch_times[replica] = (self.now, caught_up)
            st.observer_dirs[replica] = replica_dir
        if replica in st.replica_end and self.voter_set.is_voter(ReplicaKey(replica, replica_dir)):
            st.replica_end[replica] = offset
            st.acked.add(replica)
            self._note_fetcher(replica)
            self._update_leader_hw()
        elif replica >= 0 and replica != self.node_id:
            st.observers[replica] = (offset, self.now)
        entries = log.read(offset, self.cfg.max_fetch_entries) if offset < log.end_offset else []
        # (unlike Kafka, a fetch that itself moved the HW is answered at once, so the news travels)
        if not entries and may_wait and body.get("MaxWaitMs", 0) > 0 and st.high_watermark == hw_before:
            st.purgatory.append((self.now + body["MaxWaitMs"], src, corr, body))
            return
        self._fetch_reply(src, corr, Errors.NONE, records=self.records.encode(entries) if entries else None)

    def _note_fetcher(self: RaftCore, replica: int) -> None:  # type: ignore[misc]  # RaftCore's mixin
        st = self.state
        assert isinstance(st, LeaderState)
        if st.check_quorum_deadline is None:
            return
        st.window.add(replica)
        if len(st.window) >= self.majority - 1:
            st.window = set()
            st.check_quorum_deadline = self.now + self.cfg.fetch_timeout_ms * 3 // 2

    def _complete_purgatory(self: RaftCore) -> None:  # type: ignore[misc]  # RaftCore's mixin
        st = self.state
        if isinstance(st, LeaderState) and st.purgatory:
            held, st.purgatory = st.purgatory, []
            for _d, src, corr, body in held:
                self._on_fetch_request(src, corr, body, may_wait=False)

    def _update_leader_hw(self: RaftCore) -> None:  # type: ignore[misc]  # RaftCore's mixin
        st = self.state
        if not isinstance(st, LeaderState):
            return
        offsets = sorted(
            (self.log.flushed_offset if v == self.node_id else st.replica_end.get(v, -1) for v in self.voters),
            reverse=True,
        )
        cand = offsets[len(self.voters) // 2]
        if cand <= st.epoch_start_offset:
            return
        if st.high_watermark is not None and cand <= st.high_watermark:
            return
        st.high_watermark = cand
        self._set_hw(cand)
        self._complete_purgatory()

    def _set_hw(self: RaftCore, hw: int) -> None:  # type: ignore[misc]  # RaftCore's mixin
        if hw < self.high_watermark:
            raise RaftStateError(f"node {self.node_id}: high watermark would go back {self.high_watermark} -> {hw}")
        if hw > self.high_watermark:
            self.high_watermark = hw
            self._out.append(Committed(hw))

    # -- FetchSnapshot (leader side)

    def _on_fetch_snapshot_request(self: RaftCore, src: int, corr: int, body: t.FetchSnapshotRequest) -> None:  # type: ignore[misc]  # RaftCore's mixin
        one = m.single_partition(body, m.FETCH_SNAPSHOT)
        if one is None or not m.topic_matches(self.tp, m.FETCH_SNAPSHOT, one[0], one[1]):
            return self._respond(
                src,
                m.FETCH_SNAPSHOT,
                corr,
                m.fetch_snapshot_response(self.tp, Errors.UNKNOWN_TOPIC_OR_PARTITION, self.leader_id, self.epoch),
            )
        part = one[1]

        def reply(err: int, **kw: Any) -> None:
            self._respond(
                src, m.FETCH_SNAPSHOT, corr, m.fetch_snapshot_response(self.tp, err, self.leader_id, self.epoch, **kw)
            )

        err = self._leader_check(part["CurrentLeaderEpoch"])
        if err:
            return reply(err)
        st = self.state
        assert isinstance(st, LeaderState)
        want = (part["SnapshotId"]["EndOffset"], part["SnapshotId"]["Epoch"])
        snap = self.log.snapshot()
        if snap is None or tuple(snap) != want or want == (0, 0):
            return reply(Errors.SNAPSHOT_NOT_FOUND)
        data = self.log.read_snapshot()
        pos = part["Position"]
        if pos < 0 or pos >= len(data):
            return reply(Errors.POSITION_OUT_OF_RANGE)
        replica = body.get("ReplicaId", -1)
        if replica in st.replica_end:
            self._note_fetcher(replica)
        n = min(body.get("MaxBytes", self.cfg.snapshot_chunk_bytes), self.cfg.snapshot_chunk_bytes)
        reply(Errors.NONE, snapshot_id=want, size=len(data), position=pos, data=data[pos : pos + n])

    # ------------------------------------------------------------------------------ responses

    def _on_response(self: RaftCore, ev: Receive) -> None:  # type: ignore[misc]  # RaftCore's mixin
        req = self._inflight.pop(ev.correlation_id, None)
        if req is None or req[0] != ev.src or req[1] != ev.api:
            if req is not None:
                self._inflight[ev.correlation_id] = req
            return  # unknown, duplicated or timed-out response
        if ev.api == m.API_VERSIONS:
            return self._on_api_versions_response(ev.src, ev.correlation_id, ev.body)
        st = self.state
        is_fetch = False
        if isinstance(st, FetchingState) and ev.correlation_id == st.fetch_corr:
            is_fetch, st.fetch_corr = True, None
        body = ev.body
        if (
            body.get("ErrorCode", 0) == Errors.UNSUPPORTED_VERSION
            and ev.api == m.VOTE
            and isinstance(st, ProspectiveState)
        ):
            # the peer cannot take a pre-vote (its Vote stops below v2, as a Kafka 3.9 voter's does): not
            # every voter speaks pre-vote, so stand at once (Kafka's handleVoteResponse)
            self._become_candidate()
            return
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
        if leader >= 0 and leader != self.node_id:
            self._learn_endpoints(leader, body.get("NodeEndpoints"))
        if not self._handle_response_epoch(leader, epoch):
            if error:
                self._retry_at[(ev.src, ev.api)] = self.now + self.cfg.retry_backoff_ms
            return
        if error and error not in (Errors.SNAPSHOT_NOT_FOUND,):
            self._retry_at[(ev.src, ev.api)] = self.now + self.cfg.retry_backoff_ms
            return
        st = self.state  # (the epoch check may have changed the role)
        if ev.api == m.VOTE:
            self._on_vote_response(ev.src, part)
        elif ev.api == m.BEGIN_QUORUM_EPOCH:
            if isinstance(st, LeaderState):
                st.acked.add(ev.src)
        elif ev.api == m.END_QUORUM_EPOCH:
            if isinstance(st, ResignedState):
                st.unacked_end.discard(ev.src)
        elif ev.api == m.FETCH and is_fetch:
            self._on_fetch_response(ev.src, part)
        elif ev.api == m.FETCH_SNAPSHOT and is_fetch:
            self._on_fetch_snapshot_response(ev.src, part, error)

    def _handle_response_epoch(self: RaftCore, leader: int, epoch: int) -> bool:  # type: ignore[misc]  # RaftCore's mixin
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

    def _on_vote_response(self: RaftCore, src: int, part: t.VoteResponseTopicDataPartitionData) -> None:  # type: ignore[misc]  # RaftCore's mixin
        """A candidate's vote or a prospective's pre-vote (a prospective refused by a majority gives
        up its round in ``_poll``)."""
        st = self.state
        if not isinstance(st, (CandidateState, ProspectiveState)) or src not in self.voters:
            return
        if part.get("VoteGranted"):
            st.granted.add(src)
            self._maybe_won()
        else:
            st.rejected.add(src)
            if isinstance(st, CandidateState) and self._lost(st.rejected) and st.backoff_deadline is None:
                self._start_backoff()

    def _follower_accepts(self: RaftCore, src: int) -> bool:  # type: ignore[misc]  # RaftCore's mixin
        """Whether a Fetch or FetchSnapshot answer (one without error, in this epoch: only the
        epoch's leader gives those) feeds this follower: from its leader, or from a bootstrap server
        (``controller.quorum.bootstrap.servers``) that is the leader under another name."""
        if self.role is Role.FOLLOWER:
            return src == self.leader_id or src in self.cfg.bootstrap_ids
        return False

    def _on_fetch_response(self: RaftCore, src: int, part: FetchedPart) -> None:  # type: ignore[misc]  # RaftCore's mixin
        if not self._follower_accepts(src):
            return
        st = self.state
        assert isinstance(st, FollowerState)
        st.fetch_deadline = self.now + self.cfg.fetch_timeout_ms
        st.fetched = True
        st.bootstrap_target = None
        log = self.log
        div = part.get("DivergingEpoch") or {}
        sid = part.get("SnapshotId") or {}
        if div.get("Epoch", -1) >= 0:
            end = div["EndOffset"]
            if end < self.high_watermark:
                raise RaftStateError(
                    f"node {self.node_id}: leader {src} asked for truncation to {end}, "
                    f"below the high watermark {self.high_watermark}"
                )
            log.truncate_to_end_offset(div["Epoch"], end)
            if log.end_offset < self.high_watermark:
                raise RaftStateError(
                    f"node {self.node_id}: truncated to {log.end_offset}, below the high "
                    f"watermark {self.high_watermark}"
                )
            return
        if sid.get("EndOffset", -1) >= 0 or sid.get("Epoch", -1) >= 0:
            if sid.get("EndOffset", -1) < 0 or sid.get("Epoch", -1) < 0:
                return
            want = SnapshotId(sid["EndOffset"], sid["Epoch"])
            if st.snapshot_fetch is None or st.snapshot_fetch[0] != want:
                st.snapshot_fetch = (want, bytearray())
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

    def _on_fetch_snapshot_response(self: RaftCore, src: int, part: SnapshotPart, error: int) -> None:  # type: ignore[misc]  # RaftCore's mixin
        st = self.state
        if not self._follower_accepts(src) or not isinstance(st, FollowerState) or st.snapshot_fetch is None:
            return
        sid, buf = st.snapshot_fetch
        got = part.get("SnapshotId") or {}
        if error == Errors.SNAPSHOT_NOT_FOUND or got.get("EndOffset", -1) < 0 or got.get("Epoch", -1) < 0:
            st.snapshot_fetch = None
            return
        if (got["EndOffset"], got["Epoch"]) != tuple(sid) or part.get("Position") != len(buf):
            raise RaftStateError(
                f"node {self.node_id}: FetchSnapshot answer for {got} at {part.get('Position')}"
                f" but the partial snapshot is {tuple(sid)} at {len(buf)}"
            )
        st.fetch_deadline = self.now + self.cfg.fetch_timeout_ms
        st.fetched = True
        buf.extend(part.get("UnalignedRecords") or b"")
        if len(buf) >= part.get("Size", 0):
            if sid.end_offset < self.high_watermark:
                raise RaftStateError(f"node {self.node_id}: snapshot {tuple(sid)} below the HW {self.high_watermark}")
            self.log.install_snapshot(sid, bytes(buf))
            st.snapshot_fetch = None
            self._set_hw(sid.end_offset)
            self._out.append(SnapshotLoaded(sid, bytes(buf)))
