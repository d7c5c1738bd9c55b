"""FetchSnapshot on the controller listener: the KRaft RPC on ``__cluster_metadata-0``
(KafkaRaftClient.handleFetchSnapshotRequest)."""

from broker.controller_listener.raft_rpc import answer

API_KEY = 59
VERSIONS = (0, 1)


async def handle(ctx, body):
    return await answer(ctx, body)
