"""TransactionMarkerRequestCompletionHandlerTest: what each partition's WriteTxnMarkers answer does to a
transaction whose markers are out (TxnCoordinatorShard.markers_written)."""

from __future__ import annotations

import pytest

from cluster.txn.txn_metadata import TransactionState, TransactionVersion
from protocol.errors import ErrorCode as E
from tests.cluster.txn.harness import NOW, Harness

S = TransactionState
TP = ("topic1", 0)


def prepared():
    """A transaction in PrepareCommit whose marker for one partition is out (coordinator epoch 0)."""
    h = Harness()
    out, _ = h.settle(h.shard.init_producer_id("txn", 60000, None, NOW, token="i"), token="i")
    h.settle(h.shard.add_partitions_to_txn("txn", out.producer_id, out.producer_epoch, {TP}, NOW, token="a"))
    _, results = h.settle(h.shard.end_txn("txn", out.producer_id, out.producer_epoch, True, TransactionVersion.TV_0,
                                          NOW, token="e"), token="e")
    (markers,) = [m for r in results for m in r.markers]
    return h, markers


def test_should_complete_delayed_operation_when_no_errors():
    """TransactionMarkerRequestCompletionHandlerTest.shouldCompleteDelayedOperationWhenNoErrors"""
    h, m = prepared()
    res = h.shard.markers_written("txn", m.coordinator_epoch, {TP: E.NONE}, NOW)
    assert h.get("txn").topic_partitions == set()
    assert [r.transit.txn_state for w in res.writes for r in w.records] == [S.COMPLETE_COMMIT]


@pytest.mark.parametrize("how", ["not coordinator", "loading", "epoch changed"])
def test_markers_are_dropped_when_the_coordinator_moved(how):
    """TransactionMarkerRequestCompletionHandlerTest.shouldCompleteDelayedOperationWhenNotCoordinator,
    shouldCompleteDelayedOperationWhenCoordinatorLoading, shouldCompleteDelayedOperationWhenCoordinatorEpochChanged"""
    h, m = prepared()
    if how == "not coordinator":
        h.shard.unload(NOW)
    elif how == "loading":
        h.shard.begin_load(1, NOW)
    else:
        h.shard.load(1, h.log, NOW)
    res = h.shard.markers_written("txn", m.coordinator_epoch, {TP: E.NONE}, NOW)
    assert res.writes == [] and res.markers == []


@pytest.mark.parametrize("error", [E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED])
def test_should_complete_delayed_operation_when_producer_or_coordinator_epoch_fenced(error):
    """TransactionMarkerRequestCompletionHandlerTest.shouldCompleteDelayedOperationWhenInvalidProducerEpoch,
    shouldCompleteDelayedOperationWhenCoordinatorEpochFenced: sending stops"""
    h, m = prepared()
    res = h.shard.markers_written("txn", m.coordinator_epoch, {TP: error}, NOW)
    assert res.writes == [] and res.markers == [] and h.shard.pending_markers() == []
    assert h.get("txn").topic_partitions == {TP}


@pytest.mark.parametrize("error", [E.UNKNOWN_SERVER_ERROR, E.CORRUPT_MESSAGE, E.MESSAGE_TOO_LARGE,
                                   E.RECORD_LIST_TOO_LARGE, E.INVALID_REQUIRED_ACKS])
def test_fatal_errors_stop_sending(error):
    """TransactionMarkerRequestCompletionHandlerTest.shouldThrowIllegalStateExceptionWhenUnknownError,
    ...WhenCorruptMessageError, ...WhenMessageTooLargeError, ...WhenRecordListTooLargeError,
    ...WhenInvalidRequiredAcksError: Kafka throws in its sender thread; here sending stops the same way and the
    transaction stays PrepareCommit until a reload sends its markers again"""
    h, m = prepared()
    res = h.shard.markers_written("txn", m.coordinator_epoch, {TP: error}, NOW)
    assert res.writes == [] and res.markers == [] and h.shard.pending_markers() == []
    assert h.get("txn").state is S.PREPARE_COMMIT
    assert [mk.partitions for mk in h.shard.load(1, h.log, NOW).markers] == [frozenset({TP})]


@pytest.mark.parametrize("error", [E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
                                   E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.KAFKA_STORAGE_ERROR, E.REQUEST_TIMED_OUT,
                                   E.NETWORK_EXCEPTION])
def test_should_retry_partition_on_retriable_errors(error):
    """TransactionMarkerRequestCompletionHandlerTest.shouldRetryPartitionWhenUnknownTopicOrPartitionError,
    ...WhenNotLeaderOrFollowerError, ...WhenNotEnoughReplicasError, ...WhenNotEnoughReplicasAfterAppendError,
    ...WhenKafkaStorageError, shouldReEnqueuePartitionsWhenBrokerDisconnected (NETWORK_EXCEPTION)"""
    h, m = prepared()
    res = h.shard.markers_written("txn", m.coordinator_epoch, {TP: error}, NOW)
    assert [(r.partitions, r.producer_id, r.producer_epoch, r.committed) for r in res.markers] == [
        (frozenset({TP}), m.producer_id, m.producer_epoch, True)]
    assert res.writes == [] and h.get("txn").topic_partitions == {TP}


def test_should_remove_topic_partition_from_waiting_set_on_unsupported_for_message_format():
    """TransactionMarkerRequestCompletionHandlerTest.shouldRemoveTopicPartitionFromWaitingSetOnUnsupportedForMessageFormat"""
    h, m = prepared()
    res = h.shard.markers_written("txn", m.coordinator_epoch, {TP: E.UNSUPPORTED_FOR_MESSAGE_FORMAT}, NOW)
    assert h.get("txn").topic_partitions == set()
    assert [r.transit.txn_state for w in res.writes for r in w.records] == [S.COMPLETE_COMMIT]
