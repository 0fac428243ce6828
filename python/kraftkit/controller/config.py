"""Kafka's ``server.properties`` for a controller (``kraftkit controller run --config``).

The file is read as Kafka's ``Utils.loadProps`` reads it: ``java.util.Properties.load`` of the bytes as
ISO-8859-1 (comments, ``=``/``:``/whitespace separators, continuation lines, ``\\uxxxx`` escapes:
:func:`~kraftkit.features.storage.properties.properties_entries`), a regular file of at most 1 MiB. The
values are then understood as ``KafkaConfig`` understands them (``ConfigDef``: a value is trimmed; a
list is split at commas with the whitespace around them), for the keys kraftkit uses:

* ``process.roles`` (must be ``controller``: a broker's file, or combined ``broker,controller``, is
  refused), ``node.id`` (else its synonym ``broker.id``);
* ``controller.quorum.voters`` (a static quorum), else ``controller.quorum.bootstrap.servers`` (a
  dynamic KIP-853 quorum, whose voters are in the metadata log; ``HOST:PORT`` of controllers to ask
  for the leader);
* ``listeners``, ``controller.listener.names`` and ``listener.security.protocol.map``: the address of
  the first controller listener, which must be PLAINTEXT;
* ``metadata.log.dir``, else the first of ``log.dirs``, else of ``log.dir``, else Kafka's
  ``/tmp/kafka-logs``;
* ``controller.quorum.election.timeout.ms``, ``controller.quorum.fetch.timeout.ms``,
  ``socket.request.max.bytes``, ``max.connections.per.ip``, ``max.connections``,
  ``broker.session.timeout.ms``;
* ``num.partitions``, ``default.replication.factor`` and ``delete.topic.enable``, read by the topic
  managers (:class:`~kraftkit.controller.replication.ReplicationControlManager`, which log a value
  they cannot read and use Kafka's default);
* the ZooKeeper migration (KIP-866, :class:`ZkMigrationConfig`): ``zookeeper.metadata.migration.enable``
  (a boolean, as ``ConfigDef`` reads one), ``zookeeper.connect`` (``HOST:PORT[,HOST:PORT...][/chroot]``,
  required with the migration, as Kafka 3.9 requires it), ``zookeeper.session.timeout.ms``,
  ``zookeeper.connection.timeout.ms`` and ``zookeeper.metadata.migration.min.batch.size``; a
  ZooKeeper over TLS or with znode ACLs (``zookeeper.ssl.client.enable``, ``zookeeper.set.acl``) is
  refused, and so is the migration with a dynamic quorum.

Other keys are not used (:attr:`ControllerConfig.ignored`). A value kraftkit uses but cannot honour is
a :class:`ControllerConfigError` ``FILE: key=value: reason``; a file ``Properties.load`` refuses is
``FILE: line N: reason``. Config providers (``${env:...}``) are not supported.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping

from kraftkit._fs import error_text, read_small
from kraftkit.errors import KraftkitError
from kraftkit.features.storage.properties import PropertiesSyntaxError, _parse_int, properties_entries
from kraftkit.raft.driver import parse_voters

#: the largest server.properties read (Kafka's own is about 6 KiB)
MAX_CONFIG_BYTES = 1024 * 1024
INT32_MAX = 2**31 - 1
#: Kafka's defaults (SocketServerConfigs, ServerLogConfigs) where kraftkit needs them
DEFAULT_LISTENERS = "PLAINTEXT://:9092"
DEFAULT_LOG_DIR = "/tmp/kafka-logs"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)

#: keys read as integers: key -> (field, lowest value kraftkit honours)
INT_KEYS = {
    "controller.quorum.election.timeout.ms": ("election_timeout_ms", 1),
    "controller.quorum.fetch.timeout.ms": ("fetch_timeout_ms", 1),
    "socket.request.max.bytes": ("socket_request_max_bytes", 1),
    "max.connections.per.ip": ("max_connections_per_ip", 1),
    "max.connections": ("max_connections", 1),
    "broker.session.timeout.ms": ("broker_session_timeout_ms", 1),
}
#: the ZooKeeper migration's keys (Kafka 3.9's ZkConfigs and KRaftConfigs)
MIGRATION_ENABLE = "zookeeper.metadata.migration.enable"
ZK_CONNECT = "zookeeper.connect"
ZK_SESSION_TIMEOUT = "zookeeper.session.timeout.ms"
ZK_CONNECTION_TIMEOUT = "zookeeper.connection.timeout.ms"
MIGRATION_BATCH = "zookeeper.metadata.migration.min.batch.size"
ZK_KEYS = (
    MIGRATION_ENABLE,
    ZK_CONNECT,
    ZK_SESSION_TIMEOUT,
    ZK_CONNECTION_TIMEOUT,
    MIGRATION_BATCH,
    "zookeeper.ssl.client.enable",
    "zookeeper.set.acl",
)
#: Kafka's defaults: zookeeper.session.timeout.ms, zookeeper.metadata.migration.min.batch.size
DEFAULT_ZK_SESSION_TIMEOUT_MS = 18000
DEFAULT_MIGRATION_BATCH = 200
READ_KEYS = frozenset(
    {
        "process.roles",
        "node.id",
        "broker.id",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "listeners",
        "controller.listener.names",
        "listener.security.protocol.map",
        "metadata.log.dir",
        "log.dirs",
        "log.dir",
        "num.partitions",
        "default.replication.factor",
        "delete.topic.enable",
        *INT_KEYS,
        *ZK_KEYS,
    }
)
# Kafka's listener (SocketServerConfigs) and voter (Utils.getHost/getPort) syntax
_LISTENER = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)", re.S)
_VOTER = re.compile(r"(-?[0-9]+)@\[?([0-9a-zA-Z\-%._:]*)\]?:([0-9]+)", re.S)
_JAVA_SPACE = "".join(map(chr, range(33)))  # what String.trim strips
_COMMA = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")  # ConfigDef's list separator


@dataclasses.dataclass(frozen=True)
class ZkMigrationConfig:
    """The ZooKeeper side of a KIP-866 migration (``zookeeper.metadata.migration.enable=true``)."""

    #: ``zookeeper.connect`` as written (kazoo takes the same ``HOST:PORT,...[/chroot]`` text)
    connect: str
    #: the ensemble's servers and the chroot ("" for none)
    servers: tuple[tuple[str, int], ...]
    chroot: str
    session_timeout_ms: int = DEFAULT_ZK_SESSION_TIMEOUT_MS
    #: ``zookeeper.connection.timeout.ms`` (Kafka: the session timeout when unset)
    connection_timeout_ms: int = DEFAULT_ZK_SESSION_TIMEOUT_MS
    #: records per batch of the metadata copy (``zookeeper.metadata.migration.min.batch.size``)
    batch_size: int = DEFAULT_MIGRATION_BATCH


class ControllerConfigError(KraftkitError):
    """A server.properties kraftkit cannot run a controller from; the text names the file and the
    line, or the key and its value, and the reason."""


@dataclasses.dataclass(frozen=True)
class ControllerConfig:
    """What a server.properties says about a controller; ``None``: the file does not say it."""

    path: str
    node_id: int | None
    voters: dict[int, tuple[str, int]] | None
    #: the ``controller.quorum.voters`` text, for messages
    voters_text: str | None
    #: the first controller listener's name and address (``""``: all interfaces)
    listener: str | None
    listen: tuple[str, int] | None
    metadata_log_dir: str
    #: which key gave ``metadata_log_dir`` (``None``: Kafka's default)
    metadata_log_dir_key: str | None
    election_timeout_ms: int | None = None
    fetch_timeout_ms: int | None = None
    socket_request_max_bytes: int | None = None
    max_connections_per_ip: int | None = None
    max_connections: int | None = None
    broker_session_timeout_ms: int | None = None
    #: keys of the file kraftkit does not use, sorted
    ignored: tuple[str, ...] = ()
    #: what is in the file but will not be done, for a warning (a second controller listener)
    warnings: tuple[str, ...] = ()
    #: every entry of the file (a DescribeConfigs of the node shows them as STATIC_BROKER_CONFIG)
    properties: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: ``controller.quorum.bootstrap.servers`` of a dynamic quorum (None: a static one)
    bootstrap_servers: tuple[tuple[str, int], ...] | None = None
    #: the ZooKeeper migration, when ``zookeeper.metadata.migration.enable=true``
    zk_migration: ZkMigrationConfig | None = None


def read_controller_config(path: str | os.PathLike[str]) -> ControllerConfig:
    """Reads ``path`` (a regular file, at most :data:`MAX_CONFIG_BYTES`; a FIFO, a device or a larger
    file is refused unread). Raises :class:`ControllerConfigError`."""
    name = os.fspath(path)
    try:
        data = read_small(path, MAX_CONFIG_BYTES, what="a server.properties file")
    except OSError as e:
        raise ControllerConfigError(error_text(e)) from None
    try:
        entries = properties_entries(data.decode("latin-1"))  # Properties.load(InputStream)
    except PropertiesSyntaxError as e:
        raise ControllerConfigError(f"{name}: line {e.line}: {e}") from None
    return controller_config({k: v for _line, k, v in entries}, name)


def controller_config(props: Mapping[str, str], path: str) -> ControllerConfig:
    """The :class:`ControllerConfig` of a server.properties' entries (``path``: the file, for messages)."""
    r = _Reader(props, path)
    _check_roles(r)
    node_id = _node_id(r)
    voters, voters_text = _voters(r)
    servers = _bootstrap_servers(r) if voters is None else None
    listener, listen, warnings = _listener(r)
    log_dir, log_dir_key = _metadata_log_dir(r)
    ints = {field: r.int(key, lo) for key, (field, lo) in INT_KEYS.items()}
    migration = _zk_migration(r, dynamic=voters is None and servers is not None)
    return ControllerConfig(
        path,
        node_id,
        voters,
        voters_text,
        listener,
        listen,
        log_dir,
        log_dir_key,
        **ints,
        ignored=tuple(sorted(k for k in props if k not in READ_KEYS)),
        warnings=tuple(warnings),
        properties=dict(props),
        bootstrap_servers=servers,
        zk_migration=migration,
    )


