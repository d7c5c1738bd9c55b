"""What real clients observe of transactions (issue 28), on one broker at Kafka's default timers: confluent-kafka
transactional producers and read_committed consumers (kafka-python's where it reports something librdkafka does
not). Interleaved transactions and plain records on one partition; transactions across partitions and fetch
boundaries; the last stable offset as watermark, position, committed offset and lag while a transaction is open
and after it ends (control records take offsets); a fetch of only aborted data; empty transactions; a transaction
timeout above ``transaction.max.timeout.ms``; DeleteRecords during an open transaction. Then the KIP-890
verification: a transactional Produce to a partition never added to the transaction is refused, and with
``transaction.partition.verification.enable=false`` the same write hangs a transaction that the admin client
finds and aborts."""

from __future__ import annotations

import json
import time

import pytest

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.errors import ErrorCode
from tests.harness import wait_until
from tests.kafka_wire import KafkaWire
from tests.txn_clients import (
    expected, produce_confluent, read_confluent, spread, txn_batch, wire_add_partitions, wire_coordinator,
    wire_end_txn, wire_init, wire_latest, wire_produce,
)


def _create(bootstrap: str, topic: str, partitions: int = 1, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(15)


def _txn_producer(bootstrap: str, txn_id: str, **config) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 60000,
                  **config})
    p.init_transactions(30)
    return p


def _send(p: Producer, topic: str, value: bytes, partition: int = 0) -> None:
    """One record, delivered before the next is sent: its offset follows the records sent before it."""
    p.produce(topic, value, partition=partition)
    assert p.flush(15) == 0


