"""Write synthetic Kafka log directories quickly (for the benchmark and for tests), in Kafka's on-disk layout.

Batches come from :func:`protocol.record_codec.build_batch`; files are laid out as Kafka's ``LogSegment`` does:
a segment rolls before a batch that would push it past ``segment_bytes``; an offset-index entry (last offset of
the batch, its position) is added when more than ``index_interval_bytes`` were appended since the last one, with a
time-index entry (max timestamp so far, its offset) beside it; a rolled segment gets a final time-index entry
(``onBecomeInactiveSegment``). The last segment is left as a closed broker leaves it (indexes trimmed).

This writer does not go through storage/ on purpose: the benchmark needs gigabytes fast, and tests use it as a
second, independent producer of the format.
"""

from __future__ import annotations

import os
import struct
from typing import Iterable

from protocol.records import parse_header

__all__ = ["PartitionWriter"]

_OFF = struct.Struct(">ii")
_TIME = struct.Struct(">qi")


class PartitionWriter:
    """Append already-built batches (bytes) to ``<log_dir>/<topic>-<partition>``, assigning offsets."""

    def __init__(self, log_dir: str, topic: str, partition: int, *, segment_bytes: int = 1 << 30,
                 index_interval_bytes: int = 4096, start_offset: int = 0) -> None:
        self.dir = os.path.join(log_dir, f"{topic}-{partition}")
        os.makedirs(self.dir, exist_ok=True)
        self.segment_bytes = segment_bytes
        self.index_interval_bytes = index_interval_bytes
        self.next_offset = start_offset
        self._open(start_offset)

    def _open(self, base: int) -> None:
        self.base = base
        self.log = open(os.path.join(self.dir, f"{base:020d}.log"), "wb")
        self.index = bytearray()
        self.timeindex = bytearray()
        self.size = 0
        self.since_index = 0
        self.max_ts = -1
        self.max_ts_offset = base
        self.last_time_entry = -1

    def _close_segment(self, final: bool) -> None:
        # final time-index entry, as onBecomeInactiveSegment/close append it
        if self.max_ts > self.last_time_entry and self.size:
            self.timeindex += _TIME.pack(self.max_ts, self.max_ts_offset - self.base)
        self.log.close()
        with open(os.path.join(self.dir, f"{self.base:020d}.index"), "wb") as f:
            f.write(self.index)
        with open(os.path.join(self.dir, f"{self.base:020d}.timeindex"), "wb") as f:
            f.write(self.timeindex)

    def append(self, batch: bytes | bytearray) -> tuple[int, int]:
        """Write one batch at the next offset; returns (base offset, last offset)."""
        buf = bytearray(batch)
        h = parse_header(buf)
        n = len(buf)
        if self.size and self.size + n > self.segment_bytes:
            self._close_segment(False)
            self._open(self.next_offset)
        base = self.next_offset
        struct.pack_into(">q", buf, 0, base)           # baseOffset lies outside the CRC
        last = base + h.last_offset_delta
        pos = self.size
        self.log.write(buf)
        if h.max_timestamp > self.max_ts:
            self.max_ts, self.max_ts_offset = h.max_timestamp, last
        if self.since_index > self.index_interval_bytes:
            self.index += _OFF.pack(last - self.base, pos)
            if self.max_ts > self.last_time_entry:
                self.timeindex += _TIME.pack(self.max_ts, self.max_ts_offset - self.base)
                self.last_time_entry = self.max_ts
            self.since_index = 0
        self.since_index += n
        self.size += n
        self.next_offset = last + 1
        return base, last

    def extend(self, batches: Iterable[bytes]) -> None:
        for b in batches:
            self.append(b)

    def close(self) -> None:
        self._close_segment(True)

    def __enter__(self) -> "PartitionWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
