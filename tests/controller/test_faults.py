"""kill -9 of the active controller, with real ``kraftkit controller run`` processes on loopback: in the
middle of the bootstrap and of an UpdateFeatures, at the crash points of
:mod:`kraftkit.controller.faults` (the leader appended the batch to its own log and dies before it
commits), and at random moments from outside; and of every node in the middle of a lossy
metadata.version downgrade (committed, its rewritten snapshot not written yet).

Afterwards, whatever happened: every node's committed log is the same, holds exactly one bootstrap
transaction (the bootstrap metadata's records, once) and each feature change whole or not at all,
nothing but raft control records lies beyond the high watermark, and every node reports over
ApiVersions the finalized levels and epoch that a replay of the committed log gives."""

from __future__ import annotations

import os
import random
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import pytest

from kraftkit._core import RecordBatch, Segment, decode_metadata_record
from kraftkit._kafka import ABORT_TRANSACTION, BEGIN_TRANSACTION, END_TRANSACTION, FEATURE_LEVEL
from kraftkit.controller import read_bootstrap_metadata
from kraftkit.controller.faults import CRASH_ENV
from kraftkit.errors import KraftkitError
from kraftkit.features.registry import MV_FEATURE, registry
from kraftkit.features.storage.format import CLUSTER_METADATA_DIR
from kraftkit.log import list_segments, segment_name
from kraftkit.protocol import KafkaConnection, ProtocolError
from kraftkit.protocol.messages import ApiKey, Errors
from kraftkit.raft.admin import QuorumAdmin, survey_features
from tests._procs import KraftkitProcess

from ._nodes import format_dirs

#: a bootstrap that is not the default one (the newest release's production metadata.version):
#: 4.3's levels, group.version left at 0 so that an update can raise it
RELEASE, FEATURES = "4.3", {"group.version": 0}
#: the election timeout below the raft layer's fixed 1 s election backoff: a survivor that alone can
#: win (it holds the dead leader's batch) times out within another survivor's backoff, so elections
#: end (kraftkit has no pre-vote; see tests/controller/test_bootstrap.py's SURVIVABLE)
RAFT = ["--election-timeout-ms", "500", "--fetch-timeout-ms", "1000", "--snapshot-every", "0"]
SETTLE_S = 40.0


def decoded(values) -> list[tuple[int, dict]]:
    return [decode_metadata_record(v)[::2] for v in values]


# ------------------------------------------------------------------------- the processes

@dataclass
class Death:
    """A controller process that ended by itself or was killed: its exit status, the log of that
    run, and the records of the last data batch of its metadata log as it was on disk at its death."""

    node: int
    returncode: int
    log_path: Path
    last_data: list[tuple[int, dict]] | None


@dataclass
class Quorum:
    """Three controllers over directories ``kraftkit storage format`` wrote; each run of a node logs
    to its own file (nodeN.runK.log)."""

    root: Path
    release: str = RELEASE
    features: dict[str, int] = field(default_factory=lambda: dict(FEATURES))
    voters: dict[int, tuple[str, int]] = field(init=False)
    dirs: dict[int, Path] = field(init=False)
    procs: dict[int, KraftkitProcess] = field(default_factory=dict)
    runs: dict[int, int] = field(default_factory=dict)
    deaths: list[Death] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.voters, dirs = format_dirs(self.root, release_version=self.release, layout="checkpoint",
                                        features=self.features)
        self.dirs = dict(zip(self.voters, dirs, strict=True))
        self.boot = read_bootstrap_metadata(dirs[0])
        self.addresses = {i: f"{h}:{p}" for i, (h, p) in self.voters.items()}

    def _new(self, i: int) -> KraftkitProcess:
        self.runs[i] = self.runs.get(i, 0) + 1
        voters = ",".join(f"{n}@{a}" for n, a in self.addresses.items())
        args = ["--node-id", str(i), "--voters", voters, "--log-dir", str(self.dirs[i]), *RAFT]
        return KraftkitProcess(["controller", "run"], args, self.root / f"node{i}.run{self.runs[i]}.log")

    def start(self, nodes: list[int], crash_at: str | None = None) -> None:
        """Starts ``nodes`` at once, with ``KRAFTKIT_CRASH_AT=crash_at`` in their environment when given."""
        with mock.patch.dict(os.environ):
            os.environ.pop(CRASH_ENV, None)
            if crash_at:
                os.environ[CRASH_ENV] = crash_at
            with ThreadPoolExecutor(len(nodes)) as pool:
                started = {i: pool.submit(self._new, i) for i in nodes}
            errors = []
            for i, f in started.items():
                if f.exception() is None:
                    self.procs[i] = f.result()
                else:
                    errors.append(f.exception())
            if errors:
                raise errors[0]

    def kill(self, i: int) -> None:
        """kill -9 of node ``i``'s process."""
        proc = self.procs[i].proc
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def reap(self) -> list[int]:
        """Notes every node whose process ended (its log as it left it) and starts it again, without
        a crash point; returns those nodes."""
        dead = [i for i, p in self.procs.items() if p.proc.poll() is not None]
        for i in dead:
            p = self.procs.pop(i)
            p.stop()
            # decoded now: the batches are read from the file lazily, and the node's next run rewrites its tail
            try:
                data = [b for b in read_log(self.dirs[i]) if not b.is_control]
                last = decoded(r.value for r in data[-1].records()) if data else []
            except KraftkitError:  # a batch torn by a kill in the middle of its write (the next run cuts it off)
                last = None
            self.deaths.append(Death(i, p.proc.returncode, p.log_path, last))
        if dead:
            self.start(dead)
        return dead

    def restart(self, i: int) -> None:
        """A clean stop (SIGTERM) of node ``i`` and a start without a crash point."""
        assert self.procs.pop(i).stop() == 0
        self.start([i])

    def stop(self) -> None:
        for p in self.procs.values():  # all at once, then each waited for
            if p.proc.poll() is None:
                p.proc.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            p.stop()

    def tails(self) -> str:
        out = []
        for p in sorted(self.root.glob("node*.run*.log")):
            out += [f"--- tail of {p.name} ---", *p.read_text(errors="replace").splitlines()[-25:]]
        return "\n".join(out)


