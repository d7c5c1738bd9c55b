"""One transactional id's state and its transitions (Kafka's TransactionMetadata.scala).

A transition is two steps, as in Kafka: ``prepare_*`` checks it, sets the pending state and returns a
:class:`TxnTransitMetadata` (what the ``__transaction_state`` record will hold); once that record is committed
``complete_transition_to`` applies it, and a failed write clears the pending state instead. A pending state
blocks every other transition meanwhile (CONCURRENT_TRANSACTIONS to the client).

Partitions are ``(topic, partition)`` tuples. Producer epochs are Java shorts: ``SHORT_MAX - 1`` is the last one
a client gets, ``SHORT_MAX`` is kept so the coordinator can always fence.
"""

from __future__ import annotations

import dataclasses
import enum

from protocol.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767

TopicPartition = tuple[str, int]


class IllegalStateError(RuntimeError):
    """A transition Kafka treats as a bug (its IllegalStateException): never expected from any request."""


class TransactionVersion(enum.IntEnum):
    """The ``transaction.version`` feature level (server-common TransactionVersion)."""

    TV_0 = 0  # the original coordinator
    TV_1 = 1  # flexible __transaction_state values (TransactionLogValue v1, KIP-890)
    TV_2 = 2  # an epoch bump on every EndTxn (KIP-890 part 2)

    @property
    def transaction_log_value_version(self) -> int:
        return 1 if self >= 1 else 0

    @property
    def supports_epoch_bump(self) -> bool:
        return self >= 2

    @classmethod
    def from_feature_level(cls, level: int) -> "TransactionVersion":
        """Levels above the newest known are read as the newest (the tagged fields are forward compatible)."""
        return cls(max(0, min(int(level), max(cls))))


class TransactionState(enum.Enum):
    """``(id, name)``: the id is the record's TransactionStatus, the name what DescribeTransactions and
    ListTransactions show."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")  # the id is expiring: its tombstone is being written
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")  # a pending state only: bumping the epoch to fence a producer

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def state_name(self) -> str:
        return self.value[1]

    @property
    def valid_previous_states(self) -> frozenset["TransactionState"]:
        return _VALID_PREVIOUS[self]

    @property
    def is_expiration_allowed(self) -> bool:
        """Only an id with no transaction in flight may be expired (transactional.id.expiration.ms)."""
        return self in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)

    @classmethod
    def from_id(cls, state_id: int) -> "TransactionState":
        for s in cls:
            if s.id == state_id:
                return s
        raise IllegalStateError(f"Unknown transaction state id {state_id} from the transaction status message")

    @classmethod
    def from_name(cls, name: str) -> "TransactionState | None":
        return _BY_NAME.get(name)

    def __repr__(self) -> str:
        return self.state_name

    __str__ = __repr__


S = TransactionState
_VALID_PREVIOUS = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
_BY_NAME = {s.state_name: s for s in TransactionState}


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """No client gets ``SHORT_MAX``: the coordinator keeps it to fence the last one."""
    return producer_epoch >= SHORT_MAX - 1


@dataclasses.dataclass(frozen=True)
class TxnTransitMetadata:
    """The target of one transition: what its ``__transaction_state`` record holds (plus the last epoch)."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: TransactionVersion = TransactionVersion.TV_0


