"""Request and byte-rate quotas of Produce, of the requests Kafka answers from a coordinator or purgatory, and of
ShareFetch, as KafkaApis applies them, through dispatch with a manual clock (the node of test_fetch_quotas: a read
or an append takes READ_MS of it):

* request time ends where Kafka's handle() returns (apiLocalCompleteTimeNanos): a JoinGroup's rebalance wait or an
  acks=all produce's replication wait is not counted;
* Produce (handleProduceRequest): with acks=0 the request quota is not recorded at all; otherwise the answer carries
  the larger of the bandwidth and request throttle times and the connection is throttled on that quota only;
* ShareFetch (handleShareFetchRequest, processShareFetchResponse): ``fetch.max.bytes`` and the quota window cap
  what is acquired; over ``request_percentage`` or ``consumer_byte_rate`` the answer has no records, the larger
  throttle time, the bytes taken back, and the acknowledgements' results still in it; throttled or not, a request
  whose share session another request moved on meanwhile answers INVALID_SHARE_SESSION_EPOCH."""

from __future__ import annotations

import asyncio
import types

import pytest

from broker.apis.context import RequestContext
from broker.network.dispatch import dispatch
from broker.share.share_partition_manager import SharePartitionManager
from protocol.connection import parse_request
from protocol.errors import ErrorCode as E
from protocol.generated.api_keys import APIS
from protocol.generated.messages import (
    JoinGroupRequest, JoinGroupResponse, ProduceRequest, ProduceResponse, RequestHeader,
    ShareFetchRequest, ShareFetchResponse,
)
from protocol.generated.messages.join_group_request import JoinGroupRequestProtocol
from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
from protocol.generated.messages.share_fetch_request import AcknowledgementBatch, FetchPartition, FetchTopic
from protocol.record_codec import Record, build_batch
from tests.broker import test_fetch_quotas
from tests.broker.test_fetch_quotas import FOLLOWER, READ_MS, TOPIC_ID, quotas, throttled

node = test_fetch_quotas.node  # the fixture: one partition led here, follower 2 in sync, 3 batches of 600 B


def frame(api_key: int, version: int, body, client_id: str = "c"):
    header = RequestHeader(api_key, version, 7, client_id).encode(APIS[api_key].request_header_version(version))
    return parse_request(header + body.encode(version))


def run(handles, req, during=None, parked=None):
    """Dispatch ``req``: (answer frame's body bytes or None, context, throttle times imposed on the connection);
    ``during`` runs once ``parked()`` holds (the handler waits), before the handler is let go."""
    throttles: list[int] = []
    ctx = RequestContext(handles, req, "conn", "PLAINTEXT", "127.0.0.1", handles.clock.now_ms(),
                         on_throttle=throttles.append)

    async def go():
        task = asyncio.ensure_future(dispatch(ctx))
        if during is not None:
            for _ in range(100):  # bounded: the handler parks within a few loop turns
                await asyncio.sleep(0)
                if parked():
                    break
            assert parked(), "the handler did not park"
            during()
        return await asyncio.wait_for(task, 10)

    parts = asyncio.run(go())
    if parts is None:
        return None, ctx, throttles
    return b"".join(p.read() if hasattr(p, "read") else bytes(p) for p in parts), ctx, throttles


# ---- the end of a handler's own work -----------------------------------------------------------------------------


