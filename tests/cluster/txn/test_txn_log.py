"""TransactionLogTest: ``__transaction_state`` records (cluster/txn/txn_log.py)."""

from __future__ import annotations

import struct

import pytest

from cluster.txn.txn_log import (
    TxnKey, TxnLogRecord, UnknownKey, decode_record, format_record_key_and_value, key_to_bytes, partition_for,
    read_txn_record_key, read_txn_record_value, value_to_bytes,
)
from cluster.txn.txn_metadata import (
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, IllegalStateError, TransactionMetadata, TransactionState, TransactionVersion,
    TxnTransitMetadata,
)
from protocol.generated.coordinator import TransactionLogKey, TransactionLogValue
from protocol.generated.coordinator.transaction_log_value import PartitionsSchema
from protocol.primitives import uvarint

S = TransactionState
TV_0, TV_1, TV_2 = TransactionVersion.TV_0, TransactionVersion.TV_1, TransactionVersion.TV_2
PRODUCER_EPOCH = 0
TIMEOUT_MS = 1000
TOPIC_PARTITIONS = {("topic1", 0), ("topic1", 1), ("topic2", 0), ("topic2", 1), ("topic2", 2)}


def md(txn_id, pid, state, partitions=()):
    m = TransactionMetadata(txn_id, pid, NO_PRODUCER_ID, NO_PRODUCER_ID, PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
                            TIMEOUT_MS, state, (), 0, 0)
    m.add_partitions(partitions)
    return m


def test_should_throw_exception_write_invalid_txn():
    """TransactionLogTest.shouldThrowExceptionWriteInvalidTxn"""
    m = md("transactionalId", 23423, S.EMPTY, TOPIC_PARTITIONS)
    with pytest.raises(IllegalStateError):
        value_to_bytes(m.prepare_no_transit(), TV_2)


def test_should_read_write_messages():
    """TransactionLogTest.shouldReadWriteMessages"""
    pids = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
    states = {0: S.EMPTY, 1: S.ONGOING, 2: S.PREPARE_COMMIT, 3: S.COMPLETE_COMMIT, 4: S.PREPARE_ABORT,
              5: S.COMPLETE_ABORT}
    records = []
    for txn_id, pid in pids.items():
        m = md(txn_id, pid, states[pid], () if states[pid] is S.EMPTY else TOPIC_PARTITIONS)
        records.append((key_to_bytes(txn_id), value_to_bytes(m.prepare_no_transit(), TV_2)))
    for key, value in records:
        txn_id = read_txn_record_key(key).transactional_id
        got = read_txn_record_value(txn_id, value)
        assert got.producer_id == pids[txn_id]
        assert got.producer_epoch == PRODUCER_EPOCH
        assert got.txn_timeout_ms == TIMEOUT_MS
        assert got.state is states[got.producer_id]
        assert got.topic_partitions == (set() if got.state is S.EMPTY else TOPIC_PARTITIONS)
    assert len(records) == len(pids)


def test_transaction_metadata_parsing():
    """TransactionLogTest.testTransactionMetadataParsing"""
    m = md("id", 1334, S.ONGOING, {("topic", 0)})
    key, value = key_to_bytes("id"), value_to_bytes(m.prepare_no_transit(), TV_2)
    assert format_record_key_and_value(key, value) == (
        "transaction_metadata::transactionalId=id",
        f"producerId:1334,producerEpoch:{PRODUCER_EPOCH},state=Ongoing,partitions=[topic-0],"
        f"txnLastUpdateTimestamp=0,txnTimeoutMs={TIMEOUT_MS}")


def test_transaction_metadata_tombstone_parsing():
    """TransactionLogTest.testTransactionMetadataTombstoneParsing"""
    assert format_record_key_and_value(key_to_bytes("id"), None) == (
        "transaction_metadata::transactionalId=id", "<DELETE>")
    assert read_txn_record_value("id", None) is None
    assert decode_record(key_to_bytes("id"), None) == ("id", None)


