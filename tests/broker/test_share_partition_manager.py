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
    epoch_start_offset = 0
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
    acknowledgement answers NOT_LEADER_OR_FOLLOWER (fetchPersisterError), the share partition is fenced and leaves
    the cache at once (fencedSharePartitionHandler): the next request reads the state again."""
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
        assert m.partitions == {} and entry.sp.partition_state.name == "FENCED"
        again, _part, code = await m.share_partition("g", TID, "t", 0)
        assert code == 0 and again is not entry and persister.reads == 2
    asyncio.run(asyncio.wait_for(run(), 10))


def test_a_fenced_lock_expiry_write_is_ignored_and_the_next_acknowledgement_fences():
    """SharePartition.releaseAcquisitionLockOnTimeout: the expiry's WriteShareGroupState failing (here
    FENCED_STATE_EPOCH or FENCED_LEADER_EPOCH) is only logged, the records stay Available and the share partition
    stays cached; the next acknowledgement's write, fenced too, answers NOT_LEADER_OR_FOLLOWER and fences it
    (fencedSharePartitionHandler)."""
    from cluster.share.share_partition import AcknowledgementBatch

    async def run():
        for fenced_code in (E.FENCED_STATE_EPOCH, E.FENCED_LEADER_EPOCH):
            persister = _Persister(start_offset=0)
            m = _manager(persister)
            entry, _part, _ = await m.share_partition("g", TID, "t", 0)
            sp = entry.sp
            sp.acquire("a", [_Batch(0, 1)], fetch_offset=0, max_fetch_records=10, batch_size=10,
                       now=m.clock.now_ms())

            async def fenced(req, code=fenced_code):
                persister.writes.append(req)
                p = req.topics[0].partitions[0]
                return WriteShareGroupStateResponse(results=[wsr.WriteStateResult(topic_id=TID, partitions=[
                    wsr.PartitionResult(partition=p.partition, error_code=code)])])
            persister.write = fenced
            m.clock.advance(sp.record_lock_duration_ms)
            m.expire_locks(m.clock.now_ms())
            assert len(m._background) == 1
            await asyncio.wait(list(m._background))
            assert len(persister.writes) == 1, fenced_code  # the expiry's write, answered fenced
            assert sp.active and m.partitions == {("g", TID, 0): entry}, fenced_code
            assert sp.record_state(0)[:2] == (RecordState.AVAILABLE, 1)
            assert (await m.share_partition("g", TID, "t", 0, create=False))[0] is entry
            sp.acquire("b", [_Batch(0, 1)], fetch_offset=0, max_fetch_records=10, batch_size=10,
                       now=m.clock.now_ms())
            assert await m.acknowledge(entry, "b", [AcknowledgementBatch(0, 1, (1,))]) == E.NOT_LEADER_OR_FOLLOWER
            assert m.partitions == {} and sp.partition_state.name == "FENCED", fenced_code
    asyncio.run(asyncio.wait_for(run(), 10))


def _read_answering(code):
    async def read(req):
        p = req.topics[0].partitions[0]
        return ReadShareGroupStateResponse(results=[rsr.ReadStateResult(topic_id=TID, partitions=[
            rsr.PartitionResult(partition=p.partition, error_code=code, start_offset=-1)])])
    return read


# (the persister's last answer for the partition, once its retries are spent) -> the client's answer
PERSISTER_ERRORS = [
    (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE),
    (E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_NOT_AVAILABLE),
    (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE),
    (E.GROUP_ID_NOT_FOUND, E.GROUP_ID_NOT_FOUND),
    (E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION),
    (E.FENCED_STATE_EPOCH, E.NOT_LEADER_OR_FOLLOWER),
    (E.FENCED_LEADER_EPOCH, E.NOT_LEADER_OR_FOLLOWER),
    (E.NETWORK_EXCEPTION, E.UNKNOWN_SERVER_ERROR),  # a lost connection, retried until the attempts ran out
    (E.REQUEST_TIMED_OUT, E.UNKNOWN_SERVER_ERROR),
    (E.INVALID_REQUEST, E.UNKNOWN_SERVER_ERROR),
]


def test_a_failed_read_answers_fetch_persister_errors_mapping_and_is_read_again():
    """testMaybeInitializeWithErrorPartitionResponse at the manager, with testSharePartitionInitializationExceptions'
    retry: ReadShareGroupState answered with each error gives Kafka 4.2's ``fetchPersisterError`` answer (not a
    catch-all UNKNOWN_SERVER_ERROR for a coordinator that moved or is loading), every request waiting on that read
    gets it, the partition leaves the cache (handleInitializationException) and the next request reads again."""
    async def run():
        for persisted, answered in PERSISTER_ERRORS:
            persister = _Persister(start_offset=7)
            m = _manager(persister)
            persister.read = _read_answering(persisted)
            both = await asyncio.gather(m.share_partition("g", TID, "t", 0), m.share_partition("g", TID, "t", 0))
            assert [(entry, code) for entry, _part, code in both] == [(None, answered)] * 2, persisted
            assert m.partitions == {}
            # an acknowledgement finds no share partition: never created nor read for it (SharePartitionManager
            # .acknowledge answers UNKNOWN_TOPIC_OR_PARTITION)
            assert (await m.share_partition("g", TID, "t", 0, create=False))[2] == E.UNKNOWN_TOPIC_OR_PARTITION
            del persister.read  # the class's: the coordinator is back
            entry, _part, code = await m.share_partition("g", TID, "t", 0)
            assert code == 0 and entry.sp.start_offset == 7 and persister.reads == 1, persisted
    asyncio.run(asyncio.wait_for(run(), 10))


def test_a_kafka_error_while_initializing_keeps_its_code():
    """Errors.forException over maybeInitialize's exception: the reset offset's lookup failing with a Kafka error
    (the leader moved under it) answers that error; any other exception UNKNOWN_SERVER_ERROR."""
    from protocol.errors import KafkaError

    async def run():
        m = _manager(_Persister(start_offset=-1))

        def moved(part, reset):
            raise KafkaError("moved", E.NOT_LEADER_OR_FOLLOWER)
        m._reset_offset = moved
        assert (await m.share_partition("g", TID, "t", 0))[2] == E.NOT_LEADER_OR_FOLLOWER

        def broken(part, reset):
            raise ValueError("bad")
        m._reset_offset = broken
        assert (await m.share_partition("g", TID, "t", 0))[2] == E.UNKNOWN_SERVER_ERROR
        assert m.partitions == {}
    asyncio.run(asyncio.wait_for(run(), 10))


def test_acknowledgement_write_errors_as_kafka_answers_them():
    """An acknowledgement whose WriteShareGroupState failed (the persister's retries spent) rolls back and answers
    fetchPersisterError's mapping; NOT_LEADER_OR_FOLLOWER (a fenced state or leader epoch), GROUP_ID_NOT_FOUND
    and UNKNOWN_TOPIC_OR_PARTITION also drop the share partition (fencedSharePartitionHandler: the next request
    reads the state again), the coordinator's unavailability or a lost connection keep it (the records are the
    member's again, to acknowledge once more)."""
    from cluster.share.share_partition import AcknowledgementBatch

    async def run():
        for persisted, answered in PERSISTER_ERRORS:
            persister = _Persister(start_offset=0)
            m = _manager(persister)
            entry, _part, _ = await m.share_partition("g", TID, "t", 0)
            entry.sp.acquire("a", [_Batch(0, 1)], fetch_offset=0, max_fetch_records=10, batch_size=10,
                             now=m.clock.now_ms())

            async def failing(req, code=persisted):
                p = req.topics[0].partitions[0]
                return WriteShareGroupStateResponse(results=[wsr.WriteStateResult(topic_id=TID, partitions=[
                    wsr.PartitionResult(partition=p.partition, error_code=code)])])
            persister.write = failing
            assert await m.acknowledge(entry, "a", [AcknowledgementBatch(0, 1, (1,))]) == answered, persisted
            if answered in (E.NOT_LEADER_OR_FOLLOWER, E.GROUP_ID_NOT_FOUND, E.UNKNOWN_TOPIC_OR_PARTITION):
                assert m.partitions == {} and entry.sp.partition_state.name == "FENCED", persisted
                assert (await m.share_partition("g", TID, "t", 0, create=False))[2] == E.UNKNOWN_TOPIC_OR_PARTITION
                del persister.write
                again, _part, code = await m.share_partition("g", TID, "t", 0)
                assert code == 0 and again is not entry and persister.reads == 2
            else:
                assert m.partitions and entry.sp.active, persisted
                assert entry.sp.record_state(0)[0] is RecordState.ACQUIRED  # rolled back: still the member's
                del persister.write
                assert await m.acknowledge(entry, "a", [AcknowledgementBatch(0, 1, (1,))]) == 0
                assert entry.sp.start_offset == 2
    asyncio.run(asyncio.wait_for(run(), 10))


def test_a_write_raising_answers_unknown_server_error_and_keeps_the_partition():
    """The persister's future failing (Kafka wraps it in IllegalStateException: UNKNOWN_SERVER_ERROR) rolls the
    acknowledgement back; the share partition stays."""
    from cluster.share.share_partition import AcknowledgementBatch

    async def run():
        persister = _Persister(start_offset=0)
        m = _manager(persister)
        entry, _part, _ = await m.share_partition("g", TID, "t", 0)
        entry.sp.acquire("a", [_Batch(0, 1)], fetch_offset=0, max_fetch_records=10, batch_size=10,
                         now=m.clock.now_ms())

        async def raising(req):
            raise RuntimeError("persister bug")
        persister.write = raising
        assert await m.acknowledge(entry, "a", [AcknowledgementBatch(0, 1, (1,))]) == E.UNKNOWN_SERVER_ERROR
        assert entry.sp.active and entry.sp.record_state(0)[0] is RecordState.ACQUIRED
        assert (await m.share_partition("g", TID, "t", 0, create=False))[0] is entry
    asyncio.run(asyncio.wait_for(run(), 10))


def test_a_partition_dropped_while_its_state_is_read_answers_not_leader():
    """Leadership lost while the first request waits on the share partition's read: that request answers
    NOT_LEADER_OR_FOLLOWER (not a catch-all UNKNOWN_SERVER_ERROR), and the read's late answer loads nothing."""
    async def run():
        persister = _Persister(start_offset=0)
        gate = asyncio.Event()
        plain = persister.read

        async def slow(req):
            await gate.wait()
            return await plain(req)
        persister.read = slow
        m = _manager(persister)
        first = asyncio.ensure_future(m.share_partition("g", TID, "t", 0))
        for _ in range(3):
            await asyncio.sleep(0)
        (entry,) = m.partitions.values()
        m.replicas.part.leader = False
        assert (await m.share_partition("g", TID, "t", 0))[2] == E.NOT_LEADER_OR_FOLLOWER
        gate.set()
        assert (await first)[2] == E.NOT_LEADER_OR_FOLLOWER
        assert m.partitions == {} and entry.sp.partition_state.name == "FENCED"
    asyncio.run(asyncio.wait_for(run(), 10))


def test_a_session_reopened_at_epoch_0_keeps_the_members_records():
    """Kafka 4.2's newContext at INITIAL_EPOCH for a member whose session exists: the old session is removed and a
    new one opened, nothing released (releaseSession runs for the final epoch and for a dropped connection only):
    the records the member acquired stay its own and it acknowledges them in the new session, as a client that
    lost its session does. The old connection's later drop spares the new session and the records."""
    from cluster.share.share_partition import AcknowledgementBatch

    async def run():
        m = _manager(_Persister(start_offset=0))
        key = ShareSessionKey("g", "a")
        assert not m.sessions.new_context("g", [(TID, 0)], [], "a", 0, False, "c1").subsequent
        entry, _part, _ = await m.share_partition("g", TID, "t", 0)
        entry.sp.acquire("a", [_Batch(0, 4)], fetch_offset=0, max_fetch_records=10, batch_size=10,
                         now=m.clock.now_ms())
        parked = m.waiters.register([("t", 0)])
        reopened = m.sessions.new_context("g", [(TID, 0)], [], "a", 0, False, "c2")
        assert not reopened.subsequent and m.sessions.get(key).epoch == 1
        assert m.sessions.get(key).connection_id == "c2" and m.sessions.size() == 1
        m.on_disconnect("c1")
        for _ in range(5):
            await asyncio.sleep(0)
        assert m.sessions.get(key) is not None and not parked.done()
        assert [entry.sp.record_state(o) for o in (0, 4)] == [(RecordState.ACQUIRED, 1, "a")] * 2
        m.sessions.acknowledge_session_update("g", "a", 1)
        assert await m.acknowledge(entry, "a", [AcknowledgementBatch(0, 4, (1,))]) == 0
        assert entry.sp.start_offset == 5
    asyncio.run(asyncio.wait_for(run(), 10))


def test_a_fetch_stops_waiting_for_a_slow_read_at_its_max_wait():
    """handleInitializationException skips LEADER_NOT_AVAILABLE: a ShareFetch whose max wait ends while the share
    partition's state is still being read (the share coordinator failing over: the persister retries for seconds)
    answers without it rather than waiting for the read; the read goes on and a later request finds the partition
    initialized. An acknowledgement (no limit) waits for the read."""
    async def run():
        persister = _Persister(start_offset=3)
        gate = asyncio.Event()
        plain = persister.read

        async def slow(req):
            await gate.wait()
            return await plain(req)
        persister.read = slow
        m = _manager(persister)
        assert await m.share_partition("g", TID, "t", 0, wait_s=0.01) == (None, m.replicas.part,
                                                                          E.LEADER_NOT_AVAILABLE)
        (entry,) = m.partitions.values()
        assert entry.sp.partition_state.name == "INITIALIZING" and not entry.ready.done()
        acking = asyncio.ensure_future(m.share_partition("g", TID, "t", 0, create=False))
        for _ in range(3):
            await asyncio.sleep(0)
        assert not acking.done()
        gate.set()
        assert (await acking)[0] is entry and entry.sp.start_offset == 3
        assert (await m.share_partition("g", TID, "t", 0, wait_s=0))[0] is entry and persister.reads == 1
    asyncio.run(asyncio.wait_for(run(), 10))


def test_by_duration_with_no_record_in_its_window_is_offset_not_available_until_one_is():
    """SharePartition.startOffsetDuringInitialization with by_duration: ShareFetchUtils.offsetForTimestamp finds no
    offset below the high watermark whose record is at most the duration old, throws OFFSET_NOT_AVAILABLE; the
    initialization fails, the share partition leaves the cache (handleInitializationException) and each later
    fetch reads the state again, until such a record is written and replicated."""
    from types import SimpleNamespace

    from cluster.groups.group_config import GROUP_RESOURCE
    from storage.file_records import TimestampAndOffset

    hour = 3_600_000

    class _TimedLog:
        log_start_offset, high_watermark = 0, 5
        records = [(o, 0) for o in range(5)]  # (offset, timestamp): all far older than an hour

        def fetch_offset_by_timestamp(self, target):
            return next((TimestampAndOffset(ts, o, 3) for o, ts in self.records if ts >= target), None)

    async def run():
        persister = _Persister(start_offset=-1)
        m = _manager(persister)
        m.metadata.image = SimpleNamespace(configs={(GROUP_RESOURCE, "g"): {"share.auto.offset.reset":
                                                                          "by_duration:PT1H"}})
        lg = m.replicas.part.log = _TimedLog()
        assert await m.share_partition("g", TID, "t", 0) == (None, m.replicas.part, E.OFFSET_NOT_AVAILABLE)
        assert m.partitions == {} and persister.reads == 1
        lg.records = lg.records + [(5, m.clock.now_ms() - hour // 2)]  # in the window, not yet below the HW
        assert (await m.share_partition("g", TID, "t", 0))[2] == E.OFFSET_NOT_AVAILABLE
        assert m.partitions == {} and persister.reads == 2
        lg.high_watermark = 6
        entry, _part, code = await m.share_partition("g", TID, "t", 0)
        assert (code, entry.sp.start_offset, persister.reads) == (0, 5, 3)
    asyncio.run(asyncio.wait_for(run(), 10))


def test_latest_on_a_new_leader_behind_its_epoch_start_is_offset_not_available_until_the_hw_gets_there():
    """offsetForLatestTimestamp goes through Partition.fetchOffsetForTimestamp: a new leader whose high watermark is
    still below its epoch's first offset answers OFFSET_NOT_AVAILABLE (maybeOffsetsError), the initialization fails
    and the next fetch reads the state again; once the high watermark reaches the epoch start, latest is it."""

    async def run():
        persister = _Persister(start_offset=-1)
        m = _manager(persister)
        part = m.replicas.part
        part.log = _Log()  # its own: the stand-in's class-level log is shared by the other tests
        part.log.high_watermark, part.epoch_start_offset = 4, 7
        assert await m.share_partition("g", TID, "t", 0) == (None, part, E.OFFSET_NOT_AVAILABLE)
        assert m.partitions == {} and persister.reads == 1
        part.log.high_watermark = 7
        entry, _part, code = await m.share_partition("g", TID, "t", 0)
        assert (code, entry.sp.start_offset, persister.reads) == (0, 7, 2)
    asyncio.run(asyncio.wait_for(run(), 10))
