"""KRaft metadata snapshots: the image written as record batches framed by a ``SnapshotHeaderRecord`` control
batch and a ``SnapshotFooterRecord`` control batch (Kafka's RecordsSnapshotWriter), and read back.

Batches inside a snapshot count offsets from 0 and carry the snapshot's epoch, as Kafka's writer does. A
snapshot that does not start with the header, end with the footer, or fails a batch CRC is refused with
``SnapshotError`` naming what is wrong: a node never loads part of an image.
"""

from __future__ import annotations

from cluster.image_writer import image_records
from cluster.metadata_image import MetadataImage
from cluster.metadata_serde import decode_record, encode_record
from protocol.errors import ProtocolError
from protocol.generated.raft import SnapshotFooterRecord, SnapshotHeaderRecord
from protocol.message import Message
from protocol.record_codec import (
    ControlRecordType, Record, build_batch, control_record_key, decode_batch, parse_control_record_type,
)
from protocol.records import iter_batch_positions

RECORDS_PER_BATCH = 1000  # well under KafkaRaftClient's 8 MiB batch limit for any metadata record


class SnapshotError(ValueError):
    """A snapshot file that is not a whole, valid KRaft snapshot."""


def _control_batch(kind: ControlRecordType, message, offset: int, epoch: int, now_ms: int) -> bytes:
    return build_batch([Record(key=control_record_key(kind), value=message.encode(0), timestamp=now_ms)],
                       base_offset=offset, is_control=True, partition_leader_epoch=epoch)


def write_snapshot(image: MetadataImage, epoch: int, last_contained_log_timestamp: int, now_ms: int) -> bytes:
    """The snapshot file's bytes for ``image``."""
    records = image_records(image)
    out = bytearray(_control_batch(ControlRecordType.SNAPSHOT_HEADER,
                                   SnapshotHeaderRecord(version=0,
                                                        last_contained_log_timestamp=last_contained_log_timestamp),
                                   0, epoch, now_ms))
    offset = 1
    for i in range(0, len(records), RECORDS_PER_BATCH):
        chunk = records[i:i + RECORDS_PER_BATCH]
        out += build_batch([Record(value=encode_record(r), timestamp=now_ms) for r in chunk], base_offset=offset,
                           partition_leader_epoch=epoch)
        offset += len(chunk)
    out += _control_batch(ControlRecordType.SNAPSHOT_FOOTER, SnapshotFooterRecord(version=0), offset, epoch, now_ms)
    return bytes(out)


def _data_batches(data: bytes) -> list[list[Record]]:
    """The records of each data batch, once the whole snapshot is checked (header first, footer last, CRCs)."""
    mv = memoryview(data)
    kinds: list[ControlRecordType | None] = []
    batches: list[list[Record]] = []
    try:
        scan = iter_batch_positions(mv)
        for pos, _ in scan:
            header, records = decode_batch(mv, pos)
            if header.is_control:
                kinds.extend(parse_control_record_type(r.key) for r in records)
            else:
                kinds.append(None)
                batches.append(records)
    except (ProtocolError, ValueError) as exc:
        raise SnapshotError(f"a damaged batch: {exc}") from None
    if scan.incomplete or scan.position != len(mv):
        raise SnapshotError(f"{len(mv) - scan.position} byte(s) after the last whole batch")
    if not kinds or kinds[0] is not ControlRecordType.SNAPSHOT_HEADER:
        raise SnapshotError("no SnapshotHeaderRecord at its start")
    if kinds[-1] is not ControlRecordType.SNAPSHOT_FOOTER:
        raise SnapshotError("no SnapshotFooterRecord at its end (a write that did not finish)")
    return batches


def validate_snapshot(data: bytes) -> None:
    """Raise SnapshotError unless ``data`` is a whole snapshot (before a node keeps or loads it)."""
    _data_batches(data)


def snapshot_timestamp(data: bytes) -> int:
    """The header's LastContainedLogTimestamp (what ``metadata.max.retention.ms`` is measured from, as Kafka's
    KafkaMetadataLog.readSnapshotTimestamp does)."""
    try:
        header, records = decode_batch(memoryview(data), 0)
        if not header.is_control or parse_control_record_type(records[0].key) is not ControlRecordType.SNAPSHOT_HEADER:
            raise SnapshotError("no SnapshotHeaderRecord at its start")
        return SnapshotHeaderRecord.decode(records[0].value, 0).last_contained_log_timestamp
    except (ProtocolError, ValueError, IndexError) as exc:
        raise SnapshotError(f"a damaged header: {exc}") from None


def snapshot_records(data: bytes) -> list[Message]:
    """The metadata records of a snapshot."""
    try:
        return [decode_record(r.value)[0] for batch in _data_batches(data) for r in batch]
    except ProtocolError as exc:
        raise SnapshotError(f"a metadata record that cannot be read: {exc}") from None


def image_from_snapshot(data: bytes, end_offset: int) -> MetadataImage:
    """The image a snapshot holds, as of the last offset before ``end_offset``."""
    return MetadataImage().apply(snapshot_records(data), end_offset - 1)
