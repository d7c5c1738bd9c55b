"""``isolationLevel=read_committed`` in the kafka-log source: the rows are a read_committed consumer's (no aborted
transaction's records, no control records, nothing at or above the last stable offset), planned from ``.txnindex``
files or from batch headers, on plain and cleaned logs. The planning and skipping are checked without Spark against
a model over random transactional logs (hypothesis); Spark runs a few end-to-end cases."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from spark_jobs.planning import PartitionDir, PlanStats, list_segments, plan_slices
from spark_jobs.scan import ScanStats, read_slice
from spark_jobs.transactions import partition_transactions

from .builders import TXN_ENTRY, TxnBatch, txn_model, write_txn_indexes, write_txn_partition

COLS = ("offset", "key", "value")


def _read(d: str, read_committed: bool = True, **kw) -> tuple[list[tuple], PlanStats, ScanStats]:
    """Every row of the directory as the data source's tasks give them (planning, then each slice), no Spark."""
    plan, scan = PlanStats(), ScanStats()
    rows = []
    for sl in plan_slices(d, stats=plan, read_committed=read_committed, **kw):
        for rb in read_slice(sl, stats=scan, columns=COLS, read_committed=read_committed):
            rows += list(zip(*(rb.column(c).to_pylist() for c in COLS)))
    return rows, plan, scan


def _data(pid, n, tag, txn=True):
    return TxnBatch("data", pid, txn, [(f"{tag}-k{i}".encode(), f"{tag}-v{i}".encode()) for i in range(n)])


def _write(d: str, batches: list[TxnBatch], index: str | None = None, segment_bytes: int = 400):
    """The partition t-0; ``index``: None, "all" (a .txnindex per segment, Kafka's entries) or "aborts" (only
    segments holding an abort, as Kafka creates them)."""
    offsets = write_txn_partition(d, "t", 0, batches, segment_bytes=segment_bytes)
    committed, entries, lso = txn_model(batches, offsets)
    if index:
        write_txn_indexes(os.path.join(d, "t-0"), entries, every_segment=index == "all")
    return committed, entries, lso, offsets


def _segments(d):
    return list_segments(PartitionDir("t", 0, os.path.join(d, "t-0")))


# -- the cases named in the issue, without Spark --------------------------------------------------------------------

ACROSS = [_data(-1, 2, "plain", txn=False), _data(7, 3, "a1"), _data(7, 3, "a2"), _data(-1, 1, "mid", txn=False),
          _data(7, 3, "a3"), _data(7, 3, "a4"), TxnBatch("abort", 7), _data(8, 2, "c1"), TxnBatch("commit", 8),
          _data(-1, 2, "tail", txn=False)]


@pytest.mark.parametrize("index", [None, "all"])
def test_aborted_transaction_across_segments(tmp_path, index):
    d = str(tmp_path)
    committed, entries, lso, offsets = _write(d, ACROSS, index, segment_bytes=250)
    assert len(_segments(d)) >= 3 and lso is None and len(entries) == 1
    assert len({os.path.basename(s.path) for s in _segments(d)}) == len(_segments(d))
    rows, plan, scan = _read(d)
    assert rows == [(o, k, v) for o, k, v in committed]
    assert [v for _, _, v in rows] == [b"plain-v0", b"plain-v1", b"mid-v0", b"c1-v0", b"c1-v1", b"tail-v0",
                                       b"tail-v1"]
    assert scan.batches_skipped_txn == 4 + 2          # four aborted batches, two markers
    assert (plan.txn_scans, plan.txn_tail_scans) == ((1, 0) if index is None else (0, 1))
    assert plan.txn_index_files_read == (0 if index is None else len(_segments(d)))


def test_read_uncommitted_unchanged(tmp_path):
    d = str(tmp_path)
    _write(d, ACROSS, "all", segment_bytes=250)
    rows, _, scan = _read(d, read_committed=False)
    assert len(rows) == 2 + 12 + 1 + 1 + 2 + 1 + 2 and scan.batches_skipped_txn == 0   # markers are rows too
    assert [o for o, _, _ in rows] == sorted(o for o, _, _ in rows)


INTERLEAVED = [_data(1, 2, "p1a"), _data(2, 2, "p2a"), _data(-1, 1, "n", txn=False), _data(1, 1, "p1b"),
               _data(3, 1, "p3a"), TxnBatch("commit", 2), _data(2, 1, "p2b"), TxnBatch("abort", 1),
               _data(3, 2, "p3b"), TxnBatch("abort", 3), TxnBatch("abort", 2), _data(1, 1, "p1c"),
               TxnBatch("commit", 1)]


