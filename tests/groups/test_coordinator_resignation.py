"""A group coordinator gives up a ``__consumer_offsets`` partition the moment the metadata image it is given says
it no longer leads it at the epoch it loaded it at (Kafka's onResignation), not on its next leadership poll.

Found by the transactional Jepsen workload (tests/integration/test_replication_faults.py, paused coordinators):
a broker back from SIGSTOP kept its shard for up to a second and answered the consume-transform-produce
consumer's OffsetFetch with the offsets from before its pause, while its successor had committed newer ones in
transactions; the consumer rewound to them and the input was processed twice (duplicate output)."""

from __future__ import annotations

import asyncio

import pytest

from broker.clock import ManualClock
from broker.config import BrokerConfig
from broker.groups.group_service import GroupService
from broker.quorum.metadata_publisher import MetadataPublisher
from cluster.groups.group_classic import GroupError
from cluster.metadata_image import MetadataImage, PartitionInfo, TopicInfo
from protocol.errors import ErrorCode
from protocol.topics import GROUP_METADATA_TOPIC

GROUP = "g"


class _EmptyLog:
    log_end_offset = 0

    def iter_batches(self, start):
        return iter(())


class _Part:
    log = _EmptyLog()


class _Replicas:
    loading = False

    def get(self, topic: str, partition: int) -> _Part:
        return _Part()


def _image(service: GroupService, leader: int, epoch: int) -> MetadataImage:
    """``__consumer_offsets`` with the group's partition led by ``leader`` at ``epoch``, the others by node 1."""
    mine = service.partition_for(GROUP)
    parts = {p: PartitionInfo(p, (1, 2, 3), (1, 2, 3), leader if p == mine else 1, epoch if p == mine else 0, 0)
             for p in range(service.num_partitions())}
    topic = TopicInfo(GROUP_METADATA_TOPIC, b"\x01" * 16, parts)
    return MetadataImage(topics_by_name={GROUP_METADATA_TOPIC: topic}, topics_by_id={topic.topic_id: topic})


@pytest.fixture
def service() -> tuple[GroupService, MetadataPublisher]:
    publisher = MetadataPublisher()
    s = GroupService(1, BrokerConfig({}), publisher, _Replicas(), controller=None, clock=ManualClock())
    publisher.add(s.on_new_metadata_image)
    s.active = True  # no timer task: only the publish and the requests act
    return s, publisher


def test_a_lost_partition_is_unloaded_by_the_publish_and_answers_not_coordinator(service):
    s, publisher = service

    async def scenario():
        await publisher.publish(_image(s, leader=1, epoch=0))
        p, first = await s.shard_for(GROUP)
        await publisher.publish(_image(s, leader=2, epoch=1))
        assert p not in s.shards  # before any request or timer
        with pytest.raises(GroupError) as exc:
            await s.shard_for(GROUP)
        assert exc.value.code == ErrorCode.NOT_COORDINATOR
        await publisher.publish(_image(s, leader=1, epoch=2))
        _, again = await s.shard_for(GROUP)
        assert again is not first  # loaded again from the log

    asyncio.run(scenario())


def test_a_partition_led_again_at_a_newer_epoch_is_loaded_again(service):
    """Lost and won back while paused (the images in between never seen): what the old shard holds is stale."""
    s, publisher = service

    async def scenario():
        await publisher.publish(_image(s, leader=1, epoch=0))
        p, first = await s.shard_for(GROUP)
        await publisher.publish(_image(s, leader=1, epoch=3))
        assert p not in s.shards
        _, again = await s.shard_for(GROUP)
        assert again is not first
        _, same = await s.shard_for(GROUP)
        assert same is again  # at one epoch the shard stays

    asyncio.run(scenario())
