"""Record batch v2 headers: parse, validate (CRC32C), and stamp in place. The broker's and storage's hot path.

Nothing here looks at individual records or decompresses: every function costs one ``struct`` call plus, where it
says so, one ``crc32c`` over the batch. Record-level encode/decode lives in :mod:`protocol.record_codec`.

Buffers may be ``bytes``, ``bytearray``, ``memoryview`` (1-D, byte format) or ``mmap``; in-place writers need a
writable one. CRC checks slice a ``memoryview`` and never copy.

Errors (all from :mod:`protocol.errors`):

* :class:`DecodeError` — :func:`parse_header` was handed fewer than 61 bytes.
* :class:`CorruptRecordError` (CORRUPT_MESSAGE) — truncated batch, length below the minimum, magic outside 0..2,
  CRC mismatch, compression id 5..7.
* :class:`UnsupportedMagicError` (INVALID_RECORD) — a legacy magic 0/1 message set.
* :class:`InvalidRecordError` (INVALID_RECORD) — negative record count or offset delta, and the client-only
  checks of :func:`check_client_batch`.

These are the codes a Kafka 4.x broker returns for the same bytes.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from crc32c import crc32c as _crc32c

from protocol.errors import CorruptRecordError, DecodeError, InvalidRecordError, UnsupportedMagicError

# -- layout ---------------------------------------------------------------------------------------------------------

BATCH_HEADER_SIZE: Final = 61
LOG_OVERHEAD: Final = 12                   # baseOffset (8) + batchLength (4)
MIN_BATCH_LENGTH: Final = BATCH_HEADER_SIZE - LOG_OVERHEAD   # 49: batchLength of a batch with no records
HEADER_SIZE_UP_TO_MAGIC: Final = 17
LEGACY_MIN_LENGTH: Final = 14              # LegacyRecord.RECORD_OVERHEAD_V0: the smallest sane length field

MAGIC_V0: Final = 0
MAGIC_V1: Final = 1
MAGIC_V2: Final = 2

BASE_OFFSET_OFFSET: Final = 0
LENGTH_OFFSET: Final = 8
PARTITION_LEADER_EPOCH_OFFSET: Final = 12
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21              # the CRC covers [ATTRIBUTES_OFFSET, end of batch)
LAST_OFFSET_DELTA_OFFSET: Final = 23
BASE_TIMESTAMP_OFFSET: Final = 27
MAX_TIMESTAMP_OFFSET: Final = 35
PRODUCER_ID_OFFSET: Final = 43
PRODUCER_EPOCH_OFFSET: Final = 51
BASE_SEQUENCE_OFFSET: Final = 53
RECORDS_COUNT_OFFSET: Final = 57
RECORDS_OFFSET: Final = 61

# compression ids (attributes bits 0-2)
NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4

# timestamp types (attributes bit 3)
CREATE_TIME: Final = 0
LOG_APPEND_TIME: Final = 1

COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20
DELETE_HORIZON_MASK: Final = 0x40

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1
NO_TIMESTAMP: Final = -1

_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == BATCH_HEADER_SIZE
_LEN_EPOCH_MAGIC: Final = struct.Struct(">iib")    # batchLength, partitionLeaderEpoch, magic at offset 8
_I64: Final = struct.Struct(">q")
_I32: Final = struct.Struct(">i")
_U32: Final = struct.Struct(">I")
_I16: Final = struct.Struct(">h")

_unpack_header = _HEADER.unpack_from
_unpack_lem = _LEN_EPOCH_MAGIC.unpack_from
_INT32_MAX: Final = 0x7FFFFFFF

# Hot-path helpers for callers that check header fields by index (storage's produce fast path): bound ``struct``
# methods, no checks, no BatchHeader.
#: ``unpack_header_fields(buf, pos)``: the 13 header fields at ``pos`` as a plain tuple, in :class:`BatchHeader`
#: order; raises ``struct.error`` if fewer than 61 bytes are there.
unpack_header_fields: Final = _HEADER.unpack_from
#: ``pack_int64(buf, pos, v)`` / ``pack_int32(buf, pos, v)``: big-endian, in place (what :func:`stamp_batch` does).
pack_int64: Final = _I64.pack_into
pack_int32: Final = _I32.pack_into


class BatchHeader(NamedTuple):
    """The 61 fixed bytes of a v2 batch, as read. A tuple, so ``parse_header`` is one C call plus ``tuple.__new__``."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """Bit 6: base_timestamp holds the compaction delete horizon, not the first record's timestamp."""
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, log overhead included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_sequence(self) -> int:
        """base_sequence + last_offset_delta, wrapping past INT32_MAX to 0 as Kafka's ``incrementSequence`` does."""
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        delta = self.last_offset_delta
        if base > _INT32_MAX - delta:
            return delta - (_INT32_MAX - base) - 1
        return base + delta


