"""Requests a node sends to itself, handled in-process: the transaction coordinator's WriteTxnMarkers to partitions
this node leads, and a partition leader's AddPartitionsToTxn verification of a transactional id this node
coordinates (Kafka sends both through its NetworkClient, to itself too).

The handler is the one the listener runs (``HANDLERS``), with the same request message and version, so the
answer is the same; what is left out is the loopback connection, the encoding both ways and the event-loop hops
between them: on a single node every transaction's markers and every first produce of a partition in a
transaction waited for that round trip (issue 28). The request is the node's own, so it is not authorized (a
peer's is, as CLUSTER_ACTION) and not throttled. Not used when the test-only fault hook is on: a test that cuts
this node's links must cut these requests too.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from broker.apis import HANDLERS
from broker.apis.context import BrokerHandles, RequestContext
from broker.timeouts import wait_for
from protocol.connection import Request
from protocol.generated.api_keys import APIS


class LocalRequests:
    """``request(message, version, timeout_s)`` as ``NodeClient.request`` answers it, for this node."""

    def __init__(self, handles: BrokerHandles, listener: str, client_id: str) -> None:
        self._handles = dataclasses.replace(handles, authorizer=None, quotas=None)
        self._listener = listener
        self._client_id = client_id
        self.requests = 0

    async def request(self, message: Any, version: int, timeout_s: float) -> Any:
        """The handler's answer; ``asyncio.TimeoutError`` after ``timeout_s`` (as a lost peer would give)."""
        key = message.API_KEY
        handler = HANDLERS[key]
        spec = APIS[key]
        frame = Request(key, version, 0, self._client_id, spec.request_header_version(version), spec,
                        memoryview(b""), 0)
        clock = self._handles.clock
        ctx = RequestContext(self._handles, frame, f"local-{self._client_id}", self._listener, "127.0.0.1",
                             clock.now_ms(), clock.monotonic())
        self.requests += 1
        return await wait_for(handler.handle(ctx, message), timeout_s)
