"""Transactions on 3 nodes, RF 3, min.insync.replicas 2 (issue 28): a confluent-kafka transactional producer
commits and aborts across the three partitions of a topic while the coordinator's broker is killed (kill -9) and
restarted; the producer carries on with the new coordinator, and a read_committed consumer gets exactly the
committed records, each once, in order per partition. The markers cross nodes: each partition's leader gets its
WriteTxnMarkers from whichever node coordinates. And every client at once on one cluster: confluent-kafka,
kafka-python, aiokafka and KafkaJS transactions, two of them across segment rolls, each client's read_committed
consumer getting exactly the committed records."""

from __future__ import annotations

import time

import pytest

from broker.testing.embedded_cluster import KAFKA_DEFAULT_TIMERS, EmbeddedCluster
from protocol.generated.messages import FindCoordinatorRequest
from tests.harness import wait_until
from tests.kafka_wire import KafkaWire
from tests.txn_clients import PRODUCERS, READERS, Txn, expected, read_confluent, run_kafkajs, spread

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "txn-out"
TXN_ID = "txn-cluster"
PER_TXN = 30  # records per transaction, spread over the 3 partitions
ROUNDS = 8  # transactions: even ones commit, odd ones abort
# the Java client's reconnect.backoff.max.ms (librdkafka's is 10 s): librdkafka asks for a moved coordinator only
# after a reconnect to the dead one fails, so with its default the first transaction after a kill waited up to 10 s
# past the failover (as eos_app's producer)
RECONNECT = {"reconnect.backoff.max.ms": 1000}


def _coordinator(c: EmbeddedCluster) -> int:
    def find():
        for port in c.broker_ports.values():
            try:
                with KafkaWire(port, timeout=5) as w:
                    r = w.call(10, 3, FindCoordinatorRequest(key=TXN_ID, key_type=1))
                if r.error_code == 0:
                    return r.node_id
            except (OSError, AssertionError):
                continue
        return None
    found = []
    wait_until(lambda: found.append(find()) or found[-1] is not None, 60, 0.2, "a transaction coordinator")
    return found[-1]


def _transaction(p: Producer, n: int, commit: bool, sent: dict[int, list[bytes]]) -> None:
    p.begin_transaction()
    values = [b"t%d-%d" % (n, i) for i in range(PER_TXN)]
    for i, v in enumerate(values):
        p.produce(TOPIC, v, partition=i % 3)
    p.flush(30)
    if commit:
        p.commit_transaction(60)
        for i, v in enumerate(values):
            sent[i % 3].append(v)
    else:
        p.abort_transaction(60)


def _read_committed(servers: str, expected: int) -> dict[int, list[bytes]]:
    return read_confluent(servers, TOPIC, 3, "read_committed", expected, timeout=60, quiet=1.5)


