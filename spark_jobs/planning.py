"""Planning a scan of Kafka log directories: which files to read, and in how many pieces. Metadata only.

Runs on the driver. No pyspark import here (unit-testable without a JVM), and nothing here ever writes: a log
directory being analysed is opened read-only, a missing or implausible index is rebuilt in memory.

Layout read (Kafka's ``LocalLog``/``LogFileUtils``): a log dir holds ``<topic>-<partition>`` directories (the
partition is after the *last* dash, topics may contain dots and dashes); ``-delete``, ``-future`` and ``-stray``
directories are skipped. A partition directory holds ``<20-digit base offset>.log`` segments with ``.index``
(8-byte entries: int32 relative offset, int32 position) and ``.timeindex`` (12-byte entries: int64 timestamp,
int32 relative offset). ``.deleted``, ``.cleaned`` and ``.swap`` files are ignored.

Several brokers' log dirs may be given at once: a replicated partition then has a copy in each, and exactly one is
read (:func:`choose_replica`: the highest log end offset, ties to the lowest ``node.id``), so nothing is counted
twice; :func:`replica_choices` says which copy was taken, for the reports.

Pruning is sound by construction:

* topics/partitions: by directory name, exact;
* offsets: segment *i* holds offsets in ``[base_i, base_{i+1})`` (the last one is open-ended), exact, no IO;
* timestamps: only a lower bound prunes a segment, using the last ``.timeindex`` entry of a *rolled* segment (its
  max timestamp, written by ``onBecomeInactiveSegment``) after plausibility checks; the last segment of a
  partition is never pruned by time. There is no minimum timestamp anywhere in a segment.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from dataclasses import dataclass, field
from typing import Iterable

from protocol.errors import CorruptRecordError
from protocol.topics import INTERNAL_TOPICS as KAFKA_INTERNAL_TOPICS
from protocol.topics import METADATA_TOPIC
from protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    iter_batch_positions,
    parse_header,
)
from storage.checkpoints import decode_properties
from storage.files import META_PROPERTIES_FILE

from .transactions import partition_transactions, ranges_within

__all__ = [
    "NotALogDirError", "PartitionDir", "SegmentFile", "SegmentSlice", "ScanBounds", "PlanStats", "Replica",
    "ReplicaChoice", "list_partition_dirs", "list_replicas", "choose_replica", "replica_choices", "list_segments",
    "plan_slices", "INTERNAL_TOPICS",
]

INTERNAL_TOPICS = KAFKA_INTERNAL_TOPICS | {METADATA_TOPIC}  # analysed only with includeInternal
SKIPPED_DIR_SUFFIXES = ("-delete", "-future", "-stray")
LOG_DIR_MARKERS = ("meta.properties", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                   "replication-offset-checkpoint", "cleaner-offset-checkpoint", ".kafka_cleanshutdown")

_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

DEFAULT_MAX_SLICE_BYTES = 128 * 1024 * 1024
MAX_PARTITION_DIRS = 1_000_000       # bounds on every directory walk
MAX_SEGMENTS_PER_PARTITION = 1_000_000


class NotALogDirError(ValueError):
    """The path is not a Kafka log directory (nor a partition directory inside one)."""


@dataclass(frozen=True)
class PartitionDir:
    topic: str
    partition: int
    path: str


@dataclass(frozen=True)
class SegmentFile:
    """One ``.log`` file as seen at planning time."""

    topic: str
    partition: int
    dir: str
    base_offset: int
    next_base_offset: int | None      # base offset of the next segment; None for the last (active) one
    size: int                         # bytes at planning time: a reader never looks past this
    mtime_ms: int

    @property
    def path(self) -> str:
        return os.path.join(self.dir, f"{self.base_offset:020d}.log")

    @property
    def index_path(self) -> str:
        return os.path.join(self.dir, f"{self.base_offset:020d}.index")

    @property
    def time_index_path(self) -> str:
        return os.path.join(self.dir, f"{self.base_offset:020d}.timeindex")

    @property
    def is_last(self) -> bool:
        return self.next_base_offset is None


@dataclass(frozen=True)
class SegmentSlice:
    """A piece of one segment to read: ``[start_pos, end_pos)`` of the file, both batch boundaries (``end_pos``
    of the last slice is the size at planning time, which may cut a torn batch: that one is ignored)."""

    topic: str
    partition: int
    path: str
    base_offset: int
    start_pos: int
    end_pos: int
    is_last_slice_of_segment: bool
    is_last_segment: bool             # the active segment: a torn tail is normal there, anywhere else it is not
    # read_committed only (spark_jobs.transactions): the partition's aborted ranges (producer id, first offset,
    # last offset) that may hold a batch of this slice, and its last stable offset (None: no open transaction)
    aborted: tuple[tuple[int, int, int], ...] = ()
    stable_end: int | None = None


@dataclass(frozen=True)
class ScanBounds:
    """What a scan keeps: topics, partitions, offsets in ``[offset_lo, offset_hi)``, timestamps (in *micro*seconds,
    Spark's precision) in ``[ts_lo_us, ts_hi_us)``. ``None`` means unbounded / all."""

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    offset_lo: int | None = None
    offset_hi: int | None = None
    ts_lo_us: int | None = None
    ts_hi_us: int | None = None
    include_internal: bool = False

    def is_empty(self) -> bool:
        if self.topics is not None and not self.topics:
            return True
        if self.partitions is not None and not self.partitions:
            return True
        if self.offset_lo is not None and self.offset_hi is not None and self.offset_lo >= self.offset_hi:
            return True
        if self.ts_lo_us is not None and self.ts_hi_us is not None and self.ts_lo_us >= self.ts_hi_us:
            return True
        return False

    def keeps_topic(self, topic: str) -> bool:
        if self.topics is not None:
            return topic in self.topics      # naming an internal topic explicitly reads it
        return self.include_internal or not is_internal(topic)


def is_internal(topic: str) -> bool:
    return topic in INTERNAL_TOPICS


@dataclass
class PlanStats:
    partition_dirs: int = 0
    segments_listed: int = 0
    segments_pruned_by_offset: int = 0
    segments_pruned_by_time: int = 0
    segments_planned: int = 0
    slices: int = 0
    index_files_read: int = 0
    index_rebuilds: int = 0           # in memory, from the log's batch headers
    split_fallbacks: int = 0          # an index position that was not a batch start: segment read in one piece
    # read_committed (spark_jobs.transactions): partitions planned from .txnindex files (and a walk of the tail
    # for the LSO) or from a walk of every header; batch headers walked, markers read, aborted ranges found,
    # segments skipped as wholly at or above the LSO
    txn_index_files_read: int = 0
    txn_tail_scans: int = 0
    txn_scans: int = 0
    txn_batches: int = 0
    txn_markers: int = 0
    txn_aborted_ranges: int = 0
    segments_pruned_by_lso: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, list) else v) for k, v in self.__dict__.items()}


