"""How a follower applies its leader's Fetch answers (ReplicaFetcher._process): appends, diverging-epoch
truncation (AbstractFetcherThread.getOffsetTruncationState) and the out-of-range cases, on real logs."""

from __future__ import annotations

import asyncio

from broker.loop_turns import at_once
from broker.clock import ManualClock
from broker.replication.fetch_session import PartitionFetch
from broker.replication.replica_fetcher import ReplicaFetcher, ReplicaFetcherManager
from broker.replication.replica_manager import FetchWaiters, Partition
from cluster.metadata_image import PartitionInfo
from protocol.errors import ErrorCode
from protocol.generated.messages import FetchResponse, ListOffsetsResponse
from protocol.generated.messages.fetch_response import EpochEndOffset, FetchableTopicResponse, PartitionData
from protocol.generated.messages.list_offsets_response import ListOffsetsPartitionResponse, ListOffsetsTopicResponse
from protocol.record_codec import Record, build_batch
from storage.config import LogConfig
from storage.epoch import EpochEntry
from storage.log import Log

NOW = 1_700_000_000_000
FOO = b"\x01" * 16


class _Replicas:
    def __init__(self) -> None:
        self.partitions = {}
        self.fetch_waiters = FetchWaiters()


def _follower_log(tmp_path, epochs: list[tuple[int, int]], high_watermark: int) -> Log:
    """A follower's log holding ``count`` records per ``(epoch, count)``, in order."""
    lg = Log.open(str(tmp_path / "foo-0"), LogConfig.from_props({}), now_ms=NOW)
    offset = 0
    for epoch, count in epochs:
        batch = build_batch([Record(value=b"e%d-%d" % (epoch, i)) for i in range(count)], base_offset=offset,
                            partition_leader_epoch=epoch)
        lg.append_as_follower(memoryview(bytes(batch)), NOW)
        offset += count
    lg.update_high_watermark(high_watermark)
    return lg


class _Leader:
    """Answers the follower's ListOffsets with the leader's log end ``end``; records the requests."""

    def __init__(self, end: int) -> None:
        self.end = end
        self.requests = []

    async def request(self, body, version, timeout_s):
        self.requests.append(body)
        return ListOffsetsResponse(topics=[ListOffsetsTopicResponse(name=t.name, partitions=[
            ListOffsetsPartitionResponse(partition_index=p.partition_index, offset=self.end, timestamp=-1,
                                         leader_epoch=3) for p in t.partitions]) for t in body.topics])

    async def close(self):
        pass


def _apply(tmp_path, lg: Log, answer: PartitionData, leader_end: int | None = None) -> list:
    """Feed one answer for foo-0 (fetched at our log end) to a follower fetcher, then let it ask a leader whose
    log ends at ``leader_end`` (the ListOffsets after OFFSET_OUT_OF_RANGE); the requests it sent."""
    leader = _Leader(leader_end if leader_end is not None else -1)

    async def scenario():
        manager = ReplicaFetcherManager(2, _Replicas(), ManualClock(NOW), "PLAINTEXT", lambda: 5, {})
        fetcher = ReplicaFetcher(manager, 1, "127.0.0.1", 1)
        fetcher.task.cancel()
        await asyncio.gather(fetcher.task, return_exceptions=True)
        fetcher.client = leader
        part = Partition("foo", 0, FOO, lg, PartitionInfo(0, (1, 2), (1, 2), 1, 3, 3))
        fetcher.partitions = {("foo", 0): part}
        fetcher.session.session_topic_names = {FOO: "foo"}
        sent = {("foo", 0): PartitionFetch(FOO, lg.log_end_offset, lg.log_start_offset, 1 << 20, 3,
                                           lg.latest_epoch)}
        answer.partition_index = 0
        at_once(fetcher._process(fetcher.partitions, sent, FetchResponse(responses=[
            FetchableTopicResponse(topic_id=FOO, partitions=[answer])])))
        if fetcher.out_of_range:
            await fetcher._truncate_out_of_range()

    asyncio.run(scenario())
    return leader.requests


