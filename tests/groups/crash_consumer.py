"""A confluent-kafka group member run as its own process so a test can SIGKILL it.

It processes records and commits every 4th one until it has processed ``--commit-until`` records,
then keeps processing without committing (the work a crash loses) and prints READY. Every processed
record is printed as ``R partition offset`` and every successful commit as ``C partition offset``
(the committed next offset), flushed at once.
"""

import argparse
import sys

from confluent_kafka import Consumer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--commit-until", type=int, default=20)
    ap.add_argument("--session-timeout-ms", type=int, default=3000)
    a = ap.parse_args()

    def out(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": a.group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": a.session_timeout_ms,
                  "heartbeat.interval.ms": 300, "client.id": "doomed"})
    c.subscribe([a.topic], on_assign=lambda _c, ps: out("A " + ",".join(str(p.partition) for p in ps)))
    n = 0
    ready = False
    while True:
        m = c.poll(0.1)
        if m is None or m.error():
            continue
        n += 1
        out(f"R {m.partition()} {m.offset()}")
        if n <= a.commit_until and n % 4 == 0:
            for tp in c.commit(asynchronous=False):
                if tp.offset >= 0 and tp.error is None:  # partitions without a position are not committed
                    out(f"C {tp.partition} {tp.offset}")
        if n > a.commit_until and not ready:
            ready = True
            out("READY")


if __name__ == "__main__":
    main()
