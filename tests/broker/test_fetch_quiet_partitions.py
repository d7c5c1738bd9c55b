"""A follower's idle fetch session costs little per partition (issue 31, idle CPU): the Fetch handler skips the
partitions it read empty at the log's end while nothing about them moves, and records the in-sync follower as caught
up all the same, so an append after a long idle stretch does not shrink the ISR."""

from __future__ import annotations

import asyncio
import types

import pytest

from broker.apis import k01_fetch
from broker.clock import ManualClock
from broker.replication.fetch_session import FetchManager
from broker.replication.fetch_session.cache import FetchSessionCache
from broker.replication.replica_manager import Partition, ReplicaManager
from broker.replication.replica_state import FollowerState
from cluster.metadata_image import PartitionInfo
from protocol.generated.messages import FetchRequest
from protocol.generated.messages.fetch_request import FetchPartition, FetchTopic, ReplicaState
from protocol.record_codec import Record, build_batch
from storage.config import LogConfig
from storage.log import Log

TOPIC_ID = b"\x07" * 16
LAG_MAX_MS = 10_000
FOLLOWER, EPOCH = 2, 5


@pytest.fixture(autouse=True)
def event_loop_for_waiters():
    """The replica manager's waiters need a loop; each fetch runs to its answer on it."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    loop.close()
    asyncio.set_event_loop(None)


class _Metrics:
    def fetched(self, topic: str, size: int) -> None:
        pass


def _batch(n: int) -> bytearray:
    return bytearray(build_batch([Record(value=b"v%d" % i) for i in range(n)]))


def _cluster(tmp_path, isr=(1, FOLLOWER)):
    clock = ManualClock()
    rm = ReplicaManager(1, log_manager=None, now_ms=clock.now_ms, replica_lag_time_max_ms=LAG_MAX_MS)
    changes = []
    rm.alter_isr = lambda part, new_isr: changes.append((part.index, new_isr))
    # the follower's broker is registered and unfenced at the epoch its fetches carry
    rm.image = types.SimpleNamespace(brokers={FOLLOWER: types.SimpleNamespace(active=True, broker_epoch=EPOCH)})
    reads = []
    for index in range(2):
        log = Log.open(str(tmp_path / f"t-{index}"), LogConfig.from_props({}), now_ms=clock.now_ms())
        part = Partition("t", index, TOPIC_ID, log, PartitionInfo(index, (1, FOLLOWER), isr, 1, 0, 0))
        part.followers = {FOLLOWER: FollowerState(last_caught_up_ms=clock.now_ms())}
        rm.partitions[("t", index)] = part
        log.append_as_leader(_batch(3), 0, clock.now_ms())
        log.update_high_watermark(3)
        read = log.read
        log.read = lambda *a, _read=read, _i=index, **kw: (reads.append(_i), _read(*a, **kw))[1]
    image = types.SimpleNamespace(topics_by_id={TOPIC_ID: types.SimpleNamespace(name="t")})
    handles = types.SimpleNamespace(
        version=17, image=image, replicas=rm, clock=clock, metrics=_Metrics(), config={},
        fetch_sessions=FetchManager(FetchSessionCache(10, 120_000, num_shards=1)),
        handles=types.SimpleNamespace(authorizer=None))  # no authorizer: every fetch allowed
    return handles, rm, changes, reads


def _fetch(ctx, session_id: int, epoch: int, offsets: dict[int, int]):
    """One fetch by the follower, run to its answer (max_wait_ms 0) on the test's event loop."""
    loop = asyncio.get_event_loop_policy().get_event_loop()
    return loop.run_until_complete(_request(ctx, session_id, epoch, offsets))


async def _request(ctx, session_id: int, epoch: int, offsets: dict[int, int]):
    req = FetchRequest(replica_state=ReplicaState(replica_id=FOLLOWER, replica_epoch=EPOCH), max_wait_ms=0,
                       min_bytes=1, session_id=session_id, session_epoch=epoch,
                       topics=[FetchTopic(topic_id=TOPIC_ID, partitions=[
                           FetchPartition(partition=i, fetch_offset=o, current_leader_epoch=0, last_fetched_epoch=0,
                                          log_start_offset=0, partition_max_bytes=1 << 20)
                           for i, o in offsets.items()])] if offsets else [])
    return await k01_fetch.handle(ctx, req)


def _append(rm, index: int, n: int, now_ms: int) -> None:
    """A producer's append on the leader (acks=all: its completion waits for the follower; not awaited here)."""
    async def append():
        rm.append(rm.partitions[("t", index)], _batch(n), now_ms)
    asyncio.get_event_loop_policy().get_event_loop().run_until_complete(append())


def _answered(resp) -> dict[int, int]:
    return {p.partition_index: len(p.records or b"") for t in resp.responses for p in t.partitions}


def test_an_idle_session_reads_nothing_and_keeps_the_follower_caught_up(tmp_path):
    ctx, rm, changes, reads = _cluster(tmp_path)
    full = _fetch(ctx, 0, 0, {0: 3, 1: 3})  # the follower has everything: a session, both partitions quiet
    assert full.session_id > 0 and _answered(full) == {0: 0, 1: 0} and sorted(reads) == [0, 1]
    reads.clear()
    session, epoch = full.session_id, 1
    for _ in range(10):  # 20 s of idle fetches, twice replica.lag.time.max.ms
        ctx.clock.advance(2000)
        resp = _fetch(ctx, session, epoch, {})
        epoch += 1
        assert resp.error_code == 0 and _answered(resp) == {}
    assert reads == []  # nothing read partition by partition
    state = rm.partitions[("t", 0)].followers[FOLLOWER]
    assert state.last_caught_up_ms == state.last_fetch_ms == ctx.clock.now_ms()

    # an append after the idle stretch: the follower was caught up a moment ago, the ISR stays
    _append(rm, 0, 2, ctx.clock.now_ms())
    ctx.clock.advance(100)
    rm.maybe_shrink_isr()
    assert changes == []
    resp = _fetch(ctx, session, epoch, {})  # the moved partition is read again; the other stays quiet
    assert reads == [0] and _answered(resp)[0] > 0 and 1 not in _answered(resp)
    assert rm.partitions[("t", 0)].log.high_watermark == 3  # the follower has not fetched past 3 yet
    resp = _fetch(ctx, session, epoch + 1, {0: 5})
    assert rm.partitions[("t", 0)].log.high_watermark == 5 and _answered(resp) == {0: 0}


def test_a_follower_that_stops_fetching_still_leaves_the_isr_once_data_arrives(tmp_path):
    ctx, rm, changes, reads = _cluster(tmp_path)
    full = _fetch(ctx, 0, 0, {0: 3, 1: 3})
    ctx.clock.advance(LAG_MAX_MS + 1)  # no fetch meanwhile
    _append(rm, 0, 1, ctx.clock.now_ms())
    rm.maybe_shrink_isr()
    assert changes == [(0, (1,))]
    assert full.session_id > 0


def test_a_follower_out_of_the_isr_is_read_so_it_can_join(tmp_path):
    ctx, rm, changes, reads = _cluster(tmp_path, isr=(1,))
    full = _fetch(ctx, 0, 0, {0: 3, 1: 3})
    assert sorted(changes) == [(0, (1, FOLLOWER)), (1, (1, FOLLOWER))]  # caught up: both expand
    for part in rm.partitions.values():
        rm.isr_change_failed(part)  # the controller refused: the next fetch tries again
    reads.clear()
    _fetch(ctx, full.session_id, 1, {})
    assert sorted(reads) == [0, 1] and len(changes) == 4
