"""What the fault tests ask of a running cluster, whichever way its nodes run (loopback processes or network
namespaces): who leads each partition, whether every ISR is full, and the end-of-run judgement (the history
checked, every replica's batches compared with the leader's below the high watermark); for the transactional
workload, which broker coordinates a transactional id and which broker a fault round hits.

A cluster here is anything with ``nodes`` (id -> ``BrokerProcess``), ``broker_ids`` and
``client_address(id)`` (where clients reach that broker).
"""

from __future__ import annotations

import os
import random
import struct
from broker.testing.embedded_cluster import FAST_FAILOVER
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.generated.messages import FetchRequest, FindCoordinatorRequest, MetadataRequest, ProduceRequest
from protocol.generated.messages.fetch_request import FetchPartition, FetchTopic
from protocol.generated.messages.metadata_request import MetadataRequestTopic
from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
from protocol.record_codec import Record, build_batch
from storage.config import LogConfig
from storage.log import FetchIsolation, Log
from tests.harness import wait_until
from tests.kafka_wire import KafkaWire
from tests.jepsen.checker import check
from tests.jepsen.history import History
from tests.jepsen.workload import Workload

TOPIC, PARTITIONS, REPLICAS = "jepsen", 6, 3
INPUT_TOPIC, INPUT_PARTITIONS = "jepsen-in", 3  # the consume-transform-produce leg's input
# the fault tests' short timeouts: failover in seconds, not Kafka's defaults' tens of seconds
FAST = FAST_FAILOVER
# the groups' offsets and the transaction log replicated as the topic is (RF 3, min ISR 2), so their coordinators
# fail over with their partitions (the harness's default is RF 1); 6 partitions each, made quickly
REPLICATED_STATE = {"offsets.topic.replication.factor": 3, "offsets.topic.num.partitions": 6,
                    "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
                    "transaction.state.log.num.partitions": 6}


def fault_rng() -> random.Random:
    """The fault choices' randomness: a seed printed so that ``ODRADEK_FAULT_SEED`` replays a failing run."""
    seed = int(os.environ.get("ODRADEK_FAULT_SEED", random.randrange(2**32)))
    print(f"[fault seed: ODRADEK_FAULT_SEED={seed}]")
    return random.Random(seed)


def until(predicate, timeout: float = 60.0, what: str = "condition"):
    return wait_until(predicate, timeout, 0.2, what, retry=(Exception,))


def live_bootstrap(c, without: int | None = None) -> str:
    return ",".join(c.client_address(i) for i in c.broker_ids if c.nodes[i].alive() and i != without)


def partitions(c, without: int | None = None) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, sorted ISR) as a live broker (not ``without``) answers Metadata."""
    md = AdminClient({"bootstrap.servers": live_bootstrap(c, without)}).list_topics(TOPIC, timeout=5)
    return {p.id: (p.leader, sorted(p.isrs)) for p in md.topics[TOPIC].partitions.values()}


def fully_in_sync(c) -> bool:
    parts = partitions(c)
    return len(parts) == PARTITIONS and all(leader >= 0 and len(isr) == REPLICAS for leader, isr in parts.values())


def create_topic(c, also: dict[str, int] | None = None) -> None:
    """Every broker registered, then the RF 3, min.insync.replicas=2 topic (and the topics ``also`` names, with
    their partition counts) led with full ISRs."""
    for i in c.broker_ids:
        until(lambda i=i: c.nodes[i].log_lines(rf"node {i} is unfenced") >= 1, 60, f"node {i} unfenced")
    admin = AdminClient({"bootstrap.servers": live_bootstrap(c)})

    def created():
        for name, n in {TOPIC: PARTITIONS, **(also or {})}.items():
            try:
                admin.create_topics([NewTopic(name, n, REPLICAS, config={"min.insync.replicas": "2"})],
                                    request_timeout=10)[name].result()
            except KafkaException as exc:  # a retry after a timeout finds it made
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
        return True

    until(created, what="the topic")
    until(lambda: fully_in_sync(c), what="every partition led with a full ISR")


def transaction_coordinator(c, txn_id: str, without: int | None = None) -> int:
    """The broker coordinating ``txn_id`` now, as a live broker (not ``without``) answers FindCoordinator."""
    for i in c.broker_ids:
        if i == without or not c.nodes[i].alive():
            continue
        host, _, port = c.client_address(i).rpartition(":")
        try:
            with KafkaWire(int(port), timeout=5, host=host) as w:
                r = w.call(10, 3, FindCoordinatorRequest(key=txn_id, key_type=1))
        except (OSError, AssertionError):
            continue
        if r.error_code == 0:
            return r.node_id
    raise AssertionError(f"no live broker knows the coordinator of {txn_id}")


def txn_victim(c, rng, txn_ids: list[str], coordinator: bool) -> tuple[int, str]:
    """A broker to fault: the transaction coordinator of one of ``txn_ids`` (``coordinator``), else the leader of
    a partition of the topic; with what it is, for the log."""
    if coordinator:
        txn_id = rng.choice(txn_ids)
        return until(lambda: transaction_coordinator(c, txn_id), 30, f"the coordinator of {txn_id}"), \
            f"coordinator of {txn_id}"
    partition = rng.randrange(PARTITIONS)
    return partitions(c)[partition][0], f"leader of {TOPIC}-{partition}"


def probe(c, partition: int, offset: int) -> str:
    """What each live broker says of ``partition`` now (for a failure message): its metadata's leader and epoch,
    and a consumer's Fetch v12 at ``offset`` (error, high watermark, bytes, preferred read replica)."""
    lines = []
    for i in c.broker_ids:
        if not c.nodes[i].alive():
            continue
        try:
            host, port = c.client_address(i).rsplit(":", 1)
            with KafkaWire(int(port), host=host, timeout=5) as w:
                md = w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)]))
                t = md.topics[0]
                mp = next(p for p in t.partitions if p.partition_index == partition)
                f = w.call(1, 12, FetchRequest(
                    replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                    session_id=0, session_epoch=-1, topics=[FetchTopic(topic=TOPIC, partitions=[FetchPartition(
                        partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                        partition_max_bytes=1 << 20)])])).responses[0].partitions[0]
            lines.append(f"broker {i}: metadata leader {mp.leader_id} epoch {mp.leader_epoch} isr {mp.isr_nodes}; "
                         f"fetch@{offset}: error {f.error_code} hw {f.high_watermark} "
                         f"bytes {len(f.records or b'')} preferred {f.preferred_read_replica}")
        except Exception as exc:  # a diagnostic: say what failed and go on
            lines.append(f"broker {i}: {exc!r}")
    return "; ".join(lines)


