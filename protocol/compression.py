"""Record-batch compression codecs (attributes bits 0-2), byte-compatible with Kafka's own.

What each codec writes, and why:

* gzip (1): a standard gzip member, like Java's ``GZIPOutputStream`` (default level 6). Reading accepts
  concatenated members, as ``GZIPInputStream`` does.
* snappy (2): written in xerial framing (``\\x82SNAPPY\\x00`` + version 1 + compat 1 + [int32 length + raw block],
  32 KiB of input per block), which is what Kafka's ``SnappyOutputStream`` writes. Reading also accepts raw snappy
  (no magic), which is what librdkafka writes; snappy-java falls back to raw the same way.
* lz4 (3): one LZ4 frame with independent 64 KiB blocks, no content size, no checksums: the bytes Kafka's
  ``Lz4BlockOutputStream`` writes (FLG 0x60, BD 0x40). Java's reader rejects linked blocks, so never write them.
* zstd (4): standard zstd frames (level 3). Reading accepts frames without a content size and several frames in a
  row, as zstd-jni's stream does.

Every decompressor is bounded by ``max_size``: output beyond it raises :class:`CorruptRecordError` without first
materialising it, so a tiny batch cannot make the broker or a tool allocate gigabytes. Truncated or malformed input
also raises :class:`CorruptRecordError`; no codec library exception escapes.
"""

from __future__ import annotations

import zlib
from typing import Final

import lz4.frame as _lz4f
import snappy as _snappy
import zstandard as _zstd

from protocol.errors import CorruptRecordError, KafkaError

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4

CODEC_NAMES: Final[dict[int, str]] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS: Final[dict[str, int]] = {v: k for k, v in CODEC_NAMES.items()}

#: Default bound on decompressed output (256 MiB). Kafka has no such bound; a bomb would OOM a JVM too.
DEFAULT_MAX_DECOMPRESSED_SIZE: Final = 256 * 1024 * 1024

DEFAULT_LEVELS: Final[dict[int, int]] = {GZIP: 6, LZ4: 0, ZSTD: 3}

XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
_XERIAL_BLOCK: Final = 32 * 1024

# zstd's densest encoding (an RLE block) turns 4 input bytes into 128 KiB, so feeding the decoder at most
# budget >> 16 input bytes per call keeps each call's output below half the budget.
_ZSTD_MIN_STEP: Final = 64


