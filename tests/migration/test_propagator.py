"""The requests the migration's propagator builds from a metadata image (which ZooKeeper broker gets
which LeaderAndIsr, UpdateMetadata and StopReplica, with what), and its sending: one connection per
broker to a fake ZooKeeper-mode broker on loopback, answers checked, a lost connection retried, an
overflowing queue turned into a full resync.

The expectations are written out by hand from the rules of Kafka 3.9's ``MigrationPropagator`` (see
the propagator's docstring), not computed by the code under test."""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from typing import Any

import pytest

from kraftkit.metadata.image import Topic
from kraftkit.migration import propagator as prop
from kraftkit.migration.propagator import FULL, INCREMENTAL, UNKNOWN, Propagator, View, delta_batches, image_batches
from kraftkit.protocol.messages import ApiKey, Errors, decode_request, encode_request, encode_response

LISR, UMR, STOP = ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA
CONTROLLER, ZK_EPOCH = 3000, 7


def broker(b: int, epoch: int, *, zk: bool = True, fenced: bool = False, port: int | None = None) -> dict[str, Any]:
    return {
        "BrokerId": b,
        "BrokerEpoch": epoch,
        "IsMigratingZkBroker": zk,
        "Fenced": fenced,
        "InControlledShutdown": False,
        "Rack": None,
        "EndPoints": [{"Name": "PLAINTEXT", "Host": "127.0.0.1", "Port": port or 9000 + b, "SecurityProtocol": 0}],
    }


def part(leader: int, replicas: list[int], *, epoch: int = 4, isr: list[int] | None = None) -> dict[str, Any]:
    return {
        "Replicas": list(replicas), "Isr": list(isr if isr is not None else replicas), "Leader": leader,
        "LeaderEpoch": epoch, "PartitionEpoch": epoch + 10, "AddingReplicas": [], "RemovingReplicas": [],
        "LeaderRecoveryState": 0,
    }


def topic(name: str, parts: dict[int, tuple[int, list[int]]], *, tid: uuid.UUID | None = None,
          epoch: int = 4) -> Topic:
    t = Topic(name, tid or uuid.uuid5(uuid.NAMESPACE_DNS, name))
    t.partitions = {p: part(leader, replicas, epoch=epoch) for p, (leader, replicas) in parts.items()}
    return t


def view(brokers: dict[int, dict], *topics: Topic, epoch: int = 5) -> View:
    return View(brokers, {t.id: t for t in topics}, epoch)


BROKERS = {1: broker(1, 101), 2: broker(2, 102), 3: broker(3, 103),
           4: broker(4, 104, zk=False),  # a KRaft broker: never sent to
           5: broker(5, 105, fenced=True)}  # a fenced ZooKeeper broker: not live
ORDERS = topic("orders", {0: (1, [1, 2]), 1: (2, [2, 3]), 2: (3, [3, 5])})
GONE = topic("gone", {0: (3, [3, 1])})


def parts_of(req: prop.Request) -> dict[str, dict]:
    """``topic-p`` -> partition state, over the request's TopicStates."""
    return {f"{t['TopicName']}-{s['PartitionIndex']}": s for t in req.body["TopicStates"] for s in t["PartitionStates"]}


def summary(batch: list[prop.Request]) -> list[tuple[int, str, list[str]]]:
    return [(r.broker, r.name, sorted(parts_of(r))) for r in batch]


