"""cluster/authorizer.py: Kafka's StandardAuthorizerTest and StandardAuthorizerPropertyTest, ported (names kept
in the test names), the default Authorizer.authorizeByResourceType, and a model check: the index answers as a
scan of every ACL with StandardAuthorizerData's rules would."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.acls import WILDCARD, WILDCARD_PRINCIPAL, AclOperation, AclPermissionType, PatternType, ResourceType
from cluster.acls import StandardAcl as Acl
from cluster.authorizer import (
    ALLOWED, DENIED, Action, AuthorizerNotReady, StandardAuthorizer, configured_super_users, default_result,
    find_result, matching_principals,
)

ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS = (
    AclOperation.ALL, AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
    AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LOCAL = "127.0.0.1"


def action(op, rtype, name) -> Action:
    return Action(op, rtype, name, 1, False, False)


def authorizer(acls=(), super_users="User:superman", allow_if_none=None) -> StandardAuthorizer:
    a = StandardAuthorizer.from_config({"super.users": super_users,
                                        "allow.everyone.if.no.acl.found": allow_if_none})
    a.complete_initial_load()
    for i, acl in enumerate(acls):
        a.add_acl(i, acl)
    return a


def results(a: StandardAuthorizer, user: str, actions, host: str = LOCAL) -> list:
    return a.authorize(f"User:{user}", host, list(actions))


def foo_acl(op, permission) -> Acl:
    return Acl(TOPIC, "foo_", PREFIXED, "User:bob", WILDCARD, op, permission)


def bar_acl(op, permission) -> Acl:
    return Acl(GROUP, "bar", LITERAL, WILDCARD_PRINCIPAL, WILDCARD, op, permission)


def test_get_configured_super_users():
    assert configured_super_users(None) == frozenset()
    assert configured_super_users(" ") == frozenset()
    assert configured_super_users("User:bob;User:alice ") == {"User:bob", "User:alice"}
    assert configured_super_users(";  User:bob  ;  User:alice ") == {"User:bob", "User:alice"}
    with pytest.raises(ValueError, match="expected a string in format principalType:principalName but got bob"):
        configured_super_users("bob;:alice")


def test_get_default_result():
    assert default_result(None) is DENIED
    assert default_result("true") is ALLOWED
    assert default_result("false") is DENIED


@pytest.mark.parametrize("enabled", [True, False])
def test_allow_everyone_if_no_acl_found_config(enabled):
    """testAllowEveryoneIfNoAclFoundConfigEnabled / Disabled: only a resource no ACL names is opened."""
    a = authorizer([Acl(TOPIC, "topic1", LITERAL, "User:Alice", WILDCARD, READ, ALLOW)],
                   super_users="User:alice;User:chris", allow_if_none=str(enabled).lower())
    assert results(a, "Bob", [action(READ, TOPIC, "topic1")]) == [DENIED]
    assert results(a, "Bob", [action(READ, TOPIC, "topic2")]) == [ALLOWED if enabled else DENIED]


def test_configure():
    a = StandardAuthorizer.from_config({"super.users": "User:alice;User:chris",
                                        "allow.everyone.if.no.acl.found": "true"})
    assert a.super_users == {"User:alice", "User:chris"}
    assert a.default_result is ALLOWED


def test_find_result_implication():
    bob = matching_principals("User:bob")
    for op in (DESCRIBE, READ, WRITE, DELETE, ALTER):  # these imply DESCRIBE
        assert find_result(action(DESCRIBE, TOPIC, "foo_bar"), bob, LOCAL, foo_acl(op, ALLOW)) is ALLOWED
    assert find_result(action(DESCRIBE, TOPIC, "foo_bar"), bob, LOCAL, foo_acl(CREATE, ALLOW)) is None
    for op in (READ, WRITE, DELETE, ALTER):  # DENY ACLs imply nothing
        assert find_result(action(DESCRIBE, TOPIC, "foo_bar"), bob, LOCAL, foo_acl(op, DENY)) is None
    assert find_result(action(DESCRIBE, TOPIC, "foo_bar"), bob, LOCAL, foo_acl(DESCRIBE, DENY)) is DENIED
    for op in (DESCRIBE_CONFIGS, ALTER_CONFIGS):
        assert find_result(action(DESCRIBE_CONFIGS, TOPIC, "foo_bar"), bob, LOCAL, foo_acl(op, ALLOW)) is ALLOWED
    assert find_result(action(DESCRIBE_CONFIGS, TOPIC, "foo_bar"), bob, LOCAL, foo_acl(ALTER_CONFIGS, DENY)) is None
    assert find_result(action(ALTER_CONFIGS, TOPIC, "foo_bar"), bob, LOCAL, foo_acl(ALTER_CONFIGS, DENY)) is DENIED


def test_find_result_principal_matching():
    assert find_result(action(READ, TOPIC, "foo_bar"), matching_principals("User:bob"), LOCAL,
                       foo_acl(READ, ALLOW)) is ALLOWED
    assert find_result(action(READ, TOPIC, "foo_bar"), matching_principals("User:alice"), LOCAL,
                       foo_acl(READ, ALLOW)) is None
    assert find_result(action(READ, GROUP, "bar"), matching_principals("User:alice"), LOCAL,
                       bar_acl(READ, DENY)) is DENIED


def test_list_acls():
    from cluster.acls import ANY_FILTER, AclBindingFilter
    a = authorizer()
    foo = [foo_acl(READ, ALLOW), foo_acl(WRITE, ALLOW)]
    bar = [bar_acl(DESCRIBE_CONFIGS, DENY), bar_acl(ALTER_CONFIGS, DENY)]
    for i, acl in enumerate(foo + bar):
        a.add_acl(i, acl)
    assert a.acls(ANY_FILTER) == foo + bar
    a.remove_acl(1)
    assert a.acls(ANY_FILTER) == [foo[0]] + bar
    assert a.acls(AclBindingFilter(TOPIC, None, PatternType.ANY)) == [foo[0]]


def test_simple_authorizations():
    a = authorizer([foo_acl(READ, ALLOW), foo_acl(WRITE, ALLOW), bar_acl(DESCRIBE_CONFIGS, ALLOW),
                    bar_acl(ALTER_CONFIGS, ALLOW)])
    assert results(a, "bob", [action(READ, TOPIC, "foo_")]) == [ALLOWED]
    assert results(a, "fred", [action(ALTER_CONFIGS, GROUP, "bar")]) == [ALLOWED]


def test_deny_precedence_with_operation_all():
    a = authorizer([Acl(TOPIC, "foo", LITERAL, "User:alice", "*", ALL, DENY),
                    Acl(TOPIC, "foo", PREFIXED, "User:alice", "*", READ, ALLOW),
                    Acl(TOPIC, "foo", LITERAL, "User:*", "*", ALL, DENY),
                    Acl(TOPIC, "foo", PREFIXED, "User:*", "*", DESCRIBE, ALLOW)])
    assert results(a, "alice", [action(WRITE, TOPIC, "foo"), action(READ, TOPIC, "foo"),
                                action(DESCRIBE, TOPIC, "foo"), action(READ, TOPIC, "foobar")]) == \
        [DENIED, DENIED, DENIED, ALLOWED]
    assert results(a, "bob", [action(DESCRIBE, TOPIC, "foo"), action(READ, TOPIC, "foo"),
                              action(WRITE, TOPIC, "foo"), action(DESCRIBE, TOPIC, "foobaz"),
                              action(READ, TOPIC, "foobaz")]) == [DENIED, DENIED, DENIED, ALLOWED, DENIED]


def test_topic_acl_with_operation_all():
    a = authorizer([Acl(TOPIC, "foo", LITERAL, "User:*", "*", ALL, ALLOW),
                    Acl(TOPIC, "bar", PREFIXED, "User:alice", "*", ALL, ALLOW),
                    Acl(TOPIC, "baz", LITERAL, "User:bob", "*", ALL, ALLOW)])
    assert results(a, "alice", [action(WRITE, TOPIC, "foo"), action(DESCRIBE_CONFIGS, TOPIC, "bar"),
                                action(DESCRIBE, TOPIC, "baz")]) == [ALLOWED, ALLOWED, DENIED]
    assert results(a, "bob", [action(WRITE, TOPIC, "foo"), action(READ, TOPIC, "bar"),
                              action(DESCRIBE, TOPIC, "baz")]) == [ALLOWED, DENIED, ALLOWED]
    assert results(a, "malory", [action(DESCRIBE, TOPIC, "foo"), action(WRITE, TOPIC, "bar"),
                                 action(READ, TOPIC, "baz")]) == [ALLOWED, DENIED, DENIED]


def test_host_address_acl_validation():
    host1, host2, here = "192.168.1.1", "192.168.1.2", LOCAL
    a = authorizer([Acl(TOPIC, "foo", LITERAL, "User:alice", host1, READ, DENY),
                    Acl(TOPIC, "foo", LITERAL, "User:alice", "*", READ, ALLOW),
                    Acl(TOPIC, "bar", LITERAL, "User:bob", host2, READ, ALLOW),
                    Acl(TOPIC, "bar", LITERAL, "User:*", here, DESCRIBE, ALLOW)])
    actions = [action(READ, TOPIC, "foo"), action(READ, TOPIC, "bar"), action(DESCRIBE, TOPIC, "bar")]
    assert results(a, "alice", actions, here) == [ALLOWED, DENIED, ALLOWED]
    assert results(a, "alice", actions, host1) == [DENIED, DENIED, DENIED]
    assert results(a, "alice", actions, host2) == [ALLOWED, DENIED, DENIED]
    assert results(a, "bob", actions, here) == [DENIED, DENIED, ALLOWED]
    assert results(a, "bob", actions, host1) == [DENIED, DENIED, DENIED]
    assert results(a, "bob", actions, host2) == [DENIED, ALLOWED, ALLOWED]


MANY_ACLS = [
    Acl(TOPIC, "green2", LITERAL, "User:*", "*", READ, ALLOW),
    Acl(TOPIC, "green", PREFIXED, "User:bob", "*", READ, ALLOW),
    Acl(TOPIC, "betamax4", LITERAL, "User:bob", "*", READ, ALLOW),
    Acl(TOPIC, "betamax", LITERAL, "User:bob", "*", READ, ALLOW),
    Acl(TOPIC, "beta", PREFIXED, "User:*", "*", READ, ALLOW),
    Acl(TOPIC, "alpha", PREFIXED, "User:*", "*", READ, ALLOW),
    Acl(TOPIC, "alp", PREFIXED, "User:bob", "*", READ, DENY),
    Acl(GROUP, "*", LITERAL, "User:bob", "*", WRITE, ALLOW),
    Acl(GROUP, "wheel", LITERAL, "User:*", "*", WRITE, DENY),
]


def test_authorization_with_many_acls():
    a = authorizer(MANY_ACLS)
    assert results(a, "bob", [action(READ, TOPIC, "green1"), action(WRITE, GROUP, "wheel")]) == [ALLOWED, DENIED]
    assert results(a, "bob", [action(READ, TOPIC, "alpha"), action(WRITE, GROUP, "arbitrary"),
                              action(READ, TOPIC, "ala")]) == [DENIED, ALLOWED, DENIED]


@pytest.mark.parametrize("log_if_denied", [True, False])
def test_deny_audit_logging(caplog, log_if_denied):
    a = authorizer(MANY_ACLS)
    caplog.set_level(1, logger="kafka.authorizer.logger")
    assert a.authorize("User:bob", "127.0.0.1", [Action(READ, TOPIC, "alpha", 1, False, log_if_denied)],
                       "Fetch") == [DENIED]
    expected = ("Principal = User:bob is Denied operation = READ from host = 127.0.0.1 on resource = "
                "Topic:LITERAL:alpha for request = Fetch with resourceRefCount = 1 based on rule "
                "MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=alp, patternType=PREFIXED, "
                "principal=User:bob, host=*, operation=READ, permissionType=DENY))")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == \
        [(logging.INFO if log_if_denied else 5, expected)]


@pytest.mark.parametrize("log_if_allowed", [True, False])
def test_allow_audit_logging(caplog, log_if_allowed):
    a = authorizer(MANY_ACLS)
    caplog.set_level(1, logger="kafka.authorizer.logger")
    assert a.authorize("User:bob", "127.0.0.1", [Action(READ, TOPIC, "green1", 1, log_if_allowed, False)],
                       "Fetch") == [ALLOWED]
    expected = ("Principal = User:bob is Allowed operation = READ from host = 127.0.0.1 on resource = "
                "Topic:LITERAL:green1 for request = Fetch with resourceRefCount = 1 based on rule "
                "MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=green, patternType=PREFIXED, "
                "principal=User:bob, host=*, operation=READ, permissionType=ALLOW))")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == \
        [(logging.DEBUG if log_if_allowed else 5, expected)]


def test_authorization_prior_to_complete_initial_load():
    a = StandardAuthorizer.from_config({"super.users": "User:superman"})
    with pytest.raises(AuthorizerNotReady):
        results(a, "bob", [action(READ, TOPIC, "green1"), action(READ, TOPIC, "green2")])
    assert results(a, "superman", [action(READ, TOPIC, "green1"), action(WRITE, GROUP, "wheel")]) == \
        [ALLOWED, ALLOWED]


def test_prefix_acls():
    a = authorizer([Acl(TOPIC, "fooa", PREFIXED, "User:alice", "*", ALL, ALLOW),
                    Acl(TOPIC, "foobar", LITERAL, "User:bob", "*", ALL, ALLOW),
                    Acl(TOPIC, "f", PREFIXED, "User:bob", "*", ALL, ALLOW)])
    assert results(a, "bob", [action(WRITE, TOPIC, "foobarr"), action(READ, TOPIC, "goobar"),
                              action(READ, TOPIC, "fooa")]) == [ALLOWED, DENIED, ALLOWED]
    assert results(a, "alice", [action(DESCRIBE, TOPIC, "fooa"), action(WRITE, TOPIC, "bar"),
                                action(READ, TOPIC, "baz")]) == [ALLOWED, DENIED, DENIED]


def test_the_index_is_kept_while_the_images_acl_mapping_is_the_same_object():
    a = authorizer()
    acls = {1: Acl(TOPIC, "t", LITERAL, "User:bob", "*", READ, ALLOW)}
    a.update(acls)
    index = a._index
    a.update(acls)
    assert a._index is index
    a.update({**acls, 2: Acl(TOPIC, "t", LITERAL, "User:bob", "*", WRITE, DENY)})
    assert a._index is not index and a.acl_count() == 2


def test_a_remembered_decision_follows_every_change_of_the_acls(caplog):
    """The decisions one ACL index made are remembered; a new image, an added and a removed ACL each forget them,
    and a remembered decision is still logged (the audit log sees every question)."""
    a = authorizer()
    allow = Acl(TOPIC, "t", PREFIXED, "User:bob", "*", WRITE, ALLOW)
    a.update({1: allow})
    write = Action(WRITE, TOPIC, "topic", 1, True, True)
    assert results(a, "bob", [write, write]) == [ALLOWED, ALLOWED]
    a.add_acl(2, Acl(TOPIC, "topic", LITERAL, WILDCARD_PRINCIPAL, "*", WRITE, DENY))
    assert results(a, "bob", [write]) == [DENIED]
    a.remove_acl(2)
    assert results(a, "bob", [write]) == [ALLOWED]
    a.update({3: Acl(TOPIC, "t", PREFIXED, "User:bob", LOCAL, WRITE, ALLOW)})  # another host only now
    assert results(a, "bob", [write], host="10.0.0.1") == [DENIED]
    assert results(a, "bob", [write]) == [ALLOWED]
    a.update({})
    assert results(a, "bob", [write]) == [DENIED]
    with caplog.at_level(logging.DEBUG, logger="kafka.authorizer.logger"):
        a.update({1: allow})
        results(a, "bob", [write, write])
    assert sum("is Allowed" in r.getMessage() for r in caplog.records) == 2, caplog.text


# ---- Authorizer.authorizeByResourceType (the interface's default, which StandardAuthorizer keeps) ------------

def by_type(acls, user="bob", op=WRITE, host=LOCAL, super_users="User:superman"):
    return authorizer(acls, super_users=super_users).authorize_by_resource_type(f"User:{user}", host, op, TOPIC)


def test_authorize_by_resource_type_allows_some_allowed_resource_not_covered_by_a_deny():
    assert by_type([]) is DENIED
    assert by_type([], user="superman") is ALLOWED
    assert by_type([Acl(TOPIC, "t1", LITERAL, "User:bob", "*", WRITE, ALLOW)]) is ALLOWED
    assert by_type([Acl(TOPIC, "t1", LITERAL, "User:alice", "*", WRITE, ALLOW)]) is DENIED
    assert by_type([Acl(TOPIC, "t1", LITERAL, "User:*", "*", ALL, ALLOW)]) is ALLOWED
    assert by_type([Acl(TOPIC, "t1", LITERAL, "User:bob", "10.0.0.1", WRITE, ALLOW)]) is DENIED
    assert by_type([Acl(TOPIC, "t1", LITERAL, "User:bob", "*", READ, ALLOW)]) is DENIED
    # the allowed resource is denied literally, or under a prefix
    assert by_type([Acl(TOPIC, "t1", LITERAL, "User:bob", "*", WRITE, ALLOW),
                    Acl(TOPIC, "t1", LITERAL, "User:bob", "*", WRITE, DENY)]) is DENIED
    assert by_type([Acl(TOPIC, "abc", PREFIXED, "User:bob", "*", WRITE, ALLOW),
                    Acl(TOPIC, "ab", PREFIXED, "User:*", "*", WRITE, DENY)]) is DENIED
    assert by_type([Acl(TOPIC, "abc", PREFIXED, "User:bob", "*", WRITE, ALLOW),
                    Acl(TOPIC, "abcd", PREFIXED, "User:*", "*", WRITE, DENY)]) is ALLOWED
    # a wildcard ALLOW, unless a wildcard DENY
    assert by_type([Acl(TOPIC, "*", LITERAL, "User:bob", "*", WRITE, ALLOW)]) is ALLOWED
    assert by_type([Acl(TOPIC, "*", LITERAL, "User:bob", "*", WRITE, ALLOW),
                    Acl(TOPIC, "*", LITERAL, "User:*", "*", WRITE, DENY)]) is DENIED


def test_authorize_by_resource_type_refuses_filter_types():
    a = authorizer()
    with pytest.raises(ValueError):
        a.authorize_by_resource_type("User:bob", LOCAL, WRITE, ResourceType.ANY)
    with pytest.raises(ValueError):
        a.authorize_by_resource_type("User:bob", LOCAL, AclOperation.ANY, TOPIC)


# ---- StandardAuthorizerPropertyTest, and the index against a scan of every ACL --------------------------------

TOPIC_CHARS = st.text(alphabet="abcxyz_-.019", min_size=1, max_size=12)


def _write(name, pattern, permission) -> Acl:
    return Acl(TOPIC, name, pattern, "User:user", "*", WRITE, permission)


@settings(max_examples=300, deadline=None)
@given(topic=TOPIC_CHARS, cut=st.integers(0, 11), suffixes=st.sets(TOPIC_CHARS, max_size=10),
       literal=st.booleans())
def test_matching_deny_overrides_all_allow_rules(topic, cut, suffixes, literal):
    """matchingPrefixDenyOverridesAllAllowRules / matchingLiteralDenyOverridesAllAllowRules."""
    deny = _write(topic, LITERAL, DENY) if literal else _write(topic[:cut % len(topic)], PREFIXED, DENY)
    allows = [_write(topic + s, PREFIXED, ALLOW) for s in suffixes] + \
        [_write(topic[:i], PREFIXED, ALLOW) for i in range(1, len(topic) + 1)]
    a = authorizer([deny] + allows)
    assert results(a, "user", [action(WRITE, TOPIC, topic)]) == [DENIED]


@settings(max_examples=300, deadline=None)
@given(topic=TOPIC_CHARS, cut=st.integers(0, 11), suffixes=st.sets(TOPIC_CHARS, max_size=10),
       literal=st.booleans())
def test_matching_allow_with_no_matching_deny_rules(topic, cut, suffixes, literal):
    """matchingPrefixAllowWithNoMatchingDenyRules / matchingLiteralAllowWithNoMatchingDenyRules."""
    allow = _write(topic, LITERAL, ALLOW) if literal else _write(topic[:cut % len(topic)], PREFIXED, ALLOW)
    denies = [_write(topic + s, PREFIXED, DENY) for s in suffixes]
    a = authorizer([allow] + denies)
    assert results(a, "user", [action(WRITE, TOPIC, topic)]) == [ALLOWED]


def _model(acls, principal, host, act, default) -> object:
    """StandardAuthorizerData's rules over every ACL, no index."""
    covering = [acl for acl in acls if acl.resource_type == act.resource_type and (
        (acl.pattern_type is LITERAL and acl.resource_name in (act.resource_name, WILDCARD))
        or (acl.pattern_type is PREFIXED and act.resource_name.startswith(acl.resource_name)))]
    said = [find_result(act, matching_principals(principal), host, acl) for acl in covering]
    if DENIED in said:
        return DENIED
    if ALLOWED in said:
        return ALLOWED
    return default if not covering else DENIED