@contextmanager
def quorum(root: Path, **kw):
    q = Quorum(root, **kw)
    try:
        yield q
    finally:
        q.stop()


# ------------------------------------------------------------------------- live state

@dataclass(frozen=True)
class Settled:
    """The quorum at rest: its leader and high watermark, every voter's log ending there, and the
    finalized levels and epoch every node reported."""

    leader: int
    hw: int
    finalized: dict[str, int]
    epoch: int


def describe(q: Quorum) -> dict | None:
    for addr in q.addresses.values():
        try:
            with QuorumAdmin(addr, timeout=2) as admin:
                return admin.describe()
        except (KraftkitError, OSError):
            continue
    return None


def settled(q: Quorum) -> Settled | None:
    d = describe(q)
    if d is None or d["leader_id"] < 0 or d["high_watermark"] <= 0:
        return None
    hw = d["high_watermark"]
    if sorted(v["id"] for v in d["voters"]) != sorted(q.voters) or any(v["log_end_offset"] != hw for v in d["voters"]):
        return None
    _cache, surveyed = survey_features(list(q.addresses.values()), timeout=5)
    answers = {s.node_id: s.answer for s in surveyed}
    if sorted(answers) != sorted(q.voters) or any(a is None for a in answers.values()):
        return None
    seen = {(tuple(sorted(a.finalized.items())), a.epoch) for a in answers.values() if a is not None}
    if len(seen) != 1:
        return None
    ((finalized, epoch),) = seen
    if MV_FEATURE not in dict(finalized):
        return None
    again = describe(q)  # nothing moved while the nodes were asked
    if again is None or (again["leader_id"], again["high_watermark"]) != (d["leader_id"], hw):
        return None
    return Settled(d["leader_id"], hw, dict(finalized), epoch)


def wait_settled(q: Quorum, *, reap: bool = True, timeout: float = SETTLE_S) -> Settled:
    """Waits for the quorum to settle, starting again (without a crash point) every node that died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if reap:
            q.reap()
        s = settled(q)
        if s is not None:
            return s
        time.sleep(0.1)
    deaths = [(d.node, d.returncode) for d in q.deaths]
    pytest.fail(f"the quorum did not settle within {timeout:.0f}s (nodes that died, exit status: {deaths})\n{q.tails()}")


def update_request(updates: dict[str, int]) -> dict:
    return {"timeoutMs": 10000, "ValidateOnly": False,
            "FeatureUpdates": [{"Feature": f, "MaxVersionLevel": lv, "UpgradeType": 1} for f, lv in updates.items()]}


def update_once(address: str, updates: dict[str, int]) -> dict:
    """One UpdateFeatures to one node (raises ProtocolError when the connection drops)."""
    host, port = address.rsplit(":", 1)
    with KafkaConnection(host, int(port), timeout=15) as conn:
        return conn.request(ApiKey.UPDATE_FEATURES, conn.version_for(ApiKey.UPDATE_FEATURES), update_request(updates))


def attempt_update(address: str, updates: dict[str, int]) -> dict | ProtocolError:
    try:
        return update_once(address, updates)
    except ProtocolError as e:
        return e


def update_at_active(q: Quorum, updates: dict[str, int], timeout: float = 30.0) -> dict:
    """UpdateFeatures to whichever node is the active controller (NOT_CONTROLLER: the next one)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for addr in q.addresses.values():
            try:
                got = update_once(addr, updates)
            except ProtocolError:
                continue
            if got["ErrorCode"] != Errors.NOT_CONTROLLER:
                return got
        time.sleep(0.1)
    pytest.fail(f"no active controller answered UpdateFeatures within {timeout:.0f}s\n{q.tails()}")


