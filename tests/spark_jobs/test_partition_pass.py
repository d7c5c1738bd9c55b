"""spark_jobs.partition_pass without Spark: one partition's key rows and per-batch retention equal a record-by-record
model of the cleaner's rules, over random logs (keys, null keys, tombstones, delete horizons, codecs) and random
dirty/uncleanable bounds; folding the key table and buffering the cleaned range in tiny pieces changes nothing."""

from __future__ import annotations

import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from protocol.record_codec import Record
from spark_jobs import partition_pass
from spark_jobs.partition_pass import PartitionJob, partition_rows
from spark_jobs.planning import plan_slices
from tests.spark_jobs.builders import T0, write_storage_partition

KEYS = [None, b"a", b"b", b"cc", b"ddd"]
NOW = T0 + 10_000

record = st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(max_size=6)))
batch = st.tuples(st.lists(record, min_size=1, max_size=5), st.sampled_from([0, 1, 3]),
                  st.sampled_from([None, NOW - 1, NOW + 1]))


def _write(d: str, batches) -> list[tuple[int, int | None, list[Record]]]:
    """Write the batches; (base offset, delete horizon, records) of each."""
    written, offset = [], 0
    for recs, codec, horizon in batches:
        records = [Record(k, v, timestamp=T0) for k, v in recs]
        write_storage_partition(d, "t", 0, [(records, {"compression": codec, "delete_horizon_ms": horizon})],
                                {"segment.bytes": "400"})
        written.append((offset, horizon, records))
        offset += len(records)
    return written


def _model(written, first_dirty: int, first_uncleanable: int, cleaned: bool):
    keys: dict = {}
    latest_dirty: dict = {}
    for base, _, records in written:
        for i, r in enumerate(records):
            o = base + i
            k = keys.setdefault(r.key, dict(versions=0, tombstones=0, payload_bytes=0, last_offset=-1,
                                            latest_dirty=None, clean_records=0, dirty_records=0,
                                            uncleanable_records=0))
            dirty = first_dirty <= o < first_uncleanable
            k["versions"] += 1
            k["tombstones"] += r.value is None
            k["payload_bytes"] += len(r.key or b"") + len(r.value or b"")
            k["last_offset"] = max(k["last_offset"], o)
            k["clean_records"] += o < first_dirty
            k["dirty_records"] += dirty
            k["uncleanable_records"] += o >= first_uncleanable
            if dirty:
                k["latest_dirty"] = o
                if r.key is not None:
                    latest_dirty[r.key] = o
    per_batch = {}
    for base, horizon, records in written if cleaned else ():
        rows = [(base + i, r) for i, r in enumerate(records) if base + i < first_uncleanable]
        if not rows:
            continue
        b = dict(data_records=len(rows), data_kept=0, kept_tombstones=0, removed_tombstones=0, removed_null_key=0)
        for o, r in rows:
            keep = (r.key is not None and not (r.key in latest_dirty and o < latest_dirty[r.key])
                    and not (r.value is None and horizon is not None and NOW >= horizon))
            b["data_kept"] += keep
            b["kept_tombstones"] += keep and r.value is None
            b["removed_tombstones"] += not keep and r.value is None
            b["removed_null_key"] += not keep and r.key is None
        needs_horizon = b["kept_tombstones"] > 0 and horizon is None
        b["rewrite"] = b["data_kept"] > 0 and (b["data_kept"] < b["data_records"] or needs_horizon)
        b["new_horizon"] = NOW + 1000 if needs_horizon else horizon
        per_batch[base] = b
    return keys, per_batch


def _summary(keys: dict) -> dict:
    total = {name: sum(k[name] for k in keys.values())
             for name in ("versions", "payload_bytes", "tombstones", "clean_records", "dirty_records",
                          "uncleanable_records")}
    return dict(records=total.pop("versions"), distinct_keys=sum(1 for k in keys if k is not None),
                null_key_records=keys[None]["versions"] if None in keys else 0, **total)


def _run(d: str, first_dirty: int, first_uncleanable: int, cleaned: bool):
    job = PartitionJob("t", 0, tuple(plan_slices(d)), cleaned, first_dirty, first_uncleanable, 1000)
    rows = pa.Table.from_batches(list(partition_rows(job, NOW)), schema=partition_pass.OUTPUT_SCHEMA).to_pylist()
    kinds = [r["kind"] for r in rows]
    assert kinds == sorted(kinds) and kinds.count(partition_pass.SUMMARY_ROW) == 1, kinds   # keys, totals, batches
    keys = {r["key"]: {n: r[n] for n in partition_pass.KEY_ROW_FIELDS[1:]}
            for r in rows if r["kind"] == partition_pass.KEY_ROW}
    (totals,) = [{f.name: r[f.name] for f in partition_pass.SUMMARY_FIELDS}
                 for r in rows if r["kind"] == partition_pass.SUMMARY_ROW]
    batches = {r["base_offset"]: {f.name: r[f.name] for f in partition_pass.BATCH_FIELDS[1:]}
               for r in rows if r["kind"] == partition_pass.BATCH_ROW}
    assert len(keys) + 1 + len(batches) == len(rows)          # one row per key, one per batch
    return keys, totals, batches


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch, min_size=1, max_size=8), st.data())
def test_partition_pass_equals_the_record_by_record_model(batches, data):
    n = sum(len(b[0]) for b in batches)
    first_uncleanable = data.draw(st.integers(0, n))
    first_dirty = data.draw(st.integers(0, first_uncleanable))
    cleaned = data.draw(st.booleans())
    with tempfile.TemporaryDirectory() as d:
        written = _write(d, batches)
        want_keys, want_batches = _model(written, first_dirty, first_uncleanable, cleaned)
        keys, totals, got = _run(d, first_dirty, first_uncleanable, cleaned)
        assert keys == {k: {n: v[n] for n in partition_pass.KEY_ROW_FIELDS[1:]} for k, v in want_keys.items()}
        assert totals == _summary(want_keys)
        assert {b: {k: v for k, v in r.items() if k != "new_size"} for b, r in got.items()} == want_batches
        assert all((r["new_size"] is not None) == r["rewrite"] for r in got.values())
        # the same in tiny pieces: the key table folded every 2 records, the cleaned range buffered by 3
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(partition_pass, "MERGE_ROWS", 2)
            mp.setattr(partition_pass, "BUFFER_ROWS", 3)
            assert _run(d, first_dirty, first_uncleanable, cleaned) == (keys, totals, got)
