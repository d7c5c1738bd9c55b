"""``decode_columns`` (column lists for scans, no record objects) against the reference decoder: the same values
in the same order for every batch, the same error for every corrupt records section, with the compiled decoder
and with the pure-Python one."""

from __future__ import annotations

from hypothesis import given, strategies as st

from protocol import fast_records
from protocol import records as R
from protocol.compression import decompress
from protocol.errors import KafkaError
from protocol.record_codec import decode_columns, decode_columns_reference, decode_records_reference

from .test_decoder_parity import FUZZ, batches


def _section(buf):
    h = R.parse_header(buf)
    body = bytes(buf[R.RECORDS_OFFSET:])
    data = body if h.compression == R.NONE or not h.records_count else decompress(h.compression, body)
    lat = h.max_timestamp if h.timestamp_type == R.LOG_APPEND_TIME else None
    return data, h.records_count, h.base_offset, h.base_timestamp, lat


def _outcome(fn, *args):
    try:
        return ("ok", tuple(fn(*args)))
    except KafkaError as e:
        return ("error", type(e), str(e))


def _reference_columns(*args):
    try:
        recs = decode_records_reference(*args)
    except KafkaError as e:
        return ("error", type(e), str(e))
    return ("ok", ([r.offset for r in recs], [r.timestamp for r in recs], [r.key for r in recs],
                   [r.value for r in recs], [r.headers for r in recs]))


@FUZZ
@given(batches())
def test_columns_equal_the_reference_records(batch_and_records):
    buf, recs = batch_and_records
    args = _section(buf)
    want = _reference_columns(*args)
    assert want[0] == "ok" and len(want[1][0]) == len(recs)
    assert _outcome(decode_columns, *args) == want
    assert _outcome(decode_columns_reference, *args) == want
    # the compiled path itself answered (it hands back to the reference only for header keys that are not UTF-8)
    if all(k.encode("utf-8", "surrogateescape").decode("utf-8", "replace") == k for r in recs for k, _ in r.headers):
        assert fast_records.decode_columns(*args) is not None


@FUZZ
@given(batches(), st.data())
def test_corrupt_sections_same_error_or_columns(batch_and_records, data):
    buf, _ = batch_and_records
    section, count, base_offset, base_ts, lat = _section(buf)
    b = bytearray(section)
    if b:
        for _ in range(data.draw(st.integers(1, 3))):
            i = data.draw(st.integers(0, len(b) - 1))
            b[i] ^= 1 << data.draw(st.integers(0, 7))
    cut = data.draw(st.integers(0, len(b)))
    count += data.draw(st.sampled_from([0, 0, 1, -1]))
    for damaged in (bytes(b), bytes(b[:cut])):
        args = (damaged, max(count, 0), base_offset, base_ts, lat)
        assert _outcome(decode_columns, *args) == _reference_columns(*args)
