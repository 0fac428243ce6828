"""``ControllerNode``: a raft node (:class:`kraftkit.raft.server.RaftNode`) that is a KRaft controller.

Besides the quorum RPCs, DescribeQuorum and DescribeCluster it answers UpdateFeatures and the
registration RPCs (ControllerRegistration, BrokerRegistration, BrokerHeartbeat, UnregisterBroker)
the BROKER config RPCs (DescribeConfigs, IncrementalAlterConfigs, AlterConfigs: KIP-919),
CreateTopics, DeleteTopics and CreatePartitions through its
:class:`~kraftkit.controller.quorum_controller.QuorumController`, and its ApiVersions carries the
feature fields of KIP-584: SupportedFeatures (this node's ranges), FinalizedFeatures (from the committed
log, eventually consistent on a follower) and FinalizedFeaturesEpoch (the offset of the last committed
feature change, -1 if none). Brokers forward their clients' admin requests inside
CreateTopics, CreateAcls and DeleteAcls through its
:class:`~kraftkit.controller.quorum_controller.QuorumController`, and its ApiVersions carries
the feature fields of KIP-584: SupportedFeatures (this node's ranges), FinalizedFeatures (from the
committed log, eventually consistent on a follower) and FinalizedFeaturesEpoch (the offset of the
last committed feature change, -1 if none). Brokers forward their clients' admin requests inside
Envelope (KIP-590): see :meth:`ControllerNode.envelope`. It does not take Produce: the metadata log changes only
through the controller's records, as on Kafka's controllers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kraftkit._core import encode_response
from kraftkit.controller.bootstrap import BootstrapMetadata
from kraftkit.controller.quorum_controller import DEFAULT_SESSION_TIMEOUT_MS, QuorumController
from kraftkit.errors import KraftkitError
from kraftkit.protocol.messages import ApiKey, Errors, decode_request, error_response
from kraftkit.raft.driver import NodeConfig
from kraftkit.raft.server import SERVED, RaftNode
from kraftkit.raft.transport import FrameError, ServerConnection, request_header

__all__ = ["ControllerNode"]

log = logging.getLogger(__name__)

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
    ApiKey.CREATE_TOPICS,
    ApiKey.DELETE_TOPICS,
    ApiKey.CREATE_PARTITIONS,
    ApiKey.ALLOCATE_PRODUCER_IDS,
    ApiKey.ALTER_PARTITION,
    ApiKey.ELECT_LEADERS,
    ApiKey.ASSIGN_REPLICAS_TO_DIRS,
    ApiKey.ALTER_CLIENT_QUOTAS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
    ApiKey.CREATE_ACLS,
    ApiKey.DELETE_ACLS,
    ApiKey.ENVELOPE,
)

#: the APIs a broker may forward inside an Envelope (Kafka's ``ApiKeys.forwardable``), by api key
FORWARDABLE = {
    19: "CreateTopics", 20: "DeleteTopics", 30: "CreateAcls", 31: "DeleteAcls", 33: "AlterConfigs",
    37: "CreatePartitions", 38: "CreateDelegationToken", 39: "RenewDelegationToken", 40: "ExpireDelegationToken",
    43: "ElectLeaders", 44: "IncrementalAlterConfigs", 45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments", 49: "AlterClientQuotas", 51: "AlterUserScramCredentials", 55: "DescribeQuorum",
    57: "UpdateFeatures", 64: "UnregisterBroker", 67: "AllocateProducerIds", 80: "AddRaftVoter", 81: "RemoveRaftVoter",
}  # fmt: skip
#: how deep an answer's error codes are looked for (the responses of the forwardable APIs nest two or three levels)
_MAX_ERROR_DEPTH = 8


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
        zk_migration: bool = False,
    ) -> None:
        super().__init__(config, listeners)
        self.session_timeout_ms = session_timeout_ms
        self.controller = QuorumController(
            self,
            bootstrap,
            session_timeout_ms,
            auto_finalize=auto_finalize,
            static_config=static_config,
            zk_migration=zk_migration,
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
            ApiKey.CREATE_TOPICS: c.create_topics,
            ApiKey.DELETE_TOPICS: c.delete_topics,
            ApiKey.CREATE_PARTITIONS: c.create_partitions,
            ApiKey.ALLOCATE_PRODUCER_IDS: c.allocate_producer_ids,
            ApiKey.ALTER_PARTITION: c.alter_partition,
            ApiKey.ELECT_LEADERS: c.elect_leaders,
            ApiKey.ASSIGN_REPLICAS_TO_DIRS: c.assign_replicas_to_dirs,
            ApiKey.ALTER_CLIENT_QUOTAS: c.alter_client_quotas,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: c.alter_user_scram_credentials,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: c.alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: c.list_partition_reassignments,
            ApiKey.CREATE_ACLS: c.create_acls,
            ApiKey.DELETE_ACLS: c.delete_acls,
            ApiKey.ENVELOPE: self.envelope,
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

    async def envelope(self, body: Mapping, version: int) -> dict:
        """Answers an EnvelopeRequest (KIP-590: a broker forwarding its client's request): the request
        in RequestData (a request header and body, no size prefix; already inside this frame's size
        bound) is answered by this node's handler for its API, and ResponseData is that answer with
        its response header (the inner version and correlation id), ErrorCode NONE. As Kafka's
        ``RequestChannel.buildResponseSend`` does, an inner answer carrying NOT_CONTROLLER becomes an
        Envelope-level NOT_CONTROLLER without ResponseData (the broker then finds the active
        controller). As Kafka's ``EnvelopeUtils``: an inner request whose header or body cannot be
        decoded at a version this node speaks is UNSUPPORTED_VERSION; an API that is not forwardable
        (an Envelope inside an Envelope among them) or a client address that is not 4 or 16 bytes is
        INVALID_REQUEST, each logged with the reason (EnvelopeResponse has no message field). A
        forwardable API this node does not serve is answered inside ResponseData with its own
        UNSUPPORTED_VERSION response naming it. RequestPrincipal is not interpreted: kraftkit's
        controller has no authorizer, so the forwarded principal is neither checked nor used."""
        data = body.get("RequestData") or b""
        peer = f"the envelope of {len(data)} bytes"

        def refuse(code: int, why: str) -> dict:
            log.warning("node %d: %s refused (%s): %s", self.node_id, peer, Errors(code).name, why)
            return {"ResponseData": None, "ErrorCode": code}

        address = body.get("ClientHostAddress") or b""
        if len(address) not in (4, 16):
            return refuse(
                Errors.INVALID_REQUEST, f"Failed to parse client address from envelope ({len(address)} bytes)"
            )
        try:
            api, inner_version, corr = request_header(data)
        except FrameError as e:
            return refuse(Errors.UNSUPPORTED_VERSION, f"Failed to parse request header from envelope: {e}")
        if api not in FORWARDABLE:
            return refuse(Errors.INVALID_REQUEST, f"API key {api} is not enabled or is not eligible for forwarding")
        name = FORWARDABLE[api]
        ours = self._versions.get(api)
        if ours is None or not ours[0] <= inner_version <= ours[1]:
            speaks = "no version" if ours is None else f"v{ours[0]}..{ours[1]}"
            return refuse(Errors.UNSUPPORTED_VERSION, f"forwarded {name} v{inner_version}: this node speaks {speaks}")
        try:
            inner = decode_request(data)[4]
        except KraftkitError as e:
            return refuse(Errors.UNSUPPORTED_VERSION, f"Failed to parse forwarded {name} v{inner_version}: {e}")
        handler = self._handlers.get(api)
        if api == ApiKey.DESCRIBE_QUORUM:
            answer = self._describe_quorum(inner, inner_version)
            not_controller = Errors.NOT_LEADER_OR_FOLLOWER in _error_codes(answer)
        elif handler is None or api not in self.served:
            log.info("node %d: forwarded %s v%d, which this node does not serve: UNSUPPORTED_VERSION", self.node_id,
                     name, inner_version)  # fmt: skip
            msg = f"node {self.node_id} does not serve {name} (not in its ApiVersions)"
            answer = error_response(api, inner_version, Errors.UNSUPPORTED_VERSION, msg)
            not_controller = False
        else:
            answer = await handler(inner, inner_version)
            not_controller = Errors.NOT_CONTROLLER in _error_codes(answer)
        if not_controller:
            return {"ResponseData": None, "ErrorCode": Errors.NOT_CONTROLLER}
        try:
            out = encode_response(api, inner_version, corr, answer)
        except Exception as e:  # a bug of this node, not of the request: said, not raised into the loop
            log.error("node %d: cannot encode the forwarded %s v%d answer: %s", self.node_id, name, inner_version, e)
            return {"ResponseData": None, "ErrorCode": Errors.UNKNOWN_SERVER_ERROR}
        return {"ResponseData": out, "ErrorCode": Errors.NONE}

    def _feature_fields(self, version: int) -> dict:
        fields = self.controller.features.api_versions_fields(self.controller.image, version)
        if self.controller.zk_migration and version >= 3:
            fields["ZkMigrationReady"] = True  # (KIP-919: this controller is configured for the migration)
        return fields

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


def _error_codes(answer: Any, depth: int = 0) -> set[int]:
    """Every ``...ErrorCode`` value of a response body (Kafka's ``errorCounts``), to a bounded depth."""
    out: set[int] = set()
    if depth > _MAX_ERROR_DEPTH:
        return out
    if isinstance(answer, Mapping):
        for k, v in answer.items():
            if isinstance(v, int) and isinstance(k, str) and k.endswith("ErrorCode"):
                out.add(v)
            elif isinstance(v, (list, Mapping)):
                out |= _error_codes(v, depth + 1)
    elif isinstance(answer, list):
        for v in answer:
            out |= _error_codes(v, depth + 1)
    return out
