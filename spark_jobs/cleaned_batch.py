"""The size a cleaning pass writes for a batch that loses some of its records. Runs on executors; no pyspark import.

The batch is read again from its segment (by position, as the scan saw it) instead of carrying every record's
value and headers through a shuffle: only the offsets to keep travel. The new batch is built exactly as
storage's cleaner builds it (``Cleaner._clean_into``): the decoded records that stay, the same codec, producer
fields, timestamp type and last offset delta, and the delete horizon. A batch that is not where the scan found it
(the segment was truncated or rewritten meanwhile) is an error naming file and position, never a wrong size.
"""

from __future__ import annotations

import os
from typing import Iterable, Iterator

from protocol.record_codec import build_batch, decode_batch
from protocol.records import LOG_OVERHEAD

from .scan import SegmentChangedError

__all__ = ["cleaned_batch_size", "cleaned_sizes"]


def cleaned_batch_size(raw: bytes, kept_offsets: Iterable[int], new_horizon: int | None, where: str) -> int:
    """Bytes of the batch ``raw`` once only ``kept_offsets`` remain, with ``new_horizon`` as its delete horizon."""
    header, records = decode_batch(raw, 0, verify_crc=True)
    keep = set(kept_offsets)
    retained = [r for r in records if r.offset in keep]
    if len(retained) != len(keep):
        raise SegmentChangedError(f"{where}: the batch no longer holds the records the scan read")
    return len(build_batch(
        retained, base_offset=header.base_offset, compression=header.compression,
        producer_id=header.producer_id, producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
        is_transactional=header.is_transactional, timestamp_type=header.timestamp_type,
        partition_leader_epoch=header.partition_leader_epoch, last_offset_delta=header.last_offset_delta,
        delete_horizon_ms=new_horizon,
        max_timestamp=header.max_timestamp if header.timestamp_type == 1 else None))


def cleaned_sizes(partition_dirs: dict[tuple[str, int], str]):
    """A ``mapInArrow`` function over one row per batch: rows with ``rewrite`` true get ``new_size``, the bytes the
    cleaner writes for them (from topic, partition, segment, position, base_offset, size, kept_offsets and
    new_horizon); other rows get null. ``kept_offsets`` is dropped, every other column passes through, so the plan
    stays one line (a branch joined back would scan the log twice). One descriptor per segment stays open per task."""

    def run(batches: Iterator) -> Iterator:
        import pyarrow as pa

        fds: dict[str, int] = {}
        try:
            for rb in batches:
                cols = rb.select(["topic", "partition", "segment", "position", "base_offset", "size", "kept_offsets",
                                  "new_horizon", "rewrite"]).to_pydict()
                sizes: list[int | None] = []
                for i, rewrite in enumerate(cols["rewrite"]):
                    if not rewrite:
                        sizes.append(None)
                        continue
                    tp = (cols["topic"][i], cols["partition"][i])
                    path = os.path.join(partition_dirs[tp], f"{cols['segment'][i]:020d}.log")
                    fd = fds.get(path)
                    if fd is None:
                        fd = fds[path] = os.open(path, os.O_RDONLY)
                    pos, size, base = cols["position"][i], cols["size"][i], cols["base_offset"][i]
                    raw = os.pread(fd, size, pos)
                    where = f"{path}@{pos}"
                    if len(raw) != size or int.from_bytes(raw[:8], "big", signed=True) != base \
                            or int.from_bytes(raw[8:12], "big", signed=True) + LOG_OVERHEAD != size:
                        raise SegmentChangedError(f"{where}: batch {base} is no longer there (segment changed "
                                                  "while the report ran)")
                    sizes.append(cleaned_batch_size(raw, cols["kept_offsets"][i], cols["new_horizon"][i], where))
                keep = [n for n in rb.schema.names if n != "kept_offsets"]
                yield pa.RecordBatch.from_arrays([rb.column(n) for n in keep] + [pa.array(sizes, pa.int64())],
                                                 names=keep + ["new_size"])
        finally:
            for fd in fds.values():
                os.close(fd)

    return run
