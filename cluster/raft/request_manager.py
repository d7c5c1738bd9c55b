"""Where a node's quorum fetches may go next (Kafka's raft ``RequestManager``), as plain state fed time.

Per destination: a request in flight (until answered or ``request_timeout_ms`` after it was sent), backing off
(``retry_backoff_ms`` after a failure), or ready. At most one fetch is in flight across all destinations, as in
``findReadyBootstrapServer``. One difference from Kafka, which starts its scan of the voters at a random index:
among the ready voters the one that failed longest ago (or never) is asked first, ties broken at random, so an
observer looking for the leader never asks a voter that just refused or timed out before every other voter has
had its turn (with one voter dead and one hung, the leader is asked within one request timeout).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

NEVER = -(2**62)


@dataclasses.dataclass
class _Connection:
    sent_at: int | None = None  # a request in flight since then
    failed_at: int | None = None  # backing off since then


class RequestManager:
    def __init__(self, retry_backoff_ms: int, request_timeout_ms: int) -> None:
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self._conns: dict[int, _Connection] = {}
        # when each destination last failed or timed out: kept across resets, it only orders the ready voters
        self.last_failure: dict[int, int] = {}

    # ---- what happened ------------------------------------------------------------------------------------

    def on_sent(self, dst: int, now_ms: int) -> None:
        self._remember_timeouts(now_ms)
        self._conns[dst] = _Connection(sent_at=now_ms)

    def on_success(self, dst: int) -> None:
        self._conns.pop(dst, None)

    def on_failure(self, dst: int, now_ms: int) -> None:
        """The request failed (refused, lost connection, timed out in the transport, an error answer that moved
        nothing): back off before asking this destination again."""
        self._remember_timeouts(now_ms)
        self._conns[dst] = _Connection(failed_at=now_ms)
        self.last_failure[dst] = now_ms

    def reset(self, now_ms: int) -> None:
        """Forget every destination's state, as Kafka does on every role change. Failures stay remembered, and a
        request still unanswered counts as one: it may be out still, and its destination is asked last."""
        self._remember_timeouts(now_ms)
        for dst, c in self._conns.items():
            if c.sent_at is not None and now_ms < c.sent_at + self.request_timeout_ms:
                self.last_failure[dst] = max(self.last_failure.get(dst, NEVER), now_ms)
        self._conns.clear()

    def _remember_timeouts(self, now_ms: int) -> None:
        for dst, c in self._conns.items():
            if c.sent_at is not None and now_ms >= c.sent_at + self.request_timeout_ms:
                self.last_failure[dst] = max(self.last_failure.get(dst, NEVER), c.sent_at + self.request_timeout_ms)

    # ---- questions (pure: time passing changes the answers, never the state) --------------------------------

    def in_flight(self, dst: int, now_ms: int) -> bool:
        c = self._conns.get(dst)
        return c is not None and c.sent_at is not None and now_ms < c.sent_at + self.request_timeout_ms

    def timed_out(self, dst: int, now_ms: int) -> bool:
        c = self._conns.get(dst)
        return c is not None and c.sent_at is not None and now_ms >= c.sent_at + self.request_timeout_ms

    def backing_off(self, dst: int, now_ms: int) -> bool:
        c = self._conns.get(dst)
        return c is not None and c.failed_at is not None and now_ms < c.failed_at + self.retry_backoff_ms

    def any_in_flight(self, now_ms: int) -> bool:
        return any(self.in_flight(d, now_ms) for d in self._conns)

    def ready(self, dst: int, now_ms: int) -> bool:
        return not self.in_flight(dst, now_ms) and not self.backing_off(dst, now_ms)

    def _failed_last(self, dst: int, now_ms: int) -> int:
        failed = self.last_failure.get(dst, NEVER)
        if self.timed_out(dst, now_ms):
            failed = max(failed, self._conns[dst].sent_at + self.request_timeout_ms)
        return failed

    def choices(self, candidates: Iterable[int], now_ms: int) -> list[int]:
        """The destinations a request may go to now, none while any request is in flight: the ready ones that
        failed longest ago (or never), one of which the caller picks at random."""
        if self.any_in_flight(now_ms):
            return []
        ready = sorted(d for d in candidates if self.ready(d, now_ms))
        if not ready:
            return []
        oldest = min(self._failed_last(d, now_ms) for d in ready)
        return [d for d in ready if self._failed_last(d, now_ms) == oldest]

    def next_change_ms(self, now_ms: int) -> int | None:
        """When an in-flight request times out or a backoff ends next, after ``now_ms`` (None: never)."""
        due = [c.sent_at + self.request_timeout_ms if c.sent_at is not None else c.failed_at + self.retry_backoff_ms
               for c in self._conns.values()]
        later = [t for t in due if t > now_ms]
        return min(later) if later else None

    def snapshot(self) -> tuple:
        """A hashable view of the state (the simulator checks that a tick before the deadline changes nothing)."""
        return tuple(sorted((d, c.sent_at, c.failed_at) for d, c in self._conns.items()))
