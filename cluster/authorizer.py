"""Kafka's StandardAuthorizer (``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``):
who may do what, decided from the ACLs of the metadata image.

The rules are StandardAuthorizerData's: a super user may do anything; otherwise the ACLs naming the resource are
those with its literal name, a prefix of it (PREFIXED) and the literal wildcard ``*``, for the principal or
``User:*``, from the client's host or ``*``. A DENY among them wins; else an ALLOW allows; READ, WRITE, DELETE and
ALTER imply DESCRIBE, and ALTER_CONFIGS implies DESCRIBE_CONFIGS, for ALLOW ACLs only; ALL matches every operation.
With no ACL naming the resource at all, ``allow.everyone.if.no.acl.found`` decides (default: deny).

Kafka walks a sorted set from the resource name; here an index per image does the same in a few dict lookups:
literal names, and for prefixes only the prefix lengths that some PREFIXED ACL has (``AclIndex``). The index is
built once per set of ACLs (``update`` keeps it while the image's ACL mapping is the same object), so no request
scans every ACL. The decisions of one index are remembered (``_decisions``, (principal, host, operation, resource
type, name) -> result and rule, dropped with the index and bounded): a hot request asks the same questions over and
over (a produce request per few ms, WRITE on the same topics), and with many ACLs on prefixes of its topics the
walk over them would cost each request more than the rest of its handling. Decisions are logged as
``kafka.authorizer.logger`` logs them: denials asked for explicitly at INFO, allowed ones at DEBUG, the rest
(authorized-operations probes, filters) at TRACE level 5.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Mapping

from cluster.acls import (
    WILDCARD, WILDCARD_PRINCIPAL, AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType,
    StandardAcl, parse_principal,
)

audit_log = logging.getLogger("kafka.authorizer.logger")
TRACE = 5

AUTHORIZER_CLASS = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_IF_NO_ACL_IS_FOUND_CONFIG = "allow.everyone.if.no.acl.found"

DECISIONS_KEPT = 10_000  # remembered decisions of one ACL index (all forgotten when full)

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                               AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


class AuthorizationResult(Enum):
    ALLOWED = "Allowed"
    DENIED = "Denied"


ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED


class AuthorizerNotReady(Exception):
    """AuthorizerNotReadyException: the ACLs are not loaded yet; only super users are answered."""


@dataclass(frozen=True, slots=True)
class Action:
    """One question (org.apache.kafka.server.authorizer.Action) on a literal resource name."""
    operation: AclOperation
    resource_type: ResourceType
    resource_name: str
    resource_reference_count: int = 1
    log_if_allowed: bool = True
    log_if_denied: bool = True


def configured_super_users(value: str | None) -> frozenset[str]:
    """StandardAuthorizer.getConfiguredSuperUsers: ``super.users`` split on ``;``, each a ``type:name``."""
    users = set()
    for item in (value or "").split(";"):
        item = item.strip()
        if item:
            parse_principal(item)
            users.add(item)
    return frozenset(users)


def default_result(value) -> AuthorizationResult:
    """StandardAuthorizer.getDefaultResult: ``allow.everyone.if.no.acl.found``."""
    if value is None:
        return DENIED
    if isinstance(value, bool):
        return ALLOWED if value else DENIED
    return ALLOWED if str(value).strip().lower() == "true" else DENIED


class AclIndex:
    """The ACLs of one image arranged for lookups by resource (Kafka's AclCache)."""

    def __init__(self, acls: Iterable[StandardAcl] = ()) -> None:
        self.count = 0
        self._literal: dict[tuple[ResourceType, str], list[StandardAcl]] = {}
        self._prefixed: dict[tuple[ResourceType, str], list[StandardAcl]] = {}
        self._prefix_lengths: dict[ResourceType, list[int]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        for acl in acls:
            self.count += 1
            key = (acl.resource_type, acl.resource_name)
            if acl.pattern_type is PatternType.PREFIXED:
                self._prefixed.setdefault(key, []).append(acl)
                lengths.setdefault(acl.resource_type, set()).add(len(acl.resource_name))
            else:
                self._literal.setdefault(key, []).append(acl)
        self._prefix_lengths = {t: sorted(ls, reverse=True) for t, ls in lengths.items()}

    def naming(self, resource_type: ResourceType, name: str) -> list[StandardAcl]:
        """The ACLs whose pattern covers ``name`` (not the wildcard): literal, then longest prefix first."""
        found = list(self._literal.get((resource_type, name), ()))
        for length in self._prefix_lengths.get(resource_type, ()):
            if length <= len(name):
                found.extend(self._prefixed.get((resource_type, name[:length]), ()))
        return found

    def wildcard(self, resource_type: ResourceType) -> list[StandardAcl]:
        return self._literal.get((resource_type, WILDCARD), [])

    def of_type(self, resource_type: ResourceType) -> Iterable[StandardAcl]:
        for (t, _), acls in self._literal.items():
            if t == resource_type:
                yield from acls
        for (t, _), acls in self._prefixed.items():
            if t == resource_type:
                yield from acls

    def all(self) -> Iterable[StandardAcl]:
        for acls in self._literal.values():
            yield from acls
        for acls in self._prefixed.values():
            yield from acls


def find_result(action: Action, principals: tuple[str, ...], host: str, acl: StandardAcl) -> AuthorizationResult | None:
    """StandardAuthorizerData.findResult: what this ACL says about the action, or None if it does not apply."""
    if acl.principal not in principals:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation is not AclOperation.ALL:
        if acl.permission_type is AclPermissionType.ALLOW:
            if action.operation is AclOperation.DESCRIBE:
                if acl.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif action.operation is AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif action.operation != acl.operation:
                return None
        elif action.operation != acl.operation:
            return None
    return ALLOWED if acl.permission_type is AclPermissionType.ALLOW else DENIED


def matching_principals(principal: str) -> tuple[str, str]:
    return (principal, WILDCARD_PRINCIPAL)


class StandardAuthorizer:
    """One node's authorizer: its configuration, and the ACL index of the latest image it was given."""

    def __init__(self, super_users: frozenset[str] = frozenset(),
                 default: AuthorizationResult = DENIED, node_id: int = -1) -> None:
        self.super_users = frozenset(super_users)
        self.default_result = default
        self.node_id = node_id
        self.loading_complete = False
        self._source: object = None
        self._index = AclIndex()
        self._by_id: dict[object, StandardAcl] = {}
        self._decisions: dict[tuple, tuple[AuthorizationResult, str]] = {}

    @classmethod
    def from_config(cls, config: Mapping[str, object], node_id: int = -1) -> StandardAuthorizer:
        return cls(configured_super_users(config.get(SUPER_USERS_CONFIG)),
                   default_result(config.get(ALLOW_EVERYONE_IF_NO_ACL_IS_FOUND_CONFIG)), node_id)

    # ---- the ACLs -------------------------------------------------------------------------------------------

    def update(self, acls: Mapping[object, StandardAcl]) -> None:
        """The image's ACLs by id; the index is rebuilt only when the mapping is a different object."""
        if acls is self._source:
            return
        self._source = acls
        self._by_id = dict(acls)
        self._index = AclIndex(self._by_id.values())
        self._decisions = {}

    def add_acl(self, acl_id, acl: StandardAcl) -> None:
        self._by_id[acl_id] = acl
        self._source = None
        self._index = AclIndex(self._by_id.values())
        self._decisions = {}

    def remove_acl(self, acl_id) -> None:
        if self._by_id.pop(acl_id, None) is not None:
            self._source = None
            self._index = AclIndex(self._by_id.values())
            self._decisions = {}

    def complete_initial_load(self) -> None:
        self.loading_complete = True

    def acl_count(self) -> int:
        return self._index.count

    def acls(self, f: AclBindingFilter) -> list[StandardAcl]:
        """The ACLs a DescribeAcls filter matches, in insertion order."""
        return [acl for acl in self._by_id.values() if f.matches(acl)]

    # ---- decisions ------------------------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, actions: list[Action],
                  request: str = "") -> list[AuthorizationResult]:
        """One result per action (Authorizer.authorize); raises AuthorizerNotReady for anyone but a super user
        before the first image is loaded."""
        return [self.authorize_one(principal, host, action, request) for action in actions]

    def authorize_one(self, principal: str, host: str, action: Action, request: str = "") -> AuthorizationResult:
        if principal in self.super_users:
            rule = "SuperUser"
            result = ALLOWED
        elif not self.loading_complete:
            raise AuthorizerNotReady("The authorizer is not ready yet")
        else:
            key = (principal, host, action.operation, action.resource_type, action.resource_name)
            decided = self._decisions.get(key)
            if decided is None:
                if len(self._decisions) >= DECISIONS_KEPT:
                    self._decisions.clear()
                decided = self._decisions[key] = self._find_rule(matching_principals(principal), host, action)
            result, rule = decided
        self._log(principal, host, action, request, result, rule)
        return result

    def _find_rule(self, principals: tuple[str, ...], host: str, action: Action) -> tuple[AuthorizationResult, str]:
        """StandardAuthorizerData.findAclRule: the named section first (a DENY ends it), then the wildcard."""
        allow: StandardAcl | None = None
        has_resource_acls = False
        for section in (self._index.naming(action.resource_type, action.resource_name),
                        self._index.wildcard(action.resource_type)):
            for acl in section:
                has_resource_acls = True
                result = find_result(action, principals, host, acl)
                if result is ALLOWED:
                    allow = acl
                elif result is DENIED:
                    return DENIED, f"MatchingAcl(acl={acl})"
        if allow is not None:
            return ALLOWED, f"MatchingAcl(acl={allow})"
        if not has_resource_acls:
            return self.default_result, "DefaultAllow" if self.default_result is ALLOWED else "DefaultDeny"
        return DENIED, "DefaultDeny"

    def authorize_by_resource_type(self, principal: str, host: str, op: AclOperation,
                                   resource_type: ResourceType, request: str = "") -> AuthorizationResult:
        """Authorizer.authorizeByResourceType: may the principal do ``op`` on SOME resource of the type (an ALLOW
        not covered by a DENY; a wildcard DENY denies all)? Used for idempotent writes (KIP-679) and the like."""
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"Must specify a non-filter resource type for authorizeByResourceType: {resource_type}")
        if op in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"Must specify a non-filter operation type for authorizeByResourceType: {op}")
        if self.authorize_one(principal, host, Action(op, resource_type, "hardcode", 0, True, False),
                              request) is ALLOWED:
            return ALLOWED
        return _some_resource_allowed(self._index.of_type(resource_type), principal, host, op)

    @staticmethod
    def _log(principal: str, host: str, action: Action, request: str, result: AuthorizationResult,
             rule: str) -> None:
        if result is ALLOWED:
            level = logging.DEBUG if action.log_if_allowed else TRACE
        else:
            level = logging.INFO if action.log_if_denied else TRACE
        if audit_log.isEnabledFor(level):
            audit_log.log(level, audit_message(principal, host, action, request, result, rule))


