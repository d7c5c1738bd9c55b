"""read_committed consumers skip aborted transactions: the broker's FetchResponse ``aborted_transactions`` (from the
partition log's .txnindex) is what the clients filter with.  The transactional batches and markers are written into
the partition's log directly (the transaction coordinator is built elsewhere), as the coordinator and a
transactional producer would leave them; kafka-python and confluent-kafka then read the topic both ways."""

from __future__ import annotations

import time

import pytest

from broker.testing.embedded import EmbeddedBroker
from protocol.record_codec import Record, build_batch, build_end_txn_marker_batch
from storage.log import ORIGIN_COORDINATOR
from tests.integration.test_kafka_python import create_topic
from tests.txn_clients import READERS


def _txn(pid: int, values: list[bytes], seq: int) -> bytearray:
    return bytearray(build_batch([Record(b"k", v, timestamp=int(time.time() * 1000)) for v in values],
                                 producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True))


def _plain(values: list[bytes]) -> bytearray:
    return bytearray(build_batch([Record(b"k", v, timestamp=int(time.time() * 1000)) for v in values]))


def _marker(pid: int, commit: bool) -> bytearray:
    return bytearray(build_end_txn_marker_batch(commit=commit, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                                timestamp=int(time.time() * 1000)))


@pytest.fixture
def topic_with_an_abort(tmp_path):
    # the transactions are written straight into the log, without a coordinator to verify them with (KIP-890)
    with EmbeddedBroker(data_dir=tmp_path / "d", overrides={"transaction.partition.verification.enable": False}) as b:
        topic = "txn-aborted"
        create_topic(b.bootstrap, topic, 1)
        deadline = time.monotonic() + 15
        while (topic, 0) not in b.broker.replicas.partitions:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        part = b.broker.replicas.partitions[(topic, 0)]
        lg, epoch, now = part.log, part.leader_epoch, int(time.time() * 1000)
        # pid 7's transaction is aborted while pid 8's (interleaved) commits; plain records in between
        lg.append_as_leader(_txn(7, [b"a0", b"a1"], 0), epoch, now)
        lg.append_as_leader(_txn(8, [b"c0"], 0), epoch, now)
        lg.append_as_leader(_plain([b"p0"]), epoch, now)
        lg.append_as_leader(_txn(7, [b"a2"], 2), epoch, now)
        lg.append_as_leader(_marker(7, commit=False), epoch, now, origin=ORIGIN_COORDINATOR)
        lg.append_as_leader(_txn(8, [b"c1"], 1), epoch, now)
        lg.append_as_leader(_marker(8, commit=True), epoch, now, origin=ORIGIN_COORDINATOR)
        lg.append_as_leader(_plain([b"p1"]), epoch, now)
        lg.update_high_watermark(lg.log_end_offset)
        assert lg.last_stable_offset == lg.log_end_offset
        yield b, topic


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_read_committed_skips_the_aborted_records(topic_with_an_abort, client):
    b, topic = topic_with_an_abort
    read = READERS[client]
    assert read(b.bootstrap, topic, 1, "read_committed", 4)[0] == [b"c0", b"p0", b"c1", b"p1"]
    assert read(b.bootstrap, topic, 1, "read_uncommitted", 7)[0] == [b"a0", b"a1", b"c0", b"p0", b"a2", b"c1", b"p1"]
