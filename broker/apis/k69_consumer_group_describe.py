"""ConsumerGroupDescribe: v0.

Behaviour (GroupMetadataManager.consumerGroupDescribe): state, group and assignment epochs, the
assignor, and every member's subscription (names and regex), current assignment and target
assignment with topic names; GROUP_ID_NOT_FOUND for unknown groups and for classic groups (admin
clients then fall back to DescribeGroups), INVALID_GROUP_ID for an empty id.
Authorization (KafkaApis.handleConsumerGroupDescribe, Kafka 4.0+ with KAFKA-18813): GROUP DESCRIBE per group,
the groups without it first with GROUP_AUTHORIZATION_FAILED; include_authorized_operations fills
authorized_operations of the groups described without error; with an authorizer, a group whose members'
assignment or target assignment names a topic the principal may not DESCRIBE is replaced by
TOPIC_AUTHORIZATION_FAILED without members.
"""

from __future__ import annotations

from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from protocol.errors import ErrorCode
from protocol.generated.messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from protocol.generated.messages.consumer_group_describe_response import DescribedGroup

API_KEY = 69
VERSIONS = (0, 0)

TOPICS_DENIED = "The group has described topic(s) that the client is not authorized to describe."


def _topics(group: DescribedGroup) -> set[str]:
    """The topics a described group's members are assigned or are to be assigned."""
    return {tp.topic_name for m in group.members for a in (m.assignment, m.target_assignment) if a is not None
            for tp in a.topic_partitions}


async def handle(ctx, req: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    groups = ctx.groups
    denied, out = [], []
    for gid in req.group_ids:
        if gid is not None and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            denied.append(DescribedGroup(group_id=gid, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, members=[]))
            continue
        if not gid:
            out.append(DescribedGroup(group_id=gid, error_code=ErrorCode.INVALID_GROUP_ID, members=[]))
            continue
        try:
            _, shard = await ctx.park(groups.shard_for(gid))
            d = shard.consumer_group_describe([gid])[0]
        except GroupError as exc:
            d = DescribedGroup(group_id=gid, error_code=exc.code, members=[])
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
    return ConsumerGroupDescribeResponse(groups=out)