@pytest.mark.parametrize("index", [None, "all"])
def test_interleaved_producers(tmp_path, index):
    d = str(tmp_path)
    committed, entries, lso, _ = _write(d, INTERLEAVED, index)
    assert lso is None and len(entries) == 3
    rows, plan, _ = _read(d)
    assert rows == committed
    assert {v.split(b"-")[0] for _, _, v in rows} == {b"p2a", b"n", b"p1c"}
    assert plan.txn_aborted_ranges == 3


@pytest.mark.parametrize("index", [None, "all"])
def test_open_transaction_at_the_end_bounds_the_read(tmp_path, index):
    d = str(tmp_path)
    batches = [_data(-1, 2, "a", txn=False), _data(5, 2, "t1"), TxnBatch("commit", 5), _data(6, 2, "open"),
               _data(-1, 2, "after", txn=False), _data(5, 1, "t2"), TxnBatch("abort", 5),
               _data(-1, 30, "big", txn=False), _data(-1, 30, "big2", txn=False)]
    committed, _, lso, offsets = _write(d, batches, index, segment_bytes=300)
    assert lso == offsets[3][0]
    rows, plan, _ = _read(d)
    assert rows == committed and [v for _, _, v in rows] == [b"a-v0", b"a-v1", b"t1-v0", b"t1-v1"]
    assert plan.segments_pruned_by_lso >= 1           # segments wholly above the LSO are not read
    # an offset bound below the LSO still applies
    from spark_jobs.planning import ScanBounds

    plan, scan = PlanStats(), ScanStats()
    rows = [r for sl in plan_slices(d, ScanBounds(offset_lo=1), stats=plan, read_committed=True)
            for rb in read_slice(sl, ScanBounds(offset_lo=1), stats=scan, columns=COLS, read_committed=True)
            for r in zip(*(rb.column(c).to_pylist() for c in COLS))]
    assert rows == committed[1:]


@pytest.mark.parametrize("index", [None, "all", "aborts"])
def test_cleaned_log(tmp_path, index):
    """As Kafka's cleaner leaves a log: aborted data gone (an abort marker without data), a commit marker whose data
    was compacted away, a compacted batch keeping its offset range, an aborted batch kept empty (last of an active
    producer), and aborted data not yet cleaned behind its marker."""
    d = str(tmp_path)
    kept = TxnBatch("data", 4, True, [(b"k1", b"v1"), (b"k3", b"v3")], deltas=[1, 3], last_delta=4)
    batches = [TxnBatch("abort", 4, gap=6), kept, TxnBatch("commit", 4), TxnBatch("commit", 5, gap=3),
               TxnBatch("data", 4, True, [], last_delta=2), _data(9, 2, "ab"), TxnBatch("abort", 4),
               TxnBatch("abort", 9), _data(-1, 2, "end", txn=False)]
    committed, entries, lso, offsets = _write(d, batches, index)
    assert lso is None and offsets[0][0] == 6
    rows, plan, _ = _read(d)
    assert rows == committed
    assert [(o, k) for o, k, _ in rows[:2]] == [(offsets[1][0] + 1, b"k1"), (offsets[1][0] + 3, b"k3")]
    assert {v for _, _, v in rows} == {b"v1", b"v3", b"end-v0", b"end-v1"}
    # "aborts": Kafka creates a .txnindex only where an abort was written; the others may predate it: scanned
    assert plan.txn_scans == (0 if index == "all" else 1)


def test_implausible_txn_index_falls_back_to_the_scan(tmp_path):
    d = str(tmp_path)
    committed, entries, _, _ = _write(d, INTERLEAVED, "all")
    seg = _segments(d)[-1]
    with open(os.path.join(seg.dir, f"{seg.base_offset:020d}.txnindex"), "ab") as f:
        f.write(TXN_ENTRY.pack(0, 1, 0, 0, 0)[:20])            # torn
    rows, plan, _ = _read(d)
    assert rows == committed and plan.txn_scans == 1


# -- a model over random logs (no Spark) ----------------------------------------------------------------------------

PIDS = [-1, 1, 2, 3]
event = st.one_of(
    st.tuples(st.just("data"), st.sampled_from(PIDS), st.integers(1, 3), st.booleans()),
    st.tuples(st.sampled_from(["commit", "abort"]), st.sampled_from(PIDS[1:]), st.just(0), st.just(True)),
)


