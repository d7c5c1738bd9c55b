"""Record batch v2: header parsing, validation, in-place stamping, the record codec, and cross-checks against
kafka-python's and aiokafka's independent encoders/decoders."""

from __future__ import annotations

import mmap
import os
import random
import struct
import time

import pytest
from hypothesis import given, strategies as st

from protocol import records as R
from protocol.errors import (
    CorruptRecordError,
    DecodeError,
    InvalidRecordError,
    ProtocolError,
    UnsupportedMagicError,
)
from protocol.errors import ErrorCode
from protocol.record_codec import (
    ControlRecordType,
    EndTxnMarker,
    Record,
    build_batch,
    build_batch_header,
    build_end_txn_marker_batch,
    control_record_key,
    decode_batch,
    decode_records,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    iter_batches,
    parse_control_record_type,
    parse_end_txn_marker,
    size_of_varint,
)

CODECS = [R.NONE, R.GZIP, R.SNAPPY, R.LZ4, R.ZSTD]
CODEC_IDS = ["none", "gzip", "snappy", "lz4", "zstd"]


def sample_records(n=10, ts=1_700_000_000_000):
    return [Record(b"key-%d" % i, b"value-%d " % i * 20, [("h1", b"x" * i), ("h2", None)], timestamp=ts + i)
            for i in range(n)]


def sample_batch(n=10, **kw):
    return build_batch(sample_records(n), **kw)


# -- strategies ---------------------------------------------------------------------------------------------------

opt_bytes = st.none() | st.binary(max_size=64)
headers_st = st.lists(st.tuples(st.text(max_size=8), opt_bytes), max_size=3)
record_st = st.builds(
    lambda k, v, h, ts: Record(k, v, h, timestamp=ts),
    opt_bytes, opt_bytes, headers_st, st.integers(0, 2**42),
)


# -- header layout ------------------------------------------------------------------------------------------------

def test_layout_constants():
    assert R.BATCH_HEADER_SIZE == 61 and R.LOG_OVERHEAD == 12 and R.MAGIC_V2 == 2
    assert (R.NONE, R.GZIP, R.SNAPPY, R.LZ4, R.ZSTD) == (0, 1, 2, 3, 4)
    assert (R.CREATE_TIME, R.LOG_APPEND_TIME) == (0, 1)


def test_parse_header_fields_and_properties():
    b = build_batch(sample_records(5), base_offset=100, compression=R.LZ4, producer_id=7, producer_epoch=3,
                    base_sequence=40, is_transactional=True, partition_leader_epoch=9)
    h = R.parse_header(b)
    assert h.base_offset == 100
    assert h.batch_length == len(b) - 12 and h.size == len(b)
    assert h.partition_leader_epoch == 9 and h.magic == 2
    assert h.compression == R.LZ4 and h.timestamp_type == R.CREATE_TIME
    assert h.is_transactional and not h.is_control and not h.has_delete_horizon
    assert h.last_offset_delta == 4 and h.last_offset == 104 and h.next_offset == 105
    assert h.base_timestamp == 1_700_000_000_000 and h.max_timestamp == 1_700_000_000_004
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 3, 40)
    assert h.last_sequence == 44 and h.records_count == 5 and h.has_producer_id
    assert h.crc == R.compute_crc(b)


def test_last_sequence_wraps_like_kafka():
    b = build_batch(sample_records(3), producer_id=1, producer_epoch=0, base_sequence=2**31 - 2)
    assert R.parse_header(b).last_sequence == 0  # DefaultRecordBatch.incrementSequence
    assert R.parse_header(sample_batch(3)).last_sequence == -1


def test_attribute_bits():
    b = build_batch(sample_records(2), compression=R.ZSTD, timestamp_type=R.LOG_APPEND_TIME, is_transactional=True,
                    is_control=True, delete_horizon_ms=123, producer_id=1, producer_epoch=1)
    h = R.parse_header(b)
    assert h.attributes == 4 | 8 | 16 | 32 | 64
    assert h.timestamp_type == 1 and h.is_control and h.has_delete_horizon and h.delete_horizon_ms == 123


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "mmap"])
def test_parse_header_buffer_types(kind):
    b = b"\0" * 5 + sample_batch(3, base_offset=77)
    if kind == "bytearray":
        buf = bytearray(b)
    elif kind == "memoryview":
        buf = memoryview(b)
    elif kind == "mmap":
        buf = mmap.mmap(-1, len(b))
        buf.write(b)
    else:
        buf = b
    h = R.parse_header(buf, 5)
    assert h.base_offset == 77
    assert R.validate_batch(buf, 5) == h
    if kind == "mmap":
        buf.close()  # no memoryview exports may be left behind


