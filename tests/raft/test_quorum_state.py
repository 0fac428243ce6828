"""The quorum-state file, byte for byte as Kafka's FileQuorumStateStore writes it."""

from __future__ import annotations

import uuid

import pytest

from kraftkit.raft.quorum_state import (
    ElectionState, FileQuorumStateStore, QuorumStateError, parse_quorum_state, render_quorum_state, uuid_from_kafka,
    uuid_to_kafka,
)

V0 = ('{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,'
      '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}')
V1 = '{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}'


def test_kafka_examples_parse_and_render_exactly():
    st, v = parse_quorum_state(V0)
    assert v == 0 and st == ElectionState(2, leader_id=1, voters=(1, 2, 3))
    assert render_quorum_state(st, 0) == V0
    st, v = parse_quorum_state(V1)
    assert v == 1 and (st.epoch, st.leader_id, st.voted_id) == (2, -1, 1)
    assert uuid_to_kafka(st.voted_directory_id) == "J8aAPcfLQt2bqs1JT_rMgQ"
    assert render_quorum_state(st, 1) == V1


def test_render_defaults():
    assert render_quorum_state(ElectionState(0), 1) == \
        '{"leaderId":-1,"leaderEpoch":0,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
    assert render_quorum_state(ElectionState(7, voted_id=3), 0) == \
        '{"clusterId":"","leaderId":-1,"leaderEpoch":7,"votedId":3,"appliedOffset":0,"currentVoters":null,' \
        '"data_version":0}'


@pytest.mark.parametrize("text,msg", [
    ('{"leaderId":1}', "no data_version"),
    ('{"leaderId":1,"data_version":2}', "not within the min"),
    ("not json", "not JSON"),
    ('{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"!!","data_version":1}', "uuid"),
])
def test_bad_files(text, msg):
    with pytest.raises(QuorumStateError, match=msg):
        parse_quorum_state(text)


def test_leader_and_vote_are_exclusive():
    with pytest.raises(QuorumStateError):
        ElectionState(1, leader_id=1, voted_id=2)


#: what a real Kafka 4.4.0 controller of a static quorum wrote (tests/kafka/test_recover_kafka.py saw it): a
#: follower keeps the vote it gave the leader it then followed
KAFKA_44_FOLLOWER = ('{"clusterId":"","leaderId":2,"leaderEpoch":1,"votedId":2,"appliedOffset":0,'
                     '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}')


def test_a_kafka_4_followers_file_with_its_leader_and_its_vote_is_read_as_following_the_leader():
    st, v = parse_quorum_state(KAFKA_44_FOLLOWER)
    assert v == 0 and st == ElectionState(1, leader_id=2, voters=(1, 2, 3))


def test_uuid_roundtrip():
    u = uuid.UUID("27c6803d-c7cb-42dd-9baa-cd4925faccc1")
    assert uuid_from_kafka(uuid_to_kafka(u)) == u


def test_file_store_writes_one_line_atomically(tmp_path):
    path = tmp_path / "quorum-state"
    store = FileQuorumStateStore(path)
    assert store.read() is None
    store.write(ElectionState(3, leader_id=2))
    assert path.read_bytes() == \
        b'{"leaderId":2,"leaderEpoch":3,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
    assert not (tmp_path / "quorum-state.tmp").exists()
    assert store.read() == ElectionState(3, leader_id=2)
    v0 = FileQuorumStateStore(path, data_version=0)
    v0.write(ElectionState(4, voted_id=1, voters=(1, 2)))
    assert parse_quorum_state(path.read_text())[0] == ElectionState(4, voted_id=1, voters=(1, 2))
