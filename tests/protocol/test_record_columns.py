"""The column builders of ``protocol.record_columns``: the compiled one against the pure-Python one (same buffers,
same errors, nothing added on an error) and the pure one against the reference decoder's records, over random
batches of every codec, random column choices and bounds, and corrupt sections."""

from __future__ import annotations

import os
import subprocess
import sys
from array import array

import pytest
from hypothesis import given, strategies as st

from protocol import records as R
from protocol.compression import decompress
from protocol.errors import KafkaError
from protocol.record_codec import Record, build_batch, decode_records_reference, encode_record
from protocol.record_columns import COLUMNS, ColumnBuilder, PyColumnBuilder, compiled

from .test_decoder_parity import FUZZ, batches

ALL = sum(COLUMNS.values())
wants = st.integers(0, ALL)
offset_bounds = st.one_of(st.none(), st.integers(-5, 2**21 + 20))
ts_bounds = st.one_of(st.none(), st.integers(-2 * 10**6, 2**45))


def _section(buf):
    """A batch's add_section arguments: its records section (decompressed), count, offsets and timestamps."""
    h = R.parse_header(buf)
    body = bytes(buf[R.RECORDS_OFFSET:])
    data = body if h.compression == R.NONE or not h.records_count else decompress(h.compression, body)
    lat = h.max_timestamp if h.timestamp_type == R.LOG_APPEND_TIME else None
    return data, h.records_count, h.base_offset, h.base_timestamp, lat


def test_the_compiled_builder_is_in_use():
    # `pip install` builds protocol/_record_columns.c here: these tests must exercise it, not the pure builder twice
    assert compiled()


def test_pure_records_env_selects_the_pure_builder():
    code = "from protocol.record_columns import compiled, ColumnBuilder\nprint(compiled(), type(ColumnBuilder(1)))"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "ODRADEK_PURE_RECORDS": "1"},
                         capture_output=True, text=True, check=True, cwd=os.getcwd()).stdout
    assert out.startswith("False") and "PyColumnBuilder" in out


def _add(builder, section, bounds, batch_index):
    try:
        return ("ok", builder.add_section(*section, batch_index, *bounds))
    except KafkaError as e:
        return ("error", type(e), str(e))


def _norm(buffers):
    """The compiled builder hands out its own buffer objects, the pure one bytes: compare them as bytes."""
    return buffers._replace(**{f: bytes(v) for f, v in buffers._asdict().items()
                               if not isinstance(v, (int, type(None)))})


def _rows(buffers, want):
    """The buffers read back as one tuple per row, for the columns in ``want``."""
    buffers = _norm(buffers)
    n = buffers.rows

    def valid(bitmap, i):
        return bitmap is None or bool(bitmap[i >> 3] >> (i & 7) & 1)

    def binary(offsets, data, bitmap):
        offs = array("i", offsets)
        assert len(offs) == n + 1 or (len(offs) == 1 and not n)
        return [data[offs[i]:offs[i + 1]] if valid(bitmap, i) else None for i in range(n)]

    cols = {}
    if want & COLUMNS["offset"]:
        o = array("q", buffers.offset)
        cols["offset"] = [o[i] if valid(buffers.offset_valid, i) else None for i in range(n)]
    if want & COLUMNS["timestamp"]:
        t = array("q", buffers.timestamp)
        cols["timestamp"] = [t[i] if valid(buffers.timestamp_valid, i) else None for i in range(n)]
    if want & COLUMNS["key"]:
        cols["key"] = binary(buffers.key_offsets, buffers.key_data, buffers.key_valid)
    if want & COLUMNS["value"]:
        cols["value"] = binary(buffers.value_offsets, buffers.value_data, buffers.value_valid)
    if want & COLUMNS["value_size"]:
        s = array("i", buffers.value_size)
        cols["value_size"] = [s[i] if valid(buffers.value_size_valid, i) else None for i in range(n)]
    if want & COLUMNS["headers"]:
        lists = array("i", buffers.header_offsets)
        hk = array("i", buffers.hkey_offsets)
        hv = array("i", buffers.hvalue_offsets)
        entries = [(buffers.hkey_data[hk[j]:hk[j + 1]].decode("utf-8"),
                    buffers.hvalue_data[hv[j]:hv[j + 1]] if valid(buffers.hvalue_valid, j) else None)
                   for j in range(buffers.header_count)]
        cols["headers"] = [entries[lists[i]:lists[i + 1]] for i in range(n)]
    cols["batch_index"] = list(array("i", buffers.batch_index))
    return [tuple(c[i] for c in cols.values()) for i in range(n)]


