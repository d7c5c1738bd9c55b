"""Bad storage under one ``odradek serve`` node (issue 31, "The cluster at scale", "Bad input"), on a raw socket.

* Out of file descriptors: a node restarted under an ``RLIMIT_NOFILE`` (soft and hard) that holds only
  part of its partitions opens what fits beside the rest (storage/handles.py's budget); the others go offline with
  one log line each and answer KAFKA_STORAGE_ERROR to Produce, Fetch and ListOffsets, and Metadata shows them as
  Kafka shows a replica on an offline log dir (no leader, the node among the offline replicas). The node keeps
  serving the opened ones (appends that roll segments past the inactive-segment cache included), partitions created
  meanwhile go offline too, and after a restart with room every partition serves every acknowledged record.
* A damaged log dir (1,000 partitions, ``ODRADEK_SOAK=1``: 10,000): acknowledged records flushed and
  checkpointed, then kill -9, then damage as a crash or a disk leaves it: a torn write after the acknowledged
  data (half a batch, a batch whose CRC fails, garbage), missing offset and time indexes, garbage dir-level
  checkpoints. Each damaged partition is repaired with one log line, the undamaged ones with none, and every
  acknowledged record is served at its offset; a second crash with a garbage recovery-point checkpoint recovers
  every log from its start, losing nothing.

In a single node the broker stays fenced, leading nothing, until its last log is loaded (as Kafka's does): while the
damaged logs are repaired it answers, with the retriable NOT_LEADER_OR_FOLLOWER, but no partition takes records;
that partitions open as their logs load is tests/broker/test_startup_loading.py's. Every wait here is bounded and
the node is stopped when a test fails.
"""

from __future__ import annotations

import os
import random
import re
import resource
import sys
import time
from pathlib import Path

from protocol.errors import ErrorCode
from protocol.generated.messages import (
    CreateTopicsRequest, DescribeTopicPartitionsRequest, FetchRequest, ListOffsetsRequest, MetadataRequest,
    ProduceRequest,
)
from protocol.generated.messages.create_topics_request import CreatableTopic, CreatableTopicConfig
from protocol.generated.messages.describe_topic_partitions_request import TopicRequest
from protocol.generated.messages.fetch_request import FetchPartition, FetchTopic
from protocol.generated.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from protocol.generated.messages.produce_request import PartitionProduceData, TopicProduceData
from protocol.record_codec import Record, build_batch, decode_batch
from protocol.records import iter_batch_positions
from storage.handles import MAX_OPEN_INACTIVE_SEGMENTS, SPARE_DESCRIPTORS
from tests.harness import BrokerProcess, wait_until
from tests.kafka_wire import KafkaWire

SOAK = os.environ.get("ODRADEK_SOAK") == "1"
PER_TOPIC = 100  # partitions per topic
PER_REQUEST = 1000  # partitions per Produce / Fetch / ListOffsets request

TP = tuple[str, int]


# ---- the wire ---------------------------------------------------------------------------------------------------

def create_topics(w: KafkaWire, names: list[str], config: dict | None = None) -> None:
    configs = [CreatableTopicConfig(name=k, value=str(v)) for k, v in (config or {}).items()]
    for i in range(0, len(names), 20):
        r = w.call(19, 7, CreateTopicsRequest(topics=[
            CreatableTopic(name=n, num_partitions=PER_TOPIC, replication_factor=1, configs=configs)
            for n in names[i:i + 20]], timeout_ms=60000))
        assert [t.error_code for t in r.topics] == [0] * len(r.topics), [(t.name, t.error_message) for t in r.topics]


def metadata(w: KafkaWire, names: list[str] | None = None) -> dict[TP, tuple[int, int, tuple[int, ...]]]:
    """(topic, partition) -> (error, leader, offline replicas) as the node answers Metadata."""
    r = w.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
    return {(t.name, p.partition_index): (p.error_code, p.leader_id, tuple(p.offline_replicas))
            for t in r.topics if names is None or t.name in names for p in t.partitions}


