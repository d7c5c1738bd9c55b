"""ElectLeaders on the controller listener, answered by the active controller (ControllerApis)."""

from broker.controller_listener.controller_rpc import run_on_active_controller

API_KEY = 43
VERSIONS = (0, 2)


async def handle(ctx, body):
    return await run_on_active_controller(ctx, body)