def test_a_join_groups_rebalance_wait_is_not_request_time(node):
    """handleJoinGroupRequest hands the join to the coordinator and returns: 2 s of rebalance (20% of the 10 s
    window, far over the quota) is not the client's request time."""
    handles, _ = node
    quotas(handles, request_percentage=1.0)
    joined = asyncio.Event()

    waiting = []

    async def run_delayed(group_id, op, rctx, req):
        waiting.append(group_id)
        await joined.wait()
        return JoinGroupResponse(generation_id=1, protocol_name="range", leader="m", member_id="m", members=[])

    handles.groups = types.SimpleNamespace(
        config=types.SimpleNamespace(min_session_timeout_ms=6000, max_session_timeout_ms=1_800_000),
        run_delayed=run_delayed)

    def rebalance():
        handles.clock.advance(2000)
        joined.set()

    body = JoinGroupRequest(group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=60_000, member_id="",
                            protocol_type="consumer",
                            protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")])
    data, ctx, throttles = run(handles, frame(11, 9, body), during=rebalance, parked=lambda: waiting)
    assert JoinGroupResponse.decode(memoryview(data)[9:], 9).generation_id == 1
    assert ctx.local_complete == ctx.started and throttles == []  # parked at once: nothing of its own after
    assert handles.quotas.request.rate("", "c", handles.clock.now_ms()) == 0.0


# ---- Produce -----------------------------------------------------------------------------------------------------


@pytest.fixture
def producing(node):
    """The node answering Produce: each append takes READ_MS of the clock; follower 2 is in the ISR."""
    handles, part = node
    handles.node_id = 1
    log = part.log
    append = log.append_as_leader

    def timed_append(*args, **kwargs):
        handles.clock.advance(READ_MS)
        return append(*args, **kwargs)

    log.append_as_leader = timed_append
    topic = handles.metadata.image.topic("t")
    topic.partitions = {0: part.info}
    return handles, part


def produce(acks: int, size: int = 2000):
    batch = bytes(build_batch([Record(value=b"p" * size)]))
    return frame(0, 9, ProduceRequest(transactional_id=None, acks=acks, timeout_ms=30_000, topic_data=[
        TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=batch)])]))


def test_acks_0_records_no_request_quota_but_its_bytes(producing):
    """"the request quota is not enforced if acks == 0": nothing recorded for it (not by dispatch either); the
    bytes count against producer_byte_rate and, over it, the connection is throttled without an answer."""
    handles, part = producing
    quotas(handles, request_percentage=0.001, producer_byte_rate=10)
    req = produce(0)
    data, ctx, throttles = run(handles, req)
    assert data is None and part.log.log_end_offset == 4  # appended after the 3 there, no answer
    now = handles.clock.now_ms()
    assert handles.quotas.request.rate("", "c", now) is None  # never recorded
    # the request's size, recorded in the response callback (after the append): over the 10 s minimum window
    assert handles.quotas.produce.rate("", "c", now) == pytest.approx(req.size / 10)
    assert len(throttles) == 1 and throttles[0] > 0 and ctx.throttle_ms == throttles[0]
    assert throttled(handles, "produce") == 1 and throttled(handles, "request") == 0


def test_over_both_quotas_a_produce_is_throttled_on_the_larger_bandwidth_time(producing):
    handles, _ = producing
    quotas(handles, request_percentage=0.1, producer_byte_rate=1)  # bytes far over: more than the request's 1 s
    data, _, throttles = run(handles, produce(1))
    resp = ProduceResponse.decode(memoryview(data)[9:], 9)
    assert resp.responses[0].partition_responses[0].error_code == 0
    assert resp.throttle_time_ms > 1000 and throttles == [resp.throttle_time_ms]  # muted once
    assert throttled(handles, "produce") == 1 and throttled(handles, "request") == 0
    assert handles.quotas.request.rate("", "c", handles.clock.now_ms()) == pytest.approx(0.3)  # one append


def test_over_both_quotas_a_produce_is_throttled_on_the_larger_request_time(producing):
    handles, _ = producing
    req = produce(1)
    # bytes just over (a throttle under the request's 1 s): 5% over the rate the 10 s window allows
    quotas(handles, request_percentage=0.1, producer_byte_rate=req.size / 10 / 1.05)
    data, _, throttles = run(handles, req)
    resp = ProduceResponse.decode(memoryview(data)[9:], 9)
    assert throttles == [1000]  # the connection muted on the larger (the request's) only
    assert resp.throttle_time_ms == 1000
    assert throttled(handles, "request") == 1 and throttled(handles, "produce") == 0


def _v12_transactional_produce(acks: int) -> bytes:
    """A v12 Produce frame of one transactional batch (producer id 7) to t-0: refused on transaction version 1."""
    batch = bytes(build_batch([Record(value=b"p" * 200)], producer_id=7, producer_epoch=0, base_sequence=0,
                              is_transactional=True))
    return frame(0, 12, ProduceRequest(transactional_id="tx", acks=acks, timeout_ms=30_000, topic_data=[
        TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=batch)])]))


