"""BeginQuorumEpoch on the controller listener: the KRaft RPC on ``__cluster_metadata-0``
(KafkaRaftClient.handleBeginQuorumEpochRequest)."""

from broker.controller_listener.raft_rpc import answer

API_KEY = 53
VERSIONS = (0, 1)


async def handle(ctx, body):
    return await answer(ctx, body)
