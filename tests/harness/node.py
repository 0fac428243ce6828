"""A single real Apache Kafka KRaft node (combined broker + controller) for tests.

    with KafkaNode(workdir, version="4.3.1") as node:
        node.bootstrap            # "127.0.0.1:PORT" (PLAINTEXT)
        node.log_dirs             # [Path]  (data log dirs)
        node.metadata_dir         # Path    (holds __cluster_metadata-0)
        node.metadata_log_dir     # Path    (<metadata_dir>/__cluster_metadata-0)
    # stopped cleanly (SIGTERM, then SIGKILL after a bound)

    node.start(); node.stop(); node.start()   # restart on the same data dir

The node is formatted once (``kafka.tools.StorageTool format``) on first start; a
restart reuses the data dirs and ports.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

from . import jars
from .jars import HarnessError

SERVER_JVM_OPTS = ["-Xms256m", "-Xmx768m", "-XX:+UseG1GC", "-Djava.awt.headless=true"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def random_cluster_id() -> str:
    """A Kafka Uuid in its base64 form (22 chars, url-safe, unpadded)."""
    while True:
        raw = uuid.uuid4().bytes
        cid = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not cid.startswith("-"):  # a leading '-' confuses argument parsers
            return cid


def log4j_files(dirpath: Path, logfile: Path, *, log_until_exit: bool = False) -> list[str]:
    """Write log4j (1.x/reload4j, Kafka 3.x) and log4j2 (Kafka 4.x) configs; return JVM -D flags.
    ``log_until_exit``: log4j2 keeps logging while the JVM's shutdown hooks run (its own hook
    would stop it first, so a SIGTERM'd server's shutdown is missing from its log)."""
    l1 = dirpath / "log4j.properties"
    l1.write_text(
        "log4j.rootLogger=INFO, file\n"
        "log4j.appender.file=org.apache.log4j.FileAppender\n"
        f"log4j.appender.file.File={logfile}\n"
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
    )
    l2 = dirpath / "log4j2.properties"
    l2.write_text(
        "status = warn\n"
        + ("shutdownHook = disable\n" if log_until_exit else "")
        + "appender.file.type = File\n"
        "appender.file.name = FILE\n"
        f"appender.file.fileName = {logfile}\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
        "rootLogger.level = INFO\n"
        "rootLogger.appenderRef.file.ref = FILE\n"
    )
    return [f"-Dlog4j.configuration=file:{l1}", f"-Dlog4j2.configurationFile={l2}"]


def tool_log4j_files(dirpath: Path) -> list[str]:
    """Logging config for short-lived tools: WARN and above to stderr."""
    dirpath.mkdir(parents=True, exist_ok=True)
    l1 = dirpath / "tools-log4j.properties"
    _write_once(l1,
                "log4j.rootLogger=WARN, stderr\n"
                "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                "log4j.appender.stderr.Target=System.err\n"
                "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
    l2 = dirpath / "tools-log4j2.properties"
    _write_once(l2,
                "status = warn\n"
                "appender.err.type = Console\n"
                "appender.err.name = STDERR\n"
                "appender.err.target = SYSTEM_ERR\n"
                "appender.err.layout.type = PatternLayout\n"
                "appender.err.layout.pattern = [%d] %p %m (%c)%n\n"
                "rootLogger.level = WARN\n"
                "rootLogger.appenderRef.err.ref = STDERR\n")
    return [f"-Dlog4j.configuration=file:{l1}", f"-Dlog4j2.configurationFile={l2}"]


def _write_once(path: Path, text: str) -> None:
    """Write ``path`` atomically unless it already has ``text`` (safe across processes)."""
    try:
        if path.read_text() == text:
            return
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class KafkaNode:
    """Context manager running one combined KRaft node from the fetched jars.

    Parameters
    ----------
    workdir: directory owned by this node (created); holds config, data and logs.
    version: Kafka version (jars fetched with ``jars.ensure_kafka``).
    dynamic_quorum: use ``controller.quorum.bootstrap.servers`` + ``format --standalone``
        (KIP-853, kraft.version=1: the metadata log then holds KRaftVersion/KRaftVoters
        control records).  Default: static ``controller.quorum.voters``.
    separate_metadata_dir: put ``metadata.log.dir`` in its own directory instead of the
        first log dir.
    extra_props: more ``server.properties`` entries (override the defaults).
    release_version: ``format --release-version`` (e.g. "3.9-IV0"); default: latest.
    log_until_exit: log the whole SIGTERM shutdown (Kafka 4.x's log4j2 otherwise stops logging
        when the shutdown begins).
    """

    def __init__(
        self,
        workdir: Path | str,
        version: str = jars.DEFAULT_VERSION,
        *,
        dynamic_quorum: bool = False,
        separate_metadata_dir: bool = False,
        extra_props: dict[str, object] | None = None,
        release_version: str | None = None,
        cluster_id: str | None = None,
        start_timeout: float = 90.0,
        stop_timeout: float = 60.0,
        log_until_exit: bool = False,
    ) -> None:
        self.workdir = Path(workdir).resolve()
        self.version = version
        self.log_until_exit = log_until_exit
        self.dynamic_quorum = dynamic_quorum
        self.separate_metadata_dir = separate_metadata_dir
        self.extra_props = dict(extra_props or {})
        self.release_version = release_version
        self.cluster_id = cluster_id or random_cluster_id()
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.node_id = 1
        self.broker_port = 0
        self.controller_port = 0
        self.proc: subprocess.Popen | None = None
        self._stdout = None
        self.formatted = False

    # ------------------------------------------------------------------ paths
    @property
    def config_path(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def server_log(self) -> Path:
        return self.workdir / "logs" / "server.log"

    @property
    def stdout_log(self) -> Path:
        return self.workdir / "logs" / "stdout.log"

    @property
    def log_dirs(self) -> list[Path]:
        return [self.workdir / "data"]

    @property
    def metadata_dir(self) -> Path:
        return self.workdir / "metadata" if self.separate_metadata_dir else self.log_dirs[0]

    @property
    def metadata_log_dir(self) -> Path:
        return self.metadata_dir / "__cluster_metadata-0"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def controller_bootstrap(self) -> str:
        return f"127.0.0.1:{self.controller_port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def partition_dir(self, topic: str, partition: int = 0) -> Path:
        for d in self.log_dirs:
            p = d / f"{topic}-{partition}"
            if p.is_dir():
                return p
        return self.log_dirs[0] / f"{topic}-{partition}"

    # ----------------------------------------------------------------- config
    def properties(self) -> dict[str, object]:
        c, b = self.controller_port, self.broker_port
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": self.node_id,
            "listeners": f"PLAINTEXT://127.0.0.1:{b},CONTROLLER://127.0.0.1:{c}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{b}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            "num.partitions": 1,
            "default.replication.factor": 1,
            "min.insync.replicas": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 1,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": "false",
            "num.io.threads": 2,
            "num.network.threads": 2,
            "num.recovery.threads.per.data.dir": 1,
            "log.retention.hours": -1,
            "log.retention.check.interval.ms": 3_600_000,
        }
        if jars.major(self.version) >= 4:
            props["share.coordinator.state.topic.replication.factor"] = 1
            props["share.coordinator.state.topic.min.isr"] = 1
        if self.dynamic_quorum:
            props["controller.quorum.bootstrap.servers"] = f"127.0.0.1:{c}"
        else:
            props["controller.quorum.voters"] = f"{self.node_id}@127.0.0.1:{c}"
        if self.separate_metadata_dir:
            props["metadata.log.dir"] = str(self.metadata_dir)
        props.update(self.extra_props)
        return props

    def _write_config(self) -> None:
        lines = [f"{k}={v}" for k, v in self.properties().items()]
        self.config_path.write_text("# written by tests/harness/node.py\n" + "\n".join(lines) + "\n")

    # ---------------------------------------------------------------- format
    def format(self) -> None:
        """Run ``kafka.tools.StorageTool format`` (once per workdir)."""
        java = jars.require_java()
        cmd = [java, "-Xmx256m", "-XX:TieredStopAtLevel=1", *tool_log4j_files(self.workdir / "logs"),
               "-cp", jars.classpath(self.version), "kafka.tools.StorageTool", "format",
               f"--cluster-id={self.cluster_id}", "--config", str(self.config_path)]  # (an id may begin with "-")
        if self.dynamic_quorum:
            cmd.append("--standalone")
        if self.release_version:
            cmd += ["--release-version", self.release_version]
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=120)
        except subprocess.TimeoutExpired:
            raise HarnessError("kafka-storage format timed out after 120s")
        if proc.returncode != 0:
            raise HarnessError(f"kafka-storage format failed ({proc.returncode}):\n{proc.stdout}")
        self.format_output = proc.stdout
        self.formatted = True

    # ------------------------------------------------------------- lifecycle
    def start(self) -> "KafkaNode":
        if self.running:
            return self
        self.launch()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def launch(self) -> "KafkaNode":
        """Format if needed and start the JVM without waiting for it (see :meth:`wait_ready`):
        the nodes of a quorum must all be launched before any of them can be ready."""
        if self.running:
            return self
        jars.ensure_kafka(self.version)
        java = jars.require_java()
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        for d in [*self.log_dirs, self.metadata_dir]:
            d.mkdir(parents=True, exist_ok=True)
        self._ensure_ports()
        self._write_config()
        if not self.formatted and not (self.metadata_dir / "meta.properties").exists():
            self.format()
        self.formatted = True
        log_flags = log4j_files(self.workdir, self.server_log, log_until_exit=self.log_until_exit)
        cmd = [java, *SERVER_JVM_OPTS, *log_flags,
               f"-Dkafka.logs.dir={self.workdir / 'logs'}",
               "-cp", jars.classpath(self.version), "kafka.Kafka", str(self.config_path)]
        self._log_offset = self.server_log.stat().st_size if self.server_log.exists() else 0
        self._stdout = open(self.stdout_log, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self._stdout, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.workdir,
                                     start_new_session=True)
        return self

    def _new_log_text(self) -> str:
        try:
            with open(self.server_log, "rb") as fh:
                fh.seek(self._log_offset)
                return fh.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def is_ready(self) -> bool:
        """The log says ``Kafka Server started`` and the client port accepts connections; raises
        if the process exited."""
        if self.proc is None or self.proc.poll() is not None:
            code = None if self.proc is None else self.proc.returncode
            raise HarnessError(f"Kafka {self.version} node {self.node_id} exited with code {code} "
                               f"during startup.\n{self.log_tail()}")
        return "Kafka Server started" in self._new_log_text() and self._port_open(self.ready_port)

    @property
    def ready_port(self) -> int:
        return self.broker_port

    def wait_ready(self, deadline: float | None = None) -> None:
        """Waits until :meth:`is_ready` (up to ``start_timeout`` s, or the monotonic ``deadline``)."""
        if deadline is None:
            deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.is_ready():
                return
            time.sleep(0.25)
        raise HarnessError(f"Kafka {self.version} node {self.node_id} not ready after {self.start_timeout:.0f}s.\n"
                           f"{self.log_tail()}")

    def _ensure_ports(self) -> None:
        if not self.broker_port:
            self.broker_port = free_port()
            self.controller_port = free_port()
            while self.controller_port == self.broker_port:
                self.controller_port = free_port()

    @staticmethod
    def _port_open(port: int) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM (clean shutdown), wait ``stop_timeout``, then SIGKILL."""
        proc, self.proc = self.proc, None
        try:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=self.stop_timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=30)
            elif proc is not None:
                proc.wait()
        finally:
            if self._stdout is not None:
                self._stdout.close()
                self._stdout = None

    def kill(self) -> None:
        """SIGKILL (unclean shutdown, for recovery tests)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        if proc is not None:
            proc.wait(timeout=30)
        if self._stdout is not None:
            self._stdout.close()
            self._stdout = None

    def log_tail(self, lines: int = 60) -> str:
        parts = []
        for p in (self.server_log, self.stdout_log):
            if p.exists():
                text = p.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- tail of {p} ---\n" + "\n".join(text))
        return "\n".join(parts) or "(no server log)"

    def __enter__(self) -> "KafkaNode":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class SaslScramNode(KafkaNode):
    """``KafkaNode`` with a SASL_PLAINTEXT (SCRAM-SHA-256/512) listener next to the PLAINTEXT one
    and the StandardAuthorizer (``User:ANONYMOUS`` is a super user; no ACL means no access), as
    the metadata scenarios need for SCRAM users, ACLs and delegation tokens."""

    sasl_port = 0

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    def launch(self) -> "SaslScramNode":
        if not self.sasl_port:
            self.sasl_port = free_port()
        return super().launch()

    def properties(self) -> dict[str, object]:
        props = super().properties()
        b, c, s = self.broker_port, self.controller_port, self.sasl_port
        jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        props.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{b},SASL_PLAINTEXT://127.0.0.1:{s},CONTROLLER://127.0.0.1:{c}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{b},SASL_PLAINTEXT://127.0.0.1:{s}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": jaas,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": jaas,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "false",
        })
        return props
