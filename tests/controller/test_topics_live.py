"""CreateTopics and Envelope on three in-process controllers over loopback: a topic's records are
committed as one batch before the answer, validateOnly writes nothing, a broker's forwarded request
(Envelope) is answered inside ResponseData, a follower answers NOT_CONTROLLER (lifted to the
envelope, as Kafka's RequestChannel does), bad envelopes get Kafka's envelope-level errors, and
the topics are in every node's image after a restart."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import PARTITION, REMOVE_TOPIC, TOPIC
from kraftkit.protocol.messages import ApiKey, Errors, decode_response, encode_request
from tests.raft._cluster import wait_for

from ._nodes import active_of, controller, make_controllers, running
from .test_registration import call, heartbeat, quiet_leader, registration

pytestmark = pytest.mark.timeout(120)

LOOPBACK = bytes([127, 0, 0, 1])


def create(*topics: tuple[str, int, int], validate_only: bool = False) -> dict:
    return {"Topics": [{"Name": n, "NumPartitions": p, "ReplicationFactor": rf, "Assignments": [], "Configs": []}
                       for n, p, rf in topics], "timeoutMs": 10000, "validateOnly": validate_only}


def envelope(data: bytes, address: bytes = LOOPBACK) -> dict:
    return {"RequestData": data, "RequestPrincipal": b"\x00\x01principal", "ClientHostAddress": address}


def topic_batches(node) -> list[list[tuple[int, dict]]]:
    """The committed batches holding topic records: (api key, fields) of each of their records."""
    out = []
    for batch in node.committed_batches(0):
        if batch.is_control:
            continue
        recs = [decode_metadata_record(r.value) for r in batch.records()]
        if any(k in (TOPIC, PARTITION) for k, _v, _d in recs):
            out.append([(k, d) for k, _v, d in recs])
    return out


async def two_unfenced_brokers(leader) -> None:
    for bid in (100, 101):
        got = await call(leader, ApiKey.BROKER_REGISTRATION, registration(bid))
        assert got["ErrorCode"] == Errors.NONE
        hb = await call(leader, ApiKey.BROKER_HEARTBEAT, heartbeat(bid, got["BrokerEpoch"], got["BrokerEpoch"]))
        assert (hb["ErrorCode"], hb["IsFenced"]) == (Errors.NONE, False)


def test_create_topics_direct_and_forwarded_then_replayed_after_a_restart(tmp_path):
    async def main():
        nodes = make_controllers(tmp_path, release_version="4.3")
        async with running(nodes):
            leader = await quiet_leader(nodes)
            follower = next(n for n in nodes if n is not leader)
            await two_unfenced_brokers(leader)

            # direct: one batch of a TopicRecord and three PartitionRecords, committed before the answer
            got = await call(leader, ApiKey.CREATE_TOPICS, create(("t", 3, 2)))
            (res,) = got["Topics"]
            assert (res["Name"], res["ErrorCode"], res["NumPartitions"], res["ReplicationFactor"]) == \
                ("t", Errors.NONE, 3, 2)
            (batch,) = topic_batches(leader)
            assert [k for k, _d in batch] == [TOPIC, PARTITION, PARTITION, PARTITION]
            assert batch[0][1] == {"Name": "t", "TopicId": res["TopicId"]}
            regs = leader.controller.cluster.brokers
            for i, (_k, p) in enumerate(batch[1:]):
                assert p["PartitionId"] == i and sorted(p["Replicas"]) == [100, 101] and p["Isr"] == p["Replicas"]
                assert p["Leader"] == p["Replicas"][0]
                assert p["Directories"] == [regs[b]["LogDirs"][0] for b in p["Replicas"]]
            assert sorted(leader.controller.image.topic("t").partitions) == [0, 1, 2]
            # the leaders are spread over the two brokers
            assert {p["Leader"] for _k, p in batch[1:]} == {100, 101}

            # validateOnly: the same checks, nothing written
            end = leader.replica().log.end_offset
            got = await call(leader, ApiKey.CREATE_TOPICS, create(("v", 2, 1), ("t", 1, 1), validate_only=True))
            assert [(r["Name"], r["ErrorCode"]) for r in got["Topics"]] == \
                [("v", Errors.NONE), ("t", Errors.TOPIC_ALREADY_EXISTS)]
            assert leader.replica().log.end_offset == end and leader.controller.image.topic("v") is None

            # forwarded inside an Envelope: the answer, with its response header, in ResponseData
            inner = encode_request(ApiKey.CREATE_TOPICS, 7, 4242, "broker-100", create(("u", 1, 1), ("u", 1, 1),
                                                                                       ("w", 2, 1)))
            env = await call(leader, ApiKey.ENVELOPE, envelope(inner))
            assert env["ErrorCode"] == Errors.NONE
            corr, body = decode_response(ApiKey.CREATE_TOPICS, 7, env["ResponseData"])
            assert corr == 4242
            assert [(r["Name"], r["ErrorCode"], r["ErrorMessage"]) for r in body["Topics"]] == \
                [("w", Errors.NONE, None), ("u", Errors.INVALID_REQUEST, "Duplicate topic name.")]
            assert leader.controller.image.topic("w") is not None
            # at an older version too (no topic id, no partition count in the answer)
            inner = encode_request(ApiKey.CREATE_TOPICS, 4, 7, "broker-100", create(("x", 1, 1)))
            env = await call(leader, ApiKey.ENVELOPE, envelope(inner))
            assert decode_response(ApiKey.CREATE_TOPICS, 4, env["ResponseData"]) == \
                (7, {"ThrottleTimeMs": 0, "Topics": [{"Name": "x", "ErrorCode": Errors.NONE, "ErrorMessage": None}]})

            # a follower: NOT_CONTROLLER for every topic directly, at the envelope level when forwarded
            got = await call(follower, ApiKey.CREATE_TOPICS, create(("f", 1, 1), ("g", 1, 1)))
            assert [(r["Name"], r["ErrorCode"]) for r in got["Topics"]] == \
                [("f", Errors.NOT_CONTROLLER), ("g", Errors.NOT_CONTROLLER)]
            inner = encode_request(ApiKey.CREATE_TOPICS, 7, 1, "broker-100", create(("f", 1, 1)))
            env = await call(follower, ApiKey.ENVELOPE, envelope(inner))
            assert env == {"ResponseData": None, "ErrorCode": Errors.NOT_CONTROLLER}

            # bad envelopes: Kafka's envelope-level errors, and the node goes on
            fetch = encode_request(ApiKey.FETCH, 4, 1, "b", {"ReplicaId": -1, "MaxWaitMs": 0, "MinBytes": 0,
                                                             "MaxBytes": 0, "IsolationLevel": 0, "Topics": []})
            nested = encode_request(ApiKey.ENVELOPE, 0, 1, "b", envelope(inner))
            good = encode_request(ApiKey.CREATE_TOPICS, 7, 1, "b", create(("h", 1, 1)))
            for data, address, code in [
                (b"\x00\x13", LOOPBACK, Errors.UNSUPPORTED_VERSION),  # no request header
                (good[:-3], LOOPBACK, Errors.UNSUPPORTED_VERSION),  # a truncated body
                (good[:2] + b"\x00\x63" + good[4:], LOOPBACK, Errors.UNSUPPORTED_VERSION),  # CreateTopics v99
                (fetch, LOOPBACK, Errors.INVALID_REQUEST),  # not forwardable
                (nested, LOOPBACK, Errors.INVALID_REQUEST),  # an envelope in an envelope
                (good, b"\x7f\x00\x01", Errors.INVALID_REQUEST),  # a client address of 3 bytes
            ]:
                env = await call(leader, ApiKey.ENVELOPE, envelope(data, address))
                assert env == {"ResponseData": None, "ErrorCode": code}, data
            assert leader.controller.image.topic("h") is None
            # a forwardable API this node does not serve: its own answer, inside the envelope
            quotas = encode_request(ApiKey.ALTER_CLIENT_QUOTAS, 1, 9, "b", {"Entries": [], "ValidateOnly": False})
            env = await call(leader, ApiKey.ENVELOPE, envelope(quotas))
            assert env["ErrorCode"] == Errors.NONE
            assert decode_response(ApiKey.ALTER_CLIENT_QUOTAS, 1, env["ResponseData"]) == \
                (9, {"ThrottleTimeMs": 0, "Entries": []})

            want = {name: leader.controller.image.topic(name) for name in ("t", "w", "x")}
            await wait_for(lambda: all(n.controller.image.topic("x") is not None for n in nodes),
                           what="the topics on every node")

        # a restart: every node replays the topics from its log into its image
        restarted = [controller(n.config.voters, n.config.log_dir, n.node_id) for n in nodes]
        async with running(restarted):
            await wait_for(lambda: active_of(restarted), what="an active controller after the restart")
            # (a follower replays what it fetched once it learns the high watermark from the leader)
            await wait_for(lambda: all(n.controller.image.topic(name) is not None for n in restarted for name in want),
                           what="the topics replayed on every node")
            for n in restarted:
                for name, t in want.items():
                    again = n.controller.image.topic(name)
                    assert again is not None and again.id == t.id and again.partitions == t.partitions
    asyncio.run(main())


def test_delete_topics_and_create_partitions_direct_and_forwarded(tmp_path):
    async def main():
        nodes = make_controllers(tmp_path, release_version="4.3")
        async with running(nodes):
            leader = await quiet_leader(nodes)
            follower = next(n for n in nodes if n is not leader)
            await two_unfenced_brokers(leader)
            got = await call(leader, ApiKey.CREATE_TOPICS, create(("t", 2, 2), ("u", 1, 1)))
            ids = {r["Name"]: r["TopicId"] for r in got["Topics"]}

            # in ApiVersions at the versions Kafka 4.4's controller serves (DeleteTopics 1-6, CreatePartitions 0-3)
            versions = await call(leader, ApiKey.API_VERSIONS, {"ClientSoftwareName": "t",
                                                                "ClientSoftwareVersion": "1"})
            listed = {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"]) for k in versions["ApiKeys"]}
            assert (listed[ApiKey.DELETE_TOPICS], listed[ApiKey.CREATE_PARTITIONS]) == ((1, 6), (0, 3))

            # CreatePartitions direct: one batch of two PartitionRecords, committed before the answer
            grow = {"Topics": [{"Name": "t", "Count": 4, "Assignments": None}], "TimeoutMs": 10000,
                    "ValidateOnly": False}
            got = await call(leader, ApiKey.CREATE_PARTITIONS, grow)
            assert got["Results"] == [{"Name": "t", "ErrorCode": Errors.NONE, "ErrorMessage": None}]
            batch = topic_batches(leader)[-1]
            assert [(k, d["PartitionId"], d["TopicId"]) for k, d in batch] == [(PARTITION, 2, ids["t"]),
                                                                               (PARTITION, 3, ids["t"])]
            assert sorted(leader.controller.image.topic("t").partitions) == [0, 1, 2, 3]
            # forwarded, validateOnly: the answer inside the envelope, nothing written
            end = leader.replica().log.end_offset
            inner = encode_request(ApiKey.CREATE_PARTITIONS, 3, 77, "broker-100",
                                   {**grow, "Topics": [{"Name": "t", "Count": 6, "Assignments": None},
                                                       {"Name": "t", "Count": 7, "Assignments": None}],
                                    "ValidateOnly": True})
            env = await call(leader, ApiKey.ENVELOPE, envelope(inner))
            duplicate = {"Name": "t", "ErrorCode": Errors.INVALID_REQUEST, "ErrorMessage": "Duplicate topic name."}
            assert decode_response(ApiKey.CREATE_PARTITIONS, 3, env["ResponseData"]) == \
                (77, {"ThrottleTimeMs": 0, "Results": [duplicate]})
            assert leader.replica().log.end_offset == end

            # DeleteTopics forwarded by id, then direct by name: a RemoveTopicRecord each
            inner = encode_request(ApiKey.DELETE_TOPICS, 6, 78, "broker-100",
                                   {"Topics": [{"Name": None, "TopicId": ids["u"]}], "TimeoutMs": 10000})
            env = await call(leader, ApiKey.ENVELOPE, envelope(inner))
            deleted = {"Name": "u", "TopicId": ids["u"], "ErrorCode": Errors.NONE, "ErrorMessage": None}
            assert decode_response(ApiKey.DELETE_TOPICS, 6, env["ResponseData"]) == \
                (78, {"ThrottleTimeMs": 0, "Responses": [deleted]})
            by_name = [{"Name": n, "TopicId": uuid.UUID(int=0)} for n in ("t", "nope")]
            got = await call(leader, ApiKey.DELETE_TOPICS, {"Topics": by_name, "TimeoutMs": 10000})
            assert sorted((r["Name"], r["ErrorCode"]) for r in got["Responses"]) == [
                ("nope", Errors.UNKNOWN_TOPIC_OR_PARTITION), ("t", Errors.NONE)]
            removed = [d["TopicId"] for b in leader.committed_batches(0) if not b.is_control for r in b.records()
                       for k, _v, d in [decode_metadata_record(r.value)] if k == REMOVE_TOPIC]
            assert removed == [ids["u"], ids["t"]] and leader.controller.image.topic_ids == {}

            # a follower: NOT_CONTROLLER, lifted to the envelope when forwarded
            got = await call(follower, ApiKey.CREATE_PARTITIONS, grow)
            assert [(r["Name"], r["ErrorCode"]) for r in got["Results"]] == [("t", Errors.NOT_CONTROLLER)]
            env = await call(follower, ApiKey.ENVELOPE, envelope(inner))
            assert env == {"ResponseData": None, "ErrorCode": Errors.NOT_CONTROLLER}
            await wait_for(lambda: all(n.controller.image.topic_ids == {} for n in nodes), what="deleted everywhere")
    asyncio.run(main())
