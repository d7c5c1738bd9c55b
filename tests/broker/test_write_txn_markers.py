"""WriteTxnMarkers on the partition leader (KafkaApis.handleWriteTxnMarkersRequest): a COMMIT or ABORT control
batch appended to every named partition, acks=all; the last stable offset moves past the transaction; a marker
without an open transaction is appended too; per-partition errors for unknown partitions, an older producer epoch
and an older coordinator epoch, with nothing appended."""

from __future__ import annotations

import asyncio

from broker import EmbeddedBroker
from protocol.errors import ErrorCode
from protocol.generated.messages import (
    CreateTopicsRequest, ListOffsetsRequest, WriteTxnMarkersRequest,
)
from protocol.generated.messages.create_topics_request import CreatableTopic
from protocol.generated.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from protocol.generated.messages.write_txn_markers_request import WritableTxnMarker, WritableTxnMarkerTopic
from protocol.record_codec import Record, build_batch, decode_batch
from storage.log import ORIGIN_CLIENT
from tests.kafka_wire import KafkaWire

PID = 4242
LATEST = -1


def _on_broker_loop(b: EmbeddedBroker, fn):
    async def run():
        return fn()
    return asyncio.run_coroutine_threadsafe(run(), b._loop).result(timeout=10)


def _transactional_append(b: EmbeddedBroker, index: int, epoch: int, n: int, first_sequence: int = 0) -> None:
    """A transactional producer's batch, appended on the leader as Produce would (its verification aside)."""
    batch = build_batch([Record(value=b"v%d" % i) for i in range(n)], producer_id=PID, producer_epoch=epoch,
                        base_sequence=first_sequence, is_transactional=True)

    def append():
        replicas = b.broker.replicas
        part = replicas.get("t", index)
        # as if the coordinator had verified it (KIP-890): the guard of a verification started now
        guard = part.log.maybe_start_transaction_verification(PID, first_sequence, epoch, 0)
        replicas.append(part, bytearray(batch), 0, origin=ORIGIN_CLIENT, verification_guard=guard)
    _on_broker_loop(b, append)


def _marker(commit: bool, partitions: dict[str, list[int]], epoch: int = 0, coordinator_epoch: int = 0):
    return WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=PID, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
        topics=[WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in partitions.items()])])


def _codes(response) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for m in response.markers for t in m.topics
            for p in t.partitions}


def _latest(w: KafkaWire, index: int, isolation: int) -> int:
    response = w.call(2, 5, ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
        ListOffsetsTopic(name="t", partitions=[ListOffsetsPartition(partition_index=index, timestamp=LATEST)])]))
    return response.topics[0].partitions[0].offset


def _batches(b: EmbeddedBroker, index: int) -> list:
    lg = b.broker.replicas.get("t", index).log
    return [decode_batch(raw)[0] for raw in lg.iter_batches(0)]


def test_markers_end_transactions_move_the_last_stable_offset_and_refuse_stale_epochs(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path / "d") as b, KafkaWire(b.port) as w:
        created = w.call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(name="t", num_partitions=2,
                                                                            replication_factor=1)], timeout_ms=5000))
        assert created.topics[0].error_code == 0
        _transactional_append(b, 0, epoch=3, n=5)
        assert (_latest(w, 0, 0), _latest(w, 0, 1)) == (5, 0)  # read_committed stops at the open transaction

        answer = w.call(27, 1, _marker(True, {"t": [0, 1]}, epoch=3, coordinator_epoch=7))
        assert _codes(answer) == {("t", 0): 0, ("t", 1): 0}
        assert answer.markers[0].producer_id == PID
        assert (_latest(w, 0, 0), _latest(w, 0, 1)) == (6, 6)  # the marker takes an offset; the LSO passes it
        assert _latest(w, 1, 1) == 1  # no transaction open on t-1: the marker is appended all the same
        marker = _batches(b, 0)[-1]
        assert (marker.is_control, marker.is_transactional, marker.producer_id, marker.producer_epoch,
                marker.base_offset) == (True, True, PID, 3, 5)

        # an aborted transaction, answered through v2 (TransactionVersion, KIP-1228, read and not acted on)
        _transactional_append(b, 0, epoch=3, n=2, first_sequence=5)
        assert _latest(w, 0, 1) == 6
        answer = w.call(27, 2, _marker(False, {"t": [0]}, epoch=3, coordinator_epoch=7))
        assert _codes(answer) == {("t", 0): 0} and _latest(w, 0, 1) == 9

        before = len(_batches(b, 0))
        stale = w.call(27, 1, _marker(True, {"t": [0], "nope": [0]}, epoch=2, coordinator_epoch=7))
        assert _codes(stale) == {("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH,
                                 ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        fenced = w.call(27, 1, _marker(True, {"t": [0, 9]}, epoch=3, coordinator_epoch=6))
        assert _codes(fenced) == {("t", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                                  ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert len(_batches(b, 0)) == before and _latest(w, 0, 0) == 9  # nothing appended

        assert w.call(27, 1, WriteTxnMarkersRequest(markers=[])).markers == []