def test_diverging_epoch_cuts_to_where_our_epoch_ends(tmp_path):
    """We wrote epoch 1 at [3, 6) that the new leader never had; it says epoch 0 ends at 8 in its log: our
    epoch 0 ends at 3, so the cut is at 3, not at min(8, our end)."""
    lg = _follower_log(tmp_path, [(0, 3), (1, 3)], high_watermark=3)
    _apply(tmp_path, lg, PartitionData(diverging_epoch=EpochEndOffset(epoch=0, end_offset=8), high_watermark=3))
    assert lg.log_end_offset == 3
    assert lg.leader_epoch_cache.epoch_entries() == [EpochEntry(0, 0)]
    lg.close()


def test_diverging_epoch_at_our_end_drops_the_epoch_we_led_without_writing(tmp_path):
    """We led epoch 1 from offset 3 and wrote nothing in it before another leader was elected (a leader stopped,
    fenced, resumed): the leader says epoch 0 ends at our end, 3. Nothing to cut from the log, but our epoch 1
    entry must go (Kafka's truncateTo past the end still truncates the epoch cache) and the next fetch must name
    epoch 0, though our log end and start did not move; else every fetch names epoch 1, is answered with the
    same divergence and is never recorded by the leader: we never rejoin the ISR (found by the EOS fault test)."""
    lg = _follower_log(tmp_path, [(0, 3)], high_watermark=3)
    lg.maybe_assign_epoch_start_offset(1, 3, flush=False)

    async def scenario():
        manager = ReplicaFetcherManager(2, _Replicas(), ManualClock(NOW), "PLAINTEXT", lambda: 5, {})
        fetcher = ReplicaFetcher(manager, 1, "127.0.0.1", 1)
        fetcher.task.cancel()
        await asyncio.gather(fetcher.task, return_exceptions=True)
        part = Partition("foo", 0, FOO, lg, PartitionInfo(0, (1, 2), (1, 2), 1, 3, 3))
        fetcher.partitions = {("foo", 0): part}
        fetcher.session.session_topic_names = {FOO: "foo"}
        sent = at_once(fetcher._partition_fetches(fetcher.partitions))
        assert sent[("foo", 0)].last_fetched_epoch == 1
        at_once(fetcher._process(fetcher.partitions, sent, FetchResponse(responses=[FetchableTopicResponse(
            topic_id=FOO, partitions=[PartitionData(partition_index=0, high_watermark=3,
                                                    diverging_epoch=EpochEndOffset(epoch=0, end_offset=3))])])))
        return at_once(fetcher._partition_fetches(fetcher.partitions))

    following = asyncio.run(scenario())
    assert lg.log_end_offset == 3
    assert lg.leader_epoch_cache.epoch_entries() == [EpochEntry(0, 0)]
    assert following[("foo", 0)].last_fetched_epoch == 0  # the leader finds no divergence in it
    lg.close()


def test_out_of_range_above_the_leaders_log_start_cuts_to_the_leaders_log_end(tmp_path):
    """The leader cannot place our tail (OFFSET_OUT_OF_RANGE, its log start below our end): the follower asks
    the leader's log end as a replica (ListOffsets LATEST, replica id 2) and cuts its log there, also below its
    own high watermark (an unclean election's leader may end there), so the next fetch can succeed."""
    lg = _follower_log(tmp_path, [(0, 3), (1, 2), (2, 4)], high_watermark=9)
    requests = _apply(tmp_path, lg, PartitionData(error_code=ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=0,
                                                  high_watermark=5), leader_end=5)
    assert [(r.replica_id, r.topics[0].partitions[0].timestamp, r.topics[0].partitions[0].current_leader_epoch)
            for r in requests] == [(2, -1, 3)]
    assert lg.log_end_offset == 5 and lg.high_watermark == 5
    assert lg.leader_epoch_cache.epoch_entries() == [EpochEntry(0, 0), EpochEntry(1, 3)]
    lg.close()


def test_out_of_range_with_the_leader_ahead_keeps_the_log(tmp_path):
    """The leader's log ends past ours: nothing to cut (Kafka fetches on from our end)."""
    lg = _follower_log(tmp_path, [(0, 3)], high_watermark=3)
    _apply(tmp_path, lg, PartitionData(error_code=ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=0,
                                       high_watermark=3), leader_end=10)
    assert lg.log_end_offset == 3
    lg.close()


def test_out_of_range_below_the_leaders_log_start_restarts_there(tmp_path):
    lg = _follower_log(tmp_path, [(0, 3)], high_watermark=3)
    _apply(tmp_path, lg, PartitionData(error_code=ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=10,
                                       high_watermark=12))
    assert (lg.log_start_offset, lg.log_end_offset) == (10, 10)
    lg.close()
