"""The share coordinator's state machine for one ``__share_group_state`` partition (Kafka 4.2's
ShareCoordinatorShard, with PersisterStateBatchCombiner and ShareCoordinatorOffsetsManager).

Each share-partition, keyed (group id, topic id, partition), has its persisted state: start offset, state and
leader epochs, the in-flight state batches and (KIP-1226) the delivery-complete count. The log holds a
ShareSnapshot (record type 0: the whole state) followed by ShareUpdates (type 1: deltas on it); every
``share.coordinator.snapshot.update.records.per.snapshot`` updates the next write is a snapshot again, so a
replay reads at most that many records per key after its snapshot. Offsets below every key's latest snapshot
are redundant (:meth:`ShareCoordinatorShard.last_redundant_offset`): the runtime prunes the log there.

Requests carry one key each (the service splits them). A request's methods validate and return the records to
write with the answer; the state changes only when a record is *replayed*, which the runtime does once it has
appended the record at an offset (so a failed append changes nothing, as Kafka's timeline maps reverting).
No asyncio, time or randomness here: ``now_ms`` is passed in.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from typing import Any

from cluster.groups.group_records import CoordinatorRecord, java_string_hashcode
from cluster.groups.share_state_records import SHARE_STATE_RECORD_TYPES  # noqa: F401 - registers types 0 and 1
from protocol.errors import ErrorCode
from protocol.generated.coordinator import ShareSnapshotKey, ShareSnapshotValue, ShareUpdateKey, ShareUpdateValue
from protocol.generated.coordinator import share_snapshot_value as snap_v
from protocol.generated.coordinator import share_update_value as upd_v
from protocol.generated.messages import (
    DeleteShareGroupStateResponse, InitializeShareGroupStateResponse, ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryResponse, WriteShareGroupStateResponse,
)
from protocol.generated.messages import delete_share_group_state_response as dsr
from protocol.generated.messages import initialize_share_group_state_response as isr
from protocol.generated.messages import read_share_group_state_response as rsr
from protocol.generated.messages import read_share_group_state_summary_response as rssr
from protocol.generated.messages import write_share_group_state_response as wsr

UNINITIALIZED_START_OFFSET = -1  # PartitionFactory
DEFAULT_STATE_EPOCH = 0
DEFAULT_LEADER_EPOCH = 0
UNINITIALIZED_DELIVERY_COMPLETE_COUNT = -1

NULL_TOPIC_ID = "The topic id cannot be null."
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED_SHARE_PARTITION = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED_SHARE_PARTITION = "Read operation on uninitialized share partition not allowed."

_MESSAGES = {
    ErrorCode.FENCED_LEADER_EPOCH: "The leader epoch in the request is older than the epoch on the broker.",
    ErrorCode.FENCED_STATE_EPOCH: "The state epoch in the request is older than the state epoch on the share "
                                  "coordinator.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
}


@dataclasses.dataclass(frozen=True)
class ShareCoordinatorConfig:
    """The share coordinator's settings (Kafka's ShareCoordinatorConfig, names and defaults)."""

    snapshot_update_records_per_snapshot: int = 500
    cold_partition_snapshot_interval_ms: int = 300_000

    @classmethod
    def from_props(cls, props) -> "ShareCoordinatorConfig":
        return cls(
            snapshot_update_records_per_snapshot=int(props.get(
                "share.coordinator.snapshot.update.records.per.snapshot", 500)),
            cold_partition_snapshot_interval_ms=int(props.get(
                "share.coordinator.cold.partition.snapshot.interval.ms", 300_000)))


# ---- state batches (PersisterStateBatch, PersisterStateBatchCombiner) -----------------------------------------

@dataclasses.dataclass(frozen=True, order=True)
class StateBatch:
    """An offset range's delivery state (0 available, 2 acknowledged, 4 archived) and count. Ordered as Kafka's
    PersisterStateBatch.compareTo: first offset, last offset, delivery count, delivery state."""

    first_offset: int
    last_offset: int
    delivery_count: int
    delivery_state: int


def _batches(raw) -> list[StateBatch]:
    return [StateBatch(b.first_offset, b.last_offset, b.delivery_count, b.delivery_state) for b in raw or ()]


def _info(b: StateBatch) -> tuple[int, int]:
    """compareBatchDeliveryInfo's order: delivery count, then state."""
    return b.delivery_count, b.delivery_state


