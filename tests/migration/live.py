"""The parts of the live ZooKeeper-to-KRaft migration tests (``test_live_zk*.py``), in one place: a
Kafka 3.9.2 ZooKeeper-mode broker that can be rolled with the migration's configs
(:class:`MigratingZkBroker`), a kraftkit controller quorum of N voters run with the migration
enabled (:class:`MigrationQuorum`; one voter for the single-controller tests), a real ZooKeeper
with N such brokers started, their topics made by kafka-topics, a ZooKeeper client on it and its
cluster id, all cleaned up on exit (:class:`LiveCluster`), Kafka's VerifiableProducer and VerifiableConsumer running in the
background (:class:`Verifiable`), waits on logs and on ZooKeeper, ``kraftkit migrate status``, and
the normalized views of ZooKeeper and of a KRaft image that the tests compare (:func:`zk_view`,
:func:`kraft_view`). The ZooKeeper server and the plain ZooKeeper-mode broker are
``test_offline_zk.py``'s."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

import pytest

from kraftkit.features.storage.format import format_storage
from kraftkit.metadata.image import uuid_text
from kraftkit.migration import zk_reader
from tests._procs import KraftkitProcess, terminate
from tests.cli.test_json_schema import check_output
from tests.harness import jars, tools
from tests.harness.node import free_port, tool_log4j_files
from tests.migration.test_offline_zk import ZkBroker, ZooKeeper, kafka_acls, kafka_configs, kraftkit

__all__ = [
    "COMPLETED",
    "LiveCluster",
    "MigratingZkBroker",
    "MigrationQuorum",
    "Verifiable",
    "ZooKeeper",
    "console_produce",
    "kraft_view",
    "read_zk",
    "roll",
    "status",
    "wait_broker_log",
    "wait_log",
    "wait_until",
    "wait_zk_state",
    "zk_view",
]


#: what a controller's log says once the migration's copy is done
COMPLETED = "Completed migration of metadata from ZooKeeper to KRaft"


class MigratingZkBroker(ZkBroker):
    """A Kafka 3.9.2 ZooKeeper-mode broker, with the migration's configs once ``migrate_to`` is set
    (the CONTROLLER listener added to the broker's own listener.security.protocol.map)."""

    migrate_to: str | None = None  # the quorum's controller.quorum.voters

    def properties(self) -> dict[str, object]:
        props = super().properties()
        if self.migrate_to is not None:
            props.update(
                {
                    "zookeeper.metadata.migration.enable": "true",
                    "controller.quorum.voters": self.migrate_to,
                    "controller.listener.names": "CONTROLLER",
                    "listener.security.protocol.map": f"{props['listener.security.protocol.map']},CONTROLLER:PLAINTEXT",
                }
            )
        return props


def roll(broker: ZkBroker, **changes: object) -> None:
    """``broker`` stopped, its attributes ``changes`` set (``migrate_to=...``, ``kraft=True``), started again."""
    broker.stop()
    for k, v in changes.items():
        setattr(broker, k, v)
    broker.start()


def wait_until(
    what: str, check: Callable[[], object], timeout: float, tails: Callable[[], str] = lambda: "", every: float = 0.5
):
    """``check()`` once it is truthy, polled every ``every`` s for up to ``timeout`` s (else the test fails,
    saying ``what`` and ``tails()``)."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s\n{tails()}")
        time.sleep(every)


def wait_log(proc: KraftkitProcess, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = proc.log_path.read_text(errors="replace")
        if text in log:
            return log
        if proc.proc.poll() is not None:
            break
        time.sleep(0.5)
    pytest.fail(f"the controller's log never said {text!r}:\n{proc.log_tail(80)}")


def wait_broker_log(broker: MigratingZkBroker, pattern: str, timeout: float) -> str:
    """The broker's log since its last start, once ``pattern`` is in it."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = broker.server_log.read_bytes()[broker._log_offset :].decode(errors="replace")
        if re.search(pattern, text):
            return text
        time.sleep(0.5)
    pytest.fail(f"broker {broker.node_id}'s log never matched {pattern!r}:\n{broker.log_tail()}")


def wait_zk_state(client, topic: str, partition: int, ok, timeout: float) -> dict:
    """The partition's state znode in ZooKeeper (what the controller dual-wrote), once ``ok`` holds."""
    deadline = time.monotonic() + timeout
    state: dict = {}
    while time.monotonic() < deadline:
        got = client.exists(f"/brokers/topics/{topic}/partitions/{partition}/state")
        if got is not None:
            state = json.loads(client.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[0])
            if ok(state):
                return state
        time.sleep(0.5)
    pytest.fail(f"{topic}-{partition}'s state in ZooKeeper never got as expected: {state}")


def console_produce(bootstrap: str, topic: str, lines: list[str]) -> None:
    """``key:value`` lines produced by Kafka 3.9.2's console producer, acks=all."""
    cls = tools.find_class(jars.KAFKA_3, "org.apache.kafka.tools.ConsoleProducer", "kafka.tools.ConsoleProducer")
    tools.run_tool(
        jars.KAFKA_3,
        cls,
        [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--producer-property",
            "acks=all",
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
        ],
        stdin="".join(f"{line}\n" for line in lines),
        timeout=120,
    )


def status(zk: str, controller: str, *more: object) -> dict:
    """``kraftkit migrate status --json``, checked against docs/json-schema.json."""
    got = kraftkit("migrate", "status", "--zookeeper", zk, "--bootstrap-controller", controller, "--json", *more)
    assert got.returncode == 0, got.stderr
    assert check_output("migrate status", got.stdout) == []
    return json.loads(got.stdout)


def read_zk(connect: str) -> zk_reader.ZkCluster:
    """What ZooKeeper holds, read by the converter's reader."""
    source = zk_reader.KazooSource(connect)
    try:
        return zk_reader.read_cluster(source)
    finally:
        source.close()


def zk_view(cluster: zk_reader.ZkCluster) -> dict:
    """What ZooKeeper holds, normalized for the comparison with the KRaft image."""
    return {
        "topics": {
            name: (
                uuid_text(t.topic_id),
                {
                    p: (
                        part.replicas,
                        part.state.leader,
                        part.state.leader_epoch,
                        part.state.isr,
                        part.state.partition_epoch,
                    )
                    for p, part in t.partitions.items()
                    if part.state is not None
                },
            )
            for name, t in cluster.topics.items()
        },
        "topic_configs": {name: t.configs for name, t in cluster.topics.items() if t.configs},
        "quotas": {q.entity: q.values for q in cluster.client_quotas},
        "scram": {(c.user, c.mechanism): (c.salt, c.stored_key, c.server_key, c.iterations) for c in cluster.scram},
        "acls": sorted(
            (a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation, a.permission_type)
            for a in cluster.acls
        ),
        "next_producer_id": _next_producer_id(cluster.producer_id_block),
    }


def _next_producer_id(block: zk_reader.ProducerIdBlock | None) -> int | None:
    """The first producer id not handed out, by ``/latest_producer_id_block``: after the block a
    ZooKeeper controller gave a broker; the block's start when a KRaft controller wrote it (broker
    -1: Kafka's ``ZkMigrationClient.writeProducerId`` writes ``ProducerIdsBlock(-1, nextProducerId,
    1000)``)."""
    if block is None:
        return None
    return block.block_start if block.broker == -1 else block.next_producer_id


def kraft_view(image) -> dict:
    """A KRaft image (:func:`kraftkit.metadata.image.load_image`), normalized as :func:`zk_view`."""
    names = {tid: name for name, tid in image.topic_ids.items()}
    return {
        "topics": {
            names[tid]: (
                uuid_text(tid),
                {
                    p: (part["Replicas"], part["Leader"], part["LeaderEpoch"], part["Isr"], part["PartitionEpoch"])
                    for p, part in t.partitions.items()
                },
            )
            for tid, t in image.topics.items()
        },
        "topic_configs": {name: cfg for (rtype, name), cfg in image.configs.items() if rtype == 2 and cfg},
        "quotas": dict(image.client_quotas),
        "scram": {
            (user, mech): (s["Salt"], s["StoredKey"], s["ServerKey"], s["Iterations"])
            for (mech, user), s in image.scram.items()
        },
        "acls": sorted(
            (
                a["ResourceType"],
                a["ResourceName"],
                a["PatternType"],
                a["Principal"],
                a["Host"],
                a["Operation"],
                a["PermissionType"],
            )
            for a in image.acls.values()
        ),
        "next_producer_id": image.next_producer_id,
    }


class MigrationQuorum:
    """``kraftkit controller run --config`` voters (ids ``first``, ``first + 1``, ...) with the
    migration enabled, each formatted with ZooKeeper's cluster id at the brokers' IBP (3.9) and run
    from a properties file as an operator writes it; each run of a voter logs to its own file
    (``controller-<id>.run<k>.log``)."""

    def __init__(
        self,
        root: Path,
        zk_connect: str,
        cluster_id: str,
        *,
        voters: int = 3,
        first: int = 3000,
        extra: dict[str, object] | None = None,
    ) -> None:
        self.root = root
        self.ports = {first + i: free_port() for i in range(voters)}
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())
        self.dirs = {i: root / f"controller-{i}" for i in self.ports}
        self.procs: dict[int, KraftkitProcess] = {}
        self.runs: dict[int, int] = {}
        self.props: dict[int, dict[str, object]] = {}
        for i, d in self.dirs.items():
            format_storage([d], cluster_id=cluster_id, node_id=i, release_version="3.9", no_initial_controllers=True)
            self.props[i] = {
                "process.roles": "controller",
                "node.id": i,
                "controller.quorum.voters": self.voters,
                "listeners": f"CONTROLLER://127.0.0.1:{self.ports[i]}",
                "controller.listener.names": "CONTROLLER",
                "metadata.log.dir": d,
                "zookeeper.metadata.migration.enable": "true",
                "zookeeper.connect": zk_connect,
                **(extra or {}),
            }
            self.write_config(i)

    def config(self, i: int) -> Path:
        return self.root / f"controller-{i}.properties"

    def write_config(self, i: int) -> None:
        self.config(i).write_text("".join(f"{k}={v}\n" for k, v in self.props[i].items()))

    def disable_migration(self) -> None:
        """Every voter's properties file rewritten without the migration's configs (ZooKeeper's
        ``zookeeper.metadata.migration.enable`` and ``zookeeper.connect``), for its next start."""
        for i, props in self.props.items():
            props.pop("zookeeper.metadata.migration.enable", None)
            props.pop("zookeeper.connect", None)
            self.write_config(i)

    def start(self, *nodes: int) -> None:
        """Starts ``nodes`` (every voter when none is given), each until it listens."""
        for i in nodes or tuple(self.ports):
            self.runs[i] = self.runs.get(i, 0) + 1
            self.procs[i] = KraftkitProcess(
                ["controller", "run"],
                ["--config", str(self.config(i))],
                self.root / f"controller-{i}.run{self.runs[i]}.log",
                timeout=120,
            )

    def kill(self, i: int) -> int:
        """kill -9 of voter ``i``; its exit status."""
        p = self.procs.pop(i)
        if p.proc.poll() is None:
            os.killpg(p.proc.pid, signal.SIGKILL)
        return p.stop()

    def stop(self) -> dict[int, int]:
        """SIGTERM to every running voter at once, then each waited for; their exit statuses."""
        for p in self.procs.values():
            if p.proc.poll() is None:
                p.proc.send_signal(signal.SIGTERM)
        codes = {i: p.stop() for i, p in self.procs.items()}
        self.procs.clear()
        return codes

    def log(self, i: int) -> str:
        return self.procs[i].log_path.read_text(errors="replace")

    def wait_log(self, i: int, text: str, timeout: float) -> str:
        """Voter ``i``'s current log once it says ``text`` (:func:`wait_log`)."""
        return wait_log(self.procs[i], text, timeout)

    def wait_any_log(self, text: str, timeout: float) -> int:
        """The running voter whose current log says ``text`` first (polled)."""
        return wait_until(
            f"a voter's log saying {text!r}",
            lambda: next((i for i in self.procs if text in self.log(i)), None),
            timeout,
            self.tails,
        )

    def address(self, i: int) -> str:
        return f"127.0.0.1:{self.ports[i]}"

    def tails(self, lines: int = 30) -> str:
        return "\n".join(p.log_tail(lines) for p in self.procs.values())