_new_header = tuple.__new__


def parse_header(buf, pos: int = 0) -> BatchHeader:
    """Unpack the 61-byte header at ``pos``. No checks at all (magic, length, CRC): see :func:`validate_batch`.

    Raises :class:`DecodeError` if fewer than 61 bytes are available; use :func:`iter_batch_positions` to tell an
    incomplete tail from garbage.
    """
    try:
        return _new_header(BatchHeader, _unpack_header(buf, pos))
    except struct.error:
        raise DecodeError(f"need {BATCH_HEADER_SIZE} bytes for a batch header at {pos}, "
                          f"have {max(len(buf) - pos, 0)}") from None


def _compute_crc(buf, pos: int, end: int) -> int:
    with memoryview(buf) as mv, mv[pos + ATTRIBUTES_OFFSET:end] as covered:
        return _crc32c(covered)


def _check_magic(magic: int, pos: int) -> None:
    if magic == MAGIC_V0 or magic == MAGIC_V1:
        raise UnsupportedMagicError(f"legacy message set (magic {magic}) at {pos}: only magic 2 is accepted")
    raise CorruptRecordError(f"invalid magic {magic} at {pos}")


def _check_short(buf, pos: int, n: int) -> None:
    """Fewer than 61 bytes at ``pos``: always an error; report it the way Kafka would (legacy magic first)."""
    if pos < 0 or n - pos < HEADER_SIZE_UP_TO_MAGIC:
        raise CorruptRecordError(f"truncated batch at {pos}: {max(n - pos, 0)} bytes")
    length, _, magic = _unpack_lem(buf, pos + LENGTH_OFFSET)
    if length < LEGACY_MIN_LENGTH:
        raise CorruptRecordError(f"batch length {length} at {pos} is below the minimum record overhead")
    if magic != MAGIC_V2:
        _check_magic(magic, pos)
    raise CorruptRecordError(f"truncated batch at {pos}: {n - pos} bytes, less than a batch header")


def validate_batch(buf, pos: int = 0, check_crc: bool = True) -> BatchHeader:
    """Check the batch at ``pos`` the way Kafka does on produce and log recovery, and return its header.

    Order follows Kafka (``ByteBufferLogInputStream.nextBatchSize``, ``ProduceRequest.validateRecords``,
    ``DefaultRecordBatch.ensureValid``): length field >= 14, magic (0/1 -> :class:`UnsupportedMagicError`, other
    != 2 -> :class:`CorruptRecordError`), length >= 49 and within ``buf``, CRC32C over attributes..end; then
    compression id <= 4 (CorruptRecordError), records_count >= 0 and last_offset_delta >= 0
    (:class:`InvalidRecordError`, Kafka's code for a negative count). A batch shorter than ``buf`` allows is
    CorruptRecordError. Whether count matches the offset range is a client-only rule (compaction breaks it):
    see :func:`check_client_batch`. ``check_crc=False`` skips only the CRC (for readers that opt out, like a
    consumer with ``check.crcs=false``).
    """
    n = len(buf)
    if pos < 0 or n - pos < BATCH_HEADER_SIZE:
        _check_short(buf, pos, n)
    h = _new_header(BatchHeader, _unpack_header(buf, pos))
    length = h[1]
    if h[3] != MAGIC_V2 or length < MIN_BATCH_LENGTH:
        if length < LEGACY_MIN_LENGTH:
            raise CorruptRecordError(f"batch length {length} at {pos} is below the minimum record overhead")
        if h[3] != MAGIC_V2:
            _check_magic(h[3], pos)
        raise CorruptRecordError(f"batch length {length} at {pos} is smaller than the v2 header")
    end = pos + LOG_OVERHEAD + length
    if end > n:
        raise CorruptRecordError(f"truncated batch at {pos}: length {length} needs {end - n} more bytes")
    if check_crc and h[4] != _crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:end]):
        raise CorruptRecordError(f"batch at {pos} is corrupt (stored crc {h[4]}, computed "
                                 f"{_compute_crc(buf, pos, end)})")
    if h[5] & COMPRESSION_MASK > ZSTD:
        raise CorruptRecordError(f"unknown compression type id {h[5] & COMPRESSION_MASK} in batch at {pos}")
    if h[12] < 0:
        raise InvalidRecordError(f"invalid record count {h[12]} in batch at {pos}")
    if h[6] < 0:
        raise InvalidRecordError(f"invalid last offset delta {h[6]} in batch at {pos}")
    return h


