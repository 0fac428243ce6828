"""What a raft replica knows in each role, one class per role as in Kafka's raft module
(``UnattachedState``, ``VotedState``, ``ProspectiveState``, ``CandidateState``, ``LeaderState``, ``FollowerState``,
``ResignedState``, the ``EpochState`` implementations :class:`~kraftkit.raft.core.RaftCore`'s
quorum state moves between).

Each object holds its epoch, the leader and vote it stands for, and only the fields of its own
role (a leader's replica progress, a candidate's votes, a follower's fetch timer...). A role change
replaces the object, so nothing of the old role survives into the new one. The high watermark is not
here: it never goes down whatever the role, so the core keeps it. Timers are absolute times in the
core's milliseconds (None: not running).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING, ClassVar

from kraftkit.metadata.snapshot import SnapshotId
from kraftkit.protocol.types import FetchRequest
from kraftkit.raft.quorum_state import ElectionState, Role

if TYPE_CHECKING:
    from kraftkit.raft.reconfig import PendingVoterChange

__all__ = [
    "RaftStateError",
    "EpochState",
    "FetchingState",
    "UnattachedState",
    "VotedState",
    "ProspectiveState",
    "CandidateState",
    "LeaderState",
    "FollowerState",
    "ResignedState",
    "STATE_OF_ROLE",
]


class RaftStateError(Exception):
    """An impossible situation (two leaders in one epoch, truncation below the high watermark...).
    Kafka treats these as fatal; so does the core."""


@dataclasses.dataclass
class EpochState:
    """The epoch and the election this role stands for (``leader_id``/``voted_id``: -1 for none)."""

    role: ClassVar[Role]
    epoch: int
    leader_id: int = -1
    voted_id: int = -1

    def election(self) -> ElectionState:
        """What the quorum-state file holds in this role."""
        return ElectionState(
            self.epoch,
            self.leader_id if self.role is not Role.VOTED else -1,
            self.voted_id if self.role in (Role.VOTED, Role.CANDIDATE) else -1,
        )

    def deadlines(self) -> list[int | None]:
        """The role's timers (None: not running)."""
        return []


@dataclasses.dataclass
class FetchingState(EpochState):
    """A role that fetches: a follower from its leader, an observer that knows no leader from the
    bootstrap voters (Kafka's ``pollFollowerAsObserver``)."""

    #: the correlation id of the Fetch or FetchSnapshot in flight
    fetch_corr: int | None = None
    #: the voter an observer without a leader asks
    bootstrap_target: int | None = None


@dataclasses.dataclass
class UnattachedState(FetchingState):
    """No leader and no vote in this epoch."""

    role: ClassVar[Role] = Role.UNATTACHED
    election_deadline: int | None = None

    def deadlines(self) -> list[int | None]:
        return [self.election_deadline]


@dataclasses.dataclass
class VotedState(FetchingState):
    """Voted for ``voted_id`` in this epoch, no leader known yet."""

    role: ClassVar[Role] = Role.VOTED
    election_deadline: int | None = None

    def deadlines(self) -> list[int | None]:
        return [self.election_deadline]


@dataclasses.dataclass
class ProspectiveState(EpochState):
    """Asking the voters whether they would vote for it (KIP-996 pre-vote) before it stands.

    It stays in the epoch, and keeps the leader and the vote, of the role it came from, so that its
    quorum-state file is that role's: a pre-vote changes nothing durable anywhere. With a majority
    of pre-votes it stands for election (a candidate of the next epoch); refused by a majority, or
    when its election timer runs out, it goes back to following the leader it knows or to unattached.
    ``voted_id`` is the vote it gave in this epoch (it may give one, as an unattached voter can)."""

    role: ClassVar[Role] = Role.PROSPECTIVE
    election_deadline: int | None = None
    #: elections stood in a row (carried to the candidate, whose backoff grows with it)
    retries: int = 1
    granted: set[int] = dataclasses.field(default_factory=set)
    rejected: set[int] = dataclasses.field(default_factory=set)

    def election(self) -> ElectionState:
        # Kafka's ElectionState may name a leader and a vote at once; kraftkit's keeps the vote then
        # (the roles a prospective comes from never hold both)
        return ElectionState(self.epoch, self.leader_id if self.voted_id < 0 else -1, self.voted_id)

    def deadlines(self) -> list[int | None]:
        return [self.election_deadline]