def _shown(value: str) -> str:
    """A value as a message shows it: as written, unless long or not printable."""
    if len(value) <= 200 and value.isprintable():
        return value
    return repr(value[:200]) + ("..." if len(value) > 200 else "")


def _trim(value: str) -> str:
    return value.strip(_JAVA_SPACE)


class _Reader:
    def __init__(self, props: Mapping[str, str], path: str) -> None:
        self.props = props
        self.path = path

    def error(self, key: str, reason: str) -> ControllerConfigError:
        if key in self.props:
            return ControllerConfigError(f"{self.path}: {key}={_shown(self.props[key])}: {reason}")
        return ControllerConfigError(f"{self.path}: {key}: {reason}")

    def get(self, key: str) -> str | None:
        """The value of ``key``, trimmed as ``ConfigDef`` trims it; ``None`` if absent."""
        value = self.props.get(key)
        if value is None:
            return None
        if "${" in value:
            raise self.error(key, "config providers (${...}) are not supported: write the value itself")
        return _trim(value)

    def list(self, key: str, default: str | None = None) -> list[str] | None:
        """A ``ConfigDef`` LIST: empty when blank, else split at commas (empty items kept)."""
        value = self.get(key)
        if value is None:
            value = default
        if value is None:
            return None
        return _COMMA.split(value) if value else []

    def int(self, key: str, lo: int) -> int | None:
        value = self.get(key)
        if value is None:
            return None
        try:
            n = _parse_int(value)
        except ValueError:
            raise self.error(key, "not a 32-bit integer") from None
        if n < lo:
            raise self.error(key, f"{n} is outside {lo}..{INT32_MAX}")
        return n


