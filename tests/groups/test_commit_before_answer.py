"""The group coordinator answers a write only once it is committed (Kafka's CoordinatorRuntime waits for
the high watermark), and a write that fails to commit answers the coordinator error Kafka maps it to."""

from __future__ import annotations

import asyncio

from broker.clock import ManualClock
from broker.config import BrokerConfig
from broker.groups.group_service import GroupService
from broker.quorum.metadata_publisher import MetadataPublisher
from broker.replication.replica_manager import AppendResult
from cluster.groups.group_config import GroupConfig
from cluster.groups.group_coordinator import GroupCoordinatorShard, Result
from cluster.groups.group_record_helpers import offset_commit_record
from cluster.groups.offsets import OffsetAndMetadata
from protocol.errors import ErrorCode, KafkaError


class _Part:
    def is_leader(self, node_id: int) -> bool:
        return True


class _HeldBackReplicas:
    """Appends succeed locally; their completions are released by the test (a follower that lags)."""

    loading = False

    def __init__(self) -> None:
        self.pending: list[asyncio.Future] = []

    def get(self, topic: str, partition: int) -> _Part:
        return _Part()

    def append(self, part, records, now_ms, origin=None) -> AppendResult:
        fut = asyncio.get_running_loop().create_future()
        self.pending.append(fut)
        return AppendResult(None, fut)


class _Response:
    error_code = 0


def _service(replicas) -> GroupService:
    service = GroupService(1, BrokerConfig({}), MetadataPublisher(), replicas, controller=None, clock=ManualClock())
    service.shards[0] = GroupCoordinatorShard(0, GroupConfig(), lambda: "uuid")
    return service


def _commit_result(response) -> Result:
    record = offset_commit_record("g", "t", 0, OffsetAndMetadata(5, -1, "", 0))
    return Result(records=[record], response=response, completions=[("token", response)])


def test_answer_waits_for_the_commit():
    async def scenario():
        replicas = _HeldBackReplicas()
        service = _service(replicas)
        token, delayed = service.new_waiter()
        response = _Response()
        result = _commit_result(response)
        result.completions = [(token, response)]
        call = asyncio.ensure_future(service.run_on_shard(0, lambda shard, now: result))
        await asyncio.sleep(0.01)
        assert len(replicas.pending) == 1
        assert not call.done() and not delayed.done()  # written, not committed: nobody is answered
        replicas.pending[0].set_result(None)
        assert (await call) is result and result.error is None
        assert (await delayed) is response and response.error_code == 0

    asyncio.run(scenario())


def test_a_write_that_fails_to_commit_answers_not_coordinator():
    async def scenario():
        replicas = _HeldBackReplicas()
        service = _service(replicas)
        response = _Response()
        call = asyncio.ensure_future(service.run_on_shard(0, lambda shard, now: _commit_result(response)))
        await asyncio.sleep(0.01)
        replicas.pending[0].set_exception(KafkaError("moved", ErrorCode.NOT_LEADER_OR_FOLLOWER))
        result = await call
        assert response.error_code == ErrorCode.NOT_COORDINATOR
        assert result.error is not None and result.error.code == ErrorCode.NOT_COORDINATOR

    asyncio.run(scenario())
