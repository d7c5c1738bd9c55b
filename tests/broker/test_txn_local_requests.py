"""A single node's requests to itself (broker/apis/local.py), over the wire: the coordinator's markers for the
partitions the node leads and the leader's verification questions for the ids it coordinates are handled
in-process (no loopback connection), with the same outcome."""

from __future__ import annotations

import time

from broker.testing.embedded import EmbeddedBroker
from protocol.generated.messages import AddPartitionsToTxnRequest, FetchRequest
from protocol.generated.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from protocol.generated.messages.fetch_request import FetchPartition, FetchTopic
from protocol.record_codec import decode_batch
from tests.broker.test_txn_verification import _batch, _create, _end, _init, _leo, _produce
from tests.kafka_wire import KafkaWire

TXN_ID = "local-me"


def _add_code(w: KafkaWire, topic: str, partitions: list[int], pid: int, epoch: int) -> int:
    r = w.call(24, 3, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TXN_ID, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=partitions)]))
    (code,) = {p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}
    return code


def _control_batches(w: KafkaWire, topic: str, index: int) -> list[bool]:
    """Each control batch of the partition, read_committed: True for COMMIT."""
    r = w.call(1, 12, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=1,
                                   topics=[FetchTopic(topic=topic, partitions=[FetchPartition(
                                       partition=index, fetch_offset=0, partition_max_bytes=1 << 20)])]))
    data = bytes(r.responses[0].partitions[0].records or b"")
    out, pos = [], 0
    while pos + 12 <= len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big")
        header, records = decode_batch(data[pos:pos + 12 + size])
        if header.attributes & 0x20:
            out.append(int.from_bytes(bytes(records[0].key)[2:4], "big") == 1)
        pos += 12 + size
    return out


def test_markers_and_verification_for_this_node_are_handled_in_process(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path / "d") as b, KafkaWire(b.port) as w:
        _create(w, "t")
        pid, epoch = _init(w, TXN_ID)
        assert _add_code(w, "t", [0, 1], pid, epoch) == 0
        got = _produce(w, 11, "t", {0: _batch(pid, epoch, 2, 0), 1: _batch(pid, epoch, 3, 0)}, TXN_ID)
        assert [got[0].error_code, got[1].error_code] == [0, 0]
        _end(w, pid, epoch, True, TXN_ID)
        for _ in range(200):  # the markers follow the EndTxn answer
            if _leo(b, "t", 0) == 3 and _leo(b, "t", 1) == 4:
                break
            time.sleep(0.01)
        assert (_leo(b, "t", 0), _leo(b, "t", 1)) == (3, 4)  # the records and one COMMIT marker each
        assert _control_batches(w, "t", 0) == [True] and _control_batches(w, "t", 1) == [True]
        txns = b.broker.txns
        assert txns.markers.local.requests >= 1 and txns.verifier.local.requests >= 1
        assert txns.markers._clients == {} and txns.verifier._clients == {}  # no connection to itself
