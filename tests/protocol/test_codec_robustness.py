"""Bad input: every decoder raises only DecodeError, quickly, and never allocates a declared size.

The h11 fuzz invariant: random input either parses or raises the one documented error type.
"""

from __future__ import annotations

import struct
import time
import tracemalloc

import pytest
from hypothesis import given, settings, strategies as st

from protocol.connection import ServerConnection, parse_request
from protocol.errors import DecodeError
from protocol.generated.messages import FetchResponse, MetadataRequest, MetadataResponse, ProduceRequest
from tests.protocol.schema_strategies import all_messages, message_class, message_strategy

MESSAGES = [(folder, msg) for folder, msg in all_messages()]


@pytest.mark.parametrize("folder,msg", [pytest.param(f, m, id=m.name) for f, m in MESSAGES])
@settings(max_examples=30)
@given(data=st.binary(max_size=64), vpick=st.integers(0, 1000))
def test_random_bytes_raise_only_decode_error(folder, msg, data, vpick):
    cls = message_class(folder, msg)
    version = msg.versions[vpick % len(msg.versions)]
    try:
        cls.decode(data, version)
    except DecodeError:
        pass


@pytest.mark.parametrize("folder,msg", [pytest.param(f, m, id=m.name) for f, m in MESSAGES
                                        if m.kind in ("request", "response")])
@settings(max_examples=5)
@given(st.data())
def test_truncated_encodings_raise_decode_error(folder, msg, data):
    version = data.draw(st.sampled_from(msg.stable_versions or msg.versions))
    obj = data.draw(message_strategy(folder, msg, version))
    full = obj.encode(version)
    cut = data.draw(st.integers(0, max(0, len(full) - 1)))
    cls = message_class(folder, msg)
    try:
        back = cls.decode(full[:cut], version)
    except DecodeError:
        return
    # A prefix may legitimately decode only if the message ended early (trailing bytes ignored);
    # it must then re-encode to a prefix of the original.
    assert full.startswith(back.encode(version))


@pytest.mark.parametrize("count", [0x7FFFFFFF, 0x10000000, -2, -(2 ** 31)])
@pytest.mark.parametrize("version", [0, 4])
def test_huge_or_negative_array_sizes(count, version):
    # MetadataRequest topics: non-nullable int32-counted array at v0, nullable from v1. As in Kafka's
    # generated readers, any negative count is null where null is allowed and an error where it is not.
    data = struct.pack(">i", count) + b"\x00" * 8
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        result = MetadataRequest.decode(data, version)
    except DecodeError:
        result = DecodeError
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if count < 0 and version >= 1:
        assert result.topics is None
    else:
        assert result is DecodeError
    assert peak < 1 << 20, peak
    assert elapsed < 1.0


@pytest.mark.parametrize("cls,version,payload", [
    (ProduceRequest, 9, b"\x00\x00" + b"\xff\xff\xff\xff\x0f"),  # compact string length: a 5-byte varint of 2**32-1
    (FetchResponse, 12, b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" + b"\xff\xff\xff\xff\x7f"),
    (MetadataResponse, 12, b"\x00\x00\x00\x00" + b"\x80\x80\x80\x80\x80\x80"),  # varint longer than 5 bytes
    (MetadataResponse, 1, b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01" + b"\x7f\xff"),  # host string of 32767 bytes
])
def test_huge_declared_lengths(cls, version, payload):
    tracemalloc.start()
    with pytest.raises(DecodeError):
        cls.decode(payload, version)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1 << 20


@settings(max_examples=200)
@given(st.binary(max_size=200))
def test_random_frames_into_the_connection(data):
    conn = ServerConnection(max_frame_size=1 << 16)
    conn.receive_data(data)
    for _ in range(100):
        try:
            ev = conn.next_event()
        except DecodeError:
            return
        if not hasattr(ev, "api_key"):
            return
        try:
            ev.decode_body()
        except Exception as exc:  # the broker turns these into a closed connection
            assert type(exc).__module__ == "protocol.errors", exc


@given(st.binary(min_size=8, max_size=80))
def test_parse_request_header_raises_only_decode_error(data):
    try:
        parse_request(data)
    except DecodeError:
        pass
