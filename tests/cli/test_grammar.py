"""One grammar: Kafka's flag names where a Kafka tool does the same thing (``--files``,
``--cluster-metadata-decoder``, ``version-mapping``, ``feature-dependencies``, ``storage format
-c``), help text on every option, ``--unsafe`` only where it is taken, and ``quorum append``'s
summary."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from kraftkit.cli.main import COMMANDS, build_parser, main
from kraftkit.features.storage import MetaProperties
from tests.cli.test_json_schema import kraftkit, running_node

DATA = Path(__file__).resolve().parents[2] / "fixtures" / "kafka-4.4.0" / "data"
META = DATA / "__cluster_metadata-0"
CID = "MkU3OEVBNTcwNTJENDM2Qg"
#: Spark's commands have their own owner and tests
OURS = [c for c in COMMANDS if c != "spark"]


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _parsers(everyone: bool = False):
    """(command path, parser) of every command and subcommand (but Spark's, unless ``everyone``)."""
    top = build_parser(["--help"])

    def walk(parser, path):
        yield path, parser
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    yield from walk(sp, [*path, name])

    for path, parser in walk(top, []):
        if path and (everyone or path[0] in OURS):
            yield " ".join(path), parser


def test_every_option_and_argument_has_help_text():
    missing = [
        f"{path} {a.option_strings or a.dest}"
        for path, parser in _parsers(everyone=True)
        for a in parser._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and not a.help
    ]
    assert missing == []


def test_unsafe_is_named_only_by_the_commands_that_take_it():
    for path, parser in _parsers():
        takes = any("--unsafe" in a.option_strings for a in parser._actions)
        if not takes:
            assert "--unsafe" not in parser.format_help(), path
    assert [p for p, parser in _parsers() if any("--unsafe" in a.option_strings for a in parser._actions)] == [
        "features downgrade"]


# ------------------------------------------------------------------ dump-log's flags


def test_files_is_kafka_dump_logs_comma_separated_list(capsys):
    log, snap = META / "00000000000000000000.log", META / "00000000000000000080-0000000001.checkpoint"
    positional = kraftkit("dump-log", log, snap)
    assert positional.returncode == 0
    assert kraftkit("dump-log", "--files", f"{log},{snap}").stdout == positional.stdout
    assert kraftkit("dump-log", "--files", log, "--files", snap).stdout == positional.stdout
    none = kraftkit("dump-log")
    assert none.returncode == 2
    assert "kraftkit dump-log: error: give the files to read (FILE... or --files FILE[,FILE...])" in none.stderr


def test_cluster_metadata_decoder_decodes_as_metadata_dump():
    log = META / "00000000000000000000.log"
    for extra in ([], ["--json"]):
        want = kraftkit("metadata", "dump", *extra, log)
        assert want.returncode == 0 and "FEATURE_LEVEL_RECORD" in want.stdout
        got = kraftkit("dump-log", "--cluster-metadata-decoder", *extra, "--files", log)
        assert (got.returncode, got.stdout) == (0, want.stdout)
        # and metadata dump takes the flag (it always decodes) and --files
        same = kraftkit("metadata", "dump", "--cluster-metadata-decoder", *extra, "--files", log)
        assert (same.returncode, same.stdout) == (0, want.stdout)


# ------------------------------------------------------------------ version-mapping, feature-dependencies

#: What Kafka 4.4.0's kafka-features.sh and kafka-storage.sh print (FeatureCommand, StorageTool),
#: run on the cached 4.4.0 jars; test_version_tools_match_kafkas_own compares them live.
KAFKA_44 = {
    ("version-mapping",): "metadata.version=33 (4.4-IV2)\nkraft.version=1\ntransaction.version=2\ngroup.version=1\n"
    "eligible.leader.replicas.version=1\nshare.version=2\nstreams.version=1\n",
    ("version-mapping", "--release-version", "3.9"): "metadata.version=21 (3.9)\nkraft.version=1\n"
    "transaction.version=0\ngroup.version=0\neligible.leader.replicas.version=0\nshare.version=0\nstreams.version=0\n",
    ("version-mapping", "--release-version", "3.3"): "metadata.version=7 (3.3)\nkraft.version=0\n"
    "transaction.version=0\ngroup.version=0\neligible.leader.replicas.version=0\nshare.version=0\nstreams.version=0\n",
    ("feature-dependencies", "--feature", "eligible.leader.replicas.version=1", "--feature", "share.version=1"):
    "eligible.leader.replicas.version=1 requires:\n    metadata.version=23 (4.0-IV1)\nshare.version=1 has no dependencies.\n",
    ("feature-dependencies", "--feature", "metadata.version=21"): "metadata.version=21 (3.9-IV0) has no dependencies.\n",
}


@pytest.mark.parametrize("tool", ["features", "storage"])
@pytest.mark.parametrize("argv", list(KAFKA_44))
def test_version_mapping_and_feature_dependencies_print_what_kafkas_tools_print(capsys, tool, argv):
    code, out, err = run(capsys, tool, *argv)
    assert code == 0, err
    assert out == KAFKA_44[argv]


@pytest.mark.parametrize("argv,message", [
    (["version-mapping", "--release-version", "3.2"], "3.2-IV0 is below 3.3-IV3, the lowest"),
    (["version-mapping", "--release-version", "9.9"], "unknown metadata.version or release '9.9'"),
    (["feature-dependencies", "--feature", "foo=1"], "unknown feature 'foo'"),
    (["feature-dependencies", "--feature", "transaction.version=9"], "transaction.version has no level 9"),
    (["feature-dependencies", "--feature", "bad"], "expected NAME=LEVEL"),
])
def test_version_tools_refuse_bad_input_with_2(capsys, argv, message):
    for tool in ("features", "storage"):
        code, out, err = run(capsys, tool, *argv)
        assert code == 2 and out == "" and err.startswith(f"kraftkit {tool} {argv[0]}: ") and message in err, err


@pytest.mark.kafka
def test_version_tools_match_kafkas_own():
    from tests.harness import tools

    for cls, tool in (("org.apache.kafka.tools.FeatureCommand", "features"), ("kafka.tools.StorageTool", "storage")):
        for argv, want in KAFKA_44.items():
            theirs = tools.run_tool("4.4.0", cls, list(argv), timeout=120)
            assert theirs.stdout.rstrip("\n") == want.rstrip("\n"), (cls, argv)
            ours = kraftkit(tool, *argv)
            assert ours.stdout == want, (tool, argv)


# ------------------------------------------------------------------ storage format -c


def _config(tmp_path: Path, *lines: str) -> Path:
    cfg = tmp_path / "server.properties"
    cfg.write_text("\n".join(["process.roles=controller", "node.id=3", "controller.listener.names=CONTROLLER",
                              "listeners=CONTROLLER://127.0.0.1:19093", f"log.dirs={tmp_path / 'a'}, {tmp_path / 'b'}",
                              f"metadata.log.dir={tmp_path / 'm'}", *lines]) + "\n")
    return cfg


def test_storage_format_reads_server_properties_as_kafka_storage_does(tmp_path, capsys):
    cfg = _config(tmp_path, "controller.quorum.bootstrap.servers=127.0.0.1:19093")
    code, out, err = run(capsys, "storage", "format", "-t", CID, "-c", cfg, "--standalone")
    assert code == 0, err
    for d in ("a", "b", "m"):
        mp = MetaProperties.read(tmp_path / d / "meta.properties")
        assert (mp.cluster_id, mp.node_id) == (CID, 3)
    assert f"Formatting dynamic metadata voter directory {tmp_path / 'm'}" in out
    # the voter is this node at its controller listener's address
    code, out, _ = run(capsys, "metadata", "dump", tmp_path / "m" / "__cluster_metadata-0")
    assert code == 0 and '"host":"127.0.0.1","port":19093' in out and '"voterId":3' in out


@pytest.mark.parametrize("lines,extra,message", [
    ([], [], "either controller.quorum.bootstrap.servers must contain"),
    (["controller.quorum.voters=3@127.0.0.1:19093"], ["--standalone"],
     "You cannot specify controller.quorum.voters and format the node with --initial-controllers or --standalone"),
    (["controller.quorum.bootstrap.servers=127.0.0.1:19093"], [],
     "Because controller.quorum.voters is not set on this controller, you must specify one of the following"),
])
def test_storage_format_refuses_what_kafkas_storage_tool_refuses(tmp_path, capsys, lines, extra, message):
    cfg = _config(tmp_path, *lines)
    code, _, err = run(capsys, "storage", "format", "-t", CID, "-c", cfg, *extra)
    assert code == 2 and err.startswith(f"kraftkit storage format: {cfg}: ") and message in err, err
    assert not (tmp_path / "a").exists()


def test_storage_format_options_override_the_file_and_one_of_them_is_needed(tmp_path, capsys):
    cfg = _config(tmp_path, "controller.quorum.voters=3@127.0.0.1:19093")
    code, _, err = run(capsys, "storage", "format", "-t", CID, "-c", cfg, "--node-id", 5, "-d", tmp_path / "x",
                       "--metadata-log-dir", tmp_path / "x")
    assert code == 0, err
    assert MetaProperties.read(tmp_path / "x" / "meta.properties").node_id == 5 and not (tmp_path / "a").exists()
    code, _, err = run(capsys, "storage", "format", "-t", CID)
    assert code == 2 and "give --node-id and --directories, or -c/--config server.properties" in err


# ------------------------------------------------------------------ quorum append's output


def test_quorum_append_prints_a_summary_and_the_list_only_when_asked(tmp_path):
    with running_node("quorum", tmp_path / "node") as address:
        summary = kraftkit("quorum", "append", "--bootstrap", address, "--count", 25, "--batch", 10)
        assert summary.returncode == 0, summary.stderr
        (line,) = summary.stdout.splitlines()
        assert line.startswith("committed 25 NoOpRecord(s) in 3 request(s): offsets ")
        verbose = kraftkit("quorum", "append", "--bootstrap", address, "--count", 25, "--batch", 10, "--verbose")
        lines = verbose.stdout.splitlines()
        assert len(lines) == 4 and all(x.startswith("committed offsets ") for x in lines[:3])
        first, last = (int(x) for x in lines[-1].rsplit(" ", 1)[1].split(".."))
        assert last - first + 1 == 25  # one leader, no other writer: the three batches follow each other


def test_quorum_describe_fails_at_once_naming_the_address_on_a_refused_connection():
    from tests.raft._cluster import free_ports

    (port,) = free_ports(1)
    p = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "quorum", "describe", "--bootstrap",
                        f"127.0.0.1:{port}", "--timeout", "86400"], capture_output=True, text=True, timeout=60)
    # a day's --timeout: the answer came because the refusal is not retried
    assert p.returncode == 2
    assert p.stderr == f"kraftkit quorum describe: 127.0.0.1:{port}: connection refused (is a node listening there?)\n"


def test_storage_format_config_that_cannot_be_read_is_exit_2_naming_the_file(tmp_path, capsys):
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    bad = tmp_path / "bad.properties"
    bad.write_text("process.roles=controller\nnode.id=abc\ncontroller.quorum.voters=1@h:1\n")
    for cfg, reason in ((fifo, "not a regular file (a FIFO)"), (tmp_path / "none", "No such file or directory"),
                        (bad, "node.id=abc: not a node id (0 to 2147483647)")):
        code, _, err = run(capsys, "storage", "format", "-t", CID, "-c", cfg)
        assert code == 2 and err == f"kraftkit storage format: {cfg}: {reason}\n", err
