"""Metadata's topic entries are built once per (topic, live brokers) and shared (issue 31: a full Metadata at
10,000 partitions): an unchanged topic of a new image reuses its entry, a changed one or a change in who is live
builds a new one, and the cache stays bounded."""

from __future__ import annotations

import dataclasses

from broker.apis import k03_metadata
from broker.apis.k03_metadata import _TopicEntries, topic_response
from cluster.metadata_image import PartitionInfo, TopicInfo
from protocol.errors import ErrorCode


def _topic(name: str, leader: int = 1, isr=(1, 2, 3), n: int = 3) -> TopicInfo:
    return TopicInfo(name, name.encode().ljust(16, b"\0")[:16],
                     {i: PartitionInfo(i, (1, 2, 3), isr, leader, 4, 7) for i in range(n)})


def test_an_entry_is_built_once_per_topic_and_live_set(monkeypatch):
    monkeypatch.setattr(k03_metadata, "_TOPIC_ENTRIES", _TopicEntries())
    a, b = _topic("a"), _topic("b", leader=2)
    live = frozenset({1, 2, 3})
    first = topic_response(a, live)
    assert topic_response(a, frozenset({1, 2, 3})) is first  # an equal live set: the same entry
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.offline_replicas)
            for p in first.partitions] == [(i, 1, 4, [1, 2, 3], [1, 2, 3], []) for i in range(3)]
    assert (first.name, first.topic_id, first.error_code) == ("a", a.topic_id, 0)

    # a new image: b's ISR changed (a new TopicInfo), a's did not (the same object)
    b2 = dataclasses.replace(b, partitions={**b.partitions, 0: dataclasses.replace(b.partitions[0], isr=(2,))})
    assert topic_response(a, live) is first
    assert topic_response(b2, live).partitions[0].isr_nodes == [2]
    assert topic_response(b, live).partitions[0].isr_nodes == [1, 2, 3]  # the old one is still its own entry

    # broker 1 fenced: its partitions have no leader to name
    fenced = topic_response(a, frozenset({2, 3}))
    assert fenced is not first
    assert [(p.error_code, p.leader_id, p.offline_replicas) for p in fenced.partitions] == [
        (ErrorCode.LEADER_NOT_AVAILABLE, -1, [1])] * 3


def test_the_cache_is_bounded_and_keeps_the_entries_built_last():
    entries = _TopicEntries()
    live = frozenset({1})
    topics = [_topic(f"t{i}", n=1) for i in range(3000)]
    for t in topics:
        entries.get(t, live)
    assert len(entries._entries) < 3000
    last = entries.get(topics[-1], live)
    assert entries.get(topics[-1], live) is last
    for _ in range(3):  # a steady set of 3,000 topics: after the cache has grown, no more rebuilds
        built = [entries.get(t, live) for t in topics]
    assert [entries.get(t, live) for t in topics] == built and all(
        a is b for a, b in zip(built, [entries.get(t, live) for t in topics]))


def test_a_large_full_metadata_is_built_and_encoded_off_the_loop_into_the_same_bytes(monkeypatch):
    """More than ``LARGE_PARTITIONS``: the handler answers pre-encoded parts, made in a thread, byte for byte
    what the ordinary path encodes."""
    import asyncio
    import threading
    import types

    from broker.apis.context import EncodedResponse
    from cluster.metadata_image import BrokerInfo, Endpoint, MetadataImage
    from protocol.connection import encode_response, parse_request
    from protocol.generated.api_keys import APIS
    from protocol.generated.messages import MetadataRequest, RequestHeader

    monkeypatch.setattr(k03_metadata, "_TOPIC_ENTRIES", _TopicEntries())
    topics = {f"t{i}": _topic(f"t{i}", leader=1 + i % 3, n=50) for i in range(60)}  # 3,000 partitions
    brokers = {i: BrokerInfo(i, bytes(16), 5, (Endpoint("PLAINTEXT", "127.0.0.1", 9090 + i, 0),), None, i == 3)
               for i in (1, 2, 3)}
    image = MetadataImage(offset=9, topics_by_name=topics,
                          topics_by_id={t.topic_id: t for t in topics.values()}, brokers=brokers)
    header = RequestHeader(MetadataRequest.API_KEY, 12, 7, "c").encode(APIS[3].request_header_version(12))
    request = parse_request(header + MetadataRequest(topics=None).encode(12))
    ctx = types.SimpleNamespace(image=image, version=12, node_id=1, listener="PLAINTEXT", cluster_id="cid",
                                request=request, replicas=types.SimpleNamespace(loading=False, offline_partitions={}),
                                handles=types.SimpleNamespace(authorizer=None))
    threads = []
    real_encode = k03_metadata.encode_response

    def encode_noting_thread(*args):
        threads.append(threading.current_thread())
        return real_encode(*args)

    monkeypatch.setattr(k03_metadata, "encode_response", encode_noting_thread)
    large = asyncio.run(k03_metadata.handle(ctx, request.decode_body()))
    assert isinstance(large, EncodedResponse) and threads and threads[0] is not threading.main_thread()

    monkeypatch.setattr(k03_metadata, "LARGE_PARTITIONS", 10**9)
    ordinary = asyncio.run(k03_metadata.handle(ctx, request.decode_body()))
    assert b"".join(large.parts) == b"".join(encode_response(request, ordinary))
    assert len(ordinary.topics) == 60 and [b.node_id for b in ordinary.brokers] == [1, 2]
    assert {p.error_code for t in ordinary.topics for p in t.partitions if t.partitions[0].leader_id == -1} == {
        ErrorCode.LEADER_NOT_AVAILABLE}  # broker 3 is fenced: its partitions name no leader
