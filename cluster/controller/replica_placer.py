"""Kafka's StripedReplicaPlacer: rack-aware, striped replica placement for new partitions.

Each partition's leader is an unfenced broker taken round-robin over the racks; the other replicas come
from the following racks, unfenced brokers before fenced ones; once every unfenced broker has led a
partition the racks and brokers are reshuffled so placements do not repeat. The same algorithm (and the
same draws from a java.util.Random-like source) as Kafka, so Kafka's placement tests apply unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from cluster.controller.java_random import JavaRandom


class InvalidReplicationFactor(Exception):
    """INVALID_REPLICATION_FACTOR, with Kafka's message."""


@dataclasses.dataclass(frozen=True)
class UsableBroker:
    id: int
    rack: str | None
    fenced: bool


class BrokerList:
    """The brokers of one rack and fencing state, handed out from a rotating offset (one pass per epoch)."""

    def __init__(self) -> None:
        self.brokers: list[int] = []
        self.index = 0
        self.offset = 0
        self.epoch = 0

    def add(self, broker: int) -> "BrokerList":
        self.brokers.append(broker)
        return self

    def initialize(self, random: JavaRandom) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = random.next_int(len(self.brokers))

    def shuffle(self, random: JavaRandom) -> None:
        random.shuffle(self.brokers)

    def size(self) -> int:
        return len(self.brokers)

    def next(self, epoch: int) -> int:
        """The next broker of this pass, or -1 once every broker was handed out in ``epoch``."""
        if not self.brokers:
            return -1
        if self.epoch != epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return -1
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


class Rack:
    def __init__(self) -> None:
        self.fenced = BrokerList()
        self.unfenced = BrokerList()

    def initialize(self, random: JavaRandom) -> None:
        self.fenced.initialize(random)
        self.unfenced.initialize(random)

    def shuffle(self, random: JavaRandom) -> None:
        self.fenced.shuffle(random)
        self.unfenced.shuffle(random)

    def next_unfenced(self, epoch: int) -> int:
        return self.unfenced.next(epoch)

    def next(self, epoch: int) -> int:
        result = self.unfenced.next(epoch)
        return result if result >= 0 else self.fenced.next(epoch)


def _java_string_hash(s: str) -> int:
    data = s.encode("utf-16-be")  # Java strings hash their UTF-16 code units
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_map_order(keys: list[str | None]) -> list[str | None]:
    """The iteration order of a java.util.HashMap<Optional<String>, _> holding ``keys`` (inserted in this
    order): by bucket of the spread hash, insertion order within a bucket. Kafka initialises the racks in
    that order, which decides which rack takes which random draw."""
    capacity = 16
    while len(keys) > capacity * 0.75:
        capacity *= 2

    def bucket(key: str | None) -> int:
        h = 0 if key is None else _java_string_hash(key)
        return (h ^ (h >> 16)) & (capacity - 1)

    return [k for _, _, k in sorted((bucket(k), i, k) for i, k in enumerate(keys))]


class RackList:
    def __init__(self, random: JavaRandom, brokers: Iterable[UsableBroker]) -> None:
        self.random = random
        self.racks: dict[str | None, Rack] = {}
        self.rack_names: list[str | None] = []
        total = unfenced = 0
        for broker in brokers:
            rack = self.racks.get(broker.rack)
            if rack is None:
                self.rack_names.append(broker.rack)
                rack = self.racks[broker.rack] = Rack()
            if broker.fenced:
                rack.fenced.add(broker.id)
            else:
                unfenced += 1
                rack.unfenced.add(broker.id)
            total += 1
        self._hash_order = java_hash_map_order(list(self.rack_names))
        for name in self._hash_order:
            self.racks[name].initialize(random)
        self.rack_names.sort(key=lambda n: (n is not None, n or ""))  # OptionalStringComparator: empty first
        self.num_total_brokers = total
        self.num_unfenced_brokers = unfenced
        self.epoch = 0
        self.offset = random.next_int(len(self.rack_names)) if self.rack_names else 0

    def place(self, replication_factor: int) -> list[int]:
        _check_positive(replication_factor)
        _check_enough(replication_factor, self.num_total_brokers)
        _check_unfenced(self.num_unfenced_brokers)
        if self.epoch == self.num_unfenced_brokers and self.num_unfenced_brokers > 1:
            self.shuffle()
            self.epoch = 0
        if self.offset == len(self.rack_names):
            self.offset = 0
        brokers: list[int] = []
        first_rack = self.offset
        while True:  # the leader: the first rack (from the offset) with an unfenced broker left this epoch
            result = self.racks[self.rack_names[first_rack]].next_unfenced(self.epoch)
            if result >= 0:
                brokers.append(result)
                break
            first_rack = (first_rack + 1) % len(self.rack_names)
        rack_index = self.offset
        for _ in range(1, replication_factor):
            result = -1
            while result < 0:
                if rack_index == first_rack:
                    first_rack = -1  # skip the leader's rack once
                else:
                    result = self.racks[self.rack_names[rack_index]].next(self.epoch)
                rack_index = (rack_index + 1) % len(self.rack_names)
            brokers.append(result)
        self.epoch += 1
        self.offset += 1
        return brokers

    def shuffle(self) -> None:
        self.random.shuffle(self.rack_names)
        for name in self._hash_order:
            self.racks[name].shuffle(self.random)


def _check_positive(rf: int) -> None:
    if rf <= 0:
        raise InvalidReplicationFactor(f"Invalid replication factor {rf}: the replication factor must be positive.")


def _check_unfenced(num_unfenced: int) -> None:
    if num_unfenced == 0:
        raise InvalidReplicationFactor("All brokers are currently fenced.")


def _check_enough(rf: int, num_total: int) -> None:
    if rf > num_total:
        raise InvalidReplicationFactor(f"The target replication factor of {rf} cannot be reached because only "
                                       f"{num_total} broker(s) are registered.")


def place(random: JavaRandom, num_partitions: int, replication_factor: int,
          brokers: Iterable[UsableBroker]) -> list[list[int]]:
    """StripedReplicaPlacer.place: replica lists for ``num_partitions`` new partitions; raises
    InvalidReplicationFactor with Kafka's message."""
    racks = RackList(random, brokers)
    _check_positive(replication_factor)
    _check_unfenced(racks.num_unfenced_brokers)
    _check_enough(replication_factor, racks.num_total_brokers)
    return [racks.place(replication_factor) for _ in range(num_partitions)]