# ------------------------------------------------------------------------- the logs on disk

def read_log(d: Path) -> list[RecordBatch]:
    """Every batch of a node's metadata log, read from its segment files (CRCs checked)."""
    part = d / CLUSTER_METADATA_DIR
    return [b for base in list_segments(part) for b in Segment(part / segment_name(base)).read_batches(verify_crc=True)]


@dataclass
class Replay:
    """A committed log replayed: the finalized levels and their epoch (the offset of the last
    FeatureLevelRecord), the metadata transactions (offset of their BeginTransactionRecord, the
    records inside), and the FeatureLevelRecords outside transactions, batch by batch."""

    finalized: dict[str, int]
    epoch: int
    transactions: list[tuple[int, list[tuple[int, dict]]]]
    changes: list[list[tuple[str, int]]]


def replay(batches: list[RecordBatch]) -> Replay:
    levels: dict[str, int] = {}
    epoch = -1
    open_tx: tuple[int, list] | None = None
    done: list[tuple[int, list]] = []
    changes = []
    for b in batches:
        if b.is_control:
            continue
        outside = []
        for r in b.records():
            key, _v, data = decode_metadata_record(r.value)
            assert key != ABORT_TRANSACTION, f"offset {r.offset}: an aborted transaction in the committed log"
            if key == BEGIN_TRANSACTION:
                assert open_tx is None, f"offset {r.offset}: a transaction begins inside the one at {open_tx[0]}"
                open_tx = (r.offset, [])
            elif key == END_TRANSACTION:
                assert open_tx is not None, f"offset {r.offset}: a transaction ends that did not begin"
                done.append(open_tx)
                open_tx = None
            else:
                if open_tx is not None:
                    open_tx[1].append((key, data))
                if key == FEATURE_LEVEL:
                    levels[data["Name"]] = data["FeatureLevel"]
                    epoch = r.offset
                    if open_tx is None:
                        outside.append((data["Name"], data["FeatureLevel"]))
        if outside:
            changes.append(outside)
    assert open_tx is None, f"the transaction at offset {open_tx[0]} is still open at the high watermark"
    return Replay({k: v for k, v in sorted(levels.items()) if v != 0}, epoch, done, changes)


def check_logs(q: Quorum, s: Settled) -> Replay:
    """The invariants on the stopped nodes' segment files, given the settled quorum seen live: every
    log holds the same batches below the high watermark (all of them: each voter's log ended there)
    and nothing but control batches beyond it; the committed part holds exactly one metadata
    transaction, the bootstrap's; its replay gives the levels and epoch every node reported."""
    committed = {}
    for i, d in q.dirs.items():
        batches = read_log(d)
        below = [b for b in batches if b.base_offset < s.hw]
        assert below and below[-1].last_offset == s.hw - 1, f"node {i}: its log does not reach the high watermark"
        beyond = [b.base_offset for b in batches if b.base_offset >= s.hw and not b.is_control]
        assert not beyond, f"node {i}: data batches at {beyond}, beyond the high watermark {s.hw}"
        committed[i] = below
    first, *others = q.dirs
    for i in others:
        assert [bytes(memoryview(b)) for b in committed[i]] == [bytes(memoryview(b)) for b in committed[first]], \
            f"the committed logs of nodes {first} and {i} differ"
    r = replay(committed[first])
    assert len(r.transactions) == 1, f"{len(r.transactions)} bootstrap transactions in the committed log"
    assert r.transactions[0][1] == decoded(q.boot.activation_records())[1:-1]
    assert (r.finalized, r.epoch) == (s.finalized, s.epoch), "the nodes report other levels than the log holds"
    return r


def bootstrap_levels(q: Quorum) -> dict[str, int]:
    return dict(sorted({MV_FEATURE: q.boot.metadata_version, **{k: v for k, v in q.boot.features.items() if v}}.items()))


