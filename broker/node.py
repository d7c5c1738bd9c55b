"""One node's wiring: the metadata log and quorum, the controller channel, the partition logs, the group
coordinator, metrics and the network server, started and stopped in order.

Every node runs the same way, as Kafka's KRaft nodes do: a single node (no ``controller.quorum.voters``) is a
quorum of one voter that elects itself at once; a cluster's nodes are voters or observers of theirs.

Nothing here answers requests: handlers get ``BrokerHandles`` (broker/apis/context.py), never this object.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import socket
from pathlib import Path

import broker.gc_tuning as gc_tuning
from broker.apis import HANDLERS
from broker.controlplane.controller_listener import CONTROLLER_LISTENER_HANDLERS
from broker.replication.isr_sender import IsrSender
from broker.replication.replica_fetcher import ReplicaFetcherManager
from broker.quorum.bootstrap_metadata import read_bootstrap
from broker.clock import SYSTEM_CLOCK, Clock
from broker.config import SECURITY_PROTOCOL_IDS, BrokerConfig, Listener
from broker.config.config_types import ConfigException
from broker.security.authentication import ListenerAuthentication
from broker.security.node_links import link_security
from broker.security.tls import client_context
from broker.security.authorization import NodeAuthorizer
from broker.security.throttling import ClientQuotas
from broker.apis.context import BrokerHandles
from broker.apis.local import LocalRequests
from broker.controlplane.controller_channel import ControllerUnavailable, QuorumControllerChannel
from broker.errors import QuorumFailed, StartupError
from broker.replication.fetch_session import (
    MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS, FetchManager, FetchSessionCache, FetchSessionCacheCollector,
)
from broker.network.fault_injection import CONFIG_KEY as FAULT_INJECTION_FILE, FaultRules, FaultRulesFile
from broker.groups.group_service import GroupCoordinatorCollector, GroupService
from broker.share.persister import SharePersister
from broker.share.share_partition_manager import SharePartitionCollector, SharePartitionManager
from broker.share.share_coordinator_service import ShareCoordinatorCollector, ShareCoordinatorService
from broker.transactions.txn_service import TxnMarkerChannelCollector, TxnService
from broker.quorum.log_dirs import METADATA_PARTITION_DIR, ensure_meta_properties, metadata_log_dir
from broker.quorum.metadata_publisher import MetadataPublisher
from broker.observability.metrics import BrokerMetrics
from broker.network.peer_links import PeerLinks
from broker.observability.telemetry import ClientTelemetry, PushedMetrics
from broker.network.registry import advertised
from broker.quorum.metrics import QuorumCollector
from broker.quorum.raft_quorum import RaftQuorum, SnapshotPolicy, parse_voters
from broker.replication.replica_manager import ReplicaManager
from broker.network.sendfile import SendStats
from broker.network.connection_quotas import NodeConnectionQuotas
from broker.network.server import NetworkServer
from broker.timeouts import wait_for
from cluster.client_metrics import ClientMetricsManager
from cluster.controller import Controller
from cluster.image_diff import ImageDiff, diff_images
from cluster.dynamic_broker_config import RESOURCE_BROKER, applicable
from cluster.metadata_image import MetadataImage
from cluster.raft.node import RaftConfig
from protocol.errors import ErrorCode
from protocol.generated.messages import AllocateProducerIdsRequest, BrokerHeartbeatRequest, BrokerRegistrationRequest
from protocol.generated.messages.api_versions_response import ApiVersion
from protocol.generated.messages.broker_registration_request import Listener as RegistrationListener
from storage.checkpoints import MetaProperties, random_uuid
from storage.config import ConfigError, LogConfig, LogManagerConfig
from storage.log_manager import LogManager

log = logging.getLogger("odradek.node")



class Broker:
    """One broker process (combined broker and controller while the quorum has one voter)."""

    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        for warning in config.validate():  # raises ConfigException on an invalid value
            log.warning(warning)
        self.config = config
        self.clock = clock
        self.node_id = config.node_id
        self.log_dirs: list[Path] = config.log_dirs
        self.cluster_id: str | None = None
        self.replicas: ReplicaManager | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        self.isr: IsrSender | None = None
        send_stats = SendStats()
        self.metrics = BrokerMetrics(lambda: self.replicas, send_stats)
        self.server = NetworkServer(config.listeners, int(config["socket.request.max.bytes"]),
                                    int(config["connections.max.idle.ms"]), self.metrics, send_stats, clock)
        self.metadata = MetadataPublisher()
        self.server.quotas = NodeConnectionQuotas(config, self.server)
        self.metadata.add(self.server.quotas.on_new_metadata_image)
        self.quotas = ClientQuotas(int(config["quota.window.num"]), int(config["quota.window.size.seconds"]))
        self.metadata.add(self.quotas.on_new_metadata_image)
        self.authorizer = NodeAuthorizer.from_config(config.values, config.node_id)
        if self.authorizer is not None:
            self.metadata.add(self.authorizer.on_new_metadata_image)
        self.server.authentication = ListenerAuthentication(config, lambda: self.metadata.image)
        self._dynamic_seen = None  # this broker's dynamic configs as last applied (their mapping in the image)
        self.metadata.add(self._apply_dynamic_broker_configs)
        self.controller: QuorumControllerChannel | None = None  # made at start, once the cluster id is known
        self.groups: GroupService | None = None
        self.txns: TxnService | None = None
        self.share_coordinator: ShareCoordinatorService | None = None
        self.share_persister: SharePersister | None = None
        self.share_partitions: SharePartitionManager | None = None
        self.telemetry: ClientTelemetry | None = None
        self._telemetry_expiry: asyncio.Task | None = None
        self.log_manager: LogManager | None = None
        self.logs_loaded: asyncio.Future | None = None
        self._log_loading: asyncio.Future | None = None  # the log manager's start-up thread
        self._partitions_opened = False  # the first apply is done: images are applied as they are published
        self._awaiting_registration = False
        self.producer_ids = ProducerIdBlock()
        self._producer_id_lock = asyncio.Lock()
        self.incarnation_id = random_uuid()
        self.broker_epoch = -1
        # a single node is its own quorum of one voter, which never sends to itself: no address is needed
        self.voters = parse_voters(config["controller.quorum.voters"]) if config.get("controller.quorum.voters") \
            else {self.node_id: ("127.0.0.1", 0)}
        self.raft: RaftQuorum | None = None  # made at start, once the cluster id is known
        self._background: list[asyncio.Task] = []
        self._want_shut_down = False
        self.fenced = True
        self.is_broker = "broker" in config.process_roles
        # incremental fetch sessions (KIP-227): the Fetch handler's FetchManager
        self.fetch_sessions = FetchManager(FetchSessionCache(
            int(config["max.incremental.fetch.session.cache.slots"]), MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
            random.Random()))
        if self.is_broker:
            self.metrics.registry.register(FetchSessionCacheCollector(self.fetch_sessions))
        fault_file = config.get(FAULT_INJECTION_FILE)  # test-only; the config refuses it off loopback
        faults = FaultRules() if fault_file else None
        self._fault_rules_file = FaultRulesFile(fault_file, faults) if fault_file else None
        # how this node reaches the others (the fault hook's one seam): brokers' inter-broker listener, and the
        # controllers' listener (Raft, the controller channel), each with its listener's security
        self.links = PeerLinks(faults, link_security(config, config.inter_broker_listener)
                               if self.is_broker else None)
        self.controller_links = PeerLinks(faults, link_security(config, config.controller_listener, controller=True)
                                          if config.controller_listener else None)

    # ---- what tests and the CLI look at ------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.metadata.image

    @property
    def send_stats(self) -> SendStats:
        return self.server.send_stats

    @property
    def loading(self) -> bool:
        return self.replicas is None or self.replicas.loading

    def bound_port(self, listener: str | None = None) -> int:
        if listener is None:
            listener = next(iter(self.server.bound))
        return self.server.bound[listener].port

    @property
    def bound_listeners(self) -> list[str]:
        return list(self.server.bound)

    def advertised_endpoint(self, listener: str) -> Listener:
        """The advertised host:port for a listener; port 0 in config means the port actually bound."""
        bound = self.server.bound
        for adv in self.config.advertised_listeners:
            if adv.name == listener:
                port = adv.port or bound[listener].port
                host = adv.host or bound[listener].host or socket.getfqdn()
                return Listener(listener, host, port)
        b = bound[listener]
        return Listener(listener, b.host or socket.getfqdn(), b.port)

    # ---- lifecycle ---------------------------------------------------------------------------------

    async def start(self, wait_for_logs: bool = True) -> None:
        """Open the metadata log, register, load the partition logs in the background, and start serving
        clients once unfenced.

        When logs take longer than a heartbeat interval to load (after an unclean shutdown: recovery runs in
        worker threads, never on the event loop) the broker serves meanwhile: partitions it hosts are
        NOT_LEADER_OR_FOLLOWER / LEADER_NOT_AVAILABLE and groups COORDINATOR_LOAD_IN_PROGRESS, Kafka's
        retriable errors.
        ``wait_for_logs`` returns only once loading finished (the embedded broker's default).
        """
        if self._fault_rules_file is not None:
            log.warning("node %d: the test-only fault hook is on (%s)", self.node_id, FAULT_INJECTION_FILE)
            self._fault_rules_file.start()
        self.cluster_id = ensure_meta_properties(self.log_dirs, self.node_id, self.config.get("cluster.id"))
        bootstrap, bootstrap_records = await asyncio.to_thread(
            read_bootstrap, metadata_log_dir(self.log_dirs, self.config.get("metadata.log.dir")))
        controller = Controller(self.node_id, self.config.values, random.SystemRandom(),
                                validate_topic_configs=self._validate_topic_configs, register_fenced=True,
                                bootstrap_features=bootstrap, bootstrap_records=bootstrap_records)
        cfg = self.config
        self.raft = RaftQuorum(
            self.node_id, self.voters,
            metadata_log_dir(self.log_dirs, cfg.get("metadata.log.dir")) / METADATA_PARTITION_DIR,
            self.cluster_id, self.metadata, self.clock,
            RaftConfig(election_timeout_ms=int(cfg["controller.quorum.election.timeout.ms"]),
                       fetch_timeout_ms=int(cfg["controller.quorum.fetch.timeout.ms"]),
                       election_backoff_max_ms=int(cfg["controller.quorum.election.backoff.max.ms"]),
                       request_timeout_ms=int(cfg["controller.quorum.request.timeout.ms"]),
                       retry_backoff_ms=int(cfg["controller.quorum.retry.backoff.ms"])),
            snapshots=SnapshotPolicy(int(cfg["metadata.log.max.record.bytes.between.snapshots"]),
                                     int(cfg["metadata.log.max.snapshot.interval.ms"])),
            segment_bytes=int(cfg["metadata.log.segment.bytes"]),
            retention=(int(cfg["metadata.max.retention.bytes"]), int(cfg["metadata.max.retention.ms"])),
            links=self.controller_links)
        self.controller = QuorumControllerChannel(controller, self.raft, cfg.values, self.cluster_id, self.voters,
                                                  self.node_id, int(cfg["request.timeout.ms"]),
                                                  self.controller_links, self.authorizer)
        image = self.metadata.image
        self.metrics.registry.register(QuorumCollector(
            self.raft, controller.contacts if "controller" in self.config.process_roles else None))
        if self.is_broker:
            await self._start_broker_parts(image)
        self.server.handles = BrokerHandles(
            node_id=self.node_id, cluster_id=self.cluster_id, config=self.config, clock=self.clock,
            metadata=self.metadata, replicas=self.replicas, groups=self.groups, txns=self.txns,
            controller=self.controller,
            metrics=self.metrics, advertised_endpoint=self.advertised_endpoint,
            next_producer_id=self.next_producer_id,
            advertised_apis=tuple(ApiVersion(*entry) for entry in advertised(HANDLERS)), telemetry=self.telemetry,
            quorum=self.raft, controller_listeners=self.config.controller_listener_names,
            controller_advertised_apis=tuple(ApiVersion(*e) for e in advertised(CONTROLLER_LISTENER_HANDLERS)),
            fetch_sessions=self.fetch_sessions, quotas=self.quotas, authorizer=self.authorizer,
            authentication=self.server.authentication, share_coordinator=self.share_coordinator,
            share_partitions=self.share_partitions)
        if self.txns is not None and self._fault_rules_file is None:
            # the coordinator's markers and a leader's verification for this node itself: in-process
            listener = self._inter_broker_listener()
            self.txns.markers.local = LocalRequests(self.server.handles, listener, f"txn-marker-sender-{self.node_id}")
            self.txns.verifier.local = LocalRequests(self.server.handles, listener, f"txn-verifier-{self.node_id}")
            self.share_persister.local = LocalRequests(self.server.handles, listener,
                                                       f"share-persister-{self.node_id}")
        await self.server.bind()
        self.metrics.start(self.config.get("metrics.prometheus.listener"))
        # BrokerServer: the controller listener serves the quorum at once; clients and followers are let in
        # only once this node has caught up with the metadata log (before that its image is stale or empty,
        # and a restarted broker would answer UNKNOWN_TOPIC_OR_PARTITION for topics that exist)
        await self.server.start_serving(only=self.config.controller_listener_names)
        await self.raft.start()
        if self.node_id in self.voters:
            self._spawn(self.controller.run_active_controller_duties())
        await self._catch_up()
        if not self.is_broker:  # a controller-only node: no partitions, groups or client telemetry
            await self.server.start_serving()
            self.logs_loaded = asyncio.get_running_loop().create_future()
            self.logs_loaded.set_result(None)
            return
        await self._register()
        self._spawn(self._heartbeat_loop())
        self._telemetry_expiry = asyncio.ensure_future(self.telemetry.expire_periodically(self.clock))
        self.logs_loaded = asyncio.ensure_future(self._load_partitions())
        await self._until_unfenced_or_slow()
        await self.server.start_serving()
        if wait_for_logs:
            await self.logs_loaded
            await self.wait_unfenced()

    async def _start_broker_parts(self, image: MetadataImage) -> None:
        """The broker role's parts: partition logs, replica manager, group coordinator, client telemetry."""
        lm_config = LogManagerConfig.from_props({**self.config.values, "log.dirs": ",".join(map(str, self.log_dirs)),
                                                 "cluster.id": self.cluster_id})
        topic_configs = {name: dict(image.topic_config(name)) for name in image.topics_by_name}
        self.log_manager = LogManager(lm_config, broker_props=self.config.values, topic_configs=topic_configs,
                                      broker_epoch=image.brokers[self.node_id].broker_epoch
                                      if self.node_id in image.brokers else -1)
        self.replicas = ReplicaManager(self.node_id, self.log_manager, self.clock.now_ms, self.metrics,
                                       replica_lag_time_max_ms=int(self.config["replica.lag.time.max.ms"]))
        self.replicas.loading = True
        self.fetchers = ReplicaFetcherManager(self.node_id, self.replicas, self.clock, self._inter_broker_listener(),
                                              lambda: self.broker_epoch, self.config.values, self.links)
        self.isr = IsrSender(self.node_id, self.replicas, self.controller, lambda: self.broker_epoch)
        self._spawn(self.isr.expire_periodically(int(self.config["replica.lag.time.max.ms"]) / 2000))
        self.metadata.add(self._publish_to_replicas)
        self.groups = GroupService(self.node_id, self.config, self.metadata, self.replicas, self.controller,
                                   self.clock)
        self.metadata.add(self.groups.on_new_metadata_image)
        self.metrics.registry.register(GroupCoordinatorCollector(self.groups))
        self.txns = TxnService(self.node_id, self.config, self.metadata, self.replicas, self.controller, self.clock,
                               self.links, self.next_producer_id, self._inter_broker_listener())
        self.metadata.add(self.txns.on_new_metadata_image)
        self.metrics.registry.register(TxnMarkerChannelCollector(self.txns))
        self.share_coordinator = ShareCoordinatorService(self.node_id, self.config, self.metadata, self.replicas,
                                                         self.controller, self.clock)
        self.metadata.add(self.share_coordinator.on_new_metadata_image)
        self.metrics.registry.register(ShareCoordinatorCollector(self.share_coordinator))
        self.share_persister = SharePersister(self.node_id, lambda: self.metadata.image, self._inter_broker_listener(),
                                              self.links, self.share_coordinator,
                                              int(self.config["request.timeout.ms"]) / 1000)
        self.groups.persister = self.share_persister
        self.share_partitions = SharePartitionManager(self.node_id, self.config, self.replicas, self.share_persister,
                                                      self.clock, self.metadata)
        self.metrics.registry.register(SharePartitionCollector(self.share_partitions))
        pushed = PushedMetrics()
        self.metrics.registry.register(pushed)
        self.telemetry = ClientTelemetry(
            ClientMetricsManager(random_uuid, telemetry_max_bytes=int(self.config["telemetry.max.bytes"])), pushed)
        await self.telemetry.on_new_metadata_image(image)
        self.metadata.add(self.telemetry.on_new_metadata_image)

    def _spawn(self, coro) -> None:
        self._background.append(asyncio.ensure_future(coro))

    async def _catch_up(self) -> None:
        """Wait until the quorum has a leader and this node has applied up to its high watermark, so the
        partition logs are opened against the cluster's image, not a partial one."""
        driver = self.raft.driver
        waited = 0.0
        while not (driver.high_watermark > 0 and driver.applied_offset >= driver.high_watermark):
            if driver.failure is not None:
                raise QuorumFailed(f"the metadata quorum failed: {driver.failure!r}")
            await asyncio.sleep(0.05)
            waited += 0.05
            if waited >= 10:
                log.warning("node %d: still waiting for the metadata quorum (leader %s, epoch %d)", self.node_id,
                            driver.leader_id, driver.epoch)
                waited = 0.0
        await self.raft.wait_published(self.raft.image.offset)
        log.info("node %d: caught up with the metadata log at offset %d", self.node_id, driver.applied_offset)

    async def _until_unfenced_or_slow(self) -> None:
        """Clients are let in once this broker is unfenced (Kafka's BrokerServer enables request processing once
        its logs are loaded and it has caught up): before that its Metadata would list no live broker and a
        CreateTopics would find every broker fenced. Unfenced as the controller's heartbeat answer says, not once
        this node has applied it (``unfenced_here``): the other nodes list it from the commit on, and a client
        they send here must find it listening. A broker whose logs take longer to load than one heartbeat
        interval serves meanwhile, answering Kafka's retriable errors for what it has not loaded."""
        waited, limit = 0.0, int(self.config["broker.heartbeat.interval.ms"]) / 1000
        while self.fenced and waited < limit and not self.logs_loaded.done():
            await asyncio.sleep(0.01)
            waited += 0.01
        while self.fenced and self.logs_loaded.done() and waited < limit:  # the next heartbeat unfences
            await asyncio.sleep(0.01)
            waited += 0.01

    @property
    def unfenced_here(self) -> bool:
        """The controller unfenced this broker and this node has applied it (with the leaderships it brought: the
        heartbeat is answered at commit, before this node publishes the change)."""
        if self.fenced:
            return False
        b = self.metadata.image.brokers.get(self.node_id)
        return b is not None and not b.fenced and b.broker_epoch == self.broker_epoch

    async def wait_unfenced(self, timeout_s: float = 30.0) -> None:
        """Wait until the controller has unfenced this broker (its first heartbeat after the logs loaded) and this
        node has applied it: only then does it take partitions, so a CreateTopics sent as soon as ``start`` returns
        finds it, and a group coordinator it leads is loading."""
        waited = 0.0
        while not self.unfenced_here and waited < timeout_s:
            await asyncio.sleep(0.01)
            waited += 0.01
        if not self.unfenced_here:
            log.warning("node %d: still fenced %.0f s after its logs loaded", self.node_id, timeout_s)

    async def _registration_applied(self) -> None:
        """Wait until the metadata holds this process's own registration (BrokerServer's initial catch-up): the
        controller takes a new incarnation out of every ISR and leadership in the same batch, so the partitions
        are never opened against an image in which a restarted broker still leads at its old epoch."""
        waited = 0.0
        while (b := self.metadata.image.brokers.get(self.node_id)) is None or b.broker_epoch != self.broker_epoch:
            await asyncio.sleep(0.05)
            waited += 0.05
            if waited >= 10:
                log.warning("node %d: still waiting for its registration (broker epoch %d) in the metadata",
                            self.node_id, self.broker_epoch)
                waited = 0.0

    async def _heartbeat_loop(self) -> None:
        """BrokerLifecycleManager: a heartbeat every ``broker.heartbeat.interval.ms`` keeps the session; the
        first ones unfence the broker once it has caught up; a STALE_BROKER_EPOCH means register again."""
        interval = int(self.config["broker.heartbeat.interval.ms"]) / 1000
        session_ms = int(self.config["broker.session.timeout.ms"])  # a heartbeat times out at half of it
        while True:
            try:
                response = await self.controller.call(BrokerHeartbeatRequest(
                    broker_id=self.node_id, broker_epoch=self.broker_epoch,
                    current_metadata_offset=self.raft.driver.applied_offset - 1,
                    # fenced until the partitions are open (BrokerServer's setReadyToUnfence after the first
                    # publish): an unfenced broker is elected where it is the last ISR member
                    want_fence=self.logs_loaded is None or not self.logs_loaded.done(),
                    want_shut_down=self._want_shut_down), timeout_ms=session_ms // 2, connection="heartbeats")
                if response.error_code == ErrorCode.STALE_BROKER_EPOCH:
                    log.warning("node %d: heartbeat refused as a stale broker epoch %d; registering again",
                                self.node_id, self.broker_epoch)
                    await self._register()
                    continue
                if response.error_code:
                    log.warning("node %d: heartbeat failed with error %d", self.node_id, response.error_code)
                else:
                    if self.fenced != response.is_fenced:
                        log.info("node %d is %s", self.node_id, "fenced" if response.is_fenced else "unfenced")
                    self.fenced = response.is_fenced
                    if self._want_shut_down and response.should_shut_down:
                        log.info("node %d: controlled shutdown granted", self.node_id)
                        return
            except ControllerUnavailable as exc:
                log.warning("node %d: heartbeat: %s", self.node_id, exc)
            await asyncio.sleep(0.05 if self._want_shut_down or self.fenced else interval)

    async def _register(self) -> None:
        """BrokerRegistration through the controller channel (BrokerLifecycleManager)."""
        controller_listeners = self.config.controller_listener_names
        protocols = self.config.listener_security_protocols()
        listeners = [RegistrationListener(name=name, host=ep.host, port=ep.port,
                                          security_protocol=SECURITY_PROTOCOL_IDS[protocols[name.upper()]])
                     for name, ep in ((n, self.advertised_endpoint(n)) for n in self.server.bound)
                     if name not in controller_listeners]
        dir_ids = [m.directory_id for m in (MetaProperties.read(str(d / "meta.properties")) for d in self.log_dirs)
                   if m.directory_id]
        request = BrokerRegistrationRequest(
            broker_id=self.node_id, cluster_id=self.cluster_id, incarnation_id=self.incarnation_id,
            listeners=listeners, features=[], rack=self.config.get("broker.rack"), log_dirs=dir_ids,
            previous_broker_epoch=self.broker_epoch)
        # BrokerLifecycleManager's RegistrationTimeoutEvent: a process whose first registration does not succeed in
        # initial.broker.registration.timeout.ms exits (e.g. another live process registered with its node.id)
        initial = self.broker_epoch < 0
        deadline = self.clock.monotonic() + int(self.config["initial.broker.registration.timeout.ms"]) / 1000
        why = "no controller answered"
        while True:
            if initial and self.clock.monotonic() >= deadline:
                raise StartupError(f"unable to register with the controller quorum as node {self.node_id} within "
                                   f"initial.broker.registration.timeout.ms: {why}")
            try:
                response = await self.controller.call(request)
            except ControllerUnavailable as exc:  # only a quorum's channel waits for a controller
                log.warning("node %d: registration: %s; retrying", self.node_id, exc)
                continue
            if response.error_code in (ErrorCode.DUPLICATE_BROKER_REGISTRATION, ErrorCode.NOT_CONTROLLER):
                # our previous incarnation's session has not expired yet, or the controller just moved
                log.warning("node %d: registration refused with error %d; retrying", self.node_id,
                            response.error_code)
                why = (f"another live process is registered as node {self.node_id} (DUPLICATE_BROKER_REGISTRATION:"
                       f" a duplicate node.id?)" if response.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
                       else "the controller kept moving (NOT_CONTROLLER)")
                await asyncio.sleep(1.0)
                continue
            if response.error_code:
                raise RuntimeError(f"broker registration failed with error {response.error_code}")
            break
        self.broker_epoch = response.broker_epoch
        log.info("node %d registered with broker epoch %d", self.node_id, self.broker_epoch)

    async def _publish_to_replicas(self, image: MetadataImage) -> None:
        """Open/close partitions for a committed image (off the event loop); until the first apply at start-up,
        the loader applies the latest image itself."""
        assert self.replicas is not None
        if self._partitions_opened:
            # only what changed since the image the replicas last applied (ReplicaManager.applyDelta with
            # TopicsDelta.localChanges): work proportional to the change, not to the partitions hosted
            diff = await asyncio.to_thread(_diff_for, self.replicas.image, image, self.node_id)
            # partitions moved away or deleted stop first (out of the table and the fetchers), on the event loop
            stopped = self.replicas.stop_partitions(image, diff)
            if self.fetchers is not None:
                await self.fetchers.update_in_turns(image, stopped)
            applied = await asyncio.to_thread(self.replicas.apply_image, image, diff)
            await self.replicas.after_image_in_turns(applied)
            if self.fetchers is not None:
                await self.fetchers.update_in_turns(image, applied)

    def _inter_broker_listener(self) -> str:
        return self.config.inter_broker_listener

    async def _load_partitions(self) -> None:
        """Load the logs (in the log manager's threads) and open each partition as soon as its log is ready:
        followers start fetching while other logs still load or recover. The broker stays fenced, leading nothing,
        until every log is loaded (Kafka's setReadyToUnfence after log recovery)."""
        gc_tuning.pause()  # the logs live as long as the node: frozen once loaded, not walked while they load
        try:
            await self._load_partitions_paused()
        finally:
            gc_tuning.settle()

    async def _load_partitions_paused(self) -> None:
        started = self.clock.monotonic()
        assert self.log_manager is not None and self.replicas is not None and self.groups is not None
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()

        def loaded(_tp) -> None:  # in the loading thread
            loop.call_soon_threadsafe(ready.set)

        # a task of its own, never cancelled: stop() waits for the thread before closing the logs
        loading = self._log_loading = asyncio.ensure_future(
            asyncio.to_thread(self.log_manager.startup, self.clock.now_ms(), loaded))
        self._awaiting_registration = True  # stop() may cancel here
        try:
            await self._registration_applied()
        finally:
            self._awaiting_registration = False
        async with self.metadata.lock:
            # the first apply: the replicas hold the empty image, so every partition of the image counts as changed;
            # those whose logs are still loading wait in the replica manager's unapplied set
            applied = await asyncio.to_thread(self.replicas.apply_image, self.metadata.image)
            self._partitions_opened = True
            await self.replicas.after_image_in_turns(applied)
            if self.fetchers is not None:
                await self.fetchers.update_in_turns(self.metadata.image, applied)
        while not loading.done():
            waiter = asyncio.ensure_future(ready.wait())
            await asyncio.wait([loading, waiter], return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if not loading.done():
                await asyncio.sleep(0.1)  # partitions loaded together are opened together
            ready.clear()
            # under the lock: an image published meanwhile is applied in a thread that changes what this reads
            async with self.metadata.lock:
                if self.replicas.waiting_for_logs:
                    await self._publish_to_replicas(self.metadata.image)  # no change: the newly loaded ones
        await loading  # a start-up failure (no usable log dir) stops the node here
        for d, clean in self.log_manager._had_clean_shutdown.items():
            log.info("log dir %s: %s", d, "clean shutdown, recovery skipped" if clean
                     else "no clean-shutdown marker, logs recovered from their recovery points")
        async with self.metadata.lock:
            if self.replicas.waiting_for_logs:
                await self._publish_to_replicas(self.metadata.image)
            self.replicas.loading = False
        self.log_manager.start_background(clock=self.clock.now_ms)
        await self.groups.start()
        await self.txns.start()
        await self.share_coordinator.start()
        await self.share_partitions.start()
        log.info("loaded %d partitions in %.2f s", len(self.replicas.partitions), self.clock.monotonic() - started)

    async def _stop_share_coordinator(self) -> None:
        if self.share_partitions is not None:
            await self.share_partitions.stop()
        if self.share_coordinator is not None:
            await self.share_coordinator.stop()
        if self.share_persister is not None:
            await self.share_persister.close()

    async def stop(self, grace_s: float = 10.0) -> None:
        """Graceful shutdown: stop accepting, answer requests already read, then flush and checkpoint
        (LogManager writes the clean-shutdown marker, so the next start skips recovery)."""
        log.info("shutting down: stop accepting, finishing in-flight requests")
        if self.is_broker and self.broker_epoch >= 0:
            await self._controlled_shutdown(grace_s)
        if self.groups is not None:  # group coordinator: answer parked JoinGroups first
            await self.groups.stop()
        if self.txns is not None:
            await self.txns.stop()
        await self._stop_share_coordinator()
        await self.server.stop(grace_s)
        if self._telemetry_expiry is not None:
            self._telemetry_expiry.cancel()
        self.metrics.stop()
        if self.logs_loaded is not None and not self.logs_loaded.done():
            if self._awaiting_registration:  # the quorum never delivered our registration: do not wait for it
                self.logs_loaded.cancel()
            await asyncio.wait([self.logs_loaded])
        if self._log_loading is not None:
            await asyncio.wait([self._log_loading])  # recovery runs in threads: let it finish, then close
        if self.fetchers is not None:
            await self.fetchers.stop()
        if self.isr is not None:
            await self.isr.stop()
        if self.log_manager is not None:
            await asyncio.to_thread(self.log_manager.shutdown, self.clock.now_ms())
            self.log_manager = None
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self.raft is not None:
            await self.raft.driver.resign()
            await self.controller.close()
            await self.raft.stop()
        if self._fault_rules_file is not None:
            await self._fault_rules_file.stop()

    async def _controlled_shutdown(self, grace_s: float) -> None:
        """Kafka's controlled shutdown: heartbeats with want_shut_down until the controller has moved this
        broker's leaderships away and lets it go (or ``grace_s`` passes)."""
        self._want_shut_down = True
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._background = []
        try:
            await wait_for(self._heartbeat_loop(), grace_s)
        except (asyncio.TimeoutError, ControllerUnavailable):
            log.warning("node %d: controlled shutdown not confirmed within %.0f s", self.node_id, grace_s)

    async def _apply_dynamic_broker_configs(self, image: MetadataImage) -> None:
        """This broker's dynamic configs (ConfigRecords on BROKER ``<node id>``, DynamicConfigPublisher): the TLS
        listeners whose store settings or files changed get new SSLContexts (SslFactory.reconfigure); new
        connections use them, open ones keep theirs. Every ConfigRecord on the resource makes a new mapping in the
        image, so a store re-submitted at the same path is read again (KAFKA-14136). Also at start, after the
        metadata log is read: a restarted node serves the stores last set (dynamic over static)."""
        own = image.configs.get((RESOURCE_BROKER, str(self.node_id)))
        if own is self._dynamic_seen:
            return
        self._dynamic_seen = own
        try:
            contexts = self.server.authentication.apply_dynamic(applicable(own, per_broker=True))
        except ConfigException as exc:  # Kafka logs it and keeps the configs in force
            log.error("dynamic broker configs not applied, the listeners keep their stores: %s", exc)
            return
        if contexts:
            reloaded = await self.server.reload_tls(contexts)
            log.info("TLS stores reloaded for %s (dynamic broker config)", ", ".join(reloaded) or "no bound listener")
        # this node's own links to those listeners on its peers: new connections use the new stores (Kafka's
        # inter-broker and controller channel builders are reconfigured too)
        for links, listener in ((self.links, self.config.inter_broker_listener),
                                (self.controller_links, self.config.controller_listener)):
            if listener in contexts and links.security is not None and links.security.ssl is not None:
                try:
                    links.security = dataclasses.replace(
                        links.security, ssl=client_context(self.server.authentication.values, listener))
                except ConfigException as exc:
                    log.error("links to listener %s keep their stores: %s", listener, exc)

    # ---- producer ids ------------------------------------------------------------------------------

    def _validate_topic_configs(self, configs: dict) -> str | None:
        try:
            LogConfig.from_props({k: v for k, v in configs.items() if v is not None}, self.config.values)
        except ConfigError as exc:
            return str(exc)
        return None

    async def next_producer_id(self) -> int:
        """A producer id from this broker's block; a new block is committed through the controller first."""
        pid = self.producer_ids.take()
        if pid is None:
            async with self._producer_id_lock:
                pid = self.producer_ids.take()
                if pid is None:
                    response = await self.controller.call(AllocateProducerIdsRequest(
                        broker_id=self.node_id, broker_epoch=self.broker_epoch))
                    if response.error_code:
                        raise RuntimeError(f"producer id allocation failed with error {response.error_code}")
                    self.producer_ids.refill(response.producer_id_start, response.producer_id_len)
                    pid = self.producer_ids.take()
        assert pid is not None
        return pid


def _diff_for(prev: MetadataImage, image: MetadataImage, node_id: int) -> ImageDiff:
    """The diff of two images with this node's local changes worked out (off the event loop: immutable images)."""
    diff = diff_images(prev, image)
    diff.local_changes(node_id)  # kept on the diff for stop_partitions and apply_image
    return diff


class ProducerIdBlock:
    """The range of producer ids this broker may hand out (Kafka's ProducerIdManager)."""

    def __init__(self) -> None:
        self.next = 0
        self.end = 0

    def take(self) -> int | None:
        if self.next >= self.end:
            return None
        pid = self.next
        self.next += 1
        return pid

    def refill(self, start: int, size: int) -> None:
        self.next, self.end = start, start + size


def new_event_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()
