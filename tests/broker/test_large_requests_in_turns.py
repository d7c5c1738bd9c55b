"""Requests of thousands of partitions give the event loop turns (issue 31: event-loop lag ≤ 100 ms while 10,000
partitions are created): the leader's Fetch handler between its steps over a large session, the follower's
fetcher while it builds a request and applies an answer, every ``ITEMS_PER_TURN`` partitions; a small request
runs straight through."""

from __future__ import annotations

import asyncio
import types

import pytest

from broker.loop_turns import ITEMS_PER_TURN
from broker.replication.replica_fetcher import ReplicaFetcher, ReplicaFetcherManager
from broker.replication.replica_manager import Partition
from cluster.metadata_image import PartitionInfo
from protocol.generated.messages import FetchResponse
from protocol.generated.messages.fetch_response import FetchableTopicResponse, PartitionData
from tests.broker.test_fetch_quiet_partitions import _cluster, _request
from tests.broker.test_replica_fetcher import NOW, _Replicas
from broker.clock import ManualClock

TOPIC = b"\x05" * 16


@pytest.fixture(autouse=True)
def current_loop():
    """Each test on a current loop of its own: a module run before may have left none set (its fixture's
    ``set_event_loop(None)``), and then ``get_event_loop`` raises.  Cancelled tasks get their turn before the close."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    asyncio.set_event_loop(None)


async def _turns_while(work) -> tuple[object, int]:
    """``work``'s result and how many turns a task beside it got meanwhile."""
    turns = 0
    done = False

    async def beside():
        nonlocal turns
        while not done:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(beside())
    await asyncio.sleep(0)
    turns = 0
    try:
        return await work, turns
    finally:
        done = True
        await task


def test_a_fetch_of_a_large_session_gives_the_loop_turns_and_a_small_one_hardly_any(tmp_path, monkeypatch):
    ctx, rm, _, _ = _cluster(tmp_path)  # two partitions
    loop = asyncio.get_event_loop_policy().get_event_loop()
    _, small_turns = loop.run_until_complete(_turns_while(_request(ctx, 0, 0, {0: 3, 1: 3})))

    # the same fetch with ITEMS_PER_TURN at 1: each step over the session is followed by a turn
    monkeypatch.setattr("broker.apis.k01_fetch.turn_after", _turn_after_every(1))
    answer, large_turns = loop.run_until_complete(_turns_while(_request(ctx, 0, 0, {0: 3, 1: 3})))
    assert answer.error_code == 0 and len(answer.responses[0].partitions) == 2
    assert small_turns <= 1 and large_turns >= 3


def _turn_after_every(items_per_turn: int):
    async def turn_after(items: int) -> None:
        if items >= items_per_turn:
            await asyncio.sleep(0)
    return turn_after


def _fetcher(n: int) -> tuple[ReplicaFetcher, dict]:
    manager = ReplicaFetcherManager(2, _Replicas(), ManualClock(NOW), "PLAINTEXT", lambda: 5, {})
    fetcher = ReplicaFetcher(manager, 1, "127.0.0.1", 1)
    fetcher.task.cancel()
    info = PartitionInfo(0, (1, 2), (1, 2), 1, 3, 3)
    parts = {}
    for i in range(n):
        lg = types.SimpleNamespace(log_end_offset=7, log_start_offset=0, latest_epoch=3, high_watermark=5)
        lg.update_high_watermark = lambda hw, lg=lg: setattr(lg, "high_watermark", hw)
        parts[("t", i)] = Partition("t", i, TOPIC, lg, info)
    fetcher.partitions = dict(parts)
    fetcher.session.session_topic_names = {TOPIC: "t"}
    return fetcher, parts


def _pauses(steps) -> tuple[int, object]:
    pauses = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return pauses, done.value
        pauses += 1


def test_the_follower_builds_a_request_of_thousands_of_partitions_in_turns():
    n = 3 * ITEMS_PER_TURN + 1
    fetcher, parts = _fetcher(n)
    pauses, data = _pauses(fetcher._build(parts))
    assert pauses == 3 and len(data.to_send) == n
    assert {pf.fetch_offset for pf in data.to_send.values()} == {7}
    small, _ = _fetcher(ITEMS_PER_TURN - 1)
    assert _pauses(small._build(small.partitions))[0] == 0


def test_the_follower_applies_an_answer_of_thousands_of_partitions_in_turns_reading_each_after_a_pause():
    n = 2 * ITEMS_PER_TURN + 1
    fetcher, parts = _fetcher(n)
    _, data = _pauses(fetcher._build(parts))
    answer = FetchResponse(responses=[FetchableTopicResponse(topic_id=TOPIC, partitions=[
        PartitionData(partition_index=i, high_watermark=9, log_start_offset=0) for i in range(n)])])
    steps = fetcher._process(parts, data.session_partitions, answer)
    next(steps)  # paused after ITEMS_PER_TURN partitions: the last one stops being followed meanwhile
    del fetcher.partitions[("t", n - 1)]
    pauses, backoff = _pauses(steps)
    assert pauses == 1 and backoff is False
    # the leader's high watermark 9: ours moves to our log end 7, two behind; the one no longer followed is left
    assert [(parts[("t", i)].follower_lag, parts[("t", i)].log.high_watermark) for i in range(n)] == \
        [(2, 7)] * (n - 1) + [(-1, 5)]  # -1: never fetched