def one_level_up(q: Quorum) -> dict[str, int]:
    """The update the tests make: group.version 0 -> 1 and metadata.version up one level, one batch of
    two records, so that half of it would show."""
    return {"group.version": 1, MV_FEATURE: q.boot.metadata_version + 1}


def crashed_at(death: Death, point: str) -> bool:
    return death.returncode == -signal.SIGKILL and f"crash point {point} reached" in death.log_path.read_text()


# ------------------------------------------------------------------------- the tests

@pytest.mark.timeout(120)
def test_leaders_killed_right_after_appending_the_bootstrap_leave_exactly_one(tmp_path):
    with quorum(tmp_path) as q:
        # each node dies the first time it leads, right after appending the bootstrap batch; it is
        # started again without the crash point, until a leader survives its bootstrap
        q.start(list(q.voters), crash_at="bootstrap-appended")
        s = wait_settled(q)
        q.stop()
    assert 1 <= len(q.deaths) <= 3 and len({d.node for d in q.deaths}) == len(q.deaths)
    activation = decoded(q.boot.activation_records())
    for d in q.deaths:
        assert crashed_at(d, "bootstrap-appended"), d
        # it died with the bootstrap batch at the end of its log, never committed before it died
        assert d.last_data == activation, d
    r = check_logs(q, s)
    assert r.changes == []  # no FeatureLevelRecord outside the one bootstrap transaction
    assert s.finalized == bootstrap_levels(q)


@pytest.mark.timeout(120)
def test_a_leader_killed_right_after_appending_a_feature_update_commits_it_everywhere_or_nowhere(tmp_path):
    with quorum(tmp_path) as q:
        # the crash point is the update's: the bootstrap goes through
        q.start(list(q.voters), crash_at="feature-update-appended")
        before = wait_settled(q, reap=False)
        assert before.finalized == bootstrap_levels(q) and not q.deaths
        up = one_level_up(q)
        leader = before.leader
        for _ in range(5):
            try:
                got = update_once(q.addresses[leader], up)
            except ProtocolError:  # the leader died before it answered
                break
            # (the leadership moved since the quorum settled: ask the new leader)
            assert got["ErrorCode"] == Errors.NOT_CONTROLLER, got
            leader = wait_settled(q, reap=False).leader
        else:
            pytest.fail(f"no leader took the update\n{q.tails()}")
        q.procs[leader].proc.wait(timeout=30)
        crashed = wait_settled(q)
        (death,) = q.deaths
        assert death.node == leader and crashed_at(death, "feature-update-appended")
        # it died with the update's batch at the end of its log
        assert death.last_data == [(FEATURE_LEVEL, {"Name": n, "FeatureLevel": v}) for n, v in up.items()]
        # all or nothing, on every node alike
        first_committed = crashed.finalized == {**before.finalized, **up}
        assert first_committed or crashed.finalized == before.finalized, crashed
        # the other two still carry the crash point: started again without it, then the retry
        for i in q.voters:
            if q.runs[i] == 1:
                q.restart(i)
                wait_settled(q, reap=False)
        got = update_at_active(q, up)
        assert got["ErrorCode"] == Errors.NONE, got
        after = wait_settled(q, reap=False)
        q.stop()
    assert after.finalized == {**before.finalized, **up}
    r = check_logs(q, after)
    # Kafka 4.4's FeatureControlManager.updateFeature writes a FeatureLevelRecord for any valid level,
    # the finalized one included: a retry after a committed update is a second, identical batch
    assert r.changes == [list(up.items())] * (2 if first_committed else 1)


LEADER_LINE = re.compile(r"__cluster_metadata-0: leader in epoch \d+ \(leader (\d+)\)")


