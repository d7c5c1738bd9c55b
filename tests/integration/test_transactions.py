"""Transactions with real clients (issue 28): confluent-kafka, kafka-python and aiokafka transactional producers
commit and abort across partitions; each client's read_committed consumer gets just the committed records, in
order, and a read_uncommitted one everything. The coordinator's answers to bad requests over the wire: Kafka's
error codes, nothing written."""

from __future__ import annotations

import time

import pytest

from protocol.errors import ErrorCode
from protocol.generated.messages import AddPartitionsToTxnRequest, EndTxnRequest
from protocol.generated.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from protocol.record_codec import decode_batch
from tests.harness import wait_until
from tests.kafka_wire import KafkaWire
from tests.txn_clients import (
    PRODUCERS, READERS, expected, read_confluent, run_kafkajs, spread, txn_batch, wire_coordinator, wire_init,
    wire_produce,
)

# the transactions every producer runs, each over both partitions of its topic
TRANSACTIONS = [spread(outcome, values, 2) for outcome, values in [
    ("commit", [b"c1-%d" % i for i in range(5)]), ("abort", [b"a1-%d" % i for i in range(4)]),
    ("commit", [b"c2-%d" % i for i in range(3)]), ("abort", [b"a2-0"]), ("commit", [b"c3-0"])]]
COMMITTED = expected(TRANSACTIONS, 2)
ALL = expected(TRANSACTIONS, 2, ("commit", "abort"))


def _count(per_partition: dict[int, list[bytes]]) -> int:
    return sum(map(len, per_partition.values()))


def _create(bootstrap: str, topic: str, partitions: int = 2) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


@pytest.mark.parametrize("client", list(PRODUCERS))
def test_a_clients_transactions_commit_and_abort_and_read_committed_sees_only_the_committed(broker, topic_name,
                                                                                           client):
    bootstrap = f"127.0.0.1:{broker.port}"
    topic = topic_name(client)
    _create(bootstrap, topic)
    PRODUCERS[client](bootstrap, topic, f"txn-{topic}", TRANSACTIONS)
    read = READERS[client]
    assert read(bootstrap, topic, 2, "read_committed", _count(COMMITTED)) == COMMITTED
    assert read(bootstrap, topic, 2, "read_uncommitted", _count(ALL)) == ALL


def test_bad_transactional_requests_get_kafkas_errors_and_change_nothing(broker, topic_name):
    topic = topic_name("bad")
    bootstrap = f"127.0.0.1:{broker.port}"
    _create(bootstrap, topic)
    txn_id = f"bad-{topic}"
    with KafkaWire(broker.port) as w:
        wire_coordinator(w, txn_id)
        assert wire_init(w, "")[0] == ErrorCode.INVALID_REQUEST
        assert wire_init(w, txn_id, timeout_ms=900001)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert wire_init(w, txn_id, timeout_ms=0)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        code, pid, epoch = wire_init(w, txn_id)
        assert code == 0 and pid >= 0

        # EndTxn with nothing begun: INVALID_TXN_STATE; a wrong producer id: INVALID_PRODUCER_ID_MAPPING
        end = w.call(26, 3, EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                          committed=True))
        assert end.error_code == ErrorCode.INVALID_TXN_STATE
        end = w.call(26, 3, EndTxnRequest(transactional_id=txn_id, producer_id=pid + 1000, producer_epoch=epoch,
                                          committed=True))
        assert end.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING

        # an unknown topic in AddPartitionsToTxn: UNKNOWN_TOPIC_OR_PARTITION, the others not attempted
        add = w.call(24, 3, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=[0]),
                                 AddPartitionsToTxnTopic(name="no-such-topic", partitions=[0])]))
        codes = {(t.name, p.partition_index): p.partition_error_code for t in add.results_by_topic_v3_and_below
                 for p in t.results_by_partition}
        assert codes == {(topic, 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
                         ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

        # Produce: a transactional batch without a transactional id; batches of two producers in one request
        assert wire_produce(w, topic, {0: txn_batch(pid, epoch, [b"x"])}, None) == [
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
        assert wire_produce(w, topic, {0: txn_batch(pid, epoch, [b"x"]), 1: txn_batch(pid + 1, 0, [b"y"])},
                        txn_id) == [ErrorCode.INVALID_PRODUCER_ID_MAPPING] * 2

        # a second InitProducerId bumps the epoch: the old epoch is fenced (PRODUCER_FENCED from v4 on)
        code, pid2, epoch2 = wire_init(w, txn_id)
        assert (code, pid2, epoch2) == (0, pid, epoch + 1)
        add = w.call(24, 3, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=[0])]))
        assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == \
            ErrorCode.PRODUCER_FENCED
        end = w.call(26, 1, EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                          committed=False))
        assert end.error_code == ErrorCode.INVALID_PRODUCER_EPOCH  # below v2: no PRODUCER_FENCED
    log = broker.broker.replicas.get(topic, 0).log
    assert log.log_end_offset == 0  # nothing was appended


