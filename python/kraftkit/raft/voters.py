"""KIP-853 voter sets: who votes, by offset (Kafka's ``VoterSet``, ``VoterSetHistory`` and
``KRaftControlRecordStateMachine``).

A static quorum (kraft.version 0) has the voters of ``controller.quorum.voters`` and nothing about
them in the log. A dynamic quorum (kraft.version 1) keeps its voter set in the log: a
``KRaftVersionRecord`` and a ``VotersRecord`` in the bootstrap snapshot (``00000000000000000000-
0000000000.checkpoint``, written by ``storage format --standalone`` / ``--initial-controllers``), in
every later snapshot's header, and a ``VotersRecord`` in a control batch of the log for each change.
The voter set in force is **the last one in the log, committed or not** (a change takes effect when
it is appended, as in the Raft thesis' single-server changes): a truncation below it restores the one
before.

A voter is a :class:`ReplicaKey`, an id and the directory id of its metadata log (a controller that
lost its disk comes back with another directory id, and is then not the voter it was). A voter of a
set written without directory ids (a static quorum) matches any directory.

:class:`KRaftControlState` is kept by the raft log (:class:`~kraftkit.raft.log.RaftLog`), which sees
every append, truncation and snapshot: the records go in as :class:`ControlRecord` values.
"""

from __future__ import annotations

import bisect
import dataclasses
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from kraftkit.log.control import ControlType

__all__ = [
    "ZERO_UUID",
    "KRAFT_VERSION",
    "KRAFT_VOTERS",
    "ControlRecord",
    "Endpoint",
    "ReplicaKey",
    "VoterNode",
    "VoterSet",
    "KRaftControlState",
    "KRAFT_VERSION_RANGE",
]

ZERO_UUID = uuid.UUID(int=0)
KRAFT_VERSION = int(ControlType.KRAFT_VERSION)
KRAFT_VOTERS = int(ControlType.KRAFT_VOTERS)
#: the kraft.version levels kraftkit's replica supports (what it says in ApiVersions and VotersRecord)
KRAFT_VERSION_RANGE = (0, 1)


class ControlRecord(NamedTuple):
    """A KRaft control record other than the LeaderChangeMessage, as the memory log holds it:
    ``type`` is Kafka's ``ControlRecordType`` (5 KRaftVersion, 6 KRaftVoters), ``body`` the record
    as a dict in Kafka's schema's field names (``{"Version": 0, "KRaftVersion": 1}``, a
    ``VotersRecord``)."""

    type: int
    body: dict