# -- listing ---------------------------------------------------------------------------------------------------

def _split_paths(paths: str | Iterable[str]) -> list[str]:
    if isinstance(paths, str):
        items = [p.strip() for p in paths.split(",")]
    else:
        items = [str(p).strip() for p in paths]
    items = [p for p in items if p]
    if not items:
        raise NotALogDirError("no log directory given")
    return items


def _parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    if "-" not in name:
        return None
    dash = name.rindex("-")
    topic, part = name[:dash], name[dash + 1:]
    if not topic or not part.isdigit() or len(part) > 10:
        return None
    p = int(part)
    if p > 2**31 - 1:
        return None
    return topic, p


def _looks_like_partition_dir(path: str) -> bool:
    try:
        with os.scandir(path) as it:
            for i, e in enumerate(it):
                if i > 100_000:
                    break
                if _SEGMENT_RE.match(e.name):
                    return True
    except OSError:
        return False
    return False


def list_replicas(log_dirs: str | Iterable[str], bounds: ScanBounds | None = None
                  ) -> dict[tuple[str, int], list[PartitionDir]]:
    """Every copy of every partition directory under one or more log dirs (comma-separated string or a list):
    several brokers' log dirs hold one copy each of a replicated partition. A path that is itself a partition
    directory (``<topic>-<n>`` holding ``.log`` files) is accepted too. Raises :class:`NotALogDirError` for a
    path that is neither."""
    bounds = bounds or ScanBounds()
    found: dict[tuple[str, int], list[PartitionDir]] = {}
    seen_roots: set[str] = set()
    for root in _split_paths(log_dirs):
        root = os.path.abspath(root)
        if not os.path.exists(root):
            raise NotALogDirError(f"log directory {root} does not exist")
        if not os.path.isdir(root):
            raise NotALogDirError(f"{root} is not a directory (expected a Kafka log directory)")
        if os.path.realpath(root) in seen_roots:
            continue                                    # the same directory named twice
        seen_roots.add(os.path.realpath(root))
        tp = _parse_partition_dir_name(os.path.basename(root))
        if tp is not None and _looks_like_partition_dir(root):
            candidates = [(tp, root)]
            is_log_dir = True
        else:
            candidates = []
            is_log_dir = any(os.path.exists(os.path.join(root, m)) for m in LOG_DIR_MARKERS)
            with os.scandir(root) as it:
                for i, e in enumerate(it):
                    if i >= MAX_PARTITION_DIRS:
                        raise NotALogDirError(f"{root} has more than {MAX_PARTITION_DIRS} entries")
                    if not e.is_dir(follow_symlinks=False):
                        continue
                    if e.name.endswith(SKIPPED_DIR_SUFFIXES):
                        is_log_dir = True
                        continue
                    parsed = _parse_partition_dir_name(e.name)
                    if parsed is None:
                        continue
                    is_log_dir = True
                    candidates.append((parsed, e.path))
        if not is_log_dir:
            raise NotALogDirError(
                f"{root} is not a Kafka log directory: no <topic>-<partition> directories and none of "
                f"{', '.join(LOG_DIR_MARKERS[:2])}, ... in it")
        for (topic, partition), path in candidates:
            if not bounds.keeps_topic(topic):
                continue
            if bounds.partitions is not None and partition not in bounds.partitions:
                continue
            copies = found.setdefault((topic, partition), [])
            if all(os.path.realpath(c.path) != os.path.realpath(path) for c in copies):
                copies.append(PartitionDir(topic, partition, path))
    return found