def _check_roles(r: _Reader) -> None:
    roles = r.list("process.roles")
    if not roles:
        raise r.error(
            "process.roles",
            "not set: a KRaft controller's configuration has process.roles=controller",
        )
    for role in roles:
        if role not in ("broker", "controller"):
            raise r.error("process.roles", f"unknown process role {role!r} (only 'broker' and 'controller' are roles)")
    if len(set(roles)) != len(roles):
        raise r.error("process.roles", "a role is named twice")
    if "controller" not in roles:
        raise r.error("process.roles", "a broker's configuration: kraftkit runs the controller role only")
    if "broker" in roles:
        raise r.error(
            "process.roles",
            "combined mode is not supported: kraftkit runs only the controller role "
            "(give it a configuration with process.roles=controller)",
        )


def _node_id(r: _Reader) -> int | None:
    node_id = r.int("node.id", 0)
    broker_id = r.int("broker.id", 0)
    if node_id is not None and broker_id is not None and node_id != broker_id:
        raise r.error("node.id", f"broker.id={broker_id} differs: node.id and broker.id must be the same")
    return node_id if node_id is not None else broker_id


def _voters(r: _Reader) -> tuple[dict[int, tuple[str, int]] | None, str | None]:
    items = r.list("controller.quorum.voters")
    if not items:
        if r.list("controller.quorum.bootstrap.servers"):
            return None, None  # a dynamic quorum
        if items is not None:
            raise r.error("controller.quorum.voters", "no voters given")
        return None, None
    for item in items:
        if not _VOTER.fullmatch(item):
            raise r.error("controller.quorum.voters", f"bad voter {item!r}: expected ID@HOST:PORT")
    try:
        return parse_voters(",".join(items)), r.props["controller.quorum.voters"]
    except ValueError as e:
        raise r.error("controller.quorum.voters", str(e)) from None


