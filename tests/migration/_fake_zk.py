"""A ZooKeeper in memory for the migration driver's tests: znodes with data and versions, and a
``multi`` that applies whole or not at all with ZooKeeper's rules (a check or set on a version
other than the znode's fails, a create of an existing znode fails, a delete of a missing one
fails). ``fail_on(predicate)`` makes reads and writes raise, as a lost connection does."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

from kraftkit.migration.zk_client import Check, Create, Delete, SetData, ZkBadVersion, ZkNodeExists, ZkNoNode
from kraftkit.migration.zk_reader import ZkError

#: the delegation token of :func:`zk_cluster`
TOKEN_ID = "S0xPTGFK1TyoGvoubkHkoA"


class ConnectionLoss(Exception):
    """What the fake raises when told to fail (kazoo raises its ConnectionLoss then)."""


class FakeZk:
    def __init__(self, nodes: dict[str, bytes] | None = None) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {p: (v, 0) for p, v in (nodes or {}).items()}
        for p in list(self.nodes):
            self._parents(self.nodes, p)
        self.lock = threading.Lock()
        self.failing: Callable[[str, str], bool] | None = None
        self.ops: list[tuple[str, str]] = []  # (operation, path), in order
        self.closed = False
        self.sequence: dict[str, int] = {}

    @staticmethod
    def _parents(nodes: dict[str, tuple[bytes, int]], path: str) -> None:
        """Every znode's parents exist in ZooKeeper: made here, empty, where missing."""
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            nodes.setdefault("/" + "/".join(parts[:i]), (b"", 0))

    def fail_on(self, predicate: Callable[[str, str], bool] | None) -> None:
        self.failing = predicate

    def _op(self, what: str, path: str) -> None:
        self.ops.append((what, path))
        if self.failing is not None and self.failing(what, path):
            raise ConnectionLoss(f"{what} {path}: connection loss")

    def get(self, path: str) -> tuple[bytes, int] | None:
        with self.lock:
            self._op("get", path)
            return self.nodes.get(path)

    def children(self, path: str) -> list[str] | None:
        with self.lock:
            self._op("children", path)
            prefix = path.rstrip("/") + "/"
            kids = {p[len(prefix):].split("/", 1)[0] for p in self.nodes if p.startswith(prefix)}
            if not kids and path not in self.nodes:
                return None
            return sorted(kids)

    def multi(self, ops: list) -> list[int]:
        with self.lock:
            for op in ops:
                self._op(type(op).__name__.lower(), op.path)
            new = dict(self.nodes)
            out = []
            for op in ops:
                cur = new.get(op.path)
                if isinstance(op, Check):
                    if cur is None:
                        raise ZkNoNode(op.path)
                    if cur[1] != op.version:
                        raise ZkBadVersion(op.path)
                    out.append(-1)
                elif isinstance(op, SetData):
                    if cur is None:
                        raise ZkNoNode(op.path)
                    if op.version != -1 and cur[1] != op.version:
                        raise ZkBadVersion(op.path)
                    new[op.path] = (op.data, cur[1] + 1)
                    out.append(cur[1] + 1)
                elif isinstance(op, Create):
                    path = op.path
                    if op.sequential:  # ZooKeeper's counter: the parent's children created so far
                        parent = path.rsplit("/", 1)[0]
                        self.sequence[parent] = self.sequence.get(parent, -1) + 1
                        path = f"{path}{self.sequence[parent]:010d}"
                    if new.get(path) is not None:
                        raise ZkNodeExists(path)
                    if path.rsplit("/", 1)[0] and path.rsplit("/", 1)[0] not in new:
                        raise ZkNoNode(f"{path}: no parent")
                    new[path] = (op.data, 0)
                    out.append(0)
                elif isinstance(op, Delete):
                    if cur is None:
                        raise ZkNoNode(op.path)
                    if op.version != -1 and cur[1] != op.version:
                        raise ZkBadVersion(op.path)
                    if any(p.startswith(op.path + "/") for p in new):
                        raise ZkError(f"{op.path}: not empty")
                    del new[op.path]
                    out.append(-1)
            self.nodes = new
            return out

    def set(self, path: str, data: bytes) -> None:
        """Another writer (a ZooKeeper-mode controller) sets ``path``."""
        with self.lock:
            cur = self.nodes.get(path)
            self.nodes[path] = (data, 0 if cur is None else cur[1] + 1)
            self._parents(self.nodes, path)

    def json(self, path: str) -> dict:
        return json.loads(self.nodes[path][0])

    def close(self) -> None:
        self.closed = True


