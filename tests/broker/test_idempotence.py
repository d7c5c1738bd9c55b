"""The idempotent producer: a lost ack makes the client retry, and the broker keeps exactly one copy.

A proxy swallows Produce responses after the broker appended, and closes the client's connection;
the client retries the same batch (same producer id, epoch, sequence), which the broker must
acknowledge with its original offset without appending it again.
"""

from __future__ import annotations

import asyncio

from broker import EmbeddedBroker
from protocol.record_codec import decode_batch
from tests.broker.fault_proxy import DropAckProxy

N = 200


def stored_values(b: EmbeddedBroker, topic: str) -> tuple[list[bytes], set[int]]:
    log = b.broker.replicas.get(topic, 0).log
    values, pids = [], set()
    for batch in log.iter_batches(0):
        h, records = decode_batch(batch)
        pids.add(h.producer_id)
        values.extend(r.value for r in records)
    return values, pids


def test_confluent_kafka_idempotent_retry_after_lost_ack(tmp_path):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    proxy = DropAckProxy(drop=3, repeat=True)
    with EmbeddedBroker(data_dir=tmp_path / "d", overrides=proxy.advertise()) as b:
        proxy.broker_port = b.port
        admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
        admin.create_topics([NewTopic("idem", 1, 1)])["idem"].result(10)
        try:
            p = Producer({"bootstrap.servers": proxy.bootstrap, "enable.idempotence": True,
                          "linger.ms": 5, "batch.num.messages": 20, "message.timeout.ms": 30000})
            delivered = []
            for i in range(N):
                p.produce("idem", value=b"v%05d" % i, partition=0,
                          on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
                p.poll(0)
            assert p.flush(30) == 0
        finally:
            proxy.close()
        assert proxy.dropped >= 1
        assert all(err is None for err, _ in delivered)
        values, pids = stored_values(b, "idem")
        assert values == [b"v%05d" % i for i in range(N)]  # exactly one copy, in order
        assert sorted(off for _, off in delivered) == list(range(N))
        assert len(pids) == 1


def test_aiokafka_idempotent_retry_after_lost_ack(tmp_path):
    from aiokafka import AIOKafkaProducer

    proxy = DropAckProxy(drop=2, repeat=True)
    with EmbeddedBroker(data_dir=tmp_path / "d", overrides=proxy.advertise()) as b:
        proxy.broker_port = b.port

        async def run():
            p = AIOKafkaProducer(bootstrap_servers=proxy.bootstrap, enable_idempotence=True,
                                 request_timeout_ms=10000, linger_ms=5)
            await p.start()
            try:
                offsets = []
                for start in range(0, N, 25):  # several produce requests, so some acks get lost
                    futs = [await p.send("idem2", b"v%05d" % i, partition=0) for i in range(start, start + 25)]
                    offsets += [(await asyncio.wait_for(f, 30)).offset for f in futs]
                return offsets
            finally:
                await p.stop()

        try:
            offsets = asyncio.run(asyncio.wait_for(run(), 60))
        finally:
            proxy.close()
        assert proxy.dropped >= 1
        assert sorted(offsets) == list(range(N))
        values, pids = stored_values(b, "idem2")
        assert values == [b"v%05d" % i for i in range(N)]
        assert len(pids) == 1


def test_producer_ids_not_reused_after_restart(tmp_path):
    from protocol.generated.messages import InitProducerIdRequest
    from tests.kafka_wire import KafkaWire

    seen = set()
    for _ in range(3):
        with EmbeddedBroker(data_dir=tmp_path / "d") as b:
            c = KafkaWire(b.port)
            for i in range(3):
                resp = c.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
                              corr=i)
                assert resp.error_code == 0 and resp.producer_epoch == 0
                assert resp.producer_id not in seen
                seen.add(resp.producer_id)
            c.close()
    assert len(seen) == 9