def _bootstrap_servers(r: _Reader) -> tuple[tuple[str, int], ...] | None:
    """``controller.quorum.bootstrap.servers``: HOST:PORT entries (Kafka's ``QuorumConfig``)."""
    key = "controller.quorum.bootstrap.servers"
    out = []
    for item in r.list(key) or []:
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise r.error(key, f"bad server {item!r}: expected HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    return tuple(out) or None


def _protocol_map(r: _Reader, controller_names: list[str], listeners: list[str]) -> dict[str, str]:
    """``KafkaConfig.effectiveListenerSecurityProtocolMap``: listener name -> security protocol."""
    key = "listener.security.protocol.map"
    out: dict[str, str] = {}
    for item in r.list(key, DEFAULT_PROTOCOL_MAP) or []:
        name, sep, protocol = item.rpartition(":")
        if not sep:
            raise r.error(key, f"bad entry {item!r}: expected LISTENER:PROTOCOL")
        protocol = _trim(protocol).upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise r.error(key, f"unknown security protocol {protocol!r} (one of {', '.join(SECURITY_PROTOCOLS)})")
        out[_trim(name).upper()] = protocol
    if key not in r.props:
        # Kafka maps controller listeners to PLAINTEXT when the map is its default and no listener
        # is named after SSL or SASL
        secure = set(SECURITY_PROTOCOLS[1:])
        named = {n.upper() for n in controller_names} | {item.split(":", 1)[0].upper() for item in listeners}
        if not named & secure:
            out.update({n.upper(): "PLAINTEXT" for n in controller_names})
    return out


def _listener(r: _Reader) -> tuple[str | None, tuple[str, int] | None, list[str]]:
    names = r.list("controller.listener.names")
    if not names:
        if "listeners" in r.props:
            raise r.error(
                "listeners",
                "controller.listener.names is not set: it names which of these listeners is the controller's",
            )
        return None, None, []
    names = [n.upper() for n in names]  # listener names are upper-cased (ListenerName.normalised)
    items = r.list("listeners", DEFAULT_LISTENERS) or []
    protocols = _protocol_map(r, names, items)
    found: dict[str, tuple[str, int]] = {}
    for item in items:
        m = _LISTENER.fullmatch(item)
        if m is None:
            raise r.error("listeners", f"bad listener {item!r}: expected NAME://HOST:PORT")
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        if not 0 <= port <= 65535:
            raise r.error("listeners", f"listener {name}: port {port} is outside 0..65535")
        if name in found:
            raise r.error("listeners", f"listener {name} is given twice")
        if name not in protocols:
            raise r.error("listeners", f"no security protocol for listener {name} in listener.security.protocol.map")
        found[name] = (host, port)
    for name in names:
        if name not in found:
            where = "" if "listeners" in r.props else f" (Kafka's default listeners={DEFAULT_LISTENERS})"
            raise r.error("controller.listener.names", f"listener {name} is not in listeners{where}")
    for name in found:
        if name not in names:
            raise r.error(
                "listeners",
                f"listener {name} is not a controller listener (controller.listener.names); a controller "
                "(process.roles=controller) has only controller listeners",
            )
        if protocols[name] != "PLAINTEXT":
            mapped = "listener.security.protocol.map"
            raise r.error(
                mapped if mapped in r.props else "listeners",
                f"controller listener {name} is {protocols[name]}: kraftkit serves PLAINTEXT listeners only",
            )
    warnings = []
    if len(names) > 1:
        host, port = found[names[0]]
        warnings.append(
            f"{r.path}: controller.listener.names={r.props['controller.listener.names']}: listening on "
            f"{names[0]} ({host}:{port}) only; kraftkit serves one listener"
        )
    return names[0], found[names[0]], warnings


def _boolean(r: _Reader, key: str, default: bool) -> bool:
    """A ``ConfigDef`` BOOLEAN: ``true`` or ``false`` in any case, trimmed."""
    value = r.get(key)
    if value is None:
        return default
    if value.lower() not in ("true", "false"):
        raise r.error(key, "expected value to be either true or false")
    return value.lower() == "true"


#: ZooKeeper's PathUtils.validatePath, for a chroot
_BAD_PATH_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff]")


