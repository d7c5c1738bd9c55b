"""Offset and time indexes: behaviour (Kafka's OffsetIndexTest/TimeIndexTest in spirit) and byte layout.

The layout reader below is written from the comments of Kafka's ``OffsetIndex.java`` ("a 4 byte 'relative'
offset and a 4 byte file location") and ``TimeIndex.java`` ("a 8 bytes timestamp and a 4 bytes 'relative'
offset"), big-endian as Java's ``ByteBuffer``; it does not use storage.index.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.errors import CorruptIndexError, InvalidOffsetError
from storage.index import OffsetIndex, TimeIndex


def kafka_offset_index_entries(path: str, base_offset: int) -> list[tuple[int, int]]:
    data = open(path, "rb").read()
    out = []
    for i in range(0, len(data) - len(data) % 8, 8):
        rel = int.from_bytes(data[i:i + 4], "big", signed=True)
        pos = int.from_bytes(data[i + 4:i + 8], "big", signed=True)
        out.append((base_offset + rel, pos))
    return out


def kafka_time_index_entries(path: str, base_offset: int) -> list[tuple[int, int]]:
    data = open(path, "rb").read()
    out = []
    for i in range(0, len(data) - len(data) % 12, 12):
        ts = int.from_bytes(data[i:i + 8], "big", signed=True)
        rel = int.from_bytes(data[i + 8:i + 12], "big", signed=True)
        out.append((ts, base_offset + rel))
    return out


def write_kafka_offset_index(path: str, base_offset: int, entries) -> None:
    with open(path, "wb") as f:
        for off, pos in entries:
            f.write((off - base_offset).to_bytes(4, "big", signed=True) + pos.to_bytes(4, "big", signed=True))


def test_preallocated_then_trimmed(tmp_path):
    p = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(p, 100, max_index_size=1003)
    assert os.path.getsize(p) == 1000  # rounded down to whole 8-byte entries, preallocated
    assert idx.max_entries == 125 and idx.entries == 0
    for i in range(10):
        idx.append(100 + i * 10, i * 4096)
    idx.close()
    assert os.path.getsize(p) == 80  # trimmed to the valid entries on close
    assert kafka_offset_index_entries(p, 100) == [(100 + i * 10, i * 4096) for i in range(10)]


def test_time_index_layout_and_reserved_slot(tmp_path):
    p = str(tmp_path / "00000000000000000050.timeindex")
    ti = TimeIndex(p, 50, max_index_size=12 * 4)
    assert os.path.getsize(p) == 48
    ti.maybe_append(1000, 55)
    ti.maybe_append(1000, 56)   # same timestamp: ignored
    ti.maybe_append(2000, 60)
    ti.maybe_append(3000, 70)
    assert ti.is_full()  # the last slot is reserved for the roll entry
    with pytest.raises(ValueError):
        ti.maybe_append(4000, 80)
    ti.maybe_append(4000, 80, skip_full_check=True)
    ti.close()
    assert kafka_time_index_entries(p, 50) == [(1000, 55), (2000, 60), (3000, 70), (4000, 80)]


def test_reads_index_written_from_kafka_layout(tmp_path):
    p = str(tmp_path / "00000000000000001000.index")
    entries = [(1000 + 7 * i, 100 * i) for i in range(1, 300)]
    write_kafka_offset_index(p, 1000, entries)
    idx = OffsetIndex(p, 1000, max_index_size=10 * 1024 * 1024)
    assert idx.entries == len(entries)
    assert idx.lookup(1000 + 7 * 50 + 3) == (1000 + 7 * 50, 5000)
    assert idx.lookup(999) == (1000, 0)
    assert idx.lookup(10**9) == entries[-1]
    idx.sanity_check()


@settings(deadline=None)
@given(st.lists(st.integers(1, 1000), min_size=0, max_size=3000, unique=True), st.integers(-5, 2_000_000))
def test_lookup_matches_linear_search(tmp_path_factory, deltas, target):
    """The warm-section binary search returns the largest entry <= target, like a linear scan."""
    d = tmp_path_factory.mktemp("idx")
    idx = OffsetIndex(str(d / "0.index"), 0, max_index_size=8 * 4000)
    offsets = sorted(deltas)
    for i, off in enumerate(offsets):
        idx.append(off, i * 10)
    expected = (0, 0)
    for i, off in enumerate(offsets):
        if off <= target:
            expected = (off, i * 10)
    assert idx.lookup(target) == expected
    idx.close()


def test_append_must_increase(tmp_path):
    idx = OffsetIndex(str(tmp_path / "0.index"), 0, max_index_size=800)
    idx.append(5, 0)
    with pytest.raises(InvalidOffsetError):
        idx.append(5, 10)
    with pytest.raises(InvalidOffsetError):
        idx.append(4, 10)


def test_truncate_to(tmp_path):
    idx = OffsetIndex(str(tmp_path / "0.index"), 0, max_index_size=800)
    for i in range(10):
        idx.append(i * 10, i * 100)
    idx.truncate_to(50)  # exact entry removed with everything after
    assert idx.entries == 5 and idx.last_offset == 40
    idx.truncate_to(35)  # no exact entry: everything larger than the floor goes
    assert idx.entries == 4 and idx.last_offset == 30
    idx.truncate_to(1000)
    assert idx.entries == 4
    ti = TimeIndex(str(tmp_path / "0.timeindex"), 0, max_index_size=1200)
    for i in range(10):
        ti.maybe_append(1000 + i, i * 10)
    ti.truncate_to(45)
    assert ti.last_entry == (1004, 40)


def test_relative_offset_overflow(tmp_path):
    idx = OffsetIndex(str(tmp_path / "0.index"), 10, max_index_size=800)
    assert idx.can_append_offset(10 + 2**31 - 1)
    assert not idx.can_append_offset(10 + 2**31)
    assert not idx.can_append_offset(9)


def test_sanity_check_detects_corruption(tmp_path):
    p = str(tmp_path / "00000000000000000100.index")
    write_kafka_offset_index(p, 100, [(110, 0), (120, 5000)])
    with open(p, "ab") as f:
        f.write(b"\x01\x02\x03")  # not a multiple of 8
    idx = OffsetIndex(p, 100, max_index_size=800)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    p2 = str(tmp_path / "00000000000000000200.index")
    write_kafka_offset_index(p2, 200, [(210, 0), (220, 999_999)])
    idx2 = OffsetIndex(p2, 200, max_index_size=800)
    with pytest.raises(CorruptIndexError):
        idx2.sanity_check(log_size=5000)  # position past the log
    p3 = str(tmp_path / "00000000000000000300.timeindex")
    with open(p3, "wb") as f:
        f.write((5000).to_bytes(8, "big") + (1).to_bytes(4, "big") + (10).to_bytes(8, "big") + (2).to_bytes(4, "big"))
    ti = TimeIndex(p3, 300, max_index_size=1200)
    with pytest.raises(CorruptIndexError):
        ti.sanity_check()  # timestamps go backwards


def test_resize_keeps_entries(tmp_path):
    idx = OffsetIndex(str(tmp_path / "0.index"), 0, max_index_size=80)
    for i in range(5):
        idx.append(i, i)
    idx.trim_to_valid_size()
    assert idx.length == 40 and idx.is_full()
    idx.resize(800)
    assert idx.entries == 5 and not idx.is_full()
    idx.append(10, 10)
    assert idx.lookup(10) == (10, 10)
