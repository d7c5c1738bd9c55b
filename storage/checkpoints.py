"""Kafka's small text files, line for line.

* :class:`CheckpointFile` — ``server-common/.../CheckpointFile.java``::

      <version>\\n<entry count>\\n<entry>\\n<entry>\\n...

  written to ``<file>.tmp``, fsynced, renamed over the file (``Utils.atomicMoveWithFallback``).
* :class:`OffsetCheckpointFile` — entries ``"<topic> <partition> <offset>"``, version 0
  (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``, ``replication-offset-checkpoint``,
  ``cleaner-offset-checkpoint``; ``OffsetCheckpointFile.java``).
* :class:`LeaderEpochCheckpointFile` — entries ``"<epoch> <start offset>"``, version 0
  (``LeaderEpochCheckpointFile.java``).
* :class:`PartitionMetadataFile` — ``"version: 0\\ntopic_id: <uuid>"`` with no final newline
  (``PartitionMetadata.encode``, ``PartitionMetadataReadBuffer``).
* :class:`CleanShutdownFile` — ``.kafka_cleanshutdown`` holding ``{"version":0,"brokerEpoch":N}``
  (``CleanShutdownFileHandler.java``).
* :class:`MetaProperties` — ``meta.properties`` as ``java.util.Properties.store`` writes it
  (``MetaProperties.java``, ``PropertiesUtils.writePropertiesFile``).
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import re
import threading
import uuid
from dataclasses import dataclass
from typing import Callable, Generic, Iterable, Mapping, TypeVar

from .errors import InconsistentTopicIdError, KafkaStorageError
from .fileio import FileIO

T = TypeVar("T")

_WS = re.compile(r"\s+")
_LINES = re.compile(r"\r\n|\r|\n")
_JAVA_INT = re.compile(r"^[+-]?[0-9]+$")

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class CheckpointError(KafkaStorageError):
    """A checkpoint file could not be read (malformed line, wrong version, wrong entry count)."""


def _java_int(s: str, lo: int = INT_MIN, hi: int = INT_MAX) -> int:
    """``Integer.parseInt`` / ``Long.parseLong``: optional sign, ASCII digits, in range."""
    if not _JAVA_INT.match(s):
        raise ValueError(s)
    v = int(s)
    if not lo <= v <= hi:
        raise ValueError(s)
    return v


def _java_long(s: str) -> int:
    return _java_int(s, LONG_MIN, LONG_MAX)


def _java_lines(text: str) -> list[str]:
    """``BufferedReader.readLine`` semantics: a final terminator does not start a new line."""
    if not text:
        return []
    lines = _LINES.split(text)
    if lines and lines[-1] == "" and _LINES.search(text[-2:]):
        lines.pop()
    return lines


class CheckpointFile(Generic[T]):
    """Generic ``version / count / entries`` checkpoint (``CheckpointFile.java``)."""

    def __init__(self, path: str, version: int,
                 to_line: Callable[[T], str], from_line: Callable[[str], T | None], *,
                 file_io: FileIO | None = None) -> None:
        self.path = os.path.abspath(path)
        self.file_io = file_io if file_io is not None else FileIO()
        self.version = version
        self._to_line = to_line
        self._from_line = from_line
        self._lock = threading.Lock()
        # Kafka creates the file if it does not exist.
        if not os.path.exists(self.path):
            try:
                fd = self.file_io.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
                self.file_io.close(fd)
            except FileExistsError:
                pass
            except OSError as e:
                raise KafkaStorageError(f"Error creating checkpoint file {self.path}: {e}") from e

    def encode(self, entries: Iterable[T]) -> bytes:
        entries = list(entries)
        lines = [str(self.version), str(len(entries))]
        lines.extend(self._to_line(e) for e in entries)
        return ("\n".join(lines) + "\n").encode("utf-8")

    def write(self, entries: Iterable[T]) -> None:
        data = self.encode(entries)
        with self._lock:
            try:
                self.file_io.write_file_atomic(self.path, data, sync=True)
            except OSError as e:
                raise KafkaStorageError(f"Error while writing to checkpoint file {self.path}: {e}") from e

    def write_if_dir_exists(self, entries: Iterable[T]) -> None:
        if os.path.isdir(os.path.dirname(self.path)):
            self.write(entries)

    def read(self) -> list[T]:
        with self._lock:
            try:
                with open(self.path, "rb") as f:
                    text = f.read().decode("utf-8")
            except FileNotFoundError:
                return []
            except (OSError, UnicodeDecodeError) as e:
                raise CheckpointError(f"Error while reading checkpoint file {self.path}: {e}") from e
        return self.decode(text)

    def decode(self, text: str) -> list[T]:
        lines = _java_lines(text)
        if not lines:
            return []
        try:
            read_version = _java_int(lines[0])
        except ValueError:
            raise self._malformed(lines[0]) from None
        if read_version != self.version:
            raise CheckpointError(f"Unrecognised version:{read_version}, expected version: {self.version} "
                                  f"in checkpoint file at: {self.path}")
        if len(lines) < 2:
            return []
        try:
            expected = _java_int(lines[1])
        except ValueError:
            raise self._malformed(lines[1]) from None
        entries: list[T] = []
        for line in lines[2:]:
            try:
                entry = self._from_line(line)
            except ValueError:
                entry = None
            if entry is None:
                raise self._malformed(line)
            entries.append(entry)
        if len(entries) != expected:
            raise CheckpointError(f"Expected [{expected}] entries in checkpoint file [{self.path}], "
                                  f"but found only [{len(entries)}]")
        return entries

    def _malformed(self, line: str) -> CheckpointError:
        return CheckpointError(f"Malformed line in checkpoint file [{self.path}]: {line}")


TopicPartition = tuple[str, int]


def _tpo_to_line(e: tuple[TopicPartition, int]) -> str:
    (topic, partition), offset = e
    return f"{topic} {partition} {offset}"


def _tpo_from_line(line: str) -> tuple[TopicPartition, int] | None:
    parts = _WS.split(line)
    if len(parts) != 3:
        return None
    return (parts[0], _java_int(parts[1])), _java_long(parts[2])


class OffsetCheckpointFile:
    """``(topic, partition) -> offset`` checkpoints, version 0."""

    VERSION = 0

    def __init__(self, path: str, *, file_io: FileIO | None = None) -> None:
        self._cp: CheckpointFile[tuple[TopicPartition, int]] = CheckpointFile(
            path, self.VERSION, _tpo_to_line, _tpo_from_line, file_io=file_io)

    @property
    def path(self) -> str:
        return self._cp.path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._cp.write(sorted(offsets.items()))

    def read(self) -> dict[TopicPartition, int]:
        return dict(self._cp.read())


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


def _epoch_from_line(line: str) -> EpochEntry | None:
    parts = _WS.split(line)
    if len(parts) != 2:
        return None
    return EpochEntry(_java_int(parts[0]), _java_long(parts[1]))


class LeaderEpochCheckpointFile:
    """``leader-epoch-checkpoint``: ``epoch startOffset`` lines, version 0."""

    VERSION = 0

    def __init__(self, path: str, *, file_io: FileIO | None = None) -> None:
        self._cp: CheckpointFile[EpochEntry] = CheckpointFile(
            path, self.VERSION, lambda e: f"{e.epoch} {e.start_offset}", _epoch_from_line, file_io=file_io)

    @property
    def path(self) -> str:
        return self._cp.path

    def write(self, entries: Iterable[EpochEntry]) -> None:
        self._cp.write(entries)

    def write_if_dir_exists(self, entries: Iterable[EpochEntry]) -> None:
        self._cp.write_if_dir_exists(entries)

    def read(self) -> list[EpochEntry]:
        return self._cp.read()


# ---- Uuid (org.apache.kafka.common.Uuid) ---------------------------------------------------------

ZERO_UUID = bytes(16)


def uuid_to_string(raw: bytes) -> str:
    """``Uuid.toString``: URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def uuid_from_string(s: str) -> bytes:
    """``Uuid.fromString``."""
    if len(s) > 24:
        raise ValueError(f"Input string with prefix `{s[:24]}` is too long to be decoded as a base64 UUID")
    raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    if len(raw) != 16:
        raise ValueError(f"Input string `{s}` decoded as {len(raw)} bytes, which is not equal to the expected "
                         f"16 bytes of a base64-encoded UUID")
    return raw


