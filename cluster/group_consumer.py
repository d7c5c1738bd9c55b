"""Consumer (KIP-848) groups: placeholder until the consumer protocol lands."""

from __future__ import annotations

from cluster.group_classic import GroupError
from protocol.errors import ErrorCode


class ConsumerGroupManager:
    def __init__(self, shard) -> None:
        self.shard = shard

    def maybe_delete_empty_consumer_group(self, group_id: str) -> None:
        return None

    def classic_join_to_consumer_group(self, group, ctx, req, token):
        raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

    def classic_sync_to_consumer_group(self, group, ctx, req, token):
        raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

    def classic_heartbeat_to_consumer_group(self, group, ctx, req):
        raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

    def classic_leave_to_consumer_group(self, group, ctx, req):
        raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

    def group_tombstones(self, group):
        return []

    def describe_as_classic(self, group):
        raise NotImplementedError

    def replay(self, record) -> None:
        return None

    def on_loaded(self, group) -> None:
        return None
