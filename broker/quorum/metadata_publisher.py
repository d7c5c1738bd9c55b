"""The latest committed metadata image, and the node parts that follow it (Kafka's MetadataLoader with its
publishers): a committed image reaches every part, in order, before handlers see it."""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from cluster.metadata_image import MetadataImage

Publisher = Callable[[MetadataImage], Awaitable[None]]


class MetadataPublisher:
    def __init__(self, image: MetadataImage | None = None) -> None:
        self.image = image if image is not None else MetadataImage()
        self.lock = asyncio.Lock()  # held while an image is handed out; a part that loads late takes it too
        self._publishers: list[Publisher] = []

    def add(self, publisher: Publisher) -> None:
        self._publishers.append(publisher)

    async def publish(self, image: MetadataImage) -> None:
        async with self.lock:
            for publisher in self._publishers:
                await publisher(image)
            self.image = image
