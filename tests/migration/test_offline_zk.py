"""``kraftkit migrate from-zookeeper`` against real Kafka: a real ZooKeeper (3.8.4, from the Kafka
3.9.2 jars) holding a real Kafka 3.9.2 ZooKeeper-mode cluster of two brokers, topics made with
Kafka's kafka-topics (replication factor 2 and 1, topic configs), records produced by Kafka's
producer, client quotas, SCRAM users and dynamic broker configs set with kafka-configs, ACLs with
kafka-acls; a topic deletion that cannot finish (its broker down) refused by the converter, then
finished; the brokers stopped, the cluster converted (from the running ZooKeeper, and the same
read from its data directory once it is stopped), then booted as KRaft twice, each time checked the
same way: ``kraftkit controller run`` on a copy of the written controller directory with Kafka
4.3.1 brokers on copies of the log directories, then a Kafka 4.3.1 controller on the written
directory with the brokers on their old log directories. kafka-topics describes the same topics,
topic ids, partition counts and configs, every produced record is consumed back, kafka-configs
describes the same quotas, credentials and broker configs, kafka-acls lists the same ACLs, and a
client authenticates with each user's password."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraftkit.metadata.image import load_snapshot
from kraftkit.migration import zk_reader
from kraftkit.migration.zk_datadir import DataDirSource
from tests._procs import KraftkitProcess
from tests.cli.test_json_schema import check_output
from tests.harness import jars, tools
from tests.harness.jars import HarnessError
from tests.harness.node import SERVER_JVM_OPTS, KafkaNode, free_port, log4j_files

pytestmark = [pytest.mark.kafka, pytest.mark.zookeeper, pytest.mark.timeout(900)]

CONTROLLER_ID = 3000
BROKERS = (1, 2)


class ZooKeeper:
    """One ZooKeeper server (``ZooKeeperServerMain``) on 127.0.0.1 from Kafka 3.9.2's jars."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        (self.workdir / "data").mkdir(parents=True, exist_ok=True)
        log = self.workdir / "zookeeper.log"
        cmd = [jars.require_java(), "-Xmx256m", "-Dzookeeper.admin.enableServer=false",
               "-Dzookeeper.4lw.commands.whitelist=ruok", *log4j_files(self.workdir, log),
               "-cp", jars.classpath(jars.KAFKA_3), "org.apache.zookeeper.server.ZooKeeperServerMain",
               str(self.port), str(self.workdir / "data")]
        self.out = open(self.workdir / "stdout.log", "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        from kazoo.client import KazooClient

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise HarnessError(f"ZooKeeper exited with {self.proc.returncode}: {log.read_text()[-2000:]}")
            zk = KazooClient(hosts=self.connect, timeout=2)
            try:
                zk.start(timeout=2)
                zk.stop()
                return
            except Exception:
                time.sleep(0.5)
            finally:
                zk.close()
        raise HarnessError(f"ZooKeeper not ready after {timeout:.0f}s")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
        if getattr(self, "out", None):
            self.out.close()


class ZkBroker(KafkaNode):
    """A Kafka 3.9.2 broker in ZooKeeper mode (``broker.id``, ``zookeeper.connect``, no process.roles)."""

    def __init__(self, workdir: Path, broker_id: int, zk: str) -> None:
        super().__init__(workdir, jars.KAFKA_3, start_timeout=120)
        self.node_id = broker_id
        self.zk = zk
        self.formatted = True  # ZooKeeper mode: no kafka-storage format

    def properties(self) -> dict[str, object]:
        props = super().properties()
        for k in ("process.roles", "node.id", "controller.listener.names", "controller.quorum.voters"):
            props.pop(k, None)
        props.update({
            "broker.id": self.node_id,
            "zookeeper.connect": self.zk,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.broker_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
            "inter.broker.protocol.version": "3.9",
            "default.replication.factor": 2,
            "offsets.topic.replication.factor": 2,
            "controlled.shutdown.enable": "true",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS",
        })
        return props

    def is_ready(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise HarnessError(f"Kafka {self.version} ZooKeeper-mode broker {self.node_id} exited.\n{self.log_tail()}")
        return "started (kafka.server.KafkaServer)" in self._new_log_text() and self._port_open(self.broker_port)


class KRaftNode(KafkaNode):
    """A Kafka 4.3.1 KRaft node on a directory the converter wrote: a controller, or a broker on
    its old log directory."""

    def __init__(self, workdir: Path, node_id: int, *, broker: bool, voters: str, controller_port: int) -> None:
        super().__init__(workdir, jars.KAFKA_4, start_timeout=150)
        self.node_id = node_id
        self.broker = broker
        self.voters = voters
        self.controller_port = controller_port
        self.broker_port = free_port() if broker else 0
        self.sasl_port = free_port() if broker else 0
        self.formatted = True  # the converter wrote meta.properties

    def _ensure_ports(self) -> None:
        pass

    @property
    def ready_port(self) -> int:
        return self.broker_port if self.broker else self.controller_port

    def properties(self) -> dict[str, object]:
        props: dict[str, object] = {
            "node.id": self.node_id,
            "controller.quorum.voters": self.voters,
            "controller.listener.names": "CONTROLLER",
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            "num.io.threads": 2,
            "num.network.threads": 2,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        }
        if self.broker:
            b, sasl = self.broker_port, self.sasl_port
            jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            props.update({
                "process.roles": "broker",
                "listeners": f"PLAINTEXT://127.0.0.1:{b},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{b},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                                  "CONTROLLER:PLAINTEXT",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
                "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": jaas,
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": jaas,
                "offsets.topic.replication.factor": 2,
                "min.insync.replicas": 1,  # as the ZooKeeper-mode brokers had it (kafka-topics shows it)
                "share.coordinator.state.topic.replication.factor": 1,
                "share.coordinator.state.topic.min.isr": 1,
                "transaction.state.log.replication.factor": 1,
                "transaction.state.log.min.isr": 1,
                "group.initial.rebalance.delay.ms": 0,
                "auto.create.topics.enable": "false",
                "log.retention.hours": -1,
            })
        else:
            props.update({
                "process.roles": "controller",
                "listeners": f"CONTROLLER://127.0.0.1:{self.controller_port}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
            })
        return props


def describe(version: str, bootstrap: str) -> dict[str, dict]:
    """kafka-topics --describe: topic -> {id, partitions, rf, configs, replicas: {p: [ids]}}."""
    out = tools.topic_command(version, bootstrap, ["--describe", "--exclude-internal"])
    topics: dict[str, dict] = {}
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+): ?(\S*)", line))
        if "PartitionCount" in fields:
            cfg = line.split("Configs:", 1)[1].strip()
            topics[fields["Topic"]] = {
                "id": fields["TopicId"], "partitions": int(fields["PartitionCount"]),
                "rf": int(fields["ReplicationFactor"]),
                "configs": dict(kv.split("=", 1) for kv in cfg.split(",")) if cfg else {}, "replicas": {}}
        elif "Partition" in fields and "Replicas" in fields:
            topics[fields["Topic"]]["replicas"][int(fields["Partition"])] = [
                int(x) for x in fields["Replicas"].split(",")]
    return topics


def kafka_configs(version: str, bootstrap: str, *args: str) -> str:
    cls = tools.find_class(version, "org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand")
    return tools.run_tool(version, cls, ["--bootstrap-server", bootstrap, *args], timeout=120).stdout


#: (entity args, what kafka-configs --describe says) of the quotas set on the ZooKeeper cluster
QUOTAS = [
    (["--entity-type", "clients", "--entity-name", "app-1"], "producer_byte_rate=1024",
     "Quota configs for client-id 'app-1' are producer_byte_rate=1024.0"),
    (["--entity-type", "users", "--entity-default"], "consumer_byte_rate=2048",
     "Quota configs for the default user-principal are consumer_byte_rate=2048.0"),
    (["--entity-type", "users", "--entity-name", "carol@corp", "--entity-type", "clients", "--entity-name", "app-2"],
     "request_percentage=50", "Quota configs for user-principal 'carol@corp', client-id 'app-2' are "
     "request_percentage=50.0"),
]


#: (entity, config, what kafka-configs --describe says) of the dynamic broker configs set on the ZooKeeper cluster
BROKER_CONFIGS = [
    (["--entity-default"], "log.cleaner.threads=2", "log.cleaner.threads=2 sensitive=false "
     "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2"),
    (["--entity-name", "1"], "log.cleaner.backoff.ms=20000", "log.cleaner.backoff.ms=20000 sensitive=false "
     "synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.backoff.ms=20000"),
]


#: kafka-acls --add arguments of the ACLs set on the ZooKeeper cluster (literal and prefixed, allow and deny)
ACLS = [
    ["--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders"],
    ["--allow-principal", "User:bob@corp", "--operation", "Describe", "--topic", "orders"],
    ["--deny-principal", "User:mallory", "--deny-host", "10.0.0.1", "--operation", "Write", "--topic", "orders"],
    ["--allow-principal", "User:carol", "--operation", "Write", "--topic", "aud", "--resource-pattern-type",
     "prefixed"],
    ["--allow-principal", "User:alice", "--operation", "Read", "--group", "g1"],
    ["--allow-principal", "User:admin", "--operation", "AlterConfigs", "--cluster"],
    ["--allow-principal", "User:alice", "--operation", "Write", "--transactional-id", "tx-1"],
]


def kafka_acls(version: str, bootstrap: str, *args: str) -> str:
    cls = tools.find_class(version, "org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand")
    return tools.run_tool(version, cls, ["--bootstrap-server", bootstrap, *args], timeout=120).stdout


def acl_list(version: str, bootstrap: str) -> set[tuple[str, ...]]:
    """kafka-acls --list: {(resource type, name, pattern type, principal, host, operation, permission)}."""
    out, resource, acls = kafka_acls(version, bootstrap, "--list"), None, set()
    for line in out.splitlines():
        m = re.search(r"ResourcePattern\(resourceType=(\w+), name=(.*), patternType=(\w+)\)", line)
        if m:
            resource = m.groups()
            continue
        m = re.search(r"\(principal=(.*), host=(.*), operation=(\w+), permissionType=(\w+)\)", line)
        if m:
            assert resource is not None, out
            acls.add((*resource, *m.groups()))
    return acls


def sasl_list_topics(bootstrap: str, path: Path, user: str, password: str, mechanism: str):
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{user}" password="{password}";\n'
                    "request.timeout.ms=20000\ndefault.api.timeout.ms=30000\n", encoding="utf-8")
    return tools.run_tool(jars.KAFKA_4, tools.topic_command_class(jars.KAFKA_4), [
        "--bootstrap-server", bootstrap, "--command-config", str(path), "--list"], check=False, timeout=120)


