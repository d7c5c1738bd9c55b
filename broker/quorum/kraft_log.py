"""``__cluster_metadata-0`` as the Raft core's log: Kafka's log format on disk, entries mirrored in memory.

An entry is one record batch (``Entry.data`` holds its bytes, ``count`` its records), so the core appends,
fetches, commits and truncates whole batches and never decodes a record. Batches are written with
``append_as_follower`` once the core has given them their offset and epoch (stamped into the header: the
base offset and partition leader epoch lie outside the CRC). The leader's LeaderChange entry, made by the
core as a plain tuple, becomes a control batch with a ``LeaderChangeMessage`` here.

Snapshots are ``<end offset>-<epoch>.checkpoint`` files in the partition directory, written to a temp file,
fsynced and renamed as Kafka's FileRawSnapshotWriter does; the newest one is the log's start. Writes go to
the page cache on the event loop (small, rare); ``flush`` (an fsync) is called off the loop by the driver.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from broker.quorum.metadata_snapshot import SnapshotError, validate_snapshot
from cluster.raft.log import Entry, MemoryLog, Snapshot
from protocol.generated.raft import LeaderChangeMessage
from protocol.generated.raft.leader_change_message import Voter
from protocol.record_codec import ControlRecordType, Record, build_batch, control_record_key
from protocol.records import parse_header, stamp_batch
from protocol.topics import METADATA_TOPIC_ID
from storage.config import LogConfig
from storage.log import FetchIsolation, Log

log = logging.getLogger("odradek.quorum.log")

CHECKPOINT_SUFFIX = ".checkpoint"
LEADER_CHANGE_VERSION = 0


def stamp(batch: bytes, offset: int, epoch: int) -> bytes:
    """The batch with its base offset and leader epoch set (neither is covered by the CRC)."""
    out = bytearray(batch)
    stamp_batch(out, 0, offset, epoch)
    return bytes(out)


def leader_change_batch(epoch: int, leader_id: int, voters: frozenset[int], now_ms: int) -> bytes:
    message = LeaderChangeMessage(version=LEADER_CHANGE_VERSION, leader_id=leader_id,
                                  voters=[Voter(voter_id=v) for v in sorted(voters)],
                                  granting_voters=[Voter(voter_id=leader_id)])
    value = message.encode(LEADER_CHANGE_VERSION)
    return build_batch([Record(key=control_record_key(ControlRecordType.LEADER_CHANGE), value=value,
                               timestamp=now_ms)], is_control=True, partition_leader_epoch=epoch)


def entry_of(batch: bytes) -> Entry:
    h = parse_header(batch)
    return Entry(h.base_offset, h.partition_leader_epoch, batch, control=h.is_control, count=h.last_offset_delta + 1)


def snapshot_name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch:010d}{CHECKPOINT_SUFFIX}"


class KRaftLog(MemoryLog):
    def __init__(self, directory: Path, voters: frozenset[int], now_ms, segment_bytes: int = 1073741824) -> None:
        super().__init__()
        self.segment_bytes = segment_bytes  # metadata.log.segment.bytes
        self.dir = Path(directory)
        self.voters = voters
        self.now_ms = now_ms  # a clock for the LeaderChange batch's timestamp
        self.disk: Log | None = None

    # ---- opening ----------------------------------------------------------------------------------------

    def open(self, had_clean_shutdown: bool = False) -> None:
        """Load the newest snapshot and the log after it; a torn tail is cut off by the log's recovery."""
        self.dir.mkdir(parents=True, exist_ok=True)
        snap = self._latest_snapshot()
        config = LogConfig.from_props({"retention.ms": -1, "retention.bytes": -1, "segment.bytes": self.segment_bytes})
        now = self.now_ms()
        self.disk = Log.open(str(self.dir), config, now_ms=now, had_clean_shutdown=had_clean_shutdown,
                             topic_id=METADATA_TOPIC_ID,
                             log_start_offset=snap.end_offset if snap is not None else 0)
        if snap is not None:
            self.snapshot = snap
            self.start_offset = snap.end_offset
            if self.disk.log_end_offset < snap.end_offset:  # the log lost what the snapshot holds
                self.disk.truncate_fully_and_start_at(snap.end_offset, now)
        for batch in self.disk.iter_batches(self.start_offset, FetchIsolation.LOG_END):
            e = entry_of(bytes(batch))
            if e.next_offset <= self.start_offset:
                continue
            if e.offset < self.start_offset:  # a batch straddling the snapshot: keep from the snapshot on
                break
            self.entries.append(e)
        if self.end_offset != self.disk.log_end_offset:
            self.disk.truncate_to(self.end_offset, now)
        self.flushed_offset = self.end_offset  # recovered from disk: durable
        log.info("opened %s: log start %d, end %d, epoch %d%s", self.dir, self.start_offset, self.end_offset,
                 self.last_fetched_epoch, f", snapshot {snap.end_offset}-{snap.epoch}" if snap else "")

    def _latest_snapshot(self) -> Snapshot | None:
        found = []
        for p in self.dir.glob("*" + CHECKPOINT_SUFFIX):
            stem = p.name[:-len(CHECKPOINT_SUFFIX)]
            offset, _, epoch = stem.partition("-")
            if offset.isdigit() and epoch.isdigit():
                found.append((int(offset), int(epoch), p))
        for p in self.dir.glob("*" + CHECKPOINT_SUFFIX + ".part"):
            p.unlink()  # a snapshot whose write did not finish
        if not found:
            return None
        offset, epoch, path = max(found)
        data = path.read_bytes()
        try:
            validate_snapshot(data)
        except SnapshotError as exc:
            raise SnapshotError(f"the metadata snapshot {path} is damaged ({exc}): this node stops rather "
                                f"than rejoin the quorum with a wrong image") from None
        return Snapshot(offset, epoch, data)

    # ---- writing ----------------------------------------------------------------------------------------

    def append(self, entries) -> None:
        assert self.disk is not None
        stamped = []
        for e in entries:
            if e.control and isinstance(e.data, tuple):
                batch = leader_change_batch(e.epoch, e.data[2], self.voters, self.now_ms())
            else:
                batch = e.data
            batch = stamp(batch, e.offset, e.epoch)
            stamped.append(Entry(e.offset, e.epoch, batch, e.control, e.count))
        super().append(stamped)  # checks contiguity and epochs before anything reaches the disk
        chunk: list[bytes] = []
        size = 0
        for e in stamped:  # appends of at most a segment each (the log refuses larger ones)
            if chunk and size + len(e.data) > self.segment_bytes:
                self.disk.append_as_follower(b"".join(chunk), self.now_ms())
                chunk, size = [], 0
            chunk.append(e.data)
            size += len(e.data)
        if chunk:
            self.disk.append_as_follower(b"".join(chunk), self.now_ms())

    def truncate_to(self, offset: int) -> None:
        assert self.disk is not None
        super().truncate_to(offset)
        self.disk.truncate_to(self.end_offset, self.now_ms())

    def flush(self) -> None:
        """fsync what is written (blocking: the driver calls it off the event loop)."""
        assert self.disk is not None
        end = self.end_offset
        self.disk.flush(self.now_ms(), force_flush_active_segment=True)
        self.flushed_offset = max(self.flushed_offset, end)

    def create_snapshot(self, snapshot: Snapshot) -> None:
        super().create_snapshot(snapshot)
        self._write_snapshot(snapshot)
        self.disk.update_high_watermark(max(self.disk.high_watermark, snapshot.end_offset))
        self.disk.maybe_increment_log_start_offset(snapshot.end_offset, "snapshot")
        self.disk.delete_old_segments(self.now_ms())

    def install_snapshot(self, snapshot: Snapshot) -> None:
        super().install_snapshot(snapshot)
        self._write_snapshot(snapshot)
        self.disk.truncate_fully_and_start_at(snapshot.end_offset, self.now_ms())

    def _write_snapshot(self, snapshot: Snapshot) -> None:
        path = self.dir / snapshot_name(snapshot.end_offset, snapshot.epoch)
        tmp = path.with_name(path.name + ".part")
        with open(tmp, "wb") as f:
            f.write(snapshot.data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        for old in self.dir.glob("*" + CHECKPOINT_SUFFIX):
            if old.name < path.name:
                old.unlink()

    def close(self) -> None:
        if self.disk is not None:
            self.disk.close()
            self.disk = None
