"""Registration on a kraftkit controller quorum, over the wire: controllers register themselves,
brokers register, heartbeat, get unfenced once caught up, are fenced when they ask or when their
session expires, and unregister; every refusal is Kafka's error code, and nothing is written for it.
The records are read back from the committed log; broker epochs are checked against the offsets
of the brokers' own RegisterBrokerRecords there."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import BROKER_REGISTRATION_CHANGE, REGISTER_BROKER, REGISTER_CONTROLLER, UNREGISTER_BROKER
from kraftkit.controller import local_supported_features
from kraftkit.features.registry import registry
from kraftkit.protocol import KafkaConnection
from kraftkit.protocol.messages import ApiKey, Errors
from tests.raft._cluster import CLUSTER_ID, wait_for

from ._nodes import active_of, make_controllers, running

pytestmark = pytest.mark.timeout(120)


def broker_features(**override: tuple[int, int] | None) -> list[dict]:
    ranges = {**local_supported_features(), "kraft.version": (0, 1)}
    for name, rng in override.items():
        name = name.replace("_", ".")
        if rng is None:
            ranges.pop(name, None)
        else:
            ranges[name] = rng
    return [{"Name": n, "MinSupportedVersion": lo, "MaxSupportedVersion": hi} for n, (lo, hi) in sorted(ranges.items())]


def registration(bid: int, incarnation: uuid.UUID | None = None, **kw) -> dict:
    body = {
        "BrokerId": bid,
        "ClusterId": CLUSTER_ID,
        "IncarnationId": incarnation or uuid.uuid4(),
        "Listeners": [{"Name": "PLAINTEXT", "Host": "127.0.0.1", "Port": 9000 + bid, "SecurityProtocol": 0}],
        "Features": broker_features(),
        "Rack": None,
        "IsMigratingZkBroker": False,
        "LogDirs": [uuid.uuid4()],
        "PreviousBrokerEpoch": -1,
    }
    body.update(kw)
    return body


def heartbeat(bid: int, epoch: int, offset: int, *, fence: bool = False, shutdown: bool = False) -> dict:
    return {"BrokerId": bid, "BrokerEpoch": epoch, "CurrentMetadataOffset": offset, "WantFence": fence,
            "WantShutDown": shutdown, "OfflineLogDirs": []}


async def call(node, api: int, body: dict) -> dict:
    def work():
        with KafkaConnection("127.0.0.1", node.address[1]) as conn:
            return conn.request(api, conn.version_for(api), body)
    return await asyncio.get_running_loop().run_in_executor(None, work)


def committed(node, api_key: int) -> list[tuple[int, int, dict]]:
    """(offset, version, fields) of every committed record of ``api_key`` in the node's log."""
    out = []
    for batch in node.committed_batches(0):
        if batch.is_control:
            continue
        for r in batch.records():
            key, version, data = decode_metadata_record(r.value)
            if key == api_key:
                out.append((r.offset, version, data))
    return out


def log_end(node) -> int:
    return node.replica().log.end_offset


def assert_mirror(node) -> None:
    """The controller's own view of the registrations equals the metadata image's."""
    keys = ("BrokerEpoch", "IncarnationId", "Fenced", "InControlledShutdown", "LogDirs")
    img = {bid: tuple(b[k] for k in keys) for bid, b in node.controller.image.brokers.items()}
    assert {bid: tuple(b[k] for k in keys) for bid, b in node.controller.cluster.brokers.items()} == img


async def quiet_leader(nodes):
    """The active controller, once every controller registered itself (nothing else is written
    meanwhile, so a log end that does not move means a request wrote nothing)."""
    leader = await wait_for(lambda: active_of(nodes), what="an active controller")
    await wait_for(lambda: len(leader.controller.image.controllers) == len(nodes), what="controller registrations")
    return leader


