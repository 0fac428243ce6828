"""Replica placement for new partitions, by the rules of Kafka's ``StripedReplicaPlacer``.

The brokers a placement may use are the registered ones not in controlled shutdown, each with
its rack (None: no rack) and whether it is fenced. Every partition gets ``replication_factor``
distinct brokers:

* its first replica (the preferred leader) is always an unfenced broker;
* the replicas are striped across the racks (sorted, "no rack" first): a partition takes at most
  one broker of a rack until every rack has given one, so a rack failure takes out as few replicas
  as can be;
* within a rack unfenced brokers come before fenced ones;
* successive partitions start at the next rack and, within each rack, at the next broker, from
  random starting points, so leaders and replicas spread evenly; once as many partitions as there
  are unfenced brokers were placed, the racks and brokers are shuffled, so the same assignments do
  not simply repeat.

The randomness comes from a :class:`random.Random` the caller owns (the controller seeds its own;
tests pass a seeded one), so a placement is reproducible for a given generator state.

It refuses (:class:`PlacementError`, Kafka's ``InvalidReplicationFactorException`` and its
messages) a non-positive replication factor, more replicas than registered usable brokers, and a
cluster whose usable brokers are all fenced.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["PlacementError", "UsableBroker", "place"]


class PlacementError(Exception):
    """The replicas cannot be placed (Kafka's InvalidReplicationFactorException)."""


@dataclass(frozen=True)
class UsableBroker:
    """A broker a placement may use (registered, not in controlled shutdown)."""

    id: int
    rack: str | None
    fenced: bool


class _Brokers:
    """The brokers of one kind (fenced or unfenced) of one rack, walked from a rotating offset."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.index = 0
        self.offset = 0
        self.epoch = 0

    def initialize(self, rng: random.Random) -> None:
        if self.ids:
            self.ids.sort()
            self.offset = rng.randrange(len(self.ids))

    def shuffle(self, rng: random.Random) -> None:
        rng.shuffle(self.ids)

    def next(self, epoch: int) -> int:
        """The next broker of this list in the placement round ``epoch`` (-1: none left in it)."""
        if not self.ids:
            return -1
        if self.epoch != epoch:  # a new round: start one further than the last
            self.epoch, self.index = epoch, 0
            self.offset = (self.offset + 1) % len(self.ids)
        if self.index >= len(self.ids):
            return -1
        broker = self.ids[(self.index + self.offset) % len(self.ids)]
        self.index += 1
        return broker


class _Rack:
    def __init__(self) -> None:
        self.fenced = _Brokers()
        self.unfenced = _Brokers()

    def next(self, epoch: int) -> int:
        got = self.unfenced.next(epoch)
        return got if got >= 0 else self.fenced.next(epoch)


def _rack_key(name: str | None) -> tuple[bool, str]:
    return (name is not None, name or "")


class _Racks:
    """Every usable broker by rack, and the rotation over the racks."""

    def __init__(self, rng: random.Random, brokers: Iterable[UsableBroker]) -> None:
        self.rng = rng
        self.racks: dict[str | None, _Rack] = {}
        self.total = self.unfenced = 0
        for b in brokers:
            rack = self.racks.setdefault(b.rack, _Rack())
            (rack.fenced if b.fenced else rack.unfenced).ids.append(b.id)
            self.total += 1
            self.unfenced += not b.fenced
        for rack in self.racks.values():
            rack.fenced.initialize(rng)
            rack.unfenced.initialize(rng)
        self.names = sorted(self.racks, key=_rack_key)
        self.offset = rng.randrange(len(self.names)) if self.names else 0
        self.epoch = 0

    def shuffle(self) -> None:
        self.rng.shuffle(self.names)
        for rack in self.racks.values():
            rack.fenced.shuffle(self.rng)
            rack.unfenced.shuffle(self.rng)

    def place(self, replication_factor: int) -> list[int]:
        """The replicas of one partition."""
        if self.epoch == self.unfenced and self.unfenced > 1:
            # as many partitions placed as there are unfenced brokers: shuffle, not to repeat them
            # (not with a single unfenced broker: every round would shuffle again)
            self.shuffle()
            self.epoch = 0
        if self.offset == len(self.names):
            self.offset = 0
        n = len(self.names)
        # the first replica: the next unfenced broker, from the rack at the offset on
        first = self.offset
        for _ in range(n):
            leader = self.racks[self.names[first]].unfenced.next(self.epoch)
            if leader >= 0:
                break
            first = (first + 1) % n
        else:  # (the callers checked that some broker is unfenced)
            raise PlacementError("All brokers are currently fenced.")
        replicas = [leader]
        # the others: one from each rack in turn from the offset on (the leader's rack skipped once)
        index, skip = self.offset, first
        # each step takes a broker or exhausts a rack for this round: bounded by the brokers and racks
        for _ in range(2 * (self.total + n) * replication_factor):
            if len(replicas) == replication_factor:
                break
            if index == skip:
                skip = -1
            else:
                got = self.racks[self.names[index]].next(self.epoch)
                if got >= 0:
                    replicas.append(got)
            index = (index + 1) % n
        if len(replicas) != replication_factor:  # cannot happen with replication_factor <= total
            raise PlacementError(
                f"The target replication factor of {replication_factor} cannot be reached because only "
                f"{self.total} broker(s) are registered."
            )
        self.epoch += 1
        self.offset += 1
        return replicas


def place(
    rng: random.Random, brokers: Iterable[UsableBroker], num_partitions: int, replication_factor: int
) -> list[list[int]]:
    """The replicas of partitions 0..``num_partitions``-1 (the first of each: its preferred leader),
    or :class:`PlacementError`. The caller bounds ``num_partitions``."""
    racks = _Racks(rng, brokers)
    if replication_factor <= 0:
        raise PlacementError(
            f"Invalid replication factor {replication_factor}: the replication factor must be positive."
        )
    if racks.unfenced == 0:
        raise PlacementError("All brokers are currently fenced.")
    if replication_factor > racks.total:
        raise PlacementError(
            f"The target replication factor of {replication_factor} cannot be reached because only "
            f"{racks.total} broker(s) are registered."
        )
    return [racks.place(replication_factor) for _ in range(num_partitions)]