class Reader:
    """A confluent-kafka consumer on partition 0 of a topic from offset 0, keeping everything it was given:
    messages, error events (a size error would be one) and librdkafka's latest statistics of the partition."""

    def __init__(self, bootstrap: str, topic: str, isolation: str = "read_committed", assign: bool = True,
                 start: int = 0, **config) -> None:
        self.tp = TopicPartition(topic, 0)
        self.stats: dict = {}
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-{isolation}",
                           "enable.auto.commit": False, "isolation.level": isolation, "fetch.wait.max.ms": 100,
                           "auto.offset.reset": "earliest", "statistics.interval.ms": 100,
                           "stats_cb": self._on_stats, **config})
        if assign:
            self.c.assign([TopicPartition(topic, 0, start)])
        self.values: list[bytes] = []
        self.offsets: list[int] = []
        self.errors: list[KafkaError] = []

    def poll_until_position(self, position: int, timeout: float = 20.0, quiet: float = 0.5) -> None:
        """Poll until the consumer's position is ``position``, then ``quiet`` s more (nothing else may come)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.position() != position:
            self._poll()
        assert self.position() == position, (self.position(), position, self.values, self.errors)
        end = time.monotonic() + quiet
        while time.monotonic() < end:
            self._poll()

    def _poll(self) -> None:
        m = self.c.poll(0.1)
        if m is None:
            return
        if m.error() is not None:
            if m.error().code() != KafkaError._PARTITION_EOF:
                self.errors.append(m.error())
            return
        self.values.append(m.value())
        self.offsets.append(m.offset())

    def _on_stats(self, text: str) -> None:
        partition = json.loads(text).get("topics", {}).get(self.tp.topic, {}).get("partitions", {}).get("0")
        if partition:
            self.stats = partition

    def wait_stats(self, **want: int) -> None:
        """Poll until librdkafka's statistics of the partition show ``want`` (``hi_offset``, ``ls_offset``,
        ``consumer_lag``: the last stable offset, read_committed, or high watermark less the committed offset)."""
        def shown() -> bool:
            self._poll()
            return {k: self.stats.get(k) for k in want} == want
        try:
            wait_until(shown, 15, 0, f"librdkafka statistics {want}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; they show {self.stats}") from None

    def position(self) -> int:
        return self.c.position([self.tp])[0].offset

    def watermarks(self) -> tuple[int, int]:
        """(low, high) from the broker (ListOffsets at the consumer's isolation level)."""
        return self.c.get_watermark_offsets(self.tp, timeout=10, cached=False)

    def wait_watermarks(self, want: tuple[int, int], what: str = "the markers") -> None:
        """EndTxn is answered once the coordinator has logged PrepareCommit/PrepareAbort; the markers (and with
        them the last stable offset) follow."""
        wait_until(lambda: self.watermarks() == want, 15, 0.05, f"{what}: watermarks {want}")

    def lag(self) -> int:
        return self.watermarks()[1] - self.position()

    def commit(self) -> int:
        """Commit the position; returns the committed offset as the group coordinator has it."""
        self.c.commit(asynchronous=False)
        return self.c.committed([self.tp], timeout=10)[0].offset

    def close(self) -> None:
        self.c.close()


def test_two_producers_interleaved_on_one_partition_with_plain_records(broker, topic_name):
    """Two transactional producers write to one partition in turns, a plain producer between them; the last
    stable offset stops at the first open transaction's first record; read_committed gets the committed and the
    plain records in offset order, read_uncommitted every record."""
    bootstrap = f"127.0.0.1:{broker.port}"
    topic = topic_name("two")
    _create(bootstrap, topic)
    a, b = _txn_producer(bootstrap, f"{topic}-a"), _txn_producer(bootstrap, f"{topic}-b")
    plain = Producer({"bootstrap.servers": bootstrap})
    reader = Reader(bootstrap, topic)
    try:
        a.begin_transaction()
        b.begin_transaction()
        for p, v in [(a, b"a1"), (b, b"b1"), (plain, b"p1"), (a, b"a2"), (b, b"b2")]:  # offsets 0..4
            _send(p, topic, v)
        assert reader.watermarks() == (0, 0)  # a's first record at 0 is open
        a.commit_transaction(30)  # marker at 5
        reader.wait_watermarks((0, 1))  # b's first record at 1 is open
        _send(plain, topic, b"p2")  # 6
        b.abort_transaction(30)  # marker at 7
        reader.wait_watermarks((0, 8))
        a.begin_transaction()
        b.begin_transaction()
        for p, v in [(a, b"a3"), (b, b"b3"), (plain, b"p3")]:  # 8, 9, 10
            _send(p, topic, v)
        assert reader.watermarks() == (0, 8)
        a.abort_transaction(30)  # 11
        reader.wait_watermarks((0, 9))
        b.commit_transaction(30)  # 12
        reader.wait_watermarks((0, 13))
        reader.poll_until_position(13)
        assert list(zip(reader.offsets, reader.values)) == [(0, b"a1"), (2, b"p1"), (3, b"a2"), (6, b"p2"),
                                                            (9, b"b3"), (10, b"p3")]
        assert reader.errors == []
        everything = read_confluent(bootstrap, topic, 1, "read_uncommitted", 9)[0]
        assert everything == [b"a1", b"b1", b"p1", b"a2", b"b2", b"p2", b"a3", b"b3", b"p3"]
    finally:
        reader.close()


def test_transactions_across_partitions_and_fetch_boundaries(broker, topic_name):
    """Transactions of 90 records over 3 partitions in batches of ~5 records; read_committed fetches of at most
    1 KB a partition and 2 KB a request end inside transactions (aborted and committed) many times and still give
    exactly the committed records, in order per partition."""
    bootstrap = f"127.0.0.1:{broker.port}"
    topic = topic_name("fetch")
    _create(bootstrap, topic, partitions=3)
    txns = [spread("commit" if n % 3 != 1 else "abort", [b"t%02d-%03d-" % (n, i) + b"v" * 100 for i in range(90)], 3)
            for n in range(9)]
    produce_confluent(bootstrap, topic, f"{topic}-p", txns, batch_bytes=600)
    want = expected(txns, 3)
    small = {"fetch.max.bytes": 2048, "max.partition.fetch.bytes": 1024, "message.max.bytes": 1000}
    got = read_confluent(bootstrap, topic, 3, "read_committed", sum(map(len, want.values())), config=small)
    assert got == want
    everything = expected(txns, 3, ("commit", "abort"))
    assert read_confluent(bootstrap, topic, 3, "read_uncommitted", sum(map(len, everything.values())),
                          config=small) == everything


def test_the_last_stable_offset_as_watermark_position_committed_offset_and_lag(broker, topic_name):
    """While a transaction is open a read_committed consumer's high watermark is the last stable offset, below
    the log's; its position stops there, its committed offset and lag follow. On commit or abort all move to the
    log end, which counts the marker: after a log ending in an aborted transaction the position is past the
    marker and the lag 0. kafka-python: ``end_offsets`` under read_committed is the last stable offset, its
    ``highwater`` (from Fetch) the high watermark."""
    from kafka import KafkaConsumer, TopicPartition as KTP

    bootstrap = f"127.0.0.1:{broker.port}"
    topic = topic_name("lso")
    _create(bootstrap, topic)
    plain = Producer({"bootstrap.servers": bootstrap})
    txn = _txn_producer(bootstrap, f"{topic}-t")
    committed, uncommitted = Reader(bootstrap, topic), Reader(bootstrap, topic, "read_uncommitted")
    kp = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=100,
                       isolation_level="read_committed")
    ktp = KTP(topic, 0)
    kp.assign([ktp])
    kp.seek(ktp, 0)

    def kafka_python_reads(position: int) -> list[bytes]:
        out: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and kp.position(ktp) != position:
            out += [m.value for ms in kp.poll(timeout_ms=100).values() for m in ms]
        assert kp.position(ktp) == position
        return out
    try:
        for v in (b"p0", b"p1"):
            _send(plain, topic, v)  # 0, 1
        txn.begin_transaction()
        for v in (b"t1a", b"t1b"):
            _send(txn, topic, v)  # 2, 3
        assert committed.watermarks() == (0, 2) and uncommitted.watermarks() == (0, 4)
        committed.poll_until_position(2)
        assert committed.values == [b"p0", b"p1"]
        assert (committed.lag(), committed.commit()) == (0, 2)
        committed.wait_stats(hi_offset=4, ls_offset=2, consumer_lag=0)
        assert kp.end_offsets([ktp])[ktp] == 2
        assert kafka_python_reads(2) == [b"p0", b"p1"]
        assert kp.highwater(ktp) == 4

        txn.commit_transaction(30)  # the marker at 4
        committed.wait_watermarks((0, 5))
        assert uncommitted.watermarks() == (0, 5)
        committed.poll_until_position(5)
        assert committed.values[2:] == [b"t1a", b"t1b"] and committed.offsets[2:] == [2, 3]
        assert (committed.lag(), committed.commit()) == (0, 5)
        committed.wait_stats(hi_offset=5, ls_offset=5, consumer_lag=0)
        assert kafka_python_reads(5) == [b"t1a", b"t1b"]

        txn.begin_transaction()
        for v in (b"t2a", b"t2b"):
            _send(txn, topic, v)  # 5, 6
        assert committed.watermarks() == (0, 5) and uncommitted.watermarks() == (0, 7)
        committed.poll_until_position(5)
        committed.wait_stats(hi_offset=7, ls_offset=5, consumer_lag=0)
        assert kp.end_offsets([ktp])[ktp] == 5
        txn.abort_transaction(30)  # the marker at 7
        committed.wait_watermarks((0, 8))
        committed.poll_until_position(8)  # past the aborted records and the marker, nothing delivered
        assert len(committed.values) == 4 and committed.errors == []
        assert (committed.lag(), committed.commit()) == (0, 8)
        committed.wait_stats(hi_offset=8, ls_offset=8, consumer_lag=0)
        assert kafka_python_reads(8) == [] and kp.end_offsets([ktp])[ktp] == 8
        uncommitted.poll_until_position(8)
        assert uncommitted.values == [b"p0", b"p1", b"t1a", b"t1b", b"t2a", b"t2b"]
        assert uncommitted.lag() == 0
    finally:
        committed.close()
        uncommitted.close()
        kp.close()


