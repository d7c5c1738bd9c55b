"""The one way a broker asks for a metadata change (Kafka's ForwardingManager and NodeToControllerChannel).

Two kinds of call, both answered only once their records are committed:

* ``forward(ctx, request)``: a client's admin request (CreateTopics, DeleteTopics, CreatePartitions,
  AlterConfigs, IncrementalAlterConfigs) sent whole in an EnvelopeRequest carrying the client's
  principal and address, answered with the controller's response; the controller authorizes it as that
  principal (broker/controlplane/controller_authorization.py and the handlers), as Kafka's ControllerApis does;
* ``call(request)``: the broker's own controller RPCs (BrokerRegistration, AllocateProducerIds, and
  CreateTopics for auto-creation, as Kafka's AutoTopicCreationManager sends it).

Every node has one ``QuorumControllerChannel``: a request runs in this process while this node is the active
controller (always, for a single node: a quorum of one voter), and goes to the active controller otherwise.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any, Protocol

from broker.network.peer_links import DIRECT, PeerLinks
from broker.controlplane.controller_apis import CONTROLLER_HANDLERS
from broker.controlplane.controller_apis.context import ControllerContext
from broker.errors import CloseConnection
from broker.controlplane.controller_authorization import CLUSTER_OPERATION, cluster_authorization_failed, error_response
from broker.quorum.raft_quorum import RaftQuorum, parse_voters
from broker.security.throttling import user_of
from cluster.acls import CLUSTER_NAME, ResourceType
from cluster.authorizer import AuthorizerNotReady
from cluster.controller import Controller
from cluster.metadata_image import MetadataImage
from cluster.quotas import UNBOUNDED_MUTATION_QUOTA, ControllerMutationQuota, ControllerMutationQuotaManager
from protocol.connection import encode_response, parse_request
from protocol.errors import ErrorCode
from protocol.generated.messages import (
    BrokerHeartbeatRequest, DefaultPrincipalData, EnvelopeRequest, EnvelopeResponse, RequestHeader,
)
from protocol.generated.messages import AlterPartitionRequest, CreateTopicsRequest, ResponseHeader
from protocol.message import Message

log = logging.getLogger("odradek.controller_channel")

# answered once their records commit, not once this node has applied them (see QuorumControllerChannel._decide)
_ANSWERED_AT_COMMIT = frozenset({BrokerHeartbeatRequest.API_KEY, AlterPartitionRequest.API_KEY})
# a decision over more partitions runs in a thread (see _many_partitions)
MANY_PARTITIONS = 1000


def _many_partitions(request: Message) -> bool:
    """A CreateTopics or AlterPartition of thousands of partitions: decided in a thread (~10 ms per thousand on
    the event loop). Its handler reads its image (immutable) and the request, and a CreateTopics the controller's
    placement randomness, which only decisions use, one at a time under the decision lock."""
    if isinstance(request, AlterPartitionRequest):
        return sum(len(t.partitions) for t in request.topics) >= MANY_PARTITIONS
    if isinstance(request, CreateTopicsRequest):
        return sum(max(t.num_partitions, len(t.assignments), 1) for t in request.topics) >= MANY_PARTITIONS
    return False

ANONYMOUS = DefaultPrincipalData(type="User", name="ANONYMOUS", token_authenticated=False)
PRINCIPAL_DATA_VERSION = 0


class ControllerChannel(Protocol):
    """What handlers use of the node's controller channel (QuorumControllerChannel), and nothing more."""

    quorum: RaftQuorum  # the controller listener's handlers ask whether this node is the active controller
    voter_endpoints: dict[int, tuple[str, str, int]]  # DescribeQuorum's nodes

    async def forward(self, ctx: Any, request: Message) -> Message: ...  # a client's admin request, whole

    async def call(self, request: Message, timeout_ms: int | None = None,
                   connection: str = "requests") -> Message: ...  # this broker's own controller RPC

    async def decide(self, request: Message, version: int, from_this_node: bool = False,
                     deadline: float | None = None, principal: str | None = None,
                     client_host: str | None = None,
                     client_id: str | None = None) -> Message: ...  # on the active controller

    async def handle_envelope(self, envelope: EnvelopeRequest) -> EnvelopeResponse: ...  # on the active controller


