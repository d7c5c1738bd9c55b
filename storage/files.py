"""File and directory names, as Kafka's ``LogFileUtils.java`` and ``LocalLog.scala`` spell them."""

from __future__ import annotations

import os
import re
import uuid

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
META_PROPERTIES_FILE = "meta.properties"
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"


def filename_prefix_from_offset(offset: int) -> str:
    """20 digits, zero padded: ``NumberFormat`` with ``minimumIntegerDigits=20`` and no grouping."""
    return f"{offset:020d}"


def offset_from_file_name(name: str) -> int:
    """``Long.parseLong(name.substring(0, name.indexOf('.')))``; raises ValueError like Kafka's
    NumberFormatException."""
    dot = name.index(".")
    return int(name[:dot])


def log_file(dir: str, offset: int, suffix: str = "") -> str:
    return os.path.join(dir, filename_prefix_from_offset(offset) + LOG_FILE_SUFFIX + suffix)


def offset_index_file(dir: str, offset: int, suffix: str = "") -> str:
    return os.path.join(dir, filename_prefix_from_offset(offset) + INDEX_FILE_SUFFIX + suffix)


def time_index_file(dir: str, offset: int, suffix: str = "") -> str:
    return os.path.join(dir, filename_prefix_from_offset(offset) + TIME_INDEX_FILE_SUFFIX + suffix)


def transaction_index_file(dir: str, offset: int, suffix: str = "") -> str:
    return os.path.join(dir, filename_prefix_from_offset(offset) + TXN_INDEX_FILE_SUFFIX + suffix)


def producer_snapshot_file(dir: str, offset: int) -> str:
    return os.path.join(dir, filename_prefix_from_offset(offset) + PRODUCER_SNAPSHOT_FILE_SUFFIX)


def is_log_file(name: str) -> bool:
    return name.endswith(LOG_FILE_SUFFIX)


def is_index_file(name: str) -> bool:
    return (name.endswith(INDEX_FILE_SUFFIX) or name.endswith(TIME_INDEX_FILE_SUFFIX)
            or name.endswith(TXN_INDEX_FILE_SUFFIX))


def replace_suffix(path: str, old: str, new: str) -> str:
    if not path.endswith(old):
        raise ValueError(f"Expected string to end with '{old}' but string is '{path}'")
    return path[: len(path) - len(old)] + new


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def log_delete_dir_name(topic: str, partition: int) -> str:
    """``topic-partition.uniqueId-delete`` with the topic cut so the name stays within 255 characters."""
    unique = uuid.uuid4().hex
    full_suffix = f"-{partition}.{unique}{DELETE_DIR_SUFFIX}"
    prefix_len = min(len(topic), 255 - len(full_suffix))
    return topic[:prefix_len] + full_suffix


_DELETE_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)" + re.escape(DELETE_DIR_SUFFIX) + "$")
_FUTURE_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)" + re.escape(FUTURE_DIR_SUFFIX) + "$")
_STRAY_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)" + re.escape(STRAY_DIR_SUFFIX) + "$")


def parse_topic_partition_name(name: str) -> tuple[str, int]:
    """Kafka's ``LocalLog.parseTopicPartitionName``: the partition is after the last dash."""
    name = os.path.basename(name.rstrip("/"))
    if not name or "-" not in name:
        raise ValueError(f"Found directory {name}, '{name}' is not in the form of topic-partition or "
                         f"topic-partition.uniqueId-delete (if marked for deletion).")
    if name.endswith(DELETE_DIR_SUFFIX) and not _DELETE_DIR.match(name):
        raise ValueError(f"bad delete dir name {name}")
    if name.endswith(FUTURE_DIR_SUFFIX) and not _FUTURE_DIR.match(name):
        raise ValueError(f"bad future dir name {name}")
    if name.endswith(STRAY_DIR_SUFFIX) and not _STRAY_DIR.match(name):
        raise ValueError(f"bad stray dir name {name}")
    if name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
        name = name[: name.rindex(".")]
    dash = name.rindex("-")
    topic, part = name[:dash], name[dash + 1:]
    if not topic or not part or not part.isdigit():
        raise ValueError(f"Found directory {name}, '{name}' is not in the form of topic-partition")
    return topic, int(part)