def test_each_controller_registers_itself_once_with_its_listener_and_features(tmp_path):
    async def main():
        nodes = make_controllers(tmp_path, release_version="4.3")
        async with running(nodes):
            await wait_for(lambda: active_of(nodes), what="an active controller")
            await wait_for(lambda: all(sorted(n.controller.image.controllers) == [1, 2, 3] for n in nodes),
                           what="three controller registrations on every node")
            for n in nodes:
                regs = {r["ControllerId"]: r for _o, _v, r in committed(n, REGISTER_CONTROLLER)}
                assert len(committed(n, REGISTER_CONTROLLER)) == 3  # one each, none repeated
                for m in nodes:
                    reg = regs[m.node_id]
                    assert reg["IncarnationId"] == m.controller.registration.incarnation_id
                    host, port = m.config.voters[m.node_id]
                    assert [(e["Name"], e["Host"], e["Port"], e["SecurityProtocol"]) for e in reg["EndPoints"]] == \
                        [("CONTROLLER", host, port, 0)]
                    assert {f["Name"]: (f["MinSupportedVersion"], f["MaxSupportedVersion"]) for f in reg["Features"]} \
                        == local_supported_features()
    asyncio.run(main())


def test_a_broker_registers_fenced_is_unfenced_once_caught_up_and_keeps_its_epoch_when_it_amends(tmp_path):
    async def main():
        nodes = make_controllers(tmp_path, release_version="4.3")
        async with running(nodes):
            leader = await quiet_leader(nodes)
            follower = next(n for n in nodes if n is not leader)
            inc = uuid.uuid4()
            body = registration(100, inc)
            got = await call(leader, ApiKey.BROKER_REGISTRATION, body)
            assert got["ErrorCode"] == Errors.NONE
            ((offset, version, rec),) = committed(leader, REGISTER_BROKER)
            epoch = got["BrokerEpoch"]
            assert epoch == offset == rec["BrokerEpoch"]  # the epoch is where the registration was written
            # at the version Kafka's MetadataVersion.registerBrokerRecordVersion() gives (the generated table)
            assert version == registry().metadata_version(leader.controller.image.metadata_version) \
                .register_broker_record_version
            assert rec["Fenced"] is True and rec["IncarnationId"] == inc and rec["LogDirs"] == body["LogDirs"]
            assert rec["EndPoints"] == body["Listeners"]

            # behind its registration: stays fenced, nothing written
            end = log_end(leader)
            hb = await call(leader, ApiKey.BROKER_HEARTBEAT, heartbeat(100, epoch, offset - 1))
            assert (hb["ErrorCode"], hb["IsFenced"], hb["IsCaughtUp"], hb["ShouldShutDown"]) == \
                (Errors.NONE, True, False, False)
            assert log_end(leader) == end
            # caught up: unfenced by a BrokerRegistrationChangeRecord, committed before the answer
            hb = await call(leader, ApiKey.BROKER_HEARTBEAT, heartbeat(100, epoch, offset))
            assert (hb["ErrorCode"], hb["IsFenced"], hb["IsCaughtUp"]) == (Errors.NONE, False, True)
            ((_o, v, change),) = committed(leader, BROKER_REGISTRATION_CHANGE)
            assert v == 0 and (change["BrokerId"], change["BrokerEpoch"], change["Fenced"]) == (100, epoch, -1)
            await wait_for(lambda: all(100 in n.controller.image.brokers
                                       and not n.controller.image.brokers[100]["Fenced"] for n in nodes),
                           what="broker 100 unfenced on every node")

            # the same incarnation again: amended, same epoch, still unfenced
            again = await call(leader, ApiKey.BROKER_REGISTRATION, registration(100, inc))
            assert (again["ErrorCode"], again["BrokerEpoch"]) == (Errors.NONE, epoch)
            assert committed(leader, REGISTER_BROKER)[-1][2]["Fenced"] is False
            assert_mirror(leader)
            # another incarnation while the session lives: refused
            dup = await call(leader, ApiKey.BROKER_REGISTRATION, registration(100))
            assert (dup["ErrorCode"], dup["BrokerEpoch"]) == (Errors.DUPLICATE_BROKER_REGISTRATION, -1)
            # a stale epoch, and a heartbeat before any registration
            stale = await call(leader, ApiKey.BROKER_HEARTBEAT, heartbeat(100, epoch + 1, offset))
            assert (stale["ErrorCode"], stale["IsFenced"]) == (Errors.STALE_BROKER_EPOCH, True)
            unknown = await call(leader, ApiKey.BROKER_HEARTBEAT, heartbeat(7, 1, 1))
            assert unknown["ErrorCode"] == Errors.STALE_BROKER_EPOCH
            # a follower sends the broker to the active controller
            for api, req in ((ApiKey.BROKER_REGISTRATION, registration(101)),
                             (ApiKey.BROKER_HEARTBEAT, heartbeat(100, epoch, offset))):
                assert (await call(follower, api, req))["ErrorCode"] == Errors.NOT_CONTROLLER
    asyncio.run(main())


