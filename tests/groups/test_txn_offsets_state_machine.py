"""Transactional offsets (KIP-447) in the pure coordinator: each test ports the Kafka test named in its
docstring from apache/kafka group-coordinator/src/test/java/org/apache/kafka/coordinator/group/
OffsetMetadataManagerTest.java. Kafka's runtime replays a TxnOffsetCommit's records at once; here the
adapter replays them once appended (``replay_transactional``), which ``txn_commit`` does as the adapter would."""

from __future__ import annotations

from cluster.groups.group_coordinator import ReqCtx
from cluster.groups.group_record_helpers import offset_commit_record, offset_tombstone
from cluster.groups.offsets import OffsetAndMetadata
from protocol.errors import ErrorCode as E
from protocol.generated.messages import TxnOffsetCommitRequest
from protocol.generated.messages.offset_fetch_request import OffsetFetchRequestGroup, OffsetFetchRequestTopics
from protocol.generated.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
)
from tests.groups.coordinator_ctx import Ctx
from tests.groups.test_consumer_state_machine import FOO, CCtx, image
from tests.groups.test_offsets_state_machine import _consumer_group, stable_classic_group

PORTED = [
    "testConsumerGroupTransactionalOffsetCommit",
    "testConsumerGroupTransactionalOffsetCommitWithUnknownGroupId",
    "testConsumerGroupTransactionalOffsetCommitWithUnknownMemberId",
    "testConsumerGroupTransactionalOffsetCommitWithStaleMemberEpoch",
    "testGenericGroupTransactionalOffsetCommit",
    "testGenericGroupTransactionalOffsetCommitWithUnknownGroupId",
    "testGenericGroupTransactionalOffsetCommitWithUnknownMemberId",
    "testGenericGroupTransactionalOffsetCommitWithIllegalGenerationId",
    "testFetchOffsetsWithPendingTransactionalOffsets",
    "testFetchAllOffsetsWithPendingTransactionalOffsets",
    "testGenericGroupOffsetDeleteWithPendingTransactionalOffsets",
    "testConsumerGroupOffsetDeleteWithPendingTransactionalOffsets",
    "testDeleteGroupAllOffsetsWithPendingTransactionalOffsets",
    "testCleanupExpiredOffsetsWithPendingTransactionalOffsets",
    "testTransactionalReplay",
    "testReplayWithTombstoneAndPendingTransactionalOffsets",
    "testReplayTransactionEndMarkerWithCommit",
    "testReplayTransactionEndMarkerKeepsTheMostRecentCommittedOffset",
]


def txn_commit(ctx: Ctx, gid: str, member: str, generation: int, offsets: dict, pid: int = 10, epoch: int = 0,
               instance=None, version: int = 5, written: bool = True):
    topics: dict[str, list] = {}
    for (t, p), (off, md) in offsets.items():
        topics.setdefault(t, []).append(TxnOffsetCommitRequestPartition(
            partition_index=p, committed_offset=off, committed_leader_epoch=10, committed_metadata=md))
    req = TxnOffsetCommitRequest(transactional_id="txn", group_id=gid, producer_id=pid, producer_epoch=epoch,
                                 generation_id=generation, member_id=member, group_instance_id=instance,
                                 topics=[TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                                         for t, ps in topics.items()])
    res = ctx.shard.commit_transactional_offsets(ReqCtx("client", "/127.0.0.1", version), req, ctx.time)
    if written and res.error is None:
        ctx.shard.replay_transactional(res.records, pid)  # the adapter, once the batch is appended
    return res


def err(res) -> int:
    return res.error.code if res.error is not None else res.response.topics[0].partitions[0].error_code


def fetch(ctx, gid, topics=None, require_stable=True):
    req = OffsetFetchRequestGroup(group_id=gid, member_id=None, member_epoch=-1, topics=None if topics is None else [
        OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in topics])
    out = ctx.shard.fetch_offsets(req, require_stable, ctx.time)
    return {(t.name, p.partition_index): (p.committed_offset, p.error_code) for t in out.topics for p in t.partitions}


def om(record_offset: int, offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, -1, "small", 0, record_offset=record_offset)


def replay(ctx: Ctx, gid, topic, partition, m: OffsetAndMetadata, pid: int = -1) -> None:
    """verifyReplay / verifyTransactionalReplay: the record at ``m.record_offset`` of the log."""
    ctx.shard.replay(offset_commit_record(gid, topic, partition, m), m.record_offset, pid)


