"""The metadata image as records: what a KRaft snapshot holds (Kafka's ``MetadataImage.write(ImageWriter)``).

Replaying ``image_records(image)`` on an empty image gives back ``image`` (offset aside): every field the image
keeps is carried by one record. Features come first, as Kafka writes them, because metadata.version decides how
the records after it are read.
"""

from __future__ import annotations

from protocol.generated.metadata import (
    AccessControlEntryRecord, ClientQuotaRecord, ConfigRecord, FeatureLevelRecord, PartitionRecord,
    ProducerIdsRecord, RegisterBrokerRecord, TopicRecord, UserScramCredentialRecord,
)
from protocol.generated.metadata.client_quota_record import EntityData
from protocol.generated.metadata.register_broker_record import BrokerEndpoint
from protocol.message import Message, ZERO_UUID

from cluster.metadata_image import MetadataImage


def image_records(image: MetadataImage) -> list[Message]:
    out: list[Message] = [FeatureLevelRecord(name=name, feature_level=level)
                          for name, level in sorted(image.features.items())]
    for b in image.brokers.values():
        out.append(RegisterBrokerRecord(
            broker_id=b.node_id, incarnation_id=b.incarnation_id, broker_epoch=b.broker_epoch,
            end_points=[BrokerEndpoint(name=e.listener, host=e.host, port=e.port, security_protocol=e.security_protocol)
                        for e in b.endpoints],
            rack=b.rack, fenced=b.fenced, in_controlled_shutdown=b.in_controlled_shutdown))
    for t in sorted(image.topics_by_name.values(), key=lambda t: t.name):
        out.append(TopicRecord(name=t.name, topic_id=t.topic_id))
        for p in t.partitions.values():
            out.append(PartitionRecord(
                partition_id=p.partition, topic_id=t.topic_id, replicas=list(p.replicas), isr=list(p.isr),
                removing_replicas=list(p.removing_replicas), adding_replicas=list(p.adding_replicas),
                leader=p.leader,
                leader_recovery_state=p.leader_recovery_state, leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch, directories=[ZERO_UUID] * len(p.replicas)))
    for (resource_type, resource_name), configs in sorted(image.configs.items()):
        out.extend(ConfigRecord(resource_type=resource_type, resource_name=resource_name, name=k, value=v)
                   for k, v in sorted(configs.items()))
    for acl_id, a in image.acls.items():
        out.append(AccessControlEntryRecord(
            id=acl_id, resource_type=int(a.resource_type), resource_name=a.resource_name,
            pattern_type=int(a.pattern_type), principal=a.principal, host=a.host, operation=int(a.operation),
            permission_type=int(a.permission_type)))
    for (user, mechanism), c in sorted(image.scram_credentials.items()):
        out.append(UserScramCredentialRecord(name=user, mechanism=mechanism, salt=c.salt, stored_key=c.stored_key,
                                             server_key=c.server_key, iterations=c.iterations))
    for entity, values in image.client_quotas.items():
        out.extend(ClientQuotaRecord(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                                     key=k, value=v, remove=False) for k, v in sorted(values.items()))
    if image.next_producer_id:
        out.append(ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id))
    return out
