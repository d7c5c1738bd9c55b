"""Incremental fetch sessions (KIP-227) against running brokers.

* on the wire (the session-wide embedded broker): a full fetch with epoch 0 gets a session id; an incremental
  fetch that names nothing answers only what changed and long-polls on every partition of its session; the
  session errors; closing with epoch -1; a v13+ (topic id) session and forgotten partitions; records still go
  out with sendfile only;
* kafka-python's consumer (its FetchSessionHandler) gets a session and, idle, sends incremental fetches that
  name no partition; librdkafka (which sends sessionless fetches) keeps working;
* replication between ``odradek serve`` processes: followers fetch with a session, and in steady state a
  follower's fetch names only the partitions whose position moved (the DEBUG lines of broker/replication/fetch_session/
  on both sides: "Built incremental fetch ..." on the follower, "Created a new incremental FetchContext ..."
  on the leader).
"""

from __future__ import annotations

import re
import threading
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import FetchSessionHandler as KafkaPythonSessionHandler

from protocol.errors import ErrorCode
from protocol.generated.messages import FetchRequest, MetadataRequest
from protocol.generated.messages.fetch_request import FetchPartition, FetchTopic, ForgottenTopic
from protocol.generated.messages.metadata_request import MetadataRequestTopic
from tests.harness import ClusterProcesses, wait_until
from tests.integration.conftest import PARTITIONS
from tests.integration.test_confluent_kafka import create_topic as cfk_create_topic
from tests.integration.test_kafka_python import create_topic
from tests.kafka_wire import KafkaWire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka import TopicPartition as CfkTopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def _produce(bootstrap: str, topic: str, per_partition: dict[int, int], tag: str = "r") -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=15000)
    try:
        for partition, n in per_partition.items():
            for i in range(n):
                p.send(topic, value=b"%s-%d-%d" % (tag.encode(), partition, i), partition=partition)
        p.flush(timeout=30)
    finally:
        p.close(timeout=10)


def _fetch(session_id: int, epoch: int, topics: list, forgotten: list | None = None, max_wait_ms: int = 0,
           min_bytes: int = 1) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
                        isolation_level=0, session_id=session_id, session_epoch=epoch, topics=topics,
                        forgotten_topics_data=forgotten or [], rack_id="")


def _by_name(topic: str, offsets: dict[int, int]) -> list[FetchTopic]:
    return [FetchTopic(topic=topic, partitions=[FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 16)
                                                for p, o in offsets.items()])]


def _answered(response) -> dict[int, tuple[int, int, int]]:
    """partition -> (error, high watermark, record bytes)."""
    return {pd.partition_index: (pd.error_code, pd.high_watermark, len(pd.records or b""))
            for tr in response.responses for pd in tr.partitions}


# ---- the wire ----------------------------------------------------------------------------------------------------

