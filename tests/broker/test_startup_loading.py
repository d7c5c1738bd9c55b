"""Start-up opens each partition as soon as its log is loaded (issue 31, item 6): one slow log does not hold back
the others (followers fetch for them meanwhile), and the broker stays fenced, leading nothing, until every log is
loaded, as Kafka's broker does."""

from __future__ import annotations

import asyncio
import threading
import time

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


def test_an_image_applied_while_logs_load_is_never_read_from_the_loading_loop_mid_apply(tmp_path, monkeypatch):
    """The loading loop asks the replica manager which loaded partitions wait (its unapplied set) while a newer
    image may be applied in a thread that changes that set: it asks under the metadata lock, never mid-apply (a
    restarted node died at start-up with "Set changed size during iteration" when a failover's metadata arrived
    while its 3,000 logs loaded). The image here changes a topic config; a slow log finishes loading mid-apply."""
    from broker.replication.replica_manager import ReplicaManager
    from protocol.generated.messages import IncrementalAlterConfigsRequest
    from protocol.generated.messages.incremental_alter_configs_request import AlterableConfig, AlterConfigsResource

    TOPIC, SET = 2, 0  # ConfigResource.Type.TOPIC, AlterConfigOp.OpType.SET

    values = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "d")}
    gates = {p: threading.Event() for p in range(2)}
    real_load, real_apply = LogManager._load_log, ReplicaManager.apply_image
    real_waiting = ReplicaManager.waiting_for_logs.fget
    applying = threading.Event()
    read_mid_apply: list[bool] = []

    def load_log(self, path, tp, *args):  # each "slow" log takes until the test releases it
        if tp[0] == "slow":
            gates[tp[1]].wait(20)
        return real_load(self, path, tp, *args)

    def apply_image(self, image, diff=None):  # in its thread: a slow log finishes during the config's apply
        if "retention.ms" not in image.topic_config("fast") or applying.is_set() or gates[0].is_set():
            return real_apply(self, image, diff)
        applying.set()
        try:
            gates[0].set()  # the loading loop wakes for it while this apply runs
            time.sleep(1.0)
            return real_apply(self, image, diff)
        finally:
            applying.clear()

    def waiting_for_logs(self):
        read_mid_apply.append(applying.is_set())
        return real_waiting(self)

    async def scenario():
        b = Broker(BrokerConfig(values))
        await b.start()
        await b.controller.call(CreateTopicsRequest(topics=[
            CreatableTopic(name="fast", num_partitions=2, replication_factor=1),
            CreatableTopic(name="slow", num_partitions=2, replication_factor=1)]))
        for _ in range(200):
            if len(b.replicas.partitions) == 4:
                break
            await asyncio.sleep(0.05)
        await b.stop()

        monkeypatch.setattr(LogManager, "_load_log", load_log)
        monkeypatch.setattr(ReplicaManager, "apply_image", apply_image)
        monkeypatch.setattr(ReplicaManager, "waiting_for_logs", property(waiting_for_logs))
        b = Broker(BrokerConfig(values))
        try:
            await b.start(wait_for_logs=False)
            for _ in range(200):
                if len(b.replicas.partitions) == 2:
                    break
                await asyncio.sleep(0.05)
            altered = await b.controller.call(IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
                resource_type=TOPIC, resource_name="fast",
                configs=[AlterableConfig(name="retention.ms", config_operation=SET, value="86400000")])]))
            assert altered.responses[0].error_code == 0
            gates[1].set()
            await b.logs_loaded
            return sorted(b.replicas.partitions)
        finally:
            for gate in gates.values():
                gate.set()
            await b.stop()

    opened = asyncio.run(asyncio.wait_for(scenario(), 90))
    assert opened == [("fast", 0), ("fast", 1), ("slow", 0), ("slow", 1)]
    assert read_mid_apply and not any(read_mid_apply), read_mid_apply