def combine_state_batches(so_far: list[StateBatch], new: list[StateBatch], start_offset: int) -> list[StateBatch]:
    """PersisterStateBatchCombiner.combineStateBatches: one list of non-overlapping batches, the newer delivery
    info (higher count, then state) winning where ranges overlap, batches below ``start_offset`` dropped or cut
    (unless it is -1), contiguous batches with the same info merged."""
    combined = list(so_far or ()) + list(new or ())
    if start_offset != -1:
        pruned = []
        for b in combined:
            if b.last_offset < start_offset:
                continue
            pruned.append(b if b.first_offset >= start_offset else
                          StateBatch(start_offset, b.last_offset, b.delivery_count, b.delivery_state))
        combined = pruned
    if len(combined) < 2:
        return combined
    out: list[StateBatch] = []
    batches = sorted(set(combined))  # the TreeSet

    def add(b: StateBatch) -> None:
        i = bisect.bisect_left(batches, b)
        if i == len(batches) or batches[i] != b:
            batches.insert(i, b)

    def candidate_pair() -> tuple[StateBatch, StateBatch] | None:
        """The first overlapping (or contiguous, same-info) pair; batches before it are final."""
        if not batches:
            return None
        prev = batches[0]
        done = 0
        for cand in batches[1:]:
            if cand.first_offset <= prev.last_offset or (
                    prev.last_offset + 1 == cand.first_offset and _info(prev) == _info(cand)):
                out.extend(batches[:done])
                del batches[:done]
                return prev, cand
            done += 1
            prev = cand
        out.extend(batches[:done])
        del batches[:done]
        return None

    pair = candidate_pair()
    for _ in range(4 * len(combined) * len(combined) + 16):  # each step removes an overlap; bounded
        if pair is None:
            break
        prev, cand = pair
        batches.remove(prev)
        batches.remove(cand)
        for b in _resolve_pair(prev, cand):
            add(b)
        pair = candidate_pair()
    else:
        raise AssertionError("state batches did not converge")
    out.extend(batches)
    return out


def _resolve_pair(prev: StateBatch, cand: StateBatch) -> list[StateBatch]:
    """One merge step of PersisterStateBatchCombiner.mergeBatches: ``prev`` sorts before ``cand`` and they overlap
    (or touch with the same info); what replaces them, the higher (count, state) keeping the shared offsets."""
    def part(b: StateBatch, first: int, last: int) -> StateBatch:
        return StateBatch(first, last, b.delivery_count, b.delivery_state)

    if _info(cand) == _info(prev):
        return [part(prev, prev.first_offset, max(cand.last_offset, prev.last_offset))]
    lower = _info(cand) < _info(prev)
    if cand.first_offset == prev.first_offset:
        if cand.last_offset == prev.last_offset or not lower:
            return [cand]
        return [prev, part(cand, prev.last_offset + 1, cand.last_offset)]
    if cand.last_offset < prev.last_offset:  # prev swallows cand
        if lower:
            return [prev]
        return [part(prev, prev.first_offset, cand.first_offset - 1), cand,
                part(prev, cand.last_offset + 1, prev.last_offset)]
    if cand.last_offset == prev.last_offset:
        return [prev] if lower else [part(prev, prev.first_offset, cand.first_offset - 1), cand]
    if lower:  # cand reaches beyond prev
        return [prev, part(cand, prev.last_offset + 1, cand.last_offset)]
    return [part(prev, prev.first_offset, cand.first_offset - 1), cand]


# ---- one share-partition's state (ShareGroupOffset) ------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ShareGroupOffset:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = UNINITIALIZED_DELIVERY_COMPLETE_COUNT
    create_timestamp: int = -1
    write_timestamp: int = -1

    @classmethod
    def from_snapshot(cls, v: ShareSnapshotValue) -> "ShareGroupOffset":
        return cls(v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset, tuple(_batches(v.state_batches)),
                   v.delivery_complete_count, v.create_timestamp, v.write_timestamp)

    @classmethod
    def from_update(cls, v: ShareUpdateValue) -> "ShareGroupOffset":
        return cls(v.snapshot_epoch, -1, v.leader_epoch, v.start_offset, tuple(_batches(v.state_batches)),
                   v.delivery_complete_count)

    def snapshot_value(self) -> ShareSnapshotValue:
        return ShareSnapshotValue(
            snapshot_epoch=self.snapshot_epoch, state_epoch=self.state_epoch, leader_epoch=self.leader_epoch,
            start_offset=self.start_offset, delivery_complete_count=self.delivery_complete_count,
            create_timestamp=self.create_timestamp, write_timestamp=self.write_timestamp,
            state_batches=[snap_v.StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                           for b in self.state_batches])

    def update_value(self) -> ShareUpdateValue:
        return ShareUpdateValue(
            snapshot_epoch=self.snapshot_epoch, leader_epoch=self.leader_epoch, start_offset=self.start_offset,
            delivery_complete_count=self.delivery_complete_count,
            state_batches=[upd_v.StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                           for b in self.state_batches])


