"""DeleteShareGroupOffsets: v0 (KIP-932, Kafka 4.1+).

Behaviour (GroupCoordinatorService.deleteShareGroupOffsets, GroupMetadataManager
.sharePartitionsEligibleForOffsetDeletion / completeDeleteShareGroupOffsets): an unknown group or one of another
type GROUP_ID_NOT_FOUND, a group with members NON_EMPTY_GROUP, an empty id INVALID_GROUP_ID (top-level); each
named topic whose share state is initialized (or being deleted) has it deleted through the share coordinators
(DeleteShareGroupState) and leaves the group's share-state metadata, so a later subscription initializes it anew
(``share.auto.offset.reset``); a topic without state, or unknown, UNKNOWN_TOPIC_OR_PARTITION. UNSUPPORTED_VERSION
while ``share.version`` is 0 (share_gate.py).
Authorization (KafkaApis.handleDeleteShareGroupOffsetsRequest): GROUP DELETE else GROUP_AUTHORIZATION_FAILED
top-level; per topic TOPIC READ else TOPIC_AUTHORIZATION_FAILED, listed first.
"""

from __future__ import annotations

import logging

from cluster.acls import AclOperation, ResourceType
from cluster.groups.group_classic import GroupError
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated.messages import DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse
from protocol.generated.messages import delete_share_group_offsets_response as dsgo

API_KEY = 92
VERSIONS = (0, 0)

log = logging.getLogger("odradek.groups")


def _error(code: int, message: str | None = None) -> DeleteShareGroupOffsetsResponse:
    return DeleteShareGroupOffsetsResponse(error_code=code, error_message=message or MESSAGES.get(ErrorCode(code)),
                                           responses=[])


async def handle(ctx, req: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    gid = req.group_id
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, gid):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not gid:
        log.info("DeleteShareGroupOffsets from %s refused: INVALID_GROUP_ID (an empty group id)", ctx.client_id)
        return _error(ErrorCode.INVALID_GROUP_ID)
    names = [t.topic_name for t in req.topics]
    readable = ctx.filter_authorized(AclOperation.READ, ResourceType.TOPIC, names)
    out = [dsgo.DeleteShareGroupOffsetsResponseTopic(
        topic_name=n, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        error_message=MESSAGES.get(ErrorCode.TOPIC_AUTHORIZATION_FAILED)) for n in names if n not in readable]
    try:
        code, message, topics = await ctx.park(
            ctx.groups.delete_share_group_offsets(gid, [n for n in names if n in readable]))
    except GroupError as exc:
        code, message = exc.code, exc.message
    if code:
        log.info("DeleteShareGroupOffsets of group %r from %s refused: %s %s", gid, ctx.client_id,
                 ErrorCode(code).name, message)
        return _error(code, message)
    return DeleteShareGroupOffsetsResponse(responses=out + topics)
