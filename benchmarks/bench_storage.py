"""Storage engine benchmark (a script, not a test).

    .venv/bin/python benchmarks/bench_storage.py [--dir /tmp/odradek-bench] [--size-gb 5] [--quick]
        [--only append,fetch,recovery,compaction,lookup]

Measures, in one run on one disk, with ratios against a baseline measured alongside:

1. append throughput of 16 KiB and 1 MiB batches (leader path: validate + CRC32C + offsets + index) vs a
   plain ``file.write`` loop of the same bytes; rounds alternate between the two and medians are reported;
2. fetch throughput: ``Log.read`` returning a file slice + ``os.sendfile`` to /dev/null, and the bytes
   variant (``pread``), 1 MiB fetches;
3. lookup latency (``Log.read`` up to the slice, no data copied) for random offsets as the log grows to
   ``--size-gb`` (default segment size, 1 GiB): it must stay flat — only the bisect over segments grows.
   Each step syncs, then times two passes of new random offsets: the first pass also pays the kernel's
   first touch of page-cache pages that aged while the next GiB was written; the second is the steady state;
4. recovery MB/s after an unclean shutdown (every batch CRC-checked, indexes rebuilt) vs bare ``crc32c``
   over the same bytes (in memory, and read from the page cache);
5. compaction MB/s (the log cleaner on a keyed log).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from crc32c import crc32c  # noqa: E402

from protocol.record_codec import Record, build_batch  # noqa: E402
from protocol.records import stamp_batch, validate_batches  # noqa: E402
from storage.cleaner import LogCleaner  # noqa: E402
from storage.config import LogConfig, LogManagerConfig  # noqa: E402
from storage.log import FetchIsolation, Log  # noqa: E402

MiB = 1 << 20
#: the broker's clock for appends: the batches' timestamps (2023) are in its past, as a producer's are
NOW = int(time.time() * 1000)


def make_batch(size: int, seed: int = 0) -> bytearray:
    """A client batch of about ``size`` bytes: 1 KiB records, random (incompressible) values."""
    rnd = random.Random(seed)
    n = max(1, size // 1024)
    value_len = max(1, (size - 61) // n - 12)
    while True:
        recs = [Record(b"key-%d" % i, rnd.randbytes(value_len), timestamp=1_700_000_000_000 + i) for i in range(n)]
        b = bytearray(build_batch(recs))
        if len(b) <= size or value_len <= 1:
            return b
        value_len -= max(1, (len(b) - size + n - 1) // n)


def fresh(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def bench_append(root: str, batch_size: int, volume: int, rounds: int) -> dict:
    """Alternating rounds of: plain ``file.write`` loop, ``Log.append_as_leader`` (validates the CRC), and
    ``append_as_leader`` with headers the broker already validated.  Each timed loop measures wall-clock and
    CPU time (``process_time``: on a shared machine it is the fairer ratio; it includes kernel time).
    One buffer is reused, so every loop (the plain one too) first resets its base offset to the client's 0."""
    b = make_batch(batch_size)
    zero = bytes(8)
    n = max(1, volume // len(b))
    wall: dict[str, list[float]] = {"plain": [], "ours": [], "pre": []}
    cpu: dict[str, list[float]] = {"plain": [], "ours": [], "pre": []}
    for r in range(rounds):
        order = ["plain", "ours", "pre"] if r % 2 == 0 else ["pre", "ours", "plain"]
        for kind in order:
            d = fresh(os.path.join(root, "append"))
            if kind == "plain":
                with open(os.path.join(d, "plain.log"), "wb") as f:
                    f.write(b)  # warm-up, as for the log below
                    t, c = time.perf_counter(), time.process_time()
                    for _ in range(n):
                        b[0:8] = zero  # the same loop as below: only the call differs
                        f.write(b)
                    f.flush()
                    wall[kind].append(time.perf_counter() - t)
                    cpu[kind].append(time.process_time() - c)
            else:
                lg = Log.open(os.path.join(d, "bench-0"), LogConfig(), now_ms=0)
                stamp_batch(b, 0, 0, -1)
                headers = validate_batches(b) if kind == "pre" else None  # what the produce handler did
                lg.append_as_leader(b, 0, now_ms=NOW)  # warm-up: the first append writes leader-epoch-checkpoint
                t, c = time.perf_counter(), time.process_time()
                append = lg.append_as_leader
                records = memoryview(b)  # what the produce handler passes: a view of the request frame
                if headers is None:  # the produce handler's call
                    for _ in range(n):
                        b[0:8] = zero  # the client's base offset 0 again (offsets are assigned in place)
                        append(records, 0, NOW)
                else:
                    for _ in range(n):
                        b[0:8] = zero
                        append(records, 0, NOW, validated_headers=headers)
                wall[kind].append(time.perf_counter() - t)
                cpu[kind].append(time.process_time() - c)
                lg.close_handlers()
            shutil.rmtree(d, ignore_errors=True)
    total = n * len(b) / MiB
    med = statistics.median
    out = {"batch": len(b), "batches": n, "MiB": total}
    for label, m in (("wall", wall), ("cpu", cpu)):
        for k in ("plain", "ours", "pre"):
            out[f"{label}_{k}_MBps"] = total / med(m[k])
            out[f"{label}_{k}_us"] = med(m[k]) / n * 1e6
        out[f"{label}_ratio"] = med(m["plain"]) / med(m["ours"])
        out[f"{label}_ratio_pre"] = med(m["plain"]) / med(m["pre"])
    return out


def bench_append_idempotent(root: str, batches: int, rounds: int) -> dict:
    """An idempotent producer's 16 KiB batches (distinct, sequences in order) appended through the fast path and
    through the general path (``ProducerAppendInfo``; forced by marking the fast path's cached config as taking no
    batch), against a plain ``file.write`` loop of the same batches.  The batches are built ahead (``batches`` x
    16 KiB in memory), so all three loops read them from memory rather than from the cache."""
    rnd = random.Random(2)
    recs = [Record(b"key-%d" % i, rnd.randbytes(1024), timestamp=1_700_000_000_000 + i) for i in range(15)]
    times: dict[str, list[float]] = {"plain": [], "fast": [], "general": []}
    size = 0
    for r in range(rounds):
        for kind in (["plain", "fast", "general"] if r % 2 == 0 else ["general", "fast", "plain"]):
            todo = [bytearray(build_batch(recs, producer_id=77, producer_epoch=0, base_sequence=i * 15))
                    for i in range(batches)]
            size = len(todo[0])
            d = fresh(os.path.join(root, "append-idem"))
            if kind == "plain":
                with open(os.path.join(d, "plain.log"), "wb") as f:
                    t = time.perf_counter()
                    for b in todo:
                        f.write(b)
                    f.flush()
                    times[kind].append(time.perf_counter() - t)
            else:
                lg = Log.open(os.path.join(d, "bench-0"), LogConfig(), now_ms=0)
                if kind == "general":
                    fc = lg._fast_config_for(lg.config)
                    lg._fast_config = (fc[0], -1) + fc[2:]  # largest batch the fast path takes: none
                append = lg.append_as_leader
                append(todo[0], 0, NOW)  # the producer's first batch creates its entry (the general path)
                t = time.perf_counter()
                for b in todo[1:]:
                    append(memoryview(b), 0, NOW)
                times[kind].append(time.perf_counter() - t)
                lg.close_handlers()
            shutil.rmtree(d, ignore_errors=True)
    med = statistics.median
    us = {k: med(v) / (batches if k == "plain" else batches - 1) * 1e6 for k, v in times.items()}
    return {"batch": size, "batches": batches, **{f"{k}_us": v for k, v in us.items()},
            "ratio_fast": us["plain"] / us["fast"], "ratio_general": us["plain"] / us["general"]}


def build_log(path: str, target_bytes: int, batch_size: int = 16 * 1024, lg: Log | None = None,
              config: LogConfig | None = None) -> Log:
    if lg is None:
        lg = Log.open(path, config or LogConfig(), now_ms=0)
    b = make_batch(batch_size, seed=1)
    stamp_batch(b, 0, 0, -1)
    headers = validate_batches(b)
    while lg.size < target_bytes:
        stamp_batch(b, 0, 0, -1)
        lg.append_as_leader(b, 0, now_ms=NOW, validated_headers=headers)
    lg.update_high_watermark(lg.log_end_offset)
    return lg


def bench_fetch(lg: Log, seconds: float = 3.0) -> dict:
    devnull = os.open(os.devnull, os.O_WRONLY)
    out = {}
    for mode in ("sendfile", "bytes"):
        offset, sent, fetches = 0, 0, 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            info = lg.read(offset, MiB, FetchIsolation.HIGH_WATERMARK, True)
            sl = info.records
            if sl.length == 0:
                offset = 0
                continue
            if mode == "sendfile":
                done = 0
                while done < sl.length:
                    done += os.sendfile(devnull, sl.fd, sl.position + done, sl.length - done)
            else:
                done = len(sl.read())
            sent += done
            fetches += 1
            # continue after the last whole batch in the slice (as a consumer would)
            offset = _next_offset_after(lg, info)
        el = time.perf_counter() - t0
        out[mode] = {"MBps": sent / MiB / el, "us_per_fetch": el / fetches * 1e6}
    os.close(devnull)
    return out


def _next_offset_after(lg: Log, info) -> int:
    from protocol.records import iter_batch_positions
    data = os.pread(info.records.fd, info.records.length, info.records.position)
    last = None
    for _, h in iter_batch_positions(data):
        last = h
    return (last.base_offset + last.last_offset_delta + 1) if last else info.fetch_offset_metadata.message_offset + 1


def bench_lookup(lg: Log, samples: int, rnd: random.Random) -> dict:
    leo = lg.log_end_offset
    times = []
    for _ in range(samples):
        off = rnd.randrange(lg.log_start_offset, leo)
        t = time.perf_counter()
        lg.read(off, 1, FetchIsolation.HIGH_WATERMARK, True)
        times.append(time.perf_counter() - t)
    times.sort()
    return {"median_us": times[len(times) // 2] * 1e6, "p99_us": times[int(len(times) * 0.99)] * 1e6,
            "segments": lg.num_segments, "GiB": lg.size / (1 << 30)}


def bench_recovery(path: str, config: LogConfig) -> dict:
    seg_files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".log"))
    total = sum(os.path.getsize(f) for f in seg_files)
    # bare crc32c: in memory, then read + crc from the page cache
    chunks = []
    for f in seg_files:
        with open(f, "rb") as fh:
            while True:
                c = fh.read(4 * MiB)
                if not c:
                    break
                chunks.append(c)
    t = time.perf_counter()
    for c in chunks:
        crc32c(c)
    crc_mem = time.perf_counter() - t
    del chunks
    t = time.perf_counter()
    for f in seg_files:
        fd = os.open(f, os.O_RDONLY)
        pos = 0
        while True:
            c = os.pread(fd, 4 * MiB, pos)
            if not c:
                break
            crc32c(c)
            pos += len(c)
        os.close(fd)
    crc_read = time.perf_counter() - t
    t = time.perf_counter()
    lg = Log.open(path, config, now_ms=0, had_clean_shutdown=False, recovery_point=0)
    rec = time.perf_counter() - t
    stats = lg.load_stats
    lg.close_handlers()
    mb = total / MiB
    return {"MiB": mb, "recovery_MBps": mb / rec, "crc_mem_MBps": mb / crc_mem, "crc_read_MBps": mb / crc_read,
            "ratio_vs_crc_mem": crc_mem / rec, "ratio_vs_crc_read": crc_read / rec,
            "segments_recovered": stats.recovered_segments, "seconds": rec}


