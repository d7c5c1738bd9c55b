"""ShareFetch (78) and ShareAcknowledge (79) on the wire: what a share consumer does (acquire whole batches,
acknowledge, release, reject, lock expiry, a dropped connection), what the client never sends (v2's record_limit
acquire mode and Renew), and the issue's bad input (Kafka's codes, nothing acquired or changed).

Each test joins its own share group (ShareGroupHeartbeat: the join has the share coordinator initialize the
partitions' state) with ``share.auto.offset.reset=earliest``, and produces its own batches of known sizes.
"""

from __future__ import annotations

import uuid

import pytest

from broker.testing.embedded import EmbeddedBroker
from cluster.share.share_partition import RecordState
from protocol.errors import ErrorCode as E
from protocol.generated.messages import (
    AlterShareGroupOffsetsRequest, IncrementalAlterConfigsRequest, ProduceRequest, ShareAcknowledgeRequest,
    ShareFetchRequest, ShareGroupHeartbeatRequest,
)
from protocol.generated.messages import alter_share_group_offsets_request as asgo
from protocol.generated.messages import incremental_alter_configs_request as iac
from protocol.generated.messages import share_acknowledge_request as sar
from protocol.generated.messages import share_fetch_request as sfr
from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
from protocol.record_codec import Record, build_batch, iter_batches
from tests.groups.workload import create_topic
from tests.kafka_wire import KafkaWire

ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4
GROUP_CONFIG = 32
LOCK_MS = 2000


@pytest.fixture(scope="module")
def sbroker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("share-fetch"),
                        overrides={"offsets.topic.num.partitions": 2, "group.initial.rebalance.delay.ms": 0,
                                   "group.share.min.record.lock.duration.ms": 1000}) as b:
        yield b


def _wire(sbroker) -> KafkaWire:
    return KafkaWire(sbroker.port, client_id="share-fetch-wire")


class Setup:
    """A topic of one partition (or ``partitions``, each with the same batches) with known batches, a share group
    reading it from the earliest offset."""

    def __init__(self, sbroker, name: str, batches: list[int], partitions: int = 1):
        self.topic = f"sf-{name}"
        self.group = f"sfg-{name}"
        create_topic(sbroker.bootstrap, self.topic, partitions)
        self.topic_id = sbroker.broker.metadata.image.topic(self.topic).topic_id
        with _wire(sbroker) as w:
            alter = w.call(44, 1, IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
                resource_type=GROUP_CONFIG, resource_name=self.group, configs=[
                    iac.AlterableConfig(name="share.auto.offset.reset", config_operation=0, value="earliest"),
                    iac.AlterableConfig(name="share.record.lock.duration.ms", config_operation=0,
                                        value=str(LOCK_MS))])]))
            assert alter.responses[0].error_code == 0
            for index in range(partitions):
                offset = 0
                for n in batches:
                    batch = build_batch([Record(value=b"v%d" % (offset + i)) for i in range(n)])
                    r = w.call(0, 9, ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
                        name=self.topic, partition_data=[PartitionProduceData(index=index, records=batch)])]))
                    assert r.responses[0].partition_responses[0].error_code == 0
                    offset += n
            member = str(uuid.uuid4())
            hb = w.call(76, 1, ShareGroupHeartbeatRequest(group_id=self.group, member_id=member, member_epoch=0,
                                                          subscribed_topic_names=[self.topic]))
            assert hb.error_code == 0  # the join initialized the partition's share state
            assert w.call(76, 1, ShareGroupHeartbeatRequest(group_id=self.group, member_id=member,
                                                            member_epoch=-1)).error_code == 0


