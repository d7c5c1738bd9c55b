"""Metadata: v0-13 (v0 kept for old kafka-python, as Kafka 4.x does).

Behaviour: lists this broker (advertised listener), the cluster id and the controller.
Topics: none exist until the data path lands, so each named topic is UNKNOWN_TOPIC_OR_PARTITION
(UNKNOWN_TOPIC_ID when asked by id, v10+), and a null/empty list returns no topics.
Not implemented yet: topic creation, auto-creation, authorized operations (-2147483648 = not requested).
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.generated.messages import MetadataRequest, MetadataResponse
from protocol.generated.messages.metadata_response import MetadataResponseBroker, MetadataResponseTopic
from protocol.message import ZERO_UUID

API_KEY = 3
VERSIONS = (0, 13)


async def handle(ctx, req: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    ep = broker.advertised_endpoint(ctx.listener)
    topics = []
    for t in req.topics or ():
        if t.name is None:
            topics.append(MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=t.topic_id))
        else:
            topics.append(MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=t.name,
                                                topic_id=ZERO_UUID))
    return MetadataResponse(
        brokers=[MetadataResponseBroker(broker.node_id, ep.host, ep.port, None)],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
    )
