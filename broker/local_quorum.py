"""The metadata quorum with one voter: a batch is committed once fsynced, then published to the node.

The Raft quorum replaces this behind the same ``commit`` / ``image`` / ``end_offset`` surface that the
controller channel uses.
"""

from __future__ import annotations

import asyncio

from broker.clock import Clock
from broker.metadata_log import MetadataLog
from broker.metadata_publisher import MetadataPublisher
from broker.quorum.metrics import LatencyWindow
from cluster.metadata_image import MetadataImage
from cluster.raft.node import QuorumView, ReplicaProgress
from protocol.message import Message


class LocalQuorum:
    def __init__(self, log: MetadataLog, publisher: MetadataPublisher, clock: Clock, node_id: int = 1) -> None:
        self.node_id = node_id
        self.commit_latency = LatencyWindow()
        self.log = log
        self.publisher = publisher
        self.clock = clock

    @property
    def end_offset(self) -> int:
        return self.log.end_offset

    @property
    def image(self) -> MetadataImage:
        return self.log.image

    @property
    def is_active(self) -> bool:
        return True  # the one voter is always the leader

    async def ready_to_decide(self) -> None:
        """The one voter has applied everything it committed."""

    def raft_status(self) -> tuple[int, int, int, int]:
        """(leader, epoch, high watermark, log end offset): the one voter leads and everything is committed."""
        end = self.log.end_offset if self.log.log is not None else 0
        return self.node_id, self.log.epoch, end, end

    def quorum_view(self) -> QuorumView:
        """The one voter leads, with everything it has committed."""
        end = self.log.end_offset
        me = ReplicaProgress(end, -1, self.clock.now_ms(), end)
        return QuorumView(self.node_id, self.log.epoch, end, {self.node_id: me}, {})

    async def commit(self, records: list[Message]) -> MetadataImage:
        started = self.clock.monotonic()
        image = await asyncio.to_thread(self.log.append, records, self.clock.now_ms())
        self.commit_latency.record((self.clock.monotonic() - started) * 1000)
        await self.publisher.publish(image)
        return image