class Endpoint(NamedTuple):
    """A listener of a voter: ``CONTROLLER://host:port``."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


class ReplicaKey(NamedTuple):
    """A replica: its node id and the directory id of its metadata log (zero: unknown, as in a
    static quorum, where a voter is its id alone)."""

    id: int
    directory_id: uuid.UUID = ZERO_UUID

    def __str__(self) -> str:
        if self.directory_id == ZERO_UUID:
            return str(self.id)
        from kraftkit.raft.quorum_state import uuid_to_kafka

        return f"{self.id}@{uuid_to_kafka(self.directory_id)}"


@dataclasses.dataclass(frozen=True)
class VoterNode:
    """One voter: its key, its listeners and the kraft.version levels it supports."""

    key: ReplicaKey
    endpoints: tuple[Endpoint, ...] = ()
    kraft_version_range: tuple[int, int] = (0, 0)

    @property
    def id(self) -> int:
        return self.key.id

    def matches(self, key: ReplicaKey) -> bool:
        """Whether ``key`` is this voter (Kafka's ``ReplicaState.matchesKey``: a voter without a
        directory id is any replica with its id)."""
        if key.id != self.key.id:
            return False
        return self.key.directory_id == ZERO_UUID or key.directory_id == self.key.directory_id

    def endpoint(self, listener: str | None = None) -> Endpoint | None:
        """The endpoint of ``listener`` (the first one when None)."""
        for e in self.endpoints:
            if listener is None or e.name == listener:
                return e
        return None


class VoterSet:
    """An immutable voter set (Kafka's ``VoterSet``), by id."""

    __slots__ = ("_nodes", "ids")

    def __init__(self, nodes: Iterable[VoterNode]) -> None:
        by_id: dict[int, VoterNode] = {}
        for n in nodes:
            if n.id in by_id:
                raise ValueError(f"voter id {n.id} is given twice")
            by_id[n.id] = n
        self._nodes: Mapping[int, VoterNode] = dict(sorted(by_id.items()))
        #: the voter ids, ascending
        self.ids: tuple[int, ...] = tuple(self._nodes)

    @classmethod
    def of_ids(cls, ids: Iterable[int]) -> VoterSet:
        """A static quorum's voters: ids only."""
        return cls(VoterNode(ReplicaKey(i)) for i in ids)

    @classmethod
    def from_record(cls, body: Mapping[str, Any]) -> VoterSet:
        """From a ``VotersRecord`` (as decoded: Kafka's field names)."""
        nodes = []
        for v in body.get("Voters") or []:
            feat = v.get("KRaftVersionFeature") or {}
            nodes.append(
                VoterNode(
                    ReplicaKey(int(v["VoterId"]), v.get("VoterDirectoryId") or ZERO_UUID),
                    tuple(Endpoint(e["Name"], e["Host"], int(e["Port"])) for e in v.get("Endpoints") or []),
                    (int(feat.get("MinSupportedVersion", 0)), int(feat.get("MaxSupportedVersion", 0))),
                )
            )
        return cls(nodes)

    def to_record(self) -> dict:
        """The ``VotersRecord`` (version 0) of this set."""
        return {
            "Version": 0,
            "Voters": [
                {
                    "VoterId": n.id,
                    "VoterDirectoryId": n.key.directory_id,
                    "Endpoints": [{"Name": e.name, "Host": e.host, "Port": e.port} for e in n.endpoints],
                    "KRaftVersionFeature": {
                        "MinSupportedVersion": n.kraft_version_range[0],
                        "MaxSupportedVersion": n.kraft_version_range[1],
                    },
                }
                for n in self._nodes.values()
            ],
        }

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[VoterNode]:
        return iter(self._nodes.values())

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VoterSet) and dict(self._nodes) == dict(other._nodes)

    def __hash__(self) -> int:
        return hash(tuple(self._nodes.values()))

    def __repr__(self) -> str:
        return f"VoterSet({', '.join(str(n.key) for n in self._nodes.values())})"

    def node(self, node_id: int) -> VoterNode | None:
        return self._nodes.get(node_id)

    def keys(self) -> list[ReplicaKey]:
        return [n.key for n in self._nodes.values()]

    def is_voter(self, key: ReplicaKey) -> bool:
        n = self._nodes.get(key.id)
        return n is not None and n.matches(key)

    def add(self, node: VoterNode) -> VoterSet | None:
        """This set with ``node`` (None: its id votes already)."""
        if node.id in self._nodes:
            return None
        return VoterSet([*self._nodes.values(), node])

    def remove(self, key: ReplicaKey) -> VoterSet | None:
        """This set without ``key`` (None: not a voter, or the last one)."""
        n = self._nodes.get(key.id)
        if n is None or n.key != key or len(self._nodes) == 1:
            return None
        return VoterSet(v for v in self._nodes.values() if v.id != key.id)

    def update(self, node: VoterNode) -> VoterSet | None:
        """This set with the endpoints and kraft.version range of ``node`` (None: not a voter)."""
        old = self._nodes.get(node.id)
        if old is None or old.key != node.key:
            return None
        return VoterSet(node if v.id == node.id else v for v in self._nodes.values())

    def overlaps_majority(self, other: VoterSet) -> bool:
        """Whether the two sets differ by at most one voter (Kafka's ``hasOverlappingMajority``:
        every majority of one meets every majority of the other)."""
        a, b = set(self.keys()), set(other.keys())
        return len(a ^ b) <= 1


