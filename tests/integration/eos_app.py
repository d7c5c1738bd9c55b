"""The exactly-once application of the EOS fault tests (tests/integration/test_eos_faults.py), run as its own
process so that it can be killed -9 at any point: a confluent-kafka consume-transform-produce loop.

It consumes ``--input`` in group ``--group`` (read_committed, no auto commit), and per batch of up to
``--max-batch`` records: begins a transaction, produces one output per input record to the same partition of
``--output`` (the value: the input's, ``|``, and a tag unique to this process and transaction, so that a record
processed again makes a new value), sends the batch's next offsets with the consumer's group metadata as of
the batch's consume (``send_offsets_to_transaction``, KIP-447) and commits. The transactional id is
``eos-<slot>``: an instance restarted after a kill takes its predecessor's id, so its ``init_transactions``
fences the predecessor and aborts its open transaction.

Everything goes into a journal (tests/jepsen/history.JournaledHistory) under ``--name``. Just before
``commit_transaction`` it records ``txn_end_unknown`` ("commit sent"): a transaction of a killed instance
without one never had its EndTxn(commit) sent and can only have aborted; one with it may have committed. A
commit answered later records ``txn_commit_ok``, which settles it.

An abortable error (a fenced group generation, KIP-447) aborts the transaction and rewinds to the group's
committed offsets; a retriable error on commit retries it; a fatal one exits with status 3; a
``send_offsets_to_transaction`` that never returns (a librdkafka bug, see ``WATCHDOG_S``) with status 4.
``--pause-when-shared`` stops this process (SIGSTOP, by itself) in its first transaction that begins while it
holds fewer than all input partitions, after the transaction's records are acknowledged and before its offsets
are sent: the zombie of the fencing test, resumed by the test with SIGCONT. Lines of JSON on stdout say what
it did (assignments, errors, the pause); SIGTERM stops it between transactions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from tests.jepsen.history import JournaledHistory
from tests.jepsen.workload import TransactionalRecorder

COMMIT_SENT = "commit sent"  # the txn_end_unknown recorded before commit_transaction
SEND_OFFSETS_TIMEOUT_S = 20
# librdkafka's send_offsets_to_transaction can block for good when the group coordinator's broker dies and drops
# out of Metadata (confluentinc/librdkafka#5511: the decommissioned coordinator stays cached; #5456: the call's
# timeout is never checked); the app then exits with HUNG, as a supervisor would restart a stuck process
WATCHDOG_S = SEND_OFFSETS_TIMEOUT_S + 10
HUNG = 4
RECONNECT_BACKOFF_MAX_MS = 1000


def say(**what) -> None:
    print(json.dumps(what), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--slot", type=int, required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--journal", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-batch", type=int, default=200)
    ap.add_argument("--pause-when-shared", action="store_true")
    ap.add_argument("--run-seconds", type=float, default=600.0, help="an upper bound on this process's life")
    args = ap.parse_args(argv)

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    rng = random.Random(args.seed)
    history = JournaledHistory(args.journal)
    partitions: dict[str, int] = {}

    def on_assign(consumer, tps):
        say(event="assigned", name=args.name, partitions=sorted(tp.partition for tp in tps))

    def on_revoke(consumer, tps):
        say(event="revoked", name=args.name, partitions=sorted(tp.partition for tp in tps))

    # librdkafka backs its reconnects to a dead broker off up to reconnect.backoff.max.ms (10 s; the Java
    # client's default is 1 s), and it asks for a moved coordinator only after such a reconnect fails: after a
    # coordinator's kill it found the new one 0-5 s after the move, a run's largest random delay
    backoff = {"reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS}
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group, **backoff,
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 100})
    debug = {"debug": os.environ["EOS_APP_DEBUG"]} if os.environ.get("EOS_APP_DEBUG") else {}  # librdkafka's
    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": f"eos-{args.slot}", **backoff,
                         "transaction.timeout.ms": 60000, "acks": "all", "linger.ms": 5, **debug})
    producer.init_transactions(120)
    say(event="ready", name=args.name, pid=os.getpid())
    n_partitions = len(consumer.list_topics(args.input, timeout=30).topics[args.input].partitions)
    partitions["n"] = n_partitions
    consumer.subscribe([args.input], on_assign=on_assign, on_revoke=on_revoke)
    recorder = TransactionalRecorder(producer, history, args.name, args.output)
    paused = not args.pause_when_shared
    committed = 0
    deadline = time.monotonic() + args.run_seconds
    try:
        while not stop and time.monotonic() < deadline:
            msgs = [m for m in consumer.consume(rng.randint(1, args.max_batch), 0.3) if m.error() is None]
            if not msgs:
                continue
            # the generation the batch was consumed in: a zombie must not pick up a newer one while it resumes
            group_metadata = consumer.consumer_group_metadata()
            txn = recorder.begin()
            next_offsets: dict[int, int] = {}
            for m in msgs:
                recorder.produce(m.value() + b"|" + txn.encode(), m.partition(),
                                 source=(m.partition(), m.offset(), m.value()))
                next_offsets[m.partition()] = m.offset() + 1
            if not paused and len(consumer.assignment()) < n_partitions:
                paused = True
                producer.flush(60)  # the records are in the log, in the open transaction
                say(event="pausing", name=args.name, txn=txn, records=len(msgs))
                os.kill(os.getpid(), signal.SIGSTOP)
                say(event="resumed", name=args.name, txn=txn)
            offsets = [TopicPartition(args.input, p, o) for p, o in sorted(next_offsets.items())]
            try:
                _send_offsets(recorder, offsets, group_metadata, txn)
                history.txn_end_unknown(args.name, txn, COMMIT_SENT)
                _commit(recorder, txn)
                committed += len(msgs)
            except KafkaException as exc:
                error = exc.args[0]
                say(event="txn_error", name=args.name, txn=txn, code=error.name(), fatal=error.fatal(),
                    abortable=error.txn_requires_abort(), retriable=error.retriable(), message=error.str())
                if error.fatal() or not error.txn_requires_abort():
                    return 3
                recorder.abort(60)
                _rewind(consumer)
    finally:
        say(event="exit", name=args.name, committed=committed)
        try:
            consumer.close()
        finally:
            history.close()
    return 0


def _send_offsets(recorder: TransactionalRecorder, offsets, group_metadata, txn: str, attempts: int = 5) -> None:
    """send_offsets_to_transaction, called again after a retriable error (its timeout while a coordinator
    moves), each call under the watchdog."""
    def hung() -> None:
        say(event="client_hang", call="send_offsets_to_transaction", txn=txn, after_s=WATCHDOG_S)
        os._exit(HUNG)

    for attempt in range(attempts):
        watchdog = threading.Timer(WATCHDOG_S, hung)
        watchdog.daemon = True
        watchdog.start()
        try:
            recorder.send_offsets(offsets, group_metadata, SEND_OFFSETS_TIMEOUT_S)
            return
        except KafkaException as exc:
            error = exc.args[0]
            if not error.retriable() or error.txn_requires_abort() or attempt == attempts - 1:
                raise
            say(event="send_offsets_retry", txn=txn, code=error.name())
        finally:
            watchdog.cancel()


def _commit(recorder: TransactionalRecorder, txn: str, attempts: int = 5) -> None:
    """commit_transaction, retried while its error is retriable (a coordinator moving): KIP-98 lets the
    same commit be sent again."""
    for attempt in range(attempts):
        try:
            recorder.commit(60)
            return
        except KafkaException as exc:
            error = exc.args[0]
            if not error.retriable() or attempt == attempts - 1:
                raise
            say(event="commit_retry", txn=txn, code=error.name())


def _rewind(consumer: Consumer) -> None:
    """After an abort: back to the group's committed offsets (a rebalance may have taken the partitions
    already: then the next assignment starts from them anyway)."""
    try:
        assignment = consumer.assignment()
        for tp in consumer.committed(assignment, timeout=30):
            consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
        say(event="rewound", partitions=sorted(tp.partition for tp in assignment))
    except KafkaException as exc:
        say(event="rewind_failed", error=str(exc))


if __name__ == "__main__":
    sys.exit(main())