# Kafka's default quorum, session and ISR timers in place of the fast failover the other tests use
@pytest.mark.parametrize("timers", ["fast failover", "Kafka's defaults"])
def test_transactions_survive_a_coordinator_kill_and_read_committed_gets_each_committed_record_once(tmp_path,
                                                                                                   timers):
    overrides = KAFKA_DEFAULT_TIMERS if timers == "Kafka's defaults" else None
    with EmbeddedCluster(brokers=3, data_dir=tmp_path, overrides=overrides) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "transactional.id": TXN_ID,
                      "transaction.timeout.ms": 30000, "acks": "all", **RECONNECT})
        p.init_transactions(60)
        sent: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
        for n in range(ROUNDS // 2):
            _transaction(p, n, n % 2 == 0, sent)
        victim = _coordinator(c)
        c.kill(victim)  # kill -9 of the coordinator's broker between two transactions
        for n in range(ROUNDS // 2, ROUNDS):
            _transaction(p, n, n % 2 == 0, sent)
        assert _coordinator(c) != victim
        c.restart(victim)
        got = _read_committed(c.bootstrap_servers, sum(map(len, sent.values())))
        assert got == sent


def _lso_and_end(c: EmbeddedCluster, partition: int) -> tuple[int, int]:
    """(last stable offset, log end) of a partition, from its leader (ListOffsets read_committed / uncommitted)."""
    from protocol.generated.messages import ListOffsetsRequest
    from protocol.generated.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic

    leader = c.leader_of(TOPIC, partition)
    out = []
    with KafkaWire(c.broker_ports[leader], timeout=5) as w:
        for isolation in (1, 0):
            r = w.call(2, 5, ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[ListOffsetsTopic(
                name=TOPIC, partitions=[ListOffsetsPartition(partition_index=partition, timestamp=-1)])]))
            p = r.topics[0].partitions[0]
            assert p.error_code == 0, p
            out.append(p.offset)
    return out[0], out[1]


def _stable(c: EmbeddedCluster) -> bool:
    try:
        return all(lso == end for lso, end in (_lso_and_end(c, p) for p in range(3)))
    except (OSError, AssertionError):
        return False


def test_lost_markers_hold_read_committed_back_until_they_arrive_and_a_new_coordinator_finishes_a_prepared_commit(
        tmp_path):
    """The coordinator's WriteTxnMarkers are dropped (the fault hook, API key 27): EndTxn is answered once
    PrepareCommit is committed, the partitions' last stable offset stays below their end, and moves to it within
    seconds of the link healing. Then, markers dropped again, the coordinator is killed right after a commit
    (PrepareCommit written, markers not): the next coordinator loads PrepareCommit, sends the markers, and the
    transaction completes; the producer goes on with it."""
    import os

    hold_s = 10 if os.environ.get("ODRADEK_SOAK") else 3
    with EmbeddedCluster(brokers=3, data_dir=tmp_path) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "transactional.id": TXN_ID,
                      "transaction.timeout.ms": 60000, "acks": "all", **RECONNECT})
        p.init_transactions(60)
        sent: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
        coordinator = _coordinator(c)
        everyone = sorted(c.broker_ports)

        c.drop_requests(coordinator, everyone, api_keys=[27])
        _transaction(p, 0, True, sent)  # answered: PrepareCommit is committed
        time.sleep(hold_s)
        assert not _stable(c), "read_committed passed a transaction whose markers were never written"
        c.drop_requests(coordinator, [])
        healed = time.monotonic()
        wait_until(lambda: _stable(c), 30, 0.1, "the markers written after healing")
        print(f"\nmarkers held back {hold_s} s; last stable offset at the end {time.monotonic() - healed:.1f} s "
              "after healing")

        c.drop_requests(coordinator, everyone, api_keys=[27])
        _transaction(p, 1, True, sent)
        assert not _stable(c)
        c.kill(coordinator)  # in PrepareCommit: its markers never left
        killed = time.monotonic()
        wait_until(lambda: _stable(c), 60, 0.2, "the next coordinator to finish the prepared commit")
        print(f"prepared commit finished by the next coordinator {time.monotonic() - killed:.1f} s after the kill")
        assert _coordinator(c) != coordinator
        _transaction(p, 2, True, sent)
        c.restart(coordinator)
        assert _read_committed(c.bootstrap_servers, sum(map(len, sent.values()))) == sent


# ---- every client's transactions on one cluster ---------------------------------------------------------------

CLIENTS = ["confluent-kafka", "kafka-python", "aiokafka", "KafkaJS"]
SEGMENT_BYTES = 16384  # a batch larger than this is refused (RECORD_LIST_TOO_LARGE): the producers' are <= 4 KiB


def _client_transactions(client: str, count: int) -> tuple[list[Txn], list[int]]:
    """``count`` transactions alternating commit/abort over 3 partitions, and which of them are big: the 10th and
    11th of every 20 have 1,000 records (~110 bytes each, so ~37 KB a partition: past two rolls of a 16 KiB
    segment; one aborts, one commits), the others 3 to 30."""
    tag = client.replace("-", "").encode()
    txns, big = [], []
    for n in range(count):
        size = 1000 if n % 20 in (9, 10) else 3 + (n * 7) % 28
        if size == 1000:
            big.append(n)
        values = [b"%s-t%03d-%04d-" % (tag, n, i) + b"x" * 90 for i in range(size)]
        txns.append(spread("commit" if n % 2 == 0 else "abort", values, 3))
    return txns, big


