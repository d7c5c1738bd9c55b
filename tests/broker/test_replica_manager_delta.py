"""ReplicaManager driven by image diffs (Kafka's ReplicaManager.applyDelta on TopicsDelta.localChanges): publishing
an image works on the partitions that changed, not on every hosted one, and ends in the state a broker applying
the whole image from scratch reaches."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from broker.replication.replica_manager import ReplicaManager
from cluster.image_diff import diff_images
from cluster.metadata_image import RESOURCE_TOPIC, MetadataImage
from protocol.errors import ErrorCode, KafkaError
from protocol.generated.metadata import (
    ConfigRecord, FenceBrokerRecord, PartitionChangeRecord, PartitionRecord, RegisterBrokerRecord,
    RemoveTopicRecord, TopicRecord,
)
from protocol.record_codec import Record, build_batch
from storage.log_manager import LogManager, LogManagerConfig

NOW = 1_700_000_000_000
T = bytes([1]) * 16
U = bytes([2]) * 16
T2 = bytes([3]) * 16


def _manager(path: Path, node_id: int = 1) -> ReplicaManager:
    lm = LogManager(LogManagerConfig(log_dirs=(str(path / "d"),), cluster_id="q1Sh-9_ISia_zwGINzRvyQ",
                                     node_id=node_id))
    lm.startup(NOW)
    return ReplicaManager(node_id, lm, lambda: NOW)


def _topic(name: str, topic_id: bytes, n: int, replicas=(1, 2), leader: int = 1) -> list:
    return [TopicRecord(name=name, topic_id=topic_id)] + [
        PartitionRecord(partition_id=p, topic_id=topic_id, replicas=list(replicas), isr=list(replicas),
                        leader=leader, leader_epoch=0, partition_epoch=0) for p in range(n)]


def _base() -> MetadataImage:
    return MetadataImage().apply([RegisterBrokerRecord(broker_id=b, broker_epoch=b, fenced=False) for b in (1, 2, 3)]
                                 + _topic("t", T, 4) + _topic("u", U, 3, replicas=(2, 1), leader=2), 1)


def _publish(rm: ReplicaManager, image: MetadataImage):
    """What the node does with a committed image (node.py ``_publish_to_replicas``), less the fetchers."""
    diff = diff_images(rm.image, image)
    stopped = rm.stop_partitions(image, diff)
    applied = rm.apply_image(image, diff)
    rm.after_image(applied)
    return stopped, applied


class _Spy:
    """Counts the per-partition work: partitions applied, and partitions whose high watermark was looked at."""

    def __init__(self, rm: ReplicaManager, monkeypatch) -> None:
        self.applied: list = []
        self.checked: list = []
        apply_partition, advance = rm._apply_partition, rm.maybe_advance_high_watermark

        def _apply_partition(tp, topic, info, now, new_epochs):
            self.applied.append(tp)
            return apply_partition(tp, topic, info, now, new_epochs)

        def _advance(part):
            self.checked.append((part.topic, part.index))
            return advance(part)

        monkeypatch.setattr(rm, "_apply_partition", _apply_partition)
        monkeypatch.setattr(rm, "maybe_advance_high_watermark", _advance)

    def reset(self) -> None:
        self.applied.clear()
        self.checked.clear()


def test_the_first_apply_takes_the_whole_image(tmp_path, monkeypatch):
    rm = _manager(tmp_path)
    spy = _Spy(rm, monkeypatch)
    applied = rm.apply_image(_base())  # the loader: the replicas hold the empty image
    assert set(rm.partitions) == {("t", i) for i in range(4)} | {("u", i) for i in range(3)}
    assert applied.partitions == set(rm.partitions) and applied.brokers == {1, 2, 3}
    assert sorted(spy.applied) == sorted(rm.partitions)


def test_a_one_partition_change_touches_one_partition(tmp_path, monkeypatch):
    rm = _manager(tmp_path)
    base = _base()
    _publish(rm, base)
    parts = dict(rm.partitions)
    infos = {tp: p.info for tp, p in parts.items()}
    spy = _Spy(rm, monkeypatch)
    after = base.apply([PartitionChangeRecord(topic_id=T, partition_id=2, isr=[1])], 2)
    stopped, applied = _publish(rm, after)
    assert not stopped.partitions and applied.partitions == {("t", 2)} and not applied.brokers
    assert spy.applied == [("t", 2)] and spy.checked == [("t", 2)]
    assert rm.get("t", 2).info.isr == (1,) and rm.get("t", 2) is parts[("t", 2)]
    assert all(rm.partitions[tp] is parts[tp] and rm.partitions[tp].info is infos[tp]
               for tp in parts if tp != ("t", 2))


def test_a_change_elsewhere_touches_nothing_here(tmp_path, monkeypatch):
    rm = _manager(tmp_path, node_id=3)
    base = _base().apply(_topic("v", T2, 2, replicas=(3, 1), leader=3), 2)
    _publish(rm, base)
    spy = _Spy(rm, monkeypatch)
    _, applied = _publish(rm, base.apply([PartitionChangeRecord(topic_id=T, partition_id=0, isr=[1])], 3))
    assert not applied.partitions and not spy.applied and not spy.checked


def test_a_deleted_topic_stops_and_deletes_only_its_partitions(tmp_path, monkeypatch):
    async def run():
        rm = _manager(tmp_path)
        base = _base()
        _publish(rm, base)
        part = rm.get("t", 1)
        _, committed = rm.append(part, bytearray(build_batch([Record(value=b"v")])), NOW)  # acks=all: waits
        spy = _Spy(rm, monkeypatch)
        stopped, applied = _publish(rm, base.apply([RemoveTopicRecord(topic_id=T)], 2))
        assert stopped.partitions == {("t", i) for i in range(4)} == applied.partitions
        assert not spy.applied and not spy.checked
        assert set(rm.partitions) == {("u", i) for i in range(3)}
        assert not any((tmp_path / "d" / f"t-{i}").exists() for i in range(4))
        with pytest.raises(KafkaError) as exc:
            await committed
        assert exc.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    asyncio.run(run())


def test_a_recreated_topic_gets_a_new_log(tmp_path):
    rm = _manager(tmp_path)
    base = _base()
    _publish(rm, base)
    old = rm.get("t", 0)
    old.log.append_as_leader(bytearray(build_batch([Record(value=b"old")])), 0, NOW)
    after = base.apply([RemoveTopicRecord(topic_id=T)] + _topic("t", T2, 2, replicas=(2, 1), leader=2), 2)
    stopped, applied = _publish(rm, after)
    assert stopped.partitions == {("t", i) for i in range(4)}
    assert applied.partitions == {("t", i) for i in range(4)}
    assert set(rm.partitions) == {("t", 0), ("t", 1)} | {("u", i) for i in range(3)}
    new = rm.get("t", 0)
    assert new is not old and new.topic_id == T2 and new.log.log_end_offset == 0 and not new.is_leader(1)
    assert not (tmp_path / "d" / "t-3").exists()


def test_a_recreated_topic_without_stop_partitions(tmp_path):
    """apply_image alone (no stop_partitions first, as the loader and tests call it) replaces the log too."""
    rm = _manager(tmp_path)
    base = _base()
    rm.apply_image(base)
    old = rm.get("t", 0)
    old.log.append_as_leader(bytearray(build_batch([Record(value=b"old")])), 0, NOW)
    rm.apply_image(base.apply([RemoveTopicRecord(topic_id=T)] + _topic("t", T2, 1), 2))
    assert set(rm.partitions) == {("t", 0)} | {("u", i) for i in range(3)}
    assert rm.get("t", 0).topic_id == T2 and rm.get("t", 0).log.log_end_offset == 0


def test_a_leader_change_fails_acks_all_waiters_of_that_partition_only(tmp_path, monkeypatch):
    async def run():
        rm = _manager(tmp_path)
        base = _base()
        _publish(rm, base)
        batch = bytearray(build_batch([Record(value=b"v")]))
        _, moved = rm.append(rm.get("t", 0), batch, NOW)
        _, stays = rm.append(rm.get("t", 1), bytearray(batch), NOW)
        spy = _Spy(rm, monkeypatch)
        _, applied = _publish(rm, base.apply([PartitionChangeRecord(topic_id=T, partition_id=0, leader=2)], 2))
        assert applied.partitions == {("t", 0)} and spy.applied == [("t", 0)]
        part = rm.get("t", 0)
        assert not part.is_leader(1) and part.leader_epoch == 1 and part.followers == {}
        with pytest.raises(KafkaError) as exc:
            await moved
        assert exc.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert not stays.done()
        # and back: leading again at a new epoch, followers reset
        _publish(rm, rm.image.apply([PartitionChangeRecord(topic_id=T, partition_id=0, leader=1)], 3))
        assert part.is_leader(1) and part.leader_epoch == 2 and set(part.followers) == {2}
        assert part.log.leader_epoch_cache.epoch_entries()[-1].epoch == 2

    asyncio.run(run())


def test_a_pending_isr_clears_only_when_its_partition_epoch_moves(tmp_path):
    rm = _manager(tmp_path)
    base = _base()
    _publish(rm, base)
    for i in (0, 1):
        part = rm.get("t", i)
        part.pending_isr, part.pending_from_epoch = (1,), part.info.partition_epoch
    _publish(rm, base.apply([PartitionChangeRecord(topic_id=T, partition_id=0, isr=[1])], 2))
    assert rm.get("t", 0).pending_isr is None and rm.get("t", 1).pending_isr == (1,)


def test_a_broker_change_looks_at_every_led_partition(tmp_path, monkeypatch):
    """Fencing moves who counts for the high watermark (isr_eligible): as before, every led partition's high
    watermark is looked at once a broker's registration changed."""
    rm = _manager(tmp_path)
    base = _base()
    _publish(rm, base)
    spy = _Spy(rm, monkeypatch)
    _, applied = _publish(rm, base.apply([FenceBrokerRecord(id=2, epoch=2)], 2))
    assert applied.brokers == {2} and not spy.applied
    assert sorted(spy.checked) == [("t", i) for i in range(4)]  # led here; u is led by 2


