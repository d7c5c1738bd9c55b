"""ReplicaFetcherManager.update driven by what an image changed: only the partitions whose leader or epoch moved
go from one fetcher to another, a leader's new endpoint restarts its fetcher, and a leader that had no endpoint
gets a fetcher once it registers one; the fetchers always follow what a full update computes."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings, strategies as st

import broker.replication.replica_fetcher as replica_fetcher
from broker.clock import ManualClock
from broker.replication.replica_fetcher import ReplicaFetcherManager
from broker.replication.replica_manager import FetchWaiters, Partition, ReplicaChanges
from cluster.image_diff import diff_images
from cluster.metadata_image import MetadataImage
from protocol.generated.metadata import PartitionChangeRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord
from protocol.generated.metadata.register_broker_record import BrokerEndpoint

NOW = 1_700_000_000_000
T = bytes([1]) * 16


class _Fetcher:
    """Stands in for ReplicaFetcher (no task, no connection): records what the manager asks of it."""

    made: list["_Fetcher"] = []

    def __init__(self, manager, leader: int, host: str, port: int) -> None:
        self.leader, self.host, self.port = leader, host, port
        self.partitions: dict = {}
        self.calls: list = []
        self.stopped = False
        _Fetcher.made.append(self)

    def set_partitions(self, parts) -> None:
        self.partitions = dict(parts)
        self.calls.append(("set", frozenset(parts)))

    def change_partitions(self, changed) -> None:
        for tp, part in changed.items():
            if part is None:
                self.partitions.pop(tp, None)
            else:
                self.partitions[tp] = part
        self.calls.append(("change", frozenset(changed)))

    def stop(self) -> None:
        self.stopped = True


class _Replicas:
    """The replica manager's table, built straight from an image: node 2 hosts what the image places on it."""

    def __init__(self) -> None:
        self.partitions: dict = {}
        self.fetch_waiters = FetchWaiters()

    def apply(self, image: MetadataImage, diff=None) -> ReplicaChanges:
        diff = diff or diff_images(MetadataImage(), image)
        touched = diff.local_changes(2).partitions
        for tp in touched:
            topic = image.topic(tp[0])
            info = topic.partitions.get(tp[1]) if topic is not None else None
            if info is None or 2 not in info.replicas:
                self.partitions.pop(tp, None)
            elif tp in self.partitions:
                self.partitions[tp].info = info
            else:
                self.partitions[tp] = Partition(tp[0], tp[1], topic.topic_id, None, info)
        return ReplicaChanges(frozenset(touched), diff.brokers)


def _broker(b: int, port: int | None) -> RegisterBrokerRecord:
    eps = [BrokerEndpoint(name="PLAINTEXT", host="h", port=port, security_protocol=0)] if port is not None else []
    return RegisterBrokerRecord(broker_id=b, broker_epoch=b, fenced=False, end_points=eps)


def _image(n: int = 6) -> MetadataImage:
    """Node 2 follows t-0.. t-(n-1): the even ones from leader 1, the odd ones from leader 3."""
    return MetadataImage().apply([_broker(1, 9001), _broker(2, 9002), _broker(3, 9003),
                                  TopicRecord(name="t", topic_id=T)]
                                 + [PartitionRecord(partition_id=p, topic_id=T, replicas=[1, 2, 3], isr=[1, 2, 3],
                                                    leader=1 if p % 2 == 0 else 3, leader_epoch=0, partition_epoch=0)
                                    for p in range(n)], 1)


def _setup(monkeypatch):
    monkeypatch.setattr(replica_fetcher, "ReplicaFetcher", _Fetcher)
    _Fetcher.made = []
    replicas = _Replicas()
    manager = ReplicaFetcherManager(2, replicas, ManualClock(NOW), "PLAINTEXT", lambda: 5, {})
    return replicas, manager


def _publish(replicas: _Replicas, manager: ReplicaFetcherManager, prev: MetadataImage, image: MetadataImage):
    diff = diff_images(prev, image)
    applied = replicas.apply(image, diff)
    manager.update(image, applied)
    return applied


def _followed(manager: ReplicaFetcherManager) -> dict:
    return {leader: {tp: p for tp, p in f.partitions.items()} for leader, f in manager.fetchers.items()}


def test_a_leader_change_moves_one_partition(monkeypatch):
    replicas, manager = _setup(monkeypatch)
    base = _image()
    manager.update(base, replicas.apply(base))
    one, three = manager.fetchers[1], manager.fetchers[3]
    assert set(one.partitions) == {("t", 0), ("t", 2), ("t", 4)} and set(three.partitions) == {("t", 1), ("t", 3),
                                                                                                ("t", 5)}
    one.calls.clear()
    three.calls.clear()
    after = base.apply([PartitionChangeRecord(topic_id=T, partition_id=2, leader=3)], 2)
    _publish(replicas, manager, base, after)
    assert one.calls == [("change", frozenset({("t", 2)}))] and three.calls == [("change", frozenset({("t", 2)}))]
    assert ("t", 2) not in one.partitions and three.partitions[("t", 2)].leader_epoch == 1
    # an ISR change elsewhere touches no fetcher
    one.calls.clear()
    three.calls.clear()
    _publish(replicas, manager, after, after.apply([PartitionChangeRecord(topic_id=T, partition_id=0, isr=[1, 2])],
                                                   3))
    assert one.calls == [("change", frozenset({("t", 0)}))] and three.calls == []


