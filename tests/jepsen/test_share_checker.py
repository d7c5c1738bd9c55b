"""Share groups (KIP-932) in histories: ``check_share`` must flag exactly the anomaly a history has, none in clean
ones (hand-made, with a redelivery across a leader change, and generated from a model of a share partition)."""

from __future__ import annotations

import dataclasses

import pytest

from tests.jepsen.checker import (
    BELOW_SPSO,
    SHARE_ANOMALY_KINDS,
    AckAnswer,
    AckUnacquired,
    ConcurrentHold,
    Delivery,
    DeliveryAfterAck,
    OverLimit,
    ShareLost,
    check,
    check_share,
)
from tests.jepsen.history import (
    ACCEPT,
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    REJECT,
    RELEASE,
    SHARE_ACQUIRE,
    Event,
    History,
)

LIMIT = 3  # group.share.delivery.count.limit of these histories
LOCK_MS = 10_000  # group.share.record.lock.duration.ms: 10 time units


class ClockedHistory(History):
    """A ``History`` whose events take their times from ``now``, advanced by one per event, so that tests say
    exactly when each thing happened."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def _record(self, kind, process, partition, value, offset, error=None, **extra) -> None:
        self.now += 1
        self._events.append(Event(kind, process, partition, bytes(value), offset, self.now, error, **extra))

    def poll(self, member: str, records: list[tuple[int, int, bytes, int]]) -> None:
        """One poll of ``member`` returning (partition, offset, value, delivery count) records."""
        since = self.now + 0.5  # the poll starts after the last event
        for partition, offset, value, count in records:
            self.share_acquire(member, partition, offset, value, count, since)

    def acks(self, member: str, partition: int, acks: list[tuple[int, str]], error: str | None = None) -> None:
        """``member`` acknowledges (offset, type) on ``partition``, then the broker answers them all."""
        for offset, ack_type in acks:
            self.share_ack(member, partition, offset, ack_type)
        self.share_ack_result(member, partition, [offset for offset, _ in acks], error)


def check_it(events) -> object:
    return check_share(events, delivery_count_limit=LIMIT, record_lock_duration_ms=LOCK_MS)


def only_share_anomaly(report, kind: str, partition: int):
    """Assert ``report`` holds exactly one anomaly, of ``kind`` in ``partition``, and return it."""
    counts = report.counts()
    assert {k: counts[k] for k in SHARE_ANOMALY_KINDS} == {k: int(k == kind) for k in SHARE_ANOMALY_KINDS}, \
        report.summary()
    assert not report.ok
    found = getattr(report.partitions[partition], kind)
    assert len(found) == 1, report.summary()
    return found[0]


def clean_share_history() -> ClockedHistory:
    """Partition 0 holds a b c d, partition 1 holds e f. m1 accepts a and releases b (redelivered to it with
    count 2 and accepted); m2 accepts c and rejects d; m2 holds e when partition 1's leader changes: e is
    redelivered to m3 with the same count 1 (its acquisition was never persisted) and m2's late accept of e is
    refused. f's lock expires at m1, m2 releases it, m3 gets it at the limit and closes: archived. The final SPSO
    of partition 0 stops at d, archived in the final state batch."""
    h = ClockedHistory()
    for partition, offset, value in [(0, 0, b"a"), (0, 1, b"b"), (0, 2, b"c"), (0, 3, b"d"), (1, 0, b"e"),
                                     (1, 1, b"f")]:
        h.send("p1", partition, value)
        h.ack("p1", partition, value, offset)
    h.poll("m1", [(0, 0, b"a", 1), (0, 1, b"b", 1)])
    h.poll("m2", [(0, 2, b"c", 1), (1, 0, b"e", 1)])
    h.acks("m1", 0, [(0, ACCEPT), (1, RELEASE)])
    h.acks("m2", 0, [(2, ACCEPT)])
    h.fault("leader_change", 1)
    h.poll("m3", [(1, 0, b"e", 1)])
    h.acks("m2", 1, [(0, ACCEPT)], error="INVALID_RECORD_STATE")
    h.acks("m3", 1, [(0, ACCEPT)])
    h.poll("m1", [(0, 1, b"b", 2), (1, 1, b"f", 1)])
    h.acks("m1", 0, [(1, ACCEPT)])
    h.poll("m2", [(0, 3, b"d", 1)])
    h.acks("m2", 0, [(3, REJECT)])
    h.now += LOCK_MS / 1000  # f's lock at m1 expires
    h.poll("m2", [(1, 1, b"f", 2)])
    h.acks("m2", 1, [(1, RELEASE)])
    h.poll("m3", [(1, 1, b"f", 3)])
    h.share_close("m3")
    h.share_close("m1")
    h.share_close("m2")
    h.share_final("g", 0, 3)
    h.share_state("g", 0, 3, 3, ARCHIVED, 1)
    h.share_final("g", 1, 2)
    return h


def test_clean_share_history_with_a_redelivery_across_a_leader_change_is_ok():
    h = clean_share_history()
    report = check_it(h)
    assert report.ok, report.summary()
    figures = ("deliveries", "redeliveries", "accepted", "rejected", "archived")
    assert [report.partitions[0].counts()[k] for k in figures] == [5, 1, 3, 1, 1]
    assert [report.partitions[1].counts()[k] for k in figures] == [5, 3, 1, 0, 1]
    assert report.start_offsets() == {0: 3, 1: 2}
    assert report.summary().splitlines()[-1].startswith("total: ok deliveries=10 redeliveries=4")
    # the plain checker skips share events: the topic read by a plain consumer checks clean beside them
    for e in [e for e in h.events if e.kind == "ack"]:
        h.read("plain-reader", e.partition, e.offset, e.value)
    assert check(h).ok


def test_the_same_redelivery_without_the_leader_change_is_a_count_regression_and_a_concurrent_hold():
    events = [e for e in clean_share_history().events if e.kind != "fault"]
    report = check_it(events)
    assert {k for k, n in report.counts().items() if n and k in SHARE_ANOMALY_KINDS} == \
        {"count_regression", "concurrent_hold"}, report.summary()
    regression, = report.partitions[1].count_regression
    hold, = report.partitions[1].concurrent_hold
    assert (regression.delivery.member, regression.earlier.member, regression.delivery.delivery_count) == \
        ("m3", "m2", 1)
    assert (hold.delivery, hold.held) == (regression.delivery, regression.earlier)
    assert hold.held_until == next(e.time for e in events if e.kind == "share_ack" and e.process == "m2"
                                   and e.partition == 1)  # m2 held e until it sent its (late) accept


def test_a_fault_of_another_partition_explains_nothing():
    faulted = [dataclasses.replace(e, partition=0) if e.kind == "fault" else e for e in clean_share_history().events]
    unfaulted = [e for e in clean_share_history().events if e.kind != "fault"]
    assert check_it(faulted).partitions[1] == check_it(unfaulted).partitions[1]


def test_a_fault_of_every_partition_explains_it():
    events = [dataclasses.replace(e, partition=-1) if e.kind == "fault" else e for e in clean_share_history().events]
    assert check_it(events).ok


def _redelivery(events: list[Event], member: str, partition: int, offset: int, count: int) -> int:
    return next(i for i, e in enumerate(events) if e.kind == SHARE_ACQUIRE and e.process == member
                and e.partition == partition and e.offset == offset and e.delivery_count == count)


def test_delivery_after_an_answered_accept():
    h = clean_share_history()
    h.poll("m4", [(0, 0, b"a", 2)])
    found = only_share_anomaly(check_it(h), "delivery_after_ack", 0)
    assert found.delivery == Delivery("m4", 0, 0, 2, h.events[-1].since, h.events[-1].time)
    assert (found.ack.member, found.ack.ack_type, found.ack.error) == ("m1", ACCEPT, None)


def test_delivery_after_an_answered_reject():
    h = clean_share_history()
    h.poll("m4", [(0, 3, b"d", 2)])
    found = only_share_anomaly(check_it(h), "delivery_after_ack", 0)
    assert isinstance(found, DeliveryAfterAck) and found.ack.ack_type == REJECT


def test_a_delivery_that_may_have_been_acquired_before_the_answer_is_not_after_it():
    """Its poll started before m1's accept of a was answered: the broker may have acquired it before (only a
    concurrent hold could then be proven, and m1's hold ended when it sent the accept)."""
    h = clean_share_history()
    i = next(i for i, e in enumerate(h.events) if e.kind == "share_ack_result" and e.process == "m1")
    early = h.events[i].time - 0.1
    h.share_acquire("m4", 0, 0, b"a", 2, since=early)
    assert check_it(h).ok