def described(w: KafkaWire, names: list[str]) -> dict[TP, tuple[int, tuple[int, ...]]]:
    """(topic, partition) -> (leader, offline replicas) as the node answers DescribeTopicPartitions."""
    r = w.call(75, 0, DescribeTopicPartitionsRequest(topics=[TopicRequest(name=n) for n in names],
                                                     response_partition_limit=len(names) * PER_TOPIC))
    return {(t.name, p.partition_index): (p.leader_id, tuple(p.offline_replicas)) for t in r.topics
            for p in t.partitions}


def wait_led(w: KafkaWire, names: list[str], timeout: float = 60) -> None:
    want = len(names) * PER_TOPIC
    wait_until(lambda: sum(1 for e, leader, _ in metadata(w, names).values() if e == 0 and leader >= 0) == want,
               timeout, what=f"{want} partitions led")


def by_topic(tps) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in tps:
        out.setdefault(t, []).append(p)
    return out


def chunks(tps: list[TP]):
    for i in range(0, len(tps), PER_REQUEST):
        yield by_topic(tps[i:i + PER_REQUEST])


def values_for(tp: TP, rnd: int, size: int) -> list[bytes]:
    return [(b"%s-%d-r%d-k%d-" % (tp[0].encode(), tp[1], rnd, k)).ljust(size, b".") for k in range(3)]


def produce(w: KafkaWire, tps: list[TP], rnd: int, acks: int, size: int = 40
            ) -> dict[TP, tuple[int, int, list[bytes]]]:
    """One batch of three records to each partition (raw ProduceRequests of up to PER_REQUEST partitions):
    tp -> (error, base offset, the values sent)."""
    out = {}
    for topics in chunks(tps):
        sent = {(t, p): values_for((t, p), rnd, size) for t, ps in topics.items() for p in ps}
        r = w.call(0, 9, ProduceRequest(transactional_id=None, acks=acks, timeout_ms=30000, topic_data=[
            TopicProduceData(name=t, partition_data=[
                PartitionProduceData(index=p, records=build_batch([Record(value=v) for v in sent[(t, p)]]))
                for p in ps]) for t, ps in topics.items()]))
        for tr in r.responses:
            for pr in tr.partition_responses:
                tp = (tr.name, pr.index)
                out[tp] = (pr.error_code, pr.base_offset, sent[tp])
    assert len(out) == len(tps)
    return out


def fetch(w: KafkaWire, tps: list[TP]) -> dict[TP, tuple[int, list[tuple[int, bytes]]]]:
    """Everything of each partition from offset 0 up to its high watermark (sessionless Fetch v12, one segment a read,
    so again from where the last read ended): tp -> (error, [(offset, value)])."""
    out: dict[TP, tuple[int, list[tuple[int, bytes]]]] = {tp: (0, []) for tp in tps}
    todo = list(tps)
    for _ in range(20):  # a few segments a partition here
        if not todo:
            break
        more = []
        for topics in chunks(todo):
            r = w.call(1, 12, FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=64 << 20, isolation_level=0, session_id=0,
                session_epoch=-1, rack_id="", topics=[FetchTopic(topic=t, partitions=[
                    FetchPartition(partition=p, fetch_offset=len(out[(t, p)][1]), partition_max_bytes=1 << 20)
                    for p in ps]) for t, ps in topics.items()]))
            for tr in r.responses:
                for pd in tr.partitions:
                    tp = (tr.topic, pd.partition_index)
                    data = bytes(pd.records or b"")
                    records = out[tp][1]
                    for pos, _ in iter_batch_positions(data):
                        records += [(rec.offset, rec.value) for rec in decode_batch(data, pos)[1]]
                    out[tp] = (pd.error_code, records)
                    if pd.error_code == 0 and data:
                        more.append(tp)
        todo = more
    assert not todo, todo[:5]
    return out


