"""What a handler gets besides its request: narrow handles to the node's parts, and the request's fields.

Handlers never see the whole node. ``BrokerHandles`` is built once when the node starts and shared by
every request; ``RequestContext`` adds what belongs to one request (header, connection, peer, time).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

from cluster.client_metrics import ClientInstanceMetadata, uuid_string
from protocol.connection import Request

if TYPE_CHECKING:
    from broker.clock import Clock
    from broker.config import BrokerConfig, Listener
    from broker.controlplane.controller_channel import ControllerChannel
    from broker.replication.fetch_session import FetchManager
    from broker.groups.group_service import GroupService
    from broker.transactions.txn_service import TxnService
    from broker.share.share_coordinator_service import ShareCoordinatorService
    from broker.share.share_partition_manager import SharePartitionManager
    from broker.quorum.metadata_publisher import MetadataPublisher
    from broker.observability.metrics import BrokerMetrics
    from broker.replication.replica_manager import ReplicaManager
    from broker.observability.telemetry import ClientTelemetry
    from broker.security.authentication import ListenerAuthentication
    from broker.security.authorization import NodeAuthorizer
    from broker.security.throttling import ClientQuotas
    from cluster.acls import AclOperation, ResourceType
    from cluster.metadata_image import MetadataImage


@dataclasses.dataclass(slots=True, eq=False)
class BrokerHandles:
    """The parts of a node that request handlers may use, and nothing else."""

    node_id: int
    cluster_id: str
    config: "BrokerConfig"
    clock: "Clock"
    metadata: "MetadataPublisher"  # the latest committed metadata image
    # the broker role's parts: None on a controller-only node, whose listeners never reach them
    replicas: "ReplicaManager | None"
    groups: "GroupService | None"
    txns: "TxnService | None"  # the transaction coordinator; None on a controller-only node
    controller: "ControllerChannel"  # the one way to ask for a metadata change
    metrics: "BrokerMetrics"
    advertised_endpoint: Callable[[str], "Listener"]  # listener name -> advertised host:port
    next_producer_id: Callable[[], Any]  # awaitable: a producer id from this node's block
    advertised_apis: tuple  # ApiVersion entries of the handler table, for ApiVersions
    telemetry: "ClientTelemetry | None"  # client metrics subscriptions and pushed metrics (KIP-714); broker role
    quorum: Any = None  # the Raft metadata quorum (RaftQuorum) of a node in a cluster; None for a single node
    controller_listeners: frozenset = frozenset()  # listener names that serve the controller table
    controller_advertised_apis: tuple = ()  # ApiVersion entries of the controller listener's table
    fetch_sessions: "FetchManager | None" = None  # incremental fetch sessions (KIP-227); None: never a session
    quotas: "ClientQuotas | None" = None  # client quotas (produce, fetch, request); None: never throttled
    authorizer: "NodeAuthorizer | None" = None  # ACLs (authorizer.class.name); None: every request allowed
    # the listeners' TLS stores: dynamic BROKER configs are validated against them; None: no dynamic SSL change
    authentication: "ListenerAuthentication | None" = None
    share_coordinator: "ShareCoordinatorService | None" = None  # the share coordinator (KIP-932); broker role
    share_partitions: "SharePartitionManager | None" = None  # share partitions and sessions (KIP-932); broker role


@dataclasses.dataclass(slots=True, frozen=True)
class EncodedResponse:
    """A handler's response already framed (``protocol.connection.encode_response``), e.g. in a thread: a
    response of thousands of partitions, encoded on the event loop, would hold every other request up."""

    parts: list
    error_code: int = 0


@dataclasses.dataclass(slots=True)
class ClientInformation:
    """The client software a connection announced in ApiVersions v3+ (Kafka's ClientInformation)."""

    software_name: str = "unknown"
    software_version: str = "unknown"


@dataclasses.dataclass(slots=True)
class RequestContext:
    handles: BrokerHandles
    request: Request
    connection_id: str
    listener: str
    client_host: str  # the peer's address, as Kafka's RequestContext.clientAddress
    now_ms: int
    received: float = 0.0  # clock.monotonic() when the frame was read (RequestQueueTimeMs)
    client_port: int | None = None
    client_information: ClientInformation = dataclasses.field(default_factory=ClientInformation)  # per connection
    principal: str = "User:ANONYMOUS"  # who the connection authenticated as (KafkaPrincipal's type:name)
    # KafkaPrincipal.tokenAuthenticated: logged in with a delegation token (SCRAM tokenauth=true, refused while
    # delegation tokens are not built, so False); forwarded requests carry it in their Envelope
    token_authenticated: bool = False
    throttle_ms: int = 0  # set by a quota: the connection reads nothing more this long after the answer
    gate: Any = None  # the connection's asyncio.Event: clear while a quota's throttle time runs (KIP-219 mute)
    on_throttle: Any = None  # the connection's callback: a throttle time just imposed (ms)
    # the connection's callback: handle none of its later requests until the release it returns is called
    hold: Any = None
    started: float = 0.0  # clock.monotonic() when the handler began (RequestChannel's requestDequeueTimeNanos)
    # when the handler's own work ended (apiLocalCompleteTimeNanos): set by a handler before it parks (a long-poll
    # fetch), else by dispatch when the handler returns; the wait after it is not the client's request time
    local_complete: float | None = None
    # the request quota was recorded, or exempted, by the handler itself (Kafka's Fetch sends its own answer, not
    # through sendResponseMaybeThrottle): dispatch records nothing more
    request_quota_done: bool = False
    set_aside: float = 0.0  # seconds of waits before local_complete that are not the handler's work (``aside``)

    @property
    def version(self) -> int:
        return self.request.api_version

    def record_quota(self, manager_name: str, value: float, now_ms: int | None = None) -> int:
        """ClientQuotaManager.maybeRecordAndGetThrottleTimeMs: record ``value`` against the client's quota and
        return the throttle time (ms; 0: within, or no such quota), throttling nothing yet."""
        quotas = self.handles.quotas
        manager = getattr(quotas, manager_name) if quotas is not None else None
        if manager is None or not manager.enabled:
            return 0
        from broker.security.throttling import user_of

        return manager.record(user_of(self.principal), self.client_id or "", value,
                              self.clock.now_ms() if now_ms is None else now_ms)

    def apply_throttle(self, manager_name: str, ms: int, mute: bool = True) -> None:
        """RequestHandlerHelper.throttle: the answer carries ``ms`` and the connection is muted that long (unless
        ``mute`` is False: muted already); the throttle-time metrics are the quota's that imposed it."""
        self.throttle_ms = max(self.throttle_ms, ms)
        self.metrics.throttle_time.labels(manager_name).inc(ms)
        self.metrics.throttled.labels(manager_name).inc()
        if mute and self.on_throttle is not None:
            self.on_throttle(ms)

    def work_done(self) -> None:
        """The handler's own work ends here (KafkaApis.handle returning, apiLocalCompleteTimeNanos): what follows is
        a purgatory's or a coordinator's, not the client's request time. The first call counts."""
        if self.local_complete is None:
            self.local_complete = self.clock.monotonic()

    async def park(self, awaitable):
        """Await what Kafka hands to a purgatory or a coordinator and answers from a callback (a join's rebalance,
        a commit's write, acks=all's replication, a forwarded request): the handler's own work ends before it."""
        self.work_done()
        return await awaitable

    async def aside(self, awaitable):
        """Await something Kafka's handler starts and does not wait for (a ShareFetch's piggybacked
        acknowledgements, written while it goes on to fetch): the wait is not request time, the work after it is."""
        if self.local_complete is not None:
            return await awaitable
        began = self.clock.monotonic()
        try:
            return await awaitable
        finally:
            if self.local_complete is None:
                self.set_aside += self.clock.monotonic() - began

    def request_thread_time_percent(self) -> float:
        """RequestChannel.requestThreadTimeNanos as ClientRequestQuotaManager counts it (nanosToPercentage): from
        the handler's start to the end of its own work, less the waits set aside, in percent of a second."""
        self.work_done()
        return max(self.local_complete - self.started - self.set_aside, 0.0) * 100.0

    def record_request_quota(self, now_ms: int | None = None) -> int:
        """ClientRequestQuotaManager.maybeRecordAndGetThrottleTimeMs: this request's thread time against
        ``request_percentage``, once (the request counts as recorded even without a quota); the throttle time."""
        self.request_quota_done = True
        quotas = self.handles.quotas
        if quotas is None or not quotas.request.enabled:
            return 0
        return self.record_quota("request", self.request_thread_time_percent(), now_ms)

    @property
    def client_id(self) -> Any:
        return self.request.client_id

    # ---- authorization (Kafka's AuthHelper; every answer is yes on a node without an authorizer) -------------
    @property
    def _request_name(self) -> str:
        spec = self.request.spec
        return spec.name if spec is not None else str(self.request.api_key)

    def authorize(self, operation: "AclOperation", resource_type: "ResourceType", resource_name: str,
                  log_if_allowed: bool = True, log_if_denied: bool = True, ref_count: int = 1) -> bool:
        from broker.security.authorization import authorize

        return authorize(self.handles.authorizer, self.principal, self.client_host, operation, resource_type,
                         resource_name, self._request_name, log_if_allowed, log_if_denied, ref_count)

    def authorize_cluster(self, operation: "AclOperation", log_if_denied: bool = True) -> bool:
        from broker.security.authorization import authorize_cluster

        return authorize_cluster(self.handles.authorizer, self.principal, self.client_host, operation,
                                 self._request_name, log_if_denied)

    def authorize_by_resource_type(self, operation: "AclOperation", resource_type: "ResourceType") -> bool:
        authorizer = self.handles.authorizer
        return authorizer is None or authorizer.authorize_by_resource_type(
            self.principal, self.client_host, operation, resource_type, self._request_name)

    def filter_authorized(self, operation: "AclOperation", resource_type: "ResourceType", resources,
                          name_of=lambda name: name, log_if_allowed: bool = True,
                          log_if_denied: bool = True) -> set[str]:
        from broker.security.authorization import filter_authorized

        return filter_authorized(self.handles.authorizer, self.principal, self.client_host, operation,
                                 resource_type, resources, name_of, self._request_name, log_if_allowed,
                                 log_if_denied)

    def authorized_operations(self, resource_type: "ResourceType", resource_name: str) -> int:
        from broker.security.authorization import authorized_operations

        return authorized_operations(self.handles.authorizer, self.principal, self.client_host, resource_type,
                                     resource_name, self._request_name)

    def client_instance_metadata(self, instance_id: bytes) -> "ClientInstanceMetadata":
        """What client telemetry subscriptions match on (Kafka's ClientMetricsInstanceMetadata)."""
        info = self.client_information
        return ClientInstanceMetadata(uuid_string(instance_id), self.client_id, info.software_name,
                                      info.software_version, self.client_host,
                                      None if self.client_port is None else str(self.client_port))

    # ---- narrow handles --------------------------------------------------------------------------
    @property
    def image(self) -> "MetadataImage":
        return self.handles.metadata.image

    @property
    def node_id(self) -> int:
        return self.handles.node_id

    @property
    def cluster_id(self) -> str:
        return self.handles.cluster_id

    @property
    def config(self) -> "BrokerConfig":
        return self.handles.config

    @property
    def clock(self) -> "Clock":
        return self.handles.clock

    @property
    def replicas(self) -> "ReplicaManager":
        return self.handles.replicas

    @property
    def groups(self) -> "GroupService":
        return self.handles.groups

    @property
    def txns(self) -> "TxnService":
        return self.handles.txns

    @property
    def share_coordinator(self) -> "ShareCoordinatorService":
        return self.handles.share_coordinator

    @property
    def controller(self) -> "ControllerChannel":
        return self.handles.controller

    @property
    def metrics(self) -> "BrokerMetrics":
        return self.handles.metrics

    @property
    def telemetry(self) -> "ClientTelemetry":
        return self.handles.telemetry

    @property
    def fetch_sessions(self) -> "FetchManager | None":
        return self.handles.fetch_sessions
