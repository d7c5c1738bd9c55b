"""DeleteTopics on the controller (ReplicationControlManager.deleteTopics): v6 names topics by name or id;
UNKNOWN_TOPIC_OR_PARTITION for unknown names, UNKNOWN_TOPIC_ID for unknown ids."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from protocol.generated.messages import DeleteTopicsRequest, DeleteTopicsResponse
from protocol.generated.messages.delete_topics_response import DeletableTopicResult

API_KEY = 20
VERSIONS = (1, 6)


def handle(cctx: ControllerContext, req: DeleteTopicsRequest) -> ControllerResult:
    if cctx.version >= 6:
        names = [t.name for t in req.topics if t.name is not None]
        ids = [t.topic_id for t in req.topics if t.name is None]
    else:
        names, ids = list(req.topic_names), []
    res = cctx.controller.delete_topics(cctx.image, names, ids)
    return ControllerResult(res.records, DeleteTopicsResponse(responses=[
        DeletableTopicResult(name=name, topic_id=tid, error_code=code, error_message=msg)
        for name, tid, code, msg in res.response]))
