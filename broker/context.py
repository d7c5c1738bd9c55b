"""What a handler gets besides its request: the broker's state and the request's header fields."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from protocol.connection import Request

if TYPE_CHECKING:
    from broker.server import Broker


@dataclasses.dataclass(slots=True)
class RequestContext:
    broker: "Broker"
    request: Request
    connection_id: str
    listener: str
    now_ms: int
    received: float = 0.0  # time.monotonic() when the frame was read (RequestQueueTimeMs)

    @property
    def version(self) -> int:
        return self.request.api_version

    @property
    def client_id(self) -> Any:
        return self.request.client_id
