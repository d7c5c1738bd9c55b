"""What a controller-side handler gets: the latest committed image, the pure controller, the caller."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from cluster.acls import AclOperation, ResourceType
from cluster.controller import Controller
from cluster.metadata_image import MetadataImage
from cluster.quotas import UNBOUNDED_MUTATION_QUOTA, ControllerMutationQuota
from cluster.raft.node import QuorumView

if TYPE_CHECKING:
    from broker.security.authorization import NodeAuthorizer


@dataclasses.dataclass(slots=True, frozen=True)
class ControllerContext:
    image: MetadataImage
    controller: Controller
    config: Mapping[str, Any]  # the controller node's properties (Kafka names)
    cluster_id: str
    version: int  # the request's API version
    next_offset: int  # the metadata log offset the next committed record gets (a new broker epoch)
    # who asks: a forwarded request's Envelope principal, or the principal of the controller-listener connection
    # that sent it ("User:name"); None for this node's own broker in this process (nothing to authorize)
    principal: str | None = None
    from_this_node: bool = False  # a broker RPC from this node's own broker, in this process
    client_host: str | None = None
    now_ms: int = 0  # the controller's clock: broker sessions are timed with it
    describe_quorum: Callable[[], QuorumView | None] = lambda: None  # the quorum leader's view (DescribeQuorum)
    # each voter's (listener, host, port)
    voter_endpoints: Mapping[int, tuple[str, str, int]] = dataclasses.field(default_factory=dict)
    authorizer: "NodeAuthorizer | None" = None  # the node's authorizer (authorizer.class.name); None: all allowed
    token_authenticated: bool = False  # the principal logged in with a delegation token (KafkaPrincipal's flag)
    request_name: str = ""  # for the authorizer's audit log
    # controller_mutation_rate of the client (KIP-599): CreateTopics, DeleteTopics, CreatePartitions
    mutation_quota: ControllerMutationQuota = UNBOUNDED_MUTATION_QUOTA

    def apply_partition_change_quota(self, partitions: int) -> None:
        """ControllerRequestContext.applyPartitionChangeQuota: raises ThrottlingQuotaExceeded past a strict quota."""
        self.mutation_quota.record(partitions, self.now_ms)

    @property
    def mutation_throttle_ms(self) -> int:
        """The throttle time the answer carries (sendResponseMaybeThrottleWithControllerQuota)."""
        return self.mutation_quota.throttle_time(self.now_ms)

    # ---- authorization (ControllerApis' authHelper calls, as the request's principal) ------------------------
    # Every answer is yes without an authorizer (Kafka's authorizer.forall) and for this node's own requests.

    @property
    def _authorizer(self) -> "NodeAuthorizer | None":
        return None if self.principal is None else self.authorizer

    def authorize(self, operation: AclOperation, resource_type: ResourceType, resource_name: str,
                  log_if_allowed: bool = True, log_if_denied: bool = True, ref_count: int = 1) -> bool:
        from broker.security.authorization import authorize

        return authorize(self._authorizer, self.principal or "", self.client_host or "", operation, resource_type,
                         resource_name, self.request_name, log_if_allowed, log_if_denied, ref_count)

    def authorize_cluster(self, operation: AclOperation, log_if_denied: bool = True) -> bool:
        from broker.security.authorization import authorize_cluster

        return authorize_cluster(self._authorizer, self.principal or "", self.client_host or "", operation,
                                 self.request_name, log_if_denied)

    def filter_authorized(self, operation: AclOperation, resource_type: ResourceType, names: Iterable[str],
                          log_if_denied: bool = True) -> set[str]:
        """AuthHelper.filterByAuthorized: the names the principal may do ``operation`` on, each asked once."""
        from broker.security.authorization import filter_authorized

        return filter_authorized(self._authorizer, self.principal or "", self.client_host or "", operation,
                                 resource_type, names, lambda name: name, self.request_name, True, log_if_denied)