def test_parse_header_too_short():
    b = sample_batch(1)
    with pytest.raises(DecodeError):
        R.parse_header(b[:60])
    with pytest.raises(DecodeError):
        R.parse_header(b, len(b) - 10)


# -- validate_batch -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_validate_good_batch(codec):
    b = sample_batch(20, compression=codec)
    h = R.validate_batch(b)
    assert h.compression == codec and h.records_count == 20


def test_crc_flip_every_covered_byte():
    b = bytearray(sample_batch(3, compression=R.GZIP))
    for i in range(R.ATTRIBUTES_OFFSET, len(b)):
        for bit in (0x01, 0x80):
            b[i] ^= bit
            with pytest.raises(CorruptRecordError):
                R.validate_batch(b)
            b[i] ^= bit
    R.validate_batch(b)


@given(st.data())
def test_crc_flip_property(data):
    recs = data.draw(st.lists(record_st, min_size=1, max_size=5))
    codec = data.draw(st.sampled_from(CODECS))
    b = bytearray(build_batch(recs, compression=codec))
    i = data.draw(st.integers(R.ATTRIBUTES_OFFSET, len(b) - 1))
    b[i] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptRecordError):
        R.validate_batch(b)


def test_crc_mismatch_in_crc_field_itself():
    b = bytearray(sample_batch(2))
    b[R.CRC_OFFSET] ^= 0xFF
    with pytest.raises(CorruptRecordError) as e:
        R.validate_batch(b)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE


def test_fields_outside_crc_do_not_matter():
    b = bytearray(sample_batch(2))
    b[0:8] = os.urandom(8)
    b[12:16] = os.urandom(4)
    R.validate_batch(b)


@pytest.mark.parametrize("magic", [3, 4, 127, 255])
def test_unknown_magic_is_corrupt(magic):
    b = bytearray(sample_batch(2))
    b[R.MAGIC_OFFSET] = magic
    with pytest.raises(CorruptRecordError):
        R.validate_batch(b)


def test_length_checks():
    b = bytearray(sample_batch(2))
    for bad in (-1, 0, 13, 14, 48):
        struct.pack_into(">i", b, 8, bad)
        with pytest.raises(CorruptRecordError):
            R.validate_batch(b)
    struct.pack_into(">i", b, 8, len(b) - 12 + 1)
    with pytest.raises(CorruptRecordError):
        R.validate_batch(b)
    struct.pack_into(">i", b, 8, 2**31 - 1)  # huge: rejected without allocating
    with pytest.raises(CorruptRecordError):
        R.validate_batch(b)


def test_truncated_at_every_length():
    b = sample_batch(3, compression=R.SNAPPY)
    for n in range(len(b)):
        with pytest.raises(CorruptRecordError):
            R.validate_batch(b[:n])


def test_batch_shorter_than_buffer_validates_only_itself():
    b = sample_batch(2) + b"trailing"
    h = R.validate_batch(b)
    assert h.size == len(b) - 8


def _rewrite(b, fmt, off, value):
    b = bytearray(b)
    struct.pack_into(fmt, b, off, value)
    R.write_crc(b)
    return b


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_compression_id(codec_id):
    b = _rewrite(sample_batch(2), ">h", R.ATTRIBUTES_OFFSET, codec_id)
    with pytest.raises(CorruptRecordError):
        R.validate_batch(b)


def test_negative_count_and_delta_are_invalid_record():
    with pytest.raises(InvalidRecordError) as e:
        R.validate_batch(_rewrite(sample_batch(2), ">i", R.RECORDS_COUNT_OFFSET, -1))
    assert e.value.code == ErrorCode.INVALID_RECORD
    with pytest.raises(InvalidRecordError):
        R.validate_batch(_rewrite(sample_batch(2), ">i", R.LAST_OFFSET_DELTA_OFFSET, -5))


