"""One share consumer of the share-group fault test (tests/integration/test_share_faults.py) in a process of its own,
so that the test can kill it -9 at any point: a confluent-kafka ``ShareConsumer`` in explicit acknowledgement mode,
subscribed to ``--topic`` in share group ``--group``, acknowledges each record it gets with a type drawn from
``--seed`` (``ACK_WEIGHTS``: mostly Accept, some Release, a few Reject).

What it sees goes to stdout as tests/jepsen/history.py's share events under ``--name``, one JSON line each
(``Event.to_json``; times from the host's one monotonic clock, so the test merges them with its own), written and
flushed *before* acting on it: a delivery (with ``Message.delivery_count()``) before its acknowledgement, a
``share_ack`` before ``acknowledge`` (the next poll or commit may send it), the acknowledgement commit callback's
answers as they come. So a process killed -9 has told everything it did but the acknowledgements it sent that were
not answered yet (they may or may not have taken effect) and the records of a fetch it never handed out.
Other lines are ``{"event": ...}``: ``ready`` (subscribed), ``fatal`` (a fatal consumer error: it exits 3),
``error`` (an exception: exits 2). SIGTERM stops it between polls: it commits its last acknowledgements
(``commit_sync``, answered through the callback), records its close, closes and exits 0.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import time

from confluent_kafka import AcknowledgeType, ShareConsumer

from tests.jepsen.history import ACCEPT, REJECT, RELEASE, JournaledHistory

ACK_WEIGHTS = ((ACCEPT, 85), (RELEASE, 12), (REJECT, 3))
ACK_TYPES = {ACCEPT: AcknowledgeType.ACCEPT, RELEASE: AcknowledgeType.RELEASE, REJECT: AcknowledgeType.REJECT}
FATAL, FAILED = 3, 2


def say(**what) -> None:
    print(json.dumps(what), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--run-seconds", type=float, default=1800.0, help="an upper bound on this process's life")
    args = ap.parse_args(argv)

    stop: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    history = JournaledHistory(sys.stdout)
    rng = random.Random(args.seed)
    kinds, weights = [k for k, _ in ACK_WEIGHTS], [w for _, w in ACK_WEIGHTS]
    consumer = ShareConsumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                              "share.acknowledgement.mode": "explicit"})

    def answered(offsets, exc) -> None:
        error = None if exc is None else str(exc.args[0].name() if exc.args else exc)
        for tp, offs in offsets.items():
            history.share_ack_result(args.name, tp.partition, offs, error if tp.error is None else tp.error.name())

    consumer.set_acknowledgement_commit_callback(answered)
    consumer.subscribe([args.topic])
    created = time.monotonic()
    say(event="ready", name=args.name)
    status = 0
    try:
        previous_start, end = created, created + args.run_seconds
        while not stop and time.monotonic() < end:
            start = time.monotonic()
            for m in consumer.poll(0.5):
                if m.error() is not None:
                    if m.error().fatal():
                        say(event="fatal", name=args.name, error=str(m.error()))
                        return FATAL
                    continue
                # a response that arrived after the previous poll returned may be handed out by this one
                history.share_acquire(args.name, m.partition(), m.offset(), m.value(), m.delivery_count(),
                                      since=previous_start)
                kind = rng.choices(kinds, weights)[0]
                history.share_ack(args.name, m.partition(), m.offset(), kind)
                consumer.acknowledge(m, ACK_TYPES[kind])
            previous_start = start
        consumer.commit_sync(30)  # the last acknowledgements, answered through the callback
    except Exception as exc:  # noqa: BLE001 - any consumer failure is a finding, reported by the test
        say(event="error", name=args.name, error=f"{type(exc).__name__}: {exc}")
        status = FAILED
    history.share_close(args.name)
    try:
        consumer.close()
    except Exception as exc:  # noqa: BLE001
        say(event="error", name=args.name, error=f"close: {type(exc).__name__}: {exc}")
        status = FAILED
    return status


if __name__ == "__main__":
    sys.exit(main())
