"""The metadata quorum over Raft: the controller commits record batches through the quorum leader, and every
node (voter or observer) applies what is committed to its image, in order (Kafka's QuorumController on
KafkaRaftClient, with MetadataLoader applying committed batches and snapshots).

Same surface as the single-voter ``LocalQuorum`` (``commit``, ``image``, ``end_offset``, ``clock``), plus what
the controller channel needs to find the active controller.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

from broker.clock import Clock
from broker.metadata_publisher import MetadataPublisher
from broker.quorum.kraft_log import KRaftLog
from broker.quorum.raft_driver import NotLeaderError, RaftDriver
from broker.quorum.state_store import QuorumStateStore
from cluster.metadata_image import MetadataImage
from cluster.metadata_serde import decode_record, encode_record
from cluster.raft.log import Entry, Snapshot
from cluster.raft.node import RaftConfig
from protocol.message import Message
from protocol.record_codec import Record, build_batch, decode_batch
from protocol.records import iter_batch_positions, LOG_OVERHEAD

log = logging.getLogger("odradek.quorum")

__all__ = ["RaftQuorum", "NotLeaderError", "parse_voters"]


def parse_voters(text: str) -> dict[int, tuple[str, int]]:
    """``controller.quorum.voters``: ``1@host:9093,2@host:9093`` (Kafka's QuorumConfig.parseVoterConnections)."""
    out: dict[int, tuple[str, int]] = {}
    for item in filter(None, (x.strip() for x in str(text).split(","))):
        node, sep, address = item.partition("@")
        host, _, port = address.rpartition(":")
        if not sep or not node.strip().isdigit() or not host or not port.isdigit():
            raise ValueError(f"controller.quorum.voters entry {item!r} is not id@host:port")
        out[int(node)] = (host.strip("[]"), int(port))
    return out


def records_of(batch) -> list[Message]:
    """The metadata records of one batch (decoded: the metadata log is small and read rarely)."""
    header, records = decode_batch(batch)
    if header.is_control:
        return []
    return [decode_record(r.value)[0] for r in records]


def image_from_snapshot(data: bytes, end_offset: int) -> MetadataImage:
    records: list[Message] = []
    mv = memoryview(data)
    for pos, h in iter_batch_positions(mv):
        records.extend(records_of(mv[pos:pos + h.batch_length + LOG_OVERHEAD]))
    return MetadataImage().apply(records, end_offset - 1)


class RaftQuorum:
    def __init__(self, node_id: int, voters: dict[int, tuple[str, int]], partition_dir: Path, cluster_id: str,
                 publisher: MetadataPublisher, clock: Clock, config: RaftConfig,
                 rng: random.Random | None = None) -> None:
        self.publisher = publisher
        self.clock = clock
        self.log = KRaftLog(partition_dir, frozenset(voters), clock.now_ms)
        self.driver = RaftDriver(node_id, voters, cluster_id, self.log, QuorumStateStore(partition_dir), clock,
                                 config, self._apply, rng)
        self._image = publisher.image

    async def start(self) -> None:
        await self.driver.start()

    async def stop(self) -> None:
        await self.driver.stop()

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def end_offset(self) -> int:
        """The offset the next committed record gets (the leader's log end; decisions are serialized)."""
        return self.log.end_offset

    @property
    def is_active(self) -> bool:
        return self.driver.is_leader

    async def ready_to_decide(self) -> None:
        """Raise NotLeaderError unless this node leads and has applied everything before its epoch."""
        await self.driver.wait_for_leadership_caught_up()

    async def commit(self, records: list[Message]) -> MetadataImage:
        now = self.clock.now_ms()
        batch = build_batch([Record(value=encode_record(r), timestamp=now) for r in records])
        await self.driver.propose(batch, len(records))
        return self._image

    async def _apply(self, entries: list[Entry], snapshot: Snapshot | None) -> None:
        image = self._image
        if snapshot is not None:
            image = image_from_snapshot(snapshot.data, snapshot.end_offset)
            log.info("loaded the metadata snapshot %d-%d", snapshot.end_offset, snapshot.epoch)
        for e in entries:
            if e.control:
                continue
            image = image.apply(records_of(e.data), e.next_offset - 1)
        if image is not self._image:
            self._image = image
            await self.publisher.publish(image)

