"""Kafka's ShareSessionCacheTest and the session and validation cases of SharePartitionManagerTest (and of
KafkaApisTest's ShareFetch/ShareAcknowledge checks), ported to cluster/share/share_session.py.

Each test names the Kafka method it ports. Kafka 4.1 dropped the cache's idle eviction (``touch``, ``evictionMs``)
for removal on disconnect, so the eviction steps of the 4.0 tests are replaced by the 4.2 connection rules.
"""

from __future__ import annotations

import pytest

from cluster.share.share_partition import AcknowledgementBatch, ShareError
from cluster.share.share_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    ShareSessionCache,
    ShareSessionKey,
    next_epoch,
    validate_acknowledgement_batches,
    validate_share_fetch_request,
)
from protocol.errors import ErrorCode

FOO, BAR = "foo-id", "bar-id"


def parts(n, topic=FOO):
    return [(topic, i) for i in range(n)]


def code_of(fn, *args, **kwargs):
    with pytest.raises(ShareError) as e:
        fn(*args, **kwargs)
    return e.value.code


def test_share_session_cache():
    """ShareSessionCacheTest.testShareSessionCache: at most max entries; a full cache creates nothing."""
    cache = ShareSessionCache(3)
    assert cache.size() == 0
    keys = [cache.maybe_create_session("grp", f"m{i}", parts(n), f"conn{i}") for i, n in enumerate((10, 20, 30))]
    assert all(keys)
    assert cache.maybe_create_session("grp", "m3", parts(40), "conn3") is None
    assert cache.size() == 3 and cache.num_members("grp") == 3
    cache.remove(keys[1])
    assert cache.maybe_create_session("grp", "m4", parts(11), "conn4") is not None
    assert {k for k in (keys[0], keys[2]) if cache.get(k)} == {keys[0], keys[2]}


def test_resize_cached_sessions():
    """ShareSessionCacheTest.testResizeCachedSessions: the partition count follows the sessions."""
    cache = ShareSessionCache(2)
    k1 = cache.maybe_create_session("grp", "m1", parts(2), "c1")
    assert cache.get(k1).epoch == 1 and cache.total_partitions() == 2
    k2 = cache.maybe_create_session("grp", "m2", parts(4), "c2")
    assert cache.total_partitions() == 6 and cache.size() == 2
    assert cache.maybe_create_session("grp", "m3", parts(5), "c3") is None
    cache.remove(k1)
    assert cache.size() == 1 and cache.total_partitions() == 4
    cache.get(k2).update([], [(FOO, 0)])
    assert cache.total_partitions() == 3


def test_connection_disconnect_removes_session():
    """ShareSessionCacheTest (4.1+) testRemoveConnection: a dropped connection removes its member's session."""
    cache = ShareSessionCache(10)
    key = cache.maybe_create_session("grp", "m1", parts(1), "conn-1")
    session = cache.on_disconnect("conn-1")
    assert session.key == key and list(session.partitions) == parts(1)
    assert cache.get(key) is None and cache.num_members("grp") is None
    assert cache.on_disconnect("conn-1") is None


def test_disconnect_of_stale_connection_spares_new_session():
    """ShareSessionCache.remove marks the old connection stale: a member that reopened its session on another
    connection keeps it when the old connection's disconnect arrives."""
    cache = ShareSessionCache(10)
    cache.new_context("grp", [(FOO, 0)], [], "m1", INITIAL_EPOCH, False, "conn-old")
    cache.new_context("grp", [(FOO, 0)], [], "m1", INITIAL_EPOCH, False, "conn-new")
    assert cache.on_disconnect("conn-old") is None
    assert cache.get(ShareSessionKey("grp", "m1")) is not None
    assert cache.on_disconnect("conn-new").key == ShareSessionKey("grp", "m1")


def test_new_context_returns_final_context_without_request_data():
    """SharePartitionManagerTest.testNewContextReturnsFinalContextWithoutRequestData"""
    cache = ShareSessionCache(10)
    ctx = cache.new_context("grp", [(FOO, 0), (FOO, 1)], [], "m1", INITIAL_EPOCH, False, "c")
    assert not ctx.final and not ctx.subsequent
    ctx = cache.new_context("grp", [], [], "m1", FINAL_EPOCH, True, "c")
    assert ctx.final and ctx.partitions == ()


