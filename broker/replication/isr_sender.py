"""A partition leader's ISR changes, sent to the active controller as AlterPartition (Kafka's
DefaultAlterPartitionManager), and the periodic ISR expiry check.

One pending change per partition and at most one AlterPartition in flight, carrying every pending change: a broker
rejoining thousands of ISRs sends a handful of requests, not one per partition, and never sends a change again
while a request that carries it is outstanding. ``IsrChangeBatch`` is that bookkeeping, without I/O; ``IsrSender``
runs it on the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Callable

from broker.loop_turns import ITEMS_PER_TURN
from broker.controlplane.controller_channel import ControllerChannel
from broker.replication.replica_manager import Partition, ReplicaManager
from protocol.errors import ErrorCode
from protocol.generated.messages import AlterPartitionRequest, AlterPartitionResponse
from protocol.generated.messages.alter_partition_request import BrokerState, PartitionData, TopicData

log = logging.getLogger("odradek.isr")

RETRY_BACKOFF_S = 0.05  # Kafka's "send-alter-partition" retry after a top-level error
# Partition.handleAlterPartitionError: the controller says the change was not applied and our state is right:
# back to the committed ISR (the next fetch or expiry check proposes again)
RESET_TO_COMMITTED = (ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA)
# ... or our metadata is behind: keep the change pending (no new proposal) until newer metadata replaces it
ANSWERS_PER_TURN = ITEMS_PER_TURN // 5  # each committed change is logged (~0.1 ms a line)
AWAIT_METADATA = (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.NEW_LEADER_ELECTED)


@dataclasses.dataclass(eq=False)
class IsrChange:
    """One partition's proposed ISR, as it goes on the wire, and the partition state it was proposed from."""

    part: Partition
    new_isr: tuple[int, ...]
    from_epoch: int  # the partition epoch it was based on
    data: PartitionData
    from_isr: tuple[int, ...] = ()  # the committed ISR it was based on (a shrink or an expansion of it)

    @property
    def key(self) -> tuple[bytes, int]:
        return self.part.topic_id, self.part.index


class IsrChangeBatch:
    """Kafka's ``unsentIsrUpdates`` and ``inflightRequest``: changes stay here until a response names them, so a
    timeout or a top-level error leaves them for the next request; only one request is out at a time."""

    def __init__(self) -> None:
        self.pending: dict[tuple[bytes, int], IsrChange] = {}
        self.in_flight: list[IsrChange] | None = None

    def submit(self, change: IsrChange, is_current: Callable[[IsrChange], bool]) -> bool:
        """Queue ``change``; False if its partition already has a current change pending (Kafka's
        OperationNotAttempted). A pending change the partition has moved past is replaced."""
        old = self.pending.get(change.key)
        if old is not None and is_current(old):
            return False
        self.pending[change.key] = change
        return True

    def take(self, is_current: Callable[[IsrChange], bool]) -> list[IsrChange] | None:
        """Every pending change for one request, or None while one is in flight or nothing is pending. Changes
        their partition has moved past (newer metadata, another leader) are dropped, never sent."""
        if self.in_flight is not None:
            return None
        for key, change in list(self.pending.items()):
            if not is_current(change):
                del self.pending[key]
        if not self.pending:
            return None
        self.in_flight = list(self.pending.values())
        return self.in_flight

    def failed(self) -> None:
        """No answer (timeout, no controller) or a top-level error: everything stays pending for the next one."""
        self.in_flight = None

    def answered(self, response: AlterPartitionResponse) -> list[tuple[IsrChange, object]]:
        """The in-flight changes the response answers, each with its partition's answer; they leave the pending
        set (a change it does not name stays, and goes again)."""
        answers = {(t.topic_id, p.partition_index): p for t in response.topics for p in t.partitions}
        out = []
        for change in self.in_flight or ():
            answer = answers.get(change.key)
            if answer is None:
                continue
            if self.pending.get(change.key) is change:
                del self.pending[change.key]
            out.append((change, answer))
        self.in_flight = None
        return out