def random_uuid() -> bytes:
    """``Uuid.randomUuid``: never the zero or the metadata-topic id, never starting with '-'."""
    while True:
        raw = uuid.uuid4().bytes
        s = uuid_to_string(raw)
        if raw != ZERO_UUID and raw != (1).to_bytes(16, "big") and not s.startswith("-"):
            return raw


class PartitionMetadataFile:
    """``partition.metadata``: the topic id, written before any log data (``PartitionMetadataFile.java``)."""

    VERSION = 0
    _SEP = re.compile(r":\s+")

    def __init__(self, path: str, *, file_io: FileIO | None = None) -> None:
        self.path = os.path.abspath(path)
        self.file_io = file_io if file_io is not None else FileIO()
        self._dirty: bytes | None = None
        self._lock = threading.Lock()

    @staticmethod
    def encode(topic_id: bytes, version: int = 0) -> bytes:
        return f"version: {version}\ntopic_id: {uuid_to_string(topic_id)}".encode("utf-8")

    def record(self, topic_id: bytes) -> None:
        if self._dirty is not None and self._dirty != topic_id:
            raise InconsistentTopicIdError(
                f"Tried to record topic ID {uuid_to_string(topic_id)} to file but had already recorded "
                f"{uuid_to_string(self._dirty)}")
        self._dirty = topic_id

    def maybe_flush(self) -> None:
        if self._dirty is None:
            return
        with self._lock:
            if self._dirty is None:
                return
            try:
                self.file_io.write_file_atomic(self.path, self.encode(self._dirty), sync=True)
            except OSError as e:
                raise KafkaStorageError(f"Error while writing partition metadata file {self.path}: {e}") from e
            self._dirty = None

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def read(self) -> tuple[int, bytes]:
        """``(version, topic_id)``; raises :class:`CheckpointError` if malformed."""
        try:
            with open(self.path, "rb") as f:
                text = f.read().decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise CheckpointError(f"Error while reading partition metadata file {self.path}: {e}") from e
        lines = _java_lines(text)
        if not lines:
            raise CheckpointError(f"Malformed line in checkpoint file [{self.path}]: null")
        parts = self._SEP.split(lines[0])
        try:
            if len(parts) != 2:
                raise CheckpointError(f"Malformed line in checkpoint file [{self.path}]: {lines[0]}")
            version = _java_int(parts[1])
            if version < self.VERSION:
                raise CheckpointError(f"Unrecognized version of partition metadata file + ({self.path}): {version}")
            line = lines[1] if len(lines) > 1 else ""
            parts = self._SEP.split(line)
            if len(parts) != 2:
                raise CheckpointError(f"Malformed line in checkpoint file [{self.path}]: {line}")
            topic_id = uuid_from_string(parts[1])
        except ValueError as e:
            raise CheckpointError(f"Malformed line in checkpoint file [{self.path}]: {e}") from None
        if topic_id == ZERO_UUID:
            raise CheckpointError(f"Invalid topic ID in partition metadata file ({self.path})")
        return version, topic_id

    def delete(self) -> None:
        try:
            self.file_io.unlink(self.path)
        except FileNotFoundError:
            pass


