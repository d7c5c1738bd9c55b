"""Cost of the produce hot path (validate_batch + stamp_batch) against a bare crc32c over the same bytes.

Run: .venv/bin/python benchmarks/bench_records.py [--repeat N]
Target: validate+stamp of a 1 MiB batch within 1.2x of bare crc32c.
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import crc32c  # noqa: E402

from protocol.record_codec import Record, build_batch, decode_batch  # noqa: E402
from protocol.records import ATTRIBUTES_OFFSET, stamp_batch, validate_batch, validate_batches  # noqa: E402


def make_batch(target_size: int) -> bytearray:
    value = os.urandom(1000)
    n = max(1, target_size // 1012)
    return bytearray(build_batch([Record(None, value, timestamp=1_700_000_000_000 + i) for i in range(n)]))


def best_us(stmt, number: int, repeat: int) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    print(f"crc32c hardware_based={crc32c.hardware_based}  python={sys.version.split()[0]}")
    print(f"{'batch':>10} {'crc32c us':>10} {'validate us':>12} {'val+stamp us':>13} {'ratio':>6}"
          f" {'validate_batches us':>20}")
    ratios = {}
    for label, size in (("1 MiB", 1 << 20), ("16 KiB", 16 << 10)):
        buf = make_batch(size)
        mv = memoryview(buf)
        number = 2000 if size < (1 << 20) else 200
        bare = best_us(lambda: crc32c.crc32c(mv[ATTRIBUTES_OFFSET:]), number, args.repeat)
        val = best_us(lambda: validate_batch(buf, 0), number, args.repeat)

        def produce_path():
            validate_batch(buf, 0)
            stamp_batch(buf, 0, 12345, 7)

        both = best_us(produce_path, number, args.repeat)
        many = best_us(lambda: validate_batches(mv), number, args.repeat)
        ratios[label] = both / bare
        print(f"{label + ' (' + str(len(buf)) + ')':>10} {bare:10.2f} {val:12.2f} {both:13.2f} {both / bare:6.2f}x"
              f" {many:20.2f}")
    buf = bytes(make_batch(1 << 20))
    dec = best_us(lambda: decode_batch(buf), 5, args.repeat)
    print(f"decode_batch (record codec, not hot path) 1 MiB / {len(decode_batch(buf)[1])} records: {dec:.0f} us")
    ok = ratios["1 MiB"] <= 1.2
    print(f"1 MiB validate+stamp / crc32c = {ratios['1 MiB']:.3f}x -> {'within' if ok else 'OVER'} the 1.2x target")


if __name__ == "__main__":
    main()
