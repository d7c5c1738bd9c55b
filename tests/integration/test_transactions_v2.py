"""Transactions V2 (KIP-890 part 2) and the ``transaction.version`` matrix, over the wire (issue 28, item 9).

No client here speaks TV2, so ``tests/kafka_wire.py`` plays the producer as Kafka 4's TransactionManager does once
the finalized ``transaction.version`` is 2: Produce v12 and TxnOffsetCommit v5 without AddPartitionsToTxn /
AddOffsetsToTxn, EndTxn v5 taking the bumped epoch from its answer. The same transactions (commit, abort, commit,
with offsets) run on a broker formatted at each level: 0 and 1 the TV0/1 way, 2 the TV2 way; a read_committed
consumer (confluent-kafka) gets the committed records only, the group's offsets are the committed transactions'.
Then KAFKA-17754 (a delayed EndTxn, held by the wire client) under TV1 and TV2, and Kafka's errors for TV2 requests
where they do not belong."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from broker.cli import format_storage
from broker.quorum.log_dirs import new_cluster_id
from broker.testing.embedded import EmbeddedBroker
from protocol.errors import ErrorCode
from protocol.generated.messages import (
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, ApiVersionsRequest, EndTxnRequest, FindCoordinatorRequest,
    InitProducerIdRequest, OffsetFetchRequest, ProduceRequest, TxnOffsetCommitRequest, WriteTxnMarkersRequest,
)
from protocol.generated.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from protocol.generated.messages.offset_fetch_request import OffsetFetchRequestGroup, OffsetFetchRequestTopics
from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
from protocol.generated.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
)
from protocol.generated.messages.write_txn_markers_request import WritableTxnMarker, WritableTxnMarkerTopic
from protocol.record_codec import decode_batch
from tests.integration.test_transactions import _create
from tests.txn_clients import read_confluent, txn_batch as _txn_batch, wire_coordinator as _coordinator
from tests.harness import wait_until
from tests.kafka_wire import KafkaWire

E = ErrorCode
RETRIABLE = {E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_NOT_AVAILABLE,
             E.NOT_ENOUGH_REPLICAS, E.NOT_COORDINATOR}


class formatted_broker:
    """An embedded broker whose data directory was formatted (``odradek format``) with ``transaction.version``
    at ``level``; stopped on exit, also when the test fails."""

    def __init__(self, data_dir: Path, level: int) -> None:
        self.b = EmbeddedBroker(data_dir=data_dir)
        features = {"metadata.version": 25, "group.version": 1, "transaction.version": level}
        try:
            format_storage(self.b.config, new_cluster_id(), features)
        except BaseException:
            self.b.stop()
            raise

    def __enter__(self) -> EmbeddedBroker:
        return self.b.start()

    def __exit__(self, *exc) -> None:
        self.b.stop()


def _retry(call, what: str):
    """``call()`` until its error code is not a retriable one (bounded: 200 tries, 0.05 s apart)."""
    for _ in range(200):
        r = call()
        code = r if isinstance(r, int) else r.error_code
        if code not in RETRIABLE:
            return r
        time.sleep(0.05)
    raise AssertionError(f"{what} kept answering a retriable error: {r}")


class WireProducer:
    """A transactional producer over the wire, the TV0/1 way (``tv2`` False: AddPartitionsToTxn v3, Produce v9,
    AddOffsetsToTxn + TxnOffsetCommit v3, EndTxn v4) or the TV2 way (Produce v12, TxnOffsetCommit v5, EndTxn v5)."""

    def __init__(self, w: KafkaWire, txn_id: str, topic: str, tv2: bool) -> None:
        self.w, self.txn_id, self.topic, self.tv2 = w, txn_id, topic, tv2
        _coordinator(w, txn_id)
        r = _retry(lambda: w.call(22, 5, InitProducerIdRequest(transactional_id=txn_id,
                                                                 transaction_timeout_ms=30000)), "InitProducerId")
        assert r.error_code == 0, r
        self.pid, self.epoch = r.producer_id, r.producer_epoch
        self.seq = {0: 0, 1: 0}
        self.added: set[int] = set()

    def produce(self, values: list[bytes]) -> None:
        """Value i to partition i % 2, one batch per partition."""
        by_p: dict[int, list[bytes]] = {}
        for i, v in enumerate(values):
            by_p.setdefault(i % 2, []).append(v)
        if not self.tv2 and set(by_p) - self.added:
            add = _retry(lambda: self._add(sorted(set(by_p) - self.added)), "AddPartitionsToTxn")
            assert add == 0, add
            self.added |= set(by_p)
        batches = {p: _txn_batch(self.pid, self.epoch, vs, self.seq[p]) for p, vs in by_p.items()}
        codes = _retry(lambda: self._produce(batches), "Produce")
        assert codes == 0, codes
        for p, vs in by_p.items():
            self.seq[p] += len(vs)

    def _add(self, partitions: list[int]) -> int:
        r = self.w.call(24, 3, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.txn_id, v3_and_below_producer_id=self.pid,
            v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name=self.topic, partitions=partitions)]))
        codes = {p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}
        (code,) = codes
        return code

    def _produce(self, batches: dict[int, bytes]) -> int:
        codes = produce_codes(self.w, 12 if self.tv2 else 9, self.topic, batches, self.txn_id)
        bad = [c for c in codes if c]
        return bad[0] if bad else 0

    def send_offsets(self, group: str, offsets: dict[int, int]) -> None:
        if not self.tv2:
            r = _retry(lambda: self.w.call(25, 3, AddOffsetsToTxnRequest(
                transactional_id=self.txn_id, producer_id=self.pid, producer_epoch=self.epoch, group_id=group)),
                "AddOffsetsToTxn")
            assert r.error_code == 0, r
        version = 5 if self.tv2 else 3

        def commit() -> int:
            r = self.w.call(28, version, TxnOffsetCommitRequest(
                transactional_id=self.txn_id, group_id=group, producer_id=self.pid, producer_epoch=self.epoch,
                generation_id=-1, member_id="", topics=[TxnOffsetCommitRequestTopic(name=self.topic, partitions=[
                    TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="")
                    for p, o in offsets.items()])]))
            codes = {p.error_code for t in r.topics for p in t.partitions}
            bad = [c for c in codes if c]
            return bad[0] if bad else 0
        code = _retry(commit, "TxnOffsetCommit")
        assert code == 0, code

    def end(self, commit: bool) -> None:
        r = _retry(lambda: self.end_request(commit), "EndTxn")
        assert r.error_code == 0, r
        if self.tv2:  # KIP-890 part 2: the epoch is bumped, sequences start again
            assert (r.producer_id, r.producer_epoch) == (self.pid, self.epoch + 1)
            self.pid, self.epoch = r.producer_id, r.producer_epoch
            self.seq = {0: 0, 1: 0}
        self.added = set()

    def end_request(self, commit: bool, epoch: int | None = None):
        return self.w.call(26, 5 if self.tv2 else 4, EndTxnRequest(
            transactional_id=self.txn_id, producer_id=self.pid,
            producer_epoch=self.epoch if epoch is None else epoch, committed=commit))


def produce_codes(w: KafkaWire, version: int, topic: str, batches: dict[int, bytes], txn_id: str | None) -> list:
    r = w.call(0, version, ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=i, records=b)
                                                     for i, b in batches.items()])]))
    return [p.error_code for t in r.responses for p in t.partition_responses]


def committed_offsets(w: KafkaWire, group: str, topic: str) -> dict[int, int]:
    """OffsetFetch v8 with require_stable, retried while a transaction's offsets are pending."""
    def fetch():
        r = w.call(9, 8, OffsetFetchRequest(require_stable=True, groups=[OffsetFetchRequestGroup(
            group_id=group, topics=[OffsetFetchRequestTopics(name=topic, partition_indexes=[0, 1])])]))
        codes = [p.error_code for t in r.groups[0].topics for p in t.partitions]
        r.error_code = E.COORDINATOR_NOT_AVAILABLE if E.UNSTABLE_OFFSET_COMMIT in codes else r.groups[0].error_code
        return r
    r = _retry(fetch, "OffsetFetch")
    return {p.partition_index: p.committed_offset for t in r.groups[0].topics for p in t.partitions}


