"""Group consumers of each Python client, run in threads: they record every record they process and
commit its offset right after processing (synchronously), so no record is processed twice by a
group whose members do not crash."""

from __future__ import annotations

import asyncio
import threading
import time


class Runner:
    kind = "?"

    def __init__(self, bootstrap: str, group: str, topic: str, sink: list, lock: threading.Lock, name: str,
                 **conf) -> None:
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.sink, self.lock, self.name, self.conf = sink, lock, name, conf
        self.stop_event = threading.Event()
        self.assigned: set[tuple[str, int]] = set()  # (topic, partition)
        self.assign_times: list[float] = []
        self.revocations = 0
        self.processed = 0
        self.commit_errors: list = []
        self.uncommitted: list[tuple[int, int]] = []  # (partition, offset) processed but whose commit failed
        # (partition, offset) delivered again to this consumer while it kept owning the partition: the client
        # moved its own position back (see ``_record``); the broker's commits and assignments played no part
        self.rewound: list[tuple[int, int]] = []
        self._furthest: dict[int, int] = {}  # partition -> furthest offset processed since it was assigned
        self.error: BaseException | None = None
        self.started_at = 0.0
        self.thread = threading.Thread(target=self._main, name=f"{self.kind}-{name}", daemon=True)

    def start(self) -> "Runner":
        self.started_at = time.monotonic()
        self.thread.start()
        return self

    def stop(self, timeout: float = 20.0) -> None:
        self.stop_event.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.kind} consumer {self.name} did not close"
        if self.error is not None:
            raise self.error

    def _record(self, partition: int, offset: int) -> None:
        """A record processed. An offset at or below the furthest one processed from a partition this consumer
        has owned throughout is a client-side rewind: librdkafka 2.16 with ``group.protocol=consumer`` can fire
        an offset-query timer armed for an earlier "reset to BEGINNING" (an outdated ListOffsets reply during a
        reconciliation) after the partition is already fetching, and starts it again from offset 0 (its debug
        log: "timed offset query for offset BEGINNING ... in state active"). Such redeliveries are recorded, not
        hidden: a duplicate across consumers (a stale commit or an assignment handed over too early) is still
        caught."""
        furthest = self._furthest.get(partition)
        if furthest is not None and offset <= furthest:
            self.rewound.append((partition, offset))
        else:
            self._furthest[partition] = offset
        with self.lock:
            self.sink.append((partition, offset))
        self.processed += 1

    def _on_assign(self, parts) -> None:
        # incremental (KIP-848 / cooperative) callbacks name only the added partitions; eager ones follow a
        # revocation of everything, so a union is right for both
        parts = set(parts)
        for _, p in parts:  # a fresh ownership starts from the committed offset
            self._furthest.pop(p, None)
        self.assigned |= parts
        self.assign_times.append(time.monotonic())

    def _on_revoke(self, parts) -> None:
        parts = set(parts)
        for _, p in parts:
            self._furthest.pop(p, None)
        self.revocations += 1
        self.assigned -= parts

    def _main(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # noqa: BLE001
            self.error = exc


class ConfluentRunner(Runner):
    kind = "confluent"

    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaException

        conf = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "session.timeout.ms": 3000, "heartbeat.interval.ms": 300,
                "client.id": self.name}
        conf.update(self.conf)
        if conf.get("group.protocol") == "consumer":  # KIP-848: session and heartbeat are broker-side
            conf.pop("session.timeout.ms", None)
            conf.pop("heartbeat.interval.ms", None)
        c = Consumer(conf)
        c.subscribe([self.topic], on_assign=lambda _c, ps: self._on_assign((p.topic, p.partition) for p in ps),
                    on_revoke=lambda _c, ps: self._on_revoke((p.topic, p.partition) for p in ps))
        try:
            while not self.stop_event.is_set():
                m = c.poll(0.1)
                if m is None or m.error():
                    continue
                self._record(m.partition(), m.offset())
                try:
                    c.commit(message=m, asynchronous=False)
                except KafkaException as exc:
                    self.commit_errors.append(exc)
                    self.uncommitted.append((m.partition(), m.offset()))
        finally:
            c.close()


class KafkaPythonRunner(Runner):
    kind = "kafka-python"

    def run(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata
        from kafka.errors import CommitFailedError, KafkaError

        runner = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                runner._on_revoke((tp.topic, tp.partition) for tp in revoked)

            def on_partitions_assigned(self, assigned):
                runner._on_assign((tp.topic, tp.partition) for tp in assigned)

        conf = dict(bootstrap_servers=self.bootstrap, group_id=self.group, auto_offset_reset="earliest",
                    enable_auto_commit=False, session_timeout_ms=3000, heartbeat_interval_ms=300,
                    client_id=self.name)
        conf.update(self.conf)
        c = KafkaConsumer(**conf)
        c.subscribe([self.topic], listener=Listener())
        try:
            while not self.stop_event.is_set():
                batches = c.poll(timeout_ms=100)
                for tp, msgs in batches.items():
                    for m in msgs:
                        self._record(m.partition, m.offset)
                        try:
                            c.commit({tp: OffsetAndMetadata(m.offset + 1, "", -1)})
                        except (CommitFailedError, KafkaError) as exc:
                            self.commit_errors.append(exc)
                            self.uncommitted.append((m.partition, m.offset))
        finally:
            c.close()


class AiokafkaRunner(Runner):
    kind = "aiokafka"

    def run(self) -> None:
        asyncio.run(self._arun())

    async def _arun(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
        from aiokafka.errors import CommitFailedError, KafkaError

        runner = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                runner._on_revoke((tp.topic, tp.partition) for tp in revoked)

            async def on_partitions_assigned(self, assigned):
                runner._on_assign((tp.topic, tp.partition) for tp in assigned)

        conf = dict(bootstrap_servers=self.bootstrap, group_id=self.group, auto_offset_reset="earliest",
                    enable_auto_commit=False, session_timeout_ms=3000, heartbeat_interval_ms=300,
                    client_id=self.name,
                    # aiokafka 0.14 answers a NOT_LEADER_OR_FOLLOWER on its offset-reset ListOffsets by retrying
                    # the old leader until the periodic metadata refresh (5 min by default; the fetch path does
                    # refresh): after a leader moves, a partition without a committed offset waits that long
                    metadata_max_age_ms=3000)
        conf.update(self.conf)
        c = AIOKafkaConsumer(**conf)
        c.subscribe([self.topic], listener=Listener())
        await c.start()
        try:
            while not self.stop_event.is_set():
                batches = await c.getmany(timeout_ms=100, max_records=1)
                for tp, msgs in batches.items():
                    for m in msgs:
                        self._record(m.partition, m.offset)
                        try:
                            await c.commit({TopicPartition(tp.topic, tp.partition): m.offset + 1})
                        except (CommitFailedError, KafkaError) as exc:
                            self.commit_errors.append(exc)
                            self.uncommitted.append((m.partition, m.offset))
        finally:
            await c.stop()


RUNNERS = {"confluent": ConfluentRunner, "kafka-python": KafkaPythonRunner, "aiokafka": AiokafkaRunner}