def zk_cluster(cluster_id: str) -> FakeZk:
    """A ZooKeeper as a Kafka 3.9 ZooKeeper-mode cluster of brokers 1 and 2 leaves it: two topics
    (one assigned to broker 3 too), topic configs, a client quota, an ACL, a producer id block, a
    delegation token (``TOKEN_ID``, alice's, bob its renewer), a ZooKeeper controller (broker 1,
    controller epoch 4)."""
    def j(v: object) -> bytes:
        return json.dumps(v).encode()

    nodes = {
        "/cluster/id": j({"version": "1", "id": cluster_id}),
        "/controller_epoch": b"4",
        "/controller": j({"version": 2, "brokerid": 1, "timestamp": "1700000000000", "kraftControllerEpoch": -1}),
        "/brokers/ids/1": j({"version": 5, "host": "127.0.0.1", "port": 9092, "endpoints": ["PLAINTEXT://127.0.0.1:9092"],
                             "jmx_port": -1, "timestamp": "1", "features": {}}),
        "/brokers/ids/2": j({"version": 5, "host": "127.0.0.1", "port": 9093, "endpoints": ["PLAINTEXT://127.0.0.1:9093"],
                             "jmx_port": -1, "timestamp": "1", "features": {}}),
        "/brokers/topics/alpha": j({"version": 3, "topic_id": "w9dBFJ9cSLmaxVCMRBMZDQ",
                                    "partitions": {"0": [1, 2], "1": [2, 1]}, "adding_replicas": {},
                                    "removing_replicas": {}}),
        "/brokers/topics/alpha/partitions/0/state": j({"controller_epoch": 4, "leader": 1, "version": 1,
                                                       "leader_epoch": 3, "isr": [1, 2]}),
        "/brokers/topics/alpha/partitions/1/state": j({"controller_epoch": 4, "leader": 2, "version": 1,
                                                       "leader_epoch": 0, "isr": [2, 1]}),
        "/brokers/topics/beta": j({"version": 3, "topic_id": "SrsGLGgyTMOTIj5Wn8HUGw",
                                   "partitions": {"0": [3]}, "adding_replicas": {}, "removing_replicas": {}}),
        "/brokers/topics/beta/partitions/0/state": j({"controller_epoch": 2, "leader": 3, "version": 1,
                                                      "leader_epoch": 1, "isr": [3]}),
        "/config/topics/alpha": j({"version": 1, "config": {"retention.ms": "3600000", "cleanup.policy": "compact"}}),
        "/config/clients/app": j({"version": 1, "config": {"producer_byte_rate": "1024"}}),
        "/kafka-acl/Topic/alpha": j({"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                                             "operation": "Read", "host": "*"}]}),
        "/latest_producer_id_block": j({"version": 1, "broker": 1, "block_start": "0", "block_end": "999"}),
        "/admin/delete_topics": b"",
        # a delegation token as DelegationTokenManagerZk writes it (principals sanitized, no HMAC)
        f"/delegation_token/tokens/{TOKEN_ID}": j({
            "version": 3, "owner": "User%3Aalice", "tokenRequester": "User%3Aalice", "renewers": ["User%3Abob"],
            "issueTimestamp": 1700000000000, "maxTimestamp": 1700604800000, "expiryTimestamp": 1700086400000,
            "tokenId": TOKEN_ID}),
        "/delegation_token/token_changes": b"",
    }
    zk = FakeZk(nodes)
    zk.nodes["/brokers/topics/alpha/partitions/0/state"] = (zk.nodes["/brokers/topics/alpha/partitions/0/state"][0], 5)
    return zk
