"""``kraftkit controller run --config server.properties``: the file read as Kafka reads it (the
java.util.Properties syntax, ConfigDef's trimming and lists, the metadata.log.dir / log.dirs /
log.dir precedence, the controller listener and its security protocol), options overriding it,
every refusal an exact message and exit 2; and a directory formatted by Kafka 4.4.0's own
``kafka-storage format`` from a server.properties, run by ``--config`` on that same file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kraftkit.cli.controller as controller_cli
from kraftkit.controller.config import DEFAULT_LOG_DIR, MAX_CONFIG_BYTES, read_controller_config
from kraftkit.features.storage.format import format_storage
from kraftkit.features.storage.properties import PropertiesSyntaxError, parse_properties, properties_entries
from tests._procs import KraftkitProcess
from tests.kafka.test_controller_kafka import parse_describe
from tests.raft._cluster import CLUSTER_ID, free_ports
from tests.raft.test_quorum_cli import run_cli

pytestmark = pytest.mark.timeout(180)

CONTROLLER = """process.roles=controller
node.id=1
controller.quorum.voters=1@127.0.0.1:19093
listeners=CONTROLLER://127.0.0.1:19093
controller.listener.names=CONTROLLER
"""


def write(tmp_path: Path, text: str, name: str = "server.properties") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="latin-1")
    return path


# ------------------------------------------------------------------ the properties syntax


def test_separators_comments_continuations_and_escapes(tmp_path):
    text = (
        "# a comment\r\n"
        "! another\r\n"
        "   process.roles   controller\r\n"  # whitespace separates, leading whitespace is skipped
        "node.id:7\r\n"
        "controller.quorum.voters = 7@127.0.0.1:19093,\\\r\n"
        "      8@127.0.0.1:19094\r\n"  # a continuation: its leading whitespace is skipped too
        "listeners=CONTROL\\u004cER://127.0.0.1:19093\n"  # \\u004c is L
        "controller.listener.names\t=\tCONTROLLER\n"
        "log.dirs=/data/k\\\\afka\\ 1,/data/two\n"  # \\\\ is one backslash; \\<space> a space
        "controller.quorum.election.timeout.ms=15\\\n"
        "   00\n"
        "x.note=\\\n"
        "#not a comment: it continues the line\n"
        "max.connections=  250  \n"  # ConfigDef trims
        "a\\=key\\:with\\ separators=x\r"  # a lone CR ends a line too
        "socket.request.max.bytes=1048576"  # no newline at the end
    )
    cfg = read_controller_config(write(tmp_path, text))
    assert cfg.node_id == 7
    assert cfg.voters == {7: ("127.0.0.1", 19093), 8: ("127.0.0.1", 19094)}
    assert cfg.listener == "CONTROLLER" and cfg.listen == ("127.0.0.1", 19093)
    assert cfg.metadata_log_dir == "/data/k\\afka 1" and cfg.metadata_log_dir_key == "log.dirs"
    assert cfg.max_connections == 250 and cfg.socket_request_max_bytes == 1048576
    assert cfg.election_timeout_ms == 1500
    assert cfg.ignored == ("a=key:with separators", "x.note")
    assert parse_properties(text)["x.note"] == "#not a comment: it continues the line"
    entries = properties_entries(text)
    assert [(line, key) for line, key, _ in entries][:4] == [
        (3, "process.roles"), (4, "node.id"), (5, "controller.quorum.voters"), (7, "listeners")]


def test_the_bytes_are_iso_8859_1_as_properties_load_reads_a_stream(tmp_path):
    path = tmp_path / "server.properties"
    path.write_bytes(CONTROLLER.encode() + b"log.dirs=/data/caf\xe9,/x\nmetadata.log.dir=/m/\\u00e9t\xe9\n")
    cfg = read_controller_config(path)
    assert cfg.metadata_log_dir == "/m/\u00e9t\u00e9" and cfg.metadata_log_dir_key == "metadata.log.dir"


@pytest.mark.parametrize(("lines", "expected", "key"), [
    ("metadata.log.dir=/meta\nlog.dirs=/a,/b\nlog.dir=/c\n", "/meta", "metadata.log.dir"),
    ("log.dirs= /a , /b \nlog.dir=/c\n", "/a", "log.dirs"),
    ("log.dir=/c,/d\n", "/c", "log.dir"),
    ("", DEFAULT_LOG_DIR, None),  # Kafka's default log.dir
])
def test_the_metadata_log_dir_precedence(tmp_path, lines, expected, key):
    cfg = read_controller_config(write(tmp_path, CONTROLLER + lines))
    assert (cfg.metadata_log_dir, cfg.metadata_log_dir_key) == (expected, key)


def test_defaults_synonyms_and_the_implicit_plaintext_mapping(tmp_path):
    cfg = read_controller_config(write(tmp_path, CONTROLLER.replace("node.id=1", "broker.id=1") + "x.y=1\n"))
    assert cfg.node_id == 1  # broker.id stands for node.id, as KafkaConfig.populateSynonyms does
    assert cfg.election_timeout_ms is None and cfg.broker_session_timeout_ms is None  # not in the file
    assert cfg.ignored == ("x.y",)
    # an explicit map, and an empty host (all interfaces)
    cfg = read_controller_config(write(tmp_path, CONTROLLER.replace("CONTROLLER://127.0.0.1", "CONTROLLER://")
                                       + "listener.security.protocol.map=CONTROLLER:PLAINTEXT\n"))
    assert cfg.listen == ("", 19093)
    two = CONTROLLER.replace("=CONTROLLER://127.0.0.1:19093", "=CONTROLLER://127.0.0.1:19093,C2://[::1]:19095")
    cfg = read_controller_config(write(tmp_path, two.replace("names=CONTROLLER", "names=CONTROLLER,C2")))
    assert cfg.listen == ("127.0.0.1", 19093)
    assert cfg.warnings == (f"{tmp_path / 'server.properties'}: controller.listener.names=CONTROLLER,C2: listening "
                            "on CONTROLLER (127.0.0.1:19093) only; kraftkit serves one listener",)


# ------------------------------------------------------------------ refusals

ROLES = CONTROLLER.split("\n", 1)[1]  # CONTROLLER without process.roles
SSL_MAP = "listener.security.protocol.map=CONTROLLER:SSL\n"


@pytest.mark.parametrize(("text", "message"), [
    (ROLES, "process.roles: not set: a KRaft controller's configuration has process.roles=controller"),
    ("process.roles=broker,controller\n" + ROLES,
     "process.roles=broker,controller: combined mode is not supported: kraftkit runs only the controller role "
     "(give it a configuration with process.roles=controller)"),
    ("process.roles=broker\n" + ROLES, "process.roles=broker: a broker's configuration: kraftkit runs the controller "
     "role only"),
    ("process.roles=controller,zookeeper\n" + ROLES, "process.roles=controller,zookeeper: unknown process role "
     "'zookeeper' (only 'broker' and 'controller' are roles)"),
    ("process.roles=controller, controller\n" + ROLES, "process.roles=controller, controller: a role is named twice"),
    (CONTROLLER + "node.id=one\n", "node.id=one: not a 32-bit integer"),
    (CONTROLLER + "node.id=2147483648\n", "node.id=2147483648: not a 32-bit integer"),
    (CONTROLLER + "node.id=-1\n", "node.id=-1: -1 is outside 0..2147483647"),
    (CONTROLLER + "broker.id=2\n", "node.id=1: broker.id=2 differs: node.id and broker.id must be the same"),
    (CONTROLLER.replace("controller.quorum.voters=1@127.0.0.1:19093\n", "")
     + "controller.quorum.bootstrap.servers=127.0.0.1:19093,127.0.0.1\n",
     "controller.quorum.bootstrap.servers=127.0.0.1:19093,127.0.0.1: bad server '127.0.0.1': expected HOST:PORT"),
    (CONTROLLER.replace("controller.quorum.voters=1@127.0.0.1:19093\n", "")
     + "controller.quorum.bootstrap.servers=[::1]:0\n",
     "controller.quorum.bootstrap.servers=[::1]:0: bad server '[::1]:0': expected HOST:PORT"),
    (CONTROLLER + "controller.quorum.voters=1@127.0.0.1:19093,\n",
     "controller.quorum.voters=1@127.0.0.1:19093,: bad voter '': expected ID@HOST:PORT"),
    (CONTROLLER + "controller.quorum.voters=1@127.0.0.1:0\n",
     "controller.quorum.voters=1@127.0.0.1:0: bad voter '1@127.0.0.1:0': port 0 is outside 1..65535"),
    (CONTROLLER + "controller.quorum.voters=1@a b:1\n", "controller.quorum.voters=1@a b:1: bad voter '1@a b:1': "
     "expected ID@HOST:PORT"),
    (CONTROLLER + "controller.quorum.voters=\n", "controller.quorum.voters=: no voters given"),
    (CONTROLLER + SSL_MAP, "listener.security.protocol.map=CONTROLLER:SSL: controller listener CONTROLLER is SSL: "
     "kraftkit serves PLAINTEXT listeners only"),
    (CONTROLLER.replace("CONTROLLER", "SASL_SSL"), "listeners=SASL_SSL://127.0.0.1:19093: controller listener "
     "SASL_SSL is SASL_SSL: kraftkit serves PLAINTEXT listeners only"),
    (CONTROLLER + "listener.security.protocol.map=CONTROLLER:TLS\n",
     "listener.security.protocol.map=CONTROLLER:TLS: unknown security protocol 'TLS' (one of PLAINTEXT, SSL, "
     "SASL_PLAINTEXT, SASL_SSL)"),
    (CONTROLLER + "listener.security.protocol.map=PLAINTEXT:PLAINTEXT\n",
     "listeners=CONTROLLER://127.0.0.1:19093: no security protocol for listener CONTROLLER in "
     "listener.security.protocol.map"),
    (CONTROLLER + "listeners=CONTROLLER://127.0.0.1:19093,PLAINTEXT://:9092\n",
     "listeners=CONTROLLER://127.0.0.1:19093,PLAINTEXT://:9092: listener PLAINTEXT is not a controller listener "
     "(controller.listener.names); a controller (process.roles=controller) has only controller listeners"),
    (CONTROLLER + "listeners=CONTROLLER://127.0.0.1:70000\n",
     "listeners=CONTROLLER://127.0.0.1:70000: listener CONTROLLER: port 70000 is outside 0..65535"),
    (CONTROLLER + "listeners=127.0.0.1:19093\n", "listeners=127.0.0.1:19093: bad listener '127.0.0.1:19093': "
     "expected NAME://HOST:PORT"),
    (CONTROLLER.replace("listeners=CONTROLLER://127.0.0.1:19093\n", ""),
     "controller.listener.names=CONTROLLER: listener CONTROLLER is not in listeners (Kafka's default "
     "listeners=PLAINTEXT://:9092)"),
    (CONTROLLER.replace("controller.listener.names=CONTROLLER\n", ""), "listeners=CONTROLLER://127.0.0.1:19093: "
     "controller.listener.names is not set: it names which of these listeners is the controller's"),
    (CONTROLLER + "log.dirs=${env:KAFKA_LOG_DIRS}\n", "log.dirs=${env:KAFKA_LOG_DIRS}: config providers (${...}) "
     "are not supported: write the value itself"),
    (CONTROLLER + "log.dirs=\n", "log.dirs=: at least one log directory must be defined via log.dirs or log.dir"),
    (CONTROLLER + "metadata.log.dir= \n", "metadata.log.dir=: an empty directory name"),
    (CONTROLLER + "metadata.log.dir=/a\\u0000b\n", "metadata.log.dir='/a\\x00b': a directory name with a NUL "
     "character"),
    (CONTROLLER + "controller.quorum.election.timeout.ms=0\n",
     "controller.quorum.election.timeout.ms=0: 0 is outside 1..2147483647"),
    (CONTROLLER + "controller.quorum.fetch.timeout.ms=2s\n", "controller.quorum.fetch.timeout.ms=2s: not a 32-bit "
     "integer"),
    (CONTROLLER + "socket.request.max.bytes=-1\n", "socket.request.max.bytes=-1: -1 is outside 1..2147483647"),
    (CONTROLLER + "max.connections.per.ip=0\n", "max.connections.per.ip=0: 0 is outside 1..2147483647"),
    (CONTROLLER + "max.connections=1e3\n", "max.connections=1e3: not a 32-bit integer"),
    (CONTROLLER + "broker.session.timeout.ms=0\n", "broker.session.timeout.ms=0: 0 is outside 1..2147483647"),
    (CONTROLLER + "a=1\nb=\\\n  \\u12g4\n", "line 8: malformed \\uxxxx encoding in 'b=\\\\u12g4'"),
    (CONTROLLER.replace("node.id=1", "node.id=4"), "controller.quorum.voters=1@127.0.0.1:19093: node 4 is not one "
     "of its voters"),
    (CONTROLLER.replace("node.id=1\n", ""), "node.id is not set: set it, or pass --node-id"),
    (CONTROLLER.replace("controller.quorum.voters=1@127.0.0.1:19093\n", ""),
     "neither controller.quorum.voters nor controller.quorum.bootstrap.servers is set: set one, or pass --voters or --bootstrap-servers"),
    ("".join(line + "\n" for line in CONTROLLER.splitlines() if not line.startswith(("listeners", "controller.l"))),
     "controller.listener.names is not set: name the controller listener, or pass --listen"),
])
def test_every_refusal_is_exit_2_naming_the_file_and_key_or_line(tmp_path, capsys, text, message):
    path = write(tmp_path, text)
    code, err = run_cli(["controller", "run", "--config", str(path)], capsys)
    assert (code, err) == (2, f"kraftkit controller run: {path}: {message}\n")


def test_special_large_and_missing_files_are_refused_unread(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.properties"
    big.write_bytes(b"#" * (MAX_CONFIG_BYTES + 1))
    for path, reason in [
        (fifo, "not a regular file (a FIFO)"),
        (Path("/dev/zero"), "not a regular file (a character device)"),
        (tmp_path, "is a directory, not a file"),
        (big, f"{MAX_CONFIG_BYTES + 1} bytes: too large for a server.properties file (at most {MAX_CONFIG_BYTES} "
              "bytes)"),
        (tmp_path / "missing", "No such file or directory"),
    ]:
        code, err = run_cli(["controller", "run", "--config", str(path)], capsys)
        assert (code, err) == (2, f"kraftkit controller run: {path}: {reason}\n")


def test_a_refusal_in_a_real_process_has_no_traceback(tmp_path):
    path = write(tmp_path, "process.roles=broker,controller\n" + ROLES)
    p = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "controller", "run", "--config", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stdout == "" and "Traceback" not in p.stderr
    assert p.stderr.startswith(f"kraftkit controller run: {path}: process.roles=broker,controller: combined mode")


def test_without_config_the_node_options_are_still_required(tmp_path, capsys):
    code, err = run_cli(["controller", "run", "--voters", "1@127.0.0.1:1"], capsys)
    assert (code, err) == (2, "kraftkit controller run: the following arguments are required (or --config FILE): "
                              "--node-id, --log-dir\n")
    # quorum run keeps argparse's own refusal
    code, err = run_cli(["quorum", "run", "--voters", "1@127.0.0.1:1"], capsys)
    assert code == 2 and "error: the following arguments are required: --node-id, --log-dir" in err


# ------------------------------------------------------------------ the file and the options together


@pytest.fixture
def started(monkeypatch):
    """Runs ``controller run`` in-process up to the node it would serve: that node, not started."""
    nodes = []

    async def serve(node, args, command, **start_line):
        nodes.append((node, start_line))
        return 0

    monkeypatch.setattr(controller_cli, "serve", serve)
    return nodes


def test_the_file_configures_the_node(tmp_path, capsys, started):
    log_dir = tmp_path / "meta"
    format_storage([log_dir], cluster_id=CLUSTER_ID, node_id=1, release_version="3.9-IV0", layout="bootstrap-file",
                   no_initial_controllers=True)
    path = write(tmp_path, CONTROLLER + f"log.dirs={tmp_path / 'data'}\nmetadata.log.dir={log_dir}\n"
                 "controller.quorum.election.timeout.ms=1500\ncontroller.quorum.fetch.timeout.ms=3000\n"
                 "socket.request.max.bytes=2000000\nmax.connections.per.ip=10\nmax.connections=20\n"
                 "broker.session.timeout.ms=12000\n")
    assert run_cli(["controller", "run", "--config", str(path)], capsys) == (0, "")
    (node, start_line), = started
    cfg = node.config
    assert (cfg.node_id, cfg.voters, cfg.log_dir, cfg.cluster_id) == (1, {1: ("127.0.0.1", 19093)}, log_dir, CLUSTER_ID)
    assert cfg.listen == ("127.0.0.1", 19093)
    assert (cfg.raft.election_timeout_ms, cfg.raft.fetch_timeout_ms) == (1500, 3000)
    assert (cfg.limits.socket_request_max_bytes, cfg.limits.max_connections_per_ip, cfg.limits.max_connections) == (
        2000000, 10, 20)
    assert node.session_timeout_ms == 12000
    assert start_line["metadata_version"] == 21  # 3.9-IV0's level


def test_a_dynamic_quorum_file_names_bootstrap_servers_and_no_voters(tmp_path, capsys, started):
    log_dir = tmp_path / "meta"
    format_storage([log_dir], cluster_id=CLUSTER_ID, node_id=1, release_version="4.0", no_initial_controllers=True)
    text = CONTROLLER.replace("controller.quorum.voters=1@127.0.0.1:19093\n", "")
    path = write(tmp_path, text + "controller.quorum.bootstrap.servers=127.0.0.1:19093, [::1]:19094\n"
                 f"metadata.log.dir={log_dir}\n")
    assert run_cli(["controller", "run", "--config", str(path)], capsys) == (0, "")
    (node, _start_line), = started
    cfg = node.config
    assert (cfg.voters, cfg.bootstrap_servers, cfg.listen) == ({}, [("127.0.0.1", 19093), ("::1", 19094)],
                                                              ("127.0.0.1", 19093))
    # the directory id of the metadata log is the node's replica key's other half
    want = next(line.split("=", 1)[1] for line in (log_dir / "meta.properties").read_text().splitlines()
                if line.startswith("directory.id="))
    from kraftkit.raft.quorum_state import uuid_to_kafka
    assert cfg.directory_id is not None and uuid_to_kafka(cfg.directory_id) == want


def test_options_override_the_file(tmp_path, capsys, started):
    log_dir = tmp_path / "other"
    format_storage([log_dir], cluster_id=CLUSTER_ID, node_id=2, release_version="3.9-IV0", layout="bootstrap-file",
                   no_initial_controllers=True)
    path = write(tmp_path, CONTROLLER + f"log.dirs={tmp_path / 'meta'}\ncontroller.quorum.election.timeout.ms=1500\n"
                 "max.connections=20\nbroker.session.timeout.ms=12000\n")
    argv = ["controller", "run", "--config", str(path), "--node-id", "2", "--voters",
            "1@127.0.0.1:19093,2@127.0.0.1:19094", "--log-dir", str(log_dir), "--listen", "127.0.0.1:19099",
            "--election-timeout-ms", "700", "--max-connections", "30", "--broker-session-timeout-ms", "5000"]
    assert run_cli(argv, capsys) == (0, "")
    (node, _), = started
    cfg = node.config
    assert (cfg.node_id, cfg.voters, cfg.log_dir) == (2, {1: ("127.0.0.1", 19093), 2: ("127.0.0.1", 19094)}, log_dir)
    assert cfg.listen == ("127.0.0.1", 19099)
    assert cfg.raft.election_timeout_ms == 700 and cfg.raft.fetch_timeout_ms == 2000  # the default: not in the file
    assert cfg.limits.max_connections == 30 and cfg.limits.max_connections_per_ip == 64
    assert node.session_timeout_ms == 5000


def test_without_config_the_defaults_are_kept(tmp_path, capsys, started):
    format_storage([tmp_path], cluster_id=CLUSTER_ID, node_id=1, release_version="3.9-IV0", layout="bootstrap-file",
                   no_initial_controllers=True)
    argv = ["controller", "run", "--node-id", "1", "--voters", "1@127.0.0.1:19093", "--log-dir", str(tmp_path)]
    assert run_cli(argv, capsys) == (0, "")
    (node, _), = started
    cfg = node.config
    assert (cfg.raft.election_timeout_ms, cfg.raft.fetch_timeout_ms) == (1000, 2000)
    assert (cfg.limits.socket_request_max_bytes, cfg.limits.max_connections_per_ip, cfg.limits.max_connections) == (
        100 * 1024 * 1024, 64, 1000)
    assert node.session_timeout_ms == 9000  # Kafka's broker.session.timeout.ms default


# ------------------------------------------------------------------ against Java and Kafka

PROPERTIES_DUMP = """
import java.io.FileInputStream;
import java.util.Properties;
import java.util.TreeSet;

