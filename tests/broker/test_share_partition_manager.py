"""SharePartitionManager (broker/share/share_partition_manager.py) against stand-ins for the replica manager and the
persister: initialization from ReadShareGroupState (start offset -1 resolved by ``share.auto.offset.reset``), a
failed initialization retried by the next request, lost leadership dropping the share partition, writes sent in
the order issued and answered after they complete, and a release waking a parked fetch (Kafka's
SharePartitionManagerTest cases named in each docstring, in their shape)."""

from __future__ import annotations

import asyncio

from broker.clock import ManualClock
from broker.replication.replica_manager import FetchWaiters
from broker.share.share_partition_manager import SharePartitionManager
from cluster.share.share_partition import RecordState
from cluster.share.share_session import ShareSession, ShareSessionKey
from protocol.errors import ErrorCode as E
from protocol.generated.messages import ReadShareGroupStateResponse, WriteShareGroupStateResponse
from protocol.generated.messages import read_share_group_state_response as rsr
from protocol.generated.messages import write_share_group_state_response as wsr

TID = b"\x07" * 16


class _Config:
    values: dict = {}

    def get(self, key):
        return None


class _Log:
    log_start_offset = 0
    high_watermark = 42


class _Info:
    leader, leader_epoch = 1, 3


class _Part:
    leader_epoch = 3
    info = _Info()
    log = _Log()

    def __init__(self):
        self.leader = True

    def is_leader(self, node_id):
        return self.leader


class _Replicas:
    def __init__(self):
        self.part = _Part()
        self.partitions = {("t", 0): self.part}
        self.fetch_waiters = FetchWaiters()

    def leader_partition(self, topic, index, current_leader_epoch=-1, require_leader=True):
        if not self.part.leader:
            return self.part, E.NOT_LEADER_OR_FOLLOWER
        return self.part, 0


class _Persister:
    def __init__(self, start_offset=-1, fail=0):
        self.start_offset = start_offset
        self.fail = fail
        self.reads = 0
        self.writes: list = []
        self.gate: asyncio.Event | None = None

    async def read(self, req):
        self.reads += 1
        if self.fail:
            self.fail -= 1
            raise ConnectionError("coordinator gone")
        p = req.topics[0].partitions[0]
        return ReadShareGroupStateResponse(results=[rsr.ReadStateResult(topic_id=req.topics[0].topic_id, partitions=[
            rsr.PartitionResult(partition=p.partition, state_epoch=1, start_offset=self.start_offset)])])

    async def write(self, req):
        self.writes.append(req)
        if self.gate is not None:
            await self.gate.wait()
        p = req.topics[0].partitions[0]
        return WriteShareGroupStateResponse(results=[wsr.WriteStateResult(topic_id=req.topics[0].topic_id, partitions=[
            wsr.PartitionResult(partition=p.partition)])])


def _manager(persister):
    replicas = _Replicas()
    return SharePartitionManager(1, _Config(), replicas, persister, ManualClock(), type("M", (), {"image": None})())


class _Batch:
    def __init__(self, base, last):
        self.base_offset, self.last_offset = base, last
        self.producer_id, self.is_transactional, self.is_control = -1, False, False


def test_initialized_from_the_persister_with_the_reset_offset():
    """testPendingInitializationShouldCompleteFetchRequest's shape: the first use reads the state; a start offset
    of -1 resolves by share.auto.offset.reset (latest: the high watermark)."""
    async def run():
        persister = _Persister()
        m = _manager(persister)
        entry, _part, code = await m.share_partition("g", TID, "t", 0)
        assert code == 0 and entry.sp.active and entry.sp.start_offset == 42 and entry.sp.state_epoch == 1
        again, _part, _ = await m.share_partition("g", TID, "t", 0)
        assert again is entry and persister.reads == 1
    asyncio.run(asyncio.wait_for(run(), 10))


def test_a_failed_initialization_is_retried_by_the_next_request():
    """testSharePartitionInitializationExceptions: the read fails, the request answers UNKNOWN_SERVER_ERROR and
    the partition is dropped; the next request reads again and succeeds."""
    async def run():
        persister = _Persister(start_offset=5, fail=1)
        m = _manager(persister)
        entry, _part, code = await m.share_partition("g", TID, "t", 0)
        assert (entry, code) == (None, E.UNKNOWN_SERVER_ERROR) and m.partitions == {}
        entry, _part, code = await m.share_partition("g", TID, "t", 0)
        assert code == 0 and entry.sp.start_offset == 5 and persister.reads == 2
    asyncio.run(asyncio.wait_for(run(), 10))


