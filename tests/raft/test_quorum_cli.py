"""``kraftkit quorum`` argument checks: every bad argument is a usage error (exit 2) with a message
naming it, never a traceback and never a node started on a half-understood configuration."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kraftkit.cli.main import main
from kraftkit.raft.driver import parse_voters

from ._cluster import CLUSTER_ID, free_ports


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's usage errors
        code = e.code
    return code, capsys.readouterr().err


def node_args(tmp_path, *extra: str, voters: str = "1@127.0.0.1:19091") -> list[str]:
    return ["quorum", "run", "--node-id", "1", f"--voters={voters}", "--log-dir", str(tmp_path / "log"),
            "--cluster-id", CLUSTER_ID, *extra]


@pytest.mark.parametrize(("voters", "reason"), [
    ("1@127.0.0.1:19091,1@127.0.0.1:19092", "voter id 1 is given twice"),
    ("1@127.0.0.1:99999", "port 99999 is outside 1..65535"),
    ("1@127.0.0.1:0", "port 0 is outside 1..65535"),
    ("-1@127.0.0.1:19091", "id -1 is outside"),
    ("99999999999@127.0.0.1:19091", "id 99999999999 is outside"),
    ("1@:19091", "no host"),
    ("1@127.0.0.1", "expected ID@HOST:PORT"),
    ("x@127.0.0.1:1", "expected ID@HOST:PORT"),
    (",", "no voters given"),
])
def test_bad_voters_are_usage_errors(tmp_path, capsys, voters, reason):
    code, err = run_cli(node_args(tmp_path, voters=voters), capsys)
    assert code == 2
    assert err.startswith("kraftkit quorum run: ") and reason in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "log").exists()  # nothing was started
    with pytest.raises(ValueError, match=reason.split(" (")[0]):
        parse_voters(voters)


@pytest.mark.parametrize(("extra", "option"), [
    (["--election-timeout-ms", "-5"], "--election-timeout-ms"),
    (["--election-timeout-ms", "0"], "--election-timeout-ms"),
    (["--fetch-timeout-ms", "-1"], "--fetch-timeout-ms"),
    (["--fetch-timeout-ms", "99999999999"], "--fetch-timeout-ms"),
    (["--snapshot-every", "-1"], "--snapshot-every"),
    (["--snapshot-every", "ten"], "--snapshot-every"),
    (["--socket-request-max-bytes", "0"], "--socket-request-max-bytes"),
    (["--socket-request-max-bytes", "4294967296"], "--socket-request-max-bytes"),
    (["--buffered-request-max-bytes", "-1"], "--buffered-request-max-bytes"),
    (["--max-connections-per-ip", "0"], "--max-connections-per-ip"),
    (["--max-connections", "-3"], "--max-connections"),
    (["--request-read-timeout-ms", "0"], "--request-read-timeout-ms"),
    (["--produce-pending-max-bytes", "0"], "--produce-pending-max-bytes"),
])
def test_run_range_checks_every_number(tmp_path, capsys, extra, option):
    code, err = run_cli(node_args(tmp_path, *extra), capsys)
    assert code == 2
    assert f"argument {option}: " in err and extra[1] in err, err
    assert "Traceback" not in err


def test_run_node_id_and_addresses_are_checked(tmp_path, capsys):
    code, err = run_cli(["quorum", "run", "--node-id", "-1", "--voters", "1@127.0.0.1:19091", "--log-dir",
                         str(tmp_path), "--cluster-id", CLUSTER_ID], capsys)
    assert code == 2 and "argument --node-id: must be from 0 to 2147483647, not -1" in err
    code, err = run_cli(node_args(tmp_path, "--observer", "--listen", "127.0.0.1:70000", voters="2@127.0.0.1:19091"),
                        capsys)
    assert code == 2 and "port 70000 is outside 0..65535" in err, err
    # a buffer for requests smaller than the largest request could never read one
    code, err = run_cli(node_args(tmp_path, "--socket-request-max-bytes", "2000", "--buffered-request-max-bytes", "1000"),
                        capsys)
    assert code == 2 and err.startswith("kraftkit quorum run: ") and "below the socket request max bytes" in err, err
    (tmp_path / "file").write_text("x")
    code, err = run_cli(["quorum", "run", "--node-id", "1", "--voters", "1@127.0.0.1:19091", "--log-dir",
                         str(tmp_path / "file"), "--cluster-id", CLUSTER_ID], capsys)
    assert code == 2 and "not a directory" in err, err


BOOTSTRAP = "--bootstrap/--bootstrap-server/--bootstrap-controller"  # (argparse names every alias)


@pytest.mark.parametrize(("argv", "option"), [
    (["append", "--bootstrap", "127.0.0.1:1", "--count", "-5"], "--count"),
    (["append", "--bootstrap", "127.0.0.1:1", "--count", "0"], "--count"),
    (["append", "--bootstrap", "127.0.0.1:1", "--batch", "0"], "--batch"),
    (["append", "--bootstrap", "127.0.0.1:1", "--timeout", "-1"], "--timeout"),
    (["append", "--bootstrap", "127.0.0.1:1", "--timeout", "nan"], "--timeout"),
    (["append", "--bootstrap", "127.0.0.1:99999"], BOOTSTRAP),
    (["append", "--bootstrap", "127.0.0.1:0"], BOOTSTRAP),
    (["append", "--bootstrap", "nohost"], BOOTSTRAP),
    (["describe", "--bootstrap", "127.0.0.1:65536"], BOOTSTRAP),
    (["describe", "--bootstrap", "127.0.0.1:1", "--timeout", "0"], "--timeout"),
    (["describe", "--bootstrap", "127.0.0.1:1", "--timeout", "inf"], "--timeout"),
])
def test_describe_and_append_range_check_their_arguments(capsys, argv, option):
    code, err = run_cli(["quorum", *argv], capsys)
    assert code == 2
    assert f"kraftkit quorum {argv[0]}: error: argument {option}: " in err, err
    assert "Traceback" not in err


def test_a_bad_argument_in_a_real_process_exits_2_without_a_traceback(tmp_path):
    p = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", *node_args(tmp_path, voters="1@127.0.0.1:99999")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "port 99999" in p.stderr and "Traceback" not in p.stderr


def test_append_and_describe_speak_kafkas_flag_and_an_unreachable_quorum_is_exit_2(capsys):
    """`--bootstrap-server` / `--bootstrap-controller` as Kafka's tools spell it; no node answering
    is exit 2 for append as for describe (the quorum refusing an append is 1). A refused
    connection is said at once, naming the address and the reason (not retried until the timeout)."""
    (port,) = free_ports(1)  # nothing listens there
    for cmd, flag in (("append", "--bootstrap-server"), ("describe", "--bootstrap-controller")):
        code, err = run_cli(["quorum", cmd, flag, f"127.0.0.1:{port}", "--timeout", "0.5"], capsys)
        assert code == 2, (cmd, err)
        assert err == f"kraftkit quorum {cmd}: 127.0.0.1:{port}: connection refused (is a node listening there?)\n"


def test_a_second_node_on_a_running_nodes_directory_is_refused_naming_it(tmp_path):
    # (a POSIX lock belongs to a process: the running node is another process, as in production)
    port, port2 = free_ports(2)
    log_dir = tmp_path / "log"
    first = subprocess.Popen(
        [sys.executable, "-m", "kraftkit.cli.main", "quorum", "run", "--node-id", "1",
         f"--voters=1@127.0.0.1:{port}", "--log-dir", str(log_dir), "--cluster-id", CLUSTER_ID],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert '"listening"' in first.stdout.readline()
        second = subprocess.run(
            [sys.executable, "-m", "kraftkit.cli.main", "quorum", "run", "--node-id", "1",
             f"--voters=1@127.0.0.1:{port2}", "--log-dir", str(log_dir), "--cluster-id", CLUSTER_ID],
            capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second
        assert second.stderr == (f"kraftkit quorum run: {log_dir}: .lock is locked by another process: a Kafka or "
                                 "kraftkit node runs on this directory\n")
    finally:
        first.terminate()
        code = first.wait(timeout=30)
        first.stdout.close()
    assert code == 0


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_lock_file_that_is_not_a_file_is_refused_naming_it(tmp_path, capsys, kind):
    import os

    log_dir = tmp_path / "log"
    log_dir.mkdir()
    lock = log_dir / ".lock"
    if kind == "symlink":
        lock.symlink_to(tmp_path / "elsewhere")
        reason = "cannot be opened to lock the directory: a symbolic link"
    else:
        os.mkfifo(lock)
        reason = "not a regular file (a FIFO)"
    (port,) = free_ports(1)
    code, err = run_cli(["quorum", "run", "--node-id", "1", f"--voters=1@127.0.0.1:{port}", "--log-dir",
                         str(log_dir), "--cluster-id", CLUSTER_ID], capsys)
    assert code == 2, err
    assert err == f"kraftkit quorum run: {lock}: {reason}\n"
    assert not (tmp_path / "elsewhere").exists()