def validate_batches(buf) -> list[BatchHeader]:
    """Validate every batch of a produce ``records`` payload, end to end; return their headers in order.

    Bytes after the last whole batch raise :class:`CorruptRecordError`. (Kafka itself silently trims such a tail in
    ``UnifiedLog.trimInvalidBytes``; no real client sends one, so odradek rejects it rather than ack a short write.)
    An empty payload returns ``[]``: "at least one batch" (and "exactly one" for Produce v3+) is the caller's rule.
    """
    headers = []
    pos = 0
    n = len(buf)
    while pos < n:
        h = validate_batch(buf, pos)
        headers.append(h)
        pos += h[1] + LOG_OVERHEAD
    return headers


def check_client_batch(h: BatchHeader) -> None:
    """The per-batch rules Kafka applies only to batches from clients (``LogValidator.validateBatch``,
    ``UnifiedLog.analyzeAndValidateRecords``): base offset 0, count > 0 and equal to last_offset_delta + 1,
    no control batches, a producer id needs a sequence. Raises :class:`InvalidRecordError`.
    """
    if h.base_offset != 0:
        raise InvalidRecordError(f"the base offset of a client batch must be 0, not {h.base_offset}")
    count = h.records_count
    if h.last_offset_delta < 0:
        raise InvalidRecordError(f"batch has an invalid offset range (last offset delta {h.last_offset_delta})")
    if count <= 0:
        raise InvalidRecordError(f"invalid reported count for record batch: {count}")
    if count != h.last_offset_delta + 1:
        raise InvalidRecordError(f"inconsistent batch offset range [0, {h.last_offset_delta}] and count of "
                                 f"records {count}")
    if h.attributes & CONTROL_MASK:
        raise InvalidRecordError("clients are not allowed to write control records")
    if h.producer_id > NO_PRODUCER_ID and h.base_sequence < 0:
        raise InvalidRecordError(f"invalid sequence number {h.base_sequence} in record batch with producerId "
                                 f"{h.producer_id}")


class BatchScan:
    """Iterator over ``(position, header)`` of whole v2 batches in ``buf[start:end]``, without CRC checks.

    For storage's index rebuild and recovery scans. After the loop:

    * ``position`` is where valid data ends (the start of the first batch not yielded);
    * ``incomplete`` is True if the loop stopped at a partial batch (``position < end``) rather than at ``end``.

    A header that is whole enough to judge but nonsensical raises, with ``position`` left at that batch: a length
    below 49 (a zero-filled tail included) or above ``max_batch_size`` once its 12 bytes are there, or a magic other
    than 2 once 17 bytes are, gives :class:`CorruptRecordError` (:class:`UnsupportedMagicError` for magic 0/1). A
    plausible batch longer than what remains is an incomplete tail, not corruption, as in Kafka's
    ``FileLogInputStream``. Recovery that wants CRCs calls :func:`validate_batch` on each yielded position.
    """

    __slots__ = ("_buf", "_end", "_max", "position", "incomplete")

    def __init__(self, buf, start: int = 0, end: int | None = None, max_batch_size: int | None = None) -> None:
        n = len(buf)
        self._buf = buf
        self._end = n if end is None else min(end, n)
        self._max = max_batch_size
        self.position = start
        self.incomplete = False

    def __iter__(self) -> BatchScan:
        return self

    def __next__(self) -> tuple[int, BatchHeader]:
        pos = self.position
        remaining = self._end - pos
        if remaining < LOG_OVERHEAD:
            self.incomplete = remaining > 0
            raise StopIteration
        buf = self._buf
        length = _I32.unpack_from(buf, pos + LENGTH_OFFSET)[0]
        if length < MIN_BATCH_LENGTH:
            if (length >= LEGACY_MIN_LENGTH and remaining >= HEADER_SIZE_UP_TO_MAGIC
                    and buf[pos + MAGIC_OFFSET] in (MAGIC_V0, MAGIC_V1)):
                _check_magic(buf[pos + MAGIC_OFFSET], pos)
            raise CorruptRecordError(f"batch length {length} at {pos} is smaller than the v2 header")
        if self._max is not None and length + LOG_OVERHEAD > self._max:
            raise CorruptRecordError(f"batch size {length + LOG_OVERHEAD} at {pos} exceeds {self._max}")
        if remaining < HEADER_SIZE_UP_TO_MAGIC:
            self.incomplete = True
            raise StopIteration
        magic = buf[pos + MAGIC_OFFSET]
        if magic != MAGIC_V2:
            _check_magic(magic, pos)
        if remaining < length + LOG_OVERHEAD:
            self.incomplete = True
            raise StopIteration
        h = _new_header(BatchHeader, _unpack_header(buf, pos))
        self.position = pos + LOG_OVERHEAD + length
        return pos, h


