"""cluster/acls.py: Kafka's filter matching (ResourcePatternFilterTest, AccessControlEntryFilter) and the checks
of a new ACL (AclControlManagerTest.testValidateNewAcl, AclApis.handleCreateAcls) and of a filter
(testValidateFilter)."""

from __future__ import annotations

import pytest

from cluster.acls import (
    ANY_FILTER, AclBindingFilter, AclOperation, AclPermissionType, InvalidAcl, PatternType, ResourceType,
    StandardAcl, parse_principal, validate_create, validate_filter, validate_new_acl,
)

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED, MATCH, ANY = PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH, PatternType.ANY
READ, ALLOW, DENY = AclOperation.READ, AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(name="Name", pattern=LITERAL, rtype=TOPIC, principal="User:bob", host="*", op=READ, perm=ALLOW):
    return StandardAcl(rtype, name, pattern, principal, host, op, perm)


def pattern_filter(rtype, name, ptype) -> AclBindingFilter:
    return AclBindingFilter(rtype, name, ptype)


# ResourcePatternFilterTest
def test_should_not_match_if_different_resource_type():
    assert not pattern_filter(TOPIC, "Name", LITERAL).matches(acl(rtype=GROUP))


def test_should_not_match_if_different_name():
    assert not pattern_filter(TOPIC, "Different", PREFIXED).matches(acl(pattern=PREFIXED))


def test_should_not_match_if_different_name_case():
    assert not pattern_filter(TOPIC, "NAME", LITERAL).matches(acl())


def test_should_not_match_if_different_pattern_type():
    assert not pattern_filter(TOPIC, "Name", LITERAL).matches(acl(pattern=PREFIXED))


def test_should_match_where_resource_type_is_any():
    assert pattern_filter(ResourceType.ANY, "Name", PREFIXED).matches(acl(pattern=PREFIXED))


def test_should_match_where_resource_name_is_any():
    assert pattern_filter(TOPIC, None, PREFIXED).matches(acl(pattern=PREFIXED))


def test_should_match_where_pattern_type_is_any():
    assert pattern_filter(TOPIC, None, ANY).matches(acl(pattern=PREFIXED))


def test_should_match_where_pattern_type_is_match():
    assert pattern_filter(TOPIC, None, MATCH).matches(acl(pattern=PREFIXED))


def test_should_match_literal_if_exact_match():
    assert pattern_filter(TOPIC, "Name", LITERAL).matches(acl())


def test_should_match_literal_if_name_matches_and_filter_is_on_pattern_type_any():
    assert pattern_filter(TOPIC, "Name", ANY).matches(acl())


def test_should_match_literal_if_name_matches_and_filter_is_on_pattern_type_match():
    assert pattern_filter(TOPIC, "Name", MATCH).matches(acl())


def test_should_not_match_literal_if_name_does_not_match():
    assert not pattern_filter(TOPIC, "Name", LITERAL).matches(acl("Name2"))
    assert not pattern_filter(TOPIC, "Name", ANY).matches(acl("Name2"))
    assert not pattern_filter(TOPIC, "Name", MATCH).matches(acl("Name2"))


def test_should_match_literal_wildcard_if_exact_match():
    assert pattern_filter(TOPIC, "*", LITERAL).matches(acl("*"))


def test_should_not_match_literal_wildcard_against_other_name():
    assert not pattern_filter(TOPIC, "Name", LITERAL).matches(acl("*"))
    assert not pattern_filter(TOPIC, "*", LITERAL).matches(acl("Name"))


def test_should_match_literal_wildcard_if_filter_has_pattern_type_of_any_or_match():
    assert not pattern_filter(TOPIC, "Name", ANY).matches(acl("*"))
    assert pattern_filter(TOPIC, "Name", MATCH).matches(acl("*"))


def test_should_match_prefixed_if_exact_match():
    assert pattern_filter(TOPIC, "Name", PREFIXED).matches(acl(pattern=PREFIXED))


def test_should_not_match_if_both_prefixed_and_filter_is_prefix_of_pattern():
    assert not pattern_filter(TOPIC, "Name", PREFIXED).matches(acl("Name-something", PREFIXED))


