"""Start-up opens each partition as soon as its log is loaded (issue 31, item 6): one slow log does not hold back
the others (followers fetch for them meanwhile), and the broker stays fenced, leading nothing, until every log is
loaded, as Kafka's broker does."""

from __future__ import annotations

import asyncio
import threading

from broker.node import Broker
from broker.config import BrokerConfig
from protocol.generated.messages import CreateTopicsRequest
from protocol.generated.messages.create_topics_request import CreatableTopic
from protocol.record_codec import Record, build_batch
from storage.log_manager import LogManager


def test_partitions_open_as_their_logs_load_and_the_broker_unfences_after_the_last(tmp_path, monkeypatch):
    values = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "d")}
    gate = threading.Event()
    real_load = LogManager._load_log

    def load_log(self, path, tp, *args):  # the "slow" topic's log takes until the test releases it
        if tp[0] == "slow":
            gate.wait(20)
        return real_load(self, path, tp, *args)

    async def scenario():
        b = Broker(BrokerConfig(values))
        await b.start()
        await b.controller.call(CreateTopicsRequest(topics=[
            CreatableTopic(name="fast", num_partitions=4, replication_factor=1),
            CreatableTopic(name="slow", num_partitions=1, replication_factor=1)]))
        for _ in range(200):
            if len(b.replicas.partitions) == 5:
                break
            await asyncio.sleep(0.05)
        b.replicas.append(b.replicas.get("slow", 0), build_batch([Record(value=b"kept")]), 0)
        await b.stop()

        monkeypatch.setattr(LogManager, "_load_log", load_log)
        b = Broker(BrokerConfig(values))
        try:
            await b.start(wait_for_logs=False)
            for _ in range(200):  # every fast partition opens while the slow log is still loading
                if len(b.replicas.partitions) == 4:
                    break
                await asyncio.sleep(0.05)
            during = (sorted(b.replicas.partitions), b.loading, b.fenced, b.replicas.missing_error("slow", 0))
            gate.set()
            await b.logs_loaded
            await b.wait_unfenced()
            after = (sorted(b.replicas.partitions), b.loading, b.fenced)
            slow_end = b.replicas.get("slow", 0).log.log_end_offset
        finally:
            gate.set()
            await b.stop()
        return during, after, slow_end

    during, after, slow_end = asyncio.run(asyncio.wait_for(scenario(), 90))
    assert during == ([("fast", p) for p in range(4)], True, True, 6)  # NOT_LEADER_OR_FOLLOWER: retriable
    assert after == ([("fast", p) for p in range(4)] + [("slow", 0)], False, False)
    assert slow_end == 1  # the held log, loaded from disk: not a second, empty one