def _batches(events) -> list[TxnBatch]:
    out = []
    for i, (kind, pid, n, txn) in enumerate(events):
        if kind == "data":
            out.append(_data(pid, n, f"e{i}", txn=txn and pid >= 0))
        else:
            out.append(TxnBatch(kind, pid))
    return out


def _clean(batches: list[TxnBatch], offsets, lso, drop: list[bool]) -> list[TxnBatch]:
    """Remove the chosen data batches below the LSO (their offsets become a gap), and chosen markers whose
    transaction has no data left (as the cleaner may): what stays keeps its offsets and must read the same."""
    out: list[TxnBatch] = []
    has_data: dict[int, bool] = {}              # pid -> its current transaction still has a batch
    prev_end = 0
    for i, b in enumerate(batches):
        base, last = offsets[i]
        below = lso is None or last < lso
        if b.kind == "data":
            if drop[i] and below:
                continue
            if b.txn:
                has_data[b.pid] = True
        elif not has_data.pop(b.pid, False) and drop[i] and below:
            continue
        out.append(TxnBatch(b.kind, b.pid, b.txn, b.records, gap=base - prev_end, deltas=b.deltas,
                            last_delta=b.last_delta))
        prev_end = last + 1
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(event, min_size=1, max_size=14), st.sampled_from([None, "all", "aborts"]), st.data())
def test_read_committed_equals_the_model(events, index, data):
    batches = _batches(events)
    with tempfile.TemporaryDirectory() as d:
        committed, entries, lso, offsets = _write(d, batches, index, segment_bytes=300)
        rows, plan, _ = _read(d)
        assert rows == committed
        st_ = partition_transactions(_segments(d))
        assert st_.last_stable_offset == lso
        assert sorted(st_.aborted) == sorted((p, f, la) for p, f, la, _ in entries)
        # read_uncommitted: every record
        everything, _, _ = _read(d, read_committed=False)
        assert len(everything) == sum(len(b.records) if b.kind == "data" else 1 for b in batches)
    # the same log after a cleaning: markers may outlive their data, data may be gone
    drop = data.draw(st.lists(st.booleans(), min_size=len(batches), max_size=len(batches)))
    cleaned = _clean(batches, offsets, lso, drop)
    if not cleaned:
        return
    with tempfile.TemporaryDirectory() as d:
        committed2, _, lso2, offsets2 = _write(d, cleaned, index, segment_bytes=300)
        rows, _, _ = _read(d)
        assert rows == committed2
        kept = {o for b, (base, _) in zip(cleaned, offsets2) if b.kind == "data"
                for o in range(base, base + len(b.records))}
        assert lso2 == lso and committed2 == [r for r in committed if r[0] in kept]


# -- Spark end to end -----------------------------------------------------------------------------------------------

def _spark_rows(spark, d, **options):
    df = spark.read.format("kafka-log").options(**options).load(d)
    return [(r.offset, bytes(r.key), bytes(r.value), r.is_control) for r in df.orderBy("offset").collect()]


@pytest.mark.spark
@pytest.mark.parametrize("index", [None, "all"])
def test_spark_read_committed(spark, tmp_path, index):
    d = str(tmp_path / "a")
    committed, _, _, _ = _write(d, ACROSS, index, segment_bytes=250)
    got = _spark_rows(spark, d, isolationLevel="read_committed")
    assert got == [(o, k, v, False) for o, k, v in committed]
    everything = _spark_rows(spark, d)
    assert len(everything) == 21 and sum(r[3] for r in everything) == 2      # read_uncommitted: markers are rows


@pytest.mark.spark
def test_spark_open_transaction_and_cleaned_log(spark, tmp_path):
    d = str(tmp_path / "b")
    batches = [_data(-1, 2, "a", txn=False), _data(6, 2, "open"), _data(-1, 2, "after", txn=False),
               TxnBatch("abort", 3, gap=4), _data(-1, 20, "big", txn=False)]
    committed, _, lso, offsets = _write(d, batches, "all", segment_bytes=200)
    assert lso == offsets[1][0]
    assert _spark_rows(spark, d, isolationLevel="READ_COMMITTED") == [(o, k, v, False) for o, k, v in committed]
    assert [r[0] for r in _spark_rows(spark, d, isolationLevel="read_committed", startingOffset="1")] == [1]
    df = spark.read.format("kafka-log").option("isolationLevel", "read_committed").option("rowPerBatch", "true") \
        .option("columns", "topic,base_offset,is_control").load(d)
    assert [r.base_offset for r in df.collect()] == [0]
    with pytest.raises(Exception, match="isolationLevel"):
        spark.read.format("kafka-log").option("isolationLevel", "committed").load(d).collect()