def markers(b: EmbeddedBroker, topic: str, partition: int) -> list[tuple[int, int]]:
    """The producer epochs of the partition's control batches (the transaction markers), in log order."""
    out = []
    for raw in b.broker.replicas.get(topic, partition).log.iter_batches(0):
        batch = decode_batch(raw)
        if batch[0].is_control:
            out.append(batch[0].producer_epoch)
    return out


def finalized(w: KafkaWire) -> tuple[dict[str, int], dict[str, int], dict[int, int]]:
    """ApiVersions v3: finalized feature levels, supported maxima, and the max version of each API."""
    r = w.call(18, 3, ApiVersionsRequest(client_software_name="wire", client_software_version="1"))
    return ({f.name: f.max_version_level for f in r.finalized_features},
            {f.name: f.max_version for f in r.supported_features}, {a.api_key: a.max_version for a in r.api_keys})


TRANSACTIONS = [(True, [b"c1-%d" % i for i in range(4)], {0: 2, 1: 2}),
                (False, [b"a1-%d" % i for i in range(3)], {0: 9, 1: 9}),
                (True, [b"c2-0", b"c2-1"], {0: 4, 1: 3})]


@pytest.mark.parametrize("level", [0, 1, 2])
def test_the_same_transactions_at_transaction_version(tmp_path, level):
    """init, produce (explicit or implicit add), offsets, commit / abort / commit; read_committed sees the committed
    records only, the group's offsets are the last committed transaction's. At TV2 every EndTxn bumps the epoch and
    each partition's markers carry the bumped epochs; at TV0/1 the epoch stays."""
    with formatted_broker(tmp_path / "d", level) as b, KafkaWire(b.port) as w:
        levels, supported, apis = finalized(w)
        assert levels.get("transaction.version", 0) == level
        assert supported["transaction.version"] == 2
        assert (apis[26], apis[27], apis[28]) == (5, 2, 5) and apis[0] >= 12
        topic, group = "matrix", "matrix-group"
        _create(b.bootstrap, topic)
        p = WireProducer(w, f"matrix-{level}", topic, tv2=level >= 2)
        epoch0 = p.epoch
        for commit, values, offsets in TRANSACTIONS:
            p.produce(values)
            p.send_offsets(group, offsets)
            p.end(commit)
        committed = [v for c, vs, _ in TRANSACTIONS if c for v in vs]
        want = {0: [v for v in committed if int(v.split(b"-")[1]) % 2 == 0],
                1: [v for v in committed if int(v.split(b"-")[1]) % 2 == 1]}
        assert read_confluent(b.bootstrap, topic, 2, "read_committed", len(committed)) == want
        assert committed_offsets(w, group, topic) == {0: 4, 1: 3}
        bumped = [epoch0 + 1, epoch0 + 2, epoch0 + 3] if level >= 2 else [epoch0] * 3
        assert markers(b, topic, 0) == bumped and markers(b, topic, 1) == bumped
        assert p.epoch == (epoch0 + 3 if level >= 2 else epoch0)


