"""``--auto-finalize`` (beyond Kafka): once every controller registered, the active controller
raises metadata.version to the highest production level all registered nodes support, then each
feature to its default level at that metadata.version; a node that supports less holds the cluster
back; without the option nothing moves."""

from __future__ import annotations

import asyncio

import pytest

from kraftkit.controller import local_supported_features
from kraftkit.features.registry import registry
from tests.raft._cluster import wait_for

from ._nodes import active_of, committed_feature_records, controller, format_dirs, running

pytestmark = pytest.mark.timeout(120)

MV = "metadata.version"


def expected_levels(mv: int) -> dict[str, int]:
    """metadata.version ``mv`` and each feature's default level there (Kafka's tables) that the
    nodes support (not the testing-only ones), kraft.version left out."""
    out = {MV: mv}
    supported = local_supported_features()
    for name, feature in registry().features.items():
        level = feature.default_level(mv)
        if level and name != "kraft.version" and name in supported and level <= supported[name][1]:
            out[name] = level
    return out


def finalized(node) -> dict[str, int]:
    return {k: v for k, v in node.controller.image.finalized_features.items() if v and k != "kraft.version"}


def controllers(tmp_path, *, auto_finalize: bool):
    voters, dirs = format_dirs(tmp_path, release_version="4.0")
    return [controller(voters, d, i, auto_finalize=auto_finalize) for i, d in zip(voters, dirs, strict=True)]


def test_auto_finalize_raises_metadata_version_then_the_features_to_what_every_node_supports(tmp_path):
    async def main():
        nodes = controllers(tmp_path, auto_finalize=True)
        top = registry().latest_production.level
        want = expected_levels(top)
        async with running(nodes):
            await wait_for(lambda: active_of(nodes) and all(finalized(n) == want for n in nodes), timeout=60,
                           what=f"every node finalized at {want}")
            recs = committed_feature_records(nodes[0])
            boot_base = recs[0][0]
            later = [(base, name, level) for base, _o, name, level in recs if base != boot_base]
            # metadata.version first, alone; then the features in one batch
            assert [(n, lv) for _b, n, lv in later if _b == later[0][0]] == [(MV, top)]
            assert {n: lv for b, n, lv in later if b != later[0][0]} == {k: v for k, v in want.items() if k != MV
                                                                           and v != finalized_at_boot(recs, k)}
    asyncio.run(main())


def finalized_at_boot(recs, name: str) -> int:
    boot_base = recs[0][0]
    return next((lv for b, _o, n, lv in recs if b == boot_base and n == name), 0)


def test_a_controller_that_supports_less_holds_auto_finalize_back(tmp_path):
    async def main():
        nodes = controllers(tmp_path, auto_finalize=True)
        cap = registry().metadata_version("4.1-IV1").level
        lo, _hi = local_supported_features()[MV]
        nodes[2].controller.features.supported = {**nodes[2].controller.features.supported, MV: (lo, cap)}
        want = expected_levels(cap)
        async with running(nodes):
            await wait_for(lambda: active_of(nodes) and all(finalized(n) == want for n in nodes), timeout=60,
                           what=f"every node finalized at {want}")
            # and it stays there: nothing else is attempted
            leader = active_of(nodes)
            assert leader.controller.features.auto_finalize_request(leader.controller.image) is None
    asyncio.run(main())


def test_without_auto_finalize_nothing_moves(tmp_path):
    async def main():
        nodes = controllers(tmp_path, auto_finalize=False)
        async with running(nodes):
            leader = await wait_for(lambda: active_of(nodes), what="an active controller")
            await wait_for(lambda: len(leader.controller.image.controllers) == 3, what="controller registrations")
            # what auto-finalize would do, not done: only the bootstrap is committed
            assert leader.controller.features.auto_finalize_request(leader.controller.image) is not None
            assert len({base for base, *_ in committed_feature_records(leader)}) == 1
    asyncio.run(main())
