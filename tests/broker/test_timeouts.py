"""broker.timeouts.wait_for: a cancellation that arrives in the loop turn the awaited future completes in still
ends the waiting task (Python 3.11's asyncio.wait_for returned the result instead: a stopped fetch loop ran on)."""

from __future__ import annotations

import asyncio

import pytest

from broker.timeouts import wait_for


def test_a_cancel_in_the_turn_the_future_completes_is_not_swallowed():
    async def main():
        fut = asyncio.get_running_loop().create_future()
        rounds = []

        async def loop_until_cancelled():
            while len(rounds) < 3:  # bounded: a swallowed cancel shows as a third round
                rounds.append(await wait_for(fut if not rounds else asyncio.sleep(0.01, "again"), 5))

        task = asyncio.ensure_future(loop_until_cancelled())
        await asyncio.sleep(0.01)  # the task waits on fut
        fut.set_result("answer")  # the answer and the stop in one loop turn
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return rounds

    assert asyncio.run(main()) == []


def test_the_timeout_and_the_result_pass_through():
    async def main():
        fut = asyncio.get_running_loop().create_future()
        with pytest.raises(TimeoutError):
            await wait_for(fut, 0.01)
        assert fut.cancelled()  # as asyncio.wait_for: the awaited future is cancelled on timeout
        done = asyncio.get_running_loop().create_future()
        done.set_result(7)
        assert await wait_for(done, 0) == 7  # already done: no time needed
        assert await wait_for(asyncio.sleep(0, 8), None) == 8

    asyncio.run(main())
