"""Smoke test of the controller benchmark's load generator (benches/_controller_load.py) against
three in-process kraftkit controllers: every simulated broker registers, is unfenced, and its
heartbeats are answered without error; a silenced broker is found fenced in the committed log.
No timing is asserted: the benchmark measures, this checks that what it measures is real."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest

from kraftkit.controller import ControllerNode, read_bootstrap_metadata
from kraftkit.raft.core import RaftConfig
from kraftkit.raft.driver import NodeConfig
from tests.controller._nodes import CLUSTER_ID, format_dirs, running
from tests.raft._cluster import wait_for

pytestmark = pytest.mark.timeout(120)

BENCHES = Path(__file__).resolve().parents[2] / "benches"
BROKERS = 6
SESSION_MS = 1500


def load_generator():
    spec = importlib.util.spec_from_file_location("_controller_load", BENCHES / "_controller_load.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_controller_load", mod)
    spec.loader.exec_module(mod)
    return mod


def test_load_generator_registers_unfences_and_heartbeats(tmp_path: Path) -> None:
    asyncio.run(check_load_generator(tmp_path))


async def check_load_generator(tmp_path: Path) -> None:
    gen = load_generator()
    voters, dirs = format_dirs(tmp_path, release_version="4.3")
    # Kafka's raft timeouts: no leadership change under a busy machine turns heartbeats into NOT_CONTROLLER
    nodes = [ControllerNode(NodeConfig(i, voters, d, CLUSTER_ID, raft=RaftConfig(), snapshot_every_records=0),
                            read_bootstrap_metadata(d), session_timeout_ms=SESSION_MS)
             for i, d in zip(voters, dirs, strict=True)]
    async with running(nodes):
        res = await gen.run_load(
            [voters[i] for i in sorted(voters)], CLUSTER_ID, brokers=BROKERS, interval_s=0.2, window_s=1.0, fence=1,
            session_timeout_ms=SESSION_MS, log_dirs={i: d / "__cluster_metadata-0" for i, d in zip(voters, dirs, strict=True)},
            probe=False, log=lambda _m: None)
        active = next(n for n in nodes if n.controller.active)
        # (the generator sees the fencing appended to the log file; the image holds it once committed)
        silenced_ids = [f["broker"] for f in res["fence"] if f["fenced"]]
        await wait_for(lambda: all(active.controller.image.brokers[b]["Fenced"] for b in silenced_ids), 10,
                       "the fencing committed")
        image = active.controller.image
        brokers = dict(image.brokers)

    assert res["setup"]["active"] == active.node_id
    assert res["registered"] == BROKERS and not res["register"]["errors"]
    assert res["unfenced"] == BROKERS
    steady = res["steady"]
    assert steady["answered"] > 0 and steady["answered"] == steady["sent"]
    assert not steady["errors"] and not steady["lost"]
    # the committed image agrees: every simulated broker registered, all but the silenced one unfenced
    ids = {1000 + i for i in range(BROKERS)}
    assert set(brokers) == ids
    (silenced,) = res["fence"]
    assert silenced["fenced"] and silenced["broker"] in ids
    assert {b for b, r in brokers.items() if r["Fenced"]} == {silenced["broker"]}