def test_a_topic_config_change_refreshes_hosted_topics_only(tmp_path):
    rm = _manager(tmp_path, node_id=3)
    base = _base().apply(_topic("v", T2, 2, replicas=(3, 1), leader=3), 2)
    _publish(rm, base)

    def config(name: str, value: str) -> ConfigRecord:
        return ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name=name, name="retention.ms", value=value)

    _publish(rm, base.apply([config("v", "1000"), config("t", "2000")], 3))
    assert rm.log_manager.topic_overrides.get("v") == {"retention.ms": "1000"}
    assert rm.get("v", 0).log.config.retention_ms == 1000
    assert "t" not in rm.log_manager.topic_overrides  # not hosted here


def test_a_partition_whose_log_failed_to_open_is_retried_on_a_later_image(tmp_path, monkeypatch):
    rm = _manager(tmp_path)
    base = _base()
    _publish(rm, base)
    create = rm.log_manager.get_or_create_log
    failing = {("t", 5)}

    def get_or_create_log(topic, partition, **kw):
        if (topic, partition) in failing:
            raise OSError("disk said no")
        return create(topic, partition, **kw)

    monkeypatch.setattr(rm.log_manager, "get_or_create_log", get_or_create_log)
    grown = base.apply([PartitionRecord(partition_id=p, topic_id=T, replicas=[1, 2], isr=[1, 2], leader=1,
                                        leader_epoch=0, partition_epoch=0) for p in (4, 5, 6)], 2)
    with pytest.raises(OSError):
        _publish(rm, grown)
    assert rm.get("t", 4) is not None and rm.get("t", 5) is None and rm.get("t", 6) is None
    failing.clear()
    _, applied = _publish(rm, grown.apply([PartitionChangeRecord(topic_id=U, partition_id=0, isr=[2])], 3))
    assert applied.partitions == {("t", 5), ("t", 6), ("u", 0)}
    assert rm.get("t", 5) is not None and rm.get("t", 6) is not None
    _, applied = _publish(rm, rm.image.apply([PartitionChangeRecord(topic_id=U, partition_id=1, isr=[2])], 4))
    assert applied.partitions == {("u", 1)}  # nothing left over


