"""Transactions with real clients (issue 28): confluent-kafka, kafka-python and aiokafka transactional producers
commit and abort across partitions; each client's read_committed consumer gets just the committed records, in
order, and a read_uncommitted one everything. The coordinator's answers to bad requests over the wire: Kafka's
error codes, nothing written."""

from __future__ import annotations

import asyncio
import time

import pytest

from protocol.errors import ErrorCode
from protocol.generated.messages import (
    AddPartitionsToTxnRequest, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest, ProduceRequest,
)
from protocol.generated.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
from protocol.record_codec import Record, build_batch, decode_batch
from tests.harness import wait_until
from tests.kafka_wire import KafkaWire

# (outcome, values): the transactions every producer runs, each over both partitions of its topic
TRANSACTIONS = [("commit", [b"c1-%d" % i for i in range(5)]), ("abort", [b"a1-%d" % i for i in range(4)]),
                ("commit", [b"c2-%d" % i for i in range(3)]), ("abort", [b"a2-0"]), ("commit", [b"c3-0"])]
COMMITTED = [v for outcome, vs in TRANSACTIONS if outcome == "commit" for v in vs]
ALL = [v for _, vs in TRANSACTIONS for v in vs]


def _create(bootstrap: str, topic: str, partitions: int = 2) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def _produce_confluent(bootstrap: str, topic: str, txn_id: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 20000})
    p.init_transactions(30)
    for outcome, values in TRANSACTIONS:
        p.begin_transaction()
        for i, v in enumerate(values):
            p.produce(topic, v, partition=i % 2)
        p.flush(15)
        (p.commit_transaction if outcome == "commit" else p.abort_transaction)(30)


def _produce_kafka_python(bootstrap: str, topic: str, txn_id: str) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, transaction_timeout_ms=20000,
                      request_timeout_ms=15000)
    try:
        p.init_transactions()
        for outcome, values in TRANSACTIONS:
            p.begin_transaction()
            for i, v in enumerate(values):
                p.send(topic, v, partition=i % 2)
            p.flush(15)
            (p.commit_transaction if outcome == "commit" else p.abort_transaction)()
    finally:
        p.close(10)


def _produce_aiokafka(bootstrap: str, topic: str, txn_id: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, transaction_timeout_ms=20000)
        await p.start()
        try:
            for outcome, values in TRANSACTIONS:
                await p.begin_transaction()
                for i, v in enumerate(values):
                    await p.send_and_wait(topic, v, partition=i % 2)
                if outcome == "commit":
                    await p.commit_transaction()
                else:
                    await p.abort_transaction()
        finally:
            await p.stop()
    asyncio.run(run())


def _read_confluent(bootstrap: str, topic: str, isolation: str, n: int) -> dict[int, list[bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{topic}-{isolation}", "enable.auto.commit": False,
                  "isolation.level": isolation, "fetch.wait.max.ms": 100})
    out: dict[int, list[bytes]] = {0: [], 1: []}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and sum(map(len, out.values())) < n:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                out[m.partition()].append(m.value())
        end = time.monotonic() + 1  # nothing more arrives
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out[m.partition()].append(m.value())
        return out
    finally:
        c.close()


def _read_kafka_python(bootstrap: str, topic: str, isolation: str, n: int) -> dict[int, list[bytes]]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=100,
                      request_timeout_ms=15000, isolation_level=isolation)
    out: dict[int, list[bytes]] = {0: [], 1: []}
    try:
        tps = [TopicPartition(topic, p) for p in (0, 1)]
        c.assign(tps)
        c.seek_to_beginning()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and sum(map(len, out.values())) < n:
            for tp, msgs in c.poll(timeout_ms=300).items():
                out[tp.partition] += [m.value for m in msgs]
        return out
    finally:
        c.close()


def _read_aiokafka(bootstrap: str, topic: str, isolation: str, n: int) -> dict[int, list[bytes]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation,
                             fetch_max_wait_ms=100)
        await c.start()
        out: dict[int, list[bytes]] = {0: [], 1: []}
        try:
            c.assign([TopicPartition(topic, p) for p in (0, 1)])
            await c.seek_to_beginning()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and sum(map(len, out.values())) < n:
                for tp, msgs in (await c.getmany(timeout_ms=300)).items():
                    out[tp.partition] += [m.value for m in msgs]
            return out
        finally:
            await c.stop()
    return asyncio.run(run())


def _expected(values: list[bytes]) -> dict[int, list[bytes]]:
    """Per partition, in order: each transaction's i-th value went to partition i % 2."""
    out: dict[int, list[bytes]] = {0: [], 1: []}
    for _, vs in TRANSACTIONS:
        for i, v in enumerate(vs):
            if v in values:
                out[i % 2].append(v)
    return out


PRODUCERS = {"confluent-kafka": _produce_confluent, "kafka-python": _produce_kafka_python,
             "aiokafka": _produce_aiokafka}
READERS = {"confluent-kafka": _read_confluent, "kafka-python": _read_kafka_python, "aiokafka": _read_aiokafka}


@pytest.mark.parametrize("client", list(PRODUCERS))
def test_a_clients_transactions_commit_and_abort_and_read_committed_sees_only_the_committed(broker, topic_name,
                                                                                           client):
    bootstrap = f"127.0.0.1:{broker.port}"
    topic = topic_name(client)
    _create(bootstrap, topic)
    PRODUCERS[client](bootstrap, topic, f"txn-{topic}")
    read = READERS[client]
    assert read(bootstrap, topic, "read_committed", len(COMMITTED)) == _expected(COMMITTED)
    assert read(bootstrap, topic, "read_uncommitted", len(ALL)) == _expected(ALL)


