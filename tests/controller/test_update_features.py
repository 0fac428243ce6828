"""UpdateFeatures as kraftkit's controller decides it (FeatureControlManager over a metadata image)
and as the quorum answers it over the wire: Kafka's error codes and messages, validate_only,
all-or-nothing, level 0 disabling, registered nodes' ranges, NOT_CONTROLLER on followers, and the
FeatureLevelRecords committed as one batch before the answer."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import FEATURE_LEVEL, REGISTER_BROKER
from kraftkit.controller import FeatureControlManager
from kraftkit.features.registry import registry
from kraftkit.metadata.image import MetadataImage
from kraftkit.protocol import KafkaConnection
from kraftkit.protocol.messages import ApiKey
from tests.raft._cluster import wait_for

from ._nodes import active_of, committed_feature_records, make_controllers, running

pytestmark = pytest.mark.timeout(120)

# Kafka's error codes (org.apache.kafka.common.protocol.Errors)
NONE, NOT_CONTROLLER, INVALID_UPDATE_VERSION = 0, 41, 95
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
ALL_FAILED = "The update failed for all features since the following feature had an error: "


def image_with(levels: dict[str, int], brokers: dict[int, dict[str, tuple[int, int]]] | None = None) -> MetadataImage:
    img = MetadataImage()
    for name, level in levels.items():
        img.replay(FEATURE_LEVEL, 0, {"Name": name, "FeatureLevel": level})
    for bid, feats in (brokers or {}).items():
        img.replay(REGISTER_BROKER, 3, {
            "BrokerId": bid, "IncarnationId": uuid.uuid4(), "BrokerEpoch": 10 + bid,
            "Features": [{"Name": n, "MinSupportedVersion": lo, "MaxSupportedVersion": hi}
                         for n, (lo, hi) in feats.items()]})
    return img


def request(*updates: tuple[str, int, int], validate_only: bool = False) -> dict:
    return {"timeoutMs": 5000, "ValidateOnly": validate_only,
            "FeatureUpdates": [{"Feature": f, "MaxVersionLevel": lv, "UpgradeType": t} for f, lv, t in updates]}


def decoded(records: list[bytes]) -> list[tuple[str, int]]:
    out = []
    for v in records:
        key, _ver, data = decode_metadata_record(v)
        assert key == FEATURE_LEVEL
        out.append((data["Name"], data["FeatureLevel"]))
    return out


MV = registry().metadata_version("4.0-IV3").level  # a level with production features to raise on it
FCM = FeatureControlManager(1, [1, 2, 3])


def test_an_upgrade_becomes_one_feature_level_record_per_feature():
    img = image_with({"metadata.version": MV})
    got = FCM.update_features(img, request(("group.version", 1, UPGRADE), ("transaction.version", 2, UPGRADE)), 2)
    assert got.error_code == NONE and got.message is None
    assert decoded(got.records) == [("group.version", 1), ("transaction.version", 2)]


def test_level_0_disables_a_feature_with_a_downgrade():
    img = image_with({"metadata.version": MV, "group.version": 1})
    got = FCM.update_features(img, request(("group.version", 0, SAFE_DOWNGRADE)), 2)
    assert got.error_code == NONE and decoded(got.records) == [("group.version", 0)]
    # ... but not as an "upgrade"
    got = FCM.update_features(img, request(("group.version", 0, UPGRADE)), 2)
    assert got.error_code == INVALID_UPDATE_VERSION and not got.records
    assert got.message.startswith(ALL_FAILED + "Invalid update version 0 for feature group.version. Can't downgrade")


def test_an_unknown_feature_or_a_level_no_node_supports_is_refused_saying_why():
    img = image_with({"metadata.version": MV})
    got = FCM.update_features(img, request(("no.such.feature", 1, UPGRADE)), 2)
    assert got.error_code == INVALID_UPDATE_VERSION and not got.records
    # Kafka's reason first (QuorumFeatures.reasonNotLocallySupported), kraftkit's detail after
    assert "Invalid update version 1 for feature no.such.feature. Local controller 1 does not support this feature. " \
        "To fix: " in got.message
    assert "controller 1 (does not support it)" in got.message
    top = FCM.supported["group.version"][1] + 1
    got = FCM.update_features(img, request(("group.version", top, UPGRADE)), 2)
    assert got.error_code == INVALID_UPDATE_VERSION
    assert f"Invalid update version {top} for feature group.version. Local controller 1 only supports versions " \
        f"0-{top - 1} To fix: Upgrade the software of controller 1" in got.message
    assert "is not supported by controller 1 (supports 0..1)" in got.message


def test_one_bad_update_fails_the_whole_request():
    img = image_with({"metadata.version": MV})
    got = FCM.update_features(img, request(("group.version", 1, UPGRADE), ("no.such.feature", 1, UPGRADE)), 2)
    assert got.error_code == INVALID_UPDATE_VERSION and got.records == []
    assert "no.such.feature" in got.message


def test_a_registered_broker_that_lacks_the_level_blocks_it():
    img = image_with({"metadata.version": MV}, brokers={7: {"metadata.version": (7, MV), "group.version": (0, 0)}})
    got = FCM.update_features(img, request(("group.version", 1, UPGRADE)), 2)
    assert got.error_code == INVALID_UPDATE_VERSION and "broker 7 (supports 0..0)" in got.message
    assert "To fix: Upgrade the software of broker 7" in got.message


def test_metadata_version_downgrades_safe_unsafe_and_refused():
    reg = registry()
    cur = reg.metadata_version("3.9-IV0").level
    img = image_with({"metadata.version": cur})
    # the nearest lower level with no metadata change in between is a safe downgrade
    safe = max(m.level for m in reg.metadata_versions
               if m.level < cur and m.level >= 7 and not reg.metadata_changed(m.level, cur))
    got = FCM.update_features(img, request(("metadata.version", safe, SAFE_DOWNGRADE)), 2)
    assert got.error_code == NONE and decoded(got.records) == [("metadata.version", safe)]
    lossy = reg.metadata_version("3.3-IV3").level
    assert reg.metadata_changed(lossy, cur)
    got = FCM.update_features(img, request(("metadata.version", lossy, SAFE_DOWNGRADE)), 2)
    assert got.error_code == INVALID_UPDATE_VERSION
    assert got.message.startswith(ALL_FAILED + f"Invalid metadata.version {lossy}. Refusing to perform the requested "
                                  "downgrade because it might delete metadata information")
    # the unsafe one Kafka refuses is taken: the record, and the dry run of the rewrite every replica
    # makes once it is committed (a broker registered at 3.9 with log directories, which 3.3-IV3 lacks)
    img.replay(REGISTER_BROKER, 3, {
        "BrokerId": 4, "IncarnationId": uuid.uuid4(), "BrokerEpoch": 14, "LogDirs": [uuid.uuid4()],
        "Features": [{"Name": "metadata.version", "MinSupportedVersion": 7, "MaxSupportedVersion": cur}]})
    got = FCM.update_features(img, request(("metadata.version", lossy, UNSAFE_DOWNGRADE)), 2)
    assert got.error_code == NONE and decoded(got.records) == [("metadata.version", lossy)]
    assert got.report is not None and got.report.target.level == lossy
    assert [(x["record"], x["field"], x["count"]) for x in got.report.losses] == [("RegisterBrokerRecord", "LogDirs", 1)]
    # the safe downgrade above needs no rewrite, so it has no report
    assert FCM.update_features(img, request(("metadata.version", safe, SAFE_DOWNGRADE)), 2).report is None


def test_an_unknown_upgrade_type_and_kraft_version_are_refused():
    img = image_with({"metadata.version": MV})
    got = FCM.update_features(img, request(("group.version", 1, 9)), 2)
    assert got.error_code == INVALID_UPDATE_VERSION and "does not support the given upgrade type" in got.message
    got = FCM.update_features(img, request(("kraft.version", 1, UPGRADE)), 2)
    assert got.error_code == INVALID_UPDATE_VERSION and "kraft.version" in got.message


def test_version_0_requests_downgrade_with_allow_downgrade():
    img = image_with({"metadata.version": MV, "group.version": 1})
    body = {"timeoutMs": 5000, "FeatureUpdates": [{"Feature": "group.version", "MaxVersionLevel": 0,
                                                  "AllowDowngrade": True}]}
    got = FCM.update_features(img, body, 0)
    assert got.error_code == NONE and decoded(got.records) == [("group.version", 0)]


# ------------------------------------------------------------------------- over the wire

def test_the_active_controller_commits_updates_and_followers_answer_not_controller(tmp_path):
    async def main():
        nodes = make_controllers(tmp_path, release_version="4.4", layout="checkpoint", features={"group.version": 0})
        async with running(nodes):
            leader = await wait_for(lambda: active_of(nodes), what="an active controller")
            follower = next(n for n in nodes if n is not leader)
            before = committed_feature_records(leader)
            assert "group.version" not in [name for *_x, name, _l in before]

            def client_work():
                out = {}
                with KafkaConnection("127.0.0.1", follower.address[1]) as conn:
                    v = conn.version_for(ApiKey.UPDATE_FEATURES)
                    out["follower"] = conn.request(ApiKey.UPDATE_FEATURES, v, request(("group.version", 1, UPGRADE)))
                with KafkaConnection("127.0.0.1", leader.address[1]) as conn:
                    out["v"] = v = conn.version_for(ApiKey.UPDATE_FEATURES)
                    out["validate"] = conn.request(ApiKey.UPDATE_FEATURES, v,
                                                   request(("group.version", 1, UPGRADE), validate_only=True))
                    out["hw_after_validate"] = leader.replica().core.high_watermark
                    out["refused"] = conn.request(ApiKey.UPDATE_FEATURES, v, request(("group.version", 99, UPGRADE)))
                    out["upgrade"] = conn.request(ApiKey.UPDATE_FEATURES, v, request(("group.version", 1, UPGRADE)))
                    out["image"] = dict(leader.controller.image.finalized_features)  # as it was when answered
                    out["v1"] = conn.request(ApiKey.UPDATE_FEATURES, 1,
                                             request(("group.version", 0, SAFE_DOWNGRADE), validate_only=True))
                return out

            out = await asyncio.get_running_loop().run_in_executor(None, client_work)
            assert out["v"] == 2
            assert out["follower"]["ErrorCode"] == NOT_CONTROLLER
            assert f"raft leader of epoch {leader.replica().core.epoch} is node {leader.node_id}" in \
                out["follower"]["ErrorMessage"]
            assert out["validate"]["ErrorCode"] == NONE and "Results" not in out["validate"]  # v2 has none
            assert out["refused"]["ErrorCode"] == INVALID_UPDATE_VERSION
            assert "Invalid update version 99 for feature group.version." in out["refused"]["ErrorMessage"]
            assert "is not supported by controller" in out["refused"]["ErrorMessage"]
            assert out["upgrade"]["ErrorCode"] == NONE and out["upgrade"]["ErrorMessage"] is None
            assert out["image"]["group.version"] == 1  # committed and applied before the answer
            assert out["v1"]["ErrorCode"] == NONE
            assert [(r["Feature"], r["ErrorCode"]) for r in out["v1"]["Results"]] == [("group.version", NONE)]
            after = committed_feature_records(leader)
            new = after[len(before):]
            # neither the validate_only request nor the refused one wrote anything; the upgrade one record
            assert [(name, level) for *_x, name, level in new] == [("group.version", 1)]
            assert new[0][0] >= out["hw_after_validate"]
            await wait_for(lambda: all(n.controller.image.features.get("group.version") == 1 for n in nodes),
                           what="followers applying the upgrade")
    asyncio.run(asyncio.wait_for(main(), 90))


def test_an_update_that_cannot_commit_is_answered_request_timed_out(tmp_path):
    async def main():
        nodes = make_controllers(tmp_path, release_version="4.4", layout="checkpoint", features={"group.version": 0})
        async with running(nodes):
            leader = await wait_for(lambda: active_of(nodes), what="an active controller")
            # the controllers' own registrations committed first: no write of theirs is in flight
            await wait_for(lambda: len(leader.controller.image.controllers) == 3, what="controller registrations")
            for n in nodes:
                if n is not leader:
                    await n.stop(resign=False)  # no majority is left to commit anything

            def client_work():
                with KafkaConnection("127.0.0.1", leader.address[1]) as conn:
                    body = dict(request(("group.version", 1, UPGRADE)), timeoutMs=100)
                    first = conn.request(ApiKey.UPDATE_FEATURES, 2, body)
                    # the next one is validated only once the first one's fate is known: it waits, and times out
                    second = conn.request(ApiKey.UPDATE_FEATURES, 2, body)
                    return first, second

            got, then = await asyncio.get_running_loop().run_in_executor(None, client_work)
            assert got["ErrorCode"] == 7  # REQUEST_TIMED_OUT
            assert "were not committed within 100 ms" in got["ErrorMessage"]
            assert then["ErrorCode"] == 7
            assert then["ErrorMessage"].startswith("an earlier controller write was not committed within 100 ms")
            assert leader.controller.image.features.get("group.version", 0) == 0
    asyncio.run(asyncio.wait_for(main(), 90))
