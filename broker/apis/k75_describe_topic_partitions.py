"""DescribeTopicPartitions: v0 (KIP-966), as Kafka 4.x's DescribeTopicPartitionsRequestHandler and
KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse answer it.

Behaviour:
* topics: an empty list means every topic in the image (internal ones included, flagged is_internal:
  with no authorizer every topic may be described); otherwise the named topics, de-duplicated. Only
  names >= the cursor's topic name are considered; they are answered sorted by name;
* paging: at most ``max(min(max.request.partition.size.limit, response_partition_limit), 1)``
  partitions. The cursor's topic starts at the cursor's partition index, every later topic at 0. When a
  topic's partitions do not fit, the answer ends with that topic and ``next_cursor`` = (topic, first
  partition left out); when the limit is used up exactly and more topics follow, ``next_cursor`` =
  (next topic, 0) -- even if that topic does not exist (Kafka does the same);
* named topics absent from the image: UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION for an
  illegal name (zero topic id, no partitions, is_internal by name); these use none of the limit. An
  all-topics request never reports errors;
* bad input (Kafka throws InvalidRequestException; KafkaApis.handle logs it and answers the request's
  getErrorResponse): a cursor with a negative partition index, or a cursor naming a topic absent from a
  non-empty request topic list, is answered with every requested topic (as sent, in request order) at
  INVALID_REQUEST, zero id, no partitions and no cursor -- for an all-topics request that is an empty
  topic list. A cursor topic that merely does not exist in the cluster is valid;
* partitions: error code 0; leader id when the leader is registered with an endpoint on the request's
  listener, else -1 (Kafka does not look at fencing for the leader); replicas and ISR unfiltered;
  offline replicas: not registered, fenced, without this listener, or on an offline log dir. While this
  node's logs are still loading it counts as fenced (as a starting Kafka broker is) and leads nothing; a
  partition whose log is offline here (KAFKA_STORAGE_ERROR) has this node among its offline replicas, not
  leading, as a replica on an offline log dir in Kafka;
* eligible_leader_replicas / last_known_elr: [] (Kafka answers the partition's ELR arrays, empty when
  eligible leader replicas are not enabled; the metadata image carries no ELR, so they are always empty);
* authorization (DescribeTopicPartitionsRequestHandler, with an authorizer): each name, in sorted order as the page
  is filled, needs DESCRIBE on the topic; an all-topics request leaves the others out, a named one answers them
  TOPIC_AUTHORIZATION_FAILED (zero id, no partitions, not internal, operations not set) after the page's topics.
  As in Kafka, the names are asked lazily: those past a full page are neither asked about nor answered;
* topic_authorized_operations: the bit field of the TOPIC operations the principal may do (AuthHelper
  .authorizedOperations), for every topic of a normal answer, error topics included; with no authorizer every
  operation supported on topics (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS =
  3576); the request has no flag to ask for it. Error responses to bad input keep the schema default -2147483648.
"""

from __future__ import annotations

import logging
from typing import Container, Iterable

