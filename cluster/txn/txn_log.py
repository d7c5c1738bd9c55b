"""``__transaction_state`` records in Kafka's format (TransactionLog.scala), and a transactional id's partition.

A record's key is ``int16 version`` (0) + TransactionLogKey, its value ``int16 version`` + TransactionLogValue, and
a tombstone (the id expired) has a null value. The value is written at v0 while the ``transaction.version``
feature is 0 and at v1 (flexible) from TV1 on, so brokers that do not know TV1 can still load the partition.
Kafka's own tooling (kafka-dump-log --transaction-log-decoder) reads what odradek writes.

The generated codec does not know TransactionLogValue's tagged fields (they have ``taggedVersions`` but no
``versions``), so PreviousProducerId (tag 0), NextProducerId (tag 1) and ClientTransactionVersion (tag 2) are
written and read here, through the codec's unknown-tagged-fields list. Kafka writes a tagged field only when it
differs from its default, and so does this.
"""

from __future__ import annotations

import dataclasses
import struct

from cluster.groups.group_records import partition_for as _partition_for
from cluster.txn.txn_metadata import (
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, IllegalStateError, TransactionMetadata, TransactionState, TransactionVersion,
    TxnTransitMetadata,
)
from protocol.generated.coordinator import TransactionLogKey, TransactionLogValue
from protocol.generated.coordinator.transaction_log_value import PartitionsSchema

KEY_VERSION = 0
TAG_PREVIOUS_PRODUCER_ID = 0
TAG_NEXT_PRODUCER_ID = 1
TAG_CLIENT_TRANSACTION_VERSION = 2
_KNOWN_TAGS = (TAG_PREVIOUS_PRODUCER_ID, TAG_NEXT_PRODUCER_ID, TAG_CLIENT_TRANSACTION_VERSION)


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """``Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount`` (TransactionStateManager)."""
    return _partition_for(transactional_id, num_partitions)


# ---- key ---------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TxnKey:
    version: int
    transactional_id: str


@dataclasses.dataclass(frozen=True)
class UnknownKey:
    """A key version this coordinator does not know (a newer Kafka, an aborted upgrade): skipped on load."""

    version: int
    transactional_id = None


