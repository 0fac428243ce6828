"""A ZooKeeper client that writes, for the live migration (KIP-866): the znodes the KRaft controller
claims and keeps (``/controller``, ``/controller_epoch``, ``/migration``), in Kafka 3.9's JSON
(``kafka.zk.ControllerZNode``, ``ControllerEpochZNode``, ``MigrationZNode``).

:class:`ZkClient` is what the driver needs: the reads of
:class:`~kraftkit.migration.zk_reader.ZkSource` and a ``multi`` of conditional operations that
applies whole or not at all; :class:`KazooClient` is it over kazoo (the ``zookeeper`` extra).
Calls block: the driver makes them in a worker thread.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Protocol

from kraftkit.migration.zk_reader import KazooSource, ZkError, ZkInputError

__all__ = [
    "CONTROLLER",
    "CONTROLLER_EPOCH",
    "MIGRATION",
    "Check",
    "Create",
    "Delete",
    "KazooClient",
    "MigrationZNode",
    "SetData",
    "ZkBadVersion",
    "ZkClient",
    "ZkNoNode",
    "ZkNodeExists",
    "controller_json",
    "parse_controller",
]

log = logging.getLogger(__name__)

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
MIGRATION = "/migration"


class ZkBadVersion(ZkError):
    """A conditional operation found another znode version (someone else wrote it)."""


class ZkNoNode(ZkError):
    """An operation's znode does not exist."""


class ZkNodeExists(ZkError):
    """A create found the znode there."""


@dataclass(frozen=True)
class Check:
    path: str
    version: int


@dataclass(frozen=True)
class SetData:
    path: str
    data: bytes
    version: int  # -1: any


@dataclass(frozen=True)
class Create:
    path: str
    data: bytes
    #: a persistent sequential znode: ZooKeeper appends a 10-digit counter to the name
    sequential: bool = False


@dataclass(frozen=True)
class Delete:
    path: str
    version: int


Op = Check | SetData | Create | Delete


class ZkClient(Protocol):
    def get(self, path: str) -> tuple[bytes, int] | None: ...

    def children(self, path: str) -> list[str] | None: ...

    def multi(self, ops: list[Op]) -> list[int]:
        """Applies ``ops`` atomically; the new version of each SetData's znode (0 for a Create,
        -1 for the others), or raises :class:`ZkBadVersion`, :class:`ZkNoNode` or
        :class:`ZkNodeExists` (nothing applied)."""
        ...

    def close(self) -> None: ...


# ------------------------------------------------------------------ Kafka's JSON


def controller_json(controller_id: int, timestamp_ms: int, kraft_epoch: int) -> bytes:
    """``ControllerZNode.encode``: ``/controller`` naming a KRaft controller and its epoch."""
    return json.dumps(
        {"version": 2, "brokerid": controller_id, "timestamp": str(timestamp_ms), "kraftControllerEpoch": kraft_epoch},
        separators=(",", ":"),
    ).encode()


def parse_controller(data: bytes) -> tuple[int, int | None]:
    """``ControllerZNode.decodeController``: (broker id, KRaft controller epoch or None)."""
    try:
        js = json.loads(data.decode("utf-8"))
        broker = js["brokerid"]
        epoch = js.get("kraftControllerEpoch")
        if (
            not isinstance(broker, int)
            or isinstance(broker, bool)
            or (epoch is not None and not isinstance(epoch, int))
        ):
            raise ValueError("brokerid or kraftControllerEpoch is not an integer")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise ZkInputError(f"{CONTROLLER}: not Kafka's controller JSON: {e}") from None
    return broker, epoch


def parse_controller_epoch(data: bytes) -> int:
    """``ControllerEpochZNode.decode``: the decimal epoch."""
    text = data.decode("utf-8", "replace").strip()
    if not text.lstrip("-").isdigit() or len(text) > 11:
        raise ZkInputError(f"{CONTROLLER_EPOCH}: {text[:40]!r} is not a controller epoch")
    return int(text)


@dataclass(frozen=True)
class MigrationZNode:
    """``/migration`` (``MigrationZNode``): where the KRaft side of the migration is, for a resumption."""

    kraft_controller_id: int = -1
    kraft_controller_epoch: int = -1
    kraft_metadata_offset: int = -1
    kraft_metadata_epoch: int = -1

    def encode(self) -> bytes:
        return json.dumps(
            {
                "version": 0,
                "kraft_controller_id": self.kraft_controller_id,
                "kraft_controller_epoch": self.kraft_controller_epoch,
                "kraft_metadata_offset": self.kraft_metadata_offset,
                "kraft_metadata_epoch": self.kraft_metadata_epoch,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> MigrationZNode:
        try:
            js = json.loads(data.decode("utf-8"))
            if js.get("version") != 0:
                raise ValueError(f"unknown version {js.get('version')!r}")
            fields = [
                js[k]
                for k in (
                    "kraft_controller_id",
                    "kraft_controller_epoch",
                    "kraft_metadata_offset",
                    "kraft_metadata_epoch",
                )
            ]
            if not all(isinstance(f, int) and not isinstance(f, bool) for f in fields):
                raise ValueError("a field is not an integer")
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            raise ZkInputError(f"{MIGRATION}: not Kafka's migration JSON: {e}") from None
        return cls(*fields)


# ------------------------------------------------------------------ kazoo


class KazooClient(KazooSource):
    """A writable :class:`ZkClient` over kazoo: ``HOST:PORT[,HOST:PORT...][/chroot]``."""

    def __init__(self, connect: str, timeout: float = 15.0, session_timeout: float | None = None) -> None:
        super().__init__(connect, timeout, read_only=False, session_timeout=session_timeout)
        self.client.add_listener(self._state_changed)

    def _state_changed(self, state: str) -> None:
        """Says when the session is cut off or lost (kazoo then makes a new one: the driver's calls
        in flight fail, and its next step runs on the new session)."""
        if state == "SUSPENDED":
            log.warning(
                "ZooKeeper %s: connection lost; reconnecting (the session lives until it expires)", self.connect
            )
        elif state == "LOST":
            log.warning("ZooKeeper %s: session expired (or closed); the next calls make a new session", self.connect)
        elif state == "CONNECTED":
            log.info(
                "ZooKeeper %s: connected (session 0x%x)",
                self.connect,
                self.client.client_id[0] if self.client.client_id else 0,
            )

    def close(self) -> None:
        self.client.remove_listener(self._state_changed)  # (a close is no loss to say)
        super().close()

    def multi(self, ops: list[Op]) -> list[int]:
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError

        t = self.client.transaction()
        for op in ops:
            if isinstance(op, Check):
                t.check(op.path, op.version)
            elif isinstance(op, SetData):
                t.set_data(op.path, op.data, op.version)
            elif isinstance(op, Create):
                t.create(op.path, op.data, sequence=op.sequential)
            else:
                t.delete(op.path, op.version)
        results = t.commit()
        out = []
        for op, r in zip(ops, results, strict=True):
            if isinstance(r, RolledBackError):
                continue
            if isinstance(r, BadVersionError):
                raise ZkBadVersion(f"{op.path}: its version is not {getattr(op, 'version', '?')} (another writer)")
            if isinstance(r, NoNodeError):
                raise ZkNoNode(f"{op.path}: no such znode")
            if isinstance(r, NodeExistsError):
                raise ZkNodeExists(f"{op.path}: exists already")
            if isinstance(r, Exception):
                raise ZkError(f"{op.path}: {type(r).__name__}")
        for op, r in zip(ops, results, strict=True):
            out.append(r.version if isinstance(op, SetData) else 0 if isinstance(op, Create) else -1)
        return out
