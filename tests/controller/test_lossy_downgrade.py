"""The lossy metadata.version downgrade Kafka refuses, done live by a kraftkit controller quorum:
UpdateFeatures with UNSAFE_DOWNGRADE across a change of the metadata format commits the
FeatureLevelRecord, and every replica rewrites its image at the new level as a snapshot at that
offset, loads it and starts its log there. The answer says what was lost; the nodes agree byte for
byte; what is written afterwards is at the lower level; a restart comes back to the same state."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import REGISTER_BROKER
from kraftkit.features.registry import registry
from kraftkit.log import list_segments
from kraftkit.protocol.messages import ApiKey, Errors
from tests.raft._cluster import wait_for

from ._nodes import active_of, call_port, controller, format_dirs, running
from .test_registration import registration

pytestmark = pytest.mark.timeout(120)

FROM, TO = "3.9", "3.5-IV2"  # RegisterControllerRecord (3.7-IV0) and broker log directories (3.7-IV2) lost


def downgrade(level: int, upgrade_type: int, validate_only: bool = False) -> dict:
    return {"timeoutMs": 15000, "ValidateOnly": validate_only,
            "FeatureUpdates": [{"Feature": "metadata.version", "MaxVersionLevel": level, "UpgradeType": upgrade_type}]}


def test_an_unsafe_downgrade_is_rewritten_live_on_every_replica(tmp_path):
    reg = registry()
    target = reg.metadata_version(TO).level
    voters, dirs = format_dirs(tmp_path, release_version=FROM)
    nodes = [controller(voters, d, i) for i, d in zip(voters, dirs, strict=True)]

    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def rpc(api: int, body: dict) -> dict:
            return await loop.run_in_executor(None, call_port, leader.address[1], api, body)

        async with running(nodes):
            leader = await wait_for(lambda: active_of(nodes), what="an active controller")
            await wait_for(lambda: len(leader.controller.image.controllers) == 3, what="controller registrations")
            assert (await rpc(ApiKey.BROKER_REGISTRATION, registration(100)))["ErrorCode"] == Errors.NONE
            await wait_for(lambda: all(100 in n.controller.image.brokers for n in nodes), what="the registration")
            before = leader.controller.image.metadata_version

            # Kafka's refusal stands for a safe downgrade across a metadata change
            safe = await rpc(ApiKey.UPDATE_FEATURES, downgrade(target, 2))
            assert safe["ErrorCode"] == Errors.INVALID_UPDATE_VERSION
            assert "Refusing to perform the requested downgrade because it might delete metadata" in safe["ErrorMessage"]
            # validate_only: what it would lose, nothing written
            dry = await rpc(ApiKey.UPDATE_FEATURES, downgrade(target, 3, validate_only=True))
            assert dry["ErrorCode"] == Errors.NONE, dry
            assert dry["ErrorMessage"].startswith(f"kraftkit would rewrite the metadata at metadata.version {TO}")
            assert "RegisterControllerRecord (whole record): 3 record(s)" in dry["ErrorMessage"]
            assert "RegisterBrokerRecord.LogDirs: 1 record(s)" in dry["ErrorMessage"]
            assert all(n.controller.image.metadata_version == before for n in nodes)

            got = await rpc(ApiKey.UPDATE_FEATURES, downgrade(target, 3))
            assert got["ErrorCode"] == Errors.NONE, got
            assert got["ErrorMessage"] == dry["ErrorMessage"].replace("would rewrite", "rewrote"), got
            # answered once the leader loaded its rewritten image; the followers follow
            assert leader.controller.image.metadata_version == target
            await wait_for(lambda: all(n.replica().log.snapshot() is not None for n in nodes), what="the rewrites")
            sids = {n.node_id: n.replica().log.snapshot() for n in nodes}
            assert len(set(sids.values())) == 1, sids
            (sid,) = set(sids.values())
            snaps = set()
            for n in nodes:
                img, rep = n.controller.image, n.replica()
                assert img.metadata_version == target and img.controllers == {}
                assert img.brokers[100]["LogDirs"] == []
                # the log starts at the snapshot: no segment holds a record the lower level cannot read
                assert rep.log.start_offset == sid.end_offset
                assert list_segments(rep.log.dir)[0] == sid.end_offset
                snaps.add(rep.log.snapshot_path().read_bytes())
            assert len(snaps) == 1  # every replica rewrote the same image the same way
            # the FeatureLevelRecord is the snapshot's last offset (its batch's end)
            fl = [b for b in leader.committed_batches(0) if b.base_offset >= sid.end_offset]
            assert all(b.is_control or b.base_offset > sid.end_offset - 1 for b in fl)

            # what is written afterwards is at the lower level's record versions
            assert (await rpc(ApiKey.BROKER_REGISTRATION, registration(101)))["ErrorCode"] == Errors.NONE
            versions = [decode_metadata_record(r.value)[1] for b in leader.committed_batches(sid.end_offset)
                        if not b.is_control for r in b.records()
                        if decode_metadata_record(r.value)[0] == REGISTER_BROKER]
            assert versions == [reg.metadata_version(TO).register_broker_record_version]
            await wait_for(lambda: all(101 in n.controller.image.brokers for n in nodes), what="broker 101")

    asyncio.run(main())

    # a restart of the whole quorum comes back to the rewritten state (snapshot + the log after it)
    again = [controller(voters, d, i) for i, d in zip(voters, dirs, strict=True)]

    async def restarted() -> None:
        async with running(again):
            await wait_for(lambda: active_of(again), what="an active controller after the restart")
            await wait_for(lambda: all(101 in n.controller.image.brokers for n in again), what="the replay")
            for n in again:
                img = n.controller.image
                assert img.metadata_version == target and img.controllers == {}
                assert sorted(img.brokers) == [100, 101]

    asyncio.run(restarted())


def features_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "features", *args], capture_output=True,
                          text=True, timeout=90, env={**os.environ, "PYTHONWARNINGS": "error"})


def test_kraftkit_features_downgrade_live_prints_what_the_quorum_lost(tmp_path):
    """``kraftkit features downgrade --bootstrap-controller`` (at a follower: it finds the active
    controller): refused without --unsafe (exit 1, Kafka's reason), --dry-run says what would be
    lost and changes nothing, --unsafe does it and prints the loss; then nothing is left to change
    (exit 2), and no controller at all is exit 2."""
    voters, dirs = format_dirs(tmp_path, release_version=FROM)
    nodes = [controller(voters, d, i) for i, d in zip(voters, dirs, strict=True)]
    target = registry().metadata_version(TO)

    async def main() -> list[subprocess.CompletedProcess[str]]:
        loop = asyncio.get_running_loop()
        async with running(nodes):
            leader = await wait_for(lambda: active_of(nodes), what="an active controller")
            await wait_for(lambda: len(leader.controller.image.controllers) == 3, what="controller registrations")
            follower = next(n for n in nodes if n is not leader)
            at = f"127.0.0.1:{follower.address[1]}"
            runs = []
            for extra in (["--metadata", TO], ["--metadata", TO, "--unsafe", "--dry-run"],
                          ["--metadata", TO, "--unsafe", "--json"], ["--metadata", TO, "--unsafe"]):
                runs.append(await loop.run_in_executor(
                    None, lambda extra=extra: features_cli("downgrade", "--bootstrap-controller", at, *extra)))
                if len(runs) == 2:
                    assert all(n.controller.image.metadata_version != target.level for n in nodes)
            return runs

    safe, dry, done, again = asyncio.run(main())
    assert safe.returncode == 1 and "Refusing to perform the requested downgrade" in safe.stderr, safe
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0] == f"metadata.version: would change 21 (3.9-IV0) -> {target.level} ({TO})"
    assert "RegisterControllerRecord (whole record): 3 record(s)" in dry.stdout
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["ok"] and got["changes"] == [
        {"feature": "metadata.version", "from": 21, "to": target.level, "upgradeType": "UNSAFE_DOWNGRADE"}]
    assert got["message"].startswith(f"kraftkit rewrote the metadata at metadata.version {TO}")
    assert again.returncode == 2 and "nothing to change" in again.stderr, again
    port = nodes[0].address[1]  # stopped now
    gone = features_cli("upgrade", "--bootstrap-controller", f"127.0.0.1:{port}", "--metadata", "3.9", "--timeout", "2")
    assert gone.returncode == 2 and f"127.0.0.1:{port}" in gone.stderr, gone