def test_new_context_returns_final_context_error():
    """SharePartitionManagerTest.testNewContextReturnsFinalContextError: a final request may not fetch."""
    assert code_of(validate_share_fetch_request, FINAL_EPOCH, 1, 0) == ErrorCode.INVALID_REQUEST
    assert code_of(validate_share_fetch_request, FINAL_EPOCH, 0, 1) == ErrorCode.INVALID_REQUEST
    validate_share_fetch_request(FINAL_EPOCH, 0, 0)


def test_new_context():
    """SharePartitionManagerTest.testNewContext: session errors and epochs."""
    cache = ShareSessionCache(10)
    # a subsequent request without a session
    assert code_of(cache.new_context, "grp", [(FOO, 0)], [], "m1", 1, False, "c") == \
        ErrorCode.SHARE_SESSION_NOT_FOUND
    # a final request without a session
    assert code_of(cache.new_context, "grp", [], [], "m1", FINAL_EPOCH, False, "c") == \
        ErrorCode.SHARE_SESSION_NOT_FOUND
    ctx = cache.new_context("grp", [(FOO, 0), (FOO, 1)], [], "m1", INITIAL_EPOCH, False, "c")
    assert ctx.partitions == ((FOO, 0), (FOO, 1))
    # wrong epochs
    assert code_of(cache.new_context, "grp", [], [], "m1", 5, False, "c") == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    ctx = cache.new_context("grp", [], [], "m1", 1, False, "c")
    assert ctx.subsequent and ctx.partitions == ((FOO, 0), (FOO, 1))
    assert code_of(cache.new_context, "grp", [], [], "m1", 1, False, "c") == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.new_context("grp", [], [], "m1", 2, False, "c").subsequent
    validate_share_fetch_request(-2, 0, 0)  # not special: newContext finds the epoch wrong
    assert code_of(cache.new_context, "grp", [], [], "m1", -2, False, "c") == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    # another group, same member id: another session
    assert code_of(cache.new_context, "grp2", [], [], "m1", 1, False, "c") == ErrorCode.SHARE_SESSION_NOT_FOUND
    # epoch 0 again replaces the session
    ctx = cache.new_context("grp", [(BAR, 0)], [], "m1", INITIAL_EPOCH, False, "c")
    assert ctx.partitions == ((BAR, 0),) and cache.get(ShareSessionKey("grp", "m1")).epoch == 1


def test_a_subsequent_answer_checks_the_session_did_not_move_on():
    """ShareSessionContext.updateAndGenerateResponseData and throttleResponse (testNewContext's responses): a
    subsequent request answers NONE while its session's epoch is the one it set; once another connection's request
    of the session moved it on meanwhile (a ShareAcknowledge or a ShareFetch: "possible duplicate request")
    INVALID_SHARE_SESSION_EPOCH (a request pipelined on the same connection does not count: Kafka serves a
    connection's requests one at a time). A new session's and a final request's answers are not checked; a session
    replaced at epoch 0 leaves the old session's requests alone."""
    cache = ShareSessionCache(10)
    first = cache.new_context("grp", [(FOO, 0)], [], "m1", INITIAL_EPOCH, False, "c")
    assert first.response_error() == ErrorCode.NONE
    ctx = cache.new_context("grp", [], [], "m1", 1, False, "c")
    assert ctx.subsequent and ctx.response_error() == ErrorCode.NONE
    # a ShareAcknowledge of the session pipelined behind it on its connection: Kafka serves it after this answer
    cache.acknowledge_session_update("grp", "m1", 2, "c")
    assert ctx.response_error() == ErrorCode.NONE
    cache.acknowledge_session_update("grp", "m1", 3, "c2")  # one from another connection, served meanwhile
    assert ctx.response_error() == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    later = cache.new_context("grp", [], [], "m1", 4, False, "c2")  # a ShareFetch of the session, another connection
    assert later.response_error() == ErrorCode.NONE
    assert first.response_error() == ErrorCode.NONE  # a new session is not checked
    assert cache.new_context("grp", [], [], "m1", FINAL_EPOCH, False, "c").response_error() == ErrorCode.NONE
    cache.new_context("grp", [(FOO, 0)], [], "m1", INITIAL_EPOCH, False, "c")  # replaced: the old one stays put
    assert later.response_error() == ErrorCode.NONE


