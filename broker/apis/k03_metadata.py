"""Metadata: v0-13 (v0 kept for old kafka-python, as Kafka 4.x does).

Behaviour (KafkaApis.handleTopicMetadataRequest, KRaft):
* brokers: every registered, unfenced broker at its endpoint for the request's listener;
* topics: all (null list; v0's empty list also means all) or the named / id'd ones (v10+ ids), each once;
  unknown names are UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID, illegal names
  INVALID_TOPIC_EXCEPTION;
* auto-creation when ``auto.create.topics.enable`` and (v4+) ``allow_auto_topic_creation``: the topic is
  created with the broker defaults and answered LEADER_NOT_AVAILABLE in that response, as Kafka does
  while creation propagates; internal topics are never auto-created here;
* a partition whose log is offline on this broker (KAFKA_STORAGE_ERROR to Produce and Fetch) is answered as
  Kafka answers one whose replica is on an offline log dir: this broker among the offline replicas and, where it
  leads, no leader (LEADER_NOT_AVAILABLE);
* authorization (KafkaApis.handleTopicMetadataRequest, with an authorizer): only topics the principal may DESCRIBE
  are answered; an all-topics request leaves the others out (asked without a denial log line), a named one answers
  them TOPIC_AUTHORIZATION_FAILED (name and zero id; asked by id: no name and the id, ids not being sensitive), with
  no look at whether they exist. A described topic that does not exist is auto-created only with CREATE on the
  cluster (asked without a denial log line) or on the topic, else TOPIC_AUTHORIZATION_FAILED (zero id). Kafka's
  order: unknown ids, the answered topics, those denied CREATE, those denied DESCRIBE;
* authorized operations (v8+, as KafkaApis computes them with or without an authorizer; -2147483648 when not asked
  for): ``include_topic_authorized_operations`` sets each answered topic's bit field of the TOPIC operations the
  principal may do (AuthHelper.authorizedOperations; every one without an authorizer), not the denied entries';
  ``include_cluster_authorized_operations`` (v8-10 only; v11 dropped it for DescribeCluster) sets the CLUSTER
  operations' bit field when the principal may DESCRIBE the cluster, else 0.
"""

from __future__ import annotations

import asyncio
import random
from typing import Mapping

from broker.apis.context import EncodedResponse
from cluster.acls import CLUSTER_NAME, AclOperation, ResourceType
from cluster.controller import validate_topic_name
from cluster.metadata_image import MetadataImage, TopicInfo
from protocol.errors import ErrorCode
from protocol.generated.messages import CreateTopicsRequest, MetadataRequest, MetadataResponse
from protocol.generated.messages.create_topics_request import CreatableTopic
from protocol.generated.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from protocol.connection import encode_response
from protocol.message import ZERO_UUID
from protocol.topics import INTERNAL_TOPICS

API_KEY = 3
VERSIONS = (0, 13)
# a full Metadata of more partitions is built and encoded in a thread: ~20 ms per thousand partitions changed since
# the last one (every entry while ISRs change by the thousand) would otherwise hold every other request up
LARGE_PARTITIONS = 2000


def brokers_for(image: MetadataImage, listener: str) -> list[MetadataResponseBroker]:
    out = []
    for b in image.brokers.values():
        ep = b.endpoint(listener)
        if ep is not None and not b.fenced:
            out.append(MetadataResponseBroker(b.node_id, ep.host, ep.port, b.rack))
    return out


_RANDOM = random.SystemRandom()


def controller_id_for(brokers: list, node_id: int) -> int:
    """The "controller" a KRaft broker names to clients (KIP-590: clients cannot reach controller-only nodes,
    and any broker forwards admin requests to the active controller). Kafka names a random alive broker
    (``KRaftMetadataCache.getRandomAliveBrokerId``); we name this broker when it is listed, since the client
    has just reached it, and a random listed one otherwise. A random pick can name a broker killed moments
    ago whose session has not yet expired, and librdkafka's admin client then waits on that broker until its
    next metadata refresh. -1 (NO_CONTROLLER_ID) when no broker is listed."""
    if any(b.node_id == node_id for b in brokers):
        return node_id
    return _RANDOM.choice(brokers).node_id if brokers else -1


def live_brokers(image: MetadataImage, node_id: int = -1, loading: bool = False) -> frozenset:
    """The brokers a topic entry may name as leaders: unfenced ones, but this one while its logs load."""
    live = frozenset(b.node_id for b in image.brokers.values() if not b.fenced)
    return live - {node_id} if loading else live


def topic_response(t: TopicInfo, live: frozenset) -> MetadataResponseTopic:
    """The topic's entry as this broker answers it (shared between responses: never changed once built)."""
    return _TOPIC_ENTRIES.get(t, live)


