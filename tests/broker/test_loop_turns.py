"""broker/loop_turns.py: long work in turns lets other tasks run at each pause, and gives the same result as
running it through at once."""

from __future__ import annotations

import asyncio

from broker.loop_turns import at_once, in_turns


def _work(n: int, per_turn: int, done: list[int]):
    total = 0
    for i in range(n):
        if i and i % per_turn == 0:
            yield
        total += i
        done.append(i)
    return total


def test_other_tasks_run_between_turns_and_the_result_is_the_same():
    async def scenario():
        done: list[int] = []
        seen: list[int] = []  # how far the work was each time the other task ran

        async def other():
            for _ in range(10):
                seen.append(len(done))
                await asyncio.sleep(0)

        side = asyncio.ensure_future(other())
        await asyncio.sleep(0)
        total = await in_turns(_work(2000, 500, done))
        await side
        return total, seen

    total, seen = asyncio.run(scenario())
    assert total == sum(range(2000)) == at_once(_work(2000, 500, []))
    assert [s for s in seen if 0 < s < 2000] == [500, 1000, 1500]  # it ran at each pause, between the turns
