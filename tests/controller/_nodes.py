"""Helpers for the controller tests: three in-process controllers on loopback over directories
kraftkit's ``storage format`` wrote, and readings of their committed logs."""

from __future__ import annotations

from pathlib import Path

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import FEATURE_LEVEL
from kraftkit.controller import ControllerNode, read_bootstrap_metadata
from kraftkit.features.storage.format import format_storage
from kraftkit.protocol import KafkaConnection
from kraftkit.raft.core import RaftConfig
from kraftkit.raft.driver import NodeConfig
from kraftkit.raft.quorum_state import Role
from tests.raft._cluster import CLUSTER_ID, FAST, free_ports, running  # noqa: F401  (the tests take running from here)


def call_port(port: int, api: int, body: dict, timeout: float = 20) -> dict:
    """One request to a node on loopback, at the highest version both sides speak (blocking)."""
    with KafkaConnection("127.0.0.1", port, timeout=timeout) as conn:
        return conn.request(api, conn.version_for(api), body)


def format_dirs(root: Path, n: int = 3, **kw) -> tuple[dict[int, tuple[str, int]], list[Path]]:
    """Formats one metadata directory per node (kraftkit storage format); returns the voters and dirs."""
    ports = free_ports(n)
    voters = {i + 1: ("127.0.0.1", p) for i, p in enumerate(ports)}
    dirs = []
    for i in voters:
        d = root / f"node{i}"
        format_storage([d], cluster_id=CLUSTER_ID, node_id=i, no_initial_controllers=True, **kw)
        dirs.append(d)
    return voters, dirs


def controller(voters: dict[int, tuple[str, int]], d: Path, node_id: int, raft: RaftConfig = FAST,
               **node_kw) -> ControllerNode:
    return ControllerNode(NodeConfig(node_id, voters, d, CLUSTER_ID, raft=raft, snapshot_every_records=0),
                          read_bootstrap_metadata(d), **node_kw)


def make_controllers(root: Path, n: int = 3, *, session_timeout_ms: int | None = None, **kw) -> list[ControllerNode]:
    voters, dirs = format_dirs(root, n, **kw)
    node_kw = {} if session_timeout_ms is None else {"session_timeout_ms": session_timeout_ms}
    return [controller(voters, d, i, **node_kw) for i, d in zip(voters, dirs, strict=True)]


def active_of(nodes: list[ControllerNode]) -> ControllerNode | None:
    live = [n for n in nodes if n._loop is not None and n.controller.active]
    return live[0] if len(live) == 1 else None


def committed_feature_records(node: ControllerNode) -> list[tuple[int, int, str, int]]:
    """(batch base offset, record offset, name, level) of every FeatureLevelRecord below the
    node's high watermark, decoded record by record with the schema codec."""
    out = []
    for batch in node.committed_batches(0):
        if batch.is_control:
            continue
        for r in batch.records():
            api_key, _v, data = decode_metadata_record(r.value)
            if api_key == FEATURE_LEVEL:
                out.append((batch.base_offset, r.offset, data["Name"], data["FeatureLevel"]))
    return out


def is_leader(node: ControllerNode) -> bool:
    return node._loop is not None and node.replica().core.role is Role.LEADER
