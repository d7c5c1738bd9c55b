"""The metadata image: an immutable view of the cluster, rebuilt by applying metadata records.

As in KRaft (``MetadataImage`` / ``MetadataDelta``), handlers read one image; applying a batch of
records yields a new image and never mutates the old one, so a request sees a consistent cluster.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Iterable, Mapping

from protocol.generated.metadata import (
    AccessControlEntryRecord, BrokerRegistrationChangeRecord, ClientQuotaRecord, ConfigRecord, FeatureLevelRecord,
    FenceBrokerRecord, PartitionChangeRecord, PartitionRecord, ProducerIdsRecord, RegisterBrokerRecord,
    RemoveAccessControlEntryRecord, RemoveTopicRecord, RemoveUserScramCredentialRecord, TopicRecord,
    UnfenceBrokerRecord, UnregisterBrokerRecord, UserScramCredentialRecord,
)
from protocol.message import Message
from protocol.topics import INTERNAL_TOPICS

from cluster.acls import StandardAcl

# ConfigResource.Type codes as used by ConfigRecord and DescribeConfigs
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

NO_LEADER_CHANGE = -2  # PartitionChangeRecord.Leader default


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    offline_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0  # LeaderRecoveryState: 0 RECOVERED, 1 RECOVERING (after an unclean election)
    # an ongoing reassignment (KIP-455): ``replicas`` holds the target replicas followed by the ones leaving
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()

    @property
    def is_reassigning(self) -> bool:
        return bool(self.removing_replicas or self.adding_replicas)


@dataclasses.dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: bytes
    partitions: Mapping[int, PartitionInfo]

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS




@dataclasses.dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int
    security_protocol: int


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    incarnation_id: bytes
    broker_epoch: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False

    @property
    def active(self) -> bool:
        """May lead partitions: unfenced and not shutting down (ClusterControlManager.isActive)."""
        return not self.fenced and not self.in_controlled_shutdown

    def endpoint(self, listener: str) -> Endpoint | None:
        for ep in self.endpoints:
            if ep.listener == listener:
                return ep
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class ScramCredential:
    """One user's credential for one mechanism (UserScramCredentialRecord; ScramCredential in Kafka): what the
    server needs to check a client's proof, never the password."""
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


# a client quota entity (ClientQuotaEntity): sorted (entity type, name) pairs; a None name is the type's default
QuotaEntity = tuple[tuple[str, "str | None"], ...]

_EMPTY: Mapping = MappingProxyType({})


@dataclasses.dataclass(frozen=True)
class MetadataImage:
    """Everything the broker serves from metadata, as of ``offset`` in the metadata log."""

    offset: int = -1
    topics_by_name: Mapping[str, TopicInfo] = dataclasses.field(default_factory=lambda: _EMPTY)
    topics_by_id: Mapping[bytes, TopicInfo] = dataclasses.field(default_factory=lambda: _EMPTY)
    configs: Mapping[tuple[int, str], Mapping[str, str]] = dataclasses.field(default_factory=lambda: _EMPTY)
    brokers: Mapping[int, BrokerInfo] = dataclasses.field(default_factory=lambda: _EMPTY)
    features: Mapping[str, int] = dataclasses.field(default_factory=lambda: _EMPTY)
    next_producer_id: int = 0
    acls: Mapping[bytes, StandardAcl] = dataclasses.field(default_factory=lambda: _EMPTY)  # by ACL id
    scram_credentials: Mapping[tuple[str, int], ScramCredential] = dataclasses.field(
        default_factory=lambda: _EMPTY)  # by (user, ScramMechanism code)
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = dataclasses.field(default_factory=lambda: _EMPTY)

    def topic(self, name: str) -> TopicInfo | None:
        return self.topics_by_name.get(name)

    def topic_config(self, name: str) -> Mapping[str, str]:
        return self.configs.get((RESOURCE_TOPIC, name), _EMPTY)

    def apply(self, records: Iterable[Message], last_offset: int) -> "MetadataImage":
        """A new image with ``records`` (one committed batch ending at ``last_offset``) applied."""
        return self.apply_batches([(records, last_offset)])

    def apply_batches(self, batches: Iterable[tuple[Iterable[Message], int]]) -> "MetadataImage":
        """A new image with several batches ``(records, last offset)`` applied in order, through one delta
        (MetadataBatchLoader): a topic touched by many batches is copied once, not once per batch."""
        delta = _Delta(self)
        last_offset = self.offset
        for records, last_offset in batches:
            for r in records:
                delta.replay(r)
        return delta.build(last_offset)