def test_lost_leadership_drops_and_fences_the_share_partition():
    """A partition no longer led here: the share state goes (fenced, waiting fetches woken) and requests answer
    NOT_LEADER_OR_FOLLOWER."""
    async def run():
        m = _manager(_Persister(start_offset=0))
        entry, part, _ = await m.share_partition("g", TID, "t", 0)
        woken = m.waiters.register([("t", 0)])
        part.leader = False
        m.check_leadership()
        assert woken.done() and m.partitions == {} and entry.sp.partition_state.name == "FENCED"
        assert (await m.share_partition("g", TID, "t", 0))[2] == E.NOT_LEADER_OR_FOLLOWER
    asyncio.run(asyncio.wait_for(run(), 10))


def test_writes_are_answered_once_done_in_order_and_a_release_wakes_fetches():
    """testAcknowledgeCompletesDelayedShareFetchRequest / testReleaseSessionCompletesDelayedShareFetchRequest in
    their shape: the acknowledgement answers only when its write completed, a second write waits for the first, and
    releasing a session's records wakes the fetches parked on the partition."""
    async def run():
        persister = _Persister(start_offset=0)
        m = _manager(persister)
        entry, _part, _ = await m.share_partition("g", TID, "t", 0)
        sp = entry.sp
        got = sp.acquire("a", [_Batch(0, 4), _Batch(5, 9)], fetch_offset=0, max_fetch_records=100, batch_size=100,
                         now=m.clock.now_ms())
        assert [(r.first_offset, r.last_offset) for r in got.records] == [(0, 9)]
        persister.gate = asyncio.Event()
        from cluster.share.share_partition import AcknowledgementBatch
        first = asyncio.ensure_future(m.acknowledge(entry, "a", [AcknowledgementBatch(0, 4, (1,))]))
        second = asyncio.ensure_future(m.acknowledge(entry, "a", [AcknowledgementBatch(5, 5, (1,))]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(persister.writes) == 1 and not first.done()  # the second waits for the first's answer
        assert sp.record_state(0)[0] is RecordState.ACKNOWLEDGED and sp.has_ongoing_transition(0)
        persister.gate.set()
        assert await first == 0 and await second == 0
        assert [w.topics[0].partitions[0].state_batches[0].first_offset for w in persister.writes] == [0, 5]
        assert sp.start_offset == 6
        parked = m.waiters.register([("t", 0)])
        await m.release_session(ShareSession(ShareSessionKey("g", "a"), [(TID, 0)], 1, "conn"))
        assert parked.done()
        assert sp.record_state(6)[:2] == (RecordState.AVAILABLE, 0)  # released: the delivery not counted
    asyncio.run(asyncio.wait_for(run(), 10))


def test_a_fenced_write_drops_the_state_and_the_next_request_reads_it_again():
    """A write answered FENCED_STATE_EPOCH (a newer state epoch: the group's offsets were reset meanwhile): the
    acknowledgement answers NOT_LEADER_OR_FOLLOWER (fetchPersisterError), the share partition is fenced, the next
    request drops it and reads the state again."""
    async def run():
        persister = _Persister(start_offset=0)
        m = _manager(persister)
        entry, _part, _ = await m.share_partition("g", TID, "t", 0)
        entry.sp.acquire("a", [_Batch(0, 1)], fetch_offset=0, max_fetch_records=10, batch_size=10,
                         now=m.clock.now_ms())

        async def fenced(req):
            p = req.topics[0].partitions[0]
            return WriteShareGroupStateResponse(results=[wsr.WriteStateResult(topic_id=TID, partitions=[
                wsr.PartitionResult(partition=p.partition, error_code=E.FENCED_STATE_EPOCH)])])
        persister.write = fenced
        from cluster.share.share_partition import AcknowledgementBatch
        assert await m.acknowledge(entry, "a", [AcknowledgementBatch(0, 1, (1,))]) == E.NOT_LEADER_OR_FOLLOWER
        assert (await m.share_partition("g", TID, "t", 0))[2] == E.NOT_LEADER_OR_FOLLOWER
        again, _part, code = await m.share_partition("g", TID, "t", 0)
        assert code == 0 and again is not entry and persister.reads == 2
    asyncio.run(asyncio.wait_for(run(), 10))
