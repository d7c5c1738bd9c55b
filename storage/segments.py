"""The ordered set of a log's segments (Kafka's ``LogSegments``): a sorted list of base offsets plus a dict,
searched with ``bisect``.  Mutations replace the list (copy-on-write), so a reader iterating a snapshot never
sees it change under it."""

from __future__ import annotations

import bisect
from typing import Iterator

from .segment import LogSegment

__all__ = ["LogSegments"]


class LogSegments:
    def __init__(self) -> None:
        # one attribute, replaced atomically, so readers in other threads see a consistent state:
        # (sorted base offsets, segment by base offset, the active (last) segment or None)
        self._state: tuple[list[int], dict[int, LogSegment], LogSegment | None] = ([], {}, None)

    @property
    def _offsets(self) -> list[int]:
        return self._state[0]

    @property
    def _by_offset(self) -> dict[int, LogSegment]:
        return self._state[1]

    def add(self, segment: LogSegment) -> LogSegment:
        base = segment.base_offset
        offsets, d, _ = self._state
        if base not in d:
            offsets = offsets.copy()
            bisect.insort(offsets, base)
        d = {**d, base: segment}
        self._state = (offsets, d, d[offsets[-1]])
        return segment

    def remove(self, base_offset: int) -> None:
        offsets, d, _ = self._state
        if base_offset in d:
            d = dict(d)
            del d[base_offset]
            offsets = offsets.copy()
            offsets.remove(base_offset)
            self._state = (offsets, d, d[offsets[-1]] if offsets else None)

    def clear(self) -> None:
        self._state = ([], {}, None)

    def close(self) -> None:
        for s in self.values():
            s.close()

    def close_handlers(self) -> None:
        for s in self.values():
            s.close_handlers()

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_empty(self) -> bool:
        return not self._offsets

    def contains(self, base_offset: int) -> bool:
        return base_offset in self._by_offset

    def get(self, base_offset: int) -> LogSegment | None:
        return self._by_offset.get(base_offset)

    def values(self, from_offset: int | None = None, to_offset: int | None = None) -> list[LogSegment]:
        """All segments, or those holding offsets in ``[from_offset, to_offset)``: the floor segment of
        ``from_offset`` up to (excluding) segments starting at or after ``to_offset`` (``LogSegments.values``)."""
        offsets, d, _ = self._state
        if from_offset is None:
            return [d[o] for o in offsets]
        if to_offset is not None and from_offset == to_offset:
            return []
        if to_offset is not None and to_offset < from_offset:
            raise ValueError(f"Invalid log segment range: requested segments from offset {from_offset} "
                             f"mapping to segment with base offset > requested segments to offset {to_offset}")
        lo = bisect.bisect_right(offsets, from_offset) - 1
        if lo < 0:
            lo = 0
        hi = len(offsets) if to_offset is None else bisect.bisect_left(offsets, to_offset)
        return [d[o] for o in offsets[lo:hi]]

    def non_active_log_segments_from(self, from_offset: int) -> list[LogSegment]:
        active = self.active_segment
        if active is None or from_offset > active.base_offset:
            return []
        return self.values(from_offset, active.base_offset)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self.values())

    def base_offsets(self) -> list[int]:
        return list(self._offsets)

    @property
    def active_segment(self) -> LogSegment | None:
        return self._state[2]

    last_segment = active_segment

    @property
    def first_segment(self) -> LogSegment | None:
        offsets, d, _ = self._state
        return d[offsets[0]] if offsets else None

    def first_segment_base_offset(self) -> int | None:
        return self._offsets[0] if self._offsets else None

    def floor_segment(self, offset: int) -> LogSegment | None:
        offsets, d, _ = self._state
        i = bisect.bisect_right(offsets, offset) - 1
        return d[offsets[i]] if i >= 0 else None

    def lower_segment(self, offset: int) -> LogSegment | None:
        offsets, d, _ = self._state
        i = bisect.bisect_left(offsets, offset) - 1
        return d[offsets[i]] if i >= 0 else None

    def higher_segment(self, offset: int) -> LogSegment | None:
        offsets, d, _ = self._state
        i = bisect.bisect_right(offsets, offset)
        return d[offsets[i]] if i < len(offsets) else None

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.values())

    def higher_entries(self, base_offset: int) -> list[LogSegment]:
        offsets, d, _ = self._state
        i = bisect.bisect_right(offsets, base_offset)
        return [d[o] for o in offsets[i:]]