def list_partition_dirs(log_dirs: str | Iterable[str], bounds: ScanBounds | None = None) -> list[PartitionDir]:
    """One directory per partition, sorted by (topic, partition): where several log dirs hold a copy, the one
    :func:`choose_replica` picks, so a replicated partition is counted once."""
    return [copies[0] if len(copies) == 1 else choose_replica(copies).chosen
            for _, copies in sorted(list_replicas(log_dirs, bounds).items())]


# -- replicas (the same partition under several brokers' log dirs) ----------------------------------------------

@dataclass(frozen=True)
class Replica:
    pdir: PartitionDir
    node_id: int | None               # from the log dir's meta.properties (node.id, else broker.id)
    log_end_offset: int               # end of the last complete batch (headers walked, no CRC)


@dataclass(frozen=True)
class ReplicaChoice:
    """Which copy of a partition the jobs read, and the copies they ignore."""

    chosen: PartitionDir
    replicas: tuple[Replica, ...]     # all copies, the chosen one first


def choose_replica(copies: list[PartitionDir]) -> ReplicaChoice:
    """The longest replica: highest log end offset, ties to the lowest node id (a log dir without one last), then
    the path. Without the cluster's metadata the leader is unknown; the longest copy holds every offset any
    reader could have been served (a follower only ever lags the leader or was truncated to it)."""
    replicas = [Replica(c, log_dir_node_id(os.path.dirname(c.path)), log_end_offset(c)) for c in copies]
    replicas.sort(key=lambda r: (-r.log_end_offset, r.node_id is None, r.node_id or 0, r.pdir.path))
    return ReplicaChoice(replicas[0].pdir, tuple(replicas))


