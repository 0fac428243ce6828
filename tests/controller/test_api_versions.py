"""ApiVersions answered by a kraftkit controller: SupportedFeatures (this node's ranges, without
the ranges starting at 0 below v4, KAFKA-17492), FinalizedFeatures and FinalizedFeaturesEpoch (the
offset of the last committed FeatureLevelRecord) on leader and followers, UpdateFeatures listed,
Produce not (the metadata log changes only through the controller)."""

from __future__ import annotations

import asyncio

import pytest

from kraftkit.features.registry import registry
from kraftkit.protocol import KafkaConnection
from kraftkit.protocol.messages import ApiKey
from tests.raft._cluster import wait_for

from ._nodes import active_of, committed_feature_records, make_controllers, running

pytestmark = pytest.mark.timeout(120)


def expected_supported() -> dict[str, tuple[int, int]]:
    """Kafka 4.4.0's ranges as the feature table generated from its jars records them."""
    rel = registry().release("4.4.0")
    out = {"metadata.version": (rel.minimum_metadata_version, rel.latest_production)}
    for name, f in rel.features.items():
        if f.production and f.latest_production > 0:
            out[name] = (f.minimum_production, f.latest_production)
    return out


def test_api_versions_carries_supported_and_finalized_features_on_every_controller(tmp_path):
    async def main():
        nodes = make_controllers(tmp_path, release_version="4.4", layout="checkpoint")
        async with running(nodes):
            leader = await wait_for(lambda: active_of(nodes), what="an active controller")
            finalized = dict(leader.controller.image.finalized_features)
            recs = committed_feature_records(leader)
            last_feature_offset = max(off for _b, off, *_ in recs)
            hw = leader.replica().core.high_watermark
            await wait_for(lambda: all(n.replica().core.high_watermark >= hw and n.controller.image.metadata_version
                                       for n in nodes), what="followers caught up")

            def ask(port: int, version: int) -> dict:
                with KafkaConnection("127.0.0.1", port) as conn:
                    return conn.request(ApiKey.API_VERSIONS, version,
                                        {"ClientSoftwareName": "t", "ClientSoftwareVersion": "1"})

            loop = asyncio.get_running_loop()
            answers = {(n.node_id, v): await loop.run_in_executor(None, ask, n.address[1], v)
                       for n in nodes for v in (3, 4)}
            want = expected_supported()
            for (_node, v), a in answers.items():
                assert a["ErrorCode"] == 0 and a["ZkMigrationReady"] is False
                keys = {k["ApiKey"] for k in a["ApiKeys"]}
                assert ApiKey.UPDATE_FEATURES in keys and ApiKey.PRODUCE not in keys
                assert {ApiKey.VOTE, ApiKey.FETCH, ApiKey.DESCRIBE_QUORUM, ApiKey.DESCRIBE_CLUSTER} <= keys
                sup = {f["Name"]: (f["MinVersion"], f["MaxVersion"]) for f in a["SupportedFeatures"]}
                if v >= 4:
                    assert sup == want
                else:  # KAFKA-17492: a range starting at 0 is left out below v4
                    assert sup == {k: r for k, r in want.items() if r[0] != 0}
                fin = {f["Name"]: (f["MinVersionLevel"], f["MaxVersionLevel"]) for f in a["FinalizedFeatures"]}
                assert fin == {k: (lv, lv) for k, lv in finalized.items() if lv}
                assert a["FinalizedFeaturesEpoch"] == last_feature_offset
    asyncio.run(asyncio.wait_for(main(), 90))


def test_before_any_feature_is_committed_the_epoch_is_minus_one(tmp_path):
    async def main():
        # one node of a three-voter quorum cannot elect itself: nothing is ever committed
        nodes = make_controllers(tmp_path, release_version="4.4", layout="checkpoint")[:1]
        async with running(nodes):
            def ask() -> dict:
                with KafkaConnection("127.0.0.1", nodes[0].address[1]) as conn:
                    return conn.request(ApiKey.API_VERSIONS, 4, {"ClientSoftwareName": "t",
                                                                "ClientSoftwareVersion": "1"})

            a = await asyncio.get_running_loop().run_in_executor(None, ask)
            assert a["FinalizedFeaturesEpoch"] == -1 and a["FinalizedFeatures"] == []
            assert {f["Name"] for f in a["SupportedFeatures"]} == set(expected_supported())
    asyncio.run(asyncio.wait_for(main(), 60))