def test_lost_record_left_available_above_the_final_spso():
    h = clean_share_history()
    h.send("p1", 1, b"g")
    h.ack("p1", 1, b"g", 2)
    assert only_share_anomaly(check_it(h), "share_lost", 1) == ShareLost(1, 2, b"g", "p1", "not_done", AVAILABLE)


def test_lost_record_that_the_spso_passed_undelivered():
    h = clean_share_history()
    h.send("p1", 0, b"h")
    h.ack("p1", 0, b"h", 4)
    h.share_state("g", 0, 4, 4, ACKNOWLEDGED, 0)
    assert only_share_anomaly(check_it(h), "share_lost", 0) == ShareLost(0, 4, b"h", "p1", "skipped", ACKNOWLEDGED)
    events = [dataclasses.replace(e, offset=5) if e.kind == "share_final" and e.partition == 0 else e
              for e in h.events]
    assert only_share_anomaly(check_it(events), "share_lost", 0) == ShareLost(0, 4, b"h", "p1", "skipped",
                                                                                 BELOW_SPSO)


def test_lost_needs_a_final_spso_for_every_partition_written():
    events = [e for e in clean_share_history().events if not (e.kind == "share_final" and e.partition == 1)]
    with pytest.raises(ValueError, match=r"partitions \[1\]"):
        check_it(events)
    assert check_it([e for e in events if e.kind != "share_final"]).ok  # no final state at all: not judged