def _offsets(txns: list[Txn], partition: int, n: int) -> tuple[int, int]:
    """(first, last) offset of transaction ``n``'s records in a partition: each transaction before it took its
    records' offsets there and one for its marker."""
    first = sum(sum(1 for p, _ in rs if p == partition) + 1 for _, rs in txns[:n])
    return first, first + sum(1 for p, _ in txns[n][1] if p == partition) - 1


def test_each_clients_transactions_on_a_replicated_cluster_and_its_read_committed_consumer(tmp_path, kafkajs_dir):
    """3 nodes, RF 3, min.insync.replicas 2: confluent-kafka, kafka-python, aiokafka and KafkaJS each run 20
    transactions (200 under ODRADEK_SOAK) alternating commit and abort over the 3 partitions of their own topic
    (at once), two in 20 of them of 1,000 records that span segment rolls (``segment.bytes`` 16 KiB); each
    client's read_committed consumer gets exactly the committed records, in order per partition, and a roll falls
    inside each big transaction on every replica. With the node leading the most partitions killed, the new
    leaders (the followers' logs) give confluent-kafka's read_committed consumer the same."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    count = 200 if os.environ.get("ODRADEK_SOAK") else 20

    with EmbeddedCluster(brokers=3, data_dir=tmp_path) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        topics = {client: f"txn-{client.lower()}" for client in CLIENTS}
        futures = admin.create_topics([NewTopic(t, 3, 3, config={"min.insync.replicas": "2",
                                                                 "segment.bytes": str(SEGMENT_BYTES)})
                                       for t in topics.values()])
        for f in futures.values():
            f.result(30)
        made = {client: _client_transactions(client, count) for client in CLIENTS}
        txns = {client: txns for client, (txns, _) in made.items()}
        want = {client: expected(txns[client], 3) for client in CLIENTS}
        committed = {client: sum(map(len, want[client].values())) for client in CLIENTS}

        def run(client: str) -> dict[int, list[bytes]]:
            topic, servers = topics[client], c.bootstrap_servers
            if client == "KafkaJS":
                return run_kafkajs(kafkajs_dir, servers, topic, f"txn-{topic}", txns[client], 3, committed[client],
                                   timeout=240 * count // 20, read_timeout_ms=90000 * count // 20, send_chunk=100)
            PRODUCERS[client](servers, topic, f"txn-{topic}", txns[client], batch_bytes=4096)
            return READERS[client](servers, topic, 3, "read_committed", committed[client], timeout=90 * count // 20)

        started = time.monotonic()
        with ThreadPoolExecutor(len(CLIENTS)) as pool:
            got = dict(zip(CLIENTS, pool.map(run, CLIENTS)))
        for client in CLIENTS:
            assert got[client] == want[client], client
        print(f"\n4 clients x {count} transactions ({sum(map(len, (r for _, r in txns['KafkaJS'])))} records "
              f"each, {committed['KafkaJS']} committed) written and read in {time.monotonic() - started:.1f} s")

        for client, topic in topics.items():
            for partition in range(3):
                for node in c.nodes.values():
                    bases = sorted(int(f.stem) for f in (node.data_dir / f"{topic}-{partition}").glob("*.log"))
                    for n in made[client][1]:
                        first, last = _offsets(txns[client], partition, n)
                        assert any(first < b <= last for b in bases), (client, partition, n, first, last, bases)

        # the followers' logs (their own .txnindex and producer state, built from what they replicated) give the
        # same: kill -9 the node leading the most partitions, read every topic again from the new leaders
        leaders = [c.leader_of(topic, p) for topic in topics.values() for p in range(3)]
        victim = max(set(leaders), key=leaders.count)
        c.kill(victim)
        killed = time.monotonic()

        def reread(client: str) -> dict[int, list[bytes]]:
            return read_confluent(c.bootstrap_servers, topics[client], 3, "read_committed", committed[client],
                                  timeout=90 * count // 20, config={"group.id": f"reread-{client}"})

        with ThreadPoolExecutor(len(CLIENTS)) as pool:
            again = dict(zip(CLIENTS, pool.map(reread, CLIENTS)))
        for client in CLIENTS:
            assert again[client] == want[client], client
        print(f"node {victim} (leader of {leaders.count(victim)} of 12 partitions) killed: read again from the "
              f"followers in {time.monotonic() - killed:.1f} s")
