"""The ``share.version`` gate (KIP-932): share groups are on from a finalized ``share.version`` of 1.

Kafka 4.2's KafkaApis answers the client-facing share APIs with UNSUPPORTED_VERSION in each request's
``getErrorResponse`` shape while ``isShareGroupProtocolEnabled`` is false (ShareGroupHeartbeat, ShareGroupDescribe,
ShareFetch, ShareAcknowledge, Describe/Alter/DeleteShareGroupOffsets), before any authorization. The share-state
RPCs between brokers (83-87) are not gated: nothing reaches the persister without ShareFetch or ShareAcknowledge.
ApiVersions still lists the share APIs at level 0, as Kafka's does (its ApiVersionsResponse filters only the
telemetry APIs), which is how a 4.1+ client tells "share groups disabled" (an UNSUPPORTED_VERSION answer) from
"broker too old" (no API). Dispatch applies the gate by API key, so a handler added for any key below is gated
without code of its own.
"""

from __future__ import annotations

from protocol.errors import MESSAGES, ErrorCode
from protocol.generated import messages as m
from protocol.generated.messages import describe_share_group_offsets_response as dsgo
from protocol.generated.messages import share_group_describe_response as sgd
from protocol.message import Message

FEATURE = "share.version"
SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 77, 78, 79
DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS = 90, 91, 92
GATED_KEYS = frozenset({SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE,
                        DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS})


def share_groups_enabled(features) -> bool:
    """ShareVersion.supportsShareGroups of the finalized features (absent: level 0)."""
    return int(features.get(FEATURE, 0)) >= 1


def unsupported_version(request: Message) -> Message:
    """``request.getErrorResponse(UNSUPPORTED_VERSION)``: the answer to a gated API while share groups are off."""
    code = ErrorCode.UNSUPPORTED_VERSION
    message = MESSAGES.get(code)
    key = request.API_KEY
    if key == SHARE_GROUP_HEARTBEAT:
        return m.ShareGroupHeartbeatResponse(error_code=code)
    if key == SHARE_GROUP_DESCRIBE:  # every requested group at the error (getErrorDescribedGroupList)
        return m.ShareGroupDescribeResponse(groups=[sgd.DescribedGroup(group_id=g, error_code=code,
                                                                       error_message=message)
                                                    for g in request.group_ids])
    if key == SHARE_FETCH:  # ShareFetchResponse.of(error, ...): the top-level error, no partitions
        return m.ShareFetchResponse(error_code=code)
    if key == SHARE_ACKNOWLEDGE:
        return m.ShareAcknowledgeResponse(error_code=code)
    if key == DESCRIBE_SHARE_GROUP_OFFSETS:  # every group at the error, with no partitions
        return m.DescribeShareGroupOffsetsResponse(groups=[
            dsgo.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, error_code=code, error_message=message)
            for g in request.groups])
    if key == ALTER_SHARE_GROUP_OFFSETS:
        return m.AlterShareGroupOffsetsResponse(error_code=code, error_message=message)
    if key == DELETE_SHARE_GROUP_OFFSETS:
        return m.DeleteShareGroupOffsetsResponse(error_code=code, error_message=message)
    raise KeyError(f"api key {key} is not a share API")
