"""``kraftkit quorum add-voter`` / ``remove-voter`` against ``kraftkit controller run`` processes of a
dynamic quorum (KIP-853) formatted by ``kraftkit storage format --standalone`` /
``--no-initial-controllers`` from each node's server.properties: the words, the exit codes and the
``--json`` documents (checked against docs/json-schema.json)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._procs import KraftkitProcess
from tests.cli.test_json_schema import check_output

from ._cluster import CLUSTER_ID, free_ports

pytestmark = pytest.mark.timeout(300)
META = "__cluster_metadata-0"


def kraftkit(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftkit.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def directory_id(d: Path) -> str:
    return next(line.split("=", 1)[1] for line in (d / "meta.properties").read_text().splitlines()
                if line.startswith("directory.id="))


def describe(bootstrap: str) -> dict:
    r = kraftkit("quorum", "describe", "--json", "--bootstrap-controller", bootstrap, "--timeout", 20)
    assert r.returncode == 0, r.stderr
    assert check_output("quorum describe", r.stdout) == []
    return json.loads(r.stdout)


def wait(cond, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_add_and_remove_voters_with_kraftkits_own_commands(tmp_path):
    ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
    servers = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    dirs, confs, procs = {}, {}, {}
    for i, port in ports.items():
        dirs[i], confs[i] = tmp_path / f"c{i}", tmp_path / f"c{i}.properties"
        confs[i].write_text(f"process.roles=controller\nnode.id={i}\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
                            "controller.listener.names=CONTROLLER\n"
                            f"controller.quorum.bootstrap.servers={servers}\nlog.dirs={dirs[i]}\n")
        how = "--standalone" if i == 1 else "--no-initial-controllers"
        r = kraftkit("storage", "format", "-t", CLUSTER_ID, "-c", confs[i], "-r", "4.0", how)
        assert r.returncode == 0, r.stderr
    first = f"127.0.0.1:{ports[1]}"
    try:
        for i in ports:
            procs[i] = KraftkitProcess(["controller", "run"], ["--config", str(confs[i])], tmp_path / f"c{i}.log")
        wait(lambda: describe(first)["leaderId"] == 1, "node 1 to lead")
        wait(lambda: {o["replicaId"] for o in describe(first)["observers"]} >= {2, 3}, "2 and 3 to observe")

        # from the new controller's server.properties, as kafka-metadata-quorum.sh add-controller
        r = kraftkit("quorum", "add-voter", "--bootstrap-controller", first, "--config", confs[2])
        assert (r.returncode, r.stderr) == (0, ""), r.stderr
        assert r.stdout == (f"added voter 2 (directory id {directory_id(dirs[2])}) with endpoints "
                            f"CONTROLLER://127.0.0.1:{ports[2]}\n")
        # from options, with --json
        r = kraftkit("quorum", "add-voter", "--bootstrap-controller", first, "--voter-id", 3, "--directory-id",
                     directory_id(dirs[3]), "--listener", f"CONTROLLER://127.0.0.1:{ports[3]}", "--json")
        assert r.returncode == 0, r.stderr
        assert check_output("quorum add-voter|remove-voter", r.stdout) == []
        assert json.loads(r.stdout)["errorCode"] == 0
        d = describe(first)
        assert {v["replicaId"]: v["replicaDirectoryId"] for v in d["voters"]} == {
            i: directory_id(dirs[i]) for i in (1, 2, 3)}

        # refusals: exit 1 with Kafka's error name; the JSON document says the same
        r = kraftkit("quorum", "add-voter", "--bootstrap-controller", first, "--config", confs[3], "--json")
        assert r.returncode == 1 and "DUPLICATE_VOTER" in r.stderr
        assert check_output("quorum add-voter|remove-voter", r.stdout) == []
        assert json.loads(r.stdout)["error"] == "DUPLICATE_VOTER"
        r = kraftkit("quorum", "remove-voter", "--bootstrap-controller", first, "--voter-id", 2, "--directory-id",
                     directory_id(dirs[3]))
        assert r.returncode == 1 and "VOTER_NOT_FOUND" in r.stderr and r.stderr.count("\n") == 1
        # usage errors: exit 2, one line
        r = kraftkit("quorum", "add-voter", "--bootstrap-controller", first, "--voter-id", 4)
        assert (r.returncode, r.stderr) == (2, "kraftkit quorum add-voter: give --config FILE, or --directory-id, "
                                               "--listener\n")
        r = kraftkit("quorum", "remove-voter", "--bootstrap-controller", first, "--voter-id", 1,
                     "--directory-id", "not-a-uuid")
        assert r.returncode == 2 and "Kafka Uuid" in r.stderr

        # remove the leader (asked through another node: the command finds the leader)
        r = kraftkit("quorum", "remove-voter", "--bootstrap-controller", f"127.0.0.1:{ports[3]}", "--voter-id", 1,
                     "--directory-id", directory_id(dirs[1]))
        assert (r.returncode, r.stdout) == (0, f"removed voter 1 (directory id {directory_id(dirs[1])})\n"), r.stderr
        d = wait(lambda: (lambda d: d if d["leaderId"] in (2, 3) else None)(describe(f"127.0.0.1:{ports[2]}")),
                 "2 or 3 to lead")
        assert sorted(v["replicaId"] for v in d["voters"]) == [2, 3]
    finally:
        for p in procs.values():
            p.stop()


def test_a_dynamic_quorum_node_needs_its_listener_and_valid_servers(tmp_path):
    r = kraftkit("quorum", "run", "--node-id", 1, "--bootstrap-servers", "127.0.0.1:19091", "--log-dir", tmp_path,
                 "--cluster-id", CLUSTER_ID)
    assert (r.returncode, r.stderr) == (2, "kraftkit quorum run: a node of a dynamic quorum (--bootstrap-servers) "
                                           "needs --listen HOST:PORT\n")
    r = kraftkit("quorum", "run", "--node-id", 1, "--bootstrap-servers", "127.0.0.1", "--log-dir", tmp_path,
                 "--cluster-id", CLUSTER_ID, "--listen", "127.0.0.1:0")
    assert r.returncode == 2 and "bad address '127.0.0.1': expected HOST:PORT" in r.stderr
    r = kraftkit("quorum", "run", "--node-id", 1, "--bootstrap-servers", "127.0.0.1:1", "--voters", "1@127.0.0.1:1",
                 "--log-dir", tmp_path)
    assert r.returncode == 2 and "not allowed with argument" in r.stderr
