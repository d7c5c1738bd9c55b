"""The controller's decisions as a pure function of (image, request): results plus records to commit.

It never writes anything itself. The caller appends the returned records to the metadata log (through
the quorum: one voter today, Raft later) and applies them to the image once committed, exactly as
KRaft's QuorumController returns ControllerResult(records, response). Validation follows Kafka's
ReplicationControlManager and ConfigurationControlManager.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any, Callable, Iterable, Protocol

from cluster.client_metrics import RESOURCE_CLIENT_METRICS, ClientMetricsError
from cluster.client_metrics import validate_configs as validate_client_metrics
import cluster.controller.replication_control as rc
from cluster.controller.broker_heartbeats import BrokerControlState, BrokerHeartbeatManager, BrokerHeartbeatTracker
from cluster.controller.java_random import from_python_random
from cluster.controller.replica_placer import InvalidReplicationFactor, UsableBroker, place
from cluster.groups.group_config import GROUP_RESOURCE, GroupConfig, GroupConfigError, validate_group_configs
from cluster.metadata_image import RESOURCE_TOPIC, MetadataImage
from cluster.quotas import ThrottlingQuotaExceeded
from protocol.errors import ErrorCode
from protocol.generated.metadata import (
    BrokerRegistrationChangeRecord, ConfigRecord, FeatureLevelRecord, PartitionRecord, ProducerIdsRecord,
    RegisterBrokerRecord, RemoveTopicRecord, TopicRecord, UnregisterBrokerRecord,
)
from protocol.generated.metadata.register_broker_record import BrokerEndpoint
from protocol.message import Message, ZERO_UUID
from protocol.topics import METADATA_TOPIC_ID

log = logging.getLogger("odradek.controller")

MAX_TOPIC_NAME = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")

# Kafka 4.0's production metadata.version (MetadataVersion.IBP_4_0_IV3) and the other finalized features.
# share.version 1 turns share groups (KIP-932) on, as Kafka 4.2 bootstraps it. Kafka's ShareVersion.SV_1 depends
# on metadata.version 27 (4.1-IV1); odradek stays at 25 and lets share.version 1 stand beside it: 26 (4.1-IV0) only
# makes ELR the default of new clusters (odradek has no ELR) and 27 makes the replica fetcher send Fetch v18 with
# its high watermark (KIP-1166), which odradek's fetcher does not (it sends v17); neither changes a metadata record.
METADATA_VERSION = 25
BOOTSTRAP_FEATURES = {"metadata.version": METADATA_VERSION, "kraft.version": 0, "group.version": 1,
                      "transaction.version": 2, "eligible.leader.replicas.version": 0, "share.version": 1}

# The feature ranges this software supports (ApiVersions' SupportedFeatures): metadata.version from
# IBP_3_3_IV3 (7, Kafka 4.0's minimum) to 25; group.version 1 enables the KIP-848 consumer protocol, share.version 1
# the share-group APIs (broker/apis/share_gate.py).
SUPPORTED_FEATURES = {"metadata.version": (7, METADATA_VERSION), "kraft.version": (0, 0), "group.version": (0, 1),
                      "transaction.version": (0, 2), "eligible.leader.replicas.version": (0, 0),  # no ELR (KIP-966)
                      "share.version": (0, 1)}

PRODUCER_ID_BLOCK_SIZE = 1000  # ProducerIdManager.PID_BLOCK_SIZE
FENCE, UNFENCE = 1, -1  # BrokerRegistrationFencingChange
SECURITY_PROTOCOL_PLAINTEXT = 0


# Kafka's cap on the partitions one CreateTopics may create (QuorumController.MAX_PARTITIONS_PER_BATCH): their
# records go in one metadata batch
MAX_PARTITIONS_PER_BATCH = 10_000


@dataclasses.dataclass
class ControllerResult:
    records: list[Message]
    response: Any = None


@dataclasses.dataclass(frozen=True)
class HeartbeatReply:
    """What a BrokerHeartbeat is answered (Kafka's BrokerHeartbeatReply)."""

    error_code: int
    is_caught_up: bool = False
    is_fenced: bool = True
    in_controlled_shutdown: bool = False
    should_shut_down: bool = False


@dataclasses.dataclass
class TopicResult:
    name: str
    error_code: int = 0
    error_message: str | None = None
    topic_id: bytes = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] | None = None
    configs: dict[str, str | None] = dataclasses.field(default_factory=dict)


