"""ElectLeaders: v0-2 (KIP-460).

Behaviour: forwarded whole to the controller (broker/controller_apis/k43_elect_leaders.py), as Kafka's
brokers do; answered once the new leaders are committed. PREFERRED (v0's only kind) and UNCLEAN elections.
"""

from __future__ import annotations

from protocol.generated.messages import ElectLeadersRequest, ElectLeadersResponse

API_KEY = 43
VERSIONS = (0, 2)


async def handle(ctx, req: ElectLeadersRequest) -> ElectLeadersResponse:
    return await ctx.controller.forward(ctx, req)
