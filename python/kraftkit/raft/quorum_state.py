"""Replica roles and the persisted election state (Kafka's ``ElectionState`` / ``quorum-state`` file).

The file is one line of compact JSON written by Kafka's ``FileQuorumStateStore``
(Kafka's ``FileQuorumStateStore`` and ``quorum-state`` JSON, ``QuorumStateData``)::

    {"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}
    {"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}

:func:`render_quorum_state` / :func:`parse_quorum_state` produce and read exactly that;
:class:`FileQuorumStateStore` writes it atomically (``quorum-state.tmp``, fsync, rename).
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import os
import uuid
from pathlib import Path

from kraftkit._fs import read_small

__all__ = [
    "Role",
    "ElectionState",
    "render_quorum_state",
    "parse_quorum_state",
    "QuorumStateStore",
    "MemoryQuorumStateStore",
    "FileQuorumStateStore",
    "QuorumStateError",
    "uuid_to_kafka",
    "uuid_from_kafka",
]

ZERO_UUID = uuid.UUID(int=0)


class QuorumStateError(ValueError):
    """A quorum-state file that cannot be read."""


class Role(enum.Enum):
    """Kafka's replica states. ``VOTED`` is Kafka's Unattached state with a recorded vote; a
    ``PROSPECTIVE`` voter asks for pre-votes (KIP-996) before it stands as a ``CANDIDATE``; observers
    (nodes outside the voter set) only use ``UNATTACHED`` and ``FOLLOWER`` (see ``RaftCore.is_observer``)."""

    UNATTACHED = "unattached"
    VOTED = "voted"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


@dataclasses.dataclass(frozen=True)
class ElectionState:
    """What is persisted: the epoch, the known leader (-1 = none) and the vote (-1 = none)."""

    epoch: int
    leader_id: int = -1
    voted_id: int = -1
    voted_directory_id: uuid.UUID = ZERO_UUID
    voters: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.leader_id >= 0 and self.voted_id >= 0:
            raise QuorumStateError("an election state cannot name both a leader and a vote")


def uuid_to_kafka(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe Base64 without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def uuid_from_kafka(s: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    except (ValueError, TypeError) as e:
        raise QuorumStateError(f"bad Base64 uuid {s!r}") from e
    if len(raw) != 16:
        raise QuorumStateError(f"bad Base64 uuid {s!r}")
    return uuid.UUID(bytes=raw)


def render_quorum_state(state: ElectionState, data_version: int = 1) -> str:
    """The exact text Kafka writes for ``state`` (no trailing newline)."""
    if data_version == 0:
        obj: dict = {
            "clusterId": "",
            "leaderId": state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": state.voted_id,
            "appliedOffset": 0,
            "currentVoters": None if state.voters is None else [{"voterId": v} for v in state.voters],
        }
    elif data_version == 1:
        obj = {
            "leaderId": state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": state.voted_id,
            "votedDirectoryId": uuid_to_kafka(state.voted_directory_id),
        }
    else:
        raise QuorumStateError(f"data_version ({data_version}) is not within the min (0) and max (1) supported version")
    obj["data_version"] = data_version
    return json.dumps(obj, separators=(",", ":"))


def parse_quorum_state(text: str) -> tuple[ElectionState, int]:
    """Parse the first line of a quorum-state file: ``(state, data_version)``."""
    line = text.split("\n", 1)[0]
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise QuorumStateError(f"quorum-state is not JSON: {e}") from e
    if not isinstance(obj, dict) or "data_version" not in obj:
        raise QuorumStateError("quorum-state has no data_version")
    v = obj["data_version"]
    if not isinstance(v, int) or not 0 <= v <= 1:
        raise QuorumStateError(f"data_version ({v}) is not within the min (0) and max (1) supported version")
    try:
        voters = None
        if v == 0 and obj.get("currentVoters") is not None:
            voters = tuple(int(x["voterId"]) for x in obj["currentVoters"])
        vdir = uuid_from_kafka(obj["votedDirectoryId"]) if v == 1 and "votedDirectoryId" in obj else ZERO_UUID
        leader, voted = int(obj.get("leaderId", -1)), int(obj.get("votedId", -1))
        if leader >= 0 and voted >= 0:
            # Kafka 4.x keeps the vote of a follower that voted for the leader it then followed; once
            # the epoch's leader is known the vote decides nothing (no vote is granted in that epoch)
            voted, vdir = -1, ZERO_UUID
        st = ElectionState(
            epoch=int(obj.get("leaderEpoch", -1)),
            leader_id=leader,
            voted_id=voted,
            voted_directory_id=vdir,
            voters=voters,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise QuorumStateError(f"bad quorum-state field: {e}") from e
    return st, v


class QuorumStateStore:
    """Where the election state lives. ``write`` must be durable and atomic when it returns."""

    def read(self) -> ElectionState | None:
        raise NotImplementedError

    def write(self, state: ElectionState) -> None:
        raise NotImplementedError


class MemoryQuorumStateStore(QuorumStateStore):
    def __init__(self) -> None:
        self.state: ElectionState | None = None
        self.history: list[ElectionState] = []

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state
        self.history.append(state)


class FileQuorumStateStore(QuorumStateStore):
    """``<log dir>/__cluster_metadata-0/quorum-state``, written like Kafka: tmp file, fsync, rename."""

    def __init__(self, path: str | os.PathLike, data_version: int = 1) -> None:
        self.path = Path(path)
        self.data_version = data_version

    def read(self) -> ElectionState | None:
        try:
            text = read_small(self.path, what="a quorum-state file").decode("utf-8")
        except FileNotFoundError:
            return None
        return parse_quorum_state(text)[0]

    def write(self, state: ElectionState) -> None:
        from kraftkit._core import write_atomic

        write_atomic(self.path, render_quorum_state(state, self.data_version).encode("utf-8"), mode=0o644)
