"""KIP-890 part 1 over the wire (ReplicaManager.handleProduceAppend with transaction verification): a raw
transactional Produce to a partition not added to the transaction is refused (INVALID_TXN_STATE at v10 with
"Partition was not added to the transaction", TRANSACTION_ABORTABLE at v11) and appends nothing; after
AddPartitionsToTxn it is appended, and the transaction's next batch is not asked about again. With
``transaction.partition.verification.enable=false`` the raw Produce is appended as before: a hanging transaction the
coordinator knows nothing of, seen with kafka-python's admin ``describe_producers`` and ended by its
``abort_transaction`` (WriteTxnMarkers). ReplicaManagerTest's verification cases are in the PORTED list below.

PORTED (ReplicaManagerTest, through the wire):
- testTransactionVerificationFlow: the refused first append, the verified one, the next batch without a question.
- testTransactionVerificationBlocksOutOfOrderSequence (the lowest-sequence rule, in storage:
  tests/storage/test_txn_verification.py).
- testTransactionVerificationGuardOnMultiplePartitions: one question for a request's partitions.
- testVerificationErrorConversionsTV2 / testVerificationErrorConversions: v10 vs v11 answers;
  the coordinator-retriable conversions to NOT_ENOUGH_REPLICAS (here: no coordinator alive for the id).
- testDisabledTransactionVerification: nothing asked, the batch appended.
"""

from __future__ import annotations

import asyncio
import time

from broker.testing.embedded import EmbeddedBroker
from protocol.errors import ErrorCode
from protocol.generated.messages import (
    AddPartitionsToTxnRequest,
    CreateTopicsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from protocol.generated.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from protocol.generated.messages.create_topics_request import CreatableTopic
from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
from protocol.record_codec import Record, build_batch
from tests.kafka_wire import KafkaWire

TXN_ID = "verify-me"


def _create(w: KafkaWire, topic: str, partitions: int = 2) -> None:
    r = w.call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(name=topic, num_partitions=partitions,
                                                                 replication_factor=1)], timeout_ms=5000))
    assert r.topics[0].error_code == 0


def _init(w: KafkaWire, txn_id: str = TXN_ID) -> tuple[int, int]:
    for _ in range(100):  # __transaction_state is created on first use
        r = w.call(10, 3, FindCoordinatorRequest(key=txn_id, key_type=1))
        if r.error_code == 0:
            break
        time.sleep(0.1)
    for _ in range(100):
        r = w.call(22, 4, InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60000))
        if r.error_code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS):
            assert r.error_code == 0
            return r.producer_id, r.producer_epoch
        time.sleep(0.1)
    raise AssertionError("InitProducerId kept answering a retriable error")


def _batch(pid: int, epoch: int, n: int, sequence: int) -> bytes:
    return bytes(build_batch([Record(value=b"v%d" % i) for i in range(n)], producer_id=pid, producer_epoch=epoch,
                             base_sequence=sequence, is_transactional=True))


def _produce(w: KafkaWire, version: int, topic: str, batches: dict[int, bytes], txn_id: str = TXN_ID):
    r = w.call(0, version, ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=i, records=b)
                                                     for i, b in batches.items()])]))
    return {p.index: p for t in r.responses for p in t.partition_responses}


def _add(w: KafkaWire, topic: str, partitions: list[int], pid: int, epoch: int, txn_id: str = TXN_ID) -> None:
    r = w.call(24, 3, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=partitions)]))
    assert all(p.partition_error_code == 0 for t in r.results_by_topic_v3_and_below for p in t.results_by_partition)


def _leo(b: EmbeddedBroker, topic: str, index: int) -> int:
    return b.broker.replicas.get(topic, index).log.log_end_offset


def _end(w: KafkaWire, pid: int, epoch: int, commit: bool, txn_id: str = TXN_ID) -> None:
    for _ in range(100):
        r = w.call(26, 3, EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                        committed=commit))
        if r.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
            assert r.error_code == 0
            return
        time.sleep(0.1)