@dataclasses.dataclass
class CandidateState(EpochState):
    """Standing for election: the votes so far, and the backoff after a lost election."""

    role: ClassVar[Role] = Role.CANDIDATE
    election_deadline: int | None = None
    backoff_deadline: int | None = None
    #: elections stood in a row (the backoff grows with it)
    retries: int = 0
    granted: set[int] = dataclasses.field(default_factory=set)
    rejected: set[int] = dataclasses.field(default_factory=set)

    def deadlines(self) -> list[int | None]:
        # while backing off the election timer does not count
        return [self.backoff_deadline] if self.backoff_deadline is not None else [self.election_deadline]


@dataclasses.dataclass
class LeaderState(EpochState):
    """Leading: what it knows of every voter and observer, and the high watermark it computes."""

    role: ClassVar[Role] = Role.LEADER
    #: the HW of this epoch: None until the LeaderChange entry at ``epoch_start_offset`` commits
    high_watermark: int | None = None
    epoch_start_offset: int = -1
    #: voter -> the offset its last Fetch asked for (-1: none yet); what the HW is computed from
    replica_end: dict[int, int] = dataclasses.field(default_factory=dict)
    #: voters that acknowledged the epoch (a BeginQuorumEpoch answer or a Fetch)
    acked: set[int] = dataclasses.field(default_factory=set)
    #: voter -> when BeginQuorumEpoch goes to it again (until it acknowledges)
    begin_resend_at: dict[int, int] = dataclasses.field(default_factory=dict)
    check_quorum_deadline: int | None = None
    #: the voters heard from since the check-quorum timer last restarted
    window: set[int] = dataclasses.field(default_factory=set)
    #: observer -> (fetch offset, when)
    observers: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)
    #: replica -> (last fetch, last caught up)
    fetch_times: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)
    #: Fetches waiting for data: (deadline, src, corr, body)
    purgatory: list[tuple[int, int, int, FetchRequest]] = dataclasses.field(default_factory=list)
    #: replica -> the directory id its last Fetch gave (KIP-853: a voter is an id and a directory)
    observer_dirs: dict[int, uuid.UUID] = dataclasses.field(default_factory=dict)
    #: the KIP-853 voter change being carried out (at most one at a time)
    voter_change: PendingVoterChange | None = None

    def deadlines(self) -> list[int | None]:
        c = self.voter_change
        # (a change appended and answered waits for its commit only: no timer)
        change = c.deadline if c is not None and (c.corr >= 0 or c.probe_corr is not None) else None
        return [self.check_quorum_deadline, change, *(d for d, *_ in self.purgatory), *self.begin_resend_at.values()]


@dataclasses.dataclass
class FollowerState(FetchingState):
    """Following ``leader_id``: the fetch timer and a snapshot being fetched."""

    role: ClassVar[Role] = Role.FOLLOWER
    fetch_deadline: int | None = None
    #: a fetch from the leader succeeded in this role: the follower refuses pre-votes from then on
    #: (its leader is alive; once the fetch timer runs out it is a prospective itself)
    fetched: bool = False
    #: the snapshot being fetched and the bytes so far
    snapshot_fetch: tuple[SnapshotId, bytearray] | None = None

    def deadlines(self) -> list[int | None]:
        return [self.fetch_deadline]


@dataclasses.dataclass
class ResignedState(EpochState):
    """A leader that stepped down in its epoch, telling the voters (EndQuorumEpoch) until they answer."""

    role: ClassVar[Role] = Role.RESIGNED
    election_deadline: int | None = None
    unacked_end: set[int] = dataclasses.field(default_factory=set)
    preferred: list[int] = dataclasses.field(default_factory=list)

    def deadlines(self) -> list[int | None]:
        return [self.election_deadline]


STATE_OF_ROLE: dict[Role, type[EpochState]] = {
    cls.role: cls
    for cls in (
        UnattachedState,
        VotedState,
        ProspectiveState,
        CandidateState,
        LeaderState,
        FollowerState,
        ResignedState,
    )
}
