"""``ControllerNode``: a raft node (:class:`kraftkit.raft.server.RaftNode`) that is a KRaft controller.

Besides the quorum RPCs, DescribeQuorum and DescribeCluster it answers UpdateFeatures and the
registration RPCs (ControllerRegistration, BrokerRegistration, BrokerHeartbeat, UnregisterBroker)
and the BROKER config RPCs (DescribeConfigs, IncrementalAlterConfigs, AlterConfigs: KIP-919)
through its :class:`~kraftkit.controller.quorum_controller.QuorumController`, and its ApiVersions
carries the feature fields of KIP-584: SupportedFeatures (this node's ranges), FinalizedFeatures (from the
committed log, eventually consistent on a follower) and FinalizedFeaturesEpoch (the offset of the
last committed feature change, -1 if none). It does not take Produce: the metadata log changes only
through the controller's records, as on Kafka's controllers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kraftkit.controller.bootstrap import BootstrapMetadata
from kraftkit.controller.quorum_controller import DEFAULT_SESSION_TIMEOUT_MS, QuorumController
from kraftkit.protocol.messages import ApiKey, Errors
from kraftkit.raft.driver import NodeConfig
from kraftkit.raft.server import SERVED, RaftNode
from kraftkit.raft.transport import ServerConnection

__all__ = ["ControllerNode"]

CONTROLLER_APIS = (
    *(a for a in SERVED if a != ApiKey.PRODUCE),
    ApiKey.UPDATE_FEATURES,
    ApiKey.CONTROLLER_REGISTRATION,
    ApiKey.BROKER_REGISTRATION,
    ApiKey.BROKER_HEARTBEAT,
    ApiKey.UNREGISTER_BROKER,
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.ALTER_CONFIGS,
)


class ControllerNode(RaftNode):
    """A controller of the quorum: ``await node.start()``, ``await node.stop()`` as a raft node."""

    served = CONTROLLER_APIS

    def __init__(
        self,
        config: NodeConfig,
        bootstrap: BootstrapMetadata,
        listeners: list[Any] | None = None,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        auto_finalize: bool = False,
        static_config: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(config, listeners)
        self.session_timeout_ms = session_timeout_ms
        self.controller = QuorumController(
            self, bootstrap, session_timeout_ms, auto_finalize=auto_finalize, static_config=static_config
        )
        self._extra_listeners.append(self.controller)
        c = self.controller.apis
        # each answers with an awaitable of the response (a coroutine, run as a task, or a future)
        self._handlers: dict[int, Callable[[Any, int], Awaitable[Any]]] = {
            ApiKey.UPDATE_FEATURES: c.update_features,
            ApiKey.CONTROLLER_REGISTRATION: c.register_controller,
            ApiKey.BROKER_REGISTRATION: c.register_broker,
            ApiKey.BROKER_HEARTBEAT: c.broker_heartbeat,
            ApiKey.UNREGISTER_BROKER: c.unregister_broker,
            ApiKey.DESCRIBE_CONFIGS: c.describe_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: c.incremental_alter_configs,
            ApiKey.ALTER_CONFIGS: c.alter_configs,
        }

    async def stop(self, *, resign: bool = True, timeout: float = 1.0) -> None:
        await self.controller.close()
        await super().stop(resign=resign, timeout=timeout)

    def _describe_cluster(self, body: dict) -> dict:
        """As Kafka's controllers answer it (``ControllerApis.handleDescribeCluster``), with one
        difference: before the log holds a metadata.version, UNSUPPORTED_VERSION (the admin client
        then asks again, rather than waiting for an active controller it was told is none). Kafka
        refuses below 3.7-IV0 too; kraftkit then lists the voters of its configuration."""
        if self.controller.image.metadata_version is None:
            return {
                "ThrottleTimeMs": 0,
                "ErrorCode": Errors.UNSUPPORTED_VERSION,
                "ErrorMessage": "Direct-to-controller communication is not supported with the current "
                "MetadataVersion (the metadata log holds none yet: the quorum has not bootstrapped).",
                "EndpointType": 2,
                "ClusterId": self.config.cluster_id,
                "ControllerId": -1,
                "Brokers": [],
                "ClusterAuthorizedOperations": -2147483648,
            }
        return super()._describe_cluster(body)

    def _feature_fields(self, version: int) -> dict:
        return self.controller.features.api_versions_fields(self.controller.image, version)

    def _other_request(self, conn: ServerConnection, api: int, version: int, body: dict, fut: asyncio.Future) -> None:
        handler = self._handlers.get(api)
        if handler is None:
            super()._other_request(conn, api, version, body, fut)
            return
        task = asyncio.ensure_future(handler(body, version))

        def answered(t: asyncio.Future) -> None:
            if fut.done():
                return
            if t.cancelled():
                fut.cancel()
            elif t.exception() is not None:
                fut.set_exception(t.exception())  # type: ignore[arg-type]
            else:
                fut.set_result(t.result())

        if task.done():
            answered(task)  # answered within the call (a heartbeat that writes nothing)
        else:
            task.add_done_callback(answered)
