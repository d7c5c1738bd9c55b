"""The metadata image's ACLs, SCRAM credentials and client quotas (issue 29): applied from their records and
their Removes (AclsImage, ScramImage, ClientQuotasImage in Kafka), written back by ``image_records`` so a snapshot
replays to the same image, and left as the same objects by batches that do not touch them."""

from __future__ import annotations

from cluster.acls import AclOperation, AclPermissionType, PatternType, ResourceType, StandardAcl
from cluster.image_writer import image_records
from cluster.metadata_image import MetadataImage, ScramCredential, quota_entity
from cluster.metadata_serde import decode_record, encode_record
from protocol.generated.metadata import (
    AccessControlEntryRecord, ClientQuotaRecord, FeatureLevelRecord, RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord, UserScramCredentialRecord,
)
from protocol.generated.metadata.client_quota_record import EntityData

ACL_1, ACL_2 = b"\x01" * 16, b"\x02" * 16


def acl_record(acl_id: bytes, name: str, permission=AclPermissionType.ALLOW) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(id=acl_id, resource_type=int(ResourceType.TOPIC), resource_name=name,
                                    pattern_type=int(PatternType.PREFIXED), principal="User:bob", host="*",
                                    operation=int(AclOperation.READ), permission_type=int(permission))


def scram_record(user: str, mechanism: int, iterations: int = 4096) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(name=user, mechanism=mechanism, salt=b"salt", stored_key=b"s" * 32,
                                     server_key=b"k" * 32, iterations=iterations)


def quota_record(entity: list[tuple[str, str | None]], key: str, value: float, remove=False) -> ClientQuotaRecord:
    return ClientQuotaRecord(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity], key=key,
                             value=value, remove=remove)


def test_acl_records_add_and_remove_acls_by_id():
    image = MetadataImage().apply([acl_record(ACL_1, "foo"), acl_record(ACL_2, "bar", AclPermissionType.DENY)], 1)
    assert image.acls[ACL_1] == StandardAcl(ResourceType.TOPIC, "foo", PatternType.PREFIXED, "User:bob", "*",
                                            AclOperation.READ, AclPermissionType.ALLOW)
    assert image.acls[ACL_2].permission_type is AclPermissionType.DENY
    image = image.apply([RemoveAccessControlEntryRecord(id=ACL_1)], 2)
    assert list(image.acls) == [ACL_2]


def test_scram_records_keep_one_credential_per_user_and_mechanism():
    image = MetadataImage().apply([scram_record("alice", 1), scram_record("alice", 2), scram_record("bob", 1)], 1)
    assert sorted(image.scram_credentials) == [("alice", 1), ("alice", 2), ("bob", 1)]
    image = image.apply([scram_record("alice", 1, 8192), RemoveUserScramCredentialRecord(name="bob", mechanism=1)],
                        2)
    assert image.scram_credentials[("alice", 1)] == ScramCredential(b"salt", b"s" * 32, b"k" * 32, 8192)
    assert ("bob", 1) not in image.scram_credentials


def test_quota_records_set_and_remove_keys_per_entity_and_an_empty_entity_goes():
    user_client = [("client-id", "app"), ("user", "alice")]
    image = MetadataImage().apply([
        quota_record([("user", "alice"), ("client-id", "app")], "producer_byte_rate", 1024.0),
        quota_record([("user", None)], "consumer_byte_rate", 2048.0),
        quota_record([("user", None)], "request_percentage", 50.0),
    ], 1)
    assert image.client_quotas[quota_entity(user_client)] == {"producer_byte_rate": 1024.0}
    assert image.client_quotas[(("user", None),)] == {"consumer_byte_rate": 2048.0, "request_percentage": 50.0}
    image = image.apply([quota_record(user_client, "producer_byte_rate", 0.0, remove=True)], 2)
    assert quota_entity(user_client) not in image.client_quotas


def test_a_snapshot_of_the_image_replays_to_the_same_security_state():
    image = MetadataImage().apply([
        FeatureLevelRecord(name="metadata.version", feature_level=25),
        acl_record(ACL_1, "foo"), acl_record(ACL_2, "bar"), scram_record("alice", 2),
        quota_record([("user", "alice")], "producer_byte_rate", 1e6),
        quota_record([("client-id", None)], "controller_mutation_rate", 10.0),
    ], 5)
    records = [decode_record(encode_record(r))[0] for r in image_records(image)]
    restored = MetadataImage().apply(records, 5)
    assert dict(restored.acls) == dict(image.acls)
    assert dict(restored.scram_credentials) == dict(image.scram_credentials)
    assert {k: dict(v) for k, v in restored.client_quotas.items()} == \
        {k: dict(v) for k, v in image.client_quotas.items()}


def test_a_batch_without_security_records_keeps_their_mappings():
    image = MetadataImage().apply([acl_record(ACL_1, "foo"), scram_record("alice", 1),
                                   quota_record([("user", "a")], "producer_byte_rate", 1.0)], 1)
    later = image.apply([FeatureLevelRecord(name="group.version", feature_level=1)], 2)
    assert later.acls is image.acls
    assert later.scram_credentials is image.scram_credentials
    assert later.client_quotas is image.client_quotas