def _hold(w: KafkaWire, api_key: int, version: int, body) -> bytes:
    """A request's frame, built now and sent later: a request held up in the network."""
    from protocol.generated.api_keys import APIS
    from protocol.generated.messages import RequestHeader
    spec = APIS[api_key]
    header = RequestHeader(api_key, version, 9999, "held")
    return header.encode(spec.request_header_version(version)) + body.encode(version)


@pytest.mark.parametrize("level", [1, 2])
def test_kafka_17754_a_delayed_end_txn(tmp_path, level):
    """KAFKA-17754: the producer's EndTxn(commit) of transaction 1 is held up; the producer retries it (answered),
    begins transaction 2, writes to it, and the held-up EndTxn finally arrives, then the producer aborts
    transaction 2. TV1: the late commit is taken as transaction 2's (same epoch): it commits records the producer
    aborted, and the producer's abort is refused. TV2: transaction 2 has the bumped epoch: the late EndTxn is
    PRODUCER_FENCED and the abort goes through; read_committed sees transaction 1 only."""
    with formatted_broker(tmp_path / "d", level) as b, KafkaWire(b.port) as w, KafkaWire(b.port) as late:
        topic = "held"
        _create(b.bootstrap, topic)
        p = WireProducer(w, "held-up", topic, tv2=level >= 2)
        p.produce([b"t1-0", b"t1-1"])
        held = _hold(w, 26, 5 if p.tv2 else 4, EndTxnRequest(transactional_id=p.txn_id, producer_id=p.pid,
                                                              producer_epoch=p.epoch, committed=True))
        p.end(True)  # the retry, answered
        p.produce([b"t2-0", b"t2-1"])
        late.send_frame(held)
        answer = late.recv(26, 5 if p.tv2 else 4, 9999)
        abort = _retry(lambda: p.end_request(False), "EndTxn(abort)")
        # what each level should let through; the reader then waits a second more for anything beyond it
        seen = read_confluent(b.bootstrap, topic, 2, "read_committed", 4 if level < 2 else 2)
        if level < 2:
            assert answer.error_code == 0  # transaction 2 committed by transaction 1's EndTxn
            assert abort.error_code == E.INVALID_TXN_STATE
            assert seen == {0: [b"t1-0", b"t2-0"], 1: [b"t1-1", b"t2-1"]}  # the aborted records are read
        else:
            assert answer.error_code == E.PRODUCER_FENCED
            assert abort.error_code == 0 and abort.producer_epoch == p.epoch + 1
            assert seen == {0: [b"t1-0"], 1: [b"t1-1"]}


