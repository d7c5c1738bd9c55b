"""``__cluster_metadata-0`` as the Raft core's log: Kafka's log format on disk, entries mirrored in memory.

An entry is one record batch (``Entry.data`` holds its bytes, ``count`` its records), so the core appends,
fetches, commits and truncates whole batches and never decodes a record. Batches are written with
``append_as_follower`` once the core has given them their offset and epoch (stamped into the header: the
base offset and partition leader epoch lie outside the CRC). The leader's LeaderChange entry, made by the
core as a plain tuple, becomes a control batch with a ``LeaderChangeMessage`` here.

Snapshots are ``<end offset>-<epoch>.checkpoint`` files in the partition directory, written to a temp file,
fsynced and renamed as Kafka's FileRawSnapshotWriter does. The newest one is what a restarted node loads; the
log before it stays until retention (``maybe_clean``, Kafka's ``metadata.max.retention.bytes`` and
``metadata.max.retention.ms``) moves the log start to an older snapshot, so a follower a little behind fetches
entries rather than a whole snapshot. Writes go to the page cache on the event loop (small, rare); ``flush``
(an fsync) is called off the loop by the driver.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from broker.quorum.metadata_snapshot import SnapshotError, snapshot_timestamp, validate_snapshot
from cluster.raft.log import Entry, MemoryLog, Snapshot
from protocol.generated.raft import LeaderChangeMessage
from protocol.generated.raft.leader_change_message import Voter
from protocol.record_codec import ControlRecordType, Record, build_batch, control_record_key
from protocol.errors import KafkaError
from protocol.records import parse_header, stamp_batch, validate_batch
from protocol.topics import METADATA_TOPIC_ID
from storage.config import LogConfig
from storage.log import FetchIsolation, Log

log = logging.getLogger("odradek.quorum.log")

CHECKPOINT_SUFFIX = ".checkpoint"
RECOVERY_POINT_FILE = "recovery-point"  # the partition's recovery point (Kafka keeps it per log dir)
RECOVERY_POINT_INTERVAL_S = 1.0


class MetadataLogCorruption(Exception):
    """A batch of ``__cluster_metadata-0`` fails its CRC below the recovery point; the message names the file."""


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
    def __init__(self, directory: Path, voters: frozenset[int], now_ms, segment_bytes: int = 1073741824,
                 retention_bytes: int = 104857600, retention_ms: int = 604800000) -> None:
        super().__init__()
        self.segment_bytes = segment_bytes  # metadata.log.segment.bytes
        self.retention_bytes = retention_bytes  # metadata.max.retention.bytes (-1: no limit)
        self.retention_ms = retention_ms  # metadata.max.retention.ms (-1: no limit)
        self.dir = Path(directory)
        self.voters = voters
        self.now_ms = now_ms  # a clock for the LeaderChange batch's timestamp
        self.disk: Log | None = None
        self._recovery_point_written_ms = 0  # the log's clock (now_ms) when the recovery point was last written
        self._recovery_point = 0  # as last written to RECOVERY_POINT_FILE

    # ---- opening ----------------------------------------------------------------------------------------

    def open(self, had_clean_shutdown: bool = False) -> None:
        """Load the snapshots and the log; a torn tail is cut off by the log's recovery."""
        self.dir.mkdir(parents=True, exist_ok=True)
        snaps = self._read_snapshots()
        latest = snaps[-1] if snaps else None
        config = LogConfig.from_props({"retention.ms": -1, "retention.bytes": -1, "segment.bytes": self.segment_bytes})
        now = self.now_ms()
        recovery_point = self._read_recovery_point()
        self.disk = Log.open(str(self.dir), config, now_ms=now, had_clean_shutdown=had_clean_shutdown,
                             topic_id=METADATA_TOPIC_ID, recovery_point=recovery_point)
        if self.disk.log_end_offset < recovery_point:  # recovery cut fsynced batches: corruption, not a torn write
            raise MetadataLogCorruption(
                f"the metadata log segment {self._segment_of(self.disk.log_end_offset)} is corrupt below its recovery "
                f"point (it ends at offset {self.disk.log_end_offset}, fsynced up to {recovery_point}): this node "
                f"stops rather than rejoin the quorum with a damaged log")
        if latest is not None and self.disk.log_end_offset < latest.end_offset:
            # a snapshot fetched from the leader whose log truncation did not happen before a crash
            self.disk.truncate_fully_and_start_at(latest.end_offset, now)
            self._write_recovery_point(latest.end_offset)
        self.start_offset = self.disk.log_start_offset
        self.snapshots = [sn for sn in snaps if sn.end_offset >= self.start_offset or sn is latest]
        self._delete_snapshot_files_before(self.snapshots[0].end_offset if self.snapshots else 0)
        if latest is not None:
            self.disk.update_high_watermark(max(self.disk.high_watermark, latest.end_offset))
        for batch in self.disk.iter_batches(self.start_offset, FetchIsolation.LOG_END):
            batch = bytes(batch)
            try:
                validate_batch(batch)  # recovery checked above the recovery point; this checks below it too
            except KafkaError as exc:
                raise MetadataLogCorruption(
                    f"the metadata log segment {self._segment_of(parse_header(batch).base_offset)} is corrupt "
                    f"below its recovery point ({exc}): this node stops rather than rejoin the quorum with a "
                    f"damaged log") from None
            e = entry_of(batch)
            if e.next_offset <= self.start_offset:
                continue
            if e.offset < self.start_offset:  # a batch straddling the log start: keep from the start on
                self.start_offset = e.next_offset
                continue
            self.entries.append(e)
        if self.end_offset != self.disk.log_end_offset:
            self.disk.truncate_to(self.end_offset, now)
        self.flushed_offset = self.end_offset  # recovered from disk: durable
        log.info("opened %s: log start %d, end %d, epoch %d%s", self.dir, self.start_offset, self.end_offset,
                 self.last_fetched_epoch, f", snapshot {latest.end_offset}-{latest.epoch}" if latest else "")

    def _segment_of(self, offset: int) -> Path:
        """The segment file that holds ``offset`` (the one with the greatest base offset at or below it)."""
        logs = sorted((int(p.stem), p) for p in self.dir.glob("*.log") if p.stem.isdigit())
        below = [p for base, p in logs if base <= offset]
        return below[-1] if below else self.dir

    def _read_snapshots(self) -> list[Snapshot]:
        """Every whole snapshot in the directory, oldest first; a damaged one stops the node (naming the file)."""
        found = []
        for p in self.dir.glob("*" + CHECKPOINT_SUFFIX):
            stem = p.name[:-len(CHECKPOINT_SUFFIX)]
            offset, _, epoch = stem.partition("-")
            if offset.isdigit() and epoch.isdigit():
                found.append((int(offset), int(epoch), p))
        for p in self.dir.glob("*" + CHECKPOINT_SUFFIX + ".part"):
            p.unlink()  # a snapshot whose write did not finish
        snaps = []
        for offset, epoch, path in sorted(found):
            data = path.read_bytes()
            try:
                validate_snapshot(data)
            except SnapshotError as exc:
                raise SnapshotError(f"the metadata snapshot {path} is damaged ({exc}): this node stops rather "
                                    f"than rejoin the quorum with a wrong image") from None
            snaps.append(Snapshot(offset, epoch, data))
        return snaps

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
        if self._recovery_point > self.end_offset:  # never leave a checkpoint above the log (rare: a divergence)
            self._write_recovery_point(self.end_offset)

    def flush(self) -> None:
        """fsync what is written (blocking: the driver calls it off the event loop); the recovery point is
        checkpointed at most once a second, so a crash recovers (and may cut) only the log above it."""
        assert self.disk is not None
        end = self.end_offset
        self.disk.flush(self.now_ms(), force_flush_active_segment=True)
        self.flushed_offset = max(self.flushed_offset, end)
        if self.now_ms() - self._recovery_point_written_ms >= RECOVERY_POINT_INTERVAL_S * 1000:
            self._write_recovery_point(self.disk.recovery_point)

    # ---- the recovery point -------------------------------------------------------------------------------
    # Below it the log was fsynced: a crash leaves it whole, so a bad batch there is corruption that stops the
    # node (MetadataLogCorruption); above it a torn write is cut by recovery and fetched again from the leader.

    def _read_recovery_point(self) -> int:
        path = self.dir / RECOVERY_POINT_FILE
        if not path.exists():
            return 0
        text = path.read_text().strip()
        if not text.isdigit():
            raise MetadataLogCorruption(f"the recovery point file {path} is damaged: {text[:40]!r}")
        self._recovery_point = int(text)
        return self._recovery_point

    def _write_recovery_point(self, offset: int) -> None:
        path = self.dir / RECOVERY_POINT_FILE
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"{offset}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self._recovery_point = offset
        self._recovery_point_written_ms = self.now_ms()

    def create_snapshot(self, snapshot: Snapshot) -> None:
        super().create_snapshot(snapshot)
        self._write_snapshot(snapshot)
        self.disk.update_high_watermark(max(self.disk.high_watermark, snapshot.end_offset))

    def delete_before_snapshot(self, snapshot: Snapshot) -> bool:
        if not super().delete_before_snapshot(snapshot):
            return False
        self.disk.maybe_increment_log_start_offset(snapshot.end_offset, "snapshot")
        self.disk.delete_old_segments(self.now_ms())
        self._delete_snapshot_files_before(snapshot.end_offset)
        return True

    def maybe_clean(self) -> bool:
        """KafkaMetadataLog.maybeClean, after each snapshot: while the log and the snapshots together exceed
        ``metadata.max.retention.bytes``, or the oldest snapshot's last record is older than
        ``metadata.max.retention.ms``, the oldest snapshot goes and the log start moves to the next one."""
        cleaned = False
        if self.retention_bytes >= 0:
            total = sum(len(sn.data) for sn in self.snapshots)

            def over_size(sn: Snapshot) -> bool:
                nonlocal total
                if self.disk.size + total <= self.retention_bytes:
                    return False
                total -= len(sn.data)
                return True
            cleaned |= self.clean(over_size)
        if self.retention_ms >= 0:
            now = self.now_ms()
            cleaned |= self.clean(lambda sn: now - snapshot_timestamp(sn.data) > self.retention_ms)
        return cleaned

    def install_snapshot(self, snapshot: Snapshot) -> None:
        super().install_snapshot(snapshot)
        self._write_snapshot(snapshot)
        self.disk.truncate_fully_and_start_at(snapshot.end_offset, self.now_ms())
        self._write_recovery_point(snapshot.end_offset)
        self._delete_snapshot_files_before(snapshot.end_offset)

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

    def _delete_snapshot_files_before(self, end_offset: int) -> None:
        for p in self.dir.glob("*" + CHECKPOINT_SUFFIX):
            offset = p.name[:-len(CHECKPOINT_SUFFIX)].partition("-")[0]
            if offset.isdigit() and int(offset) < end_offset:
                p.unlink()

    def close(self) -> None:
        if self.disk is not None:
            self.disk.flush(self.now_ms(), force_flush_active_segment=True)
            self._write_recovery_point(self.disk.recovery_point)
            self.disk.close()
            self.disk = None
