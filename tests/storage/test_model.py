"""Property test: random appends, reads, rolls, truncations, high-watermark moves, DeleteRecords + retention,
flushes and restarts (clean and crashed) agree with a simple in-memory model of a log.

The model is a list of the batches physically present (as appended, with their offsets), the log start
offset, the log end offset and the high watermark.
"""

from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from protocol.record_codec import decode_batch
from protocol.records import parse_header

from storage.config import LogConfig
from storage.errors import OffsetOutOfRangeError, RecordBatchTooLargeError
from storage.log import FetchIsolation
from tests.storage.helpers import batch, open_log, split_batches


class LogModel(RuleBasedStateMachine):
    @initialize(seg=st.sampled_from([700, 1500, 4000]), interval=st.sampled_from([0, 100, 4096]),
                index_size=st.sampled_from([64, 10 * 1024 * 1024]))
    def setup(self, seg, interval, index_size):
        self.root = tempfile.mkdtemp(prefix="odradek-model-")
        self.config = LogConfig(segment_bytes=seg, index_interval_bytes=interval, max_index_size=index_size,
                                retention_ms=-1, file_delete_delay_ms=0)
        self.log = open_log(self.root, self.config)
        self.batches: list[tuple[int, int, bytes]] = []  # (base, last, record values) physically present
        self.log_start = 0
        self.leo = 0
        self.hw = 0
        self.ckpt_recovery = 0
        self.ckpt_start = 0
        self.tag = 0
        self.now = 1000

    def teardown(self):
        try:
            self.log.close_handlers()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    # ---- helpers -----------------------------------------------------------------------------------
    def _drop_below_first_segment(self):
        first = self.log.segments.first_segment_base_offset()
        self.batches = [b for b in self.batches if b[1] >= first]

    def _check_batches(self, data: bytes, start: int, bound: int):
        got = split_batches(data)
        expected = [b for b in self.batches if b[1] >= start]
        for i, raw in enumerate(got):
            h, recs = decode_batch(raw, 0)
            base, last, values = expected[i]
            assert (h.base_offset, h.last_offset) == (base, last)
            assert b"".join(r.value for r in recs) == values
            assert h.last_offset < bound
        return got

    # ---- rules -------------------------------------------------------------------------------------
    @rule(n=st.integers(1, 6), size=st.integers(1, 400))
    def append(self, n, size):
        self.tag += 1
        b = batch(n, value_size=size, tag=self.tag, ts=self.now)
        _, recs = decode_batch(b, 0)
        values = b"".join(r.value for r in recs)
        if len(b) > self.config.segment_bytes:
            with pytest.raises(RecordBatchTooLargeError):
                self.log.append_as_leader(b, 0, now_ms=self.now)
            return
        info = self.log.append_as_leader(b, 0, now_ms=self.now)
        assert info.first_offset == self.leo and info.last_offset == self.leo + n - 1
        self.batches.append((self.leo, self.leo + n - 1, values))
        self.leo += n

    @rule(frac=st.floats(0, 1))
    def set_high_watermark(self, frac):
        target = self.log_start + int((self.leo - self.log_start) * frac)
        self.hw = self.log.update_high_watermark(target)
        assert self.hw == target

    @rule(frac=st.floats(0, 1.2), max_bytes=st.sampled_from([0, 1, 100, 1000, 100_000]),
          min_one=st.booleans(), isolation=st.sampled_from([FetchIsolation.HIGH_WATERMARK, FetchIsolation.LOG_END]))
    def read(self, frac, max_bytes, min_one, isolation):
        offset = int(self.leo * frac)
        bound = self.hw if isolation == FetchIsolation.HIGH_WATERMARK else self.leo
        if offset < self.log_start or offset > self.leo:
            try:
                self.log.read(offset, max_bytes, isolation, min_one)
            except OffsetOutOfRangeError:
                return
            raise AssertionError(f"read at {offset} outside [{self.log_start}, {self.leo}] did not fail")
        info = self.log.read(offset, max_bytes, isolation, min_one)
        data = info.records.read()
        assert len(data) <= max(max_bytes, len(data) if min_one else 0)
        got = self._check_batches(data, offset, bound)
        containing = [b for b in self.batches if b[1] >= offset and b[1] < bound]
        if min_one and containing and offset < bound and containing[0][0] <= offset:
            # the batch containing the offset is readable: at least it comes back, whole
            straddles = [b for b in self.batches if b[0] <= bound <= b[1] and b[0] < bound]
            if not (straddles and straddles[0] is containing[0]):
                assert got, f"nothing read at {offset} (bound {bound})"

    @rule()
    def roll(self):
        self.log.roll(now_ms=self.now)

    @rule(frac=st.floats(0, 1))
    def truncate(self, frac):
        target = int(self.leo * frac)
        changed = self.log.truncate_to(target, now_ms=self.now)
        if target >= self.leo:
            assert not changed
            return
        first = [b for b in self.batches if b[1] >= target]
        if first and first[0][0] <= target:
            new_leo = first[0][0]
            self.batches = [b for b in self.batches if b[1] < target]
            if not any(b for b in self.batches) and self.log.log_end_offset == target:
                new_leo = target  # the log restarted at the target (its first segment was above it)
        else:
            new_leo = target
            self.batches = [b for b in self.batches if b[1] < target]
        self.leo = new_leo
        assert self.log.log_end_offset == self.leo
        self.log_start = self.log.log_start_offset
        assert self.log_start <= self.leo
        self.hw = min(self.hw, self.leo)
        if self.log.high_watermark != self.hw:
            self.hw = self.log.high_watermark
        self.ckpt_recovery = min(self.ckpt_recovery, self.leo)
        self.log.scheduler.run_all()

    @rule(frac=st.floats(0, 1))
    def delete_records(self, frac):
        target = self.log_start + int((self.hw - self.log_start) * frac)
        self.log.maybe_increment_log_start_offset(target)
        self.log_start = max(self.log_start, target)
        self.log.delete_old_segments(now_ms=self.now)
        self.log.scheduler.run_all()
        self._drop_below_first_segment()
        assert self.log.log_start_offset == self.log_start

    @rule()
    def flush(self):
        self.log.flush(now_ms=self.now)
        assert self.log.recovery_point == self.leo

    @rule()
    def checkpoint(self):
        self.ckpt_recovery = self.log.recovery_point
        self.ckpt_start = self.log.log_start_offset

    @rule(clean=st.booleans())
    def restart(self, clean):
        if clean:
            self.log.flush(now_ms=self.now)
            self.log.close()
            self.log = open_log(self.root, self.config, had_clean_shutdown=True, recovery_point=self.leo,
                                log_start_offset=self.log_start, now_ms=self.now)
        else:
            # a process crash: the page cache keeps every write, but no flush, trim, or checkpoint happens
            self.log.close_handlers()
            self.log = open_log(self.root, self.config, had_clean_shutdown=False,
                                recovery_point=self.ckpt_recovery, log_start_offset=self.ckpt_start, now_ms=self.now)
            self.log_start = self.log.log_start_offset
        self.log.scheduler.run_all()
        self._drop_below_first_segment()
        assert self.log.log_end_offset == self.leo
        self.hw = self.log.update_high_watermark(self.hw)
        assert self.log.verify() == []

    # ---- invariants ----------------------------------------------------------------------------------
    @invariant()
    def offsets_agree(self):
        if not hasattr(self, "log"):
            return
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.log_start
        assert self.log.high_watermark == self.hw
        assert self.log.log_start_offset <= self.log.high_watermark <= self.log.log_end_offset

    @invariant()
    def whole_log_matches(self):
        if not hasattr(self, "log"):
            return
        # read everything above the log start with LOG_END isolation, batch by batch
        offset = self.log_start
        seen = []
        while offset < self.leo:
            data = self.log.read(offset, 1 << 20, FetchIsolation.LOG_END, True).records.read()
            hs = [parse_header(b) for b in split_batches(data)]
            if not hs:
                break
            seen += [(h.base_offset, h.last_offset) for h in hs]
            offset = hs[-1].last_offset + 1
        assert seen == [(b[0], b[1]) for b in self.batches if b[1] >= self.log_start]


TestLogModel = LogModel.TestCase
TestLogModel.settings = settings(deadline=None, stateful_step_count=40,
                                 max_examples=max(10, settings().max_examples // 2))
