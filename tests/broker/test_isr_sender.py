"""The leader's ISR changes (IsrSender, Kafka's DefaultAlterPartitionManager): one pending change per partition,
at most one AlterPartition in flight carrying every pending change, nothing sent again while a request carrying it
is outstanding; a timeout or a top-level error leaves the changes for the next request. The answers as
Partition.handleAlterPartitionError takes them: committed; OPERATION_NOT_ATTEMPTED / INELIGIBLE_REPLICA (back to
the committed ISR, the next check proposes again); FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, unknown topic and
NEW_LEADER_ELECTED (the change stays pending until newer metadata replaces it); anything else (sent again)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.replication import isr_sender
from broker.replication.isr_sender import IsrChange, IsrChangeBatch, IsrSender
from broker.replication.replica_manager import Partition, ReplicaManager
from broker.replication.replica_state import FollowerState
from cluster.metadata_image import PartitionInfo
from protocol.errors import ErrorCode
from protocol.generated.messages import AlterPartitionResponse
from protocol.generated.messages.alter_partition_request import PartitionData as RequestPartition
from protocol.generated.messages.alter_partition_response import PartitionData, TopicData
from storage.config import LogConfig
from storage.log import Log

NOW = 1_700_000_000_000
TOPIC_ID = b"\x07" * 16


class _Controller:
    """Answers each request once the test releases it; ``codes`` per partition index (default 0)."""

    def __init__(self) -> None:
        self.requests = []
        self.codes: dict[int, int] = {}
        self.top_level = 0
        self.fail_with: Exception | None = None
        self.gate = asyncio.Event()
        self.gate.set()
        self.in_flight = 0
        self.max_in_flight = 0

    async def call(self, request):
        self.requests.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self.gate.wait()
            if self.fail_with is not None:
                raise self.fail_with
            topics = []
            for t in request.topics:
                topics.append(TopicData(topic_id=t.topic_id, partitions=[PartitionData(
                    partition_index=p.partition_index, error_code=self.codes.get(p.partition_index, 0), leader_id=1,
                    leader_epoch=p.leader_epoch, isr=[s.broker_id for s in p.new_isr_with_epochs],
                    partition_epoch=p.partition_epoch + 1) for p in t.partitions]))
            return AlterPartitionResponse(error_code=self.top_level, topics=topics if not self.top_level else [])
        finally:
            self.in_flight -= 1

    def sent(self) -> list[list[int]]:
        return [[p.partition_index for t in r.topics for p in t.partitions] for r in self.requests]


class _NoMetrics:
    def produced(self, topic, records, size):
        pass

    def rejected(self, topic, size):
        pass


class _Node:
    """A leader of ``n`` partitions of topic t (ISR 1,2 of replicas 1,2,3) with its IsrSender."""

    def __init__(self, tmp_path, n: int) -> None:
        self.rm = ReplicaManager(1, log_manager=None, now_ms=lambda: NOW, metrics=_NoMetrics())
        self.logs = []
        for i in range(n):
            lg = Log.open(str(tmp_path / f"t-{i}"), LogConfig.from_props({}), now_ms=NOW)
            self.logs.append(lg)
            part = Partition("t", i, TOPIC_ID, lg, PartitionInfo(i, (1, 2, 3), (1, 2), 1, 4, 7))
            part.followers = {r: FollowerState(last_caught_up_ms=NOW, broker_epoch=20 + r) for r in (2, 3)}
            self.rm.partitions[("t", i)] = part
        self.controller = _Controller()
        self.sender = IsrSender(1, self.rm, self.controller, lambda: 11)

    def part(self, i: int) -> Partition:
        return self.rm.partitions[("t", i)]

    def propose(self, i: int, isr=(1, 2, 3)) -> None:
        self.rm._submit_isr(self.part(i), isr)

    async def settle(self, seconds: float = 1.0) -> None:
        """Until nothing is pending or in flight (bounded)."""
        for _ in range(int(seconds / 0.01)):
            await asyncio.sleep(0.01)
            if not self.sender.batch.pending and self.sender.batch.in_flight is None:
                return

    async def close(self) -> None:
        await self.sender.stop()
        for lg in self.logs:
            lg.close()


def run(coro):
    asyncio.run(coro)


def test_changes_queued_behind_a_request_in_flight_go_together_in_the_next(tmp_path):
    async def scenario():
        node = _Node(tmp_path, 200)
        node.controller.gate.clear()
        node.propose(0)
        await asyncio.sleep(0.02)
        for i in range(1, 200):
            node.propose(i)
        await asyncio.sleep(0.05)
        assert node.controller.sent() == [[0]]  # the rest wait behind the one in flight
        node.controller.gate.set()
        await node.settle()
        assert node.controller.sent() == [[0], list(range(1, 200))]
        assert node.controller.max_in_flight == 1
        assert (node.rm.alter_partition_requests, node.rm.alter_partition_changes, node.rm.isr_expands) == (2, 200,
                                                                                                          200)
        sent = node.controller.requests[1].topics[0].partitions[0]
        assert (sent.leader_epoch, sent.partition_epoch) == (4, 7)
        assert [(s.broker_id, s.broker_epoch) for s in sent.new_isr_with_epochs] == [(1, 11), (2, 22), (3, 23)]
        await node.close()

    run(scenario())


def test_a_request_that_is_not_answered_leaves_its_changes_for_the_next(tmp_path, monkeypatch):
    monkeypatch.setattr(isr_sender, "RETRY_BACKOFF_S", 0.01)

    async def scenario():
        node = _Node(tmp_path, 3)
        node.controller.fail_with = asyncio.TimeoutError()
        for i in range(3):
            node.propose(i)
        await asyncio.sleep(0.1)
        assert len(node.controller.requests) >= 2 and node.controller.max_in_flight == 1
        assert all(sorted(s) == [0, 1, 2] for s in node.controller.sent()[1:])  # each retry carries all three
        assert all(node.part(i).pending_isr == (1, 2, 3) for i in range(3))
        node.controller.fail_with = None
        await node.settle()
        assert node.rm.isr_expands == 3 and not node.sender.batch.pending
        await node.close()

    run(scenario())


def test_a_top_level_error_is_retried_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(isr_sender, "RETRY_BACKOFF_S", 0.01)

    async def scenario():
        node = _Node(tmp_path, 2)
        node.controller.top_level = ErrorCode.STALE_BROKER_EPOCH
        node.propose(0)
        node.propose(1)
        await asyncio.sleep(0.05)
        node.controller.top_level = 0
        await node.settle()
        assert node.controller.sent()[-1] == [0, 1] and node.rm.isr_expands == 2
        assert node.rm.failed_isr_updates == 0
        await node.close()

    run(scenario())


@pytest.mark.parametrize("code, pending_kept, resent", [
    (ErrorCode.NEW_LEADER_ELECTED, True, False),
    (ErrorCode.FENCED_LEADER_EPOCH, True, False),
    (ErrorCode.INVALID_UPDATE_VERSION, True, False),
    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, True, False),
    (ErrorCode.OPERATION_NOT_ATTEMPTED, False, False),
    (ErrorCode.INELIGIBLE_REPLICA, False, False),
    (ErrorCode.UNKNOWN_SERVER_ERROR, True, True),
])
def test_partition_errors(tmp_path, monkeypatch, code, pending_kept, resent):
    monkeypatch.setattr(isr_sender, "RETRY_BACKOFF_S", 0.01)

    async def scenario():
        node = _Node(tmp_path, 2)
        node.controller.codes = {0: code}
        node.propose(0)
        node.propose(1)
        await asyncio.sleep(0.03)
        node.controller.codes = {}
        await node.settle()
        assert (node.part(0).pending_isr is not None) == pending_kept
        assert node.part(1).pending_isr == (1, 2, 3)  # committed: pending until the image shows it
        assert (sum(0 in s for s in node.controller.sent()) > 1) == resent
        assert node.rm.failed_isr_updates >= 1 and node.rm.isr_expands == (2 if resent else 1)
        await node.close()

    run(scenario())


def test_a_change_the_metadata_moved_past_is_never_sent(tmp_path):
    async def scenario():
        node = _Node(tmp_path, 2)
        node.controller.gate.clear()
        node.propose(0)
        await asyncio.sleep(0.02)
        node.propose(1)
        node.part(1).pending_isr = None  # an image moved past it (apply_image) while it waited
        node.controller.gate.set()
        await node.settle()
        assert node.controller.sent() == [[0]]
        await node.close()

    run(scenario())


def test_an_answer_about_a_replaced_change_is_ignored(tmp_path):
    async def scenario():
        node = _Node(tmp_path, 1)
        node.controller.gate.clear()
        node.controller.codes = {0: ErrorCode.OPERATION_NOT_ATTEMPTED}
        node.propose(0, (1, 2, 3))
        await asyncio.sleep(0.02)
        part = node.part(0)
        part.info = PartitionInfo(0, (1, 2, 3), (1, 2), 1, 4, 8)  # newer metadata ...
        node.rm.isr_change_failed(part)
        node.propose(0, (1,))  # ... and a newer proposal from it
        node.controller.codes = {}
        node.controller.gate.set()
        await node.settle()
        assert part.pending_isr == (1,)  # the refusal of the old change did not clear the new one
        assert node.controller.sent() == [[0], [0]]
        assert node.controller.requests[1].topics[0].partitions[0].partition_epoch == 8
        await node.close()

    run(scenario())


# ---- IsrChangeBatch against a model ------------------------------------------------------------------------------

class _Part:
    def __init__(self, index: int) -> None:
        self.topic_id, self.index = TOPIC_ID, index


def _change(index: int, n: int) -> IsrChange:
    return IsrChange(_Part(index), (n,), 0, RequestPartition(partition_index=index))


def _response(changes, answered) -> AlterPartitionResponse:
    return AlterPartitionResponse(topics=[TopicData(topic_id=TOPIC_ID, partitions=[
        PartitionData(partition_index=c.part.index) for c in changes if c.part.index in answered])])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["submit", "take", "fail", "answer", "stale"]), st.integers(0, 4),
                          st.sets(st.integers(0, 4))), max_size=60))
def test_batch_model(ops):
    """One request out at a time; every pending change is in the next one; a change leaves only when an answer
    names it or it went stale; at most one change per partition."""
    batch = IsrChangeBatch()
    current: dict[int, IsrChange] = {}  # the change each partition waits for (the model)
    stale: set[int] = set()
    out = None
    for n, (op, index, answered) in enumerate(ops):
        is_current = lambda c: current.get(c.part.index) is c  # noqa: E731
        if op == "submit":
            change = _change(index, n)
            if batch.submit(change, is_current):
                current[index] = change
                stale.discard(index)
            else:
                assert index in current and index not in stale
        elif op == "stale" and index in current:
            del current[index]
            stale.add(index)
        elif op == "take":
            taken = batch.take(is_current)
            if out is not None:
                assert taken is None
            elif taken is not None:
                assert {c.part.index for c in taken} == set(current) and all(current[c.part.index] is c for c in taken)
                out = taken
        elif op == "fail" and out is not None:
            batch.failed()
            out = None
        elif op == "answer" and out is not None:
            done = batch.answered(_response(out, answered))
            assert {c.part.index for c, _ in done} == {c.part.index for c in out if c.part.index in answered}
            for c, _ in done:
                if current.get(c.part.index) is c:
                    del current[c.part.index]
            out = None
        assert len(batch.pending) <= 5
        assert all(batch.pending.get((TOPIC_ID, i)) is c for i, c in current.items())


def test_a_shrink_counts_as_a_shrink_even_when_the_image_has_it_before_the_answer(tmp_path):
    """The metadata may publish the committed ISR before the AlterPartition answer arrives: the change is counted
    against the ISR it was proposed from, not the one the image holds by then."""
    async def scenario():
        node = _Node(tmp_path, 2)
        node.controller.gate.clear()
        node.propose(0, (1,))  # a shrink of (1, 2)
        node.propose(1, (1, 2, 3))  # an expansion
        await asyncio.sleep(0.02)
        node.part(0).info = PartitionInfo(0, (1, 2, 3), (1,), 1, 4, 8)  # the image got there first
        node.controller.gate.set()
        await node.settle()
        assert (node.rm.isr_shrinks, node.rm.isr_expands) == (1, 1)
        await node.close()
    run(scenario())
