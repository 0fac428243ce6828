"""``kraftkit features describe --bootstrap-controller`` against three in-process kraftkit
controllers: the finalized levels and epoch of the newest answer, each controller's supported
ranges as ApiVersions states them, the nodes that block each feature's next level; a stopped
controller shown with its error; exit 2 when no controller answers or on bad usage. Also the admin
client's shared feature cache."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from kraftkit.raft.admin import QuorumAdmin, survey_features
from tests.protocol.test_feature_cache import nodes  # noqa: F401 (a fixture: fake ApiVersions answers)
from tests.raft._cluster import free_ports, wait_for

from ._nodes import active_of, committed_feature_records, make_controllers, running
from .test_api_versions import expected_supported

pytestmark = pytest.mark.timeout(180)


def describe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "features", "describe", *args],
                          capture_output=True, text=True, timeout=90, env={**os.environ, "PYTHONWARNINGS": "error"})


def test_describe_live_shows_levels_epoch_ranges_and_blockers(tmp_path):
    async def main():
        nodes = make_controllers(tmp_path, release_version="4.3", layout="checkpoint")
        async with running(nodes):
            leader = await wait_for(lambda: active_of(nodes), what="an active controller")
            hw = leader.replica().core.high_watermark
            await wait_for(lambda: all(n.replica().core.high_watermark >= hw and n.controller.image.metadata_version
                                       for n in nodes), what="followers caught up")
            finalized = {k: v for k, v in leader.controller.image.finalized_features.items() if v}
            epoch = max(off for _b, off, *_ in committed_feature_records(leader))
            loop = asyncio.get_running_loop()
            # one bootstrap address is enough: DescribeCluster names the other controllers
            first = f"127.0.0.1:{nodes[1].address[1]}"
            js = await loop.run_in_executor(None, describe, "--bootstrap-controller", first, "--json")
            text = await loop.run_in_executor(None, describe, "--bootstrap-controller", first)
            # admin objects share one cache across their connections
            cache, surveyed = await loop.run_in_executor(None, lambda: survey_features([first], timeout=30))
            with QuorumAdmin(first, timeout=30, features=cache) as admin:
                await loop.run_in_executor(None, admin.describe)
                assert admin.features is cache
            await nodes[2].stop()
            down = await loop.run_in_executor(None, describe, "--bootstrap-controller", first, "--json")
            return finalized, epoch, js, text, cache, surveyed, down, [n.address[1] for n in nodes]

    finalized, epoch, js, text, cache, surveyed, down, ports = asyncio.run(asyncio.wait_for(main(), 150))
    assert js.returncode == 0, js.stderr
    got = json.loads(js.stdout)
    want_sup = expected_supported()
    assert got["finalized"] == dict(sorted(finalized.items()))
    assert got["finalizedFeaturesEpoch"] == epoch
    assert got["metadataVersionLevel"] == finalized["metadata.version"]
    assert [n["id"] for n in got["nodes"]] == [1, 2, 3]
    for n in got["nodes"]:
        assert n["error"] is None and n["finalizedFeaturesEpoch"] == epoch
        assert n["supported"] == {k: list(r) for k, r in sorted(want_sup.items())}
    # the next level of each feature is blocked by every node whose range excludes it (all three
    # run the same software, so either all or none)
    for name, nxt in got["nextLevels"].items():
        level = finalized.get(name, 0) + 1
        lo, hi = want_sup.get(name, (0, 0))
        assert nxt == {"level": level, "blockedBy": [] if lo <= level <= hi else [1, 2, 3]}, name
    assert set(got["nextLevels"]) == set(want_sup) | set(finalized)
    # metadata.version 4.3's next level is 4.4's, which kraftkit supports: nobody blocks it
    assert got["nextLevels"]["metadata.version"]["blockedBy"] == []

    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"127.0.0.1:{ports[1]}: finalized features epoch {epoch} (newest answer: 127.0.0.1:")
    mv = next(ln for ln in lines if ln.strip().startswith("metadata.version"))
    lo, hi = want_sup["metadata.version"]
    assert f"finalized {finalized['metadata.version']} (" in mv and f"supported 1: {lo}..{hi}, 2: {lo}..{hi}, 3: {lo}..{hi};" in mv
    assert f"level {finalized['metadata.version'] + 1} supported by every node" in mv
    gv = next(ln for ln in lines if ln.strip().startswith("group.version"))
    if want_sup["group.version"][1] <= finalized.get("group.version", 0):
        assert f"blocked by controller 1 (0..{want_sup['group.version'][1]}), controller 2" in gv
    assert sum(f"finalized features epoch {epoch}" in ln for ln in lines if "controller" in ln) == 3

    assert cache.snapshot()[:2] == (epoch, finalized)
    assert [(s.node_id, s.answer is not None) for s in surveyed] == [(1, True), (2, True), (3, True)]

    assert down.returncode == 0, down.stderr
    d = json.loads(down.stdout)
    assert [(n["id"], n["error"] is None) for n in d["nodes"]] == [(1, True), (2, True), (3, False)]
    assert "cannot connect" in d["nodes"][2]["error"] and d["nodes"][2]["supported"] is None
    assert d["finalized"] == got["finalized"]


def test_no_controller_answering_is_exit_2(tmp_path):
    (port,) = free_ports(1)  # nothing listens there
    r = describe("--bootstrap-controller", f"127.0.0.1:{port}", "--timeout", "5")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(f"kraftkit features describe: 127.0.0.1:{port}: no controller answered: ")
    assert "cannot connect" in r.stderr


@pytest.mark.parametrize("args,why", [
    (["--bootstrap-controller", "127.0.0.1"], "expected HOST:PORT"),
    (["--bootstrap-controller", "127.0.0.1:99999"], "outside 0..65535"),
    (["--bootstrap-controller", "127.0.0.1:1", "some/dir"], "not both"),
    (["--bootstrap-controller", "127.0.0.1:1", "--timeout", "0"], "--timeout"),
    ([], "give PATH"),
])
def test_bad_usage_is_exit_2(args, why):
    r = describe(*args)
    assert r.returncode == 2 and r.stdout == "" and why in r.stderr
    assert r.stderr.startswith("kraftkit features describe: ")


def test_a_survey_of_nodes_naming_no_controllers_keeps_the_newest_answer(nodes):
    """Nodes that answer ApiVersions but not DescribeCluster are surveyed by their bootstrap
    addresses; the lagging node asked first does not hold the cache back, nor does it roll it back
    when asked last."""
    lagging = nodes(31, {"metadata.version": 27}, {"metadata.version": (7, 27)})
    newer = nodes(57, {"metadata.version": 28}, {"metadata.version": (7, 28)})
    late = nodes(12, {"metadata.version": 26}, {"metadata.version": (7, 26)})
    addrs = [f"127.0.0.1:{n.port}" for n in (lagging, newer, late)]
    cache, surveyed = survey_features(addrs, timeout=30)
    assert [(s.node_id, s.address, s.error) for s in surveyed] == [(None, a, None) for a in addrs]
    assert [s.answer.epoch for s in surveyed if s.answer] == [31, 57, 12]
    epoch, finalized, newest = cache.snapshot()
    assert (epoch, finalized) == (57, {"metadata.version": 28}) and newest is not None
    assert newest.address == addrs[1]


def test_a_peers_odd_names_and_the_top_level_are_shown_safely(nodes):
    """A feature name with a line break is quoted (it cannot forge an output line), a level newer
    than kraftkit's tables is shown as unknown, and a feature at 32767 (the int16 top) has no next level."""
    odd = nodes(5, {"evil\nname": 32767, "metadata.version": 999}, {"evil\nname": (0, 32767), "metadata.version": (1, 2)})
    r = describe("--bootstrap-controller", f"127.0.0.1:{odd.port}")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 4 and lines[1].startswith("  'evil\\nname' ") and lines[1].endswith("; no level above")
    assert "finalized 999 (unknown: " in lines[2] and "level 1000 blocked by 127.0.0.1:" in lines[2]


def test_endpoints_a_peer_names_that_cannot_be_reached_are_errors_not_crashes(nodes, monkeypatch):
    """DescribeCluster answers are a peer's words: a port beyond 65535 or a host with a NUL byte is
    reported on that controller's entry; the survey goes on."""
    n = nodes(5, {"group.version": 1}, {"group.version": (0, 1)})
    bogus = {7: ("127.0.0.1", 70000), 8: ("bad\x00host", 1)}
    monkeypatch.setattr(QuorumAdmin, "controllers", lambda self, conn=None: dict(bogus))
    cache, surveyed = survey_features([f"127.0.0.1:{n.port}"], timeout=30)
    assert [(s.node_id, s.answer) for s in surveyed] == [(7, None), (8, None)]
    assert surveyed[0].error is not None and surveyed[0].error.startswith("not a reachable endpoint: ")
    assert "port 70000 is outside 0..65535" in surveyed[0].error
    assert surveyed[1].error is not None and surveyed[1].error.startswith("cannot connect: ")
    assert cache.snapshot()[:2] == (5, {"group.version": 1})  # the bootstrap's answer still counts
