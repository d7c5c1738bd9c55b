"""The ``__cluster_metadata`` log with a quorum of one voter: append, fsync, commit, apply.

This is the single-node stand-in for KRaft's replicated log. It stores metadata records in an
ordinary partition log (``<metadata log dir>/__cluster_metadata-0``, Kafka's own place for it),
framed by cluster.metadata_serde, one batch per controller decision. A batch is committed once it is
fsynced (the whole quorum has it) and only then applied to the image. Each start is a new leader
epoch, as a restarted single voter elects itself again.

All methods here block on disk: the broker calls them through ``asyncio.to_thread``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from cluster.metadata_image import MetadataImage
from cluster.metadata_serde import decode_record, encode_record
from protocol.message import Message
from protocol.topics import METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID
from protocol.record_codec import Record, build_batch, decode_batch
from storage.config import LogConfig
from storage.log import FetchIsolation, Log

log = logging.getLogger("odradek.metadata_log")

METADATA_PARTITION_DIR = f"{METADATA_TOPIC}-{METADATA_PARTITION}"


class MetadataLog:
    def __init__(self, log_dir: Path) -> None:
        self.dir = Path(log_dir) / METADATA_PARTITION_DIR
        self.log: Log | None = None
        self.epoch = 0
        self.image = MetadataImage()

    def open(self, now_ms: int, had_clean_shutdown: bool = False) -> MetadataImage:
        """Load the log (recovering a torn tail) and rebuild the image by replaying every batch."""
        now = now_ms
        config = LogConfig.from_props({"retention.ms": -1, "retention.bytes": -1, "segment.bytes": 104857600})
        self.log = Log.open(str(self.dir), config, now_ms=now, had_clean_shutdown=had_clean_shutdown,
                            topic_id=METADATA_TOPIC_ID)
        image = MetadataImage()
        count = 0
        for batch in self.log.iter_batches(0, FetchIsolation.LOG_END):
            header, records = decode_batch(batch)
            if header.is_control:
                continue
            decoded = [decode_record(r.value)[0] for r in records]
            image = image.apply(decoded, header.base_offset + header.last_offset_delta)
            count += len(decoded)
        self.log.update_high_watermark(self.log.log_end_offset)
        self.epoch = (self.log.latest_epoch or 0) + 1
        self.image = image
        log.info("loaded %d metadata records from %s (offset %d); leader epoch %d",
                 count, self.dir, image.offset, self.epoch)
        return image

    @property
    def end_offset(self) -> int:
        assert self.log is not None
        return self.log.log_end_offset

    def append(self, records: list[Message], now_ms: int) -> MetadataImage:
        """Commit ``records`` as one batch and return the image with them applied."""
        if not records:
            return self.image
        assert self.log is not None
        now = now_ms
        batch = bytearray(build_batch([Record(value=encode_record(r), timestamp=now) for r in records]))
        info = self.log.append_as_leader(batch, self.epoch, now)
        self.log.flush(now)
        self.log.update_high_watermark(self.log.log_end_offset)
        self.image = self.image.apply(records, info.last_offset)
        return self.image

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None


def metadata_log_dir(config_dirs: list[Path], metadata_log_dir: str | None) -> Path:
    """``metadata.log.dir`` if set, else the first of ``log.dirs`` (KafkaConfig.metadataLogDir)."""
    return Path(os.path.abspath(metadata_log_dir)) if metadata_log_dir else config_dirs[0]