def test_a_produce_refused_after_its_bytes_were_recorded_carries_their_throttle(producing):
    """A v12 transactional produce on transaction version 1 is refused UNSUPPORTED_VERSION through the response
    callback: its size recorded against producer_byte_rate and the connection muted, the answer carries that
    throttle time (else the client is muted without being told), its throttle is counted, and the request quota
    recorded once."""
    handles, _ = producing
    handles.txns = types.SimpleNamespace(transaction_version=1)
    quotas(handles, producer_byte_rate=1)
    req = _v12_transactional_produce(acks=1)
    data, ctx, throttles = run(handles, req)
    resp = ProduceResponse.decode(memoryview(data)[9:], 12)
    assert resp.responses[0].partition_responses[0].error_code == 35  # UNSUPPORTED_VERSION
    assert len(throttles) == 1 and throttles[0] > 0  # muted once
    assert resp.throttle_time_ms == throttles[0] == ctx.throttle_ms
    assert throttled(handles, "produce") == 1 and ctx.request_quota_done


def test_an_acks_0_produce_refused_after_its_bytes_were_recorded_closes_the_connection(producing):
    """The same refusal with acks=0: no answer, the connection closed (the response callback's closeConnection on
    any partition error), its bytes still counted against producer_byte_rate."""
    from broker.errors import CloseConnection

    handles, part = producing
    handles.txns = types.SimpleNamespace(transaction_version=1)
    quotas(handles, producer_byte_rate=1)
    req = _v12_transactional_produce(acks=0)
    end = part.log.log_end_offset
    with pytest.raises(CloseConnection):
        run(handles, req)
    assert throttled(handles, "produce") == 1 and part.log.log_end_offset == end


def test_an_acks_all_produces_replication_wait_is_not_request_time(producing):
    handles, part = producing
    quotas(handles, request_percentage=1.0)

    def follower_catches_up():
        handles.clock.advance(2000)
        leo = part.log.log_end_offset
        handles.replicas.record_follower_fetch(part, FOLLOWER, leo, 0, leo, -1)

    data, ctx, throttles = run(handles, produce(-1), during=follower_catches_up,
                               parked=lambda: len(handles.replicas.commit_waiters))
    resp = ProduceResponse.decode(memoryview(data)[9:], 9)
    assert resp.responses[0].partition_responses[0].error_code == 0 and resp.throttle_time_ms == 0
    assert ctx.local_complete - ctx.started == pytest.approx(READ_MS / 1000) and throttles == []
    assert handles.quotas.request.rate("", "c", handles.clock.now_ms()) == pytest.approx(0.3)


def test_a_connection_handles_nothing_more_until_both_a_hold_and_a_throttle_have_ended():
    """KafkaConnection's gate: a produce's hold (released in its response callback) and a quota's throttle time
    each keep it closed; it opens, and reading resumes, only once neither does, whichever ends first."""
    import itertools

    from broker.clock import ManualClock
    from broker.network.server import KafkaConnection

    class Transport:
        paused = False

        def pause_reading(self):
            self.paused = True

        def resume_reading(self):
            self.paused = False

        def is_closing(self):
            return False

    server = types.SimpleNamespace(max_frame=1 << 20, _conn_ids=itertools.count(), authentication=None,
                                   clock=ManualClock())
    conn = KafkaConnection(server, "PLAINTEXT")
    conn.transport = transport = Transport()
    gate = conn._gate

    async def until(predicate):
        for _ in range(200):  # bounded: a 1 ms timer fires within a few loop turns
            if predicate():
                return
            await asyncio.sleep(0.005)
        raise AssertionError("the throttle timer did not fire")

    async def go():
        release = conn._hold()
        assert not gate.is_set()
        conn._throttle(1)
        await until(lambda: conn._throttle_handle is None)  # the throttle has passed: still held
        assert not gate.is_set() and transport.paused
        release()
        assert gate.is_set() and not transport.paused
        release()  # once only
        assert conn._holds == 0
        release = conn._hold()
        conn._throttle(1)
        release()  # released first: the throttle still runs
        assert not gate.is_set() and transport.paused
        await until(gate.is_set)
        assert not transport.paused

    asyncio.run(go())


