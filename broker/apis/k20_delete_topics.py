"""DeleteTopics: v1-6 (v6 names topics by name or id).

Behaviour: UNKNOWN_TOPIC_OR_PARTITION for unknown names, UNKNOWN_TOPIC_ID for unknown ids; the topic's
records and configs leave the metadata image and its partition directories are renamed ``-delete``
and removed after ``file.delete.delay.ms``.

Forwarded whole to the controller (broker/controller_apis/), as Kafka's ForwardingManager does.
"""

from __future__ import annotations

from protocol.generated.messages import DeleteTopicsRequest, DeleteTopicsResponse

API_KEY = 20
VERSIONS = (1, 6)


async def handle(ctx, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    return await ctx.controller.forward(ctx, req)