@pytest.mark.parametrize("batch_bytes", [700, 8000])
def test_a_fetch_of_only_aborted_data_gives_the_application_nothing_and_no_size_error(broker, topic_name,
                                                                                      batch_bytes):
    """A log of one aborted transaction, ~40 KB in batches of ~700 bytes or ~8 KB (larger than a fetch: the first
    batch is sent whole, KIP-74), read with fetches of at most 1 KB: confluent-kafka and kafka-python
    read_committed consumers get no record and no error, their position reaches the log end past the marker
    (lag 0), and the record committed after it arrives; so does a consumer that starts in the middle of the
    aborted transaction."""
    from kafka import KafkaConsumer, TopicPartition as KTP

    bootstrap = f"127.0.0.1:{broker.port}"
    topic = topic_name("aborted")
    _create(bootstrap, topic)
    txns = [spread("abort", [b"a-%03d-" % i + b"x" * 120 for i in range(300)], 1)]
    produce_confluent(bootstrap, topic, f"{topic}-t", txns, batch_bytes=batch_bytes)
    sizes = [len(b) for b in broker.broker.replicas.get(topic, 0).log.iter_batches(0)]
    assert (max(sizes) > 1024) == (batch_bytes > 1024) and len(sizes) > 4, sizes
    reader = Reader(bootstrap, topic, **{"fetch.max.bytes": 1024, "max.partition.fetch.bytes": 1024,
                                         "message.max.bytes": 1000})
    kp = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=100,
                       isolation_level="read_committed", fetch_max_bytes=1024, max_partition_fetch_bytes=1024)
    ktp = KTP(topic, 0)
    kp.assign([ktp])
    kp.seek(ktp, 0)
    try:
        reader.wait_watermarks((0, 301))
        reader.poll_until_position(301)
        assert (reader.values, reader.errors, reader.lag()) == ([], [], 0)
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and kp.position(ktp) != 301:
            got += [m.value for ms in kp.poll(timeout_ms=100).values() for m in ms]  # a size error would raise
        assert (kp.position(ktp), got) == (301, [])

        produce_confluent(bootstrap, topic, f"{topic}-t", [spread("commit", [b"after"], 1)])  # 301, marker 302
        reader.poll_until_position(303)
        assert (reader.values, reader.offsets, reader.errors) == ([b"after"], [301], [])
        middle = Reader(bootstrap, topic, start=150)
        try:
            middle.poll_until_position(303)
            assert (middle.values, middle.offsets, middle.errors) == ([b"after"], [301], [])
        finally:
            middle.close()
    finally:
        reader.close()
        kp.close()