def _expected_rows(recs, want, batch_index, bounds):
    lo, hi, ts_lo, ts_hi = bounds
    rows = []
    for r in recs:
        if (lo is not None and r.offset < lo) or (hi is not None and r.offset >= hi):
            continue
        if (ts_lo is not None or ts_hi is not None) and (
                r.timestamp == -1 or (ts_lo is not None and r.timestamp * 1000 < ts_lo)
                or (ts_hi is not None and r.timestamp * 1000 >= ts_hi)):
            continue
        row = []
        if want & COLUMNS["offset"]:
            row.append(r.offset)
        if want & COLUMNS["timestamp"]:
            row.append(None if r.timestamp == -1 or not -2**63 <= r.timestamp * 1000 < 2**63 else r.timestamp * 1000)
        if want & COLUMNS["key"]:
            row.append(r.key)
        if want & COLUMNS["value"]:
            row.append(r.value)
        if want & COLUMNS["value_size"]:
            row.append(None if r.value is None else len(r.value))
        if want & COLUMNS["headers"]:
            row.append([(k.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), v) for k, v in r.headers])
        rows.append((*row, batch_index))
    return rows


@FUZZ
@given(st.lists(batches(), min_size=1, max_size=4), wants, st.data())
def test_compiled_and_pure_builders_give_the_same_buffers(batch_list, want, data):
    c, py = ColumnBuilder(want), PyColumnBuilder(want)
    expected = []
    for i, (buf, recs) in enumerate(batch_list):
        section = _section(buf)
        bounds = (data.draw(offset_bounds), data.draw(offset_bounds), data.draw(ts_bounds), data.draw(ts_bounds))
        got_c, got_py = _add(c, section, bounds, i), _add(py, section, bounds, i)
        assert got_c == got_py and got_c[0] == "ok"
        expected += _expected_rows(decode_records_reference(*section), want, i, bounds)
        if data.draw(st.booleans()):
            k = data.draw(st.integers(1, 3))
            c.add_null_rows(i, k)
            py.add_null_rows(i, k)
            expected += [_null_row(want, i)] * k
        assert c.rows == py.rows == len(expected)
    out_c, out_py = c.finish(), py.finish()
    assert _norm(out_c) == _norm(out_py)
    assert _rows(out_py, want) == expected
    assert c.rows == py.rows == 0 and _norm(c.finish()) == _norm(py.finish())       # finish() started over


def _null_row(want, batch_index):
    row = [None for name in ("offset", "timestamp", "key", "value", "value_size") if want & COLUMNS[name]]
    if want & COLUMNS["headers"]:
        row.append([])
    return (*row, batch_index)


@FUZZ
@given(batches(), wants, st.data())
def test_corrupt_sections_same_error_and_nothing_added(batch_and_records, want, data):
    buf, _ = batch_and_records
    good_buf, _ = data.draw(batches())
    section, count, base_offset, base_ts, lat = _section(buf)
    b = bytearray(section)
    if b:
        for _ in range(data.draw(st.integers(1, 3))):
            i = data.draw(st.integers(0, len(b) - 1))
            b[i] ^= 1 << data.draw(st.integers(0, 7))
    cut = data.draw(st.integers(0, len(b)))
    count = max(count + data.draw(st.sampled_from([0, 0, 1, -1])), 0)
    c, py = ColumnBuilder(want), PyColumnBuilder(want)
    good = _section(good_buf)
    assert _add(c, good, (None,) * 4, 0) == _add(py, good, (None,) * 4, 0)
    for damaged in (bytes(b), bytes(b[:cut])):
        args = (damaged, count, base_offset, base_ts, lat)
        try:
            decode_records_reference(*args)
            reference = "ok"
        except KafkaError as e:
            reference = ("error", type(e), str(e))
        got_c, got_py = _add(c, args, (None,) * 4, 1), _add(py, args, (None,) * 4, 1)
        assert got_c == got_py
        assert got_c[0] == reference if reference == "ok" else got_c == reference
    assert _add(c, good, (None,) * 4, 2) == _add(py, good, (None,) * 4, 2)
    assert _norm(c.finish()) == _norm(py.finish())