_names = st.sampled_from(["a", "ab", "abc", "abd", "b", "*", "ba", "abcd"])
_acl = st.builds(Acl, st.sampled_from([TOPIC, GROUP]), _names, st.sampled_from([LITERAL, PREFIXED]),
                 st.sampled_from(["User:bob", "User:alice", "User:*"]), st.sampled_from(["*", "10.0.0.1", LOCAL]),
                 st.sampled_from(list(AclOperation)[2:]), st.sampled_from([ALLOW, DENY]))


@settings(max_examples=400, deadline=None)
@given(acls=st.lists(_acl, max_size=25), user=st.sampled_from(["bob", "alice", "carol"]),
       name=st.sampled_from(["a", "ab", "abc", "abcde", "b", "bab", "*", "c"]),
       rtype=st.sampled_from([TOPIC, GROUP]), op=st.sampled_from(list(AclOperation)[3:]),
       host=st.sampled_from([LOCAL, "10.0.0.1"]), allow_if_none=st.booleans())
def test_the_index_decides_as_a_scan_of_every_acl(acls, user, name, rtype, op, host, allow_if_none):
    a = authorizer(acls, allow_if_none=str(allow_if_none).lower())
    act = action(op, rtype, name)
    assert results(a, user, [act], host) == \
        [_model(acls, f"User:{user}", host, act, ALLOWED if allow_if_none else DENIED)]
