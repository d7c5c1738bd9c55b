"""Fetch and client quotas as KafkaApis.handleFetchRequest applies them, through dispatch with a manual clock (a read
takes READ_MS of it): a consumer's ``request_percentage`` is recorded once, in the fetch's response callback, from the
handler's own time (a long poll's wait is not counted: RequestChannel.requestThreadTimeNanos ends at
apiLocalCompleteTimeNanos); over it or over ``consumer_byte_rate`` the answer is empty with the larger throttle
time, the bytes taken back and no session created; a follower's fetch is exempt; ``fetch.max.bytes`` caps the
answer, but for one whole first batch (minOneMessage)."""

from __future__ import annotations

import asyncio
import types

import pytest

from broker.apis.context import RequestContext
from broker.clock import ManualClock
from broker.network.dispatch import dispatch
from broker.network.sendfile import SendStats
from broker.observability.metrics import BrokerMetrics
from broker.replication.fetch_session import FetchManager
from broker.replication.fetch_session.cache import FetchSessionCache
from broker.replication.replica_manager import Partition, ReplicaManager
from broker.replication.replica_state import FollowerState
from broker.security.throttling import ClientQuotas
from cluster.metadata_image import PartitionInfo, quota_entity
from protocol.connection import parse_request
from protocol.generated.api_keys import APIS
from protocol.generated.messages import FetchRequest, FetchResponse, RequestHeader
from protocol.generated.messages.fetch_request import FetchPartition, FetchTopic, ReplicaState
from protocol.record_codec import Record, build_batch
from storage.config import LogConfig
from storage.log import Log

TOPIC_ID = b"\x0b" * 16
READ_MS = 30  # each partition read advances the clock this much: 3% of a second of request time
FOLLOWER, EPOCH = 2, 5
VERSION = 15


@pytest.fixture
def node(tmp_path):
    """(handles, partition): one partition led by node 1 with follower 2 in sync, 3 batches of 600 B."""
    clock = ManualClock()
    rm = ReplicaManager(1, log_manager=None, now_ms=clock.now_ms, replica_lag_time_max_ms=30_000)
    rm.image = types.SimpleNamespace(brokers={FOLLOWER: types.SimpleNamespace(active=True, broker_epoch=EPOCH)})
    log = Log.open(str(tmp_path / "t-0"), LogConfig.from_props({}), now_ms=clock.now_ms())
    part = Partition("t", 0, TOPIC_ID, log, PartitionInfo(0, (1, FOLLOWER), (1, FOLLOWER), 1, 0, 0))
    part.followers = {FOLLOWER: FollowerState(last_caught_up_ms=clock.now_ms())}
    rm.partitions[("t", 0)] = part
    for _ in range(3):
        log.append_as_leader(bytearray(build_batch([Record(value=b"v" * 600)])), 0, clock.now_ms())
    log.update_high_watermark(log.log_end_offset)
    read = log.read

    def timed_read(*args, **kwargs):
        clock.advance(READ_MS)
        return read(*args, **kwargs)

    log.read = timed_read
    topic = types.SimpleNamespace(name="t", topic_id=TOPIC_ID)
    image = types.SimpleNamespace(topics_by_id={TOPIC_ID: topic}, topic=lambda name: topic if name == "t" else None)
    handles = types.SimpleNamespace(
        metadata=types.SimpleNamespace(image=image), config={}, clock=clock, replicas=rm,
        metrics=BrokerMetrics(lambda: rm, SendStats()), controller_listeners=frozenset(),
        fetch_sessions=FetchManager(FetchSessionCache(10, 120_000, num_shards=1)),
        quotas=ClientQuotas(window_num=11, window_size_s=1), authorizer=None)
    return handles, part


def quotas(handles, **values) -> None:
    """Quotas of client id ``c`` (and of the follower's ``f``), as the metadata image carries them."""
    image = {quota_entity([("client-id", "c")]): values, quota_entity([("client-id", "f")]): values}
    for manager in (handles.quotas.produce, handles.quotas.fetch, handles.quotas.request):
        manager.update(image)


def request(client_id: str, offset: int = 0, follower: bool = False, max_wait_ms: int = 0):
    """A full fetch (session epoch 0: a session is created if it is answered) of 1 MiB from ``offset``."""
    body = FetchRequest(replica_state=ReplicaState(replica_id=FOLLOWER if follower else -1,
                                                   replica_epoch=EPOCH if follower else -1),
                        max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=0, rack_id="",
                        topics=[FetchTopic(topic_id=TOPIC_ID, partitions=[FetchPartition(
                            partition=0, fetch_offset=offset, current_leader_epoch=-1, last_fetched_epoch=-1,
                            log_start_offset=-1, partition_max_bytes=1 << 20)])])
    header = RequestHeader(1, VERSION, 7, client_id).encode(APIS[1].request_header_version(VERSION))
    return parse_request(header + body.encode(VERSION))


def answer(handles, req, during=None) -> tuple[FetchResponse, RequestContext, list[int]]:
    """Dispatch ``req`` to its answer (decoded); ``during``: run once the fetch has parked, before it is woken."""
    throttles: list[int] = []
    ctx = RequestContext(handles, req, "conn", "PLAINTEXT", "127.0.0.1", handles.clock.now_ms(),
                         on_throttle=throttles.append)

    async def run():
        task = asyncio.ensure_future(dispatch(ctx))
        if during is not None:
            for _ in range(100):  # bounded: the fetch parks within a few loop turns
                await asyncio.sleep(0)
                if len(handles.replicas.fetch_waiters):
                    break
            assert len(handles.replicas.fetch_waiters), "the fetch did not park"
            during()
        return await asyncio.wait_for(task, 10)

    parts = asyncio.run(run())
    frame = b"".join(p.read() if hasattr(p, "read") else bytes(p) for p in parts)  # file slices read
    # size (4), correlation id (4), the flexible header's empty tagged fields (1)
    return FetchResponse.decode(memoryview(frame)[9:], VERSION), ctx, throttles


