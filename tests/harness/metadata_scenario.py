"""A second oracle scenario: varied KRaft metadata written by a real Kafka node, and what
Kafka's admin APIs report about it.

``build_metadata_oracle(workdir=None, version=KAFKA_4) -> MetadataOracle``:

1. start a combined KRaft node (``AdminNode``: dynamic quorum, two log dirs (JBOD), the
   ``StandardAuthorizer`` with ``User:ANONYMOUS`` as super user, a SASL_PLAINTEXT listener
   with SCRAM for delegation tokens, small metadata segments and a snapshot every 4 KiB of
   metadata records);
2. run Kafka's own tools (``TopicCommand``, ``ConfigCommand``, ``AclCommand``; one JVM,
   ``java/MetadataClient.java tools``) for the steps in ``tool_steps``: topics with 20-50
   partitions, topic configs set at creation and altered/deleted later, a partition count
   increase, a deleted topic recreated under the same name, per-broker and cluster-default
   dynamic broker configs (one deleted again), client-metrics and group configs, client
   quotas for user / client-id / user+client-id / default entities / ips (one removed
   again), SCRAM-SHA-256 and -512 credentials (one removed again), and ACLs (literal,
   prefixed, wildcard; topic, group, cluster, transactional id, user; allow and deny; one
   removed again);
3. move replicas between the two log dirs (``alterReplicaLogDirs``: the single-node form of
   a partition reassignment; Kafka writes PartitionChangeRecords with new Directories);
4. create a delegation token as ``alice`` over SASL/SCRAM;
5. capture what the admin APIs report (``MetadataClient.java capture``, repeated until two
   captures agree) into ``admin.json``, with the metadata quorum's high watermark before and
   after the capture (the image at either offset must equal the capture);
6. stop the node cleanly; store everything under
   ``.cache/oracle-data/metadata-<version>-<hash>/`` (reused while this file, node.py and
   MetadataClient.java are unchanged).

With ``workdir`` given, the cached tree is copied there and the returned object points at
the copy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from . import jars, tools
from .cache import build_cached, copy_of
from .jars import CACHE_DIR, HarnessError
from .node import SaslScramNode

HERE = Path(__file__).resolve().parent
CLIENT_SOURCE = HERE / "java" / "MetadataClient.java"
METADATA_SEGMENT_BYTES = 4 * 1024
SNAPSHOT_BYTES = 4 * 1024

#: the SCRAM user the SASL listener authenticates (it owns the delegation token)
TOKEN_USER, TOKEN_PASSWORD, TOKEN_RENEWER = "alice", "alice-secret", "bob"

#: topic -> (partitions at creation, configs at creation)
TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    "orders": (50, {"retention.ms": "86400000", "cleanup.policy": "delete", "max.message.bytes": "2000000"}),
    "events": (30, {"compression.type": "zstd", "min.insync.replicas": "1"}),
    "audit-log": (20, {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}),
    "growing": (6, {}),
    "doomed": (12, {"retention.bytes": "1048576"}),
}
GROWN_PARTITIONS = 16  # "growing" goes from 6 to 16 partitions
RECREATED = ("doomed", 3, {"segment.ms": "600000"})  # deleted, then created again
MOVED = [("orders", p) for p in range(8)] + [("events", 0)]  # replicas moved to the other log dir


@dataclasses.dataclass
class MetadataOracle:
    """What ``build_metadata_oracle`` made.  Paths point at the copy (or the cache)."""

    root: Path
    version: str
    cluster_id: str
    node_dir: Path
    log_dirs: list[Path]
    metadata_dir: Path
    #: what the admin APIs reported while the node ran (``admin.json``)
    admin: dict
    #: the delegation token as createDelegationToken returned it
    token: dict

    @property
    def metadata_log_dir(self) -> Path:
        return self.metadata_dir / "__cluster_metadata-0"

    def directory_ids(self) -> dict[str, str]:
        """log dir path (relative to ``root``) -> ``directory.id`` from its meta.properties."""
        out = {}
        for d in self.log_dirs:
            props = dict(line.split("=", 1) for line in (d / "meta.properties").read_text().splitlines()
                         if "=" in line and not line.startswith("#"))
            out[str(d.relative_to(self.root))] = props["directory.id"]
        return out


class AdminNode(SaslScramNode):
    """``SaslScramNode`` with two log dirs, a delegation-token secret and frequent snapshots."""

    @property
    def log_dirs(self) -> list[Path]:
        return [self.workdir / "data0", self.workdir / "data1"]

    def properties(self) -> dict[str, object]:
        props = super().properties()
        props.update({
            "delegation.token.secret.key": "kraftkit-oracle-token-secret",
            "metadata.log.max.record.bytes.between.snapshots": SNAPSHOT_BYTES,
            "metadata.log.max.snapshot.interval.ms": 5000,
            # no data is produced: small preallocated index files keep the data set small
            # (a clean shutdown leaves the empty segments' 10 MiB sparse indexes as they are)
            "log.index.size.max.bytes": 4096,
        })
        if jars.major(self.version) >= 4:
            props["internal.metadata.log.segment.bytes"] = METADATA_SEGMENT_BYTES
        else:
            props["metadata.log.segment.min.bytes"] = METADATA_SEGMENT_BYTES
            props["metadata.log.segment.bytes"] = METADATA_SEGMENT_BYTES
        return props


def _scenario_hash() -> str:
    h = hashlib.sha256(f"py{sys.version_info[0]}.{sys.version_info[1]}".encode())
    for f in (HERE / "metadata_scenario.py", HERE / "node.py", CLIENT_SOURCE):
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def cache_root(version: str) -> Path:
    return CACHE_DIR / "oracle-data" / f"metadata-{version}-{_scenario_hash()}"


# ------------------------------------------------------------------ the client program

def client_classes(version: str) -> Path:
    """MetadataClient.java compiled once per (version, source)."""
    out = tools.compile_java(version, CLIENT_SOURCE, "metadata-client")
    if out is None:
        raise HarnessError("javac (JDK 17+) is not on PATH; the metadata oracle compiles MetadataClient.java")
    return out


def client(version: str, *args: object, timeout: float = 180.0) -> subprocess.CompletedProcess:
    return tools.run_tool(version, "MetadataClient", [str(a) for a in args], timeout=timeout,
                          extra_classpath=[client_classes(version)])


# ------------------------------------------------------------------ the scenario

def tool_steps(version: str, bootstrap: str) -> list[dict]:
    """Kafka CLI invocations (``{"class", "args"}``), in order (class ``wait-topics``: see
    MetadataClient.java)."""
    topic_cmd = tools.topic_command_class(version)
    config_cmd = tools.find_class(version, "org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand")
    acl_cmd = tools.find_class(version, "org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand")
    bs = ["--bootstrap-server", bootstrap]
    steps: list[dict] = []

    def topics(*a: str) -> None:
        steps.append({"class": topic_cmd, "args": [*bs, *a]})

    def configs(*a: str) -> None:
        steps.append({"class": config_cmd, "args": [*bs, "--alter", *a]})

    def acls(*a: str) -> None:
        steps.append({"class": acl_cmd, "args": [*bs, *a]})

    def create(name: str, partitions: int, cfg: dict[str, str]) -> None:
        extra = [x for k, v in cfg.items() for x in ("--config", f"{k}={v}")]
        topics("--create", "--topic", name, "--partitions", str(partitions), "--replication-factor", "1", *extra)

    def wait(*want: str) -> None:  # until the broker's metadata shows +NAME:PARTITIONS / no -NAME
        steps.append({"class": "wait-topics", "args": [bootstrap, *want]})

    # topics
    for name, (n, cfg) in TOPICS.items():
        create(name, n, cfg)
    wait(*(f"+{name}:{n}" for name, (n, _) in TOPICS.items()))
    topics("--alter", "--topic", "growing", "--partitions", str(GROWN_PARTITIONS))
    topics("--delete", "--topic", "doomed")
    wait(f"+growing:{GROWN_PARTITIONS}", "-doomed")
    create(*RECREATED)
    wait(f"+{RECREATED[0]}:{RECREATED[1]}")
    # topic configs: add, change, delete
    configs("--entity-type", "topics", "--entity-name", "orders",
            "--add-config", "retention.ms=172800000,segment.ms=3600000,retention.bytes=1073741824")
    configs("--entity-type", "topics", "--entity-name", "events", "--delete-config", "min.insync.replicas")
    configs("--entity-type", "topics", "--entity-name", "growing", "--add-config", "cleanup.policy=[compact,delete]")
    # broker configs: broker 1 and the cluster default (one key deleted again)
    configs("--entity-type", "brokers", "--entity-name", "1",
            "--add-config", "log.cleaner.threads=2,message.max.bytes=2097152")
    configs("--entity-type", "brokers", "--entity-default",
            "--add-config", "log.cleaner.backoff.ms=20000,log.cleaner.io.max.bytes.per.second=10485760,"
                            "log.retention.bytes=1099511627776")
    configs("--entity-type", "brokers", "--entity-default", "--delete-config", "log.cleaner.io.max.bytes.per.second")
    # client-metrics and group configs
    configs("--entity-type", "client-metrics", "--entity-name", "producer-metrics",
            "--add-config", "metrics=[org.apache.kafka.producer.,org.apache.kafka.consumer.coordinator],interval.ms=60000")
    configs("--entity-type", "groups", "--entity-name", "app-group", "--add-config", "consumer.session.timeout.ms=50000")
    # client quotas
    configs("--entity-type", "users", "--entity-name", "alice",
            "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    configs("--entity-type", "clients", "--entity-name", "app-1", "--add-config", "request_percentage=50.5")
    configs("--entity-type", "users", "--entity-name", "bob", "--entity-type", "clients", "--entity-name", "app-2",
            "--add-config", "producer_byte_rate=4096,controller_mutation_rate=10")
    configs("--entity-type", "users", "--entity-name", "svc@EXAMPLE.COM", "--add-config", "request_percentage=25")
    configs("--entity-type", "users", "--entity-default", "--add-config", "consumer_byte_rate=1000000")
    configs("--entity-type", "clients", "--entity-default", "--add-config", "producer_byte_rate=500000")
    configs("--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default",
            "--add-config", "request_percentage=200")
    configs("--entity-type", "users", "--entity-name", "carol", "--entity-type", "clients", "--entity-default",
            "--add-config", "consumer_byte_rate=3000")
    configs("--entity-type", "ips", "--entity-name", "10.1.2.3", "--add-config", "connection_creation_rate=10")
    configs("--entity-type", "ips", "--entity-default", "--add-config", "connection_creation_rate=100")
    configs("--entity-type", "users", "--entity-name", "alice", "--delete-config", "consumer_byte_rate")
    # SCRAM credentials (carol's removed again)
    # (one mechanism per request: "A user credential cannot be altered twice in the same request")
    configs("--entity-type", "users", "--entity-name", TOKEN_USER, "--add-config",
            f"SCRAM-SHA-256=[iterations=8192,password={TOKEN_PASSWORD}]")
    configs("--entity-type", "users", "--entity-name", TOKEN_USER, "--add-config",
            f"SCRAM-SHA-512=[password={TOKEN_PASSWORD}]")
    configs("--entity-type", "users", "--entity-name", "bob", "--add-config", "SCRAM-SHA-512=[iterations=10000,password=b0b]")
    configs("--entity-type", "users", "--entity-name", "carol", "--add-config", "SCRAM-SHA-256=[password=c4r0l]")
    configs("--entity-type", "users", "--entity-name", "dave", "--add-config", "SCRAM-SHA-256=[iterations=4096,password=d]")
    configs("--entity-type", "users", "--entity-name", "carol", "--delete-config", "SCRAM-SHA-256")
    # ACLs (one removed again)
    acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write", "--topic", "orders")
    acls("--add", "--allow-principal", "User:bob", "--allow-host", "10.0.0.5", "--operation", "Describe",
         "--topic", "events", "--resource-pattern-type", "prefixed")
    acls("--add", "--deny-principal", "User:mallory", "--operation", "All", "--topic", "*")
    acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "app-",
         "--resource-pattern-type", "prefixed")
    acls("--add", "--allow-principal", "User:bob", "--operation", "IdempotentWrite", "--operation", "Describe",
         "--cluster")
    acls("--add", "--allow-principal", "User:carol", "--operation", "Write", "--transactional-id", "tx-1")
    acls("--add", "--allow-principal", "User:alice", "--operation", "CreateTokens", "--user-principal", "User:bob")
    acls("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
    return steps


#: capture keys that move with every NoOpRecord: the quorum's high watermark before and after
#: the capture, and the broker's metadata offset when it answered describeFeatures
VOLATILE = ("quorum_before", "quorum_after", "features_epoch")


def _normalized(cap: dict) -> dict:
    """Lists whose order is the server's hash order, sorted."""
    for k in ("client_quotas", "acls", "scram", "delegation_tokens"):
        cap[k] = sorted(cap[k], key=lambda x: json.dumps(x, sort_keys=True))
    return cap


