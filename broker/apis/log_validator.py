"""The parts of Kafka's LogValidator that the broker runs before storage appends a produce batch.

Storage validates headers and CRCs itself; what needs records (the keyless check on compacted
topics, recompression to the topic's ``compression.type``) is here, called off the event loop.
Request-level rules (ProduceRequest.validateRecords) are checked first, header-only.
"""

from __future__ import annotations

from protocol.errors import ErrorCode, InvalidRecordError, KafkaError, UnsupportedMagicError
from protocol.record_codec import build_batch, decode_batch
from protocol.records import LOG_OVERHEAD, MAGIC_V2, NONE, ZSTD, parse_header, validate_batch

CODECS = {"uncompressed": NONE, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": ZSTD}


class UnsupportedCompressionTypeError(KafkaError):
    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def check_request_records(records, version: int) -> None:
    """ProduceRequest.validateRecords: exactly one magic-2 batch; no zstd below v7."""
    if records is None or len(records) < 17:
        raise InvalidRecordError(f"Produce requests with version {version} must have at least one record batch "
                                 "per partition")
    magic = records[16]
    if magic != MAGIC_V2:
        if magic in (0, 1):
            raise UnsupportedMagicError(f"Produce requests with version {version} are only allowed to contain "
                                        "record batches with magic version 2")
        raise InvalidRecordError(f"Produce requests with version {version} are only allowed to contain "
                                 "record batches with magic version 2")
    h = validate_batch(records, 0, check_crc=False)  # storage checks the CRC once, on append
    if version < 7 and h.compression == ZSTD:
        raise UnsupportedCompressionTypeError(f"Produce requests with version {version} are not allowed to use "
                                              "ZStandard compression")
    if h.batch_length + LOG_OVERHEAD != len(records):
        raise InvalidRecordError(f"Produce requests with version {version} are only allowed to contain exactly "
                                 "one record batch per partition")


def compression_level(config, compression_type: str) -> int | None:
    """The topic's compression.<codec>.level for recompression (gzip's -1 = the codec default)."""
    level = {"gzip": config.compression_gzip_level, "lz4": config.compression_lz4_level,
             "zstd": config.compression_zstd_level}.get(compression_type)
    return None if level == -1 else level


def needs_record_pass(records, compact: bool, compression_type: str) -> bool:
    if compact:
        return True
    target = CODECS.get(compression_type)
    return target is not None and parse_header(records, 0).compression != target


def record_pass(records, compact: bool, compression_type: str, topic_partition: str = "",
                level: int | None = None) -> bytearray:
    """Keyless check for compacted topics and recompression; returns the batch to append.

    Like LogValidator.validateKey, every keyless record is reported with its index; the partition's
    message summarises at most the first three (LogValidator.processRecordErrors).
    """
    header, recs = decode_batch(records, 0)
    if compact and not header.is_control:
        message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}."
        errors = [(i, message) for i, r in enumerate(recs) if r.key is None]
        if errors:
            exc = InvalidRecordError(
                f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
                f"showing the first three errors at most: {[f'{i}: {m}' for i, m in errors[:3]]}")
            exc.record_errors = errors
            raise exc
    target = CODECS.get(compression_type)
    if target is None or target == header.compression:
        return records if isinstance(records, bytearray) else bytearray(records)
    rebuilt = build_batch(recs, compression=target, producer_id=header.producer_id,
                          producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                          is_transactional=header.is_transactional, timestamp_type=header.timestamp_type,
                          base_timestamp=header.base_timestamp, max_timestamp=header.max_timestamp,
                          compression_level=level)
    return bytearray(rebuilt)
