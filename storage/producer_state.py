"""Idempotent/transactional producer state (Kafka's ``ProducerStateManager``, ``ProducerStateEntry``,
``ProducerAppendInfo``, ``BatchMetadata``) and its ``<offset>.snapshot`` files.

Per producer id: the epoch, the last five batches' sequence ranges and offsets (duplicate detection),
the coordinator epoch and the first offset of an open transaction.  Rebuilt from batch headers during
recovery; snapshotted at every roll and on shutdown so a restart only scans the tail of the log.

Snapshot file layout (``ProducerSnapshot.json`` v1, non-flexible; ``ProducerStateManager.writeSnapshot``)::

    int16  version = 1
    uint32 crc     CRC32C of every byte after this field
    int32  entry count
    per entry: int64 producerId, int16 epoch, int32 lastSequence, int64 lastOffset, int32 offsetDelta,
               int64 timestamp, int32 coordinatorEpoch, int64 currentTxnFirstOffset
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

from crc32c import crc32c

from protocol.records import BatchHeader

from . import files
from .errors import CorruptSnapshotError, InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceError
from .fileio import FileIO

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NUM_BATCHES_TO_RETAIN = 5
_INT_MAX = 2**31 - 1

SNAPSHOT_VERSION = 1
_SNAP_HEADER = struct.Struct(">hIi")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")

ORIGIN_CLIENT = "client"
ORIGIN_REPLICATION = "replication"
ORIGIN_COORDINATOR = "coordinator"

__all__ = ["ProducerStateManager", "ProducerStateEntry", "BatchMetadata", "ProducerAppendInfo", "CompletedTxn",
           "VerificationGuard", "VerificationStateEntry", "read_snapshot", "write_snapshot"]


class VerificationGuard:
    """KIP-890's token for one verification of a producer's first transactional batch on a partition (Kafka's
    ``VerificationGuard``): equal only to itself; :data:`SENTINEL` (no verification) verifies nothing."""

    __slots__ = ()

    def verify(self, verifying: "VerificationGuard") -> bool:
        return verifying is not SENTINEL and verifying is self

    def __repr__(self) -> str:
        return "VerificationGuard(SENTINEL)" if self is SENTINEL else f"VerificationGuard({id(self):#x})"


SENTINEL = VerificationGuard()


class VerificationStateEntry:
    """A producer's verification in progress on a partition (Kafka's ``VerificationStateEntry``): its guard, when
    it started, and the lowest sequence (at the newest epoch) seen while verifying; a batch with a higher sequence
    is out of order until the lowest one is written (no OutOfOrderSequence loop after a retriable failure)."""

    __slots__ = ("timestamp", "verification_guard", "lowest_sequence", "epoch")

    def __init__(self, timestamp: int, sequence: int, epoch: int) -> None:
        self.timestamp = timestamp
        self.verification_guard = VerificationGuard()
        self.lowest_sequence = sequence
        self.epoch = epoch

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence


def decrement_sequence(seq: int, decrement: int) -> int:
    if seq < decrement:
        return _INT_MAX - (decrement - seq) + 1
    return seq - decrement


class BatchMetadata(NamedTuple):
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass
class TxnMetadata:
    producer_id: int
    first_offset: int
    last_offset: int | None = None


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batch_metadata: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    def copy_without_batches(self) -> "ProducerStateEntry":
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset)

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        if self.producer_epoch != epoch:
            self.batch_metadata.clear()
            self.producer_epoch = epoch
            return True
        return False

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, nxt: "ProducerStateEntry") -> None:
        self.maybe_update_producer_epoch(nxt.producer_epoch)
        for b in nxt.batch_metadata:
            self.batch_metadata.append(b)
        self.coordinator_epoch = nxt.coordinator_epoch
        self.current_txn_first_offset = nxt.current_txn_first_offset
        self.last_timestamp = nxt.last_timestamp

    def find_duplicate_batch(self, h: BatchHeader) -> BatchMetadata | None:
        if h.producer_epoch != self.producer_epoch:
            return None
        first, last = h.base_sequence, h.last_sequence
        for b in self.batch_metadata:
            if b.first_seq == first and b.last_seq == last:
                return b
        return None


class ProducerAppendInfo:
    """Validates one producer's batches of one append against its state and accumulates the new state."""

    def __init__(self, producer_id: int, current: ProducerStateEntry, origin: str,
                 verification_state_entry: VerificationStateEntry | None = None,
                 transaction_version: int = 0) -> None:
        """``transaction_version``: the coordinator's for the markers of this append (WriteTxnMarkers v2)."""
        self.producer_id = producer_id
        self.transaction_version = transaction_version
        self.current = current
        self.origin = origin
        self.verification_state_entry = verification_state_entry
        self.updated = current.copy_without_batches()
        self.started_transactions: list[TxnMetadata] = []

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch:
            msg = (f"Epoch of producer {self.producer_id} at offset {offset} is {epoch}, which is smaller than the "
                   f"last seen epoch {self.updated.producer_epoch}")
            if self.origin == ORIGIN_REPLICATION:
                log.warning(msg)
            else:
                raise InvalidProducerEpochError(msg)

    def _check_sequence(self, epoch: int, append_first_seq: int, offset: int) -> None:
        v = self.verification_state_entry
        if v is not None and append_first_seq > v.lowest_sequence:
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset {offset}: "
                f"{append_first_seq} (incoming seq. number), {v.lowest_sequence} (earliest seen sequence)")
        if epoch != self.updated.producer_epoch:
            if append_first_seq != 0 and self.updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at offset {offset}: "
                    f"{epoch} (request epoch), {append_first_seq} (seq. number), "
                    f"{self.updated.producer_epoch} (current producer epoch)")
        else:
            if not self.updated.is_empty:
                current_last_seq = self.updated.last_seq
            elif epoch == self.current.producer_epoch:
                current_last_seq = self.current.last_seq
            else:
                current_last_seq = NO_SEQUENCE
            if not (self.current.producer_epoch == NO_PRODUCER_EPOCH
                    or append_first_seq == current_last_seq + 1
                    or (append_first_seq == 0 and current_last_seq == _INT_MAX)):
                raise OutOfOrderSequenceError(
                    f"Out of order sequence number for producer {self.producer_id} at offset {offset}: "
                    f"{append_first_seq} (incoming seq. number), {current_last_seq} (current end sequence number)")

    def append(self, h: BatchHeader, buf=None, pos: int = 0) -> CompletedTxn | None:
        """Apply one batch; ``buf``/``pos`` (the batch's bytes) are needed only for control batches."""
        if h.is_control:
            marker = _end_txn_marker(buf, pos) if buf is not None else None
            if marker is None:
                return None
            is_commit, coordinator_epoch, timestamp = marker
            return self.append_end_txn_marker(is_commit, coordinator_epoch, h.producer_epoch, h.base_offset, timestamp)
        first_offset = h.base_offset
        last_offset = h.base_offset + h.last_offset_delta
        self._check_producer_epoch(h.producer_epoch, first_offset)
        if self.origin == ORIGIN_CLIENT:
            self._check_sequence(h.producer_epoch, h.base_sequence, first_offset)
        self.updated.add_batch(h.producer_epoch, h.last_sequence, last_offset, last_offset - first_offset,
                               h.max_timestamp)
        cur = self.updated.current_txn_first_offset
        if cur is not None and not h.is_transactional:
            raise InvalidTxnStateError(f"Expected transactional write from producer {self.producer_id} at "
                                       f"offset {first_offset}")
        if cur is None and h.is_transactional:
            self.updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))
        return None

    def _check_marker_epoch(self, epoch: int, offset: int) -> None:
        """KIP-1228 (ProducerStateManager.checkProducerEpoch with a transaction version): from TV2 on every
        transaction ends with a bumped epoch, so a marker must carry a strictly higher one than the transaction's
        data; an equal epoch is a stale marker of an earlier transaction (KAFKA-17754), except the coordinator's
        retry of a marker already written: no transaction open any more (KAFKA-19999). Replication only warns."""
        if self.transaction_version < 2 or epoch > self.updated.producer_epoch:
            self._check_producer_epoch(epoch, offset)
            return
        if epoch == self.updated.producer_epoch and self.updated.current_txn_first_offset is None:
            return  # an idempotent retry of a finished transaction's marker
        msg = (f"Epoch of producer {self.producer_id} at offset {offset} is {epoch}, which is not greater than the "
               f"last seen epoch {self.updated.producer_epoch} (transaction version {self.transaction_version})")
        if self.origin == ORIGIN_REPLICATION:
            log.warning(msg)
        else:
            raise InvalidProducerEpochError(msg)

    def append_end_txn_marker(self, is_commit: bool, coordinator_epoch: int, producer_epoch: int, offset: int,
                              timestamp: int) -> CompletedTxn | None:
        self._check_marker_epoch(producer_epoch, offset)
        if self.updated.coordinator_epoch > coordinator_epoch and self.origin != ORIGIN_REPLICATION:
            from protocol.errors import ErrorCode, KafkaError
            raise KafkaError(f"Invalid coordinator epoch for producerId {self.producer_id} at offset {offset}",
                             ErrorCode.TRANSACTION_COORDINATOR_FENCED)
        completed = None
        if self.updated.current_txn_first_offset is not None:
            completed = CompletedTxn(self.producer_id, self.updated.current_txn_first_offset, offset, not is_commit)
        self.updated.maybe_update_producer_epoch(producer_epoch)
        self.updated.coordinator_epoch = coordinator_epoch
        self.updated.current_txn_first_offset = None
        self.updated.last_timestamp = timestamp
        return completed

    def to_entry(self) -> ProducerStateEntry:
        return self.updated