def latest(w: KafkaWire, tps: list[TP]) -> dict[TP, tuple[int, int]]:
    """tp -> (error, latest offset) from ListOffsets v7."""
    out = {}
    for topics in chunks(tps):
        r = w.call(2, 7, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsTopic(name=t, partitions=[ListOffsetsPartition(partition_index=p, current_leader_epoch=-1,
                                                                      timestamp=-1) for p in ps])
            for t, ps in topics.items()]))
        for tr in r.topics:
            for pr in tr.partitions:
                out[(tr.name, pr.partition_index)] = (pr.error_code, pr.offset)
    return out


def record_acks(acked: dict[TP, list[bytes]], answers: dict[TP, tuple[int, int, list[bytes]]]) -> None:
    """Append what was acknowledged, checking each lands at the offset after the last acknowledged one."""
    for tp, (err, base, values) in answers.items():
        if err == 0:
            assert base == len(acked[tp]), (tp, base, len(acked[tp]))
            acked[tp] += values


def assert_serves_every_acked_record(w: KafkaWire, acked: dict[TP, list[bytes]]) -> None:
    tps = sorted(acked)
    ends = latest(w, tps)
    wrong_end = {tp: (ends[tp], len(v)) for tp, v in acked.items() if ends[tp] != (0, len(v))}
    assert not wrong_end, dict(list(wrong_end.items())[:10])
    got = fetch(w, tps)
    wrong = {tp: got[tp] for tp, v in acked.items() if got[tp] != (0, list(enumerate(v)))}
    assert not wrong, dict(list(wrong.items())[:5])


def log_lines(bp: BrokerProcess) -> list[str]:
    return bp.log_path.read_text(errors="replace").splitlines()


def assert_no_crash(bp: BrokerProcess) -> None:
    assert bp.alive(), bp.stderr_tail()
    lines = log_lines(bp)
    assert not [ln for ln in lines if "Traceback" in ln or " CRITICAL " in ln], bp.stderr_tail()


def named(lines: list[str], pattern: str) -> list[TP]:
    """The partitions named by the lines matching ``pattern`` (its group 1 is ``topic-partition``), once a line."""
    out = []
    for ln in lines:
        m = re.search(pattern, ln)
        if m:
            t, _, p = m.group(1).rpartition("-")
            out.append((t, int(p)))
    return out


def wait_loaded(bp: BrokerProcess, timeout: float = 120) -> None:
    wait_until(lambda: bp.log_lines(r"loaded \d+ partitions in") >= 1 or not bp.alive(), timeout, what="logs loaded")
    assert bp.alive(), bp.stderr_tail()


# ---- out of file descriptors --------------------------------------------------------------------------------------