# -- the compaction report on a transactional log: what Kafka's cleaner removes ------------------------------------

def _kafka_cleaner_pass(d: str, topic: str, aborted: list[tuple], first_dirty: int, first_uncleanable: int,
                        now: int, delete_retention_ms: int) -> tuple[int, int]:
    """(records, bytes) one pass of Kafka's ``Cleaner`` removes, record by record, with its
    ``CleanedTransactionMetadata`` transcribed (no active producers: every producer has expired)."""
    from protocol.record_codec import ControlRecordType, build_batch, decode_batch, parse_control_record_type
    from protocol.records import iter_batch_positions

    batches = []
    pdir = os.path.join(d, f"{topic}-0")
    for name in sorted(f for f in os.listdir(pdir) if f.endswith(".log")):
        data = open(os.path.join(pdir, name), "rb").read()
        for pos, h in iter_batch_positions(data):
            batches.append((h, decode_batch(data, pos)[1], h.batch_length + 12))

    class Meta:                                  # LogCleaner.scala's CleanedTransactionMetadata
        def __init__(self):
            self.committed, self.aborted_ongoing = set(), {}
            self.pending = sorted(aborted, key=lambda a: a[1])

        def _consume(self, offset):
            while self.pending and self.pending[0][1] <= offset:
                a = self.pending.pop(0)
                self.aborted_ongoing.setdefault(a[0], {"seen": False})

        def control(self, h, records):
            self._consume(h.base_offset + h.last_offset_delta)
            if not records:
                return True
            t = parse_control_record_type(records[0].key)
            if t == ControlRecordType.ABORT:
                m = self.aborted_ongoing.pop(h.producer_id, None)
                return not (m is not None and m["seen"])
            if t == ControlRecordType.COMMIT:
                if h.producer_id in self.committed:
                    self.committed.discard(h.producer_id)
                    return False
                return True
            return False

        def data(self, h):
            self._consume(h.base_offset + h.last_offset_delta)
            if h.is_transactional:
                m = self.aborted_ongoing.get(h.producer_id)
                if m is not None:
                    m["seen"] = True
                    return True
                self.committed.add(h.producer_id)
            return False

    meta, offset_map = Meta(), {}
    for h, records, _ in batches:                # buildOffsetMap over [first dirty, first uncleanable)
        if h.base_offset >= first_uncleanable:
            break
        if h.is_control:
            meta.control(h, records)
        elif not meta.data(h):
            for r in records:
                if r.key is not None and r.offset >= first_dirty:
                    offset_map[r.key] = r.offset
    meta = Meta()
    removed_records = removed_bytes = 0
    for h, records, size in batches:
        last = h.base_offset + h.last_offset_delta
        if last >= first_uncleanable:
            break
        can_discard = meta.control(h, records) if h.is_control else meta.data(h)
        horizon = h.delete_horizon_ms
        discard_records = (can_discard and horizon is not None and horizon <= now) if h.is_control else can_discard
        if last + 1 == first_uncleanable:
            retention = "RETAIN_EMPTY"
        else:
            retention = "DELETE" if discard_records else "DELETE_EMPTY"
        if retention == "DELETE":
            kept = []
        elif discard_records:
            kept = []
        elif h.is_control:
            kept = records
        else:
            kept = [r for r in records if r.key is not None and r.offset >= offset_map.get(r.key, -1)
                    and (r.value is not None or horizon is None or now < horizon)]
        if kept:
            needs_horizon = (any(r.value is None for r in kept) or (can_discard and h.is_control)) and horizon is None
            if len(kept) == len(records) and not needs_horizon:
                after = size
            else:
                after = len(build_batch(kept, base_offset=h.base_offset, producer_id=h.producer_id,
                                        producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                                        is_transactional=h.is_transactional, is_control=h.is_control,
                                        last_offset_delta=h.last_offset_delta,
                                        delete_horizon_ms=now + delete_retention_ms if needs_horizon else horizon))
        else:
            after = 61 if retention == "RETAIN_EMPTY" else 0
        removed_records += len(records) - len(kept)
        removed_bytes += size - after
    return removed_records, removed_bytes


