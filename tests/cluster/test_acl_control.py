"""cluster/controller/acl_control.py: CreateAcls and DeleteAcls as Kafka's AclControlManager decides them (with the
checks AclApis makes first), ported from AclControlManagerTest where it applies, and DescribeAcls' grouping."""

from __future__ import annotations

import random

import pytest

from cluster.acls import (
    ANY_FILTER, CLUSTER_NAME, WILDCARD, WILDCARD_PRINCIPAL, AclBindingFilter, AclOperation, AclPermissionType,
    PatternType, ResourceType, StandardAcl,
)
from cluster.controller.acl_control import (
    EXCESSIVE_BATCH, MAX_RECORDS_PER_USER_OP, OK, binding, binding_filter, create_acls, delete_acls,
    describe_resources, has_unknown_codes,
)
from cluster.metadata_image import MetadataImage
from protocol.errors import ErrorCode
from protocol.generated.metadata import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from protocol.message import ZERO_UUID
from protocol.topics import METADATA_TOPIC_ID

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY

# StandardAclTest.TEST_ACLS
TEST_ACLS = [
    StandardAcl(CLUSTER, CLUSTER_NAME, LITERAL, WILDCARD_PRINCIPAL, WILDCARD, AclOperation.ALTER, ALLOW),
    StandardAcl(TOPIC, "foo_", PREFIXED, WILDCARD_PRINCIPAL, WILDCARD, AclOperation.READ, ALLOW),
    StandardAcl(GROUP, "mygroup", LITERAL, "User:foo", WILDCARD, AclOperation.READ, DENY),
    StandardAcl(GROUP, "mygroup", PREFIXED, "User:foo", WILDCARD, AclOperation.READ, DENY),
    StandardAcl(GROUP, "foo", PREFIXED, "User:foo", WILDCARD, AclOperation.READ, DENY),
]


def rng(seed: int = 7) -> random.Random:
    return random.Random(seed)


def committed(image: MetadataImage, records) -> MetadataImage:
    return image.apply(records, image.offset + len(records))


def test_create_acl_delete_acl():
    """AclControlManagerTest.testCreateAclDeleteAcl: three ACLs and one with pattern UNKNOWN created; deleting
    with a LITERAL filter of any type removes the two literal ones, an UNKNOWN resource type filter fails."""
    to_create = TEST_ACLS[:3] + [StandardAcl(TOPIC, "*", PatternType.UNKNOWN, "User:*", "*", AclOperation.ALTER,
                                             ALLOW)]
    records, results = create_acls({}, to_create, rng())
    assert results[:3] == [OK, OK, OK]
    assert (results[3].code, results[3].message) == (ErrorCode.INVALID_REQUEST, "Invalid patternType UNKNOWN")
    assert len(records) == 3
    image = committed(MetadataImage(), records)
    assert sorted(map(str, image.acls.values())) == sorted(map(str, TEST_ACLS[:3]))

    removals, deleted = delete_acls(image.acls, [AclBindingFilter(ResourceType.ANY, None, LITERAL),
                                                 AclBindingFilter(ResourceType.UNKNOWN, None, LITERAL)])
    assert len(deleted) == 2
    assert deleted[0].error == OK
    assert set(deleted[0].deleted) == {TEST_ACLS[0], TEST_ACLS[2]}
    assert deleted[1].error.code == ErrorCode.INVALID_REQUEST and deleted[1].deleted == ()
    image = committed(image, removals)
    assert list(image.acls.values()) == [TEST_ACLS[1]]


def test_delete_dedupe():
    """AclControlManagerTest.testDeleteDedupe: an ACL two filters match is removed by one record."""
    acl = StandardAcl(TOPIC, "topic-1", LITERAL, "User:user", "10.0.0.1", AclOperation.ALL, ALLOW)
    records, _ = create_acls({}, [acl], rng())
    assert len(records) == 1
    acl_id = records[0].id
    image = committed(MetadataImage(), records)
    exact = AclBindingFilter(TOPIC, "topic-1", LITERAL, "User:user", "10.0.0.1", AclOperation.ALL, ALLOW)
    for filters in ([ANY_FILTER], [exact], [ANY_FILTER, exact]):
        removals, results = delete_acls(image.acls, filters)
        assert [r.id for r in removals] == [acl_id]
        assert len(results) == len(filters)
        assert all(r.deleted == (acl,) for r in results)


