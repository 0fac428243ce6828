"""Broker registration, differentially: one scripted sequence of BrokerRegistration,
BrokerHeartbeat and UnregisterBroker requests (kraftkit's blocking client, always to the active
controller) sent once to three real Kafka 4.4.0 controllers (``process.roles=controller``) and once
to three kraftkit controllers, both with ``broker.session.timeout.ms`` 4000; every answer compared
field by field, and then the broker records each cluster committed (read from its metadata log once
it stopped) and each controller's RegisterControllerRecord.

A broker epoch is the offset of the broker's RegisterBrokerRecord in its cluster's own log, so an
epoch is compared as *which* registration record it is the offset of ("the 1st registration of
broker 100"), never as a number; the records' epochs likewise. Records Kafka writes that are not
broker records (NoOps, LeaderChange, the bootstrap features, controller registrations) are left
out of the sequence; the controller registrations are compared on their own (one per controller,
everything but the incarnation and the endpoints).

The script: broker 100 registers (the feature ranges a real 4.4 node advertises, one log
directory), heartbeats behind its registration (stays fenced) and caught up (unfenced), registers
again with the same incarnation (amended, same epoch; its registration offset moves) and, while
its session is live, with another incarnation (DUPLICATE_BROKER_REGISTRATION); broker 101's
registrations with a wrong cluster id, a metadata.version range without the finalized level, no
metadata.version, without a feature finalized above 0, with a kraft.version range without the
finalized one, with no, reserved, repeated and another broker's log directories are refused; a
feature no controller knows is taken at 0..3 (broker 103, which never heartbeats: another
incarnation replaces it at once) and refused at 1..3 (broker 104); a stale epoch and an unknown
broker's heartbeats are refused; broker 101 registers and is unfenced; broker 100 asks to be
fenced, again, then to be unfenced; broker 101 stops heartbeating and its session expires (the
controller fences it) while broker 100 keeps heartbeating; fenced, 101 asks to shut down (told to,
fenced again); a new incarnation of 101 is refused while that heartbeat's session lives, the
session expires (fenced once more, as Kafka 4.4 does) and the new incarnation is registered with a
new epoch; its old epoch is stale; unfenced brokers asking to shut down (with or without
WantFence) are fenced and told to; UnregisterBroker of 101, 103 and an unknown id; 101's
heartbeat after its unregistration. Waits are for what the logs commit, never for a time."""

from __future__ import annotations

import asyncio
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import zip_longest
from pathlib import Path
from typing import Any

import pytest

from kraftkit._core import decode_batches, decode_metadata_record
from kraftkit._kafka import (
    BROKER_REGISTRATION_CHANGE,
    FENCE_BROKER,
    REGISTER_BROKER,
    REGISTER_CONTROLLER,
    UNFENCE_BROKER,
    UNREGISTER_BROKER,
)
from kraftkit.controller import ControllerNode, read_bootstrap_metadata
from kraftkit.features.storage.format import CLUSTER_METADATA_DIR, format_storage
from kraftkit.protocol import KafkaConnection, ProtocolError
from kraftkit.protocol.messages import ApiKey
from kraftkit.raft.core import RaftConfig
from kraftkit.raft.driver import NodeConfig
from tests.harness import jars
from tests.harness.node import random_cluster_id
from tests.harness.quorum import KafkaQuorum
from tests.raft._cluster import free_ports

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

#: short, for the expiry to come soon, long enough for the steps between two heartbeats on a loaded machine
SESSION_TIMEOUT_MS = 4000
# Kafka's error codes (org.apache.kafka.common.protocol.Errors)
NONE, UNSUPPORTED_VERSION, NOT_CONTROLLER, STALE_BROKER_EPOCH = 0, 35, 41, 77
DUPLICATE_BROKER_REGISTRATION, BROKER_ID_NOT_REGISTERED, INCONSISTENT_CLUSTER_ID, INVALID_REGISTRATION = 101, 102, 104, 119
BROKER_RECORDS = {REGISTER_BROKER: "RegisterBrokerRecord", BROKER_REGISTRATION_CHANGE: "BrokerRegistrationChangeRecord",
                  FENCE_BROKER: "FenceBrokerRecord", UNFENCE_BROKER: "UnfenceBrokerRecord",
                  UNREGISTER_BROKER: "UnregisterBrokerRecord"}