def test_serialize_transaction_log_value_to_highest_non_flexible_version():
    """TransactionLogTest.testSerializeTransactionLogValueToHighestNonFlexibleVersion"""
    t = TxnTransitMetadata(1, 1, 1, 1, 1, 1000, S.COMPLETE_COMMIT, frozenset(), 500, 500, TV_0)
    assert struct.unpack_from(">h", value_to_bytes(t, TV_0))[0] == 0


@pytest.mark.parametrize("level", [TV_1, TV_2])
def test_serialize_transaction_log_value_to_flexible_version(level):
    """TransactionLogTest.testSerializeTransactionLogValueToFlexibleVersion"""
    t = TxnTransitMetadata(1, 1, 1, 1, 1, 1000, S.COMPLETE_COMMIT, frozenset(), 500, 500, TV_2)
    assert struct.unpack_from(">h", value_to_bytes(t, level))[0] == TransactionLogValue.VALID_VERSIONS[1]


def test_deserialize_highest_supported_transaction_log_value():
    """TransactionLogTest.testDeserializeHighestSupportedTransactionLogValue"""
    v = TransactionLogValue(producer_id=100, producer_epoch=50, transaction_status=S.COMPLETE_COMMIT.id,
                            transaction_start_timestamp_ms=750, transaction_last_update_timestamp_ms=1000,
                            transaction_timeout_ms=500,
                            transaction_partitions=[PartitionsSchema(topic="topic", partition_ids=[0])])
    got = read_txn_record_value("transactionId", struct.pack(">h", 1) + v.encode(1))
    assert (got.producer_id, got.producer_epoch, got.state) == (100, 50, S.COMPLETE_COMMIT)
    assert (got.txn_start_timestamp, got.txn_last_update_timestamp, got.txn_timeout_ms) == (750, 1000, 500)
    assert got.topic_partitions == {("topic", 0)}


def _tag(tag: int, data: bytes) -> tuple[int, bytes]:
    return tag, data


def test_deserialize_future_transaction_log_value():
    """TransactionLogTest.testDeserializeFutureTransactionLogValue: tagged fields of a newer Kafka are read and
    ignored (in the value and in its partitions)"""
    foo = uvarint(4) + b"foo"  # a compact string
    v = TransactionLogValue(
        producer_id=1000, producer_epoch=100, transaction_timeout_ms=1000, transaction_status=S.COMPLETE_COMMIT.id,
        transaction_partitions=[PartitionsSchema(topic="topic", partition_ids=[1], unknown_tagged_fields=[
            _tag(100, foo), _tag(101, struct.pack(">i", 4000))])],
        transaction_last_update_timestamp_ms=2000, transaction_start_timestamp_ms=3000,
        unknown_tagged_fields=[_tag(100, foo), _tag(101, struct.pack(">i", 4000))])
    raw = struct.pack(">h", 1) + v.encode(1)
    decoded = TransactionLogValue.decode(raw[2:], 1)
    assert [t for t, _ in decoded.unknown_tagged_fields] == [100, 101]
    assert [t for t, _ in decoded.transaction_partitions[0].unknown_tagged_fields] == [100, 101]
    got = read_txn_record_value("transaction-id", raw)
    assert (got.producer_id, got.producer_epoch, got.txn_timeout_ms, got.state) == (1000, 100, 1000,
                                                                                     S.COMPLETE_COMMIT)
    assert got.topic_partitions == {("topic", 1)}
    assert (got.txn_last_update_timestamp, got.txn_start_timestamp) == (2000, 3000)


def test_read_txn_record_key_can_read_unknown_message():
    """TransactionLogTest.testReadTxnRecordKeyCanReadUnknownMessage"""
    raw = struct.pack(">h", 32767) + TransactionLogKey(transactional_id="").encode(0)
    assert read_txn_record_key(raw) == UnknownKey(32767)
    assert decode_record(raw, None) is None
    assert read_txn_record_key(key_to_bytes("x")) == TxnKey(0, "x")