def test_tv2_requests_where_they_do_not_belong_get_kafkas_errors_and_change_nothing(tmp_path):
    """At TV0 a transactional Produce v12 and a TxnOffsetCommit v5 answer UNSUPPORTED_VERSION (the client should
    not have chosen TV2); at TV2 an EndTxn v5 with a stale or future epoch PRODUCER_FENCED, and a WriteTxnMarkers v2
    marker at TV2 with the transaction's own (not bumped) or a lower epoch INVALID_PRODUCER_EPOCH, and a Produce v12
    of an ended transaction (the epoch before the bump) INVALID_PRODUCER_EPOCH. Nothing is appended."""
    with formatted_broker(tmp_path / "tv0", 0) as b, KafkaWire(b.port) as w:
        topic = "wrong-level"
        _create(b.bootstrap, topic)
        p = WireProducer(w, "tv0-producer", topic, tv2=True)
        codes = produce_codes(w, 12, topic, {0: _txn_batch(p.pid, p.epoch, [b"x"])}, p.txn_id)
        assert codes == [E.UNSUPPORTED_VERSION]
        r = w.call(28, 5, TxnOffsetCommitRequest(
            transactional_id=p.txn_id, group_id="g", producer_id=p.pid, producer_epoch=p.epoch, generation_id=-1,
            member_id="", topics=[TxnOffsetCommitRequestTopic(name=topic, partitions=[
                TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_metadata="")])]))
        assert [q.error_code for t in r.topics for q in t.partitions] == [E.UNSUPPORTED_VERSION]
        assert b.broker.replicas.get(topic, 0).log.log_end_offset == 0
        assert p.end_request(True).error_code == E.INVALID_TXN_STATE  # nothing was begun
    with formatted_broker(tmp_path / "tv2", 2) as b, KafkaWire(b.port) as w:
        topic = "stale"
        _create(b.bootstrap, topic)
        p = WireProducer(w, "tv2-producer", topic, tv2=True)
        p.produce([b"s-0"])
        log = b.broker.replicas.get(topic, 0).log
        end_before = log.log_end_offset
        for epoch in (p.epoch - 1, p.epoch + 1):
            assert p.end_request(True, epoch).error_code == E.PRODUCER_FENCED
        for epoch in (p.epoch - 1, p.epoch):
            r = w.call(27, 2, WriteTxnMarkersRequest(markers=[WritableTxnMarker(
                producer_id=p.pid, producer_epoch=epoch, transaction_result=True, coordinator_epoch=0,
                transaction_version=2, topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])]))
            assert r.markers[0].topics[0].partitions[0].error_code == E.INVALID_PRODUCER_EPOCH
        assert log.log_end_offset == end_before
        assert log.producer_state.first_undecided_offset() == 0  # still open
        p.end(False)  # the producer's own abort still works: its marker follows the answer
        wait_until(lambda: markers(b, topic, 0) == [p.epoch], 20, 0.05, "the abort marker at the bumped epoch")
        # a delayed Produce of the aborted transaction (its epoch): refused by the leader at once (KAFKA-18042)
        end_before = log.log_end_offset
        codes = produce_codes(w, 12, topic, {0: _txn_batch(p.pid, p.epoch - 1, [b"late"], 1)}, p.txn_id)
        assert codes == [E.INVALID_PRODUCER_EPOCH] and log.log_end_offset == end_before


# ---- three nodes: implicit adds and markers across nodes, the coordinator killed ------------------------------

CLUSTER_TOPIC = "v2-out"
ROUNDS = 40 if os.environ.get("ODRADEK_SOAK") == "1" else 6  # transactions; even ones commit, odd ones abort
KILL_EVERY = 8 if os.environ.get("ODRADEK_SOAK") == "1" else 3
CLUSTER_RETRIABLE = RETRIABLE | {E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION, E.REQUEST_TIMED_OUT,
                                 E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.NETWORK_EXCEPTION}