#: BrokerRegistrationChangeRecord's Fenced (Kafka's BrokerRegistrationFencingChange)
FENCE, UNFENCE = 1, -1

# the same incarnations and directories in both runs (the clusters are independent)
INC_A, INC_B, INC_C, INC_D, INC_E, INC_F = (uuid.UUID(int=(0xA << 124) + i) for i in range(1, 7))
DIR_1, DIR_2, DIR_3, DIR_4 = (uuid.UUID(int=(0xD << 124) + i) for i in range(1, 5))
RESERVED_DIR = uuid.UUID(int=1)  # Kafka's DirectoryId.LOST (0..99 are reserved)
PLAINTEXT = 0


# ---------------------------------------------------------------------------------- the clients
class Controllers:
    """Requests to whichever controller of a quorum is active (NOT_CONTROLLER: the next one)."""

    def __init__(self, ports: list[int]) -> None:
        self.conns = {p: KafkaConnection("127.0.0.1", p, timeout=30) for p in ports}
        self.active = ports[0]
        self.versions: dict[int, int] = {}

    def close(self) -> None:
        for c in self.conns.values():
            c.close()

    def send(self, api: int, body: dict) -> dict:
        deadline = time.monotonic() + 60
        order = list(self.conns)
        while True:
            for port in [self.active, *(p for p in order if p != self.active)]:
                conn = self.conns[port]
                v = conn.version_for(api)
                self.versions[api] = v
                resp = conn.request(api, v, body)
                if resp.get("ErrorCode") != NOT_CONTROLLER:
                    self.active = port
                    return resp
            if time.monotonic() > deadline:
                raise AssertionError(f"no active controller answered {ApiKey(api).name} within 60 s")
            time.sleep(0.2)

    def finalized_and_supported(self) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
        """The finalized levels (once the active controller has some) and supported ranges from ApiVersions."""
        deadline = time.monotonic() + 60
        while True:
            conn = self.conns[self.active]
            conn.api_versions()
            ans = conn.feature_answer
            assert ans is not None
            if "metadata.version" in ans.finalized:
                return ans.finalized, ans.supported
            if time.monotonic() > deadline:
                raise AssertionError("no finalized metadata.version within 60 s")
            time.sleep(0.2)


# ----------------------------------------------------------------------------------- the script
def registration(cluster_id: str, bid: int, incarnation: uuid.UUID, features: dict[str, tuple[int, int]],
                 dirs: list[uuid.UUID], port: int = 9092) -> dict:
    return {"BrokerId": bid, "ClusterId": cluster_id, "IncarnationId": incarnation,
            "Listeners": [{"Name": "PLAINTEXT", "Host": "127.0.0.1", "Port": port, "SecurityProtocol": PLAINTEXT}],
            "Features": [{"Name": n, "MinSupportedVersion": lo, "MaxSupportedVersion": hi}
                         for n, (lo, hi) in sorted(features.items())],
            "Rack": None, "IsMigratingZkBroker": False, "LogDirs": dirs, "PreviousBrokerEpoch": -1}


def heartbeat(bid: int, epoch: int, offset: int, *, fence: bool = False, shutdown: bool = False) -> dict:
    return {"BrokerId": bid, "BrokerEpoch": epoch, "CurrentMetadataOffset": offset, "WantFence": fence,
            "WantShutDown": shutdown, "OfflineLogDirs": []}


BIG = 10**9  # a metadata offset past everything: caught up