def _end_txn_marker(buf, pos: int) -> tuple[bool, int, int] | None:
    """(is_commit, coordinator_epoch, timestamp) of the control batch at ``pos``, or None if it is not one."""
    from protocol.errors import ProtocolError
    from protocol.record_codec import ControlRecordType, decode_batch, parse_control_record_type, parse_end_txn_marker

    try:
        _, records = decode_batch(buf, pos, verify_crc=False)
        if not records:
            return None
        rec = records[0]
        if parse_control_record_type(rec.key) not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            return None
        marker = parse_end_txn_marker(rec)
        return marker.is_commit, marker.coordinator_epoch, rec.timestamp
    except ProtocolError:
        return None


# ---- snapshot files ------------------------------------------------------------------------------

def write_snapshot(path: str, producers: Iterable[ProducerStateEntry], sync: bool = True, *,
                   file_io: FileIO | None = None) -> None:
    entries = list(producers)
    body = bytearray(struct.pack(">i", len(entries)))
    for e in entries:
        body += _SNAP_ENTRY.pack(e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset,
                                 e.last_offset_delta, e.last_timestamp, e.coordinator_epoch,
                                 -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
    data = struct.pack(">hI", SNAPSHOT_VERSION, crc32c(bytes(body))) + bytes(body)
    io = file_io if file_io is not None else FileIO()
    fd = io.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        io.pwrite_all(fd, data, 0)
        if sync:
            io.fsync(fd)
    finally:
        io.close(fd)


def read_snapshot(path: str) -> list[ProducerStateEntry]:
    with open(path, "rb") as f:
        data = f.read()
    try:
        version, crc, count = _SNAP_HEADER.unpack_from(data, 0)
    except struct.error as e:
        raise CorruptSnapshotError(f"Snapshot failed schema validation: {e}") from None
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    if count < 0 or len(data) != _SNAP_HEADER.size + count * _SNAP_ENTRY.size:
        raise CorruptSnapshotError(f"Snapshot failed schema validation: {count} entries in {len(data)} bytes")
    computed = crc32c(data[6:])
    if computed != crc:
        raise CorruptSnapshotError(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
                                   f"Computed crc: {computed}")
    out = []
    pos = _SNAP_HEADER.size
    for _ in range(count):
        pid, epoch, last_seq, last_off, delta, ts, coord, txn_first = _SNAP_ENTRY.unpack_from(data, pos)
        pos += _SNAP_ENTRY.size
        e = ProducerStateEntry(pid, epoch, coord, ts, txn_first if txn_first >= 0 else None)
        if last_off >= 0:
            e.batch_metadata.append(BatchMetadata(last_seq, last_off, delta, ts))
        out.append(e)
    return out


class ProducerStateManager:
    def __init__(self, log_dir: str, *, producer_id_expiration_ms: int = 86400000,
                 max_transaction_timeout_ms: int = 900000, file_io: FileIO | None = None,
                 transaction_verification_enabled: bool = False) -> None:
        self.log_dir = log_dir
        self.file_io = file_io if file_io is not None else FileIO()
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        # producer id -> its verification in progress (KIP-890); checked only when this is on
        self.verification_states: dict[int, VerificationStateEntry] = {}
        self.transaction_verification_enabled = transaction_verification_enabled
        self._ongoing: dict[int, TxnMetadata] = {}  # first offset -> txn
        self._ongoing_keys: list[int] = []
        self._unreplicated: dict[int, TxnMetadata] = {}
        self._unreplicated_keys: list[int] = []
        self.last_map_offset = 0
        self.last_snap_offset = 0
        self._snapshots: list[int] = []
        self._load_snapshots()

    # ---- snapshot bookkeeping ----------------------------------------------------------------------
    def _load_snapshots(self) -> None:
        offs = []
        try:
            names = os.listdir(self.log_dir)
        except FileNotFoundError:
            names = []
        for n in names:
            if n.endswith(files.PRODUCER_SNAPSHOT_FILE_SUFFIX):
                try:
                    offs.append(files.offset_from_file_name(n))
                except ValueError:
                    continue
        self._snapshots = sorted(offs)

    def _snapshot_path(self, offset: int) -> str:
        return files.producer_snapshot_file(self.log_dir, offset)

    def latest_snapshot_offset(self) -> int | None:
        return self._snapshots[-1] if self._snapshots else None

    def oldest_snapshot_offset(self) -> int | None:
        return self._snapshots[0] if self._snapshots else None

    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        i = bisect.bisect_left(self._snapshots, offset)
        if i < len(self._snapshots) and self._snapshots[i] == offset:
            self._snapshots.pop(i)
            try:
                self.file_io.unlink(self._snapshot_path(offset))
            except FileNotFoundError:
                pass

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> str | None:
        """Forget the snapshot at ``offset`` and rename it to ``.deleted``; returns the new path."""
        i = bisect.bisect_left(self._snapshots, offset)
        if i < len(self._snapshots) and self._snapshots[i] == offset:
            self._snapshots.pop(i)
            src = self._snapshot_path(offset)
            dst = src + files.DELETED_FILE_SUFFIX
            try:
                self.file_io.rename(src, dst)
                return dst
            except FileNotFoundError:
                return None
        return None

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Delete snapshots with no segment at their offset, except the newest one past the last segment."""
        bases = set(segment_base_offsets)
        max_base = max(bases) if bases else None
        self._load_snapshots()
        latest_stray = None
        for off in list(self._snapshots):
            if off not in bases:
                if latest_stray is not None:
                    self._remove_and_delete_snapshot(latest_stray)
                latest_stray = off
        if latest_stray is not None and max_base is not None and latest_stray < max_base:
            self._remove_and_delete_snapshot(latest_stray)

    def delete_snapshots_before(self, offset: int) -> None:
        for off in [o for o in self._snapshots if o < offset]:
            self._remove_and_delete_snapshot(off)

    def take_snapshot(self, sync: bool = True) -> str | None:
        if self.last_map_offset > self.last_snap_offset:
            path = self._snapshot_path(self.last_map_offset)
            write_snapshot(path, self.producers.values(), sync, file_io=self.file_io)
            if self.last_map_offset not in self._snapshots:
                bisect.insort(self._snapshots, self.last_map_offset)
            self.last_snap_offset = self.last_map_offset
            return path
        return None

    # ---- state -----------------------------------------------------------------------------------
    @property
    def map_end_offset(self) -> int:
        return self.last_map_offset

    def update_map_end_offset(self, offset: int) -> None:
        self.last_map_offset = offset

    def is_empty(self) -> bool:
        return not self.producers and not self._unreplicated

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def load_producer_entry(self, e: ProducerStateEntry) -> None:
        """A producer's entry as a snapshot holds it, its open transaction included (``loadProducerEntry``)."""
        self.producers[e.producer_id] = e
        off = e.current_txn_first_offset
        if off is not None:
            if off not in self._ongoing:
                bisect.insort(self._ongoing_keys, off)
            self._ongoing[off] = TxnMetadata(e.producer_id, off)

    def prepare_update(self, producer_id: int, origin: str, transaction_version: int = 0) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(producer_id, current, origin, self.verification_states.get(producer_id),
                                  transaction_version)

    # ---- KIP-890 verification ----------------------------------------------------------------------
    def maybe_create_verification_state_entry(self, producer_id: int, sequence: int, epoch: int,
                                              now_ms: int) -> VerificationStateEntry:
        """The producer's verification entry, created at ``now_ms`` if it has none; its lowest sequence and epoch
        updated (``maybeCreateVerificationStateEntry``)."""
        entry = self.verification_states.get(producer_id)
        if entry is None:
            entry = self.verification_states[producer_id] = VerificationStateEntry(now_ms, sequence, epoch)
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def verification_state_entry(self, producer_id: int) -> VerificationStateEntry | None:
        return self.verification_states.get(producer_id)

    def clear_verification_state_entry(self, producer_id: int) -> None:
        self.verification_states.pop(producer_id, None)

    def update(self, info: ProducerAppendInfo) -> None:
        entry = info.to_entry()
        cur = self.producers.get(info.producer_id)
        if cur is not None:
            cur.update(entry)
        else:
            self.producers[info.producer_id] = entry
        for txn in info.started_transactions:
            if txn.first_offset not in self._ongoing:
                bisect.insort(self._ongoing_keys, txn.first_offset)
            self._ongoing[txn.first_offset] = txn

    def complete_txn(self, completed: CompletedTxn) -> None:
        txn = self._ongoing.pop(completed.first_offset, None)
        if txn is None:
            raise ValueError(f"Attempted to complete transaction {completed} which was not started")
        self._ongoing_keys.remove(completed.first_offset)
        txn.last_offset = completed.last_offset
        if completed.first_offset not in self._unreplicated:
            bisect.insort(self._unreplicated_keys, completed.first_offset)
        self._unreplicated[completed.first_offset] = txn

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        for k in self._ongoing_keys:
            txn = self._ongoing[k]
            if txn.producer_id != completed.producer_id:
                return txn.first_offset
        return completed.last_offset + 1

    def first_unstable_offset(self) -> int | None:
        candidates = []
        if self._unreplicated_keys:
            candidates.append(self._unreplicated_keys[0])
        if self._ongoing_keys:
            candidates.append(self._ongoing_keys[0])
        return min(candidates) if candidates else None

    def first_undecided_offset(self) -> int | None:
        return self._ongoing_keys[0] if self._ongoing_keys else None

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self._remove_unreplicated(high_watermark)

    def _remove_unreplicated(self, offset: int) -> None:
        for k in list(self._unreplicated_keys):
            txn = self._unreplicated[k]
            if txn.last_offset is not None and txn.last_offset < offset:
                del self._unreplicated[k]
                self._unreplicated_keys.remove(k)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated(log_start_offset)
        if self.last_map_offset < log_start_offset:
            self.last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset()
        self.last_snap_offset = latest if latest is not None else log_start_offset

    def _is_expired(self, now_ms: int, e: ProducerStateEntry) -> bool:
        return e.current_txn_first_offset is None and now_ms - e.last_timestamp >= self.producer_id_expiration_ms

    def remove_expired_producers(self, now_ms: int) -> None:
        for pid in [p for p, e in self.producers.items() if self._is_expired(now_ms, e)]:
            del self.producers[pid]
        # verification entries left unverified (the producer never came back) expire the same way
        for pid in [p for p, v in self.verification_states.items()
                    if now_ms - v.timestamp >= self.producer_id_expiration_ms]:
            del self.verification_states[pid]

    def _clear(self) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self._ongoing_keys.clear()
        self._unreplicated.clear()
        self._unreplicated_keys.clear()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._clear()
        for off in list(self._snapshots):
            self._remove_and_delete_snapshot(off)
        self.last_snap_offset = 0
        self.last_map_offset = offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        for off in list(self._snapshots):
            if off > log_end_offset or off <= log_start_offset:
                self._remove_and_delete_snapshot(off)
        if log_end_offset != self.map_end_offset:
            self._clear()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while True:
            latest = self.latest_snapshot_offset()
            if latest is None:
                self.last_snap_offset = log_start_offset
                self.last_map_offset = log_start_offset
                return
            try:
                entries = read_snapshot(self._snapshot_path(latest))
            except (CorruptSnapshotError, OSError) as e:
                log.warning("Failed to load producer snapshot from %s: %s", self._snapshot_path(latest), e)
                self._remove_and_delete_snapshot(latest)
                continue
            for e in entries:
                if not self._is_expired(now_ms, e):
                    self.load_producer_entry(e)
            self.last_snap_offset = latest
            self.last_map_offset = latest
            return

    # ---- recovery helpers ------------------------------------------------------------------------
    def update_from_recovered_batch(self, h: BatchHeader, buf, pos: int) -> tuple[CompletedTxn, int] | None:
        """``LogSegment.updateProducerState``: apply one batch read back during recovery.  Returns the transaction
        it completed and the last stable offset as of then (taken before the transaction is completed, as the
        append path does), which the segment puts in its transaction index if aborted; else None."""
        done = None
        if h.producer_id > NO_PRODUCER_ID:
            info = self.prepare_update(h.producer_id, ORIGIN_REPLICATION)
            completed = info.append(h, buf, pos)
            self.update(info)
            if completed is not None:
                done = (completed, self.last_stable_offset(completed))
                self.complete_txn(completed)
        self.update_map_end_offset(h.base_offset + h.last_offset_delta + 1)
        return done

    def load_producers_from_batches(self, batches: Iterable[tuple[BatchHeader, object, int]]) -> None:
        """``UnifiedLog.loadProducersFromRecords``: ``(header, buffer, position)`` triples."""
        loaded: dict[int, ProducerAppendInfo] = {}
        completed_txns = []
        for h, buf, pos in batches:
            if h.producer_id > NO_PRODUCER_ID:
                info = loaded.get(h.producer_id)
                if info is None:
                    info = loaded[h.producer_id] = self.prepare_update(h.producer_id, ORIGIN_REPLICATION)
                c = info.append(h, buf, pos)
                if c is not None:
                    completed_txns.append(c)
        for info in loaded.values():
            self.update(info)
        for c in completed_txns:
            self.complete_txn(c)
