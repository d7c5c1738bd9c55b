"""Vote on the controller listener: the KRaft RPC on ``__cluster_metadata-0`` (KafkaRaftClient.handleVoteRequest)."""

from broker.controller_listener.raft_rpc import answer

API_KEY = 52
VERSIONS = (0, 2)


async def handle(ctx, body):
    return await answer(ctx, body)