class LiveCluster:
    """A real ZooKeeper (``zk``) and ZooKeeper-mode brokers of ``broker_cls`` with ids ``broker_ids``
    (``brokers``), all started and waited for on entry (``boot``: their bootstrap string), with a
    kazoo client on ZooKeeper (``client``) and the cluster id the brokers wrote to ``/cluster/id``
    (``cluster_id``); the kraftkit controllers of :meth:`quorum` with them. On exit: the client closed,
    the controllers stopped, the brokers stopped (killed with ``kill_brokers``: no controller left to
    grant a controlled shutdown), ZooKeeper stopped; first, the Kafka clients added to ``clients``."""

    def __init__(
        self,
        root: Path,
        broker_ids: tuple[int, ...],
        *,
        broker_cls: type[ZkBroker] = MigratingZkBroker,
        kill_brokers: bool = False,
    ) -> None:
        self.root = root
        self.zk = ZooKeeper(root / "zk")
        self.brokers = {b: broker_cls(root / f"broker-{b}", b, self.zk.connect) for b in broker_ids}
        self.kill_brokers = kill_brokers
        self.boot = ""
        self.client = None
        self.cluster_id = ""
        self.quorums: list[MigrationQuorum] = []
        self.clients: list[Verifiable] = []  # (stopped first on exit)

    def __enter__(self) -> Self:
        try:
            self.zk.start()
            for n in self.brokers.values():
                n.launch()
            for n in self.brokers.values():
                n.wait_ready()
            self.boot = ",".join(n.bootstrap for n in self.brokers.values())
            from kazoo.client import KazooClient

            self.client = KazooClient(hosts=self.zk.connect, timeout=10)
            self.client.start(timeout=10)
            self.cluster_id = json.loads(self.client.get("/cluster/id")[0])["id"]
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for c in self.clients:
            c.stop()
        if self.client is not None:
            self.client.stop()
            self.client.close()
            self.client = None
        for q in self.quorums:
            q.stop()
        for n in self.brokers.values():
            if self.kill_brokers:
                n.kill()
            else:
                n.stop()
        self.zk.stop()

    def quorum(self, *, voters: int = 1, first: int = 3000, extra: dict[str, object] | None = None) -> MigrationQuorum:
        """A :class:`MigrationQuorum` on this ZooKeeper and cluster id (formatted, not started), stopped on exit."""
        q = MigrationQuorum(self.root, self.zk.connect, self.cluster_id, voters=voters, first=first, extra=extra)
        self.quorums.append(q)
        return q

    def roll(self, **changes: object) -> None:
        """Every broker rolled (:func:`roll`) with ``changes``, one after the other."""
        for n in self.brokers.values():
            roll(n, **changes)

    def create_topic(self, name: str, partitions: int, rf: int, configs: dict[str, str] | None = None) -> None:
        """Topic ``name`` created by Kafka 3.9.2's kafka-topics through the brokers."""
        args = ["--create", "--topic", name, "--partitions", str(partitions), "--replication-factor", str(rf)]
        for k, v in (configs or {}).items():
            args += ["--config", f"{k}={v}"]
        out = tools.topic_command(jars.KAFKA_3, self.boot, args)
        assert f"Created topic {name}." in out, out

    def produce(self, records: dict[str, list[dict]]) -> None:
        """``records`` (``key``, ``value``, ``partition`` of each, by topic) produced by Kafka 3.9.2's
        producer, acks=all: every one acknowledged."""
        jobs = [{"topic": topic, "props": {"acks": "all"}, "records": rs} for topic, rs in records.items()]
        assert len(tools.produce(jars.KAFKA_3, self.boot, jobs)) == sum(len(rs) for rs in records.values())

    def add_quota_scram_acl(self) -> None:
        """By Kafka 3.9.2's kafka-configs, a client quota (client-id ``app``: producer_byte_rate=1048576)
        and a SCRAM-SHA-256 user ``alice`` (8192 iterations); by kafka-acls, an ACL letting User:alice
        Read topic ``orders``."""
        quota = ["producer_byte_rate=1048576", "--entity-type", "clients", "--entity-name", "app"]
        kafka_configs(jars.KAFKA_3, self.boot, "--alter", "--add-config", *quota)
        scram = ["SCRAM-SHA-256=[iterations=8192,password=pw]", "--entity-type", "users", "--entity-name", "alice"]
        kafka_configs(jars.KAFKA_3, self.boot, "--alter", "--add-config", *scram)
        acl = ["--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders"]
        kafka_acls(jars.KAFKA_3, self.boot, "--add", *acl)

    def migrate(self) -> MigrationQuorum:
        """A kraftkit controller (:meth:`quorum` of one voter) started, the brokers rolled with the
        migration's configs, once its log says the copy completed."""
        q = self.quorum()
        q.start()
        self.roll(migrate_to=q.voters)
        (controller,) = q.procs.values()
        wait_log(controller, COMPLETED, 180)
        return q


