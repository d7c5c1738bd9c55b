"""A producer quota and a consumer quota over time, each with a client beside it (issue 29): one ``odradek serve``,
a 1 MB/s ``producer_byte_rate`` for client id ``limited-produce`` and a 1 MB/s ``consumer_byte_rate`` for client id
``limited-consume`` (AlterClientQuotas), Kafka's default windows (11 x 1 s; ``--window-num``, ``--window-size``).

Run:  .venv/bin/python benchmarks/bench_quotas.py [--half produce|consume|both] [--seconds 30] [--quota 1000000]
                                                   [--window-num 11] [--window-size 1] [--json out.json]

Each half: first the ``free`` client alone for ``--solo`` seconds (its solo rate); then ``limited`` and ``free``
together for ``--seconds``, each a confluent-kafka client in its own process, 1 KiB records: ``limited`` at full
speed, ``free`` offering ``--free-rate`` (20 MB/s). Producers write acks=1 to a topic each; the consumers read one
topic pre-filled with ``--prefill-mb`` MB (from offset 0, again from 0 at its end). Printed: ``limited``'s
acknowledged (or read) bytes of record values per second over [12 s, end] against the quota (target: within
+-20 %), over the whole run, and in each second; the largest throttle_time_ms librdkafka saw (its statistics);
``free``'s rate beside it against its solo rate (target: within 10 %); and what Kafka's quota gives the same
client by its algorithm alone (``kafka_model``: cluster/quotas.py's figures, which are Kafka's, see
kafka_quota_crosscheck.py). A client at full speed gets its quota in bursts of ten windows' worth about every
eleven and a half seconds (benchmarks/README.md), so its [12 s, end] figure depends on where the bursts fall; the
model shows where they fall for this client. Nothing is asserted; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import bench_broker  # noqa: E402
from broker.network.blocking_request import request  # noqa: E402
from cluster.quotas import CLIENT_ID, CONSUMER_BYTE_RATE, ClientQuotaManager  # noqa: E402
from protocol.generated.messages import AlterClientQuotasRequest  # noqa: E402
from protocol.generated.messages.alter_client_quotas_request import EntityData, EntryData, OpData  # noqa: E402


def loadavg() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def set_quota(port: int, client_id: str, rate: float, key: str = "producer_byte_rate") -> None:
    r = request(port, AlterClientQuotasRequest(entries=[EntryData(
        entity=[EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[OpData(key=key, value=rate, remove=False)])], validate_only=False), 1, timeout=30)
    assert all(e.error_code == 0 for e in r.entries), r


class Producing:
    """A producer at full speed in a process of its own (two in one process would share its interpreter lock, and
    the throttled one's spinning would slow the other); ``marks``: (seconds, acknowledged bytes) every 0.5 s."""

    def __init__(self, bootstrap: str, client_id: str, topic: str, seconds: float, rate: float = 0.0) -> None:
        self.bootstrap, self.client_id, self.topic, self.seconds = bootstrap, client_id, topic, seconds
        self.acked = 0
        self.marks: list[tuple[float, int]] = []
        self.throttle_max = 0
        self.first_at: float | None = None  # seconds: the first record read (consumers)
        self._queue = multiprocessing.get_context("spawn").Queue()
        self._process = multiprocessing.get_context("spawn").Process(target=_produce, args=(
            bootstrap, client_id, topic, seconds, self._queue, rate), daemon=True)

    def start(self) -> None:
        self._process.start()

    def join(self) -> None:
        self.marks, self.throttle_max, self.first_at = self._queue.get(timeout=self.seconds + 120)
        self._process.join(30)


def _produce(bootstrap: str, client_id: str, topic: str, seconds: float, queue, rate: float) -> None:
    sys.path.insert(0, REPO)
    state = _Run(bootstrap, client_id, topic, seconds, rate)
    state.run()
    queue.put((state.marks, state.throttle_max, state.first_at))


class _Run:
    def __init__(self, bootstrap: str, client_id: str, topic: str, seconds: float, rate: float) -> None:
        self.bootstrap, self.client_id, self.topic, self.seconds = bootstrap, client_id, topic, seconds
        self.rate = rate  # bytes/s to offer (0: as fast as possible)
        self.acked = 0
        self.marks: list[tuple[float, int]] = []
        self.throttle_max = 0
        self.first_at: float | None = None

    def run(self) -> None:
        from confluent_kafka import Producer

        def stats(text: str) -> None:
            for b in json.loads(text).get("brokers", {}).values():
                self.throttle_max = max(self.throttle_max, b.get("throttle", {}).get("max", 0))

        def delivered(err, msg) -> None:
            if err is None:
                if self.first_at is None:
                    self.first_at = time.monotonic() - started
                self.acked += len(msg.value())

        p = Producer({"bootstrap.servers": self.bootstrap, "client.id": self.client_id, "linger.ms": 5,
                      "acks": 1, "batch.size": 65536, "queue.buffering.max.kbytes": 4096,
                      "statistics.interval.ms": 1000, "stats_cb": stats})
        value = b"q" * 1024
        started = time.monotonic()
        next_mark = started
        offered = 0
        while (now := time.monotonic()) < started + self.seconds:
            if self.rate and offered > self.rate * (now - started):
                time.sleep(0.001)
                p.poll(0)
                continue
            offered += len(value)
            try:
                p.produce(self.topic, value, on_delivery=delivered)
            except BufferError:
                p.poll(0.01)
            p.poll(0)
            if now >= next_mark:
                self.marks.append((now - started, self.acked))
                next_mark += 0.5
        self.marks.append((time.monotonic() - started, self.acked))
        p.purge()
        p.flush(10)


class Consuming(Producing):
    """A consumer in a process of its own reading ``topic`` (one partition) from offset 0, again from 0 at its end,
    at full speed or offering to read ``rate`` bytes/s; ``marks``: (seconds, bytes of record values read)."""

    def __init__(self, bootstrap: str, client_id: str, topic: str, seconds: float, rate: float = 0.0) -> None:
        super().__init__(bootstrap, client_id, topic, seconds, rate)
        self._process = multiprocessing.get_context("spawn").Process(target=_consume, args=(
            bootstrap, client_id, topic, seconds, self._queue, rate), daemon=True)


def _consume(bootstrap: str, client_id: str, topic: str, seconds: float, queue, rate: float) -> None:
    sys.path.insert(0, REPO)
    state = _Read(bootstrap, client_id, topic, seconds, rate)
    state.run()
    queue.put((state.marks, state.throttle_max, state.first_at))


class _Read(_Run):
    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        def stats(text: str) -> None:
            for b in json.loads(text).get("brokers", {}).values():
                self.throttle_max = max(self.throttle_max, b.get("throttle", {}).get("max", 0))

        c = Consumer({"bootstrap.servers": self.bootstrap, "client.id": self.client_id,
                      "group.id": f"{self.client_id}-group", "enable.auto.commit": False,
                      "enable.partition.eof": True, "queued.max.messages.kbytes": 4096,
                      "statistics.interval.ms": 1000, "stats_cb": stats})
        c.assign([TopicPartition(self.topic, 0, 0)])
        read = 0
        started = time.monotonic()
        next_mark = started
        try:
            while (now := time.monotonic()) < started + self.seconds:
                if now >= next_mark:
                    self.marks.append((now - started, read))
                    next_mark += 0.5
                if self.rate and read > self.rate * (now - started):
                    time.sleep(0.002)
                    continue
                for m in c.consume(500, 0.1):
                    if m.error() is None:
                        if self.first_at is None:
                            self.first_at = time.monotonic() - started
                        read += len(m.value())
                    elif m.error().code() == KafkaError._PARTITION_EOF:
                        c.seek(TopicPartition(self.topic, 0, 0))  # round again: the topic is finite
            self.marks.append((time.monotonic() - started, read))
        finally:
            c.close()


def prefill(bootstrap: str, topic: str, megabytes: int) -> None:
    """``megabytes`` MB of 1 KiB records in one partition, acknowledged."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": 1, "batch.size": 1_000_000})
    value = b"c" * 1024
    for _ in range(megabytes * 1_000_000 // len(value)):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(120) == 0, "prefill not acknowledged"


def run_half(b, kind: type[Producing], key: str, args, label: str) -> dict:
    """``free`` alone for ``--solo`` seconds, then ``limited`` (the 1 MB/s ``key`` quota, full speed) beside
    ``free`` (offering ``--free-rate``) for ``--seconds``."""
    topic = {"producer_byte_rate": ("limited-topic", "free-topic"), "consumer_byte_rate": ("read-topic",) * 2}[key]
    set_quota(b.port, f"limited-{label}", args.quota, key)
    solo = kind(b.bootstrap, f"free-{label}", topic[1], args.solo, args.free_rate)
    solo.start()
    solo.join()
    solo_rate = rate_between(solo.marks, 2.0, args.solo)
    limited = kind(b.bootstrap, f"limited-{label}", topic[0], args.seconds)
    free = kind(b.bootstrap, f"free-{label}", topic[1], args.seconds, args.free_rate)
    limited.start()
    free.start()
    limited.join()
    free.join()
    limited_rate = rate_between(limited.marks, 12.0, args.seconds)
    free_rate = rate_between(free.marks, 12.0, args.seconds)
    whole_rate = rate_between(limited.marks, 0.0, args.seconds)
    model = None
    if limited.first_at is not None:
        model = kafka_model(key, args.quota, REQUEST_BYTES[key], limited.first_at, args.seconds, args.window_num,
                            args.window_size)
    out = {"quota": args.quota, "limited_rate_12s_on": limited_rate, "kafka_model": model,
           "limited_vs_quota": limited_rate / args.quota,
           "limited_vs_quota_whole_run": whole_rate / args.quota, "limited_mb_per_second": per_second(limited.marks),
           "limited_throttle_max_ms": limited.throttle_max, "free_solo_rate": solo_rate,
           "free_rate_beside": free_rate, "free_vs_solo": free_rate / solo_rate, "load_average_end": loadavg(),
           "limited_marks": [(round(t, 2), n) for t, n in limited.marks]}
    print(f"{label}: limited ({key} {args.quota / 1e6:.2f} MB/s): {limited_rate / 1e6:.3f} MB/s from 12 s to "
          f"{args.seconds:.0f} s = {out['limited_vs_quota']:.2f} of the quota (target 0.8-1.2); throttle_time_ms up "
          f"to {limited.throttle_max} (target > 0)")
    print(f"{label}: limited over the whole run (0-{args.seconds:.0f} s): {out['limited_vs_quota_whole_run']:.2f} "
          f"of the quota; MB per second: {' '.join(f'{x:.1f}' for x in out['limited_mb_per_second'])}")
    if model is not None:
        print(f"{label}: Kafka's quota by its algorithm for a client of {model['request_bytes']:,} B requests sent "
              f"as soon as let, first at {model['first_at']:.2f} s: {model['vs_quota_12s_on']:.2f} of the quota from "
              f"12 s, "
              f"{model['vs_quota_whole_run']:.2f} over the run; MB per second: "
              f"{' '.join(f'{x:.1f}' for x in model['mb_per_second'])}")
    print(f"{label}: free beside it: {free_rate / 1e6:.1f} MB/s, solo {solo_rate / 1e6:.1f} MB/s, ratio "
          f"{out['free_vs_solo']:.2f} (target >= 0.9); load average {out['load_average_end']}", flush=True)
    return out


def rate_between(marks: list[tuple[float, int]], t0: float, t1: float) -> float:
    a = min(marks, key=lambda m: abs(m[0] - t0))
    b = min(marks, key=lambda m: abs(m[0] - t1))
    return (b[1] - a[1]) / max(b[0] - a[0], 1e-9)


REQUEST_BYTES = {  # what one request of the limited client weighs against its quota
    # a fetch answer: librdkafka's max.partition.fetch.bytes (records cut there) and the answer's other 73 bytes
    # (FetchResponse.sizeOf counts them)
    "consumer_byte_rate": 1048576 + 73,
    # a produce request: one batch of about batch.size (65536 above) and the request's own bytes (about)
    "producer_byte_rate": 65536 + 100,
}


def kafka_model(key: str, quota: float, request_bytes: int, first_at: float, seconds: float, window_num: int,
                window_s: int, turn_ms: int = 2) -> dict:
    """What Kafka's quota gives a client whose requests of ``request_bytes`` follow each other as soon as the broker
    reads them (``turn_ms`` apart, or once a throttle time has passed: the connection is muted), its first at
    ``first_at`` s: cluster/quotas.py's rate and throttle time (Kafka's Rate over SampledStat and QuotaUtils: the
    same figures, kafka_quota_crosscheck.py); a produce is recorded and appended, a fetch over the quota is answered
    empty and taken back (KIP-219, unrecordQuotaSensor). The figure to hold the broker's against: the algorithm's,
    with no network, client or CPU in it."""
    m = ClientQuotaManager(key, window_num, window_s)
    m.update({((CLIENT_ID, "model"),): {key: quota}})
    t, end, marks, got = int(first_at * 1000), int(seconds * 1000), [(0.0, 0)], 0
    while t < end:
        throttle = m.record("", "model", request_bytes, t)
        if throttle and key == CONSUMER_BYTE_RATE:
            m.unrecord("", "model", request_bytes, t)
        else:
            got += request_bytes
            marks.append((t / 1000.0, got))
        t += max(throttle, turn_ms)
    marks.append((seconds, got))
    return {"request_bytes": request_bytes, "first_at": first_at,
            "vs_quota_12s_on": (got - _upto(marks, 12.0)) / (seconds - 12.0) / quota,
            "vs_quota_whole_run": got / seconds / quota,
            "mb_per_second": [(_upto(marks, s + 1.0) - _upto(marks, float(s))) / 1e6 for s in range(int(seconds))]}


def _upto(marks: list[tuple[float, int]], t: float) -> int:
    """Bytes read before ``t``."""
    return max((n for at, n in marks if at < t), default=0)


def per_second(marks: list[tuple[float, int]]) -> list[float]:
    """MB read or acknowledged in each whole second of the run (from the 0.5 s marks)."""
    return [(_at(marks, s + 1.0) - _at(marks, float(s))) / 1e6 for s in range(int(marks[-1][0]))]


def _at(marks: list[tuple[float, int]], t: float) -> int:
    return min(marks, key=lambda m: abs(m[0] - t))[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--solo", type=float, default=12.0)
    ap.add_argument("--quota", type=float, default=1_000_000.0)
    ap.add_argument("--free-rate", type=float, default=20e6, help="bytes/s the other client offers (0: all it "
                    "can; on a small machine that measures CPU shared with the limited client, not the broker)")
    ap.add_argument("--half", choices=("produce", "consume", "both"), default="both",
                    help="the producer quota, the consumer quota, or both (one after the other, on one broker)")
    ap.add_argument("--prefill-mb", type=int, default=64, help="MB of 1 KiB records the consumers read (again "
                    "from the start at its end)")
    ap.add_argument("--window-num", type=int, default=11, help="quota.window.num (Kafka's default: 11)")
    ap.add_argument("--window-size", type=int, default=1, help="quota.window.size.seconds (Kafka's default: 1)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    windows = {"quota.window.num": args.window_num, "quota.window.size.seconds": args.window_size}
    print(f"load average {loadavg()} at the start; quota windows {args.window_num} x {args.window_size} s", flush=True)
    out: dict = {}
    with tempfile.TemporaryDirectory() as workdir:
        b = bench_broker.start_odradek(workdir, "odradek-quotas", overrides=windows)
        try:
            if args.half in ("produce", "both"):
                bench_broker.create_topic(b.client, "limited-topic", 1)
                bench_broker.create_topic(b.client, "free-topic", 1)
                out = run_half(b, Producing, "producer_byte_rate", args, "produce")
            if args.half in ("consume", "both"):
                bench_broker.create_topic(b.client, "read-topic", 1)
                prefill(b.bootstrap, "read-topic", args.prefill_mb)
                out["consume"] = run_half(b, Consuming, "consumer_byte_rate", args, "consume")
        finally:
            b.stop()
    print(f"load average {loadavg()} at the end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
