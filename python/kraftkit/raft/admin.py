"""A blocking client for a running quorum (kraftkit's or Kafka's): DescribeQuorum, UpdateFeatures and appends.

:class:`QuorumAdmin` talks to one node and follows the leader when told where it is
(``NOT_LEADER_OR_FOLLOWER`` answers carry the leader id, and DescribeQuorum v2 / Produce v10+ carry
its endpoint). ``describe()`` is what ``kafka-metadata-quorum.sh describe --status/--replication``
shows; ``append()`` produces metadata records to ``__cluster_metadata`` with ``acks=-1`` and
returns the committed offsets (a kraftkit quorum accepts this; a Kafka controller does not take
Produce requests). Its connections share one :class:`~kraftkit.protocol.client.FeatureCache`
(``features``). :func:`survey_features` asks every controller it can find for its features.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Self

from kraftkit._core import encode_batch
from kraftkit.errors import KraftkitError
from kraftkit.protocol.client import FeatureAnswer, FeatureCache, KafkaConnection, ProtocolError
from kraftkit.protocol.messages import ApiKey
from kraftkit.raft import messages as m
from kraftkit.raft.quorum_state import uuid_to_kafka

__all__ = ["ControllerFeatures", "QuorumAdmin", "QuorumError", "parse_address", "survey_features"]


class QuorumError(KraftkitError):
    """The quorum answered with an error (or has no leader right now)."""

    def __init__(self, message: str, code: int = -1) -> None:
        super().__init__(message)
        self.code = code


def parse_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bad address {text!r}: expected HOST:PORT")
    if not 0 <= int(port) <= 65535:
        raise ValueError(f"bad address {text!r}: port {int(port)} is outside 0..65535")
    return host.strip("[]"), int(port)


class QuorumAdmin:
    """Connects to ``bootstrap`` (HOST:PORT); ``timeout`` bounds every request and the leader search."""

    def __init__(
        self,
        bootstrap: str,
        *,
        timeout: float = 10.0,
        topic: m.TopicPartition = m.METADATA_PARTITION,
        features: FeatureCache | None = None,
    ) -> None:
        self.bootstrap = parse_address(bootstrap)
        self.features = features if features is not None else FeatureCache()
        self.timeout = timeout
        self.tp = topic
        self._conn: KafkaConnection | None = None
        self._addr = self.bootstrap
        self.endpoints: dict[int, tuple[str, int]] = {}

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> KafkaConnection:
        if self._conn is None:
            self._conn = KafkaConnection(
                *self._addr, timeout=self.timeout, client_id="kraftkit-quorum", features=self.features
            )
            self._conn.api_versions()
        return self._conn

    def _rotate(self, deadline: float, error: Exception) -> None:
        """The node went away: try the next known node (or the bootstrap one) until the deadline."""
        self.close()
        if time.monotonic() >= deadline:
            raise QuorumError(f"no answer from the quorum within {self.timeout}s: {error}") from None
        known = sorted(set(self.endpoints.values()) | {self.bootstrap})
        i = known.index(self._addr) if self._addr in known else -1
        self._addr = known[(i + 1) % len(known)]
        time.sleep(0.1)

    def _move_to(self, node: int) -> bool:
        addr = self.endpoints.get(node)
        if addr is None or addr == self._addr:
            return False
        self.close()
        self._addr = addr
        return True

    # -- DescribeQuorum
    def describe(self) -> dict[str, Any]:
        """The leader's view: leader id, epoch, high watermark, voters and observers with their end
        offsets, lags and fetch times (epoch ms), and the cluster id when the node tells it."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                conn = self._connection()
                v = conn.version_for(ApiKey.DESCRIBE_QUORUM)
                resp = conn.request(
                    ApiKey.DESCRIBE_QUORUM,
                    v,
                    {"Topics": [{"TopicName": self.tp.topic, "Partitions": [{"PartitionIndex": self.tp.partition}]}]},
                )
            except ProtocolError as e:
                self._rotate(deadline, e)
                continue
            for n in resp.get("Nodes") or []:
                if n["Listeners"]:
                    self.endpoints[n["NodeId"]] = (n["Listeners"][0]["Host"], n["Listeners"][0]["Port"])
            if resp.get("ErrorCode"):
                raise QuorumError(
                    f"DescribeQuorum failed: error {resp['ErrorCode']} {resp.get('ErrorMessage') or ''}",
                    resp["ErrorCode"],
                )
            part = resp["Topics"][0]["Partitions"][0]
            err = part["ErrorCode"]
            if err == m.Errors.NOT_LEADER_OR_FOLLOWER and time.monotonic() < deadline:
                # a Kafka controller that is not the leader answers without the leader (LeaderId 0, no
                # Nodes): ask it DescribeCluster, whose ControllerId is the leader (as Kafka's Admin does)
                if self._move_to_active_controller(conn) or (part["LeaderId"] >= 0 and self._move_to(part["LeaderId"])):
                    continue
                time.sleep(0.1)
                continue
            if err:
                raise QuorumError(f"DescribeQuorum failed: error {err} {part.get('ErrorMessage') or ''}", err)
            return self._render(part)

    def _move_to_active_controller(self, conn: KafkaConnection) -> bool:
        """Learns the controllers and the active one (the raft leader) from DescribeCluster
        (EndpointType 2) and moves there; False if that tells nothing new."""
        try:
            v = conn.version_for(ApiKey.DESCRIBE_CLUSTER)
            resp = conn.request(
                ApiKey.DESCRIBE_CLUSTER,
                v,
                {"IncludeClusterAuthorizedOperations": False, "EndpointType": 2, "IncludeFencedBrokers": False},
            )
        except ProtocolError:
            return False
        if resp.get("ErrorCode") or resp.get("EndpointType", 2) != 2:
            return False
        for b in resp.get("Brokers") or []:
            self.endpoints[b["BrokerId"]] = (b["Host"], b["Port"])
        leader = resp.get("ControllerId", -1)
        return leader >= 0 and self._move_to(leader)

    def controllers(self, conn: KafkaConnection | None = None) -> dict[int, tuple[str, int]] | None:
        """The controllers DescribeCluster (EndpointType 2, KIP-919) names, by id; None if the
        node does not answer it for controllers."""
        conn = conn or self._connection()
        try:
            v = conn.version_for(ApiKey.DESCRIBE_CLUSTER)
        except ProtocolError:
            return None
        if v < 1:  # EndpointType is v1's
            return None
        resp = conn.request(
            ApiKey.DESCRIBE_CLUSTER,
            v,
            {"IncludeClusterAuthorizedOperations": False, "EndpointType": 2, "IncludeFencedBrokers": False},
        )
        if resp.get("ErrorCode") or resp.get("EndpointType") != 2:
            return None
        found = {b["BrokerId"]: (b["Host"], b["Port"]) for b in resp.get("Brokers") or []}
        self.endpoints.update(found)
        return found

    def cluster_id(self) -> str | None:
        conn = self._connection()
        try:
            v = conn.version_for(ApiKey.DESCRIBE_CLUSTER)
        except ProtocolError:
            return None
        resp = conn.request(
            ApiKey.DESCRIBE_CLUSTER,
            v,
            {"IncludeClusterAuthorizedOperations": False, "EndpointType": 2, "IncludeFencedBrokers": False},
        )
        return resp.get("ClusterId")

    @staticmethod
    def _render(part: dict) -> dict[str, Any]:
        hw = part["HighWatermark"]
        now = int(time.time() * 1000)

        def rs(r: dict) -> dict[str, Any]:
            d = r.get("ReplicaDirectoryId")
            return {
                "id": r["ReplicaId"],
                "directory_id": uuid_to_kafka(d) if d is not None else uuid_to_kafka(m.ZERO_UUID),
                "log_end_offset": r["LogEndOffset"],
                "lag": max(0, hw - r["LogEndOffset"]),
                "last_fetch_ms": r.get("LastFetchTimestamp", -1),
                "last_caught_up_ms": r.get("LastCaughtUpTimestamp", -1),
                "last_caught_up_age_ms": (now - r["LastCaughtUpTimestamp"])
                if r.get("LastCaughtUpTimestamp", -1) >= 0
                else -1,
            }

        voters = [rs(r) for r in part["CurrentVoters"]]
        followers = [v for v in voters if v["id"] != part["LeaderId"]]
        return {
            "leader_id": part["LeaderId"],
            "leader_epoch": part["LeaderEpoch"],
            "high_watermark": hw,
            "max_follower_lag": max((v["lag"] for v in followers), default=0),
            "max_follower_lag_time_ms": max((max(0, v["last_caught_up_age_ms"]) for v in followers), default=0),
            "voters": voters,
            "observers": [rs(r) for r in part["Observers"]],
        }

    # -- UpdateFeatures (KIP-584), to the active controller
    def finalized_features(self) -> tuple[int, dict[str, int]]:
        """The finalized levels (kraft.version and metadata.version included) and their epoch, from
        the ApiVersions answers seen, the active controller's among them when a node names it (a
        follower's may lag; the newest epoch wins, so a lagging node never rolls them back)."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                if self._move_to_active_controller(self._connection()):
                    self._connection()  # (its ApiVersions answer feeds the cache)
            except ProtocolError as e:
                self._rotate(deadline, e)
                continue
            epoch, finalized, _newest = self.features.snapshot()
            return epoch, finalized

    def update_features(
        self, updates: list[tuple[str, int, int]], *, validate_only: bool = False, timeout_ms: int = 60000
    ) -> dict[str, Any]:
        """UpdateFeatures of ``(feature, level, upgrade type)`` (1 upgrade, 2 safe downgrade, 3 unsafe
        downgrade; level 0 disables) at the active controller, found through DescribeCluster when a
        node answers NOT_CONTROLLER; returns the answer (``ErrorCode``, ``ErrorMessage``). Sent again
        to the next node when one goes away: the same levels twice change nothing."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                conn = self._connection()
                v = conn.version_for(ApiKey.UPDATE_FEATURES)
                # v0 has a downgrade flag, v1 on the upgrade type (an unsafe downgrade is safe at v0)
                kind = (lambda t: {"AllowDowngrade": t != 1}) if v == 0 else (lambda t: {"UpgradeType": t})
                body = {
                    "timeoutMs": timeout_ms,
                    "ValidateOnly": validate_only,
                    "FeatureUpdates": [{"Feature": f, "MaxVersionLevel": lv, **kind(t)} for f, lv, t in updates],
                }
                resp = conn.request(ApiKey.UPDATE_FEATURES, v, body)
            except ProtocolError as e:
                self._rotate(deadline, e)
                continue
            if resp["ErrorCode"] == m.Errors.NOT_CONTROLLER and time.monotonic() < deadline:
                if not self._move_to_active_controller(conn):
                    time.sleep(0.1)
                continue
            return resp

    # -- KIP-853 voter changes, to the leader
    def add_voter(
        self,
        voter_id: int,
        directory_id: uuid.UUID,
        listeners: list[tuple[str, str, int]],
        *,
        timeout_ms: int = 30000,
    ) -> dict[str, Any]:
        """AddRaftVoter: ``voter_id`` with the metadata log directory ``directory_id`` and its
        ``(listener name, host, port)`` listeners becomes a voter (it must be running and caught up as
        an observer). Returns the leader's answer (``ErrorCode``, ``ErrorMessage``)."""
        body = {
            "ClusterId": None,
            "TimeoutMs": timeout_ms,
            "VoterId": voter_id,
            "VoterDirectoryId": directory_id,
            "Listeners": [{"Name": n, "Host": h, "Port": p} for n, h, p in listeners],
            "AckWhenCommitted": True,
        }
        return self._voter_change(ApiKey.ADD_RAFT_VOTER, body)

    def remove_voter(self, voter_id: int, directory_id: uuid.UUID) -> dict[str, Any]:
        """RemoveRaftVoter of the voter ``voter_id`` whose metadata log directory is ``directory_id``."""
        body = {"ClusterId": None, "VoterId": voter_id, "VoterDirectoryId": directory_id}
        return self._voter_change(ApiKey.REMOVE_RAFT_VOTER, body)

    def _voter_change(self, api: int, body: dict[str, Any]) -> dict[str, Any]:
        """Sends a voter change to the leader, found through DescribeQuorum/DescribeCluster, again to
        the new leader when the node answers that it does not lead, and again after REQUEST_TIMED_OUT
        (the leader's "not now": another change or the new voter's catch-up is pending), as Kafka's
        admin client retries it, until the timeout. A change that an earlier attempt made (its answer
        lost or timed out) is then refused as DUPLICATE_VOTER or VOTER_NOT_FOUND: if the quorum shows
        it made, the answer is success."""
        deadline = time.monotonic() + self.timeout
        try:
            self.describe()  # moves to the leader
        except QuorumError:
            pass
        retried = False
        while True:
            try:
                conn = self._connection()
                resp = conn.request(api, conn.version_for(api), body)
            except ProtocolError as e:
                self._rotate(deadline, e)
                retried = True
                continue
            code = resp.get("ErrorCode")
            if code in (m.Errors.NOT_LEADER_OR_FOLLOWER, m.Errors.NOT_CONTROLLER) and time.monotonic() < deadline:
                if not self._move_to_active_controller(conn):
                    time.sleep(0.1)
                continue
            if code == m.Errors.REQUEST_TIMED_OUT and time.monotonic() + 0.5 < deadline:
                retried = True
                time.sleep(0.5)
                continue
            if retried and code in (m.Errors.DUPLICATE_VOTER, m.Errors.VOTER_NOT_FOUND) and self._made(api, body):
                return {**resp, "ErrorCode": 0, "ErrorMessage": "made by an earlier attempt"}
            return resp

    def _made(self, api: int, body: dict[str, Any]) -> bool:
        """Whether the quorum's voters show the change ``body`` made (the voter, with its directory
        id, in the voter set for an add; absent for a remove)."""
        try:
            voters = self.describe()["voters"]
        except QuorumError:
            return False
        key = (body["VoterId"], uuid_to_kafka(body["VoterDirectoryId"]))
        present = any((v["id"], v["directory_id"]) == key for v in voters)
        return present if api == ApiKey.ADD_RAFT_VOTER else not present

    # -- appends (Produce to __cluster_metadata)
    def append(self, values: list[bytes], *, timeout_ms: int = 10000) -> tuple[int, int]:
        """Appends ``values`` (metadata record values) as one batch and waits for the commit;
        returns ``(base offset, last offset)``. Follows the leader and retries while there is none
        or the node goes away (so a batch whose answer was lost may be appended twice: at least
        once, as an idempotence-less Kafka producer)."""
        data = encode_batch([(int(time.time() * 1000), None, v, []) for v in values])
        deadline = time.monotonic() + self.timeout
        topic: dict[str, Any] = {
            "Name": self.tp.topic,
            "TopicId": self.tp.topic_id,
            "PartitionData": [{"Index": self.tp.partition, "Records": data}],
        }
        while True:
            try:
                conn = self._connection()
                v = conn.version_for(ApiKey.PRODUCE)
                resp = conn.request(
                    ApiKey.PRODUCE,
                    v,
                    {"TransactionalId": None, "Acks": -1, "TimeoutMs": timeout_ms, "TopicData": [topic]},
                )
            except ProtocolError as e:
                self._rotate(deadline, e)
                continue
            for n in resp.get("NodeEndpoints") or []:
                self.endpoints[n["NodeId"]] = (n["Host"], n["Port"])
            part = resp["Responses"][0]["PartitionResponses"][0]
            err = part["ErrorCode"]
            if err == 0:
                return part["BaseOffset"], part["BaseOffset"] + len(values) - 1
            if err == m.Errors.NOT_LEADER_OR_FOLLOWER and time.monotonic() < deadline:
                leader = (part.get("CurrentLeader") or {}).get("LeaderId", -1)
                if not (leader >= 0 and self._move_to(leader)):
                    time.sleep(0.05)
                continue
            raise QuorumError(f"append failed: error {err}: {part.get('ErrorMessage') or ''}", err)