def audit_message(principal: str, host: str, action: Action, request: str, result: AuthorizationResult,
                  rule: str) -> str:
    """StandardAuthorizerData.buildAuditMessage."""
    return (f"Principal = {principal} is {result.value} operation = {action.operation.name} from host = {host} "
            f"on resource = {action.resource_type.pascal_name}:LITERAL:{action.resource_name} for request = "
            f"{request} with resourceRefCount = {action.resource_reference_count} based on rule {rule}")


def _some_resource_allowed(acls: Iterable[StandardAcl], principal: str, host: str,
                           op: AclOperation) -> AuthorizationResult:
    """authorizeByResourceType's scan of one resource type's ACLs."""
    deny_literal: set[str] = set()
    deny_prefixed: set[str] = set()
    allow_literal: set[str] = set()
    allow_prefixed: set[str] = set()
    wildcard_allow = False
    for acl in acls:
        if (acl.host not in (host, WILDCARD) or acl.principal not in (principal, WILDCARD_PRINCIPAL)
                or acl.operation not in (op, AclOperation.ALL)):
            continue
        literal = acl.pattern_type is PatternType.LITERAL
        if acl.permission_type is AclPermissionType.DENY:
            if literal and acl.resource_name == WILDCARD:
                return DENIED
            (deny_literal if literal else deny_prefixed).add(acl.resource_name)
        elif acl.permission_type is AclPermissionType.ALLOW:
            if literal and acl.resource_name == WILDCARD:
                wildcard_allow = True  # a wildcard DENY met later still denies
            else:
                (allow_literal if literal else allow_prefixed).add(acl.resource_name)
    if wildcard_allow:
        return ALLOWED
    for literal, names in ((True, allow_literal), (False, allow_prefixed)):
        for name in names:
            if literal and name in deny_literal:
                continue
            if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                return ALLOWED
    return DENIED