class Member:
    """One share consumer's connection and session."""

    def __init__(self, sbroker, setup: Setup, version: int = 1):
        self.w = _wire(sbroker)
        self.s = setup
        self.id = str(uuid.uuid4())
        self.epoch = 0
        self.version = version

    def close(self) -> None:
        self.w.close()

    def fetch(self, acks=None, max_wait_ms=0, max_records=500, epoch=None, min_bytes=1, **kw):
        parts = [sfr.FetchPartition(partition_index=0, acknowledgement_batches=[
            sfr.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=list(t))
            for f, last, t in (acks or [])])]
        req = ShareFetchRequest(group_id=self.s.group, member_id=self.id,
                                share_session_epoch=self.epoch if epoch is None else epoch,
                                max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_records=max_records,
                                batch_size=max_records,
                                topics=[sfr.FetchTopic(topic_id=self.s.topic_id, partitions=parts)], **kw)
        resp = self.w.call(78, self.version, req)
        if resp.error_code == 0 and epoch is None:
            self.epoch += 1
        return resp

    def send_fetch(self, max_wait_ms: int, min_bytes: int = 1) -> int:
        """A ShareFetch of the partition (max_records 100) sent without waiting: its correlation id, to ``recv``
        once it is answered (a parked fetch)."""
        corr = self.w.send(78, self.version, ShareFetchRequest(
            group_id=self.s.group, member_id=self.id, share_session_epoch=self.epoch, max_wait_ms=max_wait_ms,
            min_bytes=min_bytes, max_records=100, batch_size=100, topics=[sfr.FetchTopic(
                topic_id=self.s.topic_id, partitions=[sfr.FetchPartition(partition_index=0)])]))
        self.epoch += 1
        return corr

    def ack(self, acks, epoch=None, topic_id=None, is_renew_ack=False):
        req = ShareAcknowledgeRequest(group_id=self.s.group, member_id=self.id,
                                      share_session_epoch=self.epoch if epoch is None else epoch,
                                      is_renew_ack=is_renew_ack,
                                      topics=[sar.AcknowledgeTopic(topic_id=topic_id or self.s.topic_id, partitions=[
                                          sar.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                                              sar.AcknowledgementBatch(first_offset=f, last_offset=last,
                                                                       acknowledge_types=list(t))
                                              for f, last, t in acks])])])
        resp = self.w.call(79, self.version, req)
        if resp.error_code == 0 and epoch is None:
            self.epoch += 1
        return resp


def acquired(resp) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in resp.responses for p in t.partitions for a in p.acquired_records]


def partition(resp):
    (t,) = resp.responses
    (p,) = t.partitions
    return p


def record_offsets(resp) -> list[int]:
    buf = bytes(partition(resp).records or b"")
    return [h.base_offset + r.offset_delta for h, recs in iter_batches(buf) for r in recs]


def fetch_until(member: Member, want: int = 1, acks=None) -> object:
    """Fetch (long poll of up to 3 s) until something is acquired: bounded by count."""
    for _ in range(10):
        resp = member.fetch(acks=acks, max_wait_ms=3000)
        acks = None
        assert resp.error_code == 0, resp
        if acquired(resp):
            return resp
    raise AssertionError("nothing acquired")


def test_acquires_whole_batches_and_accepts(sbroker):
    """Three batches (4, 3, 5 records) are acquired whole with delivery count 1 and their bytes sent; accepted on the
    next fetch (acknowledge_error_code 0), nothing is delivered again to anyone."""
    s = Setup(sbroker, "accept", [4, 3, 5])
    a, b = Member(sbroker, s), Member(sbroker, s)
    try:
        got = fetch_until(a)
        assert acquired(got) == [(0, 11, 1)]
        assert record_offsets(got) == list(range(12))
        assert got.acquisition_lock_timeout_ms == LOCK_MS
        # the topic twice in one request (its acknowledgements in the second entry): one partition in the answer
        req = ShareFetchRequest(group_id=s.group, member_id=a.id, share_session_epoch=a.epoch, max_wait_ms=0,
                                min_bytes=1, max_records=500, batch_size=500, topics=[
                                    sfr.FetchTopic(topic_id=s.topic_id, partitions=[
                                        sfr.FetchPartition(partition_index=0)]),
                                    sfr.FetchTopic(topic_id=s.topic_id, partitions=[
                                        sfr.FetchPartition(partition_index=0, acknowledgement_batches=[
                                            sfr.AcknowledgementBatch(first_offset=0, last_offset=11,
                                                                     acknowledge_types=[ACCEPT])])])])
        again = a.w.call(78, 1, req)
        a.epoch += 1
        assert again.error_code == 0 and len(again.responses) == 1
        assert partition(again).acknowledge_error_code == 0 and acquired(again) == []
        assert acquired(b.fetch(max_wait_ms=200)) == []
    finally:
        a.close()
        b.close()


