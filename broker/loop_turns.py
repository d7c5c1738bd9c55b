"""Long work on the event loop, in turns: a generator does the work and pauses (a bare ``yield``) every so many
items; ``in_turns`` gives the loop a turn at each pause, so a change of thousands of partitions does not hold every
request up (issue 31: event-loop lag while 10,000 partitions are created), and ``at_once`` runs it through."""

from __future__ import annotations

import asyncio
from typing import Generator, TypeVar

T = TypeVar("T")

ITEMS_PER_TURN = 500  # partitions handled between two turns of the loop


async def in_turns(steps: Generator[None, None, T]) -> T:
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        await asyncio.sleep(0)


async def turn_after(items: int) -> None:
    """A turn for the loop after a step over ``items`` partitions, when that is many: a request of thousands of
    partitions runs as several steps of a few milliseconds each, not one (a small one runs straight through)."""
    if items >= ITEMS_PER_TURN:
        await asyncio.sleep(0)


def at_once(steps: Generator[None, None, T]) -> T:
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