def key_to_bytes(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + TransactionLogKey(transactional_id=transactional_id).encode(KEY_VERSION)


def read_txn_record_key(key: bytes) -> TxnKey | UnknownKey:
    (version,) = struct.unpack_from(">h", key, 0)
    lo, hi = TransactionLogKey.VALID_VERSIONS
    if not lo <= version <= hi:
        return UnknownKey(version)
    return TxnKey(version, TransactionLogKey.decode(memoryview(key)[2:], version).transactional_id)


# ---- value -------------------------------------------------------------------------------------------------

def _int64(v: int) -> bytes:
    return struct.pack(">q", v)


def _codec_knows_the_tags() -> bool:
    """Whether the generated codec writes PreviousProducerId itself (a codegen that learnt ``taggedVersions``-only
    fields): then this module sets the fields instead of adding them as unknown tags, which would write them twice."""
    plain = TransactionLogValue().encode(1)
    return TransactionLogValue(previous_producer_id=5).encode(1) != plain


_CODEC_KNOWS_TAGS = _codec_knows_the_tags()


def value_to_bytes(t: TxnTransitMetadata, transaction_version_level: TransactionVersion) -> bytes:
    """The value of a transition's record; its version follows the cluster's ``transaction.version``."""
    if t.txn_state is TransactionState.EMPTY and t.topic_partitions:
        raise IllegalStateError(f"Transaction is not expected to have any partitions since its state is "
                                f"{t.txn_state}: {t}")
    version = TransactionVersion(transaction_version_level).transaction_log_value_version
    partitions = None
    if t.txn_state is not TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(t.topic_partitions):
            by_topic.setdefault(topic, []).append(p)
        partitions = [PartitionsSchema(topic=topic, partition_ids=ps) for topic, ps in by_topic.items()]
    tags = []
    if version >= 1 and not _CODEC_KNOWS_TAGS:
        if t.prev_producer_id != NO_PRODUCER_ID:
            tags.append((TAG_PREVIOUS_PRODUCER_ID, _int64(t.prev_producer_id)))
        if t.next_producer_id != NO_PRODUCER_ID:
            tags.append((TAG_NEXT_PRODUCER_ID, _int64(t.next_producer_id)))
        if t.client_transaction_version != 0:
            tags.append((TAG_CLIENT_TRANSACTION_VERSION, struct.pack(">h", int(t.client_transaction_version))))
    value = TransactionLogValue(
        producer_id=t.producer_id, producer_epoch=t.producer_epoch, transaction_timeout_ms=t.txn_timeout_ms,
        transaction_status=t.txn_state.id, transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=t.txn_last_update_timestamp,
        transaction_start_timestamp_ms=t.txn_start_timestamp, unknown_tagged_fields=tags or None)
    if version >= 1 and _CODEC_KNOWS_TAGS:
        value.previous_producer_id = t.prev_producer_id
        value.next_producer_id = t.next_producer_id
        value.client_transaction_version = int(t.client_transaction_version)
    return struct.pack(">h", version) + value.encode(version)


def _known_tags(value: TransactionLogValue) -> tuple[int, int, int]:
    """(previous producer id, next producer id, client transaction version): what the codec decoded, or the tagged
    fields it left unknown; other tags (a newer Kafka's) are ignored."""
    prev_pid, next_pid, tv = value.previous_producer_id, value.next_producer_id, value.client_transaction_version
    for tag, data in value.unknown_tagged_fields or ():
        if tag == TAG_PREVIOUS_PRODUCER_ID:
            (prev_pid,) = struct.unpack(">q", data)
        elif tag == TAG_NEXT_PRODUCER_ID:
            (next_pid,) = struct.unpack(">q", data)
        elif tag == TAG_CLIENT_TRANSACTION_VERSION:
            (tv,) = struct.unpack(">h", data)
    return prev_pid, next_pid, tv


def read_txn_record_value(transactional_id: str, value: bytes | None) -> TransactionMetadata | None:
    """The metadata a record holds (None for a tombstone). The last epoch is not in the record: -1."""
    if value is None:
        return None
    (version,) = struct.unpack_from(">h", value, 0)
    lo, hi = TransactionLogValue.VALID_VERSIONS
    if not lo <= version <= hi:
        raise ValueError(f"Unknown version {version} from the transaction log message value")
    v = TransactionLogValue.decode(memoryview(value)[2:], version)
    prev_pid, next_pid, tv = _known_tags(v)
    state = TransactionState.from_id(v.transaction_status)
    md = TransactionMetadata(transactional_id, v.producer_id, prev_pid, next_pid, v.producer_epoch, NO_PRODUCER_EPOCH,
                             v.transaction_timeout_ms, state, (), v.transaction_start_timestamp_ms,
                             v.transaction_last_update_timestamp_ms, TransactionVersion.from_feature_level(tv))
    if state is not TransactionState.EMPTY:
        for ps in v.transaction_partitions or ():
            md.add_partitions((ps.topic, p) for p in ps.partition_ids)
    return md


def format_record_key_and_value(key: bytes, value: bytes | None) -> tuple[str, str | None]:
    """What kafka-dump-log prints for a record (TransactionLog.formatRecordKeyAndValue)."""
    k = read_txn_record_key(key)
    if isinstance(k, UnknownKey):
        return f"unknown::version={k.version}", None
    md = read_txn_record_value(k.transactional_id, value)
    if md is None:
        return f"transaction_metadata::transactionalId={k.transactional_id}", "<DELETE>"
    partitions = ",".join(f"{t}-{p}" for t, p in sorted(md.topic_partitions))
    return (f"transaction_metadata::transactionalId={k.transactional_id}",
            f"producerId:{md.producer_id},producerEpoch:{md.producer_epoch},state={md.state},"
            f"partitions=[{partitions}],txnLastUpdateTimestamp={md.txn_last_update_timestamp},"
            f"txnTimeoutMs={md.txn_timeout_ms}")


# ---- what the coordinator asks the adapter to append ---------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TxnLogRecord:
    """One ``__transaction_state`` record: a transition of ``transactional_id`` (None: its tombstone)."""

    transactional_id: str
    transit: TxnTransitMetadata | None
    transaction_version_level: TransactionVersion = TransactionVersion.TV_0

    def encode(self) -> tuple[bytes, bytes | None]:
        """``(key, value)`` bytes, value None for a tombstone."""
        key = key_to_bytes(self.transactional_id)
        if self.transit is None:
            return key, None
        return key, value_to_bytes(self.transit, self.transaction_version_level)


def decode_record(key: bytes, value: bytes | None) -> tuple[str, TransactionMetadata | None] | None:
    """``(transactional id, metadata or None for a tombstone)``, or None for a key of an unknown version."""
    k = read_txn_record_key(key)
    if isinstance(k, UnknownKey):
        return None
    return k.transactional_id, read_txn_record_value(k.transactional_id, value)