def first_leader(q: Quorum, timeout: float = 30.0) -> int:
    """The first node to say (in its log) that it leads, watched for as it happens."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for i, p in q.procs.items():
            m = LEADER_LINE.search(p.log_path.read_text(errors="replace"))
            if m:
                assert int(m.group(1)) == i
                return i
        time.sleep(0.002)
    pytest.fail(f"no node led within {timeout:.0f}s\n{q.tails()}")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_leader_killed_from_outside_at_random_moments_of_the_bootstrap_and_of_an_update(tmp_path, seed):
    rng = random.Random(seed)
    with quorum(tmp_path) as q:
        q.start(list(q.voters))
        # the first leader appends the bootstrap within milliseconds of its election, and commits it
        # one fetch round later: killed at a random moment around those
        first = first_leader(q)
        time.sleep(rng.uniform(0, 0.03))
        q.kill(first)
        time.sleep(rng.uniform(0, 1))
        before = wait_settled(q)  # the killed node started again
        assert before.finalized == bootstrap_levels(q)
        up = one_level_up(q)
        with ThreadPoolExecutor(1) as pool:
            sent = pool.submit(attempt_update, q.addresses[before.leader], up)
            time.sleep(rng.uniform(0, 0.02))
            q.kill(before.leader)
            answer = sent.result(timeout=60)
        time.sleep(rng.uniform(0, 1))
        mid = wait_settled(q)
        first_committed = mid.finalized == {**before.finalized, **up}
        assert first_committed or mid.finalized == before.finalized, mid
        if isinstance(answer, dict) and answer["ErrorCode"] == Errors.NONE:
            assert first_committed, "an update answered as committed was lost"
        got = update_at_active(q, up)
        assert got["ErrorCode"] == Errors.NONE, got
        after = wait_settled(q)
        q.stop()
    assert [d.returncode for d in q.deaths] == [-signal.SIGKILL] * 2
    assert after.finalized == {**before.finalized, **up}
    r = check_logs(q, after)
    assert r.changes == [list(up.items())] * (2 if first_committed else 1)


@pytest.mark.timeout(150)
def test_every_node_killed_in_the_middle_of_a_lossy_downgrade_rewrites_it_once_after_restart(tmp_path):
    """Each node dies the first time it has applied the committed unsafe downgrade (3.9 -> 3.5-IV2,
    which loses the controllers' registrations) and has not written its rewritten snapshot; started
    again, each replays the batch and rewrites it: all end at the same snapshot, byte for byte, with
    no log below it, and report the level and epoch a load of that snapshot and the log after gives."""
    from kraftkit.metadata.image import load_snapshot
    from kraftkit.metadata.snapshot import list_snapshots

    target = registry().metadata_version("3.5-IV2").level
    with quorum(tmp_path, release="3.9", features={}) as q:
        q.start(list(q.voters), crash_at="metadata-rewrite-pending")
        before = wait_settled(q, reap=False)
        assert not q.deaths
        down = {"timeoutMs": 10000, "ValidateOnly": False,
                "FeatureUpdates": [{"Feature": MV_FEATURE, "MaxVersionLevel": target, "UpgradeType": 3}]}
        host, port = q.addresses[before.leader].rsplit(":", 1)
        try:
            with KafkaConnection(host, int(port), timeout=15) as conn:
                answer = conn.request(ApiKey.UPDATE_FEATURES, conn.version_for(ApiKey.UPDATE_FEATURES), down)
            pytest.fail(f"the leader answered although it should have died before its rewrite: {answer}")
        except ProtocolError:
            pass  # it died at the crash point, after the commit
        deadline = time.monotonic() + SETTLE_S
        while len(q.deaths) < 3 and time.monotonic() < deadline:
            q.reap()
            time.sleep(0.1)
        after = wait_settled(q)
        q.stop()
    assert sorted(d.node for d in q.deaths) == sorted(q.voters), [(d.node, d.returncode) for d in q.deaths]
    assert all(crashed_at(d, "metadata-rewrite-pending") for d in q.deaths)
    assert after.finalized == {MV_FEATURE: target}
    # (Kafka 4.4's bootstrap snapshot 0-0, which the format wrote, stays beside it)
    snaps = {i: [s for s in list_snapshots(d / CLUSTER_METADATA_DIR) if s.end_offset > 0] for i, d in q.dirs.items()}
    assert len({tuple(map(tuple, s)) for s in snaps.values()}) == 1, snaps
    (sid,) = snaps[1]
    files = {(q.dirs[i] / CLUSTER_METADATA_DIR / sid.file_name).read_bytes() for i in q.dirs}
    assert len(files) == 1
    img = load_snapshot(q.dirs[1] / CLUSTER_METADATA_DIR / sid.file_name)
    assert img.metadata_version == target and img.controllers == {}
    for i, d in q.dirs.items():
        part = d / CLUSTER_METADATA_DIR
        assert list_segments(part)[0] == sid.end_offset, f"node {i} keeps a segment below the snapshot"
        later = [decode_metadata_record(r.value)[0] for b in read_log(d) if not b.is_control for r in b.records()]
        assert FEATURE_LEVEL not in later, f"node {i}: a feature change after the rewritten snapshot"
    # the epoch of the finalized features is the downgrade's offset, the snapshot's last
    assert after.epoch == sid.end_offset - 1