class Verifiable:
    """Kafka 3.9.2's ``VerifiableProducer`` or ``VerifiableConsumer`` (``org.apache.kafka.tools``) in
    the background, its stdout (one JSON event a line) in ``<name>.out``; stopped by SIGTERM, on
    which both close their client and say so (``shutdown_complete``)."""

    def __init__(self, workdir: Path, name: str, main_class: str, args: list[str]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.out_path = workdir / f"{name}.out"
        self.name = name
        # (open as long as the process runs: closed by stop)
        self._out = open(self.out_path, "wb")  # noqa: SIM115
        self._err = open(workdir / f"{name}.err", "wb")  # noqa: SIM115
        cmd = [
            jars.require_java(),
            *tools.TOOL_JVM_OPTS,
            *tool_log4j_files(jars.kafka_home(jars.KAFKA_3) / "tool-config"),
            "-cp",
            jars.classpath(jars.KAFKA_3),
            main_class,
            *args,
        ]
        self.proc = subprocess.Popen(
            cmd, stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL, start_new_session=True
        )

    @classmethod
    def producer(cls, workdir: Path, bootstrap: str, topic: str, throughput: int) -> Verifiable:
        """An idempotent producer (acks=all, retries as the idempotent producer needs them), sending the
        increasing integers as values, about ``throughput`` a second."""
        config = workdir / "producer.properties"
        workdir.mkdir(parents=True, exist_ok=True)
        config.write_text(
            "enable.idempotence=true\nacks=all\nretries=2147483647\n"
            "max.in.flight.requests.per.connection=5\ndelivery.timeout.ms=300000\n"
        )
        return cls(
            workdir,
            "producer",
            "org.apache.kafka.tools.VerifiableProducer",
            [
                "--bootstrap-server",
                bootstrap,
                "--topic",
                topic,
                "--throughput",
                str(throughput),
                "--producer.config",
                str(config),
            ],
        )

    @classmethod
    def consumer(cls, workdir: Path, bootstrap: str, topic: str, group: str) -> Verifiable:
        """A consumer of group ``group`` from the earliest offset, every record it consumes said (``--verbose``)."""
        return cls(
            workdir,
            "consumer",
            "org.apache.kafka.tools.VerifiableConsumer",
            [
                "--bootstrap-server",
                bootstrap,
                "--topic",
                topic,
                "--group-id",
                group,
                "--reset-policy",
                "earliest",
                "--verbose",
            ],
        )

    def events(self, name: str | None = None) -> list[dict]:
        """The JSON events written so far (``name``: of that kind only); lines that are not JSON skipped."""
        out = []
        for line in self.out_path.read_bytes().decode(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # (a line being written)
            if name is None or ev.get("name") == name:
                out.append(ev)
        return out

    def acked(self) -> set[tuple[int, int, str]]:
        """(partition, offset, value) of every send the producer saw acknowledged."""
        return {(e["partition"], e["offset"], e["value"]) for e in self.events("producer_send_success")}

    def consumed(self) -> set[tuple[int, int, str]]:
        """(partition, offset, value) of every record the consumer consumed."""
        return {(e["partition"], e["offset"], e["value"]) for e in self.events("record_data")}

    def stop(self, timeout: float = 60.0) -> int:
        terminate(self.proc, timeout)
        self._out.close()
        self._err.close()
        return self.proc.returncode

    def tail(self, lines: int = 20) -> str:
        err = (self.out_path.parent / f"{self.name}.err").read_text(errors="replace").splitlines()[-lines:]
        out = self.out_path.read_text(errors="replace").splitlines()[-lines:]
        return f"--- {self.name} stdout ---\n" + "\n".join(out) + f"\n--- {self.name} stderr ---\n" + "\n".join(err)