def _zk_connect(r: _Reader) -> tuple[str, tuple[tuple[str, int], ...], str]:
    """``zookeeper.connect``: ZooKeeper's ConnectStringParser (servers, then an optional chroot)."""
    text = r.get(ZK_CONNECT)
    if not text:
        raise r.error(
            ZK_CONNECT,
            f"not set: {MIGRATION_ENABLE}=true needs the ZooKeeper of the cluster to migrate "
            "(HOST:PORT[,HOST:PORT...][/chroot])",
        )
    hosts, slash, chroot = text.partition("/")
    chroot = slash + chroot
    if chroot:
        if chroot == "/":
            chroot = ""  # ZooKeeper: a chroot of "/" is none
        elif chroot.endswith("/"):
            raise r.error(ZK_CONNECT, f"chroot {chroot!r} ends with '/'")
        else:
            for part in chroot[1:].split("/"):
                if part in ("", ".", ".."):
                    raise r.error(ZK_CONNECT, f"chroot {chroot!r}: an empty, '.' or '..' path element")
            if _BAD_PATH_CHARS.search(chroot):
                raise r.error(ZK_CONNECT, f"chroot {chroot!r}: a character ZooKeeper refuses in a path")
    servers = []
    for item in hosts.split(","):
        item = _trim(item)
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = item, "2181"  # ZooKeeper's default port
        host = host.strip("[]")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise r.error(ZK_CONNECT, f"bad server {item!r}: expected HOST:PORT")
        servers.append((host, int(port)))
    return text, tuple(servers), chroot


def _zk_migration(r: _Reader, *, dynamic: bool) -> ZkMigrationConfig | None:
    """The ZooKeeper migration's settings, when ``zookeeper.metadata.migration.enable=true``."""
    if not _boolean(r, MIGRATION_ENABLE, False):
        return None
    if dynamic:
        raise r.error(
            MIGRATION_ENABLE,
            "a ZooKeeper migration needs a static quorum (controller.quorum.voters), as Kafka 3.9's does; "
            "controller.quorum.bootstrap.servers is set",
        )
    for key in ("zookeeper.ssl.client.enable", "zookeeper.set.acl"):
        if _boolean(r, key, False):
            raise r.error(key, "kraftkit's migration reaches ZooKeeper over plain TCP without znode ACLs only")
    connect, servers, chroot = _zk_connect(r)
    session = r.int(ZK_SESSION_TIMEOUT, 1)
    session = DEFAULT_ZK_SESSION_TIMEOUT_MS if session is None else session
    connection = r.int(ZK_CONNECTION_TIMEOUT, 1)
    batch = r.int(MIGRATION_BATCH, 1)
    return ZkMigrationConfig(
        connect,
        servers,
        chroot,
        session,
        session if connection is None else connection,
        DEFAULT_MIGRATION_BATCH if batch is None else batch,
    )


def _metadata_log_dir(r: _Reader) -> tuple[str, str | None]:
    """``metadata.log.dir``, else the first of ``log.dirs``, else of ``log.dir`` (KafkaConfig.metadataLogDir)."""
    log_dirs = r.list("log.dirs")
    key = "log.dirs"
    if log_dirs is None:
        log_dirs, key = r.list("log.dir"), "log.dir"
    if log_dirs is not None and not log_dirs:
        raise r.error(key, "at least one log directory must be defined via log.dirs or log.dir")
    meta = r.get("metadata.log.dir")
    if meta is not None:
        path, key = meta, "metadata.log.dir"
    elif log_dirs is not None:
        path = log_dirs[0]
    else:
        return DEFAULT_LOG_DIR, None
    if not path:
        raise r.error(key, "an empty directory name")
    if "\0" in path:
        raise r.error(key, "a directory name with a NUL character")
    return path, key


__all__ = [
    "MAX_CONFIG_BYTES",
    "ControllerConfig",
    "ControllerConfigError",
    "ZkMigrationConfig",
    "controller_config",
    "read_controller_config",
]
