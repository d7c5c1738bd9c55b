"""The leader's AlterPartition answers (IsrSender): committed, refused (the pending ISR is dropped so the next
check retries), and NEW_LEADER_ELECTED (committed, a reassignment moved leadership away: the pending ISR stays
until the metadata says so, no retry; Partition.handleAlterPartitionError)."""

from __future__ import annotations

import asyncio

import pytest

from broker.replication.isr_sender import IsrSender
from broker.replication.replica_manager import Partition, ReplicaManager
from broker.replication.replica_state import FollowerState
from cluster.metadata_image import PartitionInfo
from protocol.errors import ErrorCode
from protocol.generated.messages import AlterPartitionResponse
from protocol.generated.messages.alter_partition_response import PartitionData, TopicData
from storage.config import LogConfig
from storage.log import Log

NOW = 1_700_000_000_000


class _Controller:
    def __init__(self, code: int) -> None:
        self.code = code
        self.requests = []

    async def call(self, request):
        self.requests.append(request)
        p = request.topics[0].partitions[0]
        return AlterPartitionResponse(topics=[TopicData(topic_id=request.topics[0].topic_id, partitions=[
            PartitionData(partition_index=p.partition_index, error_code=self.code, leader_id=1,
                          leader_epoch=p.leader_epoch, isr=[s.broker_id for s in p.new_isr_with_epochs],
                          partition_epoch=p.partition_epoch + 1)])])


class _NoMetrics:
    def produced(self, topic, records, size):
        pass

    def rejected(self, topic, size):
        pass


@pytest.mark.parametrize("code, pending_kept, counted", [
    (0, True, 1), (ErrorCode.NEW_LEADER_ELECTED, True, 0), (ErrorCode.INVALID_UPDATE_VERSION, False, 0)])
def test_alter_partition_answers(tmp_path, code, pending_kept, counted):
    async def scenario():
        lg = Log.open(str(tmp_path / "t-0"), LogConfig.from_props({}), now_ms=NOW)
        rm = ReplicaManager(1, log_manager=None, now_ms=lambda: NOW, metrics=_NoMetrics())
        part = Partition("t", 0, b"\x07" * 16, lg, PartitionInfo(0, (1, 2, 3), (1, 2), 1, 4, 7))
        part.followers = {2: FollowerState(last_caught_up_ms=NOW), 3: FollowerState(last_caught_up_ms=NOW)}
        rm.partitions[("t", 0)] = part
        controller = _Controller(code)
        sender = IsrSender(1, rm, controller, lambda: 11)
        rm._submit_isr(part, (1, 2, 3))
        assert part.pending_isr == (1, 2, 3)
        await asyncio.gather(*sender._tasks)
        sent = controller.requests[0].topics[0].partitions[0]
        assert (sent.leader_epoch, sent.partition_epoch) == (4, 7)
        assert [s.broker_id for s in sent.new_isr_with_epochs] == [1, 2, 3]
        assert (part.pending_isr is not None) == pending_kept
        assert rm.isr_expands == counted
        lg.close()

    asyncio.run(scenario())