def test_classic_group_transactional_offset_commit():
    """testGenericGroupTransactionalOffsetCommit, ...WithUnknownGroupId, ...WithUnknownMemberId,
    ...WithIllegalGenerationId; v0-2 requests (no member, generation -1) are not checked"""
    ctx = Ctx()
    assert err(txn_commit(ctx, "foo", "member", 10, {("bar", 0): (100, "metadata")})) == E.ILLEGAL_GENERATION
    ctx.create_classic_group("empty")
    assert err(txn_commit(ctx, "empty", "member", 10, {("bar", 0): (100, "")})) == E.UNKNOWN_MEMBER_ID
    stable_classic_group(ctx, instance="instance")
    res = txn_commit(ctx, "foo", "member", 1, {("bar", 0): (100, "metadata")}, written=False)
    assert err(res) == 0 and (res.producer_id, res.producer_epoch) == (10, 0)
    assert res.records == [offset_commit_record("foo", "bar", 0, OffsetAndMetadata(100, 10, "metadata", 0))]
    assert ctx.shard.pending_offsets.get(10, "foo", "bar", 0) is None  # not before the write
    assert err(txn_commit(ctx, "foo", "member", 100, {("bar", 0): (1, "")})) == E.ILLEGAL_GENERATION
    assert err(txn_commit(ctx, "foo", "other", 1, {("bar", 0): (1, "")}, instance="instance")) == \
        E.FENCED_INSTANCE_ID
    # v0-2: generation -1, no member: accepted even by a stable group
    assert err(txn_commit(ctx, "foo", "", -1, {("bar", 0): (7, "")}, version=2)) == 0
    assert ctx.shard.pending_offsets.get(10, "foo", "bar", 0).committed_offset == 7
    # a group that does not exist with generation -1: a simple group
    assert err(txn_commit(ctx, "simple", "", -1, {("bar", 0): (1, "")}, version=0)) == 0
    assert ctx.group("simple") is not None


def test_consumer_group_transactional_offset_commit():
    """testConsumerGroupTransactionalOffsetCommit, ...WithUnknownGroupId, ...WithUnknownMemberId,
    ...WithStaleMemberEpoch (ILLEGAL_GENERATION, not STALE_MEMBER_EPOCH)"""
    ctx = CCtx(image((FOO, "foo", 2)))
    assert err(txn_commit(ctx, "fooup", "member", 10, {("bar", 0): (100, "")})) == E.ILLEGAL_GENERATION
    _consumer_group(ctx)
    assert err(txn_commit(ctx, "fooup", "unknown", 10, {("bar", 0): (100, "")})) == E.UNKNOWN_MEMBER_ID
    assert err(txn_commit(ctx, "fooup", "member", 100, {("bar", 0): (100, "")})) == E.ILLEGAL_GENERATION
    res = txn_commit(ctx, "fooup", "member", 10, {("bar", 0): (100, "metadata")})
    assert err(res) == 0 and len(res.records) == 1
    assert err(txn_commit(ctx, "fooup", "", -1, {("bar", 1): (5, "")}, version=2)) == 0  # v0-2: no member


def test_offset_metadata_too_large():
    """testGenericGroupTransactionalOffsetCommit's metadata check (isMetadataInvalid): OFFSET_METADATA_TOO_LARGE"""
    ctx = Ctx(offset_metadata_max_bytes=5)
    res = txn_commit(ctx, "foo", "", -1, {("bar", 0): (100, "toolarge"), ("bar", 1): (100, "small")})
    assert [p.error_code for p in res.response.topics[0].partitions] == [E.OFFSET_METADATA_TOO_LARGE, 0]
    assert [r.key.partition for r in res.records] == [1]


def test_fetch_offsets_with_pending_transactional_offsets():
    """testFetchOffsetsWithPendingTransactionalOffsets: require_stable answers UNSTABLE_OFFSET_COMMIT for
    partitions with pending offsets (even without a committed one); without it the committed offsets come back;
    after the COMMIT marker everything is stable"""
    ctx = CCtx()
    ctx.commit("group", "", -1, {("foo", 0): (100, ""), ("foo", 1): (110, ""), ("bar", 0): (200, "")}, version=9)
    txn_commit(ctx, "group", "", -1, {("foo", 1): (111, ""), ("bar", 0): (201, ""), ("bar", 1): (211, "")})
    request = [("foo", [0, 1]), ("bar", [0, 1])]
    U = E.UNSTABLE_OFFSET_COMMIT
    assert fetch(ctx, "group", request) == {("foo", 0): (100, 0), ("foo", 1): (-1, U), ("bar", 0): (-1, U),
                                            ("bar", 1): (-1, U)}
    assert fetch(ctx, "group", request, require_stable=False) == {
        ("foo", 0): (100, 0), ("foo", 1): (110, 0), ("bar", 0): (200, 0), ("bar", 1): (-1, 0)}
    ctx.shard.replay_end_transaction_marker(10, True)
    assert fetch(ctx, "group", request) == {("foo", 0): (100, 0), ("foo", 1): (111, 0), ("bar", 0): (201, 0),
                                            ("bar", 1): (211, 0)}