def compress(codec_id: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress ``data`` the way Kafka's broker would for ``codec_id``."""
    if codec_id == NONE:
        return bytes(data)
    if codec_id == GZIP:
        c = zlib.compressobj(DEFAULT_LEVELS[GZIP] if level is None else level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec_id == SNAPPY:
        return _xerial_compress(data)
    if codec_id == LZ4:
        return _lz4f.compress(
            data,
            compression_level=DEFAULT_LEVELS[LZ4] if level is None else level,
            block_size=_lz4f.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
    if codec_id == ZSTD:
        return _zstd.ZstdCompressor(level=DEFAULT_LEVELS[ZSTD] if level is None else level).compress(data)
    raise ValueError(f"unknown compression type id {codec_id}")


def decompress(codec_id: int, data: bytes | bytearray | memoryview,
               max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decompress ``data``; :class:`CorruptRecordError` if it is malformed, truncated or would exceed ``max_size``."""
    try:
        if codec_id == NONE:
            out = bytes(data)
        elif codec_id == GZIP:
            out = _gzip_decompress(data, max_size)
        elif codec_id == SNAPPY:
            out = _snappy_decompress(data, max_size)
        elif codec_id == LZ4:
            out = _lz4_decompress(data, max_size)
        elif codec_id == ZSTD:
            out = _zstd_decompress(data, max_size)
        else:
            raise CorruptRecordError(f"unknown compression type id {codec_id}")
    except (KafkaError, MemoryError):
        raise
    except Exception as e:  # every codec library has its own exception types (zlib.error, RuntimeError, ZstdError...)
        raise CorruptRecordError(f"{CODEC_NAMES.get(codec_id, codec_id)} decompression failed: {e}") from e
    if len(out) > max_size:
        raise _too_big(codec_id, max_size)
    return out


class DecompressedTooLargeError(CorruptRecordError):
    """Data that would decompress beyond the caller's limit (a decompression bomb, or just too much)."""


def _too_big(codec_id: int, max_size: int) -> CorruptRecordError:
    return DecompressedTooLargeError(f"{CODEC_NAMES.get(codec_id, codec_id)} data decompresses to more than "
                                     f"{max_size} bytes")


# -- gzip -----------------------------------------------------------------------------------------------------------

def _gzip_decompress(data, max_size: int) -> bytes:
    parts = []
    total = 0
    rest = data
    while True:
        d = zlib.decompressobj(31)
        piece = d.decompress(rest, max_size - total + 1)
        total += len(piece)
        if total > max_size:
            raise _too_big(GZIP, max_size)
        parts.append(piece)
        if not d.eof:
            raise CorruptRecordError("truncated gzip data")
        rest = d.unused_data
        # GZIPInputStream reads another member only if one follows; other trailing bytes are ignored.
        if not rest.startswith(b"\x1f\x8b"):
            break
    return b"".join(parts)


# -- snappy ---------------------------------------------------------------------------------------------------------

def _xerial_compress(data) -> bytes:
    mv = memoryview(data)
    out = [_XERIAL_HEADER]
    for i in range(0, len(mv), _XERIAL_BLOCK):
        block = _snappy.compress(mv[i:i + _XERIAL_BLOCK])
        out.append(len(block).to_bytes(4, "big"))
        out.append(block)
    return b"".join(out)


def _raw_snappy_length(block) -> int:
    """The uncompressed length a raw snappy block declares (its uvarint preamble), read before decompressing."""
    result = 0
    shift = 0
    for i in range(5):
        if i >= len(block):
            raise CorruptRecordError("truncated snappy length preamble")
        b = block[i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            if result > 0xFFFFFFFF:
                break
            return result
        shift += 7
    raise CorruptRecordError("invalid snappy length preamble")


def _snappy_decompress(data, max_size: int) -> bytes:
    mv = memoryview(data).cast("B")
    if mv[:8] != XERIAL_MAGIC:
        if _raw_snappy_length(mv) > max_size:
            raise _too_big(SNAPPY, max_size)
        return _snappy.uncompress(mv)
    n = len(mv)
    if n < 16:
        raise CorruptRecordError("truncated xerial snappy header")
    pos = 16
    total = 0
    parts = []
    while pos < n:
        if pos + 4 > n:
            raise CorruptRecordError("truncated xerial snappy block length")
        length = int.from_bytes(mv[pos:pos + 4], "big", signed=True)
        pos += 4
        if length < 0 or pos + length > n:
            raise CorruptRecordError(f"xerial snappy block length {length} exceeds the data")
        block = mv[pos:pos + length]
        pos += length
        total += _raw_snappy_length(block)
        if total > max_size:
            raise _too_big(SNAPPY, max_size)
        parts.append(_snappy.uncompress(block))
    return b"".join(parts)


# -- lz4 ------------------------------------------------------------------------------------------------------------

_LZ4_FIRST_STEP: Final = 64 * 1024


def _lz4_decompress(data, max_size: int) -> bytes:
    # python-lz4 allocates max_length up front: asking for the whole bound (256 MiB by default) cost ~15 us per
    # batch, 10x the decompression of a 16 KiB batch. So output is taken in growing steps up to the bound.
    d = _lz4f.LZ4FrameDecompressor()
    step = max(_LZ4_FIRST_STEP, 4 * len(data))
    out = d.decompress(data, max_length=min(step, max_size + 1))
    total = len(out)
    parts = None
    while total <= max_size and not d.eof and not d.needs_input:     # stopped at max_length: more to come
        step *= 2
        if parts is None:
            parts = [out]
        piece = d.decompress(b"", max_length=min(step, max_size + 1 - total))
        total += len(piece)
        parts.append(piece)
    if total > max_size:
        raise _too_big(LZ4, max_size)
    if not d.eof:
        raise CorruptRecordError("truncated lz4 frame")
    # Like Kafka's Lz4BlockInputStream, stop at the end mark: bytes after the frame are not read.
    return out if parts is None else b"".join(parts)


# -- zstd -----------------------------------------------------------------------------------------------------------

def _zstd_decompress(data, max_size: int) -> bytes:
    mv = memoryview(data).cast("B")
    n = len(mv)
    step = max(_ZSTD_MIN_STEP, max_size >> 16)
    dctx = _zstd.ZstdDecompressor()
    parts = []
    total = 0
    pos = 0
    while pos < n:
        obj = dctx.decompressobj()
        while not obj.eof:
            if pos >= n:
                raise CorruptRecordError("truncated zstd frame")
            chunk = mv[pos:pos + step]
            pos += len(chunk)
            piece = obj.decompress(chunk)
            total += len(piece)
            if total > max_size:
                raise _too_big(ZSTD, max_size)
            if piece:
                parts.append(piece)
        pos -= len(obj.unused_data)
    return b"".join(parts)
