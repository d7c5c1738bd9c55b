"""Scrub: check every batch's length, magic, CRC32C and offsets, and every index entry, without changing
anything.  Corruption in old segments is found here, not on the fetch path (clients check CRCs, as with
Kafka).

    python -m storage.verify DIR [DIR ...]      # a log dir (all partitions) or one partition dir

Exit status 0 if everything is clean, 1 if any problem was found (each printed on a line).
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from typing import TYPE_CHECKING

from protocol.errors import ProtocolError
from protocol.records import LOG_OVERHEAD, BatchScan, validate_batch

from . import files

if TYPE_CHECKING:
    from .segment import LogSegment

_CHUNK = 4 * 1024 * 1024
_OFF = struct.Struct(">ii")
_TIME = struct.Struct(">qi")

__all__ = ["verify_files", "verify_segment", "verify_partition_dir", "verify_log_dir", "main"]


def _scan_log(path: str, base_offset: int, size: int | None, prev_next: int | None, next_base: int | None,
              problems: list[str]) -> tuple[dict[int, tuple[int, int]], int | None, int]:
    """Validate every batch; returns {position: (base offset, last offset)}, the next offset, the max timestamp."""
    batches: dict[int, tuple[int, int]] = {}
    max_ts = -1
    expected = prev_next
    with open(path, "rb") as f:
        fd = f.fileno()
        total = os.fstat(fd).st_size if size is None else size
        pos = 0
        while pos < total:
            chunk = os.pread(fd, min(_CHUNK, total - pos), pos)
            scan = BatchScan(chunk)
            consumed = 0
            try:
                for off, h0 in scan:
                    try:
                        h = validate_batch(chunk, off)
                    except ProtocolError as e:
                        # framing is intact (the scan found a whole batch): report it and keep going
                        problems.append(f"{path}: invalid batch at position {pos + off}: {e}")
                        batches[pos + off] = (h0.base_offset, h0.base_offset + h0.last_offset_delta)
                        consumed = off + h0.batch_length + LOG_OVERHEAD
                        continue
                    last = h.base_offset + h.last_offset_delta
                    where = f"{path}: batch at position {pos + off} (offsets {h.base_offset}..{last})"
                    if h.base_offset < base_offset:
                        problems.append(f"{where}: offset below the segment's base offset {base_offset}")
                    if last - base_offset > 2**31 - 1:
                        problems.append(f"{where}: offset does not fit a relative offset")
                    if expected is not None and h.base_offset < expected:
                        problems.append(f"{where}: offsets not increasing (expected >= {expected})")
                    if next_base is not None and last >= next_base:
                        problems.append(f"{where}: offset reaches the next segment's base offset {next_base}")
                    batches[pos + off] = (h.base_offset, last)
                    expected = last + 1
                    max_ts = max(max_ts, h.max_timestamp)
                    consumed = off + h.batch_length + LOG_OVERHEAD
            except ProtocolError as e:
                problems.append(f"{path}: invalid batch at position {pos + consumed}: {e}")
                return batches, expected, max_ts
            if consumed == 0:
                # a batch bigger than the chunk, or a torn tail
                head = os.pread(fd, 12, pos)
                blen = int.from_bytes(head[8:12], "big", signed=True) if len(head) == 12 else -1
                if blen < 49 or pos + 12 + blen > total:
                    problems.append(f"{path}: {total - pos} trailing bytes at position {pos} are not a whole batch")
                    return batches, expected, max_ts
                data = os.pread(fd, blen + 12, pos)
                try:
                    h = validate_batch(data, 0)
                except ProtocolError as e:
                    problems.append(f"{path}: invalid batch at position {pos}: {e}")
                    return batches, expected, max_ts
                last = h.base_offset + h.last_offset_delta
                if expected is not None and h.base_offset < expected:
                    problems.append(f"{path}: batch at position {pos}: offsets not increasing")
                batches[pos] = (h.base_offset, last)
                expected = last + 1
                max_ts = max(max_ts, h.max_timestamp)
                consumed = blen + 12
            pos += consumed
    return batches, expected, max_ts


def _check_offset_index(path: str, base_offset: int, batches: dict[int, tuple[int, int]],
                        log_size: int, problems: list[str], max_entries: int | None = None) -> None:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        problems.append(f"{path}: missing")
        return
    if len(data) % 8:
        problems.append(f"{path}: size {len(data)} is not a multiple of 8")
    n = len(data) // 8 if max_entries is None else min(max_entries, len(data) // 8)
    prev_off, prev_pos = -1, -1
    for i in range(n):
        rel, pos = _OFF.unpack_from(data, i * 8)
        off = base_offset + rel
        if rel == 0 and pos == 0 and i > 0:
            # the zero-filled preallocated tail of an active segment's index
            break
        if pos not in batches:
            problems.append(f"{path}: entry {i} ({off}, {pos}) does not point at a batch boundary")
        elif batches[pos][0] > off:
            problems.append(f"{path}: entry {i} ({off}, {pos}) points at a batch starting at {batches[pos][0]}")
        if off <= prev_off or pos <= prev_pos:
            problems.append(f"{path}: entry {i} ({off}, {pos}) is not increasing")
        if pos >= max(log_size, 1):
            problems.append(f"{path}: entry {i} position {pos} is past the log's end {log_size}")
        prev_off, prev_pos = off, pos


def _check_time_index(path: str, base_offset: int, next_offset: int | None, max_ts: int,
                      problems: list[str], max_entries: int | None = None) -> None:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return  # rebuilt on load; Kafka tolerates a missing time index
    if len(data) % 12:
        problems.append(f"{path}: size {len(data)} is not a multiple of 12")
    prev_ts, prev_off = -1, -1
    n = len(data) // 12 if max_entries is None else min(max_entries, len(data) // 12)
    for i in range(n):
        ts, rel = _TIME.unpack_from(data, i * 12)
        off = base_offset + rel
        if ts == 0 and rel == 0 and i > 0:
            break
        if ts < prev_ts or off < prev_off:
            problems.append(f"{path}: entry {i} ({ts}, {off}) goes backwards")
        if next_offset is not None and off >= max(next_offset, base_offset + 1):
            problems.append(f"{path}: entry {i} offset {off} is past the segment's end {next_offset}")
        if ts > max_ts >= 0:
            problems.append(f"{path}: entry {i} timestamp {ts} exceeds the segment's largest {max_ts}")
        prev_ts, prev_off = ts, off


def _check_txn_index(path: str, base_offset: int, next_offset: int | None, problems: list[str]) -> None:
    """The ``.txnindex`` passes its sanity check and its entries' markers lie inside the segment."""
    from .errors import CorruptIndexError
    from .txn_index import TransactionIndex

    idx = TransactionIndex(base_offset, path)
    try:
        idx.sanity_check()
    except CorruptIndexError as e:
        problems.append(f"{path}: {e}")
        return
    for t in idx.all_aborted_txns():
        if next_offset is not None and t.last_offset >= next_offset:
            problems.append(f"{path}: {t} ends past the segment's end {next_offset}")


