"""cluster/quotas.py's client quota rate and throttle time against Kafka's own classes (issue 29): Kafka's Rate,
SampledStat, WindowedSum, MetricConfig and Quota are compiled from a Kafka source tree (a git directory, e.g. a
bare mirror) with javac, and both are fed the same random records and unrecords (ClientQuotaManager's
recordAndGetThrottleTimeMs and unrecordQuotaSensor, QuotaUtils.throttleTime inlined); every throttle time must be
the same. Needs a JDK; run by hand, not in CI.

Run:  .venv/bin/python benchmarks/kafka_quota_crosscheck.py --kafka /path/to/kafka/.git [--seeds 10]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cluster.quotas import CLIENT_ID, CONSUMER_BYTE_RATE, ClientQuotaManager  # noqa: E402

METRICS = "clients/src/main/java/org/apache/kafka/common/metrics"
SOURCES = ["MetricConfig", "Quota", "MeasurableStat", "Measurable", "Stat", "MetricValueProvider",
           "stats/Rate", "stats/SampledStat", "stats/WindowedSum"]
STUBS = {
    # MetricConfig names Sensor.RecordingLevel; Rate uses MetricsUtils.convert (its body is taken from Kafka's)
    "Sensor": "package org.apache.kafka.common.metrics;\n"
              "public final class Sensor { public enum RecordingLevel { INFO, DEBUG, TRACE } }\n",
}
HARNESS = """
import java.io.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.metrics.*;
import org.apache.kafka.common.metrics.stats.Rate;
public class Harness {
  public static void main(String[] a) throws Exception {
    int samples = Integer.parseInt(a[0]); int windowS = Integer.parseInt(a[1]); double bound = Double.parseDouble(a[2]);
    MetricConfig cfg = new MetricConfig().timeWindow(windowS, TimeUnit.SECONDS).samples(samples)
        .quota(new Quota(bound, true));
    Rate rate = new Rate();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    StringBuilder out = new StringBuilder();
    for (String line; (line = in.readLine()) != null; ) {
      String[] p = line.trim().split(" ");
      double v = Double.parseDouble(p[1]); long t = Long.parseLong(p[2]);
      if (p[0].equals("r")) {  // Sensor.record then checkQuotas; QuotaUtils.throttleTime
        rate.record(cfg, v, t);
        double m = rate.measure(cfg, t);
        long throttle = cfg.quota().acceptable(m) ? 0 : Math.round((m - bound) / bound * rate.windowSize(cfg, t));
        out.append(throttle).append('\\n');
      } else {  // unrecordQuotaSensor
        rate.record(cfg, -v, t);
      }
    }
    System.out.print(out);
  }
}
"""


def git_show(git_dir: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"HEAD:{path}"], check=True, capture_output=True,
                          text=True).stdout


def build(git_dir: str, work: str) -> str:
    src = os.path.join(work, "src")
    for name in SOURCES:
        dest = os.path.join(src, "org/apache/kafka/common/metrics", f"{name}.java")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "w") as f:
            f.write(git_show(git_dir, f"{METRICS}/{name}.java"))
    utils = git_show(git_dir, f"{METRICS}/internals/MetricsUtils.java")
    convert = re.search(r"    public static double convert\(long timeMs, TimeUnit unit\) \{.*?\n    \}\n", utils, re.S)
    assert convert is not None, "MetricsUtils.convert not found"
    stubs = dict(STUBS, **{"internals/MetricsUtils": "package org.apache.kafka.common.metrics.internals;\n"
                           "import java.util.concurrent.TimeUnit;\npublic class MetricsUtils {\n"
                           + convert.group(0) + "}\n"})
    for name, text in stubs.items():
        dest = os.path.join(src, "org/apache/kafka/common/metrics", f"{name}.java")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "w") as f:
            f.write(text)
    with open(os.path.join(src, "Harness.java"), "w") as f:
        f.write(HARNESS)
    out = os.path.join(work, "classes")
    files = [os.path.join(d, n) for d, _, names in os.walk(src) for n in names]
    subprocess.run(["javac", "-d", out, *files], check=True)
    return out


def sequence(seed: int) -> list[tuple[str, float, int]]:
    """Records of any size at any gaps (within a window, at its edges, past the whole window), and unrecords."""
    rnd = random.Random(seed)
    ops, t = [], rnd.randrange(0, 5000)
    for _ in range(3000):
        t += rnd.choice([0, 1, 3, 10, 50, 200, 999, 1000, 1001, 3000, 11000, 12000, rnd.randrange(0, 20000)])
        v = rnd.choice([1, 100, 1000, 1048576, rnd.randrange(0, 3_000_000), rnd.randrange(0, 100000) + 0.5])
        ops.append(("r", v, t))
        if rnd.random() < 0.4:
            t += rnd.choice([0, 0, 1, 999, 1000])
            ops.append(("u", v, t))
    return ops


def compare(classes: str, seed: int, samples: int, window_s: int, bound: float) -> tuple[int, int]:
    ops = sequence(seed)
    java = subprocess.run(["java", "-cp", classes, "Harness", str(samples), str(window_s), repr(bound)],
                          input="".join(f"{o} {v!r} {t}\n" for o, v, t in ops), capture_output=True, text=True,
                          check=True).stdout.split()
    m = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window_s)
    m.update({((CLIENT_ID, "c"),): {CONSUMER_BYTE_RATE: bound}})
    records = differ = 0
    for o, v, t in ops:
        if o == "u":
            m.unrecord("", "c", v, t)
            continue
        if m.record("", "c", v, t) != int(java[records]):
            differ += 1
        records += 1
    return records, differ


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kafka", required=True, help="a Kafka git directory (its HEAD is read)")
    ap.add_argument("--seeds", type=int, default=10)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        classes = build(args.kafka, work)
        total = differ = 0
        for seed in range(args.seeds):
            for samples, window_s, bound in [(11, 1, 1e6), (2, 1, 1000.0), (5, 2, 5e5), (11, 1, 12345.0)]:
                n, d = compare(classes, seed, samples, window_s, bound)
                total, differ = total + n, differ + d
    print(f"{total:,} throttle times compared with Kafka's classes: {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
