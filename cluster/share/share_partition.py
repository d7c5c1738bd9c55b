"""One share partition on its leader (KIP-932, Kafka 4.2's SharePartition): which records are in flight, who holds
them, how often each was delivered, and what must be written to the share coordinator.

Ported from Kafka 4.2's ``core/.../share/SharePartition.java`` with ``InFlightBatch``/``InFlightState``. Pure: time
comes in as ``now`` (ms), writes go out as :class:`StateWrite` values and their answers come back through
:meth:`SharePartition.write_completed`; nothing here does I/O.

The in-flight records sit in batches (first and last offset, one state for all) that split into per-offset states
when only part of a batch is acquired or acknowledged. A record is Available, Acquired (by one member, under an
acquisition lock that ends at ``lock_deadline``), Acknowledged or Archived (both terminal). The share-partition
start offset (SPSO) moves past terminal records; the window from the SPSO to the end offset holds at most
``group.share.partition.max.record.locks`` records.

Kafka persists on acknowledgements, releases and lock expiry, never on acquisition: an acknowledgement or release
changes the in-memory state at once, marked as an ongoing transition, and returns the :class:`StateWrite` to send
(WriteShareGroupState); the adapter answers the client only after :meth:`SharePartition.write_completed` with the
write's outcome, which commits the transitions or rolls them back (to Acquired, or to Available/Archived if the lock
expired meanwhile). Lock expiry changes state for good and writes without waiting (Kafka ignores its failures).

Wiring (the adapter's part), per (group, topic id, partition) on the partition's leader:

- first use: if :meth:`SharePartition.begin_initialize`, read the state with ReadShareGroupState (leader epoch as
  given) and call :meth:`SharePartition.initialize` (a start offset of -1 means ``share.auto.offset.reset``: pass
  the offset it resolves to); lost leadership: :meth:`SharePartition.mark_fenced` and drop it.
- ShareFetch: when :meth:`SharePartition.can_acquire_records`, read the log from
  :meth:`SharePartition.next_fetch_offset` and pass the slice's batch headers (``FileRecords.batches_from``; anything
  with ``base_offset`` and ``last_offset``) to :meth:`SharePartition.acquire`; answer with its ``AcquiredRecords``
  and the slice's bytes. Under read_committed the read stops at the last stable offset, and the batches of aborted
  transactions (:func:`aborted_transaction_batches`) go to ``acquire`` to be archived.
- acknowledgements (after ``share_session.validate_acknowledgement_batches``):
  :meth:`SharePartition.acknowledge`; a final request or dropped connection:
  :meth:`SharePartition.release_acquired_records`. Send the :class:`Transition`'s write as WriteShareGroupState
  (the group, topic id and partition are the partition's), in the order issued, answer the client once
  :meth:`SharePartition.write_completed` returns the error to answer with.
- time: call :meth:`SharePartition.on_time` at :meth:`SharePartition.next_deadline` and send the lock-expiry writes
  it returns (and those :meth:`SharePartition.drain_writes` returns after any other call); hand each outcome to
  :meth:`SharePartition.write_completed` too.
- long poll: wake waiting ShareFetches when :meth:`SharePartition.take_woken` says so (and on appends);
  :meth:`SharePartition.update_log_start_offset` when the log start moves (retention, DeleteRecords).
"""

from __future__ import annotations

import bisect
import dataclasses
import enum
import heapq
import logging
from typing import Callable, Iterable, Protocol, Sequence

from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

#: The member id of records no member holds (Kafka's ``EMPTY_MEMBER_ID``).
EMPTY_MEMBER_ID = ""
#: ReadShareGroupState's start offset of a partition whose state was never written (``share.auto.offset.reset``).
UNINITIALIZED_START_OFFSET = -1

DEFAULT_MAX_IN_FLIGHT_RECORDS = 2000  # group.share.partition.max.record.locks
DEFAULT_MAX_DELIVERY_COUNT = 5  # group.share.delivery.count.limit
DEFAULT_RECORD_LOCK_DURATION_MS = 30000  # group.share.record.lock.duration.ms
_MINIMUM_THROTTLE_RECORDS_DELIVERY_LIMIT = 2


class RecordState(enum.IntEnum):
    """A record's delivery state; the values are the ``DeliveryState`` ids of the share-state RPCs."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    def validate_transition(self, new: RecordState) -> RecordState:
        """Kafka's ``RecordState.validateTransition``: Available -> Acquired -> anything; terminal states stay."""
        if self is new:
            raise ValueError(f"the state transition is invalid as the new state is the same as the current: {new.name}")
        if self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
            raise ValueError(f"the state transition is invalid from the current state: {self.name}")
        if self is RecordState.AVAILABLE and new is not RecordState.ACQUIRED:
            raise ValueError("the state can only be transitioned to ACQUIRED from AVAILABLE")
        return new


def is_terminal(state: RecordState) -> bool:
    return state is RecordState.ACKNOWLEDGED or state is RecordState.ARCHIVED


