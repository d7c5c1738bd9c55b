"""ShareGroupDescribe: v1 (KIP-932, Kafka 4.1+).

Behaviour (GroupMetadataManager.shareGroupDescribe): state, group and assignment epochs, the assignor (``simple``)
and every member's rack, client, subscription and assignment with topic names; GROUP_ID_NOT_FOUND for an unknown
group or a group of another type, INVALID_GROUP_ID for an empty id; UNSUPPORTED_VERSION for every group while
``share.version`` is 0 (broker/apis/share_gate.py).
Authorization (KafkaApis.handleShareGroupDescribe, with KAFKA-18817): GROUP DESCRIBE per group, the groups without
it first with GROUP_AUTHORIZATION_FAILED; include_authorized_operations fills authorized_operations of the groups
described without error; with an authorizer, a group whose members' assignments name a topic the principal may not
DESCRIBE is replaced by TOPIC_AUTHORIZATION_FAILED without members, as ConsumerGroupDescribe.
"""

from __future__ import annotations

from broker.apis.k69_consumer_group_describe import TOPICS_DENIED
from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from protocol.errors import ErrorCode
from protocol.generated.messages import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from protocol.generated.messages.share_group_describe_response import DescribedGroup

API_KEY = 77
VERSIONS = (1, 1)


def _topics(group: DescribedGroup) -> set[str]:
    return {tp.topic_name for m in group.members if m.assignment is not None
            for tp in m.assignment.topic_partitions}


async def handle(ctx, req: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    denied, out = [], []
    for gid in req.group_ids:
        if gid is not None and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            denied.append(DescribedGroup(group_id=gid, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, members=[]))
            continue
        if not gid:
            out.append(DescribedGroup(group_id=gid, error_code=ErrorCode.INVALID_GROUP_ID, members=[]))
            continue
        try:
            _, shard = await ctx.park(ctx.groups.shard_for(gid))
            d = shard.share_group_describe([gid])[0]
        except GroupError as exc:
            d = DescribedGroup(group_id=gid, error_code=exc.code, error_message=exc.message, members=[])
        if req.include_authorized_operations and not d.error_code:
            d.authorized_operations = ctx.authorized_operations(ResourceType.GROUP, gid)
        out.append(d)
    out = denied + out
    if ctx.handles.authorizer is not None:  # clients may not see topics they are not authorized to describe
        describable = ctx.filter_authorized(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                            set().union(*(_topics(d) for d in out)))
        out = [DescribedGroup(group_id=d.group_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                              error_message=TOPICS_DENIED, members=[])
               if not _topics(d) <= describable else d for d in out]
    return ShareGroupDescribeResponse(groups=out)
