"""Test log directories: written through storage/'s Log, or built independently (kafka-python's record builder and
Kafka's index byte layouts); and plain-Python reference readers."""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
from dataclasses import dataclass, field

from protocol.compression import CODEC_NAMES
from protocol.record_codec import (ControlRecordType, Record, build_batch, build_end_txn_marker_batch, decode_batch,
                                   end_txn_marker_record)

T0 = 1_700_000_000_000          # a fixed clock for every generated directory
HOUR = 3_600_000
DAY = 24 * HOUR


@dataclass
class Produced:
    """What a test wrote into one partition, record by record, with the offsets storage assigned."""

    topic: str
    partition: int
    rows: list[dict] = field(default_factory=list)

    def add_batch(self, base_offset: int, records: list[Record], codec: int, **batch) -> None:
        for i, r in enumerate(records):
            self.rows.append({"topic": self.topic, "partition": self.partition, "offset": base_offset + i,
                              "timestamp_ms": r.timestamp, "key": r.key, "value": r.value,
                              "headers": [(k, v) for k, v in r.headers], "compression": CODEC_NAMES[codec],
                              **batch})


def storage_log(path: str, props: dict, now_ms: int = T0):
    from storage.config import LogConfig
    from storage.log import Log

    return Log.open(path, LogConfig.from_props(props), now_ms=now_ms)


def write_storage_partition(log_dir: str, topic: str, partition: int, batches: list[tuple[list[Record], dict]],
                            props: dict | None = None, now_ms: int = T0) -> Produced:
    """Append ``(records, build_batch kwargs)`` batches through storage's Log (as the broker's produce path will);
    returns what was written, offsets included."""
    lg = storage_log(os.path.join(log_dir, f"{topic}-{partition}"), props or {}, now_ms)
    produced = Produced(topic, partition)
    try:
        log_append_time = (props or {}).get("message.timestamp.type") == "LogAppendTime"
        for records, kw in batches:
            # the broker's clock when the batch arrived: never before its records were created (Kafka 4.x rejects
            # timestamps more than message.timestamp.after.max.ms = 1 hour ahead)
            clock = now_ms if log_append_time else max([now_ms] + [r.timestamp for r in records])
            info = lg.append_as_leader(bytearray(build_batch(records, **kw)), 0, now_ms=clock)
            produced.add_batch(info.first_offset, records, kw.get("compression", 0),
                               producer_id=kw.get("producer_id", -1),
                               is_transactional=kw.get("is_transactional", False))
    finally:
        lg.close()
    return produced


def plain_read_through_storage(partition_dir: str, props: dict | None = None, now_ms: int = T0) -> list[tuple]:
    """(offset, timestamp, key, value, headers, is_control) of every record, read with storage's Log on a *copy*
    (opening a Log may recover, snapshot or rebuild indexes: it must not touch the directory under test)."""
    import tempfile

    tmp = tempfile.mkdtemp(prefix="plainread-")
    try:
        copy = os.path.join(tmp, os.path.basename(partition_dir))
        shutil.copytree(partition_dir, copy)
        lg = storage_log(copy, props or {}, now_ms)
        out = []
        try:
            for batch in lg.iter_batches(0):
                h, records = decode_batch(batch)
                for r in records:
                    out.append((r.offset, r.timestamp, r.key, r.value, list(r.headers), h.is_control))
        finally:
            lg.close()
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def dir_digest(root: str) -> dict[str, str]:
    """Every file under ``root`` with its sha256 and mtime: proof that a reader wrote nothing."""
    out = {}
    for dp, dns, fns in os.walk(root):
        dns.sort()
        for fn in sorted(fns):
            p = os.path.join(dp, fn)
            st = os.stat(p)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f"{hashlib.sha256(f.read()).hexdigest()}:{st.st_mtime_ns}"
    return out


# -- independent writer: kafka-python batches + Kafka's index byte layouts -------------------------------------

KP_CODECS = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4}


