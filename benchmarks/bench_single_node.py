"""A single node's start-up and metadata commits, two builds side by side (interleaved runs, one machine).

For each build (a source tree: this checkout and, say, a ``git worktree`` of an older commit), ``--runs`` times:

* fresh: ``odradek serve`` on an empty directory until the first acknowledged produce (acks=all, a topic made by
  auto-creation; the client polls every 5 ms on raw Kafka requests);
* clean restart: SIGTERM, then ``serve`` again on the same directory until the next acknowledged produce;
* kill -9 restart: SIGKILL, then the same;
* commits: 200 CreateTopics one after another (each answered once its records are committed), p50 and p99.

    .venv/bin/python benchmarks/bench_single_node.py --build before=/tmp/before --build after=. --runs 5

Prints the medians per build and the ratio of the last build to the first.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from protocol.generated.messages import CreateTopicsRequest, MetadataRequest, ProduceRequest  # noqa: E402
from protocol.generated.messages.create_topics_request import CreatableTopic  # noqa: E402
from protocol.generated.messages.metadata_request import MetadataRequestTopic  # noqa: E402
from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData  # noqa: E402
from protocol.record_codec import Record, build_batch  # noqa: E402
from tests.kafka_wire import KafkaWire  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    def __init__(self, source: Path, data: Path) -> None:
        self.source, self.data, self.port = source, data, free_port()
        self.proc: subprocess.Popen | None = None

    def start(self) -> float:
        """Seconds from spawning ``serve`` to the first acknowledged produce."""
        overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                     "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}", "log.dirs": str(self.data),
                     "offsets.topic.replication.factor": 1, "metrics.prometheus.listener": ""}
        args = [sys.executable, "-m", "broker.cli", "serve"]
        for k, v in overrides.items():
            args += ["--override", f"{k}={v}"]
        started = time.monotonic()
        self.proc = subprocess.Popen(args, cwd=self.source, env={**os.environ, "PYTHONPATH": str(self.source)},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        batch = build_batch([Record(value=b"x")])
        while time.monotonic() - started < 60:  # a client polling every 5 ms: no client library's backoffs
            try:
                with KafkaWire(self.port, timeout=10) as w:
                    md = w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name="bench-start")],
                                                       allow_auto_topic_creation=True))
                    if md.topics[0].error_code or md.topics[0].partitions[0].leader_id < 0:
                        raise ConnectionError("no leader yet")
                    r = w.call(0, 9, ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[TopicProduceData(
                        name="bench-start", partition_data=[PartitionProduceData(index=0, records=batch)])]))
                    if r.responses[0].partition_responses[0].error_code == 0:
                        return time.monotonic() - started
            except (ConnectionError, OSError, IndexError):
                pass  # not listening, no leader or no partition yet: poll again
            time.sleep(0.005)
        raise RuntimeError("no acknowledged produce within 60 s")

    def stop(self, sig: int) -> None:
        self.proc.send_signal(sig)
        self.proc.wait(timeout=60)

    def commit_latencies(self, n: int) -> list[float]:
        out = []
        with KafkaWire(self.port) as w:
            for i in range(n):
                t = time.monotonic()
                r = w.call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(
                    name=f"commit-{time.time_ns()}-{i}", num_partitions=1, replication_factor=1)], timeout_ms=10000))
                out.append((time.monotonic() - t) * 1000)
                assert r.topics[0].error_code == 0
        return out


def one_run(source: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-single-") as d:
        node = Node(source, Path(d) / "data")
        fresh = node.start()
        lat = node.commit_latencies(200)
        node.stop(signal.SIGTERM)
        clean = node.start()
        node.stop(signal.SIGKILL)
        killed = node.start()
        node.stop(signal.SIGTERM)
    lat.sort()
    return {"fresh s": fresh, "clean restart s": clean, "kill -9 restart s": killed,
            "commit p50 ms": lat[len(lat) // 2], "commit p99 ms": lat[int(len(lat) * 0.99) - 1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append", required=True, metavar="NAME=SOURCE")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    builds = [(b.partition("=")[0], Path(b.partition("=")[2]).resolve()) for b in args.build]
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in builds}
    for run in range(args.runs):
        order = builds if run % 2 == 0 else builds[::-1]  # interleaved, alternating which goes first
        for name, source in order:
            r = one_run(source)
            results[name].append(r)
            print(f"run {run} {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in r.items()), flush=True)
    keys = list(results[builds[0][0]][0])
    print(f"\nmedians of {args.runs} runs")
    print(f"{'':22}" + "".join(f"{name:>12}" for name, _ in builds) + f"{'ratio':>10}")
    for k in keys:
        meds = [statistics.median(r[k] for r in results[name]) for name, _ in builds]
        print(f"{k:22}" + "".join(f"{m:12.3f}" for m in meds) + f"{meds[-1] / meds[0]:10.2f}")


if __name__ == "__main__":
    main()
