"""Exceptions raised by the storage engine.

Every error the broker has to turn into a response is a :class:`protocol.errors.KafkaError` subclass
carrying the Kafka error code a Kafka broker would answer with (see ``org.apache.kafka.common.protocol.Errors``
and the exception each Kafka storage class throws).  Errors that never leave the storage package
(``CorruptIndexError``, ``LogSegmentOffsetOverflowError``) are plain exceptions.
"""

from __future__ import annotations

from protocol.errors import CorruptRecordError, ErrorCode, InvalidRecordError, KafkaError

__all__ = [
    "CorruptRecordError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "KafkaStorageError",
    "OffsetOutOfRangeError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "OutOfOrderSequenceError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "UnexpectedAppendOffsetError",
    "InconsistentTopicIdError",
    "CorruptIndexError",
    "CorruptSnapshotError",
    "LogSegmentOffsetOverflowError",
    "InvalidOffsetError",
    "LogNotLoadedError",
]


class KafkaStorageError(KafkaError):
    """Disk I/O failed, or the partition's log is offline after an earlier failure (KAFKA_STORAGE_ERROR).

    Kafka's ``KafkaStorageException``.  Clients treat it as retriable.
    """

    code = ErrorCode.KAFKA_STORAGE_ERROR


class OffsetOutOfRangeError(KafkaError):
    """A fetch or an offset operation named an offset outside ``[log_start_offset, log_end_offset]``."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


class InvalidTimestampError(InvalidRecordError):
    """A record timestamp outside ``message.timestamp.before/after.max.ms`` (INVALID_TIMESTAMP)."""

    code = ErrorCode.INVALID_TIMESTAMP


class RecordTooLargeError(KafkaError):
    """A batch is larger than ``max.message.bytes`` (Kafka's ``RecordTooLargeException``: MESSAGE_TOO_LARGE)."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(KafkaError):
    """The records of one append are larger than ``segment.bytes`` (RECORD_LIST_TOO_LARGE)."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE


class OutOfOrderSequenceError(KafkaError):
    """An idempotent producer's sequence number is not the next one expected."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    """An idempotent producer wrote with an epoch older than the one last seen."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(KafkaError):
    """A non-transactional batch from a producer with an open transaction (or the reverse)."""

    code = ErrorCode.INVALID_TXN_STATE


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append whose first offset is below the log end offset (Kafka's UnexpectedAppendOffsetException).

    Kafka reports it as UNKNOWN_SERVER_ERROR; the replica fetcher handles it by truncating.
    """

    code = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class InconsistentTopicIdError(KafkaError):
    """``partition.metadata`` holds a different topic id from the one the broker assigns."""

    code = ErrorCode.INCONSISTENT_TOPIC_ID


class LogNotLoadedError(Exception):
    """The partition's log is still being loaded at start-up (or the log dirs are still being listed): asking for
    it again once loaded gets the log; creating it now would make a second, empty one."""


class CorruptIndexError(Exception):
    """An offset or time index failed a sanity check; the segment's indexes are rebuilt from its log."""


class CorruptSnapshotError(Exception):
    """A producer-state snapshot failed its CRC or schema check; it is deleted and rebuilt from the log."""


class InvalidOffsetError(Exception):
    """An index append with an offset not larger than the last one (Kafka's InvalidOffsetException)."""


class LogSegmentOffsetOverflowError(Exception):
    """A batch's offsets do not fit a 4-byte offset relative to the segment's base offset."""

    def __init__(self, segment: object, offset: int) -> None:
        super().__init__(f"Detected offset overflow at offset {offset} in segment {segment}")
        self.segment = segment
        self.offset = offset