def bench_compaction(root: str, volume: int, keys: int) -> dict:
    path = os.path.join(fresh(os.path.join(root, "compact")), "compact-0")
    cfg = LogConfig(cleanup_policy=("compact",), segment_bytes=64 * MiB, file_delete_delay_ms=0)
    lg = Log.open(path, cfg, now_ms=0)
    rnd = random.Random(7)
    value = rnd.randbytes(1000)
    written = 0
    while written < volume:
        recs = [Record(b"key-%08d" % rnd.randrange(keys), value, timestamp=1000) for _ in range(16)]
        b = bytearray(build_batch(recs))
        lg.append_as_leader(b, 0, now_ms=NOW)
        written += len(b)
    lg.roll(now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    before = lg.size
    cleaner = LogCleaner(LogManagerConfig(log_dirs=(os.path.dirname(path),)), lambda: {("compact", 0): lg},
                         [os.path.dirname(path)])
    t = time.perf_counter()
    cleaner.force_clean(lg, 10_000)
    el = time.perf_counter() - t
    st = cleaner.last_stats
    lg.scheduler.run_all()
    after = lg.size
    lg.close()
    return {"MiB_in": before / MiB, "MiB_out": after / MiB, "MBps": before / MiB / el, "seconds": el,
            "records_read": st.messages_read if st else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/tmp/odradek-bench")
    ap.add_argument("--size-gb", type=float, default=5.0, help="largest log for the lookup benchmark")
    ap.add_argument("--quick", action="store_true", help="small volumes (smoke run)")
    ap.add_argument("--only", default="append,fetch,recovery,compaction,lookup",
                    help="comma-separated sections to run (recovery needs fetch's log): append, fetch, recovery, "
                         "compaction, lookup")
    args = ap.parse_args()
    only = set(args.only.split(","))
    if "recovery" in only:
        only.add("fetch")
    root = fresh(args.dir)
    quick = args.quick
    rnd = random.Random(42)
    print(f"odradek storage benchmark: dir={root} python={sys.version.split()[0]} cpus={os.cpu_count()} "
          f"loadavg={os.getloadavg()[0]:.1f}")

    if "append" in only:
        _append(root, quick)
    if "fetch" in only:
        _fetch_and_recovery(root, quick, "recovery" in only)
    if "compaction" in only:
        _compaction(root, quick)
    if "lookup" in only:
        _lookup(root, quick, args.size_gb, rnd)
    shutil.rmtree(root, ignore_errors=True)


def _append(root: str, quick: bool) -> None:
    print("\n== append (leader path) vs plain file.write of the same bytes; medians of alternating rounds ==")
    for size, volume in ((16 * 1024, 64 * MiB if quick else 256 * MiB), (MiB, 64 * MiB if quick else 512 * MiB)):
        r = bench_append(root, size, volume, 3 if quick else 7)
        for label in ("wall", "cpu"):
            print(f"[{label:4}] batch {r['batch']:>8} B x {r['batches']:>6}: file.write "
                  f"{r[label + '_plain_MBps']:6.0f} MB/s ({r[label + '_plain_us']:7.1f} us/batch) | append "
                  f"{r[label + '_ours_MBps']:6.0f} MB/s ({r[label + '_ours_us']:7.1f} us) ratio "
                  f"{r[label + '_ratio']:.2f} | append, pre-validated {r[label + '_pre_MBps']:6.0f} MB/s "
                  f"({r[label + '_pre_us']:7.1f} us) ratio {r[label + '_ratio_pre']:.2f}")
    r = bench_append_idempotent(root, 1000 if quick else 4000, 3 if quick else 5)
    print(f"[idem] batch {r['batch']:>8} B x {r['batches']:>6} (distinct, from memory), idempotent producer: "
          f"file.write {r['plain_us']:.1f} us/batch | fast path {r['fast_us']:.1f} us ratio {r['ratio_fast']:.2f}"
          f" | general path {r['general_us']:.1f} us ratio {r['ratio_general']:.2f}")


def _fetch_and_recovery(root: str, quick: bool, recovery: bool) -> None:
    print("\n== fetch: Log.read -> FileSlice -> os.sendfile(/dev/null) | bytes variant (pread), 1 MiB fetches ==")
    lg = build_log(os.path.join(fresh(os.path.join(root, "fetch")), "fetch-0"), (256 if quick else 1024) * MiB)
    f = bench_fetch(lg, 1.0 if quick else 3.0)
    print(f"sendfile: {f['sendfile']['MBps']:8.0f} MB/s ({f['sendfile']['us_per_fetch']:.1f} us/fetch) | "
          f"bytes: {f['bytes']['MBps']:8.0f} MB/s ({f['bytes']['us_per_fetch']:.1f} us/fetch)")
    fetch_dir = lg.dir
    lg.close_handlers()
    if not recovery:
        return

    print("\n== recovery after an unclean shutdown (CRC every batch, rebuild indexes) vs bare crc32c ==")
    r = bench_recovery(fetch_dir, LogConfig())
    print(f"{r['MiB']:.0f} MiB in {r['segments_recovered']} segments: recovery {r['recovery_MBps']:.0f} MB/s "
          f"({r['seconds']:.2f} s) | crc32c in memory {r['crc_mem_MBps']:.0f} MB/s (ratio {r['ratio_vs_crc_mem']:.2f})"
          f" | pread+crc32c {r['crc_read_MBps']:.0f} MB/s (ratio {r['ratio_vs_crc_read']:.2f})")


def _compaction(root: str, quick: bool) -> None:
    print("\n== compaction (log cleaner), ~1 KiB records ==")
    c = bench_compaction(root, (32 if quick else 256) * MiB, 20_000)
    print(f"{c['MiB_in']:.0f} MiB -> {c['MiB_out']:.1f} MiB in {c['seconds']:.2f} s: {c['MBps']:.1f} MB/s "
          f"({c['records_read']} records read)")


def _lookup(root: str, quick: bool, size_gb: float, rnd: random.Random) -> None:
    print(f"\n== lookup latency for random offsets as the log grows to {size_gb} GiB (1 GiB segments) ==")
    path = os.path.join(fresh(os.path.join(root, "lookup")), "lookup-0")
    lg = None
    steps = [0.25, 0.5] if quick else [1, 2, 3, 4, 5]
    steps = [s * size_gb / max(steps) for s in steps]
    for gb in steps:
        lg = build_log(path, int(gb * (1 << 30)), lg=lg)
        t = time.perf_counter()
        os.sync()  # let writeback of the GiB just appended finish: lookups are measured on a settled page cache
        synced = time.perf_counter() - t
        first = bench_lookup(lg, 2000 if quick else 5000, rnd)
        res = bench_lookup(lg, 2000 if quick else 5000, rnd)  # new random offsets, pages already touched once
        res["sync_s"] = synced
        res["first_median_us"], res["first_p99_us"] = first["median_us"], first["p99_us"]
        print(f"log {res['GiB']:5.2f} GiB, {res['segments']:3d} segments: median {res['median_us']:6.1f} us, "
              f"p99 {res['p99_us']:7.1f} us | first pass after the append and a {res['sync_s']:.1f} s sync: "
              f"median {res['first_median_us']:6.1f} us, p99 {res['first_p99_us']:7.1f} us")
    lg.close_handlers()


if __name__ == "__main__":
    main()
