"""DescribeQuorum: v0-2 on a broker listener, forwarded whole to the active controller as Kafka's brokers do
(never answered from the broker's image): the quorum leader's view of voters and observers."""

from __future__ import annotations

from protocol.generated.messages import DescribeQuorumRequest, DescribeQuorumResponse

API_KEY = 55
VERSIONS = (0, 2)


async def handle(ctx, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    return await ctx.controller.forward(ctx, req)
