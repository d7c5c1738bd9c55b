"""A partition leader's ISR changes, sent to the active controller as AlterPartition (Kafka's
AlterPartitionManager, one request per change), and the periodic ISR expiry check."""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from broker.controlplane.controller_channel import ControllerChannel
from broker.replication.replica_manager import Partition, ReplicaManager
from protocol.errors import ErrorCode
from protocol.generated.messages import AlterPartitionRequest
from protocol.generated.messages.alter_partition_request import BrokerState, PartitionData, TopicData

log = logging.getLogger("odradek.isr")


class IsrSender:
    def __init__(self, node_id: int, replicas: ReplicaManager, controller: ControllerChannel,
                 broker_epoch: Callable[[], int]) -> None:
        self.node_id = node_id
        self.replicas = replicas
        self.controller = controller
        self.broker_epoch = broker_epoch
        self._tasks: set[asyncio.Task] = set()
        replicas.alter_isr = self.submit

    def submit(self, part: Partition, new_isr: tuple[int, ...]) -> None:
        task = asyncio.ensure_future(self._send(part, new_isr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, part: Partition, new_isr: tuple[int, ...]) -> None:
        def epoch_of(r: int) -> int:
            if r == self.node_id:
                return self.broker_epoch()
            state = part.followers.get(r)
            return state.broker_epoch if state is not None else -1

        info = part.info
        request = AlterPartitionRequest(broker_id=self.node_id, broker_epoch=self.broker_epoch(), topics=[TopicData(
            topic_id=part.topic_id, partitions=[PartitionData(
                partition_index=part.index, leader_epoch=info.leader_epoch,
                new_isr_with_epochs=[BrokerState(broker_id=r, broker_epoch=epoch_of(r)) for r in new_isr],
                leader_recovery_state=info.leader_recovery_state, partition_epoch=info.partition_epoch)])])
        try:
            response = await self.controller.call(request)
        except Exception as exc:  # noqa: BLE001 - no controller now: the next check retries
            log.info("%s-%d: ISR change to %s not sent: %r", part.topic, part.index, list(new_isr), exc)
            self.replicas.isr_change_failed(part)
            return
        code = response.error_code
        if not code and response.topics and response.topics[0].partitions:
            code = response.topics[0].partitions[0].error_code
        if code == ErrorCode.NEW_LEADER_ELECTED:
            # committed, and it completed a reassignment that moved leadership away: stay as we are until the
            # metadata says so (Partition.handleAlterPartitionError), no retry
            log.info("%s-%d: ISR change to %s completed a reassignment; a new leader was elected", part.topic,
                     part.index, list(new_isr))
        elif code:
            log.info("%s-%d: ISR change to %s refused with error %d", part.topic, part.index, list(new_isr), code)
            self.replicas.isr_change_failed(part)
        else:
            if len(new_isr) < len(part.info.isr):
                self.replicas.isr_shrinks += 1
            else:
                self.replicas.isr_expands += 1
            log.info("%s-%d: ISR now %s (partition epoch %d)", part.topic, part.index, list(new_isr),
                     response.topics[0].partitions[0].partition_epoch)

    async def expire_periodically(self, interval_s: float) -> None:
        """Kafka's isr-expiration task, every ``replica.lag.time.max.ms`` / 2."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.replicas.maybe_shrink_isr()
            except Exception:
                log.exception("the ISR expiry check failed")

    async def stop(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
