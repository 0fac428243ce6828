"""The replica placer (kraftkit.controller.placement): Kafka's striped rack-aware rules, checked as
properties over many seeded placements."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from kraftkit.controller.placement import PlacementError, UsableBroker, place


def brokers(spec: dict[int, tuple[str | None, bool]]) -> list[UsableBroker]:
    return [UsableBroker(bid, rack, fenced) for bid, (rack, fenced) in spec.items()]


@pytest.mark.parametrize("seed", range(20))
def test_every_partition_has_rf_distinct_brokers_and_an_unfenced_leader(seed):
    spec = {1: (None, False), 2: (None, True), 3: (None, False), 4: (None, True), 5: (None, False)}
    for rf in (1, 2, 3, 4, 5):
        placed = place(random.Random(seed), brokers(spec), 30, rf)
        assert len(placed) == 30
        for replicas in placed:
            assert len(replicas) == rf and len(set(replicas)) == rf
            assert set(replicas) <= set(spec)
            assert not spec[replicas[0]][1]  # the preferred leader is unfenced


@pytest.mark.parametrize("seed", range(20))
def test_unfenced_brokers_come_before_fenced_ones(seed):
    spec = {1: (None, True), 2: (None, False), 3: (None, True), 4: (None, False), 5: (None, False)}
    for replicas in place(random.Random(seed), brokers(spec), 20, 3):
        # three unfenced brokers exist: a placement of three never needs a fenced one
        assert sorted(replicas) == [2, 4, 5]
    for replicas in place(random.Random(seed), brokers(spec), 20, 4):
        assert {2, 4, 5} <= set(replicas)  # every unfenced broker, then one fenced one


@pytest.mark.parametrize("seed", range(20))
def test_replicas_are_spread_over_the_racks(seed):
    spec = {1: ("a", False), 2: ("a", False), 3: ("b", False), 4: ("b", False), 5: ("c", False), 6: ("c", False)}
    for replicas in place(random.Random(seed), brokers(spec), 40, 3):
        assert sorted(spec[b][0] for b in replicas) == ["a", "b", "c"]  # one replica per rack
    for replicas in place(random.Random(seed), brokers(spec), 40, 2):
        assert len({spec[b][0] for b in replicas}) == 2


@pytest.mark.parametrize("seed", range(10))
def test_leaders_and_replicas_are_balanced(seed):
    spec = {i: (None, False) for i in range(1, 6)}
    placed = place(random.Random(seed), brokers(spec), 50, 2)
    leaders = Counter(r[0] for r in placed)
    assert sorted(leaders) == [1, 2, 3, 4, 5]
    assert max(leaders.values()) - min(leaders.values()) <= 1  # 50 partitions, 5 brokers: 10 each
    replicas = Counter(b for r in placed for b in r)
    assert max(replicas.values()) - min(replicas.values()) <= 2
    # with racks: every rack leads its share too
    racked = {1: ("x", False), 2: ("x", False), 3: ("y", False), 4: ("y", False)}
    placed = place(random.Random(seed), brokers(racked), 40, 2)
    assert Counter(racked[r[0]][0] for r in placed) == {"x": 20, "y": 20}


def test_a_single_unfenced_broker_leads_every_partition():
    spec = {1: (None, True), 2: (None, False), 3: (None, True)}
    placed = place(random.Random(1), brokers(spec), 10, 3)
    assert all(r[0] == 2 and sorted(r) == [1, 2, 3] for r in placed)


def test_a_seeded_generator_places_the_same_way_twice():
    spec = {i: ("r" + str(i % 3), i == 4) for i in range(1, 8)}
    assert place(random.Random(42), brokers(spec), 25, 3) == place(random.Random(42), brokers(spec), 25, 3)


@pytest.mark.parametrize(("spec", "rf", "message"), [
    ({1: (None, False)}, 0, "Invalid replication factor 0: the replication factor must be positive."),
    ({1: (None, False)}, -2, "Invalid replication factor -2: the replication factor must be positive."),
    ({1: (None, False), 2: (None, True)}, 3,
     "The target replication factor of 3 cannot be reached because only 2 broker(s) are registered."),
    ({1: (None, True), 2: (None, True)}, 1, "All brokers are currently fenced."),
    ({}, 1, "All brokers are currently fenced."),
])
def test_impossible_placements_are_refused_with_kafkas_messages(spec, rf, message):
    with pytest.raises(PlacementError) as e:
        place(random.Random(0), brokers(spec), 3, rf)
    assert str(e.value) == message
