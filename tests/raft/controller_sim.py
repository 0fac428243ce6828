"""The raft fault simulator with a controller on top: controller-level invariants under the same
faults (crashes, partitions, loss, duplication, reordering, snapshots, resignations).

The leaders append controller writes instead of opaque values: feature updates (metadata.version
and group.version, validated by :func:`kraftkit.features.validation.validate_updates`, the function
kraftkit's controller validates UpdateFeatures with) and node registrations (refused, as Kafka's
controller refuses them, when the node's ranges exclude a finalized level). A leader writes as
kraftkit's controller does: only once what earlier leaders committed is committed in its own
epoch (its high watermark passed its epoch's start), one write at a time (nothing of its own
uncommitted), against the committed state.

Invariants, checked after every event on the committed history (besides the raft ones):
  * finalized-replay: the finalized levels every node reports equal a replay of its committed log
    (every node's replay is a prefix of the one history, so their levels agree where their logs do);
  * supported-at-commit: every committed feature level is supported by every node registered at
    the time of its commit, and every committed registration supports the levels finalized then.

``ControllerSimulation(..., discipline=False)`` lets a leader write with its own writes still
uncommitted: the invariants then catch the resulting conflicts (the tests show it), which is why the
discipline matters.
"""

from __future__ import annotations

from typing import Any

from kraftkit.features.validation import FeatureUpdate, NodeFeatures, UpgradeType, validate_updates
from kraftkit.raft.events import Append
from kraftkit.raft.quorum_state import Role
from tests.raft.simulator import Scenario, Simulation, Violation

MV, GROUP = "metadata.version", "group.version"
#: the metadata.version levels the simulated nodes and updates use (3.3-IV3 .. 4.4-IV2)
MV_LEVELS = range(7, 34)


class ClusterState:
    """What a committed history says: finalized levels and registered nodes (id -> ranges)."""

    def __init__(self) -> None:
        self.finalized: dict[str, int] = {MV: 7, GROUP: 0}
        self.nodes: dict[int, dict[str, tuple[int, int]]] = {}

    def node_features(self) -> list[NodeFeatures]:
        return [NodeFeatures(i, "broker", r) for i, r in sorted(self.nodes.items())]

    def check(self, payload: Any) -> str | None:
        """Why ``payload`` is not a valid write on this state (None: it is)."""
        kind = payload[0]
        if kind == "feature":
            _k, name, level = payload
            kind_of = UpgradeType.UPGRADE if level >= self.finalized[name] else UpgradeType.SAFE_DOWNGRADE
            (res,) = validate_updates(self.finalized, [FeatureUpdate(name, level, kind_of)], self.node_features())
            return None if res.ok else res.error
        if kind == "register":
            _k, nid, ranges = payload
            for name, level in self.finalized.items():
                lo, hi = dict(ranges).get(name, (0, 0))
                if not lo <= level <= hi:
                    return f"node {nid} does not support finalized {name}={level} (supports {lo}..{hi})"
            return None
        return None  # a no-op

    def apply(self, payload: Any) -> None:
        kind = payload[0]
        if kind == "feature":
            self.finalized[payload[1]] = payload[2]
        elif kind == "register":
            self.nodes[payload[1]] = dict(payload[2])


class ControllerSimulation(Simulation):
    def __init__(self, scenario: Scenario, trace: bool = False, *, discipline: bool = True) -> None:
        super().__init__(scenario, trace)
        self.discipline = discipline
        self.history = ClusterState()  # the replay of the committed history so far
        self.replayed = 0  # offsets below it are in ``history``
        self.writes = {"feature": 0, "register": 0, "noop": 0}

    # ------------------------------------------------------------------ invariants
    def maybe_snapshot(self, node) -> None:
        # the committed entries go into the history before a snapshot may compact them away (the
        # raft invariants need only what is still in some log; the controller's need every write)
        self.check_node(node)
        super().maybe_snapshot(node)

    def check_global(self) -> None:
        super().check_global()
        while self.replayed in self.ledger:
            _epoch, payload = self.ledger[self.replayed]
            if isinstance(payload, tuple):
                why = self.history.check(payload)
                if why is not None:
                    raise Violation(f"supported-at-commit: {payload!r} committed at offset {self.replayed} "
                                    f"on {self.history.finalized} with nodes {self.history.nodes}: {why}")
                self.history.apply(payload)
            self.replayed += 1
        for n in self.nodes:
            if n.running and n.core.high_watermark <= self.replayed:
                mine = self.state_of(n)
                if mine is not None and mine.finalized != self.replay_to(n.core.high_watermark).finalized:
                    raise Violation(f"finalized-replay: node {n.id} reports {mine.finalized}")

    def state_of(self, node) -> ClusterState | None:
        """The finalized levels a node reports: a replay of the committed entries in its own log
        (None when its log starts past offset 0, after a snapshot: then its state came with it)."""
        if node.log.start_offset > 0:
            return None
        st = ClusterState()
        for e in node.log.read(0, node.core.high_watermark):
            if isinstance(e.payload, tuple):
                st.apply(e.payload)
        return st

    def replay_to(self, end: int) -> ClusterState:
        st = ClusterState()
        for off in range(end):
            payload = self.ledger[off][1]
            if isinstance(payload, tuple):
                st.apply(payload)
        return st

    # ------------------------------------------------------------------ controller writes
    def dispatch(self, kind: str, args: tuple):
        if kind != "append":
            return super().dispatch(kind, args)
        self.push(self.now + self.rng.randint(*self.sc.append_every), "append")
        leaders = [n for n in self.nodes if n.running and n.core.role is Role.LEADER]
        if not leaders:
            return None
        n = self.rng.choice(leaders)
        core = n.core
        hw = core.high_watermark
        if self.discipline:
            start = core.state.epoch_start_offset if hasattr(core.state, "epoch_start_offset") else None
            if start is None or hw <= start or n.log.end_offset > hw or self.replayed < hw:
                return None  # not active yet, or a write of its own is not committed yet
        if self.replayed < hw and self.discipline:
            return None
        state = self.replay_to(min(hw, self.replayed))
        payload = self.propose(state)
        self.writes[payload[0]] += 1
        self.step(n, Append(self.now, (payload,)))
        return n

    def propose(self, state: ClusterState) -> tuple:
        """A write the controller would accept on ``state``: a registration, or a feature change
        every registered node supports (a refused candidate is not written: a no-op instead)."""
        r = self.rng
        if r.random() < 0.4:
            nid = r.randint(100, 105)
            lo = r.choice([7, 7, 15])
            hi = r.choice([lo, 21, 27, 33, 33])
            ranges = ((MV, (lo, max(lo, hi))), (GROUP, (0, r.choice([0, 1, 1]))))
            payload: tuple = ("register", nid, ranges)
        else:
            name = r.choice([MV, MV, GROUP])
            level = r.choice(list(MV_LEVELS)) if name == MV else r.randint(0, 1)
            payload = ("feature", name, level)
        return payload if state.check(payload) is None else ("noop",)


def run_seed(seed: int, *, discipline: bool = True) -> dict:
    sim = ControllerSimulation(Scenario.from_seed(seed), discipline=discipline)
    try:
        res = sim.run()
    except Violation as e:
        raise Violation(f"controller simulation seed {seed} failed at t={sim.now} ms: {e}") from e
    return {**res, **{f"writes_{k}": v for k, v in sim.writes.items()}, "finalized": dict(sim.history.finalized)}