class CleanShutdownFile:
    """``.kafka_cleanshutdown``: present iff every log in the directory was flushed and closed."""

    VERSION = 0

    def __init__(self, log_dir: str, *, file_io: FileIO | None = None) -> None:
        from .files import CLEAN_SHUTDOWN_FILE
        self.path = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
        self.file_io = file_io if file_io is not None else FileIO()

    @staticmethod
    def encode(broker_epoch: int, version: int = 0) -> bytes:
        # Jackson writes the fields in declaration order with no spaces.
        return json.dumps({"version": version, "brokerEpoch": broker_epoch}, separators=(",", ":")).encode()

    def write(self, broker_epoch: int = -1) -> None:
        io = self.file_io
        fd = io.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            io.pwrite_all(fd, self.encode(broker_epoch), 0)
            io.fsync(fd)
        finally:
            io.close(fd)
        io.fsync_dir(os.path.dirname(self.path))

    def read(self) -> int | None:
        """The broker epoch, or None if the file is missing or unreadable."""
        try:
            with open(self.path, "rb") as f:
                content = json.loads(f.read().decode("utf-8"))
            return int(content["brokerEpoch"])
        except (OSError, ValueError, KeyError, TypeError):  # missing, unreadable or not the checkpoint's shape
            return None

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def delete(self) -> None:
        try:
            self.file_io.unlink(self.path)
            self.file_io.fsync_dir(os.path.dirname(self.path))
        except FileNotFoundError:
            pass


# ---- java.util.Properties ------------------------------------------------------------------------