def test_a_sessions_partitions_are_read_in_turn(sbroker):
    """PartitionRotateStrategy (round robin by the session epoch, SharePartitionManager.fetchMessages): a fetch
    stops at its max_records, so each fetch of one batch comes from the next partition of the session, not from
    the first until it is drained."""
    s = Setup(sbroker, "rotate", [4, 4], partitions=3)
    m = Member(sbroker, s)
    try:
        order = []
        for _ in range(6):
            req = ShareFetchRequest(group_id=s.group, member_id=m.id, share_session_epoch=m.epoch, max_wait_ms=3000,
                                    min_bytes=1, max_records=1, batch_size=1, topics=[sfr.FetchTopic(
                                        topic_id=s.topic_id, partitions=[sfr.FetchPartition(partition_index=i)
                                                                         for i in range(3)])] if m.epoch == 0 else [])
            resp = m.w.call(78, 1, req)
            assert resp.error_code == 0, resp
            m.epoch += 1
            got = [(p.partition_index, a.first_offset, a.last_offset)
                   for t in resp.responses for p in t.partitions for a in p.acquired_records]
            assert len(got) == 1, got  # one whole batch: max_records is reached by it
            order.append(got[0])
        # epochs 0, 1, 2, 3, 4, 5 start at partitions 0, 1, 2, 0, 1, 2 (epoch 0 and multiples of 3: no rotation)
        assert order == [(0, 0, 3), (1, 0, 3), (2, 0, 3), (0, 4, 7), (1, 4, 7), (2, 4, 7)]
    finally:
        m.close()


def test_released_record_returns_with_count_plus_one_rejected_never(sbroker):
    s = Setup(sbroker, "release", [3])
    a, b = Member(sbroker, s), Member(sbroker, s)
    try:
        assert acquired(fetch_until(a)) == [(0, 2, 1)]
        resp = a.ack([(0, 2, [RELEASE, ACCEPT, REJECT])])
        assert [p.error_code for t in resp.responses for p in t.partitions] == [0]
        assert acquired(fetch_until(b)) == [(0, 0, 2)]  # the released record, delivered again
        assert partition(b.fetch(acks=[(0, 0, [ACCEPT])])).acknowledge_error_code == 0
        assert acquired(a.fetch(max_wait_ms=200)) == [] and acquired(b.fetch(max_wait_ms=200)) == []
    finally:
        a.close()
        b.close()


def test_lock_expiry_and_dropped_connection_release(sbroker):
    """A member that stops acknowledging loses its records when the lock (2 s) ends: another member gets them with
    count 2; a member whose connection drops releases its records at once, the delivery not counted."""
    s = Setup(sbroker, "expiry", [2])
    a, b = Member(sbroker, s), Member(sbroker, s)
    c = None
    try:
        assert acquired(fetch_until(a)) == [(0, 1, 1)]
        assert acquired(fetch_until(b)) == [(0, 1, 2)]  # woken by the lock expiry
        late = a.ack([(0, 1, [ACCEPT])])
        assert [p.error_code for t in late.responses for p in t.partitions] == [E.INVALID_RECORD_STATE]
        b.close()  # the connection drops: its session goes and the records return, count back to 1
        c = Member(sbroker, s)
        assert acquired(fetch_until(c)) == [(0, 1, 2)]
    finally:
        a.close()
        b.close()
        if c is not None:
            c.close()


def test_record_limit_mode_and_renew_v2(sbroker):
    """What librdkafka never sends: v2's ShareAcquireMode record_limit acquires at most MaxRecords of a batch; a
    Renew (IsRenewAck) keeps the records acquired by the member past the first lock."""
    s = Setup(sbroker, "v2", [10])
    a, b = Member(sbroker, s, version=2), Member(sbroker, s, version=2)
    try:
        got = None
        for _ in range(10):
            got = a.fetch(max_wait_ms=3000, max_records=3, share_acquire_mode=1)
            if acquired(got):
                break
        assert acquired(got) == [(0, 2, 1)]
        rest = acquired(b.fetch(max_wait_ms=3000, max_records=4, share_acquire_mode=1))
        assert [(o, n) for f, last, n in rest for o in range(f, last + 1)] == [(o, 1) for o in range(3, 7)]
        renewed = a.ack([(0, 2, [RENEW])], is_renew_ack=True)
        assert renewed.error_code == 0 and renewed.acquisition_lock_timeout_ms == LOCK_MS
        assert [p.error_code for t in renewed.responses for p in t.partitions] == [0]
        # Renew without IsRenewAck is an unknown type
        bad = a.ack([(0, 2, [RENEW])])
        assert [p.error_code for t in bad.responses for p in t.partitions] == [E.INVALID_REQUEST]
        assert partition(a.fetch(acks=[(0, 2, [ACCEPT])])).acknowledge_error_code == 0
    finally:
        a.close()
        b.close()