Key = tuple[str, bytes, int]  # SharePartitionKey: group id, topic id, partition


@functools.lru_cache(maxsize=4096)
def share_partition_key_string(group_id: str, topic_id: bytes, partition: int) -> str:
    """SharePartitionKey.asCoordinatorKey: ``group:topicId:partition`` (the topic id as Uuid.toString). Cached, as
    ``share_coordinator_partition_for``: every share-state write asks for both, at the persister and again at the
    coordinator."""
    from cluster.client_metrics import uuid_string
    return f"{group_id}:{uuid_string(topic_id)}:{partition}"


@functools.lru_cache(maxsize=4096)
def share_coordinator_partition_for(key: str, num_partitions: int) -> int:
    """ShareCoordinatorService.partitionFor: ``Utils.abs(key.hashCode()) % numPartitions``."""
    h = java_string_hashcode(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def parse_coordinator_key(key: str) -> tuple[str, bytes, int] | None:
    """A FindCoordinator key of type SHARE (``group:topicId:partition``); None if malformed
    (SharePartitionKey.validate / getInstance(String))."""
    import base64
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0].strip():
        return None
    try:
        topic_id = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        partition = int(parts[2])
    except ValueError:
        return None
    if len(topic_id) != 16 or partition < 0:
        return None
    return parts[0], topic_id, partition


# ---- the offsets manager (ShareCoordinatorOffsetsManager) ---------------------------------------------------

class OffsetsManager:
    """The offset below which this partition's log is redundant: the smallest latest-snapshot offset over keys."""

    def __init__(self) -> None:
        self.offsets: dict[Key, int] = {}
        self._last_redundant = 1 << 63

    def update_state(self, key: Key, offset: int, is_delete: bool) -> None:
        self._last_redundant = min(self._last_redundant, offset)
        self.offsets[key] = offset
        if self.offsets:
            so_far = 1 << 63
            for o in self.offsets.values():
                so_far = min(so_far, o)
                if so_far == self._last_redundant:
                    break
            self._last_redundant = so_far
        if is_delete:
            self.offsets.pop(key, None)

    def last_redundant_offset(self) -> int | None:
        v = self._last_redundant
        return None if v <= 0 or v == 1 << 63 else v


# ---- the shard --------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Result:
    """Records to append (in order) before ``response`` is sent."""

    records: list[CoordinatorRecord] = dataclasses.field(default_factory=list)
    response: Any = None


def _error_message(code: int, message: str | None) -> str:
    return message if message is not None else _MESSAGES.get(code, ErrorCode(code).name)


