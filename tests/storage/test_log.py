"""Log behaviour: append/read/roll/HW/epochs/timestamps/retention/truncation/producers (UnifiedLogTest and
LogSegmentTest in spirit)."""

from __future__ import annotations

import errno
import os

import pytest

from protocol.errors import CorruptRecordError, InvalidRecordError
from protocol.record_codec import decode_batch
from protocol.records import parse_header

from storage.config import LogConfig
from storage.errors import (
    InvalidProducerEpochError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from storage.fileio import FileIO
from storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, FetchIsolation
from tests.storage.helpers import all_records, batch, open_log, split_batches


def test_append_assigns_offsets_and_epoch_in_place(tmp_path):
    lg = open_log(str(tmp_path))
    b1 = batch(3)
    info = lg.append_as_leader(b1, leader_epoch=5, now_ms=10)
    assert (info.first_offset, info.last_offset) == (0, 2)
    h = parse_header(b1)
    assert h.base_offset == 0 and h.partition_leader_epoch == 5
    info = lg.append_as_leader(batch(2), leader_epoch=5, now_ms=10)
    assert (info.first_offset, info.last_offset) == (3, 4)
    assert lg.log_end_offset == 5
    lg.update_high_watermark(5)
    data = lg.read_bytes(0, 10_000)
    hs = [parse_header(b) for b in split_batches(data)]
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in hs] == [(0, 2, 5), (3, 4, 5)]
    assert [o for o, _, _ in all_records(lg)] == [0, 1, 2, 3, 4]


def test_bytes_input_is_copied(tmp_path):
    lg = open_log(str(tmp_path))
    raw = bytes(batch(2))
    lg.append_as_leader(raw, 0, now_ms=0)
    lg.append_as_leader(raw, 0, now_ms=0)
    assert [o for o, _, _ in all_records(lg)] == [0, 1, 2, 3]


def test_read_returns_file_slice_and_respects_bounds(tmp_path):
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=2000, index_interval_bytes=100))
    for i in range(50):
        lg.append_as_leader(batch(1, value_size=50, tag=i), 0, now_ms=0)
    assert lg.num_segments > 3
    # high watermark bounds the read by byte position
    lg.update_high_watermark(20)
    info = lg.read(0, 1_000_000)
    offsets = [parse_header(b).base_offset for b in split_batches(info.records.read())]
    assert offsets == list(range(0, len(offsets))) and offsets[-1] < 20
    # the read of one segment stops at that segment; the next read continues
    got = []
    off = 0
    while off < 20:
        data = lg.read_bytes(off, 1_000_000)
        hs = [parse_header(b) for b in split_batches(data)]
        got += [h.base_offset for h in hs]
        off = hs[-1].last_offset + 1
    assert got == list(range(20))
    # at the HW: empty; beyond LEO: out of range; below log start: out of range
    assert lg.read(20, 1000).records.length == 0
    assert lg.read(45, 1000, FetchIsolation.LOG_END).records.length > 0
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(51, 1000)
    # a FileSlice can be sendfile'd
    r, w = os.pipe()
    sl = lg.read(0, 100_000).records
    assert sl.sendfile(w) == sl.length
    os.close(w)
    assert os.read(r, 1 << 20) == sl.read()
    os.close(r)


def test_min_one_batch_and_max_bytes(tmp_path):
    lg = open_log(str(tmp_path))
    lg.append_as_leader(batch(1, value_size=1000), 0, now_ms=0)
    lg.append_as_leader(batch(1, value_size=1000), 0, now_ms=0)
    lg.update_high_watermark(2)
    size = len(split_batches(lg.read_bytes(0, 10_000))[0])
    whole = lg.read(0, 10, min_one_message=True)
    assert whole.records.length == size  # first batch whole despite max_bytes
    cut = lg.read(0, 10, min_one_message=False)
    assert cut.records.length == 10 and cut.first_entry_incomplete
    partial = lg.read(0, size + 10, min_one_message=False)
    assert partial.records.length == size + 10  # cut mid-batch, as Kafka: the client drops the partial tail
    assert lg.read(1, 10_000).fetch_offset_metadata.relative_position == size


