"""The seeded fault simulator: CI seeds, exact replay, the invariants' teeth, wire-compatible bodies."""

from __future__ import annotations

import json
import multiprocessing
import os

import pytest

from kraftkit.protocol import decode_request, decode_response, encode_request, encode_response
from kraftkit.raft import core as raft_core
from kraftkit.raft import messages as m
from kraftkit.raft.core import RecordsAdapter
from kraftkit.raft.log import Entry
from kraftkit.raft.quorum_state import Role
from tests.raft import simulator as sim
from tests.raft import simulator_dynamic as dyn

JOBS = min(2, multiprocessing.cpu_count())
CI_SEEDS = 2000
SOAK_SEEDS = int(os.environ.get("KRAFTKIT_RAFT_SOAK_SEEDS", "1000"))


def _report(failures: list[tuple[int, str]]) -> str:
    return "\n\n".join(err for _seed, err in failures)


def test_ci_seeds():
    """2000 seeded schedules (seeds 0..1999) with every fault; each checks all invariants after
    every event and liveness after healing."""
    failures, events = sim.run_many(0, CI_SEEDS, jobs=JOBS)
    assert not failures, _report(failures)
    assert events > CI_SEEDS * 100  # the runs did real work


@pytest.mark.slow
def test_soak_big_clusters():
    """Bigger clusters and twice-longer fault phases on another seed range. Scale it with
    KRAFTKIT_RAFT_SOAK_SEEDS; the 100,000-run soak is ``python -m tests.raft.simulator --seeds 100000``."""
    failures, _ = sim.run_many(1_000_000, SOAK_SEEDS, big=True, jobs=JOBS)
    assert not failures, _report(failures)


def test_scenarios_exercise_every_fault():
    totals: dict[str, int] = {}
    shapes = set()
    for seed in range(200):
        res = sim.run_seed(seed)
        for k, v in res.items():
            if k != "seed":
                totals[k] = totals.get(k, 0) + v
        sc = sim.Scenario.from_seed(seed)
        shapes.add((sc.voters, sc.observers > 0, sc.loss > 0, sc.dup > 0))
    for k in ("crashes", "partitions", "resigns", "snapshots", "snapshot_loads", "elections", "dropped"):
        assert totals[k] > 0, (k, totals)
    assert totals["ledger"] > 200 * 5
    assert {v for v, *_ in shapes} == {1, 2, 3, 5}
    assert any(obs for _, obs, _, _ in shapes) and any(loss for *_, loss, _ in shapes)
    # most schedules run with pre-vote (Kafka's default), some without (KIP-595 alone)
    modes = [sim.Scenario.from_seed(seed).config.pre_vote for seed in range(200)]
    assert 100 < sum(modes) < 200


def test_a_seed_replays_exactly():
    a = sim.Simulation(sim.Scenario.from_seed(77), trace=True)
    b = sim.Simulation(sim.Scenario.from_seed(77), trace=True)
    assert a.run() == b.run()
    assert a.trace == b.trace and len(a.trace) > 100
    c = sim.Simulation(sim.Scenario.from_seed(78), trace=True)
    c.run()
    assert c.trace != a.trace


def _break_vote_rule(monkeypatch):
    """Grant votes without comparing logs: a classic raft bug."""

    def can_grant(self, candidate, last_epoch, last_offset, pre_vote=False):
        if self.is_observer:
            return False
        if pre_vote:
            return self.role is not Role.LEADER and not getattr(self.state, "fetched", False)
        if self.role in (Role.VOTED, Role.PROSPECTIVE) and self.voted_id >= 0:
            return self.voted_id == candidate
        return self.role in (Role.UNATTACHED, Role.PROSPECTIVE) and self.leader_id < 0

    monkeypatch.setattr(raft_core.RaftCore, "_can_grant", can_grant)


def test_broken_vote_rule_is_caught_and_the_failing_seed_replays(monkeypatch, capsys):
    _break_vote_rule(monkeypatch)
    failures, _ = sim.run_many(0, 100, jobs=1)
    assert failures
    seed, err = failures[0]
    assert f"seed {seed} failed" in err
    assert f"python -m tests.raft.simulator --seed {seed}" in err
    assert "leader-completeness" in err or "committed-data" in err or "core error" in err
    # the printed command replays the same failure exactly
    assert sim.main(["--seed", str(seed)]) == 1
    replayed = capsys.readouterr().err
    assert err.splitlines()[0] in replayed


