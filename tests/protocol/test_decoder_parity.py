"""The compiled record decoder (aiokafka's C reader, :mod:`protocol.fast_records`) against the reference
(:func:`protocol.record_codec.decode_records_reference`): the same records, headers, timestamps, offsets and
attributes for every batch, and the same error (class and message) for every corrupt one, never a crash.

``decode_batch`` / ``decode_records`` are what every reader calls; ``decode_batch_reference`` /
``decode_records_reference`` are the pure-Python reference, whatever is installed.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from protocol import fast_records
from protocol import records as R
from protocol.errors import KafkaError
from protocol.record_codec import (
    ControlRecordType,
    Record,
    build_batch,
    build_batch_header,
    control_record_key,
    decode_batch,
    decode_batch_reference,
    decode_records,
    decode_records_reference,
    decoder_name,
    encode_record,
    end_txn_marker_record,
    fast_decoder,
)

CODECS = [R.NONE, R.GZIP, R.SNAPPY, R.LZ4, R.ZSTD]
INT64 = (-(2**63), 2**63 - 1)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_compiled_decoder_is_in_use():
    # aiokafka is a test dependency: these tests must exercise the C path, not compare the reference with itself
    assert fast_decoder() and decoder_name() == "aiokafka C (_crecords)"


def test_without_aiokafka_the_reference_runs():
    code = ("from protocol.record_codec import decoder_name, decode_batch, build_batch, Record\n"
            "b = build_batch([Record(b'k', b'v', [('h', None)], timestamp=5)])\n"
            "print(decoder_name(), decode_batch(b)[1])")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "ODRADEK_PURE_RECORDS": "1"},
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith("pure Python (protocol.record_codec) [Record(offset=0, offset_delta=0, timestamp=5")


# -- comparing the two --------------------------------------------------------------------------------------------

def _rec(r: Record):
    return (r.offset, r.offset_delta, r.timestamp, r.key, r.value, r.headers)


def _outcome(fn, *args, **kw):
    """What a decode gives: its header and records as plain tuples, or its error's class and message."""
    try:
        out = fn(*args, **kw)
    except KafkaError as e:  # DecodeError, CorruptRecordError, InvalidRecordError, UnsupportedMagicError...
        return ("error", type(e), str(e))
    if isinstance(out, tuple):
        h, recs = out
        return ("ok", tuple(h), [_rec(r) for r in recs])
    return ("ok", None, [_rec(r) for r in out])


def assert_batch_parity(buf, pos=0, **kw):
    fast = _outcome(decode_batch, buf, pos, **kw)
    ref = _outcome(decode_batch_reference, buf, pos, **kw)
    assert fast == ref
    return ref


def assert_records_parity(data, count, base_offset, base_timestamp, log_append_time=None):
    args = (data, count, base_offset, base_timestamp, log_append_time)
    fast = _outcome(decode_records, *args)
    ref = _outcome(decode_records_reference, *args)
    assert fast == ref
    return ref


# -- random valid batches -----------------------------------------------------------------------------------------

opt_bytes = st.none() | st.binary(max_size=40) | st.binary(min_size=60, max_size=300)
# header keys: text, and arbitrary bytes kept as surrogate escapes (a client may write invalid UTF-8)
header_key = st.text(max_size=8) | st.binary(max_size=8).map(lambda b: b.decode("utf-8", "surrogateescape"))
headers_st = st.lists(st.tuples(header_key, st.none() | st.binary(max_size=20)), max_size=4)
timestamp_st = st.sampled_from([-1, 0, 1_700_000_000_000]) | st.integers(-(2**61), 2**61)


@st.composite
def batches(draw):
    n = draw(st.integers(0, 12))
    is_control = draw(st.booleans()) and n > 0
    recs = []
    delta = 0
    for _ in range(n):
        delta += draw(st.sampled_from([1, 1, 1, 2, 1000, 2**20]))  # gaps, as compaction leaves them
        if is_control and draw(st.booleans()):
            r = end_txn_marker_record(draw(st.sampled_from([ControlRecordType.COMMIT, ControlRecordType.ABORT])),
                                      draw(st.integers(0, 2**31 - 1)), draw(timestamp_st))
        elif is_control:
            r = Record(control_record_key(draw(st.integers(0, 7))), draw(opt_bytes), timestamp=draw(timestamp_st))
        else:
            r = Record(draw(opt_bytes), draw(opt_bytes), draw(headers_st), timestamp=draw(timestamp_st))
        r.offset_delta = delta - 1
        recs.append(r)
    kw = dict(
        base_offset=draw(st.integers(0, 2**62)),
        compression=draw(st.sampled_from(CODECS)),
        is_transactional=draw(st.booleans()) or is_control,
        is_control=is_control,
        timestamp_type=draw(st.sampled_from([R.CREATE_TIME, R.LOG_APPEND_TIME])),
        partition_leader_epoch=draw(st.integers(-1, 2**31 - 1)),
    )
    if kw["is_transactional"] or draw(st.booleans()):
        kw.update(producer_id=draw(st.integers(0, 2**62)), producer_epoch=draw(st.integers(0, 2**15 - 1)),
                  base_sequence=-1 if is_control else draw(st.integers(0, 2**31 - 1)))
    if draw(st.booleans()):
        kw["delete_horizon_ms"] = draw(st.integers(0, 2**42))
    if kw["timestamp_type"] == R.LOG_APPEND_TIME:
        kw["max_timestamp"] = draw(st.integers(0, 2**42))
    try:
        return build_batch(recs, **kw), recs
    except ValueError:  # a timestamp delta outside int64: not a batch anyone can write
        assume(False)