def _storage_cleaner_pass(d: str, topic: str, copy: str, now: int, props: dict) -> tuple[int, int]:
    """(records, bytes) storage/'s ``LogCleaner`` removes in one pass on a copy of ``d`` at ``now``, markers' records
    counted; the producers idle for longer than ``producer.id.expiration.ms`` expired first, as the broker's periodic
    check would have (the report's model of active producers)."""
    import shutil

    from protocol.record_codec import decode_batch
    from storage.cleaner import LogCleaner
    from storage.config import LogConfig, LogManagerConfig
    from storage.log import Log

    shutil.copytree(d, copy)
    lg = Log.open(os.path.join(copy, f"{topic}-0"), LogConfig.from_props(props), now_ms=now)
    try:
        lg.update_high_watermark(lg.log_end_offset)     # a single-node broker's high watermark
        lg.remove_expired_producers(now)
        count = lambda: sum(len(decode_batch(b)[1]) for b in lg.iter_batches(0))   # noqa: E731
        records, size = count(), lg.size
        cleaner = LogCleaner(LogManagerConfig(log_dirs=(copy,)), lambda: {(topic, 0): lg}, [copy])
        assert cleaner.clean_once(now)
        return records - count(), size - lg.size
    finally:
        lg.close()


@pytest.mark.spark
@pytest.mark.parametrize("index", [None, "all"])
def test_compaction_report_counts_what_kafkas_cleaner_removes_of_transactions(spark, tmp_path, index):
    """The report's figures for one pass over a transactional log equal a record-by-record transcription of Kafka's
    cleaner, and what storage/'s cleaner removes from a copy of the same directory."""
    from spark_jobs import compaction_report

    now = 1_700_000_000_000 + 10 * 86_400_000
    d = str(tmp_path / "log")
    kv = lambda *pairs: [(k.encode(), None if v is None else v.encode()) for k, v in pairs]   # noqa: E731
    batches = [
        TxnBatch("data", 1, True, kv(("a", "1"), ("b", "1"))), TxnBatch("commit", 1),
        TxnBatch("data", 2, True, kv(("a", "aborted"), ("c", "x"))),            # aborted: not in the offset map
        TxnBatch("data", -1, False, kv(("b", "2"), ("d", None))),
        TxnBatch("data", 2, True, kv(("b", "aborted"))), TxnBatch("abort", 2),  # kept: its data is still there
        TxnBatch("commit", 3),                                                  # no data left: gets a horizon
        TxnBatch("abort", 4, horizon=now - 1),                                  # horizon passed: removed
        TxnBatch("commit", 5, horizon=now + 1),                                 # horizon ahead: kept
        TxnBatch("data", 1, True, kv(("c", "2"))), TxnBatch("commit", 1),
        TxnBatch("data", 6, True, kv(("e", "open"))),                           # open at the end: the LSO
        TxnBatch("data", -1, False, kv(("f", "1"))),
    ]
    offsets = write_txn_partition(d, "orders", 0, batches, segment_bytes=250)
    _, entries, lso = txn_model(batches, offsets)
    if index:
        write_txn_indexes(os.path.join(d, "orders-0"), entries)
    out = tmp_path / "out"
    res = compaction_report.main(["--log-dirs", d, "--out", str(out), "--now-ms", str(now),
                                  "--config", "cleanup.policy=compact", "--config", "min.cleanable.dirty.ratio=0.01",
                                  "--config", "delete.retention.ms=5000", "--config", "min.compaction.lag.ms=0"],
                                 spark=spark)
    (row,) = res["rows"]
    assert row.last_stable_offset == lso and offsets[8][1] < row.first_uncleanable_offset <= lso
    assert row.aborted_records == 3 and row.records == 10
    want = _kafka_cleaner_pass(d, "orders", [(p, f, la) for p, f, la, _ in entries], row.first_dirty_offset,
                               row.first_uncleanable_offset, now, 5000)
    assert row.would_clean_now
    assert (row.records_removed_now, row.bytes_removed_now) == want
    assert want[0] >= 3 + 1                       # the aborted records and the expired marker at least
    props = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "5000",
             "min.compaction.lag.ms": "0"}
    assert _storage_cleaner_pass(d, "orders", str(tmp_path / "copy"), now, props) == want