class ClusterWireProducer:
    """The TV2 producer of :class:`WireProducer` against a cluster: Produce v12 to each partition's leader, EndTxn
    v5 to the coordinator of the moment, retried (bounded) on retriable errors and lost connections, as Kafka's
    producer does."""

    def __init__(self, c, txn_id: str) -> None:
        self.c, self.txn_id = c, txn_id
        self.conns: dict[int, KafkaWire] = {}
        r = self._coordinator_call(lambda w: w.call(22, 5, InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout_ms=60000)))
        self.pid, self.epoch = r.producer_id, r.producer_epoch
        self.seq = {0: 0, 1: 0, 2: 0}

    def close(self) -> None:
        for w in self.conns.values():
            w.close()

    def _wire(self, node: int) -> KafkaWire:
        if node not in self.conns:
            self.conns[node] = KafkaWire(self.c.broker_ports[node], timeout=10)
        return self.conns[node]

    def _drop(self, node: int) -> None:
        w = self.conns.pop(node, None)
        if w is not None:
            w.close()

    def _coordinator(self) -> int | None:
        for node in list(self.c.broker_ports):
            try:
                r = self._wire(node).call(10, 3, FindCoordinatorRequest(key=self.txn_id, key_type=1))
            except (OSError, AssertionError):
                self._drop(node)
                continue
            if r.error_code == 0:
                return r.node_id
        return None

    def _coordinator_call(self, call):
        for _ in range(600):  # 0.1 s apart: a minute for a failover
            node = self._coordinator()
            if node is not None:
                try:
                    r = call(self._wire(node))
                except (OSError, AssertionError):
                    self._drop(node)
                else:
                    if r.error_code not in CLUSTER_RETRIABLE:
                        return r
            time.sleep(0.1)
        raise AssertionError(f"the coordinator of {self.txn_id} kept failing")

    def produce(self, n: int, count: int) -> dict[int, list[bytes]]:
        values: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
        for i in range(count):
            values[i % 3].append(b"t%d-%d" % (n, i))
        for p, vs in values.items():
            batch = _txn_batch(self.pid, self.epoch, vs, self.seq[p])
            for _ in range(600):
                leader = self.c.leader_of(CLUSTER_TOPIC, p)
                try:
                    (code,) = produce_codes(self._wire(leader), 12, CLUSTER_TOPIC, {p: batch}, self.txn_id)
                except (OSError, AssertionError):
                    self._drop(leader)
                    code = E.NETWORK_EXCEPTION
                if code not in CLUSTER_RETRIABLE:
                    break
                time.sleep(0.1)
            assert code == 0, (p, code)
            self.seq[p] += len(vs)
        return values

    def end(self, commit: bool) -> None:
        r = self._coordinator_call(lambda w: w.call(26, 5, EndTxnRequest(
            transactional_id=self.txn_id, producer_id=self.pid, producer_epoch=self.epoch, committed=commit)))
        assert r.error_code == 0 and (r.producer_id, r.producer_epoch) == (self.pid, self.epoch + 1), r
        self.epoch = r.producer_epoch
        self.seq = {0: 0, 1: 0, 2: 0}


def test_tv2_on_three_nodes_through_coordinator_kills(tmp_path):
    """Three nodes (RF 3, min ISR 2) formatted at this release's default, transaction.version 2: a TV2 wire producer
    commits and aborts across three partitions; the coordinator's broker is killed (kill -9) right after an
    EndTxn is answered, so the new coordinator finds the transaction in Prepare* and sends its markers again at
    the same bumped epoch: partitions that have the marker take the retry (KAFKA-19999), the others the marker. A
    read_committed consumer gets exactly the committed records, each once, in order. Short here (6 transactions,
    one kill); ODRADEK_SOAK=1: 40 transactions, a kill every 8."""
    from broker.testing.embedded_cluster import EmbeddedCluster
    from confluent_kafka.admin import AdminClient, NewTopic

    with EmbeddedCluster(brokers=3, data_dir=tmp_path) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic(CLUSTER_TOPIC, 3, 3, config={"min.insync.replicas": "2"})])[
            CLUSTER_TOPIC].result(30)
        with KafkaWire(next(iter(c.broker_ports.values()))) as w:
            assert finalized(w)[0].get("transaction.version") == 2
        p = ClusterWireProducer(c, "v2-cluster")
        sent: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
        down = None
        try:
            for n in range(ROUNDS):
                values = p.produce(n, 12)
                p.end(n % 2 == 0)
                if n % 2 == 0:
                    for q, vs in values.items():
                        sent[q] += vs
                if down is not None:  # one transaction ran with the node down: bring it back
                    c.restart(down)
                    down = None
                elif n % KILL_EVERY == KILL_EVERY - 1 and n < ROUNDS - 2:
                    down = p._coordinator()
                    c.kill(down)  # the markers of the transaction just ended may be in flight
                    p._drop(down)
        finally:
            p.close()
        assert down is None
        got = read_confluent(c.bootstrap_servers, CLUSTER_TOPIC, 3, "read_committed", sum(map(len, sent.values())),
                             timeout=60, quiet=1.5)
        assert got == sent