def test_bad_input(sbroker):
    """Kafka's codes for the issue's list; nothing acquired or changed by a refused request."""
    s = Setup(sbroker, "bad", [5])
    a, other = Member(sbroker, s, version=2), Member(sbroker, s, version=2)
    try:
        # request level (top-level error, no partitions)
        assert a.fetch(acks=[(0, 0, [ACCEPT])], epoch=0).error_code == E.INVALID_REQUEST  # acks with epoch 0
        assert a.fetch(epoch=-1).error_code == E.INVALID_REQUEST  # a final request fetching
        assert a.fetch(epoch=-2).error_code == E.SHARE_SESSION_NOT_FOUND  # newContext: no session to compare with
        assert a.fetch(epoch=0, is_renew_ack=True, max_wait_ms=100).error_code == E.INVALID_REQUEST
        assert a.fetch(epoch=0, share_acquire_mode=7).error_code == E.INVALID_REQUEST
        assert a.ack([(0, 0, [ACCEPT])], epoch=0).error_code == E.INVALID_SHARE_SESSION_EPOCH
        assert a.ack([(0, 0, [ACCEPT])], epoch=3).error_code == E.SHARE_SESSION_NOT_FOUND
        assert a.fetch(epoch=4).error_code == E.SHARE_SESSION_NOT_FOUND
        assert acquired(fetch_until(a)) == [(0, 4, 1)]
        assert a.ack([(0, 0, [ACCEPT])], epoch=7).error_code == E.INVALID_SHARE_SESSION_EPOCH
        assert a.fetch(epoch=7).error_code == E.INVALID_SHARE_SESSION_EPOCH
        assert a.fetch(epoch=-2).error_code == E.INVALID_SHARE_SESSION_EPOCH

        # per partition: refused acknowledgements leave the records acquired by ``a``
        def ack_code(acks, **kw):
            resp = a.ack(acks, **kw)
            assert resp.error_code == 0, resp
            return [p.error_code for t in resp.responses for p in t.partitions]
        assert ack_code([(3, 1, [ACCEPT])]) == [E.INVALID_REQUEST]  # first > last
        assert ack_code([(0, 2, [ACCEPT]), (2, 3, [ACCEPT])]) == [E.INVALID_REQUEST]  # overlapping
        assert ack_code([(2, 3, [ACCEPT]), (0, 1, [ACCEPT])]) == [E.INVALID_REQUEST]  # out of order
        assert ack_code([(0, 2, [ACCEPT, ACCEPT])]) == [E.INVALID_REQUEST]  # neither one type nor one per offset
        assert ack_code([(0, 0, [])]) == [E.INVALID_REQUEST]
        assert ack_code([(0, 0, [5])]) == [E.INVALID_REQUEST]
        assert ack_code([(0, 0, [ACCEPT])], topic_id=b"\x01" * 16) == [E.UNKNOWN_TOPIC_ID]
        other.fetch(max_wait_ms=0)
        oresp = other.ack([(0, 0, [ACCEPT])])  # records held by ``a``
        assert [p.error_code for t in oresp.responses for p in t.partitions] == [E.INVALID_RECORD_STATE]
        sb = sbroker.broker.share_partitions.partitions[(s.group, s.topic_id, 0)].sp
        assert [sb.record_state(o)[0].name for o in range(5)] == ["ACQUIRED"] * 5
        assert partition(a.fetch(acks=[(0, 4, [ACCEPT])])).acknowledge_error_code == 0
        assert [sb.record_state(o) for o in range(5)] == [None] * 5  # acknowledged: the start offset passed them
        assert sb.start_offset == 5
    finally:
        a.close()
        other.close()