def test_a_request_read_while_a_produce_holds_the_connection_is_handled_after_those_waiting(producing):
    """Requests are handled in arrival order across a produce's hold: one read in the loop turn whose last step
    releases the hold must not pass the gate before those already waiting there (its task's first step is
    scheduled before their wake-ups). Kafka mutes the channel while a request is handled: reading pauses while
    held, so nothing read meanwhile can overtake (else two produces to one partition are appended out of order)."""
    import itertools

    from broker.network.server import KafkaConnection

    handles, part = producing
    quotas(handles, producer_byte_rate=1e9)  # under a quota, never throttled: the hold alone

    class Transport:
        """Reads nothing while paused; what arrives meanwhile is read at the next I/O turn after resuming."""
        paused = False

        def __init__(self):
            self.unread = []

        def pause_reading(self):
            self.paused = True

        def resume_reading(self):
            self.paused = False
            for req in self.unread:
                asyncio.get_running_loop().call_soon(conn._dispatch, req)
            self.unread.clear()

        def is_closing(self):
            return False

        def arrive(self, req):
            self.unread.append(req) if self.paused else conn._dispatch(req)

    server = types.SimpleNamespace(max_frame=1 << 20, _conn_ids=itertools.count(), authentication=None,
                                   clock=handles.clock, handles=handles)
    conn = KafkaConnection(server, "PLAINTEXT")
    conn.transport = transport = Transport()

    async def go():
        transport.arrive(produce(1, 10))  # read with the one before it, which holds the connection (a produce under
        release = conn._hold()  # the quota, awaiting its append or replication): waits at the gate
        for _ in range(3):
            await asyncio.sleep(0)
        assert not conn._gate.is_set() and conn.in_flight == 1
        transport.arrive(produce(1, 20))  # read in the turn that ends the hold
        release()
        answers = []
        for _ in range(100):  # bounded: both are handled within a few loop turns
            if len(answers) == 2:
                break
            if conn.pending.empty():
                await asyncio.sleep(0)
                continue
            task, _ctx = conn.pending.get_nowait()
            parts = await asyncio.wait_for(task, 10)
            data = b"".join(p.read() if hasattr(p, "read") else bytes(p) for p in parts)
            answers.append(ProduceResponse.decode(memoryview(data)[9:], 9).responses[0].partition_responses[0])
        return answers

    first, second = asyncio.run(go())
    assert first.error_code == second.error_code == 0
    assert first.base_offset < second.base_offset  # appended in the order sent


# ---- requests forwarded to the controller -------------------------------------------------------------------------


@pytest.mark.parametrize("controller_ms", [0, 25_000])
def test_a_forwarded_request_is_throttled_once_on_the_request_quota_with_the_controllers_time(node, controller_ms):
    """RequestHandlerHelper.sendForwardedResponse: the broker records the request's own time against
    request_percentage (once: dispatch records nothing more) and applies the larger of that throttle and the
    controller's (controller_mutation_rate) on the request quota: its throttle-time metrics count it once, the
    connection is muted that long and the answer carries it."""
    from protocol.generated.messages import CreateTopicsRequest, CreateTopicsResponse
    from protocol.generated.messages.create_topics_request import CreatableTopic

    handles, _ = node
    quotas(handles, request_percentage=50.0)

    async def forward(ctx, req):
        return CreateTopicsResponse(throttle_time_ms=controller_ms, topics=[])

    handles.controller = types.SimpleNamespace(forward=forward)
    body = CreateTopicsRequest(timeout_ms=10_000, validate_only=False, topics=[CreatableTopic(
        name="m", num_partitions=1, replication_factor=1, assignments=[], configs=[])])
    data, ctx, throttles = run(handles, frame(19, 7, body))
    resp = CreateTopicsResponse.decode(memoryview(data)[9:], 7)
    assert resp.throttle_time_ms == controller_ms and ctx.request_quota_done
    assert throttles == ([controller_ms] if controller_ms else [])  # muted once, that long
    assert throttled(handles, "request") == (1 if controller_ms else 0)
    assert handles.metrics.throttle_time.labels("request")._value.get() == controller_ms
    assert handles.quotas.request.rate("", "c", handles.clock.now_ms()) == 0.0  # recorded: parked at once