def test_fetch_all_offsets_with_pending_transactional_offsets():
    """testFetchAllOffsetsWithPendingTransactionalOffsets: all topics (null): only committed partitions are
    listed, the pending ones UNSTABLE_OFFSET_COMMIT under require_stable; an ABORT leaves the committed ones"""
    ctx = Ctx()
    ctx.commit("group", "", -1, {("foo", 0): (100, ""), ("foo", 1): (110, ""), ("bar", 0): (200, "")})
    txn_commit(ctx, "group", "", -1, {("foo", 1): (111, ""), ("bar", 1): (211, "")})
    U = E.UNSTABLE_OFFSET_COMMIT
    assert fetch(ctx, "group") == {("foo", 0): (100, 0), ("foo", 1): (-1, U), ("bar", 0): (200, 0)}
    assert fetch(ctx, "group", require_stable=False) == {("foo", 0): (100, 0), ("foo", 1): (110, 0),
                                                         ("bar", 0): (200, 0)}
    ctx.shard.replay_end_transaction_marker(10, False)
    assert fetch(ctx, "group") == {("foo", 0): (100, 0), ("foo", 1): (110, 0), ("bar", 0): (200, 0)}


def test_offset_delete_with_pending_transactional_offsets():
    """testGenericGroupOffsetDeleteWithPendingTransactionalOffsets,
    testConsumerGroupOffsetDeleteWithPendingTransactionalOffsets: a partition with only a pending offset gets a
    tombstone, which drops the pending offset too"""
    from tests.groups.test_offsets_state_machine import _delete
    ctx = Ctx()
    ctx.create_classic_group("foo")
    txn_commit(ctx, "foo", "", -1, {("bar", 0): (100, "")})
    res = _delete(ctx, "foo", [("bar", [0])])
    assert res.records == [offset_tombstone("foo", "bar", 0)]
    assert not ctx.shard.pending_offsets.has_pending("foo", "bar", 0)
    ctx.shard.replay_end_transaction_marker(10, True)
    assert ctx.shard.offsets.get("foo", "bar", 0) is None
    # a consumer group: the topic it is not subscribed to gets the tombstone
    cctx = CCtx(image((FOO, "foo", 2)))
    _consumer_group(cctx)
    txn_commit(cctx, "fooup", "member", 10, {("other", 0): (100, "")})
    assert _delete(cctx, "fooup", [("other", [0])]).records == [offset_tombstone("fooup", "other", 0)]
    assert not cctx.shard.pending_offsets.has_pending("fooup", "other", 0)


def test_delete_group_all_offsets_with_pending_transactional_offsets():
    """testDeleteGroupAllOffsetsWithPendingTransactionalOffsets: tombstones for the committed partitions and,
    once each, for partitions only pending"""
    ctx = Ctx()
    ctx.commit("foo", "", -1, {("bar", 0): (1, ""), ("bar", 1): (2, "")})
    txn_commit(ctx, "foo", "", -1, {("bar", 1): (3, ""), ("baz", 0): (4, "")}, pid=10)
    txn_commit(ctx, "foo", "", -1, {("baz", 0): (5, ""), ("baz", 1): (6, "")}, pid=11)
    recs = ctx.shard.delete_all_offsets("foo")
    assert sorted((r.key.topic, r.key.partition) for r in recs) == [("bar", 0), ("bar", 1), ("baz", 0), ("baz", 1)]
    assert all(r.value is None for r in recs)


def test_cleanup_expired_offsets_with_pending_transactional_offsets():
    """testCleanupExpiredOffsetsWithPendingTransactionalOffsets: an expired offset with a pending transactional
    one stays, and so does a group with open transactions"""
    ctx = Ctx(offsets_retention_ms=1000, offsets_retention_check_interval_ms=100)
    ctx.shard.on_loaded(0)
    ctx.commit("foo", "", -1, {("bar", 0): (100, ""), ("bar", 1): (101, "")})
    txn_commit(ctx, "foo", "", -1, {("bar", 0): (200, "")})
    results = ctx.sleep(2000)
    tombs = [(r.key.group, r.key.topic, r.key.partition) for res in results for r in res.records]
    assert ("foo", "bar", 1) in tombs and ("foo", "bar", 0) not in tombs
    assert ctx.group("foo") is not None
    txn_only = Ctx(offsets_retention_ms=1000, offsets_retention_check_interval_ms=100)
    txn_only.shard.on_loaded(0)
    txn_commit(txn_only, "g", "", -1, {("bar", 0): (1, "")})
    txn_only.sleep(2000)
    assert txn_only.group("g") is not None  # open transaction: the group stays