def _capture(version: str, node: AdminNode, out: Path) -> dict:
    """Capture until two consecutive captures agree (the broker has applied everything)."""
    prev = None
    for _ in range(6):
        client(version, "capture", node.bootstrap, node.sasl_bootstrap, TOKEN_USER, TOKEN_PASSWORD, out)
        cap = _normalized(json.loads(out.read_text()))
        stable = {k: v for k, v in cap.items() if k not in VOLATILE}
        if stable == prev:
            return cap
        diff = sorted(k for k in stable if prev is None or stable[k] != prev.get(k))
        prev = stable
        time.sleep(1.0)
    raise HarnessError(f"the admin API capture did not settle (changing: {diff})")


def _relative_paths(cap: dict, root: Path) -> dict:
    cap["log_dirs"] = {str(Path(p).resolve().relative_to(root.resolve())): v for p, v in cap["log_dirs"].items()}
    return cap


def _build(root: Path, version: str) -> None:
    node = AdminNode(root / "node", version, dynamic_quorum=jars.major(version) >= 4)
    timings = {}
    t0 = time.monotonic()
    client_classes(version)
    timings["javac"] = time.monotonic() - t0
    with node:
        timings["start"] = time.monotonic() - t0 - timings["javac"]
        spec = root / "tools.json"
        spec.write_text(json.dumps(tool_steps(version, node.bootstrap), indent=1))
        t = time.monotonic()
        proc = client(version, "tools", spec, timeout=300)
        (root / "tools.out").write_text(proc.stdout + proc.stderr)
        timings["tools"] = time.monotonic() - t
        moves = root / "moves.json"
        moves.write_text(json.dumps([{"topic": tp, "partition": p} for tp, p in MOVED]))
        client(version, "logdirs", node.bootstrap, moves)
        client(version, "token", node.sasl_bootstrap, TOKEN_USER, TOKEN_PASSWORD, TOKEN_RENEWER, root / "token.json")
        t = time.monotonic()
        cap = _capture(version, node, root / "admin.json")
        timings["capture"] = time.monotonic() - t
        (root / "admin.json").write_text(json.dumps(_relative_paths(cap, root), indent=1, sort_keys=True))
    timings["total"] = time.monotonic() - t0
    manifest = {
        "version": version,
        "cluster_id": node.cluster_id,
        "log_dirs": [str(d.relative_to(root)) for d in node.log_dirs],
        "metadata_dir": str(node.metadata_dir.relative_to(root)),
        "timings": timings,
    }
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1))


def _load(root: Path) -> MetadataOracle:
    m = json.loads((root / "manifest.json").read_text())
    return MetadataOracle(
        root=root,
        version=m["version"],
        cluster_id=m["cluster_id"],
        node_dir=root / "node",
        log_dirs=[root / d for d in m["log_dirs"]],
        metadata_dir=root / m["metadata_dir"],
        admin=json.loads((root / "admin.json").read_text()),
        token=json.loads((root / "token.json").read_text()),
    )


def build_metadata_oracle(workdir: Path | str | None = None, version: str = jars.KAFKA_4) -> MetadataOracle:
    """Build (or reuse from the cache) the metadata oracle; copy it to ``workdir`` if given."""
    root = build_cached(cache_root(version), version, _build)
    return _load(copy_of(root, workdir))