def principal_data(principal: str | None, token_authenticated: bool = False) -> DefaultPrincipalData:
    """A ``type:name`` principal as DefaultKafkaPrincipalBuilder serializes it (the name may hold colons); none:
    User:ANONYMOUS."""
    if not principal or ":" not in principal:
        return ANONYMOUS
    kind, name = principal.split(":", 1)
    return DefaultPrincipalData(type=kind, name=name, token_authenticated=token_authenticated)


def envelope_for(ctx: Any, request: Message) -> EnvelopeRequest:
    """The request as Kafka's ForwardingManager wraps it: header + body, the client's principal (with its
    token-authenticated flag: DefaultKafkaPrincipalBuilder.serialize), client address."""
    spec = ctx.request.spec
    header = RequestHeader(ctx.request.api_key, ctx.version, ctx.request.correlation_id, ctx.client_id)
    data = header.encode(spec.request_header_version(ctx.version)) + request.encode(ctx.version)
    try:
        address = ipaddress.ip_address(ctx.client_host).packed
    except ValueError:
        address = b""
    principal = principal_data(getattr(ctx, "principal", None), getattr(ctx, "token_authenticated", False))
    return EnvelopeRequest(request_data=data, request_principal=principal.encode(PRINCIPAL_DATA_VERSION),
                           client_host_address=address)


