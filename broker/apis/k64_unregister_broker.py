"""UnregisterBroker: v0 (KIP-500's kafka-cluster.sh unregister).

Behaviour: forwarded whole to the controller (broker/controller_apis/k64_unregister_broker.py), as Kafka's
brokers do: the broker leaves every ISR and its registration is removed; BROKER_ID_NOT_REGISTERED for an
unknown id.
"""

from __future__ import annotations

from protocol.generated.messages import UnregisterBrokerRequest, UnregisterBrokerResponse

API_KEY = 64
VERSIONS = (0, 0)


async def handle(ctx, req: UnregisterBrokerRequest) -> UnregisterBrokerResponse:
    return await ctx.controller.forward(ctx, req)