def test_transactional_replay():
    """testTransactionalReplay: offsets of a transactional batch are pending per producer id, not committed"""
    ctx = Ctx()
    replay(ctx, "foo", "bar", 0, om(0, 100), 5)
    replay(ctx, "foo", "bar", 1, om(1, 101), 5)
    replay(ctx, "bar", "zar", 0, om(2, 100), 5)
    replay(ctx, "bar", "zar", 1, om(3, 101), 5)
    replay(ctx, "foo", "bar", 2, om(4, 102), 6)
    replay(ctx, "foo", "bar", 3, om(5, 102), 6)
    p = ctx.shard.pending_offsets
    assert p.get(5, "foo", "bar", 0) == om(0, 100) and p.get(5, "bar", "zar", 1) == om(3, 101)
    assert p.get(6, "foo", "bar", 3) == om(5, 102) and p.get(6, "foo", "bar", 0) is None
    assert ctx.shard.offsets.get("foo", "bar", 0) is None
    assert ctx.group("foo") is not None and ctx.group("bar") is not None  # simple groups


def test_replay_with_tombstone_and_pending_transactional_offsets():
    """testReplayWithTombstoneAndPendingTransactionalOffsets"""
    ctx = Ctx()
    replay(ctx, "foo", "bar", 0, om(0, 100))
    replay(ctx, "foo", "bar", 0, om(1, 100), 10)
    replay(ctx, "foo", "bar", 1, om(2, 100), 10)
    ctx.shard.replay(offset_tombstone("foo", "bar", 0), 3)
    ctx.shard.replay(offset_tombstone("foo", "bar", 1), 4)
    assert ctx.shard.offsets.get("foo", "bar", 0) is None
    assert not ctx.shard.pending_offsets.has_pending("foo", "bar", 0)
    assert not ctx.shard.pending_offsets.has_pending("foo", "bar", 1)


def test_replay_transaction_end_marker_with_commit():
    """testReplayTransactionEndMarkerWithCommit: COMMIT materialises, ABORT drops, an unknown producer is ignored"""
    ctx = Ctx()
    replay(ctx, "foo", "bar", 0, om(0, 99))
    replay(ctx, "foo", "bar", 0, om(1, 100), 5)
    replay(ctx, "foo", "bar", 1, om(2, 200), 6)
    ctx.shard.replay_end_transaction_marker(1, True)
    ctx.shard.replay_end_transaction_marker(5, True)
    assert ctx.shard.pending_offsets.get(5, "foo", "bar", 0) is None
    assert ctx.shard.offsets.get("foo", "bar", 0) == om(1, 100)
    ctx.shard.replay_end_transaction_marker(6, False)
    assert ctx.shard.pending_offsets.get(6, "foo", "bar", 1) is None
    assert ctx.shard.offsets.get("foo", "bar", 1) is None
    assert not ctx.shard.pending_offsets.has_open_transactions("foo")


def test_replay_transaction_end_marker_keeps_the_most_recent_committed_offset():
    """testReplayTransactionEndMarkerKeepsTheMostRecentCommittedOffset: a plain commit written after the
    transactional one wins"""
    ctx = Ctx()
    replay(ctx, "foo", "bar", 0, om(0, 100), 5)
    replay(ctx, "foo", "bar", 0, om(1, 101))
    ctx.shard.replay_end_transaction_marker(5, True)
    assert ctx.shard.pending_offsets.get(5, "foo", "bar", 0) is None
    assert ctx.shard.offsets.get("foo", "bar", 0) == om(1, 101)


def test_live_writes_keep_log_order():
    """The same rule for the shard's own writes: a plain OffsetCommit after a TxnOffsetCommit of the same partition
    is kept when the transaction commits; one before it is replaced"""
    ctx = Ctx()
    txn_commit(ctx, "foo", "", -1, {("bar", 0): (100, ""), ("bar", 1): (100, "")})
    ctx.commit("foo", "", -1, {("bar", 0): (50, "")})
    ctx.shard.replay_end_transaction_marker(10, True)
    assert fetch(ctx, "foo", [("bar", [0, 1])]) == {("bar", 0): (50, 0), ("bar", 1): (100, 0)}
