"""The admin requests a broker forwards whole to the active controller in an Envelope, as Kafka's brokers do
(ForwardingManager): CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments, DescribeQuorum, UnregisterBroker, CreateAcls and DeleteAcls. Their versions and
behaviour are the controller's handlers' (broker/controlplane/controller_apis/), declared once there.

Throttling (RequestHandlerHelper.sendForwardedResponse): the broker records the request's own
``request_percentage`` and applies the larger of that throttle time and the controller's (its
``controller_mutation_rate`` quota, KIP-599) on the *request* quota: counted once in its throttle-time metrics
(``kafka_server_clientquota_throttle_time_ms{quota="request"}``), the client's connection muted that long
(KIP-219), and the answer carrying it. Kafka's RequestMetrics ThrottleTimeMs (``request.apiThrottleTimeMs``, set
by maybeRecordAndGetThrottleTimeMs before the larger one is taken) has only the broker's own request throttle,
never the controller's; odradek exports no ThrottleTimeMs histogram."""

from __future__ import annotations

from protocol.message import Message

FORWARDED = (19, 20, 30, 31, 37, 43, 45, 46, 49, 51, 55, 64)  # API keys


async def forward(ctx, req: Message) -> Message:
    response = await ctx.park(ctx.controller.forward(ctx, req))
    controller_ms = getattr(response, "throttle_time_ms", 0) or 0
    applied_ms = max(controller_ms, ctx.record_request_quota())  # dispatch records nothing more
    if applied_ms > 0:
        ctx.apply_throttle("request", applied_ms)
    return response