# ---- ShareFetch --------------------------------------------------------------------------------------------------

MEMBER = "AAAAAAAAAAAAAAAAAAAAAA"


@pytest.fixture
def sharing(node):
    """The node serving share group ``g`` on its partition (share state read from a stand-in persister, start 0)."""
    from tests.broker.test_share_partition_manager import _Config, _Persister

    handles, part = node
    handles.node_id = 1
    image = handles.metadata.image
    image.features = {"share.version": 1}
    image.brokers = {}
    handles.metadata.image.topic("t").partitions = {0: part.info}
    handles.share_partitions = SharePartitionManager(1, _Config(), handles.replicas, _Persister(start_offset=0),
                                                     handles.clock, handles.metadata)
    return handles, part


def share_fetch(epoch: int = 0, acks: list | None = None, max_bytes: int = 1 << 20):
    p = FetchPartition(partition_index=0, acknowledgement_batches=acks or [])
    return frame(78, 2, ShareFetchRequest(group_id="g", member_id=MEMBER, share_session_epoch=epoch, max_wait_ms=0,
                                          min_bytes=1, max_bytes=max_bytes, max_records=500, batch_size=500,
                                          topics=[FetchTopic(topic_id=TOPIC_ID, partitions=[p])]))


def share_answer(handles, req) -> tuple[ShareFetchResponse, RequestContext, list[int]]:
    data, ctx, throttles = run(handles, req)
    return ShareFetchResponse.decode(memoryview(data)[9:], 2), ctx, throttles


def acquired(handles) -> list[int]:
    """The offsets member MEMBER holds acquired."""
    sp = handles.share_partitions.partitions[("g", TOPIC_ID, 0)].sp
    out = []
    for offset in range(3):
        state = sp.record_state(offset)
        if state is not None and state[0].name == "ACQUIRED" and state[2] == MEMBER:
            out.append(offset)
    return out


def bytes_out(handles) -> float:
    return handles.metrics.bytes_out.labels("t")._value.get()


def test_a_share_fetch_over_its_request_quota_answers_no_records_and_keeps_them_acquired(sharing):
    """processShareFetchResponse: one read (3% of a second over the 10 s window) is over a 0.1 request quota: no
    records, the throttle time bounded by one window, counted once; the records read stay acquired (throttleResponse
    releases nothing: they come back when their acquisition lock times out) and are not bytes out."""
    handles, _ = sharing
    quotas(handles, request_percentage=0.1)
    resp, ctx, throttles = share_answer(handles, share_fetch())
    assert resp.error_code == 0 and resp.responses == [] and resp.throttle_time_ms == 1000 and throttles == [1000]
    assert ctx.request_quota_done and throttled(handles, "request") == 1 and throttled(handles, "fetch") == 0
    assert handles.quotas.request.rate("", "c", handles.clock.now_ms()) == pytest.approx(0.3)  # not twice
    assert acquired(handles) == [0, 1, 2] and bytes_out(handles) == 0


def test_a_share_fetch_over_its_byte_rate_takes_the_bytes_back_and_answers_its_acknowledgements(sharing):
    """Over ``consumer_byte_rate``: the answer's size is taken back (unrecordQuotaSensor) and the acknowledgements'
    results are still answered, the records fetched are not."""
    handles, _ = sharing
    resp, _, _ = share_answer(handles, share_fetch(max_bytes=700))  # one 600 B batch: offset 0
    assert [r.first_offset for r in resp.responses[0].partitions[0].acquired_records] == [0]
    quotas(handles, consumer_byte_rate=10)  # one fetch may take 100 B: a whole batch is more
    resp, _, throttles = share_answer(handles, share_fetch(epoch=1, acks=[AcknowledgementBatch(0, 0, [1])]))
    [topic] = resp.responses
    [p] = topic.partitions
    assert p.acknowledge_error_code == 0 and p.acquired_records == [] and not p.records
    assert resp.throttle_time_ms > 1000 and throttles == [resp.throttle_time_ms]
    assert throttled(handles, "fetch") == 1 and handles.quotas.fetch.rate("", "c", handles.clock.now_ms()) == 0.0
    sp = handles.share_partitions.partitions[("g", TOPIC_ID, 0)].sp
    assert sp.record_state(0) is None or sp.record_state(0)[0].name == "ACKNOWLEDGED"  # the ack took effect
    assert acquired(handles) == [1]  # the second fetch's read (one batch: the quota window's 100 B cap)