def test_registrations_kafka_refuses_are_refused_with_its_error_and_write_nothing(tmp_path):
    async def main():
        nodes = make_controllers(tmp_path, release_version="4.3")
        async with running(nodes):
            leader = await quiet_leader(nodes)
            first = registration(100)
            assert (await call(leader, ApiKey.BROKER_REGISTRATION, first))["ErrorCode"] == Errors.NONE
            mv = leader.controller.image.metadata_version
            end = log_end(leader)
            cases = [
                (registration(101, ClusterId="AAAAAAAAAAAAAAAAAAAAAA"), Errors.INCONSISTENT_CLUSTER_ID),
                (registration(101, Features=broker_features(metadata_version=(1, mv - 1))), Errors.UNSUPPORTED_VERSION),
                (registration(101, Features=broker_features(metadata_version=None)), Errors.INVALID_REGISTRATION),
                # a finalized feature the broker does not list at all counts as (0, 0)
                (registration(101, Features=broker_features(kraft_version=None, group_version=None)),
                 Errors.UNSUPPORTED_VERSION if leader.controller.image.finalized_features.get("group.version")
                 else Errors.NONE),
                (registration(102, LogDirs=[]), Errors.INVALID_REGISTRATION),
                (registration(102, LogDirs=[uuid.UUID(int=5)]), Errors.INVALID_REGISTRATION),
                (registration(102, LogDirs=[first["LogDirs"][0]]), Errors.INVALID_REGISTRATION),
                (registration(102, IsMigratingZkBroker=True), Errors.BROKER_ID_NOT_REGISTERED),
                # hostile sizes: a record of megabytes every replica would replay is refused up front
                (registration(102, Features=broker_features() + [
                    {"Name": f"x.{i}", "MinSupportedVersion": 0, "MaxSupportedVersion": 0} for i in range(1001)]),
                 Errors.INVALID_REGISTRATION),
                (registration(102, LogDirs=[uuid.uuid4() for _ in range(1001)]), Errors.INVALID_REGISTRATION),
            ]
            for body, code in cases:
                got = await call(leader, ApiKey.BROKER_REGISTRATION, body)
                assert got["ErrorCode"] == code, body
                if code != Errors.NONE:
                    assert got["BrokerEpoch"] == -1
                    assert log_end(leader) == end, body
                end = log_end(leader)
            gone = await call(leader, ApiKey.UNREGISTER_BROKER, {"BrokerId": 55})
            assert gone["ErrorCode"] == Errors.BROKER_ID_NOT_REGISTERED
            assert gone["ErrorMessage"] == "Broker ID 55 is not currently registered"
    asyncio.run(main())


