"""The group coordinator's adapter acting on share state (GroupCoordinatorService.persisterInitialize and
deleteGroups' share step): a heartbeat's InitializeShareState goes to the persister once the records are written,
and its outcome moves the partitions to initialized, or back (the heartbeat then answers the persister's error);
DeleteGroups deletes a share group's share state first, and the group only if that worked."""

from __future__ import annotations

import asyncio
import uuid

from broker.clock import ManualClock
from broker.config import BrokerConfig
from broker.groups.group_service import GroupService
from broker.quorum.metadata_publisher import MetadataPublisher
from broker.replication.replica_manager import AppendResult
from cluster.groups.group_config import GroupConfig
from cluster.groups.group_coordinator import GroupCoordinatorShard, ReqCtx
from cluster.metadata_image import MetadataImage, PartitionInfo, TopicInfo
from protocol.errors import ErrorCode
from protocol.generated.messages import (
    DeleteShareGroupStateResponse, InitializeShareGroupStateResponse, ShareGroupHeartbeatRequest,
)
from protocol.generated.messages import delete_share_group_state_response as dsr
from protocol.generated.messages import initialize_share_group_state_response as isr
from protocol.topics import GROUP_METADATA_TOPIC

FOO = uuid.UUID(int=0xF00).bytes
GID = "share-group"
M1 = str(uuid.UUID(int=1))


class _Part:
    def is_leader(self, node_id: int) -> bool:
        return True


class _Replicas:
    """Appends committed at once."""

    loading = False

    def get(self, topic: str, partition: int) -> _Part:
        return _Part()

    def append(self, part, records, now_ms, origin=None) -> AppendResult:
        return AppendResult(None, None)


class _Persister:
    """Answers every partition with ``code`` and remembers the requests."""

    def __init__(self, code: int = 0) -> None:
        self.code = code
        self.initialized: list = []
        self.deleted: list = []

    async def initialize(self, req):
        self.initialized.append(req)
        return InitializeShareGroupStateResponse(results=[isr.InitializeStateResult(topic_id=t.topic_id, partitions=[
            isr.PartitionResult(partition=p.partition, error_code=self.code) for p in t.partitions])
            for t in req.topics])

    async def delete(self, req):
        self.deleted.append(req)
        return DeleteShareGroupStateResponse(results=[dsr.DeleteStateResult(topic_id=t.topic_id, partitions=[
            dsr.PartitionResult(partition=p.partition, error_code=self.code) for p in t.partitions])
            for t in req.topics])


def _service(persister) -> tuple[GroupService, GroupCoordinatorShard]:
    service = GroupService(1, BrokerConfig({}), MetadataPublisher(), _Replicas(), controller=None, clock=ManualClock())
    p = service.partition_for(GID)
    parts = {i: PartitionInfo(i, (1,), (1,), 1, 0, 0) for i in range(service.num_partitions())}
    offsets = TopicInfo(GROUP_METADATA_TOPIC, b"\x01" * 16, parts)
    foo = TopicInfo("foo", FOO, {i: PartitionInfo(i, (1,), (1,), 1, 0, 0) for i in range(3)})
    image = MetadataImage(offset=1, topics_by_name={GROUP_METADATA_TOPIC: offsets, "foo": foo},
                          topics_by_id={offsets.topic_id: offsets, FOO: foo})
    service.metadata.image = image
    service._published = image
    shard = GroupCoordinatorShard(p, GroupConfig(), lambda: "uuid")
    shard.on_new_metadata_image(image)
    service.shards[p] = shard
    service._epochs[p] = 0
    service.active = True
    service.persister = persister
    service.ensure_topic = _nothing
    return service, shard


async def _nothing() -> None:
    return None


async def _heartbeat(service: GroupService, **fields):
    req = ShareGroupHeartbeatRequest(group_id=GID, **fields)
    return await service.run(GID, GroupCoordinatorShard.share_group_heartbeat, ReqCtx("c", "/127.0.0.1", 1), req)


def test_initialize_then_assign():
    async def scenario():
        persister = _Persister()
        service, shard = _service(persister)
        res = await _heartbeat(service, member_id=M1, member_epoch=0, subscribed_topic_names=["foo"])
        assert res.response.error_code == 0
        (req,) = persister.initialized
        assert req.group_id == GID and [(t.topic_id, sorted(p.partition for p in t.partitions)) for t in req.topics] \
            == [(FOO, [0, 1, 2])]
        assert all(p.start_offset == -1 for t in req.topics for p in t.partitions)
        meta = shard.share.state_metadata[GID]
        assert set(meta.initialized) == {FOO} and not meta.initializing
        res = await _heartbeat(service, member_id=M1, member_epoch=res.response.member_epoch)
        assignment = res.response.assignment
        assert assignment is not None and {p for t in assignment.topic_partitions for p in t.partitions} == {0, 1, 2}

    asyncio.run(scenario())


def test_initialize_failure_answers_the_error_and_uninitializes():
    async def scenario():
        persister = _Persister(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        service, shard = _service(persister)
        res = await _heartbeat(service, member_id=M1, member_epoch=0, subscribed_topic_names=["foo"])
        assert res.response.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        meta = shard.share.state_metadata[GID]
        assert not meta.initialized and not meta.initializing

    asyncio.run(scenario())


def test_delete_groups_deletes_share_state_first():
    async def scenario():
        persister = _Persister()
        service, shard = _service(persister)
        res = await _heartbeat(service, member_id=M1, member_epoch=0, subscribed_topic_names=["foo"])
        assert await service.delete_group(GID) == [(GID, ErrorCode.NON_EMPTY_GROUP)]
        assert persister.deleted == []
        await _heartbeat(service, member_id=M1, member_epoch=-1)
        persister.code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert await service.delete_group(GID) == [(GID, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)]
        assert GID in shard.groups  # the state is still there: so is the group
        persister.code = 0
        assert await service.delete_group(GID) == [(GID, 0)]
        assert [(t.topic_id, sorted(p.partition for p in t.partitions)) for t in persister.deleted[-1].topics] == \
            [(FOO, [0, 1, 2])]
        assert GID not in shard.groups
        nope = next(g for g in (f"nope-{i}" for i in range(1000))
                    if service.partition_for(g) == service.partition_for(GID))  # a group of the loaded shard
        assert await service.delete_group(nope) == [(nope, ErrorCode.GROUP_ID_NOT_FOUND)]
        assert res.response.error_code == 0

    asyncio.run(scenario())
