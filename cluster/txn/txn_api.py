"""Requests in, responses out: the transaction APIs' request fields as :class:`TxnCoordinatorShard` arguments and
its outcomes as response messages, with KafkaApis' version-dependent error codes.

What stays with the broker's handlers (they need the authorizer, the metadata image or every shard): the
authorization errors, UNKNOWN_TOPIC_OR_PARTITION + OPERATION_NOT_ATTEMPTED for AddPartitionsToTxn partitions of
unknown topics, COORDINATOR_NOT_AVAILABLE while the coordinator is not started, and NOT_COORDINATOR for an id
whose partition has no shard here (:func:`describe_error`).
"""

from __future__ import annotations

import re
from typing import Iterable

from cluster.groups.group_records import partition_for as group_partition_for
from cluster.txn.txn_coordinator import EndTxnOutcome, InitProducerIdOutcome, TxnCoordinatorShard
from cluster.txn.txn_metadata import (
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TopicPartition, TransactionState, TransactionVersion, TxnError,
)
from protocol.errors import ErrorCode
from protocol.generated.messages import (
    AddOffsetsToTxnResponse, AddPartitionsToTxnResponse, EndTxnResponse, InitProducerIdResponse,
    ListTransactionsResponse,
)
from protocol.generated.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
)
from protocol.generated.messages.describe_transactions_response import TransactionState as DescribedTxn
from protocol.topics import GROUP_METADATA_TOPIC

E = ErrorCode


def _fenced(error: int, version: int, first_version_with_producer_fenced: int) -> int:
    """Clients of versions before PRODUCER_FENCED existed handle INVALID_PRODUCER_EPOCH the same way."""
    if error == E.PRODUCER_FENCED and version < first_version_with_producer_fenced:
        return E.INVALID_PRODUCER_EPOCH
    return error


# ---- InitProducerId -------------------------------------------------------------------------------------------

def init_producer_id_expected(req) -> tuple[int, int] | None:
    """The v3+ producer id and epoch (KIP-360): None for -1/-1; TxnError INVALID_REQUEST when only one is set."""
    pid, epoch = getattr(req, "producer_id", NO_PRODUCER_ID), getattr(req, "producer_epoch", NO_PRODUCER_EPOCH)
    if pid == NO_PRODUCER_ID and epoch == NO_PRODUCER_EPOCH:
        return None
    if pid == NO_PRODUCER_ID or epoch == NO_PRODUCER_EPOCH:
        raise TxnError(E.INVALID_REQUEST)
    return pid, epoch


def init_producer_id_response(outcome: InitProducerIdOutcome, version: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=_fenced(outcome.error, version, 4), producer_id=outcome.producer_id,
                                  producer_epoch=outcome.producer_epoch)


# ---- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------------------------

def add_partitions_transactions(req, version: int) -> list[tuple[str, int, int, bool, list[TopicPartition]]]:
    """``(transactional id, producer id, producer epoch, verify only, partitions)`` of each transaction of the
    request (v0-3: the one of the top-level fields)."""
    if version < 4:
        parts = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
        return [(req.v3_and_below_transactional_id, req.v3_and_below_producer_id, req.v3_and_below_producer_epoch,
                 False, parts)]
    return [(t.transactional_id, t.producer_id, t.producer_epoch, bool(t.verify_only),
             [(topic.name, p) for topic in t.topics for p in topic.partitions]) for t in req.transactions]


def add_partitions_result(transactional_id: str, errors: dict[TopicPartition, int]) -> AddPartitionsToTxnResult:
    """AddPartitionsToTxnResponse.resultForTransaction."""
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, p), err in sorted(errors.items()):
        by_topic.setdefault(topic, []).append(AddPartitionsToTxnPartitionResult(partition_index=p,
                                                                                partition_error_code=err))
    return AddPartitionsToTxnResult(transactional_id=transactional_id, topic_results=[
        AddPartitionsToTxnTopicResult(name=t, results_by_partition=rs) for t, rs in by_topic.items()])


def add_partitions_error_result(transactional_id: str, partitions: Iterable[TopicPartition], error: int,
                                version: int) -> AddPartitionsToTxnResult:
    """The outcome of an add (not a verification): one error for every partition of the transaction."""
    return add_partitions_result(transactional_id, dict.fromkeys(partitions, _fenced(error, version, 2)))


def add_partitions_response(results: list[AddPartitionsToTxnResult], version: int) -> AddPartitionsToTxnResponse:
    if version < 4:
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=results[0].topic_results if results else [])
    return AddPartitionsToTxnResponse(results_by_transaction=results)


def offsets_partition(group_id: str, offsets_topic_partitions: int) -> TopicPartition:
    """The ``__consumer_offsets`` partition AddOffsetsToTxn adds (the group coordinator's partitionFor)."""
    return GROUP_METADATA_TOPIC, group_partition_for(group_id, offsets_topic_partitions)


def add_offsets_to_txn_response(error: int, version: int) -> AddOffsetsToTxnResponse:
    return AddOffsetsToTxnResponse(error_code=_fenced(error, version, 2))


# ---- EndTxn ---------------------------------------------------------------------------------------------------

def end_txn_client_version(version: int) -> TransactionVersion:
    """EndTxn v5+ comes from a client that bumps the epoch on every transaction (KIP-890 part 2)."""
    return TransactionVersion.TV_2 if version > 4 else TransactionVersion.TV_0


def end_txn_response(outcome: EndTxnOutcome, version: int) -> EndTxnResponse:
    return EndTxnResponse(error_code=_fenced(outcome.error, version, 2), producer_id=outcome.producer_id,
                          producer_epoch=outcome.producer_epoch)


# ---- DescribeTransactions / ListTransactions -------------------------------------------------------------------

def describe_error(transactional_id: str, error: int) -> DescribedTxn:
    return DescribedTxn(error_code=error, transactional_id=transactional_id, topics=[])


def list_transactions_response(shards: Iterable[TxnCoordinatorShard], req, version: int, now_ms: int,
                               any_loading: bool = False) -> ListTransactionsResponse:
    """ListTransactions over this broker's shards: COORDINATOR_LOAD_IN_PROGRESS while any partition loads
    (``any_loading`` covers partitions whose shard does not exist yet); unknown state names are reported back.
    The transactional id pattern (v2, KIP-1152) is a regular expression the whole id must match; null or empty
    matches every id."""
    state_filters = list(req.state_filters or [])
    duration = req.duration_filter if version >= 1 else -1
    pattern = None
    raw = req.transactional_id_pattern if version >= 2 else None
    if raw:
        try:
            pattern = re.compile(raw)
        except re.error:
            return ListTransactionsResponse(error_code=E.INVALID_REGULAR_EXPRESSION)
    shards = list(shards)
    if any_loading or any(s.loading for s in shards):
        return ListTransactionsResponse(error_code=E.COORDINATOR_LOAD_IN_PROGRESS)
    unknown = [n for n in state_filters if TransactionState.from_name(n) is None]
    states = []
    for shard in shards:
        states += shard.list_transactions(now_ms, state_filters, req.producer_id_filters or [], duration, pattern)
    return ListTransactionsResponse(error_code=E.NONE, unknown_state_filters=unknown, transaction_states=states)