def test_a_partition_not_in_the_transaction_is_refused_until_added(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path / "d") as b, KafkaWire(b.port) as w:
        _create(w, "t")
        pid, epoch = _init(w)
        verifier = b.broker.txns.verifier

        got = _produce(w, 10, "t", {0: _batch(pid, epoch, 2, 0)})[0]
        assert (got.error_code, got.error_message) == (ErrorCode.INVALID_TXN_STATE,
                                                      "Partition was not added to the transaction")
        got = _produce(w, 11, "t", {0: _batch(pid, epoch, 2, 0)})[0]
        assert (got.error_code, got.error_message) == (ErrorCode.TRANSACTION_ABORTABLE, None)
        assert _leo(b, "t", 0) == 0  # nothing appended
        asked = verifier.requests_sent
        assert asked == 2

        _add(w, "t", [0, 1], pid, epoch)
        # both partitions in one request: one question for both
        got = _produce(w, 11, "t", {0: _batch(pid, epoch, 2, 0), 1: _batch(pid, epoch, 1, 0)})
        assert {i: (p.error_code, p.base_offset) for i, p in got.items()} == {0: (0, 0), 1: (0, 0)}
        assert verifier.requests_sent == asked + 1
        # the transaction is open on both now: the next batches are not asked about
        got = _produce(w, 11, "t", {0: _batch(pid, epoch, 1, 2), 1: _batch(pid, epoch, 1, 1)})
        assert {i: (p.error_code, p.base_offset) for i, p in got.items()} == {0: (0, 2), 1: (0, 1)}
        assert verifier.requests_sent == asked + 1
        _end(w, pid, epoch, commit=True)

        # a stale epoch: the coordinator's PRODUCER_FENCED reaches the producer as INVALID_PRODUCER_EPOCH
        pid2, epoch2 = _init(w)
        assert (pid2, epoch2) == (pid, epoch + 1)
        got = _produce(w, 11, "t", {0: _batch(pid, epoch, 1, 3)})[0]
        assert got.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert _leo(b, "t", 0) == 4  # three records and the COMMIT marker


def test_no_coordinator_alive_is_not_enough_replicas(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path / "d") as b, KafkaWire(b.port) as w:
        _create(w, "t", 1)
        pid, epoch = _init(w)
        txns = b.broker.txns
        loop = b._loop

        async def no_coordinator():
            txns.verifier.coordinator_node = lambda txn_id: None
        asyncio.run_coroutine_threadsafe(no_coordinator(), loop).result(10)
        got = _produce(w, 9, "t", {0: _batch(pid, epoch, 1, 0)})[0]
        assert got.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert got.error_message == ("Unable to verify the partition has been added to the transaction. "
                                     "Underlying error: COORDINATOR_NOT_AVAILABLE")
        assert _leo(b, "t", 0) == 0


def test_verification_off_appends_a_hanging_transaction_that_the_admin_client_aborts(tmp_path):
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import AbortTransactionSpec

    with EmbeddedBroker(data_dir=tmp_path / "d",
                        overrides={"transaction.partition.verification.enable": False}) as b, KafkaWire(b.port) as w:
        _create(w, "t", 1)
        pid, epoch = _init(w)
        got = _produce(w, 11, "t", {0: _batch(pid, epoch, 2, 0)})[0]
        assert (got.error_code, got.base_offset) == (0, 0)  # appended, though never added to the transaction
        assert b.broker.txns.verifier.requests_sent == 0
        log = b.broker.replicas.get("t", 0).log
        assert log.has_ongoing_transaction(pid)

        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{b.port}", request_timeout_ms=10000)
        try:
            tp = TopicPartition("t", 0)
            state = admin.describe_producers([tp])[tp]
            open_here = [p for p in state.active_producers if p.current_transaction_start_offset >= 0]
            assert [(p.producer_id, p.producer_epoch, p.current_transaction_start_offset) for p in open_here] == [
                (pid, epoch, 0)]
            # the coordinator has no transaction with this partition: hanging. kafka-python's
            # find_hanging_transactions looks only at the coordinators' side, so it cannot see this one
            assert admin.find_hanging_transactions(max_transaction_timeout_ms=-300000) == []
            admin.abort_transaction(AbortTransactionSpec(tp, pid, epoch))
        finally:
            admin.close()
        assert not log.has_ongoing_transaction(pid)
        assert log.last_stable_offset == log.log_end_offset == 3  # the records and the ABORT marker