def test_compacted_shapes_are_valid():
    """Compaction leaves count < last_offset_delta + 1, and empty batches: structurally valid."""
    recs = sample_records(5)
    kept = [recs[1], recs[4]]
    for r, d in zip(kept, (1, 4)):
        r.offset_delta = d
    b = build_batch(kept, base_offset=10, last_offset_delta=6)
    h = R.validate_batch(b)
    assert (h.records_count, h.last_offset_delta, h.last_offset) == (2, 6, 16)
    _, out = decode_batch(b)
    assert [r.offset for r in out] == [11, 14]
    empty = build_batch([], base_offset=10, last_offset_delta=6, producer_id=5, producer_epoch=1, base_sequence=3,
                        max_timestamp=999)
    h = R.validate_batch(empty)
    assert h.records_count == 0 and h.size == 61 and h.base_timestamp == -1 and h.max_timestamp == 999
    assert h.last_sequence == 9
    assert decode_batch(empty)[1] == []
    with pytest.raises(InvalidRecordError):
        R.check_client_batch(R.parse_header(b))


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_empty_batch_any_codec(codec):
    b = build_batch([], compression=codec)
    assert len(b) == 61  # nothing to compress: the records section stays empty, as Kafka writes it
    h, recs = decode_batch(b)
    assert recs == [] and h.compression == codec


def test_validate_batch_check_crc_false():
    b = bytearray(sample_batch(2))
    b[-1] ^= 1
    R.validate_batch(b, check_crc=False)


# -- legacy magic -------------------------------------------------------------------------------------------------

def legacy_message_set(magic, compression=0, n=3):
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=compression, batch_size=1 << 20)
    for i in range(n):
        builder.append(i, timestamp=1000 + i if magic else None, key=b"k", value=b"v%d" % i)
    return bytes(builder.build())


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", [0, 1])
def test_legacy_magic_rejected(magic, compression):
    ms = legacy_message_set(magic, compression)
    assert ms[R.MAGIC_OFFSET] == magic
    with pytest.raises(UnsupportedMagicError) as e:
        R.validate_batch(ms)
    assert e.value.code == ErrorCode.INVALID_RECORD
    with pytest.raises(UnsupportedMagicError):
        R.validate_batches(ms)
    with pytest.raises(UnsupportedMagicError):
        list(R.iter_batch_positions(ms))
    with pytest.raises(UnsupportedMagicError):
        decode_batch(ms)


def test_legacy_after_v2_batch():
    payload = sample_batch(2) + legacy_message_set(1)
    with pytest.raises(UnsupportedMagicError):
        R.validate_batches(payload)


# -- validate_batches / check_client_batch --------------------------------------------------------------------------

def test_validate_batches():
    parts = [sample_batch(i + 1, compression=c) for i, c in enumerate(CODECS)]
    payload = memoryview(b"".join(parts))
    hs = R.validate_batches(payload)
    assert [h.records_count for h in hs] == [1, 2, 3, 4, 5]
    assert [h.compression for h in hs] == CODECS
    assert R.validate_batches(b"") == []


def test_validate_batches_trailing_partial():
    payload = sample_batch(2) + sample_batch(3)
    for cut in (1, 11, 12, 17, 60, 61, 70):
        with pytest.raises(CorruptRecordError):
            R.validate_batches(payload[:len(payload) - cut])


def test_check_client_batch():
    ok = R.parse_header(sample_batch(3, producer_id=1, producer_epoch=0, base_sequence=0))
    R.check_client_batch(ok)
    bad = [
        ok._replace(base_offset=5),
        ok._replace(records_count=0),
        ok._replace(records_count=2),
        ok._replace(last_offset_delta=-1),
        ok._replace(attributes=R.CONTROL_MASK),
        ok._replace(base_sequence=-1),
    ]
    for h in bad:
        with pytest.raises(InvalidRecordError):
            R.check_client_batch(h)
    R.check_client_batch(ok._replace(producer_id=-1, base_sequence=-1))


# -- stamping ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["bytearray", "memoryview", "mmap"])
def test_stamp_batch(kind):
    a = sample_batch(2, compression=R.LZ4)
    b = sample_batch(3)
    raw = a + b
    if kind == "mmap":
        buf = mmap.mmap(-1, len(raw))
        buf.write(raw)
    elif kind == "memoryview":
        buf = memoryview(bytearray(raw))
    else:
        buf = bytearray(raw)
    R.stamp_batch(buf, 0, 1000, 7)
    R.stamp_batch(buf, len(a), 2**40, 2**31 - 1)
    ha, hb = R.validate_batches(buf)
    assert (ha.base_offset, ha.partition_leader_epoch) == (1000, 7)
    assert (hb.base_offset, hb.partition_leader_epoch) == (2**40, 2**31 - 1)
    after = bytes(buf)
    changed = {i for i in range(len(raw)) if raw[i] != after[i]}
    allowed = set(range(0, 8)) | set(range(12, 16))
    allowed |= {len(a) + i for i in allowed}
    assert changed and changed <= allowed
    if kind == "mmap":
        buf.close()