def kraftkit(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftkit.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


TOPICS = {
    "orders": {"partitions": 3, "rf": 2, "configs": {"retention.ms": "86400000", "segment.bytes": "1048576"}},
    "audit": {"partitions": 2, "rf": 1, "configs": {"cleanup.policy": "compact", "max.message.bytes": "200000"}},
    "plain": {"partitions": 1, "rf": 2, "configs": {}},
}


def test_a_zookeeper_cluster_converted_offline_boots_as_kraft_and_serves_its_data(kafka_jars, tmp_path):
    zk = ZooKeeper(tmp_path / "zk")
    old = {b: ZkBroker(tmp_path / f"broker-{b}", b, zk.connect) for b in BROKERS}
    new: list[KRaftNode] = []
    procs: list[KraftkitProcess] = []
    try:
        zk.start()
        for n in old.values():
            n.launch()
        for n in old.values():
            n.wait_ready()
        boot = ",".join(n.bootstrap for n in old.values())
        for name, t in TOPICS.items():
            args = ["--create", "--topic", name, "--partitions", t["partitions"], "--replication-factor", t["rf"]]
            for k, v in t["configs"].items():
                args += ["--config", f"{k}={v}"]
            tools.topic_command(jars.KAFKA_3, boot, [str(a) for a in args])
        jobs = [{"topic": name, "props": {"acks": "all"},
                 "records": [{"key": f"{name}-k{i}".encode(), "value": f"{name}-v{i}".encode() * (i % 7 + 1),
                              "partition": i % t["partitions"]} for i in range(60)]}
                for name, t in TOPICS.items()]
        acks = tools.produce(jars.KAFKA_3, boot, jobs)
        for entity, config, _said in QUOTAS:
            kafka_configs(jars.KAFKA_3, boot, "--alter", "--add-config", config, *entity)
        for entity, config, _said in BROKER_CONFIGS:
            kafka_configs(jars.KAFKA_3, boot, "--alter", "--add-config", config, "--entity-type", "brokers", *entity)
        for args in ACLS:
            kafka_acls(jars.KAFKA_3, boot, "--add", *args)
        acls_before = acl_list(jars.KAFKA_3, boot)
        assert len(acls_before) == len(ACLS), acls_before
        for user, mech, pw in (("alice", "SCRAM-SHA-256", "alice-pw"), ("bob@corp", "SCRAM-SHA-512", "bob-pw")):
            kafka_configs(jars.KAFKA_3, boot, "--alter", "--add-config", f"{mech}=[iterations=8192,password={pw}]",
                          "--entity-type", "users", "--entity-name", user)
        assert len(acks) == 60 * len(TOPICS)
        before = describe(jars.KAFKA_3, boot)
        assert set(before) == set(TOPICS)

        # a topic deletion that cannot finish (its one replica's broker is down) is refused, naming the
        # topic; once the broker is back and the deletion done, the conversion goes ahead
        tools.topic_command(jars.KAFKA_3, boot, ["--create", "--topic", "doomed", "--replica-assignment", "2"])
        old[2].stop()
        tools.topic_command(jars.KAFKA_3, old[1].bootstrap, ["--delete", "--topic", "doomed"])
        old[1].stop()
        refused = kraftkit("migrate", "from-zookeeper", "--zookeeper", zk.connect, "--controller-dir",
                           f"{CONTROLLER_ID}={tmp_path / 'refused'}", "--voters", f"{CONTROLLER_ID}@127.0.0.1:1",
                           "--inter-broker-protocol-version", "3.9", "--dry-run")
        assert refused.returncode == 1, (refused.stdout, refused.stderr)
        assert "cannot convert: topic deletions in progress (/admin/delete_topics: doomed)" in refused.stderr
        for n in old.values():
            n.launch()
        for n in old.values():
            n.wait_ready()
        deadline = time.monotonic() + 120
        while "doomed" in tools.topic_command(jars.KAFKA_3, boot, ["--list"]):
            assert time.monotonic() < deadline, "the deletion did not finish"
            time.sleep(1)
        for n in reversed(list(old.values())):
            n.stop()

        # the converter, read-only first
        cport = free_port()
        voters = f"{CONTROLLER_ID}@127.0.0.1:{cport}"
        cdir = tmp_path / "controller" / "data"
        bdirs = [old[b].log_dirs[0] for b in BROKERS]
        argv = ["migrate", "from-zookeeper", "--zookeeper", zk.connect, "--controller-dir",
                f"{CONTROLLER_ID}={cdir}", "--voters", voters, "--broker-config", old[1].config_path,
                *[x for d in bdirs for x in ("--broker-dir", d)]]
        dry = kraftkit(*argv, "--dry-run", "--json")
        assert dry.returncode == 0, dry.stderr
        assert check_output("migrate from-zookeeper", dry.stdout) == []
        plan = json.loads(dry.stdout)
        assert plan["topics"] == 3 and plan["partitions"] == 6 and plan["topicConfigs"] == 4
        assert plan["clientQuotas"] == 3 and plan["scramCredentials"] == 2 and plan["acls"] == len(ACLS)
        assert plan["brokerConfigs"] == len(BROKER_CONFIGS)
        assert plan["metadataVersion"] == "3.9-IV0" and plan["written"] == []
        assert plan["finalizedFeatures"]["metadata.version"] == plan["metadataVersionLevel"]
        assert plan["nextProducerId"] is not None and plan["nextProducerId"] > 0  # the producers were idempotent
        assert not cdir.exists() and not (bdirs[0] / "meta.properties.zk-backup").exists()
        done = kraftkit(*argv)
        assert done.returncode == 0, done.stderr
        assert "meta.properties.zk-backup" in done.stdout
        again = kraftkit(*argv)
        assert again.returncode == 2 and "exists already" in again.stderr
        zk_cluster_id = json.loads(dry.stdout)["clusterId"]
        snap = next((cdir / "__cluster_metadata-0").glob("*.checkpoint"))
        img = load_snapshot(snap)
        assert {t.name for t in img.topics.values()} == set(TOPICS)
        for b, d in zip(BROKERS, bdirs):
            meta = (d / "meta.properties").read_text()
            assert f"node.id={b}" in meta and "version=1" in meta and f"cluster.id={zk_cluster_id}" in meta
            assert "broker.id" in (d / "meta.properties.zk-backup").read_text()
        live = zk_reader.KazooSource(zk.connect)
        try:
            read_live = zk_reader.read_cluster(live)
        finally:
            live.close()
        zk.stop()  # KRaft needs no ZooKeeper

        # the same cluster read from the stopped ZooKeeper's data directory (its snapshot and logs
        # replayed): the same data, znode versions (partition epochs) included
        from_dir = zk_reader.read_cluster(DataDirSource(zk.workdir / "data"))
        assert from_dir == read_live
        offline = kraftkit("migrate", "from-zookeeper", "--zookeeper-data-dir", zk.workdir / "data", "--controller-dir",
                           f"{CONTROLLER_ID}={tmp_path / 'other'}", "--voters", voters,
                           "--inter-broker-protocol-version", "3.9", "--dry-run", "--json")
        assert offline.returncode == 0, offline.stderr
        same = json.loads(offline.stdout)
        for k in ("clusterId", "metadataVersion", "topics", "partitions", "topicConfigs", "clientQuotas",
                  "scramCredentials", "acls", "brokerConfigs", "records", "nextProducerId", "finalizedFeatures"):
            assert same[k] == plan[k], k

        def verify(brokers: list[KRaftNode], tag: str) -> None:
            """The KRaft cluster serves what the ZooKeeper cluster had."""
            kboot = ",".join(n.bootstrap for n in brokers)
            deadline = time.monotonic() + 120
            while True:
                after = describe(jars.KAFKA_4, kboot)
                if set(after) == set(TOPICS) or time.monotonic() > deadline:
                    break
                time.sleep(1)
            for name in TOPICS:
                a, b = before[name], after[name]
                assert (a["id"], a["partitions"], a["rf"], a["configs"], a["replicas"]) == (
                    b["id"], b["partitions"], b["rf"], b["configs"], b["replicas"]), name
                assert b["configs"] == {**TOPICS[name]["configs"], "min.insync.replicas": "1"}
            for name in TOPICS:
                got = tools.consume(jars.KAFKA_4, kboot, name)
                want = sorted((a["partition"], a["offset"]) for a in acks if a["topic"] == name)
                assert sorted((r["partition"], r["offset"]) for r in got) == want, name
                by_key = {r["key"]: r["value"] for r in got}
                for i in range(60):
                    assert by_key[f"{name}-k{i}".encode()] == f"{name}-v{i}".encode() * (i % 7 + 1)
            assert acl_list(jars.KAFKA_4, kboot) == acls_before
            for entity, _config, said in BROKER_CONFIGS:
                out = kafka_configs(jars.KAFKA_4, kboot, "--describe", "--entity-type", "brokers", *entity)
                assert said in out, out

            # quotas and SCRAM credentials: as Kafka describes them, and a client authenticates with each
            # user's password (and not with another)
            for entity, _config, said in QUOTAS:
                out = kafka_configs(jars.KAFKA_4, kboot, "--describe", *entity)
                assert said in out, out
            out = kafka_configs(jars.KAFKA_4, kboot, "--describe", "--entity-type", "users")
            assert "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192" in out, out
            assert "SCRAM credential configs for user-principal 'bob@corp' are SCRAM-SHA-512=iterations=8192" in out, out
            sasl = brokers[0].sasl_port
            for user, mech, pw in (("alice", "SCRAM-SHA-256", "alice-pw"), ("bob@corp", "SCRAM-SHA-512", "bob-pw")):
                ok = sasl_list_topics(f"127.0.0.1:{sasl}", tmp_path / f"{tag}-{mech}.properties", user, pw, mech)
                assert ok.returncode == 0 and "orders" in ok.stdout, (ok.stdout, ok.stderr[-2000:])
                bad = sasl_list_topics(f"127.0.0.1:{sasl}", tmp_path / f"{tag}-{mech}-bad.properties", user, "nope", mech)
                assert bad.returncode != 0 and "invalid credentials" in bad.stdout + bad.stderr

        # kraftkit's own controller (controller run) on a copy of the directory written, the brokers
        # (Kafka 4.3.1) on copies of their log directories
        kk_dir = tmp_path / "kk"
        shutil.copytree(cdir, kk_dir / "controller")
        kport = free_port()
        kvoters = f"{CONTROLLER_ID}@127.0.0.1:{kport}"
        procs.append(KraftkitProcess(["controller", "run"], ["--node-id", str(CONTROLLER_ID), "--voters", kvoters,
                                                             "--log-dir", str(kk_dir / "controller")],
                                     kk_dir / "controller.log"))
        kk_brokers = []
        for b in BROKERS:
            shutil.copytree(old[b].log_dirs[0], kk_dir / f"broker-{b}" / "data")
            n = KRaftNode(kk_dir / f"broker-{b}", b, broker=True, voters=kvoters, controller_port=kport)
            new.append(n)
            kk_brokers.append(n)
            n.launch()
        for n in kk_brokers:
            n.wait_ready()
        verify(kk_brokers, "kraftkit")
        for n in kk_brokers:
            n.stop()
        procs[-1].stop()

        # real Kafka 4.3.1: a controller on the directory written, the brokers on their old log directories
        ctl = KRaftNode(tmp_path / "controller", CONTROLLER_ID, broker=False, voters=voters, controller_port=cport)
        new.append(ctl)
        ctl.launch()
        brokers = []
        for b in BROKERS:
            shutil.copy(old[b].server_log, old[b].workdir / "logs" / "zk-mode-server.log")
            n = KRaftNode(old[b].workdir, b, broker=True, voters=voters, controller_port=cport)
            new.append(n)
            brokers.append(n)
            n.launch()
        for n in (ctl, *brokers):
            n.wait_ready()
        verify(brokers, "kafka")
    finally:
        for n in reversed(new):
            n.stop()
        for p in procs:
            p.stop()
        for n in old.values():
            n.stop()
        zk.stop()
