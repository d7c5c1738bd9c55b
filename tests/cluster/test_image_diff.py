"""cluster/image_diff.py: the changes between two metadata images, found by identity on the copy-on-write images,
are exactly what comparing every partition, config and broker by value finds; and the local changes of a broker
(Kafka's TopicsDelta.localChanges)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from cluster.image_diff import PartitionChange, diff_images
from cluster.metadata_image import RESOURCE_BROKER, RESOURCE_TOPIC, MetadataImage
from protocol.generated.metadata import (
    BrokerRegistrationChangeRecord, ConfigRecord, FenceBrokerRecord, PartitionChangeRecord, PartitionRecord,
    RegisterBrokerRecord, RemoveTopicRecord, TopicRecord, UnfenceBrokerRecord, UnregisterBrokerRecord,
)
from protocol.generated.metadata.register_broker_record import BrokerEndpoint

IDS = [bytes([i]) * 16 for i in range(1, 5)]
NAMES = ["a", "b", "c"]
NODES = [1, 2, 3]


def _topic(name: str, topic_id: bytes, partitions: int, replicas=(1, 2), leader: int = 1) -> list:
    return [TopicRecord(name=name, topic_id=topic_id)] + [
        PartitionRecord(partition_id=p, topic_id=topic_id, replicas=list(replicas), isr=list(replicas), leader=leader,
                        leader_epoch=0, partition_epoch=0) for p in range(partitions)]


def _base() -> MetadataImage:
    return MetadataImage().apply(_topic("a", IDS[0], 3) + _topic("b", IDS[1], 2, replicas=(2, 3), leader=2), 1)


def test_an_unchanged_image_has_no_changes():
    image = _base()
    diff = diff_images(image, image.apply([], 2))
    assert not diff.partitions and not diff.topic_configs and not diff.brokers
    assert not diff.local_changes(1).partitions


def test_one_isr_change_is_one_partition():
    image = _base()
    after = image.apply([PartitionChangeRecord(topic_id=IDS[0], partition_id=1, isr=[1])], 2)
    diff = diff_images(image, after)
    assert list(diff.partitions) == [("a", 1)]
    change = diff.partitions[("a", 1)]
    assert change.old is image.topic("a").partitions[1] and change.new is after.topic("a").partitions[1]
    assert not change.recreated
    local = diff.local_changes(1)
    assert dict(local.leaders) == {("a", 1): after.topic("a").partitions[1]}
    assert not local.followers and not local.deletes
    assert dict(diff.local_changes(2).followers) == {("a", 1): after.topic("a").partitions[1]}
    assert not diff.local_changes(3).partitions  # not a replica before or after


def test_a_deleted_topic_deletes_its_hosted_partitions():
    image = _base()
    diff = diff_images(image, image.apply([RemoveTopicRecord(topic_id=IDS[1])], 2))
    assert set(diff.partitions) == {("b", 0), ("b", 1)}
    assert all(c.new is None and c.old_topic_id == IDS[1] for c in diff.partitions.values())
    assert diff.local_changes(3).deletes == {("b", 0), ("b", 1)}
    assert not diff.local_changes(1).partitions


def test_a_recreated_topic_deletes_and_hosts_again():
    image = _base()
    after = image.apply([RemoveTopicRecord(topic_id=IDS[0])] + _topic("a", IDS[2], 2, replicas=(1, 3)), 2)
    diff = diff_images(image, after)
    assert set(diff.partitions) == {("a", 0), ("a", 1), ("a", 2)}
    assert diff.partitions[("a", 0)].recreated and diff.partitions[("a", 0)].new_topic_id == IDS[2]
    assert diff.partitions[("a", 2)] == PartitionChange(IDS[0], image.topic("a").partitions[2], None, None)
    local = diff.local_changes(1)
    assert local.deletes == {("a", 0), ("a", 1), ("a", 2)}
    assert set(local.leaders) == {("a", 0), ("a", 1)}
    assert diff.local_changes(2).deletes == {("a", 0), ("a", 1), ("a", 2)}
    assert set(diff.local_changes(3).followers) == {("a", 0), ("a", 1)} and not diff.local_changes(3).deletes


def test_a_leader_change_and_a_reassignment():
    image = _base()
    after = image.apply([PartitionChangeRecord(topic_id=IDS[0], partition_id=0, leader=2),
                         PartitionChangeRecord(topic_id=IDS[0], partition_id=2, replicas=[2, 3], isr=[2, 3],
                                               leader=2)], 2)
    diff = diff_images(image, after)
    assert set(diff.partitions) == {("a", 0), ("a", 2)}
    one, two, three = (diff.local_changes(n) for n in NODES)
    assert set(one.followers) == {("a", 0)} and one.deletes == {("a", 2)} and not one.leaders
    assert set(two.leaders) == {("a", 0), ("a", 2)}
    assert set(three.followers) == {("a", 2)}


def test_configs_and_brokers():
    image = _base().apply([ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name="a", name="retention.ms",
                                        value="1"),
                           RegisterBrokerRecord(broker_id=1, broker_epoch=1, fenced=False),
                           RegisterBrokerRecord(broker_id=2, broker_epoch=2, fenced=False)], 2)
    after = image.apply([ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name="a", name="retention.ms",
                                      value="2"),
                         ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name="b", name="retention.ms",
                                      value="2"),
                         ConfigRecord(resource_type=RESOURCE_BROKER, resource_name="1", name="x", value="y"),
                         FenceBrokerRecord(id=2, epoch=2)], 3)
    diff = diff_images(image, after)
    assert diff.topic_configs == {"a", "b"} and diff.brokers == {2} and not diff.partitions
    # the same value again: a new object, no change
    same = after.apply([ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name="a", name="retention.ms",
                                     value="2"), FenceBrokerRecord(id=2, epoch=2)], 4)
    assert not diff_images(after, same).topic_configs and not diff_images(after, same).brokers
    removed = same.apply([RemoveTopicRecord(topic_id=IDS[0]), UnregisterBrokerRecord(broker_id=1)], 5)
    d = diff_images(same, removed)
    assert d.topic_configs == {"a"} and d.brokers == {1}


def test_the_empty_image_diffs_to_everything():
    image = _base()
    diff = diff_images(MetadataImage(), image)
    assert set(diff.partitions) == {("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)}
    assert set(diff.local_changes(1).leaders) == {("a", 0), ("a", 1), ("a", 2)}
    assert set(diff.local_changes(3).followers) == {("b", 0), ("b", 1)}


# ---- the property: identity-based diff == brute-force comparison ---------------------------------------------

_replicas = st.lists(st.sampled_from(NODES), min_size=1, max_size=3, unique=True)
_records = st.one_of(
    st.builds(TopicRecord, name=st.sampled_from(NAMES), topic_id=st.sampled_from(IDS)),
    st.builds(lambda tid, p, reps, epoch: PartitionRecord(
        partition_id=p, topic_id=tid, replicas=reps, isr=reps, leader=reps[0], leader_epoch=epoch,
        partition_epoch=epoch), st.sampled_from(IDS), st.integers(0, 3), _replicas, st.integers(0, 2)),
    st.builds(lambda tid, p, isr, leader: PartitionChangeRecord(
        topic_id=tid, partition_id=p, isr=isr, leader=leader), st.sampled_from(IDS), st.integers(0, 3),
        st.none() | _replicas, st.sampled_from([-2, -1, *NODES])),
    st.builds(lambda tid, p, reps: PartitionChangeRecord(topic_id=tid, partition_id=p, replicas=reps, isr=reps),
              st.sampled_from(IDS), st.integers(0, 3), _replicas),
    st.builds(RemoveTopicRecord, topic_id=st.sampled_from(IDS)),
    st.builds(lambda rtype, name, key, value: ConfigRecord(resource_type=rtype, resource_name=name, name=key,
                                                           value=value),
              st.sampled_from([RESOURCE_TOPIC, RESOURCE_BROKER]), st.sampled_from(NAMES + ["1"]),
              st.sampled_from(["retention.ms", "segment.ms"]), st.none() | st.sampled_from(["1", "2"])),
    st.builds(lambda b, port, fenced: RegisterBrokerRecord(
        broker_id=b, broker_epoch=port, fenced=fenced,
        end_points=[BrokerEndpoint(name="PLAINTEXT", host="h", port=port, security_protocol=0)]),
        st.sampled_from(NODES), st.integers(1, 2), st.booleans()),
    st.builds(lambda b: FenceBrokerRecord(id=b, epoch=0), st.sampled_from(NODES)),
    st.builds(lambda b: UnfenceBrokerRecord(id=b, epoch=0), st.sampled_from(NODES)),
    st.builds(lambda b: UnregisterBrokerRecord(broker_id=b), st.sampled_from(NODES)),
    st.builds(lambda b, f: BrokerRegistrationChangeRecord(broker_id=b, fenced=f), st.sampled_from(NODES),
              st.sampled_from([-1, 0, 1])),
)


def _all_partitions(image: MetadataImage) -> dict:
    return {(t.name, p): (t.topic_id, info) for t in image.topics_by_name.values()
            for p, info in t.partitions.items()}


def _brute(prev: MetadataImage, image: MetadataImage) -> tuple[dict, set, set]:
    before, after = _all_partitions(prev), _all_partitions(image)
    partitions = {tp: (before.get(tp), after.get(tp)) for tp in before.keys() | after.keys()
                  if before.get(tp) != after.get(tp)}
    configs = {name for (rtype, name) in prev.configs.keys() | image.configs.keys()
               if rtype == RESOURCE_TOPIC and prev.configs.get((rtype, name)) != image.configs.get((rtype, name))}
    brokers = {b for b in prev.brokers.keys() | image.brokers.keys() if prev.brokers.get(b) != image.brokers.get(b)}
    return partitions, configs, brokers


def _hosted(image: MetadataImage, node: int) -> dict:
    return {tp: v for tp, v in _all_partitions(image).items() if node in v[1].replicas}


def _valid(batches: list[list]) -> list[list]:
    """Drop what a controller never writes: a topic whose name or id is taken (the image keeps one topic per name)."""
    names: dict[str, bytes] = {}
    out = []
    for batch in batches:
        kept = []
        for r in batch:
            if isinstance(r, TopicRecord):
                if r.name in names or r.topic_id in names.values():
                    continue
                names[r.name] = r.topic_id
            elif isinstance(r, RemoveTopicRecord):
                names = {n: tid for n, tid in names.items() if tid != r.topic_id}
            kept.append(r)
        out.append(kept)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_records, max_size=6), min_size=1, max_size=8))
def test_the_identity_diff_is_the_brute_force_diff(batches):
    prev = MetadataImage()
    for i, batch in enumerate(_valid(batches)):
        image = prev.apply(batch, i)
        diff = diff_images(prev, image)
        partitions, configs, brokers = _brute(prev, image)
        got = {tp: ((c.old_topic_id, c.old) if c.old is not None else None,
                    (c.new_topic_id, c.new) if c.new is not None else None) for tp, c in diff.partitions.items()}
        assert got == partitions
        assert diff.topic_configs == configs and diff.brokers == brokers
        for node in NODES:
            was, now = _hosted(prev, node), _hosted(image, node)
            local = diff.local_changes(node)
            assert local.deletes == {tp for tp, (tid, _) in was.items() if tp not in now or now[tp][0] != tid}
            changed = {tp for tp, v in now.items() if was.get(tp) != v}
            assert set(local.leaders) == {tp for tp in changed if now[tp][1].leader == node}
            assert set(local.followers) == {tp for tp in changed if now[tp][1].leader != node}
            assert all(local.leaders[tp] is now[tp][1] for tp in local.leaders)
        prev = image
