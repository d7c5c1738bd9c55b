"""AlterShareGroupOffsets: v0 (KIP-932, Kafka 4.1+).

Behaviour (GroupCoordinatorService/GroupMetadataManager.alterShareGroupOffsets, 4.2 with KAFKA-19662 and the epoch
bump of KIP-932's Administration section, KAFKA-20910): the share group is created when it does not exist; a group
with members NON_EMPTY_GROUP, a group of another type GROUP_ID_NOT_FOUND, an empty id INVALID_GROUP_ID (all
top-level); unknown topics and partitions UNKNOWN_TOPIC_OR_PARTITION per partition. The group epoch is bumped and
becomes the partitions' new state epoch; the share coordinators initialize them at the given start offsets before
the answer (a partition's failure is its error). UNSUPPORTED_VERSION while ``share.version`` is 0 (share_gate.py).
Authorization (KafkaApis.handleAlterShareGroupOffsetsRequest): GROUP READ (the share group's OffsetCommit) else
GROUP_AUTHORIZATION_FAILED top-level; per topic TOPIC READ else TOPIC_AUTHORIZATION_FAILED, then an unknown topic
UNKNOWN_TOPIC_OR_PARTITION, both per partition and listed before the coordinator's topics.
"""

from __future__ import annotations

import logging

from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated.messages import AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse
from protocol.generated.messages import alter_share_group_offsets_response as asgo

API_KEY = 91
VERSIONS = (0, 0)

log = logging.getLogger("odradek.groups")


def _error(code: int, message: str | None = None) -> AlterShareGroupOffsetsResponse:
    return AlterShareGroupOffsetsResponse(error_code=code, error_message=message or MESSAGES.get(ErrorCode(code)),
                                          responses=[])


async def handle(ctx, req: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    gid = req.group_id
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, gid):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not gid:
        log.info("AlterShareGroupOffsets from %s refused: INVALID_GROUP_ID (an empty group id)", ctx.client_id)
        return _error(ErrorCode.INVALID_GROUP_ID)
    image = ctx.image
    readable = ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC, [t.topic_name for t in req.topics])
    refused, allowed = [], []
    for t in req.topics:
        code = (ErrorCode.TOPIC_AUTHORIZATION_FAILED if t.topic_name not in readable
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if image.topic(t.topic_name) is None else 0)
        if not code:
            allowed.append(t)
            continue
        info = image.topic(t.topic_name)
        refused.append(asgo.AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=info.topic_id if info is not None else bytes(16), partitions=[
                asgo.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index, error_code=code,
                                                             error_message=MESSAGES.get(code))
                for p in t.partitions]))
    try:
        resp = await ctx.park(ctx.groups.alter_share_group_offsets(gid, allowed))
    except GroupError as exc:
        log.info("AlterShareGroupOffsets of group %r from %s refused: %s %s", gid, ctx.client_id,
                 ErrorCode(exc.code).name, exc.message)
        return _error(exc.code, exc.message)
    resp.responses = refused + resp.responses
    return resp