def replica_choices(log_dirs: str | Iterable[str], bounds: ScanBounds | None = None) -> list[ReplicaChoice]:
    """The choice made for every partition that has more than one copy, sorted by (topic, partition)."""
    return [choose_replica(copies) for _, copies in sorted(list_replicas(log_dirs, bounds).items())
            if len(copies) > 1]


def log_dir_node_id(log_dir: str) -> int | None:
    """``node.id`` (KRaft) or ``broker.id`` (ZooKeeper) from ``<log_dir>/meta.properties`` (read with storage's
    properties reader; only the id matters here, so other fields are not validated), None if absent."""
    data = _read_file(os.path.join(log_dir, META_PROPERTIES_FILE), 64 * 1024)
    if data is None:
        return None
    props = decode_properties(data.decode("latin-1"))
    for key in ("node.id", "broker.id"):
        if props.get(key, "").lstrip("-").isdigit():
            return int(props[key])
    return None


def log_end_offset(pdir: PartitionDir) -> int:
    """The partition's log end offset as its files say: one past the last complete batch of the last segment, or
    that segment's base offset if it holds none (0 for a directory without segments)."""
    segs = list_segments(pdir)
    if not segs:
        return 0
    seg = segs[-1]
    if seg.size == 0:
        return seg.base_offset
    with open(seg.path, "rb") as f, mmap.mmap(f.fileno(), seg.size, access=mmap.ACCESS_READ) as mm:
        # walk the headers from the last offset-index entry (checked to be a batch start), else from the start
        entries = read_offset_index(seg) or []
        starts = [0]
        if entries and _is_batch_start(f.fileno(), entries[-1][1], entries[-1][0]):
            starts.insert(0, entries[-1][1])
        for start in starts:
            last = None
            try:
                for _, h in iter_batch_positions(mm, start, seg.size):
                    last = h.base_offset + h.last_offset_delta
            except CorruptRecordError:
                pass                                    # garbage after the last good batch: the log ends there
            if last is not None:
                return last + 1
    return seg.base_offset


