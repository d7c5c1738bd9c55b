"""A broker-only node (an observer of the quorum) whose leader died finds the next one: a real ``RaftDriver`` over
real sockets against stub voters that refuse connections, accept and never answer, or answer as the leader of a
newer epoch (issue 26: an observer stayed at "leader unknown" for good while the voters had elected a new leader).

The bound is the controller.quorum.fetch.timeout.ms the observer waits for its dead leader plus three request
timeouts. Each fault gets several seeds: the observer's choice among the voters is random.
"""

from __future__ import annotations

import asyncio
import random
import struct
import time

import pytest

from broker.clock import SYSTEM_CLOCK
from broker.quorum.kraft_log import KRaftLog
from broker.quorum.raft_driver import RaftDriver
from broker.quorum.state_store import QuorumStateStore
from cluster.raft.election_state import ElectionState
from cluster.raft.node import RaftConfig
from protocol.connection import encode_response, parse_request
from protocol.errors import ErrorCode
from protocol.generated.messages import FetchRequest, FetchResponse
from protocol.generated.messages import fetch_response as f_resp
from protocol.topics import METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID
from tests.harness import reserve_ports

CONFIG = RaftConfig(election_timeout_ms=500, fetch_timeout_ms=500, request_timeout_ms=500, retry_backoff_ms=20)
BOUND_S = (CONFIG.fetch_timeout_ms + 3 * CONFIG.request_timeout_ms) / 1000
OLD_EPOCH, NEW_EPOCH = 2, 3
OBSERVER, DEAD, SILENT, LEADER = 5, 1, 2, 3


class StubVoter:
    """A voter's controller listener on 127.0.0.1: ``silent`` accepts and reads but never answers; ``leader``
    answers Fetch as the leader of NEW_EPOCH (FENCED_LEADER_EPOCH to an older epoch, an empty answer after a
    short park otherwise); ``hang_first`` makes the leader's first connection silent (a connection stuck behind
    a request that never completes: only a client that disconnects on a timeout gets through)."""

    def __init__(self, mode: str, hang_first: bool = False) -> None:
        self.mode, self.hang_first = mode, hang_first
        self.connections = 0
        self.fetches = 0
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        silent = self.mode == "silent" or (self.hang_first and self.connections == 1)
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                request = parse_request(await reader.readexactly(size))
                if silent:
                    continue
                body = request.decode_body()
                assert isinstance(body, FetchRequest)
                self.fetches += 1
                epoch = body.topics[0].partitions[0].current_leader_epoch
                error = ErrorCode.FENCED_LEADER_EPOCH if epoch < NEW_EPOCH else 0
                if not error:
                    await asyncio.sleep(0.1)  # a parked fetch: nothing new
                part = f_resp.PartitionData(partition_index=METADATA_PARTITION, error_code=error, high_watermark=0,
                                            current_leader=f_resp.LeaderIdAndEpoch(leader_id=LEADER,
                                                                                   leader_epoch=NEW_EPOCH))
                response = FetchResponse(responses=[f_resp.FetchableTopicResponse(
                    topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[part])])
                writer.write(b"".join(bytes(p) for p in encode_response(request, response)))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the observer closed the connection (it disconnects on a timeout) or the stub is stopping
        finally:
            writer.close()


async def _applied(entries, snapshot) -> None:
    return None


async def _time_to_follow(tmp_path, seed: int, hang_first: bool) -> float:
    """Seconds until an observer that followed the dead voter DEAD in OLD_EPOCH follows LEADER in NEW_EPOCH (None:
    not within the bound), with voter SILENT accepting and never answering."""
    stubs = {SILENT: StubVoter("silent"), LEADER: StubVoter("leader", hang_first=hang_first)}
    voters = {DEAD: ("127.0.0.1", reserve_ports(1)[0])}  # nothing listens there: refused
    for i, stub in stubs.items():
        voters[i] = ("127.0.0.1", await stub.start())
    part = tmp_path / f"seed-{seed}-{hang_first}" / "__cluster_metadata-0"
    part.mkdir(parents=True)
    store = QuorumStateStore(part)
    store.write(ElectionState(OLD_EPOCH, DEAD, voters=frozenset(voters)))
    driver = RaftDriver(OBSERVER, voters, "c", KRaftLog(part, frozenset(voters), SYSTEM_CLOCK.now_ms), store,
                        SYSTEM_CLOCK, CONFIG, _applied, rng=random.Random(seed))
    started = time.monotonic()
    await driver.start()
    try:
        assert (driver.epoch, driver.leader_id) == (OLD_EPOCH, DEAD)
        while time.monotonic() - started < BOUND_S:
            if (driver.epoch, driver.leader_id) == (NEW_EPOCH, LEADER):
                return time.monotonic() - started
            await asyncio.sleep(0.01)
        return None
    finally:
        await driver.stop()
        for stub in stubs.values():
            await stub.stop()


@pytest.mark.parametrize("hang_first", [False, True], ids=["leader answers", "leader's first connection hangs"])
def test_an_observer_follows_the_new_leader_past_a_dead_and_a_silent_voter(tmp_path, hang_first):
    async def main():
        return [await _time_to_follow(tmp_path, seed, hang_first) for seed in range(4)]

    times = asyncio.run(main())
    print(f"seconds to follow the new leader, per seed: {times} (bound {BOUND_S} s)")
    assert all(t is not None for t in times), f"an observer did not follow the new leader within {BOUND_S} s: {times}"


def test_a_forward_while_no_leader_is_known_says_so_and_for_how_long(tmp_path):
    """Every voter refuses: the observer knows no leader, and a request through the controller channel fails
    with ControllerUnavailable naming that and how long it has lasted."""
    from broker.controlplane.controller_channel import ControllerUnavailable, QuorumControllerChannel
    from protocol.generated.messages import BrokerHeartbeatRequest

    async def main():
        voters = {i: ("127.0.0.1", port) for i, port in zip((1, 2, 3), reserve_ports(3))}
        part = tmp_path / "__cluster_metadata-0"
        part.mkdir()
        driver = RaftDriver(OBSERVER, voters, "c", KRaftLog(part, frozenset(voters), SYSTEM_CLOCK.now_ms),
                            QuorumStateStore(part), SYSTEM_CLOCK, CONFIG, _applied)

        class Quorum:  # what the channel reads of the node's RaftQuorum
            is_active = False
            clock = SYSTEM_CLOCK

        Quorum.driver = driver
        await driver.start()
        try:
            channel = QuorumControllerChannel(None, Quorum(), {}, "c", voters, node_id=OBSERVER, timeout_ms=700)
            with pytest.raises(ControllerUnavailable, match=r"no quorum leader known for \d+\.\d s \(epoch 0\)"):
                await channel.call(BrokerHeartbeatRequest(broker_id=OBSERVER, broker_epoch=1))
        finally:
            await driver.stop()

    asyncio.run(main())
