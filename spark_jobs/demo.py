"""A demo log directory and the three reports on it, without a broker.

    python -m spark_jobs.demo --dir /tmp/odradek-demo [--picture docs/spark-report.png]

Writes ``<dir>/logs`` (Kafka layout, with a ``__cluster_metadata-0`` holding the topics' ConfigRecords), runs the
three jobs into ``<dir>/compaction``, ``<dir>/retention`` and ``<dir>/profile``, and optionally composes one picture
of the reports' main tables and charts.
"""

from __future__ import annotations

if __package__ in (None, ""):  # run as a file (spark-submit spark_jobs/<job>.py): make the package importable
    import os as _os
    import sys as _sys

    _sys.path.insert(0, _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

import argparse
import os
import random
import shutil

from protocol.generated.metadata import ConfigRecord, TopicRecord
from protocol.primitives import uvarint
from protocol.record_codec import Record, build_batch, build_end_txn_marker_batch

from spark_jobs.synth import PartitionWriter

T0 = 1_767_225_600_000          # 2026-01-01T00:00:00Z
HOUR = 3_600_000
DAY = 24 * HOUR
NOW = T0 + 10 * DAY

TOPIC_CONFIGS = {
    "orders.state": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.3",
                     "delete.retention.ms": str(6 * HOUR)},
    "clickstream.web-eu": {"retention.ms": str(7 * DAY), "retention.bytes": str(6_000_000)},
    "payments": {"retention.ms": "-1"},
}


def _meta_value(rec) -> bytes:
    """MetadataRecordSerde framing: frame version, api key, record version (unsigned varints), then the record."""
    version = rec.VALID_VERSIONS[1]
    return uvarint(1) + uvarint(rec.API_KEY) + uvarint(version) + rec.encode(version)


def write_demo(logs: str, seed: int = 7) -> None:
    rng = random.Random(seed)
    if os.path.exists(logs):
        shutil.rmtree(logs)
    os.makedirs(logs)
    with open(os.path.join(logs, "meta.properties"), "w") as f:
        f.write("version=1\nnode.id=1\ncluster.id=demo\n")
    with PartitionWriter(logs, "__cluster_metadata", 0) as w:
        for i, (topic, cfg) in enumerate(TOPIC_CONFIGS.items()):
            recs = [Record(None, _meta_value(TopicRecord(name=topic, topic_id=bytes(15) + bytes([i + 1]))),
                           timestamp=T0)]
            recs += [Record(None, _meta_value(ConfigRecord(resource_type=2, resource_name=topic, name=k, value=v)),
                            timestamp=T0) for k, v in cfg.items()]
            w.append(build_batch(recs))
    # orders.state: 2000 order ids updated over 10 days, closed orders deleted (tombstones)
    for p in range(2):
        with PartitionWriter(logs, "orders.state", p, segment_bytes=60_000) as w:
            ts = T0
            for b in range(900):
                recs = []
                for j in range(8):
                    oid = rng.randrange(2000)
                    state = rng.choice([b"created", b"paid", b"shipped", b"delivered", None])
                    recs.append(Record(f"order-{p}-{oid}".encode(),
                                       None if state is None else b'{"state":"' + state + b'","items":'
                                       + str(rng.randrange(1, 9)).encode() + b"}",
                                       [("schema", b"v3")], timestamp=ts))
                    ts += rng.randrange(60_000, 180_000)
                w.append(build_batch(recs, compression=[0, 3, 4][b % 3]))
    # clickstream: 3 skewed partitions, daily traffic cycle, a few late events
    for p, weight in ((0, 1.0), (1, 1.6), (2, 0.5)):
        with PartitionWriter(logs, "clickstream.web-eu", p, segment_bytes=1_000_000) as w:
            ts = T0
            while ts < NOW - HOUR:
                hour = (ts // HOUR) % 24
                n = max(1, int(weight * (6 + 10 * (1 if 8 <= hour <= 20 else 0))))
                recs = []
                for _ in range(n):
                    late = rng.random() < 0.01
                    page = rng.choice(["/", "/cart", "/search", "/item", "/checkout"])
                    body = (f'{{"page":"{page}","user":{rng.randrange(50000)},"ms":{rng.randrange(20, 900)}}}'
                            + " " * rng.randrange(0, 400)).encode()
                    recs.append(Record(None, body, timestamp=ts - (3 * HOUR if late else 0)))
                w.append(build_batch(recs, compression=[2, 3, 1, 0][(ts // DAY) % 4]))
                ts += rng.randrange(60_000, 240_000)
    # payments: an idempotent, transactional producer; one transaction aborted
    with PartitionWriter(logs, "payments", 0) as w:
        seq = 0
        for t in range(40):
            ts = T0 + t * 5 * HOUR
            recs = [Record(f"pay-{t}-{i}".encode(), b'{"amount":' + str(rng.randrange(100, 99999)).encode() + b"}",
                           timestamp=ts + i) for i in range(5)]
            w.append(build_batch(recs, producer_id=4001, producer_epoch=2, base_sequence=seq, is_transactional=True,
                                 compression=4))
            seq += 5
            w.append(build_end_txn_marker_batch(commit=t % 13 != 7, producer_id=4001, producer_epoch=2,
                                                coordinator_epoch=0, timestamp=ts + 10))


def compose_picture(base: str, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt

    charts = [("compaction", "compaction_bytes.png", "compaction_report: bytes one cleaning pass removes"),
              ("retention", "retention_bytes_by_age.png", "retention_report: bytes by age"),
              ("profile", "profile_hourly.png", "topic_profile: traffic per hour"),
              ("profile", "profile_compression.png", "topic_profile: compression ratio per codec")]
    fig, axes = plt.subplots(2, 2, figsize=(16, 10))
    for ax, (d, name, title) in zip(axes.flat, charts):
        ax.imshow(mpimg.imread(os.path.join(base, d, name)))
        ax.set_title(title, fontsize=12)
        ax.axis("off")
    fig.suptitle("odradek spark_jobs: reports on a demo log directory (python -m spark_jobs.demo)", fontsize=15)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=70)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m spark_jobs.demo", description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/odradek-demo")
    ap.add_argument("--master", default=None)
    ap.add_argument("--picture", default=None, help="also write a composite PNG of the reports here")
    args = ap.parse_args(argv)
    logs = os.path.join(args.dir, "logs")
    write_demo(logs)
    from spark_jobs import compaction_report, retention_report, topic_profile
    from spark_jobs.common import get_spark

    spark = get_spark(args.master, "odradek-demo")
    common = ["--log-dirs", logs, "--now-ms", str(NOW)] + (["--master", args.master] if args.master else [])
    compaction_report.main(common + ["--out", os.path.join(args.dir, "compaction")], spark=spark)
    retention_report.main(common + ["--out", os.path.join(args.dir, "retention"), "--what-if",
                                    "retention.ms=259200000"], spark=spark)
    topic_profile.main(common + ["--out", os.path.join(args.dir, "profile")], spark=spark)
    if args.picture:
        compose_picture(args.dir, args.picture)
        print(f"picture: {args.picture}")


if __name__ == "__main__":
    main()