@FUZZ
@given(batches())
def test_valid_batches_same_records(batch_and_records):
    buf, recs = batch_and_records
    kind, header, got = assert_batch_parity(buf)
    assert kind == "ok" and len(got) == len(recs)
    h = R.parse_header(buf)
    for (offset, delta, ts, key, value, headers), r in zip(got, recs):
        assert (delta, offset, key, value, headers) == (r.offset_delta, h.base_offset + r.offset_delta, r.key,
                                                        r.value, r.headers)
        assert ts == (h.max_timestamp if h.timestamp_type == R.LOG_APPEND_TIME
                      else h.base_timestamp + (r.timestamp - (recs[0].timestamp if h.delete_horizon_ms is None
                                                              else h.base_timestamp)))
    # the C path itself answered (it hands back to the reference only for header keys that are not UTF-8)
    if recs and all(k.encode("utf-8", "surrogateescape").decode("utf-8", "replace") == k
                    for r in recs for k, _ in r.headers):
        section = R.RECORDS_OFFSET
        codec = h.compression
        from protocol.compression import decompress
        data = bytes(buf[section:]) if codec == R.NONE else decompress(codec, buf[section:])
        lat = h.max_timestamp if h.timestamp_type == R.LOG_APPEND_TIME else None
        assert fast_records.decode_records(data, h.records_count, h.base_offset, h.base_timestamp, lat,
                                           Record) is not None


@FUZZ
@given(batches(), st.data())
def test_several_batches_in_a_buffer_and_buffer_types(batch_and_records, data):
    buf, _ = batch_and_records
    other, _ = data.draw(batches())
    whole = other + buf
    kind = data.draw(st.sampled_from([bytes, bytearray, memoryview]))
    assert_batch_parity(kind(whole), len(other))


# -- corrupt input ------------------------------------------------------------------------------------------------

@FUZZ
@given(batches(), st.data())
def test_flipped_bits_same_error_or_records(batch_and_records, data):
    buf, _ = batch_and_records
    b = bytearray(buf)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(b) - 1))
        b[i] ^= 1 << data.draw(st.integers(0, 7))
    # as stored (the CRC catches it), without the CRC check, and with a CRC recomputed over the damage (a writer
    # that encodes garbage correctly framed): every record-level check is reached
    assert_batch_parity(bytes(b))
    assert_batch_parity(bytes(b), verify_crc=False)
    if len(b) >= R.BATCH_HEADER_SIZE and struct.unpack_from(">i", b, 8)[0] + 12 == len(b):
        R.write_crc(b)
        assert_batch_parity(bytes(b))


@FUZZ
@given(batches(), st.data())
def test_truncated_and_torn_batches(batch_and_records, data):
    buf, _ = batch_and_records
    cut = data.draw(st.integers(0, len(buf)))
    assert_batch_parity(buf[:cut])
    assert_batch_parity(buf[:cut], verify_crc=False)
    # a records section cut short (or padded) inside a well-framed batch, CRC valid
    if R.parse_header(buf).compression == R.NONE and len(buf) > R.BATCH_HEADER_SIZE:
        body = buf[R.BATCH_HEADER_SIZE:]
        body = body[:data.draw(st.integers(0, len(body)))] + data.draw(st.binary(max_size=8))
        b = bytearray(buf[:R.BATCH_HEADER_SIZE] + body)
        struct.pack_into(">i", b, 8, len(b) - 12)
        R.write_crc(b)
        assert_batch_parity(bytes(b))