def throttled(handles, quota: str) -> float:
    return handles.metrics.throttled.labels(quota)._value.get()


def test_a_consumer_over_its_request_quota_gets_an_empty_answer_and_its_time_is_counted_once(node):
    handles, _ = node
    quotas(handles, request_percentage=0.1)
    resp, ctx, throttles = answer(handles, request("c"))
    # one read: 3% of a second over the 10 s minimum window is 0.3 > 0.1; the throttle is bounded by one window
    assert resp.throttle_time_ms == 1000 and throttles == [1000]
    assert resp.responses == [] and resp.session_id == 0 and resp.error_code == 0
    assert handles.fetch_sessions.cache.size == 0  # getThrottledResponse: the full fetch created no session
    assert ctx.request_quota_done
    assert handles.quotas.request.rate("", "c", handles.clock.now_ms()) == pytest.approx(0.3)  # not twice
    assert throttled(handles, "request") == 1 and throttled(handles, "fetch") == 0


def test_within_the_request_quota_the_fetch_is_answered_and_creates_its_session(node):
    handles, _ = node
    quotas(handles, request_percentage=1.0)
    resp, ctx, throttles = answer(handles, request("c"))
    assert resp.throttle_time_ms == 0 and throttles == []
    assert len(resp.responses[0].partitions[0].records) > 0 and resp.session_id != 0
    assert handles.quotas.request.rate("", "c", handles.clock.now_ms()) == pytest.approx(0.3)


def test_a_long_polls_wait_is_not_request_time(node):
    """A fetch that parks counts its first pass (apiLocalCompleteTimeNanos is set when handle() returns, before the
    delayed fetch completes): 2 s of waiting would be 20% over the window, far over the quota."""
    handles, part = node
    quotas(handles, request_percentage=1.0)
    end = part.log.log_end_offset

    def wait_then_append():
        handles.clock.advance(2000)
        part.log.append_as_leader(bytearray(build_batch([Record(value=b"late")])), 0, handles.clock.now_ms())
        part.log.update_high_watermark(part.log.log_end_offset)
        handles.replicas.fetch_waiters.wake(("t", 0))

    resp, ctx, _ = answer(handles, request("c", offset=end, max_wait_ms=5000), during=wait_then_append)
    assert resp.throttle_time_ms == 0 and len(resp.responses[0].partitions[0].records) > 0
    assert ctx.local_complete - ctx.started == pytest.approx(READ_MS / 1000)
    assert handles.quotas.request.rate("", "c", handles.clock.now_ms()) == pytest.approx(0.3)


def test_over_both_quotas_the_larger_throttle_wins_and_the_bytes_are_taken_back(node):
    handles, _ = node
    quotas(handles, request_percentage=0.1, consumer_byte_rate=10)  # one fetch may take 100 B: a whole batch is more
    resp, _, throttles = answer(handles, request("c"))
    assert resp.responses == [] and resp.throttle_time_ms > 1000 and throttles == [resp.throttle_time_ms]
    assert throttled(handles, "fetch") == 1 and throttled(handles, "request") == 0  # throttled on the larger
    now = handles.clock.now_ms()
    assert handles.quotas.fetch.rate("", "c", now) == 0.0  # unrecordQuotaSensor
    assert handles.quotas.request.rate("", "c", now) == pytest.approx(0.3)  # request time is not taken back


def test_a_followers_fetch_is_exempt_from_the_request_quota(node):
    handles, _ = node
    quotas(handles, request_percentage=0.001)
    resp, ctx, throttles = answer(handles, request("f", follower=True))
    assert resp.throttle_time_ms == 0 and throttles == [] and ctx.request_quota_done
    assert len(resp.responses[0].partitions[0].records) > 0
    assert handles.quotas.request.rate("", "f", handles.clock.now_ms()) is None  # nothing recorded for it


@pytest.mark.parametrize("follower", [False, True])
def test_fetch_max_bytes_caps_the_answer_but_for_one_whole_first_batch(node, follower):
    """KafkaApis: fetchMaxBytes = min(request.maxBytes, config.fetchMaxBytes) for followers and consumers alike;
    ReplicaManager.readFromLog reads the first batch whole (minOneMessage), the rest up to the limit."""
    handles, part = node
    handles.config = {"fetch.max.bytes": 1024}
    resp, _, _ = answer(handles, request("f" if follower else "c", follower=follower))
    assert len(resp.responses[0].partitions[0].records) == 1024  # 600 B batches: the first whole, the second cut
    big = part.log.log_end_offset
    batch = bytearray(build_batch([Record(value=b"B" * 3000)]))
    part.log.append_as_leader(batch, 0, handles.clock.now_ms())
    part.log.update_high_watermark(part.log.log_end_offset)
    resp, _, _ = answer(handles, request("f" if follower else "c", offset=big, follower=follower))
    assert len(resp.responses[0].partitions[0].records) == len(batch) > 1024  # that batch, whole