def _build_topic_response(t: TopicInfo, live: frozenset) -> MetadataResponseTopic:
    parts = []
    for p in t.partitions.values():
        leader_ok = p.leader in live
        parts.append(MetadataResponsePartition(
            error_code=0 if leader_ok else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=p.partition, leader_id=p.leader if leader_ok else -1, leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
            offline_replicas=[r for r in p.replicas if r not in live]))
    return MetadataResponseTopic(error_code=0, name=t.name, topic_id=t.topic_id, is_internal=t.is_internal,
                                 partitions=parts)


class _TopicEntries:
    """Built topic entries by (topic, live brokers): an entry depends on nothing else, and images share the
    ``TopicInfo`` of topics a change did not touch, so a full Metadata of thousands of partitions builds only
    what changed since the last one. An entry keeps its ``TopicInfo`` alive (its id is not reused while kept);
    entries of replaced topics go once they outnumber the live ones."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, frozenset], tuple[TopicInfo, MetadataResponseTopic]] = {}
        self._limit = 1024

    def get(self, t: TopicInfo, live: frozenset) -> MetadataResponseTopic:
        key = (id(t), live)
        entry = self._entries.get(key)
        if entry is None:
            if len(self._entries) >= self._limit:
                self._prune()
            entry = self._entries[key] = (t, _build_topic_response(t, live))
        return entry[1]

    def _prune(self) -> None:
        """Keep the newest half (dicts keep insertion order: the entries built last)."""
        keep = list(self._entries.items())[len(self._entries) // 2:]
        self._entries = dict(keep)
        self._limit = max(1024, 4 * len(keep))


_TOPIC_ENTRIES = _TopicEntries()


def with_offline_logs(entry: MetadataResponseTopic, offline: Mapping[tuple[str, int], str],
                      node_id: int) -> MetadataResponseTopic:
    """``entry`` with this node's offline logs shown as Kafka shows replicas on an offline log dir
    (KRaftMetadataCache.isReplicaInOfflineDir): the node among the offline replicas and, where it leads, no leader
    (Kafka's controller takes leadership off such a replica; with no other in-sync replica none is left). Kafka
    reports whole dirs to its controller; this node's offline logs are its own, so only its own answers show them.
    A copy: built entries are shared."""
    parts = []
    for p in entry.partitions:
        if (entry.name, p.partition_index) in offline and node_id in p.replica_nodes:
            leads = p.leader_id == node_id
            p = MetadataResponsePartition(
                error_code=ErrorCode.LEADER_NOT_AVAILABLE if leads else p.error_code,
                partition_index=p.partition_index, leader_id=-1 if leads else p.leader_id,
                leader_epoch=p.leader_epoch, replica_nodes=p.replica_nodes, isr_nodes=p.isr_nodes,
                offline_replicas=p.offline_replicas if node_id in p.offline_replicas
                else [*p.offline_replicas, node_id])
        parts.append(p)
    return MetadataResponseTopic(error_code=entry.error_code, name=entry.name, topic_id=entry.topic_id,
                                 is_internal=entry.is_internal, partitions=parts,
                                 topic_authorized_operations=entry.topic_authorized_operations)


async def handle(ctx, req: MetadataRequest) -> MetadataResponse:
    image = ctx.image
    version = ctx.version
    all_topics = req.topics is None or (version == 0 and not req.topics)
    topics: list[MetadataResponseTopic] = []
    live = live_brokers(image, ctx.node_id, ctx.replicas.loading)
    large = False
    authorizer = ctx.handles.authorizer
    if all_topics:
        chosen = None
        if authorizer is not None:  # topics not describable are left out, their denials not logged
            chosen = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, image.topics_by_name,
                                           log_if_denied=False)
        large = sum(len(t.partitions) for t in image.topics_by_name.values()) >= LARGE_PARTITIONS
        if large:  # the images and the built entries are never changed: safe to read and share from a thread
            topics = await asyncio.to_thread(_all_topic_responses, image, live, chosen)
        else:
            topics = _all_topic_responses(image, live, chosen)
    else:
        topics = await _named_topics(ctx, req, image, live)
    if version >= 8 and req.include_topic_authorized_operations:
        topics = [_with_operations(t, ctx.authorized_operations(ResourceType.TOPIC, t.name))
                  if t.error_code != ErrorCode.TOPIC_AUTHORIZATION_FAILED and t.name is not None else t
                  for t in topics]
    offline = ctx.replicas.offline_partitions
    if offline:
        names = {name for name, _ in offline}
        topics = [with_offline_logs(t, offline, ctx.node_id) if t.name in names else t for t in topics]
    brokers = brokers_for(image, ctx.listener)
    if all(b.node_id != ctx.node_id for b in brokers):
        # this broker is not registered or not unfenced yet (it serves while it starts, answering retriable errors):
        # a client talking to it must still find a broker to send its requests to, or librdkafka's admin client
        # waits for a controller until its timeout
        ep = ctx.handles.advertised_endpoint(ctx.listener)
        brokers.append(MetadataResponseBroker(ctx.node_id, ep.host, ep.port, ctx.config.get("broker.rack")))
    response = MetadataResponse(
        brokers=brokers,
        cluster_id=ctx.cluster_id,
        controller_id=controller_id_for(brokers, ctx.node_id),
        topics=topics,
    )
    if 8 <= version <= 10 and req.include_cluster_authorized_operations:
        response.cluster_authorized_operations = (
            ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
            if ctx.authorize_cluster(AclOperation.DESCRIBE) else 0)
    if large:
        return EncodedResponse(await asyncio.to_thread(encode_response, ctx.request, response))
    return response


def _all_topic_responses(image: MetadataImage, live: frozenset, chosen=None) -> list[MetadataResponseTopic]:
    """Every topic, or those named in ``chosen``."""
    return [topic_response(t, live) for t in image.topics_by_name.values() if chosen is None or t.name in chosen]


def _with_operations(entry: MetadataResponseTopic, operations: int) -> MetadataResponseTopic:
    """A copy of ``entry`` (built entries are shared) with its topic_authorized_operations."""
    return MetadataResponseTopic(error_code=entry.error_code, name=entry.name, topic_id=entry.topic_id,
                                 is_internal=entry.is_internal, partitions=entry.partitions,
                                 topic_authorized_operations=operations)


def _denied(name: str | None, topic_id: bytes = ZERO_UUID, is_internal: bool = False) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=topic_id,
                                 is_internal=is_internal)


async def _named_topics(ctx, req: MetadataRequest, image: MetadataImage, live: frozenset
                        ) -> list[MetadataResponseTopic]:
    """The named (or id'd) topics' entries, in Kafka's order when an authorizer denies some (see the docstring)."""
    version = ctx.version
    auto = bool(ctx.config.get("auto.create.topics.enable")) and (version < 4 or req.allow_auto_topic_creation)
    # which names the request's topics resolve to (None: an unknown id); each name or id once (Kafka's sets)
    resolved = []
    seen = set()
    for rt in req.topics:
        key = rt.name if rt.name is not None else rt.topic_id
        if key in seen:
            continue
        seen.add(key)
        if rt.name is None:
            t = image.topics_by_id.get(rt.topic_id)
            resolved.append((rt, t.name if t is not None else None))
        else:
            resolved.append((rt, rt.name))
    describable = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                        [name for _, name in resolved if name is not None])
    creatable = None  # the missing topics that may be auto-created (None: all; CREATE on the cluster or no authorizer)
    if auto and ctx.handles.authorizer is not None:
        missing = {name for _, name in resolved if name is not None and name in describable
                   and image.topic(name) is None}
        if missing and not ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False):
            creatable = ctx.filter_authorized(AclOperation.CREATE, ResourceType.TOPIC, missing)
    unknown_ids: list[MetadataResponseTopic] = []
    topics: list[MetadataResponseTopic] = []
    denied_create: list[MetadataResponseTopic] = []
    denied_describe: list[MetadataResponseTopic] = []
    to_create = []
    for rt, name in resolved:
        if name is None:
            unknown_ids.append(MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                                                     topic_id=rt.topic_id))
            continue
        if name not in describable:
            # do not disclose whether it exists; an id is not sensitive and is answered back
            denied_describe.append(_denied(None, rt.topic_id) if rt.name is None else _denied(name))
            continue
        t = image.topic(name)
        if t is not None:
            topics.append(topic_response(t, live))
        elif auto and creatable is not None and name not in creatable:
            denied_create.append(_denied(name, is_internal=name in INTERNAL_TOPICS))
        elif validate_topic_name(name) is not None:
            topics.append(MetadataResponseTopic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name,
                                                topic_id=ZERO_UUID, is_internal=False))
        elif auto and name not in INTERNAL_TOPICS:
            to_create.append(name)
            topics.append(MetadataResponseTopic(error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=name,
                                                topic_id=ZERO_UUID, is_internal=False))
        else:
            topics.append(MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name,
                                                topic_id=ZERO_UUID, is_internal=False))
    if to_create:
        # AutoTopicCreationManager: a CreateTopics to the controller with the broker defaults (-1)
        await ctx.park(ctx.controller.call(CreateTopicsRequest(topics=[
            CreatableTopic(name=n, num_partitions=-1, replication_factor=-1) for n in dict.fromkeys(to_create)])))
    return unknown_ids + topics + denied_create + denied_describe
