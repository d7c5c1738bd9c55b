"""What a controller-side handler gets: the latest committed image, the pure controller, the caller."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from cluster.controller import Controller
from cluster.metadata_image import MetadataImage
from cluster.raft.node import QuorumView


@dataclasses.dataclass(slots=True, frozen=True)
class ControllerContext:
    image: MetadataImage
    controller: Controller
    config: Mapping[str, Any]  # the controller node's properties (Kafka names)
    cluster_id: str
    version: int  # the request's API version
    next_offset: int  # the metadata log offset the next committed record gets (a new broker epoch)
    principal: str | None = None  # "User:ANONYMOUS" for a forwarded client request; None for a broker RPC
    from_this_node: bool = False  # a broker RPC from this node's own broker, in this process
    client_host: str | None = None
    now_ms: int = 0  # the controller's clock: broker sessions are timed with it
    describe_quorum: Callable[[], QuorumView | None] = lambda: None  # the quorum leader's view (DescribeQuorum)
    # each voter's (listener, host, port)
    voter_endpoints: Mapping[int, tuple[str, str, int]] = dataclasses.field(default_factory=dict)
