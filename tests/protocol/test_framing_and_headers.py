"""Framing, request/response headers and the server connection (sans-IO)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, strategies as st

from protocol.connection import CONNECTION_CLOSED, NEED_DATA, ServerConnection, encode_response, parse_request
from protocol.errors import DecodeError, FrameTooLargeError, UnknownApiKeyError, UnsupportedVersionError
from protocol.framing import FrameReader, frame
from protocol.generated.api_keys import APIS
from protocol.generated.messages import (
    ApiVersionsRequest, ApiVersionsResponse, FetchRequest, MetadataRequest, MetadataResponse, RequestHeader,
    ResponseHeader,
)


def request_frame(api_key: int, version: int, corr: int, client_id: str | None, body: bytes) -> bytes:
    hv = APIS[api_key].request_header_version(version)
    return frame(RequestHeader(api_key, version, corr, client_id).encode(hv) + body)


def test_header_versions_follow_flexibility():
    assert APIS[3].request_header_version(8) == 1 and APIS[3].request_header_version(9) == 2
    assert APIS[3].response_header_version(8) == 0 and APIS[3].response_header_version(9) == 1
    # ApiVersions responses always use header v0 (KIP-511), even at flexible v3+
    assert APIS[18].request_header_version(3) == 2 and APIS[18].response_header_version(3) == 0
    # ControlledShutdown v0 is the one user of request header v0
    assert APIS[7].request_header_version(0) == 0


def test_client_id_is_never_compact():
    hdr = RequestHeader(18, 3, 7, "abc").encode(2)
    # int16 key, int16 version, int32 correlation, int16 length + "abc", then empty tagged fields
    assert hdr == struct.pack(">hhih", 18, 3, 7, 3) + b"abc" + b"\x00"
    assert RequestHeader(18, 3, 7, None).encode(2) == struct.pack(">hhih", 18, 3, 7, -1) + b"\x00"


def test_connection_yields_requests_in_any_chunking():
    frames = [request_frame(18, 3, i, "c", ApiVersionsRequest("x", "1").encode(3)) for i in range(5)]
    data = b"".join(frames)
    for step in (1, 3, 7, len(data)):
        conn = ServerConnection()
        got = []
        for i in range(0, len(data), step):
            conn.receive_data(data[i:i + step])
            while (ev := conn.next_event()) is not NEED_DATA:
                got.append(ev.correlation_id)
        assert got == list(range(5))
        conn.receive_data(b"")
        assert conn.next_event() is CONNECTION_CLOSED


@given(st.lists(st.integers(1, 40), min_size=1, max_size=20))
def test_split_points_do_not_change_events(cuts):
    data = b"".join(request_frame(3, v, v, "cid", MetadataRequest(topics=None).encode(v) if v >= 1
                                  else MetadataRequest(topics=[]).encode(v)) for v in (0, 4, 9, 12, 13))
    conn = ServerConnection()
    pos, got = 0, []
    for c in cuts * 50:
        if pos >= len(data):
            break  # (receive_data(b"") would mean EOF)
        conn.receive_data(data[pos:pos + c])
        pos += c
        while (ev := conn.next_event()) is not NEED_DATA:
            got.append((ev.api_version, ev.client_id, ev.decode_body()))
    if pos < len(data):
        conn.receive_data(data[pos:])
    while (ev := conn.next_event()) is not NEED_DATA:
        got.append((ev.api_version, ev.client_id, ev.decode_body()))
    assert [g[0] for g in got] == [0, 4, 9, 12, 13]
    assert all(g[1] == "cid" for g in got)


def test_frame_size_limits():
    r = FrameReader(max_frame_size=100)
    r.feed(struct.pack(">i", 101))
    with pytest.raises(FrameTooLargeError):
        r.next_frame()
    r = FrameReader()
    r.feed(struct.pack(">i", -5))
    with pytest.raises(DecodeError):
        r.next_frame()
    # a huge declared size within the limit is not allocated up front: only what arrived is buffered
    r = FrameReader(max_frame_size=1 << 30)
    r.feed(struct.pack(">i", 1 << 29) + b"x" * 10)
    assert r.next_frame() is None and r.buffered == 10


def test_unknown_api_key_and_version_are_reported_distinctly():
    req = parse_request(struct.pack(">hhih", 999, 0, 1, -1))
    assert req.spec is None
    with pytest.raises(UnknownApiKeyError):
        req.decode_body()
    req = parse_request(struct.pack(">hhih", 3, 99, 1, -1) + b"\x00")  # v99 would be flexible: header v2
    assert req.spec is not None and not req.version_known
    with pytest.raises(UnsupportedVersionError):
        req.decode_body()


def test_response_framing_and_header_versions():
    req = parse_request(RequestHeader(3, 12, 42, "c").encode(2) + MetadataRequest(topics=None).encode(12))
    parts = encode_response(req, MetadataResponse(cluster_id="x"))
    data = b"".join(parts)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    hdr, pos = ResponseHeader.decode_from(memoryview(data), 4, 1)
    assert hdr.correlation_id == 42
    assert MetadataResponse.decode(data[pos:], 12).cluster_id == "x"
    # ApiVersions v3: header v0 (no tagged-field byte after the correlation id)
    req = parse_request(RequestHeader(18, 3, 9, "c").encode(2) + ApiVersionsRequest("a", "b").encode(3))
    data = b"".join(encode_response(req, ApiVersionsResponse(error_code=0)))
    assert struct.unpack_from(">i", data, 4)[0] == 9
    assert ApiVersionsResponse.decode(data[8:], 3).error_code == 0


class FakeSlice:
    """Stands in for storage's FileSlice: only its length is known to the codec."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def test_records_pass_through_as_parts():
    from protocol.generated.messages import FetchResponse
    from protocol.generated.messages.fetch_response import FetchableTopicResponse, PartitionData

    resp = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[
        PartitionData(partition_index=p, records=FakeSlice(1000)) for p in range(3)])])
    req = parse_request(RequestHeader(1, 12, 5, "c").encode(2) + FetchRequest().encode(12))
    parts = encode_response(req, resp)
    slices = [p for p in parts if isinstance(p, FakeSlice)]
    assert len(slices) == 3
    total = sum(len(p) for p in parts)
    assert struct.unpack_from(">i", parts[0])[0] == total - 4
    with pytest.raises(TypeError):
        resp.encode(12)  # a file slice cannot be flattened silently


@given(st.lists(st.binary(max_size=200_000), max_size=8), st.data())
def test_receive_into_yields_the_frames_sent(payloads, data):
    """Frames of every size (small ones through the scratch buffer, large ones in place), split at
    arbitrary points as a socket would deliver them, come out whole and in order."""
    stream = b"".join(frame(p) for p in payloads)
    r = FrameReader()
    pos = 0
    got = []
    while pos < len(stream):
        buf = r.get_buffer()
        n = data.draw(st.integers(1, min(len(buf), len(stream) - pos)), label="chunk")
        buf[:n] = stream[pos:pos + n]
        buf.release()
        r.buffer_updated(n)
        pos += n
        while (f := r.next_frame()) is not None:
            got.append(bytes(f))
    assert got == payloads
    assert r.buffered == 0


def test_bad_size_after_good_frames_is_reported_after_them():
    r = FrameReader(max_frame_size=100)
    r.feed(frame(b"a" * 10) + frame(b"b" * 50_000)[:4] + b"zz")
    assert r.next_frame() == bytearray(b"a" * 10)
    with pytest.raises(FrameTooLargeError):
        r.next_frame()