@FUZZ
@given(batches(), st.data())
def test_overwritten_records_section(batch_and_records, data):
    """Random bytes written over the uncompressed records section: the record decoder itself, fuzzed."""
    buf, _ = batch_and_records
    h = R.parse_header(buf)
    assume(h.compression == R.NONE and h.records_count > 0)
    section = bytearray(buf[R.RECORDS_OFFSET:])
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(section) - 1))
        section[i] = data.draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, 0x81])) if data.draw(
            st.booleans()) else data.draw(st.integers(0, 255))
    count = h.records_count + data.draw(st.sampled_from([0, 0, 0, -1, 1, -h.records_count - 1]))
    lat = data.draw(st.sampled_from([None, h.max_timestamp]))
    assert_records_parity(bytes(section), count, h.base_offset, h.base_timestamp, lat)


@FUZZ
@given(st.binary(max_size=120), st.integers(-2, 6), st.integers(*INT64), st.integers(*INT64))
def test_random_bytes_as_records(data, count, base_offset, base_timestamp):
    assert_records_parity(data, count, base_offset, base_timestamp)


# -- the places where aiokafka's reader is more lenient than Kafka's (and the reference) --------------------------

def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _zz(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _record(body: bytes) -> bytes:
    return _uvarint(_zz(len(body))) + body


def _batch_of(section: bytes, count: int, base_offset: int = 0, base_timestamp: int = 1000) -> bytes:
    b = bytearray(build_batch_header(base_offset=base_offset, batch_length=49 + len(section),
                                     partition_leader_epoch=0, attributes=0, last_offset_delta=max(count - 1, 0),
                                     base_timestamp=base_timestamp, max_timestamp=base_timestamp,
                                     producer_id=-1, producer_epoch=-1, base_sequence=-1, records_count=count))
    b += section
    R.write_crc(b)
    return bytes(b)


NULL = _uvarint(_zz(-1))
ZERO = b"\x00"


@pytest.mark.parametrize("body", [
    pytest.param(b"\x80\x00" + ZERO + ZERO + NULL + NULL + ZERO, id="attributes byte 0x80 (aiokafka: a varint)"),
    pytest.param(b"\x00" + ZERO + b"\x80\x80\x80\x80\x80\x00" + NULL + NULL + ZERO, id="6-byte offset delta"),
    pytest.param(b"\x00" + ZERO + b"\x82\x80\x80\x80\x10" + NULL + NULL + ZERO, id="offset delta above 32 bits"),
    pytest.param(b"\x00" + ZERO + ZERO + b"\x81\x80\x80\x80\x10" + b"abc" + NULL + ZERO,
                 id="5-byte key length, bits above 32"),
    pytest.param(b"\x00" + ZERO + ZERO + b"\x86\x80\x00" + b"abc" + NULL + ZERO, id="non-minimal key length"),
    pytest.param(b"\x00" + ZERO + ZERO + _uvarint(_zz(-5)) + NULL + ZERO, id="key length -5 is null"),
    pytest.param(b"\x00" + ZERO + ZERO + NULL + NULL + b"\x02" + b"\x04\xff\xfe" + NULL,
                 id="header key not UTF-8"),
    pytest.param(b"\x00" + ZERO + ZERO + NULL + NULL + b"\x7e", id="header count far beyond the record"),
    pytest.param(b"\x00" + ZERO + ZERO + NULL + NULL + b"\x02" + b"\x02", id="header value varint at the end"),
    pytest.param(b"\x00" + ZERO + ZERO + NULL + b"\xff\xff\xff\xff\xff\xff", id="varint running off the end"),
])
def test_lenient_spots(body):
    for section, count in ((_record(body), 1), (_record(body) + b"\xff", 1), (_record(body) * 2, 2)):
        assert_records_parity(section, count, 0, 1000)
        assert_batch_parity(_batch_of(section, count))


@pytest.mark.parametrize("base_timestamp,ts_delta", [(2**63 - 10, 100), (-(2**63) + 10, -100), (2**62, 2**62)])
def test_timestamp_sum_outside_int64(base_timestamp, ts_delta):
    out = bytearray()
    encode_record(out, 0, ts_delta, b"k", b"v", [])
    kind, _, recs = assert_records_parity(bytes(out), 1, 0, base_timestamp)
    assert kind == "ok" and recs[0][2] == base_timestamp + ts_delta  # Python ints, as the reference gives them


def test_offset_sum_outside_int64():
    out = bytearray()
    encode_record(out, 2**31 - 1, 0, b"k", b"v", [])
    kind, _, recs = assert_records_parity(bytes(out), 1, 2**63 - 5, 0)
    assert kind == "ok" and recs[0][0] == 2**63 - 5 + 2**31 - 1


def test_decompression_bomb_bound_still_applies():
    b = build_batch([Record(b"k", bytes(1 << 20))], compression=R.ZSTD)
    assert_batch_parity(b, max_decompressed_size=1 << 16)
    assert _outcome(decode_batch, b, max_decompressed_size=1 << 16)[0] == "error"