def test_empty_transactions_commit_and_abort_and_write_nothing(broker, topic_name):
    """A transaction with no record commits and one aborts; neither writes a marker (no partition was in them);
    the transaction after them commits its record."""
    bootstrap = f"127.0.0.1:{broker.port}"
    topic = topic_name("empty")
    _create(bootstrap, topic)
    p = _txn_producer(bootstrap, f"{topic}-t")
    for end in (p.commit_transaction, p.abort_transaction, p.commit_transaction):
        p.begin_transaction()
        end(30)
    p.begin_transaction()
    _send(p, topic, b"only")
    p.commit_transaction(30)
    reader = Reader(bootstrap, topic)
    try:
        reader.wait_watermarks((0, 2))  # the record and its marker
        reader.poll_until_position(2)
        assert reader.values == [b"only"]
    finally:
        reader.close()


def test_a_transaction_timeout_above_the_brokers_maximum_is_a_fatal_init_transactions_error(broker):
    """``transaction.timeout.ms`` 900001 > ``transaction.max.timeout.ms`` (900000): InitProducerId answers
    INVALID_TRANSACTION_TIMEOUT and librdkafka's init_transactions raises it as a fatal error."""
    p = Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "transactional.id": "too-long-timeout",
                  "transaction.timeout.ms": 900001})
    with pytest.raises(KafkaException) as raised:
        p.init_transactions(30)
    err = raised.value.args[0]
    assert err.code() == KafkaError.INVALID_TRANSACTION_TIMEOUT and err.fatal(), err