#: the most controllers a survey asks beyond its bootstrap addresses (KRaft quorums have a handful)
MAX_SURVEYED = 64


@dataclass(frozen=True)
class ControllerFeatures:
    """One controller's part of a :func:`survey_features`: its id (None for a bootstrap address
    no controller list named), address, and its ApiVersions feature answer or why there is none."""

    node_id: int | None
    address: str
    answer: FeatureAnswer | None
    error: str | None = None


def survey_features(
    bootstrap: list[str], *, timeout: float = 10.0, features: FeatureCache | None = None
) -> tuple[FeatureCache, list[ControllerFeatures]]:
    """Asks ApiVersions of every controller it can find: the ``bootstrap`` addresses (HOST:PORT),
    then every controller their DescribeCluster names (as Kafka's admin client finds controllers
    with ``--bootstrap-controller``). All the answers feed one :class:`FeatureCache` (returned),
    whose finalized levels are the newest answer's. ``timeout`` bounds the whole survey.
    A bootstrap address that answered but that no controller list names is left out when some
    node named controllers (it is one of them under another name); otherwise every bootstrap
    address is kept, with its answer or its error."""
    cache = features if features is not None else FeatureCache()
    deadline = time.monotonic() + timeout
    asked: dict[tuple[str, int], FeatureAnswer | str] = {}
    found: dict[int, tuple[str, int]] = {}

    def ask(addr: tuple[str, int], *, discover: bool) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            asked[addr] = f"not asked: no time left of {timeout}s"
            return
        try:
            with QuorumAdmin(f"{addr[0]}:{addr[1]}", timeout=left, features=cache) as admin:
                conn = admin._connection()
                if conn.feature_answer is None:
                    asked[addr] = "its ApiVersions answer carries no features (below v3)"
                else:
                    asked[addr] = conn.feature_answer
                if discover:
                    found.update(admin.controllers(conn) or {})
        except (ProtocolError, QuorumError) as e:
            asked.setdefault(addr, str(e).removeprefix(f"{addr[0]}:{addr[1]}: "))  # the address is the entry's
        except (ValueError, OverflowError) as e:  # an endpoint a peer named that cannot be one (port, host)
            asked.setdefault(addr, f"not a reachable endpoint: {e}")

    for text in bootstrap:
        ask(parse_address(text), discover=True)
    for k, addr in enumerate(sorted(set(found.values()) - set(asked))):
        if k < MAX_SURVEYED:
            ask(addr, discover=False)
        else:  # a controller list this long is not a quorum's: the rest are listed, not asked
            asked[addr] = f"not asked: more than {MAX_SURVEYED} controllers named"
    out = [ControllerFeatures(i, f"{h}:{p}", *_answer_or_error(asked[(h, p)])) for i, (h, p) in sorted(found.items())]
    named = set(found.values())
    out += [
        ControllerFeatures(None, f"{h}:{p}", *_answer_or_error(a))
        for (h, p), a in asked.items()
        if (h, p) not in named and (not named or isinstance(a, str))
    ]
    return cache, out


def _answer_or_error(a: FeatureAnswer | str) -> tuple[FeatureAnswer | None, str | None]:
    return (None, a) if isinstance(a, str) else (a, None)
