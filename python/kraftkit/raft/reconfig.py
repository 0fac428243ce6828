"""KIP-853 voter changes as the leader runs them (Kafka's ``AddVoterHandler``,
``RemoveVoterHandler`` and ``UpdateVoterHandler``), and what a replica does when its voter set changes.

:class:`VoterChanges` is a part of :class:`~kraftkit.raft.core.RaftCore` (which inherits it), as
:class:`~kraftkit.raft.handlers.Handlers` is. The leader of a dynamic quorum (kraft.version 1) takes
one change at a time: it refuses another (REQUEST_TIMED_OUT) while one is pending, before its epoch
has committed, and while the last voter set in the log is not committed. Then:

* **AddRaftVoter**: the new voter must not be one already (DUPLICATE_VOTER); the leader asks it for
  its ApiVersions (its kraft.version range must include the finalized level), checks it has fetched
  and caught up as an observer, then appends the new voter set and answers once it commits;
* **RemoveRaftVoter**: the voter must be one, by id and directory id (VOTER_NOT_FOUND); the set
  without it is appended and the answer goes out once it commits; a leader that removed itself then
  resigns;
* **UpdateRaftVoter**: a voter's new endpoints and kraft.version range, after the epoch checks a
  voter's request gets; appended as a new voter set when they differ.

A change takes effect when appended (the voter set in force is the last in the log), on every replica.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from kraftkit.raft import messages as m
from kraftkit.raft.events import Fsync
from kraftkit.raft.messages import Errors
from kraftkit.raft.state import (
    CandidateState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    UnattachedState,
    VotedState,
)
from kraftkit.raft.voters import (
    KRAFT_VERSION_RANGE,
    KRAFT_VOTERS,
    ZERO_UUID,
    ControlRecord,
    Endpoint,
    ReplicaKey,
    VoterNode,
    VoterSet,
)

if TYPE_CHECKING:
    from kraftkit.raft.core import RaftCore

__all__ = ["VoterChanges", "PendingVoterChange", "CAUGHT_UP_WINDOW_MS"]

#: an observer counts as caught up for AddRaftVoter if it reached the leader's end within this long
#: (Kafka's ``LeaderState.isReplicaCaughtUp``: an hour)
CAUGHT_UP_WINDOW_MS = 3_600_000


@dataclasses.dataclass
class PendingVoterChange:
    """The voter change a leader is carrying out (at most one)."""

    api: int  # ADD_RAFT_VOTER / REMOVE_RAFT_VOTER / UPDATE_RAFT_VOTER
    src: int
    corr: int
    key: ReplicaKey
    deadline: int
    node: VoterNode | None = None  # the voter being added
    #: the offset of the VotersRecord once appended (-1: not yet)
    last_offset: int = -1
    #: the ApiVersions request sent to the new voter (add)
    probe_corr: int | None = None
    ack_when_committed: bool = True


def listeners_of(items: Any) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(str(x.get("Name", "")), str(x.get("Host", "")), int(x.get("Port", 0))) for x in items or [])


class VoterChanges:
    """The KIP-853 request handlers and voter-set bookkeeping of :class:`~kraftkit.raft.core.RaftCore`."""

    # ------------------------------------------------------------------------------ requests

    def _voter_change_refusal(self: RaftCore, what: str) -> tuple[int, str] | None:  # type: ignore[misc]  # RaftCore's mixin
        """Why the leader cannot take a voter change now (None: it can)."""
        st = self.state
        if not isinstance(st, LeaderState):
            return Errors.NOT_LEADER_OR_FOLLOWER, f"node {self.node_id} is not the leader (leader {self.leader_id})"
        self._expire_voter_change()
        if st.voter_change is not None:
            return Errors.REQUEST_TIMED_OUT, "the leader is handling an earlier voter change"
        if st.high_watermark is None:
            return Errors.REQUEST_TIMED_OUT, f"the leader has not committed its epoch {self.epoch} yet"
        kraft = self.log.kraft
        if kraft.kraft_version() < 1 or kraft.voters() is None:
            return (
                Errors.UNSUPPORTED_VERSION,
                f"the cluster does not support {what} voters: kraft.version is {kraft.kraft_version()} "
                "(a static quorum; a dynamic one is formatted with --standalone or --initial-controllers)",
            )
        entry = kraft.voters_entry()
        assert entry is not None
        if entry[0] >= st.high_watermark:
            return (
                Errors.REQUEST_TIMED_OUT,
                f"the last voter change, at offset {entry[0]}, is not committed yet (high watermark {st.high_watermark})",
            )
        return None

    def _on_add_voter_request(self: RaftCore, src: int, corr: int, body: dict) -> None:  # type: ignore[misc]  # RaftCore's mixin
        def reply(error: int, message: str | None = None) -> None:
            self._respond(src, m.ADD_RAFT_VOTER, corr, m.voter_change_response(error, message))

        key = ReplicaKey(int(body.get("VoterId", -1)), body.get("VoterDirectoryId") or ZERO_UUID)
        endpoints = listeners_of(body.get("Listeners"))
        if key.id < 0 or key.directory_id == ZERO_UUID:
            return reply(Errors.INVALID_REQUEST, f"the new voter needs an id and a directory id, not {key}")
        address = next((e for e in endpoints if e.name == self.cfg.listener), None)
        if address is None:
            return reply(
                Errors.INVALID_REQUEST,
                f"the new voter's listeners {[str(e) for e in endpoints]} have none named {self.cfg.listener}",
            )
        refused = self._voter_change_refusal("adding")
        if refused:
            return reply(*refused)
        voters = self.voter_set
        if key.id in voters:
            return reply(Errors.DUPLICATE_VOTER, f"voter {key.id} is already one of the voters {voters.keys()}")
        st: LeaderState = self.state  # type: ignore[assignment]
        self.heard_endpoints[key.id] = (address.host, address.port)
        timeout = body.get("TimeoutMs", 0) or self.cfg.request_timeout_ms
        change = PendingVoterChange(
            m.ADD_RAFT_VOTER,
            src,
            corr,
            key,
            self.now + max(timeout, self.cfg.request_timeout_ms),
            node=VoterNode(key, endpoints),
            ack_when_committed=bool(body.get("AckWhenCommitted", True)),
        )
        st.voter_change = change
        # ask the new voter which kraft.version levels it supports (Kafka's API_VERSIONS probe)
        change.probe_corr = self._send(
            key.id, m.API_VERSIONS, {"ClientSoftwareName": "kraftkit", "ClientSoftwareVersion": "0"}
        )

    def _on_api_versions_response(self: RaftCore, src: int, corr: int, body: dict) -> None:  # type: ignore[misc]  # RaftCore's mixin
        st = self.state
        change = st.voter_change if isinstance(st, LeaderState) else None
        if change is None or change.probe_corr != corr or change.key.id != src or change.node is None:
            return
        change.probe_corr = None
        if body.get("ErrorCode", 0):
            return self._finish_voter_change(
                Errors.REQUEST_TIMED_OUT,
                f"the new voter {change.key} answered ApiVersions with error {body['ErrorCode']}",
            )
        level = self.log.kraft.kraft_version()
        supported = next((f for f in body.get("SupportedFeatures") or [] if f.get("Name") == "kraft.version"), None)
        lo, hi = (supported["MinVersion"], supported["MaxVersion"]) if supported else (0, 0)
        if not lo <= level <= hi:
            return self._finish_voter_change(
                Errors.INVALID_REQUEST,
                f"the new voter {change.key} supports kraft.version {lo}..{hi}, not the finalized level {level}",
            )
        if not self._caught_up(change.key):
            return self._finish_voter_change(
                Errors.REQUEST_TIMED_OUT,
                f"the new voter {change.key} has not caught up with the leader: it must fetch as an observer first",
            )
        node = dataclasses.replace(change.node, kraft_version_range=(lo, hi))
        new = self.voter_set.add(node)
        assert new is not None  # (checked when the request came in; one change at a time)
        change.last_offset = self._append_voters(new)
        if not change.ack_when_committed:
            self._finish_voter_change(Errors.NONE)

    def _caught_up(self: RaftCore, key: ReplicaKey) -> bool:  # type: ignore[misc]  # RaftCore's mixin
        st = self.state
        assert isinstance(st, LeaderState)
        if st.observer_dirs.get(key.id, ZERO_UUID) != key.directory_id:
            return False
        last_fetch, caught_up = st.fetch_times.get(key.id, (-1, -1))
        return caught_up > 0 and last_fetch > self.now - CAUGHT_UP_WINDOW_MS

    def _on_remove_voter_request(self: RaftCore, src: int, corr: int, body: dict) -> None:  # type: ignore[misc]  # RaftCore's mixin
        def reply(error: int, message: str | None = None) -> None:
            self._respond(src, m.REMOVE_RAFT_VOTER, corr, m.voter_change_response(error, message))

        key = ReplicaKey(int(body.get("VoterId", -1)), body.get("VoterDirectoryId") or ZERO_UUID)
        refused = self._voter_change_refusal("removing")
        if refused:
            return reply(*refused)
        voters = self.voter_set
        new = voters.remove(key)
        if new is None:
            why = "the last voter" if voters.is_voter(key) else "not one of the voters"
            return reply(Errors.VOTER_NOT_FOUND, f"cannot remove {key}: {why} {voters.keys()}")
        st: LeaderState = self.state  # type: ignore[assignment]
        st.voter_change = PendingVoterChange(
            m.REMOVE_RAFT_VOTER, src, corr, key, self.now + self.cfg.request_timeout_ms
        )
        st.voter_change.last_offset = self._append_voters(new)

    def _on_update_voter_request(self: RaftCore, src: int, corr: int, body: dict) -> None:  # type: ignore[misc]  # RaftCore's mixin
        leader = self.leader_id
        host, port = ("", -1)
        where = self.endpoint_of(leader) if leader >= 0 else None
        if where is not None:
            host, port = where

        def reply(error: int) -> None:
            self._respond(
                src,
                m.UPDATE_RAFT_VOTER,
                corr,
                {
                    "ThrottleTimeMs": 0,
                    "ErrorCode": error,
                    "CurrentLeader": {"LeaderId": leader, "LeaderEpoch": self.epoch, "Host": host, "Port": port},
                },
            )

        if body.get("ClusterId") is not None and body["ClusterId"] != self.cfg.cluster_id:
            return reply(Errors.INCONSISTENT_CLUSTER_ID)
        asked = body.get("CurrentLeaderEpoch", -1)
        if asked < self.epoch:
            return reply(Errors.FENCED_LEADER_EPOCH)
        if asked > self.epoch:
            return reply(Errors.UNKNOWN_LEADER_EPOCH)
        refused = self._voter_change_refusal("updating")
        if refused:
            return reply(refused[0])
        key = ReplicaKey(int(body.get("VoterId", -1)), body.get("VoterDirectoryId") or ZERO_UUID)
        feat = body.get("KRaftVersionFeature") or {}
        rng = (int(feat.get("MinSupportedVersion", 0)), int(feat.get("MaxSupportedVersion", 0)))
        level = self.log.kraft.kraft_version()
        if not rng[0] <= level <= rng[1]:
            return reply(Errors.INVALID_REQUEST)
        endpoints = listeners_of(body.get("Listeners"))
        if not any(e.name == self.cfg.listener for e in endpoints):
            return reply(Errors.INVALID_REQUEST)
        voters = self.voter_set
        old = voters.node(key.id)
        if old is None or old.key != key:
            return reply(Errors.VOTER_NOT_FOUND)
        node = VoterNode(key, endpoints, rng)
        if node == old:
            return reply(Errors.NONE)
        new = voters.update(node)
        assert new is not None
        st: LeaderState = self.state  # type: ignore[assignment]
        # (answered at once, as Kafka's UpdateVoterHandler does; the change is still one at a time)
        st.voter_change = PendingVoterChange(m.UPDATE_RAFT_VOTER, src, -1, key, self.now + self.cfg.request_timeout_ms)
        st.voter_change.last_offset = self._append_voters(new)
        reply(Errors.NONE)

    def _on_api_versions_request(self: RaftCore, src: int, corr: int) -> None:  # type: ignore[misc]  # RaftCore's mixin
        """What a node's server answers (the simulator's nodes have the core answer): the
        kraft.version range a leader asks a voter-to-be for."""
        lo, hi = KRAFT_VERSION_RANGE
        self._respond(
            src,
            m.API_VERSIONS,
            corr,
            {
                "ErrorCode": 0,
                "ApiKeys": [],
                "SupportedFeatures": [{"Name": "kraft.version", "MinVersion": lo, "MaxVersion": hi}],
            },
        )

    # ------------------------------------------------------------------------------ bookkeeping

    def _append_voters(self: RaftCore, voters: VoterSet) -> int:  # type: ignore[misc]  # RaftCore's mixin
        """Appends ``voters`` as a VotersRecord in a control batch of its own; returns its offset."""
        offset = self.log.end_offset
        record = ControlRecord(KRAFT_VOTERS, voters.to_record())
        self.log.append(self.log.entries_for_append(offset, self.epoch, [record], control=True))
        self._out.append(Fsync(self.log.end_offset))
        return offset

    def _finish_voter_change(self: RaftCore, error: int, message: str | None = None) -> None:  # type: ignore[misc]  # RaftCore's mixin
        st = self.state
        if not isinstance(st, LeaderState) or st.voter_change is None:
            return
        change = st.voter_change
        if (
            change.api != m.ADD_RAFT_VOTER
            or change.last_offset < 0
            or error != Errors.NONE
            or change.ack_when_committed
        ):
            st.voter_change = None
        # (else answered before the commit, AckWhenCommitted false: still one change at a time)
        if change.corr >= 0 and change.api != m.UPDATE_RAFT_VOTER:
            self._respond(change.src, change.api, change.corr, m.voter_change_response(error, message))
        change.corr = -1

    def _expire_voter_change(self: RaftCore) -> None:  # type: ignore[misc]  # RaftCore's mixin
        st = self.state
        if not isinstance(st, LeaderState) or st.voter_change is None:
            return
        change = st.voter_change
        if change.probe_corr is not None and change.probe_corr not in self._inflight:
            # the ApiVersions request timed out or its connection failed (Kafka aborts the same way)
            change.probe_corr = None
            self._finish_voter_change(
                Errors.REQUEST_TIMED_OUT, f"the new voter {change.key} did not answer ApiVersions: is it running?"
            )
            return
        if change.deadline <= self.now:
            if change.last_offset >= 0 and change.corr < 0:
                return  # appended and answered: it ends when it commits (or the epoch ends)
            self._finish_voter_change(Errors.REQUEST_TIMED_OUT, "the voter change did not complete in time")

    def _voter_change_progress(self: RaftCore) -> None:  # type: ignore[misc]  # RaftCore's mixin
        """After the high watermark moved: a pending change whose VotersRecord committed is done;
        a leader that is not in the committed voter set resigns then (Kafka's ``highWatermarkUpdated``;
        Kafka checks only while the RemoveRaftVoter that removed it waits for its answer, and one
        that timed out first leaves a leader outside the voter set, which takes further changes)."""
        st = self.state
        if not isinstance(st, LeaderState) or st.high_watermark is None:
            return
        change = st.voter_change
        if change is not None and 0 <= change.last_offset < st.high_watermark:
            change.ack_when_committed = True
            self._finish_voter_change(Errors.NONE)
        entry = self.log.kraft.voters_entry()
        if self.is_observer and entry is not None and entry[0] < st.high_watermark:
            self._become_resigned(self._preferred_successors())

    def _voters_changed(self: RaftCore) -> None:  # type: ignore[misc]  # RaftCore's mixin
        """The voter set in force changed (an append, a truncation, a snapshot): a voter that is
        one no more stops standing; an observer that became a voter gets its timers."""
        st = self.state
        if self.is_observer:
            if isinstance(st, (CandidateState, ProspectiveState)):
                self._become_unattached(self.epoch)
            return
        if isinstance(st, (UnattachedState, VotedState)) and st.election_deadline is None:
            st.election_deadline = self.now + self._random_election_timeout()
        elif isinstance(st, FollowerState) and st.fetch_deadline is None:
            st.fetch_deadline = self.now + self.cfg.fetch_timeout_ms
        elif isinstance(st, LeaderState):
            for v in self.voters:
                if v != self.node_id:
                    st.replica_end.setdefault(v, st.observers.get(v, (-1, 0))[0])
            if len(self.voters) > 1 and self.cfg.check_quorum and st.check_quorum_deadline is None:
                st.check_quorum_deadline = self.now + self.cfg.fetch_timeout_ms * 3 // 2