def test_an_identical_acl_is_not_written_again():
    """createAcls' existingAcls: one already in the image, or earlier in the same request, succeeds without a
    record (Kafka answers success)."""
    acl = TEST_ACLS[1]
    records, results = create_acls({}, [acl, acl], rng())
    assert results == [OK, OK] and len(records) == 1
    image = committed(MetadataImage(), records)
    again, results = create_acls(image.acls, [acl, TEST_ACLS[2]], rng())
    assert results == [OK, OK]
    assert [StandardAcl.from_record(r) for r in again] == [TEST_ACLS[2]]


def test_new_ids_come_from_the_controller_randomness_and_are_unused():
    """newAclId: Uuid.randomUuid until unused; never the zero or metadata topic id; the same seed, the same ids."""
    first, _ = create_acls({}, TEST_ACLS, rng(1))
    second, _ = create_acls({}, TEST_ACLS, rng(1))
    assert [r.id for r in first] == [r.id for r in second]
    ids = [r.id for r in first]
    assert len(set(ids)) == len(ids) and not {ZERO_UUID, METADATA_TOPIC_ID} & set(ids)
    taken = {first[0].id: TEST_ACLS[0]}
    more, _ = create_acls(taken, [TEST_ACLS[1]], rng(1))  # the same seed would give first[0].id again
    assert more[0].id != first[0].id


@pytest.mark.parametrize("acl, message", [
    (StandardAcl(ResourceType.ANY, "t", LITERAL, "User:a", "*", AclOperation.READ, ALLOW), "Invalid resourceType ANY"),
    (StandardAcl(TOPIC, "t", PatternType.MATCH, "User:a", "*", AclOperation.READ, ALLOW), "Invalid patternType MATCH"),
    (StandardAcl(TOPIC, "t", PatternType.ANY, "User:a", "*", AclOperation.READ, ALLOW), "Invalid patternType ANY"),
    (StandardAcl(TOPIC, "t", LITERAL, "User:a", "*", AclOperation.ANY, ALLOW), "Invalid operation ANY"),
    (StandardAcl(TOPIC, "t", LITERAL, "User:a", "*", AclOperation.READ, AclPermissionType.ANY),
     "Invalid permissionType ANY"),
    (StandardAcl(TOPIC, "", LITERAL, "User:a", "*", AclOperation.READ, ALLOW), "Invalid empty resource name"),
    (StandardAcl(CLUSTER, "other", LITERAL, "User:a", "*", AclOperation.ALTER, ALLOW),
     "The only valid name for the CLUSTER resource is kafka-cluster"),
    # AclApis checks the CLUSTER name before the empty name
    (StandardAcl(CLUSTER, "", LITERAL, "User:a", "*", AclOperation.ALTER, ALLOW),
     "The only valid name for the CLUSTER resource is kafka-cluster"),
    (StandardAcl(TOPIC, "t", LITERAL, "alice", "*", AclOperation.READ, ALLOW),
     "expected a string in format principalType:principalName but got alice"),
])
def test_bad_creations_get_invalid_request_and_no_record(acl, message):
    good = TEST_ACLS[1]
    records, results = create_acls({}, [acl, good], rng())
    assert (results[0].code, results[0].message) == (ErrorCode.INVALID_REQUEST, message)
    assert results[1] == OK
    assert [StandardAcl.from_record(r) for r in records] == [good]


def test_wire_codes_kafka_does_not_know_are_unknown():
    """Enum.fromCode: a code outside the enum is UNKNOWN (and refused by validateNewAcl); code 0 itself fails
    parsing the request (CreateAclsRequest.validate)."""
    acl = binding(2, "t", 3, "User:a", "*", 99, 3)
    assert acl.operation is AclOperation.UNKNOWN
    _, results = create_acls({}, [acl], rng())
    assert (results[0].code, results[0].message) == (ErrorCode.INVALID_REQUEST, "Invalid operation UNKNOWN")
    f = binding_filter(2, None, 99, None, None, 1, 1)
    _, results = delete_acls({}, [f])
    assert (results[0].error.code, results[0].error.message) == (ErrorCode.INVALID_REQUEST, "Unknown patternFilter.")
    assert has_unknown_codes(3, 0, 3, 3) and not has_unknown_codes(3, 2, 99, 3)