def run_script(c: Controllers, cluster_id: str, features: dict[str, tuple[int, int]], finalized: dict[str, int],
               wait_fenced: Callable[[int, int, Callable[[], None]], None]) -> tuple[list[tuple[str, dict]], list[dict]]:
    """Sends the script (see the module docstring); returns each step's (name, answer) and the
    answers to the heartbeats that kept broker 100's session alive while 101's expired."""
    steps: list[tuple[str, dict]] = []
    keepalives: list[dict] = []

    def send(name: str, api: int, body: dict) -> dict:
        resp = c.send(api, body)
        steps.append((name, {"api": ApiKey(api).name, **resp}))
        return resp

    def reg(name: str, body: dict) -> dict:
        return send(name, ApiKey.BROKER_REGISTRATION, body)

    def hb(name: str, body: dict) -> dict:
        return send(name, ApiKey.BROKER_HEARTBEAT, body)

    def keep_100_alive() -> None:
        keepalives.append(c.send(ApiKey.BROKER_HEARTBEAT, heartbeat(100, e100, BIG)))

    mv = finalized["metadata.version"]
    # a finalized feature other than metadata.version at a level above 0 (group.version, ...)
    raised = min(n for n, lv in finalized.items() if lv > 0 and n not in ("metadata.version", "kraft.version"))
    without_mv = {n: r for n, r in features.items() if n != "metadata.version"}
    without_raised = {n: r for n, r in features.items() if n != raised}
    mv_too_new = {**features, "metadata.version": (mv + 1, mv + 5)}
    other_cluster = random_cluster_id()

    e100 = reg("100 registers", registration(cluster_id, 100, INC_A, features, [DIR_1]))["BrokerEpoch"]
    hb("100 heartbeats behind its registration", heartbeat(100, e100, e100 - 1))
    hb("100 heartbeats caught up", heartbeat(100, e100, e100))
    reg("100 registers again, same incarnation, another port",
        registration(cluster_id, 100, INC_A, features, [DIR_1], port=9093))
    hb("100 heartbeats at its first registration's offset", heartbeat(100, e100, e100))
    reg("100 registers, another incarnation, its session live", registration(cluster_id, 100, INC_B, features, [DIR_1]))
    reg("101 registers with another cluster id", registration(other_cluster, 101, INC_C, features, [DIR_2]))
    reg("101 registers without the finalized metadata.version", registration(cluster_id, 101, INC_C, mv_too_new, [DIR_2]))
    reg("101 registers without metadata.version", registration(cluster_id, 101, INC_C, without_mv, [DIR_2]))
    reg("101 registers without a feature finalized above level 0",
        registration(cluster_id, 101, INC_C, without_raised, [DIR_2]))
    reg("101 registers with kraft.version 1..1", registration(cluster_id, 101, INC_C,
                                                              {**features, "kraft.version": (1, 1)}, [DIR_2]))
    reg("101 registers without log dirs", registration(cluster_id, 101, INC_C, features, []))
    reg("101 registers with a reserved log dir", registration(cluster_id, 101, INC_C, features, [RESERVED_DIR]))
    reg("101 registers with a log dir twice", registration(cluster_id, 101, INC_C, features, [DIR_2, DIR_2]))
    reg("101 registers with broker 100's log dir", registration(cluster_id, 101, INC_C, features, [DIR_1]))
    reg("103 registers with a feature no controller knows, 0..3",
        registration(cluster_id, 103, INC_E, {**features, "no.such.feature": (0, 3)}, [DIR_3]))
    reg("103 registers, another incarnation, never having heartbeated",
        registration(cluster_id, 103, INC_F, features, [DIR_3]))
    reg("104 registers with a feature no controller knows, 1..3",
        registration(cluster_id, 104, INC_E, {**features, "no.such.feature": (1, 3)}, [DIR_4]))
    hb("100 heartbeats with a stale epoch", heartbeat(100, e100 - 1, BIG))
    hb("102 heartbeats, never registered", heartbeat(102, e100, BIG))
    e101 = reg("101 registers", registration(cluster_id, 101, INC_C, features, [DIR_2], port=9094))["BrokerEpoch"]
    hb("101 heartbeats caught up", heartbeat(101, e101, BIG))
    hb("100 asks to be fenced", heartbeat(100, e100, BIG, fence=True))
    hb("100, fenced, asks to be fenced again", heartbeat(100, e100, BIG, fence=True))
    hb("100 asks to be unfenced", heartbeat(100, e100, BIG))

    wait_fenced(101, 1, keep_100_alive)  # 101 heartbeats no more: its session expires

    hb("101, fenced by its expired session, asks to shut down", heartbeat(101, e101, BIG, shutdown=True))
    again = registration(cluster_id, 101, INC_D, features, [DIR_2], port=9095)
    reg("101 registers, a new incarnation, right after that heartbeat", again)
    # that heartbeat started a session again, which expires: fenced once more (already fenced)
    wait_fenced(101, 3, keep_100_alive)
    resp = reg("101 registers, a new incarnation, its session expired", again)
    e101b = resp["BrokerEpoch"]
    hb("101 heartbeats with its first epoch", heartbeat(101, e101, BIG))
    hb("101, registered anew, heartbeats caught up", heartbeat(101, e101b, BIG))
    hb("100, unfenced, asks to shut down", heartbeat(100, e100, BIG, shutdown=True))
    hb("101, unfenced, asks to be fenced and to shut down", heartbeat(101, e101b, BIG, fence=True, shutdown=True))
    send("unregister 101", ApiKey.UNREGISTER_BROKER, {"BrokerId": 101})
    send("unregister 103", ApiKey.UNREGISTER_BROKER, {"BrokerId": 103})
    send("unregister 999, never registered", ApiKey.UNREGISTER_BROKER, {"BrokerId": 999})
    hb("101 heartbeats after its unregistration", heartbeat(101, e101b, BIG))
    return steps, keepalives