def test_a_failed_acks_0_transactional_produce_closes_the_connection_and_appends_nothing(broker, topic_name):
    """KafkaApis.handleProduceRequest never answers acks=0: a partition error (the coordinator's verification of an
    unknown producer id, of a partition not added to the transaction) closes the connection in the response callback,
    and batches of two producer ids (ReplicaManager's InvalidPidMappingException) close it too, acks=0 having no
    error response. Nothing is appended, and the next connection is served."""
    from protocol.generated.messages import ProduceRequest
    from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
    from tests.txn_clients import wire_add_partitions

    topic = topic_name("acks0")
    _create(f"127.0.0.1:{broker.port}", topic)
    txn_id = f"acks0-{topic}"
    with KafkaWire(broker.port) as w:
        wire_coordinator(w, txn_id)
        code, pid, epoch = wire_init(w, txn_id)
        assert code == 0
    for batches in ({0: txn_batch(pid + 1000, 0, [b"unknown"])},  # verification: no such producer
                    {0: txn_batch(pid, epoch, [b"not-added"])},  # verification: not in the transaction
                    {0: txn_batch(pid, epoch, [b"x"]), 1: txn_batch(pid + 1, 0, [b"y"])}):  # two producer ids
        with KafkaWire(broker.port) as w:
            w.send(0, 9, ProduceRequest(transactional_id=txn_id, acks=0, timeout_ms=5000, topic_data=[
                TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=i, records=b)
                                                             for i, b in batches.items()])]))
            assert w.recv_frame() is None  # closed, no answer
    logs = [broker.broker.replicas.get(topic, i).log for i in (0, 1)]
    assert [log.log_end_offset for log in logs] == [0, 0]
    with KafkaWire(broker.port) as w:  # the next connection is served
        assert wire_add_partitions(w, txn_id, pid, epoch, topic, [0]) == [0]
        assert wire_produce(w, topic, {0: txn_batch(pid, epoch, [b"added"])}, txn_id) == [0]
    assert [log.log_end_offset for log in logs] == [1, 0]


def test_a_producer_that_vanishes_mid_transaction_is_aborted_at_its_timeout_and_the_lso_moves(tmp_path):
    """A producer begins a transaction, writes and disappears (transaction.timeout.ms 5000, the issue's figure):
    the coordinator aborts it (checked every transaction.abort.timed.out.transaction.cleanup.interval.ms) with an
    epoch bump, the
    ABORT marker reaches the partition, and the last stable offset moves to the end; the producer's old epoch is
    fenced."""
    from broker import EmbeddedBroker
    from protocol.generated.messages import ListOffsetsRequest
    from protocol.generated.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic

    overrides = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}
    with EmbeddedBroker(data_dir=tmp_path / "d", overrides=overrides) as b, KafkaWire(b.port) as w:
        topic, txn_id = "vanished", "vanishing-producer"
        _create(f"127.0.0.1:{b.port}", topic, partitions=1)
        wire_coordinator(w, txn_id)
        code, pid, epoch = wire_init(w, txn_id, timeout_ms=5000)
        assert code == 0
        add = w.call(24, 3, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=[0])]))
        assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        assert wire_produce(w, topic, {0: txn_batch(pid, epoch, [b"a", b"b", b"c"])}, txn_id) == [0]

        def latest(isolation: int) -> int:
            r = w.call(2, 5, ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
                ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
            return r.topics[0].partitions[0].offset

        assert (latest(0), latest(1)) == (3, 0)  # open: read_committed stops before it
        started = time.monotonic()
        wait_until(lambda: latest(1) == 4, 30, 0.1, "the timed-out transaction aborted")
        aborted_after = time.monotonic() - started
        assert latest(0) == 4  # the ABORT marker
        batches = list(b.broker.replicas.get(topic, 0).log.iter_batches(0))
        marker = decode_batch(batches[-1])[0]
        # the fence bumps the epoch; at transaction.version 2 the coordinator's abort bumps it again, as Kafka's
        # abortTimedOutTransactions ends it with the server's transaction version
        from cluster.controller.controller import BOOTSTRAP_FEATURES
        bumps = 2 if BOOTSTRAP_FEATURES["transaction.version"] >= 2 else 1
        assert marker.is_control and marker.producer_id == pid and marker.producer_epoch == epoch + bumps
        end = w.call(26, 3, EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                          committed=True))
        assert end.error_code == ErrorCode.PRODUCER_FENCED
        print(f"\nLSO moved {aborted_after:.1f} s after the write (timeout 5 s, checked every 0.5 s)")