class _Delta:
    """Copy-on-write changes against one image (Kafka's MetadataDelta)."""

    def __init__(self, base: MetadataImage) -> None:
        self.base = base
        self.topics = dict(base.topics_by_name)
        self.ids = {t.topic_id: t.name for t in base.topics_by_name.values()}
        self.partitions: dict[str, dict[int, PartitionInfo]] = {}
        self.configs = dict(base.configs)
        self.brokers = dict(base.brokers)
        self.features = dict(base.features)
        self.next_producer_id = base.next_producer_id
        # copied on their first change only: most batches touch none of them, and an unchanged mapping keeps
        # its identity (the authorizer rebuilds its index only for a new ACL mapping)
        self.acls: dict[bytes, StandardAcl] | None = None
        self.scram: dict[tuple[str, int], ScramCredential] | None = None
        self.quotas: dict[QuotaEntity, Mapping[str, float]] | None = None

    def _parts(self, name: str) -> dict[int, PartitionInfo]:
        if name not in self.partitions:
            self.partitions[name] = dict(self.topics[name].partitions)
        return self.partitions[name]

    def replay(self, r: Message) -> None:
        handler = _REPLAY.get(type(r))
        if handler is not None:
            handler(self, r)

    def _topic(self, r: TopicRecord) -> None:
        self.topics[r.name] = TopicInfo(r.name, r.topic_id, _EMPTY)
        self.ids[r.topic_id] = r.name
        self.partitions[r.name] = {}

    def _partition(self, r: PartitionRecord) -> None:
        name = self.ids.get(r.topic_id)
        if name is None:
            return
        self._parts(name)[r.partition_id] = PartitionInfo(
            r.partition_id, tuple(r.replicas), tuple(r.isr), r.leader, r.leader_epoch, r.partition_epoch,
            leader_recovery_state=r.leader_recovery_state, removing_replicas=tuple(r.removing_replicas or ()),
            adding_replicas=tuple(r.adding_replicas or ()))

    def _partition_change(self, r: PartitionChangeRecord) -> None:
        name = self.ids.get(r.topic_id)
        if name is None:
            return
        parts = self._parts(name)
        old = parts.get(r.partition_id)
        if old is None:
            return
        leader = old.leader if r.leader == NO_LEADER_CHANGE else r.leader
        epoch = old.leader_epoch + 1 if r.leader != NO_LEADER_CHANGE else old.leader_epoch
        parts[r.partition_id] = dataclasses.replace(
            old,
            replicas=tuple(r.replicas) if r.replicas is not None else old.replicas,
            isr=tuple(r.isr) if r.isr is not None else old.isr,
            leader=leader, leader_epoch=epoch, partition_epoch=old.partition_epoch + 1,
            leader_recovery_state=old.leader_recovery_state if r.leader_recovery_state == -1
            else r.leader_recovery_state,
            removing_replicas=old.removing_replicas if r.removing_replicas is None else tuple(r.removing_replicas),
            adding_replicas=old.adding_replicas if r.adding_replicas is None else tuple(r.adding_replicas))

    def _remove_topic(self, r: RemoveTopicRecord) -> None:
        name = self.ids.pop(r.topic_id, None)
        if name is None:
            return
        self.topics.pop(name, None)
        self.partitions.pop(name, None)
        self.configs.pop((RESOURCE_TOPIC, name), None)

    def _config(self, r: ConfigRecord) -> None:
        key = (r.resource_type, r.resource_name)
        cur = dict(self.configs.get(key, {}))
        if r.value is None:
            cur.pop(r.name, None)
        else:
            cur[r.name] = r.value
        if cur:
            self.configs[key] = MappingProxyType(cur)
        else:
            self.configs.pop(key, None)

    def _register_broker(self, r: RegisterBrokerRecord) -> None:
        eps = tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in r.end_points)
        self.brokers[r.broker_id] = BrokerInfo(r.broker_id, r.incarnation_id, r.broker_epoch, eps, r.rack, r.fenced,
                                               bool(r.in_controlled_shutdown))

    def _unregister_broker(self, r: UnregisterBrokerRecord) -> None:
        self.brokers.pop(r.broker_id, None)

    def _fence(self, r: FenceBrokerRecord) -> None:
        b = self.brokers.get(r.id)
        if b is not None:
            self.brokers[r.id] = dataclasses.replace(b, fenced=True)

    def _unfence(self, r: UnfenceBrokerRecord) -> None:
        b = self.brokers.get(r.id)
        if b is not None:
            self.brokers[r.id] = dataclasses.replace(b, fenced=False)

    def _registration_change(self, r: BrokerRegistrationChangeRecord) -> None:
        b = self.brokers.get(r.broker_id)
        if b is None:
            return
        # BrokerRegistrationFencingChange: -1 unfence, 0 none, 1 fence; InControlledShutdownChange: 0 none, 1 in
        fenced = b.fenced if r.fenced == 0 else r.fenced == 1
        shutting_down = b.in_controlled_shutdown or r.in_controlled_shutdown == 1
        self.brokers[r.broker_id] = dataclasses.replace(b, fenced=fenced, in_controlled_shutdown=shutting_down)

    def _feature(self, r: FeatureLevelRecord) -> None:
        if r.feature_level == 0:
            self.features.pop(r.name, None)
        else:
            self.features[r.name] = r.feature_level

    def _producer_ids(self, r: ProducerIdsRecord) -> None:
        self.next_producer_id = r.next_producer_id

    def _acl(self, r: AccessControlEntryRecord) -> None:
        if self.acls is None:
            self.acls = dict(self.base.acls)
        self.acls[r.id] = StandardAcl.from_record(r)

    def _remove_acl(self, r: RemoveAccessControlEntryRecord) -> None:
        if self.acls is None:
            self.acls = dict(self.base.acls)
        self.acls.pop(r.id, None)

    def _scram(self, r: UserScramCredentialRecord) -> None:
        if self.scram is None:
            self.scram = dict(self.base.scram_credentials)
        self.scram[(r.name, r.mechanism)] = ScramCredential(bytes(r.salt), bytes(r.stored_key), bytes(r.server_key),
                                                            r.iterations)

    def _remove_scram(self, r: RemoveUserScramCredentialRecord) -> None:
        if self.scram is None:
            self.scram = dict(self.base.scram_credentials)
        self.scram.pop((r.name, r.mechanism), None)

    def _quota(self, r: ClientQuotaRecord) -> None:
        if self.quotas is None:
            self.quotas = dict(self.base.client_quotas)
        entity = quota_entity((e.entity_type, e.entity_name) for e in r.entity)
        values = dict(self.quotas.get(entity, {}))
        if r.remove:
            values.pop(r.key, None)
        else:
            values[r.key] = r.value
        if values:
            self.quotas[entity] = MappingProxyType(values)
        else:
            self.quotas.pop(entity, None)

    def build(self, last_offset: int) -> MetadataImage:
        topics = dict(self.topics)
        for name, parts in self.partitions.items():
            if name in topics:
                topics[name] = dataclasses.replace(topics[name],
                                                   partitions=MappingProxyType(dict(sorted(parts.items()))))
        return MetadataImage(
            offset=last_offset,
            topics_by_name=MappingProxyType(topics),
            topics_by_id=MappingProxyType({t.topic_id: t for t in topics.values()}),
            configs=MappingProxyType(self.configs),
            brokers=MappingProxyType(dict(sorted(self.brokers.items()))),
            features=MappingProxyType(self.features),
            next_producer_id=self.next_producer_id,
            acls=self.base.acls if self.acls is None else MappingProxyType(self.acls),
            scram_credentials=self.base.scram_credentials if self.scram is None else MappingProxyType(self.scram),
            client_quotas=self.base.client_quotas if self.quotas is None else MappingProxyType(self.quotas),
        )


def quota_entity(parts) -> QuotaEntity:
    """A ClientQuotaEntity as a hashable key: its (type, name) pairs sorted by type."""
    return tuple(sorted(parts, key=lambda p: p[0]))


_REPLAY = {
    TopicRecord: _Delta._topic,
    PartitionRecord: _Delta._partition,
    PartitionChangeRecord: _Delta._partition_change,
    RemoveTopicRecord: _Delta._remove_topic,
    ConfigRecord: _Delta._config,
    RegisterBrokerRecord: _Delta._register_broker,
    UnregisterBrokerRecord: _Delta._unregister_broker,
    FenceBrokerRecord: _Delta._fence,
    UnfenceBrokerRecord: _Delta._unfence,
    BrokerRegistrationChangeRecord: _Delta._registration_change,
    FeatureLevelRecord: _Delta._feature,
    ProducerIdsRecord: _Delta._producer_ids,
    AccessControlEntryRecord: _Delta._acl,
    RemoveAccessControlEntryRecord: _Delta._remove_acl,
    UserScramCredentialRecord: _Delta._scram,
    RemoveUserScramCredentialRecord: _Delta._remove_scram,
    ClientQuotaRecord: _Delta._quota,
}
