"""The client side of KIP-584: the feature cache fed by ApiVersions answers only moves to a higher
FinalizedFeaturesEpoch (a lagging node's older answer never rolls it back), is shared by the
connections of one client to several nodes, and ignores answers without the feature fields."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

import pytest

from kraftkit.protocol import FeatureAnswer, FeatureCache, KafkaConnection
from kraftkit.protocol.messages import ApiKey, decode_request, encode_response

pytestmark = pytest.mark.timeout(60)


def answer(address: str, epoch: int, finalized: dict[str, int], supported: dict[str, tuple[int, int]] | None = None):
    return FeatureAnswer(address, supported or {}, finalized, epoch)


def test_the_cache_moves_only_to_a_higher_epoch():
    c = FeatureCache()
    assert c.snapshot() == (-1, {}, None)
    # nothing finalized yet (-1) never sets the levels, but the node's ranges are kept
    assert not c.update(answer("a:1", -1, {}, {"group.version": (0, 1)}))
    assert c.snapshot() == (-1, {}, None) and c.nodes["a:1"].supported == {"group.version": (0, 1)}
    new = answer("a:1", 40, {"metadata.version": 27, "group.version": 1})
    assert c.update(new)
    lagging = answer("b:2", 12, {"metadata.version": 26})
    assert not c.update(lagging)  # older: the finalized levels stay the newer answer's
    assert c.snapshot() == (40, {"metadata.version": 27, "group.version": 1}, new)
    assert c.nodes["b:2"] is lagging  # its own answer is still recorded as that node's
    assert not c.update(answer("b:2", 40, {"metadata.version": 1}))  # same epoch: not newer
    assert c.snapshot()[1] == {"metadata.version": 27, "group.version": 1}
    newer = answer("b:2", 41, {"metadata.version": 27})  # group.version disabled at 41
    assert c.update(newer)
    assert c.snapshot() == (41, {"metadata.version": 27}, newer)


def test_a_snapshot_is_a_copy():
    c = FeatureCache()
    c.update(answer("a:1", 3, {"group.version": 1}))
    _e, fin, _n = c.snapshot()
    fin["group.version"] = 9
    assert c.snapshot()[1] == {"group.version": 1}


class FakeNode:
    """A listener on 127.0.0.1 that answers every ApiVersions request with ``fields`` (the
    feature fields of v3+) at the version asked, or with UNSUPPORTED_VERSION and v0 ranges when
    ``max_version`` is below the version asked (as a Kafka node does)."""

    def __init__(self, epoch: int, finalized: dict[str, int], supported: dict[str, tuple[int, int]],
                 max_version: int = 4) -> None:
        self.fields = {
            "SupportedFeatures": [{"Name": n, "MinVersion": lo, "MaxVersion": hi} for n, (lo, hi) in supported.items()],
            "FinalizedFeaturesEpoch": epoch,
            "FinalizedFeatures": [{"Name": n, "MaxVersionLevel": lv, "MinVersionLevel": lv}
                                  for n, lv in finalized.items()],
        }
        self.max_version = max_version
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(30)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(30)
            while True:
                head = conn.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                data = conn.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
                api, version, cid, _client, _body = decode_request(data)
                assert api == ApiKey.API_VERSIONS
                keys = [{"ApiKey": int(ApiKey.API_VERSIONS), "MinVersion": 0, "MaxVersion": self.max_version}]
                body: dict[str, Any] = {"ErrorCode": 0, "ApiKeys": keys, "ThrottleTimeMs": 0}
                if version > self.max_version:
                    body, version = {"ErrorCode": 35, "ApiKeys": keys}, 0  # UNSUPPORTED_VERSION, in v0
                elif version >= 3:
                    body |= self.fields
                out = encode_response(int(ApiKey.API_VERSIONS), version, cid, body)
                conn.sendall(struct.pack(">i", len(out)) + out)

    def close(self) -> None:
        self.sock.close()
        self.thread.join(10)


@pytest.fixture
def nodes():
    made: list[FakeNode] = []

    def make(*a, **kw) -> FakeNode:
        made.append(FakeNode(*a, **kw))
        return made[-1]

    yield make
    for n in made:
        n.close()


def test_connections_of_one_client_share_the_cache_and_a_lagging_node_does_not_roll_it_back(nodes):
    sup = {"metadata.version": (7, 28), "group.version": (0, 1)}
    leader = nodes(57, {"metadata.version": 28, "group.version": 1}, sup)
    lagging = nodes(31, {"metadata.version": 27}, {"metadata.version": (7, 27)})
    cache = FeatureCache()
    with KafkaConnection("127.0.0.1", leader.port, features=cache) as a:
        a.api_versions()
        assert a.feature_answer == FeatureAnswer(f"127.0.0.1:{leader.port}", sup,
                                                 {"metadata.version": 28, "group.version": 1}, 57)
    with KafkaConnection("127.0.0.1", lagging.port, features=cache) as b:
        b.api_versions()
        assert b.features is cache and b.feature_answer is not None and b.feature_answer.epoch == 31
    epoch, finalized, newest = cache.snapshot()
    assert (epoch, finalized) == (57, {"metadata.version": 28, "group.version": 1})
    assert newest is not None and newest.address == f"127.0.0.1:{leader.port}"
    # both nodes' own ranges are kept, each as its node answered
    assert cache.nodes[f"127.0.0.1:{lagging.port}"].supported == {"metadata.version": (7, 27)}
    assert cache.nodes[f"127.0.0.1:{leader.port}"].supported == sup


def test_the_lagging_answer_first_then_the_newer_one_moves_the_cache(nodes):
    lagging = nodes(31, {"metadata.version": 27}, {"metadata.version": (7, 27)})
    leader = nodes(57, {"metadata.version": 28}, {"metadata.version": (7, 28)})
    cache = FeatureCache()
    for n in (lagging, leader):
        with KafkaConnection("127.0.0.1", n.port, features=cache) as c:
            c.api_versions()
    assert cache.snapshot()[:2] == (57, {"metadata.version": 28})


def test_an_answer_below_v3_has_no_feature_fields_and_leaves_the_cache_alone(nodes):
    old = nodes(99, {"metadata.version": 1}, {"metadata.version": (1, 1)}, max_version=2)
    cache = FeatureCache()
    with KafkaConnection("127.0.0.1", old.port, features=cache) as c:
        c.api_versions()  # asked at our newest, answered UNSUPPORTED_VERSION in v0, retried at v2
        assert c.versions == {int(ApiKey.API_VERSIONS): (0, 2)}
        assert c.feature_answer is None
    assert cache.snapshot() == (-1, {}, None) and cache.nodes == {}


def test_each_connection_has_its_own_cache_unless_given_one(nodes):
    n = nodes(5, {"group.version": 1}, {"group.version": (0, 1)})
    with KafkaConnection("127.0.0.1", n.port) as c:
        c.api_versions()
        assert c.features.snapshot()[:2] == (5, {"group.version": 1})
    with KafkaConnection("127.0.0.1", n.port) as d:
        assert d.features is not c.features and d.features.snapshot()[0] == -1