def test_transactional_records_may_be_archived_undelivered():
    h = clean_share_history()
    txn = h.txn_begin("t")
    h.send("t", 0, b"t0", txn=txn)
    h.ack("t", 0, b"t0", 4, txn=txn)
    h.txn_abort_ok("t", txn)
    assert check_it(h).ok


def test_delivery_count_regression():
    events = clean_share_history().events
    i = _redelivery(events, "m1", 0, 1, 2)
    events[i] = dataclasses.replace(events[i], delivery_count=1)
    found = only_share_anomaly(check_it(events), "count_regression", 0)
    assert found.delivery == Delivery("m1", 0, 1, 1, events[i].since, events[i].time)
    assert (found.earlier.member, found.earlier.delivery_count) == ("m1", 1)
    assert found.earlier.time <= found.delivery.since


def test_delivery_over_the_limit():
    events = clean_share_history().events
    i = _redelivery(events, "m3", 1, 1, 3)
    events[i] = dataclasses.replace(events[i], delivery_count=4)
    found = only_share_anomaly(check_it(events), "over_limit", 1)
    assert found == OverLimit(Delivery("m3", 1, 1, 4, events[i].since, events[i].time), LIMIT)


def test_two_members_holding_one_offset_at_once():
    """m4 acquires c while m2 certainly holds it: after m2's poll returned, before m2 sent its accept."""
    events = clean_share_history().events
    m2_got_c = _redelivery(events, "m2", 0, 2, 1)
    m2_accepts = next(i for i, e in enumerate(events) if e.kind == "share_ack" and e.process == "m2")
    start, end = events[m2_got_c].time, events[m2_accepts].time
    events.insert(m2_accepts, Event(SHARE_ACQUIRE, "m4", 0, b"c", 2, end - 0.25, delivery_count=2,
                                    since=start + 0.25))
    found = only_share_anomaly(check_it(events), "concurrent_hold", 0)
    assert found == ConcurrentHold(Delivery("m4", 0, 2, 2, start + 0.25, end - 0.25),
                                   Delivery("m2", 0, 2, 1, events[m2_got_c].since, start), end)