@given(st.integers(-2**63, 2**63 - 1), st.integers(-2**31, 2**31 - 1), st.sampled_from(CODECS))
def test_stamp_property(base_offset, epoch, codec):
    b = bytearray(sample_batch(2, compression=codec))
    orig = bytes(b)
    R.stamp_batch(b, 0, base_offset, epoch)
    h = R.validate_batch(b)
    assert (h.base_offset, h.partition_leader_epoch) == (base_offset, epoch)
    assert b[8:12] == orig[8:12] and b[16:] == orig[16:]


def test_set_last_offset():
    b = bytearray(sample_batch(5))
    R.set_last_offset(b, 0, 104)
    assert R.validate_batch(b).base_offset == 100


def test_set_max_timestamp_log_append_time():
    b = bytearray(build_batch(sample_records(3), compression=R.ZSTD, is_transactional=True, producer_id=4,
                              producer_epoch=0, base_sequence=0))
    before = bytes(b)
    assert R.set_max_timestamp(b, 0, R.LOG_APPEND_TIME, 5_000) is True
    h = R.validate_batch(b)
    assert h.timestamp_type == R.LOG_APPEND_TIME and h.max_timestamp == 5_000
    assert h.compression == R.ZSTD and h.is_transactional
    changed = {i for i in range(len(b)) if b[i] != before[i]}
    assert changed <= set(range(R.CRC_OFFSET, R.CRC_OFFSET + 6)) | set(range(R.MAX_TIMESTAMP_OFFSET,
                                                                           R.MAX_TIMESTAMP_OFFSET + 8))
    _, recs = decode_batch(b)
    assert [r.timestamp for r in recs] == [5_000] * 3  # LogAppendTime: every record reads maxTimestamp
    assert R.set_max_timestamp(b, 0, R.LOG_APPEND_TIME, 5_000) is False  # unchanged: no CRC rewrite
    assert R.set_max_timestamp(b, 0, R.CREATE_TIME, 5_000) is True
    assert R.validate_batch(b).timestamp_type == R.CREATE_TIME


def test_set_max_timestamp_clears_unknown_attribute_bits():
    b = _rewrite(sample_batch(1), ">h", R.ATTRIBUTES_OFFSET, 0x0180 | R.GZIP)  # bits 7, 8: unused
    R.set_max_timestamp(b, 0, R.LOG_APPEND_TIME, 1)
    assert R.validate_batch(b).attributes == R.GZIP | R.TIMESTAMP_TYPE_MASK


# -- iter_batch_positions -----------------------------------------------------------------------------------------

def test_iter_batch_positions():
    parts = [sample_batch(i + 1, compression=c, base_offset=10 * i) for i, c in enumerate(CODECS)]
    buf = b"".join(parts)
    scan = R.iter_batch_positions(buf)
    got = list(scan)
    starts = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    assert [p for p, _ in got] == starts
    assert [h.base_offset for _, h in got] == [0, 10, 20, 30, 40]
    assert scan.position == len(buf) and not scan.incomplete


def test_iter_batch_positions_incomplete_tail():
    a, b = sample_batch(2), sample_batch(3)
    buf = a + b
    for cut in range(1, len(b)):
        scan = R.iter_batch_positions(buf[:len(buf) - cut])
        assert [p for p, _ in scan] == [0]
        assert scan.position == len(a) and scan.incomplete


def test_iter_batch_positions_window():
    a, b, c = sample_batch(1), sample_batch(2), sample_batch(3)
    buf = a + b + c
    scan = R.iter_batch_positions(buf, len(a), len(a) + len(b) + 5)
    assert [p for p, _ in scan] == [len(a)]
    assert scan.position == len(a) + len(b) and scan.incomplete


def test_iter_batch_positions_corrupt_header():
    a = sample_batch(2)
    for garbage in (b"\0" * 61, b"\0" * 12, b"\xff" * 30):
        scan = R.iter_batch_positions(a + garbage)
        it = iter(scan)
        assert next(it)[0] == 0
        with pytest.raises(CorruptRecordError):
            next(it)
        assert scan.position == len(a)
    bad_magic = bytearray(sample_batch(1))
    bad_magic[R.MAGIC_OFFSET] = 9
    with pytest.raises(CorruptRecordError):
        list(R.iter_batch_positions(bytes(bad_magic)))
    with pytest.raises(CorruptRecordError):
        list(R.iter_batch_positions(a, max_batch_size=len(a) - 1))