class IsrSender:
    def __init__(self, node_id: int, replicas: ReplicaManager, controller: ControllerChannel,
                 broker_epoch: Callable[[], int]) -> None:
        self.node_id = node_id
        self.replicas = replicas
        self.controller = controller
        self.broker_epoch = broker_epoch
        self.batch = IsrChangeBatch()
        self._task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        replicas.alter_isr = self.submit

    def submit(self, part: Partition, new_isr: tuple[int, ...]) -> None:
        change = IsrChange(part, new_isr, part.pending_from_epoch, self._partition_data(part, new_isr),
                           tuple(part.info.isr))
        if not self.batch.submit(change, self._is_current):
            log.info("%s-%d: ISR change to %s not queued: one is pending", part.topic, part.index, list(new_isr))
            self.replicas.isr_change_failed(part)
            return
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        self._wake.set()

    def _partition_data(self, part: Partition, new_isr: tuple[int, ...]) -> PartitionData:
        def epoch_of(r: int) -> int:
            if r == self.node_id:
                return self.broker_epoch()
            state = part.followers.get(r)
            return state.broker_epoch if state is not None else -1

        info = part.info
        return PartitionData(partition_index=part.index, leader_epoch=info.leader_epoch,
                             new_isr_with_epochs=[BrokerState(broker_id=r, broker_epoch=epoch_of(r)) for r in new_isr],
                             leader_recovery_state=info.leader_recovery_state, partition_epoch=info.partition_epoch)

    def _is_current(self, change: IsrChange) -> bool:
        """The partition still waits for this very change: same partition object, still led here, the same
        proposal from the same partition epoch (an image that moved past it cleared ``pending_isr``)."""
        part = self.replicas.partitions.get((change.part.topic, change.part.index))
        return (part is change.part and part.is_leader(self.node_id) and part.pending_isr == change.new_isr
                and part.pending_from_epoch == change.from_epoch)

    async def _run(self) -> None:
        """Send whatever is pending, one request at a time, until stopped."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            changes = self.batch.take(self._is_current)
            if changes is None:
                continue
            if not await self._send(changes):
                await asyncio.sleep(RETRY_BACKOFF_S)
                self._wake.set()
            elif self.batch.pending:
                self._wake.set()  # changes that came meanwhile, or ones the response left out

    async def _send(self, changes: list[IsrChange]) -> bool:
        """One AlterPartition for ``changes``; False if some or all of them go again (after a backoff)."""
        topics: dict[bytes, TopicData] = {}
        for change in changes:
            topic_id = change.part.topic_id
            topics.setdefault(topic_id, TopicData(topic_id=topic_id, partitions=[])).partitions.append(change.data)
        request = AlterPartitionRequest(broker_id=self.node_id, broker_epoch=self.broker_epoch(),
                                        topics=list(topics.values()))
        self.replicas.alter_partition_requests += 1
        self.replicas.alter_partition_changes += len(changes)
        try:
            response = await self.controller.call(request)
        except asyncio.CancelledError:
            self.batch.failed()
            raise
        except Exception as exc:  # noqa: BLE001 - no controller answered: the changes stay pending, sent again
            log.info("AlterPartition of %d partition(s) not answered (%r); retrying", len(changes), exc)
            self.batch.failed()
            return False
        if response.error_code:
            log.warning("AlterPartition of %d partition(s) failed with error %d; retrying", len(changes),
                        response.error_code)
            self.batch.failed()
            return False
        retry = False
        for n, (change, answer) in enumerate(self.batch.answered(response)):
            if n and n % ANSWERS_PER_TURN == 0:
                await asyncio.sleep(0)  # thousands of answers: requests are served in between
            retry = self._handle_answer(change, answer) or retry
        return not retry

    def _handle_answer(self, change: IsrChange, answer) -> bool:
        """Partition.handleAlterPartitionError's cases; True if the change goes again."""
        part, new_isr, code = change.part, list(change.new_isr), answer.error_code
        if not code:
            # against the ISR it was proposed from: by the time the answer arrives, the image may hold the new one
            if len(change.new_isr) < len(change.from_isr):
                self.replicas.isr_shrinks += 1
            else:
                self.replicas.isr_expands += 1
            log.info("%s-%d: ISR now %s (partition epoch %d)", part.topic, part.index, new_isr, answer.partition_epoch)
            return False
        self.replicas.failed_isr_updates += 1
        if not self._is_current(change):
            return False  # newer metadata or a newer proposal replaced it: this answer is about the past
        if code in AWAIT_METADATA:
            # committed elsewhere or our view is stale (NEW_LEADER_ELECTED: a completed reassignment moved the
            # leader): stay pending until the metadata moves past it
            log.info("%s-%d: ISR change to %s answered with error %d; waiting for newer metadata", part.topic,
                     part.index, new_isr, code)
            return False
        if code in RESET_TO_COMMITTED:
            log.info("%s-%d: ISR change to %s refused with error %d", part.topic, part.index, new_isr, code)
            self.replicas.isr_change_failed(part)
            return False
        log.warning("%s-%d: ISR change to %s failed with unexpected error %d; retrying", part.topic, part.index,
                    new_isr, code)
        self.batch.submit(change, lambda _: False)
        return True

    async def expire_periodically(self, interval_s: float) -> None:
        """Kafka's isr-expiration task, every ``replica.lag.time.max.ms`` / 2."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.replicas.maybe_shrink_isr_in_turns()
            except Exception:
                log.exception("the ISR expiry check failed")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