def test_should_not_match_if_both_prefixed_and_pattern_is_prefix_of_filter():
    assert not pattern_filter(TOPIC, "Name-something", PREFIXED).matches(acl("Name", PREFIXED))


def test_should_match_prefixed_if_name_matches_and_filter_is_on_pattern_type_any():
    assert pattern_filter(TOPIC, "Name", ANY).matches(acl(pattern=PREFIXED))


def test_should_match_prefixed_if_name_matches_and_filter_is_on_pattern_type_match():
    assert pattern_filter(TOPIC, "Name", MATCH).matches(acl(pattern=PREFIXED))


def test_should_not_match_prefixed_if_name_does_not_match():
    assert not pattern_filter(TOPIC, "Name", PREFIXED).matches(acl("Name2", PREFIXED))
    assert not pattern_filter(TOPIC, "Name", ANY).matches(acl("Name2", PREFIXED))
    assert not pattern_filter(TOPIC, "Name", MATCH).matches(acl("Name2", PREFIXED))


def test_should_match_prefixed_if_filter_has_pattern_type_of_match_and_name_starts_with_prefix():
    assert pattern_filter(TOPIC, "Name-something", MATCH).matches(acl("Name", PREFIXED))


def test_entry_filter_matches_principal_host_operation_and_permission():
    assert ANY_FILTER.matches(acl())
    assert AclBindingFilter(principal="User:bob", host="*", operation=READ, permission_type=ALLOW).matches(acl())
    assert not AclBindingFilter(principal="User:alice").matches(acl())
    assert not AclBindingFilter(host="10.0.0.1").matches(acl())
    assert not AclBindingFilter(operation=AclOperation.WRITE).matches(acl())
    assert not AclBindingFilter(permission_type=DENY).matches(acl())


# AclControlManagerTest.testValidateNewAcl and the broker's checks
@pytest.mark.parametrize("bad, message", [
    (acl(rtype=ResourceType.ANY), "Invalid resourceType ANY"),
    (acl(rtype=ResourceType.UNKNOWN), "Invalid resourceType UNKNOWN"),
    (acl(pattern=MATCH), "Invalid patternType MATCH"),
    (acl(pattern=ANY), "Invalid patternType ANY"),
    (acl(op=AclOperation.ANY), "Invalid operation ANY"),
    (acl(perm=AclPermissionType.ANY), "Invalid permissionType ANY"),
    (acl(name=""), "Resource name should not be empty"),
    (acl(principal="bob"), "expected a string in format principalType:principalName but got bob"),
])
def test_validate_new_acl_refuses_what_the_controller_refuses(bad, message):
    with pytest.raises(InvalidAcl, match=message):
        validate_new_acl(bad)


def test_validate_new_acl_accepts_a_good_acl():
    validate_new_acl(acl())
    validate_new_acl(acl("kafka-cluster", rtype=CLUSTER, op=AclOperation.CLUSTER_ACTION))


def test_the_broker_refuses_an_empty_name_and_a_cluster_not_named_kafka_cluster():
    with pytest.raises(InvalidAcl, match="The only valid name for the CLUSTER resource is kafka-cluster"):
        validate_create(acl("my-cluster", rtype=CLUSTER))
    with pytest.raises(InvalidAcl, match="Invalid empty resource name"):
        validate_create(acl(""))
    validate_create(acl("kafka-cluster", rtype=CLUSTER))


def test_validate_filter_refuses_unknown_parts():
    validate_filter(ANY_FILTER)
    with pytest.raises(InvalidAcl, match="Unknown patternFilter."):
        validate_filter(AclBindingFilter(pattern_type=PatternType.UNKNOWN))
    with pytest.raises(InvalidAcl, match="Unknown entryFilter."):
        validate_filter(AclBindingFilter(operation=AclOperation.UNKNOWN))


def test_parse_principal_keeps_colons_in_the_name():
    assert parse_principal("User:CN=a:b") == ("User", "CN=a:b")
    for bad in ("", None, "bob"):
        with pytest.raises(ValueError):
            parse_principal(bad)