def test_session_reopened_at_epoch_0_keeps_the_members_records(sbroker):
    """Kafka 4.2's newContext: a ShareFetch at epoch 0 from a member whose session exists (a new connection, as a
    client opens after losing its session) replaces the session without releasing anything: the member's records
    stay its own (another member gets none), and it acknowledges them at the new session's epoch 1."""
    s = Setup(sbroker, "reopen", [3])
    a, b = Member(sbroker, s), Member(sbroker, s)
    again = Member(sbroker, s)
    again.id = a.id
    try:
        assert acquired(fetch_until(a)) == [(0, 2, 1)]
        reopened = again.fetch(max_wait_ms=0)
        assert reopened.error_code == 0 and acquired(reopened) == [] and again.epoch == 1
        assert acquired(b.fetch(max_wait_ms=200)) == []  # still the member's
        sp = sbroker.broker.share_partitions.partitions[(s.group, s.topic_id, 0)].sp
        assert [sp.record_state(o) for o in range(3)] == [(RecordState.ACQUIRED, 1, a.id)] * 3
        resp = again.ack([(0, 2, [ACCEPT])])
        assert resp.error_code == 0 and [p.error_code for t in resp.responses for p in t.partitions] == [0]
        assert sp.start_offset == 3 and acquired(b.fetch(max_wait_ms=200)) == []
    finally:
        a.close()
        b.close()
        again.close()


def test_acknowledging_a_share_partition_never_fetched_here(sbroker):
    """SharePartitionManager.acknowledge: a share partition not cached on this leader (no member of the group
    fetched it here) is UNKNOWN_TOPIC_OR_PARTITION; its state is not read for the acknowledgement."""
    s = Setup(sbroker, "unfetched", [2])

    class Unfetched:  # a group whose members never fetched the partition
        group = s.group + "-acks-only"
        topic_id = s.topic_id
    c = Member(sbroker, Unfetched)
    try:
        opened = c.w.call(78, 1, ShareFetchRequest(group_id=Unfetched.group, member_id=c.id, share_session_epoch=0,
                                                   max_wait_ms=0, min_bytes=1, max_records=500, batch_size=500,
                                                   topics=[]))
        assert opened.error_code == 0 and opened.responses == []
        c.epoch = 1
        resp = c.ack([(0, 1, [ACCEPT])])
        assert resp.error_code == 0
        assert [p.error_code for t in resp.responses for p in t.partitions] == [E.UNKNOWN_TOPIC_OR_PARTITION]
        assert (Unfetched.group, s.topic_id, 0) not in sbroker.broker.share_partitions.partitions
    finally:
        c.close()


def test_full_share_session_cache(sbroker):
    """group.share.max.share.sessions reached: a new session is refused with SHARE_SESSION_LIMIT_REACHED (the cache's
    limit lowered to 0 in place for the test), an existing one keeps working."""
    s = Setup(sbroker, "limit", [1])
    a, b = Member(sbroker, s), Member(sbroker, s)
    cache = sbroker.broker.share_partitions.sessions
    limit = cache.max_entries
    try:
        assert a.fetch().error_code == 0
        cache.max_entries = 0
        assert b.fetch().error_code == E.SHARE_SESSION_LIMIT_REACHED
        assert a.fetch().error_code == 0
    finally:
        cache.max_entries = limit
        a.close()
        b.close()


def test_parked_fetch_is_woken_by_an_append_and_by_a_release(sbroker):
    """A fetch with records to wait for parks (max_wait 20 s) and answers when an append lands, and again when
    another member releases the records it holds (DelayedShareFetch completed by the change)."""
    s = Setup(sbroker, "wake", [])
    a, b = Member(sbroker, s), Member(sbroker, s)
    try:
        assert acquired(a.fetch()) == []  # opens the session: nothing there yet
        corr = a.send_fetch(max_wait_ms=20000)
        with _wire(sbroker) as w:
            r = w.call(0, 9, ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
                name=s.topic, partition_data=[PartitionProduceData(index=0, records=build_batch(
                    [Record(value=b"late-%d" % i) for i in range(3)]))])]))
            assert r.responses[0].partition_responses[0].error_code == 0
        woken = a.w.recv(78, 1, corr)
        assert acquired(woken) == [(0, 2, 1)]
        assert acquired(b.fetch()) == []  # opens b's session: all held by a
        corr = b.send_fetch(max_wait_ms=20000)
        assert [p.error_code for t in a.ack([(0, 2, [RELEASE])]).responses for p in t.partitions] == [0]
        assert acquired(b.w.recv(78, 1, corr)) == [(0, 2, 2)]
    finally:
        a.close()
        b.close()