# ------------------------------------------------------------------------------ the metadata logs
def complete_batches(metadata_dir: Path):
    """The record batches of a metadata log being written: each segment up to its last complete batch."""
    out = []
    for seg in sorted(metadata_dir.glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            if length <= 0 or pos + 12 + length > len(data):
                break
            pos += 12 + length
        out.extend(decode_batches(data[:pos], verify_crc=True))
    return out


def records(metadata_dir: Path) -> list[tuple[int, int, int, dict]]:
    """(offset, api key, version, fields) of the metadata records of a log."""
    return [(r.offset, *decode_metadata_record(r.value)) for b in complete_batches(metadata_dir) if not b.is_control
            for r in b.records()]


def fullest_log(metadata_dirs: list[Path]) -> list[tuple[int, int, int, dict]]:
    """The records of the longest of a quorum's logs (every answer came after its commit, so the
    committed records are all there; a voter that lagged at the stop may lack the last ones)."""
    return max((records(d) for d in metadata_dirs), key=lambda log: log[-1][0] if log else -1)


def fencings(metadata_dir: Path, bid: int) -> int:
    """How many times the log fences ``bid``."""
    return sum(1 for _o, key, _v, d in records(metadata_dir)
               if (key == BROKER_REGISTRATION_CHANGE and d["BrokerId"] == bid and d["Fenced"] == FENCE)
               or (key == FENCE_BROKER and d["Id"] == bid))


def waiter(metadata_dirs: list[Path]) -> Callable[[int, int, Callable[[], None]], None]:
    """Waits until a majority of the logs fence ``bid`` ``times`` times (committed), calling
    ``keepalive`` meanwhile."""

    def wait(bid: int, times: int, keepalive: Callable[[], None]) -> None:
        deadline = time.monotonic() + 60
        while sum(fencings(d, bid) >= times for d in metadata_dirs) < 2:
            if time.monotonic() > deadline:
                raise AssertionError(f"broker {bid} was not fenced {times} times within 60 s")
            keepalive()
            time.sleep(0.5)

    return wait


def epoch_names(log: list[tuple[int, int, int, dict]]) -> dict[int, str]:
    """offset of each RegisterBrokerRecord -> which registration of which broker it is."""
    names, seen = {}, {}
    for offset, key, _v, d in log:
        if key == REGISTER_BROKER:
            seen[d["BrokerId"]] = seen.get(d["BrokerId"], 0) + 1
            names[offset] = f"offset of broker {d['BrokerId']}'s RegisterBrokerRecord #{seen[d['BrokerId']]}"
    return names


def named(epoch: int, names: dict[int, str]) -> Any:
    return epoch if epoch < 0 else names.get(epoch, f"{epoch}, the offset of no RegisterBrokerRecord")


def normalized_steps(steps: list[tuple[str, dict]], names: dict[int, str]) -> list[tuple[str, dict]]:
    out = []
    for name, resp in steps:
        resp = {k: v for k, v in resp.items() if k != "ThrottleTimeMs"}
        if "BrokerEpoch" in resp:
            resp["BrokerEpoch"] = named(resp["BrokerEpoch"], names)
        out.append((name, resp))
    return out


def broker_records(log: list[tuple[int, int, int, dict]], names: dict[int, str]) -> list[tuple[str, int, dict]]:
    out = []
    for _o, key, version, d in log:
        if key in BROKER_RECORDS:
            d = dict(d)
            for field in ("BrokerEpoch", "Epoch"):
                if field in d:
                    d[field] = named(d[field], names)
            out.append((BROKER_RECORDS[key], version, d))
    return out


def controller_registrations(log: list[tuple[int, int, int, dict]]) -> list[tuple[int, int, dict]]:
    """(controller id, version, fields but the incarnation and endpoints) of each RegisterControllerRecord.
    Its Features are keyed by name (the schema's mapKey), so they are compared by name: a Kafka
    controller lists them in the iteration order of its own hash map, kraftkit's sorted."""
    out = []
    for _o, key, v, d in log:
        if key == REGISTER_CONTROLLER:
            fields = {k: x for k, x in d.items() if k not in ("IncarnationId", "EndPoints")}
            fields["Features"] = sorted(fields["Features"], key=lambda f: f["Name"])
            out.append((d["ControllerId"], v, fields))
    return sorted(out, key=lambda c: c[0])


def side_by_side(want: list, have: list) -> str:
    """Kafka's items beside kraftkit's, the differing ones starred."""
    return "\n".join(f"{i}{' ' if w == h else '*'}\n  Kafka    {w}\n  kraftkit {h}"
                     for i, (w, h) in enumerate(zip_longest(want, have)))


# ---------------------------------------------------------------------------- kraftkit's quorum
@contextmanager
def kraftkit_quorum(root: Path, cluster_id: str) -> Iterator[tuple[list[int], list[Path]]]:
    """Three kraftkit controllers (broker.session.timeout.ms SESSION_TIMEOUT_MS) on an event loop of their own
    thread; yields their ports and metadata log directories; stops them on the way out."""
    ports = free_ports(3)
    voters = {i + 1: ("127.0.0.1", p) for i, p in enumerate(ports)}
    dirs = []
    for i in voters:
        d = root / f"kraftkit-{i}"
        format_storage([d], cluster_id=cluster_id, node_id=i, no_initial_controllers=True)
        dirs.append(d)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="kraftkit-controllers", daemon=True)
    thread.start()
    nodes: list[ControllerNode] = []

    def run(coro, timeout: float = 60):
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    async def start() -> None:
        for i, d in zip(voters, dirs, strict=True):
            n = ControllerNode(NodeConfig(i, voters, d, cluster_id, raft=RaftConfig(), snapshot_every_records=0),
                               read_bootstrap_metadata(d), session_timeout_ms=SESSION_TIMEOUT_MS)
            nodes.append(n)
            await n.start()

    async def stop() -> None:
        for n in nodes:
            await n.stop()

    try:
        run(start())
        yield ports, [d / CLUSTER_METADATA_DIR for d in dirs]
    finally:
        try:
            run(stop())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(30)
            loop.close()


