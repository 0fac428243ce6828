"""End to end under faults: three ``kraftkit controller run`` processes (formatted at release 4.3)
and three real Kafka 4.3.1 brokers (``process.roles=broker``) on loopback; a topic of six partitions
with replication factor 3 and ``min.insync.replicas=2`` (made with ``kafka-topics``); Kafka's own
``acks=all`` producer (``java/EndToEndClient.java``) writes keyed records all along, **while**

* one broker is killed with ``kill -9``: its session expires, the controller fences it and moves its
  leaderships to other ISR members; the producer carries on (its errors are counted, not hidden);
  it comes back as a new incarnation and rejoins every ISR;
* the active kraftkit controller is killed with ``kill -9``: another takes over from the log, the
  brokers find it, the producer carries on; the killed one comes back and catches up.

Then a consumer group (``group.id``: its coordinator and ``__consumer_offsets``, replicated on the
brokers, work) reads the topic back: every acknowledged record, exactly once (count and a checksum of
keys and values equal; no duplicates from the idempotent producer), and with a transactional producer
(``read_committed``) nothing from an aborted transaction and every transaction whole or not at all.
All three controllers hold the same metadata log at the end; no controller logged an ERROR, and no
broker either, but for a race of transactions v2 in Kafka's own produce path that the client retries
(``TV2_SEQUENCE_RACE``, counted). The times from each kill to its leaderships moved, and the producer's
errors and client warnings, are printed (measured, never asserted: ``pytest -s`` shows them).

One round (a broker, then the active controller) per producer runs unmarked; the ``slow`` variant kills
every broker in turn, the active controller after each, and in its last round the controller right
after the broker, before the broker's session expires."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit.errors import KraftkitError
from kraftkit.features.storage.format import CLUSTER_METADATA_DIR
from kraftkit.log import Segment
from kraftkit.protocol import KafkaConnection
from kraftkit.protocol.messages import ApiKey
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.node import free_port, random_cluster_id, tool_log4j_files
from tests.kafka.test_broker_failover_on_kraftkit import Broker, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(900)]

V = jars.KAFKA_4
#: the quorum's release: the newest a 4.3.1 broker registers at (at the default, 4.4-IV2, its registration is
#: refused with UNSUPPORTED_VERSION: it supports share.version up to 1 and metadata.version up to 4.3's)
RELEASE = "4.3"
SESSION_MS = 4000
SOURCE = Path(tools.__file__).resolve().parent / "java" / "EndToEndClient.java"
PARTITIONS = 6
BROKERS = (101, 102, 103)
REPLICATED = {  # the brokers' internal topics, replicated like the data
    "offsets.topic.replication.factor": 3, "offsets.topic.num.partitions": 3,
    "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
    "transaction.state.log.num.partitions": 3, "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.min.isr": 2,
}

#: Kafka's own data path, not the controller's: under transaction.version 2 a transaction's first batch to a
#: partition whose previous transaction's markers are still being written gets CONCURRENT_TRANSACTIONS and is
#: retried, while the producer's next batch (sequence 1, in flight behind it) meets a partition with no state
#: for the producer; the leader logs this at ERROR and answers OUT_OF_ORDER_SEQUENCE_NUMBER, which the client
#: retries (its send succeeds: the records are acknowledged and read back below). Three 4.3.1 brokers on
#: Kafka 4.3.1's own controllers log the same under this producer, without any fault.
TV2_SEQUENCE_RACE = re.compile(r"ERROR \[ReplicaManager broker=\d+\] Error processing append operation on partition "
                               r"\S+:t-\d+ .*\n.*OutOfOrderSequenceException: Invalid sequence number for producer \d+ "
                               r"at offset \d+ in partition t-\d+: \d+ \(incoming seq\. number\)\. Expected sequence 0 "
                               r"for transactions v2 idempotent producer with no existing state\.")


def client_cmd(args: list[object]) -> list[str]:
    """``java ... EndToEndClient args`` (compiled once against the Kafka jars)."""
    classes = tools.compile_java(V, SOURCE, "end-to-end-client")
    main = str(SOURCE) if classes is None else "EndToEndClient"
    cp = os.pathsep.join([*([str(classes)] if classes else []), jars.classpath(V)])
    logcfg = tool_log4j_files(jars.kafka_home(V) / "tool-config")
    return [jars.require_java(), *tools.TOOL_JVM_OPTS, *logcfg, "-cp", cp, main, *map(str, args)]


def leaders(port: int) -> dict[int, tuple[int, list[int]]] | None:
    """partition -> (leader, ISR) of topic t in a broker's metadata (Metadata); None when it fails."""
    try:
        with KafkaConnection("127.0.0.1", port, timeout=10) as conn:
            got = conn.request(ApiKey.METADATA, conn.version_for(ApiKey.METADATA), {
                "Topics": [{"Name": "t", "TopicId": bytes(16)}], "AllowAutoTopicCreation": False,
                "IncludeTopicAuthorizedOperations": False})
    except (OSError, KraftkitError):
        return None
    for t in got["Topics"]:
        if t["Name"] == "t" and t["ErrorCode"] == 0:
            return {p["PartitionIndex"]: (p["LeaderId"], sorted(p["IsrNodes"])) for p in t["Partitions"]}
    return None