class QuorumControllerChannel:
    """The controller channel of a node in a Raft quorum: requests run here while this node is the active
    controller (decisions serialized against the latest image, then committed), and go to the active
    controller's controller listener otherwise (Kafka's NodeToControllerChannelManager): an Envelope for a
    client's admin request, the RPC itself for the broker's own. NOT_CONTROLLER, a lost connection or no known
    leader: wait and try the new leader, until ``request.timeout.ms`` (then the caller gets a retriable error)."""

    RETRY_BACKOFF_S = 0.05

    def __init__(self, controller: Controller, quorum: RaftQuorum, config: dict[str, Any], cluster_id: str,
                 voters: dict[int, tuple[str, int]], node_id: int, timeout_ms: int,
                 links: PeerLinks = DIRECT, authorizer: Any = None) -> None:
        self.controller = controller
        self.authorizer = authorizer  # the node's NodeAuthorizer (None: every request allowed)
        # controller_mutation_rate (KIP-599): enforced here, on the active controller, as Kafka's ControllerApis
        self.mutation_quotas = ControllerMutationQuotaManager(int(config.get("quota.window.num", 11)),
                                                              int(config.get("quota.window.size.seconds", 1)))
        self.quorum = quorum
        self.config = config
        self.cluster_id = cluster_id
        self._lock = asyncio.Lock()
        self.voter_endpoints = voter_endpoints(config)
        self.links = links
        self.voters = voters
        self.node_id = node_id
        self.timeout_ms = timeout_ms
        self._clients: dict[tuple[int, str], Any] = {}  # (controller, connection name) -> NodeClient
        # the quorum epoch this node last activated its controller in (a node leads an epoch at most once)
        self._activated_epoch: int | None = None
        # (epoch, image): the committed image plus the batches appended since, not yet committed
        self._pending: tuple[int, MetadataImage] | None = None

    async def forward(self, ctx: Any, request: Message) -> Message:
        handler = CONTROLLER_HANDLERS.get(request.API_KEY)
        validate = getattr(handler.module, "validate_request", None) if handler is not None else None
        if validate is not None:
            # a request class's own checks (CreateAclsRequest.validate) run where Kafka runs them: as the broker
            # parses the request, before anything is forwarded; a failure closes the client's connection
            try:
                validate(request)
            except ValueError as exc:
                raise CloseConnection(f"invalid {type(request).__name__}: {exc}") from None
        response = await self.send_envelope(envelope_for(ctx, request))
        if response.error_code:
            # ForwardingManager: an Envelope error is the brokers' misconfiguration (e.g. this node's principal
            # lacks CLUSTER_ACTION), not the client's: the client gets UNKNOWN_SERVER_ERROR in its request's shape
            log.warning("forwarding %s failed: the controller answered the envelope with error %d",
                        ctx.request.spec.name, response.error_code)
            return error_response(request, ctx.version, ErrorCode.UNKNOWN_SERVER_ERROR)
        spec = ctx.request.spec
        mv = memoryview(response.response_data)
        _, pos = ResponseHeader.decode_from(mv, 0, spec.response_header_version(ctx.version))
        return spec.response.decode(mv[pos:], ctx.version)

    async def send_envelope(self, envelope: EnvelopeRequest) -> EnvelopeResponse:
        """Where a forwarded request goes: the active controller, here or remote."""
        return await self._to_active(envelope, lambda e, deadline: self.handle_envelope(e), None, "requests")

    async def call(self, request: Message, timeout_ms: int | None = None, connection: str = "requests") -> Message:
        """A broker's own controller RPC, answered by the active controller within ``timeout_ms`` (default
        ``request.timeout.ms``). ``connection`` names the connection to a remote controller: heartbeats have
        their own (KAFKA-14392), so they never queue behind other requests."""
        return await self._to_active(request, self._decide_here, timeout_ms, connection)

    async def _decide_here(self, request: Message, deadline: float) -> Message:
        return await self.decide(request, CONTROLLER_HANDLERS[request.API_KEY].versions[1], from_this_node=True,
                                 deadline=deadline)

    async def decide(self, request: Message, version: int, from_this_node: bool = False,
                     deadline: float | None = None, principal: str | None = None,
                     client_host: str | None = None, client_id: str | None = None) -> Message:
        """A broker's controller RPC, run by this node's controller (it must be the active one);
        ``from_this_node``: sent by this node's own broker, in this process; ``principal``: the controller-listener
        connection's, which the controller listener has authorized for the API's CLUSTER operation (handlers
        authorize per resource as it). A heartbeat's arrival is recorded first, before it waits for the
        decisions queued ahead of it (QuorumController.processBrokerHeartbeat)."""
        if request.API_KEY == BrokerHeartbeatRequest.API_KEY:
            self.controller.heartbeat_arrived(self.quorum.image, request.broker_id, request.broker_epoch,
                                              self.quorum.clock.now_ms())
            if self._heartbeat_answerable_at_once(request):
                return self._decide_at_once(request, version, from_this_node)
        return await self._run(CONTROLLER_HANDLERS[request.API_KEY], request, version, principal, client_host,
                               from_this_node, deadline,
                               mutation_quota=self._mutation_quota(request.API_KEY, version, principal, client_id))

    async def handle_envelope(self, envelope: EnvelopeRequest) -> EnvelopeResponse:
        """The controller's side of an Envelope (ControllerApis.handleEnvelopeRequest): the controller listener
        has checked the sender's CLUSTER_ACTION; the inner request runs as the Envelope's principal, from the
        client's address, and is refused in its own shape without its CLUSTER operation."""
        try:
            inner = parse_request(bytes(envelope.request_data))
            handler = CONTROLLER_HANDLERS.get(inner.api_key)
            if handler is None or not handler.versions[0] <= inner.api_version <= handler.versions[1]:
                return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
            body = inner.decode_body()
            principal = DefaultPrincipalData.decode(envelope.request_principal, PRINCIPAL_DATA_VERSION)
        except Exception as exc:  # noqa: BLE001 - a bad envelope is the sender's error, never ours
            log.warning("rejecting an envelope that does not decode: %s", exc)
            return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
        host = _address(envelope.client_host_address)
        name = f"{principal.type}:{principal.name}"
        operation = CLUSTER_OPERATION.get(inner.api_key)
        try:
            if operation is not None and self.authorizer is not None and not self.authorizer.authorize(
                    name, host or "", operation, ResourceType.CLUSTER, CLUSTER_NAME, handler.spec.name):
                response = cluster_authorization_failed(body, inner.api_version, name)
            else:
                response = await self._run(handler, body, inner.api_version, name, host,
                                           token_authenticated=principal.token_authenticated,
                                           mutation_quota=self._mutation_quota(inner.api_key, inner.api_version,
                                                                               name, inner.client_id))
        except AuthorizerNotReady as exc:  # only super users are answered before the first image is loaded
            response = error_response(body, inner.api_version, ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))
        data = b"".join(encode_response(inner, response))[4:]
        return EnvelopeResponse(response_data=data, error_code=0)

    def _mutation_quota(self, api_key: int, version: int, principal: str | None,
                        client_id: str | None) -> ControllerMutationQuota | None:
        """The request's controller mutation quota (ControllerMutationQuotaManager.newQuotaFor): CreateTopics,
        DeleteTopics and CreatePartitions of a client, as its principal and client id; None otherwise."""
        if principal is None or api_key not in ControllerMutationQuotaManager.STRICT_SINCE:
            return None
        self.mutation_quotas.update(self.quorum.image.client_quotas)
        return self.mutation_quotas.quota_for(api_key, version, user_of(principal), client_id or "")

    def _heartbeat_answerable_at_once(self, request: BrokerHeartbeatRequest) -> bool:
        """A heartbeat that changes nothing but the broker's session is answered at once, ahead of the decisions
        queued before it (none of which it could observe or affect): however long the queue, a live broker hears
        back within its session."""
        return (self.quorum.is_active and self._activated_epoch == self.quorum.driver.epoch
                and self.controller.heartbeat_changes_nothing(
                    self._decision_image(), request.broker_id, request.broker_epoch, request.current_metadata_offset,
                    request.want_fence, request.want_shut_down))

    def _decide_at_once(self, request: BrokerHeartbeatRequest, version: int, from_this_node: bool) -> Message:
        cctx = ControllerContext(image=self._decision_image(), controller=self.controller, config=self.config,
                                 cluster_id=self.cluster_id, version=version, next_offset=self.quorum.end_offset,
                                 principal=None, client_host=None, now_ms=self.quorum.clock.now_ms(),
                                 describe_quorum=self.quorum.quorum_view, voter_endpoints=self.voter_endpoints,
                                 from_this_node=from_this_node, authorizer=self.authorizer)
        result = CONTROLLER_HANDLERS[request.API_KEY].handle(cctx, request)
        if result.records:  # heartbeat_changes_nothing and process_broker_heartbeat disagree: a bug, said loudly
            raise AssertionError(f"a heartbeat answered at once wrote records: {result.records}")
        return result.response

    async def _run(self, handler, request: Message, version: int, principal: str | None,
                   client_host: str | None, from_this_node: bool = False, deadline: float | None = None,
                   token_authenticated: bool = False, mutation_quota: ControllerMutationQuota | None = None
                   ) -> Message:
        """Decide ``request`` (one at a time, in arrival order, against every record decided before it, committed
        or not), append its records and let the next request be decided; answer once they are committed
        (QuorumController's pipelined write events)."""
        deadline = self.quorum.clock.monotonic() + self.timeout_ms / 1000 if deadline is None else deadline
        # the decision and its append run to the end even if the caller stops waiting: the next decision must see
        # them (Kafka's controller thread finishes an event it started)
        decided = asyncio.ensure_future(self._decide(handler, request, version, principal, client_host,
                                                     from_this_node, deadline, token_authenticated, mutation_quota))
        decided.add_done_callback(_retrieve)
        response, committed = await asyncio.shield(decided)
        if committed is not None:
            await committed
        return response

    async def _decide(self, handler, request: Message, version: int, principal: str | None,
                      client_host: str | None, from_this_node: bool, deadline: float,
                      token_authenticated: bool = False, mutation_quota: ControllerMutationQuota | None = None):
        async with self._lock:
            if self.quorum.clock.monotonic() > deadline:
                # QuorumController drops an event past its deadline undecided
                raise asyncio.TimeoutError(f"{type(request).__name__} waited past its deadline for the controller")
            await self.quorum.ready_to_decide()
            await self._activate_in_this_epoch()
            image = self._decision_image()
            cctx = ControllerContext(image=image, controller=self.controller, config=self.config,
                                     cluster_id=self.cluster_id, version=version,
                                     next_offset=self.quorum.end_offset, principal=principal, client_host=client_host,
                                     now_ms=self.quorum.clock.now_ms(), describe_quorum=self.quorum.quorum_view,
                                     voter_endpoints=self.voter_endpoints, from_this_node=from_this_node,
                                     authorizer=self.authorizer, token_authenticated=token_authenticated,
                                     request_name=handler.spec.name,
                                     mutation_quota=mutation_quota or UNBOUNDED_MUTATION_QUOTA)
            result = await asyncio.to_thread(handler.handle, cctx, request) if _many_partitions(request) \
                else handler.handle(cctx, request)
            # a broker's own lifecycle and ISR RPCs are answered once committed, as Kafka's controller does; the
            # others once this node has the change too (a CreateTopics answered here is then visible here), unless
            # that takes longer than PUBLISH_WAIT_S (the logs of 10,000 new partitions). A
            # heartbeat that unfences a broker may elect it leader of thousands of partitions: this node applying
            # them must not hold the answer past the heartbeat's timeout.
            committed = await self._append(image, result.records, request.API_KEY not in _ANSWERED_AT_COMMIT) \
                if result.records else None
            return result.response, committed

    def _decision_image(self) -> MetadataImage:
        """The image the next decision sees: the committed one with every batch this controller appended since
        in its current epoch (Kafka's in-memory state ahead of the high watermark); a new epoch or a failed
        commit starts again from the committed image."""
        committed = self.quorum.image
        pending = self._pending
        if pending is None or pending[0] != self.quorum.driver.epoch or pending[1].offset <= committed.offset:
            self._pending = None
            return committed
        return pending[1]

    async def _append(self, image: MetadataImage, records: list[Message], wait_published: bool = True
                      ) -> asyncio.Task:
        """Append a decision's records (the lock held) and make them part of the next decision's image."""
        epoch = self.quorum.driver.epoch
        try:
            committed, last_offset = await self.quorum.append(records, wait_published)
        except Exception:
            self._pending = None
            raise
        # thousands of records (a large CreateTopics): applied off the event loop (the images are immutable)
        pending = await asyncio.to_thread(image.apply, records, last_offset) if len(records) >= 1000 \
            else image.apply(records, last_offset)
        self._pending = (epoch, pending)
        committed.add_done_callback(self._forget_pending_on_failure)
        return committed

    def _forget_pending_on_failure(self, committed: asyncio.Task) -> None:
        if committed.cancelled() or committed.exception() is not None:
            self._pending = None  # the leadership was lost: the next leader decides from what was committed

    async def _to_active(self, request: Message, local, timeout_ms: int | None, connection: str) -> Message:
        from broker.network.node_client import BadResponse
        from broker.quorum.raft_driver import NotLeaderError
        from protocol.generated.api_keys import APIS

        clock = self.quorum.clock
        timeout_ms = self.timeout_ms if timeout_ms is None else timeout_ms
        deadline = clock.monotonic() + timeout_ms / 1000
        handler = CONTROLLER_HANDLERS.get(request.API_KEY)
        version = handler.versions[1] if handler is not None else APIS[request.API_KEY].stable_max
        last = "no quorum leader known"
        failed = 0  # attempts sent to a controller that did not answer (a failover): logged once one answers
        started = clock.monotonic()
        while True:
            driver = self.quorum.driver
            if self.quorum.is_active:
                try:
                    response = await asyncio.wait_for(local(request, deadline),
                                                      max(0.0, deadline - clock.monotonic()))
                    self._answered_after_retries(request, self.node_id, failed, started, last)
                    return response
                except NotLeaderError as exc:
                    last = str(exc)
                except asyncio.TimeoutError:
                    last = "this node's controller did not decide it in time"
                failed += 1
            elif driver.leader_id in self.voters and driver.leader_id != self.node_id:
                leader = driver.leader_id
                client = self._clients.get((leader, connection))
                if client is None:
                    host, port = self.voters[leader]
                    client = self._clients[(leader, connection)] = self.links.client(
                        host, port, f"controller-channel-{self.node_id}-{connection}", peer=leader)
                try:
                    response = await self._while_leader(
                        leader, client.request(request, version, max(0.1, deadline - clock.monotonic())))
                    if response is None:
                        last = f"the quorum moved on from node {leader} while it had the request"
                    elif getattr(response, "error_code", 0) != ErrorCode.NOT_CONTROLLER:
                        self._answered_after_retries(request, leader, failed, started, last)
                        return response
                    else:
                        last = f"node {leader} is no longer the controller"
                except (ConnectionError, asyncio.TimeoutError, BadResponse) as exc:
                    last = f"node {leader}: {exc}"
                failed += 1
            elif (unknown := driver.no_leader_known()) is not None:
                last = unknown
            if clock.monotonic() >= deadline:
                raise ControllerUnavailable(f"no active controller answered within {timeout_ms} ms: {last}")
            await asyncio.sleep(self.RETRY_BACKOFF_S)

    def _answered_after_retries(self, request: Message, controller: int, failed: int, started: float,
                                last: str) -> None:
        """A request that outlived a controller (its first attempts unanswered) says where it was answered: the
        one trace of a change in flight across a failover (a retried AlterPartition, a heartbeat)."""
        if failed:
            log.info("%s answered by controller %d after %d failed attempt(s) in %.1f s (the last: %s)",
                     type(request).__name__, controller, failed, self.quorum.clock.monotonic() - started, last)

    async def _while_leader(self, leader: int, request) -> Message | None:
        """The answer to ``request``, or None once the quorum names another leader first: a paused or cut-off
        old controller must not hold a broker's heartbeats until the request timeout (its session would expire
        at the new controller). An old leader cannot commit once a new one is elected, so sending again is
        safe (as Kafka's NodeToControllerChannelManager does after a disconnect). One wait on the driver's
        leader change, not a poll per request."""
        driver = self.quorum.driver
        task = asyncio.ensure_future(request)
        change = None
        try:
            while driver.leader_id == leader:
                change = asyncio.ensure_future(driver.leader_change().wait())
                done, _ = await asyncio.wait({task, change}, return_when=asyncio.FIRST_COMPLETED)
                if task in done:
                    return task.result()
            return None
        finally:
            for t in (task, change):
                if t is not None and not t.done():
                    t.cancel()
                    await asyncio.gather(t, return_exceptions=True)

    async def _activate_in_this_epoch(self) -> None:
        """The first thing the active controller does in a new epoch, before any request or periodic task is
        decided (Kafka's controller activation is the first event of its term): start every broker's session
        and bootstrap a new cluster, so a registration never lands ahead of the finalized feature levels."""
        epoch = self.quorum.driver.epoch
        if self._activated_epoch == epoch:
            return
        image, now = self.quorum.image, self.quorum.clock.now_ms()
        self.controller.activate(image, now)
        log.info("node %d is the active controller (epoch %d)", self.node_id, epoch)
        result = self.controller.bootstrap(image)
        if result.records:
            await self.quorum.commit(result.records)
        self._activated_epoch = epoch

    async def run_active_controller_duties(self, interval_s: float = 0.25) -> None:
        """While this node is the active controller: activate it in each new epoch, then fence brokers whose
        sessions expire (QuorumController's periodic tasks)."""
        from broker.quorum.raft_driver import NotLeaderError

        while True:
            await asyncio.sleep(interval_s)
            if not self.quorum.is_active:
                continue
            try:
                committed = None
                async with self._lock:
                    await self.quorum.ready_to_decide()
                    await self._activate_in_this_epoch()
                    image, now = self._decision_image(), self.quorum.clock.now_ms()
                    result = self.controller.maybe_fence_one_stale_broker(image, now)
                    if result.records:
                        committed = await self._append(image, result.records)
                if committed is not None:
                    await committed
            except NotLeaderError:
                pass  # another node leads: it activates in its own epoch
            except Exception:  # noqa: BLE001 - one failed round must not end the controller's duties
                log.exception("active controller duties failed; retrying")

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()


def _retrieve(task: asyncio.Task) -> None:
    """A decision nobody waits for any more: its failure is the caller's timeout, not an unretrieved error."""
    if not task.cancelled():
        task.exception()


def voter_endpoints(config: dict[str, Any]) -> dict[int, tuple[str, str, int]]:
    """voter id -> (controller listener name, host, port) from ``controller.quorum.voters``."""
    voters = config.get("controller.quorum.voters")
    if not voters:
        return {}
    names = [n.strip() for n in str(config.get("controller.listener.names") or "CONTROLLER").split(",") if n.strip()]
    return {v: (names[0], host, port) for v, (host, port) in parse_voters(voters).items()}


def _address(raw: bytes) -> str | None:
    try:
        return str(ipaddress.ip_address(bytes(raw)))
    except ValueError:
        return None


class ControllerUnavailable(Exception):
    """No active controller answered in time (the caller answers a retriable error or closes)."""
