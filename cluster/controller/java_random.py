"""java.util.Random's integer and shuffle semantics over any source of random bits.

Kafka's replica placer draws ``nextInt(bound)`` and ``Collections.shuffle``; reproducing those two exactly
lets Kafka's own placement tests (with its deterministic MockRandom) run unchanged against ours, while a
broker feeds real randomness through the same methods.
"""

from __future__ import annotations

from typing import Callable, MutableSequence, Protocol


class JavaRandom(Protocol):
    def next_int(self, bound: int) -> int: ...

    def shuffle(self, items: MutableSequence) -> None: ...


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


class BitsRandom:
    """Java's ``nextInt(bound)`` and ``Collections.shuffle`` over ``next_bits(n)`` (Random.next)."""

    def __init__(self, next_bits: Callable[[int], int]) -> None:
        self.next_bits = next_bits

    def next_int(self, bound: int) -> int:
        if bound <= 0:
            raise ValueError("bound must be positive")
        r = self.next_bits(31)
        m = bound - 1
        if bound & m == 0:  # a power of two
            return (bound * r) >> 31
        u = r
        while True:
            r = u % bound
            if _int32(u - r + m) >= 0:  # Java's int overflow test: reject the biased top of the range
                return r
            u = self.next_bits(31)

    def shuffle(self, items: MutableSequence) -> None:
        for i in range(len(items), 1, -1):
            j = self.next_int(i)
            items[i - 1], items[j] = items[j], items[i - 1]


def from_python_random(rng) -> BitsRandom:
    """A broker's placer randomness: ``rng.getrandbits`` (random.Random or SystemRandom)."""
    return BitsRandom(rng.getrandbits)


class MockRandom(BitsRandom):
    """Kafka's org.apache.kafka.server.util.MockRandom: a fixed LCG, for deterministic tests."""

    def __init__(self, state: int = 17) -> None:
        self.state = state
        super().__init__(self._next)

    def _next(self, bits: int) -> int:
        self.state = (self.state * 2862933555777941757 + 3037000493) & 0xFFFFFFFFFFFFFFFF
        return _int32(self.state >> (64 - bits))