def metadata_log(metadata_dir: Path) -> list[tuple[int, int, dict]] | None:
    """The decoded records of a controller's metadata log (None while a batch is half written)."""
    out = []
    try:
        for seg in sorted(metadata_dir.glob("*.log")):
            for batch in Segment(seg).read_batches(verify_crc=True):
                if not batch.is_control:
                    out += [decode_metadata_record(r.value) for r in batch.records()]
    except KraftkitError:
        return None
    return out


def active_epochs(tmp_path: Path) -> dict[int, int]:
    """node -> the highest epoch in which its logs say it became the active controller."""
    out = {}
    for p in tmp_path.glob("c*.log"):
        node = int(re.match(r"c(\d+)", p.name).group(1))
        for epoch in re.findall(r"active controller in epoch (\d+)", p.read_text(errors="replace")):
            out[node] = max(out.get(node, -1), int(epoch))
    return out


def digest(pairs) -> tuple[int, str]:
    """(count, sha256 of the sorted key/value lines) of (key, value) pairs."""
    lines = sorted(f"{k}\t{v}" for k, v in pairs)
    return len(lines), hashlib.sha256("\n".join(lines).encode()).hexdigest()


def run_under_faults(tmp_path: Path, mode: str, per_second: int, victims: tuple[tuple[int, bool], ...]) -> dict:
    jars.ensure_kafka(V)
    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    dirs = {i: tmp_path / f"c{i}" for i in ports}
    for i, d in dirs.items():
        subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "storage", "format", "-t", cid, "--node-id",
                        str(i), "-d", str(d), "--no-initial-controllers", "--release-version", RELEASE],
                       check=True, capture_output=True, timeout=60)
    brokers = {b: Broker(tmp_path / f"b{b}", voters, b, cluster_id=cid, start_timeout=180, stop_timeout=60,
                         extra_props=REPLICATED) for b in BROKERS}
    for b in brokers.values():
        b.version = V
    procs: dict[int, KraftkitProcess] = {}
    producer: subprocess.Popen | None = None
    acks_path, stop_path, producer_log = tmp_path / "acks.txt", tmp_path / "stop-producing", tmp_path / "producer.log"
    measured: dict[str, object] = {"mode": mode}

    def tails() -> str:
        return "\n".join([*(b.log_tail(40) for b in brokers.values()), *(p.log_tail() for p in procs.values())])

    def controller(i: int, log_name: str) -> KraftkitProcess:
        return KraftkitProcess(["controller", "run"], [
            "--node-id", str(i), "--voters", voters, "--log-dir", str(dirs[i]),
            "--broker-session-timeout-ms", str(SESSION_MS)], tmp_path / log_name)

    def acked() -> int:
        return acks_path.read_text().count("ack ") if acks_path.exists() else 0

    def more_acks(than: int, what: str) -> None:
        wait_for(what, lambda: producer.poll() is None and acked() >= than + 2 * per_second, tails, timeout=120)

    def kill_active_controller(m: dict, rnd: int, via: int) -> tuple[int, int]:
        """kill -9 of the active controller; another takes over and a topic is created through broker
        ``via`` (CreateTopics forwarded in an Envelope to the new one). Returns (killed, new active)."""
        epochs = active_epochs(tmp_path)
        active = max(epochs, key=lambda n: epochs[n])
        procs[active].proc.kill()
        killed_at = time.monotonic()
        assert procs[active].stop() == -9
        wait_for("another active controller", lambda: max(active_epochs(tmp_path).values()) > epochs[active],
                 tails, timeout=60)
        m[f"controller {active} kill -> new active controller (s)"] = round(time.monotonic() - killed_at, 2)
        new_active = max((e, n) for n, e in active_epochs(tmp_path).items())[1]
        assert new_active != active
        out = tools.topic_command(V, brokers[via].bootstrap, [
            "--create", "--topic", f"u{rnd}", "--partitions", "1", "--replication-factor", "2"])
        assert f"Created topic u{rnd}." in out, (out, tails())
        m["controller kill -> a topic created through the new one (s)"] = round(time.monotonic() - killed_at, 2)
        return active, new_active

    def restart_controller(m: dict, rnd: int, active: int, new_active: int) -> None:
        target = len(metadata_log(dirs[new_active] / CLUSTER_METADATA_DIR) or ())
        back = time.monotonic()
        procs[active] = controller(active, f"c{active}-restarted-{rnd}.log")
        wait_for(f"controller {active} caught up", lambda: (
            len(metadata_log(dirs[active] / CLUSTER_METADATA_DIR) or ()) >= target), tails, timeout=60)
        m["controller restart -> caught up (s)"] = round(time.monotonic() - back, 2)

    def fault_round(rnd: int, victim: int, together: bool) -> None:
        """kill -9 of broker ``victim`` and its restart, then kill -9 of the active
        controller and its restart, all while the producer runs; with ``together`` the controller is
        killed right after the broker, before the broker is fenced: the new active controller must fence
        it. The times measured go to ``measured``."""
        m: dict[str, object] = {"together": together}
        measured[f"round {rnd}"] = m
        survivor = next(b for b in BROKERS if b != victim)
        led = leaders(brokers[survivor].broker_port)
        assert led and any(lead == victim for lead, _i in led.values()), led  # it leads partitions
        m["partitions the killed broker led"] = sum(lead == victim for lead, _i in led.values())
        before = acked()
        brokers[victim].kill()
        killed_at = time.monotonic()
        if together:
            killed = kill_active_controller(m, rnd, survivor)
        wait_for(f"no partition led by {victim}", lambda: (
            (d := leaders(brokers[survivor].broker_port)) and len(d) == PARTITIONS
            and all(lead != victim for lead, _i in d.values())), tails, timeout=60)
        m[f"broker {victim} kill -> leaderships moved (s)"] = round(time.monotonic() - killed_at, 2)
        wait_for(f"{victim} out of every ISR", lambda: (
            (d := leaders(brokers[survivor].broker_port)) and all(victim not in isr for _l, isr in d.values())),
            tails, timeout=60)
        m["broker kill -> ISRs shrunk (s)"] = round(time.monotonic() - killed_at, 2)
        more_acks(acked(), "the producer carrying on without the killed broker")
        m["acks while the broker was down"] = acked() - before

        back = time.monotonic()
        brokers[victim].start()  # a new incarnation: registers, catches up, rejoins every ISR
        wait_for(f"{victim} back in every ISR", lambda: (
            (d := leaders(brokers[survivor].broker_port)) and all(isr == list(BROKERS) for _l, isr in d.values())),
            tails, timeout=120)
        m["broker restart (its JVM start included) -> back in every ISR (s)"] = round(time.monotonic() - back, 2)
        if together:
            restart_controller(m, rnd, *killed)
        else:
            before = acked()
            killed = kill_active_controller(m, rnd, victim)
            more_acks(acked(), "the producer carrying on under the new controller")
            m["acks around the controller failover"] = acked() - before
            restart_controller(m, rnd, *killed)

    try:
        for i in dirs:
            procs[i] = controller(i, f"c{i}.log")
        for b in brokers.values():
            b.launch()
        for b in brokers.values():
            b.wait_ready()
        out = tools.topic_command(V, brokers[101].bootstrap, [
            "--create", "--topic", "t", "--partitions", str(PARTITIONS), "--replication-factor", "3",
            "--config", "min.insync.replicas=2"])
        assert "Created topic t." in out, (out, tails())
        wait_for("six partitions, each with a full ISR", lambda: (
            (d := leaders(brokers[101].broker_port)) and len(d) == PARTITIONS
            and all(isr == list(BROKERS) for _l, isr in d.values())), tails)

        with open(producer_log, "wb") as plog:
            producer = subprocess.Popen(client_cmd(["produce", brokers[101].bootstrap, "t", mode, per_second,
                                                    stop_path, acks_path]),
                                        stdout=plog, stderr=subprocess.STDOUT, start_new_session=True)
        more_acks(0, "the producer acknowledged")

        for rnd, (victim, together) in enumerate(victims):
            fault_round(rnd, victim, together)

        more_acks(acked(), "the producer after the faults")
        stop_path.touch()
        assert producer.wait(timeout=120) == 0, (producer_log.read_text(errors="replace")[-3000:], tails())
        # what the client logged on its way through the faults (WARN and above): retries, reconnections
        warnings = [re.sub(r"\d+", "N", ln.split("] ", 1)[-1])[:100] for ln in
                    producer_log.read_text(errors="replace").splitlines() if re.match(r"\[[^]]*\] (WARN|ERROR)", ln)]
        measured["producer client warnings"] = {w: warnings.count(w) for w in sorted(set(warnings))}

        lines = acks_path.read_text().splitlines()
        assert lines[-1].startswith("done "), lines[-5:]
        acks = {int(w[1]): (int(w[2]), int(w[3])) for w in map(str.split, lines) if w[0] == "ack"}
        aborted = {int(w[1]) for w in map(str.split, lines) if w[0] == "aborted"}
        uncertain = {int(w[1]) for w in map(str.split, lines) if w[0] == "uncertain"}
        errors = [" ".join(w[2:]) for w in map(str.split, lines) if w[0] == "error"]
        measured["records acknowledged"] = len(acks)
        measured["records aborted"] = len(aborted)
        measured["records of transactions of unknown outcome"] = len(uncertain)
        measured["producer errors"] = {e: errors.count(e) for e in sorted(set(errors))}
        assert int(lines[-1].split()[1]) == len(errors)

        group_out = tmp_path / "consumed.txt"
        isolation = "read_committed" if mode == "transactional" else "read_uncommitted"
        consumer = subprocess.run(client_cmd(["consume", brokers[103].bootstrap, "t", isolation, f"readers-{mode}",
                                              group_out]), capture_output=True, text=True, timeout=240)
        assert consumer.returncode == 0, (consumer.stdout[-2000:], consumer.stderr[-3000:], tails())
        rows = group_out.read_text().splitlines()
        committed, ends = map(int, rows[-1].split()[1:])
        assert committed == ends > 0  # the group's offsets were committed (to __consumer_offsets)
        got = [r.split() for r in rows[:-1]]
        keys = [k for _p, _o, k, _v in got]
        measured["records consumed"] = len(got)
        assert len(keys) == len(set(keys)), "duplicates read back"
        read = {int(k[1:]): (int(p), int(o), v) for p, o, k, v in got}
        assert all(v == f"value_{i}" for i, (_p, _o, v) in read.items())
        # every acknowledged record, at the partition and offset its acknowledgement named
        assert {i: (p, o) for i, (p, o, _v) in read.items() if i in acks} == acks
        # count and checksum of keys and values: what the group read of them is what the producer sent
        read_pairs = [(k, v.replace("_", " ")) for _p, _o, k, v in got]
        sent_pairs = [(f"k{i}", f"value {i}") for i in acks]
        assert digest(kv for kv in read_pairs if int(kv[0][1:]) in acks) == digest(sent_pairs)
        assert not aborted & read.keys(), "records of aborted transactions read"
        # anything read that was not acknowledged: failed sends (idempotent) or whole transactions of unknown outcome
        extra = set(read) - set(acks)
        measured["records read that were not acknowledged"] = len(extra)
        if not extra:
            assert digest(read_pairs) == digest(sent_pairs)
        if mode == "transactional":
            assert extra <= uncertain
            for lo in {i - i % 10 for i in uncertain}:
                assert len({i for i in range(lo, lo + 10) if i in read}) in (0, 10), f"transaction {lo} torn"
        else:
            assert len(extra) <= len(errors)

        for b in brokers.values():  # controlled shutdowns, then the controllers agree
            b.stop()
        wait_for("identical metadata logs on the three controllers", lambda: (
            (logs := [metadata_log(d / CLUSTER_METADATA_DIR) for d in dirs.values()])[0] is not None
            and logs[0] == logs[1] == logs[2]), tails, timeout=60)
    finally:
        stop_path.touch()
        if producer is not None and producer.poll() is None:
            os.killpg(producer.pid, 9)
            producer.wait(timeout=30)
        for b in brokers.values():
            b.stop()
        codes = [p.stop() for p in procs.values()]
    assert codes == [0, 0, 0], tails()
    logs = [metadata_log(d / CLUSTER_METADATA_DIR) for d in dirs.values()]
    assert logs[0] and logs[0] == logs[1] == logs[2]
    controller_logs = "".join(p.read_text(errors="replace") for p in tmp_path.glob("c*.log"))
    assert "because its session has timed out" in controller_logs
    assert not [ln for ln in controller_logs.splitlines() if re.search(r" (ERROR|CRITICAL) |Traceback", ln)], tails()
    races = 0
    for b in brokers.values():
        lines = b.server_log.read_text(errors="replace").splitlines()
        for at, ln in enumerate(lines):
            if " ERROR " not in ln:
                continue
            following = lines[at + 1] if at + 1 < len(lines) else ""
            if mode == "transactional" and TV2_SEQUENCE_RACE.search(ln + "\n" + following):
                races += 1
                continue
            pytest.fail(f"broker {b.node_id} logged an ERROR:\n{ln}\n{following}")
    producer_text = producer_log.read_text(errors="replace")
    assert races <= producer_text.count("Error: OUT_OF_ORDER_SEQUENCE_NUMBER")  # each one retried by the client
    measured["broker ERRORs of the transactions-v2 sequence race (retried)"] = races
    print(f"\nend to end on kraftkit ({mode}):", measured)
    return measured


def test_idempotent_producer_through_a_broker_and_a_controller_kill(kafka_jars, tmp_path):
    run_under_faults(tmp_path, "idempotent", 200, ((102, False),))


def test_transactional_producer_through_a_broker_and_a_controller_kill(kafka_jars, tmp_path):
    run_under_faults(tmp_path, "transactional", 200, ((102, False),))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["idempotent", "transactional"])
def test_every_broker_and_three_active_controllers_killed_in_turn(kafka_jars, tmp_path, mode):
    """Three rounds: each broker killed once (one of them hosts the group's, or the transaction's,
    coordinator), and after each the active controller; in the last round the controller right after
    the broker, before its session expires."""
    run_under_faults(tmp_path, mode, 300, ((101, False), (102, False), (103, True)))