def test_delete_records_during_an_open_transaction(broker, topic_name):
    """Kafka (UnifiedLog.maybeIncrementLogStartOffset): DeleteRecords may move the log start offset up to the
    high watermark, into an open transaction; the last stable offset is then max(first unstable offset, log
    start). The transaction goes on and commits (read_committed gets its records from the new log start on) or
    aborts (none of them); DeleteRecords to the high watermark (-1) while one is open, too."""
    bootstrap = f"127.0.0.1:{broker.port}"
    topic = topic_name("delete")
    _create(bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    plain = Producer({"bootstrap.servers": bootstrap})
    txn = _txn_producer(bootstrap, f"{topic}-t")
    watch = Reader(bootstrap, topic, assign=False)  # for the watermarks; the reader starts after the first delete
    reader = None

    def delete_to(offset: int) -> int:
        return admin.delete_records([TopicPartition(topic, 0, offset)])[TopicPartition(topic, 0)].result(15) \
            .low_watermark
    try:
        for v in (b"p0", b"p1"):
            _send(plain, topic, v)  # 0, 1
        txn.begin_transaction()
        for v in (b"t1", b"t2", b"t3"):
            _send(txn, topic, v)  # 2, 3, 4
        assert watch.watermarks() == (0, 2)
        assert delete_to(3) == 3  # inside the open transaction
        assert watch.watermarks() == (3, 3)
        reader = Reader(bootstrap, topic)
        _send(txn, topic, b"t4")  # 5
        txn.commit_transaction(30)  # 6
        reader.wait_watermarks((3, 7))
        reader.poll_until_position(7)
        assert list(zip(reader.offsets, reader.values)) == [(3, b"t2"), (4, b"t3"), (5, b"t4")]

        txn.begin_transaction()
        for v in (b"u1", b"u2"):
            _send(txn, topic, v)  # 7, 8
        assert delete_to(8) == 8
        assert reader.watermarks() == (8, 8)
        txn.abort_transaction(30)  # 9
        reader.wait_watermarks((8, 10))
        reader.poll_until_position(10)
        assert len(reader.values) == 3

        txn.begin_transaction()
        _send(txn, topic, b"v1")  # 10
        assert delete_to(-1) == 11  # the high watermark: past the open transaction's only record
        assert reader.watermarks() == (11, 11)
        _send(txn, topic, b"v2")  # 11
        assert reader.watermarks() == (11, 11)
        txn.commit_transaction(30)  # 12
        reader.poll_until_position(13)
        assert list(zip(reader.offsets, reader.values))[3:] == [(11, b"v2")]
        fresh = read_confluent(bootstrap, topic, 1, "read_committed", 1, config={"auto.offset.reset": "earliest"})
        assert fresh == {0: [b"v2"]}
        assert reader.errors == []
    finally:
        watch.close()
        if reader is not None:
            reader.close()


# ---- KIP-890 verification and a hanging transaction --------------------------------------------------------------

def _find_hanging(admin, partitions: list, max_transaction_timeout_ms: int) -> list[tuple]:
    """``kafka-transactions.sh find-hanging`` (TransactionsCommand.FindHangingTransactionsCommand) with
    kafka-python's admin calls: the open transactions the partitions' leaders report (DescribeProducers) older
    than the maximum timeout, whose coordinator does not know them or not with that partition."""
    now = int(time.time() * 1000)
    candidates = [(tp, s) for tp, state in admin.describe_producers(partitions).items()
                  for s in state.active_producers
                  if s.current_transaction_start_offset >= 0 and now - s.last_timestamp > max_transaction_timeout_ms]
    hanging = []
    for tp, s in candidates:
        listed = [t for ts in admin.list_transactions(producer_id_filters=[s.producer_id]).values() for t in ts]
        if not listed:
            hanging.append((tp, s))
            continue
        txn_id = listed[0].transactional_id
        description = admin.describe_transactions([txn_id])[txn_id]
        if (tp.topic, tp.partition) not in {(p.topic, p.partition) for p in description.topic_partitions}:
            hanging.append((tp, s))
    return hanging


def test_a_transactional_produce_to_a_partition_not_in_the_transaction_is_refused(broker, topic_name):
    """KIP-890 part 1 (``transaction.partition.verification.enable`` true, the default): Produce v9 of a
    transactional batch to a partition never added with AddPartitionsToTxn is INVALID_TXN_STATE; nothing is
    appended; the partition added is written."""
    topic = topic_name("verify")
    _create(f"127.0.0.1:{broker.port}", topic, partitions=2)
    txn_id = f"{topic}-t"
    with KafkaWire(broker.port) as w:
        wire_coordinator(w, txn_id)
        code, pid, epoch = wire_init(w, txn_id)
        assert code == 0
        assert wire_add_partitions(w, txn_id, pid, epoch, topic, [1]) == [0]
        assert wire_produce(w, topic, {0: txn_batch(pid, epoch, [b"unverified"])}, txn_id) == [
            ErrorCode.INVALID_TXN_STATE]
        assert wire_produce(w, topic, {1: txn_batch(pid, epoch, [b"verified"])}, txn_id) == [0]
        assert wire_end_txn(w, txn_id, pid, epoch, commit=True) == 0
        assert broker.broker.replicas.get(topic, 0).log.log_end_offset == 0
        wait_until(lambda: wire_latest(w, topic, 1, read_committed=True) == 2, 15, 0.1, "the commit marker")


def test_without_verification_the_same_write_hangs_a_transaction_the_admin_client_finds_and_aborts(tmp_path):
    """``transaction.partition.verification.enable=false``: the write to the partition never added is appended;
    the transaction ends (EndTxn abort) with a marker only on the partition the coordinator knows, so the other's
    last stable offset stays at the write. The hanging-transaction search (DescribeProducers on the partitions,
    then ListTransactions and DescribeTransactions at the coordinator, with kafka-python's admin client) finds
    it; kafka-python's ``abort_transaction`` (WriteTxnMarkers to the partition leader) ends it; the last stable
    offset moves to the end and read_committed gets none of it.

    kafka-python 3.0.12's own ``find_hanging_transactions`` does not see it: it looks only at transactions the
    coordinators have open for longer than the maximum timeout plus 5 minutes."""
    from kafka.admin import KafkaAdminClient
    from kafka.admin._transactions import AbortTransactionSpec
    from kafka.structs import TopicPartition as KTP

    from broker.testing.embedded import EmbeddedBroker

    max_timeout = 2000  # the search's threshold: an open transaction older than this has outlived any timeout
    overrides = {"transaction.partition.verification.enable": False, "transaction.max.timeout.ms": max_timeout}
    with EmbeddedBroker(data_dir=tmp_path / "d", overrides=overrides) as b, KafkaWire(b.port) as w:
        bootstrap = f"127.0.0.1:{b.port}"
        topic, txn_id = "hang", "hanging-producer"
        _create(bootstrap, topic, partitions=2)
        wire_coordinator(w, txn_id)
        code, pid, epoch = wire_init(w, txn_id, timeout_ms=max_timeout)
        assert code == 0
        assert wire_add_partitions(w, txn_id, pid, epoch, topic, [1]) == [0]
        assert wire_produce(w, topic, {0: txn_batch(pid, epoch, [b"h1", b"h2"]),
                                       1: txn_batch(pid, epoch, [b"k1"])}, txn_id) == [0, 0]
        assert wire_end_txn(w, txn_id, pid, epoch, commit=False) == 0
        wait_until(lambda: wire_latest(w, topic, 1, read_committed=True) == 2, 15, 0.1, "partition 1's marker")
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
        try:
            # the coordinator is done with the transaction (its markers all written): none will come to partition 0
            wait_until(lambda: admin.describe_transactions([txn_id])[txn_id].state.value == "CompleteAbort", 15,
                       0.05, "CompleteAbort")
            assert (wire_latest(w, topic, 0, read_committed=True),
                    wire_latest(w, topic, 0, read_committed=False)) == (0, 2)  # hanging
            partitions = [KTP(topic, 0), KTP(topic, 1)]
            wait_until(lambda: _find_hanging(admin, partitions, max_timeout), 15, 0.2, "the hanging transaction")
            [(tp, state)] = _find_hanging(admin, partitions, max_timeout)
            assert (tp, state.producer_id, state.producer_epoch, state.current_transaction_start_offset) == (
                KTP(topic, 0), pid, epoch, 0)
            assert admin.find_hanging_transactions(max_transaction_timeout_ms=max_timeout) == []  # see the docstring
            admin.abort_transaction(AbortTransactionSpec(tp, state.producer_id, state.producer_epoch,
                                                         state.coordinator_epoch))
            assert (wire_latest(w, topic, 0, read_committed=True), wire_latest(w, topic, 0, read_committed=False)) \
                == (3, 3)
            assert _find_hanging(admin, partitions, 0) == []
        finally:
            admin.close()
        assert read_confluent(bootstrap, topic, 2, "read_committed", 0) == {0: [], 1: []}