@pytest.mark.parametrize("cap", ["fetch.max.bytes", "consumer_byte_rate"])
def test_a_share_fetch_is_capped_by_fetch_max_bytes_and_the_quota_window(sharing, cap):
    """handleFetchFromShareFetchRequest: min(min(request.maxBytes, fetch.max.bytes), maxQuotaWindowBytes): 1024
    and 100 B/s over the 10 s window both let one 600 B batch through (the first whole), not the three."""
    handles, _ = sharing
    if cap == "fetch.max.bytes":
        handles.config = {"fetch.max.bytes": 1024}
    else:
        quotas(handles, consumer_byte_rate=100)
    resp, _, throttles = share_answer(handles, share_fetch())
    [p] = resp.responses[0].partitions
    assert [(r.first_offset, r.last_offset) for r in p.acquired_records] == [(0, 0)] and throttles == []
    assert acquired(handles) == [0] and bytes_out(handles) == len(p.records)


def test_a_share_fetchs_acknowledgement_write_is_not_request_time_but_its_fetch_is(sharing):
    """Kafka's handler starts the acknowledgements' share-state write and goes on to fetch without waiting for it:
    2 s of write are set aside, the read after it (READ_MS) is counted."""
    handles, _ = sharing
    share_answer(handles, share_fetch(max_bytes=700))  # offset 0 acquired
    quotas(handles, request_percentage=1.0)
    persister = handles.share_partitions.persister
    persister.gate = asyncio.Event()

    def slow_write():
        handles.clock.advance(2000)
        persister.gate.set()

    data, ctx, throttles = run(handles, share_fetch(epoch=1, acks=[AcknowledgementBatch(0, 0, [1])]),
                               during=slow_write, parked=lambda: persister.writes)
    resp = ShareFetchResponse.decode(memoryview(data)[9:], 2)
    [p] = resp.responses[0].partitions
    assert p.acknowledge_error_code == 0 and [r.first_offset for r in p.acquired_records] == [1]
    assert ctx.set_aside == pytest.approx(2.0) and throttles == [] and resp.throttle_time_ms == 0
    assert handles.quotas.request.rate("", "c", handles.clock.now_ms()) == pytest.approx(0.3)


@pytest.mark.parametrize("throttle", [False, True])
def test_a_share_fetch_whose_session_moved_on_meanwhile_answers_invalid_share_session_epoch(sharing, throttle):
    """ShareSessionContext.updateAndGenerateResponseData and, over a quota, throttleResponse: a ShareFetch whose
    session another request (a ShareAcknowledge at the next epoch) moved on while it waited answers
    INVALID_SHARE_SESSION_EPOCH ("possible duplicate request") without its fetched records (they stay acquired until
    their lock times out, not bytes out); its acknowledgements' results are still in it, the throttle time too."""
    handles, _ = sharing
    share_answer(handles, share_fetch(max_bytes=700))  # the session opened, offset 0 acquired
    sent_before = bytes_out(handles)
    if throttle:
        quotas(handles, request_percentage=0.1)
    mgr = handles.share_partitions
    mgr.persister.gate = asyncio.Event()

    def another_request():
        mgr.sessions.acknowledge_session_update("g", MEMBER, 2)
        mgr.persister.gate.set()

    data, _, throttles = run(handles, share_fetch(epoch=1, acks=[AcknowledgementBatch(0, 0, [1])]),
                             during=another_request, parked=lambda: mgr.persister.writes)
    resp = ShareFetchResponse.decode(memoryview(data)[9:], 2)
    assert resp.error_code == E.INVALID_SHARE_SESSION_EPOCH
    [p] = resp.responses[0].partitions
    assert p.acknowledge_error_code == 0 and p.acquired_records == [] and not p.records
    assert (resp.throttle_time_ms, throttles) == ((1000, [1000]) if throttle else (0, []))
    assert acquired(handles) == [1, 2] and bytes_out(handles) == sent_before