def test_the_full_metadata_goes_to_every_live_zookeeper_broker():
    first, second = image_batches(view(BROKERS, ORDERS, GONE), CONTROLLER, ZK_EPOCH)
    every = ["gone-0", "orders-0", "orders-1", "orders-2"]
    assert summary(first) == [(1, "UpdateMetadata", every), (2, "UpdateMetadata", every), (3, "UpdateMetadata", every)]
    assert summary(second) == [
        (1, "LeaderAndIsr", ["gone-0", "orders-0"]), (1, "UpdateMetadata", every),
        (2, "LeaderAndIsr", ["orders-0", "orders-1"]), (2, "UpdateMetadata", every),
        (3, "LeaderAndIsr", ["gone-0", "orders-1", "orders-2"]), (3, "UpdateMetadata", every),
    ]
    assert {r.body["Type"] for r in first} == {UNKNOWN} and {r.body["Type"] for r in second} == {FULL}
    for r in first + second:
        assert (r.body["ControllerId"], r.body["isKRaftController"], r.body["ControllerEpoch"]) == (3000, True, 7)
        assert r.body["BrokerEpoch"] == 100 + r.broker
        encode_request(r.api, r.version, 1, "k", r.body)  # (the codec takes it)
    lisr3 = second[4]
    assert [x["BrokerId"] for x in lisr3.body["LiveLeaders"]] == [2, 3]  # leaders of orders-1, orders-2, gone-0
    assert lisr3.body["LiveLeaders"][0] == {"BrokerId": 2, "HostName": "127.0.0.1", "Port": 9002}
    s = parts_of(lisr3)["orders-2"]
    assert s == {"PartitionIndex": 2, "ControllerEpoch": 5, "Leader": 3, "LeaderEpoch": 4, "Isr": [3, 5],
                 "PartitionEpoch": 14, "Replicas": [3, 5], "AddingReplicas": [], "RemovingReplicas": [],
                 "IsNew": True, "LeaderRecoveryState": 0}
    assert [t["TopicId"] for t in lisr3.body["TopicStates"]] == [GONE.id, ORDERS.id]
    umr = first[0]
    # every live broker, the KRaft broker 4 too (Kafka's MigrationControllerChannelContext names every
    # registered broker): a ZooKeeper-mode broker follows and routes to a broker restarted in KRaft mode
    assert [b["Id"] for b in umr.body["LiveBrokers"]] == [1, 2, 3, 4]
    assert umr.body["LiveBrokers"][2] == {
        "Id": 3, "Endpoints": [{"Port": 9003, "Host": "127.0.0.1", "Listener": "PLAINTEXT", "SecurityProtocol": 0}],
        "Rack": None}
    assert parts_of(umr)["orders-2"] == {"PartitionIndex": 2, "ControllerEpoch": 5, "Leader": 3, "LeaderEpoch": 4,
                                         "Isr": [3, 5], "ZkVersion": 14, "Replicas": [3, 5], "OfflineReplicas": [5]}


def test_a_resync_goes_to_the_brokers_named_only():
    first, second = image_batches(view(BROKERS, ORDERS, GONE), CONTROLLER, ZK_EPOCH, brokers=[2, 5])
    assert summary(first) == [(2, "UpdateMetadata", ["gone-0", "orders-0", "orders-1", "orders-2"])]
    # (a FULL UpdateMetadata names every partition: a 3.9 broker drops the partitions one does not name)
    assert summary(second) == [(2, "LeaderAndIsr", ["orders-0", "orders-1"]),
                               (2, "UpdateMetadata", ["gone-0", "orders-0", "orders-1", "orders-2"])]


def test_a_leader_change_a_moved_replica_a_new_and_a_deleted_topic():
    before = view(BROKERS, ORDERS, GONE)
    orders = topic("orders", {0: (1, [1, 2]), 1: (2, [2, 3]), 2: (3, [3, 5])})
    orders.partitions[0] = part(2, [2, 3], epoch=5)  # leader 1 -> 2, replica 1 moved to 3
    fresh = topic("fresh", {0: (1, [1])}, epoch=0)
    after = view(BROKERS, orders, fresh, epoch=6)
    first, second = delta_batches(before, after, CONTROLLER, ZK_EPOCH)
    assert first == []  # no broker changed
    changed = ["fresh-0", "gone-0", "orders-0"]
    assert summary(second) == [
        (1, "LeaderAndIsr", ["fresh-0"]), (1, "UpdateMetadata", changed), (1, "StopReplica", ["gone-0", "orders-0"]),
        (2, "LeaderAndIsr", ["orders-0"]), (2, "UpdateMetadata", changed),
        (3, "LeaderAndIsr", ["orders-0"]), (3, "UpdateMetadata", changed), (3, "StopReplica", ["gone-0"]),
    ]
    assert {r.body["Type"] for r in second if r.api != STOP} == {INCREMENTAL}
    stop1 = parts_of(second[2])
    assert stop1 == {"gone-0": {"PartitionIndex": 0, "LeaderEpoch": -2, "DeletePartition": True},
                     "orders-0": {"PartitionIndex": 0, "LeaderEpoch": 5, "DeletePartition": True}}
    umr = parts_of(second[1])
    assert (umr["gone-0"]["Leader"], umr["gone-0"]["LeaderEpoch"], umr["gone-0"]["ZkVersion"]) == (-2, 0, 0)
    assert (umr["orders-0"]["Leader"], umr["orders-0"]["LeaderEpoch"], umr["orders-0"]["ControllerEpoch"]) == (2, 5, 6)
    assert parts_of(second[0])["fresh-0"]["Leader"] == 1
    for r in second:
        encode_request(r.api, r.version, 1, "k", r.body)


