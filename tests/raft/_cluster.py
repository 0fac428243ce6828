"""Helpers for tests that run real raft nodes on loopback: free ports, in-process clusters, waits."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Callable
from pathlib import Path

from kraftkit._core import encode_metadata_record
from kraftkit.metadata.records import record_type
from kraftkit.raft.core import RaftConfig
from kraftkit.raft.driver import NodeConfig
from kraftkit.raft.quorum_state import Role
from kraftkit.raft.server import RaftNode

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
#: shorter than Kafka's defaults so elections in tests take tenths of a second, not seconds
FAST = RaftConfig(election_timeout_ms=300, fetch_timeout_ms=600, election_backoff_max_ms=300,
                  request_timeout_ms=1000, fetch_max_wait_ms=200)
NOOP = encode_metadata_record(record_type("NoOpRecord")[0], 0, {})


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def topic_record(name: str) -> bytes:
    import uuid

    return encode_metadata_record(record_type("TopicRecord")[0], 0, {"Name": name, "TopicId": uuid.uuid4()})


def make_nodes(root: Path, n: int = 3, **kw) -> list[RaftNode]:
    ports = free_ports(n)
    voters = {i + 1: ("127.0.0.1", p) for i, p in enumerate(ports)}
    kw.setdefault("raft", FAST)
    return [RaftNode(NodeConfig(i, voters, root / f"node{i}", CLUSTER_ID, **kw)) for i in voters]


@contextlib.asynccontextmanager
async def running(nodes: list[RaftNode]):
    """Starts the nodes, and stops every node in the list on the way out (a test may replace one
    with a restarted node)."""
    for n in nodes:
        await n.start()
    try:
        yield nodes
    finally:
        for n in nodes:
            await n.stop()


async def wait_for(cond: Callable[[], object], timeout: float = 20.0, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def verify_log_problems(*dirs: Path) -> list[str]:
    """What ``kraftkit verify-log DIR...`` reports for these directories (its own functions, no printing):
    CRCs, offsets, and every ``.index``/``.timeindex`` entry against the log."""
    from kraftkit.cli.verify_log import find_partitions, verify

    parts, missing = find_partitions([str(d) for d in dirs])
    assert not missing and parts, dirs
    verify(parts, deep=False, check_indexes=True)
    return [p for part in parts for p in part.problems]


def leader_of(nodes: list[RaftNode], tp=None) -> RaftNode | None:
    live = [n for n in nodes if n._loop is not None]
    leaders = [n for n in live if n.replica(tp).core.role is Role.LEADER
               and n.replica(tp).core.leader_high_watermark() is not None]
    return leaders[0] if len(leaders) == 1 else None
