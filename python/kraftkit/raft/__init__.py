"""The KIP-595 raft replica.

The deterministic core (:mod:`kraftkit.raft.core`: transitions and timers; :mod:`kraftkit.raft.handlers`:
the RPC handlers), the per-role state it moves between (:mod:`kraftkit.raft.state`), the events it takes
and the outputs it returns (:mod:`kraftkit.raft.events`), its log interface (:mod:`kraftkit.raft.log`,
on disk :mod:`kraftkit.raft.file_log`), the quorum-state file (:mod:`kraftkit.raft.quorum_state`) and
the RPC bodies it exchanges (:mod:`kraftkit.raft.messages`). A node is the driver that runs the cores
on asyncio (:mod:`kraftkit.raft.driver`) and its listener (:mod:`kraftkit.raft.server`)."""

from kraftkit.raft.core import RaftConfig, RaftCore, RaftStateError, RecordsAdapter
from kraftkit.raft.events import (
    Append,
    Appended,
    AppendRejected,
    Committed,
    CreateSnapshot,
    Fsync,
    FsyncComplete,
    PersistElection,
    Receive,
    Resign,
    Send,
    SnapshotLoaded,
    Start,
    StateChanged,
    Tick,
)
from kraftkit.raft.log import Entry, LogError, MemoryLog, RaftLog, SnapshotId
from kraftkit.raft.messages import METADATA_PARTITION, Errors, TopicPartition
from kraftkit.raft.quorum_state import (
    ElectionState,
    FileQuorumStateStore,
    MemoryQuorumStateStore,
    Role,
    parse_quorum_state,
    render_quorum_state,
)

__all__ = [
    "Append",
    "Appended",
    "AppendRejected",
    "Committed",
    "CreateSnapshot",
    "ElectionState",
    "Entry",
    "Errors",
    "FileQuorumStateStore",
    "Fsync",
    "FsyncComplete",
    "LogError",
    "METADATA_PARTITION",
    "MemoryLog",
    "MemoryQuorumStateStore",
    "PersistElection",
    "RaftConfig",
    "RaftCore",
    "RaftLog",
    "RaftStateError",
    "Receive",
    "RecordsAdapter",
    "Resign",
    "Role",
    "Send",
    "SnapshotId",
    "SnapshotLoaded",
    "Start",
    "StateChanged",
    "Tick",
    "TopicPartition",
    "parse_quorum_state",
    "render_quorum_state",
]
