"""The metadata quorum over Raft: the controller commits record batches through the quorum leader, and every
node (voter or observer) applies what is committed to its image, in order (Kafka's QuorumController on
KafkaRaftClient, with MetadataLoader applying committed batches and snapshots).

A single node is a quorum of one voter: it elects itself at once, and a batch is committed once it is flushed.

The Raft driver applies committed batches to the image under its lock (cheap); publishing the image to the node's
parts (opening thousands of partition logs, say) runs in its own task, so the quorum keeps answering fetches and
votes meanwhile, and an image that moved on while a publish ran is published once, folded (MetadataLoader's
batching). A commit returns once its image is published here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from pathlib import Path

import broker.gc_tuning as gc_tuning
from broker.clock import Clock
from broker.network.peer_links import DIRECT, PeerLinks
from broker.quorum.metadata_publisher import MetadataPublisher
from broker.quorum.kraft_log import KRaftLog
from broker.quorum.metrics import LatencyWindow
from broker.quorum.metadata_snapshot import image_from_snapshot, write_snapshot
from broker.quorum.raft_driver import NotLeaderError, RaftDriver
from broker.quorum.state_store import QuorumStateStore
from cluster.metadata_image import MetadataImage
from cluster.metadata_serde import decode_record, encode_record
from cluster.raft.log import Entry, Snapshot
from cluster.raft.node import QuorumView, RaftConfig
from protocol.message import Message
from protocol.record_codec import Record, build_batch, decode_batch
from protocol.records import parse_header

log = logging.getLogger("odradek.quorum")

# metadata bytes in one apply that make it large (gc_tuning): about a thousand partition records
LARGE_APPLY_BYTES = 64 * 1024


LARGE_APPEND_RECORDS = 1000  # records in one append encoded off the event loop
# How long an answer waits for this node to publish what it committed, past the commit (``append``). Kafka's
# controller answers at the commit; here a request is also visible on the node that answered it, which takes
# milliseconds, but not for 10,000 new partitions, whose logs this node creates first (~1.5 ms each here).
PUBLISH_WAIT_S = 5.0


def _encode_batch(records: list[Message], now_ms: int) -> bytes:
    return build_batch([Record(value=encode_record(r), timestamp=now_ms) for r in records])


def _apply_batches(image: MetadataImage, data: list[tuple[bytes, int]]) -> MetadataImage:
    return image.apply_batches([(records_of(batch), last_offset) for batch, last_offset in data])


def _partition_count(image: MetadataImage) -> int:
    return sum(len(t.partitions) for t in image.topics_by_name.values())

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


@dataclasses.dataclass(frozen=True)
class SnapshotPolicy:
    """When a node writes a snapshot of its image (Kafka's SnapshotGenerator): after this many bytes of
    committed batches, or this long after the last snapshot if anything was committed since."""

    max_bytes_between: int = 20971520  # metadata.log.max.record.bytes.between.snapshots
    max_interval_ms: int = 3600000  # metadata.log.max.snapshot.interval.ms (0: never by time)

    def due(self, bytes_since: int, ms_since: int) -> bool:
        return bytes_since > 0 and (bytes_since >= self.max_bytes_between
                                    or 0 < self.max_interval_ms <= ms_since)


class RaftQuorum:
    def __init__(self, node_id: int, voters: dict[int, tuple[str, int]], partition_dir: Path, cluster_id: str,
                 publisher: MetadataPublisher, clock: Clock, config: RaftConfig,
                 rng: random.Random | None = None, snapshots: SnapshotPolicy = SnapshotPolicy(),
                 segment_bytes: int = 1073741824, retention: tuple[int, int] = (104857600, 604800000),
                 links: PeerLinks = DIRECT) -> None:
        self.publisher = publisher
        self.clock = clock
        self.snapshots = snapshots
        self.commit_latency = LatencyWindow(clock)
        self.log = KRaftLog(partition_dir, frozenset(voters), clock.now_ms, segment_bytes, *retention)
        self.driver = RaftDriver(node_id, voters, cluster_id, self.log, QuorumStateStore(partition_dir), clock,
                                 config, self._apply, rng, links)
        self._image = publisher.image
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = int(clock.monotonic() * 1000)
        self._last_batch_timestamp = -1
        self._snapshotting: asyncio.Task | None = None
        self.snapshots_written = 0
        self._publish_wanted = asyncio.Event()
        self._append_order = asyncio.Lock()
        self._gc_paused = 0  # large applies whose objects are frozen once their image is published (gc_tuning)
        self._published = asyncio.Event()  # set (and replaced) after every publish
        self._publishing: asyncio.Task | None = None
        self.publishes = 0  # images published (fewer than batches committed when they fold)
        self.batches_appended = 0  # batches this node appended as the leader (each a controller decision's records)

    async def start(self) -> None:
        self._publishing = asyncio.ensure_future(self._publish_loop())
        await self.driver.start()

    async def stop(self) -> None:
        if self._snapshotting is not None:
            await asyncio.gather(self._snapshotting, return_exceptions=True)
        await self.driver.stop()
        if self._publishing is not None:
            self._publishing.cancel()
            await asyncio.gather(self._publishing, return_exceptions=True)

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

    def raft_status(self) -> tuple[int, int, int, int]:
        """(leader, epoch, high watermark, log end offset) for the raft metrics."""
        d = self.driver
        return d.leader_id, d.epoch, d.high_watermark, self.log.end_offset

    def quorum_view(self) -> QuorumView | None:
        node = self.driver.node
        return node.quorum_view() if node is not None else None

    async def ready_to_decide(self) -> None:
        """Raise NotLeaderError unless this node leads and has applied everything before its epoch."""
        await self.driver.wait_for_leadership_caught_up()

    async def commit(self, records: list[Message]) -> MetadataImage:
        """Append ``records`` as one batch; once committed and published here, the image."""
        committed, _ = await self.append(records)
        return await committed

    async def append(self, records: list[Message], wait_published: bool = True) -> tuple[asyncio.Task, int]:
        """Append ``records`` as one batch to the leader's log, returning at once: a task done with the image
        once the batch is committed and published here (NotLeaderError if the leadership is lost first), and the
        offset of its last record, waiting for the publish at most ``PUBLISH_WAIT_S``. ``wait_published=False``:
        done once committed (what Kafka's controller waits for), however long this node's own parts take."""
        now = self.clock.now_ms()
        async with self._append_order:  # a batch encoded off the loop keeps its place
            if len(records) >= LARGE_APPEND_RECORDS:
                batch = await asyncio.to_thread(_encode_batch, records, now)
            else:
                batch = _encode_batch(records, now)
            started = self.clock.monotonic()
            appended, last_offset = await self.driver.append(batch, len(records))
        self.batches_appended += 1

        async def committed() -> MetadataImage:
            await appended
            self.commit_latency.record((self.clock.monotonic() - started) * 1000)
            if wait_published:
                await self.wait_published(last_offset, PUBLISH_WAIT_S)
            return self._image

        return asyncio.ensure_future(committed()), last_offset

    async def wait_published(self, offset: int, within_s: float | None = None) -> None:
        """Until this node's parts have the image of ``offset`` (or a later one), or ``within_s`` has passed."""
        deadline = None if within_s is None else self.clock.monotonic() + within_s
        while self.publisher.image.offset < offset:
            if self.driver.failure is not None:
                raise NotLeaderError("the metadata quorum failed")
            left = None if deadline is None else deadline - self.clock.monotonic()
            if left is not None and left <= 0:
                return
            published, failed = (asyncio.ensure_future(e.wait()) for e in (self._published, self.driver.failed))
            try:
                await asyncio.wait({published, failed}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for t in (published, failed):
                    t.cancel()

    async def _publish_loop(self) -> None:
        """Hand the latest image to the node's parts, one publish at a time, out of the driver's lock."""
        while True:
            await self._publish_wanted.wait()
            self._publish_wanted.clear()
            image = self._image
            if image is self.publisher.image:
                continue
            paused, self._gc_paused = self._gc_paused, 0
            try:
                await self.publisher.publish(image)
            except Exception as exc:  # noqa: BLE001 - a part that cannot follow the metadata: fatal, as in Kafka
                self.driver.fail(exc)
            finally:
                for _ in range(paused):  # the replicas have made their partitions: freeze them with the image
                    gc_tuning.settle()
            self.publishes += 1
            self._published.set()
            self._published = asyncio.Event()
            if self.driver.failure is not None:
                return

    async def _apply(self, entries: list[Entry], snapshot: Snapshot | None) -> None:
        image = self._image
        large = snapshot is not None or sum(len(e.data) for e in entries) >= LARGE_APPLY_BYTES
        if large:  # its objects live as long as their partitions: no collector walks while they are made
            gc_tuning.pause()
            partitions_before = _partition_count(image)
        if snapshot is not None:
            image = await asyncio.to_thread(image_from_snapshot, snapshot.data, snapshot.end_offset)
            self._bytes_since_snapshot = 0
            self._last_snapshot_ms = self._monotonic_ms()
            log.info("loaded the metadata snapshot %d-%d", snapshot.end_offset, snapshot.epoch)
        data = []
        for e in entries:
            self._bytes_since_snapshot += len(e.data)
            if e.control:
                continue
            self._last_batch_timestamp = parse_header(e.data).max_timestamp
            data.append((e.data, e.next_offset - 1))
        if data:
            # thousands of records: decoded and applied off the event loop (the images are immutable)
            image = await asyncio.to_thread(_apply_batches, image, data) if large else _apply_batches(image, data)
        if large:
            if _partition_count(image) <= partitions_before - gc_tuning.MANY_PARTITIONS:
                gc_tuning.collect_frozen_at_settle()
            if image is self._image:
                gc_tuning.settle()
            else:
                self._gc_paused += 1  # settled once published
        if image is not self._image:
            self._image = image
            self._publish_wanted.set()
        if entries and self._snapshotting is None and self.snapshots.due(
                self._bytes_since_snapshot, self._monotonic_ms() - self._last_snapshot_ms):
            self._snapshotting = asyncio.ensure_future(self._write_snapshot(image, entries[-1]))

    def _monotonic_ms(self) -> int:
        return int(self.clock.monotonic() * 1000)

    async def _write_snapshot(self, image: MetadataImage, last: Entry) -> None:
        """Snapshot ``image`` (everything up to ``last``) off the loop; retention may then delete the log before
        an older snapshot."""
        try:
            data = await asyncio.to_thread(write_snapshot, image, last.epoch, self._last_batch_timestamp,
                                           self.clock.now_ms())
            if await self.driver.create_snapshot(last.next_offset, data):
                self.snapshots_written += 1
                self._bytes_since_snapshot = 0
                self._last_snapshot_ms = self._monotonic_ms()
                log.info("wrote the metadata snapshot %d-%d (%d bytes)", last.next_offset, last.epoch, len(data))
        except Exception:
            log.exception("writing the metadata snapshot at %d failed", last.next_offset)
        finally:
            self._snapshotting = None
