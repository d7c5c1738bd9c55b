"""Two builds of the broker side by side (A/B, ABBA order), over one listener: broker CPU-s/GB and MB/s per run.

Run:  git archive <base-commit> | tar -x -C /tmp/base && cp protocol/_record_columns*.so /tmp/base/protocol/
      .venv/bin/python benchmarks/bench_builds_ab.py /tmp/base . --listener SASL_SSL --rounds 4 [--pin]

A and B are source trees (each broker runs with PYTHONPATH set to its tree); both are started at once, each with
bench_broker.py's PLAINTEXT/SSL/SASL_SSL listeners, and the same case (``--records`` x ``--size``, 1 partition,
acks=1: produce, then consume back) runs on them in the order A B B A, B A A B, ... so the drift of a shared
machine hits both alike. The figures are the medians of the per-pair ratios B/A (adjacent runs), with their range.
Broker CPU-s/GB is the figure to read for a change of the broker's own cost; MB/s follows the whole machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_broker as bb  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="source tree of build A (the baseline)")
    ap.add_argument("b", help="source tree of build B")
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=4, help="ABBA blocks (4 runs each)")
    ap.add_argument("--listener", default="SASL_SSL", choices=bb.SECURED)
    ap.add_argument("--pin", action="store_true", help="brokers on the first CPU, this process on the others")
    ap.add_argument("--timeout", type=float, default=180.0)
    args = ap.parse_args()
    if args.pin:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            ap.error("--pin needs 2+ CPUs")
        bb._BROKER_CPUS[:] = cpus[:1]
        os.sched_setaffinity(0, cpus[1:])
    trees = {"A": os.path.abspath(args.a), "B": os.path.abspath(args.b)}
    workdir = tempfile.mkdtemp(prefix="odradek-ab-")
    arms: dict = {}
    saved = os.environ.get("PYTHONPATH")
    try:
        for name, tree in trees.items():
            os.environ["PYTHONPATH"] = tree  # the broker subprocess imports this tree's code
            secured = bb.Secured(workdir, name)
            b = bb.start_odradek(workdir, name, secured=secured)
            arms[name] = (b, secured.arms(b, [args.listener])[args.listener])
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
        for _, arm in arms.values():
            bb.warm_up(arm)
        print(f"load average {bb.loadavg()}; A {trees['A']}, B {trees['B']}; {args.records:,} x {args.size} B "
              f"over {args.listener}, 1 partition, acks=1; ABBA x {args.rounds}" + ("; pinned" if args.pin else ""))
        order = [n for r in range(args.rounds) for n in (("A", "B", "B", "A") if r % 2 == 0 else ("B", "A", "A", "B"))]
        runs: dict[str, list[tuple]] = {"A": [], "B": []}
        for i, name in enumerate(order):
            b, arm = arms[name]
            if not b.alive():
                raise RuntimeError(f"broker {name} died; see {b.stderr_path}")
            r = bb.run_case(arm, args.size, 1, "1", args.records, args.timeout, 1, 0, 0)
            gb = r.records * args.size / 1e9
            fig = (r.produce_cpu / gb, gb / r.produce_s * 1e3, r.consume_cpu / gb, gb / r.consume_s * 1e3)
            runs[name].append(fig)
            print(f"  {i:2} {name}: produce {fig[1]:7.1f} MB/s {fig[0]:5.2f} CPU-s/GB | consume {fig[3]:7.1f} MB/s "
                  f"{fig[2]:5.2f} CPU-s/GB", flush=True)
        # ABBA: the k-th A and the k-th B runs are adjacent
        for k, label in ((0, "produce broker CPU-s/GB"), (1, "produce MB/s"), (2, "consume broker CPU-s/GB"),
                         (3, "consume MB/s")):
            ratios = [b[k] / a[k] for a, b in zip(runs["A"], runs["B"])]
            med = {n: statistics.median(x[k] for x in runs[n]) for n in runs}
            print(f"B/A {label:<24} median {statistics.median(ratios):.3f} [{min(ratios):.2f}-{max(ratios):.2f}]; "
                  f"A {med['A']:.2f}, B {med['B']:.2f}")
        print(f"load average at the end {bb.loadavg()}")
    finally:
        for b, _ in arms.values():
            b.stop()
    shutil.rmtree(workdir, ignore_errors=True)  # kept (logs, data) when the run failed
    return 0


if __name__ == "__main__":
    sys.exit(main())