def test_shutdown_fencing_and_unregistration(tmp_path):
    async def main():
        nodes = make_controllers(tmp_path, release_version="4.3")
        async with running(nodes):
            leader = await quiet_leader(nodes)
            epochs = {}
            for bid in (100, 101, 102):
                got = await call(leader, ApiKey.BROKER_REGISTRATION, registration(bid))
                epochs[bid] = got["BrokerEpoch"]
                hb = await call(leader, ApiKey.BROKER_HEARTBEAT, heartbeat(bid, epochs[bid], epochs[bid]))
                assert hb["IsFenced"] is False
            # an unfenced broker that leads nothing and wants to shut down: fenced and told to go
            hb = await call(leader, ApiKey.BROKER_HEARTBEAT, heartbeat(100, epochs[100], 10**6, shutdown=True))
            assert (hb["IsFenced"], hb["ShouldShutDown"]) == (True, True)
            # a broker that asks to be fenced is
            hb = await call(leader, ApiKey.BROKER_HEARTBEAT, heartbeat(101, epochs[101], 10**6, fence=True))
            assert (hb["IsFenced"], hb["ShouldShutDown"]) == (True, False)
            fenced = [(c["BrokerId"], c["Fenced"]) for _o, _v, c in committed(leader, BROKER_REGISTRATION_CHANGE)]
            assert fenced[-2:] == [(100, 1), (101, 1)]
            # a fenced broker asking to shut down is told to, and fenced once more (Kafka's
            # processBrokerHeartbeat fences on every move to SHUTDOWN_NOW; the differential test
            # against real Kafka checks it)
            hb = await call(leader, ApiKey.BROKER_HEARTBEAT, heartbeat(101, epochs[101], 10**6, shutdown=True))
            assert (hb["IsFenced"], hb["ShouldShutDown"]) == (True, True)
            fenced = [(c["BrokerId"], c["Fenced"]) for _o, _v, c in committed(leader, BROKER_REGISTRATION_CHANGE)]
            assert fenced[-1] == (101, 1)
            # unregistration removes it on every node
            got = await call(leader, ApiKey.UNREGISTER_BROKER, {"BrokerId": 102})
            assert got["ErrorCode"] == Errors.NONE
            ((_o, _v, rec),) = committed(leader, UNREGISTER_BROKER)
            assert (rec["BrokerId"], rec["BrokerEpoch"]) == (102, epochs[102])
            await wait_for(lambda: all(sorted(n.controller.image.brokers) == [100, 101] for n in nodes),
                           what="broker 102 gone on every node")
            for n in nodes:
                assert_mirror(n)
    asyncio.run(main())


def test_a_silent_broker_is_fenced_when_its_session_expires_also_by_a_new_active_controller(tmp_path):
    async def main():
        nodes = make_controllers(tmp_path, release_version="4.3", session_timeout_ms=2000)
        async with running(nodes):
            leader = await wait_for(lambda: active_of(nodes), what="an active controller")
            epochs = {}
            for bid in (100, 101):
                epochs[bid] = (await call(leader, ApiKey.BROKER_REGISTRATION, registration(bid)))["BrokerEpoch"]
                assert (await call(leader, ApiKey.BROKER_HEARTBEAT,
                                   heartbeat(bid, epochs[bid], epochs[bid])))["IsFenced"] is False

            stop = asyncio.Event()

            async def keep_101_alive(node):
                while not stop.is_set():
                    await call(node, ApiKey.BROKER_HEARTBEAT, heartbeat(101, epochs[101], 10**6))
                    await asyncio.sleep(0.1)

            alive = asyncio.create_task(keep_101_alive(leader))
            await wait_for(lambda: leader.controller.image.brokers[100]["Fenced"], what="broker 100 fenced")
            assert leader.controller.image.brokers[101]["Fenced"] is False
            fences = [c for _o, _v, c in committed(leader, BROKER_REGISTRATION_CHANGE) if c["Fenced"] == 1]
            assert [(c["BrokerId"], c["BrokerEpoch"]) for c in fences] == [(100, epochs[100])]
            stop.set()
            await alive

            # a new active controller gives every broker a fresh session, and fences 101 once silent
            await leader.stop()
            rest = [n for n in nodes if n is not leader]
            second = await wait_for(lambda: active_of(rest), what="a new active controller")
            await wait_for(lambda: second.controller.image.brokers[101]["Fenced"], what="broker 101 fenced")
            fences = [c["BrokerId"] for _o, _v, c in committed(second, BROKER_REGISTRATION_CHANGE) if c["Fenced"] == 1]
            assert fences == [100, 101]
    asyncio.run(main())