def kafka_python_batch(records: list[tuple], codec: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                       base_sequence: int = -1) -> bytearray:
    """A v2 batch built by kafka-python's ``DefaultRecordBatchBuilder``; ``records`` = (ts, key, value, headers)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=KP_CODECS[codec], is_transactional=False,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, batch_size=1 << 30)
    for i, (ts, k, v, hs) in enumerate(records):
        assert b.append(i, timestamp=ts, key=k, value=v, headers=hs) is not None
    return b.build()


def write_independent_partition(log_dir: str, topic: str, partition: int, batches: list[bytearray], *,
                                segment_bytes: int, index_interval_bytes: int,
                                base_offsets: list[int | None] | None = None) -> list[tuple[int, int]]:
    """Lay batches out as Kafka's ``LogSegment.append`` does, writing ``.index`` (8-byte entries: int32 relative
    offset, int32 position) and ``.timeindex`` (12-byte entries: int64 timestamp, int32 relative offset) by hand.
    ``base_offsets``: a batch's base offset where not None (a cleaned log has gaps), else the next offset.
    Returns (base offset, last offset) per batch."""
    d = os.path.join(log_dir, f"{topic}-{partition}")
    os.makedirs(d, exist_ok=True)
    segments: list[dict] = []

    def new_segment(base: int) -> dict:
        s = {"base": base, "log": bytearray(), "index": bytearray(), "time": bytearray(), "since": 0,
             "max_ts": -1, "max_ts_off": base, "last_time_entry_ts": -1}
        segments.append(s)
        return s

    next_offset = 0
    seg = new_segment(0)
    out = []
    for n, raw in enumerate(batches):
        if base_offsets is not None and base_offsets[n] is not None:
            assert base_offsets[n] >= next_offset
            next_offset = base_offsets[n]
        b = bytearray(raw)
        last_delta, max_ts = struct.unpack_from(">i", b, 23)[0], struct.unpack_from(">q", b, 35)[0]
        if seg["log"] and len(seg["log"]) + len(b) > segment_bytes:
            seg = new_segment(next_offset)
        struct.pack_into(">q", b, 0, next_offset)
        last = next_offset + last_delta
        pos = len(seg["log"])
        seg["log"] += b
        if max_ts > seg["max_ts"]:
            seg["max_ts"], seg["max_ts_off"] = max_ts, last
        if seg["since"] > index_interval_bytes:
            seg["index"] += struct.pack(">ii", last - seg["base"], pos)
            if seg["max_ts"] > seg["last_time_entry_ts"]:
                seg["time"] += struct.pack(">qi", seg["max_ts"], seg["max_ts_off"] - seg["base"])
                seg["last_time_entry_ts"] = seg["max_ts"]
            seg["since"] = 0
        seg["since"] += len(b)
        out.append((next_offset, last))
        next_offset = last + 1
    for s in segments:
        if s["max_ts"] > s["last_time_entry_ts"]:
            s["time"] += struct.pack(">qi", s["max_ts"], s["max_ts_off"] - s["base"])
        name = f"{s['base']:020d}"
        for suffix, data in ((".log", s["log"]), (".index", s["index"]), (".timeindex", s["time"])):
            with open(os.path.join(d, name + suffix), "wb") as f:
                f.write(data)
    return out


# -- transactions: a partition from a list of data batches and markers, its .txnindex files ------------------------

TXN_ENTRY = struct.Struct(">hqqqq")     # Kafka's TransactionIndex entry: version, pid, first, last, LSO (34 bytes)


@dataclass
class TxnBatch:
    """One batch of a transactional test log: ``kind`` "data" (``records``: (key, value) pairs), "commit" or
    "abort" (a marker of ``pid``). ``pid`` -1 with ``txn`` False is a plain batch. ``gap``: offsets skipped
    before it (a cleaned log); ``deltas``: the records' offset deltas (a compacted batch keeps its offset range)."""

    kind: str
    pid: int = -1
    txn: bool = False
    records: list = field(default_factory=list)
    gap: int = 0
    deltas: list | None = None
    last_delta: int | None = None
    horizon: int | None = None          # a delete horizon (set by a cleaning pass)

    def encode(self) -> bytes:
        if self.kind in ("commit", "abort"):
            if self.horizon is None:
                return build_end_txn_marker_batch(commit=self.kind == "commit", producer_id=self.pid,
                                                  producer_epoch=0, coordinator_epoch=0, timestamp=T0)
            rec = end_txn_marker_record(ControlRecordType.COMMIT if self.kind == "commit" else ControlRecordType.ABORT,
                                        0, T0)
            return build_batch([rec], producer_id=self.pid, producer_epoch=0, is_transactional=True,
                               is_control=True, delete_horizon_ms=self.horizon)
        recs = [Record(k, v, timestamp=T0 + i, offset_delta=None if self.deltas is None else self.deltas[i])
                for i, (k, v) in enumerate(self.records)]
        kw = {"producer_id": self.pid, "producer_epoch": 0, "base_sequence": 0} if self.pid >= 0 else {}
        return build_batch(recs, is_transactional=self.txn, last_offset_delta=self.last_delta,
                           delete_horizon_ms=self.horizon, **kw)


