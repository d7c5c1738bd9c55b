"""The group coordinator's adapter (``group_service``): asyncio, the ``__consumer_offsets`` log and timers around
the pure state machines of ``cluster.groups.group_coordinator``.
"""