def test_partitions_past_the_descriptor_limit_go_offline_and_the_others_are_served(tmp_path):
    topics = [f"fd{i}" for i in range(4)]
    tps = [(t, p) for t in topics for p in range(PER_TOPIC)]
    # three batches of ~600 bytes fill a segment: appends under the low limit roll segments, filling the
    # inactive-segment cache the budget leaves room for
    config = {"segment.bytes": 2000}
    bp = BrokerProcess(tmp_path / "data", {})
    try:
        bp.start()
        acked: dict[TP, list[bytes]] = {tp: [] for tp in tps}
        with KafkaWire(bp.port, timeout=60) as w:
            create_topics(w, topics, config)
            wait_led(w, topics)
            answers = produce(w, tps, 0, acks=-1, size=200)
            assert {e for e, _, _ in answers.values()} == {0}
            record_acks(acked, answers)
        assert bp.terminate() == 0, bp.stderr_tail()

        # room for about half of the partitions beside the inactive segments and the spare descriptors
        limit = MAX_OPEN_INACTIVE_SEGMENTS + SPARE_DESCRIPTORS + 30 + len(tps) // 2
        bp.prefix = [sys.executable, "-c", "import os, resource, sys; n = int(sys.argv[1]); "
                     "resource.setrlimit(resource.RLIMIT_NOFILE, (n, n)); os.execv(sys.argv[2], sys.argv[2:])",
                     str(limit)]
        started = time.monotonic()
        bp.start()
        assert resource.prlimit(bp.proc.pid, resource.RLIMIT_NOFILE) == (limit, limit)
        wait_loaded(bp)
        limited_start_s = time.monotonic() - started
        with KafkaWire(bp.port, timeout=60) as w:
            answers = produce(w, tps, 1, acks=-1, size=200)
            online = sorted(tp for tp, (e, _, _) in answers.items() if e == 0)
            offline = sorted(tp for tp, (e, _, _) in answers.items() if e != 0)
            assert {answers[tp][0] for tp in offline} <= {ErrorCode.KAFKA_STORAGE_ERROR}
            assert online and offline, (len(online), len(offline))
            record_acks(acked, answers)

            # one line per partition that could not be opened, naming it; the budget's warning once
            lines = log_lines(bp)
            failed = named(lines, r"ERROR .*Error while loading log dir \S+ for partition (\S+); the partition is "
                                  r"offline: Not enough file descriptors")
            assert sorted(failed) == offline
            assert sum(1 for ln in lines if "the partition is offline" in ln) == len(offline)
            assert sum(1 for ln in lines if "File descriptors:" in ln and "the others go offline" in ln) == 1

            # Fetch and ListOffsets: KAFKA_STORAGE_ERROR for the offline ones, every acknowledged record for the others
            got = fetch(w, tps)
            assert {tp: got[tp] for tp in offline} == {tp: (ErrorCode.KAFKA_STORAGE_ERROR, []) for tp in offline}
            assert {tp: got[tp] for tp in online} == {tp: (0, list(enumerate(acked[tp]))) for tp in online}
            ends = latest(w, tps)
            assert {ends[tp][0] for tp in offline} == {ErrorCode.KAFKA_STORAGE_ERROR}
            assert {tp: ends[tp] for tp in online} == {tp: (0, len(acked[tp])) for tp in online}
            # Metadata: as Kafka shows a partition whose only replica is on an offline log dir
            md = metadata(w, topics)
            assert {md[tp] for tp in offline} == {(ErrorCode.LEADER_NOT_AVAILABLE, -1, (1,))}
            assert {md[tp] for tp in online} == {(0, 1, ())}
            dtp = described(w, topics)
            assert ({dtp[tp] for tp in offline}, {dtp[tp] for tp in online}) == ({(-1, (1,))}, {(1, ())})

            # the opened partitions keep taking appends, acks=1 and acks=-1, each batch past segment.bytes: rolls
            for rnd in range(2, 6):
                answers = produce(w, online, rnd, acks=1 if rnd % 2 else -1, size=200)
                assert {e for e, _, _ in answers.values()} == {0}
                record_acks(acked, answers)
            segments = sum(len(list((bp.data_dir / f"{t}-{p}").glob("*.log"))) for t, p in online)
            assert segments > len(online) + MAX_OPEN_INACTIVE_SEGMENTS  # the inactive-segment cache was full

            # partitions created under the limit go offline the same way, each said once
            create_topics(w, ["fdnew"])
            new = [("fdnew", p) for p in range(PER_TOPIC)]
            wait_until(lambda: {e for e, _, _ in produce(w, new, 0, acks=-1).values()}
                       == {ErrorCode.KAFKA_STORAGE_ERROR}, 30, what="new partitions offline")
            created = named(log_lines(bp), r"ERROR .*Error while creating log for (\S+) in dir \S+; the "
                                           r"partition is offline")
            assert sorted(created) == new
            assert set(metadata(w, ["fdnew"]).values()) == {(ErrorCode.LEADER_NOT_AVAILABLE, -1, (1,))}
            # nothing that opened went offline since: no append failed half-way
            assert bp.log_lines(r"taken offline") == 0
        assert_no_crash(bp)
        assert bp.terminate() == 0, bp.stderr_tail()

        bp.prefix = []
        bp.start()
        wait_loaded(bp)
        with KafkaWire(bp.port, timeout=60) as w:
            wait_led(w, topics + ["fdnew"])
            assert_serves_every_acked_record(w, acked)
            answers = produce(w, tps + new, 6, acks=-1)
            assert {e for e, _, _ in answers.values()} == {0}
            assert {answers[tp][1] for tp in new} == {0}
        assert_no_crash(bp)
        print(f"\n{len(offline)} of {len(tps)} partitions offline under RLIMIT_NOFILE {limit}, start "
              f"{limited_start_s:.1f} s, {segments} segments in the {len(online)} opened")
    finally:
        bp.close()