def test_slice_batches_through_offset(tmp_path):
    """A share fetch's header scan: every whole batch of the slice, or up to the first one reaching an offset."""
    from storage.file_records import slice_batches

    lg = open_log(str(tmp_path))
    for i in range(5):
        lg.append_as_leader(batch(10, tag=i), 0, now_ms=0)
    lg.update_high_watermark(50)
    records = lg.read(12, 1_000_000).records
    every = slice_batches(records)
    assert [h.base_offset for _, h in every] == [10, 20, 30, 40]
    assert [p - records.position for p, _ in every] == [i * (every[1][0] - every[0][0]) for i in range(4)]
    assert slice_batches(records, 29) == every[:2]  # the batch holding 29 ends the scan
    assert slice_batches(records, 30) == every[:3]
    assert slice_batches(records, 5) == every[:1]  # at least the first batch
    assert slice_batches(records, 10_000) == every


def test_read_from_offset_inside_batch(tmp_path):
    lg = open_log(str(tmp_path))
    lg.append_as_leader(batch(10), 0, now_ms=0)
    lg.append_as_leader(batch(10), 0, now_ms=0)
    lg.update_high_watermark(20)
    h = parse_header(lg.read_bytes(15, 10_000))
    assert h.base_offset == 10  # the batch containing offset 15


def test_roll_on_size_time_and_overflow(tmp_path):
    cfg = LogConfig(segment_bytes=1000, segment_ms=10_000)
    lg = open_log(str(tmp_path), cfg)
    lg.append_as_leader(batch(1, value_size=600, ts=1000), 0, now_ms=0)
    lg.append_as_leader(batch(1, value_size=600, ts=1000), 0, now_ms=0)
    assert lg.num_segments == 2  # size
    lg.append_as_leader(batch(1, value_size=10, ts=1000 + 10_001), 0, now_ms=0)
    assert lg.num_segments == 3  # time, from the first batch's timestamp
    assert [s.base_offset for s in lg.log_segments()] == [0, 1, 2]
    # relative offset overflow: a follower append whose last offset does not fit the active segment
    lg2 = open_log(str(tmp_path), LogConfig(), name="f-0")
    b = batch(1)
    from protocol.records import stamp_batch
    stamp_batch(b, 0, 0, 0)
    lg2.append_as_follower(b, now_ms=0)
    b2 = batch(1)
    stamp_batch(b2, 0, 2**31 + 5, 0)
    lg2.append_as_follower(b2, now_ms=0)
    assert [s.base_offset for s in lg2.log_segments()] == [0, 2**31 + 5]


def test_roll_when_index_full(tmp_path):
    cfg = LogConfig(max_index_size=16, index_interval_bytes=1)  # 2 offset entries
    lg = open_log(str(tmp_path), cfg)
    for i in range(6):
        lg.append_as_leader(batch(1, ts=1000 + i), 0, now_ms=0)
    assert lg.num_segments >= 2
    lg.update_high_watermark(lg.log_end_offset)
    assert [o for o, _, _ in all_records(lg)] == list(range(6))


def test_segment_files_and_indexes_after_roll(tmp_path):
    cfg = LogConfig(segment_bytes=5000, index_interval_bytes=500)
    lg = open_log(str(tmp_path), cfg)
    for i in range(40):
        lg.append_as_leader(batch(1, value_size=200, ts=1000 + i), 0, now_ms=0)
    names = sorted(os.listdir(lg.dir))
    first = lg.log_segments()[0]
    assert "00000000000000000000.log" in names and "00000000000000000000.index" in names
    assert "00000000000000000000.timeindex" in names
    # the rolled segment's indexes are trimmed to their entries; the active one is preallocated
    assert os.path.getsize(first.offset_index_path) == 8 * first.offset_index.entries
    assert os.path.getsize(first.time_index_path) == 12 * first.time_index.entries
    assert os.path.getsize(lg.active_segment.offset_index_path) == 10 * 1024 * 1024
    assert lg.verify() == []


def test_message_and_batch_size_limits(tmp_path):
    lg = open_log(str(tmp_path), LogConfig(max_message_bytes=500, segment_bytes=100_000))
    with pytest.raises(RecordTooLargeError):
        lg.append_as_leader(batch(1, value_size=600), 0, now_ms=0)
    lg2 = open_log(str(tmp_path), LogConfig(segment_bytes=300), name="s-0")
    with pytest.raises(RecordBatchTooLargeError):
        lg2.append_as_leader(batch(1, value_size=400), 0, now_ms=0)
    assert lg.log_end_offset == 0 and lg2.log_end_offset == 0


