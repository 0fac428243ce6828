"""``ControllerRegistrationManager``: each controller registers itself with the active controller,
as Kafka's controllers do from metadata.version 3.7-IV0 on (KIP-919).

Once the committed log holds a metadata.version that has controller registrations and it does not
hold this controller's registration of this incarnation, the controller sends a
ControllerRegistrationRequest (its id, a random incarnation id made at start, its listener and its
supported feature ranges) to the active controller; the active controller registers itself
directly. A failed attempt (no leader yet, NOT_CONTROLLER, a lost connection) is retried after a
second. The RegisterControllerRecords are what the feature checks use to know what the other
controllers support (:meth:`kraftkit.controller.features.FeatureControlManager.nodes`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Protocol

from kraftkit.controller.features import FeatureControlManager
from kraftkit.features.registry import registry
from kraftkit.metadata.image import MetadataImage
from kraftkit.protocol import types as t
from kraftkit.protocol.messages import ApiKey, Errors
from kraftkit.raft.driver import RaftDriver
from kraftkit.raft.transport import PeerConnection

__all__ = ["ControllerRegistrationManager"]

log = logging.getLogger(__name__)

RETRY_S = 1.0
#: Kafka's SecurityProtocol.PLAINTEXT
PLAINTEXT = 0


class LocalApis(Protocol):
    def register_controller(self, body: Any, version: int) -> asyncio.Future: ...


class Controller(Protocol):
    """What the manager needs of its controller (:class:`~kraftkit.controller.quorum_controller.QuorumController`)."""

    node: RaftDriver
    features: FeatureControlManager

    @property
    def image(self) -> MetadataImage: ...

    @property
    def active(self) -> bool: ...

    @property
    def apis(self) -> LocalApis: ...


class ControllerRegistrationManager:
    def __init__(self, controller: Controller, listener_name: str) -> None:
        self.controller = controller
        self.listener_name = listener_name
        self.incarnation_id = uuid.uuid4()
        self._in_flight = False
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False
        self._conn: PeerConnection | None = None

    def request_body(self) -> t.ControllerRegistrationRequest:
        node = self.controller.node
        host, port = node.address_of(node.node_id) or node.config.advertised or node.config.listen  # type: ignore[misc]
        return {
            "ControllerId": node.node_id,
            "IncarnationId": self.incarnation_id,
            "ZkMigrationReady": bool(getattr(self.controller, "zk_migration", False)),
            "Listeners": [{"Name": self.listener_name, "Host": host, "Port": port, "SecurityProtocol": PLAINTEXT}],
            "Features": [
                {"Name": n, "MinSupportedVersion": lo, "MaxSupportedVersion": hi}
                for n, (lo, hi) in sorted(self.controller.features.supported.items())
            ],
        }

    def registered(self) -> bool:
        reg = self.controller.image.controllers.get(self.controller.node.node_id)
        return reg is not None and reg["IncarnationId"] == self.incarnation_id

    def maybe_register(self) -> None:
        """Sends the registration if it is due and none is in flight (called on every commit and
        leader change)."""
        if self._closed or self._in_flight or self._retry is not None or self.registered():
            return
        mv = self.controller.image.metadata_version
        if mv is None or registry().metadata_version(mv).register_controller_record_version is None:
            return
        node = self.controller.node
        leader, _epoch = node.leader()
        if leader < 0:
            return
        self._in_flight = True
        body = self.request_body()
        if leader == node.node_id:
            if not self.controller.active:
                self._in_flight = False
                return  # activation calls again
            answer = self.controller.apis.register_controller(body, 0)
            answer.add_done_callback(lambda t: self._answered(None if t.cancelled() or t.exception() else t.result()))
            return
        conn = self._connection(leader)
        if conn is None:
            self._in_flight = False
            return
        conn.send(ApiKey.CONTROLLER_REGISTRATION, body, self._answered)

    def _connection(self, leader: int) -> PeerConnection | None:
        """A connection of its own to the leader: the raft connection must not wait behind an
        answer that waits for a commit (a Kafka connection answers in request order)."""
        if self._conn is not None and self._conn.node_id != leader:
            asyncio.get_running_loop().create_task(self._conn.close())
            self._conn = None
        if self._conn is None:
            addr = self.controller.node.address_of(leader)
            if addr is None:
                return None
            self._conn = PeerConnection(
                leader,
                addr[0],
                addr[1],
                client_id=f"controller-registration-{self.controller.node.node_id}",
                versions={ApiKey.CONTROLLER_REGISTRATION: 0},
            )
        return self._conn

    def _answered(self, resp: dict | None) -> None:
        self._in_flight = False
        node = self.controller.node
        if self._closed:
            return
        if resp is not None and resp.get("ErrorCode") == Errors.NONE:
            log.info("node %d: registered as controller (incarnation %s)", node.node_id, self.incarnation_id)
            return
        why = "no answer" if resp is None else f"error {resp.get('ErrorCode')}: {resp.get('ErrorMessage')}"
        log.debug("node %d: controller registration failed (%s); retrying", node.node_id, why)
        self._retry = asyncio.get_running_loop().call_later(RETRY_S, self._retry_now)

    def _retry_now(self) -> None:
        self._retry = None
        self.maybe_register()

    async def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
