"""DeleteTopics: v1-6 (v6 names topics by name or id).

Behaviour: UNKNOWN_TOPIC_OR_PARTITION for unknown names, UNKNOWN_TOPIC_ID for unknown ids; the topic's
records and configs leave the metadata image and its partition directories are renamed ``-delete``
and removed after ``file.delete.delay.ms``.
"""

from __future__ import annotations

from protocol.generated.messages import DeleteTopicsRequest, DeleteTopicsResponse
from protocol.generated.messages.delete_topics_response import DeletableTopicResult

API_KEY = 20
VERSIONS = (1, 6)


async def handle(ctx, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    broker = ctx.broker
    if ctx.version >= 6:
        names = [t.name for t in req.topics if t.name is not None]
        ids = [t.topic_id for t in req.topics if t.name is None]
    else:
        names, ids = list(req.topic_names), []
    res = await broker.decide(lambda image: broker.controller.delete_topics(image, names, ids))
    return DeleteTopicsResponse(responses=[
        DeletableTopicResult(name=name, topic_id=tid, error_code=code, error_message=msg)
        for name, tid, code, msg in res.response])
