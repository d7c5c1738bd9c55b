"""The share coordinator's adapter (broker/share/share_coordinator_service.py) over a fake partition log: Kafka's
ShareCoordinatorServiceTest cases that apply here (request validation, NOT_COORDINATOR for keys led elsewhere, an
inactive coordinator), records appended then replayed at their offsets and answered once committed, a load that
replays the log (an undecodable record skipped), record pruning and deleted topics."""

from __future__ import annotations

import asyncio
import struct

from broker.clock import ManualClock
from broker.config import BrokerConfig
from broker.quorum.metadata_publisher import MetadataPublisher
from broker.replication.replica_manager import AppendResult
from broker.share.share_coordinator_service import ShareCoordinatorService
from cluster.metadata_image import MetadataImage, PartitionInfo, TopicInfo
from cluster.share.share_coordinator import share_partition_key_string
from protocol.errors import ErrorCode
from protocol.generated.messages import WriteShareGroupStateRequest
from protocol.record_codec import Record, build_batch, decode_batch
from protocol.topics import SHARE_GROUP_STATE_TOPIC
from storage.log import LogAppendInfo
from tests.share.share_rpcs import delete, initialize, only, read, read_batches, summary, write

TID = bytes(range(1, 17))
GROUP = "g"
PARTITIONS = 4  # __share_group_state's


class _Config:
    min_insync_replicas = 1


class _Log:
    """Batches at consecutive offsets, a high watermark the test moves, DeleteRecords' log start offset."""

    topic, partition = SHARE_GROUP_STATE_TOPIC, 0

    def __init__(self) -> None:
        self.batches: list[bytearray] = []
        self.log_end_offset = 0
        self.high_watermark = 0
        self.log_start_offset = 0
        self.config = _Config()

    def append(self, raw: bytearray) -> LogAppendInfo:
        header, records = decode_batch(bytes(raw))
        raw[0:8] = struct.pack(">q", self.log_end_offset)
        first = self.log_end_offset
        self.log_end_offset += header.last_offset_delta + 1
        self.batches.append(raw)
        return LogAppendInfo(first, self.log_end_offset - 1, 0, 0, -1, 0, len(raw), 1)

    def iter_batches(self, start):
        for raw in self.batches:
            header, _ = decode_batch(bytes(raw))
            if header.base_offset + header.last_offset_delta >= self.log_start_offset:
                yield bytes(raw)

    def maybe_increment_log_start_offset(self, offset: int, reason: str) -> bool:
        assert offset <= self.high_watermark
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            return True
        return False


class _Info:
    isr = (1,)


class _Part:
    def __init__(self) -> None:
        self.log = _Log()
        self.info = _Info()

    def is_leader(self, node_id: int) -> bool:
        return True


class _Replicas:
    """Every partition's log; appends committed at once (the high watermark follows)."""

    loading = False

    def __init__(self) -> None:
        self.parts = {p: _Part() for p in range(PARTITIONS)}

    def get(self, topic: str, partition: int):
        return self.parts.get(partition)

    def append(self, part, records, now_ms, origin=None) -> AppendResult:
        info = part.log.append(records)
        part.log.high_watermark = part.log.log_end_offset
        return AppendResult(info, None)


def _image(led: set[int], topic_partitions: int = 3) -> MetadataImage:
    state = TopicInfo(SHARE_GROUP_STATE_TOPIC, b"\x05" * 16,
                      {p: PartitionInfo(p, (1, 2), (1, 2), 1 if p in led else 2, 0, 0) for p in range(PARTITIONS)})
    t = TopicInfo("t", TID, {p: PartitionInfo(p, (1,), (1,), 1, 0, 0) for p in range(topic_partitions)})
    return MetadataImage(offset=1, topics_by_name={SHARE_GROUP_STATE_TOPIC: state, "t": t},
                         topics_by_id={state.topic_id: state, TID: t})


def _service(led: set[int] | None = None, replicas: _Replicas | None = None, **props) -> ShareCoordinatorService:
    publisher = MetadataPublisher()
    service = ShareCoordinatorService(1, BrokerConfig(props), publisher, replicas or _Replicas(), controller=None,
                                      clock=ManualClock())
    publisher.image = _image(set(range(PARTITIONS)) if led is None else led)
    service._published = publisher.image
    service.active = True
    service._create_lock = asyncio.Lock()
    return service