def test_iter_batch_positions_skips_crc():
    b = bytearray(sample_batch(2))
    b[-1] ^= 1
    assert len(list(R.iter_batch_positions(b))) == 1


# -- record codec round trips -----------------------------------------------------------------------------------------

def _expected(recs, base_offset=0):
    out = []
    for i, r in enumerate(recs):
        out.append(Record(r.key, r.value, r.headers, timestamp=-1 if r.timestamp is None else r.timestamp,
                          offset_delta=i, offset=base_offset + i))
    return out


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@given(recs=st.lists(record_st, min_size=1, max_size=20), base_offset=st.integers(0, 2**62))
def test_round_trip_property(codec, recs, base_offset):
    b = build_batch(recs, compression=codec, base_offset=base_offset)
    h, out = decode_batch(b)
    assert h.compression == codec and h.records_count == len(recs)
    assert out == _expected(recs, base_offset)
    assert h.max_timestamp == max(r.timestamp for r in recs)
    assert h.base_timestamp == recs[0].timestamp


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_round_trip_large(codec):
    recs = [Record(os.urandom(8), os.urandom(500) + b"z" * 3000, [("k", os.urandom(5))], timestamp=10**12 + i)
            for i in range(300)]
    b = build_batch(recs, compression=codec)
    assert decode_batch(b)[1] == _expected(recs)


@given(st.integers(-1, 2**31 - 1), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1), st.booleans(),
       st.integers(-1, 2**31 - 1))
def test_idempotent_transactional_fields(pid, epoch, seq, txn, leader_epoch):
    b = build_batch(sample_records(2), producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                    is_transactional=txn, partition_leader_epoch=leader_epoch)
    h, _ = decode_batch(b)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional, h.partition_leader_epoch) == \
        (pid, epoch, seq, txn, leader_epoch)


def test_timestamps_before_base_and_explicit():
    recs = [Record(None, b"a", timestamp=5000), Record(None, b"b", timestamp=1000), Record(None, b"c")]
    h, out = decode_batch(build_batch(recs))
    assert [r.timestamp for r in out] == [5000, 1000, -1]
    assert h.base_timestamp == 5000 and h.max_timestamp == 5000
    h, out = decode_batch(build_batch(recs[:2], base_timestamp=0, max_timestamp=7))
    assert h.base_timestamp == 0 and h.max_timestamp == 7 and [r.timestamp for r in out] == [5000, 1000]


def test_delete_horizon_keeps_record_timestamps():
    recs = sample_records(3)
    h, out = decode_batch(build_batch(recs, delete_horizon_ms=42))
    assert h.has_delete_horizon and h.base_timestamp == 42
    assert [r.timestamp for r in out] == [r.timestamp for r in recs]


def test_header_keys_invalid_utf8_round_trip():
    key = b"\xff\xfe-bad".decode("utf-8", "surrogateescape")
    b = build_batch([Record(None, b"v", [(key, b"x")])])
    _, out = decode_batch(b)
    assert out[0].headers == [(key, b"x")]
    assert build_batch(out) == b


def test_reencode_decoded_batch_is_identical():
    b = build_batch(sample_records(7), base_offset=3, compression=R.NONE, producer_id=1, producer_epoch=2,
                    base_sequence=3)
    h, out = decode_batch(b)
    again = build_batch(out, base_offset=h.base_offset, producer_id=1, producer_epoch=2, base_sequence=3)
    assert again == b


def test_iter_batches_skips_partial_tail():
    a, b = sample_batch(2, base_offset=0), sample_batch(3, base_offset=2, compression=R.GZIP)
    got = list(iter_batches(a + b + b[:30]))
    assert [len(r) for _, r in got] == [2, 3]
    assert got[1][1][0].offset == 2


# -- varints ------------------------------------------------------------------------------------------------------

@given(st.integers(-2**31, 2**31 - 1))
def test_varint_round_trip(n):
    e = encode_varint(n)
    assert len(e) == size_of_varint(n) <= 5
    assert decode_varint(e) == (n, len(e))
    assert decode_varint(b"\0" + e + b"\0", 1) == (n, len(e) + 1)


@given(st.integers(-2**63, 2**63 - 1))
def test_varlong_round_trip(n):
    e = encode_varlong(n)
    assert len(e) == size_of_varint(n) <= 10
    assert decode_varlong(e) == (n, len(e))


@given(st.integers(-2**63, 2**63 - 1))
def test_varint_matches_kafka_python(n):
    from kafka.record.util import decode_varint as kp_decode, encode_varint as kp_encode
    out = bytearray()
    kp_encode(n, out.append)
    assert encode_varlong(n) == bytes(out)
    assert kp_decode(bytearray(encode_varlong(n)), 0) == (n, len(out))