def test_a_parked_fetch_leaves_out_a_share_partition_fenced_by_a_write(sbroker):
    """DelayedShareFetch with a share partition fenced by an acknowledgement's write (the group's offsets were
    altered meanwhile: a newer state epoch, FENCED_STATE_EPOCH): the acknowledgement answers NOT_LEADER_OR_FOLLOWER,
    the parked fetch never acquires from the fenced share partition and completes at its max wait without it (no
    error, as ``maybeAcquireFetchLock`` refuses a fenced share partition); the next fetch reads the new state."""
    s = Setup(sbroker, "fenced-parked", [2])
    a, b = Member(sbroker, s), Member(sbroker, s)
    try:
        assert acquired(a.fetch()) == [(0, 1, 1)]
        assert acquired(b.fetch()) == []  # opens b's session: all held by a
        corr = b.send_fetch(max_wait_ms=1000)
        with _wire(sbroker) as w:  # the group has no members: its offsets can be altered (a new state epoch)
            r = w.call(91, 0, AlterShareGroupOffsetsRequest(group_id=s.group, topics=[
                asgo.AlterShareGroupOffsetsRequestTopic(topic_name=s.topic, partitions=[
                    asgo.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])]))
            assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
        acked = a.ack([(0, 1, [ACCEPT])])
        assert [p.error_code for t in acked.responses for p in t.partitions] == [E.NOT_LEADER_OR_FOLLOWER]
        parked = b.w.recv(78, 1, corr)
        assert parked.error_code == 0 and parked.responses == [], parked
        assert acquired(b.fetch()) == [(0, 1, 1)]  # the state read again: the altered start, nothing delivered
    finally:
        a.close()
        b.close()


def test_a_parked_fetch_whose_session_moved_on_answers_invalid_share_session_epoch(sbroker):
    """ShareSessionContext.updateAndGenerateResponseData: while a member's fetch waits, a request of the same
    session at the next epoch comes in on another connection; the waiting fetch then answers
    INVALID_SHARE_SESSION_EPOCH at the top level, without partitions ("possible duplicate request"), and the
    session goes on from the later request's epoch. One pipelined behind it on its own connection does not count
    (Kafka serves it after the waiting fetch's answer)."""
    s = Setup(sbroker, "moved-on", [])
    a = Member(sbroker, s)
    other = _wire(sbroker)

    def waiting():
        req = ShareFetchRequest(group_id=s.group, member_id=a.id, share_session_epoch=a.epoch, max_wait_ms=500,
                                min_bytes=1, max_records=100, batch_size=100, topics=[sfr.FetchTopic(
                                    topic_id=s.topic_id, partitions=[sfr.FetchPartition(partition_index=0)])])
        a.epoch += 1
        return req

    def next_request():
        req = ShareFetchRequest(group_id=s.group, member_id=a.id, share_session_epoch=a.epoch, max_wait_ms=0,
                                min_bytes=1, max_records=100, batch_size=100, topics=[])
        a.epoch += 1
        return req
    try:
        assert acquired(a.fetch()) == []  # opens the session: nothing there yet
        corr = a.w.send(78, 1, waiting())
        pipelined = a.w.send(78, 1, next_request())
        assert a.w.recv(78, 1, corr).error_code == 0 and a.w.recv(78, 1, pipelined).error_code == 0
        corr = a.w.send(78, 1, waiting())
        later = other.call(78, 1, next_request())
        assert later.error_code == 0, later
        moved_on = a.w.recv(78, 1, corr)
        assert moved_on.error_code == E.INVALID_SHARE_SESSION_EPOCH and moved_on.responses == [], moved_on
        assert a.fetch().error_code == 0  # at the epoch after the later request's
    finally:
        a.close()
        other.close()


