"""Record-level encode/decode of v2 batches: for consumers, tools, the log cleaner and Spark jobs, not the broker's
produce/fetch path (that one only needs :mod:`protocol.records`).

Decoding never trusts a declared size: every length, count and varint is checked against the bytes actually left
(in the record, then in the batch) before anything is sliced, and decompression is bounded by
``max_decompressed_size``. Every failure is a :class:`CorruptRecordError`, or what :func:`validate_batch` raises for
the header (:class:`UnsupportedMagicError`, :class:`InvalidRecordError`). Kafka's own reader reports record-level
structure errors as INVALID_RECORD; the bytes rejected are the same.

Header keys are decoded as UTF-8 with ``surrogateescape``, so re-encoding a decoded record reproduces its bytes
even if a client wrote invalid UTF-8.
"""

from __future__ import annotations

import enum
import struct
from typing import Final, Iterable, Iterator, NamedTuple, Sequence

from crc32c import crc32c as _crc32c

from protocol import fast_records as _fast_records
from protocol.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, compress, decompress
from protocol.errors import CorruptRecordError
from protocol.fast_records import decode_records as _fast_decode
from protocol.varint import (  # noqa: F401 - decode_varint/decode_varlong/encode_varint/encode_varlong re-exported
    MAX_VARINT_BYTES, MAX_VARLONG_BYTES, decode_varint, decode_varlong, encode_varint, encode_varlong,
    size_of_varint,
)
from protocol.varint import append_unsigned as _append_uvarint  # noqa: F401
from protocol.varint import append_varint as _append_varint
from protocol.varint import append_varlong as _append_varlong
from protocol.varint import read_unsigned as _read_uvarint
from protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CREATE_TIME,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    NONE,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    ZSTD,
    BatchHeader,
    iter_batch_positions,
    validate_batch,
)

_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_CONTROL_KEY: Final = struct.Struct(">hh")
_END_TXN_VALUE: Final = struct.Struct(">hi")

# -- records ------------------------------------------------------------------------------------------------------

Header = tuple[str, "bytes | None"]


class Record:
    """One record. ``offset``/``offset_delta`` and an absolute ``timestamp`` are filled in by decoding; when building,
    ``offset_delta`` defaults to the record's index and ``timestamp`` None means NO_TIMESTAMP (-1)."""

    __slots__ = ("key", "value", "headers", "timestamp", "offset_delta", "offset")

    def __init__(self, key: bytes | None = None, value: bytes | None = None, headers: Sequence[Header] = (),
                 timestamp: int | None = None, offset_delta: int | None = None, offset: int | None = None) -> None:
        self.key = key
        self.value = value
        self.headers = list(headers)
        self.timestamp = timestamp
        self.offset_delta = offset_delta
        self.offset = offset

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return (self.key == other.key and self.value == other.value and self.headers == other.headers
                and self.timestamp == other.timestamp and self.offset_delta == other.offset_delta
                and self.offset == other.offset)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Record(offset={self.offset}, offset_delta={self.offset_delta}, timestamp={self.timestamp}, "
                f"key={self.key!r}, value={_short(self.value)}, headers={self.headers!r})")


def _short(v: bytes | None) -> str:
    if v is None or len(v) <= 40:
        return repr(v)
    return f"{v[:32]!r}...({len(v)} bytes)"


def _append_bytes(out: bytearray, b) -> None:
    if b is None:
        out.append(1)  # zigzag(-1)
    else:
        _append_varint(out, len(b))
        out += b


def encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, key, value,
                  headers: Iterable[Header]) -> None:
    """Append one record (length-prefixed) to ``out``."""
    body = bytearray(b"\x00")  # attributes: unused, always 0
    _append_varlong(body, timestamp_delta)
    _append_varint(body, offset_delta)
    _append_bytes(body, key)
    _append_bytes(body, value)
    headers = headers if isinstance(headers, (list, tuple)) else list(headers)
    _append_varint(body, len(headers))
    for hk, hv in headers:
        _append_bytes(body, hk.encode("utf-8", "surrogateescape") if isinstance(hk, str) else hk)
        _append_bytes(body, hv)
    _append_varint(out, len(body))
    out += body