def test_varint_known_encodings():
    assert encode_varint(0) == b"\x00" and encode_varint(-1) == b"\x01" and encode_varint(1) == b"\x02"
    assert encode_varint(63) == b"\x7e" and encode_varint(-64) == b"\x7f" and encode_varint(64) == b"\x80\x01"
    assert encode_varint(2**31 - 1) == b"\xfe\xff\xff\xff\x0f"
    assert encode_varint(-2**31) == b"\xff\xff\xff\xff\x0f"
    with pytest.raises(ValueError):
        encode_varint(2**31)
    with pytest.raises(ValueError):
        encode_varlong(2**63)


def test_varint_strict_bounds():
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80\x80\x80\x80\x80\x00")  # 6 bytes
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"\x80" * 10 + b"\x00")  # 11 bytes
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80\x80")  # truncated
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80\x01", 0, 1)  # runs past the given end
    # Java's readVarint keeps the low 32 bits of a 5-byte varint
    assert decode_varint(b"\xfe\xff\xff\xff\x7f") == (2**31 - 1, 5)


# -- hand-built malformed records (valid CRC, bad contents) -----------------------------------------------------------

def batch_from_section(section: bytes, count: int, codec: int = R.NONE) -> bytes:
    """A batch whose records section is ``section`` verbatim and whose CRC is correct."""
    from protocol.compression import compress
    body = compress(codec, section) if codec else section
    hdr = build_batch_header(base_offset=0, batch_length=49 + len(body), partition_leader_epoch=-1,
                             attributes=codec, last_offset_delta=max(count - 1, 0), base_timestamp=0,
                             max_timestamp=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                             records_count=count)
    b = bytearray(hdr + body)
    R.write_crc(b)
    return bytes(b)


def rec_bytes(*parts: bytes) -> bytes:
    body = b"".join(parts)
    return encode_varint(len(body)) + body


GOOD_REC = rec_bytes(b"\0", encode_varlong(0), encode_varint(0), encode_varint(-1), encode_varint(1), b"v",
                     encode_varint(0))

MALFORMED = {
    "record length beyond batch": encode_varint(1000) + b"\0" * 5,
    "huge record length": encode_varint(2**31 - 1) + b"\0" * 5,
    "negative record length": encode_varint(-5) + b"\0" * 5,
    "zero record length": encode_varint(0),
    "huge key length": rec_bytes(b"\0", encode_varlong(0), encode_varint(0), encode_varint(2**31 - 1), b"k"),
    "key past record end": rec_bytes(b"\0", encode_varlong(0), encode_varint(0), encode_varint(3), b"k"),
    "value past record end": rec_bytes(b"\0", encode_varlong(0), encode_varint(0), encode_varint(-1),
                                       encode_varint(50), b"v"),
    "huge header count": rec_bytes(b"\0", encode_varlong(0), encode_varint(0), encode_varint(-1),
                                   encode_varint(-1), encode_varint(2**31 - 1)),
    "negative header count": rec_bytes(b"\0", encode_varlong(0), encode_varint(0), encode_varint(-1),
                                       encode_varint(-1), encode_varint(-2)),
    "null header key": rec_bytes(b"\0", encode_varlong(0), encode_varint(0), encode_varint(-1),
                                 encode_varint(-1), encode_varint(1), encode_varint(-1), encode_varint(-1)),
    "overlong varint": rec_bytes(b"\0", b"\xff" * 11),
    "bytes left inside record": rec_bytes(b"\0", encode_varlong(0), encode_varint(0), encode_varint(-1),
                                          encode_varint(-1), encode_varint(0), b"extra"),
    "record ends mid field": rec_bytes(b"\0", encode_varlong(0)),
    "bytes left after records": GOOD_REC + b"\0",
}


@pytest.mark.parametrize("codec", [R.NONE, R.ZSTD], ids=["none", "zstd"])
@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_records(name, codec):
    b = batch_from_section(MALFORMED[name], 1, codec)
    R.validate_batch(b)  # the header and CRC are fine: only record decoding can tell
    t = time.perf_counter()
    with pytest.raises(CorruptRecordError):
        decode_batch(b)
    assert time.perf_counter() - t < 0.5