# --------------------------------------------------------------------------------------- the test
def test_broker_registration_as_kafka_4_4_answers_it(kafka_jars, tmp_path):
    jars.ensure_kafka(jars.KAFKA_NEWEST)
    cid = random_cluster_id()

    # Kafka first: its controllers' supported ranges are the features the script's brokers send
    quorum = KafkaQuorum(tmp_path / "kafka", jars.KAFKA_NEWEST, broker=False, cluster_id=cid,
                         extra_props={"broker.session.timeout.ms": SESSION_TIMEOUT_MS})
    with quorum:
        kafka_dirs = [quorum.metadata_log_dir(i) for i in (1, 2, 3)]
        c = Controllers(list(quorum.controller_ports.values()))
        try:
            kafka_finalized, features = c.finalized_and_supported()
            kafka_steps, kafka_keepalives = run_script(c, cid, features, kafka_finalized, waiter(kafka_dirs))
            kafka_versions = dict(c.versions)
        except (AssertionError, ProtocolError) as e:
            raise AssertionError(f"{e}\n{quorum.log_tails()}") from e
        finally:
            c.close()
    kafka_log = fullest_log(kafka_dirs)

    with kraftkit_quorum(tmp_path, cid) as (ports, kraftkit_dirs):
        c = Controllers(ports)
        try:
            kraftkit_finalized, _supported = c.finalized_and_supported()
            assert kraftkit_finalized == kafka_finalized  # the same bootstrap: the script means the same
            kraftkit_steps, kraftkit_keepalives = run_script(c, cid, features, kafka_finalized, waiter(kraftkit_dirs))
            kraftkit_versions = dict(c.versions)
        finally:
            c.close()
    kraftkit_log = fullest_log(kraftkit_dirs)
    assert kraftkit_versions == kafka_versions

    # the script did what it says on Kafka (its answers are the expectation)
    kafka_names = epoch_names(kafka_log)
    expected = normalized_steps(kafka_steps, kafka_names)
    codes = {name: r["ErrorCode"] for name, r in expected}
    refused = {"100 registers, another incarnation, its session live": DUPLICATE_BROKER_REGISTRATION,
               "101 registers with another cluster id": INCONSISTENT_CLUSTER_ID,
               "101 registers without the finalized metadata.version": UNSUPPORTED_VERSION,
               "101 registers without metadata.version": INVALID_REGISTRATION,
               "101 registers without a feature finalized above level 0": UNSUPPORTED_VERSION,
               "101 registers with kraft.version 1..1": UNSUPPORTED_VERSION,
               "101 registers without log dirs": INVALID_REGISTRATION,
               "101 registers with a reserved log dir": INVALID_REGISTRATION,
               "101 registers with a log dir twice": INVALID_REGISTRATION,
               "101 registers with broker 100's log dir": INVALID_REGISTRATION,
               "104 registers with a feature no controller knows, 1..3": UNSUPPORTED_VERSION,
               "100 heartbeats with a stale epoch": STALE_BROKER_EPOCH,
               "102 heartbeats, never registered": STALE_BROKER_EPOCH,
               "101 registers, a new incarnation, right after that heartbeat": DUPLICATE_BROKER_REGISTRATION,
               "101 heartbeats with its first epoch": STALE_BROKER_EPOCH,
               "unregister 999, never registered": BROKER_ID_NOT_REGISTERED,
               "101 heartbeats after its unregistration": STALE_BROKER_EPOCH}
    assert {n: codes[n] for n in refused} == refused
    assert all(code == NONE for n, code in codes.items() if n not in refused)
    assert dict(expected)["101 registers, a new incarnation, its session expired"]["BrokerEpoch"] == (
        "offset of broker 101's RegisterBrokerRecord #2")
    assert [r["IsFenced"] for _n, r in expected[1:3]] == [True, False]
    assert all(r["ErrorCode"] == NONE and r["IsFenced"] is False for r in kafka_keepalives)
    assert all(r["ErrorCode"] == NONE and r["IsFenced"] is False for r in kraftkit_keepalives)

    # every answer, field by field
    got = normalized_steps(kraftkit_steps, epoch_names(kraftkit_log))
    assert [n for n, _r in got] == [n for n, _r in expected]
    differences = [(n, e, g) for (n, e), (_n, g) in zip(expected, got, strict=True) if e != g]
    assert not differences, "\n".join(f"{n}:\n  Kafka    {e}\n  kraftkit {g}" for n, e, g in differences)

    # the broker records each committed, in order
    want = broker_records(kafka_log, kafka_names)
    have = broker_records(kraftkit_log, epoch_names(kraftkit_log))
    assert [r[0] for r in want][:1] == ["RegisterBrokerRecord"]
    assert have == want, side_by_side(want, have)

    # one RegisterControllerRecord per controller, the same but for incarnations and endpoints
    kafka_controllers = controller_registrations(kafka_log)
    assert [i for i, _v, _d in kafka_controllers] == [1, 2, 3]
    kraftkit_controllers = controller_registrations(kraftkit_log)
    assert kraftkit_controllers == kafka_controllers, side_by_side(kafka_controllers, kraftkit_controllers)