def build_batch_header(*, base_offset: int, batch_length: int, partition_leader_epoch: int, attributes: int,
                       last_offset_delta: int, base_timestamp: int, max_timestamp: int, producer_id: int,
                       producer_epoch: int, base_sequence: int, records_count: int, crc: int = 0) -> bytes:
    """The 61 header bytes (magic 2). The CRC must be filled in over the finished batch (``records.write_crc``)."""
    return _HEADER.pack(base_offset, batch_length, partition_leader_epoch, MAGIC_V2, crc, attributes,
                        last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
                        base_sequence, records_count)


def make_attributes(compression: int = NONE, timestamp_type: int = CREATE_TIME, is_transactional: bool = False,
                    is_control: bool = False, has_delete_horizon: bool = False) -> int:
    if not 0 <= compression <= ZSTD:
        raise ValueError(f"unknown compression type id {compression}")
    a = compression
    if timestamp_type == LOG_APPEND_TIME:
        a |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        a |= TRANSACTIONAL_MASK
    if is_control:
        a |= CONTROL_MASK
    if has_delete_horizon:
        a |= DELETE_HORIZON_MASK
    return a


def build_batch(records: Iterable[Record], *, base_offset: int = 0, compression: int = NONE,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE, is_transactional: bool = False, is_control: bool = False,
                timestamp_type: int = CREATE_TIME, partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                base_timestamp: int | None = None, max_timestamp: int | None = None,
                last_offset_delta: int | None = None, delete_horizon_ms: int | None = None,
                compression_level: int | None = None) -> bytes:
    """Encode a complete v2 batch, records section compressed with ``compression``, CRC filled in.

    Defaults follow Kafka's ``MemoryRecordsBuilder``: base_timestamp is the first record's timestamp, max_timestamp
    the largest, last_offset_delta the largest offset delta. ``delete_horizon_ms`` sets attribute bit 6 and becomes
    the base timestamp (as the log cleaner writes it). An empty ``records`` gives an empty batch (count 0,
    base_timestamp -1), the kind compaction leaves behind to keep producer state.
    """
    records = records if isinstance(records, list) else list(records)
    timestamps = [NO_TIMESTAMP if r.timestamp is None else r.timestamp for r in records]
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    elif base_timestamp is not None:
        base_ts = base_timestamp
    else:
        base_ts = timestamps[0] if timestamps else NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max(timestamps) if timestamps else NO_TIMESTAMP
    body = bytearray()
    max_delta = -1
    for i, r in enumerate(records):
        delta = i if r.offset_delta is None else r.offset_delta
        if delta > max_delta:
            max_delta = delta
        encode_record(body, delta, timestamps[i] - base_ts, r.key, r.value, r.headers)
    if last_offset_delta is None:
        last_offset_delta = max(max_delta, 0)
    if compression != NONE and records:
        body = compress(compression, body, compression_level)
    attributes = make_attributes(compression, timestamp_type, is_transactional, is_control,
                                 delete_horizon_ms is not None)
    out = bytearray(build_batch_header(
        base_offset=base_offset, batch_length=BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body),
        partition_leader_epoch=partition_leader_epoch, attributes=attributes, last_offset_delta=last_offset_delta,
        base_timestamp=base_ts, max_timestamp=max_timestamp, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, records_count=len(records)))
    out += body
    with memoryview(out) as mv:
        struct.pack_into(">I", out, CRC_OFFSET, _crc32c(mv[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def decode_records_reference(data, count: int, base_offset: int, base_timestamp: int,
                             log_append_time: int | None = None) -> list[Record]:
    """Decode exactly ``count`` records filling all of ``data`` (the uncompressed records section).

    The reference decoder, in pure Python. :func:`decode_records` (what ``decode_batch`` and every reader use) is
    the compiled one of :mod:`protocol.fast_records` when aiokafka is installed, with the same records and errors.
    """
    if not isinstance(data, bytes):
        data = bytes(data)  # one copy: indexing bytes is much faster than a memoryview, and slices must be bytes
    end = len(data)
    pos = 0
    out = []
    append = out.append
    read_uvarint = _read_uvarint
    read_bytes = _read_bytes
    new_record = object.__new__
    for _ in range(count):
        if pos >= end:
            raise CorruptRecordError(f"batch declares {count} records but its data ends after {len(out)}")
        # record length (varint)
        b = data[pos]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            size, pos = read_uvarint(data, pos, end, 5)
            size &= 0xFFFFFFFF
            size = (size >> 1) ^ -(size & 1)
        rec_end = pos + size
        if size <= 0 or rec_end > end:
            raise CorruptRecordError(f"record size {size} exceeds the {end - pos} bytes left in the batch")
        pos += 1  # attributes
        # timestamp delta (varlong)
        if pos < rec_end and data[pos] < 0x80:
            b = data[pos]
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            r, pos = read_uvarint(data, pos, rec_end, 10)
            r &= 0xFFFFFFFFFFFFFFFF
            ts_delta = (r >> 1) ^ -(r & 1)
        # offset delta (varint)
        if pos < rec_end and data[pos] < 0x80:
            b = data[pos]
            offset_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            r, pos = read_uvarint(data, pos, rec_end, 5)
            r &= 0xFFFFFFFF
            offset_delta = (r >> 1) ^ -(r & 1)
        key, pos = read_bytes(data, pos, rec_end)
        value, pos = read_bytes(data, pos, rec_end)
        # header count (varint)
        if pos < rec_end and data[pos] < 0x80:
            b = data[pos]
            n_headers = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            r, pos = read_uvarint(data, pos, rec_end, 5)
            r &= 0xFFFFFFFF
            n_headers = (r >> 1) ^ -(r & 1)
        headers = []
        if n_headers:
            if n_headers < 0 or n_headers * 2 > rec_end - pos:
                raise CorruptRecordError(f"invalid number of record headers {n_headers}")
            for _h in range(n_headers):
                hk, pos = read_bytes(data, pos, rec_end)
                if hk is None:
                    raise CorruptRecordError("invalid negative header key size")
                hv, pos = read_bytes(data, pos, rec_end)
                headers.append((hk.decode("utf-8", "surrogateescape"), hv))
        if pos != rec_end:
            raise CorruptRecordError(f"invalid record size: expected to read {size} bytes in record payload, "
                                     f"but read {size - (rec_end - pos)}")
        rec = new_record(Record)
        rec.key = key
        rec.value = value
        rec.headers = headers
        rec.timestamp = base_timestamp + ts_delta if log_append_time is None else log_append_time
        rec.offset_delta = offset_delta
        rec.offset = base_offset + offset_delta
        append(rec)
    if pos != end:
        raise CorruptRecordError(f"incorrect declared batch size: {end - pos} bytes remain after {count} records")
    return out


def _read_bytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    """A varint length then that many bytes; any negative length is null (Kafka's ``Utils.readBytes``)."""
    if pos >= end:
        raise CorruptRecordError("record ends inside a length field")
    b = data[pos]
    if b < 0x80:
        n = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        r, pos = _read_uvarint(data, pos, end, 5)
        r &= 0xFFFFFFFF
        n = (r >> 1) ^ -(r & 1)
    if n < 0:
        return None, pos
    stop = pos + n
    if stop > end:
        raise CorruptRecordError(f"field length {n} exceeds the {end - pos} bytes left in the record")
    return data[pos:stop], stop


def decode_batch(buf, pos: int = 0, *, verify_crc: bool = True,
                 max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> tuple[BatchHeader, list[Record]]:
    """Validate (magic, length, CRC unless ``verify_crc=False``), decompress and decode the batch at ``pos``."""
    return _decode_batch(buf, pos, verify_crc, max_decompressed_size, decode_records)


def decode_batch_reference(buf, pos: int = 0, *, verify_crc: bool = True,
                           max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
                           ) -> tuple[BatchHeader, list[Record]]:
    """:func:`decode_batch` with the pure-Python record decoder, whatever is installed (parity tests, benchmarks)."""
    return _decode_batch(buf, pos, verify_crc, max_decompressed_size, decode_records_reference)


def _decode_batch(buf, pos, verify_crc, max_decompressed_size, decode) -> tuple[BatchHeader, list[Record]]:
    h = validate_batch(buf, pos, check_crc=verify_crc)
    if h.records_count == 0:
        return h, []  # like Kafka, an empty batch's records section is never decompressed
    end = pos + h.size
    with memoryview(buf) as mv:
        section = mv[pos + RECORDS_OFFSET:end]
        try:
            codec = h.attributes & COMPRESSION_MASK
            data = bytes(section) if codec == NONE else decompress(codec, section, max_decompressed_size)
        finally:
            section.release()
    lat = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else None
    return h, decode(data, h.records_count, h.base_offset, h.base_timestamp, lat)


def iter_batches(buf, start: int = 0, end: int | None = None, *, verify_crc: bool = True,
                 max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
                 ) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Decode every whole batch in ``buf[start:end]`` (a fetch response's records, a segment file); a partial
    trailing batch (fetch responses end with one when max_bytes cuts a batch) is skipped, as consumers do."""
    for p, _ in iter_batch_positions(buf, start, end):
        yield decode_batch(buf, p, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size)


# -- control records ----------------------------------------------------------------------------------------------

class ControlRecordType(enum.IntEnum):
    """Key type of a control record (``ControlRecordType.java``); key = version int16 (0) + type int16."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
    UNKNOWN = -1


CONTROL_KEY_VERSION: Final = 0
END_TXN_MARKER_VERSION: Final = 0


def control_record_key(type_: ControlRecordType | int) -> bytes:
    return _CONTROL_KEY.pack(CONTROL_KEY_VERSION, int(type_))


def parse_control_record_type(key: bytes | None) -> ControlRecordType:
    """Type of a control record from its key; unknown type ids map to UNKNOWN (the consumer skips those)."""
    if key is None or len(key) < 4:
        raise CorruptRecordError(f"control record key must have at least 4 bytes, found "
                                 f"{0 if key is None else len(key)}")
    version, type_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return ControlRecordType.UNKNOWN


class EndTxnMarker(NamedTuple):
    """The value of a COMMIT/ABORT control record: version int16 (0) + coordinator epoch int32."""

    type: ControlRecordType
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.type == ControlRecordType.COMMIT


def end_txn_marker_record(type_: ControlRecordType, coordinator_epoch: int, timestamp: int) -> Record:
    if type_ not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        raise ValueError(f"end transaction marker must be COMMIT or ABORT, not {type_!r}")
    return Record(control_record_key(type_), _END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch),
                  timestamp=timestamp)


def parse_end_txn_marker(record: Record) -> EndTxnMarker:
    type_ = parse_control_record_type(record.key)
    if type_ not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        raise CorruptRecordError(f"not an end transaction marker: {type_!r}")
    value = record.value
    if value is None or len(value) < 6:
        raise CorruptRecordError(f"end transaction marker value must have at least 6 bytes, found "
                                 f"{0 if value is None else len(value)}")
    version, epoch = _END_TXN_VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"invalid end transaction marker version {version}")
    return EndTxnMarker(type_, epoch)


def build_end_txn_marker_batch(*, commit: bool, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                               timestamp: int, base_offset: int = 0,
                               partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A COMMIT or ABORT marker batch as Kafka's ``MemoryRecords.withEndTransactionMarker`` writes it: one control
    record, transactional + control bits, no sequence, CreateTime ``timestamp``, uncompressed."""
    if producer_id == NO_PRODUCER_ID:
        raise ValueError("end transaction marker requires a valid producer id")
    rec = end_txn_marker_record(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
                                coordinator_epoch, timestamp)
    return build_batch([rec], base_offset=base_offset, producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=NO_SEQUENCE, is_transactional=True, is_control=True,
                       partition_leader_epoch=partition_leader_epoch)


# -- the decoder in use ---------------------------------------------------------------------------------------------

def decode_records(data, count: int, base_offset: int, base_timestamp: int,
                   log_append_time: int | None = None) -> list[Record]:
    """Decode exactly ``count`` records filling all of ``data`` (an uncompressed records section): aiokafka's
    compiled reader when it is installed (:mod:`protocol.fast_records`, loaded on first use), else, and for any input
    it cannot vouch for, :func:`decode_records_reference`. Same records, same errors either way."""
    out = _fast_decode(data, count, base_offset, base_timestamp, log_append_time, Record)
    if out is None:
        return decode_records_reference(data, count, base_offset, base_timestamp, log_append_time)
    return out


#: ``fast_decoder() -> bool``: whether the compiled decoder is in use; ``decoder_name() -> str``: which one runs.
fast_decoder = _fast_records.available
decoder_name = _fast_records.name