def write_txn_partition(log_dir: str, topic: str, partition: int, batches: list[TxnBatch], *,
                        segment_bytes: int = 400) -> list[tuple[int, int]]:
    """The batches laid out with :func:`write_independent_partition` (with gaps); (base, last) offset of each."""
    offsets: list[int | None] = []
    nxt = 0
    for b in batches:
        offsets.append(nxt + b.gap if b.gap else None)
        last_delta = b.last_delta if b.last_delta is not None else (
            max(b.deltas) if b.deltas else max(len(b.records) - 1, 0))
        nxt += b.gap + last_delta + 1
    return write_independent_partition(log_dir, topic, partition, [bytearray(b.encode()) for b in batches],
                                       segment_bytes=segment_bytes, index_interval_bytes=100, base_offsets=offsets)


def write_txn_indexes(partition_dir: str, entries: list[tuple[int, int, int, int]], *, every_segment: bool = True
                      ) -> None:
    """Kafka's ``.txnindex`` files: each (pid, first, last, LSO) entry in the segment holding its marker (offset
    ``last``), 34 bytes big-endian, version 0; ``every_segment``: an empty file where a segment has none."""
    bases = sorted(int(f[:20]) for f in os.listdir(partition_dir) if f.endswith(".log"))
    files: dict[int, bytearray] = {b: bytearray() for b in bases} if every_segment else {}
    for pid, first, last, lso in sorted(entries, key=lambda e: e[2]):
        base = max(b for b in bases if b <= last)
        files.setdefault(base, bytearray()).extend(TXN_ENTRY.pack(0, pid, first, last, lso))
    for base, data in files.items():
        with open(os.path.join(partition_dir, f"{base:020d}.txnindex"), "wb") as f:
            f.write(data)


def txn_model(batches: list[TxnBatch], offsets: list[tuple[int, int]]):
    """What a read_committed consumer reads, from the batches as written: ``(committed, entries, lso)``:
    the committed records ``(offset, key, value)`` in order, the aborted transactions as Kafka's index holds them
    ``(pid, first, last, LSO when the abort was written)``, and the last stable offset (None: no open one).
    Model: each producer's transactional data batches since its previous marker form a transaction, which its next
    marker commits or aborts; one still open at the end bounds what is read."""
    pending: dict[int, list[int]] = {}          # pid -> indexes of the batches of its open transaction
    fate: dict[int, str] = {}
    entries = []
    for i, b in enumerate(batches):
        if b.kind == "data":
            if b.txn:
                pending.setdefault(b.pid, []).append(i)
            continue
        mine = pending.pop(b.pid, [])
        for j in mine:
            fate[j] = b.kind
        if b.kind == "abort" and mine:
            others = [offsets[js[0]][0] for js in pending.values()]
            entries.append((b.pid, offsets[mine[0]][0], offsets[i][0], min(others) if others else offsets[i][0] + 1))
    opens = [offsets[js[0]][0] for js in pending.values()]
    lso = min(opens) if opens else None
    committed = []
    for i, b in enumerate(batches):
        if b.kind != "data" or (b.txn and fate.get(i) != "commit"):
            continue
        base = offsets[i][0]
        for n, (k, v) in enumerate(b.records):
            off = base + (n if b.deltas is None else b.deltas[n])
            if lso is None or off < lso:
                committed.append((off, k, v))
    return committed, entries, lso