def test_overlaps_the_history_cannot_prove_are_not_reported():
    """Without m2's accept of c, m2 holds c until its lock may expire. m4's acquisition of c then is a concurrent
    hold, unless it may have come before m2's (its poll started before m2's returned), or after m2's lock
    expired, or after a fault, or after m2 closed."""
    def m2_acks_c(e: Event) -> bool:
        return e.process == "m2" and e.partition == 0 and (
            (e.kind == "share_ack" and e.offset == 2) or (e.kind == "share_ack_result" and e.offsets == (2,)))

    base = [e for e in clean_share_history().events if not m2_acks_c(e)]
    got = base[_redelivery(base, "m2", 0, 2, 1)]
    lock_over = got.since + LOCK_MS / 1000

    def with_m4(since: float, time: float, *extra: Event) -> list[Event]:
        m4 = Event(SHARE_ACQUIRE, "m4", 0, b"c", 2, time, delivery_count=2, since=since)
        return sorted([*base, *extra, m4], key=lambda e: e.time)

    found = only_share_anomaly(check_it(with_m4(got.time + 1, got.time + 2)), "concurrent_hold", 0)
    assert found.held_until == lock_over
    assert check_it(with_m4(got.since - 0.25, got.time + 0.25)).ok
    assert check_it(with_m4(lock_over - 0.5, lock_over + 0.5)).ok
    assert check_it(with_m4(got.time + 1, got.time + 2, Event("fault", "kill", -1, b"", None, got.time + 0.5))).ok
    assert check_it(with_m4(got.time + 1, got.time + 2, Event("share_close", "m2", -1, b"", None,
                                                              got.time + 0.5))).ok


def test_ack_answered_ok_for_an_offset_the_member_never_acquired():
    h = clean_share_history()
    h.acks("m3", 0, [(2, ACCEPT)])
    found = only_share_anomaly(check_it(h), "ack_unacquired", 0)
    assert found == AckUnacquired(AckAnswer("m3", 0, 2, ACCEPT, h.now - 1, h.now, None))


def test_second_ok_answer_for_one_delivery():
    h = clean_share_history()
    h.acks("m1", 0, [(0, RELEASE)])
    found = only_share_anomaly(check_it(h), "ack_unacquired", 0)
    assert (found.ack.member, found.ack.offset, found.ack.ack_type) == ("m1", 0, RELEASE)


def test_ok_answer_for_an_offset_never_acknowledged():
    h = clean_share_history()
    h.share_ack_result("m1", 0, [2], None)
    found = only_share_anomaly(check_it(h), "ack_unacquired", 0)
    assert found.ack.ack_type is None and found.ack.sent is None


def test_error_answers_are_indeterminate():
    h = clean_share_history()
    h.acks("m3", 0, [(2, ACCEPT)], error="INVALID_RECORD_STATE")
    h.acks("m1", 0, [(0, RELEASE)], error="REQUEST_TIMED_OUT")
    assert check_it(h).ok


def test_share_events_round_trip_and_unknown_types_are_refused(tmp_path):
    h = clean_share_history()
    h.dump(tmp_path / "share.jsonl")
    assert History.load(tmp_path / "share.jsonl").events == h.events
    with pytest.raises(ValueError):
        h.share_ack("m1", 0, 0, "renew")
    with pytest.raises(ValueError):
        h.share_state("g", 0, 0, 0, "gone", 1)
