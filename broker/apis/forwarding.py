"""The admin requests a broker forwards whole to the active controller in an Envelope, as Kafka's brokers do
(ForwardingManager): CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments, DescribeQuorum, UnregisterBroker, CreateAcls and DeleteAcls. Their versions and
behaviour are the controller's handlers' (broker/controlplane/controller_apis/), declared once there."""

from __future__ import annotations

from protocol.message import Message

FORWARDED = (19, 20, 30, 31, 37, 43, 45, 46, 49, 51, 55, 64)  # API keys


async def forward(ctx, req: Message) -> Message:
    response = await ctx.park(ctx.controller.forward(ctx, req))
    throttle_ms = getattr(response, "throttle_time_ms", 0) or 0
    if throttle_ms > 0:
        # RequestHandlerHelper.sendForwardedResponse: the controller's throttle (its controller_mutation_rate
        # quota) mutes the client's connection here, as the broker's own quotas do (KIP-219)
        ctx.throttle_ms = max(ctx.throttle_ms, throttle_ms)
        if ctx.on_throttle is not None:
            ctx.on_throttle(throttle_ms)
    return response
