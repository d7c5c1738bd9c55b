"""The Raft driver's fetch purgatory: a parked Fetch is answered as soon as the leader's log moves, not when its
max wait runs out. (It was not: a proposal appended before the driver looked for a change, so a 3-voter
leader's parked follower fetches slept through it and every CreateTopics took the fetch max wait, 500 ms.)"""

from __future__ import annotations

import asyncio

from broker.clock import SYSTEM_CLOCK
from broker.quorum.kraft_log import KRaftLog
from broker.quorum.raft_driver import RaftDriver
from broker.quorum.state_store import QuorumStateStore
from cluster.raft import messages as m
from cluster.raft.node import RaftConfig
from protocol.record_codec import Record, build_batch


async def _applied(entries, snapshot) -> None:
    return None


def test_a_parked_follower_fetch_wakes_on_a_proposal(tmp_path):
    async def main():
        part = tmp_path / "__cluster_metadata-0"
        voters = {1: ("127.0.0.1", 1), 2: ("127.0.0.1", 2), 3: ("127.0.0.1", 3)}
        driver = RaftDriver(1, voters, "c", KRaftLog(part, frozenset(voters), SYSTEM_CLOCK.now_ms),
                            QuorumStateStore(part), SYSTEM_CLOCK, RaftConfig(election_timeout_ms=50), _applied)

        async def peers_grant_votes(msg) -> None:  # the transport: voter 2 grants every (pre-)vote
            if isinstance(msg, m.VoteRequest) and msg.dst == 2:
                async with driver._lock:
                    epoch = msg.epoch - 1 if msg.pre_vote else msg.epoch  # a pre-vote: the voter's own epoch
                    driver.node.step(m.VoteResponse(src=2, dst=1, epoch=epoch, leader_id=-1, granted=True,
                                                    pre_vote=msg.pre_vote), driver._now())
                    await driver._process()

        driver._send = peers_grant_votes
        await driver.start()
        try:
            for _ in range(500):
                if driver.is_leader:
                    break
                await asyncio.sleep(0.01)
            assert driver.is_leader, (driver.node.role, driver.epoch)
            end, epoch = driver.log.end_offset, driver.epoch

            def fetch():
                return m.FetchRequest(src=2, dst=1, epoch=epoch, fetch_offset=end, last_fetched_epoch=epoch)

            caught_up = await driver.handle(fetch())  # voter 2 has the epoch's LeaderChange: committed
            assert caught_up.entries == () or not caught_up.entries
            assert driver.high_watermark == end
            parked = asyncio.ensure_future(driver.handle(fetch(), max_wait_ms=600_000))
            await asyncio.sleep(0.05)
            assert not parked.done()  # nothing new to send: parked
            proposal = asyncio.ensure_future(driver.propose(build_batch([Record(value=b"x")]), 1))
            reply = await asyncio.wait_for(parked, 10)  # the max wait is ten minutes: only a wake-up ends it
            assert [e.offset for e in reply.entries] == [end]
            assert not proposal.done()  # committed only once voter 2 fetches past it
            await driver.handle(m.FetchRequest(src=2, dst=1, epoch=epoch, fetch_offset=end + 1,
                                               last_fetched_epoch=epoch))
            await asyncio.wait_for(proposal, 10)
        finally:
            await driver.stop()

    asyncio.run(main())
