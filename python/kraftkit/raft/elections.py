"""How a raft voter stands for election: KIP-996's pre-vote round (a :class:`ProspectiveState`) and
KIP-595's election (a :class:`CandidateState`), as Kafka's ``KafkaRaftClient`` / ``QuorumState`` run
them (``transitionToProspective``, ``pollProspective``, ``transitionToCandidate``, ``pollCandidate``).

:class:`Elections` is a part of :class:`~kraftkit.raft.core.RaftCore` (which inherits it), as
:class:`~kraftkit.raft.handlers.Handlers` is. A voter whose election or fetch timer runs out asks the
voters for pre-votes in its own epoch, persisting nothing; with a majority it stands as a candidate
of the next epoch; refused by a majority or out of time it goes back to the leader it knows, or to
unattached. With ``RaftConfig.pre_vote`` off it stands at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraftkit.raft import messages as m
from kraftkit.raft.quorum_state import Role
from kraftkit.raft.state import CandidateState, ProspectiveState, RaftStateError, UnattachedState, VotedState

if TYPE_CHECKING:
    from kraftkit.raft.core import RaftCore

__all__ = ["Elections", "RETRY_BACKOFF_BASE_MS"]

RETRY_BACKOFF_BASE_MS = 100


class Elections:
    """The election transitions and timers of :class:`~kraftkit.raft.core.RaftCore`."""

    def _poll_nominee(self: RaftCore, st: CandidateState | ProspectiveState) -> bool:  # type: ignore[misc]  # RaftCore's mixin
        """A candidate's or a prospective's timers and requests (Kafka's pollCandidate and
        pollProspective); True if the role changed."""
        now = self.now
        if isinstance(st, ProspectiveState):
            if self._lost(st.rejected) or (st.election_deadline is not None and st.election_deadline <= now):
                self._prospective_failed()
                return True
            self._send_vote_requests(st.granted | st.rejected, pre_vote=True)
            return False
        if st.backoff_deadline is None and st.election_deadline is not None and st.election_deadline <= now:
            if self.cfg.pre_vote:  # a lost election asks for pre-votes again
                self._become_prospective()
                return True
            self._start_backoff()
        if st.backoff_deadline is not None and st.backoff_deadline <= now:
            self._stand()
            return True
        if st.backoff_deadline is None:
            self._send_vote_requests(st.granted | st.rejected, pre_vote=False)
        return False

    def _stand(self: RaftCore) -> None:  # type: ignore[misc]  # RaftCore's mixin
        """A voter's election or fetch timer ran out: ask for pre-votes first, or stand at once."""
        if self.cfg.pre_vote:
            self._become_prospective()
        else:
            self._become_candidate()

    def _become_prospective(self: RaftCore, voted_id: int | None = None) -> None:  # type: ignore[misc]  # RaftCore's mixin
        """Kafka's transitionToProspective: same epoch, the leader and vote of the role it leaves (so
        nothing is persisted); ``voted_id`` is a vote this prospective just gave (that one is)."""
        if self.is_observer:
            raise RaftStateError(f"observer {self.node_id} cannot ask for pre-votes")
        old = self.state
        retries = old.retries + 1 if isinstance(old, CandidateState) else 1
        if isinstance(old, ProspectiveState):
            retries = old.retries
        vote = old.voted_id if voted_id is None else voted_id
        new: ProspectiveState = self._set_role(Role.PROSPECTIVE, self.epoch, old.leader_id, vote)
        new.retries = retries
        new.granted = {self.node_id}
        new.election_deadline = self.now + self._random_election_timeout()
        self._forget_vote_requests()
        self._maybe_won()

    def _maybe_won(self: RaftCore) -> None:  # type: ignore[misc]  # RaftCore's mixin
        """A majority of votes makes a candidate leader, a majority of pre-votes a prospective candidate."""
        st = self.state
        if isinstance(st, CandidateState) and len(st.granted) >= self.majority:
            self._become_leader()
        elif isinstance(st, ProspectiveState) and len(st.granted) >= self.majority:
            self._become_candidate()

    def _prospective_failed(self: RaftCore) -> None:  # type: ignore[misc]  # RaftCore's mixin
        """Refused by a majority or out of time (Kafka's pollProspective): back to following the
        leader it knows, else unattached in the same epoch, its vote kept."""
        st = self.state
        assert isinstance(st, ProspectiveState)
        if st.leader_id >= 0 and st.leader_id != self.node_id:
            return self._become_follower(self.epoch, st.leader_id)
        deadline = self.now + self._random_election_timeout() if self._lost(st.rejected) else st.election_deadline
        if st.voted_id >= 0:
            voted: VotedState = self._set_role(Role.VOTED, self.epoch, -1, st.voted_id)
            voted.election_deadline = deadline
        else:
            # (a resigned leader's prospective keeps naming itself the leader of the epoch it led)
            unattached: UnattachedState = self._set_role(Role.UNATTACHED, self.epoch, st.leader_id, -1)
            unattached.election_deadline = deadline

    def _become_candidate(self: RaftCore) -> None:  # type: ignore[misc]  # RaftCore's mixin
        if self.is_observer:
            raise RaftStateError(f"observer {self.node_id} cannot stand for election")
        old = self.state
        retries = old.retries + 1 if isinstance(old, CandidateState) else 1
        if isinstance(old, ProspectiveState):
            retries = old.retries
        new: CandidateState = self._set_role(Role.CANDIDATE, self.epoch + 1, -1, self.node_id)
        new.retries = retries
        new.granted = {self.node_id}
        new.election_deadline = self.now + self._random_election_timeout()
        self._forget_vote_requests()
        self._maybe_won()

    def _start_backoff(self: RaftCore) -> None:  # type: ignore[misc]  # RaftCore's mixin
        st: CandidateState = self.state  # type: ignore[assignment]
        k = self.rng.randrange(1 << min(21, max(st.retries, 1)))
        st.backoff_deadline = self.now + min(RETRY_BACKOFF_BASE_MS * k, self.cfg.election_backoff_max_ms)

    def _forget_vote_requests(self: RaftCore) -> None:  # type: ignore[misc]  # RaftCore's mixin
        """A new election round asks every voter at once; answers to an earlier round's requests are
        then ignored (Kafka resets its connections' request state on these transitions)."""
        for corr, (_dest, api, _deadline) in list(self._inflight.items()):
            if api == m.VOTE:
                del self._inflight[corr]

    def _lost(self: RaftCore, rejected: set[int]) -> bool:  # type: ignore[misc]  # RaftCore's mixin
        return len(self.voters) - len(rejected) < self.majority

    def _send_vote_requests(self: RaftCore, answered: set[int], pre_vote: bool) -> None:  # type: ignore[misc]  # RaftCore's mixin
        """Vote (or pre-vote) requests to the voters that have not answered this round. A pre-vote
        carries the prospective's own epoch (Kafka's buildVoteRequest), a vote the candidate's."""
        for v in self.voters:
            if v != self.node_id and v not in answered:
                self._send_once(
                    v,
                    m.VOTE,
                    m.vote_request(
                        self.tp,
                        self.cfg.cluster_id,
                        v,
                        self.epoch,
                        self.node_id,
                        self.log.last_epoch(),
                        self.log.end_offset,
                        pre_vote=pre_vote,
                        candidate_dir=self.directory_id,
                        voter_dir=self.voter_dir(v),
                    ),
                )