def _java_string_hash(s: str) -> int:
    """``String.hashCode`` over UTF-16 code units."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def java_properties_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a fresh ``java.util.Properties`` (a ``ConcurrentHashMap`` with 16 bins).

    ``Properties.store`` writes entries in this order, so computing it makes ``meta.properties``
    byte-identical to Kafka's (apart from the date comment).
    """
    keys = list(keys)
    n = 16
    # the table doubles once it holds more than 0.75 * n entries
    while len(keys) > n * 3 // 4:
        n *= 2

    def bin_of(k: str) -> int:
        h = _java_string_hash(k)
        return ((h ^ (h >> 16)) & 0x7FFFFFFF) & (n - 1)

    # within a bin the order is insertion order
    return [k for _, _, k in sorted((bin_of(k), i, k) for i, k in enumerate(keys))]


def _escape_prop(s: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(s):
        if ch == "\\":
            out.append("\\\\")
        elif ch == " ":
            out.append("\\ " if (i == 0 or is_key) else " ")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif ch in "=:#!":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _java_date(now: datetime.datetime) -> str:
    """``java.util.Date.toString``: ``EEE MMM dd HH:mm:ss zzz yyyy``."""
    return now.strftime("%a %b %d %H:%M:%S ") + (now.tzname() or "UTC") + now.strftime(" %Y")


def encode_properties(props: Mapping[str, str], now: datetime.datetime | None = None) -> bytes:
    """``Properties.store(writer, "")``."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    lines = ["#", "#" + _java_date(now)]
    for k in java_properties_order(props):
        lines.append(_escape_prop(k, True) + "=" + _escape_prop(str(props[k]), False))
    return ("\n".join(lines) + "\n").encode("utf-8")


def decode_properties(text: str) -> dict[str, str]:
    """A ``Properties.load`` subset: comments, ``=``/``:``/whitespace separators, escapes, continuations."""
    props: dict[str, str] = {}
    logical: list[str] = []
    buf = ""
    for raw in _LINES.split(text):
        line = raw.lstrip(" \t\f")
        if not buf and (not line or line[0] in "#!"):
            continue
        # a line ending in an odd number of backslashes continues
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            buf += line[:-1]
            continue
        logical.append(buf + line)
        buf = ""
    if buf:
        logical.append(buf)

    def unescape(s: str) -> str:
        out, i = [], 0
        while i < len(s):
            c = s[i]
            if c == "\\" and i + 1 < len(s):
                n = s[i + 1]
                if n == "u" and i + 6 <= len(s):
                    out.append(chr(int(s[i + 2:i + 6], 16)))
                    i += 6
                    continue
                out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(n, n))
                i += 2
                continue
            out.append(c)
            i += 1
        return "".join(out)

    for line in logical:
        i, key_end = 0, len(line)
        while i < len(line):
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                key_end = i
                break
            i += 1
        key = line[:key_end]
        rest = line[key_end:]
        rest = rest.lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[unescape(key)] = unescape(rest)
    return props


@dataclass(frozen=True)
class MetaProperties:
    """``meta.properties`` (``MetaProperties.java``): version 1 has ``node.id``; version 0 has ``broker.id``."""

    version: int = 1
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: bytes | None = None

    def to_properties(self) -> dict[str, str]:
        props: dict[str, str] = {"version": str(self.version)}
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        if self.version == 0:
            if self.node_id is not None:
                props["broker.id"] = str(self.node_id)
        else:
            props["node.id"] = str(self.node_id)
        if self.directory_id is not None:
            props["directory.id"] = uuid_to_string(self.directory_id)
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "MetaProperties":
        version = int(props.get("version", "0"))
        if version not in (0, 1):
            raise ValueError(f"Unknown meta.properties version number {version}")
        if version == 0:
            node_id = int(props["broker.id"]) if "broker.id" in props else None
        else:
            if "node.id" not in props:
                raise ValueError("Failed to find node.id")
            node_id = int(props["node.id"])
        dir_id = uuid_from_string(props["directory.id"]) if "directory.id" in props else None
        return cls(version, props.get("cluster.id"), node_id, dir_id)

    def write(self, path: str, now: datetime.datetime | None = None, *, file_io: FileIO | None = None) -> None:
        io = file_io if file_io is not None else FileIO()
        io.write_file_atomic(path, encode_properties(self.to_properties(), now), sync=True)

    @classmethod
    def read(cls, path: str) -> "MetaProperties":
        with open(path, "rb") as f:
            return cls.from_properties(decode_properties(f.read().decode("latin-1")))
