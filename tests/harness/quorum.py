"""A real Apache Kafka KRaft quorum of three controllers on 127.0.0.1, for raft interop tests.

    with KafkaQuorum(workdir, version="4.3.1") as q:
        q.voters                  # "1@127.0.0.1:P1,2@127.0.0.1:P2,3@127.0.0.1:P3" (controller.quorum.voters)
        q.controller_bootstrap    # "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3" (--bootstrap-controller)
        q.bootstrap               # "127.0.0.1:B" (the broker of node 1, with ``broker=True``)
        q.cluster_id
        q.metadata_log_dir(2)     # Path of node 2's __cluster_metadata-0
        q.describe_status()       # kafka-metadata-quorum describe --status, parsed
        q.describe_replication()  # kafka-metadata-quorum describe --replication, parsed

Nodes 1, 2 and 3 are the voters (static ``controller.quorum.voters``, kraft.version 0). With
``broker=True`` (the default) node 1 is a combined broker+controller, so the metadata log also gets
a broker registration and whatever the broker is asked for (topics, configs: see
:func:`tests.harness.tools.create_topics`); the others are ``process.roles=controller``. Without a
broker the controllers still write the bootstrap records (features), their registrations,
LeaderChange control records and NoOps. Ports are free ones picked at start; every node is
formatted with the same cluster id; all three JVMs are launched before waiting for any, as none can
be ready without a quorum. ``stop()`` stops them together (SIGTERM, then SIGKILL after a bound).
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

from . import jars, tools
from .jars import HarnessError
from .node import KafkaNode, free_port, random_cluster_id

__all__ = ["KafkaQuorum", "QuorumMember", "parse_status", "parse_replication"]


class QuorumMember(KafkaNode):
    """One node of a :class:`KafkaQuorum`: a controller, or (node 1 with a broker) broker+controller."""

    def __init__(self, quorum: KafkaQuorum, node_id: int, *, broker: bool, controller_port: int,
                 broker_port: int = 0) -> None:
        super().__init__(quorum.workdir / f"node-{node_id}", quorum.version, extra_props=quorum.extra_props,
                         cluster_id=quorum.cluster_id, release_version=quorum.release_version,
                         start_timeout=quorum.start_timeout,
                         stop_timeout=quorum.stop_timeout)
        self.quorum = quorum
        self.node_id = node_id
        self.broker = broker
        self.controller_port = controller_port
        self.broker_port = broker_port

    def _ensure_ports(self) -> None:
        pass  # chosen by the quorum, all at once

    @property
    def ready_port(self) -> int:
        return self.broker_port if self.broker else self.controller_port

    def properties(self) -> dict[str, object]:
        if self.broker:
            props = super().properties()  # the combined node's broker settings (replication factor 1...)
        else:
            props = {
                "process.roles": "controller",
                "node.id": self.node_id,
                "listeners": f"CONTROLLER://127.0.0.1:{self.controller_port}",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
                "log.dirs": ",".join(str(d) for d in self.log_dirs),
                "num.io.threads": 2,
                "num.network.threads": 2,
            }
            props.update(self.extra_props)
        props["controller.quorum.voters"] = self.quorum.voters
        props.pop("controller.quorum.bootstrap.servers", None)
        return props


class KafkaQuorum:
    """Three real KRaft voters (see the module docstring). ``extra_props`` go into every node's
    ``server.properties`` (e.g. snapshot and NoOp intervals)."""

    def __init__(self, workdir: Path | str, version: str = jars.DEFAULT_VERSION, *, broker: bool = True,
                 extra_props: dict[str, object] | None = None, cluster_id: str | None = None,
                 release_version: str | None = None, start_timeout: float = 150.0,
                 stop_timeout: float = 60.0) -> None:
        self.workdir = Path(workdir).resolve()
        self.version = version
        self.release_version = release_version  # kafka-storage format --release-version
        self.extra_props = dict(extra_props or {})
        self.cluster_id = cluster_id or random_cluster_id()
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        ports: set[int] = set()
        while len(ports) < 4:
            ports.add(free_port())
        c1, c2, c3, b = sorted(ports)
        self.controller_ports = {1: c1, 2: c2, 3: c3}
        self.nodes = {1: QuorumMember(self, 1, broker=broker, controller_port=c1, broker_port=b if broker else 0),
                      2: QuorumMember(self, 2, broker=False, controller_port=c2),
                      3: QuorumMember(self, 3, broker=False, controller_port=c3)}

    # ------------------------------------------------------------------ addresses
    @property
    def voters(self) -> str:
        return ",".join(f"{i}@127.0.0.1:{p}" for i, p in sorted(self.controller_ports.items()))

    @property
    def controller_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for _, p in sorted(self.controller_ports.items()))

    @property
    def bootstrap(self) -> str:
        if not self.nodes[1].broker:
            raise HarnessError("this quorum has no broker")
        return self.nodes[1].bootstrap

    def metadata_log_dir(self, node_id: int) -> Path:
        return self.nodes[node_id].metadata_log_dir

    # ------------------------------------------------------------------ life cycle
    def start(self) -> KafkaQuorum:
        self.workdir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.start_timeout
        try:
            for n in self.nodes.values():
                n.launch()
            for n in self.nodes.values():
                n.wait_ready(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stops every node: the broker first (its controlled shutdown needs the controllers), then
        the controllers together; SIGTERM, a bounded wait, then SIGKILL."""
        first = [n for n in self.nodes.values() if n.broker]
        for group in (first, [n for n in self.nodes.values() if not n.broker]):
            procs = [(n, n.proc) for n in group if n.proc is not None]
            for _n, p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + self.stop_timeout
            for n, p in procs:
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    n.kill()
                    continue
                n.stop()  # reaps and closes the stdout file

    def __enter__(self) -> KafkaQuorum:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tails(self, lines: int = 40) -> str:
        return "\n".join(f"=== node {i} ===\n{n.log_tail(lines)}" for i, n in self.nodes.items())

    # ------------------------------------------------------------------ Kafka's own tool
    def metadata_quorum(self, *args: str, bootstrap_controller: str | None = None, timeout: float = 120.0) -> str:
        """Runs ``kafka-metadata-quorum.sh --bootstrap-controller ... ARGS`` (Kafka's
        ``MetadataQuorumCommand``); returns its stdout."""
        return metadata_quorum(self.version, bootstrap_controller or self.controller_bootstrap, *args, timeout=timeout)

    def describe_status(self) -> dict[str, str]:
        return parse_status(self.metadata_quorum("describe", "--status"))

    def describe_replication(self) -> list[dict[str, str]]:
        return parse_replication(self.metadata_quorum("describe", "--replication"))