class ShareCoordinatorShard:
    def __init__(self, config: ShareCoordinatorConfig | None = None) -> None:
        self.config = config or ShareCoordinatorConfig()
        self.state: dict[Key, ShareGroupOffset] = {}
        self.leader_epochs: dict[Key, int] = {}
        self.state_epochs: dict[Key, int] = {}
        self.update_counts: dict[Key, int] = {}
        self.offsets = OffsetsManager()
        self.image = None

    def on_new_metadata_image(self, image) -> None:
        self.image = image

    # ---- replay -------------------------------------------------------------------------------------
    def replay(self, record: CoordinatorRecord, offset: int) -> None:
        """Apply one ``__share_group_state`` record written at ``offset`` (ShareCoordinatorShard.replay)."""
        k = record.key
        key = (k.group_id, bytes(k.topic_id), k.partition)
        if isinstance(k, ShareSnapshotKey):
            self._replay_snapshot(key, record.value, offset)
        elif isinstance(k, ShareUpdateKey):
            if record.value is not None:
                self._replay_update(key, record.value)

    def _replay_snapshot(self, key: Key, value: ShareSnapshotValue | None, offset: int) -> None:
        if value is None:  # tombstone: the share-partition's state is deleted
            self.state.pop(key, None)
            self.leader_epochs.pop(key, None)
            self.state_epochs.pop(key, None)
            self.update_counts.pop(key, None)
        else:
            self._max_epoch(self.leader_epochs, key, value.leader_epoch)
            self._max_epoch(self.state_epochs, key, value.state_epoch)
            self.state[key] = ShareGroupOffset.from_snapshot(value)
            if self.update_counts.get(key, -1) >= self.config.snapshot_update_records_per_snapshot:
                self.update_counts[key] = 0
        self.offsets.update_state(key, offset, value is None)

    def _replay_update(self, key: Key, value: ShareUpdateValue) -> None:
        self._max_epoch(self.leader_epochs, key, value.leader_epoch)
        cur = self.state.get(key)
        self.state[key] = ShareGroupOffset.from_update(value) if cur is None else _merge(cur, value)
        self.update_counts[key] = 0 if key not in self.update_counts else self.update_counts[key] + 1

    @staticmethod
    def _max_epoch(m: dict[Key, int], key: Key, epoch: int) -> None:
        if key not in m or m[key] < epoch:
            m[key] = epoch

    # ---- requests (one key each) --------------------------------------------------------------------
    def write_state(self, req, now_ms: int) -> Result:
        """WriteShareGroupState for one share-partition: a ShareUpdate, or a ShareSnapshot every
        ``snapshot_update_records_per_snapshot`` updates."""
        topic = req.topics[0]
        p = topic.partitions[0]
        err = self._write_error(req.group_id, topic.topic_id, p)
        if err is not None:
            return Result(response=_write_response(topic.topic_id, p.partition, *err))
        key = (req.group_id, bytes(topic.topic_id), p.partition)
        record = self._state_record(key, p.partition, p.leader_epoch, p.state_epoch, p.start_offset,
                                    getattr(p, "delivery_complete_count", -1), _batches(p.state_batches), now_ms)
        return Result([record], _write_response(topic.topic_id, p.partition, 0, None))

    def read_state(self, req, now_ms: int) -> Result:
        """ReadShareGroupState (readStateAndMaybeUpdateLeaderEpoch): a newer leader epoch is recorded (an update
        record with no batches) before the answer."""
        topic = req.topics[0]
        p = topic.partitions[0]
        tid, pid = topic.topic_id, p.partition
        err = self._read_error(req.group_id, tid, p)
        if err is not None:
            return Result(response=ReadShareGroupStateResponse(results=[rsr.ReadStateResult(topic_id=tid, partitions=[
                rsr.PartitionResult(partition=pid, error_code=err[0], error_message=err[1])])]))
        key = (req.group_id, bytes(tid), pid)
        cur = self.state[key]
        response = ReadShareGroupStateResponse(results=[rsr.ReadStateResult(topic_id=tid, partitions=[
            rsr.PartitionResult(partition=pid, state_epoch=cur.state_epoch, start_offset=cur.start_offset,
                                state_batches=[rsr.StateBatch(b.first_offset, b.last_offset, b.delivery_state,
                                                              b.delivery_count) for b in cur.state_batches])])])
        if p.leader_epoch == -1 or self.leader_epochs.get(key) == p.leader_epoch:
            return Result(response=response)
        record = self._state_record(key, pid, p.leader_epoch, cur.state_epoch, cur.start_offset,
                                    cur.delivery_complete_count, [], now_ms)
        return Result([record], response)

    def read_state_summary(self, req) -> Result:
        """ReadShareGroupStateSummary: start offset, epochs and delivery-complete count; no records."""
        topic = req.topics[0]
        p = topic.partitions[0]
        tid, pid = topic.topic_id, p.partition
        err = self._topic_error(tid, pid)
        if err is not None:
            part = rssr.PartitionResult(partition=pid, error_code=err[0], error_message=err[1])
        else:
            cur = self.state.get((req.group_id, bytes(tid), pid))
            if cur is None:
                part = rssr.PartitionResult(partition=pid, state_epoch=DEFAULT_STATE_EPOCH,
                                            leader_epoch=DEFAULT_LEADER_EPOCH, start_offset=UNINITIALIZED_START_OFFSET,
                                            delivery_complete_count=UNINITIALIZED_DELIVERY_COMPLETE_COUNT)
            else:
                part = rssr.PartitionResult(partition=pid, state_epoch=cur.state_epoch, leader_epoch=cur.leader_epoch,
                                            start_offset=cur.start_offset,
                                            delivery_complete_count=cur.delivery_complete_count)
        return Result(response=ReadShareGroupStateSummaryResponse(results=[
            rssr.ReadStateSummaryResult(topic_id=tid, partitions=[part])]))

    def initialize_state(self, req, now_ms: int) -> Result:
        """InitializeShareGroupState: a fresh snapshot at the request's state epoch and start offset (nothing
        merged: initializing is a fresh start); an older state epoch is FENCED_STATE_EPOCH."""
        topic = req.topics[0]
        p = topic.partitions[0]
        tid, pid = topic.topic_id, p.partition
        err = self._basic_error(tid, pid)
        key = (req.group_id, bytes(tid) if tid is not None else b"", pid)
        if err is None and self.state_epochs.get(key, p.state_epoch) > p.state_epoch:
            err = (ErrorCode.FENCED_STATE_EPOCH, None)
        if err is None:
            err = self._topic_error(tid, pid)
        if err is not None:
            return Result(response=_init_response(tid, pid, *err))
        cur = self.state.get(key)
        value = ShareGroupOffset(
            snapshot_epoch=0 if cur is None else cur.snapshot_epoch + 1, state_epoch=p.state_epoch, leader_epoch=-1,
            start_offset=p.start_offset,
            delivery_complete_count=0 if p.start_offset >= 0 else UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
            create_timestamp=now_ms, write_timestamp=now_ms)
        return Result([_snapshot_record(key, value)], _init_response(tid, pid, 0, None))

    def delete_state(self, req) -> Result:
        """DeleteShareGroupState: a tombstone for the share-partition (nothing to write if it has no state); the
        topic-partition must be in the image (maybeGetDeleteStateError)."""
        topic = req.topics[0]
        p = topic.partitions[0]
        tid, pid = topic.topic_id, p.partition
        err = self._topic_error(tid, pid)
        if err is not None:
            return Result(response=_delete_response(tid, pid, *err))
        key = (req.group_id, bytes(tid), pid)
        records = [CoordinatorRecord(ShareSnapshotKey(group_id=key[0], topic_id=key[1], partition=pid), None)] \
            if key in self.state else []
        return Result(records, _delete_response(tid, pid, 0, None))

    def topics_deleted(self, topic_ids: set[bytes]) -> Result:
        """Deleted topics' share-partitions get tombstones (ShareCoordinatorShard.maybeCleanupShareState)."""
        return Result([CoordinatorRecord(ShareSnapshotKey(group_id=g, topic_id=t, partition=p), None)
                       for (g, t, p) in sorted(self.state) if t in topic_ids])

    def snapshot_cold_partitions(self, now_ms: int) -> Result:
        """A new snapshot for each share-partition not written for ``cold_partition_snapshot_interval_ms``, so its
        old records stop holding back the log's pruning (snapshotColdPartitions); nothing if every partition's
        latest snapshot is already such a re-snapshot (a quiet system)."""
        if all(v.create_timestamp != v.write_timestamp for v in self.state.values()):
            return Result()
        records = []
        for key, v in sorted(self.state.items()):
            if now_ms - v.write_timestamp > self.config.cold_partition_snapshot_interval_ms:
                records.append(_snapshot_record(key, dataclasses.replace(
                    v, snapshot_epoch=v.snapshot_epoch + 1, write_timestamp=now_ms)))
        return Result(records)

    def last_redundant_offset(self) -> int | None:
        """Every record below this offset is superseded by a later snapshot (None: nothing to prune)."""
        return self.offsets.last_redundant_offset()

    # ---- helpers ------------------------------------------------------------------------------------
    def _state_record(self, key: Key, partition: int, leader_epoch: int, state_epoch: int, start_offset: int,
                      delivery_complete_count: int, batches: list[StateBatch], now_ms: int) -> CoordinatorRecord:
        """generateShareStateRecord: a snapshot once the key has had enough updates since its last one (the
        request's -1 fields keeping the current values), else an update in the current snapshot epoch."""
        cur = self.state[key]
        if self.update_counts.get(key, 0) >= self.config.snapshot_update_records_per_snapshot:
            new_start = cur.start_offset if start_offset == -1 else start_offset
            value = ShareGroupOffset(
                snapshot_epoch=cur.snapshot_epoch + 1,
                state_epoch=cur.state_epoch if state_epoch == -1 else state_epoch,
                leader_epoch=cur.leader_epoch if leader_epoch == -1 else leader_epoch,
                start_offset=new_start,
                state_batches=tuple(combine_state_batches(list(cur.state_batches), batches, new_start)),
                delivery_complete_count=(cur.delivery_complete_count if delivery_complete_count == -1
                                         else delivery_complete_count),
                create_timestamp=cur.create_timestamp, write_timestamp=now_ms)
            return _snapshot_record(key, value)
        value = ShareGroupOffset(
            snapshot_epoch=cur.snapshot_epoch, state_epoch=-1, leader_epoch=leader_epoch, start_offset=start_offset,
            state_batches=tuple(combine_state_batches([], batches, start_offset)),
            delivery_complete_count=delivery_complete_count)
        return CoordinatorRecord(ShareUpdateKey(group_id=key[0], topic_id=key[1], partition=partition),
                                 value.update_value())

    @staticmethod
    def _basic_error(topic_id, partition: int) -> tuple[int, str | None] | None:
        if topic_id is None:
            return ErrorCode.INVALID_REQUEST, NULL_TOPIC_ID
        if partition < 0:
            return ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID
        return None

    def _topic_error(self, topic_id, partition: int) -> tuple[int, str | None] | None:
        """The topic-partition must exist in the metadata image (UNKNOWN_TOPIC_OR_PARTITION)."""
        err = self._basic_error(topic_id, partition)
        if err is not None:
            return err
        topic = None if self.image is None else self.image.topics_by_id.get(bytes(topic_id))
        if topic is None or partition not in topic.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        return None

    def _write_error(self, group_id: str, topic_id, p) -> tuple[int, str | None] | None:
        """maybeGetWriteStateError: uninitialized, older leader epoch, older state epoch, unknown partition."""
        err = self._basic_error(topic_id, p.partition)
        if err is not None:
            return err
        key = (group_id, bytes(topic_id), p.partition)
        if key not in self.state:
            return ErrorCode.INVALID_REQUEST, WRITE_UNINITIALIZED_SHARE_PARTITION
        if self.leader_epochs.get(key, p.leader_epoch) > p.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, None
        if self.state_epochs.get(key, p.state_epoch) > p.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH, None
        return self._topic_error(topic_id, p.partition)

    def _read_error(self, group_id: str, topic_id, p) -> tuple[int, str | None] | None:
        """maybeGetReadStateError: uninitialized, older leader epoch, unknown partition."""
        err = self._basic_error(topic_id, p.partition)
        if err is not None:
            return err
        key = (group_id, bytes(topic_id), p.partition)
        if key not in self.state:
            return ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED_SHARE_PARTITION
        if self.leader_epochs.get(key, p.leader_epoch) > p.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, None
        return self._topic_error(topic_id, p.partition)