class KRaftControlState:
    """The kraft.version and the voter sets of a log, by offset (Kafka's
    ``KRaftControlRecordStateMachine``). ``static`` is the voter set of a log that holds none
    (kraft.version 0: ``controller.quorum.voters``); the log it belongs to calls :meth:`note` for
    every control record it appends, :meth:`truncate` when it cuts its tail, :meth:`compact` when
    a snapshot replaces its head, and :meth:`reset` when it is replaced by a snapshot."""

    def __init__(self) -> None:
        #: ascending (offset, VoterSet); offset -1: the bootstrap snapshot's
        self._voters: list[tuple[int, VoterSet]] = []
        self._versions: list[tuple[int, int]] = []
        #: bumped whenever the latest voter set may have changed (cheap change detection)
        self.generation = 0

    # -- reads
    def voters(self) -> VoterSet | None:
        """The voter set in force: the last one in the log (None: none in the log, a static quorum)."""
        return self._voters[-1][1] if self._voters else None

    def voters_entry(self) -> tuple[int, VoterSet] | None:
        """``(offset, voter set)`` of the last voter set (offset -1: from the bootstrap snapshot)."""
        return self._voters[-1] if self._voters else None

    def voters_at(self, offset: int) -> VoterSet | None:
        """The voter set in force at ``offset`` (the last one at or before it)."""
        i = bisect.bisect_right([o for o, _ in self._voters], offset)
        return self._voters[i - 1][1] if i else None

    def kraft_version(self) -> int:
        return self._versions[-1][1] if self._versions else 0

    # -- writes
    def note(self, offset: int, record: ControlRecord) -> None:
        """A control record at ``offset`` (a VotersRecord that names a voter twice or lacks a field
        is a ValueError naming the offset)."""
        if record.type == KRAFT_VOTERS:
            try:
                voters = VoterSet.from_record(record.body)
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"offset {offset}: a VotersRecord that cannot be a voter set: {e}") from None
            self._voters.append((offset, voters))
            self.generation += 1
        elif record.type == KRAFT_VERSION:
            self._versions.append((offset, int(record.body.get("KRaftVersion", 0))))

    def truncate(self, end_offset: int) -> None:
        """The log now ends at ``end_offset``: what was noted at or after it is gone."""
        if self._voters and self._voters[-1][0] >= end_offset:
            self._voters = [e for e in self._voters if e[0] < end_offset]
            self.generation += 1
        self._versions = [e for e in self._versions if e[0] < end_offset]

    def compact(self, start_offset: int) -> None:
        """A snapshot replaced the log below ``start_offset``: keep the last entry before it as the base."""
        for hist in (self._voters, self._versions):
            before = [e for e in hist if e[0] < start_offset]
            if len(before) > 1:
                del hist[: len(before) - 1]

    def reset(self, offset: int, kraft_version: int | None, voters: VoterSet | None) -> None:
        """The log is now a snapshot whose control records (at ``offset``, its last offset) are these."""
        self._voters = [(offset, voters)] if voters is not None else []
        self._versions = [(offset, kraft_version)] if kraft_version is not None else []
        self.generation += 1

    def note_snapshot_records(self, offset: int, records: Iterable[ControlRecord]) -> None:
        """:meth:`reset` from a snapshot's control records."""
        version, voters = None, None
        for r in records:
            if r.type == KRAFT_VERSION:
                version = int(r.body.get("KRaftVersion", 0))
            elif r.type == KRAFT_VOTERS:
                try:
                    voters = VoterSet.from_record(r.body)
                except (KeyError, TypeError, ValueError) as e:
                    raise ValueError(f"a VotersRecord that cannot be a voter set: {e}") from None
        self.reset(offset, version, voters)
