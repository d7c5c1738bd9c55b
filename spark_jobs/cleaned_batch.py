"""The size a cleaning pass writes for a batch that loses some of its records. Runs on executors; no pyspark import.

The batch is read again from its segment (by position, as the scan saw it) instead of carrying every record's
value and headers through the scan: only the offsets to keep are held. The new batch is built exactly as
storage's cleaner builds it (``Cleaner._clean_into``): the decoded records that stay, the same codec, producer
fields, timestamp type and last offset delta, and the delete horizon. A batch that is not where the scan found it
(the segment was truncated or rewritten meanwhile) is an error naming file and position, never a wrong size.
"""

from __future__ import annotations

import os
from typing import Iterable

from protocol.record_codec import build_batch, decode_batch
from protocol.records import LOG_OVERHEAD

from .scan import SegmentChangedError

__all__ = ["cleaned_batch_size", "read_batch"]


def cleaned_batch_size(raw: bytes, kept_offsets: Iterable[int] | None, new_horizon: int | None, where: str) -> int:
    """Bytes of the batch ``raw`` once only ``kept_offsets`` remain (None: all its records, e.g. a transaction
    marker given a delete horizon), with ``new_horizon`` as its delete horizon."""
    header, records = decode_batch(raw, 0, verify_crc=True)
    if kept_offsets is None:
        retained = records
    else:
        keep = set(kept_offsets)
        retained = [r for r in records if r.offset in keep]
        if len(retained) != len(keep):
            raise SegmentChangedError(f"{where}: the batch no longer holds the records the scan read")
    return len(build_batch(
        retained, base_offset=header.base_offset, compression=header.compression,
        producer_id=header.producer_id, producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
        is_transactional=header.is_transactional, is_control=header.is_control, timestamp_type=header.timestamp_type,
        partition_leader_epoch=header.partition_leader_epoch, last_offset_delta=header.last_offset_delta,
        delete_horizon_ms=new_horizon,
        max_timestamp=header.max_timestamp if header.timestamp_type == 1 else None))


def read_batch(fds: dict[str, int], path: str, position: int, size: int, base_offset: int) -> tuple[bytes, str]:
    """(the batch's bytes, "file@position") as the scan saw it; ``fds`` keeps one descriptor per segment open for
    the caller to close. A batch that is no longer there is a SegmentChangedError, never a wrong size."""
    fd = fds.get(path)
    if fd is None:
        fd = fds[path] = os.open(path, os.O_RDONLY)
    raw = os.pread(fd, size, position)
    where = f"{path}@{position}"
    if len(raw) != size or int.from_bytes(raw[:8], "big", signed=True) != base_offset \
            or int.from_bytes(raw[8:12], "big", signed=True) + LOG_OVERHEAD != size:
        raise SegmentChangedError(f"{where}: batch {base_offset} is no longer there (segment changed while the "
                                  "report ran)")
    return raw, where