from cluster.acls import AclOperation, ResourceType
from cluster.controller import validate_topic_name
from cluster.metadata_image import INTERNAL_TOPICS, MetadataImage, TopicInfo
from protocol.errors import ErrorCode
from protocol.generated.messages import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from protocol.generated.messages.describe_topic_partitions_response import (
    Cursor,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from protocol.message import ZERO_UUID

API_KEY = 75
VERSIONS = (0, 0)

log = logging.getLogger("odradek.describe_topic_partitions")

PARTITION_LIMIT_CONFIG = "max.request.partition.size.limit"
PARTITION_LIMIT_DEFAULT = 2000  # ServerConfigs.MAX_REQUEST_PARTITION_SIZE_LIMIT_DEFAULT
NO_LEADER = -1

# AclEntry.supportedOperations(TOPIC) as Utils.to32BitField: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7,
# DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


class InvalidRequest(Exception):
    """Kafka's InvalidRequestException: the whole request is answered with INVALID_REQUEST."""


def _partitions(image: MetadataImage, t: TopicInfo, listener: str, start: int, max_count: int,
                node_id: int, loading: bool, offline_here: Container[tuple[str, int]] = ()
                ) -> tuple[list[DescribeTopicPartitionsResponsePartition], int]:
    """Partitions ``start`` .. ``start + max_count`` (exclusive) of ``t`` and the next index left out (-1: none)."""
    count = len(t.partitions)
    upper = min(count, start + max_count)
    next_index = upper if upper < count else -1
    out = []
    for pid in range(start, upper):
        p = t.partitions.get(pid)
        if p is None:
            log.warning("The partition %d does not exist for %s", pid, t.name)
            continue
        leader = image.brokers.get(p.leader)
        has_leader = leader is not None and leader.endpoint(listener) is not None
        # fenced while its logs load, or its log offline here: the controller would have moved leadership
        down_here = loading or (t.name, pid) in offline_here
        if down_here and p.leader == node_id:
            has_leader = False
        offline = []
        for r in p.replicas:
            b = image.brokers.get(r)
            if (b is None or b.fenced or b.endpoint(listener) is None or r in p.offline_replicas
                    or (down_here and r == node_id)):
                offline.append(r)
        out.append(DescribeTopicPartitionsResponsePartition(
            error_code=0, partition_index=pid, leader_id=p.leader if has_leader else NO_LEADER,
            leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
            eligible_leader_replicas=[], last_known_elr=[], offline_replicas=offline))
    return out, next_index


def describe(image: MetadataImage, topics: Iterable[str], listener: str, start_index, limit: int,
             fetch_all: bool, node_id: int = -1, loading: bool = False,
             offline_here: Container[tuple[str, int]] = (), operations=lambda name: TOPIC_OPERATIONS
             ) -> DescribeTopicPartitionsResponse:
    """KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse over ``topics`` (sorted names, pulled one at a
    time); ``operations(name)``: the topic's authorized operations bit field."""
    remaining = limit
    result = DescribeTopicPartitionsResponse(topics=[])
    for name in topics:
        if remaining == 0:
            # the previous topics filled the page exactly: continue from the start of this one
            result.next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        t = image.topic(name)
        if t is not None:
            parts, next_index = _partitions(image, t, listener, start_index(name), remaining, node_id, loading,
                                            offline_here)
            result.topics.append(DescribeTopicPartitionsResponseTopic(
                error_code=0, name=name, topic_id=t.topic_id, is_internal=t.is_internal, partitions=parts,
                topic_authorized_operations=operations(name)))
            if next_index != -1:
                result.next_cursor = Cursor(topic_name=name, partition_index=next_index)
                break
            remaining -= len(parts)
        elif not fetch_all:
            error = (ErrorCode.INVALID_TOPIC_EXCEPTION if validate_topic_name(name) is not None
                     else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            result.topics.append(DescribeTopicPartitionsResponseTopic(
                error_code=error, name=name, topic_id=ZERO_UUID, is_internal=name in INTERNAL_TOPICS,
                partitions=[], topic_authorized_operations=operations(name)))
    return result


def _error_response(req: DescribeTopicPartitionsRequest, error: int) -> DescribeTopicPartitionsResponse:
    """DescribeTopicPartitionsRequest.getErrorResponse: every requested topic at ``error``."""
    return DescribeTopicPartitionsResponse(topics=[
        DescribeTopicPartitionsResponseTopic(error_code=error, name=t.name, topic_id=ZERO_UUID, is_internal=False,
                                             partitions=[])
        for t in req.topics])


def _select(image: MetadataImage, req: DescribeTopicPartitionsRequest) -> tuple[list[str], bool]:
    """The sorted names to answer and whether this is an all-topics request; raises InvalidRequest."""
    cursor = req.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not req.topics
    if fetch_all:
        names = {n for n in image.topics_by_name if n >= cursor_topic}
    else:
        names = {t.name for t in req.topics if t.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            raise InvalidRequest(
                f"DescribeTopicPartitionsRequest topic list should contain the cursor topic: {cursor.topic_name}")
    if cursor is not None and cursor.partition_index < 0:
        raise InvalidRequest("DescribeTopicPartitionsRequest cursor partition must be valid: "
                             f"Cursor(topicName='{cursor.topic_name}', partitionIndex={cursor.partition_index})")
    return sorted(names), fetch_all


async def handle(ctx, req: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    image = ctx.image
    try:
        names, fetch_all = _select(image, req)
    except InvalidRequest as exc:
        log.warning("Invalid DescribeTopicPartitions request from %s (client %s, connection %s): %s",
                    ctx.client_host, ctx.client_id, ctx.connection_id, exc)
        return _error_response(req, ErrorCode.INVALID_REQUEST)
    cursor = req.cursor
    cursor_topic = cursor.topic_name if cursor is not None else None
    cursor_index = cursor.partition_index if cursor is not None else 0
    configured = ctx.config.get(PARTITION_LIMIT_CONFIG, PARTITION_LIMIT_DEFAULT)
    limit = max(min(int(configured), req.response_partition_limit), 1)
    denied: list[DescribeTopicPartitionsResponseTopic] = []

    def describable(names: list[str]):
        """Kafka's lazily filtered stream: a name is asked about only when the page pulls it."""
        for name in names:
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                yield name
            elif not fetch_all:
                denied.append(DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID,
                    is_internal=False, partitions=[]))

    authorized = names if ctx.handles.authorizer is None else describable(names)
    response = describe(image, authorized, ctx.listener, lambda name: cursor_index if name == cursor_topic else 0,
                        limit, fetch_all, ctx.node_id, ctx.replicas.loading, ctx.replicas.offline_partitions,
                        lambda name: ctx.authorized_operations(ResourceType.TOPIC, name))
    response.topics.extend(denied)
    return response