def metadata_quorum(version: str, bootstrap_controller: str, *args: str, timeout: float = 120.0) -> str:
    """``kafka-metadata-quorum.sh --bootstrap-controller BOOTSTRAP ARGS`` against any quorum (a real
    one or kraftkit's); returns stdout, raises :class:`HarnessError` on a nonzero exit."""
    cls = tools.find_class(version, "org.apache.kafka.tools.MetadataQuorumCommand")
    return tools.run_tool(version, cls, ["--bootstrap-controller", bootstrap_controller, *args], timeout=timeout).stdout


def parse_status(out: str) -> dict[str, str]:
    """``describe --status`` output -> ``{"ClusterId": ..., "LeaderId": ..., ...}`` (values as printed)."""
    return dict(re.findall(r"^(\w+):\s+(.*?)\s*$", out, re.M))


def parse_replication(out: str) -> list[dict[str, str]]:
    """``describe --replication`` output (a table: NodeId, DirectoryId, LogEndOffset, Lag,
    LastFetchTimestamp, LastCaughtUpTimestamp, Status) -> one dict per row. Kafka pads every cell
    and ends it with a tab; with ``--human-readable`` the times read ``N ms ago``."""

    def split(line: str) -> list[str]:
        return [c.strip() for c in line.rstrip("\n").split("\t") if c.strip()]

    lines = [ln for ln in out.splitlines() if ln.strip()]
    if not lines or split(lines[0])[:1] != ["NodeId"]:
        raise HarnessError(f"not a --replication table:\n{out}")
    head = split(lines[0])
    rows = []
    for ln in lines[1:]:
        cells = split(ln)
        if len(cells) != len(head):
            raise HarnessError(f"--replication row {ln!r} does not have the {len(head)} columns {head}")
        rows.append(dict(zip(head, cells)))
    return rows