def test_rejects_corrupt_and_invalid_batches(tmp_path):
    lg = open_log(str(tmp_path))
    b = batch(2)
    b[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        lg.append_as_leader(b, 0, now_ms=0)
    b = batch(2)
    from protocol.records import stamp_batch
    stamp_batch(b, 0, 7, 0)  # clients must send base offset 0
    with pytest.raises(InvalidRecordError):
        lg.append_as_leader(b, 0, now_ms=0)
    assert lg.log_end_offset == 0 and lg.size == 0


def test_log_append_time(tmp_path):
    lg = open_log(str(tmp_path), LogConfig(message_timestamp_type="LogAppendTime"))
    info = lg.append_as_leader(batch(2, ts=5), 0, now_ms=777_000)
    assert info.log_append_time == 777_000
    lg.update_high_watermark(2)
    h, recs = decode_batch(lg.read_bytes(0, 10_000), 0)  # CRC re-validated
    assert h.timestamp_type == 1 and h.max_timestamp == 777_000
    assert [r.timestamp for r in recs] == [777_000, 777_000]


def test_fetch_offset_by_timestamp(tmp_path):
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=800, index_interval_bytes=100))
    for i in range(30):
        lg.append_as_leader(batch(2, ts=1000 + 10 * i), 3, now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.num_segments > 2
    r = lg.fetch_offset_by_timestamp(1000 + 10 * 12 + 1)  # the second record of batch 12
    assert (r.timestamp, r.offset, r.leader_epoch) == (1121, 25, 3)
    r = lg.fetch_offset_by_timestamp(1000 + 10 * 12 + 5)  # between batches: the next batch's first record
    assert (r.timestamp, r.offset) == (1130, 26)
    assert lg.fetch_offset_by_timestamp(0).offset == 0
    assert lg.fetch_offset_by_timestamp(10**12) is None
    assert lg.fetch_offset_by_timestamp(LATEST_TIMESTAMP).offset == 60
    assert lg.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 0
    r = lg.fetch_offset_by_timestamp(MAX_TIMESTAMP)
    assert (r.timestamp, r.offset) == (1291, 59)


def test_leader_epochs(tmp_path):
    lg = open_log(str(tmp_path))
    lg.append_as_leader(batch(5), 1, now_ms=0)
    lg.append_as_leader(batch(5), 1, now_ms=0)
    lg.append_as_leader(batch(5), 4, now_ms=0)
    assert lg.latest_epoch == 4
    assert lg.end_offset_for_epoch(1) == (1, 10)
    assert lg.end_offset_for_epoch(2) == (1, 10)
    assert lg.end_offset_for_epoch(4) == (4, 15)
    assert lg.end_offset_for_epoch(5) is None
    assert open(os.path.join(lg.dir, "leader-epoch-checkpoint")).read() == "0\n2\n1 0\n4 10\n"
    lg.truncate_to(8, now_ms=0)
    assert lg.log_end_offset == 5  # the batch containing offset 8 goes whole... (batches are 5 records)
    assert lg.latest_epoch == 1


def test_truncate_and_restart(tmp_path):
    cfg = LogConfig(segment_bytes=800)
    lg = open_log(str(tmp_path), cfg)
    for i in range(20):
        lg.append_as_leader(batch(2, value_size=100, tag=i), 0, now_ms=0)
    lg.update_high_watermark(40)
    assert lg.truncate_to(17, now_ms=0)
    assert lg.log_end_offset == 16 and lg.high_watermark == 16
    lg.scheduler.run_all()
    lg.append_as_leader(batch(2, tag=99), 0, now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    before = all_records(lg)
    assert [o for o, _, _ in before] == list(range(18))
    lg.flush(now_ms=0)
    lg.close()
    lg2 = open_log(str(tmp_path), cfg, had_clean_shutdown=True, recovery_point=18)
    lg2.update_high_watermark(18)
    assert all_records(lg2) == before
    lg2.truncate_fully_and_start_at(100, now_ms=0)
    assert lg2.log_end_offset == 100 and lg2.log_start_offset == 100
    lg2.append_as_leader(batch(1), 0, now_ms=0)
    lg2.update_high_watermark(101)
    assert [o for o, _, _ in all_records(lg2, 100)] == [100]


def test_retention_by_time_size_and_start_offset(tmp_path):
    cfg = LogConfig(segment_bytes=1000, retention_ms=10_000, file_delete_delay_ms=0)
    lg = open_log(str(tmp_path), cfg)
    for i in range(30):
        lg.append_as_leader(batch(1, value_size=300, ts=1000 + i * 1000), 0, now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    n = lg.num_segments
    # by time: segments whose largest timestamp is older than retention
    deleted = lg.delete_old_segments(now_ms=1000 + 20 * 1000)
    assert deleted > 0 and lg.num_segments == n - deleted
    assert lg.log_start_offset == lg.log_segments()[0].base_offset
    assert any(f.endswith(".deleted") for f in os.listdir(lg.dir))
    lg.scheduler.run_all()
    assert not any(f.endswith(".deleted") for f in os.listdir(lg.dir))
    # never the data beyond the high watermark
    lg.update_high_watermark(lg.log_start_offset)
    assert lg.delete_old_segments(now_ms=10**12) == 0
    lg.update_high_watermark(lg.log_end_offset)
    # by size
    lg.update_config(LogConfig(segment_bytes=1000, retention_ms=-1, retention_bytes=1500, file_delete_delay_ms=0))
    lg.delete_old_segments(now_ms=0)
    assert lg.size <= 1500 + 1000
    # by log start offset (DeleteRecords)
    start = lg.log_start_offset
    lg.maybe_increment_log_start_offset(lg.log_end_offset - 1)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(start, 100)
    lg.delete_old_segments(now_ms=0)
    assert lg.num_segments == 1
    with pytest.raises(OffsetOutOfRangeError):
        lg.maybe_increment_log_start_offset(lg.log_end_offset + 1)


def test_retention_deletes_active_segment_by_rolling(tmp_path):
    lg = open_log(str(tmp_path), LogConfig(retention_ms=100, file_delete_delay_ms=0))
    lg.append_as_leader(batch(3, ts=0), 0, now_ms=0)
    lg.update_high_watermark(3)
    assert lg.delete_old_segments(now_ms=1000) == 1
    assert lg.num_segments == 1 and lg.log_start_offset == 3 and lg.log_end_offset == 3
    assert lg.active_segment.base_offset == 3


def test_idempotent_producer(tmp_path):
    lg = open_log(str(tmp_path))
    pid = 1000
    b0 = batch(3, producer_id=pid, producer_epoch=0, base_sequence=0)
    info = lg.append_as_leader(b0, 0, now_ms=0)
    dup = lg.append_as_leader(batch(3, producer_id=pid, producer_epoch=0, base_sequence=0), 0, now_ms=0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (info.first_offset, info.last_offset)
    assert lg.log_end_offset == 3
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(batch(1, producer_id=pid, producer_epoch=0, base_sequence=7), 0, now_ms=0)
    lg.append_as_leader(batch(1, producer_id=pid, producer_epoch=0, base_sequence=3), 0, now_ms=0)
    lg.append_as_leader(batch(1, producer_id=pid, producer_epoch=1, base_sequence=0), 0, now_ms=0)
    with pytest.raises(InvalidProducerEpochError):
        lg.append_as_leader(batch(1, producer_id=pid, producer_epoch=0, base_sequence=4), 0, now_ms=0)
    assert lg.log_end_offset == 5
    # producer state survives a restart (snapshot) and an unclean restart (rebuilt from the log)
    lg.close()
    for clean in (True, False):
        lg2 = open_log(str(tmp_path), had_clean_shutdown=clean)
        e = lg2.producer_state.last_entry(pid)
        assert (e.producer_epoch, e.last_seq, e.last_data_offset) == (1, 0, 4)
        d = lg2.append_as_leader(batch(1, producer_id=pid, producer_epoch=1, base_sequence=0), 0, now_ms=0)
        assert d.duplicate
        lg2.close_handlers() if not clean else lg2.close()


def test_producer_snapshot_layout(tmp_path):
    """ProducerSnapshot.json v1: int16 version, uint32 crc32c of the rest, int32 count, fixed-size entries."""
    import struct

    from crc32c import crc32c
    lg = open_log(str(tmp_path))
    lg.append_as_leader(batch(2, producer_id=77, producer_epoch=3, base_sequence=0, ts=5000), 0, now_ms=0)
    lg.close()
    snaps = sorted(f for f in os.listdir(lg.dir) if f.endswith(".snapshot"))
    assert snaps[-1] == "00000000000000000002.snapshot"
    data = open(os.path.join(lg.dir, snaps[-1]), "rb").read()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 1) and crc == crc32c(data[6:])
    entry = struct.unpack_from(">qhiqiqiq", data, 10)
    assert entry == (77, 3, 1, 1, 1, 5001, -1, -1)
    assert len(data) == 10 + 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8


class _FullDisk(FileIO):
    """Writes part of the data, then fails with ENOSPC."""

    def __init__(self) -> None:
        self.full = False

    def pwrite_all(self, fd, data, offset):
        if self.full:
            os.pwrite(fd, bytes(memoryview(data)[: len(data) // 2]), offset)
            raise OSError(errno.ENOSPC, "No space left on device")
        super().pwrite_all(fd, data, offset)


def test_disk_full_fails_cleanly(tmp_path):
    io = _FullDisk()
    lg = open_log(str(tmp_path), file_io=io)
    lg.append_as_leader(batch(2, tag=1), 0, now_ms=0)
    size = lg.size
    io.full = True
    with pytest.raises(KafkaStorageError):
        lg.append_as_leader(batch(2, tag=2), 0, now_ms=0)
    # the half-written batch was cut off and is never served; the log keeps what was acknowledged
    assert lg.size == size and os.path.getsize(lg.active_segment.log.path) == size
    assert lg.log_end_offset == 2
    assert lg.offline  # the partition went offline, as Kafka takes the dir offline
    with pytest.raises(KafkaStorageError):
        lg.read(0, 100)
    io.full = False
    lg2 = open_log(str(tmp_path), file_io=io)
    lg2.update_high_watermark(2)
    assert [o for o, _, _ in all_records(lg2)] == [0, 1]
    assert lg2.verify() == []


def test_plain_file_io_appends(tmp_path):
    """The other tests' file I/O is a subclass (no fsync); with the plain FileIO, LogSegment.append writes with
    os.pwrite itself: on the fast path, on the general path and across a roll."""
    lg = open_log(str(tmp_path), LogConfig(segment_bytes=1000, index_interval_bytes=100), file_io=FileIO())
    for i in range(8):
        lg.append_as_leader(memoryview(batch(2, tag=i, value_size=100)), 0, now_ms=0)  # the fast path
        lg.append_as_leader(bytes(batch(1, tag=100 + i)), 0, now_ms=0)  # bytes: the general path
    assert lg.num_segments > 1 and lg.log_end_offset == 24
    lg.update_high_watermark(lg.log_end_offset)
    assert [o for o, _, _ in all_records(lg)] == list(range(24))
    assert all(s.offset_index.entries for s in lg.log_segments()[:-1])
    assert lg.verify() == []


def test_transactions_bound_the_last_stable_offset(tmp_path):
    from protocol.record_codec import build_end_txn_marker_batch
    from storage.log import ORIGIN_COORDINATOR

    lg = open_log(str(tmp_path))
    lg.append_as_leader(batch(2), 0, now_ms=0)  # offsets 0-1
    lg.append_as_leader(batch(3, producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True), 0,
                        now_ms=0)  # 2-4, an open transaction
    lg.append_as_leader(batch(2), 0, now_ms=0)  # 5-6
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.high_watermark == 7 and lg.last_stable_offset == 2
    data = lg.read_bytes(0, 100_000, FetchIsolation.TXN_COMMITTED)
    assert [parse_header(b).base_offset for b in split_batches(data)] == [0]  # READ_COMMITTED stops at the LSO
    marker = bytearray(build_end_txn_marker_batch(commit=True, producer_id=9, producer_epoch=0, coordinator_epoch=1,
                                                  timestamp=5))
    lg.append_as_leader(marker, 0, now_ms=0, origin=ORIGIN_COORDINATOR)  # 7
    assert lg.last_stable_offset == 2  # the marker is not replicated yet (HW 7)
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.last_stable_offset == 8
    # the open transaction is rebuilt from the log after an unclean restart
    lg.append_as_leader(batch(1, producer_id=9, producer_epoch=0, base_sequence=3, is_transactional=True), 0,
                        now_ms=0)  # 8
    lg.close_handlers()
    lg2 = open_log(str(tmp_path), had_clean_shutdown=False)
    lg2.update_high_watermark(lg2.log_end_offset)
    assert lg2.last_stable_offset == 8
    assert lg2.producer_state.last_entry(9).current_txn_first_offset == 8
    # clients may not write control batches
    with pytest.raises(InvalidRecordError):
        lg2.append_as_leader(bytearray(marker), 0, now_ms=0)


def test_append_from_writable_memoryview_slice(tmp_path):
    """The broker hands over a slice of the request frame: offsets are stamped into it, no copy."""
    lg = open_log(str(tmp_path))
    frame = bytearray(b"HDR!") + batch(2) + bytearray(b"TAIL")
    view = memoryview(frame)[4:-4]
    lg.append_as_leader(batch(1), 0, now_ms=0)
    info = lg.append_as_leader(view, 6, now_ms=0)
    assert (info.first_offset, info.last_offset) == (1, 2)
    h = parse_header(frame, 4)
    assert (h.base_offset, h.partition_leader_epoch) == (1, 6)  # stamped in the caller's buffer
    assert frame[:4] == b"HDR!" and frame[-4:] == b"TAIL"
    lg.update_high_watermark(3)
    assert [o for o, _, _ in all_records(lg)] == [0, 1, 2]


@pytest.mark.parametrize("kind", ["plain", "view", "idempotent", "compressed"])
def test_future_timestamps_bounded_by_kafka_4_default(tmp_path, kind):
    """``message.timestamp.after.max.ms`` is one hour by default since Kafka 4.0 (KIP-1030); the past is unbounded."""
    assert LogConfig().message_timestamp_after_max_ms == 3_600_000
    lg = open_log(str(tmp_path))
    now = 1_800_000_000_000
    extra = {"idempotent": {"producer_id": 7, "producer_epoch": 0, "base_sequence": 0},
             "compressed": {"compression": 1}}.get(kind, {})

    def make(ts, seq=0):
        kw = dict(extra)
        if "base_sequence" in kw:
            kw["base_sequence"] = seq
        b = batch(2, ts=ts, **kw)  # record timestamps ts, ts + 1
        return memoryview(b) if kind == "view" else b

    with pytest.raises(InvalidTimestampError, match="out of range"):
        lg.append_as_leader(make(now + 3_600_000), 0, now_ms=now)  # the second record is 1 ms too late
    assert lg.log_end_offset == 0
    info = lg.append_as_leader(make(now + 3_600_000 - 1), 0, now_ms=now)
    assert (info.first_offset, info.last_offset) == (0, 1)
    lg.append_as_leader(make(1000, seq=2), 0, now_ms=now)  # 57 years old: accepted
    assert lg.log_end_offset == 4


def test_timestamp_bounds_follow_the_topic_config(tmp_path):
    now = 1_800_000_000_000
    lg = open_log(str(tmp_path), LogConfig(message_timestamp_before_max_ms=60_000,
                                           message_timestamp_after_max_ms=2**63 - 1))
    with pytest.raises(InvalidTimestampError):
        lg.append_as_leader(batch(1, ts=now - 60_001), 0, now_ms=now)
    lg.append_as_leader(batch(1, ts=now + 10**9), 0, now_ms=now)  # no bound on the future
    lg2 = open_log(str(tmp_path), LogConfig(message_timestamp_type="LogAppendTime"), name="t-1")
    info = lg2.append_as_leader(batch(1, ts=now + 10**9), 0, now_ms=now)  # LogAppendTime: not checked
    assert info.log_append_time == now


def test_read_only_view_is_copied_not_stamped(tmp_path):
    lg = open_log(str(tmp_path))
    lg.append_as_leader(batch(1), 0, now_ms=0)
    data = bytes(batch(2))
    info = lg.append_as_leader(memoryview(data), 3, now_ms=0)
    assert (info.first_offset, info.last_offset) == (1, 2)
    assert parse_header(data, 0).base_offset == 0  # the caller's bytes are untouched
    lg.update_high_watermark(3)
    assert [o for o, _, _ in all_records(lg)] == [0, 1, 2]


def test_bound_on_old_timestamps_checks_every_record(tmp_path):
    """The first record's timestamp is not the smallest: with message.timestamp.before.max.ms set, every record
    is checked (LogValidator), and the error names the record (Produce v8+ record_errors)."""
    from protocol.record_codec import Record, build_batch
    now = 1_800_000_000_000
    lg = open_log(str(tmp_path), LogConfig(message_timestamp_before_max_ms=60_000))
    for codec in (0, 1, 4):
        recs = [Record(b"k", b"a", timestamp=now - 1000), Record(b"k", b"b", timestamp=now - 120_000),
                Record(b"k", b"c", timestamp=now)]
        with pytest.raises(InvalidTimestampError) as exc:
            lg.append_as_leader(bytearray(build_batch(recs, compression=codec)), 0, now_ms=now)
        assert exc.value.record_errors[0][0] == 1 and str(now - 120_000) in exc.value.record_errors[0][1]
    assert lg.log_end_offset == 0
    ok = [Record(b"k", b"a", timestamp=now - 59_000), Record(b"k", b"b", timestamp=now + 10)]
    assert lg.append_as_leader(bytearray(build_batch(ok, compression=1)), 0, now_ms=now).last_offset == 1
