"""Metadata records in the ``__cluster_metadata`` log, framed as Kafka's MetadataRecordSerde does.

Each record value is: frame version (unsigned varint, 1), record type = the schema's apiKey
(unsigned varint), record version (unsigned varint), then the record encoded at that version.
Keys are null. (``AbstractApiMessageSerde`` in apache/kafka server-common.)
"""

from __future__ import annotations

from protocol.errors import DecodeError
from protocol.generated import metadata as _records
from protocol.message import Message
from protocol.primitives import read_uvarint, uvarint

FRAME_VERSION = 1

RECORD_TYPES: dict[int, type[Message]] = {
    getattr(_records, name).API_KEY: getattr(_records, name) for name in _records.__all__
}


class MetadataParseError(DecodeError):
    """A metadata record that cannot be read (Kafka's MetadataParseException)."""


def encode_record(record: Message, version: int | None = None) -> bytes:
    """Frame one metadata record; ``version`` defaults to the newest the schema defines."""
    if version is None:
        version = record.VALID_VERSIONS[1]
    out = bytearray(uvarint(FRAME_VERSION))
    out += uvarint(record.API_KEY)
    out += uvarint(version)
    record.encode_into(out, version)
    return bytes(out)


def decode_record(value: bytes | memoryview, unknown_ok: bool = False) -> tuple[Message | None, int]:
    """(record, version) from one record value; rejects trailing garbage as Kafka does.

    ``unknown_ok``: a record type this codec does not know gives (None, version) instead of an error
    (readers that only look for some record types, such as the analytics jobs).
    """
    mv = memoryview(value)
    try:
        frame, pos = read_uvarint(mv, 0)
        api_key, pos = read_uvarint(mv, pos)
        version, pos = read_uvarint(mv, pos)
    except (IndexError, DecodeError) as exc:
        raise MetadataParseError(f"bad metadata record frame: {exc}") from None
    if frame != FRAME_VERSION:
        raise MetadataParseError(f"unknown metadata frame version {frame}")
    cls = RECORD_TYPES.get(api_key)
    if cls is None:
        if unknown_ok:
            return None, version
        raise MetadataParseError(f"unknown metadata record type {api_key}")
    record, end = cls.decode_from(mv, pos, version)
    if end != len(mv):
        raise MetadataParseError(f"{len(mv) - end} byte(s) of garbage after {cls.NAME}")
    return record, version
