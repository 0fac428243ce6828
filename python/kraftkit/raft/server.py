"""The raft node's server: its listener and what it answers, over the driver
(:class:`~kraftkit.raft.driver.RaftDriver`, which runs the cores).

:class:`RaftNode` owns one listener for every hosted raft partition and hands the quorum RPCs
(Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot) to the core of the partition they
name. Besides those it serves ApiVersions, DescribeQuorum, DescribeCluster (so Kafka's own
``kafka-metadata-quorum.sh`` works against it) and Produce to ``__cluster_metadata`` (the wire path
for appends: each batch's records must be metadata records; ``acks=-1`` answers once they are
committed). What a client can make it hold is bounded by :class:`~kraftkit.raft.transport.ListenerLimits`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from kraftkit._core import check_metadata_batches
from kraftkit.errors import KraftkitError
from kraftkit.protocol.messages import ApiKey, decode_request, error_response, supported_versions
from kraftkit.raft import messages as m
from kraftkit.raft.driver import NodeConfig, NotLeaderError, RaftDriver, Replica
from kraftkit.raft.events import Receive
from kraftkit.raft.file_log import MAX_BATCH_BYTES, ClientBatches
from kraftkit.raft.messages import Errors, TopicPartition
from kraftkit.raft.quorum_state import Role
from kraftkit.raft.state import LeaderState
from kraftkit.raft.transport import (
    RequestBudget,
    RequestLimitError,
    ServerConnection,
    request_header,
)
from kraftkit.raft.voters import KRAFT_VERSION_RANGE

__all__ = ["RaftNode"]

#: (the node's log keeps the name it had before the driver and the server were two modules)
log = logging.getLogger("kraftkit.raft.node")

log = logging.getLogger(__name__)

#: The APIs the listener answers (at the versions the codec speaks)
SERVED = (
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.API_VERSIONS,
    ApiKey.VOTE,
    ApiKey.BEGIN_QUORUM_EPOCH,
    ApiKey.END_QUORUM_EPOCH,
    ApiKey.DESCRIBE_QUORUM,
    ApiKey.FETCH_SNAPSHOT,
    ApiKey.DESCRIBE_CLUSTER,
    ApiKey.ADD_RAFT_VOTER,
    ApiKey.REMOVE_RAFT_VOTER,
    ApiKey.UPDATE_RAFT_VOTER,
)
RAFT_APIS = (m.VOTE, m.BEGIN_QUORUM_EPOCH, m.END_QUORUM_EPOCH, m.FETCH, m.FETCH_SNAPSHOT)
CONTROLLER_LISTENER = "CONTROLLER"


def _batch_over(data: bytes, limit: int) -> tuple[int, int] | None:
    """(byte position, size) of the first record batch in ``data`` over ``limit`` bytes, read
    from the batch length fields alone (whatever else is wrong is for the batch checks)."""
    view = memoryview(data)
    pos, n = 0, len(view)
    while n - pos >= 12:
        size = 12 + int.from_bytes(view[pos + 8 : pos + 12], "big", signed=True)
        if size > limit:
            return pos, size
        if size <= 12:
            return None
        pos += size
    return None


class RaftNode(RaftDriver):
    """A raft node over TCP: the driver and its listener. ``await node.start()``, then
    ``await node.append([...])``; ``await node.stop()`` resigns gracefully if it leads.

    A node built on it (the controller) serves more APIs: it extends :attr:`served`, answers them
    in :meth:`_other_request` and fills ApiVersions' feature fields in :meth:`_feature_fields`."""

    #: the APIs this node answers
    served: tuple[int, ...] = SERVED

    def __init__(self, config: NodeConfig, listeners: list[Any] | None = None) -> None:
        super().__init__(config, listeners)
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[ServerConnection] = set()
        self._conns_per_ip: dict[str, int] = {}
        self._budget = RequestBudget(config.limits.buffered_request_max_bytes)  # type: ignore[arg-type]
        self._produce_pending = 0  # bytes of Produce records accepted and not answered yet
        self._served = frozenset(self.served)
        self._versions = supported_versions()
        self.address: tuple[str, int] | None = None

    # ------------------------------------------------------------------ life cycle
    async def start(self) -> None:
        self._open_replicas()
        host, port = self.config.listen  # type: ignore[misc]
        self._server = await asyncio.get_running_loop().create_server(self._connection, host, port, reuse_address=True)
        sock = self._server.sockets[0].getsockname()
        self.address = (sock[0], sock[1])
        self._start_cores(self.address if host not in ("0.0.0.0", "::", "") else None)
        log.info("node %d listening on %s:%d (voters %s)", self.node_id, *self.address, sorted(self.config.voters))

    async def stop(self, *, resign: bool = True, timeout: float = 1.0) -> None:
        """Stops the node; a leader first resigns (EndQuorumEpoch) and waits up to ``timeout`` s
        for the voters to hear it."""
        if self._loop is None:
            return
        await self._finish_snapshots_and_resign(resign, timeout)
        if self._server is not None:
            self._server.close()
        for c in list(self._conns):
            c.close()
        await self._close_peers()
        self._close_replicas()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            except TimeoutError:
                pass
        self._loop = None
        if self._stopped is not None:
            self._stopped.set()

    async def wait_stopped(self) -> None:
        assert self._stopped is not None
        await self._stopped.wait()

    # ------------------------------------------------------------------ the listener
    def _connection(self) -> ServerConnection:
        return ServerConnection(
            self.config.limits, self._budget, admit=self._admit, handle=self._handle, lost=self._connection_lost
        )

    def _admit(self, conn: ServerConnection) -> bool:
        limits = self.config.limits
        if len(self._conns) >= limits.max_connections:
            log.warning(
                "node %d: connection from %s refused: %d connections open (the limit)",
                self.node_id,
                conn.peer,
                len(self._conns),
            )
            return False
        if self._conns_per_ip.get(conn.ip, 0) >= limits.max_connections_per_ip:
            log.warning(
                "node %d: connection from %s refused: %d connections from %s open (max.connections.per.ip)",
                self.node_id,
                conn.peer,
                self._conns_per_ip[conn.ip],
                conn.ip,
            )
            return False
        self._conns.add(conn)
        self._conns_per_ip[conn.ip] = self._conns_per_ip.get(conn.ip, 0) + 1
        return True

    def _connection_lost(self, conn: ServerConnection, error: BaseException | None) -> None:
        if isinstance(error, RequestLimitError):
            log.warning("node %d: connection from %s closed: %s", self.node_id, conn.peer, error)
        elif error is not None:
            log.debug("node %d: connection from %s dropped: %s", self.node_id, conn.peer, error)
        self._conns.discard(conn)
        left = self._conns_per_ip.get(conn.ip, 1) - 1
        if left:
            self._conns_per_ip[conn.ip] = left
        else:
            self._conns_per_ip.pop(conn.ip, None)

    def _handle(self, conn: ServerConnection, frame: bytes) -> None:
        api, version, corr = request_header(frame)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        ours = self._versions.get(api)
        if api not in self._served and ours is not None and ours[0] <= version <= ours[1]:
            self._unserved(conn, frame, api, version, corr, fut)
            return
        if api not in self._served or ours is None:
            what = f"apiKey {api} v{version}, an API kraftkit does not know"
            if ours is not None:
                what = (
                    f"{ApiKey(api).name} v{version}, which this node does not serve nor speak (v{ours[0]}..{ours[1]})"
                )
            log.warning("node %d: %s sent %s; closing", self.node_id, conn.peer, what)
            conn.close()
            return
        if not ours[0] <= version <= ours[1]:
            if api == ApiKey.API_VERSIONS:  # KIP-511: answer in v0 with what we support
                conn.enqueue(fut, api, 0, corr)
                fut.set_result(self._api_versions_body(Errors.UNSUPPORTED_VERSION, 0))
                conn.settle(fut)
                return
            log.warning(
                "node %d: %s sent %s v%d, outside %s; closing", self.node_id, conn.peer, ApiKey(api).name, version, ours
            )
            conn.close()
            return
        try:
            _api, _v, _corr, _client, body = decode_request(frame)
        except KraftkitError as e:
            log.warning(
                "node %d: malformed %s v%d request from %s: %s; closing",
                self.node_id,
                ApiKey(api).name,
                version,
                conn.peer,
                e,
            )
            conn.close()
            return
        conn.enqueue(fut, api, version, corr)
        try:
            if api == ApiKey.API_VERSIONS:
                fut.set_result(self._api_versions_body(0, version))
            elif api in RAFT_APIS:
                self._raft_request(conn, api, body, fut)
            elif api == ApiKey.DESCRIBE_QUORUM:
                fut.set_result(self._describe_quorum(body, version))
            elif api == ApiKey.DESCRIBE_CLUSTER:
                fut.set_result(self._describe_cluster(body))
            elif api in (ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER):
                self._raft_request(conn, api, body, fut)  # the leader's core carries the change out
            elif api == ApiKey.UPDATE_RAFT_VOTER:
                if self.replica().core.dynamic:
                    self._raft_request(conn, api, body, fut)
                else:
                    fut.set_result(self._update_raft_voter(body))
            elif api == ApiKey.PRODUCE:
                self._produce(body, version, fut)
            else:
                self._other_request(conn, api, version, body, fut)
        except Exception as e:
            log.exception("node %d: %s request failed", self.node_id, ApiKey(api).name)
            if not fut.done():
                fut.set_exception(e)
        conn.settle(fut)  # answered within the call: out now, not a loop round later

    def _unserved(
        self, conn: ServerConnection, frame: bytes, api: int, version: int, corr: int, fut: asyncio.Future
    ) -> None:
        """A request of an API kraftkit knows and this node does not serve (not in its ApiVersions):
        answered at its version with UNSUPPORTED_VERSION, not by closing the connection (a Produce
        with acks=0 gets no answer, as none is awaited)."""
        try:
            body = decode_request(frame)[4]
        except KraftkitError as e:
            log.warning("node %d: malformed apiKey %d v%d request from %s: %s; closing", self.node_id, api, version,
                        conn.peer, e)  # fmt: skip
            conn.close()
            return
        name = ApiKey(api).name
        log.info("node %d: %s sent %s v%d, which this node does not serve: UNSUPPORTED_VERSION", self.node_id,
                 conn.peer, name, version)  # fmt: skip
        conn.enqueue(fut, api, version, corr)
        if api == ApiKey.PRODUCE and body.get("Acks") == 0:
            fut.set_result(None)
        else:
            msg = f"node {self.node_id} does not serve {name} (not in its ApiVersions)"
            fut.set_result(error_response(api, version, Errors.UNSUPPORTED_VERSION, msg))
        conn.flush()

    def _other_request(self, conn: ServerConnection, api: int, version: int, body: dict, fut: asyncio.Future) -> None:
        """Answers a request of an API in :attr:`served` that the raft node itself does not."""
        raise NotImplementedError(f"no handler for {ApiKey(api).name}")

    def _feature_fields(self, version: int) -> dict:
        """ApiVersions' SupportedFeatures, FinalizedFeaturesEpoch and FinalizedFeatures for an
        answer at ``version``: a bare raft node supports kraft.version (what a leader adding it as
        a voter asks; a range from 0 is left out below v4, KAFKA-17492) and finalizes nothing."""
        lo, hi = KRAFT_VERSION_RANGE
        supported = [{"Name": "kraft.version", "MinVersion": lo, "MaxVersion": hi}] if version >= 4 else []
        return {"SupportedFeatures": supported, "FinalizedFeaturesEpoch": -1, "FinalizedFeatures": []}

    def _api_versions_body(self, error: int, version: int) -> dict:
        versions = supported_versions()
        keys = [
            {"ApiKey": int(a), "MinVersion": versions[a][0], "MaxVersion": versions[a][1]}
            for a in sorted(self.served)
            if a in versions
        ]
        return {
            "ErrorCode": error,
            "ApiKeys": keys,
            "ThrottleTimeMs": 0,
            "ZkMigrationReady": False,
            **self._feature_fields(version),  # (a controller running a ZK migration says it is ready)
        }

    def _request_tp(self, api: int, body: dict) -> TopicPartition | None:
        one = m.single_partition(body, api)
        if one is None:
            return None
        for tp in self.replicas:
            if m.topic_matches(tp, api, one[0], one[1]):
                return tp
        return None

    def _raft_request(self, conn: ServerConnection, api: int, body: dict, fut: asyncio.Future) -> None:
        tp = self._request_tp(api, body)
        rep = self.replicas.get(tp) if tp is not None else None
        if rep is None:
            # not a partition we host (or several at once): let the first replica's core answer
            # INVALID_REQUEST / UNKNOWN_TOPIC_OR_PARTITION as Kafka does
            rep = next(iter(self.replicas.values()))
        rid = self._next_inbound
        self._next_inbound += 1
        self._inbound[rid] = fut
        fut.add_done_callback(lambda _f: self._inbound.pop(rid, None))
        self._step(rep, Receive(self.now(), -conn.id, api, body, rid, False))

    # -- UpdateRaftVoter (KIP-853): what Kafka 4.x voters send their leader
    def _update_raft_voter(self, body: dict) -> dict:
        """A voter's new endpoints and kraft.version range, sent by Kafka 4.x voters to their leader.
        This quorum is static (kraft.version 0), so the leader answers as Kafka's leader answers at
        kraft.version 0: UNSUPPORTED_VERSION (REQUEST_TIMED_OUT while its epoch is not committed yet),
        after Kafka's cluster id and epoch checks (INCONSISTENT_CLUSTER_ID, FENCED_LEADER_EPOCH,
        UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER); every answer names the leader and epoch. Never
        INVALID_REQUEST, which a Kafka voter takes for a bug and stops on."""
        core = next(iter(self.replicas.values())).core
        epoch, leader = core.epoch, core.leader_id
        asked = body.get("CurrentLeaderEpoch", -1)
        if body.get("ClusterId") is not None and body["ClusterId"] != self.config.cluster_id:
            error = Errors.INCONSISTENT_CLUSTER_ID
        elif asked < epoch:
            error = Errors.FENCED_LEADER_EPOCH
        elif asked > epoch:
            error = Errors.UNKNOWN_LEADER_EPOCH
        elif not isinstance(core.state, LeaderState):
            error = Errors.NOT_LEADER_OR_FOLLOWER
        elif core.state.high_watermark is None:
            error = Errors.REQUEST_TIMED_OUT
        else:
            error = Errors.UNSUPPORTED_VERSION
        host, port = "", -1
        if leader == self.node_id and self.address is not None:
            host, port = self.config.voters.get(leader, self.address)
        elif leader >= 0 and self.address_of(leader) is not None:
            host, port = self.address_of(leader)  # type: ignore[misc]
        return {
            "ThrottleTimeMs": 0,
            "ErrorCode": error,
            "CurrentLeader": {"LeaderId": leader, "LeaderEpoch": epoch, "Host": host, "Port": port},
        }

    # -- DescribeQuorum / DescribeCluster (what kafka-metadata-quorum.sh asks)
    def _describe_quorum(self, body: dict, version: int) -> dict:
        topics = []
        for t in body.get("Topics") or []:
            parts = []
            for p in t.get("Partitions") or []:
                tp = next(
                    (
                        x
                        for x in self.replicas
                        if x.topic == t.get("TopicName") and x.partition == p.get("PartitionIndex")
                    ),
                    None,
                )
                info = self.replicas[tp].core.quorum_info() if tp is not None else None
                if tp is None:
                    parts.append(
                        {
                            "PartitionIndex": p.get("PartitionIndex", 0),
                            "ErrorCode": Errors.UNKNOWN_TOPIC_OR_PARTITION,
                            "ErrorMessage": None,
                            "LeaderId": -1,
                            "LeaderEpoch": -1,
                            "HighWatermark": -1,
                            "CurrentVoters": [],
                            "Observers": [],
                        }
                    )
                    continue
                core = self.replicas[tp].core
                if info is None:
                    parts.append(
                        {
                            "PartitionIndex": tp.partition,
                            "ErrorCode": Errors.NOT_LEADER_OR_FOLLOWER,
                            "ErrorMessage": f"node {self.node_id} is not the leader (leader {core.leader_id})",
                            "LeaderId": core.leader_id,
                            "LeaderEpoch": core.epoch,
                            "HighWatermark": -1,
                            "CurrentVoters": [],
                            "Observers": [],
                        }
                    )
                    continue

                def st(r: dict) -> dict:
                    return {
                        "ReplicaId": r["id"],
                        "ReplicaDirectoryId": r.get("directory_id", uuid.UUID(int=0)),
                        "LogEndOffset": r["end_offset"],
                        "LastFetchTimestamp": self.wall_ms(r["last_fetch"]),
                        "LastCaughtUpTimestamp": self.wall_ms(r["last_caught_up"]),
                    }

                parts.append(
                    {
                        "PartitionIndex": tp.partition,
                        "ErrorCode": 0,
                        "ErrorMessage": None,
                        "LeaderId": info["leader_id"],
                        "LeaderEpoch": info["epoch"],
                        "HighWatermark": info["high_watermark"],
                        "CurrentVoters": [st(r) for r in info["voters"]],
                        "Observers": [st(r) for r in info["observers"]],
                    }
                )
            topics.append({"TopicName": t.get("TopicName", ""), "Partitions": parts})
        nodes = [
            {"NodeId": v, "Listeners": [{"Name": self.config.listener_name, "Host": h, "Port": p}]}
            for v, (h, p) in sorted(self.voter_addresses().items())
        ]
        return {"ErrorCode": 0, "ErrorMessage": None, "Topics": topics, "Nodes": nodes if version >= 2 else []}

    def _describe_cluster(self, body: dict) -> dict:
        rep = self.replica()
        leader = rep.core.leader_id
        controllers = [
            {"BrokerId": v, "Host": h, "Port": p, "Rack": None, "IsFenced": False}
            for v, (h, p) in sorted(self.voter_addresses().items())
        ]
        return {
            "ThrottleTimeMs": 0,
            "ErrorCode": 0,
            "ErrorMessage": None,
            "EndpointType": 2,
            "ClusterId": self.config.cluster_id,
            "ControllerId": leader if leader >= 0 else -1,
            "Brokers": controllers,
            "ClusterAuthorizedOperations": -2147483648,
        }

    # -- Produce (appends over the wire)
    def _produce(self, body: dict, version: int, fut: asyncio.Future) -> None:
        acks = body.get("Acks", -1)
        timeout_ms = max(0, body.get("TimeoutMs", 30000))
        loop = asyncio.get_running_loop()
        answers: list[tuple[dict, list]] = []
        items: list[tuple[dict, Replica, ClientBatches]] = []
        for t in body.get("TopicData") or []:
            parts_out: list[dict] = []
            answers.append(({"Name": t.get("Name", ""), "TopicId": t.get("TopicId", uuid.UUID(int=0))}, parts_out))
            for p in t.get("PartitionData") or []:
                ans = {
                    "Index": p.get("Index", 0),
                    "ErrorCode": 0,
                    "BaseOffset": -1,
                    "LogAppendTimeMs": -1,
                    "LogStartOffset": -1,
                    "RecordErrors": [],
                    "ErrorMessage": None,
                    "CurrentLeader": {"LeaderId": -1, "LeaderEpoch": -1},
                }
                parts_out.append(ans)
                rep = next(
                    (
                        r
                        for r in self.replicas.values()
                        if r.tp.partition == ans["Index"]
                        and (r.tp.topic == t.get("Name") or (version >= 13 and r.tp.topic_id == t.get("TopicId")))
                    ),
                    None,
                )
                if rep is None:
                    ans["ErrorCode"] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                ans["CurrentLeader"] = {"LeaderId": rep.core.leader_id, "LeaderEpoch": rep.core.epoch}
                if rep.core.role is not Role.LEADER:
                    ans["ErrorCode"] = Errors.NOT_LEADER_OR_FOLLOWER
                    ans["ErrorMessage"] = f"node {self.node_id} is not the leader (leader {rep.core.leader_id})"
                    continue
                records = p.get("Records")
                too_large = _batch_over(records, MAX_BATCH_BYTES) if records else None
                if too_large is not None:
                    ans["ErrorCode"], ans["ErrorMessage"] = (
                        Errors.MESSAGE_TOO_LARGE,
                        (
                            f"the batch at byte {too_large[0]} is {too_large[1]} bytes, over the {MAX_BATCH_BYTES}-byte "
                            "limit of a metadata log batch"
                        ),
                    )
                    continue
                try:
                    count = check_metadata_batches(records) if records else 0
                except KraftkitError as e:
                    ans["ErrorCode"], ans["ErrorMessage"] = Errors.INVALID_RECORD, f"not a metadata record batch: {e}"
                    continue
                if count == 0:
                    ans["ErrorCode"], ans["ErrorMessage"] = Errors.INVALID_RECORD, "no records"
                    continue
                limit = self.config.produce_pending_max_bytes
                waiting = self._produce_pending + sum(len(b.data) for _a, _r, b in items)
                if waiting + len(records) > limit:
                    ans["ErrorCode"], ans["ErrorMessage"] = (
                        Errors.THROTTLING_QUOTA_EXCEEDED,
                        (
                            f"{waiting} bytes of produced records wait for their commit; {len(records)} more "
                            f"would pass the node's limit of {limit}: retry later"
                        ),
                    )
                    continue
                items.append((ans, rep, ClientBatches(bytes(records), count)))

        def reply() -> dict:
            if version < 10:  # CurrentLeader and NodeEndpoints are tagged fields of v10+ (KIP-951)
                for _topic, parts in answers:
                    for part in parts:
                        part.pop("CurrentLeader", None)
            return {
                "Responses": [dict(topic, PartitionResponses=parts) for topic, parts in answers],
                "ThrottleTimeMs": 0,
                "NodeEndpoints": self._leader_endpoints() if version >= 10 else [],
            }

        if not items:
            fut.set_result(None if acks == 0 else reply())
            return
        # answers still waiting for their append or commit, with the bytes they hold against the node's limit
        # (the records themselves are not kept here: once appended they are in the log)
        pending = {id(ans): (ans, len(batches.data)) for ans, _rep, batches in items}
        self._produce_pending += sum(size for _ans, size in pending.values())

        def settle(ans: dict) -> None:
            held = pending.pop(id(ans), None)
            if held is not None:
                self._produce_pending -= held[1]

        def finish(ans: dict) -> None:
            settle(ans)
            if not pending:
                timer.cancel()
                if not fut.done():
                    fut.set_result(None if acks == 0 else reply())

        def on_timeout() -> None:
            for ans, _size in list(pending.values()):
                ans["ErrorCode"], ans["ErrorMessage"] = (
                    Errors.REQUEST_TIMED_OUT,
                    f"not committed within {timeout_ms} ms",
                )
                settle(ans)
            if not fut.done():
                fut.set_result(None if acks == 0 else reply())

        def on_done(f: asyncio.Future) -> None:
            if f.cancelled():  # the connection closed: nobody waits for these answers any more
                timer.cancel()
                for ans, _size in list(pending.values()):
                    settle(ans)

        timer = loop.call_later(timeout_ms / 1000, on_timeout)
        fut.add_done_callback(on_done)
        for ans, rep, batches in items:

            def appended(
                base: int | None, commit: asyncio.Future | None, error: Exception | None, ans=ans, rep=rep
            ) -> None:
                if id(ans) not in pending:
                    return  # timed out already
                if error is not None:
                    ans["ErrorCode"], ans["ErrorMessage"] = Errors.NOT_LEADER_OR_FOLLOWER, str(error)
                    return finish(ans)
                ans["BaseOffset"], ans["LogStartOffset"] = base, rep.log.start_offset
                if acks != -1:
                    return finish(ans)

                def committed(f: asyncio.Future, ans=ans) -> None:
                    if id(ans) not in pending:
                        return
                    if f.exception() is not None:
                        ans["ErrorCode"], ans["ErrorMessage"] = Errors.NOT_LEADER_OR_FOLLOWER, str(f.exception())
                    finish(ans)

                assert commit is not None
                commit.add_done_callback(committed)

            rep.produce_queue.append((batches, appended))
            if not rep.produce_scheduled:
                rep.produce_scheduled = True
                loop.call_soon(self._drain_produce, rep)

    def _drain_produce(self, rep: Replica) -> None:
        """Appends every Produce request that arrived since the last drain as one log append (their
        batches keep their bounds; one core step, one commit to wait for), as Kafka's leader
        accumulates appends."""
        rep.produce_scheduled = False
        queue, rep.produce_queue = rep.produce_queue, []
        if not queue:
            return
        data = queue[0][0].data if len(queue) == 1 else b"".join(b.data for b, _ in queue)
        total = sum(b.count for b, _ in queue)
        try:
            base, commit = self.append_nowait(ClientBatches(data, total), rep.tp)
        except NotLeaderError as e:
            for _b, cb in queue:
                cb(None, None, e)
            return
        commit.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved; waiters see it too
        for b, cb in queue:
            cb(base, commit, None)
            base += b.count

    def _leader_endpoints(self) -> list[dict]:
        leader = self.replica().core.leader_id
        addr = self.address_of(leader) if leader >= 0 else None
        return [] if addr is None else [{"NodeId": leader, "Host": addr[0], "Port": addr[1], "Rack": None}]