def test_sessions_on_the_wire(broker, topic_name):
    topic = topic_name("wire")
    create_topic(broker.bootstrap, topic)
    _produce(broker.bootstrap, topic, {0: 3, 1: 3, 2: 3})
    stats = broker.broker.send_stats
    copied = stats.copied_bytes
    with KafkaWire(broker.port) as w:
        # a full fetch (v12: topic names) that asks for a session
        full = w.call(1, 12, _fetch(0, 0, _by_name(topic, {0: 0, 1: 0, 2: 0})))
        sid = full.session_id
        assert full.error_code == 0 and sid > 0
        first = _answered(full)
        assert sorted(first) == [0, 1, 2] and all(e == 0 and hw == 3 and size > 0 for e, hw, size in first.values())
        session = broker.broker.fetch_sessions.cache.get(sid)
        assert session is not None and not session.privileged and not session.uses_topic_ids

        # epoch 1 moves the fetch offsets to the log ends: no records, the same high watermarks: nothing answered
        inc = w.call(1, 12, _fetch(sid, 1, _by_name(topic, {0: 3, 1: 3, 2: 3})))
        assert (inc.error_code, inc.session_id, _answered(inc)) == (0, sid, {})
        inc = w.call(1, 12, _fetch(sid, 2, []))  # names nothing: still nothing new
        assert (inc.error_code, inc.session_id, _answered(inc)) == (0, sid, {})

        # an incremental fetch naming nothing long-polls on every partition of its session
        corr = w.send(1, 12, _fetch(sid, 3, [], max_wait_ms=15000))
        producer = threading.Timer(0.3, _produce, (broker.bootstrap, topic, {1: 2}, "late"))
        started = time.monotonic()
        producer.start()
        try:
            woken = w.recv(1, 12, corr)
        finally:
            producer.join(30)
        assert time.monotonic() - started < 10, "the incremental fetch was not woken by the append"
        answered = _answered(woken)
        assert list(answered) == [1] and answered[1][1] == 5 and answered[1][2] > 0

        # session errors: a stale epoch, an unknown id, a v13+ request on a session made without topic ids
        for session_id, epoch, version, code in ((sid, 3, 12, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
                                                 (sid + 1 if sid < 2**31 - 1 else 1, 1, 12,
                                                  ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
                                                 (sid, 4, 17, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)):
            r = w.call(1, version, _fetch(session_id, epoch, []))
            assert (r.error_code, r.session_id, r.responses) == (code, 0, []), (session_id, epoch, version)

        # forgetting partitions; the session goes on with the rest
        r = w.call(1, 12, _fetch(sid, 4, _by_name(topic, {1: 5}),
                                 [ForgottenTopic(topic=topic, partitions=[0, 2])]))
        assert (r.error_code, r.session_id) == (0, sid)
        assert broker.broker.fetch_sessions.cache.get(sid).size == 1

        # epoch -1 closes the session; the fetch is served sessionless
        closed = w.call(1, 12, _fetch(sid, -1, _by_name(topic, {0: 0})))
        assert (closed.error_code, closed.session_id, sorted(_answered(closed))) == (0, 0, [0])
        assert broker.broker.fetch_sessions.cache.get(sid) is None
        r = w.call(1, 12, _fetch(sid, 5, []))
        assert r.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

        # v13+: partitions by topic id; forgotten by topic id
        md = w.call(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)]))
        topic_id = md.topics[0].topic_id
        by_id = [FetchTopic(topic_id=topic_id, partitions=[FetchPartition(partition=p, fetch_offset=0,
                                                                           partition_max_bytes=1 << 16)
                                                            for p in range(PARTITIONS)])]
        full = w.call(1, 17, _fetch(0, 0, by_id))
        sid17 = full.session_id
        assert sid17 > 0 and full.responses[0].topic_id == topic_id and sorted(_answered(full)) == [0, 1, 2]
        assert broker.broker.fetch_sessions.cache.get(sid17).uses_topic_ids
        r = w.call(1, 17, _fetch(sid17, 1, [], [ForgottenTopic(topic_id=topic_id, partitions=[2])]))
        assert (r.error_code, r.session_id) == (0, sid17) and broker.broker.fetch_sessions.cache.get(sid17).size == 2
        r = w.call(1, 12, _fetch(sid17, 2, []))
        assert r.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        w.call(1, 17, _fetch(sid17, -1, []))  # close it
    assert stats.copied_bytes == copied, "record bytes were copied through Python"


# ---- real clients ---------------------------------------------------------------------------------------------

