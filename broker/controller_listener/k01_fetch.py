"""Fetch on the controller listener: the KRaft RPC on ``__cluster_metadata-0``
(KafkaRaftClient.handleFetchRequest)."""

from broker.controller_listener.raft_rpc import answer

API_KEY = 1
VERSIONS = (13, 18)  # v18: the fetcher's high watermark (KIP-1166)


async def handle(ctx, body):
    return await answer(ctx, body)