def test_min_bytes_holds_the_fetch_until_enough_is_readable(sbroker):
    """A fetch asking for more bytes than are there acquires nothing while it waits: a small batch is there, the
    fetch parks, a large batch lands and the answer acquires both; when the wait ends first, what is there is
    acquired (DelayedShareFetch's expiry)."""
    s = Setup(sbroker, "minbytes", [])
    a, b = Member(sbroker, s), Member(sbroker, s)

    def append(values):
        with _wire(sbroker) as w:
            r = w.call(0, 9, ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(
                name=s.topic, partition_data=[PartitionProduceData(index=0, records=build_batch(
                    [Record(value=v) for v in values]))])]))
            assert r.responses[0].partition_responses[0].error_code == 0
    try:
        assert acquired(a.fetch()) == [] and acquired(b.fetch()) == []  # the sessions, nothing there yet
        append([b"small-0", b"small-1"])
        corr = a.send_fetch(max_wait_ms=20000, min_bytes=5000)
        append([b"x" * 6000])
        assert acquired(a.w.recv(78, 1, corr)) == [(0, 2, 1)]
        append([b"small-3"])
        expired = b.fetch(max_wait_ms=200, min_bytes=10**6)
        assert acquired(expired) == [(3, 3, 1)]
    finally:
        a.close()
        b.close()


def test_read_committed_stops_at_the_lso_and_archives_aborted_batches(sbroker):
    """``share.isolation.level=read_committed``: a committed transaction's records are acquired, an aborted one's
    archived (never acquired), an open one's not read (the LSO stops the read)."""
    from confluent_kafka import Producer

    s = Setup(sbroker, "txn", [])
    with _wire(sbroker) as w:
        alter = w.call(44, 1, IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
            resource_type=GROUP_CONFIG, resource_name=s.group, configs=[
                iac.AlterableConfig(name="share.isolation.level", config_operation=0, value="read_committed")])]))
        assert alter.responses[0].error_code == 0
    p = Producer({"bootstrap.servers": sbroker.bootstrap, "transactional.id": "sf-txn", "linger.ms": 0})
    p.init_transactions(30)
    for outcome in ("commit", "abort", "commit", "open"):
        p.begin_transaction()
        for i in range(3):
            p.produce(s.topic, value=b"%s-%d" % (outcome.encode(), i), partition=0)
        p.flush(30)
        if outcome == "commit":
            p.commit_transaction(30)
        elif outcome == "abort":
            p.abort_transaction(30)
    # offsets: 0-2 committed, 3 marker, 4-6 aborted, 7 marker, 8-10 committed, 11 marker, 12-14 open
    a = Member(sbroker, s)
    try:
        offsets: set[int] = set()
        for _ in range(10):
            resp = a.fetch(max_wait_ms=500)
            offsets |= {o for f, last, _n in acquired(resp) for o in range(f, last + 1)}
            if {0, 1, 2, 8, 9, 10} <= offsets:
                break
        assert {0, 1, 2, 8, 9, 10} <= offsets and not offsets & {4, 5, 6, 12, 13, 14}, sorted(offsets)
        sp = sbroker.broker.share_partitions.partitions[(s.group, s.topic_id, 0)].sp
        assert all(sp.record_state(o) is None or sp.record_state(o)[0] is RecordState.ARCHIVED for o in (4, 5, 6))
    finally:
        a.close()
        p.abort_transaction(30)


def _metric(sbroker, name: str, **labels) -> float:
    """A sample of the broker's Prometheus registry (what its /metrics endpoint serves), 0 when absent."""
    return sbroker.broker.metrics.registry.get_sample_value(name, labels) or 0.0