def test_kafka_python_consumer_uses_incremental_fetch_sessions(broker, topic_name, monkeypatch):
    topic = topic_name("kp-sessions")
    create_topic(broker.bootstrap, topic)
    _produce(broker.bootstrap, topic, {0: 10, 1: 10, 2: 10})
    built: list[tuple[int, int, int, int]] = []  # (session id, epoch, partitions named, partitions forgotten)
    answered: list[tuple[int, int, int]] = []  # (error, session id, partitions answered)
    build_next, handle_response = KafkaPythonSessionHandler.build_next, KafkaPythonSessionHandler.handle_response

    def recording_build_next(self, next_partitions):
        data = build_next(self, next_partitions)
        built.append((data.id, data.epoch, len(data._to_send), len(data._to_forget)))
        return data

    def recording_handle_response(self, response):
        answered.append((response.error_code, response.session_id,
                         sum(len(t.partitions) for t in response.responses)))
        return handle_response(self, response)

    monkeypatch.setattr(KafkaPythonSessionHandler, "build_next", recording_build_next)
    monkeypatch.setattr(KafkaPythonSessionHandler, "handle_response", recording_handle_response)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_wait_ms=100, request_timeout_ms=15000)
    got: list[bytes] = []

    def poll_until(n: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while len(got) < n:
            assert time.monotonic() < deadline, f"{len(got)} of {n} records"
            for msgs in consumer.poll(timeout_ms=200).values():
                got.extend(m.value for m in msgs)

    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        poll_until(30)
        idle_from = len(built)
        deadline = time.monotonic() + 1.5  # idle: ~100 ms long polls
        while time.monotonic() < deadline:
            assert not consumer.poll(timeout_ms=200)
        idle = built[idle_from:]
        _produce(broker.bootstrap, topic, {1: 5}, "late")
        poll_until(35)
    finally:
        consumer.close()
    assert sorted(got[30:]) == sorted(b"late-1-%d" % i for i in range(5))
    assert built[0][:2] == (0, 0) and built[0][2] >= 1  # full, asking for a session
    assert answered[0][0] == 0 and answered[0][1] != 0
    sid = answered[0][1]
    assert all(e == 0 for e, _, _ in answered), answered
    assert all(s == sid for s, _, _, _ in built[1:]), built  # one session throughout
    epochs = [e for _, e, _, _ in built[1:]]
    assert epochs == list(range(1, len(epochs) + 1))
    # idle (after the first, which names the positions the last records moved): incremental fetches that name
    # no partition, answered with none
    assert len(idle) >= 4 and all(named == 0 and forgotten == 0 for _, _, named, forgotten in idle[1:]), idle
    assert sum(1 for _, s, n in answered if s == sid and n == 0) >= 3
    assert broker.broker.fetch_sessions.cache.get(sid) is not None  # the broker keeps it after the client left


def test_confluent_kafka_consumer_keeps_working(broker, topic_name):
    topic = topic_name("cfk-sessions")
    cfk_create_topic(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(60):
        p.produce(topic, value=b"c%d" % i, partition=i % PARTITIONS)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    got = []
    try:
        c.assign([CfkTopicPartition(topic, q, 0) for q in range(PARTITIONS)])
        deadline = time.monotonic() + 30
        while len(got) < 60 and time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                if m.error() is None:
                    got.append(m.value())
        for i in range(60, 90):  # more while it fetches
            p.produce(topic, value=b"c%d" % i, partition=i % PARTITIONS)
        assert p.flush(30) == 0
        while len(got) < 90 and time.monotonic() < deadline + 30:
            for m in c.consume(100, 0.5):
                if m.error() is None:
                    got.append(m.value())
    finally:
        c.close()
    assert sorted(got) == sorted(b"c%d" % i for i in range(90))


# ---- followers ---------------------------------------------------------------------------------------------------

FAST = {"controller.quorum.election.timeout.ms": 500, "controller.quorum.fetch.timeout.ms": 1000,
        "controller.quorum.election.backoff.max.ms": 300, "controller.quorum.request.timeout.ms": 1000,
        "broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500, "replica.lag.time.max.ms": 4000,
        "logger.odradek.fetch_session": "DEBUG"}
TOPIC = "sessions"
TOPIC_PARTITIONS = 6
BUILT = re.compile(r"Built (full|incremental) fetch \(sessionId=(\w+), epoch=(\w+)\) for node (\d+)(?:\. Added (\d+) "
                   r"partition\(s\), altered (\d+) partition\(s\), removed (\d+) partition\(s\), replaced (\d+) "
                   r"partition\(s\) out of (\d+) partition\(s\))?")
SERVED = re.compile(r"Created a new incremental FetchContext for session id (\d+), epoch (\d+): added (\d+) "
                    r"partition\(s\), updated (\d+) partition\(s\), removed (\d+) partition\(s\) \(privileged=(\w+)")


def _fetches(node) -> list[tuple]:
    return [m.groups() for line in node.log_path.read_text(errors="replace").splitlines()
            if (m := BUILT.search(line))]


def _served(node) -> list[tuple]:
    return [m.groups() for line in node.log_path.read_text(errors="replace").splitlines()
            if (m := SERVED.search(line))]


@pytest.fixture
def cluster(tmp_path):
    c = ClusterProcesses(tmp_path, overrides=FAST)
    try:
        c.start()
        for i in c.broker_ports:
            wait_until(lambda i=i: c.nodes[i].log_lines(rf"node {i} is unfenced") >= 1, 60, 0.2, f"node {i} unfenced")
        yield c
    finally:
        c.close()


def test_followers_fetch_with_sessions_naming_only_moved_partitions(cluster):
    c = cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap})

    def created():
        for f in admin.create_topics([NewTopic(TOPIC, TOPIC_PARTITIONS, 3)], request_timeout=10).values():
            f.result()
        return True

    wait_until(created, 60, 0.2, "the topic", retry=(Exception,))

    def partitions():
        md = admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions
        return md if len(md) == TOPIC_PARTITIONS and all(p.leader >= 0 and len(p.isrs) == 3 for p in md.values()) \
            else None

    md = wait_until(partitions, 60, 0.2, "leaders and full ISRs", retry=(Exception,))
    # a partition whose leader leads more than one: its followers' sessions with that leader hold several
    leads = {}
    for p in md.values():
        leads.setdefault(p.leader, []).append(p.id)
    leader, led = max(leads.items(), key=lambda kv: len(kv[1]))
    assert len(led) >= 2, leads
    target = led[0]
    followers = [i for i in c.nodes if i != leader]

    # steady state, idle: incremental fetches with a session that name nothing, two of each follower (an idle
    # fetcher logs a built request once per RECHECK_S, 5 s: six in all took ~10 s)
    def idle_fetches():
        rows = {i: [f for f in _fetches(c.nodes[i])
                    if f[0] == "incremental" and f[3] == str(leader) and f[4:8] == ("0", "0", "0", "0")]
                for i in followers}
        return [f for i in followers for f in rows[i][-2:]] if all(len(r) >= 2 for r in rows.values()) else None

    idle = wait_until(idle_fetches, 30, 0.2, "idle incremental follower fetches")
    sessions_since = time.monotonic()
    assert all(f[1] != "INVALID" and int(f[1]) > 0 for f in idle)
    assert all(int(f[8]) == len(led) for f in idle), idle  # the session holds every led partition

    # writes to one partition: each follower's fetch names that partition alone (the others did not move)
    marks = {i: len(_fetches(c.nodes[i])) for i in followers}
    served_mark = len(_served(c.nodes[leader]))
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 0})
    deadline = time.monotonic() + 4
    n = 0
    while time.monotonic() < deadline:
        p.produce(TOPIC, value=b"v%d" % n, partition=target)
        n += 1
        p.poll(0.02)
    assert p.flush(30) == 0
    moved = []
    for i in followers:
        rows = [f for f in _fetches(c.nodes[i])[marks[i]:] if f[3] == str(leader)]
        assert rows and all(f[0] == "incremental" for f in rows), rows[:5]  # the session survived the writes
        assert all(int(f[5]) <= 1 and f[4] == f[6] == f[7] == "0" for f in rows), rows  # at most the target
        moved += [f for f in rows if f[5] == "1"]
    assert len(moved) >= 4, "the followers' fetches never named the written partition"
    # the leader's side: incremental contexts of privileged (follower) sessions updating at most one partition
    served = [s for s in _served(c.nodes[leader])[served_mark:] if s[5] == "True"]
    assert served and all(int(s[3]) <= 1 and s[2] == s[4] == "0" for s in served), served[:5]
    assert any(s[3] == "1" for s in served)

    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "check", "enable.auto.commit": False})
    got = 0
    try:
        consumer.assign([CfkTopicPartition(TOPIC, target, 0)])
        end = time.monotonic() + 30
        while got < n and time.monotonic() < end:
            got += sum(1 for m in consumer.consume(500, 0.5) if m.error() is None)
    finally:
        consumer.close()
    assert got == n
    # the partitions no fetch named for seconds kept their followers in the ISR: an incremental fetch records
    # the follower's position for every partition of its session (replica.lag.time.max.ms is 4 s here)
    time.sleep(max(0.0, sessions_since + 10 - time.monotonic()))
    assert partitions() is not None, {p.id: p.isrs for p in admin.list_topics(TOPIC, timeout=5).topics[TOPIC]
                                      .partitions.values()}