def test_more_new_acls_than_one_operation_may_write_is_a_policy_violation():
    """BoundedList(MAX_RECORDS_PER_USER_OP) overflowing: QuorumController answers PolicyViolationException for the
    whole operation (each creation that passed the checks), nothing is written."""
    many = [StandardAcl(TOPIC, f"t{i}", LITERAL, "User:a", "*", AclOperation.READ, ALLOW)
            for i in range(MAX_RECORDS_PER_USER_OP + 1)]
    bad = StandardAcl(TOPIC, "", LITERAL, "User:a", "*", AclOperation.READ, ALLOW)
    records, results = create_acls({}, many + [bad], rng())
    assert records == []
    assert {(r.code, r.message) for r in results[:-1]} == {(ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH)}
    assert results[-1].code == ErrorCode.INVALID_REQUEST
    records, results = create_acls({}, many[:MAX_RECORDS_PER_USER_OP], rng())
    assert len(records) == MAX_RECORDS_PER_USER_OP and set(results) == {OK}


def test_a_filter_that_would_remove_too_many_fails_alone():
    """deleteAclsForFilter's bound: the filter that takes the removals past MAX_RECORDS_PER_USER_OP gets
    UNKNOWN_SERVER_ERROR; the filters before it still remove theirs."""
    acls = {i.to_bytes(16, "big"): StandardAcl(TOPIC, f"t{i}", LITERAL, "User:a", "*", AclOperation.READ, ALLOW)
            for i in range(1, MAX_RECORDS_PER_USER_OP + 2)}
    first = AclBindingFilter(TOPIC, "t1", LITERAL)
    removals, results = delete_acls(acls, [first, ANY_FILTER])
    assert [r.id for r in removals] == [(1).to_bytes(16, "big")]
    assert results[0].error == OK and len(results[0].deleted) == 1
    assert results[1].error.code == ErrorCode.UNKNOWN_SERVER_ERROR and results[1].deleted == ()


def test_the_records_are_kafkas():
    records, _ = create_acls({}, [TEST_ACLS[2]], rng())
    assert isinstance(records[0], AccessControlEntryRecord)
    assert StandardAcl.from_record(records[0]) == TEST_ACLS[2]
    removals, _ = delete_acls({records[0].id: TEST_ACLS[2]}, [ANY_FILTER])
    assert removals == [RemoveAccessControlEntryRecord(id=records[0].id)]


def test_describe_groups_by_resource_pattern():
    """DescribeAclsResponse.aclsResources: one resource per (type, name, pattern type) with its distinct entries;
    the filter's MATCH finds the literal, wildcard and prefixed patterns that apply to a name."""
    acls = [
        StandardAcl(TOPIC, "foo", LITERAL, "User:a", "*", AclOperation.READ, ALLOW),
        StandardAcl(TOPIC, "foo", LITERAL, "User:b", "*", AclOperation.WRITE, ALLOW),
        StandardAcl(TOPIC, "foo", LITERAL, "User:b", "*", AclOperation.WRITE, ALLOW),  # same entry twice
        StandardAcl(TOPIC, "fo", PREFIXED, "User:a", "*", AclOperation.READ, DENY),
        StandardAcl(TOPIC, "*", LITERAL, "User:c", "*", AclOperation.DESCRIBE, ALLOW),
        StandardAcl(GROUP, "foo", LITERAL, "User:a", "*", AclOperation.READ, ALLOW),
    ]
    every = describe_resources(acls, ANY_FILTER)
    assert [pattern for pattern, _ in every] == [(TOPIC, "*", LITERAL), (TOPIC, "fo", PREFIXED),
                                                 (TOPIC, "foo", LITERAL), (GROUP, "foo", LITERAL)]
    assert [len(entries) for _, entries in every] == [1, 1, 2, 1]
    match = describe_resources(acls, AclBindingFilter(TOPIC, "foo", PatternType.MATCH))
    assert [pattern for pattern, _ in match] == [(TOPIC, "*", LITERAL), (TOPIC, "fo", PREFIXED),
                                                 (TOPIC, "foo", LITERAL)]
    assert describe_resources(acls, AclBindingFilter(TOPIC, "foo", LITERAL, principal="User:zed")) == []