def acks_from(c, node: int, partition: int, history: History, n: int = 20) -> list[bytes]:
    """Values that ``node`` alone acknowledged with acks=all: one raw Produce of ``n`` records sent to it and to no
    other broker (a client bootstrapped from it alone still learns the others from its Metadata and may send to the
    new leader: librdkafka did, and the new leader's acks failed a netns run); its sends and answer go into the
    workload's history too."""
    host, _, port = c.client_address(node).rpartition(":")
    values = [b"isolated-%04d" % i for i in range(n)]
    for value in values:
        history.send("isolated", partition, value)
    try:
        with KafkaWire(int(port), host=host, timeout=15) as w:
            r = w.call(0, 9, ProduceRequest(transactional_id=None, acks=-1, timeout_ms=3000, topic_data=[
                TopicProduceData(name=TOPIC, partition_data=[PartitionProduceData(
                    index=partition, records=build_batch([Record(value=v) for v in values]))])]))
        answer = r.responses[0].partition_responses[0]
        error, base = answer.error_code, answer.base_offset
    except (OSError, AssertionError) as exc:  # closed or timed out: indeterminate, as an error answer
        error, base = repr(exc), -1
    if error == 0:
        for i, value in enumerate(values):
            history.ack("isolated", partition, value, base + i)
        return values
    for value in values:
        history.fail("isolated", value, f"error {error}")
    return []


def finish(c, workload: Workload) -> dict[str, int]:
    """Stop writing, let every replica catch up, read everything, check the history and compare the logs (the
    nodes are killed for that); returns the history's counts."""
    workload.stop_producers()
    until(lambda: fully_in_sync(c), 90, "every broker back in every ISR")
    workload.drain()
    workload.stop_readers()
    report = check(workload.history)
    counts = report.counts()
    print(f"[history: {counts}]")
    if any(report.transactions.values()):
        print(f"[transactions as the checker sees them: {report.transactions}]")
    assert report.ok, report.summary()
    assert counts["acked"] > 0
    _assert_replicas_identical(c)
    return counts


def txn_workload(c, seed: int):
    """The input topic made, then the transactional workload (tests/jepsen/txn_workload.py) on the topic."""
    from tests.jepsen.txn_workload import TxnWorkload

    create_topic(c, also={INPUT_TOPIC: INPUT_PARTITIONS})
    return TxnWorkload(lambda: c.bootstrap, TOPIC, PARTITIONS, INPUT_TOPIC, INPUT_PARTITIONS, seed)


def txn_finish(c, workload) -> dict[str, int]:
    """``finish`` for a ``TxnWorkload``, which must have committed and aborted transactions and carried input
    records through its consume-transform-produce leg; returns the history's counts and the workload's."""
    try:
        counts = finish(c, workload)
    except AssertionError:
        import tempfile

        path = Path(tempfile.mkdtemp(prefix="jepsen-txn-")) / "history.jsonl"
        workload.history.dump(path)
        print(f"[history dumped to {path}; the consume-transform-produce leg's trail:]")
        print("\n".join(workload.ctp.trail))
        raise
    stats = workload.stats()
    print(f"[transactions: {stats}]")
    assert stats["committed"] > 0 and stats["aborted"] > 0 and stats["ctp_inputs_processed"] > 0, stats
    return {**counts, **stats}


def _high_watermarks(c) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": live_bootstrap(c), "group.id": "hw-unused"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def batches_below(node_dir: Path, partition: int, high_watermark: int, topic: str = TOPIC) -> list[bytes]:
    lg = Log.open(str(node_dir / f"{topic}-{partition}"), LogConfig.from_props({}), now_ms=0)
    try:
        out = []
        for batch in lg.iter_batches(0, FetchIsolation.LOG_END):
            base, = struct.unpack_from(">q", batch, 0)
            last_delta, = struct.unpack_from(">i", batch, 23)
            if base + last_delta < high_watermark:
                out.append(bytes(batch))
        return out
    finally:
        lg.close()


def _assert_replicas_identical(c) -> None:
    hws = _high_watermarks(c)
    leaders = {p: leader for p, (leader, _) in partitions(c).items()}
    # nothing to wait for: a follower appends a fetched batch (pwrite, so a kill -9 keeps it) before its next fetch,
    # and the leader's high watermark passes a batch only once every ISR member fetched beyond it
    for n in c.nodes.values():
        n.kill()
    for p in range(PARTITIONS):
        reference = batches_below(c.nodes[leaders[p]].data_dir, p, hws[p])
        assert reference or hws[p] == 0
        for i in c.broker_ids:
            got = batches_below(c.nodes[i].data_dir, p, hws[p])
            assert got == reference, (f"partition {p}: replica {i} holds {len(got)} batches below the high watermark "
                                      f"{hws[p]}, the leader {leaders[p]} {len(reference)}, or they differ")