def list_segments(pdir: PartitionDir) -> list[SegmentFile]:
    """The partition's ``.log`` segments, sorted by base offset, with sizes taken now (the snapshot)."""
    bases: list[int] = []
    with os.scandir(pdir.path) as it:
        for i, e in enumerate(it):
            if i >= 4 * MAX_SEGMENTS_PER_PARTITION:
                raise NotALogDirError(f"{pdir.path} has too many files")
            name = e.name
            if not name.endswith(".log"):
                continue
            m = _SEGMENT_RE.match(name)
            if m is None:
                raise NotALogDirError(f"unexpected file {name} in partition directory {pdir.path}: segment files "
                                      f"are named <20-digit base offset>.log")
            bases.append(int(m.group(1)))
    bases.sort()
    out: list[SegmentFile] = []
    for i, base in enumerate(bases):
        path = os.path.join(pdir.path, f"{base:020d}.log")
        st = os.stat(path)
        nxt = bases[i + 1] if i + 1 < len(bases) else None
        out.append(SegmentFile(pdir.topic, pdir.partition, pdir.path, base, nxt, st.st_size,
                               st.st_mtime_ns // 1_000_000))
    return out


# -- indexes (read-only) ---------------------------------------------------------------------------------------

def _read_file(path: str, limit: int) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, min(size, limit), 0)
    finally:
        os.close(fd)


def read_offset_index(seg: SegmentFile, stats: PlanStats | None = None) -> list[tuple[int, int]] | None:
    """Plausible ``(absolute offset, position)`` entries of the segment's ``.index``, or None if it is missing or
    implausible. Entries stop at the first one that does not move forward (a preallocated tail is zeros)."""
    data = _read_file(seg.index_path, 64 * 1024 * 1024)
    if data is None:
        return None
    if stats is not None:
        stats.index_files_read += 1
    n = len(data) // 8
    out: list[tuple[int, int]] = []
    last_rel, last_pos = -1, -1
    limit = None if seg.next_base_offset is None else seg.next_base_offset - seg.base_offset
    for i in range(n):
        rel, pos = _OFFSET_ENTRY.unpack_from(data, i * 8)
        if rel <= last_rel or pos <= last_pos or pos < 0 or rel < 0:
            if rel == 0 and pos == 0 and i > 0:
                break                               # preallocated zeros
            return None
        if pos >= seg.size or (limit is not None and rel >= limit):
            if pos >= seg.size and seg.is_last:
                break                               # appended after our snapshot
            return None
        out.append((seg.base_offset + rel, pos))
        last_rel, last_pos = rel, pos
    return out


def read_time_index_max(seg: SegmentFile, stats: PlanStats | None = None) -> int | None:
    """The max timestamp (ms) recorded by a *rolled* segment's ``.timeindex`` (its last entry), or None if that
    cannot be trusted (missing, empty, a partial entry, non-monotonic at the tail, pointing outside the segment)."""
    if seg.is_last:
        return None
    try:
        fd = os.open(seg.time_index_path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size == 0 or size % 12:
            return None
        tail = os.pread(fd, min(size, 24), size - min(size, 24))
    finally:
        os.close(fd)
    if stats is not None:
        stats.index_files_read += 1
    entries = [_TIME_ENTRY.unpack_from(tail, i) for i in range(0, len(tail), 12)]
    ts, rel = entries[-1]
    if ts < 0 or rel < 0 or (seg.next_base_offset is not None and rel >= seg.next_base_offset - seg.base_offset):
        return None
    if len(entries) == 2 and (entries[0][0] > ts or entries[0][1] > rel):
        return None
    return ts


def scan_headers(seg: SegmentFile, stats: PlanStats | None = None) -> tuple[list[tuple[int, int]], int | None]:
    """Rebuild in memory what the indexes would say: ``[(batch last offset, position)]`` of every batch and the
    segment's max timestamp, from batch headers only (no CRC, no decompression). Stops quietly at a torn tail or
    garbage: the reader reports those."""
    if stats is not None:
        stats.index_rebuilds += 1
    entries: list[tuple[int, int]] = []
    max_ts: int | None = None
    if seg.size == 0:
        return entries, None
    with open(seg.path, "rb") as f:
        with mmap.mmap(f.fileno(), seg.size, access=mmap.ACCESS_READ) as mm:
            scan = iter_batch_positions(mm, 0, seg.size)
            try:
                for pos, h in scan:
                    entries.append((h.base_offset + h.last_offset_delta, pos))
                    if max_ts is None or h.max_timestamp > max_ts:
                        max_ts = h.max_timestamp
            except CorruptRecordError:
                pass
    return entries, max_ts


def _is_batch_start(fd: int, pos: int, entry_offset: int) -> bool:
    head = os.pread(fd, BATCH_HEADER_SIZE, pos)
    if len(head) < BATCH_HEADER_SIZE or head[MAGIC_OFFSET] != MAGIC_V2:
        return False
    h = parse_header(head)
    return h.batch_length >= BATCH_HEADER_SIZE - LOG_OVERHEAD and h.base_offset <= entry_offset


# -- planning --------------------------------------------------------------------------------------------------

def segment_overlaps_offsets(seg: SegmentFile, bounds: ScanBounds) -> bool:
    if bounds.offset_hi is not None and seg.base_offset >= bounds.offset_hi:
        return False
    if bounds.offset_lo is not None and seg.next_base_offset is not None and seg.next_base_offset <= bounds.offset_lo:
        return False
    return True


def _split_points(seg: SegmentFile, max_slice_bytes: int, stats: PlanStats, use_indexes: bool) -> list[int]:
    """Batch-start positions at which to cut the segment, about every ``max_slice_bytes``."""
    entries = read_offset_index(seg, stats) if use_indexes else None
    if not entries:
        entries, _ = scan_headers(seg, stats)
    points: list[int] = []
    next_cut = max_slice_bytes
    for _off, pos in entries:
        if pos >= next_cut and seg.size - pos >= max_slice_bytes // 4:
            points.append(pos)
            next_cut = pos + max_slice_bytes
    if not points:
        return points
    # never trust an index blindly: every cut must land on a batch header
    by_pos = dict((p, o) for o, p in entries)
    with open(seg.path, "rb") as f:
        fd = f.fileno()
        if all(_is_batch_start(fd, p, by_pos[p]) for p in points):
            return points
    stats.split_fallbacks += 1
    stats.notes.append(f"{seg.path}: index positions are not batch starts; rebuilt in memory")
    entries, _ = scan_headers(seg, stats)
    points = []
    next_cut = max_slice_bytes
    for _off, pos in entries:
        if pos >= next_cut and seg.size - pos >= max_slice_bytes // 4:
            points.append(pos)
            next_cut = pos + max_slice_bytes
    return points


def plan_slices(log_dirs: str | Iterable[str], bounds: ScanBounds | None = None, *,
                max_slice_bytes: int = DEFAULT_MAX_SLICE_BYTES, use_indexes: bool = True,
                stats: PlanStats | None = None, read_committed: bool = False) -> list[SegmentSlice]:
    """Every slice a scan within ``bounds`` must read, sorted by (topic, partition, base offset, position).

    ``read_committed``: each partition's transactions are planned (:func:`spark_jobs.transactions.
    partition_transactions`): segments wholly at or above its last stable offset are not read, and every slice
    carries the aborted ranges that may touch it and the LSO, for :func:`spark_jobs.scan.read_slice`."""
    bounds = bounds or ScanBounds()
    stats = stats if stats is not None else PlanStats()
    if max_slice_bytes < 1:
        raise ValueError("maxSliceBytes must be positive")
    pdirs = list_partition_dirs(log_dirs, bounds)
    stats.partition_dirs = len(pdirs)
    slices: list[SegmentSlice] = []
    if bounds.is_empty():
        return slices
    for pdir in pdirs:
        segs = list_segments(pdir)
        txn = None
        if read_committed:
            txn = partition_transactions(segs, stats, use_indexes)
            stats.txn_aborted_ranges += len(txn.aborted)
        for seg in segs:
            stats.segments_listed += 1
            if txn is not None and txn.last_stable_offset is not None and seg.base_offset >= txn.last_stable_offset:
                stats.segments_pruned_by_lso += 1
                continue
            if not segment_overlaps_offsets(seg, bounds):
                stats.segments_pruned_by_offset += 1
                continue
            if bounds.ts_lo_us is not None and not seg.is_last:
                max_ts = read_time_index_max(seg, stats) if use_indexes else None
                if max_ts is None and seg.size > 0:
                    _, max_ts = scan_headers(seg, stats)
                if max_ts is not None and max_ts * 1000 < bounds.ts_lo_us:
                    stats.segments_pruned_by_time += 1
                    continue
            stats.segments_planned += 1
            cuts = _split_points(seg, max_slice_bytes, stats, use_indexes) if seg.size > max_slice_bytes else []
            starts = [0] + cuts
            ends = cuts + [seg.size]
            extra = () if txn is None else (
                ranges_within(txn.aborted, seg.base_offset, seg.next_base_offset), txn.last_stable_offset)
            for j, (a, b) in enumerate(zip(starts, ends)):
                slices.append(SegmentSlice(seg.topic, seg.partition, seg.path, seg.base_offset, a, b,
                                           j == len(starts) - 1, seg.is_last, *extra))
    stats.slices = len(slices)
    return slices
