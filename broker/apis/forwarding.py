"""The admin requests a broker forwards whole to the active controller in an Envelope, as Kafka's brokers do
(ForwardingManager): CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments, DescribeQuorum, UnregisterBroker, CreateAcls and DeleteAcls. Their versions and
behaviour are the controller's handlers' (broker/controlplane/controller_apis/), declared once there."""

from __future__ import annotations

from protocol.message import Message

FORWARDED = (19, 20, 30, 31, 37, 43, 45, 46, 49, 51, 55, 64)  # API keys


async def forward(ctx, req: Message) -> Message:
    return await ctx.controller.forward(ctx, req)