# ---- the property: publishing diffs ends where applying the last image from scratch does -----------------------

NAMES = ["t", "u"]
_ops = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(NAMES), st.integers(1, 3),
              st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
    st.tuples(st.just("leader"), st.sampled_from(NAMES), st.integers(0, 2), st.sampled_from([1, 2, 3, -1])),
    st.tuples(st.just("isr"), st.sampled_from(NAMES), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("move"), st.sampled_from(NAMES), st.integers(0, 2),
              st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("config"), st.sampled_from(NAMES), st.sampled_from([None, "1000", "2000"])),
    st.tuples(st.just("fence"), st.sampled_from([1, 2, 3]), st.booleans()),
)


def _records(image: MetadataImage, op: tuple, new_id: bytes) -> list:
    """What a controller would write for ``op`` on ``image`` (nothing when it does not apply); a topic created
    gets ``new_id`` (never one used before)."""
    kind, name = op[0], op[1]
    topic = image.topic(name) if kind != "fence" else None
    if kind == "create":
        replicas = op[3]
        return _topic(name, new_id, op[2], replicas=replicas, leader=replicas[0]) if topic is None else []
    if kind == "delete":
        return [RemoveTopicRecord(topic_id=topic.topic_id)] if topic is not None else []
    if kind == "config":
        return [ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name=name, name="retention.ms", value=op[2])]
    if kind == "fence":
        return [RegisterBrokerRecord(broker_id=op[1], broker_epoch=op[1], fenced=op[2])]
    info = topic.partitions.get(op[2]) if topic is not None else None
    if info is None:
        return []
    if kind == "leader":
        return [PartitionChangeRecord(topic_id=topic.topic_id, partition_id=op[2], leader=op[3])]
    if kind == "isr":
        return [PartitionChangeRecord(topic_id=topic.topic_id, partition_id=op[2],
                                      isr=list(info.replicas[:op[3] + 1]))]
    return [PartitionChangeRecord(topic_id=topic.topic_id, partition_id=op[2], replicas=op[3], isr=op[3],
                                  leader=op[3][0])]


def _state(rm: ReplicaManager) -> dict:
    return {tp: (p.topic_id, p.info, frozenset(p.followers), p.followers_epoch, p.pending_isr)
            for tp, p in rm.partitions.items()}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(_ops, min_size=1, max_size=3), min_size=1, max_size=6), st.sampled_from([1, 2, 3]))
def test_publishing_diffs_reaches_the_state_of_a_full_apply(batches, node_id):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        rm = _manager(root / "incremental", node_id)
        image = _base()
        _publish(rm, image)
        ids = (bytes([16 + i]) * 16 for i in range(100))
        for ops in batches:  # several ops folded into one published image
            for op in ops:
                image = image.apply(_records(image, op, next(ids)), image.offset + 1)
            _publish(rm, image)
        fresh = _manager(root / "full", node_id)
        fresh.apply_image(image)
        assert _state(rm) == _state(fresh)
        on_disk = {tp for tp in rm.log_manager.current_logs()}
        assert on_disk == set(rm.partitions)
        hosted = {tp[0] for tp in rm.partitions}
        assert ({n: rm.log_manager.topic_overrides.get(n, {}) for n in hosted}
                == {n: dict(image.topic_config(n)) for n in hosted})