# ---- a damaged log dir --------------------------------------------------------------------------------------------

def recovery_points(data_dir: Path) -> dict[TP, int]:
    """recovery-point-offset-checkpoint as written (Kafka's text format: version, count, ``topic partition offset``)."""
    try:
        lines = (data_dir / "recovery-point-offset-checkpoint").read_text().splitlines()
    except OSError:
        return {}
    out = {}
    for ln in lines[2:]:
        parts = ln.split()
        if len(parts) == 3:
            out[(parts[0], int(parts[1]))] = int(parts[2])
    return out


def segment_files(data_dir: Path, tp: TP, suffix: str) -> list[Path]:
    return sorted((data_dir / f"{tp[0]}-{tp[1]}").glob(f"*{suffix}"))


def test_a_damaged_log_dir_is_recovered_partition_by_partition(tmp_path):
    n = 10_000 if SOAK else 1_000
    topics = [f"d{i:03d}" for i in range(n // PER_TOPIC)]
    tps = [(t, p) for t in topics for p in range(PER_TOPIC)]
    data = tmp_path / "data"
    # the flusher syncs every log and the recovery points are checkpointed soon after: what a crash may then leave is
    # a torn write past the acknowledged data, or files damaged beside it. A start whose logs take longer than a
    # heartbeat interval to load serves meanwhile (answering retriable errors): 100 ms, so it does here
    overrides = {"log.flush.interval.ms": 100, "log.flush.scheduler.interval.ms": 100,
                 "log.flush.offset.checkpoint.interval.ms": 200, "broker.heartbeat.interval.ms": 100}
    bp = BrokerProcess(data, overrides)
    try:
        t0 = time.monotonic()
        bp.start()
        acked: dict[TP, list[bytes]] = {tp: [] for tp in tps}
        with KafkaWire(bp.port, timeout=120) as w:
            create_topics(w, topics, {"segment.bytes": 600})  # two batches a segment: rounds 2-3 in a second one
            wait_led(w, topics, timeout=300)
            for rnd in range(4):
                answers = produce(w, tps, rnd, acks=-1)
                assert {e for e, _, _ in answers.values()} == {0}
                record_acks(acked, answers)
        wait_until(lambda: recovery_points(data) == {tp: len(v) for tp, v in acked.items()}, 60,
                   what="recovery points checkpointed at the log end")
        setup_s = time.monotonic() - t0
        bp.kill()

        rng = random.Random(31)
        order = list(tps)
        rng.shuffle(order)
        k = n // 20
        half_batch, bad_crc, garbage, no_index = order[:k], order[k:2 * k], order[2 * k:3 * k], order[3 * k:5 * k]
        damaged = set(half_batch + bad_crc + garbage + no_index)
        sizes = {}
        for tp in half_batch + bad_crc + garbage:
            active = segment_files(data, tp, ".log")[-1]
            sizes[tp] = active.stat().st_size
            torn = build_batch([Record(value=b"never acknowledged" * 5)])
            if tp in half_batch:
                tail = torn[:len(torn) // 2]  # the write stopped half-way
            elif tp in bad_crc:
                tail = torn[:-1] + bytes([torn[-1] ^ 0xFF])  # whole, but its last byte is not what was written
            else:
                tail = b"\x00" * 8 + b"\xff" * 4 + rng.randbytes(60)  # a batch length of -1, then anything
            with open(active, "ab") as f:
                f.write(tail)
        for tp in no_index:
            first = segment_files(data, tp, ".log")[0]  # the inactive segment, below the recovery point
            first.with_suffix(".index").unlink()
            first.with_suffix(".timeindex").unlink()
        (data / "replication-offset-checkpoint").write_text("0\n3\ngarbage\n")
        (data / "log-start-offset-checkpoint").write_bytes(rng.randbytes(64))

        started = time.monotonic()
        bp.start(wait=False)
        # the node answers while the damaged logs are still being repaired (its server listens once a heartbeat
        # interval has passed; `odradek serve` names the port when all are loaded): a Produce to an undamaged
        # partition is answered at once with the retriable NOT_LEADER_OR_FOLLOWER (fenced until the last log is
        # loaded, as Kafka's broker)
        port = int(wait_until(lambda: re.search(r"odradek\.server: .* listening on \w+://[^\s:]+:(\d+)",
                                                bp.log_path.read_text(errors="replace")), 60,
                              what="the server listening").group(1))
        undamaged = next(tp for tp in order if tp not in damaged)
        with KafkaWire(port, timeout=60) as w:
            early = produce(w, [undamaged], 9, acks=-1)[undamaged][0]
        assert (early, bp.log_lines(r"loaded \d+ partitions in")) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, 0)
        bp.wait_started(300)
        wait_loaded(bp, timeout=300)
        restart_s = time.monotonic() - started
        lines = log_lines(bp)
        listening = next(i for i, ln in enumerate(lines) if " listening on " in ln)
        assert listening < max(i for i, ln in enumerate(lines) if "Recovered damaged log" in ln)
        # one line per damaged partition, none for the others; one per garbage checkpoint
        repaired = named(lines, r"WARNING .*Recovered damaged log \S+/([^/\s]+): ")
        assert sorted(repaired) == sorted(damaged)
        for tp in half_batch + bad_crc + garbage:
            assert segment_files(data, tp, ".log")[-1].stat().st_size == sizes[tp]  # the torn tail is gone
        for tp in no_index:
            assert segment_files(data, tp, ".index")  # rebuilt
        assert bp.log_lines(r"WARNING .*Error occurred while reading replication-offset-checkpoint") == 1
        assert bp.log_lines(r"WARNING .*Error occurred while reading log-start-offset-checkpoint") == 1
        assert not [ln for ln in lines if " ERROR " in ln], [ln for ln in lines if " ERROR " in ln][:5]
        t0 = time.monotonic()
        with KafkaWire(bp.port, timeout=120) as w:
            wait_led(w, topics, timeout=120)
            assert_serves_every_acked_record(w, acked)
            answers = produce(w, tps, 4, acks=-1)  # appended right after the acknowledged data, not after junk
            assert {e for e, _, _ in answers.values()} == {0}
            record_acks(acked, answers)
            assert_serves_every_acked_record(w, {tp: acked[tp] for tp in damaged})
        assert_no_crash(bp)
        verify_s = time.monotonic() - t0

        # a second crash, now with a garbage recovery-point checkpoint: every log recovers from its start
        bp.kill()
        (data / "recovery-point-offset-checkpoint").write_text("0\nnot a count\n")
        started = time.monotonic()
        bp.start(timeout=300)
        wait_loaded(bp, timeout=300)
        second_s = time.monotonic() - started
        assert bp.log_lines(r"WARNING .*Error occurred while reading recovery-point-offset-checkpoint") == 1
        assert bp.log_lines(r"Recovered damaged log") == 0
        # from each log's start: the checkpoint is not trusted
        assert bp.log_lines(r"INFO .*Recovering unflushed segment 0 of \S+/d\d{3}-\d+$") == n
        with KafkaWire(bp.port, timeout=120) as w:
            wait_led(w, topics, timeout=120)
            assert_serves_every_acked_record(w, acked)
        assert_no_crash(bp)
        print(f"\n{len(damaged)} of {n} partitions damaged; set up in {setup_s:.1f} s, restart {restart_s:.1f} s, "
              f"verified in {verify_s:.1f} s, after the second crash {second_s:.1f} s")
    finally:
        bp.close()
