"""The transaction coordinator of one ``__transaction_state`` partition, as a pure state machine.

Kafka's TransactionCoordinator with the per-partition part of TransactionStateManager and the bookkeeping of
TransactionMarkerChannelManager, without threads, locks, clocks or I/O. Time comes in as ``now_ms``, producer
ids from ``producer_ids`` (below), and every call returns a :class:`Result`:

* ``writes``: :class:`TxnWrite` s, each a batch of ``__transaction_state`` records the adapter appends (in
  order, with acks=all) and, once the append is committed or has failed, reports with
  :meth:`TxnCoordinatorShard.write_completed` ``(write_id, error_code, now_ms)``. State changes wait for that
  report (write-then-answer): a failed write rolls the pending state back, as Kafka's
  ``appendTransactionToLog`` callback does; the error is mapped as Kafka maps it (NOT_ENOUGH_REPLICAS,
  REQUEST_TIMED_OUT, UNKNOWN_TOPIC_OR_PARTITION -> COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER,
  KAFKA_STORAGE_ERROR -> NOT_COORDINATOR; MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE -> UNKNOWN_SERVER_ERROR).
* ``response``: the outcome of the request that produced this result, when it is known now; else None and it
  comes later as a completion.
* ``completions``: ``(token, outcome)``: outcomes of earlier requests (``token`` is whatever the adapter passed
  with them), released by a ``write_completed``.
* ``markers``: :class:`TxnMarkers` to send (WriteTxnMarkers to each partition's leader). The adapter reports
  each partition's answer with :meth:`TxnCoordinatorShard.markers_written`, and partitions that need no marker
  (their topic is gone: no leader known) with :meth:`TxnCoordinatorShard.markers_not_needed`; once every
  partition of a transaction is done the shard writes its Complete* record.
* ``needs_producer_ids``: ``producer_ids()`` had none at hand; the request was answered
  COORDINATOR_LOAD_IN_PROGRESS (Kafka's RPCProducerIdManager answer while it waits for a block, the client
  retries) and the adapter should fetch a block (AllocateProducerIds).

Outcomes are :class:`InitProducerIdOutcome`, an error code (AddPartitionsToTxn / AddOffsetsToTxn),
``{(topic, partition): error}`` (verification, AddPartitionsToTxn v4+ verify_only), :class:`EndTxnOutcome`.
``cluster.txn.txn_api`` turns requests into these calls and outcomes into responses (with the version-dependent
error codes).

Producer ids: ``producer_ids`` is a callable returning the next id of this broker's block, or None when the block
is used up (the adapter keeps one prefetched: Kafka's RPCProducerIdManager). A new transactional id, an
exhausted epoch at InitProducerId and (TV2) an exhausted epoch at EndTxn take one.

Lifecycle: :meth:`begin_load` (``coordinator_epoch`` = the partition's leader epoch), :meth:`replay` of every
record of the partition, :meth:`finish_load` (returns the markers of the transactions found in Prepare*);
:meth:`unload` on resignation. Timers (abort of timed-out transactions, expiry of idle transactional ids, retry
of Complete* writes that found the coordinator unavailable) fire from :meth:`poll`; :meth:`next_deadline` says
when to call it. The adapter appends each result's writes as it gets them (so the log keeps the order of the state
changes) and keeps ``transaction_version_level`` equal to the finalized ``transaction.version`` feature.

Transactions V2 (KIP-890 part 2), as in Kafka trunk 2024-10: EndTxn v5+ bumps the epoch in its Prepare* record,
recognises its own retries (the epoch before the bump, or the old producer id after an overflow), takes a new producer
id when the bump exhausts the epochs and switches to it in Complete*; markers carry the client's transaction version.
Later Kafka (4.0-4.3) as well: the client's transaction version is recorded on every add (TV_2 for a broker's implicit
add of a Produce v12+ / TxnOffsetCommit v5, #18086) and persists across the other transitions; an add checks the
pending state first (KAFKA-18660); the EndTxn answer carries the producer id and epoch the Complete* record will hold
(KAFKA-18660: the checkout answered the Prepare* ones, handing out epoch 32767 of the old id after an overflow). Where
this differs from the 2024-10 checkout: a coordinator abort at TV2 after a fence at epoch 32767 does not bump again
(the checkout would overflow the short); TransactionLogValue v1 also carries PreviousProducerId and NextProducerId
(the checkout writes only ClientTransactionVersion), so an overflow's retry is recognised after a failover.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any, Callable, Iterable

from cluster.txn.txn_log import TxnLogRecord, decode_record, key_to_bytes, partition_for
from cluster.txn.txn_metadata import (
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, SHORT_MAX, IllegalStateError, TopicPartition, TransactionMetadata,
    TransactionState, TransactionVersion, TxnError, TxnTransitMetadata, is_epoch_exhausted,
)
from protocol.errors import ErrorCode
from protocol.generated.messages.describe_transactions_response import TopicData
from protocol.generated.messages.describe_transactions_response import TransactionState as DescribedTxn
from protocol.generated.messages.list_transactions_response import TransactionState as ListedTxn

log = logging.getLogger("odradek.txn")

S = TransactionState
E = ErrorCode

# the configs and defaults of TransactionStateManagerConfig / TransactionLogConfig
TXN_CONFIG_DEFAULTS: dict[str, Any] = {
    "transactional.id.expiration.ms": 7 * 24 * 3600 * 1000,
    "transaction.max.timeout.ms": 900000,
    "transaction.state.log.num.partitions": 50,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3600 * 1000,
    "message.max.bytes": 1048588,  # caps a batch of expiry tombstones (Kafka: the partition's max.message.bytes)
}
_D = TXN_CONFIG_DEFAULTS
# how soon a Complete* write that found the coordinator unavailable is tried again (Kafka: the marker sender's
# next turn)
COMPLETE_RETRY_BACKOFF_MS = 100
# per-record bytes of a tombstone besides its key (record header, varints) when sizing a batch
_TOMBSTONE_OVERHEAD = 24
_BATCH_OVERHEAD = 61


@dataclasses.dataclass(frozen=True)
class TxnConfig:
    """The transaction coordinator's broker settings (Kafka names in ``from_props``)."""

    transactional_id_expiration_ms: int = _D["transactional.id.expiration.ms"]
    transaction_max_timeout_ms: int = _D["transaction.max.timeout.ms"]
    transaction_log_num_partitions: int = _D["transaction.state.log.num.partitions"]
    abort_timed_out_transactions_interval_ms: int = _D["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
    remove_expired_transactional_ids_interval_ms: int = _D["transaction.remove.expired.transaction.cleanup.interval.ms"]
    max_batch_bytes: int = _D["message.max.bytes"]  # the __transaction_state topic's max.message.bytes

    @classmethod
    def from_props(cls, props: dict) -> "TxnConfig":
        def get(key: str) -> int:
            v = props.get(key)
            return int(_D[key] if v is None else v)

        return cls(get("transactional.id.expiration.ms"), get("transaction.max.timeout.ms"),
                   get("transaction.state.log.num.partitions"),
                   get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
                   get("transaction.remove.expired.transaction.cleanup.interval.ms"), get("message.max.bytes"))

    def validate_transaction_timeout_ms(self, txn_timeout_ms: int) -> bool:
        return 0 < txn_timeout_ms <= self.transaction_max_timeout_ms


# ---- what a call returns --------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class InitProducerIdOutcome:
    producer_id: int
    producer_epoch: int
    error: int = E.NONE


@dataclasses.dataclass(frozen=True)
class EndTxnOutcome:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclasses.dataclass(frozen=True)
class TxnWrite:
    """Records to append to this shard's ``__transaction_state`` partition as one batch; report the outcome
    with ``write_completed(write_id, error_code, now_ms)``."""

    write_id: int
    records: list[TxnLogRecord]


@dataclasses.dataclass(frozen=True)
class TxnMarkers:
    """One transaction's markers to write (a WritableTxnMarker, split by the adapter per partition leader)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool  # TransactionResult: True = COMMIT
    partitions: frozenset[TopicPartition]
    transaction_version: int  # the client's TransactionVersion (WriteTxnMarkers v2 TransactionVersion)


@dataclasses.dataclass
class Result:
    writes: list[TxnWrite] = dataclasses.field(default_factory=list)
    response: Any = None
    completions: list[tuple[Any, Any]] = dataclasses.field(default_factory=list)
    markers: list[TxnMarkers] = dataclasses.field(default_factory=list)
    needs_producer_ids: bool = False


@dataclasses.dataclass
class _PendingWrite:
    """An append in flight: what completes (or rolls back) when it is reported."""

    coordinator_epoch: int
    entries: list[tuple[str, TxnTransitMetadata | None]]  # (id, transit); a tombstone batch holds Dead transits
    on_done: Callable[[int], None]
    retry_on_error: Callable[[int], bool] = lambda _err: False
    expiry: bool = False


@dataclasses.dataclass
class _PendingComplete:
    """A transaction whose markers are out: its Complete* is written once every partition answers
    (Kafka's PendingCompleteTxn)."""

    transactional_id: str
    coordinator_epoch: int
    committed: bool
    producer_id: int
    producer_epoch: int
    transaction_version: int
    complete_transit: TxnTransitMetadata


_APPEND_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
}


def append_error_to_coordinator_error(code: int) -> int:
    """A ``__transaction_state`` append error as the coordinator answers it (appendTransactionToLog)."""
    return _APPEND_ERRORS.get(code, code)


# NETWORK_EXCEPTION: the adapter's report for a broker that disconnected (Kafka re-enqueues those markers)
_MARKER_RETRIABLE = {E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
                     E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR,
                     E.NETWORK_EXCEPTION}


class TxnCoordinatorShard:
    """The transactional ids of one ``__transaction_state`` partition."""

    def __init__(self, partition: int, config: TxnConfig, producer_ids: Callable[[], int | None],
                 num_partitions: int | None = None,
                 transaction_version_level: TransactionVersion = TransactionVersion.TV_0) -> None:
        """``num_partitions``: the topic's partition count (default ``transaction.state.log.num.partitions``);
        ``transaction_version_level``: the finalized ``transaction.version`` feature, kept current by the adapter
        (it picks the record value version and the version of the coordinator's own aborts)."""
        self.partition = partition
        self.config = config
        self.producer_ids = producer_ids
        self.num_partitions = num_partitions or config.transaction_log_num_partitions
        self.transaction_version_level = TransactionVersion(transaction_version_level)
        self.coordinator_epoch: int | None = None  # None: not the coordinator of this partition
        self.loading = False
        self.transactions: dict[str, TransactionMetadata] = {}
        self.now_ms = 0
        self._writes: dict[int, _PendingWrite] = {}
        self._next_write_id = 1  # never reset: a stale report can not hit a new write
        self._pending_markers: dict[str, _PendingComplete] = {}
        self._complete_retries: list[_PendingComplete] = []  # LogAppendRetryQueueSize
        self._retry_at: int | None = None
        self._abort_check_at: int | None = None
        self._expire_check_at: int | None = None
        self._out: Result | None = None

    # ---- plumbing --------------------------------------------------------------------------------------------

    @property
    def complete_retries_queued(self) -> int:
        """Complete* writes waiting to be appended again (Kafka's LogAppendRetryQueueSize)."""
        return len(self._complete_retries)

    def _run(self, now_ms: int, fn: Callable, *args, token: Any = None) -> Result:
        """Run ``fn`` collecting its writes, markers and outcomes; an outcome for ``token`` that is ready before
        ``fn`` returns becomes the result's ``response``."""
        self.now_ms = now_ms
        outer = self._out
        self._out = Result()
        try:
            fn(*args)
            res = self._out
        finally:
            self._out = outer
        if token is not None:
            for i, (t, outcome) in enumerate(res.completions):
                if t is token:
                    res.response = outcome
                    del res.completions[i]
                    break
        return res

    def _reply(self, token: Any) -> Callable[[Any], None]:
        def reply(outcome: Any) -> None:
            self._out.completions.append((token, outcome))
        return reply

    def _new_producer_id(self) -> int:
        pid = self.producer_ids()
        if pid is None:
            self._out.needs_producer_ids = True
            raise TxnError(E.COORDINATOR_LOAD_IN_PROGRESS)
        return pid

    # ---- the cache (TransactionStateManager) -----------------------------------------------------------------
    def get_transaction_state(self, transactional_id: str) -> tuple[int, TransactionMetadata] | None:
        """``(coordinator epoch, metadata)``, None for an unknown id; TxnError NOT_COORDINATOR /
        COORDINATOR_LOAD_IN_PROGRESS when this shard does not serve the id now."""
        if partition_for(transactional_id, self.num_partitions) != self.partition or self.coordinator_epoch is None:
            raise TxnError(E.NOT_COORDINATOR)
        if self.loading:
            raise TxnError(E.COORDINATOR_LOAD_IN_PROGRESS)
        md = self.transactions.get(transactional_id)
        return None if md is None else (self.coordinator_epoch, md)

    def put_transaction_state_if_not_exists(self, md: TransactionMetadata) -> tuple[int, TransactionMetadata]:
        got = self.get_transaction_state(md.transactional_id)
        if got is not None:
            return got
        self.transactions[md.transactional_id] = md
        return self.coordinator_epoch, md

    def _append(self, transactional_id: str, coordinator_epoch: int, transit: TxnTransitMetadata,
                on_done: Callable[[int], None], retry_on_error: Callable[[int], bool] = lambda _e: False) -> None:
        """appendTransactionToLog: one record; ``on_done(error)`` once its write is reported."""
        try:
            got = self.get_transaction_state(transactional_id)
        except TxnError as exc:
            on_done(exc.code)
            return
        if got is None or got[0] != coordinator_epoch:
            on_done(E.NOT_COORDINATOR)
            return
        self._emit_write([(transactional_id, transit)],
                         _PendingWrite(coordinator_epoch, [(transactional_id, transit)], on_done, retry_on_error))

    def _emit_write(self, entries: list[tuple[str, TxnTransitMetadata | None]], pending: _PendingWrite) -> None:
        write_id = self._next_write_id
        self._next_write_id += 1
        self._writes[write_id] = pending
        level = self.transaction_version_level
        records = [TxnLogRecord(txn_id, None if pending.expiry else transit, level) for txn_id, transit in entries]
        self._out.writes.append(TxnWrite(write_id, records))

    def write_completed(self, write_id: int, error_code: int, now_ms: int) -> Result:
        """The adapter's report of a write: committed (error 0) or failed with the append's error code."""
        return self._run(now_ms, self._write_completed, write_id, int(error_code))

    def _write_completed(self, write_id: int, error_code: int) -> None:
        pending = self._writes.pop(write_id, None)
        if pending is None:
            return  # unloaded since: its requests were answered then
        if pending.expiry:
            self._expiry_written(pending, error_code)
            return
        ((txn_id, transit),) = pending.entries
        error = append_error_to_coordinator_error(error_code)
        if error == E.NONE:
            try:
                got = self.get_transaction_state(txn_id)
                if got is None or got[0] != pending.coordinator_epoch:
                    # the partition moved away and back meanwhile: let the client find the coordinator again
                    error = E.NOT_COORDINATOR
                else:
                    got[1].complete_transition_to(transit)
            except TxnError as exc:
                error = exc.code
        else:
            log.debug("Appending %s's new metadata %s failed due to %s", txn_id, transit, error_code)
            try:
                got = self.get_transaction_state(txn_id)
            except TxnError:
                got = None
            if got is not None and got[0] == pending.coordinator_epoch and not pending.retry_on_error(error):
                got[1].pending_state = None
        pending.on_done(error)

    # ---- InitProducerId --------------------------------------------------------------------------------------
    def init_producer_id(self, transactional_id: str, transaction_timeout_ms: int,
                         expected_producer_id_and_epoch: tuple[int, int] | None, now_ms: int,
                         token: Any = None) -> Result:
        """InitProducerId of a transactional producer (the idempotent one, with no id, never reaches a
        coordinator). ``expected_producer_id_and_epoch``: v3+ (KIP-360), None when the request has -1/-1."""
        token = object() if token is None else token
        return self._run(now_ms, self._init_producer_id, transactional_id, transaction_timeout_ms,
                         expected_producer_id_and_epoch, self._reply(token), token=token)

    def _init_producer_id(self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None,
                          reply: Callable) -> None:
        def error(code: int) -> None:
            reply(InitProducerIdOutcome(NO_PRODUCER_ID, NO_PRODUCER_EPOCH, code))

        if not transactional_id:
            return error(E.INVALID_REQUEST)
        if not self.config.validate_transaction_timeout_ms(timeout_ms):
            return error(E.INVALID_TRANSACTION_TIMEOUT)
        try:
            got = self.get_transaction_state(transactional_id)
            if got is None:
                md = TransactionMetadata(transactional_id, self._new_producer_id(), NO_PRODUCER_ID, NO_PRODUCER_ID,
                                         NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH, timeout_ms, S.EMPTY, (), -1,
                                         self.now_ms)
                got = self.put_transaction_state_if_not_exists(md)
            coordinator_epoch, md = got
            transit = self._prepare_init_producer_id_transit(transactional_id, timeout_ms, md, expected)
        except TxnError as exc:
            return error(exc.code)

        if transit.txn_state is S.PREPARE_EPOCH_FENCE:
            # abort the ongoing transaction first; the client retries (CONCURRENT_TRANSACTIONS) and then gets
            # a second bump, or a new producer id if the fence used up the epochs
            def after_abort(outcome: EndTxnOutcome) -> None:
                error(outcome.error if outcome.error != E.NONE else E.CONCURRENT_TRANSACTIONS)
            self._end_transaction(transactional_id, transit.producer_id, transit.producer_epoch, False,
                                  False, self.transaction_version_level, after_abort)
            return None

        def on_done(err: int) -> None:
            if err == E.NONE:
                log.info("Initialized transactionalId %s with producerId %d and producer epoch %d on partition "
                         "__transaction_state-%d", transactional_id, transit.producer_id, transit.producer_epoch,
                         self.partition)
                reply(InitProducerIdOutcome(transit.producer_id, transit.producer_epoch, E.NONE))
            else:
                error(err)
        self._append(transactional_id, coordinator_epoch, transit, on_done)
        return None

    def _prepare_init_producer_id_transit(self, transactional_id: str, timeout_ms: int, md: TransactionMetadata,
                                          expected: tuple[int, int] | None) -> TxnTransitMetadata:
        def is_valid_producer_id(pid: int, epoch: int) -> bool:
            # a just-created id (recovering from UNKNOWN_PRODUCER_ID), the current producer id, or the previous
            # one with its last epoch (a retry of a bump that rotated the id and whose answer was lost)
            return md.producer_epoch == NO_PRODUCER_EPOCH or pid == md.producer_id \
                or (pid == md.previous_producer_id and is_epoch_exhausted(epoch))

        if md.pending_transition_in_progress:
            raise TxnError(E.CONCURRENT_TRANSACTIONS)
        if expected is not None and not is_valid_producer_id(*expected):
            raise TxnError(E.PRODUCER_FENCED)
        if md.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            raise TxnError(E.CONCURRENT_TRANSACTIONS)
        if md.state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if md.is_producer_epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                return md.prepare_producer_id_rotation(self._new_producer_id(), timeout_ms, self.now_ms,
                                                       expected is not None)
            return md.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1],
                                                       self.now_ms)
        if md.state is S.ONGOING:
            # the bumped epoch is never returned: the transaction is aborted and the client retries
            return md.prepare_fence_producer_epoch()
        raise IllegalStateError(f"Found transactionalId {transactional_id} with state {md.state}. This is illegal as "
                                "we should never have transitioned to this state.")

    # ---- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------------------
    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Iterable[TopicPartition], now_ms: int, token: Any = None,
                              client_transaction_version: TransactionVersion = TransactionVersion.TV_0) -> Result:
        """AddPartitionsToTxn (v0-3, and v4+ without verify_only) and AddOffsetsToTxn (the group's
        ``__consumer_offsets`` partition). The outcome is an error code. ``client_transaction_version``: TV_2 for
        the implicit add of a Produce v12+ / TxnOffsetCommit v5 (a broker's AddPartitionsToTxn v5 without
        verify_only), recorded on the transaction (KafkaApis: version > 4)."""
        token = object() if token is None else token
        return self._run(now_ms, self._add_partitions, transactional_id, producer_id, producer_epoch,
                         frozenset(partitions), TransactionVersion(client_transaction_version), self._reply(token),
                         token=token)

    def _add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        partitions: frozenset[TopicPartition], client_tv: TransactionVersion, reply: Callable) -> None:
        if not transactional_id:
            return reply(E.INVALID_REQUEST)
        try:
            got = self.get_transaction_state(transactional_id)
            if got is None:
                raise TxnError(E.INVALID_PRODUCER_ID_MAPPING)
            coordinator_epoch, md = got
            if md.pending_transition_in_progress:
                # first (KAFKA-18660): a TV2 EndTxn whose bump overflowed answered the new producer id before its
                # Complete* record switches to it; the producer's next add must wait, not be told it is unknown
                raise TxnError(E.CONCURRENT_TRANSACTIONS)
            if md.producer_id != producer_id:
                raise TxnError(E.INVALID_PRODUCER_ID_MAPPING)
            if md.producer_epoch != producer_epoch:
                raise TxnError(E.PRODUCER_FENCED)
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                raise TxnError(E.CONCURRENT_TRANSACTIONS)
            if md.state is S.ONGOING and partitions <= md.topic_partitions:
                return reply(E.NONE)  # already in: no write
            transit = md.prepare_add_partitions(partitions, self.now_ms, client_tv)
        except TxnError as exc:
            return reply(exc.code)
        self._append(transactional_id, coordinator_epoch, transit, reply)
        return None

    def verify_partitions_in_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                 partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4+ with verify_only (KIP-890 part 1: a partition leader checks a transactional
        produce): NONE for a partition in the transaction, TRANSACTION_ABORTABLE for one that is not. No state
        change, so the answer is immediate."""
        partitions = frozenset(partitions)
        if not transactional_id:
            return dict.fromkeys(partitions, E.INVALID_REQUEST)
        try:
            got = self.get_transaction_state(transactional_id)
            if got is None:
                raise TxnError(E.INVALID_PRODUCER_ID_MAPPING)
            md = got[1]
            # the pending state is not checked: the append to the log validates again
            if md.producer_id != producer_id:
                raise TxnError(E.INVALID_PRODUCER_ID_MAPPING)
            if md.producer_epoch != producer_epoch:
                raise TxnError(E.PRODUCER_FENCED)
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                raise TxnError(E.CONCURRENT_TRANSACTIONS)
        except TxnError as exc:
            return dict.fromkeys(partitions, exc.code)
        return {tp: E.NONE if tp in md.topic_partitions else E.TRANSACTION_ABORTABLE for tp in partitions}

    # ---- EndTxn ---------------------------------------------------------------------------------------------
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                client_transaction_version: TransactionVersion, now_ms: int, token: Any = None) -> Result:
        """EndTxn; ``client_transaction_version`` is TV_2 for EndTxn v5+ (KafkaApis), else TV_0. The outcome
        (:class:`EndTxnOutcome`) comes once the Prepare* record is committed; the markers follow."""
        token = object() if token is None else token
        return self._run(now_ms, self._end_transaction, transactional_id, producer_id, producer_epoch, committed,
                         True, TransactionVersion(client_transaction_version), self._reply(token), token=token)

    def _end_txn_epoch_bumped(self, md: TransactionMetadata, producer_epoch: int) -> bool:
        """TV2 bumps the epoch at every EndTxn: a retry carries the epoch before the bump."""
        return md.pending_state is not S.PREPARE_EPOCH_FENCE and md.client_transaction_version.supports_epoch_bump \
            and md.producer_epoch == producer_epoch + 1

    def _end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                         is_from_client: bool, client_tv: TransactionVersion, reply: Callable) -> None:
        if not transactional_id:
            return reply(EndTxnOutcome(E.INVALID_REQUEST))
        try:
            got = self.get_transaction_state(transactional_id)
            if got is None:
                raise TxnError(E.INVALID_PRODUCER_ID_MAPPING)
            coordinator_epoch, md = got
            self._check_end_txn_producer(md, producer_id, producer_epoch, is_from_client)
            if md.state is not S.ONGOING:
                return reply(self._end_txn_when_not_ongoing(md, committed))
            is_epoch_fence = md.pending_state is S.PREPARE_EPOCH_FENCE and not committed
            transit = self._prepare_end_txn(md, producer_epoch, committed, client_tv)
        except TxnError as exc:
            return reply(EndTxnOutcome(exc.code))

        def on_done(err: int) -> None:
            self._send_txn_markers(transactional_id, producer_id, producer_epoch, committed, coordinator_epoch,
                                   is_epoch_fence, err, reply)
        self._append(transactional_id, coordinator_epoch, transit, on_done)
        return None

    def _check_end_txn_producer(self, md: TransactionMetadata, producer_id: int, producer_epoch: int,
                                is_from_client: bool) -> None:
        """The producer id and epoch checks of EndTxn, TV2 retries included."""
        v2 = md.pending_state is not S.PREPARE_EPOCH_FENCE and md.client_transaction_version.supports_epoch_bump
        # a TV2 client retrying an EndTxn whose bump overflowed: the new producer id is in place already
        retry_on_overflow = v2 and md.previous_producer_id == producer_id \
            and producer_epoch == SHORT_MAX - 1 and md.producer_epoch == 0
        retry_on_epoch_bump = self._end_txn_epoch_bumped(md, producer_epoch)
        if v2:
            # with TV2 the same epoch is the *next* EndTxn, not a retry: only the retry conditions are valid
            if md.state in (S.ONGOING, S.EMPTY, S.DEAD, S.PREPARE_EPOCH_FENCE):
                valid_epoch = producer_epoch == md.producer_epoch
            elif md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                valid_epoch = retry_on_epoch_bump
            else:
                valid_epoch = retry_on_epoch_bump or retry_on_overflow
        else:
            # TV0/1 clients never bump the epoch on their own; the coordinator's aborts may carry a higher one
            valid_epoch = (not is_from_client or producer_epoch == md.producer_epoch) \
                and producer_epoch >= md.producer_epoch
        if md.producer_id != producer_id and not retry_on_overflow:
            raise TxnError(E.INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch:
            raise TxnError(E.PRODUCER_FENCED)
        if md.pending_transition_in_progress and md.pending_state is not S.PREPARE_EPOCH_FENCE:
            raise TxnError(E.CONCURRENT_TRANSACTIONS)

    @staticmethod
    def _end_txn_when_not_ongoing(md: TransactionMetadata, committed: bool) -> EndTxnOutcome:
        """A retry of a finished EndTxn succeeds again; anything else is refused."""
        state = md.state
        if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            if committed != (state is S.COMPLETE_COMMIT):
                raise TxnError(E.INVALID_TXN_STATE)
            return EndTxnOutcome(E.NONE, md.producer_id, md.producer_epoch)
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise TxnError(E.CONCURRENT_TRANSACTIONS if committed == (state is S.PREPARE_COMMIT)
                           else E.INVALID_TXN_STATE)
        if state is S.EMPTY:
            raise TxnError(E.INVALID_TXN_STATE)
        raise IllegalStateError(f"Found transactionalId {md.transactional_id} with state {state}. This is illegal as "
                                "we should never have transitioned to this state.")

    def _prepare_end_txn(self, md: TransactionMetadata, producer_epoch: int, committed: bool,
                         client_tv: TransactionVersion) -> TxnTransitMetadata:
        next_state = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
        fencing = md.pending_state is S.PREPARE_EPOCH_FENCE
        next_producer_id = NO_PRODUCER_ID
        if client_tv.supports_epoch_bump and not fencing and md.is_producer_epoch_exhausted:
            next_producer_id = self._new_producer_id()  # the TV2 bump exhausts the epochs: Complete* switches ids
        if next_state is S.PREPARE_ABORT and fencing:
            # make way for PrepareAbort, carrying the fence's bumped epoch (in memory before the write: the fenced
            # producer's requests are refused from now on)
            md.pending_state = None
            md.producer_epoch = producer_epoch
            md.last_producer_epoch = NO_PRODUCER_EPOCH
            if client_tv.supports_epoch_bump and md.producer_epoch >= SHORT_MAX:
                client_tv = TransactionVersion.TV_1  # no room for a TV2 bump after a fence at the last epoch
        return md.prepare_abort_or_commit(next_state, client_tv, next_producer_id, self.now_ms)

    def _send_txn_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                          coordinator_epoch: int, is_epoch_fence: bool, err: int, reply: Callable) -> None:
        """The Prepare* write is reported: answer the EndTxn and send the markers (or give up on an error)."""
        if err != E.NONE:
            log.info("Aborting sending of transaction markers and returning %s error to client for %s's "
                     "EndTransaction request, since appending to transaction log with coordinator epoch %d failed",
                     err, transactional_id, coordinator_epoch)
            if is_epoch_fence:
                try:
                    again = self.get_transaction_state(transactional_id)
                except TxnError:
                    again = None
                if again is not None and again[0] == coordinator_epoch:
                    again[1].has_failed_epoch_fence = True  # the epoch was bumped, but never returned
            reply(EndTxnOutcome(err))
            return
        try:
            again = self.get_transaction_state(transactional_id)
            if again is None:
                raise IllegalStateError(f"The coordinator still owns the transaction partition for "
                                        f"{transactional_id}, but there is no metadata in the cache")
            if again[0] != coordinator_epoch:
                raise TxnError(E.NOT_COORDINATOR)
            md = again[1]
            if md.producer_id != producer_id:
                raise TxnError(E.INVALID_PRODUCER_ID_MAPPING)
            if md.producer_epoch != producer_epoch and not self._end_txn_epoch_bumped(md, producer_epoch):
                raise TxnError(E.PRODUCER_FENCED)
            if md.pending_transition_in_progress:
                raise TxnError(E.CONCURRENT_TRANSACTIONS)
            if md.state is not (S.PREPARE_COMMIT if committed else S.PREPARE_ABORT):
                raise TxnError(E.INVALID_TXN_STATE)
            complete = md.prepare_complete(self.now_ms)
        except TxnError as exc:
            reply(EndTxnOutcome(exc.code))
            return
        # answered now, the markers follow. The producer id and epoch are the ones the producer holds once the
        # transaction completes (TV2: the bumped epoch, or the next producer id after an overflow)
        reply(EndTxnOutcome(E.NONE, complete.producer_id, complete.producer_epoch))
        self._add_txn_markers_to_send(coordinator_epoch, committed, md, complete)

    # ---- markers (TransactionMarkerChannelManager's bookkeeping) -------------------------------------------------
    def _add_txn_markers_to_send(self, coordinator_epoch: int, committed: bool, md: TransactionMetadata,
                                 complete: TxnTransitMetadata) -> None:
        pending = _PendingComplete(md.transactional_id, coordinator_epoch, committed, md.producer_id,
                                   md.producer_epoch, int(md.client_transaction_version), complete)
        if md.transactional_id in self._pending_markers:
            log.info("Replaced an existing pending complete txn for %s", md.transactional_id)
        self._pending_markers[md.transactional_id] = pending
        if md.topic_partitions:
            self._out.markers.append(self._markers(pending, frozenset(md.topic_partitions)))
        self._maybe_write_txn_completion(md.transactional_id)

    @staticmethod
    def _markers(p: _PendingComplete, partitions: frozenset[TopicPartition]) -> TxnMarkers:
        return TxnMarkers(p.transactional_id, p.producer_id, p.producer_epoch, p.coordinator_epoch, p.committed,
                          partitions, p.transaction_version)

    def pending_markers(self) -> list[TxnMarkers]:
        """Every marker still unanswered (an adapter that lost its queue can send them again)."""
        out = []
        for txn_id, p in self._pending_markers.items():
            md = self.transactions.get(txn_id)
            if md is not None and md.topic_partitions:
                out.append(self._markers(p, frozenset(md.topic_partitions)))
        return out

    def _maybe_write_txn_completion(self, transactional_id: str) -> None:
        pending = self._pending_markers.get(transactional_id)
        md = self.transactions.get(transactional_id)
        if pending is None or md is None or md.topic_partitions:
            return
        del self._pending_markers[transactional_id]
        self._write_txn_completion(pending)

    def _write_txn_completion(self, pending: _PendingComplete) -> None:
        def on_done(err: int) -> None:
            if err == E.COORDINATOR_NOT_AVAILABLE:
                log.info("Not available to append the completion of %s; retry appending", pending.transactional_id)
                self._complete_retries.append(pending)
                if self._retry_at is None:
                    self._retry_at = self.now_ms + COMPLETE_RETRY_BACKOFF_MS
            elif err in (E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS):
                log.info("Skip writing the completion of %s to the transaction log: %s", pending.transactional_id,
                         ErrorCode(err).name)
            elif err != E.NONE:
                log.error("Unexpected error %s while appending to transaction log for %s", err,
                          pending.transactional_id)

        self._append(pending.transactional_id, pending.coordinator_epoch, pending.complete_transit, on_done,
                     retry_on_error=lambda err: err == E.COORDINATOR_NOT_AVAILABLE)

    def markers_written(self, transactional_id: str, coordinator_epoch: int,
                        errors: dict[TopicPartition, int], now_ms: int) -> Result:
        """The WriteTxnMarkers answers of some partitions of ``transactional_id``'s markers
        (TransactionMarkerRequestCompletionHandler). Retriable errors come back as markers to send again."""
        return self._run(now_ms, self._markers_written, transactional_id, coordinator_epoch, dict(errors))

    def _markers_written(self, transactional_id: str, coordinator_epoch: int,
                         errors: dict[TopicPartition, int]) -> None:
        pending = self._pending_markers.get(transactional_id)
        if pending is None or pending.coordinator_epoch != coordinator_epoch:
            return  # cancelled: the coordinator moved, or a newer completion replaced it
        try:
            got = self.get_transaction_state(transactional_id)
        except TxnError:
            self._pending_markers.pop(transactional_id, None)
            return
        if got is None or got[0] != coordinator_epoch:
            self._pending_markers.pop(transactional_id, None)
            return
        md = got[1]
        retry: set[TopicPartition] = set()
        for tp, err in errors.items():
            if err == E.NONE or err in (E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION):
                md.remove_partition(tp)  # written, or the producer could not have written there
            elif err in _MARKER_RETRIABLE:
                retry.add(tp)
            elif err in (E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED):
                log.info("Sending %s's transaction marker for %s has permanently failed with error %s; cancel "
                         "sending any more transaction markers", transactional_id, tp, err)
                self._pending_markers.pop(transactional_id, None)
                return
            else:
                # CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_REQUIRED_ACKS, anything unknown:
                # Kafka throws (IllegalStateException in the sender) and the transaction stays Prepare* until a
                # reload sends its markers again; here the same outcome, logged instead of raised
                log.error("Unexpected error %s while sending txn marker for %s to %s", err, transactional_id, tp)
                self._pending_markers.pop(transactional_id, None)
                return
        if retry:
            self._out.markers.append(self._markers(pending, frozenset(retry)))
        else:
            self._maybe_write_txn_completion(transactional_id)

    def markers_not_needed(self, transactional_id: str, coordinator_epoch: int,
                           partitions: Iterable[TopicPartition], now_ms: int) -> Result:
        """Partitions with no leader known (their topic is deleted): they leave the transaction unmarked."""
        return self._run(now_ms, self._markers_not_needed, transactional_id, coordinator_epoch, frozenset(partitions))

    def _markers_not_needed(self, transactional_id: str, coordinator_epoch: int,
                            partitions: frozenset[TopicPartition]) -> None:
        pending = self._pending_markers.get(transactional_id)
        if pending is None or pending.coordinator_epoch != coordinator_epoch:
            return
        try:
            got = self.get_transaction_state(transactional_id)
        except TxnError:
            got = None
        if got is None or got[0] != coordinator_epoch:
            self._pending_markers.pop(transactional_id, None)
            return
        for tp in partitions:
            got[1].remove_partition(tp)
        self._maybe_write_txn_completion(transactional_id)

    # ---- timers ---------------------------------------------------------------------------------------------
    def next_deadline(self) -> int | None:
        deadlines = [d for d in (self._abort_check_at, self._expire_check_at, self._retry_at) if d is not None]
        return min(deadlines) if deadlines else None

    def poll(self, now_ms: int) -> Result:
        """Run what is due at ``now_ms``: the Complete* retries, the abort of timed-out transactions, the expiry
        of idle transactional ids."""
        return self._run(now_ms, self._poll, now_ms)

    def _poll(self, now_ms: int) -> None:
        if self.coordinator_epoch is None or self.loading:
            return
        if self._retry_at is not None and self._retry_at <= now_ms:
            self._retry_at = None
            retries, self._complete_retries = self._complete_retries, []
            for pending in retries:
                self._write_txn_completion(pending)
        if self._abort_check_at is not None and self._abort_check_at <= now_ms:
            self._abort_check_at = now_ms + self.config.abort_timed_out_transactions_interval_ms
            self.abort_timed_out_transactions()
        if self._expire_check_at is not None and self._expire_check_at <= now_ms:
            self._expire_check_at = now_ms + self.config.remove_expired_transactional_ids_interval_ms
            self.remove_expired_transactional_ids()

    def timed_out_transactions(self) -> list[tuple[str, int, int]]:
        """``(transactional id, producer id, producer epoch)`` of every Ongoing transaction past its timeout."""
        return [(txn_id, md.producer_id, md.producer_epoch) for txn_id, md in self.transactions.items()
                if not md.pending_transition_in_progress and md.state is S.ONGOING
                and md.txn_start_timestamp + md.txn_timeout_ms < self.now_ms]

    def abort_timed_out_transactions(self) -> None:
        """Fence each timed-out transaction's producer (epoch bump) and abort it (inside a ``_run``)."""
        for txn_id, producer_id, producer_epoch in self.timed_out_transactions():
            md = self.transactions.get(txn_id)
            if md is None:
                continue
            if md.producer_id != producer_id or md.pending_transition_in_progress:
                continue
            transit = md.prepare_fence_producer_epoch()

            def on_complete(outcome: EndTxnOutcome, txn_id: str = txn_id) -> None:
                if outcome.error == E.NONE:
                    log.info("Completed rollback of ongoing transaction for transactionalId %s due to timeout",
                             txn_id)
                elif outcome.error in (E.INVALID_PRODUCER_ID_MAPPING, E.PRODUCER_FENCED, E.CONCURRENT_TRANSACTIONS):
                    log.debug("Rollback of ongoing transaction for transactionalId %s has been cancelled due to "
                              "error %s", txn_id, outcome.error)
                else:
                    log.warning("Rollback of ongoing transaction for transactionalId %s failed due to error %s",
                                txn_id, outcome.error)
            self._end_transaction(txn_id, transit.producer_id, transit.producer_epoch, False, False,
                                  self.transaction_version_level, on_complete)

    def _should_expire(self, md: TransactionMetadata) -> bool:
        return md.state.is_expiration_allowed \
            and md.txn_last_update_timestamp <= self.now_ms - self.config.transactional_id_expiration_ms

    def remove_expired_transactional_ids(self) -> None:
        """Tombstone every idle id not updated for ``transactional.id.expiration.ms`` (inside a ``_run``), in
        batches of at most ``max_batch_bytes``; each id leaves the cache when its tombstone is committed."""
        batch: list[tuple[str, TxnTransitMetadata]] = []
        size = _BATCH_OVERHEAD
        for txn_id, md in list(self.transactions.items()):
            if md.pending_state is not None or not self._should_expire(md):
                continue
            record_size = len(key_to_bytes(txn_id)) + _TOMBSTONE_OVERHEAD
            if batch and size + record_size > self.config.max_batch_bytes:
                self._emit_expiry(batch)
                batch, size = [], _BATCH_OVERHEAD
            batch.append((txn_id, md.prepare_dead()))
            size += record_size
        if batch:
            self._emit_expiry(batch)

    def _emit_expiry(self, batch: list[tuple[str, TxnTransitMetadata]]) -> None:
        self._emit_write(batch, _PendingWrite(self.coordinator_epoch, batch, lambda _e: None, expiry=True))

    def _expiry_written(self, pending: _PendingWrite, error_code: int) -> None:
        for txn_id, transit in pending.entries:
            md = self.transactions.get(txn_id)
            if md is None:
                continue
            if self.coordinator_epoch == pending.coordinator_epoch and not self.loading \
                    and md.pending_state is S.DEAD and md.producer_epoch == transit.producer_epoch \
                    and error_code == E.NONE:
                del self.transactions[txn_id]
            else:
                log.warning("Failed to remove expired transactionalId: %s from cache. Tombstone append error code: "
                            "%s, pendingState: %s", txn_id, error_code, md.pending_state)
                md.pending_state = None

    # ---- load / unload ---------------------------------------------------------------------------------------
    def begin_load(self, coordinator_epoch: int, now_ms: int) -> Result:
        """This broker leads the partition at ``coordinator_epoch`` (its leader epoch): requests answer
        COORDINATOR_LOAD_IN_PROGRESS until :meth:`finish_load`. Whatever was loaded before is dropped."""
        res = self.unload(now_ms)
        self.coordinator_epoch = coordinator_epoch
        self.loading = True
        return res

    def replay(self, key: bytes, value: bytes | None) -> None:
        """One record of the partition, in log order (a tombstone removes its id; unknown key versions are
        skipped, as Kafka does)."""
        decoded = decode_record(key, value)
        if decoded is None:
            log.warning("Unknown message key while loading transaction state from __transaction_state-%d. Ignoring "
                        "it. It could be a left over from an aborted upgrade.", self.partition)
            return
        txn_id, md = decoded
        if md is None:
            self.transactions.pop(txn_id, None)
        else:
            self.transactions[txn_id] = md

    def finish_load(self, now_ms: int) -> Result:
        """Serve the loaded ids; the transactions found in Prepare* get their markers (again) and complete."""
        return self._run(now_ms, self._finish_load)

    def _finish_load(self) -> None:
        self.loading = False
        pending: list[tuple[bool, TransactionMetadata, TxnTransitMetadata]] = []
        for md in self.transactions.values():
            if md.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
                pending.append((md.state is S.PREPARE_COMMIT, md, md.prepare_complete(self.now_ms)))
        for committed, md, complete in pending:
            log.info("Sending txn markers for %s after loading partition %d", md.transactional_id, self.partition)
            self._add_txn_markers_to_send(self.coordinator_epoch, committed, md, complete)
        self._abort_check_at = self.now_ms + self.config.abort_timed_out_transactions_interval_ms
        self._expire_check_at = self.now_ms + self.config.remove_expired_transactional_ids_interval_ms

    def load(self, coordinator_epoch: int, records: Iterable[tuple[bytes, bytes | None]], now_ms: int) -> Result:
        """begin_load + replay of ``(key, value)`` records + finish_load, in one call."""
        res = self.begin_load(coordinator_epoch, now_ms)
        for key, value in records:
            self.replay(key, value)
        done = self.finish_load(now_ms)
        done.completions[:0] = res.completions
        return done

    def unload(self, now_ms: int) -> Result:
        """This broker no longer leads the partition: drop the state; requests waiting for a write are answered
        NOT_COORDINATOR (what their write's callback finds in Kafka), the markers in flight are cancelled."""
        return self._run(now_ms, self._unload)

    def _unload(self) -> None:
        self.coordinator_epoch = None
        self.loading = False
        self.transactions.clear()
        self._pending_markers.clear()
        self._complete_retries.clear()
        self._retry_at = self._abort_check_at = self._expire_check_at = None
        writes, self._writes = self._writes, {}
        for pending in writes.values():
            if not pending.expiry:
                pending.on_done(E.NOT_COORDINATOR)
        self._out.writes.clear()  # nothing may be written for a partition this broker does not lead

    # ---- DescribeTransactions / ListTransactions ----------------------------------------------------------------
    def describe_transaction(self, transactional_id: str) -> DescribedTxn:
        """One entry of DescribeTransactions (the adapter answers COORDINATOR_NOT_AVAILABLE while the
        coordinator is not started, and NOT_COORDINATOR for an id of a partition it has no shard for)."""
        state = DescribedTxn(transactional_id=transactional_id, topics=[])
        if not transactional_id:
            state.error_code = E.INVALID_REQUEST
            return state
        try:
            got = self.get_transaction_state(transactional_id)
        except TxnError as exc:
            state.error_code = exc.code
            return state
        if got is None or got[1].state is S.DEAD:  # Dead: being expired
            state.error_code = E.TRANSACTIONAL_ID_NOT_FOUND
            return state
        md = got[1]
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(md.topic_partitions):
            by_topic.setdefault(topic, []).append(p)
        state.topics = [TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]
        state.error_code = E.NONE
        state.producer_id = md.producer_id
        state.producer_epoch = md.producer_epoch
        state.transaction_state = md.state.state_name
        state.transaction_timeout_ms = md.txn_timeout_ms
        state.transaction_start_time_ms = md.txn_start_timestamp
        return state

    def list_transactions(self, now_ms: int, state_filters: Iterable[str] = (),
                          producer_id_filters: Iterable[int] = (), duration_filter_ms: int = -1,
                          transactional_id_pattern: re.Pattern | None = None) -> list[ListedTxn]:
        """This shard's part of ListTransactions (TransactionStateManager.listTransactionStates); TxnError
        COORDINATOR_LOAD_IN_PROGRESS while loading. Unknown state names match nothing (the caller reports them)."""
        if self.loading:
            raise TxnError(E.COORDINATOR_LOAD_IN_PROGRESS)
        if self.coordinator_epoch is None:
            return []
        state_filters = set(state_filters)
        producer_id_filters = set(producer_id_filters)
        states = {s for s in (TransactionState.from_name(n) for n in state_filters) if s is not None}
        out = []
        for md in self.transactions.values():
            if md.state is S.DEAD:
                continue  # being expired
            if producer_id_filters and md.producer_id not in producer_id_filters:
                continue
            if state_filters and md.state not in states:
                continue
            if duration_filter_ms >= 0 and now_ms - md.txn_start_timestamp <= duration_filter_ms:
                continue
            if transactional_id_pattern is not None and not transactional_id_pattern.fullmatch(md.transactional_id):
                continue
            out.append(ListedTxn(transactional_id=md.transactional_id, producer_id=md.producer_id,
                                 transaction_state=md.state.state_name))
        return out