def test_kip_1103_metrics_follow_fetches_acknowledgements_and_lock_expiry(sbroker):
    """BrokerTopicMetrics' share meters count each ShareFetch and acknowledgement per topic (failed ones too),
    ShareGroupMetrics counts acknowledged records by type, SharePartitionMetrics shows the in-flight window, the
    batches added to it and the records whose lock expired."""
    s = Setup(sbroker, "metrics", [4, 3])
    bt = "kafka_server_brokertopicmetrics_"
    spm = dict(group=s.group, topic=s.topic, partition="0")
    acks_before = {t: _metric(sbroker, "kafka_server_sharegroupmetrics_recordacknowledgements_total", ackType=t)
                   for t in ("Accept", "Release", "Reject")}
    a, b = Member(sbroker, s), Member(sbroker, s)
    c = None
    try:
        fetches = 0
        for _ in range(10):  # bounded: the long poll returns once the records are acquired
            got = a.fetch(max_wait_ms=3000)
            fetches += 1
            if acquired(got):
                break
        assert acquired(got) == [(0, 6, 1)]
        assert _metric(sbroker, bt + "totalsharefetchrequests_total", topic=s.topic) == fetches
        assert _metric(sbroker, bt + "failedsharefetchrequests_total", topic=s.topic) == 0
        assert _metric(sbroker, "kafka_server_sharepartitionmetrics_inflightmessagecount", **spm) == 7
        assert _metric(sbroker, "kafka_server_sharepartitionmetrics_inflightbatchcount", **spm) == 1
        assert _metric(sbroker, "kafka_server_sharepartitionmetrics_inflightbatchmessagecount_count", **spm) == 1
        assert _metric(sbroker, "kafka_server_sharepartitionmetrics_inflightbatchmessagecount_sum", **spm) == 7
        sizes = "kafka_server_sharepartitionmetrics_inflightbatchmessagecount_bucket"
        assert [_metric(sbroker, sizes, le=le, **spm) for le in ("5.0", "10.0", "+Inf")] == [0, 1, 1]
        assert _metric(sbroker, "kafka_server_sharegroupmetrics_partitionloadtimems_count") >= 1
        sg = "kafka_server_sharegroupmetrics_"
        # one observation per fetch: 100% for the fetch that acquired, 0% for any that waited in vain
        assert _metric(sbroker, sg + "requesttopicpartitionsfetchratio_count", group=s.group) == fetches
        assert _metric(sbroker, sg + "requesttopicpartitionsfetchratio_sum", group=s.group) == 100
        assert _metric(sbroker, sg + "topicpartitionsacquiretimems_count", group=s.group) == fetches

        resp = a.ack([(0, 3, [ACCEPT]), (4, 6, [RELEASE, REJECT, ACCEPT])])
        assert [p.error_code for t in resp.responses for p in t.partitions] == [0]
        delta = {t: _metric(sbroker, "kafka_server_sharegroupmetrics_recordacknowledgements_total", ackType=t)
                 - acks_before[t] for t in acks_before}
        assert delta == {"Accept": 5, "Release": 1, "Reject": 1}
        assert _metric(sbroker, bt + "totalshareacknowledgementrequests_total", topic=s.topic) == 1
        assert _metric(sbroker, bt + "failedshareacknowledgementrequests_total", topic=s.topic) == 0
        # 0-3 acknowledged: the window starts at 4 (4 Available, 5 Archived, 6 Acknowledged)
        assert _metric(sbroker, "kafka_server_sharepartitionmetrics_inflightmessagecount", **spm) == 3

        late = a.ack([(4, 4, [ACCEPT])])  # released, no longer a's: refused, counted as failed, no record counted
        assert [p.error_code for t in late.responses for p in t.partitions] == [E.INVALID_RECORD_STATE]
        assert _metric(sbroker, bt + "totalshareacknowledgementrequests_total", topic=s.topic) == 2
        assert _metric(sbroker, bt + "failedshareacknowledgementrequests_total", topic=s.topic) == 1
        assert (_metric(sbroker, "kafka_server_sharegroupmetrics_recordacknowledgements_total", ackType="Accept")
                - acks_before["Accept"]) == 5

        assert _metric(sbroker, "kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total", **spm) == 0
        assert acquired(fetch_until(b)) == [(4, 4, 2)]  # the released record; b lets its lock (2 s) expire
        c = Member(sbroker, s)
        assert acquired(fetch_until(c)) == [(4, 4, 3)]  # woken by the expiry
        assert _metric(sbroker, "kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total", **spm) == 1
        assert partition(c.fetch(acks=[(4, 4, [ACCEPT])])).acknowledge_error_code == 0
        assert _metric(sbroker, "kafka_server_sharepartitionmetrics_inflightmessagecount", **spm) == 0

        # a partition the topic does not have: the fetch fails on the topic
        failed_before = _metric(sbroker, bt + "failedsharefetchrequests_total", topic=s.topic)
        bad = c.w.call(78, 1, ShareFetchRequest(
            group_id=s.group, member_id=str(uuid.uuid4()), share_session_epoch=0, max_wait_ms=0, min_bytes=1,
            max_records=10, batch_size=10,
            topics=[sfr.FetchTopic(topic_id=s.topic_id, partitions=[sfr.FetchPartition(partition_index=7)])]))
        assert bad.error_code == 0 and partition(bad).error_code != 0
        assert _metric(sbroker, bt + "failedsharefetchrequests_total", topic=s.topic) == failed_before + 1
    finally:
        a.close()
        b.close()
        if c is not None:
            c.close()