def test_commit_without_own_epoch_entry_is_caught(monkeypatch):
    """Drop the rule that a leader commits nothing until an entry of its own epoch is replicated
    (raft's figure-8 bug); the simulator must notice."""

    def update(self):
        if self.role is not Role.LEADER:
            return
        offsets = sorted((self.log.flushed_offset if v == self.node_id else self._replica_end.get(v, -1)
                          for v in self.voters), reverse=True)
        cand = offsets[len(self.voters) // 2]
        if (self._leader_hw is not None and cand <= self._leader_hw) or cand <= self.high_watermark:
            return
        self._leader_hw = cand
        self._set_hw(cand)
        self._complete_purgatory()

    monkeypatch.setattr(raft_core.RaftCore, "_update_leader_hw", update)
    failures, _ = sim.run_many(0, 300, jobs=1)
    assert failures, "the simulator did not notice commits of earlier-epoch entries"


def test_counting_unflushed_leader_entries_is_caught(monkeypatch):
    """If the leader counted its un-fsynced entries toward the HW, a crash could lose committed data."""

    def update(self):
        if self.role is not Role.LEADER:
            return
        offsets = sorted((self.log.end_offset if v == self.node_id else self._replica_end.get(v, -1)
                          for v in self.voters), reverse=True)
        cand = offsets[len(self.voters) // 2]
        if cand <= self._epoch_start_offset or (self._leader_hw is not None and cand <= self._leader_hw):
            return
        self._leader_hw = cand
        self._set_hw(cand)
        self._complete_purgatory()

    monkeypatch.setattr(raft_core.RaftCore, "_update_leader_hw", update)
    failures, _ = sim.run_many(0, 100, jobs=1)
    assert failures
    assert any("majority-hw" in e or "committed-data" in e or "leader-completeness" in e for _, e in failures)


class JsonRecords(RecordsAdapter):
    """Records as bytes, so bodies go through the Kafka codec as they are."""

    def encode(self, entries):
        return json.dumps([list(e) for e in entries]).encode()

    def decode(self, records):
        if not records:
            return []
        return [Entry(o, e, p, c) for o, e, p, c in json.loads(records)]


def test_bodies_encode_with_kafka_schemas():
    seen: dict[tuple[int, bool], int] = {}

    def check(node, out):
        v = m.VERSIONS[out.api]
        corr = out.correlation_id % (1 << 31)
        want = out.body
        if out.api == m.END_QUORUM_EPOCH and not out.is_response:
            # both successor lists are filled; v1 carries PreferredCandidates only (as in Kafka)
            want = json.loads(json.dumps(want, default=str))
            for t in want["Topics"]:
                for p in t["Partitions"]:
                    assert p.pop("PreferredSuccessors") == [c["CandidateId"] for c in p["PreferredCandidates"]]
        if out.is_response:
            wire = encode_response(out.api, v, corr, out.body)
            got = decode_response(out.api, v, wire)[1]
        else:
            wire = encode_request(out.api, v, corr, f"raft-client-{node.id}", out.body)
            api, ver, c, client, got = decode_request(wire)
            assert (api, ver, c, client) == (out.api, v, corr, f"raft-client-{node.id}")
        if want is not out.body:
            got = json.loads(json.dumps(got, default=str))
        assert got == want
        seen[(out.api, out.is_response)] = seen.get((out.api, out.is_response), 0) + 1

    for seed in range(30):
        sim.Simulation(sim.Scenario.from_seed(seed), records=JsonRecords(), on_send=check).run()
    apis = {m.VOTE, m.BEGIN_QUORUM_EPOCH, m.END_QUORUM_EPOCH, m.FETCH, m.FETCH_SNAPSHOT}
    assert {k for k in seen} == {(a, r) for a in apis for r in (False, True)}


def test_vote_sent_before_it_is_stored_is_caught(monkeypatch):
    """A vote must be durable before the response that grants it leaves the node."""

    def become_voted(self, candidate):
        self._set_role(Role.VOTED, self.epoch, -1, candidate, persist=False)
        self._election_deadline = self._unattached_timeout()

    monkeypatch.setattr(raft_core.RaftCore, "_become_voted", become_voted)
    failures, _ = sim.run_many(0, 50, jobs=1)
    assert failures and all("persist-before-send" in e for _, e in failures)


REJOIN_SEEDS = 60


def test_a_node_cut_off_and_back_never_disrupts_a_healthy_quorum():
    """no-disruption: with pre-vote, a follower cut off from everyone (its timers running out again
    and again) and healed neither bumps an epoch nor unseats the leader, busy or idle."""
    failures, events = sim.run_rejoins(0, REJOIN_SEEDS)
    assert not failures, _report(failures)
    assert events > REJOIN_SEEDS * 500
    scenarios = [sim.Scenario.rejoin_from_seed(seed) for seed in range(REJOIN_SEEDS)]
    assert {sc.voters for sc in scenarios} == {3, 5} and {sc.idle_while_away for sc in scenarios} == {True, False}


def test_standing_without_pre_vote_is_caught_as_a_disruption(monkeypatch, capsys):
    """KIP-595 alone: the cut-off node stands again and again, and its higher epoch unseats the leader."""
    monkeypatch.setattr(raft_core.RaftCore, "_stand", raft_core.RaftCore._become_candidate)
    failures, _ = sim.run_rejoins(0, 20)
    assert len(failures) == 20 and all("no-disruption" in e for _, e in failures)
    seed, err = failures[0]
    assert f"python -m tests.raft.simulator --rejoin --seed {seed}" in err
    assert sim.main(["--rejoin", "--seed", str(seed)]) == 1
    assert err.splitlines()[0] in capsys.readouterr().err


def test_a_follower_granting_pre_votes_while_its_leader_lives_is_caught(monkeypatch):
    """Drop the rule that a follower that has fetched from its leader refuses pre-votes: an idle
    quorum's followers then hand the returning node the majority it needs."""
    real = raft_core.RaftCore._can_grant

    def can_grant(self, candidate, last_epoch, last_offset, pre_vote=False):
        if pre_vote and self.role is Role.FOLLOWER:
            return (last_epoch, last_offset) >= (self.log.last_epoch(), self.log.end_offset)
        return real(self, candidate, last_epoch, last_offset, pre_vote)

    monkeypatch.setattr(raft_core.RaftCore, "_can_grant", can_grant)
    failures, _ = sim.run_rejoins(0, 30)
    assert failures and all("no-disruption" in e for _, e in failures)
    assert all(sim.Scenario.rejoin_from_seed(seed).idle_while_away for seed, _ in failures)


# ------------------------------------------------------------------ dynamic quorums (KIP-853)

DYNAMIC_SEEDS = 2000


def test_dynamic_ci_seeds():
    """2000 dynamic-quorum schedules (seeds 0..1999): voters added and removed among crashes,
    partitions, loss, snapshots and wiped directories; every invariant after every event (see
    tests/raft/simulator_dynamic.py), liveness and the acknowledged changes after healing."""
    failures, events = sim.run_many(0, DYNAMIC_SEEDS, jobs=JOBS, dynamic=True)
    assert not failures, _report(failures)
    assert events > DYNAMIC_SEEDS * 100


def test_dynamic_schedules_change_the_voters_among_every_fault():
    totals: dict[str, int] = {}
    shapes = set()
    for seed in range(150):
        res = dyn.run_dynamic(seed)
        for k, v in res.items():
            if k != "seed":
                totals[k] = totals.get(k, 0) + v
        sc = dyn.dynamic_scenario(seed)
        shapes.add((sc.voters, sc.observers, sc.config.pre_vote))
    for k in ("adds", "removes", "leader_removals", "changes_acked", "change_refusals", "wipes", "change_crashes",
              "crashes",
              "partitions", "snapshot_loads", "elections", "dropped"):
        assert totals[k] > 0, (k, totals)
    assert totals["changes_acked"] > 50
    # every dynamic schedule runs with pre-vote (simulator_dynamic.dynamic_scenario says why)
    assert {v for v, _o, _p in shapes} == {1, 2, 3} and {p for *_, p in shapes} == {True}


def test_a_dynamic_seed_replays_exactly_and_its_voter_sets_move():
    a = dyn.DynamicSimulation(dyn.dynamic_scenario(35), trace=True)
    b = dyn.DynamicSimulation(dyn.dynamic_scenario(35), trace=True)
    assert a.run() == b.run() and a.trace == b.trace
    # the simulator's own reading of the logs saw the voter set change, and acknowledged changes
    # are committed where the ledger says
    assert a.acked and all(a.ledger[off] == (e.epoch, e.payload) for off, e in a.acked)
    assert len({r[2] for n in a.nodes for r in a.refresh(n).recs}) > 1


def _dynamic_failures(limit: int, want: int = 3) -> list[tuple[int, str]]:
    """The first ``want`` failing dynamic seeds below ``limit`` (in this process: monkeypatches hold)."""
    failures: list[tuple[int, str]] = []
    for seed in range(limit):
        try:
            dyn.run_dynamic(seed)
        except sim.Violation as e:
            failures.append((seed, str(e)))
            if len(failures) == want:
                break
    return failures


def test_two_voter_changes_at_once_are_caught(monkeypatch, capsys):
    """A leader that takes a change while the last one is uncommitted (Kafka refuses it)."""

    def refusal(self, what):
        return None if self.role is Role.LEADER and self.state.high_watermark is not None else (6, "not leader")

    def finish(self, error, message=None):
        st = self.state
        change = st.voter_change
        st.voter_change = None
        if change is not None and change.corr >= 0:
            self._respond(change.src, change.api, change.corr, m.voter_change_response(error, message))

    monkeypatch.setattr(raft_core.RaftCore, "_voter_change_refusal", refusal)
    monkeypatch.setattr(raft_core.RaftCore, "_finish_voter_change", finish)
    failures = _dynamic_failures(200)
    assert failures and all("one-change" in e or "acked-change" in e or "elected-by-majority" in e
                            or "committed-data" in e or "leader-completeness" in e for _, e in failures)
    assert any("one-change" in e for _, e in failures)
    seed, err = failures[0]
    assert f"python -m tests.raft.simulator --dynamic --seed {seed}" in err
    assert sim.main(["--dynamic", "--seed", str(seed)]) == 1
    assert err.splitlines()[0] in capsys.readouterr().err


def test_a_wiped_voter_counted_as_the_one_it_was_is_caught(monkeypatch):
    """A replica that answers requests addressed to its id whatever its directory id: a node whose
    disk was replaced then votes as the voter it no longer is."""
    monkeypatch.setattr(raft_core.RaftCore, "_addressed_to_me", lambda self, voter_id, voter_dir: True)
    failures = _dynamic_failures(300)
    assert failures and any("elected-by-majority" in e for _, e in failures)


def test_a_vote_counted_without_a_majority_of_the_voter_set_is_caught(monkeypatch):
    """One vote short: a leader elected by half of an even voter set."""
    monkeypatch.setattr(raft_core.RaftCore, "majority", property(lambda self: max(1, len(self.voters) // 2)))
    failures = _dynamic_failures(100)
    assert failures and any("elected-by-majority" in e for _, e in failures)


def test_a_change_acknowledged_before_it_commits_is_caught(monkeypatch):
    real = raft_core.RaftCore._on_add_voter_request

    def add(self, src, corr, body):
        return real(self, src, corr, {**body, "AckWhenCommitted": False})

    monkeypatch.setattr(raft_core.RaftCore, "_on_add_voter_request", add)
    failures = _dynamic_failures(100)
    assert failures and all("acked-change" in e for _, e in failures)


DYNAMIC_REJOIN_SEEDS = 40


def test_a_node_cut_off_and_back_never_disrupts_a_healthy_dynamic_quorum():
    """no-disruption on a dynamic quorum whose voters changed before the cut (an observer added, a
    bootstrap voter removed): the cut-off voter, sometimes the one just added, neither bumps an
    epoch nor unseats the leader."""
    failures, events = dyn.run_dynamic_rejoins(0, DYNAMIC_REJOIN_SEEDS)
    assert not failures, _report(failures)
    assert events > DYNAMIC_REJOIN_SEEDS * 500
    sims = [dyn.DynamicSimulation(dyn.rejoin_scenario(seed), trace=True) for seed in range(10)]
    cut = set()
    for s in sims:
        s.run_rejoin()
        assert len(s.acked) == 2 and len(s.voter_ids) == s.sc.voters and s.voter_ids != list(range(s.sc.voters))
        line = next(t for t in s.trace if "cut off" in t)
        cut.add(int(line.split("node ")[1].split()[0]) == len(s.nodes) - 1)
    assert cut == {True, False}  # the added voter is cut off in some schedules, an old one in others


def test_standing_without_pre_vote_disrupts_a_dynamic_quorum_too(monkeypatch):
    monkeypatch.setattr(raft_core.RaftCore, "_stand", raft_core.RaftCore._become_candidate)
    failures, _ = dyn.run_dynamic_rejoins(0, 10)
    assert len(failures) == 10 and all("no-disruption" in e for _, e in failures)
    assert "python -m tests.raft.simulator --dynamic --rejoin --seed 0" in failures[0][1]


def test_a_snapshot_that_loses_the_voter_set_is_caught(monkeypatch):
    """A fetched snapshot whose voter set is not restored (Kafka's snapshot header dropped): the log's
    voter set no longer matches what its records say."""
    monkeypatch.setattr(dyn, "snapshot_control_records", lambda data: [])
    failures = _dynamic_failures(300, want=1)
    assert failures and "voter-set-view" in failures[0][1]
