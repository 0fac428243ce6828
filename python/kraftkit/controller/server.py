"""``ControllerNode``: a raft node (:class:`kraftkit.raft.server.RaftNode`) that is a KRaft controller.

Besides the quorum RPCs, DescribeQuorum and DescribeCluster it answers UpdateFeatures through its
:class:`~kraftkit.controller.quorum_controller.QuorumController`, and its ApiVersions carries the
feature fields of KIP-584: SupportedFeatures (this node's ranges), FinalizedFeatures (from the
committed log, eventually consistent on a follower) and FinalizedFeaturesEpoch (the offset of the
last committed feature change, -1 if none). It does not take Produce: the metadata log changes only
through the controller's records, as on Kafka's controllers.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kraftkit.controller.bootstrap import BootstrapMetadata
from kraftkit.controller.quorum_controller import QuorumController
from kraftkit.protocol.messages import ApiKey
from kraftkit.raft.driver import NodeConfig
from kraftkit.raft.server import SERVED, RaftNode
from kraftkit.raft.transport import ServerConnection

__all__ = ["ControllerNode"]

CONTROLLER_APIS = (*(a for a in SERVED if a != ApiKey.PRODUCE), ApiKey.UPDATE_FEATURES)


class ControllerNode(RaftNode):
    """A controller of the quorum: ``await node.start()``, ``await node.stop()`` as a raft node."""

    served = CONTROLLER_APIS

    def __init__(
        self,
        config: NodeConfig,
        bootstrap: BootstrapMetadata,
        listeners: list[Any] | None = None,
        *,
        session_timeout_ms: int = 9000,
    ) -> None:
        super().__init__(config, listeners)
        self.session_timeout_ms = session_timeout_ms  # broker.session.timeout.ms
        self.controller = QuorumController(self, bootstrap)
        self._extra_listeners.append(self.controller)

    def _feature_fields(self, version: int) -> dict:
        return self.controller.features.api_versions_fields(self.controller.image, version)

    def _other_request(self, conn: ServerConnection, api: int, version: int, body: dict, fut: asyncio.Future) -> None:
        if api != ApiKey.UPDATE_FEATURES:
            super()._other_request(conn, api, version, body, fut)
            return
        task = asyncio.get_running_loop().create_task(self.controller.update_features(body, version))

        def answered(t: asyncio.Task) -> None:
            if fut.done():
                return
            if t.cancelled():
                fut.cancel()
            elif t.exception() is not None:
                fut.set_exception(t.exception())  # type: ignore[arg-type]
            else:
                fut.set_result(t.result())

        task.add_done_callback(answered)
