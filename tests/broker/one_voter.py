"""A single node's metadata quorum for tests: one voter, started and leading, with everything before its epoch
applied (what a single node's controller decides against)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.clock import SYSTEM_CLOCK
from broker.quorum.log_dirs import METADATA_PARTITION_DIR
from broker.quorum.metadata_publisher import MetadataPublisher
from broker.quorum.raft_quorum import RaftQuorum
from cluster.raft.node import RaftConfig

VOTERS = {1: ("127.0.0.1", 0)}  # the lone voter never sends to itself: no address is used


async def one_voter_quorum(log_dir: Path, publisher: MetadataPublisher | None = None,
                           cluster_id: str = "c") -> RaftQuorum:
    quorum = RaftQuorum(1, VOTERS, Path(log_dir) / METADATA_PARTITION_DIR, cluster_id,
                        publisher or MetadataPublisher(), SYSTEM_CLOCK, RaftConfig())
    await quorum.start()
    for _ in range(1000):  # it elects itself on its first tick
        if quorum.is_active:
            break
        await asyncio.sleep(0.01)
    await asyncio.wait_for(quorum.ready_to_decide(), 10)
    return quorum