def test_the_admin_client_lists_and_describes_transactions(broker, topic_name):
    """kafka-python's admin client (KIP-664): ListTransactions and DescribeTransactions while a confluent-kafka
    transaction is open and after its commit; an unknown id is TRANSACTIONAL_ID_NOT_FOUND."""
    from confluent_kafka import Producer
    from kafka.admin import KafkaAdminClient
    from kafka.errors import TransactionalIdNotFoundError

    bootstrap = f"127.0.0.1:{broker.port}"
    topic = topic_name("admin")
    _create(bootstrap, topic)
    txn_id = f"txn-{topic}"
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 20000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"v", partition=1)
    p.flush(15)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        listed = [t for ts in admin.list_transactions().values() for t in ts if t.transactional_id == txn_id]
        assert [t.state.value for t in listed] == ["Ongoing"]
        described = admin.describe_transactions([txn_id])[txn_id]
        assert (described.state.value, described.producer_id, described.transaction_timeout_ms) == (
            "Ongoing", listed[0].producer_id, 20000)
        assert {(tp.topic, tp.partition) for tp in described.topic_partitions} == {(topic, 1)}
        assert admin.find_hanging_transactions() == []  # its partition is in the transaction
        p.commit_transaction(30)  # answered at PrepareCommit (as Kafka's EndTxn); CompleteCommit after the markers
        wait_until(lambda: admin.describe_transactions([txn_id])[txn_id].state.value == "CompleteCommit", 15, 0.05,
                   "CompleteCommit")
        described = admin.describe_transactions([txn_id])[txn_id]
        assert described.state.value == "CompleteCommit" and not described.topic_partitions
        with pytest.raises(TransactionalIdNotFoundError):
            admin.describe_transactions([f"unknown-{topic}"])
    finally:
        admin.close()


def test_kafkajs_transactions_and_its_read_committed_consumer(broker, kafkajs_dir, topic_name):
    """KafkaJS' transactional producer (commit and abort) and its consumer (read_committed by default, in a
    consumer group) get just the committed records, in order per partition; confluent-kafka reads the same."""
    bootstrap = f"127.0.0.1:{broker.port}"
    topic = topic_name("kafkajs")
    _create(bootstrap, topic)
    read = run_kafkajs(kafkajs_dir, bootstrap, topic, f"txn-{topic}", TRANSACTIONS, 2, _count(COMMITTED))
    assert read == COMMITTED
    assert read_confluent(bootstrap, topic, 2, "read_committed", _count(COMMITTED)) == COMMITTED


def test_repeated_short_init_transactions_timeouts_end_in_a_success(tmp_path):
    """On a fresh node, init_transactions with a short timeout may run out while ``__transaction_state`` is created
    and loaded; calling it again resumes (librdkafka keeps the pending InitProducerId) and ends in a success, and
    the transaction after it commits."""
    from confluent_kafka import KafkaException, Producer

    from broker import EmbeddedBroker

    with EmbeddedBroker(data_dir=tmp_path / "d") as b:
        bootstrap = f"127.0.0.1:{b.port}"
        _create(bootstrap, "short-init", partitions=1)
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "short-init"})
        timeouts = 0
        for _ in range(200):
            try:
                p.init_transactions(0.05)
                break
            except KafkaException as exc:
                assert exc.args[0].retriable(), exc
                timeouts += 1
        else:
            raise AssertionError("init_transactions never succeeded")
        p.begin_transaction()
        p.produce("short-init", b"after-init", partition=0)
        p.commit_transaction(30)
        assert read_confluent(bootstrap, "short-init", 1, "read_committed", 1)[0] == [b"after-init"]
        print(f"\ninit_transactions(0.05 s) timed out {timeouts} time(s) before it succeeded")