class AcknowledgeType(enum.IntEnum):
    """The acknowledgement types of ShareFetch/ShareAcknowledge (0 is Gap; Renew is version 2's, KIP-1222)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


_ACK_TYPE_TO_RECORD_STATE = {
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.RELEASE: RecordState.AVAILABLE,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
}


class DeliveryCountOps(enum.Enum):
    INCREASE = 1
    DECREASE = 2
    NO_OP = 3


class SharePartitionState(enum.Enum):
    EMPTY = "Empty"
    INITIALIZING = "Initializing"
    ACTIVE = "Active"
    FAILED = "Failed"
    FENCED = "Fenced"


class ShareError(Exception):
    """A request refused with a Kafka error code (the partition's state is unchanged)."""

    def __init__(self, code: ErrorCode, message: str = ""):
        super().__init__(message or code.name)
        self.code = code


class BatchLike(Protocol):
    """What :meth:`SharePartition.acquire` reads of a record batch: ``protocol.records.BatchHeader`` has it."""

    @property
    def base_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...


@dataclasses.dataclass(frozen=True, slots=True)
class BatchRange:
    """A batch's offsets alone, for callers without a header at hand (tests, archived ranges)."""

    base_offset: int
    last_offset: int


@dataclasses.dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """ShareFetchResponse's ``AcquiredRecords``."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclasses.dataclass(frozen=True, slots=True)
class ShareAcquiredRecords:
    """What one :meth:`SharePartition.acquire` acquired, and how many offsets (gaps in a batch included)."""

    records: tuple[AcquiredRecords, ...]
    count: int


EMPTY_ACQUIRED = ShareAcquiredRecords((), 0)


@dataclasses.dataclass(frozen=True, slots=True)
class StateBatch:
    """A ``StateBatch`` of ReadShareGroupState/WriteShareGroupState (Kafka's ``PersisterStateBatch``)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclasses.dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """One ``AcknowledgementBatch`` of a request: one type for the range, or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


def _coalesce(batches: Sequence[StateBatch]) -> tuple[StateBatch, ...]:
    """Neighbouring state batches of contiguous offsets with the same state and count as one range.

    Per-offset acknowledgements touch one offset at a time; the share coordinator merges such batches the same way
    (``combineStateBatches``), so the stored state is the one Kafka stores, but a write of 100 acknowledged offsets
    carries one batch instead of 100 (in a benchmarks/bench_share.py profile of commit_sync, the coordinator's merge
    of them was a fifth of the broker's time)."""
    out: list[StateBatch] = []
    for b in batches:
        if out:
            prev = out[-1]
            if prev.last_offset + 1 == b.first_offset and prev.delivery_state == b.delivery_state \
                    and prev.delivery_count == b.delivery_count:
                out[-1] = StateBatch(prev.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                continue
        out.append(b)
    return tuple(out)


@dataclasses.dataclass(frozen=True, slots=True)
class StateWrite:
    """One WriteShareGroupState partition to send (``DeliveryCompleteCount`` is version 1's, KIP-1226).

    ``reason`` is ``acknowledge``, ``release`` or ``timeout``; hand the outcome back with
    :meth:`SharePartition.write_completed` (``write_id``)."""

    write_id: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...]
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class Transition:
    """The outcome of an acknowledgement or release: refused (``error``), done (no ``write``), or pending ``write``.

    When ``write`` is set, answer only after :meth:`SharePartition.write_completed` for it."""

    error: ErrorCode = ErrorCode.NONE
    write: StateWrite | None = None
    message: str = ""


class _InFlightState:
    """Kafka's ``InFlightState``: one state for a batch or an offset, with the rollback of an ongoing transition."""

    __slots__ = ("state", "delivery_count", "member_id", "lock_deadline", "rollback", "terminal")

    def __init__(self, state: RecordState, delivery_count: int, member_id: str, lock_deadline: int | None = None):
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.lock_deadline = lock_deadline
        # (previous state, member, delivery count, max delivery count, write id) while a transition awaits its write
        self.rollback: tuple[RecordState, str, int, int, int] | None = None
        self.terminal = False  # archived for good (log start moved, aborted): a rollback keeps it archived

    def copy(self) -> _InFlightState:
        c = _InFlightState(self.state, self.delivery_count, self.member_id, self.lock_deadline)
        c.rollback = self.rollback
        c.terminal = self.terminal
        return c

    def has_ongoing(self) -> bool:
        return self.rollback is not None

    def try_update(self, new: RecordState, ops: DeliveryCountOps, max_delivery_count: int, member_id: str) -> bool:
        """``tryUpdateState``: a release at the delivery limit archives instead (not on a session's release)."""
        if self.rollback is not None:
            return False
        if new is RecordState.AVAILABLE and ops is not DeliveryCountOps.DECREASE \
                and self.delivery_count >= max_delivery_count:
            new = RecordState.ARCHIVED
        try:
            self.state = self.state.validate_transition(new)
        except ValueError as e:
            log.debug("failed to update the state of records: %s", e)
            return False
        if new is not RecordState.ARCHIVED:
            if ops is DeliveryCountOps.INCREASE:
                self.delivery_count += 1
            elif ops is DeliveryCountOps.DECREASE:
                self.delivery_count -= 1
        self.member_id = member_id
        return True

    def start_transition(self, new: RecordState, ops: DeliveryCountOps, max_delivery_count: int, member_id: str,
                         write_id: int) -> bool:
        previous = (self.state, self.member_id, self.delivery_count)
        if not self.try_update(new, ops, max_delivery_count, member_id):
            return False
        self.rollback = (previous[0], previous[1], previous[2], max_delivery_count, write_id)
        return True

    def complete_transition(self, commit: bool, now: int) -> None:
        """``completeStateTransition``: a rollback whose lock expired meanwhile makes the record Available (or
        Archived at the limit). Unlike Kafka, the delivery count is restored too: a failed session release
        (which decreases it) would otherwise lower it for good, and a second one below zero."""
        if commit or self.terminal or self.rollback is None:
            self.lock_deadline = None
            self.rollback = None
            return
        prev_state, prev_member, prev_count, max_delivery_count, _ = self.rollback
        self.delivery_count = prev_count
        if self.lock_deadline is not None and self.lock_deadline <= now:
            self.state = RecordState.ARCHIVED if self.delivery_count >= max_delivery_count else RecordState.AVAILABLE
            self.member_id = EMPTY_MEMBER_ID
            self.lock_deadline = None
        else:
            self.state = prev_state
            self.member_id = prev_member
        self.rollback = None

    def archive(self) -> None:
        self.terminal = True
        self.state = RecordState.ARCHIVED
        self.member_id = EMPTY_MEMBER_ID
        self.lock_deadline = None

    def __repr__(self) -> str:
        return f"InFlightState({self.state.name}, count={self.delivery_count}, member={self.member_id!r})"


class _InFlightBatch:
    """Kafka's ``InFlightBatch``: one state for ``[first, last]`` or, once split, one per offset."""

    __slots__ = ("first", "last", "batch", "offsets", "settled")

    def __init__(self, first: int, last: int, state: _InFlightState):
        self.first = first
        self.last = last
        self.batch: _InFlightState | None = state
        self.offsets: dict[int, _InFlightState] | None = None
        # once split: the offsets below this one are terminal with no transition ongoing, which no change undoes
        # (terminal states stay; only an ongoing transition rolls back), so the start-offset scan resumes here
        self.settled = first

    def split(self) -> None:
        """``maybeInitializeOffsetStateUpdate``: each offset gets a copy of the batch's state (lock included)."""
        if self.offsets is None:
            assert self.batch is not None
            self.offsets = {o: self.batch.copy() for o in range(self.first, self.last + 1)}
            self.batch = None

    def states_in(self, first: int, last: int) -> Iterable[tuple[int, int, _InFlightState]]:
        """``(first, last, state)`` of the states covering ``[first, last]``: the batch's, or each offset's."""
        if self.offsets is None:
            assert self.batch is not None
            yield self.first, self.last, self.batch
            return
        for o in range(max(first, self.first), min(last, self.last) + 1):
            yield o, o, self.offsets[o]


@dataclasses.dataclass(slots=True)
class _PendingWrite:
    reason: str
    batches: tuple[StateBatch, ...]


def _persister_error(code: int) -> ErrorCode:
    """Kafka's ``fetchPersisterError``: what a failed share-state write or read becomes for the client."""
    try:
        err = ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    if err in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if err in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return err
    if err in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.UNKNOWN_SERVER_ERROR


def aborted_transaction_batches(batches: Iterable, aborted_transactions: Iterable[tuple[int, int]],
                                is_abort_marker: Callable[[object], bool]) -> list:
    """Kafka's ``fetchAbortedTransactionRecordBatches``: the batches of aborted transactions in a read_committed read.

    ``batches`` have ``base_offset``, ``last_offset``, ``producer_id``, ``is_transactional`` and ``is_control``
    (``protocol.records.BatchHeader``); ``aborted_transactions`` are ``(producer_id, first_offset)`` as the log's
    fetch answers them; ``is_abort_marker(batch)`` says whether a control batch is an ABORT marker (its first
    record's key, which a header does not carry)."""
    pending = sorted(aborted_transactions, key=lambda t: t[1])
    i = 0
    aborted_pids: set[int] = set()
    out = []
    for b in batches:
        if b.producer_id < 0:
            continue
        while i < len(pending) and pending[i][1] <= b.last_offset:
            aborted_pids.add(pending[i][0])
            i += 1
        if b.is_control and is_abort_marker(b):
            aborted_pids.discard(b.producer_id)
        elif b.is_transactional and b.producer_id in aborted_pids:
            out.append(b)
    return out


def _filter_archived(acquired: list[AcquiredRecords], archived: Sequence) -> list[AcquiredRecords]:
    """Kafka's ``filterRecordBatchesFromAcquiredRecords``: cut the archived batches' offsets out of the acquired."""
    result: list[AcquiredRecords] = []
    for rec in acquired:
        pieces = [rec]
        for b in archived:
            nxt = []
            for p in pieces:
                if p.last_offset < b.base_offset or p.first_offset > b.last_offset:
                    nxt.append(p)
                    continue
                if p.first_offset < b.base_offset:
                    nxt.append(AcquiredRecords(p.first_offset, b.base_offset - 1, p.delivery_count))
                if p.last_offset > b.last_offset:
                    nxt.append(AcquiredRecords(b.last_offset + 1, p.last_offset, p.delivery_count))
            pieces = nxt
        result.extend(pieces)
    return result


class SharePartition:
    """The in-flight records of one (group, topic, partition) on its leader. See the module docstring."""

    def __init__(self, group_id: str, topic_id: object, partition: int, *, leader_epoch: int = 0,
                 max_in_flight_records: int = DEFAULT_MAX_IN_FLIGHT_RECORDS,
                 max_delivery_count: int = DEFAULT_MAX_DELIVERY_COUNT,
                 record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS):
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.max_in_flight_records = max_in_flight_records
        self.max_delivery_count = max_delivery_count
        #: the group's ``share.record.lock.duration.ms`` if set, else the broker's; the adapter may change it
        self.record_lock_duration_ms = record_lock_duration_ms
        self._throttle_limit = max(_MINIMUM_THROTTLE_RECORDS_DELIVERY_LIMIT, -(-max_delivery_count // 2))
        self.partition_state = SharePartitionState.EMPTY
        self.start_offset = 0
        self.end_offset = 0
        self.state_epoch = 0
        self.delivery_complete_count = 0
        self._keys: list[int] = []
        self._cache: dict[int, _InFlightBatch] = {}
        self._find_next_fetch_offset = False
        self._gap_window: list[int] | None = None  # [end offset, gap start offset] of the initial read's gaps
        self._timers: list[tuple[int, int, int, int]] = []  # (deadline, seq, first, last)
        self._timer_seq = 0
        self._next_write_id = 1
        self._pending: dict[int, _PendingWrite] = {}
        self._background: list[StateWrite] = []
        self._woken = False
        #: records whose acquisition lock expired (SharePartitionMetrics' AcquisitionLockTimeoutPerSec)
        self.lock_timeouts = 0

    # ------------------------------------------------------------------ cache helpers

    def _put(self, b: _InFlightBatch) -> None:
        if b.first not in self._cache:
            bisect.insort(self._keys, b.first)
        self._cache[b.first] = b

    def _floor(self, offset: int) -> _InFlightBatch | None:
        i = bisect.bisect_right(self._keys, offset)
        return self._cache[self._keys[i - 1]] if i else None

    def _sub(self, lo: int, hi: int) -> list[_InFlightBatch]:
        """Batches whose first offset is in ``[lo, hi]`` (``cachedState.subMap(lo, true, hi, true)``)."""
        i = bisect.bisect_left(self._keys, lo)
        j = bisect.bisect_right(self._keys, hi)
        return [self._cache[k] for k in self._keys[i:j]]

    def _last(self) -> _InFlightBatch:
        return self._cache[self._keys[-1]]

    def _clear(self) -> None:
        self._keys.clear()
        self._cache.clear()

    def _gap_window_active(self) -> bool:
        return self._gap_window is not None and self._gap_window[0] == self.end_offset

    def _schedule_lock(self, state: _InFlightState, first: int, last: int, now: int,
                       duration_ms: int | None) -> None:
        deadline = now + (self.record_lock_duration_ms if duration_ms is None else duration_ms)
        state.lock_deadline = deadline
        self._timer_seq += 1
        heapq.heappush(self._timers, (deadline, self._timer_seq, first, last))

    def _num_in_flight_in(self, first: int, last: int) -> int:
        """``numInFlightRecordsInBatch``: the offsets of ``[first, last]`` at or past the start offset."""
        return last - max(self.start_offset, first) + 1 if last >= self.start_offset else 0

    def _wake(self) -> None:
        self._woken = True

    # ------------------------------------------------------------------ initialization

    def begin_initialize(self) -> bool:
        """``maybeInitialize``'s first step: True when the adapter should now read the state (ReadShareGroupState)
        and call :meth:`initialize`, False when already initialized. Raises :class:`ShareError` while another
        initialization runs or once fenced (LEADER_NOT_AVAILABLE), or after a failed one (UNKNOWN_SERVER_ERROR:
        the adapter drops the partition and makes a new one, as Kafka's SharePartitionManager does)."""
        st = self.partition_state
        if st is SharePartitionState.ACTIVE:
            return False
        if st is SharePartitionState.FAILED:
            raise ShareError(ErrorCode.UNKNOWN_SERVER_ERROR, "share partition failed to load")
        if st in (SharePartitionState.INITIALIZING, SharePartitionState.FENCED):
            raise ShareError(ErrorCode.LEADER_NOT_AVAILABLE, f"share partition is {st.value.lower()}")
        self.partition_state = SharePartitionState.INITIALIZING
        return True

    def initialize(self, start_offset: int, state_epoch: int, state_batches: Sequence[StateBatch],
                   error_code: int = 0) -> None:
        """Load ReadShareGroupState's answer (``maybeInitialize``'s completion).

        ``start_offset`` must be resolved already when the coordinator answered -1 (``share.auto.offset.reset``).
        A non-zero ``error_code`` or an invalid answer (a batch below the start offset) fails the partition and
        raises :class:`ShareError` (the persister's error mapped as Kafka does)."""
        if self.partition_state is SharePartitionState.ACTIVE:
            return
        try:
            if error_code:
                raise ShareError(_persister_error(error_code), "failed to initialize the share partition")
            if start_offset < 0:
                raise ShareError(ErrorCode.UNKNOWN_SERVER_ERROR, "the start offset is not resolved")
            self._load(start_offset, state_epoch, state_batches)
        except ShareError:
            self.partition_state = SharePartitionState.FAILED
            self._clear()
            raise
        self.partition_state = SharePartitionState.ACTIVE
        self._wake()

    def _load(self, start_offset: int, state_epoch: int, state_batches: Sequence[StateBatch]) -> None:
        self.start_offset = start_offset
        self.state_epoch = state_epoch
        gap_start = -1
        previous_last = start_offset - 1
        for sb in sorted(state_batches, key=lambda sb: sb.first_offset):
            if sb.first_offset < start_offset or sb.last_offset < sb.first_offset or sb.first_offset <= previous_last:
                raise ShareError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                 f"invalid state batch {sb} for start offset {start_offset}")
            if gap_start == -1 and sb.first_offset > previous_last + 1:
                gap_start = previous_last + 1
            previous_last = sb.last_offset
            state = RecordState(sb.delivery_state)
            if state is RecordState.ACQUIRED:
                raise ShareError(ErrorCode.UNKNOWN_SERVER_ERROR, f"acquired state batch {sb} in the persisted state")
            self._put(_InFlightBatch(sb.first_offset, sb.last_offset,
                                     _InFlightState(state, sb.delivery_count, EMPTY_MEMBER_ID)))
            if is_terminal(state):
                self.delivery_complete_count += sb.last_offset - sb.first_offset + 1
        if self._keys:
            self._find_next_fetch_offset = True
            self.end_offset = self._last().last
            if gap_start != -1:
                self._gap_window = [self.end_offset, gap_start]
            self._maybe_update_cached_state_and_offsets()
        else:
            self.end_offset = start_offset

    def fail_initialization(self) -> None:
        """The ReadShareGroupState call itself failed (``maybeInitialize``'s exceptional completion)."""
        self.partition_state = SharePartitionState.FAILED

    def mark_fenced(self) -> None:
        """Leadership lost or the state epoch fenced: the partition serves nothing more (``markFenced``)."""
        self.partition_state = SharePartitionState.FENCED

    @property
    def active(self) -> bool:
        return self.partition_state is SharePartitionState.ACTIVE

    # ------------------------------------------------------------------ fetch offset and window

    def next_fetch_offset(self) -> int:
        """``nextFetchOffset``: the first Available record, a gap of the initial read, or past the end offset."""
        if not self._find_next_fetch_offset:
            if not self._keys or self.start_offset > self._last().last:
                return self.end_offset
            return self.end_offset + 1
        if not self._keys or self.start_offset > self._last().last:
            self._find_next_fetch_offset = False
            return self.end_offset
        nxt = -1
        window_active = self._gap_window_active()
        gap_start = self._gap_window[1] if window_active and self._gap_window else -1
        for key in self._keys:
            b = self._cache[key]
            if window_active:
                if key > gap_start:
                    nxt = gap_start
                    break
                gap_start = max(b.last + 1, gap_start)
            if b.offsets is None:
                assert b.batch is not None
                if b.batch.state is RecordState.AVAILABLE and not b.batch.has_ongoing():
                    nxt = b.first
                    break
            else:
                for o, st in b.offsets.items():
                    if st.state is RecordState.AVAILABLE and not st.has_ongoing():
                        nxt = o
                        break
                if nxt != -1:
                    break
        if nxt == -1:
            self._find_next_fetch_offset = False
            nxt = self.end_offset + 1
        return nxt

    def num_in_flight_records(self) -> int:
        return self.end_offset - self.start_offset + 1 if self._keys else 0

    def num_in_flight_batches(self) -> int:
        """The cached in-flight batches (SharePartitionMetrics' InFlightBatchCount: ``cachedState.size()``)."""
        return len(self._keys)

    def can_acquire_records(self) -> bool:
        """``canAcquireRecords``: records to re-deliver, or room in the window."""
        if self.next_fetch_offset() != self.end_offset + 1:
            return True
        return self.num_in_flight_records() < self.max_in_flight_records

    # ------------------------------------------------------------------ acquire

    def acquire(self, member_id: str, batches: Sequence[BatchLike], *, fetch_offset: int, max_fetch_records: int,
                batch_size: int, now: int, record_limit: bool = False, aborted_batches: Sequence[BatchLike] = (),
                lock_duration_ms: int | None = None) -> ShareAcquiredRecords:
        """``acquire``: acquire what the log read from ``fetch_offset`` returned (``batches``: the headers, in order).

        Whole batches are acquired (batch_optimized mode; ``max_fetch_records`` is then a soft limit) unless
        ``record_limit`` (ShareAcquireMode 1), where at most ``max_fetch_records`` are. ``aborted_batches`` (from
        :func:`aborted_transaction_batches`) are archived and left out. Never persists anything."""
        self._expire(now)
        if not self.active or max_fetch_records <= 0 or not batches:
            return EMPTY_ACQUIRED
        first_batch = batches[0]
        last_batch = batches[-1]
        last_to_acquire, max_to_acquire = self._last_offset_and_max_records(fetch_offset, max_fetch_records,
                                                                             last_batch.last_offset)
        if max_to_acquire <= 0:
            return EMPTY_ACQUIRED
        base = first_batch.base_offset
        self._maybe_archive_stale_batches(fetch_offset, base)
        floor = self._floor(base)
        if floor is None and base < self.start_offset:
            # Kafka moves to the start offset and stops there; a cached batch can hold the start offset though
            # (loaded with a later start, or acquired from it), so look again or the read's first batch would be
            # cached a second time over it.
            base = self.start_offset
            floor = self._floor(base)
        if floor is not None and floor.last >= base:
            base = floor.first
        sub = self._sub(base, last_to_acquire)
        if not sub:
            got = self._acquire_new(member_id, batches, record_limit, first_batch.base_offset, last_to_acquire,
                                    batch_size, max_to_acquire, now, lock_duration_ms)
            return self._filter_aborted(aborted_batches, got)

        result: list[AcquiredRecords] = []
        acquired, throttled = self._acquire_cached(member_id, batches, sub, base, first_batch.base_offset,
                                                   last_to_acquire, max_to_acquire, batch_size, record_limit, result,
                                                   now, lock_duration_ms)
        last_cached = sub[-1].last
        if not throttled and acquired < max_to_acquire and last_cached < last_to_acquire:
            got = self._acquire_new(member_id, batches, record_limit, last_cached + 1, last_to_acquire, batch_size,
                                    max_to_acquire - acquired, now, lock_duration_ms)
            result.extend(got.records)
            acquired += got.count
        if result:
            self._maybe_update_gap_window_start(result[-1].last_offset + 1)
            return self._filter_aborted(aborted_batches, ShareAcquiredRecords(tuple(result), acquired))
        return ShareAcquiredRecords((), acquired)

    def acquire_read_bound(self, fetch_offset: int, max_fetch_records: int) -> int:
        """The last offset whose batch :meth:`acquire` from ``fetch_offset`` can use: batches past the one holding
        it change nothing (cached batches end at the end offset; new records start at most at the start offset,
        the end offset + 1 or the fetch offset, and end at the batch holding their ``max_fetch_records``-th
        offset), so a reader may leave out the headers of the rest of a large read."""
        return max(fetch_offset, self.start_offset, self.end_offset + 1) + max(1, max_fetch_records) - 1

    def _acquire_cached(self, member_id: str, batches: Sequence[BatchLike], sub: list[_InFlightBatch], base: int,
                        first_offset: int, last_to_acquire: int, max_to_acquire: int, batch_size: int,
                        record_limit: bool, result: list[AcquiredRecords], now: int,
                        lock_duration_ms: int | None) -> tuple[int, bool]:
        """``acquire``'s walk over the cached batches the read overlaps (gaps of the initial read included); also
        whether throttling stopped it (then nothing new is acquired after it)."""
        acquired = 0
        maybe_gap_start = base
        for b in sub:
            if acquired >= max_to_acquire:
                break
            if self._gap_window_active():
                if maybe_gap_start < b.first:
                    got = self._acquire_new(member_id, batches, record_limit, maybe_gap_start, b.first - 1,
                                            batch_size, max_to_acquire - acquired, now, lock_duration_ms)
                    result.extend(got.records)
                    acquired += got.count
                maybe_gap_start = b.last + 1
                if acquired >= max_to_acquire:
                    break
            full = b.first >= first_offset and b.last <= last_to_acquire
            remaining = max_to_acquire - acquired
            limit_subset = record_limit and (b.last - b.first + 1) > remaining
            throttle = self._should_throttle(b, first_offset, last_to_acquire)
            if throttle and acquired > 0:
                return acquired, True
            if not full or b.offsets is not None or limit_subset or throttle:
                if b.offsets is None:
                    assert b.batch is not None
                    if b.batch.state is not RecordState.AVAILABLE or b.batch.has_ongoing():
                        continue
                    b.split()
                n = self._acquire_subset(member_id, record_limit, remaining, first_offset,
                                         last_to_acquire, b, result, now, lock_duration_ms)
                acquired += n
                if throttle and n > 0:
                    return acquired, True
                continue
            st = b.batch
            assert st is not None
            if st.state is not RecordState.AVAILABLE or st.has_ongoing():
                continue
            if not st.try_update(RecordState.ACQUIRED, DeliveryCountOps.INCREASE, self.max_delivery_count,
                                 member_id) or st.state is not RecordState.ACQUIRED:
                continue
            self._schedule_lock(st, b.first, b.last, now, lock_duration_ms)
            result.append(AcquiredRecords(b.first, b.last, st.delivery_count))
            acquired += b.last - b.first + 1
        return acquired, False

    def _last_offset_and_max_records(self, fetch_offset: int, max_fetch_records: int,
                                     last_offset: int) -> tuple[int, int]:
        """``lastOffsetAndMaxRecordsToAcquire``: keep the window within ``max_in_flight_records``."""
        max_records = min(max_fetch_records, self.max_in_flight_records - self.num_in_flight_records())
        last = last_offset
        if max_records <= 0 and fetch_offset <= self.end_offset:
            max_records = min(max_fetch_records, self.end_offset - fetch_offset + 1)
            last = min(last_offset, self.end_offset)
        return last, max_records

    def _acquire_new(self, member_id: str, batches: Sequence[BatchLike], record_limit: bool, first: int, last: int,
                     batch_size: int, max_fetch_records: int, now: int,
                     lock_duration_ms: int | None) -> ShareAcquiredRecords:
        """``acquireNewBatchRecords``: records not cached yet become acquired batches."""
        first_acquired = max(first, self.start_offset)
        if not self._keys and self.end_offset > first_acquired:
            first_acquired = self.end_offset
        last_acquired = last
        if max_fetch_records < last_acquired - first_acquired + 1:
            last_acquired = self._last_offset_of_batch_with(batches, first_acquired + max_fetch_records - 1)
            if self._gap_window_active() and last_acquired > last:
                last_acquired = last
        if last_acquired < first_acquired:
            return EMPTY_ACQUIRED
        acquired = self._create_batches(member_id, batches, record_limit, max_fetch_records, first_acquired,
                                        last_acquired, batch_size, now, lock_duration_ms)
        if self._keys[0] == first_acquired:
            self.start_offset = first_acquired
        if last_acquired > self.end_offset:
            self.end_offset = last_acquired
        if record_limit:
            last_acquired = acquired[0].last_offset
        self._maybe_update_gap_window_start(last_acquired + 1)
        return ShareAcquiredRecords(tuple(acquired), last_acquired - first_acquired + 1)

    def _create_batches(self, member_id: str, batches: Sequence[BatchLike], record_limit: bool,
                        max_fetch_records: int, first: int, last: int, batch_size: int, now: int,
                        lock_duration_ms: int | None) -> list[AcquiredRecords]:
        """``createBatches``: split at batch boundaries near ``batch_size`` (batch_optimized), or acquire only the
        first ``max_fetch_records`` offsets of one cached batch (record_limit)."""
        result: list[AcquiredRecords] = []
        current = first
        if not record_limit and last - first + 1 > batch_size:
            for b in batches:
                if b.base_offset > last:
                    break
                if b.base_offset - current >= batch_size:
                    result.append(AcquiredRecords(current, b.base_offset - 1, 1))
                    current = b.base_offset
        result.append(AcquiredRecords(current, last, 1))
        if record_limit and last - first + 1 > max_fetch_records:
            rec = result[0]
            acquired_last = rec.first_offset + max_fetch_records - 1
            ib = _InFlightBatch(rec.first_offset, rec.last_offset,
                                _InFlightState(RecordState.ACQUIRED, 1, member_id))
            ib.offsets = {}
            for o in range(rec.first_offset, rec.last_offset + 1):
                if o <= acquired_last:
                    ib.offsets[o] = _InFlightState(RecordState.ACQUIRED, 1, member_id)
                else:
                    ib.offsets[o] = _InFlightState(RecordState.AVAILABLE, 0, EMPTY_MEMBER_ID)
            ib.batch = None
            deadline = now + (self.record_lock_duration_ms if lock_duration_ms is None else lock_duration_ms)
            for o in range(rec.first_offset, acquired_last + 1):
                ib.offsets[o].lock_deadline = deadline
            self._timer_seq += 1
            heapq.heappush(self._timers, (deadline, self._timer_seq, rec.first_offset, acquired_last))
            self._find_next_fetch_offset = True
            self._put(ib)
            return [AcquiredRecords(rec.first_offset, acquired_last, 1)]
        for rec in result:
            st = _InFlightState(RecordState.ACQUIRED, 1, member_id)
            self._schedule_lock(st, rec.first_offset, rec.last_offset, now, lock_duration_ms)
            self._put(_InFlightBatch(rec.first_offset, rec.last_offset, st))
        return result

    @staticmethod
    def _last_offset_of_batch_with(batches: Sequence[BatchLike], offset: int) -> int:
        """``lastOffsetFromBatchWithRequestOffset``: the last offset of the batch holding ``offset``, else it."""
        prev = None
        for b in batches:
            if offset >= b.base_offset:
                prev = b
                continue
            break
        if prev is not None and offset <= prev.last_offset:
            return prev.last_offset
        return offset

    def _should_throttle(self, b: _InFlightBatch, first: int, last: int) -> bool:
        """``shouldThrottleRecordsDelivery``: records redelivered often are handed out in ever smaller groups."""
        if b.offsets is None:
            assert b.batch is not None
            return b.batch.delivery_count >= self._throttle_limit
        counts = [st.delivery_count for o, st in b.offsets.items()
                  if first <= o <= last and st.state is RecordState.AVAILABLE]
        return max(counts, default=0) >= self._throttle_limit

    def _acquire_subset(self, member_id: str, record_limit: bool, max_fetch_records: int, first: int, last: int,
                        b: _InFlightBatch, result: list[AcquiredRecords], now: int,
                        lock_duration_ms: int | None) -> int:
        """``acquireSubsetBatchRecords``: acquire the Available offsets of a split batch within ``[first, last]``."""
        assert b.offsets is not None
        acquired = 0
        throttled_max = -1
        has_throttled = False
        mdc = self.max_delivery_count
        for o in range(max(first, b.first), min(last, b.last) + 1):
            st = b.offsets[o]
            if st.state is not RecordState.AVAILABLE or st.has_ongoing():
                continue
            count = st.delivery_count
            if mdc > 2 and count == mdc - 1 and acquired > 0:
                break  # the last delivery goes alone
            if count >= self._throttle_limit and throttled_max < 0:
                throttled_max = max(1, len(b.offsets) >> (count - self._throttle_limit + 1))
                has_throttled = True
            if not st.try_update(RecordState.ACQUIRED, DeliveryCountOps.INCREASE, mdc, member_id) \
                    or st.state is not RecordState.ACQUIRED:
                continue
            self._schedule_lock(st, o, o, now, lock_duration_ms)
            result.append(AcquiredRecords(o, o, st.delivery_count))
            acquired += 1
            if st.delivery_count == mdc and mdc > 2:
                break
            if record_limit and acquired == max_fetch_records:
                break
            if has_throttled and acquired == throttled_max:
                break
        return acquired

    def _maybe_update_gap_window_start(self, offset: int) -> None:
        if self._gap_window is not None:
            if self._gap_window[0] == self.end_offset and offset <= self._gap_window[0]:
                self._gap_window[1] = offset
                self._normalize_gap_window()
            else:
                self._gap_window = None

    def _normalize_gap_window(self) -> None:
        """Move the gap start past cached batches: unlike Kafka, a gap start on a cached offset (the acquisition
        ended right before a loaded batch) would otherwise hold the SPSO until records past the loaded end come."""
        w = self._gap_window
        if w is None:
            return
        for _ in range(len(self._keys) + 1):
            b = self._floor(w[1])
            if b is None or b.last < w[1]:
                break
            w[1] = b.last + 1
        if w[1] > w[0]:
            self._gap_window = None

    def _maybe_archive_stale_batches(self, fetch_offset: int, base_offset: int) -> None:
        """``maybeArchiveStaleBatches``: cached batches compaction removed from the log before ``base_offset``."""
        if not self._keys or fetch_offset >= base_offset:
            return
        floor_offset = fetch_offset
        floor = self._floor(fetch_offset)
        if floor is not None and floor.last >= fetch_offset:
            floor_offset = floor.first
        sub = [b for b in self._sub(floor_offset, base_offset) if b.first < base_offset]
        if sub and self._archive_records(fetch_offset, base_offset, sub, RecordState.AVAILABLE, True):
            self._find_next_fetch_offset = True

    def _filter_aborted(self, aborted: Sequence[BatchLike], got: ShareAcquiredRecords) -> ShareAcquiredRecords:
        """``maybeFilterAbortedTransactionalAcquiredRecords``: archive aborted batches, leave them out."""
        if not aborted or not got.records:
            return got
        for ab in aborted:
            floor = self._floor(ab.base_offset)
            if floor is None:
                continue
            sub = self._sub(floor.first, ab.last_offset)
            self._archive_records(ab.base_offset, ab.last_offset + 1, sub, RecordState.ACQUIRED, True)
        recs = _filter_archived(list(got.records), aborted)
        return ShareAcquiredRecords(tuple(recs), sum(r.last_offset - r.first_offset + 1 for r in recs))

    def _archive_records(self, start: int, end: int, batches: Sequence[_InFlightBatch], initial: RecordState,
                         count_complete: bool) -> bool:
        """``archiveRecords``: archive the records of ``[start, end)`` in ``initial`` state; no write (Kafka
        persists them lazily with the next start offset)."""
        any_archived = False
        for b in batches:
            if b.first >= end:
                break
            full = b.first >= start and b.last <= end - 1
            if not full or b.offsets is not None:
                if b.offsets is None:
                    assert b.batch is not None
                    if b.batch.state is not initial:
                        continue
                    b.split()
                assert b.offsets is not None
                for o in range(max(start, b.first), min(end - 1, b.last) + 1):
                    st = b.offsets[o]
                    if st.state is not initial:
                        continue
                    st.archive()
                    if count_complete:
                        self.delivery_complete_count += 1
                    any_archived = True
                continue
            assert b.batch is not None
            if b.batch.state is initial:
                b.batch.archive()
                if count_complete:
                    self.delivery_complete_count += b.last - b.first + 1
                any_archived = True
        return any_archived

    # ------------------------------------------------------------------ acknowledge and release

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch], now: int,
                    lock_duration_ms: int | None = None) -> Transition:
        """``acknowledge``: Gap/Accept/Release/Reject (and Renew) of records this member holds.

        The batches must have passed :func:`cluster.share.share_session.validate_acknowledgement_batches`. Any
        offset not acquired by ``member_id`` (its lock expired, or another member's) refuses the whole call with
        INVALID_RECORD_STATE and changes nothing."""
        self._expire(now)
        if not self.active:
            return Transition(ErrorCode.NOT_LEADER_OR_FOLLOWER if self.partition_state is SharePartitionState.FENCED
                              else ErrorCode.LEADER_NOT_AVAILABLE)
        write_id = self._new_write_id()
        touched: list[StateBatch] = []
        error: ShareError | None = None
        for batch in batches:
            types = batch.acknowledge_types
            if not types or any(t < 0 or t > AcknowledgeType.RENEW for t in types):
                error = ShareError(ErrorCode.INVALID_REQUEST, f"invalid acknowledge type: {list(types)}")
                break
            if batch.last_offset < self.start_offset:
                continue
            try:
                sub = self._sub_for_ack(batch)
                self._acknowledge_batch(member_id, batch, sub, touched, write_id, now, lock_duration_ms)
            except ShareError as e:
                error = e
                break
        return self._rollback_or_write(write_id, error, touched, "acknowledge", now)

    def _sub_for_ack(self, batch: AcknowledgementBatch) -> list[_InFlightBatch]:
        """``fetchSubMapForAcknowledgementBatch``."""
        floor = self._floor(batch.first_offset)
        if floor is None:
            if batch.first_offset < self.start_offset <= batch.last_offset:
                floor = self._floor(self.start_offset)
            if floor is None:
                raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                                 "batch record not found: the request batch offsets are not found in the cache")
        sub = self._sub(floor.first, batch.last_offset)
        if not sub or sub[-1].last < batch.first_offset:
            raise ShareError(ErrorCode.INVALID_REQUEST,
                             "batch record not found: the first offset in request is past acquired records")
        if batch.last_offset > sub[-1].last:
            raise ShareError(ErrorCode.INVALID_REQUEST,
                             "batch record not found: the last offset in request is past acquired records")
        return sub

    def _acknowledge_batch(self, member_id: str, batch: AcknowledgementBatch, sub: list[_InFlightBatch],
                           touched: list[StateBatch], write_id: int, now: int,
                           lock_duration_ms: int | None) -> None:
        """``acknowledgeBatchRecords``."""
        per_offset_types = len(batch.acknowledge_types) > 1
        for b in sub:
            if b.last < self.start_offset:
                continue
            if b.offsets is None:
                st = b.batch
                assert st is not None
                if st.member_id == EMPTY_MEMBER_ID:
                    raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                                     "the batch cannot be acknowledged: the batch is not in the acquired state")
                if st.member_id != member_id:
                    raise ShareError(ErrorCode.INVALID_RECORD_STATE, "member is not the owner of batch record")
                if st.has_ongoing():
                    raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                                     "the record state is invalid: the batch has an ongoing transition")
            full = b.first >= batch.first_offset and b.last <= batch.last_offset
            start_moved = b.first < self.start_offset <= b.last
            if not full or b.offsets is not None or per_offset_types or start_moved:
                if b.offsets is None:
                    assert b.batch is not None
                    if b.batch.state is not RecordState.ACQUIRED:
                        raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                                         "the batch cannot be acknowledged: the subset batch is not acquired")
                    b.split()
                self._acknowledge_offsets(member_id, batch, b, touched, write_id, now, lock_duration_ms)
            else:
                self._acknowledge_complete_batch(member_id, batch.acknowledge_types[0], b, touched, write_id, now,
                                                 lock_duration_ms)

    def _acknowledge_offsets(self, member_id: str, batch: AcknowledgementBatch, b: _InFlightBatch,
                             touched: list[StateBatch], write_id: int, now: int,
                             lock_duration_ms: int | None) -> None:
        """``acknowledgePerOffsetBatchRecords``."""
        assert b.offsets is not None
        types = batch.acknowledge_types
        lo, hi = max(batch.first_offset, self.start_offset, b.first), min(batch.last_offset, b.last)
        if len(types) == 1 and types[0] != AcknowledgeType.RENEW:
            self._acknowledge_offsets_as_one(member_id, _ACK_TYPE_TO_RECORD_STATE[AcknowledgeType(types[0])],
                                             b.offsets, lo, hi, touched, write_id)
            return
        for o in range(lo, hi + 1):
            st = b.offsets[o]
            if st.state is not RecordState.ACQUIRED:
                raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                                 "the offset cannot be acknowledged: the offset is not acquired")
            if st.has_ongoing():
                raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                                 "the record state is invalid: the offset has an ongoing transition")
            if st.member_id != member_id:
                raise ShareError(ErrorCode.INVALID_RECORD_STATE, "member is not the owner of offset")
            ack = types[o - batch.first_offset] if len(types) > 1 else types[0]
            if ack == AcknowledgeType.RENEW:
                self._schedule_lock(st, o, o, now, lock_duration_ms)
                continue
            new = _ACK_TYPE_TO_RECORD_STATE[AcknowledgeType(ack)]
            if not st.start_transition(new, DeliveryCountOps.NO_OP, self.max_delivery_count, EMPTY_MEMBER_ID,
                                       write_id):
                raise ShareError(ErrorCode.INVALID_RECORD_STATE, "unable to acknowledge records for the batch")
            touched.append(StateBatch(o, o, int(st.state), st.delivery_count))
            if is_terminal(st.state):
                self.delivery_complete_count += 1

    def _acknowledge_offsets_as_one(self, member_id: str, new: RecordState, offsets: dict[int, _InFlightState],
                                    lo: int, hi: int, touched: list[StateBatch], write_id: int) -> None:
        """``acknowledgePerOffsetBatchRecords`` for offsets ``[lo, hi]`` of a split batch under one type (not Renew):
        what the loop above does per offset (the same checks, ``start_transition`` from Acquired, which always
        succeeds), inlined, with the touched offsets recorded as ranges of one state and delivery count (as
        ``_coalesce`` would merge them). A client acknowledges a poll's records 100 at a time out of batches of
        thousands: per-offset calls were most of a ShareAcknowledge's time (benchmarks/bench_share.py)."""
        acquired = RecordState.ACQUIRED
        archived = RecordState.ARCHIVED
        release = new is RecordState.AVAILABLE
        limit = self.max_delivery_count
        terminal_new = is_terminal(new)
        run_first = run_state = run_count = -1
        o = lo
        try:
            while o <= hi:
                st = offsets[o]
                if st.state is not acquired:
                    raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                                     "the offset cannot be acknowledged: the offset is not acquired")
                if st.rollback is not None:
                    raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                                     "the record state is invalid: the offset has an ongoing transition")
                if st.member_id != member_id:
                    raise ShareError(ErrorCode.INVALID_RECORD_STATE, "member is not the owner of offset")
                count = st.delivery_count
                # try_update: a release at the delivery limit archives
                target = archived if release and count >= limit else new
                st.rollback = (acquired, member_id, count, limit, write_id)
                st.state = target
                st.member_id = EMPTY_MEMBER_ID
                if terminal_new or target is archived:
                    self.delivery_complete_count += 1
                if target != run_state or count != run_count:
                    if run_first >= 0:
                        touched.append(StateBatch(run_first, o - 1, run_state, run_count))
                    run_first, run_state, run_count = o, int(target), count
                o += 1
        finally:
            if run_first >= 0:
                touched.append(StateBatch(run_first, o - 1, run_state, run_count))

    def _acknowledge_complete_batch(self, member_id: str, ack: int, b: _InFlightBatch, touched: list[StateBatch],
                                    write_id: int, now: int, lock_duration_ms: int | None) -> None:
        """``acknowledgeCompleteBatch``."""
        st = b.batch
        assert st is not None
        if st.state is not RecordState.ACQUIRED:
            raise ShareError(ErrorCode.INVALID_RECORD_STATE,
                             "the batch cannot be acknowledged: the batch is not in the acquired state")
        if ack == AcknowledgeType.RENEW:
            self._schedule_lock(st, b.first, b.last, now, lock_duration_ms)
            return
        new = _ACK_TYPE_TO_RECORD_STATE[AcknowledgeType(ack)]
        if not st.start_transition(new, DeliveryCountOps.NO_OP, self.max_delivery_count, EMPTY_MEMBER_ID, write_id):
            raise ShareError(ErrorCode.INVALID_RECORD_STATE, "unable to acknowledge records for the batch")
        touched.append(StateBatch(b.first, b.last, int(st.state), st.delivery_count))
        if is_terminal(st.state):
            self.delivery_complete_count += b.last - b.first + 1

    def release_acquired_records(self, member_id: str, now: int) -> Transition:
        """``releaseAcquiredRecords``: the member's share session closed or its connection dropped.

        Its Acquired records become Available again with their delivery count decreased (the delivery is not
        counted, and the limit does not archive them), or Archived below the start offset."""
        self._expire(now)
        if not self.active:
            return Transition()
        write_id = self._new_write_id()
        touched: list[StateBatch] = []
        for key in list(self._keys):
            b = self._cache[key]
            if b.offsets is None:
                st = b.batch
                assert st is not None
                if st.state is RecordState.ACQUIRED and st.member_id == member_id \
                        and b.first < self.start_offset <= b.last:
                    b.split()
            if b.offsets is not None:
                for o, st in b.offsets.items():
                    if st.state is not RecordState.ACQUIRED or st.member_id != member_id or st.has_ongoing():
                        continue  # Kafka stops at another member's offset in the batch; each offset is its own
                    new = RecordState.ARCHIVED if o < self.start_offset else RecordState.AVAILABLE
                    if st.start_transition(new, DeliveryCountOps.DECREASE, self.max_delivery_count,
                                           EMPTY_MEMBER_ID, write_id):
                        touched.append(StateBatch(o, o, int(st.state), st.delivery_count))
                        if o >= self.start_offset and is_terminal(st.state):
                            self.delivery_complete_count += 1
                continue
            st = b.batch
            assert st is not None
            if st.state is not RecordState.ACQUIRED or st.member_id != member_id or st.has_ongoing():
                continue
            new = RecordState.ARCHIVED if b.last < self.start_offset else RecordState.AVAILABLE
            if st.start_transition(new, DeliveryCountOps.DECREASE, self.max_delivery_count, EMPTY_MEMBER_ID,
                                   write_id):
                touched.append(StateBatch(b.first, b.last, int(st.state), st.delivery_count))
                if is_terminal(st.state):
                    self.delivery_complete_count += self._num_in_flight_in(b.first, b.last)
        return self._rollback_or_write(write_id, None, touched, "release", now)

    def _new_write_id(self) -> int:
        wid = self._next_write_id
        self._next_write_id += 1
        return wid

    def _rollback_or_write(self, write_id: int, error: ShareError | None, touched: list[StateBatch], reason: str,
                           now: int) -> Transition:
        """``rollbackOrProcessStateUpdates``: roll back on error, else hand out the write (or answer at once)."""
        if error is not None:
            self._complete(write_id, touched, False, now)
            return Transition(error.code, None, str(error))
        if not touched:
            return Transition()
        write = StateWrite(write_id, self.state_epoch, self.leader_epoch, self.start_offset,
                           self.delivery_complete_count, _coalesce(touched), reason)
        self._pending[write_id] = _PendingWrite(reason, write.state_batches)
        return Transition(ErrorCode.NONE, write)

    def _complete(self, write_id: int, touched: Sequence[StateBatch], commit: bool, now: int) -> None:
        """Commit or roll back the transitions of write ``write_id`` over the ``touched`` ranges (each of one state
        and delivery count as written). A rollback can also archive (the lock expired meanwhile at the limit):
        the delivery complete count follows each state both ways."""
        available = RecordState.AVAILABLE
        for sb in touched:
            first, last = sb.first_offset, sb.last_offset
            was = is_terminal(RecordState(sb.delivery_state))
            for b in self._sub(self._floor_key(first), last):
                if commit and b.offsets is not None:  # the common case, inlined: complete_transition(True)
                    offsets = b.offsets
                    for o in range(max(first, b.first), min(last, b.last) + 1):
                        st = offsets[o]
                        rollback = st.rollback
                        if rollback is not None and rollback[4] == write_id:
                            st.lock_deadline = None
                            st.rollback = None
                            if st.state is available:
                                self._find_next_fetch_offset = True
                    continue
                if b.offsets is None:
                    states: Iterable[tuple[int, _InFlightState]] = ((b.first, b.batch),)  # type: ignore[assignment]
                else:
                    offsets = b.offsets
                    states = ((o, offsets[o]) for o in range(max(first, b.first), min(last, b.last) + 1))
                for o, st in states:
                    rollback = st.rollback
                    if rollback is None or rollback[4] != write_id:
                        continue
                    st.complete_transition(commit, now)
                    if st.state is available:
                        self._find_next_fetch_offset = True
                    if not commit and was != is_terminal(st.state):
                        n = self._num_in_flight_in(o, o if b.offsets is not None else b.last)
                        self.delivery_complete_count += -n if was else n

    def _floor_key(self, offset: int) -> int:
        b = self._floor(offset)
        return b.first if b is not None else offset

    def write_completed(self, write_id: int, error_code: int, now: int) -> ErrorCode:
        """The answer to a :class:`StateWrite`: commit (0) or roll back its transitions; returns the error to answer
        the acknowledgement or release with (Kafka's mapping of the persister's error)."""
        pending = self._pending.pop(write_id, None)
        if pending is None:
            return ErrorCode.NONE
        if pending.reason == "timeout":
            # Kafka keeps the expiry whatever the write's outcome.
            if self._maybe_update_cached_state_and_offsets():
                self._wake()
            return ErrorCode.NONE
        if error_code:
            self._complete(write_id, pending.batches, False, now)
            # Kafka does not move the start offset here, but a rollback whose lock had expired at the delivery
            # limit archives: without this the SPSO would wait for some later write to pass it.
            self._maybe_update_cached_state_and_offsets()
            self._wake()
            return _persister_error(error_code)
        self._complete(write_id, pending.batches, True, now)
        self._maybe_update_cached_state_and_offsets()
        self._wake()
        return ErrorCode.NONE

    # ------------------------------------------------------------------ start offset

    def _can_move_start_offset(self) -> bool:
        """``canMoveStartOffset``."""
        if not self._keys:
            return False
        b = self._floor(self.start_offset)
        if b is None:
            return False
        if b.offsets is None:
            st = b.batch
        else:
            st = b.offsets.get(self.start_offset)
        if st is None or st.has_ongoing():
            return False
        return is_terminal(st.state)

    def _find_last_offset_acknowledged(self) -> tuple[int, int]:
        """``findLastOffsetAcknowledgedAndMetadata``: the last terminal offset from the start, and how many."""
        last_acked = -1
        n_terminal = 0
        window_active = self._gap_window_active()
        for key in self._keys:
            b = self._cache[key]
            if window_active and self._gap_window is not None and b.last >= self._gap_window[1]:
                return last_acked, n_terminal
            if b.offsets is None:
                st = b.batch
                assert st is not None
                if st.has_ongoing() or not is_terminal(st.state):
                    return last_acked, n_terminal
                last_acked = b.last
                n_terminal += self._num_in_flight_in(b.first, b.last)
            else:
                # Kafka walks every offset of the batch each time; a batch acknowledged 100 offsets at a time was
                # walked from its first offset on every write (a benchmarks/bench_share.py profile: the largest
                # cost of commit_sync), so the walk resumes past the offsets already found settled
                offsets, o = b.offsets, b.settled
                while o <= b.last:
                    st = offsets[o]
                    if st.rollback is not None or not is_terminal(st.state):
                        break
                    o += 1
                b.settled = o
                if o > b.first:
                    last_acked = o - 1
                    n_terminal += max(0, o - max(self.start_offset, b.first))
                if o <= b.last:
                    return last_acked, n_terminal
        return last_acked, n_terminal

    def _maybe_update_cached_state_and_offsets(self) -> bool:
        """``maybeUpdateCachedStateAndOffsets``: move the start offset past terminal records, drop whole batches."""
        if not self._can_move_start_offset():
            return False
        last_acked, n_terminal = self._find_last_offset_acknowledged()
        if last_acked == -1:
            return False
        last_cached = self._last().last
        if last_acked == last_cached:
            self.start_offset = last_cached + 1
            self.end_offset = last_cached + 1
            self._clear()
            self.delivery_complete_count = 0
            self._wake()
            return True
        entry = self._floor(last_acked)
        assert entry is not None
        idx = bisect.bisect_left(self._keys, entry.first)
        if last_acked == entry.last:
            higher = self._keys[idx + 1]
            if higher > self.start_offset:
                self.start_offset = higher
            if self._gap_window_active() and self._gap_window is not None:
                self.start_offset = min(self._gap_window[1], self.start_offset)
            remove_upto = idx + 1
        else:
            if last_acked + 1 > self.start_offset:
                self.start_offset = last_acked + 1
            remove_upto = idx  # the batch holding last_acked stays
        self.delivery_complete_count -= n_terminal
        for k in self._keys[:remove_upto]:
            del self._cache[k]
        del self._keys[:remove_upto]
        self._wake()
        return True

    def update_log_start_offset(self, log_start_offset: int) -> None:
        """``updateCacheAndOffsets``: the log start moved (retention, DeleteRecords): archive the Available records
        below it (not persisted: the next write carries the new start offset). Acquired ones expire or are
        acknowledged as usual and then archive."""
        if log_start_offset <= self.start_offset:
            return
        if not self._keys:
            self.start_offset = log_start_offset
            self.end_offset = log_start_offset
            self.delivery_complete_count = 0
            self._wake()
            return
        removed = self._count_terminal_below(log_start_offset)
        sub = [self._cache[k] for k in self._keys]
        if self._archive_records(self.start_offset, log_start_offset, sub, RecordState.AVAILABLE, False):
            self._find_next_fetch_offset = True
        self.start_offset = log_start_offset
        self.delivery_complete_count -= removed
        if self.end_offset < self.start_offset:
            self.end_offset = self.start_offset
        self._wake()

    def _count_terminal_below(self, new_start: int) -> int:
        """``countTerminalRecordsUpToNewLSO``."""
        count = 0
        for key in self._keys:
            if key >= new_start:
                break
            b = self._cache[key]
            if b.last < self.start_offset:
                continue
            if b.offsets is None:
                assert b.batch is not None
                if is_terminal(b.batch.state):
                    lo = max(self.start_offset, b.first)
                    hi = min(new_start - 1, b.last)
                    if lo <= hi:
                        count += hi - lo + 1
            else:
                count += sum(1 for o, st in b.offsets.items()
                             if self.start_offset <= o < new_start and is_terminal(st.state))
        return count

    # ------------------------------------------------------------------ time

    def next_deadline(self) -> int | None:
        """When :meth:`on_time` has a lock to expire (possibly a lock since released: then it finds nothing)."""
        return self._timers[0][0] if self._timers else None

    def on_time(self, now: int) -> list[StateWrite]:
        """Expire the acquisition locks due by ``now`` and return every write to send (also those of expiries
        that :meth:`acquire`, :meth:`acknowledge` or :meth:`release_acquired_records` ran first)."""
        self._expire(now)
        out, self._background = self._background, []
        return out

    def drain_writes(self) -> list[StateWrite]:
        """The lock-expiry writes queued by the last calls (send them; their outcome changes nothing)."""
        out, self._background = self._background, []
        return out

    def _expire(self, now: int) -> None:
        """``releaseAcquisitionLockOnTimeout`` for every lock due: Available, or Archived at the delivery limit or
        below the start offset. A record in an ongoing transition waits for its write's outcome."""
        if not self._timers or self._timers[0][0] > now:
            return
        ranges: list[tuple[int, int]] = []
        while self._timers and self._timers[0][0] <= now:
            _, _, first, last = heapq.heappop(self._timers)
            ranges.append((first, last))
        batches: list[StateBatch] = []
        for first, last in ranges:
            floor = self._floor(first)
            if floor is None:
                continue
            for b in self._sub(floor.first, last):
                self._expire_batch(b, first, last, now, batches)
        if batches:
            wid = self._new_write_id()
            self._pending[wid] = _PendingWrite("timeout", tuple(batches))
            self._background.append(StateWrite(wid, self.state_epoch, self.leader_epoch, self.start_offset,
                                               self.delivery_complete_count, tuple(batches), "timeout"))
            self._wake()

    def _expire_batch(self, b: _InFlightBatch, first: int, last: int, now: int, batches: list[StateBatch]) -> None:
        """One batch's part of an expiry (``releaseAcquisitionLockOnTimeoutFor{Complete,PerOffset}Batch``)."""
        if b.offsets is None:
            st = b.batch
            assert st is not None
            if st.state is RecordState.ACQUIRED and b.first < self.start_offset <= b.last \
                    and st.lock_deadline is not None and st.lock_deadline <= now:
                b.split()
        if b.offsets is None:
            st = b.batch
            assert st is not None
            if not self._lock_due(st, now):
                return
            new = RecordState.ARCHIVED if b.last < self.start_offset else RecordState.AVAILABLE
            if not st.try_update(new, DeliveryCountOps.NO_OP, self.max_delivery_count, EMPTY_MEMBER_ID):
                return
            st.lock_deadline = None
            self.lock_timeouts += b.last - b.first + 1
            batches.append(StateBatch(b.first, b.last, int(st.state), st.delivery_count))
            if st.state is not RecordState.ARCHIVED:
                self._find_next_fetch_offset = True
            if is_terminal(st.state):
                self.delivery_complete_count += self._num_in_flight_in(b.first, b.last)
            return
        for o in range(max(first, b.first), min(last, b.last) + 1):
            st = b.offsets[o]
            if not self._lock_due(st, now):
                continue
            new = RecordState.ARCHIVED if o < self.start_offset else RecordState.AVAILABLE
            if not st.try_update(new, DeliveryCountOps.NO_OP, self.max_delivery_count, EMPTY_MEMBER_ID):
                continue
            st.lock_deadline = None
            self.lock_timeouts += 1
            batches.append(StateBatch(o, o, int(st.state), st.delivery_count))
            if st.state is not RecordState.ARCHIVED:
                self._find_next_fetch_offset = True
            if o >= self.start_offset and is_terminal(st.state):
                self.delivery_complete_count += 1

    @staticmethod
    def _lock_due(st: _InFlightState, now: int) -> bool:
        return (st.state is RecordState.ACQUIRED and not st.has_ongoing() and st.lock_deadline is not None
                and st.lock_deadline <= now)

    def take_woken(self) -> bool:
        """Whether records became acquirable or the window moved since the last call (wake waiting ShareFetches)."""
        w, self._woken = self._woken, False
        return w

    # ------------------------------------------------------------------ views

    def record_state(self, offset: int) -> tuple[RecordState, int, str] | None:
        """``(state, delivery count, member)`` of an in-flight offset, None if not cached."""
        b = self._floor(offset)
        if b is None or offset > b.last:
            return None
        st = b.batch if b.offsets is None else b.offsets[offset]
        assert st is not None
        return st.state, st.delivery_count, st.member_id

    def cached_batches(self) -> list[tuple[int, int, RecordState | None, int | None, str | None]]:
        """``(first, last, state, delivery count, member)`` per cached batch; state None once split per offset."""
        out = []
        for k in self._keys:
            b = self._cache[k]
            if b.offsets is None:
                assert b.batch is not None
                out.append((b.first, b.last, b.batch.state, b.batch.delivery_count, b.batch.member_id))
            else:
                out.append((b.first, b.last, None, None, None))
        return out

    def has_ongoing_transition(self, offset: int) -> bool:
        b = self._floor(offset)
        if b is None or offset > b.last:
            return False
        st = b.batch if b.offsets is None else b.offsets[offset]
        return st is not None and st.has_ongoing()

    def lock_deadline(self, offset: int) -> int | None:
        b = self._floor(offset)
        if b is None or offset > b.last:
            return None
        st = b.batch if b.offsets is None else b.offsets[offset]
        return None if st is None else st.lock_deadline

    def is_split(self, first_offset: int) -> bool:
        b = self._cache.get(first_offset)
        return b is not None and b.offsets is not None

    def pending_writes(self) -> int:
        return len(self._pending)
