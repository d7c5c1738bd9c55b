"""``wait_for`` that never swallows a cancellation.

Python 3.11's ``asyncio.wait_for`` returns the awaited result when that future completed in the same loop
turn as the task was cancelled: the cancel is lost, and a loop stopped that way runs on (a replica fetcher
stopped at shutdown kept fetching through its closed client and held the node's exit). ``asyncio.timeout``
counts cancellations properly (3.12 rebuilt ``wait_for`` on it); this is that, with ``wait_for``'s shape.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, TypeVar

T = TypeVar("T")


async def wait_for(aw: Awaitable[T], timeout: float | None) -> T:
    """``await aw``, raising TimeoutError after ``timeout`` seconds (None: no limit); a cancellation of the
    caller always propagates."""
    if timeout is None:
        return await aw
    async with asyncio.timeout(timeout):
        return await aw
