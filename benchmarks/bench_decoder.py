"""Record decoding: odradek's reference decoder against the compiled one behind ``decode_batch``, in one run.

Run: .venv/bin/python benchmarks/bench_decoder.py [--seconds S] [--repeat N] [--records N]

The batch: ``--records`` records (default 160, ~16 KiB) of 100 payload bytes each (a 10-byte key, a 90-byte value
of loosely repetitive text, so lz4/zstd have something to do), CreateTime, every fourth record with one header.
For each codec it reports records/s of

* reference: ``decode_batch_reference`` (pure Python, ``protocol/record_codec.py``);
* odradek:   ``decode_batch``, what every reader calls: aiokafka's C reader (``protocol/fast_records.py``) with
             odradek's own bounded decompression and the checks that keep its answer the reference's;
* aiokafka:  aiokafka's ``DefaultRecordBatch`` alone on the same bytes (its own decompression, cramjam), the
             ceiling: no odradek ``Record`` objects, no parity checks.

and the ratios odradek/reference and odradek/aiokafka. All three are checked to agree before timing. Each figure is
the best of ``--repeat`` runs of ``--seconds``; the whole run takes a few seconds.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from protocol.compression import CODEC_NAMES, GZIP, LZ4, NONE, SNAPPY, ZSTD  # noqa: E402
from protocol.record_codec import (  # noqa: E402
    Record, build_batch, decode_batch, decode_batch_reference, decoder_name, fast_decoder,
)

try:
    from aiokafka.record._crecords import DefaultRecordBatch
except ImportError:  # pragma: no cover - aiokafka is in the test and spark extras
    DefaultRecordBatch = None


def make_records(n: int, seed: int = 1) -> list[Record]:
    rnd = random.Random(seed)
    words = [bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 9))) for _ in range(300)]
    out = []
    for i in range(n):
        value = b" ".join(rnd.choice(words) for _ in range(20))[:90].ljust(90, b".")
        headers = [("trace", b"%016x" % rnd.getrandbits(64))] if i % 4 == 0 else []
        out.append(Record(b"key-%06d" % rnd.randrange(10**6), value, headers, timestamp=1_700_000_000_000 + i * 3))
    return out


def records_per_s(fn, n_records: int, seconds: float, repeat: int) -> float:
    best = 0.0
    for _ in range(repeat):
        calls = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds
        while True:
            fn()
            calls += 1
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, calls * n_records / (now - t0))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=0.25)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--records", type=int, default=160)
    ap.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd")
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}; decode_batch uses: {decoder_name()}")
    if not fast_decoder():
        print("(aiokafka is not installed: 'odradek' below is the reference too)")
    recs = make_records(args.records)
    print(f"{args.records} records x 100 B payload per batch\n")
    print(f"{'codec':>7} {'batch B':>8} {'reference rec/s':>16} {'odradek rec/s':>14} {'aiokafka rec/s':>15}"
          f" {'odradek/ref':>12} {'odradek/aiokafka':>17}")
    codecs = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
    for name in args.codecs.split(","):
        codec = codecs[name]
        buf = build_batch(recs, base_offset=1_000_000, compression=codec)
        ref_recs = decode_batch_reference(buf)[1]
        assert decode_batch(buf)[1] == ref_recs
        ref = records_per_s(lambda: decode_batch_reference(buf), len(recs), args.seconds, args.repeat)
        ours = records_per_s(lambda: decode_batch(buf), len(recs), args.seconds, args.repeat)
        ceiling = None
        if DefaultRecordBatch is not None:
            theirs = list(DefaultRecordBatch(buf))
            assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs] == \
                [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in ref_recs]

            def c_only():
                b = DefaultRecordBatch(buf)
                b.validate_crc()
                return list(b)

            ceiling = records_per_s(c_only, len(recs), args.seconds, args.repeat)
        print(f"{CODEC_NAMES[codec]:>7} {len(buf):8d} {ref:16,.0f} {ours:14,.0f} "
              f"{'-' if ceiling is None else f'{ceiling:,.0f}':>15} {ours / ref:11.2f}x "
              f"{'-' if ceiling is None else f'{ours / ceiling:.2f}x':>17}")


if __name__ == "__main__":
    main()
