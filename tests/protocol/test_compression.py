"""Compression codecs: round trips, the exact framings Kafka writes and reads, interop with other encoders,
bounded decompression, and garbage in -> CorruptRecordError only."""

from __future__ import annotations

import gzip
import os
import struct
import time
import tracemalloc
import zlib

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, strategies as st

from protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    XERIAL_MAGIC,
    ZSTD,
    compress,
    decompress,
)
from protocol.errors import CorruptRecordError

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
CODEC_IDS = ["none", "gzip", "snappy", "lz4", "zstd"]
COMPRESSED = [GZIP, SNAPPY, LZ4, ZSTD]
COMPRESSED_IDS = CODEC_IDS[1:]

TEXT = b"".join(b"record %d: the quick brown fox jumps over the lazy dog\n" % i for i in range(5000))


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@given(data=st.binary(max_size=5000))
def test_round_trip_property(codec, data):
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("size", [0, 1, 65535, 65536, 65537, 300_000])
def test_round_trip_sizes(codec, size):
    data = (os.urandom(size // 2) + TEXT)[:size]
    z = compress(codec, data)
    assert decompress(codec, z) == data
    assert decompress(codec, memoryview(bytearray(z))) == data


@pytest.mark.parametrize("codec", COMPRESSED, ids=COMPRESSED_IDS)
def test_compresses(codec):
    assert len(compress(codec, TEXT)) < len(TEXT) // 4


def test_unknown_codec():
    with pytest.raises(ValueError):
        compress(5, b"x")
    for cid in (5, 6, 7, -1):
        with pytest.raises(CorruptRecordError):
            decompress(cid, b"x")


# -- gzip -----------------------------------------------------------------------------------------------------------

def test_gzip_is_a_gzip_member():
    z = compress(GZIP, TEXT)
    assert z[:3] == b"\x1f\x8b\x08"
    assert gzip.decompress(z) == TEXT


def test_gzip_reads_stdlib_and_multi_member():
    assert decompress(GZIP, gzip.compress(TEXT, 9)) == TEXT
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(GZIP, two) == b"first second"


def test_gzip_trailing_non_gzip_bytes_ignored_like_java():
    assert decompress(GZIP, gzip.compress(b"abc") + b"\0\0junk") == b"abc"


def test_gzip_truncated_and_corrupt():
    z = compress(GZIP, TEXT)
    for cut in (1, 5, len(z) // 2, len(z) - 1):
        with pytest.raises(CorruptRecordError):
            decompress(GZIP, z[:cut])
    bad = bytearray(z)
    bad[len(bad) // 2] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        decompress(GZIP, bytes(bad))
    with pytest.raises(CorruptRecordError):
        decompress(GZIP, zlib.compress(TEXT))  # zlib wrapper, not gzip


def test_gzip_interop_kafka_python():
    from kafka.codec import gzip_decode, gzip_encode
    assert decompress(GZIP, gzip_encode(TEXT)) == TEXT
    assert gzip_decode(compress(GZIP, TEXT)) == TEXT


# -- snappy ---------------------------------------------------------------------------------------------------------

def test_snappy_writes_xerial_framing():
    data = TEXT[:100_000]
    z = compress(SNAPPY, data)
    assert z[:16] == XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
    pos, blocks = 16, []
    while pos < len(z):
        (n,) = struct.unpack_from(">i", z, pos)
        blocks.append(snappy.uncompress(z[pos + 4:pos + 4 + n]))
        pos += 4 + n
    assert pos == len(z)
    assert [len(b) for b in blocks] == [32768, 32768, 32768, 100_000 - 3 * 32768]  # snappy-java's block size
    assert b"".join(blocks) == data


def test_snappy_reads_raw_like_librdkafka():
    assert decompress(SNAPPY, snappy.compress(TEXT)) == TEXT
    assert decompress(SNAPPY, snappy.compress(b"")) == b""


def test_snappy_interop_kafka_python():
    from kafka.codec import snappy_decode, snappy_encode
    assert decompress(SNAPPY, snappy_encode(TEXT)) == TEXT
    assert decompress(SNAPPY, snappy_encode(TEXT, xerial_compatible=False)) == TEXT
    assert snappy_decode(compress(SNAPPY, TEXT)) == TEXT


def test_snappy_interop_aiokafka():
    from aiokafka.codec import snappy_decode, snappy_encode
    assert decompress(SNAPPY, snappy_encode(TEXT)) == TEXT
    assert snappy_decode(compress(SNAPPY, TEXT)) == TEXT


def test_snappy_xerial_malformed():
    z = compress(SNAPPY, TEXT)
    header = z[:16]
    for bad in (
        XERIAL_MAGIC + b"\0\0",                      # short header
        header + b"\x00\x00",                        # short block length
        header + b"\xff\xff\xff\xff" + b"x" * 10,    # negative block length
        header + b"\x00\x00\x10\x00" + b"x" * 10,    # block longer than the data
        z[:-1],                                       # last block truncated
        header + b"\x00\x00\x00\x03\xff\xff\xff",    # bad snappy preamble
    ):
        with pytest.raises(CorruptRecordError):
            decompress(SNAPPY, bad)
    assert decompress(SNAPPY, header) == b""


def test_snappy_raw_malformed():
    z = snappy.compress(TEXT)
    for bad in (z[:-1], z[:3], b"\xff\xff\xff\xff\xff\xff", b"\x05abc"):
        with pytest.raises(CorruptRecordError):
            decompress(SNAPPY, bad)


# -- lz4 ------------------------------------------------------------------------------------------------------------

def test_lz4_frame_matches_kafka_lz4_block_output_stream():
    z = compress(LZ4, TEXT)
    assert z[:4] == b"\x04\x22\x4d\x18"   # frame magic 0x184D2204
    assert z[4] == 0x60                     # FLG: version 01, independent blocks, no checksums, no content size
    assert z[5] == 0x40                     # BD: 64 KiB max block
    assert z[-4:] == b"\0\0\0\0"            # end mark, no content checksum
    assert lz4.frame.decompress(z) == TEXT


def _xxh32_short(data: bytes, seed: int = 0) -> int:
    """XXH32 for inputs under 16 bytes (enough for an LZ4 frame descriptor)."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    m = 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & m

    assert len(data) < 16
    h = (seed + p5 + len(data)) & m
    i = 0
    while i + 4 <= len(data):
        h = rotl((h + int.from_bytes(data[i:i + 4], "little") * p3) & m, 17) * p4 & m
        i += 4
    for b in data[i:]:
        h = rotl((h + b * p5) & m, 11) * p1 & m
    h ^= h >> 15
    h = h * p2 & m
    h ^= h >> 13
    h = h * p3 & m
    h ^= h >> 16
    return h


def test_lz4_header_checksum_is_correct():
    """Since magic v1 Kafka checks the frame descriptor checksum over FLG+BD only (the 0.8/0.9 bug hashed the
    magic too)."""
    assert _xxh32_short(b"") == 0x02CC5D05  # reference value from the xxHash spec
    z = compress(LZ4, b"abc")
    assert z[6] == (_xxh32_short(z[4:6]) >> 8) & 0xFF
    assert z[6] != (_xxh32_short(z[0:6]) >> 8) & 0xFF


def test_lz4_reads_other_frame_variants():
    for kw in ({}, {"block_linked": True}, {"store_size": True, "content_checksum": True},
               {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "block_checksum": True}, {"compression_level": 12}):
        assert decompress(LZ4, lz4.frame.compress(TEXT, **kw)) == TEXT


def test_lz4_interop_kafka_python():
    from kafka.codec import lz4_decode, lz4_encode
    assert decompress(LZ4, lz4_encode(TEXT)) == TEXT
    assert lz4_decode(compress(LZ4, TEXT)) == TEXT


def test_lz4_malformed():
    z = compress(LZ4, TEXT)
    for bad in (z[:-1], z[:-4], z[:7], z[:3], b"\x04\x22\x4d\x18\x60\x40\x00", b"notlz4data"):
        with pytest.raises(CorruptRecordError):
            decompress(LZ4, bad)
    bad = bytearray(z)
    bad[20] ^= 0xFF
    try:
        out = decompress(LZ4, bytes(bad))
    except CorruptRecordError:
        pass
    else:
        assert out != TEXT  # no block checksum: corruption may decode to other bytes; the batch CRC catches it


# -- zstd -----------------------------------------------------------------------------------------------------------

def test_zstd_frames_without_content_size():
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    z = cctx.compress(TEXT)
    assert zstandard.frame_content_size(z) == -1
    assert decompress(ZSTD, z) == TEXT
    obj = zstandard.ZstdCompressor().compressobj()
    streamed = obj.compress(TEXT[:1000]) + obj.compress(TEXT[1000:]) + obj.flush()
    assert decompress(ZSTD, streamed) == TEXT


def test_zstd_multiple_frames():
    z = compress(ZSTD, b"one ") + compress(ZSTD, b"two ") + compress(ZSTD, b"")
    assert decompress(ZSTD, z) == b"one two "


def test_zstd_interop_kafka_python():
    from kafka.codec import zstd_decode, zstd_encode
    assert decompress(ZSTD, zstd_encode(TEXT)) == TEXT
    assert zstd_decode(compress(ZSTD, TEXT)) == TEXT


def test_zstd_malformed():
    z = compress(ZSTD, os.urandom(200_000))
    for bad in (z[:-1], z[:-3], z[:10], z[:2], z + b"junk", b"\x28\xb5\x2f\xfd" + b"\xff" * 20):
        with pytest.raises(CorruptRecordError):
            decompress(ZSTD, bad)


# -- bounded output -------------------------------------------------------------------------------------------------

def _bomb(codec, size):
    if codec == ZSTD:
        obj = zstandard.ZstdCompressor().compressobj()
        chunk = b"\0" * (1 << 20)
        return b"".join(obj.compress(chunk) for _ in range(size >> 20)) + obj.flush()
    return compress(codec, b"\0" * size)


@pytest.mark.parametrize("codec", COMPRESSED, ids=COMPRESSED_IDS)
def test_bomb_is_bounded(codec):
    size = 64 << 20
    bomb = _bomb(codec, size)
    limit = 1 << 20
    tracemalloc.start()
    t = time.perf_counter()
    try:
        with pytest.raises(CorruptRecordError):
            decompress(codec, bomb, max_size=limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - t
    assert peak < 16 * limit + 2 * len(bomb)
    assert elapsed < 2.0
    assert len(decompress(codec, _bomb(codec, 1 << 20), max_size=limit)) == limit  # exactly at the limit is fine


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_max_size_exact(codec):
    data = TEXT[:10_000]
    z = compress(codec, data)
    assert decompress(codec, z, max_size=10_000) == data
    with pytest.raises(CorruptRecordError):
        decompress(codec, z, max_size=9_999)


# -- garbage --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", COMPRESSED, ids=COMPRESSED_IDS)
@given(data=st.binary(max_size=200))
def test_garbage_only_raises_corrupt(codec, data):
    try:
        decompress(codec, data, max_size=1 << 20)
    except CorruptRecordError:
        pass


@pytest.mark.parametrize("codec", COMPRESSED, ids=COMPRESSED_IDS)
@given(st.data())
def test_mutated_only_raises_corrupt(codec, data):
    z = bytearray(compress(codec, TEXT[:3000]))
    for _ in range(data.draw(st.integers(1, 3))):
        z[data.draw(st.integers(0, len(z) - 1))] = data.draw(st.integers(0, 255))
    try:
        decompress(codec, bytes(z), max_size=1 << 20)
    except CorruptRecordError:
        pass