def _partition(service: ShareCoordinatorService, partition: int) -> int:
    return service.partition_for(share_partition_key_string(GROUP, TID, partition))


def test_request_validation():
    """testWriteStateValidationsError / testReadStateValidationsError / testDeleteStateValidationsError /
    testInitializeStateValidationError: no topics, a topic without partitions, an empty group id: empty answers."""
    async def scenario():
        s = _service()
        assert (await s.write_state(WriteShareGroupStateRequest(group_id=GROUP, topics=[]))).results == []
        req = write(GROUP, TID, 0, 0, [])
        req.topics[0].partitions = []
        assert (await s.write_state(req)).results == []
        for fn, req in ((s.read_state, read("", TID, 0)), (s.initialize_state, initialize("", TID, 0)),
                        (s.delete_state, delete("", TID, 0)), (s.read_state_summary, summary("", TID, 0))):
            assert (await fn(req)).results == []
    asyncio.run(scenario())


def test_inactive_coordinator_is_not_available():
    """testWriteStateWhenNotStarted and its siblings: COORDINATOR_NOT_AVAILABLE for every partition."""
    async def scenario():
        s = _service()
        s.active = False
        r = await s.read_state(read(GROUP, TID, 0))
        assert only(r).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    asyncio.run(scenario())


def test_keys_split_by_coordinator_and_not_coordinator_elsewhere():
    """A request's partitions run each on their own __share_group_state partition; those led by another broker
    answer NOT_COORDINATOR, the others are written; the answer is merged by topic."""
    async def scenario():
        probe = _service()
        mine = {_partition(probe, 0)}
        others = [p for p in range(3) if _partition(probe, p) not in mine]
        assert others, "the test needs a partition hashed elsewhere"
        s = _service(led=mine)
        req = initialize(GROUP, TID, 0)
        req.topics[0].partitions += [type(req.topics[0].partitions[0])(partition=p, state_epoch=1, start_offset=-1)
                                     for p in others]
        r = await s.initialize_state(req)
        (t,) = r.results
        codes = {p.partition: p.error_code for p in t.partitions}
        assert codes == {0: 0, **{p: ErrorCode.NOT_COORDINATOR for p in others}}
    asyncio.run(scenario())


def test_write_then_read_replays_at_the_append_offsets_and_a_load_rebuilds():
    async def scenario():
        replicas = _Replicas()
        s = _service(replicas=replicas)
        p = _partition(s, 0)
        assert only(await s.initialize_state(initialize(GROUP, TID, 0))).error_code == 0
        assert only(await s.write_state(write(GROUP, TID, 0, 5, [(5, 9, 2, 1)]))).error_code == 0
        assert read_batches(await s.read_state(read(GROUP, TID, 0))) == (5, 1, [(5, 9, 2, 1)])
        log = replicas.parts[p].log
        assert log.log_end_offset == 2  # the snapshot and the update
        # an undecodable record in the log is skipped on load
        bad = build_batch([Record(struct.pack(">h", 0) + b"\xff", b"\x00\x00\xff", timestamp=0)])
        log.append(bytearray(bad))
        fresh = _service(replicas=replicas)
        assert read_batches(await fresh.read_state(read(GROUP, TID, 0))) == (5, 1, [(5, 9, 2, 1)])
        assert fresh.shards[p].state == s.shards[p].state
    asyncio.run(scenario())


