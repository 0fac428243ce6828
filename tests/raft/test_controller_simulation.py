"""Controller-level invariants under the raft simulator's faults (see tests/raft/controller_sim.py):
committed feature levels are supported by every node registered when they commit, registrations
support the levels finalized then, and every node's finalized levels are a replay of its log. The
invariants have teeth: without the controller's write discipline they catch conflicting writes."""

from __future__ import annotations

import pytest

from tests.raft import controller_sim
from tests.raft.simulator import Violation

SEEDS = 300


def test_controller_writes_keep_the_invariants_under_faults():
    totals = {"writes_feature": 0, "writes_register": 0}
    moved = 0
    for seed in range(SEEDS):
        res = controller_sim.run_seed(seed)
        for k in totals:
            totals[k] += res[k]
        moved += res["finalized"] != {"metadata.version": 7, "group.version": 0}
    # the runs did controller work: registrations, feature changes, levels that moved
    assert totals["writes_feature"] > SEEDS and totals["writes_register"] > SEEDS, totals
    assert moved > SEEDS // 2


def test_without_the_write_discipline_the_invariants_catch_conflicting_writes():
    caught = []
    for seed in range(SEEDS):
        try:
            controller_sim.run_seed(seed, discipline=False)
        except Violation as e:
            caught.append(str(e))
    assert caught, "no seed of the undisciplined controller broke an invariant"
    assert any("supported-at-commit" in c for c in caught), caught[:3]


@pytest.mark.parametrize("payload,ok", [
    (("feature", "metadata.version", 20), True),
    (("register", 100, (("metadata.version", (7, 15)), ("group.version", (0, 1)))), True),
])
def test_the_state_checks_what_the_controller_checks(payload, ok):
    st = controller_sim.ClusterState()
    assert (st.check(payload) is None) == ok
    st.apply(("register", 101, (("metadata.version", (7, 15)), ("group.version", (0, 0)))))
    # a level the registered node cannot read is refused, and so is a node that cannot read the finalized one
    assert st.check(("feature", "metadata.version", 20)) is not None
    assert st.check(("feature", "group.version", 1)) is not None
    st.apply(("feature", "metadata.version", 12))
    assert st.check(("register", 102, (("metadata.version", (13, 33)),))) is not None