public class PropertiesDump {
    static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) b.append(String.format("%04x", (int) c));
        return b.toString();
    }

    public static void main(String[] args) throws Exception {
        for (String file : args) {
            Properties p = new Properties();
            StringBuilder out = new StringBuilder();
            try (FileInputStream in = new FileInputStream(file)) {
                p.load(in);
                for (String k : new TreeSet<>(p.stringPropertyNames())) {
                    out.append(hex(k)).append(':').append(hex(p.getProperty(k))).append(',');
                }
            } catch (IllegalArgumentException e) {
                out.append("error");
            }
            System.out.println(out);
        }
    }
}
"""

JAVA_CASES = [
    CONTROLLER,
    "a=1\\\n\n b=2\\\n",
    "\\\n#c\nk=v\n\\\n\nx\\\n  \ny=1\\\n  #z\n a=\\u00\\\n  41\n",
    "k = = v\nk2 :v:\nk3\t\f v\\t\\n\\r\\f\\q\nk4\\\\=\\\\\\\nk5\n! c\n  # c\n",
    "a\\ b\\:c\\=d = e\r\nf=g\\\r\n   h\ri=j\\\\\\\n  k",
    "\u00e9\u00ff=\u00e0\n\\u00e9x=\\u20ac\n",
    "bad=\\u12g4\n",
    "tail=\\",
    "   \n\t\f\n=empty key\n:v\n k\\\n",
]


@pytest.mark.kafka
def test_the_properties_syntax_matches_java_properties_load(tmp_path):
    """The same texts through java.util.Properties.load(InputStream), the way Kafka's Utils.loadProps reads."""
    from tests.harness import jars

    java = jars.require_java()
    source = tmp_path / "PropertiesDump.java"
    source.write_text(PROPERTIES_DUMP)
    files = []
    for i, text in enumerate(JAVA_CASES):
        files.append(write(tmp_path, text, f"case{i}.properties"))
    proc = subprocess.run([java, str(source), *map(str, files)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == len(JAVA_CASES)

    def unhex(h: str) -> str:
        return "".join(chr(int(h[i:i + 4], 16)) for i in range(0, len(h), 4))

    for text, line in zip(JAVA_CASES, lines, strict=True):
        if line == "error":
            with pytest.raises(PropertiesSyntaxError, match="malformed"):
                parse_properties(text)
            continue
        java_props = dict((unhex(k), unhex(v)) for k, v in (e.split(":") for e in line.split(",") if e))
        assert parse_properties(text) == java_props, text


@pytest.mark.kafka
def test_a_kafka_formatted_directory_runs_from_the_same_server_properties(tmp_path):
    """A server.properties as a Kafka user writes it for one controller; Kafka 4.4.0's own
    ``kafka-storage format -c`` formats its log.dirs, ``kraftkit controller run --config`` runs on
    the same file, and Kafka's own ``kafka-features.sh describe`` shows the finalized
    metadata.version (3.9-IV0, feature level 21)."""
    from tests.harness import jars, tools
    from tests.harness.jars import HarnessError
    from tests.harness.node import random_cluster_id

    try:
        jars.require_java()
        jars.ensure_kafka(jars.KAFKA_NEWEST)
    except HarnessError as e:
        pytest.fail(f"kafka harness: {e}", pytrace=False)
    (port,) = free_ports(1)
    log_dir = tmp_path / "kraft-controller-logs"
    config = tmp_path / "controller.properties"
    config.write_text(
        "# a single KRaft controller\n"
        "process.roles=controller\n"
        "node.id=1\n"
        f"controller.quorum.voters=1@127.0.0.1:{port}\n"
        f"listeners=CONTROLLER://127.0.0.1:{port}\n"
        "controller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT\n"
        f"log.dirs={log_dir}\n"
        "num.partitions=1\n"  # a key kraftkit does not use
    )
    fmt = tools.run_tool(jars.KAFKA_NEWEST, "kafka.tools.StorageTool",
                         ["format", "-c", str(config), "-t", random_cluster_id(), "--release-version", "3.9-IV0"],
                         timeout=120, check=False)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    proc = KraftkitProcess(["controller", "run"], ["--config", str(config)], tmp_path / "controller.log")
    try:
        assert proc.info["port"] == port and proc.info["host"] == "127.0.0.1" and proc.info["node_id"] == 1
        assert proc.info["process"] == "controller" and proc.info["metadata_version"] == 21
        assert Path(proc.info["bootstrap"]).is_relative_to(log_dir)
        feature_command = tools.find_class(jars.KAFKA_NEWEST, "org.apache.kafka.tools.FeatureCommand")
        deadline = time.monotonic() + 60
        while True:
            got = tools.run_tool(jars.KAFKA_NEWEST, feature_command,
                                 ["--bootstrap-controller", f"127.0.0.1:{port}", "describe"], check=False, timeout=120)
            described = parse_describe(got.stdout) if got.returncode == 0 else {}
            if described.get("metadata.version", {}).get("FinalizedVersionLevel") == "3.9-IV0":
                break
            if time.monotonic() > deadline:
                pytest.fail(f"describe never showed metadata.version 3.9-IV0: exit {got.returncode}\n{got.stdout}\n"
                            f"{got.stderr}\n{proc.log_tail()}")
            time.sleep(0.5)
        ours = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "features", "describe",
                               "--bootstrap-controller", f"127.0.0.1:{port}", "--json"],
                              capture_output=True, text=True, timeout=90)
        assert ours.returncode == 0, ours.stderr
        assert json.loads(ours.stdout)["finalized"]["metadata.version"] == 21
    finally:
        assert proc.stop() == 0, proc.log_tail()