def test_initial_request_with_acknowledgements_refused():
    """SharePartitionManager.newContext: acknowledgements in an epoch-0 request are INVALID_REQUEST."""
    cache = ShareSessionCache(10)
    assert code_of(cache.new_context, "grp", [(FOO, 0)], [], "m1", INITIAL_EPOCH, True, "c") == \
        ErrorCode.INVALID_REQUEST
    assert cache.size() == 0


def test_share_session_limit_reached():
    """SharePartitionManagerTest (4.1+) testNewContextThrowsErrorWhenShareSessionCacheIsFull"""
    cache = ShareSessionCache(1)
    cache.new_context("grp", [(FOO, 0)], [], "m1", INITIAL_EPOCH, False, "c1")
    assert code_of(cache.new_context, "grp", [(FOO, 0)], [], "m2", INITIAL_EPOCH, False, "c2") == \
        ErrorCode.SHARE_SESSION_LIMIT_REACHED
    # the member holding the slot may reopen its own session
    assert not cache.new_context("grp", [(FOO, 0)], [], "m1", INITIAL_EPOCH, False, "c1").subsequent


def test_subsequent_share_session():
    """SharePartitionManagerTest.testSubsequentShareSession: add bar-0, forget foo-0."""
    cache = ShareSessionCache(10)
    cache.new_context("grp", [(FOO, 0), (FOO, 1)], [], "m1", INITIAL_EPOCH, False, "c")
    ctx = cache.new_context("grp", [(BAR, 0)], [(FOO, 0)], "m1", 1, False, "c")
    assert set(ctx.partitions) == {(FOO, 1), (BAR, 0)}


def test_zero_size_share_session():
    """SharePartitionManagerTest.testZeroSizeShareSession"""
    cache = ShareSessionCache(10)
    cache.new_context("grp", [(FOO, 0), (FOO, 1)], [], "m1", INITIAL_EPOCH, False, "c")
    ctx = cache.new_context("grp", [], [(FOO, 0), (FOO, 1)], "m1", 1, False, "c")
    assert ctx.partitions == () and cache.size() == 1


def test_to_forget_partitions():
    """SharePartitionManagerTest.testToForgetPartitions"""
    cache = ShareSessionCache(10)
    cache.new_context("grp", [(FOO, 0), (BAR, 0)], [], "m1", INITIAL_EPOCH, False, "c")
    assert cache.new_context("grp", [], [(FOO, 0)], "m1", 1, False, "c").partitions == ((BAR, 0),)
    assert cache.new_context("grp", [], [(BAR, 0)], "m1", 2, False, "c").partitions == ()


def test_repeated_partition_in_request():
    """A request may name a partition twice (ShareSession.update is keyed by partition)."""
    cache = ShareSessionCache(10)
    ctx = cache.new_context("grp", [(FOO, 0), (FOO, 0)], [], "m1", INITIAL_EPOCH, False, "c")
    assert ctx.partitions == ((FOO, 0),)
    ctx = cache.new_context("grp", [(FOO, 0), (FOO, 1), (FOO, 1)], [], "m1", 1, False, "c")
    assert ctx.partitions == ((FOO, 0), (FOO, 1)) and cache.total_partitions() == 2


def test_acknowledge_session_update():
    """SharePartitionManagerTest (4.x) testAcknowledgeSessionUpdate*: epoch 0 refused, unknown session, wrong
    epoch; a final epoch leaves the epoch alone."""
    cache = ShareSessionCache(10)
    assert code_of(cache.acknowledge_session_update, "grp", "m1", INITIAL_EPOCH) == \
        ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert code_of(cache.acknowledge_session_update, "grp", "m1", 1) == ErrorCode.SHARE_SESSION_NOT_FOUND
    cache.new_context("grp", [(FOO, 0)], [], "m1", INITIAL_EPOCH, False, "c")
    assert code_of(cache.acknowledge_session_update, "grp", "m1", 2) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    cache.acknowledge_session_update("grp", "m1", 1)
    assert cache.get(ShareSessionKey("grp", "m1")).epoch == 2
    cache.acknowledge_session_update("grp", "m1", FINAL_EPOCH)
    assert cache.get(ShareSessionKey("grp", "m1")).epoch == 2
    assert code_of(cache.acknowledge_session_update, "grp", "m2", FINAL_EPOCH) == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_release_session():
    """SharePartitionManagerTest.testReleaseSessionSuccess / testReleaseSessionWithIncorrectGroupId /
    testReleaseSessionWithIncorrectMemberId: the final request's session goes, with its partitions."""
    cache = ShareSessionCache(10)
    cache.new_context("grp", [(FOO, 0), (BAR, 1)], [], "m1", INITIAL_EPOCH, False, "c")
    assert code_of(cache.close_session, "grp2", "m1") == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert code_of(cache.close_session, "grp", "m2") == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.new_context("grp", [], [], "m1", FINAL_EPOCH, False, "c").final
    assert list(cache.close_session("grp", "m1").partitions) == [(FOO, 0), (BAR, 1)]
    assert cache.size() == 0
    assert cache.on_disconnect("c") is None  # already gone: nothing more to release


