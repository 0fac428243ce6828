"""What goes into the raft core and what comes out of it.

Events (the inputs :meth:`kraftkit.raft.core.RaftCore.step` takes): :class:`Start`, :class:`Tick`,
:class:`Receive`, :class:`Append`, :class:`FsyncComplete`, :class:`Resign`, :class:`CreateSnapshot`,
:class:`PeerUnreachable`, :class:`RequestFailed`.

Outputs (what a step returns), to be executed **in order**: :class:`PersistElection` (must be durable
before anything after it is done: that is how the epoch and vote reach disk before any message that
depends on them), :class:`Send`, :class:`Fsync`, :class:`Committed`, :class:`StateChanged`,
:class:`SnapshotLoaded`, :class:`Appended`, :class:`AppendRejected`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sized
from typing import Any

from kraftkit.metadata.snapshot import SnapshotId
from kraftkit.raft.quorum_state import ElectionState, Role

__all__ = [
    "Event",
    "Start",
    "Tick",
    "Receive",
    "Append",
    "FsyncComplete",
    "Resign",
    "CreateSnapshot",
    "PeerUnreachable",
    "RequestFailed",
    "Output",
    "PersistElection",
    "Send",
    "Fsync",
    "Committed",
    "StateChanged",
    "SnapshotLoaded",
    "Appended",
    "AppendRejected",
]

# ------------------------------------------------------------------------------------ events


@dataclasses.dataclass(frozen=True)
class Start:
    now: int


@dataclasses.dataclass(frozen=True)
class Tick:
    now: int


@dataclasses.dataclass(frozen=True)
class Receive:
    now: int
    src: int
    api: int
    body: dict
    correlation_id: int
    is_response: bool


@dataclasses.dataclass(frozen=True)
class Append:
    """A local append request (the leader's state machine writing ``payloads``)."""

    now: int
    payloads: Sized  # a tuple of values, or batches the log takes as they are (ClientBatches)


@dataclasses.dataclass(frozen=True)
class FsyncComplete:
    """The driver flushed the log; ``log.flushed_offset`` says how far."""

    now: int


@dataclasses.dataclass(frozen=True)
class PeerUnreachable:
    """The driver could not connect to ``node`` at all: the connection was refused, so no process
    listens at its address (a dead process, not a slow network, which only times out)."""

    now: int
    node: int


@dataclasses.dataclass(frozen=True)
class RequestFailed:
    """The request ``correlation_id`` to ``dest`` will get no answer (the connection broke or could
    not be made): as Kafka's client does for a disconnect, the core backs off and may retry."""

    now: int
    dest: int
    correlation_id: int


@dataclasses.dataclass(frozen=True)
class Resign:
    """Graceful resignation of the leader (``resign(epoch)`` / shutdown)."""

    now: int


@dataclasses.dataclass(frozen=True)
class CreateSnapshot:
    """The state machine has a snapshot of every committed offset below ``end_offset``."""

    now: int
    end_offset: int
    data: bytes


# ----------------------------------------------------------------------------------- outputs


@dataclasses.dataclass(frozen=True)
class PersistElection:
    state: ElectionState


@dataclasses.dataclass(frozen=True)
class Send:
    dest: int
    api: int
    body: Mapping[str, Any]
    correlation_id: int
    is_response: bool


@dataclasses.dataclass(frozen=True)
class Fsync:
    end_offset: int


@dataclasses.dataclass(frozen=True)
class Committed:
    high_watermark: int


@dataclasses.dataclass(frozen=True)
class StateChanged:
    role: Role
    epoch: int
    leader_id: int


@dataclasses.dataclass(frozen=True)
class SnapshotLoaded:
    snapshot_id: SnapshotId
    data: bytes


@dataclasses.dataclass(frozen=True)
class Appended:
    base_offset: int
    last_offset: int
    epoch: int


@dataclasses.dataclass(frozen=True)
class AppendRejected:
    reason: str


#: what :meth:`~kraftkit.raft.core.RaftCore.step` takes
Event = Start | Tick | Receive | Append | FsyncComplete | Resign | CreateSnapshot | PeerUnreachable | RequestFailed
#: what it returns (a list of these, in the order they are to be carried out)
Output = PersistElection | Send | Fsync | Committed | StateChanged | SnapshotLoaded | Appended | AppendRejected
