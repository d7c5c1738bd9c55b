"""The KRaft RPCs on the controller listener: decoded into the Raft core's messages, answered by the driver. Each
needs CLUSTER_ACTION on the cluster of the connection's principal (ControllerApis.handleVote, handleFetch, ...):
only voters and observers, never a client, may vote, fetch the metadata log or announce an epoch."""

from __future__ import annotations

import logging

from broker.controlplane.controller_listener.controller_rpc import refused
from broker.quorum import wire
from cluster.raft.messages import FetchResponse
from protocol.errors import ErrorCode
from protocol.message import Message

log = logging.getLogger("odradek.quorum.rpc")

# API key -> (name, the versions a node answers): Kafka 4.1's ranges (Vote v2 carries KIP-996's PreVote, Fetch v18
# the fetcher's high watermark, KIP-1166)
RAFT_RPC_VERSIONS = {1: ("Fetch", (13, 18)), 52: ("Vote", (0, 2)), 53: ("BeginQuorumEpoch", (0, 1)),
                     54: ("EndQuorumEpoch", (0, 1)), 59: ("FetchSnapshot", (0, 1))}


async def answer(ctx, body: Message) -> Message:
    denied = refused(ctx, body)
    if denied is not None:
        return denied
    quorum = ctx.handles.quorum
    if quorum is None:
        return wire.error_response(body, ErrorCode.UNKNOWN_SERVER_ERROR)
    if body.cluster_id is not None and body.cluster_id != ctx.cluster_id:
        log.warning("%s from %s names cluster %s, this node is in %s", type(body).__name__, ctx.client_host,
                    body.cluster_id, ctx.cluster_id)
        return wire.error_response(body, ErrorCode.INCONSISTENT_CLUSTER_ID)
    try:
        request = wire.from_request(body, ctx.node_id)
    except wire.NotForThisPartition as exc:
        log.warning("%s from %s: %s", type(body).__name__, ctx.client_host, exc)
        return wire.error_response(body, ErrorCode.INVALID_REQUEST)
    if getattr(request, "src", 0) < 0:
        return wire.error_response(body, ErrorCode.INVALID_REQUEST)
    reply = await quorum.driver.handle(request, getattr(body, "max_wait_ms", 0))
    if reply is None:
        return wire.error_response(body, ErrorCode.UNKNOWN_SERVER_ERROR)
    if getattr(reply, "error", 0) and not isinstance(reply, FetchResponse):
        log.info("%s from node %d refused: error %d", type(body).__name__, request.src, reply.error)
    return wire.to_response(reply, body)