def verify_files(log_path: str, base_offset: int, *, size: int | None = None, prev_next: int | None = None,
                 next_base: int | None = None, index_path: str | None = None,
                 time_index_path: str | None = None, index_entries: int | None = None,
                 time_index_entries: int | None = None,
                 txn_index_path: str | None = None) -> tuple[list[str], int | None]:
    problems: list[str] = []
    batches, nxt, max_ts = _scan_log(log_path, base_offset, size, prev_next, next_base, problems)
    log_size = size if size is not None else os.path.getsize(log_path)
    if index_path is not None and os.path.exists(index_path):
        _check_offset_index(index_path, base_offset, batches, log_size, problems, index_entries)
    if time_index_path is not None:
        _check_time_index(time_index_path, base_offset, nxt, max_ts, problems, time_index_entries)
    if txn_index_path is not None:
        # a live log's scrub reads the log up to a size taken earlier: entries for markers appended since are fine
        _check_txn_index(txn_index_path, base_offset, nxt if size is None else None, problems)
    return problems, nxt


def verify_segment(segment: "LogSegment", size: int, prev_next: int | None, next_base: int | None,
                   index_entries: int | None = None, time_index_entries: int | None = None
                   ) -> tuple[list[str], int | None]:
    return verify_files(segment.log.path, segment.base_offset, size=size, prev_next=prev_next, next_base=next_base,
                        index_path=segment.offset_index_path, time_index_path=segment.time_index_path,
                        index_entries=segment.offset_index.entries if index_entries is None else index_entries,
                        time_index_entries=segment.time_index.entries if time_index_entries is None
                        else time_index_entries, txn_index_path=segment.txn_index.path)


def verify_partition_dir(dir: str) -> list[str]:
    bases = sorted(files.offset_from_file_name(n) for n in os.listdir(dir)
                   if n.endswith(files.LOG_FILE_SUFFIX) and n.split(".")[0].isdigit())
    problems: list[str] = []
    prev_next = None
    for i, base in enumerate(bases):
        nxt_base = bases[i + 1] if i + 1 < len(bases) else None
        p, prev_next = verify_files(files.log_file(dir, base), base, prev_next=prev_next, next_base=nxt_base,
                                    index_path=files.offset_index_file(dir, base),
                                    time_index_path=files.time_index_file(dir, base),
                                    txn_index_path=files.transaction_index_file(dir, base))
        problems.extend(p)
    return problems


def verify_log_dir(dir: str) -> dict[str, list[str]]:
    """Every partition directory under a log dir (or ``dir`` itself if it is a partition directory)."""
    if any(n.endswith(files.LOG_FILE_SUFFIX) for n in os.listdir(dir)):
        return {dir: verify_partition_dir(dir)}
    out = {}
    for name in sorted(os.listdir(dir)):
        path = os.path.join(dir, name)
        if os.path.isdir(path):
            try:
                files.parse_topic_partition_name(name)
            except ValueError:
                continue
            out[path] = verify_partition_dir(path)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="odradek verify-log", description="Check every batch's CRC and every "
                                     "index entry of Kafka-format log directories.")
    parser.add_argument("dirs", nargs="+", help="a log dir (log.dirs entry) or a <topic>-<partition> dir")
    args = parser.parse_args(argv)
    bad = 0
    for d in args.dirs:
        for part, problems in verify_log_dir(d).items():
            if problems:
                bad += len(problems)
                for p in problems:
                    print(f"CORRUPT {p}")
            else:
                print(f"OK {part}")
    return 1 if bad else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