def test_a_broker_unfenced_hears_everything_the_others_hear_of_it():
    before = view(BROKERS, ORDERS)
    brokers = dict(BROKERS)
    brokers[5] = broker(5, 105)
    first, second = delta_batches(before, view(brokers, ORDERS), CONTROLLER, ZK_EPOCH)
    every = ["orders-0", "orders-1", "orders-2"]
    # (one batch has one UpdateMetadata: the others get the partitions broker 5 needs too, as in Kafka)
    assert summary(first) == [(1, "UpdateMetadata", every), (2, "UpdateMetadata", every),
                              (3, "UpdateMetadata", every), (5, "UpdateMetadata", every)]
    assert [b["Id"] for b in first[0].body["LiveBrokers"]] == [1, 2, 3, 4, 5]
    assert summary(second) == [(1, "UpdateMetadata", ["orders-2"]), (2, "UpdateMetadata", ["orders-2"]),
                               (3, "UpdateMetadata", ["orders-2"]),
                               (5, "LeaderAndIsr", ["orders-2"]), (5, "UpdateMetadata", ["orders-2"])]
    assert parts_of(second[0])["orders-2"]["OfflineReplicas"] == []


def test_nothing_changed_sends_nothing():
    v = view(BROKERS, ORDERS)
    assert delta_batches(v, v, CONTROLLER, ZK_EPOCH) == [[], []]


# ---------------------------------------------------------------------------------------- sending


class FakeZkBroker:
    """A loopback server that answers the control requests as a broker would, with the errors it
    is told to; ``drop_first`` closes the first connection after reading its first request."""

    def __init__(self, errors: dict[int, dict] | None = None, drop_first: bool = False) -> None:
        self.errors = errors or {}
        self.drop_first = drop_first
        self.got: list[tuple[int, dict]] = []
        self.connections = 0
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self.writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for w in list(self.writers):
            w.close()
            try:
                await w.wait_closed()
            except ConnectionError:
                pass
        await self.server.wait_closed()

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.add(writer)
        first = self.connections == 1
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                api, v, cid, _client, body = decode_request(await reader.readexactly(size))
                if first and self.drop_first:
                    writer.close()
                    return
                self.got.append((api, body))
                answer = self.errors.get(api, {LISR: {"ErrorCode": 0, "Topics": []}, UMR: {"ErrorCode": 0},
                                               STOP: {"ErrorCode": 0, "PartitionErrors": []}}[api])
                frame = encode_response(api, v, cid, answer)
                writer.write(struct.pack(">i", len(frame)) + frame)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


async def _until(cond, what: str, loops: int = 400) -> None:
    for _ in range(loops):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


class _Image:
    """What the propagator reads of an image."""

    def __init__(self, v: View) -> None:
        self.brokers, self.topics = v.brokers, v.topics
        self.provenance = type("P", (), {"epoch": v.epoch})()


def test_requests_reach_a_broker_errors_are_logged_and_a_lost_connection_is_retried(caplog):
    async def main() -> None:
        fake = FakeZkBroker(drop_first=True, errors={STOP: {"ErrorCode": 0, "PartitionErrors": [
            {"TopicName": "gone", "PartitionIndex": 0, "ErrorCode": Errors.KAFKA_STORAGE_ERROR}]}})
        await fake.start()
        p = Propagator(CONTROLLER, backoff_s=0.01)
        try:
            brokers = {1: broker(1, 101, port=fake.port)}
            gone = topic("gone", {0: (1, [1])})
            p.publish_image(_Image(view(brokers, gone)), ZK_EPOCH)  # type: ignore[arg-type]
            await _until(lambda: p.answered[(1, "UpdateMetadata")] == 2, "the full metadata answered")
            assert [a for a, _ in fake.got] == [UMR, LISR, UMR]
            assert fake.connections == 2  # the first was closed under the first request: sent again
            p.publish_delta(_Image(view(brokers)), ZK_EPOCH)  # type: ignore[arg-type]  # "gone" deleted
            await _until(lambda: p.answered[(1, "StopReplica")] == 1, "the StopReplica answered")
            assert [a for a, _ in fake.got[3:]] == [UMR, STOP]
            assert p.errors == {(1, "StopReplica"): 1}
        finally:
            await p.close()
            await fake.stop()

    with caplog.at_level(logging.INFO, logger="kraftkit.migration.propagator"):
        asyncio.run(main())
    assert "broker 1 answered StopReplica v4 with errors: gone-0: KAFKA_STORAGE_ERROR" in caplog.text
    assert "connection lost sending UpdateMetadata" in caplog.text


