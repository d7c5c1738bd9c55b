"""AlterPartitionReassignments on the controller listener, answered by the active controller (ControllerApis)."""

from broker.controller_listener.controller_rpc import run_on_active_controller

API_KEY = 45
VERSIONS = (0, 1)


async def handle(ctx, body):
    return await run_on_active_controller(ctx, body)