def test_count_larger_than_records():
    b = batch_from_section(GOOD_REC * 2, 2**31 - 1)
    t = time.perf_counter()
    with pytest.raises(CorruptRecordError):
        decode_batch(b)
    assert time.perf_counter() - t < 0.5
    assert len(decode_batch(batch_from_section(GOOD_REC * 2, 2))[1]) == 2


def test_count_smaller_than_records():
    with pytest.raises(CorruptRecordError):
        decode_batch(batch_from_section(GOOD_REC * 3, 2))


def test_decompression_bomb_in_batch():
    section = GOOD_REC + b"\0" * (8 << 20)
    b = batch_from_section(section, 1, R.ZSTD)
    assert len(b) < 4096
    with pytest.raises(CorruptRecordError):
        decode_batch(b, max_decompressed_size=1 << 20)


def test_decode_records_directly():
    out = decode_records(GOOD_REC * 2, 2, base_offset=10, base_timestamp=100)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in out] == [(10, 100, None, b"v")] * 2


# -- robustness: random input only raises protocol errors ------------------------------------------------------------

# What the record functions may raise on bad bytes: CORRUPT_MESSAGE, INVALID_RECORD (negative count or delta,
# legacy magic); DecodeError only from parse_header.
ALLOWED = (CorruptRecordError, InvalidRecordError, UnsupportedMagicError, DecodeError)


def _only_protocol_errors(fn, *args):
    try:
        fn(*args)
    except ProtocolError as e:
        assert isinstance(e, ALLOWED), repr(e)


@given(st.binary(max_size=300))
def test_random_bytes(data):
    _only_protocol_errors(R.validate_batch, data)
    _only_protocol_errors(R.validate_batches, data)
    _only_protocol_errors(lambda d: list(R.iter_batch_positions(d)), data)
    _only_protocol_errors(decode_batch, data)
    _only_protocol_errors(lambda d: list(iter_batches(d)), data)


@given(st.data())
def test_mutated_batches(data):
    """Random mutations of real batches, CRC recomputed so the record decoder sees them."""
    codec = data.draw(st.sampled_from(CODECS))
    recs = data.draw(st.lists(record_st, min_size=1, max_size=4))
    b = bytearray(build_batch(recs, compression=codec))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(b) - 1))
        b[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(b)))
    b = b[:cut] if data.draw(st.booleans()) else b
    if len(b) >= 61 and data.draw(st.booleans()):
        try:
            R.write_crc(b)
        except CorruptRecordError:
            pass
    _only_protocol_errors(decode_batch, bytes(b))
    _only_protocol_errors(R.validate_batches, bytes(b))
    _only_protocol_errors(lambda d: list(R.iter_batch_positions(d)), bytes(b))


def test_random_mutation_sweep_is_fast():
    rng = random.Random(1234)
    base = [bytearray(sample_batch(5, compression=c)) for c in CODECS]
    t = time.perf_counter()
    for i in range(2000):
        b = bytearray(base[i % len(base)])
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        R.write_crc(b) if R.parse_header(b).batch_length == len(b) - 12 else None
        try:
            decode_batch(bytes(b))
        except ProtocolError as e:
            assert isinstance(e, ALLOWED), repr(e)
    assert time.perf_counter() - t < 10


# -- control batches ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_marker_batch(commit):
    b = build_end_txn_marker_batch(commit=commit, producer_id=42, producer_epoch=3, coordinator_epoch=17,
                                   timestamp=1_000, base_offset=55, partition_leader_epoch=2)
    h, recs = decode_batch(b)
    assert h.is_control and h.is_transactional and h.records_count == 1
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, -1)
    assert h.base_offset == 55 and h.partition_leader_epoch == 2 and h.compression == R.NONE
    assert recs[0].key == (b"\x00\x00\x00\x01" if commit else b"\x00\x00\x00\x00")
    assert recs[0].value == b"\x00\x00\x00\x00\x00\x11"
    m = parse_end_txn_marker(recs[0])
    assert m == EndTxnMarker(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, 17)
    assert m.is_commit == commit
    # kafka-python reads it as a control record too
    from kafka.record.default_records import DefaultRecordBatch
    kb = DefaultRecordBatch(b)
    assert kb.validate_crc() and kb.is_control_batch
    (cr,) = list(kb)
    assert cr.commit == commit and cr.abort == (not commit) and cr.version == 0