def iter_batch_positions(buf, start: int = 0, end: int | None = None,
                         max_batch_size: int | None = None) -> BatchScan:
    """Walk the batches in ``buf[start:end]``: see :class:`BatchScan` (its ``position``/``incomplete`` say where
    and why the walk stopped)."""
    return BatchScan(buf, start, end, max_batch_size)


def stamp_batch(buf, pos: int, base_offset: int, partition_leader_epoch: int) -> None:
    """Write baseOffset and partitionLeaderEpoch in place. Both lie outside the CRC, so it stays valid."""
    _I64.pack_into(buf, pos, base_offset)
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)


def set_last_offset(buf, pos: int, last_offset: int) -> None:
    """Kafka's ``setLastOffset``: base_offset = last_offset - last_offset_delta (outside the CRC)."""
    delta = _I32.unpack_from(buf, pos + LAST_OFFSET_DELTA_OFFSET)[0]
    _I64.pack_into(buf, pos, last_offset - delta)


def set_max_timestamp(buf, pos: int, timestamp_type: int, max_timestamp: int) -> bool:
    """Kafka's ``DefaultRecordBatch.setMaxTimestamp``: set the timestamp-type bit and maxTimestamp, then rewrite the
    CRC (both are inside it). For LogAppendTime the broker passes (LOG_APPEND_TIME, now).

    Like Kafka, attributes are rebuilt from the known bits (0-6 except 3 kept, bit 3 set from ``timestamp_type``,
    bits 7-15 cleared), and nothing is written when type and timestamp already match. Returns whether it wrote.
    """
    attributes = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    current_type = (attributes & TIMESTAMP_TYPE_MASK) >> 3
    if current_type == timestamp_type and _I64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)[0] == max_timestamp:
        return False
    attributes = (attributes & 0x77) | (TIMESTAMP_TYPE_MASK if timestamp_type == LOG_APPEND_TIME else 0)
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    end = pos + LOG_OVERHEAD + _I32.unpack_from(buf, pos + LENGTH_OFFSET)[0]
    _U32.pack_into(buf, pos + CRC_OFFSET, _compute_crc(buf, pos, end))
    return True


def compute_crc(buf, pos: int = 0) -> int:
    """CRC32C of the batch at ``pos`` as it should be stored (over attributes..end, per its length field)."""
    end = pos + LOG_OVERHEAD + _I32.unpack_from(buf, pos + LENGTH_OFFSET)[0]
    if end > len(buf) or end < pos + ATTRIBUTES_OFFSET:
        raise CorruptRecordError(f"batch at {pos} does not fit the buffer")
    return _compute_crc(buf, pos, end)


def write_crc(buf, pos: int = 0) -> int:
    """Recompute and store the CRC of the batch at ``pos`` (after editing CRC-covered fields); returns it."""
    crc = compute_crc(buf, pos)
    _U32.pack_into(buf, pos + CRC_OFFSET, crc)
    return crc
