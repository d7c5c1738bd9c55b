"""Fixtures and helpers for the client matrix: real clients against a real broker on 127.0.0.1.

* ``broker``: one embedded broker for the whole session (independent tests use their own topics);
  ``num.partitions=3`` so auto-created topics (kcat) have more than one partition to choose from.
* ``broker_process``: ``odradek serve`` subprocesses (tests/harness.py), for SIGTERM/SIGKILL and restarts.
* ``stored_batches``: the batches as they sit in the partition's segment files, decoded with the
  project's own codec: what the codec tests assert on (a client may fall back to no compression).
* raw requests real clients never send: tests/kafka_wire.py (KafkaWire).
* ``expected_records``: the keyed/unkeyed records-with-headers every client produces.

Every wait is bounded; all traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker.testing.embedded import EmbeddedBroker
from tests.harness import BrokerProcess
from protocol.record_codec import decode_batch
from protocol.records import BatchHeader, iter_batch_positions

PARTITIONS = 3

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
ALL_CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


# ---- brokers ----------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("matrix") / "data"
    with EmbeddedBroker(data_dir=data, overrides={"num.partitions": PARTITIONS}) as b:
        b.data_dir = data
        yield b


_topic_seq = itertools.count()


@pytest.fixture
def topic_name(request):
    """A fresh, legal topic name per call: ``topic_name("cfk-gzip")``."""
    def make(tag: str) -> str:
        base = re.sub(r"[^A-Za-z0-9._-]", "-", f"{request.node.originalname}-{tag}")[:150]
        return f"{base}-{next(_topic_seq)}-{uuid.uuid4().hex[:6]}"
    return make


@pytest.fixture
def broker_process(tmp_path):
    procs: list[BrokerProcess] = []

    def make(data_dir: Path | None = None, overrides: dict | None = None) -> BrokerProcess:
        d = data_dir or tmp_path / f"data{len(procs)}"
        d.mkdir(parents=True, exist_ok=True)
        p = BrokerProcess(d, {"num.partitions": PARTITIONS, **(overrides or {})})
        procs.append(p)
        return p

    yield make
    for p in procs:
        p.close()


# ---- what the broker stored ---------------------------------------------------------------------------

@dataclass
class StoredRecord:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list


@dataclass
class StoredPartition:
    batches: list[BatchHeader] = field(default_factory=list)
    records: list[StoredRecord] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(h.size for h in self.batches)


def partition_dir(data_dir: Path, topic: str, partition: int) -> Path:
    return Path(data_dir) / f"{topic}-{partition}"


def stored_batches(data_dir: Path, topic: str, partition: int) -> StoredPartition:
    """Decode every batch in the partition's segment files (CRC verified), in offset order."""
    out = StoredPartition()
    d = partition_dir(data_dir, topic, partition)
    assert d.is_dir(), f"no log directory {d}"
    for seg in sorted(d.glob("*.log")):
        data = seg.read_bytes()
        for pos, _ in iter_batch_positions(data):
            h, recs = decode_batch(data, pos)
            out.batches.append(h)
            for r in recs:
                out.records.append(StoredRecord(partition, r.offset, r.timestamp, r.key, r.value, list(r.headers)))
    return out


def stored_topic(data_dir: Path, topic: str, partitions: int = PARTITIONS) -> dict[int, StoredPartition]:
    return {p: stored_batches(data_dir, topic, p) for p in range(partitions)}


def assert_stored_codec(stored: dict[int, StoredPartition], codec: str) -> None:
    """Every data batch in the topic is compressed with ``codec`` (not silently sent uncompressed)."""
    want = CODEC_IDS[codec]
    seen = [(p, h.base_offset, h.compression) for p, sp in stored.items() for h in sp.batches if h.records_count]
    assert seen, "nothing stored"
    wrong = [s for s in seen if s[2] != want]
    assert not wrong, f"batches stored with the wrong codec (partition, base offset, codec id): {wrong}; want {want}"


# ---- the records every client produces ----------------------------------------------------------------

@dataclass
class Rec:
    i: int
    key: bytes | None
    value: bytes
    headers: list  # [(str, bytes)]
    timestamp: int


def expected_records(n: int = 60, tag: str = "", base_ts: int | None = None, binary: bool = True) -> list[Rec]:
    """Keyed (two of three, keys repeating) and unkeyed records, each with headers and a unique value.

    Values are unique (they carry the index) and compressible (so librdkafka keeps the compression);
    ``binary`` adds bytes that are not UTF-8. Timestamps step by 10 ms from ``base_ts`` (a minute ago).
    """
    if base_ts is None:
        base_ts = (int(time.time() * 1000) - 60_000) // 1000 * 1000
    out = []
    for i in range(n):
        key = None if i % 3 == 0 else f"key-{i % 7}".encode()
        body = (f"value {i:05d} {tag} ".encode() + b"odradek-matrix " * (4 + i % 5))
        if binary:
            body += bytes([0, 1, 2, 0xFF, 0xFE, 0x80, i % 256])
        headers = [("idx", str(i).encode()), ("kind", b"keyed" if key else b"unkeyed")]
        if binary:
            headers.append(("bin", bytes([0, 0xFF, i % 256])))
        headers.append(("empty", b""))
        out.append(Rec(i, key, body, headers, base_ts + 10 * i))
    return out