class Randomness(Protocol):
    """Where the controller's random ids come from: ``random.SystemRandom()`` in a broker, a seeded
    ``random.Random`` in a simulation."""

    def randbytes(self, n: int) -> bytes: ...

    def getrandbits(self, k: int) -> int: ...


def random_topic_id(rng: Randomness) -> bytes:
    """A fresh topic id; never the zero uuid or Kafka's reserved METADATA_TOPIC_ID (0,1)."""
    while True:
        raw = rng.randbytes(16)
        if raw not in (ZERO_UUID, METADATA_TOPIC_ID) and raw[0] & 0x80 == 0:
            return raw


def validate_topic_name(name: str) -> str | None:
    """Kafka's Topic.validate: an error message, or None when the name is legal."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters, topic name: {name}"
    if not _LEGAL_TOPIC.fullmatch(name):
        return (f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, "
                "'.', '_' and '-'")
    return None


def _collides(name: str, existing: Iterable[str]) -> str | None:
    """Kafka rejects names that differ only by '.' vs '_' (metric name collisions)."""
    norm = name.replace(".", "_")
    for other in existing:
        if other != name and other.replace(".", "_") == norm:
            return other
    return None



class Controller:
    """Decisions for one cluster; ``config`` is the controller's broker config (Kafka property names)."""

    def __init__(self, node_id: int, config: dict[str, Any], rng: Randomness,
                 validate_topic_configs: Callable[[dict[str, str | None]], str | None] | None = None,
                 register_fenced: bool = False, bootstrap_features: dict[str, int] | None = None,
                 bootstrap_records: list | None = None) -> None:
        self.node_id = node_id
        self.bootstrap_features = bootstrap_features  # from the formatted bootstrap.checkpoint, if any
        self.bootstrap_records = list(bootstrap_records or [])  # its other records (SCRAM credentials, KIP-900)
        # brokers register fenced and are unfenced by a heartbeat once caught up, as in Kafka: every node passes
        # True (a single node too, a quorum of one voter); unit tests of decisions after a registration skip it
        self.register_fenced = register_fenced
        self.config = config
        self.rng = rng
        self.placer_random = from_python_random(rng)
        # the active controller's in-memory broker sessions (BrokerHeartbeatManager)
        self.heartbeats = BrokerHeartbeatManager(int(config.get("broker.session.timeout.ms", 9000)))
        self.contacts = BrokerHeartbeatTracker()  # heartbeat arrivals, recorded before the request waits
        self.unclean_default = str(config.get("unclean.leader.election.enable", False)).lower() == "true"
        self.validate_topic_configs = validate_topic_configs

    def place_replicas(self, image: MetadataImage, num_partitions: int, replication_factor: int
                       ) -> list[list[int]]:
        """Kafka's StripedReplicaPlacer over the registered brokers (fenced ones only as followers, and only
        when there are not enough unfenced ones); raises InvalidReplicationFactor."""
        usable = [UsableBroker(b.node_id, b.rack, b.fenced) for b in sorted(image.brokers.values(),
                                                                            key=lambda b: b.node_id)]
        return place(self.placer_random, num_partitions, replication_factor, usable)

    # ---- bootstrap and registration ---------------------------------------------------------------

    def bootstrap(self, image: MetadataImage) -> ControllerResult:
        """The records a new cluster starts with (no metadata.version yet): the finalized feature levels that
        ``odradek format`` wrote (``bootstrap_features``), else this release's defaults (level 0 is not written,
        as Kafka omits it), then the file's other records (SCRAM credentials from ``--add-scram``)."""
        if "metadata.version" in image.features:
            return ControllerResult([])
        features = self.bootstrap_features or BOOTSTRAP_FEATURES
        return ControllerResult([FeatureLevelRecord(name=name, feature_level=level)
                                 for name, level in features.items() if level] + self.bootstrap_records)

    def register_broker(self, image: MetadataImage, node_id: int, incarnation_id: bytes,
                        endpoints: list[tuple], rack: str | None, broker_epoch: int,
                        log_dirs: list[bytes], now_ms: int = 0,
                        previous_process_gone: bool = False) -> ControllerResult:
        """ClusterControlManager.registerBroker; the response is the error code: another incarnation of a
        broker whose session is still valid is DUPLICATE_BROKER_REGISTRATION (it registers again once the
        session expires and the old incarnation is fenced), unless the caller knows the old incarnation's process
        is gone (``previous_process_gone``: the controller's own node registering from its own process).
        ``endpoints``: (listener, host, port[, SecurityProtocol id]); PLAINTEXT when the id is left out."""
        eps = [BrokerEndpoint(name=e[0], host=e[1], port=e[2],
                              security_protocol=e[3] if len(e) > 3 else SECURITY_PROTOCOL_PLAINTEXT)
               for e in endpoints]
        old = image.brokers.get(node_id)
        if old is not None and old.incarnation_id != incarnation_id and not previous_process_gone and \
                self.heartbeats.has_valid_session(node_id, now_ms):
            log.info("broker %d: registration of incarnation %s refused: incarnation %s has a live session",
                     node_id, incarnation_id.hex(), old.incarnation_id.hex())
            return ControllerResult([], ErrorCode.DUPLICATE_BROKER_REGISTRATION)
        if (old is not None and not old.fenced and old.rack == rack
                and [(e.listener, e.host, e.port, e.security_protocol) for e in old.endpoints] ==
                [(e.name, e.host, e.port, e.security_protocol) for e in eps]
                and old.incarnation_id == incarnation_id):
            return ControllerResult([], 0)
        rec = RegisterBrokerRecord(broker_id=node_id, incarnation_id=incarnation_id, broker_epoch=broker_epoch,
                                   end_points=eps, rack=rack, fenced=self.register_fenced,
                                   log_dirs=list(log_dirs))
        # the registration record first: the broker epoch is its offset, the first of this batch (k62 answers
        # ``next_offset``); Kafka appends the ISR changes before it, which only moves the epoch's value
        records: list[Message] = [rec]
        if self.register_fenced and (old is None or old.incarnation_id != incarnation_id):
            # a new process (handleBrokerUncleanShutdown, metadata.version 4.0): its log may have lost a tail the
            # others acknowledged, so it leaves every ISR and leadership and rejoins once it has caught up (the
            # last in-sync replica keeps its place in the ISR, leaderless until it is unfenced)
            records += rc.leader_and_isr_updates(image, list(rc.partitions_with_broker_in_isr(image, node_id)),
                                                 self.unclean_default, broker_to_remove=node_id)
        self.heartbeats.register(node_id, self.register_fenced, now_ms)
        return ControllerResult(records, 0)

    # ---- broker lifecycle (ClusterControlManager, ReplicationControlManager) ------------------------

    def activate(self, image: MetadataImage, now_ms: int) -> None:
        """This node became the active controller: every registered broker's session starts now
        (ClusterControlManager.activate), so none is fenced for the time no controller was listening."""
        self.heartbeats = BrokerHeartbeatManager(self.heartbeats.session_timeout_ms)
        self.contacts.forget_contacts()
        for b in image.brokers.values():
            self.heartbeats.register(b.node_id, b.fenced, now_ms)

    def handle_broker_fenced(self, image: MetadataImage, broker_id: int) -> list[Message]:
        """Out of every ISR, its leaderships moved (or the partition left leaderless), then fenced."""
        records: list[Message] = list(rc.leader_and_isr_updates(
            image, list(rc.partitions_with_broker_in_isr(image, broker_id)), self.unclean_default,
            broker_to_remove=broker_id))
        records.append(BrokerRegistrationChangeRecord(broker_id=broker_id,
                                                      broker_epoch=image.brokers[broker_id].broker_epoch,
                                                      fenced=FENCE))
        return records

    def handle_broker_unfenced(self, image: MetadataImage, broker_id: int, broker_epoch: int) -> list[Message]:
        """Unfenced, and leaderless partitions it can lead get it as their leader."""
        records: list[Message] = [BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                                                 fenced=UNFENCE)]
        records += rc.leader_and_isr_updates(image, list(rc.partitions_with_no_leader(image)), self.unclean_default,
                                             broker_to_add=broker_id)
        return records

    def handle_broker_in_controlled_shutdown(self, image: MetadataImage, broker_id: int, broker_epoch: int
                                             ) -> list[Message]:
        records: list[Message] = []
        if not image.brokers[broker_id].in_controlled_shutdown:
            records.append(BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                                          in_controlled_shutdown=1))
        records += rc.leader_and_isr_updates(image, list(rc.partitions_with_broker_in_isr(image, broker_id)),
                                             self.unclean_default, broker_to_remove=broker_id)
        return records

    def process_broker_heartbeat(self, image: MetadataImage, broker_id: int, broker_epoch: int,
                                 current_metadata_offset: int, want_fence: bool, want_shut_down: bool,
                                 next_offset: int, now_ms: int) -> ControllerResult:
        """BrokerHeartbeat (ReplicationControlManager.processBrokerHeartbeat): the response is a HeartbeatReply."""
        registration = image.brokers.get(broker_id)
        if registration is None or registration.broker_epoch != broker_epoch:
            return ControllerResult([], HeartbeatReply(ErrorCode.STALE_BROKER_EPOCH))
        if broker_id not in self.heartbeats.brokers:  # a new active controller: sessions start now
            self.heartbeats.register(broker_id, registration.fenced, now_ms)
        register_offset = registration.broker_epoch  # the broker epoch is its RegisterBrokerRecord's offset
        current, nxt = self.heartbeats.calculate_next_state(
            broker_id, want_fence, want_shut_down, current_metadata_offset, register_offset,
            lambda: rc.has_leaderships(image, broker_id))
        records: list[Message] = []
        if current is not nxt:
            if nxt in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW):
                if not registration.fenced:
                    records = self.handle_broker_fenced(image, broker_id)
            elif nxt is BrokerControlState.UNFENCED:
                records = self.handle_broker_unfenced(image, broker_id, broker_epoch)
            elif nxt is BrokerControlState.CONTROLLED_SHUTDOWN:
                records = self.handle_broker_in_controlled_shutdown(image, broker_id, broker_epoch)
        self.heartbeats.touch(broker_id, nxt.fenced, current_metadata_offset, now_ms)
        if nxt.in_controlled_shutdown:  # let go once every active broker has seen these records
            last = next_offset + len(records) - 1 if records else image.offset
            self.heartbeats.maybe_update_controlled_shutdown_offset(broker_id, last)
        return ControllerResult(records, HeartbeatReply(0, current_metadata_offset >= register_offset, nxt.fenced,
                                                        nxt.in_controlled_shutdown, nxt.should_shut_down))

    def heartbeat_arrived(self, image: MetadataImage, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """A BrokerHeartbeat arrived (QuorumController.processBrokerHeartbeat's first step, outside the event
        queue): the broker's contact time, if it is the registered incarnation."""
        registration = image.brokers.get(broker_id)
        if registration is not None and registration.broker_epoch == broker_epoch:
            self.contacts.update_contact_time(broker_id, broker_epoch, now_ms)

    def heartbeat_changes_nothing(self, image: MetadataImage, broker_id: int, broker_epoch: int,
                                  current_metadata_offset: int, want_fence: bool, want_shut_down: bool) -> bool:
        """Whether ``process_broker_heartbeat`` would write no records and move the broker to no new state: a
        stale incarnation, a fenced broker staying fenced, an unfenced one staying unfenced (its session is
        all it keeps). Such a heartbeat may be answered ahead of queued decisions."""
        registration = image.brokers.get(broker_id)
        if registration is None or registration.broker_epoch != broker_epoch:
            return True  # STALE_BROKER_EPOCH
        state = self.heartbeats.brokers.get(broker_id)
        if state is None or state.shutting_down or want_shut_down:
            return False
        if state.fenced:
            return want_fence or current_metadata_offset < registration.broker_epoch
        return not want_fence

    def maybe_fence_one_stale_broker(self, image: MetadataImage, now_ms: int) -> ControllerResult:
        """Fence the broker whose session expired longest ago, if any (one per call, as Kafka); a heartbeat that
        arrived counts even while it waits to be decided."""
        for broker_id, registration in image.brokers.items():
            contact = self.contacts.contact_time(broker_id, registration.broker_epoch)
            if contact is not None:
                self.heartbeats.note_contact(broker_id, contact)
        broker_id = self.heartbeats.find_one_stale_broker(now_ms)
        if broker_id is None or broker_id not in image.brokers:
            return ControllerResult([])
        log.info("Fencing broker %d because its session has timed out.", broker_id)
        self.heartbeats.fence(broker_id)
        return ControllerResult(self.handle_broker_fenced(image, broker_id))

    def unregister_broker(self, image: MetadataImage, broker_id: int) -> ControllerResult:
        registration = image.brokers.get(broker_id)
        if registration is None:
            return ControllerResult([], (ErrorCode.BROKER_ID_NOT_REGISTERED,
                                         f"Broker ID {broker_id} is not currently registered"))
        records: list[Message] = list(rc.leader_and_isr_updates(
            image, list(rc.partitions_with_broker_in_isr(image, broker_id)), self.unclean_default,
            broker_to_remove=broker_id))
        records.append(UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=registration.broker_epoch))
        self.heartbeats.remove(broker_id)
        return ControllerResult(records, (0, None))

    def elect_leaders(self, image: MetadataImage, election_type: int, partitions: list[tuple[str, int]] | None
                      ) -> ControllerResult:
        records, results = rc.elect_leaders(image, election_type, partitions)
        return ControllerResult(list(records), results)

    def _requested_partitions(self, topics: list[NewTopic]) -> int:
        """The partitions a CreateTopics asks for: its assignments, its counts, or the default count."""
        default = int(self.config.get("num.partitions", 1))
        return sum(len(t.assignments) if t.assignments else t.num_partitions if t.num_partitions != -1 else default
                   for t in topics)

    def alter_partition_reassignments(self, image: MetadataImage, topics: rc.ReassignmentTargets,
                                      allow_replication_factor_change: bool = True) -> ControllerResult:
        """AlterPartitionReassignments: the response is [(topic, [(partition, error, message)])]."""
        records, results = rc.alter_partition_reassignments(image, topics, self.unclean_default,
                                                            allow_replication_factor_change)
        done = sum(1 for _, ps in results for _, code, _ in ps if not code)
        log.info("Successfully altered %d out of %d partition reassignment(s).", done,
                 sum(len(ps) for _, ps in results))
        return ControllerResult(list(records), results)

    def list_partition_reassignments(self, image: MetadataImage, topics: list[tuple[str, list[int]]] | None
                                     ) -> ControllerResult:
        return ControllerResult([], rc.list_partition_reassignments(image, topics))

    # ---- topics -----------------------------------------------------------------------------------

    def create_topics(self, image: MetadataImage, topics: list[NewTopic], validate_only: bool = False,
                      quota: Callable[[int], None] | None = None) -> ControllerResult:
        """``quota``: the request's controller mutation quota (applyPartitionChangeQuota), asked per topic once it
        is valid; ThrottlingQuotaExceeded fails that topic."""
        if self._requested_partitions(topics) > MAX_PARTITIONS_PER_BATCH:
            # ReplicationControlManager.validateTotalNumberOfPartitions (KAFKA-17870): the whole request fails
            return ControllerResult([], [TopicResult(t.name, ErrorCode.POLICY_VIOLATION,
                                                     "Excessively large number of partitions per request.")
                                         for t in topics])
        records: list[Message] = []
        results: list[TopicResult] = []
        live = sorted(b.node_id for b in image.brokers.values() if not b.fenced)
        seen: set[str] = set()
        names = set(image.topics_by_name)
        for t in topics:
            res = TopicResult(t.name)
            results.append(res)
            if t.name in seen:
                res.error_code, res.error_message = ErrorCode.INVALID_REQUEST, "Duplicate topic name."
                continue
            seen.add(t.name)
            err = validate_topic_name(t.name)
            if err:
                res.error_code, res.error_message = ErrorCode.INVALID_TOPIC_EXCEPTION, err
                continue
            if t.name in image.topics_by_name:
                res.error_code = ErrorCode.TOPIC_ALREADY_EXISTS
                res.error_message = f"Topic '{t.name}' already exists."
                continue
            other = _collides(t.name, names)
            if other:
                res.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
                res.error_message = f"Topic '{t.name}' collides with existing topic: {other}"
                continue
            if t.assignments:
                if t.num_partitions != -1 or t.replication_factor != -1:
                    res.error_code = ErrorCode.INVALID_REQUEST
                    res.error_message = ("A manual partition assignment was specified, but numPartitions or "
                                         "replicationFactor was not set to -1.")
                    continue
                if sorted(t.assignments) != list(range(len(t.assignments))):
                    res.error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT
                    res.error_message = "Partitions must be numbered consecutively starting from 0."
                    continue
                bad = [r for rs in t.assignments.values() for r in rs if r not in live]
                if bad or any(len(set(rs)) != len(rs) or not rs for rs in t.assignments.values()):
                    res.error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT
                    res.error_message = "The manual partition assignment includes an unknown or duplicate broker."
                    continue
                assignment = {p: list(rs) for p, rs in sorted(t.assignments.items())}
                rf = len(assignment[0])
            else:
                n = t.num_partitions if t.num_partitions != -1 else int(self.config.get("num.partitions", 1))
                rf = (t.replication_factor if t.replication_factor != -1
                      else int(self.config.get("default.replication.factor", 1)))
                if n <= 0:
                    res.error_code = ErrorCode.INVALID_PARTITIONS
                    res.error_message = "Number of partitions was set to an invalid non-positive value."
                    continue
                if rf <= 0:
                    res.error_code = ErrorCode.INVALID_REPLICATION_FACTOR
                    res.error_message = "Replication factor must be larger than 0, or -1 to use the default value."
                    continue
                try:
                    assignment = dict(enumerate(self.place_replicas(image, n, rf)))
                except InvalidReplicationFactor as exc:
                    res.error_code = ErrorCode.INVALID_REPLICATION_FACTOR
                    res.error_message = f"Unable to replicate the partition {rf} time(s): {exc}"
                    continue
            if self.validate_topic_configs is not None:
                cerr = self.validate_topic_configs(t.configs)
                if cerr:
                    res.error_code, res.error_message = ErrorCode.INVALID_CONFIG, cerr
                    continue
            if quota is not None:
                try:
                    quota(len(assignment))
                except ThrottlingQuotaExceeded as exc:
                    res.error_code, res.error_message = ErrorCode.THROTTLING_QUOTA_EXCEEDED, str(exc)
                    continue
            res.num_partitions = len(assignment)
            res.replication_factor = rf
            res.configs = {k: v for k, v in t.configs.items() if v is not None}
            if validate_only:
                continue
            topic_id = random_topic_id(self.rng)
            res.topic_id = topic_id
            names.add(t.name)
            records.append(TopicRecord(name=t.name, topic_id=topic_id))
            for k, v in sorted(res.configs.items()):
                records.append(ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name=t.name, name=k, value=v))
            for p, replicas in assignment.items():
                records.append(PartitionRecord(
                    partition_id=p, topic_id=topic_id, replicas=replicas, isr=list(replicas),
                    removing_replicas=[], adding_replicas=[], leader=replicas[0], leader_recovery_state=0,
                    leader_epoch=0, partition_epoch=0, directories=[ZERO_UUID] * len(replicas)))
        return ControllerResult(records, results)

    def delete_topics(self, image: MetadataImage, names: list[str | None], ids: list[bytes],
                      quota: Callable[[int], None] | None = None) -> ControllerResult:
        """Results are (name, topic_id, error_code, message) per requested name or id, in request order.
        ``quota``: the controller mutation quota, asked with each topic's partition count (deleteTopic)."""
        records: list[Message] = []
        results = []
        deleted: set[bytes] = set()

        def delete(t) -> tuple[int, str | None]:
            if t.topic_id in deleted:
                return 0, None
            if quota is not None:
                try:
                    quota(len(t.partitions))
                except ThrottlingQuotaExceeded as exc:
                    return ErrorCode.THROTTLING_QUOTA_EXCEEDED, str(exc)
            deleted.add(t.topic_id)
            records.append(RemoveTopicRecord(topic_id=t.topic_id))
            return 0, None

        for name in names:
            t = image.topics_by_name.get(name) if name is not None else None
            if t is None:
                results.append((name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                "This server does not host this topic-partition."))
                continue
            results.append((t.name, t.topic_id, *delete(t)))
        for tid in ids:
            t = image.topics_by_id.get(tid)
            if t is None:
                results.append((None, tid, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."))
                continue
            results.append((t.name, tid, *delete(t)))
        return ControllerResult(records, results)

    def create_partitions(self, image: MetadataImage, name: str, count: int,
                          assignments: list[list[int]] | None, validate_only: bool = False,
                          quota: Callable[[int], None] | None = None) -> ControllerResult:
        """New PartitionRecords up to ``count``; response is (error_code, message) (ReplicationControlManager).
        ``quota``: the controller mutation quota, asked with the partitions added."""
        t = image.topics_by_name.get(name)
        if t is None:
            return ControllerResult([], (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic '%s' does not exist." % name))
        current = len(t.partitions)
        if count < current:
            return ControllerResult([], (ErrorCode.INVALID_PARTITIONS,
                                         f"The topic {name} currently has {current} partition(s); {count} would not be "
                                         "an increase."))
        if count == current:
            return ControllerResult([], (ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s)."))
        live = sorted(b.node_id for b in image.brokers.values() if not b.fenced)
        rf = len(next(iter(t.partitions.values())).replicas) if t.partitions else 1
        new = count - current
        if assignments is not None:
            if len(assignments) != new:
                return ControllerResult([], (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                             f"Attempted to add {new} additional partition(s), but only "
                                             f"{len(assignments)} assignment(s) were specified."))
            for a in assignments:
                if not a or len(set(a)) != len(a) or any(r not in live for r in a):
                    return ControllerResult([], (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                                 "The manual partition assignment includes an unknown or duplicate "
                                                 "broker."))
            plan = [list(a) for a in assignments]
        else:
            try:
                plan = self.place_replicas(image, new, rf)
            except InvalidReplicationFactor as exc:
                return ControllerResult([], (ErrorCode.INVALID_REPLICATION_FACTOR,
                                             f"Unable to replicate the partition {rf} time(s): {exc}"))
        if quota is not None:
            try:
                quota(new)
            except ThrottlingQuotaExceeded as exc:
                return ControllerResult([], (ErrorCode.THROTTLING_QUOTA_EXCEEDED, str(exc)))
        if validate_only:
            return ControllerResult([], (0, None))
        records: list[Message] = [
            PartitionRecord(partition_id=current + i, topic_id=t.topic_id, replicas=r, isr=list(r),
                            removing_replicas=[], adding_replicas=[], leader=r[0], leader_recovery_state=0,
                            leader_epoch=0, partition_epoch=0, directories=[ZERO_UUID] * len(r))
            for i, r in enumerate(plan)]
        return ControllerResult(records, (0, None))

    def alter_topic_configs(self, image: MetadataImage, name: str, new_overrides: dict[str, str]
                            ) -> ControllerResult:
        """ConfigRecords turning the topic's overrides into ``new_overrides`` (null value = delete).

        The response is (error_code, message); validation is the caller's LogConfig check.
        """
        if name not in image.topics_by_name:
            return ControllerResult([], (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                         "The topic '%s' does not exist." % name))
        if self.validate_topic_configs is not None:
            err = self.validate_topic_configs(new_overrides)
            if err:
                return ControllerResult([], (ErrorCode.INVALID_CONFIG, err))
        old = dict(image.topic_config(name))
        records: list[Message] = []
        for k in sorted(set(old) | set(new_overrides)):
            if k not in new_overrides:
                records.append(ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name=name, name=k, value=None))
            elif old.get(k) != new_overrides[k]:
                records.append(ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name=name, name=k,
                                            value=new_overrides[k]))
        return ControllerResult(records, (0, None))

    def alter_client_metrics_configs(self, image: MetadataImage, name: str, new_configs: dict[str, str]
                                     ) -> ControllerResult:
        """ConfigRecords turning a CLIENT_METRICS subscription's configs into ``new_configs``, validated as
        ClientMetricsConfigs.validate (the controller's ControllerConfigurationValidator)."""
        try:
            validate_client_metrics(name, new_configs)
        except ClientMetricsError as exc:
            return ControllerResult([], (exc.code, exc.message))
        old = dict(image.configs.get((RESOURCE_CLIENT_METRICS, name), {}))
        records: list[Message] = [
            ConfigRecord(resource_type=RESOURCE_CLIENT_METRICS, resource_name=name, name=k, value=new_configs.get(k))
            for k in sorted(set(old) | set(new_configs)) if old.get(k) != new_configs.get(k)]
        return ControllerResult(records, (0, None))

    def alter_group_configs(self, image: MetadataImage, name: str, new_configs: dict[str, str]) -> ControllerResult:
        """ConfigRecords turning a GROUP resource's configs into ``new_configs``, validated as the controller's
        ControllerConfigurationValidator does (GroupConfig.validate against this node's group.* bounds); the group
        need not exist. The response is (error_code, message)."""
        if not name:
            return ControllerResult([], (ErrorCode.INVALID_REQUEST, "Default group resources are not allowed."))
        try:
            validate_group_configs(new_configs, GroupConfig.from_props(self.config))
        except GroupConfigError as exc:
            return ControllerResult([], (ErrorCode.INVALID_CONFIG, str(exc)))
        old = dict(image.configs.get((GROUP_RESOURCE, name), {}))
        records: list[Message] = [
            ConfigRecord(resource_type=GROUP_RESOURCE, resource_name=name, name=k, value=new_configs.get(k))
            for k in sorted(set(old) | set(new_configs)) if old.get(k) != new_configs.get(k)]
        return ControllerResult(records, (0, None))

    # ---- producer ids -----------------------------------------------------------------------------

    def allocate_producer_ids(self, image: MetadataImage, broker_id: int, broker_epoch: int) -> ControllerResult:
        """A block of PRODUCER_ID_BLOCK_SIZE ids; the record moves the next id past it, so a restart never
        hands out an id twice (ProducerIdControlManager)."""
        start = image.next_producer_id
        rec = ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                next_producer_id=start + PRODUCER_ID_BLOCK_SIZE)
        return ControllerResult([rec], (start, PRODUCER_ID_BLOCK_SIZE))