def test_an_overflowing_queue_is_dropped_and_the_broker_resynced(caplog):
    async def main() -> None:
        # nothing listens at the broker's port: its requests queue up
        fake = FakeZkBroker()
        await fake.start()
        port = fake.port
        await fake.stop()
        p = Propagator(CONTROLLER, max_queued=3, backoff_s=0.01, max_backoff_s=0.02)
        try:
            brokers = {1: broker(1, 101, port=port)}
            p.publish_image(_Image(view(brokers, topic("a", {0: (1, [1])}))), ZK_EPOCH)  # type: ignore[arg-type]
            assert len(p.channels[1].queue) == 3
            await _until(lambda: "cannot connect sending UpdateMetadata" in caplog.text, "a connection tried")
            p.publish_delta(_Image(view(brokers, topic("b", {0: (1, [1])}))), ZK_EPOCH)  # type: ignore[arg-type]
            assert p.resync == {1} and len(p.channels[1].queue) == 0
            # the next change brings the broker the whole image (and nothing of the change alone)
            p.publish_delta(_Image(view(brokers, topic("c", {0: (1, [1])}))), ZK_EPOCH)  # type: ignore[arg-type]
            assert p.resync == set()
            assert [r.name for r in p.channels[1].queue] == ["UpdateMetadata", "LeaderAndIsr", "UpdateMetadata"]
            assert {t["TopicName"] for r in p.channels[1].queue for t in r.body["TopicStates"]} == {"c"}
        finally:
            await p.close()

    with caplog.at_level(logging.WARNING, logger="kraftkit.migration.propagator"):
        asyncio.run(main())
    assert "broker 1: more than 3 requests queued" in caplog.text


@pytest.mark.parametrize("api", [LISR, UMR, STOP])
def test_errors_name_the_partitions(api):
    req = prop.Request(1, api, {"TopicStates": [{"TopicName": "t", "TopicId": uuid.UUID(int=9)}]})
    body = {"ErrorCode": Errors.STALE_BROKER_EPOCH,
            "Topics": [{"TopicId": uuid.UUID(int=9), "PartitionErrors": [{"PartitionIndex": 3, "ErrorCode": 6}]}],
            "PartitionErrors": [{"TopicName": "t", "PartitionIndex": 3, "ErrorCode": 6}]}
    want = [("*", Errors.STALE_BROKER_EPOCH)] + ([("t-3", 6)] if api != UMR else [])
    assert prop._errors(req, body) == want


def test_a_request_the_codec_refuses_is_dropped_saying_why_and_the_next_one_goes(caplog):
    async def main() -> None:
        fake = FakeZkBroker()
        await fake.start()
        p = Propagator(CONTROLLER, backoff_s=0.01)
        try:
            brokers = {1: broker(1, 101, port=fake.port)}
            p.publish_image(_Image(view(brokers)), ZK_EPOCH)  # type: ignore[arg-type]  # (no partitions)
            await _until(lambda: p.answered[(1, "UpdateMetadata")] == 1, "the first UpdateMetadata answered")
            bad = prop.Request(1, UMR, {"ControllerId": "not a number"})
            good = prop.Request(1, STOP, {"ControllerId": CONTROLLER, "TopicStates": []})
            p._enqueue([[bad, good]])
            await _until(lambda: p.answered[(1, "StopReplica")] == 1, "the StopReplica answered")
            assert [a for a, _ in fake.got] == [UMR, STOP]
        finally:
            await p.close()
            await fake.stop()

    with caplog.at_level(logging.ERROR, logger="kraftkit.migration.propagator"):
        asyncio.run(main())
    assert "broker 1: UpdateMetadata not sent: the codec refuses it" in caplog.text


def test_a_broker_restarted_in_kraft_mode_is_live_to_the_zookeeper_brokers_and_sent_nothing():
    moved = topic("moved", {0: (4, [4, 1])})  # led by broker 4, restarted in KRaft mode
    _first, second = image_batches(view(BROKERS, moved), CONTROLLER, ZK_EPOCH)
    assert summary(second) == [(1, "LeaderAndIsr", ["moved-0"]), (1, "UpdateMetadata", ["moved-0"]),
                               (2, "UpdateMetadata", ["moved-0"]), (3, "UpdateMetadata", ["moved-0"])]
    assert second[0].body["LiveLeaders"] == [{"BrokerId": 4, "HostName": "127.0.0.1", "Port": 9004}]
    assert parts_of(second[1])["moved-0"]["OfflineReplicas"] == []
    # a fenced one is offline
    brokers = dict(BROKERS)
    brokers[4] = broker(4, 104, zk=False, fenced=True)
    _first, second = image_batches(view(brokers, moved), CONTROLLER, ZK_EPOCH)
    assert second[0].body["LiveLeaders"] == []
    assert parts_of(second[1])["moved-0"]["OfflineReplicas"] == [4]
