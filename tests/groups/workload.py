"""Shared pieces of the real-client group tests: topics, producing, reading __consumer_offsets back
with a plain consumer, and checking every stable generation's assignment."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.groups.group_records import UnknownRecordType, decode_record, parse_assignment
from protocol.generated.coordinator import GroupMetadataKey, OffsetCommitKey
from protocol.topics import GROUP_METADATA_TOPIC


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)[name]
    fut.result(timeout=15)


def produce(bootstrap: str, topic: str, start: int, n: int, partitions: int) -> list[tuple[int, int]]:
    """Produce values ``start..start+n-1`` round-robin over the partitions; returns (partition, offset)s."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    out = []

    def cb(err, msg):
        assert err is None, err
        out.append((msg.partition(), msg.offset()))

    for i in range(start, start + n):
        p.produce(topic, value=str(i).encode(), partition=i % partitions, on_delivery=cb)
    assert p.flush(15) == 0
    return out


def read_offsets_topic(bootstrap: str) -> list:
    """Every record of ``__consumer_offsets`` decoded with Kafka's key/value schemas, in offset order per
    partition: what Kafka's tooling would see."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets-reader-never-joins",
                  "enable.auto.commit": False})
    md = c.list_topics(GROUP_METADATA_TOPIC, timeout=10)
    parts = sorted(md.topics[GROUP_METADATA_TOPIC].partitions)
    ends = {p: c.get_watermark_offsets(TopicPartition(GROUP_METADATA_TOPIC, p), timeout=10)[1] for p in parts}
    c.assign([TopicPartition(GROUP_METADATA_TOPIC, p, 0) for p in parts if ends[p] > 0])
    records = []
    pos = {p: 0 for p in parts}
    deadline = time.monotonic() + 20
    while any(pos[p] < ends[p] for p in parts) and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        pos[m.partition()] = m.offset() + 1
        try:
            records.append((m.partition(), m.offset(), decode_record(m.key(), m.value())))
        except UnknownRecordType:
            pass
    c.close()
    assert all(pos[p] >= ends[p] for p in parts), "could not read __consumer_offsets to its end"
    return records


def generations(bootstrap: str, group: str) -> list[tuple[int, dict[str, set[tuple[str, int]]]]]:
    """(generation, member -> assigned partitions) of every GroupMetadata record with members that the
    coordinator stored for ``group`` (one per completed SyncGroup)."""
    out = []
    for _, _, r in read_offsets_topic(bootstrap):
        if isinstance(r.key, GroupMetadataKey) and r.key.group == group and r.value is not None and r.value.members:
            members = {}
            for m in r.value.members:
                a = parse_assignment(m.assignment) if m.assignment else None
                members[m.member_id] = {(t, p) for t, ps in (a.partitions if a else []) for p in ps}
            out.append((r.value.generation, members))
    return out


def check_generations(gens, topic: str, partitions: int) -> None:
    """At every stable generation the assignment is disjoint and covers every partition."""
    assert gens, "no stable generation was stored"
    want = {(topic, p) for p in range(partitions)}
    for gen, members in gens:
        seen: set = set()
        for mid, parts in members.items():
            assert not (seen & parts), f"generation {gen}: {mid} shares partitions {seen & parts}"
            seen |= parts
        assert seen == want, f"generation {gen}: assignment {sorted(seen)} does not cover {sorted(want)}"


def committed_offsets(bootstrap: str, group: str) -> dict:
    return {(r.key.topic, r.key.partition): r.value for _, _, r in read_offsets_topic(bootstrap)
            if isinstance(r.key, OffsetCommitKey) and r.key.group == group}


def check_exactly_once(consumed: list[tuple[int, int]], produced: list[tuple[int, int]]) -> None:
    dup = {x for x in consumed if consumed.count(x) > 1}
    assert not dup, f"records consumed more than once: {sorted(dup)[:10]}"
    assert sorted(consumed) == sorted(produced), (
        f"missing {sorted(set(produced) - set(consumed))[:10]}, extra {sorted(set(consumed) - set(produced))[:10]}")


def check_at_least_once(consumed: list[tuple[int, int]], produced: list[tuple[int, int]],
                        uncommitted: list[tuple[int, int]], rewound: list[tuple[int, int]] = ()) -> None:
    """Nothing lost, and a record is seen twice only if its commit failed the first time (or the client
    itself rewound a partition it kept owning: ``Runner.rewound``).

    With the consumer protocol a commit carrying a member epoch that was just bumped is rejected
    (STALE_MEMBER_EPOCH, exactly as Kafka's ConsumerGroup.validateMemberEpoch), so a record processed
    right then is redelivered to its next owner: at-least-once, never a silent duplicate or a loss."""
    dup = {x for x in consumed if consumed.count(x) > 1}
    explained = set(uncommitted) | set(rewound)
    assert dup <= explained, f"duplicates whose commit had succeeded: {sorted(dup - explained)[:10]}"
    assert set(consumed) == set(produced), (
        f"missing {sorted(set(produced) - set(consumed))[:10]}, extra {sorted(set(consumed) - set(produced))[:10]}")


def kp_committed(bootstrap: str, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    """The group's committed offsets and metadata through kafka-python's admin client (OffsetFetch).
    (confluent-kafka-python reads commit metadata as a NUL-terminated C string, so it can only read
    back metadata librdkafka wrote itself, with its trailing NUL.)"""
    from kafka import KafkaAdminClient

    ka = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        res = ka.list_group_offsets(group)
        res = res.get(group, res) if isinstance(res, dict) and group in res else res
        return {(tp.topic, tp.partition): (om.offset, om.metadata) for tp, om in res.items()}
    finally:
        ka.close()