def test_pruning_moves_the_log_start_below_the_oldest_needed_snapshot():
    async def scenario():
        replicas = _Replicas()
        s = _service(replicas=replicas, **{"share.coordinator.snapshot.update.records.per.snapshot": 2})
        p = _partition(s, 0)
        await s.initialize_state(initialize(GROUP, TID, 0))  # offset 0: snapshot
        assert s.prune() == {}  # nothing redundant yet
        for i in range(4):  # offsets 1, 2, 3: updates; 4: a snapshot
            assert only(await s.write_state(write(GROUP, TID, 0, i, [(i, i, 2, 1)]))).error_code == 0
        assert s.prune() == {p: 4}
        assert replicas.parts[p].log.log_start_offset == 4
        from broker.share.share_coordinator_service import ShareCoordinatorCollector
        metrics = {m.name: m.samples for m in ShareCoordinatorCollector(s).collect()}
        assert [x.value for x in metrics["kafka_server_share_coordinator_metrics_write"]] == [5.0]
        latency = {x.name: x.value for x in metrics["kafka_server_share_coordinator_metrics_write_latency_ms"]
                   if x.name.endswith(("_count", "_sum"))}
        assert latency["kafka_server_share_coordinator_metrics_write_latency_ms_count"] == 4.0  # the writes
        assert latency["kafka_server_share_coordinator_metrics_write_latency_ms_sum"] >= 0
        assert [(x.labels, x.value) for x in metrics["kafka_server_share_coordinator_metrics_last_pruned_offset"]] \
            == [({"topic": SHARE_GROUP_STATE_TOPIC, "partition": str(p)}, 4.0)]
        fresh = _service(replicas=replicas)  # a load from the pruned log
        assert read_batches(await fresh.read_state(read(GROUP, TID, 0))) == \
            read_batches(await s.read_state(read(GROUP, TID, 0)))
    asyncio.run(scenario())


def test_deleted_topic_state_is_tombstoned():
    async def scenario():
        replicas = _Replicas()
        s = _service(replicas=replicas)
        p = _partition(s, 0)
        await s.initialize_state(initialize(GROUP, TID, 0))
        image = s._published
        await s.on_new_metadata_image(image)
        gone = MetadataImage(offset=2, topics_by_name={SHARE_GROUP_STATE_TOPIC: image.topic(SHARE_GROUP_STATE_TOPIC)},
                             topics_by_id={k: v for k, v in image.topics_by_id.items() if k != TID})
        s.metadata.image = gone
        await s.on_new_metadata_image(gone)
        assert s.shards[p].state == {}
        _, records = decode_batch(bytes(replicas.parts[p].log.batches[-1]))
        assert [r.value for r in records] == [None]
    asyncio.run(scenario())


class _HeldBackReplicas(_Replicas):
    """Appends whose commit the test releases (a follower that lags)."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[asyncio.Future] = []

    def append(self, part, records, now_ms, origin=None) -> AppendResult:
        info = part.log.append(records)
        fut = asyncio.get_running_loop().create_future()
        self.pending.append(fut)
        return AppendResult(info, fut)


def test_answers_wait_for_the_commit_also_reads_of_uncommitted_state():
    """A write is answered once committed; a read that writes nothing but shows that write's state waits for the
    same commit (CoordinatorRuntime completes an operation once the last written offset is committed)."""
    async def scenario():
        replicas = _HeldBackReplicas()
        s = _service(replicas=replicas)
        init = asyncio.ensure_future(s.initialize_state(initialize(GROUP, TID, 0)))
        await asyncio.sleep(0.01)
        assert len(replicas.pending) == 1 and not init.done()
        reading = asyncio.ensure_future(s.read_state(read(GROUP, TID, 0, leader_epoch=-1)))
        await asyncio.sleep(0.01)
        assert len(replicas.pending) == 1 and not reading.done()  # nothing written for it, yet it waits
        replicas.pending[0].set_result(None)
        assert only(await init).error_code == 0
        assert read_batches(await reading) == (-1, 1, [])
    asyncio.run(scenario())


def test_operation_errors_as_handle_operation_exception_maps_them():
    """ShareCoordinatorService.handleOperationException (CoordinatorOperationExceptionHelper): what a failed
    append answers, so the persister retries where Kafka's would; a Kafka error outside the table keeps its code
    rather than a catch-all UNKNOWN_SERVER_ERROR."""
    from broker.share.share_coordinator_service import ShareServiceError, _operation_error
    from protocol.errors import KafkaError

    cases = [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
        (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR),
        (ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR),
        (ErrorCode.INVALID_FETCH_SIZE, ErrorCode.UNKNOWN_SERVER_ERROR),
        (ErrorCode.INVALID_REQUIRED_ACKS, ErrorCode.INVALID_REQUIRED_ACKS),
        (ErrorCode.CORRUPT_MESSAGE, ErrorCode.CORRUPT_MESSAGE),
    ]
    for raised, answered in cases:
        assert _operation_error(KafkaError("append failed", raised)) == answered, raised
    assert _operation_error(ShareServiceError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)) == \
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert _operation_error(asyncio.TimeoutError()) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert _operation_error(RuntimeError("bug")) == ErrorCode.UNKNOWN_SERVER_ERROR