def test_control_record_types():
    assert parse_control_record_type(control_record_key(ControlRecordType.LEADER_CHANGE)) == \
        ControlRecordType.LEADER_CHANGE
    assert parse_control_record_type(b"\x00\x00\x00\x63") == ControlRecordType.UNKNOWN
    assert parse_control_record_type(b"\x00\x05\x00\x01extra") == ControlRecordType.COMMIT  # newer key version
    for bad in (None, b"\x00\x00\x00", b"\xff\xff\x00\x00"):
        with pytest.raises(CorruptRecordError):
            parse_control_record_type(bad)
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker(Record(control_record_key(ControlRecordType.COMMIT), b"\x00\x00"))
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker(Record(control_record_key(ControlRecordType.LEADER_CHANGE), b"\x00" * 6))
    with pytest.raises(ValueError):
        build_end_txn_marker_batch(commit=True, producer_id=-1, producer_epoch=0, coordinator_epoch=0, timestamp=0)


# -- cross-checks against independent implementations ---------------------------------------------------------------

def kp_records(n):
    return [(1_600_000_000_000 + i * 7, b"k%d" % i if i % 3 else None, b"v" * 50 + b"%d" % i if i % 5 else None,
             [("hk", b"hv%d" % i), ("none", None)] if i % 2 else []) for i in range(n)]


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_kafka_python_builder_decodes_with_ours(codec):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=True, producer_id=99,
                                        producer_epoch=4, base_sequence=10, batch_size=1 << 20)
    data = kp_records(40)
    for i, (ts, k, v, hs) in enumerate(data):
        assert builder.append(i, timestamp=ts, key=k, value=v, headers=hs) is not None
    b = bytes(builder.build())
    h, out = decode_batch(b)
    assert h.compression == codec  # the data compresses, so kafka-python kept the codec
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (99, 4, 10, True)
    assert h.records_count == 40 and h.last_offset_delta == 39
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in out] == \
        [(i, ts, k, v, hs) for i, (ts, k, v, hs) in enumerate(data)]
    R.check_client_batch(h)


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_kafka_python_memory_records_builder(codec):
    from kafka.record.memory_records import MemoryRecordsBuilder
    b = MemoryRecordsBuilder(magic=2, compression_type=codec, batch_size=1 << 20)
    for ts, k, v, hs in kp_records(25):
        b.append(ts, k, v, hs)
    b.close()
    buf = bytes(b.buffer())
    (h,) = R.validate_batches(buf)
    assert h.compression == codec
    assert len(decode_batch(buf)[1]) == 25


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_ours_decode_with_kafka_python(codec):
    from kafka.record.default_records import DefaultRecordBatch
    from kafka.record.memory_records import MemoryRecords
    data = kp_records(30)
    recs = [Record(k, v, hs, timestamp=ts) for ts, k, v, hs in data]
    b = build_batch(recs, compression=codec, base_offset=1000, producer_id=5, producer_epoch=1, base_sequence=0)
    kb = DefaultRecordBatch(b)
    assert kb.validate_crc()
    assert kb.compression_type == codec and kb.base_offset == 1000 and kb.last_offset == 1029
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in kb]
    assert got == [(1000 + i, ts, k, v, hs) for i, (ts, k, v, hs) in enumerate(data)]
    mr = MemoryRecords(b + b)
    assert sum(1 for _ in iter(mr.next_batch, None)) == 2


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_aiokafka_interop(codec):
    from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    builder = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 20)
    data = kp_records(30)
    for i, (ts, k, v, hs) in enumerate(data):
        builder.append(i, timestamp=ts, key=k, value=v, headers=hs)
    b = bytes(builder.build())
    h, out = decode_batch(b)
    assert h.compression == codec
    assert [(r.timestamp, r.key, r.value, r.headers) for r in out] == [(ts, k, v, hs) for ts, k, v, hs in data]
    ours = build_batch([Record(k, v, hs, timestamp=ts) for ts, k, v, hs in data], compression=codec)
    ab = DefaultRecordBatch(ours)
    assert ab.validate_crc()
    assert [(r.timestamp, r.key, r.value, list(r.headers)) for r in ab] == \
        [(ts, k, v, hs) for ts, k, v, hs in data]


def test_kafka_python_decodes_stamped_log_append_batch():
    from kafka.record.default_records import DefaultRecordBatch
    b = bytearray(build_batch(sample_records(4), compression=R.SNAPPY))
    R.stamp_batch(b, 0, 500, 3)
    R.set_max_timestamp(b, 0, R.LOG_APPEND_TIME, 123_456)
    kb = DefaultRecordBatch(bytes(b))
    assert kb.validate_crc() and kb.timestamp_type == 1 and kb.leader_epoch == 3
    assert [(r.offset, r.timestamp) for r in kb] == [(500 + i, 123_456) for i in range(4)]