def test_leadership_here_and_no_leader_stop_following(monkeypatch):
    replicas, manager = _setup(monkeypatch)
    base = _image(2)
    manager.update(base, replicas.apply(base))
    after = base.apply([PartitionChangeRecord(topic_id=T, partition_id=0, leader=2),
                        PartitionChangeRecord(topic_id=T, partition_id=1, leader=-1)], 2)
    _publish(replicas, manager, base, after)
    assert manager.fetchers == {}
    assert _Fetcher.made[0].stopped and _Fetcher.made[1].stopped


def test_a_new_endpoint_restarts_that_leaders_fetcher(monkeypatch):
    replicas, manager = _setup(monkeypatch)
    base = _image()
    manager.update(base, replicas.apply(base))
    one, three = manager.fetchers[1], manager.fetchers[3]
    three.calls.clear()
    after = base.apply([_broker(1, 9101)], 2)  # broker 1 re-registers on another port
    applied = _publish(replicas, manager, base, after)
    assert applied.brokers == {1} and not applied.partitions
    assert one.stopped and manager.fetchers[1] is not one and manager.fetchers[1].port == 9101
    assert set(manager.fetchers[1].partitions) == {("t", 0), ("t", 2), ("t", 4)}
    assert manager.fetchers[3] is three and three.calls == [] and not three.stopped


def test_a_leader_without_an_endpoint_is_followed_once_it_has_one(monkeypatch):
    replicas, manager = _setup(monkeypatch)
    base = _image().apply([_broker(3, None)], 2)
    manager.update(base, replicas.apply(base))
    assert set(manager.fetchers) == {1}
    after = base.apply([_broker(3, 9003)], 3)
    _publish(replicas, manager, base, after)
    assert set(manager.fetchers[3].partitions) == {("t", 1), ("t", 3), ("t", 5)}


_changes = st.one_of(
    st.builds(lambda p, leader: PartitionChangeRecord(topic_id=T, partition_id=p, leader=leader),
              st.integers(0, 5), st.sampled_from([-1, 1, 2, 3])),
    st.builds(lambda p, reps: PartitionChangeRecord(topic_id=T, partition_id=p, replicas=reps, isr=reps,
                                                    leader=reps[0]),
              st.integers(0, 5), st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3, unique=True)),
    st.builds(lambda p: PartitionChangeRecord(topic_id=T, partition_id=p, isr=[1]), st.integers(0, 5)),
    st.builds(_broker, st.sampled_from([1, 3]), st.sampled_from([None, 9001, 9003, 9100])),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(_changes, max_size=4), min_size=1, max_size=8))
def test_updates_by_change_follow_what_full_updates_compute(batches):
    """Against the manager as it was: every image, a full update (the whole table)."""
    async def run():
        _Fetcher.made = []
        incremental, full = _Replicas(), _Replicas()
        a = ReplicaFetcherManager(2, incremental, ManualClock(NOW), "PLAINTEXT", lambda: 5, {})
        b = ReplicaFetcherManager(2, full, ManualClock(NOW), "PLAINTEXT", lambda: 5, {})
        image = _image()
        a.update(image, incremental.apply(image))
        full.apply(image)
        b.update(image)
        for i, batch in enumerate(batches):
            after = image.apply(batch, i + 2)
            _publish(incremental, a, image, after)
            full.apply(after, diff_images(image, after))
            b.update(after)
            image = after
            assert {k: set(v) for k, v in _followed(a).items()} == {k: set(v) for k, v in _followed(b).items()}
            assert ({k: (f.host, f.port) for k, f in a.fetchers.items()}
                    == {k: (f.host, f.port) for k, f in b.fetchers.items()})
            live = [*a.fetchers.values(), *b.fetchers.values()]
            assert all(f.stopped for f in _Fetcher.made if f not in live)
            assert not any(f.stopped for f in live)

    original = replica_fetcher.ReplicaFetcher
    replica_fetcher.ReplicaFetcher = _Fetcher
    try:
        asyncio.run(run())
    finally:
        replica_fetcher.ReplicaFetcher = original


def test_change_partitions_keeps_what_did_not_move(tmp_path):
    """A real fetcher: a delayed partition waits no more once its leader epoch moved (as ``set_partitions``); the
    others keep their state, a partition no longer followed leaves."""
    from cluster.metadata_image import PartitionInfo

    async def run():
        manager = ReplicaFetcherManager(2, _Replicas(), ManualClock(NOW), "PLAINTEXT", lambda: 5, {})
        fetcher = original(manager, 1, "127.0.0.1", 1)
        fetcher.task.cancel()
        await asyncio.gather(fetcher.task, return_exceptions=True)
        parts = {("t", p): Partition("t", p, T, None, PartitionInfo(p, (1, 2), (1, 2), 1, 0, 0)) for p in range(3)}
        fetcher.set_partitions(parts)
        fetcher.delayed = {("t", 0): (0, None), ("t", 1): (0, None), ("t", 2): (0, 5.0)}
        fetcher._changed.clear()
        parts[("t", 0)].info = PartitionInfo(0, (1, 2), (1, 2), 1, 1, 1)  # a new leader epoch
        fetcher.change_partitions({("t", 0): parts[("t", 0)], ("t", 1): parts[("t", 1)], ("t", 2): None})
        assert set(fetcher.partitions) == {("t", 0), ("t", 1)}
        assert fetcher.delayed == {("t", 1): (0, None)}
        assert fetcher._changed.is_set()
        await fetcher.client.close()

    original = replica_fetcher.ReplicaFetcher
    asyncio.run(run())
