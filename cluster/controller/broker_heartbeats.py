"""Kafka's BrokerHeartbeatManager: the active controller's in-memory view of broker sessions.

Not in the metadata log: a new active controller starts with every broker's last contact at its own start,
so it never fences a broker it has not had a chance to hear from. Brokers are fenced once their session
(``broker.session.timeout.ms``) passes without a heartbeat, unfenced once they heartbeat having caught up
with their own registration record, and let go in controlled shutdown once they lead nothing and every
active broker has seen the metadata that moved their leaderships.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from typing import Callable

from cluster.controller.replica_placer import UsableBroker

log = logging.getLogger("odradek.controller")


class BrokerControlState(enum.Enum):
    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    SHUTDOWN_NOW = "shutdown_now"

    @property
    def fenced(self) -> bool:
        return self in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW)

    @property
    def in_controlled_shutdown(self) -> bool:
        return self is BrokerControlState.CONTROLLED_SHUTDOWN

    @property
    def should_shut_down(self) -> bool:
        return self is BrokerControlState.SHUTDOWN_NOW


@dataclasses.dataclass
class BrokerHeartbeatState:
    id: int
    last_contact_ms: int = 0
    metadata_offset: int = -1
    controlled_shutdown_offset: int = -1
    fenced: bool = True

    @property
    def shutting_down(self) -> bool:
        return self.controlled_shutdown_offset >= 0


class BrokerHeartbeatTracker:
    """Kafka's BrokerHeartbeatTracker: when each broker's current incarnation was last heard from, recorded as its
    heartbeat arrives, before the heartbeat waits for the controller. Work queued ahead of a heartbeat (thousands
    of ISR changes) then never makes a live broker look dead; fencing reads these times. Also the largest gap
    between two heartbeats of one incarnation (a broker whose heartbeats are answered late sends the next late)."""

    def __init__(self) -> None:
        self.contact: dict[int, tuple[int, int]] = {}  # broker id -> (broker epoch, last arrival ms)
        self.max_gap_ms = 0

    def update_contact_time(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """A heartbeat of the registered incarnation ``broker_epoch`` arrived (the caller checked the epoch:
        a stale or unknown broker's heartbeat must not count)."""
        previous = self.contact.get(broker_id)
        if previous is not None and previous[0] == broker_epoch:
            self.max_gap_ms = max(self.max_gap_ms, now_ms - previous[1])
        self.contact[broker_id] = (broker_epoch, now_ms)

    def forget_contacts(self) -> None:
        """A new tenure as the active controller: contacts heard in an earlier one say nothing now (the sessions
        start again), and the time between two tenures is no heartbeat gap."""
        self.contact.clear()

    def contact_time(self, broker_id: int, broker_epoch: int) -> int | None:
        entry = self.contact.get(broker_id)
        return entry[1] if entry is not None and entry[0] == broker_epoch else None


class BrokerHeartbeatManager:
    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.brokers: dict[int, BrokerHeartbeatState] = {}

    def _state(self, broker_id: int) -> BrokerHeartbeatState:
        state = self.brokers.get(broker_id)
        if state is None:
            raise KeyError(f"Broker {broker_id} is not registered.")
        return state

    def register(self, broker_id: int, fenced: bool, now_ms: int) -> None:
        state = self.brokers.get(broker_id)
        offset = -1
        if state is None:
            state = self.brokers[broker_id] = BrokerHeartbeatState(broker_id)
        elif state.fenced != fenced:
            offset = state.metadata_offset
        self.touch(broker_id, fenced, offset, now_ms)

    def touch(self, broker_id: int, fenced: bool, metadata_offset: int, now_ms: int) -> None:
        state = self._state(broker_id)
        state.last_contact_ms = now_ms
        state.metadata_offset = metadata_offset
        state.fenced = fenced
        if fenced:
            state.controlled_shutdown_offset = -1

    def fence(self, broker_id: int) -> None:
        state = self.brokers.get(broker_id)
        if state is not None:
            state.fenced = True

    def remove(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)

    def note_contact(self, broker_id: int, contact_ms: int) -> None:
        """A heartbeat arrived at ``contact_ms`` (the tracker's time) though it may not have been decided yet."""
        state = self.brokers.get(broker_id)
        if state is not None and contact_ms > state.last_contact_ms:
            state.last_contact_ms = contact_ms

    def has_valid_session(self, broker_id: int, now_ms: int) -> bool:
        state = self.brokers.get(broker_id)
        return (state is not None and not state.fenced
                and state.last_contact_ms + self.session_timeout_ms >= now_ms)

    def find_one_stale_broker(self, now_ms: int) -> int | None:
        """The unfenced broker heard from longest ago, if its session has expired (one at a time, so the
        effect of fencing each is visible before the next, as Kafka)."""
        unfenced = [s for s in self.brokers.values() if not s.fenced]
        if not unfenced:
            return None
        oldest = min(unfenced, key=lambda s: (s.last_contact_ms, s.id))
        return None if self.has_valid_session(oldest.id, now_ms) else oldest.id

    def next_check_time_ms(self) -> int | None:
        unfenced = [s.last_contact_ms for s in self.brokers.values() if not s.fenced]
        return min(unfenced) + self.session_timeout_ms if unfenced else None

    def lowest_active_offset(self) -> int:
        """The lowest metadata offset among unfenced brokers not shutting down (a huge number if none)."""
        active = [s.metadata_offset for s in self.brokers.values() if not s.fenced and not s.shutting_down]
        return min(active) if active else 2**63 - 1

    def controlled_shutdown_offset(self, broker_id: int) -> int | None:
        state = self.brokers.get(broker_id)
        return None if state is None or state.controlled_shutdown_offset < 0 else state.controlled_shutdown_offset

    def maybe_update_controlled_shutdown_offset(self, broker_id: int, offset: int) -> None:
        state = self._state(broker_id)
        if state.fenced:
            raise RuntimeError("Fenced brokers cannot enter controlled shutdown.")
        if state.controlled_shutdown_offset < 0:
            state.controlled_shutdown_offset = offset

    def usable_brokers(self, rack_of: Callable[[int], str | None]) -> list[UsableBroker]:
        """Brokers new replicas may be placed on: every registered one not in controlled shutdown."""
        return [UsableBroker(s.id, rack_of(s.id), s.fenced)
                for s in sorted(self.brokers.values(), key=lambda s: s.id) if not s.shutting_down]

    def current_state(self, broker_id: int) -> BrokerControlState:
        state = self._state(broker_id)
        if state.shutting_down:
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.FENCED if state.fenced else BrokerControlState.UNFENCED

    def calculate_next_state(self, broker_id: int, want_fence: bool, want_shut_down: bool,
                             current_metadata_offset: int, register_offset: int,
                             has_leaderships: Callable[[], bool]) -> tuple[BrokerControlState, BrokerControlState]:
        """BrokerHeartbeatManager.calculateNextBrokerState: (current, next) for one heartbeat."""
        state = self._state(broker_id)
        current = self.current_state(broker_id)
        S = BrokerControlState
        if current is S.FENCED:
            if want_shut_down:
                log.info("Fenced broker %d has requested and been granted an immediate shutdown.", broker_id)
                return current, S.SHUTDOWN_NOW
            if not want_fence and current_metadata_offset >= register_offset:
                log.info("The request from broker %d to unfence has been granted because it has caught up with "
                         "the offset of its register broker record %d.", broker_id, register_offset)
                return current, S.UNFENCED
            return current, S.FENCED
        if current is S.UNFENCED:
            if want_fence:
                return current, S.SHUTDOWN_NOW if want_shut_down else S.FENCED
            if want_shut_down:
                if has_leaderships():
                    log.info("Unfenced broker %d has requested and been granted a controlled shutdown.", broker_id)
                    return current, S.CONTROLLED_SHUTDOWN
                log.info("Unfenced broker %d has requested and been granted an immediate shutdown.", broker_id)
                return current, S.SHUTDOWN_NOW
            return current, S.UNFENCED
        # controlled shutdown: done once it leads nothing and every active broker has seen that
        if has_leaderships():
            return current, S.CONTROLLED_SHUTDOWN
        if state.controlled_shutdown_offset <= self.lowest_active_offset():
            log.info("The request from broker %d to shut down has been granted since the lowest active offset %d "
                     "is now greater than the broker's controlled shutdown offset %d.", broker_id,
                     self.lowest_active_offset(), state.controlled_shutdown_offset)
            return current, S.SHUTDOWN_NOW
        return current, S.CONTROLLED_SHUTDOWN