def _merge(so_far: ShareGroupOffset, new: ShareUpdateValue) -> ShareGroupOffset:
    """A ShareUpdate on the current state: -1 fields keep theirs, batches combined from the new start offset."""
    start = so_far.start_offset if new.start_offset == -1 else new.start_offset
    return ShareGroupOffset(
        snapshot_epoch=so_far.snapshot_epoch, state_epoch=so_far.state_epoch,
        leader_epoch=so_far.leader_epoch if new.leader_epoch == -1 else new.leader_epoch, start_offset=start,
        state_batches=tuple(combine_state_batches(list(so_far.state_batches), _batches(new.state_batches), start)),
        delivery_complete_count=(so_far.delivery_complete_count if new.delivery_complete_count == -1
                                 else new.delivery_complete_count),
        create_timestamp=so_far.create_timestamp, write_timestamp=so_far.write_timestamp)


def _snapshot_record(key: Key, value: ShareGroupOffset) -> CoordinatorRecord:
    return CoordinatorRecord(ShareSnapshotKey(group_id=key[0], topic_id=key[1], partition=key[2]),
                             value.snapshot_value())


def _write_response(tid, pid: int, code: int, message: str | None) -> WriteShareGroupStateResponse:
    return WriteShareGroupStateResponse(results=[wsr.WriteStateResult(topic_id=tid, partitions=[
        wsr.PartitionResult(partition=pid, error_code=code,
                            error_message=_error_message(code, message) if code else None)])])


def _init_response(tid, pid: int, code: int, message: str | None) -> InitializeShareGroupStateResponse:
    return InitializeShareGroupStateResponse(results=[isr.InitializeStateResult(topic_id=tid, partitions=[
        isr.PartitionResult(partition=pid, error_code=code,
                            error_message=_error_message(code, message) if code else None)])])


def _delete_response(tid, pid: int, code: int, message: str | None) -> DeleteShareGroupStateResponse:
    return DeleteShareGroupStateResponse(results=[dsr.DeleteStateResult(topic_id=tid, partitions=[
        dsr.PartitionResult(partition=pid, error_code=code,
                            error_message=_error_message(code, message) if code else None)])])