def assert_matches_stored(stored: dict[int, StoredPartition], placed: dict[int, tuple[int, int]],
                          recs: list[Rec], check_timestamp: bool = True) -> None:
    """``placed[i] = (partition, offset)`` as the client reported it: the record is there, byte-exact, and each
    partition holds exactly the records sent to it, in send order, at offsets 0..n-1."""
    by_pos = {(r.partition, r.offset): r for sp in stored.values() for r in sp.records}
    for rec in recs:
        p, off = placed[rec.i]
        s = by_pos.get((p, off))
        assert s is not None, f"record {rec.i} reported at {p}/{off} is not stored"
        assert (s.key, s.value, s.headers) == (rec.key, rec.value, rec.headers), f"record {rec.i} at {p}/{off}"
        if check_timestamp:
            assert s.timestamp == rec.timestamp, f"record {rec.i} timestamp"
    for p, sp in stored.items():
        sent = [r.i for r in recs if placed[r.i][0] == p]
        offsets = sorted(placed[i][1] for i in sent)
        assert [placed[i][1] for i in sent] == offsets, f"partition {p}: offsets not in send order"
        assert [r.offset for r in sp.records] == list(range(len(sent))), f"partition {p}: offsets not contiguous"


def assert_keys_consistent(placed: dict[int, tuple[int, int]], recs: list[Rec], expected_partition=None) -> None:
    """Records with the same key went to one partition; with ``expected_partition(key)`` (the client's
    partitioner, recomputed), exactly that one. Unkeyed records may go anywhere."""
    by_key: dict[bytes, set[int]] = {}
    for r in recs:
        if r.key is not None:
            by_key.setdefault(r.key, set()).add(placed[r.i][0])
            if expected_partition is not None:
                assert placed[r.i][0] == expected_partition(r.key), f"key {r.key!r}"
    assert all(len(ps) == 1 for ps in by_key.values()), by_key


def assert_consumed(consumed: dict[int, list[tuple]], stored: dict[int, StoredPartition],
                    start: dict[int, int] | None = None) -> None:
    """``consumed[p]`` = [(offset, key, value, headers, timestamp)] equals what is stored from ``start[p]`` on."""
    for p, sp in stored.items():
        lo = (start or {}).get(p, 0)
        want = [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in sp.records if r.offset >= lo]
        assert consumed.get(p, []) == want, f"partition {p} consumed from {lo}"


def murmur2_partition(key: bytes, partitions: int = PARTITIONS) -> int:
    """The Java client's default partitioner (kafka-python, aiokafka and KafkaJS use the same)."""
    from kafka.partitioner.default import murmur2
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def crc32_partition(key: bytes, partitions: int = PARTITIONS) -> int:
    """librdkafka's default ``consistent_random`` partitioner for keyed records."""
    import zlib
    return zlib.crc32(key) % partitions


def timestamp_targets(stored: dict[int, StoredPartition]) -> dict[int, tuple[int, int]]:
    """Per partition: a target timestamp half-way between two records and the offset it must find."""
    out = {}
    for p, sp in stored.items():
        recs = sp.records
        if len(recs) >= 3:
            j = len(recs) // 2
            prev, cur = recs[j - 1], recs[j]
            assert prev.timestamp < cur.timestamp
            out[p] = ((prev.timestamp + cur.timestamp + 1) // 2, cur.offset)
    return out


# ---- a bare Kafka connection ----------------------------------------------------------------------------

# ---- external tools ----------------------------------------------------------------------------------

JS_DIR = Path(__file__).resolve().parent / "js"


@pytest.fixture(scope="session")
def kcat_bin() -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat is not installed (make test installs it: `make kcat`)")
    return path


@pytest.fixture(scope="session")
def kafkajs_dir() -> Path:
    """tests/integration/js with its node_modules: installed from the committed lockfile if missing."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are needed for the KafkaJS tests")
    import fcntl

    # pytest-xdist workers each ask: one installs, the others wait for it (a lock file beside the lockfile)
    with open(JS_DIR / ".npm-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (JS_DIR / "node_modules" / "kafkajs").is_dir():
            out = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, capture_output=True,
                                 text=True, timeout=300)
            assert out.returncode == 0, f"npm ci failed:\n{out.stdout}\n{out.stderr}"
    return JS_DIR

