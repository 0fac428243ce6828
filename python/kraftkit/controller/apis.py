"""``ControllerApis``: each request a kraftkit controller serves, answered as Kafka's ``ControllerApis``
answers it. A write (UpdateFeatures, the registration RPCs, (Incremental)AlterConfigs) is validated
against the committed image and its records committed through
:meth:`~kraftkit.controller.quorum_controller.QuorumController.submit`, one write at a time; the
response goes once they are committed (or says why not: NOT_CONTROLLER on a node that is not the
active controller, Kafka's error for a refused change, REQUEST_TIMED_OUT). A read (DescribeConfigs) is
answered from this node's committed image.

Bodies are the codec's dicts, typed by :mod:`kraftkit.protocol.types` so that mypy checks every field
name read or written here.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kraftkit.controller.acls import create_acls_response, delete_acls_response
from kraftkit.controller.client_quotas import alter_client_quotas, alter_client_quotas_response
from kraftkit.controller.cluster import ControllerError
from kraftkit.controller.configs import alter_response
from kraftkit.controller.producer_ids import ProducerIdsBlock
from kraftkit.controller.reassignments import PartitionReassignments
from kraftkit.controller.replication import create_topics_response
from kraftkit.controller.scram import alter_scram_response, alter_user_scram_credentials
from kraftkit.controller.topic_changes import (
    create_partitions,
    create_partitions_response,
    delete_topics,
    delete_topics_response,
)
from kraftkit.features.registry import MV_FEATURE
from kraftkit.features.rewrite import RewriteReport, loss_line
from kraftkit.protocol import types as t
from kraftkit.protocol.messages import Errors

if TYPE_CHECKING:
    from kraftkit.controller.quorum_controller import QuorumController

__all__ = ["ControllerApis"]

_T = TypeVar("_T")
log = logging.getLogger(__name__)

#: UpdateFeaturesRequest's default timeoutMs
DEFAULT_TIMEOUT_MS = 60000
#: how long a registration or heartbeat may wait for its records' commit (Kafka's controller
#: gives controller-bound requests request.timeout.ms, 30 s by default)
WRITE_TIMEOUT_MS = 30000


class ControllerApis:
    """The request handlers of one controller node (each returns an awaitable of its response)."""

    def __init__(self, controller: QuorumController) -> None:
        self.controller = controller
        self.node_id = controller.node.node_id
        self.reassignments = PartitionReassignments(controller.partitions)
        #: broker id -> why its last BrokerRegistration was refused (the migration says it)
        self.refused_registrations: dict[int, str] = {}

    def _answer(
        self, what: str | Callable[[], str], build: Callable[[], tuple[list[bytes], Any]], reply: Callable[..., Any]
    ) -> asyncio.Future:
        """The response future of a write: ``reply(answer)``, or ``reply(None, error)`` (``what`` names
        the request in a refusal or a timeout; a callable is called only then)."""
        c = self.controller
        out: asyncio.Future = asyncio.get_running_loop().create_future()
        if c.idle:
            # nothing ahead of it: validated now, as submit would, and a write without records (a
            # heartbeat, mostly) is answered at once without a future of its own
            try:
                c.check_active()
                records, answer = build()
            except ControllerError as e:
                self._refused(what, e)
                out.set_result(reply(None, e))
                return out
            if not records:
                out.set_result(reply(answer))
                return out
            built = (records, answer)
            build = lambda: built  # noqa: E731  (appended by submit, which runs it at once: nothing is ahead)

        def done(f: asyncio.Future) -> None:
            if out.done():
                return
            if f.cancelled():
                out.cancel()
                return
            e = f.exception()
            if e is None:
                out.set_result(reply(f.result()))
            elif isinstance(e, ControllerError):
                self._refused(what, e)
                out.set_result(reply(None, e))
            else:
                out.set_exception(e)

        inner = c.submit(what if isinstance(what, str) else what(), build, WRITE_TIMEOUT_MS)
        if inner.done():
            done(inner)  # answered within the call: no callback round through the loop
        else:
            inner.add_done_callback(done)
        return out

    def _gated(self, what: str, build: Callable[[], _T]) -> Callable[[], _T]:
        """``build``, refused while the ZooKeeper migration has no dual writes
        (:meth:`~kraftkit.controller.quorum_controller.QuorumController.check_no_dual_write`)."""

        def gated() -> _T:
            self.controller.check_no_dual_write(what)
            return build()

        return gated

    def _refused(self, what: str | Callable[[], str], e: ControllerError) -> None:
        if e.code != Errors.NOT_CONTROLLER:
            log.warning("node %d: %s refused: %s", self.node_id, what if isinstance(what, str) else what(), e.message)

    # ------------------------------------------------------------------ registration RPCs
    def register_broker(self, body: t.BrokerRegistrationRequest, version: int) -> asyncio.Future:
        """Answers a BrokerRegistrationRequest: the broker's epoch once its record is committed."""
        c = self.controller

        def build() -> tuple[list[bytes], int]:
            offset = c.node.replica().log.end_offset
            return c.cluster.register_broker(c.image, body, offset, c.image.kraft_version or 0, c.partition_changes())

        def reply(epoch: int | None, error: ControllerError | None = None) -> t.BrokerRegistrationResponse:
            bid = body.get("BrokerId", -1)
            if error is None:
                self.refused_registrations.pop(bid, None)
            elif error.code != Errors.NOT_CONTROLLER and len(self.refused_registrations) < 100_000:
                self.refused_registrations[bid] = f"{_error_name(error.code)}: {error.message}"
            return {
                "ThrottleTimeMs": 0,
                "ErrorCode": error.code if error else Errors.NONE,
                "BrokerEpoch": -1 if epoch is None else epoch,
            }

        return self._answer(f"BrokerRegistration of broker {body.get('BrokerId')}", build, reply)

    def broker_heartbeat(self, body: t.BrokerHeartbeatRequest, version: int) -> asyncio.Future:
        """Answers a BrokerHeartbeatRequest (unfencing, fencing, shutdown, as the rules say)."""
        c = self.controller

        def reply(r: Any, error: ControllerError | None = None) -> t.BrokerHeartbeatResponse:
            if r is None:
                return {
                    "ThrottleTimeMs": 0,
                    "ErrorCode": error.code if error else 0,
                    "IsCaughtUp": False,
                    "IsFenced": True,
                    "ShouldShutDown": False,
                }
            return {
                "ThrottleTimeMs": 0,
                "ErrorCode": 0,
                "IsCaughtUp": r.is_caught_up,
                "IsFenced": r.is_fenced,
                "ShouldShutDown": r.should_shut_down,
            }

        bid, epoch = body.get("BrokerId"), body.get("BrokerEpoch")
        if c.active and isinstance(bid, int) and isinstance(epoch, int):
            c.cluster.contacted(bid, epoch)
        return self._answer(
            lambda: f"BrokerHeartbeat of broker {body.get('BrokerId')}",
            lambda: c.cluster.heartbeat(c.image, body, c.partition_changes(), c.node.replica().log.end_offset),
            reply,
        )

    def unregister_broker(self, body: t.UnregisterBrokerRequest, version: int) -> asyncio.Future:
        c = self.controller
        bid = body.get("BrokerId", -1)
        return self._answer(
            f"UnregisterBroker of broker {bid}",
            self._gated("UnregisterBroker", lambda: (c.partitions.broker_unregistered(c.image, bid), None)),
            _error_message_reply,
        )

    def register_controller(self, body: t.ControllerRegistrationRequest, version: int) -> asyncio.Future:
        c = self.controller
        return self._answer(
            f"ControllerRegistration of controller {body.get('ControllerId')}",
            lambda: (c.cluster.register_controller(c.image, body), None),
            _error_message_reply,
        )

    # ------------------------------------------------------------------ configs (KIP-919)
    def describe_configs(self, body: t.DescribeConfigsRequest, version: int) -> asyncio.Future:
        """Answers DescribeConfigs from this node's committed image (any node, as Kafka's do)."""
        c = self.controller
        out: asyncio.Future = asyncio.get_running_loop().create_future()
        out.set_result(c.configs.describe(c.image, body, version))
        return out

    def incremental_alter_configs(self, body: t.IncrementalAlterConfigsRequest, version: int) -> asyncio.Future:
        """Answers IncrementalAlterConfigs once its ConfigRecords are committed (none: ValidateOnly)."""
        c = self.controller
        gate = _configs_gate("IncrementalAlterConfigs", body)
        build = self._gated(gate, functools.partial(c.configs.incremental_alter, c.image, body))
        return self._answer("IncrementalAlterConfigs", build, functools.partial(alter_response, body))

    def alter_configs(self, body: t.AlterConfigsRequest, version: int) -> asyncio.Future:
        """Answers the legacy AlterConfigs (the resource's configs replaced by those given)."""
        c = self.controller
        build = self._gated(
            _configs_gate("AlterConfigs", body), functools.partial(c.configs.legacy_alter, c.image, body)
        )
        return self._answer("AlterConfigs", build, functools.partial(alter_response, body))

    # ------------------------------------------------------------------ topics
    def create_topics(self, body: t.CreateTopicsRequest, version: int) -> asyncio.Future:
        """Answers CreateTopics (:mod:`kraftkit.controller.replication`) once its records are committed
        as one batch (none: validateOnly, or every topic refused)."""
        c = self.controller
        build = self._gated("CreateTopics", functools.partial(c.replication.create_topics, c.image, body))
        return self._answer("CreateTopics", build, functools.partial(create_topics_response, body))

    # ------------------------------------------------------------------ partition leadership
    def alter_partition(self, body: t.AlterPartitionRequest, version: int) -> asyncio.Future:
        """Answers AlterPartition (ISR changes from partition leaders, :mod:`kraftkit.controller.partitions`)
        once its PartitionChangeRecords are committed."""
        c = self.controller

        def reply(answer: Any, error: ControllerError | None = None) -> t.AlterPartitionResponse:
            if error is not None:
                return {"ThrottleTimeMs": 0, "ErrorCode": error.code, "Topics": []}
            return answer

        build = self._gated("AlterPartition", functools.partial(c.partitions.alter_partition, c.image, body, version))
        return self._answer(lambda: f"AlterPartition of broker {body.get('BrokerId')}", build, reply)

    def assign_replicas_to_dirs(self, body: t.AssignReplicasToDirsRequest, version: int) -> asyncio.Future:
        """Answers AssignReplicasToDirs (where a broker with several log directories put its replicas)
        once its PartitionChangeRecords are committed."""
        c = self.controller

        def reply(answer: Any, error: ControllerError | None = None) -> t.AssignReplicasToDirsResponse:
            if error is not None:
                return {"ThrottleTimeMs": 0, "ErrorCode": error.code, "Directories": []}
            return answer

        build = self._gated(
            "AssignReplicasToDirs", functools.partial(c.partitions.assign_replicas_to_dirs, c.image, body)
        )
        return self._answer(lambda: f"AssignReplicasToDirs of broker {body.get('BrokerId')}", build, reply)

    def elect_leaders(self, body: t.ElectLeadersRequest, version: int) -> asyncio.Future:
        """Answers ElectLeaders (preferred or unclean) once its PartitionChangeRecords are committed."""
        c = self.controller

        def reply(answer: Any, error: ControllerError | None = None) -> t.ElectLeadersResponse:
            if error is None:
                return answer
            # Kafka's ElectLeadersRequest.getErrorResponse: every partition asked for carries the error
            results: list[t.ElectLeadersResponseReplicaElectionResult] = [
                {
                    "Topic": tp.get("Topic") or "",
                    "PartitionResult": [
                        {"PartitionId": p, "ErrorCode": error.code, "ErrorMessage": error.message}
                        for p in tp.get("Partitions") or []
                    ],
                }
                for tp in body.get("TopicPartitions") or []
            ]
            return {"ThrottleTimeMs": 0, "ErrorCode": error.code, "ReplicaElectionResults": results}

        build = self._gated("ElectLeaders", functools.partial(c.partitions.elect_leaders, c.image, body))
        return self._answer("ElectLeaders", build, reply)

    def delete_topics(self, body: t.DeleteTopicsRequest, version: int) -> asyncio.Future:
        """Answers DeleteTopics (:mod:`kraftkit.controller.topic_changes`) once its RemoveTopicRecords
        are committed as one batch (none: every topic refused)."""
        c = self.controller
        build = self._gated("DeleteTopics", functools.partial(delete_topics, c.replication, c.image, body, version))
        return self._answer("DeleteTopics", build, functools.partial(delete_topics_response, body, version))

    def create_partitions(self, body: t.CreatePartitionsRequest, version: int) -> asyncio.Future:
        """Answers CreatePartitions (:mod:`kraftkit.controller.topic_changes`) once its PartitionRecords
        are committed as one batch (none: ValidateOnly, or every topic refused)."""
        c = self.controller
        build = self._gated("CreatePartitions", functools.partial(create_partitions, c.replication, c.image, body))
        return self._answer("CreatePartitions", build, functools.partial(create_partitions_response, body))

    # ------------------------------------------------------------------ partition reassignments
    def alter_partition_reassignments(self, body: t.AlterPartitionReassignmentsRequest, version: int) -> asyncio.Future:
        """Answers AlterPartitionReassignments (:mod:`kraftkit.controller.reassignments`) once its
        PartitionChangeRecords are committed; a request naming no topic at once, on any node (as
        Kafka's ``QuorumController``: a fresh response, ErrorMessage "")."""
        if not body.get("Topics"):
            out: asyncio.Future = asyncio.get_running_loop().create_future()
            empty: t.AlterPartitionReassignmentsResponse = {"ThrottleTimeMs": 0, "AllowReplicationFactorChange": True,
                                                            "ErrorCode": Errors.NONE, "ErrorMessage": "",
                                                            "Responses": []}  # fmt: skip
            out.set_result(empty)
            return out
        c = self.controller

        def reply(answer: Any, error: ControllerError | None = None) -> t.AlterPartitionReassignmentsResponse:
            if error is None:
                return answer
            # Kafka's AlterPartitionReassignmentsRequest.getErrorResponse: every partition carries the error
            return {
                "ThrottleTimeMs": 0,
                "AllowReplicationFactorChange": True,
                "ErrorCode": error.code,
                "ErrorMessage": error.message,
                "Responses": [
                    {
                        "Name": td.get("Name") or "",
                        "Partitions": [
                            {
                                "PartitionIndex": pd.get("PartitionIndex", 0),
                                "ErrorCode": error.code,
                                "ErrorMessage": error.message,
                            }
                            for pd in td.get("Partitions") or []
                        ],
                    }
                    for td in body.get("Topics") or []
                ],
            }

        return self._answer(
            "AlterPartitionReassignments",
            self._gated("AlterPartitionReassignments", lambda: self.reassignments.alter_reassignments(c.image, body)),
            reply,
        )

    def list_partition_reassignments(self, body: t.ListPartitionReassignmentsRequest, version: int) -> asyncio.Future:
        """Answers ListPartitionReassignments from this node's committed image. As Kafka's controllers
        answer it: a read event, run by a standby controller too (from its committed state)."""
        out: asyncio.Future = asyncio.get_running_loop().create_future()
        out.set_result(self.reassignments.list_reassignments(self.controller.image, body))
        return out

    # ------------------------------------------------------------------ ACLs
    def create_acls(self, body: t.CreateAclsRequest, version: int) -> asyncio.Future:
        """Answers CreateAcls (:mod:`kraftkit.controller.acls`; no authorizer checks the principal)
        once its AccessControlEntryRecords are committed as one batch."""
        c = self.controller
        build = self._gated("CreateAcls", functools.partial(c.acls.create_acls, c.image, body))
        return self._answer("CreateAcls", build, functools.partial(create_acls_response, body))

    def delete_acls(self, body: t.DeleteAclsRequest, version: int) -> asyncio.Future:
        """Answers DeleteAcls once its RemoveAccessControlEntryRecords are committed as one batch."""
        c = self.controller
        build = self._gated("DeleteAcls", functools.partial(c.acls.delete_acls, c.image, body))
        return self._answer("DeleteAcls", build, functools.partial(delete_acls_response, body))

    # ------------------------------------------------------------------ producer ids
    def allocate_producer_ids(self, body: t.AllocateProducerIdsRequest, version: int) -> asyncio.Future:
        """Answers AllocateProducerIds with the next block of producer ids once its ProducerIdsRecord
        is committed (:mod:`kraftkit.controller.producer_ids`)."""
        c = self.controller
        bid, epoch = body.get("BrokerId", -1), body.get("BrokerEpoch", -1)

        def reply(
            block: ProducerIdsBlock | None, error: ControllerError | None = None
        ) -> t.AllocateProducerIdsResponse:
            return {
                "ThrottleTimeMs": 0,
                "ErrorCode": error.code if error else Errors.NONE,
                "ProducerIdStart": block.first if block else 0,
                "ProducerIdLen": block.size if block else 0,
            }

        build = self._gated(
            "AllocateProducerIds", functools.partial(c.producer_ids.generate_next_block, c.image, bid, epoch)
        )
        return self._answer(f"AllocateProducerIds of broker {bid}", build, reply)

    # ------------------------------------------------------------------ client quotas, SCRAM credentials
    def alter_client_quotas(self, body: t.AlterClientQuotasRequest, version: int) -> asyncio.Future:
        """Answers AlterClientQuotas (:mod:`kraftkit.controller.client_quotas`) once its ClientQuotaRecords
        are committed (none: ValidateOnly, or every entity refused)."""
        c = self.controller
        reply = functools.partial(alter_client_quotas_response, body)
        if not body.get("Entries"):
            return _now(reply([]))  # (Kafka's controller answers an empty request without a write)
        return self._answer(
            "AlterClientQuotas", self._gated("AlterClientQuotas", lambda: alter_client_quotas(c.image, body)), reply
        )

    def alter_user_scram_credentials(self, body: t.AlterUserScramCredentialsRequest, version: int) -> asyncio.Future:
        """Answers AlterUserScramCredentials (:mod:`kraftkit.controller.scram`) once its records are committed."""
        c = self.controller
        reply = functools.partial(alter_scram_response, body)
        if not body.get("Deletions") and not body.get("Upsertions"):
            return _now(reply([]))
        return self._answer(
            "AlterUserScramCredentials",
            self._gated("AlterUserScramCredentials", lambda: alter_user_scram_credentials(c.image, body)),
            reply,
        )

    # ------------------------------------------------------------------ UpdateFeatures
    async def update_features(self, body: t.UpdateFeaturesRequest, version: int) -> t.UpdateFeaturesResponse:
        """Answers an UpdateFeatures request (decoded at ``version``): validated against the image,
        its FeatureLevelRecords committed as one batch unless ``ValidateOnly``; the answer comes
        once they are committed (or the request's ``timeoutMs`` passed: REQUEST_TIMED_OUT). A lossy
        metadata.version downgrade is over once this replica loaded its image rewritten at the new
        level: the answer then says what the rewrite lost, and the next write sees the new image."""
        c = self.controller
        updates = body.get("FeatureUpdates") or []
        names = [u.get("Feature", "") for u in updates]
        # (Kafka's controller sets no deadline on UpdateFeatures; kraftkit honours the request's own
        # timeoutMs, 60 s when it gives none, so an answer never waits on a commit forever)
        timeout_ms = body.get("timeoutMs", 0)
        if timeout_ms <= 0:
            timeout_ms = DEFAULT_TIMEOUT_MS
        validate_only = bool(body.get("ValidateOnly"))
        lossy: list[RewriteReport] = []  # the dry run of a lossy metadata.version downgrade, if it is one

        def build() -> tuple[list[bytes], RewriteReport | None]:
            change = c.features.update_features(c.image, body, version)
            if change.error_code != Errors.NONE:
                raise ControllerError(change.error_code, change.message or "")
            lossy[:] = [change.report] if change.report is not None else []
            return ([] if validate_only else change.records), change.report

        def hold(end: int) -> asyncio.Future | None:
            return c.rewrite_waiter(end) if lossy else None

        try:
            report = await c.submit("UpdateFeatures", build, timeout_ms, "feature-update-appended", hold)
        except ControllerError as e:
            if e.code != Errors.NOT_CONTROLLER:
                log.warning("node %d: UpdateFeatures refused: %s", self.node_id, e.message)
            return _update_answer(version, e.code, e.message, names)
        if not validate_only:
            changed = ", ".join(f"{u.get('Feature')}={u.get('MaxVersionLevel')}" for u in updates)
            log.info("node %d: UpdateFeatures committed: %s", self.node_id, changed)
        # (Kafka's clients read no message from a success; kraftkit's show what the rewrite lost)
        message = None if report is None else _rewrite_summary(report, validate_only)
        return _update_answer(version, Errors.NONE, message, names)