@pytest.mark.parametrize("want", [ALL, COLUMNS["headers"], COLUMNS["key"]])
def test_header_keys_that_are_not_utf8_get_replacement_characters(want):
    rec = Record(b"k", b"v", [("ok", b"1"), (b"bad\xff\xfe".decode("utf-8", "surrogateescape"), None)],
                 timestamp=7)
    section = _section(build_batch([rec], base_offset=40))
    c, py = ColumnBuilder(want), PyColumnBuilder(want)
    assert c.add_section(*section, 0) == py.add_section(*section, 0) == 1
    out = _norm(c.finish())
    assert out == _norm(py.finish())
    if want & COLUMNS["headers"]:
        assert out.hkey_data == b"ok" + "bad\ufffd\ufffd".encode("utf-8")


def test_non_minimal_varints_decode_as_the_reference_does():
    # attributes 0, timestamp delta 0 as two bytes (0x80 0x00), offset delta 0, key length 1 (b"k"), null value,
    # no headers: legal for Kafka's reader, never written by a client
    body = b"\x00" + b"\x80\x00" + b"\x00" + b"\x02k" + b"\x01" + b"\x00"
    section = bytes([len(body) << 1]) + body
    args = (section, 1, 10, 1000, None)
    assert [(r.offset, r.timestamp, r.key) for r in decode_records_reference(*args)] == [(10, 1000, b"k")]
    c, py = ColumnBuilder(ALL), PyColumnBuilder(ALL)
    assert c.add_section(*args, 3) == py.add_section(*args, 3) == 1
    assert _norm(c.finish()) == _norm(py.finish())


def test_offsets_beyond_int64_are_an_error_not_a_wrapped_value():
    section = _section(build_batch([Record(b"k", b"v", timestamp=1)], base_offset=2**63 - 1))
    body = bytearray()
    encode_record(body, 5, 0, b"k", b"v", [])
    args = (bytes(body), 1, 2**63 - 1, section[3], None)
    for builder in (ColumnBuilder(ALL), PyColumnBuilder(ALL)):
        with pytest.raises(KafkaError, match="not an int64"):
            builder.add_section(*args, 0)
        assert builder.rows == 0


def test_every_codec_through_the_builder():
    for codec in range(5):
        recs = [Record(b"key-%d" % i, None if i % 3 == 0 else b"v" * (i * 7), [("h", b"x")] * (i % 2),
                       timestamp=1_700_000_000_000 + i) for i in range(50)]
        section = _section(build_batch(recs, base_offset=1000, compression=codec))
        c, py = ColumnBuilder(ALL), PyColumnBuilder(ALL)
        assert c.add_section(*section, 0) == py.add_section(*section, 0) == 50
        out = _norm(c.finish())
        assert out == _norm(py.finish())
        assert _rows(out, ALL) == _expected_rows(decode_records_reference(*section), ALL, 0, (None,) * 4)


def test_finished_buffers_outlive_the_builder():
    # the compiled builder moves its memory into the buffers it hands out: they must stay valid on their own
    section = _section(build_batch([Record(b"key-%d" % i, b"value-%d" % i, timestamp=i) for i in range(1000)]))
    c = ColumnBuilder(ALL)
    c.add_section(*section, 0)
    out = c.finish()
    views = [memoryview(out.key_data), memoryview(out.value_offsets)]
    del c, out
    c2 = ColumnBuilder(ALL)                   # new allocations must not land on the old memory while it is in use
    for _ in range(5):
        c2.add_section(*section, 0)
    assert bytes(views[0]).startswith(b"key-0key-1key-2") and len(views[0]) == sum(len(b"key-%d" % i)
                                                                                   for i in range(1000))
    assert array("i", bytes(views[1]))[:3].tolist() == [0, 7, 14]
    assert views[0].readonly


@FUZZ
@given(st.binary(max_size=300), st.integers(0, 40), st.integers(-2**63, 2**63 - 1), st.integers(-2**63, 2**63 - 1),
       st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), wants)
def test_random_bytes_same_outcome_and_never_a_crash(data, count, base_offset, base_ts, lat, want):
    # not derived from a valid batch: any length prefix, varint run or count, extreme offsets and timestamps
    c, py = ColumnBuilder(want), PyColumnBuilder(want)
    args = (data, count, base_offset, base_ts, lat)
    assert _add(c, args, (None,) * 4, 0) == _add(py, args, (None,) * 4, 0)
    assert _norm(c.finish()) == _norm(py.finish())
