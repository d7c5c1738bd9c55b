"""The metadata quorum with one voter: a batch is committed once fsynced, then published to the node.

The Raft quorum replaces this behind the same ``commit`` / ``image`` / ``end_offset`` surface that the
controller channel uses.
"""

from __future__ import annotations

import asyncio

from broker.clock import Clock
from broker.metadata_log import MetadataLog
from broker.metadata_publisher import MetadataPublisher
from cluster.metadata_image import MetadataImage
from protocol.message import Message


class LocalQuorum:
    def __init__(self, log: MetadataLog, publisher: MetadataPublisher, clock: Clock) -> None:
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

    async def commit(self, records: list[Message]) -> MetadataImage:
        image = await asyncio.to_thread(self.log.append, records, self.clock.now_ms())
        await self.publisher.publish(image)
        return image