class TxnError(Exception):
    """A request refused with an error code for the client (Kafka's ``Left(Errors.X)``)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class TransactionMetadata:
    """The coordinator's view of one transactional id (mutated only by the coordinator shard)."""

    def __init__(self, transactional_id: str, producer_id: int, previous_producer_id: int, next_producer_id: int,
                 producer_epoch: int, last_producer_epoch: int, txn_timeout_ms: int, state: TransactionState,
                 topic_partitions=(), txn_start_timestamp: int = -1, txn_last_update_timestamp: int = -1,
                 client_transaction_version: TransactionVersion = TransactionVersion.TV_0) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.topic_partitions: set[TopicPartition] = set(topic_partitions)
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        self.client_transaction_version = TransactionVersion(client_transaction_version)
        # the state a written-but-not-yet-committed record moves this id to; blocks other transitions meanwhile
        self.pending_state: TransactionState | None = None
        # a fence whose PrepareAbort write failed already bumped the epoch: the next fence must not bump it again
        self.has_failed_epoch_fence = False

    # ---- partitions ------------------------------------------------------------------------------------
    def add_partitions(self, partitions) -> None:
        self.topic_partitions.update(partitions)

    def remove_partition(self, tp: TopicPartition) -> None:
        """A partition's marker is written (or it needs none): it leaves the set the Complete* waits for."""
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalStateError(
                f"Transaction metadata's current state is {self.state}, and its pending state is {self.pending_state} "
                "while trying to remove partitions whose txn marker has been sent, this is not expected")
        self.topic_partitions.discard(tp)

    # ---- prepare ---------------------------------------------------------------------------------------
    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current state as a transit, without a pending state (tests)."""
        return TxnTransitMetadata(self.producer_id, self.previous_producer_id, self.next_producer_id,
                                  self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms, self.state,
                                  frozenset(self.topic_partitions), self.txn_start_timestamp,
                                  self.txn_last_update_timestamp, self.client_transaction_version)

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch to fence the current producer before aborting its transaction (InitProducerId during
        a transaction, or the transaction timed out)."""
        if self.producer_epoch == SHORT_MAX:
            raise IllegalStateError("Cannot fence producer with epoch equal to Short.MaxValue since this would "
                                    "overflow")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH, self.txn_timeout_ms,
                             frozenset(self.topic_partitions), self.txn_start_timestamp, self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, new_txn_timeout_ms: int, expected_producer_epoch: int | None,
                                         update_timestamp: int) -> TxnTransitMetadata:
        """InitProducerId on an idle id: the next epoch, or (KIP-360) the current one again for a retry whose
        answer was lost. Raises TxnError(PRODUCER_FENCED) for an epoch that is neither."""
        if self.is_producer_epoch_exhausted:
            raise IllegalStateError(f"Cannot allocate any more producer epochs for producerId {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            next_epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            next_epoch, last_epoch = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            next_epoch, last_epoch = self.producer_epoch, self.last_producer_epoch  # a retry of a bump that worked
        else:
            raise TxnError(ErrorCode.PRODUCER_FENCED)
        return self._prepare(S.EMPTY, self.producer_id, next_epoch, last_epoch, new_txn_timeout_ms, frozenset(), -1,
                             update_timestamp)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_txn_timeout_ms: int, update_timestamp: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        """The epochs of this producer id are exhausted: continue with a new one at epoch 0."""
        if self.has_pending_transaction:
            raise IllegalStateError("Cannot rotate producer ids while a transaction is still pending")
        return self._prepare(S.EMPTY, new_producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             new_txn_timeout_ms, frozenset(), -1, update_timestamp)

    def prepare_add_partitions(self, added, update_timestamp: int,
                               client_transaction_version: TransactionVersion | None = None) -> TxnTransitMetadata:
        """``client_transaction_version``: TV_2 for a partition a broker adds for a Produce v12+ / TxnOffsetCommit
        v5 (AddPartitionsToTxn v5 without verify_only), TV_0 for a client's AddPartitionsToTxn v0-3; None keeps
        the id's (Kafka records it on the add so EndTxn knows the transaction's version)."""
        start = update_timestamp if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) \
            else self.txn_start_timestamp
        tv = self.client_transaction_version if client_transaction_version is None \
            else TransactionVersion(client_transaction_version)
        return self._prepare_full(S.ONGOING, self.producer_id, NO_PRODUCER_ID, self.producer_epoch,
                                  self.last_producer_epoch, self.txn_timeout_ms,
                                  frozenset(self.topic_partitions) | frozenset(added), start, update_timestamp, tv)

    def prepare_abort_or_commit(self, new_state: TransactionState, client_transaction_version: TransactionVersion,
                                next_producer_id: int, update_timestamp: int) -> TxnTransitMetadata:
        """EndTxn (or an abort of the coordinator's own): Prepare*. With TV2 the epoch is bumped here and, when
        that exhausts it, ``next_producer_id`` is the id the Complete* record switches to."""
        client_transaction_version = TransactionVersion(client_transaction_version)
        if client_transaction_version.supports_epoch_bump:
            epoch, last_epoch = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        return self._prepare_full(new_state, self.producer_id, next_producer_id, epoch, last_epoch, self.txn_timeout_ms,
                                  frozenset(self.topic_partitions), self.txn_start_timestamp, update_timestamp,
                                  client_transaction_version)

    def prepare_complete(self, update_timestamp: int) -> TxnTransitMetadata:
        """Every marker is written: Complete*."""
        new_state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False  # the fence's write succeeded
        if self.client_transaction_version.supports_epoch_bump and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0  # the TV2 bump overflowed: switch ids now
        else:
            producer_id, epoch = self.producer_id, self.producer_epoch
        return self._prepare_full(new_state, producer_id, NO_PRODUCER_ID, epoch, self.producer_epoch,
                                  self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, update_timestamp,
                                  self.client_transaction_version)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, self.txn_last_update_timestamp)

    def _prepare(self, state, producer_id, epoch, last_epoch, timeout_ms, partitions, start,
                 update) -> TxnTransitMetadata:
        # the client's transaction version persists across the transitions that do not name one (Kafka #18086)
        return self._prepare_full(state, producer_id, NO_PRODUCER_ID, epoch, last_epoch, timeout_ms, partitions, start,
                                  update, self.client_transaction_version)

    def _prepare_full(self, state: TransactionState, producer_id: int, next_producer_id: int, epoch: int,
                      last_epoch: int, timeout_ms: int, partitions: frozenset, start: int, update: int,
                      client_transaction_version: TransactionVersion) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalStateError(f"Preparing transaction state transition to {state} while it already a pending "
                                    f"state {self.pending_state}")
        if producer_id < 0:
            raise ValueError(f"Illegal new producer id {producer_id}")
        if state is not S.DEAD and epoch < 0:
            raise ValueError(f"Illegal new producer epoch {epoch}")
        if self.state not in state.valid_previous_states:
            raise IllegalStateError(f"Preparing transaction state transition to {state} failed since the target "
                                    f"state {state} is not a valid previous state of the current state {self.state}")
        transit = TxnTransitMetadata(producer_id, self.producer_id, next_producer_id, epoch, last_epoch, timeout_ms,
                                     state, partitions, start, update, client_transaction_version)
        self.pending_state = state
        return transit

    # ---- complete --------------------------------------------------------------------------------------
    def complete_transition_to(self, t: TxnTransitMetadata) -> None:
        """The transit's record is committed: apply it (checked against what its prepare allowed)."""
        to_state = self.pending_state
        if to_state is None:
            raise IllegalStateError(f"TransactionalId {self.transactional_id} completing transaction state transition "
                                    "while it does not have a pending state")
        if to_state is not t.txn_state:
            self._fail(t)
        if to_state is S.EMPTY:  # InitProducerId
            if (self.producer_epoch != t.producer_epoch and not self._valid_producer_epoch_bump(t)) \
                    or t.topic_partitions or t.txn_start_timestamp != -1:
                self._fail(t)
            self.txn_timeout_ms = t.txn_timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.producer_id = t.producer_id
            self.previous_producer_id = t.prev_producer_id
        elif to_state is S.ONGOING:  # AddPartitionsToTxn / AddOffsetsToTxn
            if not self._valid_producer_epoch(t) or not self.topic_partitions <= t.topic_partitions \
                    or self.txn_timeout_ms != t.txn_timeout_ms:
                self._fail(t)
            self.txn_start_timestamp = t.txn_start_timestamp
            self.add_partitions(t.topic_partitions)
        elif to_state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):  # EndTxn
            if not self._valid_producer_epoch(t) or self.topic_partitions != t.topic_partitions \
                    or self.txn_timeout_ms != t.txn_timeout_ms or self.txn_start_timestamp != t.txn_start_timestamp:
                self._fail(t)
            if t.client_transaction_version.supports_epoch_bump:
                self.producer_epoch = t.producer_epoch
                self.last_producer_epoch = t.last_producer_epoch
                self.next_producer_id = t.next_producer_id
        elif to_state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):  # every marker written
            if not self._valid_producer_epoch(t) or self.txn_timeout_ms != t.txn_timeout_ms \
                    or t.txn_start_timestamp == -1:
                self._fail(t)
            self.txn_start_timestamp = t.txn_start_timestamp
            self.topic_partitions.clear()
            if t.client_transaction_version.supports_epoch_bump:
                self.producer_epoch = t.producer_epoch
                self.last_producer_epoch = t.last_producer_epoch
                self.previous_producer_id = t.prev_producer_id
                self.producer_id = t.producer_id
                self.next_producer_id = t.next_producer_id
        elif to_state is S.PREPARE_EPOCH_FENCE:
            self._fail(t)  # never written: the fence is written as its PrepareAbort
        else:  # DEAD: a committed tombstone removes the id, it never completes to Dead
            raise IllegalStateError(
                f"TransactionalId {self.transactional_id} is trying to complete a transition to {to_state}. This means "
                "that the transactionalId was being expired, and the only acceptable completion of this operation is "
                f"to remove the transaction metadata from the cache, not to persist the {to_state} in the log.")
        self.client_transaction_version = t.client_transaction_version
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.pending_state = None
        self.state = to_state

    def _valid_producer_epoch(self, t: TxnTransitMetadata) -> bool:
        v2 = t.client_transaction_version.supports_epoch_bump
        overflow_complete = v2 and t.txn_state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and t.producer_epoch == 0
        if overflow_complete or (v2 and t.txn_state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)):
            epoch = t.last_producer_epoch
        else:
            epoch = t.producer_epoch
        producer_id = t.prev_producer_id if overflow_complete else t.producer_id
        return epoch == self.producer_epoch and producer_id == self.producer_id

    def _valid_producer_epoch_bump(self, t: TxnTransitMetadata) -> bool:
        return t.producer_epoch == self.producer_epoch + 1 \
            or (t.producer_epoch == 0 and t.producer_id != self.producer_id)

    def _fail(self, t: TxnTransitMetadata) -> None:
        raise IllegalStateError(f"TransactionalId {self.transactional_id} failed transition to state {t} due to "
                                "unexpected metadata")

    # ---- value semantics (tests, replay checks) -----------------------------------------------------------
    def _key(self) -> tuple:
        return (self.transactional_id, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                self.txn_timeout_ms, self.state, frozenset(self.topic_partitions), self.txn_start_timestamp,
                self.txn_last_update_timestamp)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TransactionMetadata) and self._key() == other._key()

    __hash__ = None  # mutable

    def copy(self) -> "TransactionMetadata":
        md = TransactionMetadata(self.transactional_id, self.producer_id, self.previous_producer_id,
                                 self.next_producer_id, self.producer_epoch, self.last_producer_epoch,
                                 self.txn_timeout_ms, self.state, self.topic_partitions, self.txn_start_timestamp,
                                 self.txn_last_update_timestamp, self.client_transaction_version)
        md.pending_state = self.pending_state
        md.has_failed_epoch_fence = self.has_failed_epoch_fence
        return md

    def __repr__(self) -> str:
        return (f"TransactionMetadata(transactionalId={self.transactional_id}, producerId={self.producer_id}, "
                f"previousProducerId={self.previous_producer_id}, nextProducerId={self.next_producer_id}, "
                f"producerEpoch={self.producer_epoch}, lastProducerEpoch={self.last_producer_epoch}, "
                f"txnTimeoutMs={self.txn_timeout_ms}, state={self.state}, pendingState={self.pending_state}, "
                f"topicPartitions={sorted(self.topic_partitions)}, txnStartTimestamp={self.txn_start_timestamp}, "
                f"txnLastUpdateTimestamp={self.txn_last_update_timestamp}, "
                f"clientTransactionVersion={int(self.client_transaction_version)})")