def _coordinator(w: KafkaWire, txn_id: str) -> None:
    for _ in range(100):  # __transaction_state is created on first use
        r = w.call(10, 3, FindCoordinatorRequest(key=txn_id, key_type=1))
        if r.error_code == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"no coordinator for {txn_id}: {r}")


def _init(w: KafkaWire, txn_id: str, timeout_ms: int = 10000, version: int = 4) -> tuple[int, int, int]:
    for _ in range(100):
        r = w.call(22, version, InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=timeout_ms))
        if r.error_code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS):
            return r.error_code, r.producer_id, r.producer_epoch
        time.sleep(0.1)
    raise AssertionError("InitProducerId kept answering a retriable error")


def _txn_batch(pid: int, epoch: int, values: list[bytes], sequence: int = 0) -> bytes:
    return bytes(build_batch([Record(value=v) for v in values], producer_id=pid, producer_epoch=epoch,
                             base_sequence=sequence, is_transactional=True))


def _produce(w: KafkaWire, topic: str, batches: dict[int, bytes], txn_id: str | None):
    r = w.call(0, 9, ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=i, records=b)
                                                     for i, b in batches.items()])]))
    return [p.error_code for t in r.responses for p in t.partition_responses]


def test_bad_transactional_requests_get_kafkas_errors_and_change_nothing(broker, topic_name):
    topic = topic_name("bad")
    bootstrap = f"127.0.0.1:{broker.port}"
    _create(bootstrap, topic)
    txn_id = f"bad-{topic}"
    with KafkaWire(broker.port) as w:
        _coordinator(w, txn_id)
        assert _init(w, "")[0] == ErrorCode.INVALID_REQUEST
        assert _init(w, txn_id, timeout_ms=900001)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert _init(w, txn_id, timeout_ms=0)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        code, pid, epoch = _init(w, txn_id)
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
        assert _produce(w, topic, {0: _txn_batch(pid, epoch, [b"x"])}, None) == [
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
        assert _produce(w, topic, {0: _txn_batch(pid, epoch, [b"x"]), 1: _txn_batch(pid + 1, 0, [b"y"])},
                        txn_id) == [ErrorCode.INVALID_PRODUCER_ID_MAPPING] * 2

        # a second InitProducerId bumps the epoch: the old epoch is fenced (PRODUCER_FENCED from v4 on)
        code, pid2, epoch2 = _init(w, txn_id)
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


def test_a_producer_that_vanishes_mid_transaction_is_aborted_at_its_timeout_and_the_lso_moves(tmp_path):
    """A producer begins a transaction, writes and disappears (transaction.timeout.ms 2000): the coordinator
    aborts it (checked every transaction.abort.timed.out.transaction.cleanup.interval.ms) with an epoch bump, the
    ABORT marker reaches the partition, and the last stable offset moves to the end; the producer's old epoch is
    fenced."""
    from broker import EmbeddedBroker
    from protocol.generated.messages import ListOffsetsRequest
    from protocol.generated.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic

    overrides = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}
    with EmbeddedBroker(data_dir=tmp_path / "d", overrides=overrides) as b, KafkaWire(b.port) as w:
        topic, txn_id = "vanished", "vanishing-producer"
        _create(f"127.0.0.1:{b.port}", topic, partitions=1)
        _coordinator(w, txn_id)
        code, pid, epoch = _init(w, txn_id, timeout_ms=2000)
        assert code == 0
        add = w.call(24, 3, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=[0])]))
        assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        assert _produce(w, topic, {0: _txn_batch(pid, epoch, [b"a", b"b", b"c"])}, txn_id) == [0]

        def latest(isolation: int) -> int:
            r = w.call(2, 5, ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
                ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
            return r.topics[0].partitions[0].offset

        assert (latest(0), latest(1)) == (3, 0)  # open: read_committed stops before it
        started = time.monotonic()
        wait_until(lambda: latest(1) == 4, 15, 0.1, "the timed-out transaction aborted")
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
        print(f"\naborted {aborted_after:.1f} s after the write (timeout 2 s, checked every 0.5 s)")


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
        p.commit_transaction(30)
        # the commit returns with PrepareCommit written; CompleteCommit follows once the markers are
        wait_until(lambda: admin.describe_transactions([txn_id])[txn_id].state.value == "CompleteCommit", 20, 0.05,
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
    import json
    import subprocess

    bootstrap = f"127.0.0.1:{broker.port}"
    topic = topic_name("kafkajs")
    _create(bootstrap, topic)
    job = {"brokers": [bootstrap], "topic": topic, "transactionalId": f"txn-{topic}", "expect": len(COMMITTED),
           "transactions": [{"outcome": o, "values": [v.decode() for v in vs]} for o, vs in TRANSACTIONS]}
    out = subprocess.run(["node", str(kafkajs_dir / "transactions.js")], input=json.dumps(job).encode(),
                         capture_output=True, timeout=90, cwd=kafkajs_dir)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-4000:]
    read = {int(p): [v.encode() for v in vs] for p, vs in json.loads(out.stdout)["read"].items()}
    assert read == _expected(COMMITTED)
    assert _read_confluent(bootstrap, topic, "read_committed", len(COMMITTED)) == _expected(COMMITTED)


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
        assert _read_confluent(bootstrap, "short-init", "read_committed", 1)[0] == [b"after-init"]
        print(f"\ninit_transactions(0.05 s) timed out {timeouts} time(s) before it succeeded")