def _error_name(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return f"error {code}"


def _now(answer: Any) -> asyncio.Future:
    out: asyncio.Future = asyncio.get_running_loop().create_future()
    out.set_result(answer)
    return out


def _error_message_reply(_answer: Any, error: ControllerError | None = None) -> dict[str, Any]:
    """An UnregisterBroker or ControllerRegistration response. A success carries the schema's
    default ErrorMessage "", not null: Kafka's ControllerApis answers with a fresh response object."""
    return {
        "ThrottleTimeMs": 0,
        "ErrorCode": error.code if error else 0,
        "ErrorMessage": error.message if error else "",
    }


def _rewrite_summary(report: RewriteReport, validate_only: bool) -> str:
    """What a lossy metadata.version downgrade lost (or would lose), in one message."""
    verb = "would rewrite" if validate_only else "rewrote"
    lost = "; ".join(loss_line(x) for x in report.losses) or "nothing"
    changed = [f"{c['name']} {c['from']} -> {c['to']}" for c in report.feature_changes if c["name"] != MV_FEATURE]
    return (
        f"kraftkit {verb} the metadata at metadata.version {report.target.name} ({report.counts.get('records_in', 0)} "
        f"records in, {report.counts.get('records_out', 0)} out); lost: {lost}"
        + (f"; features lowered: {', '.join(changed)}" if changed else "")
    )


def _update_answer(version: int, error: int, message: str | None, names: list[str]) -> t.UpdateFeaturesResponse:
    """An UpdateFeaturesResponse: per-feature results only for a success below v2 (Kafka's rule)."""
    results: list[t.UpdateFeaturesResponseUpdatableFeatureResult] = (
        [{"Feature": n, "ErrorCode": 0, "ErrorMessage": None} for n in dict.fromkeys(names)]
        if error == Errors.NONE and version <= 1
        else []
    )
    return {"ThrottleTimeMs": 0, "ErrorCode": error, "ErrorMessage": message, "Results": results}


def _configs_gate(name: str, body: Any) -> str:
    """What a config write is to the ZooKeeper migration's gate: ``name`` when it alters topic and
    broker configs only (ZooKeeper keeps those), else ``name of <TYPES> configs``."""
    from kraftkit.metadata.image import CONFIG_TYPES

    kinds = {r.get("ResourceType") for r in body.get("Resources") or [] if isinstance(r, dict)}
    other = sorted(k for k in kinds if k not in (2, 4) and isinstance(k, int))
    return name if not other else f"{name} of {'/'.join(CONFIG_TYPES.get(k, str(k)) for k in other)} configs"