def test_the_tagged_fields_of_value_v1():
    """TransactionLogValue v1's tagged fields (PreviousProducerId 0, NextProducerId 1, ClientTransactionVersion 2)
    are written when not their default and read back; v0 has none"""
    t = TxnTransitMetadata(7, 5, 9, 3, 2, 1000, S.PREPARE_COMMIT, frozenset({("t", 0)}), 500, 600, TV_2)
    got = read_txn_record_value("x", value_to_bytes(t, TV_2))
    assert (got.producer_id, got.previous_producer_id, got.next_producer_id) == (7, 5, 9)
    assert got.client_transaction_version is TV_2
    assert got.last_producer_epoch == NO_PRODUCER_EPOCH  # never in the record
    v0 = read_txn_record_value("x", value_to_bytes(t, TV_0))
    assert (v0.previous_producer_id, v0.next_producer_id, v0.client_transaction_version) == (
        NO_PRODUCER_ID, NO_PRODUCER_ID, TV_0)
    defaults = TxnTransitMetadata(7, -1, -1, 3, 2, 1000, S.EMPTY, frozenset(), -1, 600, TV_0)
    raw = value_to_bytes(defaults, TV_2)
    assert TransactionLogValue.decode(raw[2:], 1).unknown_tagged_fields is None  # nothing written for defaults


def test_empty_state_writes_null_partitions():
    """TransactionLog.valueToBytes: an Empty transaction's partitions are null"""
    t = TxnTransitMetadata(7, -1, -1, 3, 2, 1000, S.EMPTY, frozenset(), -1, 600, TV_0)
    for level in (TV_0, TV_2):
        raw = value_to_bytes(t, level)
        assert TransactionLogValue.decode(raw[2:], struct.unpack_from(">h", raw)[0]).transaction_partitions is None


def test_a_log_record_encodes_its_key_and_value_or_a_tombstone():
    t = TxnTransitMetadata(7, -1, -1, 3, 2, 1000, S.ONGOING, frozenset({("t", 0)}), 1, 600, TV_0)
    key, value = TxnLogRecord("x", t, TV_1).encode()
    assert key == key_to_bytes("x") and struct.unpack_from(">h", value)[0] == 1
    assert TxnLogRecord("x", None).encode() == (key_to_bytes("x"), None)


@pytest.mark.parametrize("txn_id,partitions,expected", [
    ("", 50, 0), ("a", 50, 97 % 50), ("my-txn", 50, None), ("x" * 1000, 7, None)])
def test_partition_for_is_abs_java_hash_code_mod_partitions(txn_id, partitions, expected):
    """TransactionStateManager.partitionFor: Utils.abs(transactionalId.hashCode) % partitions"""
    h = 0
    for ch in txn_id:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    want = (0 if h == -(1 << 31) else abs(h)) % partitions
    assert partition_for(txn_id, partitions) == want
    if expected is not None:
        assert want == expected


def test_value_v1_bytes_are_kafkas():
    """TransactionLogValue v1 as Kafka's generated writer lays it out: the fixed fields, compact arrays and strings,
    then the tagged fields in tag order as (tag, size, data)"""
    t = TxnTransitMetadata(7, 5, 9, 3, 2, 1000, S.PREPARE_COMMIT, frozenset({("t", 0)}), 500, 600, TV_2)
    want = (struct.pack(">h", 1) + struct.pack(">qhib", 7, 3, 1000, S.PREPARE_COMMIT.id)
            + bytes([2])  # one partitions entry (compact: n + 1)
            + bytes([2]) + b"t" + bytes([2]) + struct.pack(">i", 0) + bytes([0])  # topic, [0], no tags
            + struct.pack(">qq", 600, 500)
            + bytes([3]) + bytes([0, 8]) + struct.pack(">q", 5) + bytes([1, 8]) + struct.pack(">q", 9)
            + bytes([2, 2]) + struct.pack(">h", 2))
    assert value_to_bytes(t, TV_2) == want
    assert key_to_bytes("t") == struct.pack(">hh", 0, 1) + b"t"
