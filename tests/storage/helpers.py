"""Shared helpers for the storage tests: batch builders, log factories and the no-fsync file I/O."""

from __future__ import annotations

import os

from protocol.record_codec import Record, build_batch, decode_batch
from protocol.records import LOG_OVERHEAD, iter_batch_positions

from storage.config import LogConfig
from storage.fileio import FileIO
from storage.log import FetchIsolation, Log


class NoSyncFileIO(FileIO):
    """File I/O with fsync turned into a no-op, which the storage tests build their logs and log managers with:
    the disks of CI machines make real fsyncs cost milliseconds each, and no test here depends on them (the
    power-loss tests model durability explicitly in :mod:`tests.storage.powerloss`; a SIGKILL does not lose the
    page cache)."""

    def fsync(self, fd: int) -> None:
        pass  # deliberately no durability: tests that check it pass a recording FileIO instead

    def fsync_dir(self, path: str) -> None:
        pass

    def msync(self, mm, path: str) -> None:
        pass


def batch(n: int = 1, *, key: bytes | None = b"k", value_size: int = 10, ts: int = 1000, tag: int = 0,
          producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1, keys=None, values=None,
          compression: int = 0, is_transactional: bool = False) -> bytearray:
    """A client batch (base offset 0) of ``n`` records; values carry ``tag`` so batches are distinguishable."""
    recs = []
    for i in range(n):
        k = keys[i] if keys is not None else key
        if values is not None:
            v = values[i]
        else:
            v = (b"%d:%d:" % (tag, i)).ljust(value_size, b"x")
        recs.append(Record(k, v, timestamp=ts + i))
    return bytearray(build_batch(recs, producer_id=producer_id, producer_epoch=producer_epoch,
                                 base_sequence=base_sequence, compression=compression,
                                 is_transactional=is_transactional))


def open_log(root: str, config: LogConfig | None = None, *, name: str = "t-0", now_ms: int = 0,
             file_io: FileIO | None = None, **kw) -> Log:
    """``Log.open`` of ``root/name``, with :class:`NoSyncFileIO` unless ``file_io`` is given."""
    return Log.open(os.path.join(root, name), config or LogConfig(), now_ms=now_ms,
                    file_io=file_io if file_io is not None else NoSyncFileIO(), **kw)


def all_records(lg: Log, start: int = 0, isolation: str = FetchIsolation.LOG_END) -> list:
    """Every record from ``start`` as (offset, key, value)."""
    out = []
    for b in lg.iter_batches(start, isolation):
        _, recs = decode_batch(b, 0)
        out.extend((r.offset, r.key, r.value) for r in recs)
    return out


def all_batches(lg: Log, start: int = 0) -> list[bytes]:
    return list(lg.iter_batches(start))


def split_batches(data: bytes) -> list[bytes]:
    return [bytes(data[p:p + h.batch_length + LOG_OVERHEAD]) for p, h in iter_batch_positions(data)]