def test_next_epoch():
    """ShareRequestMetadata.nextEpoch"""
    assert [next_epoch(e) for e in (0, 1, 2**31 - 1, -1)] == [1, 2, 1, -1]


def test_renew_ack_with_fetch_parameters_refused():
    """KafkaApis (4.2, KIP-1222): an IsRenewAck ShareFetch must not fetch."""
    for kw in ({"max_wait_ms": 1}, {"min_bytes": 1}, {"max_bytes": 1}, {"max_records": 1}):
        assert code_of(validate_share_fetch_request, 1, 0, 0, True, **kw) == ErrorCode.INVALID_REQUEST
    validate_share_fetch_request(1, 0, 0, True)
    validate_share_fetch_request(1, 2, 0, False, max_wait_ms=500, max_records=500)


def B(first, last, *types):
    return AcknowledgementBatch(first, last, tuple(types))


@pytest.mark.parametrize("batches, renew, expected", [
    ([B(0, 4, 1)], False, ErrorCode.NONE),
    ([B(0, 2, 1, 2, 3), B(3, 3, 0)], False, ErrorCode.NONE),
    ([B(5, 4, 1)], False, ErrorCode.INVALID_REQUEST),  # first > last
    ([B(0, 4, 1), B(4, 6, 1)], False, ErrorCode.INVALID_REQUEST),  # overlapping
    ([B(5, 6, 1), B(0, 2, 1)], False, ErrorCode.INVALID_REQUEST),  # unordered
    ([B(0, 4)], False, ErrorCode.INVALID_REQUEST),  # no type
    ([B(0, 4, 1, 1)], False, ErrorCode.INVALID_REQUEST),  # neither one type nor one per offset
    ([B(0, 4, 5)], False, ErrorCode.INVALID_REQUEST),  # type outside 0-3
    ([B(0, 4, -1)], False, ErrorCode.INVALID_REQUEST),
    ([B(0, 4, 4)], False, ErrorCode.INVALID_REQUEST),  # Renew without IsRenewAck
    ([B(0, 4, 4)], True, ErrorCode.NONE),
    ([B(0, 1, 4, 1)], True, ErrorCode.NONE),
    ([B(0, 4, 5)], True, ErrorCode.INVALID_REQUEST),
])
def test_validate_acknowledgement_batches(batches, renew, expected):
    """KafkaApisTest's ShareFetch/ShareAcknowledge acknowledgement validation (validateAcknowledgementBatches:
    testHandleShareFetchRequestAcknowledgementBatchesFirstOffsetGreaterThanLastOffset and its siblings)."""
    assert validate_acknowledgement_batches(batches, renew) == expected


# ---- PartitionRotateStrategyTest (Kafka 4.2, server/.../share/fetch) -----------------------------------------------

def test_rotate_round_robin_as_partition_rotate_strategy_test():
    from cluster.share.share_session import rotate_round_robin

    parts = tuple((b"t", i) for i in range(3))
    assert rotate_round_robin(parts, 1) == parts[1:] + parts[:1]
    assert rotate_round_robin(parts, 5) == parts[2:] + parts[:2]  # an epoch above the count
    assert rotate_round_robin(parts, 2**31 - 1) == parts[1:] + parts[:1]  # Integer.MAX_VALUE % 3 == 1
    assert rotate_round_robin(parts, 3) == parts  # a multiple of the count: no rotation
    assert rotate_round_robin(parts, 0) == parts and rotate_round_robin(parts, -1) == parts  # initial, final
    assert rotate_round_robin(parts[:1], 7) == parts[:1] and rotate_round_robin((), 7) == ()
    # every epoch keeps every partition once
    for epoch in range(1, 20):
        assert sorted(rotate_round_robin(parts, epoch)) == sorted(parts)
