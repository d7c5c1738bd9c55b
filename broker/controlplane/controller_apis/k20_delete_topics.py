"""DeleteTopics on the controller (ReplicationControlManager.deleteTopics): v6 names topics by name or id;
UNKNOWN_TOPIC_OR_PARTITION for unknown names, UNKNOWN_TOPIC_ID for unknown ids.

Authorized as the request's principal (ControllerApis.deleteTopics): DELETE on the cluster allows every topic,
else DELETE on each. A topic named by a principal that may not DESCRIBE it is TOPIC_AUTHORIZATION_FAILED whether
it exists or not (its existence is not revealed); one it may describe but not delete is TOPIC_AUTHORIZATION_FAILED
too (one it may describe that does not exist: UNKNOWN_TOPIC_OR_PARTITION); an id that resolves to a topic it may
not delete is answered without the name unless it may describe it."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.acls import AclOperation, ResourceType
from cluster.controller import ControllerResult
from protocol.errors import ErrorCode
from protocol.generated.messages import DeleteTopicsRequest, DeleteTopicsResponse
from protocol.generated.messages.delete_topics_response import DeletableTopicResult
from protocol.message import ZERO_UUID

API_KEY = 20
VERSIONS = (1, 6)


def handle(cctx: ControllerContext, req: DeleteTopicsRequest) -> ControllerResult:
    if cctx.version >= 6:
        names = [t.name for t in req.topics if t.name is not None]
        ids = [t.topic_id for t in req.topics if t.name is None]
    else:
        names, ids = list(req.topic_names), []
    # the names to authorize: those given, and those the known ids resolve to
    by_id = {tid: t.name for tid in ids if (t := cctx.image.topics_by_id.get(tid)) is not None}
    wanted = set(names) | set(by_id.values())
    if cctx.authorize_cluster(AclOperation.DELETE, log_if_denied=False):
        describable = deletable = wanted
    else:
        describable = cctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, wanted)
        deletable = cctx.filter_authorized(AclOperation.DELETE, ResourceType.TOPIC, wanted)
    refused = []
    passed = []  # the names the controller decides: deletable, or describable but unknown (it says so)
    for name in names:
        if name in deletable or (name in describable and cctx.image.topics_by_name.get(name) is None):
            passed.append(name)
        else:
            refused.append(DeletableTopicResult(name=name, topic_id=ZERO_UUID,
                                                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None))
    for tid in ids:
        name = by_id.get(tid)
        if name is not None and name not in deletable:
            refused.append(DeletableTopicResult(name=name if name in describable else None, topic_id=tid,
                                                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None))
    res = cctx.controller.delete_topics(cctx.image, passed,
                                        [tid for tid in ids if tid not in by_id or by_id[tid] in deletable],
                                        cctx.apply_partition_change_quota)
    return ControllerResult(res.records, DeleteTopicsResponse(
        throttle_time_ms=cctx.mutation_throttle_ms, responses=refused + [
            DeletableTopicResult(name=name, topic_id=tid, error_code=code, error_message=msg)
            for name, tid, code, msg in res.response]))
