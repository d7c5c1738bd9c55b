"""ACLs as Kafka models them: resource and pattern types, operations, permissions, one ACL (``StandardAcl``), the
filters of DescribeAcls and DeleteAcls, and the controller's checks of a new ACL and of a filter.

The enum values are Kafka's wire codes (``ResourceType``, ``PatternType``, ``AclOperation``, ``AclPermissionType``
in org.apache.kafka.common); names print as Kafka prints them, so log lines and errors read the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

WILDCARD = "*"  # ResourcePattern.WILDCARD_RESOURCE and AccessControlEntry's any-host
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource (Resource.CLUSTER_NAME)


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def pascal_name(self) -> str:
        """SecurityUtils.resourceTypeName: ``Topic``, ``TransactionalId``."""
        return "".join(w.capitalize() for w in self.name.split("_"))


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class InvalidAcl(ValueError):
    """Kafka's InvalidRequestException from AclControlManager's checks (INVALID_REQUEST)."""


def parse_principal(text: str | None) -> tuple[str, str]:
    """SecurityUtils.parseKafkaPrincipal: ``type:name``, the name may hold colons."""
    if not text or ":" not in text:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    kind, name = text.split(":", 1)
    return kind, name


@dataclass(frozen=True, slots=True)
class StandardAcl:
    """One ACL: a resource pattern and an access control entry (StandardAcl)."""
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"StandardAcl(resourceType={self.resource_type.name}, resourceName={self.resource_name}, "
                f"patternType={self.pattern_type.name}, principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission_type.name})")

    @classmethod
    def from_record(cls, record) -> StandardAcl:
        """From an AccessControlEntryRecord (or anything with its field names)."""
        return cls(ResourceType(record.resource_type), record.resource_name, PatternType(record.pattern_type),
                   record.principal, record.host, AclOperation(record.operation),
                   AclPermissionType(record.permission_type))


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls' and DeleteAcls' filter (ResourcePatternFilter + AccessControlEntryFilter); ``None`` names,
    principals and hosts match any."""
    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, acl: StandardAcl) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: StandardAcl) -> bool:
        """ResourcePatternFilter.matches: MATCH takes every pattern that would apply to the named resource."""
        if self.resource_type is not ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != acl.pattern_type:
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type is PatternType.ANY or self.pattern_type == acl.pattern_type:
            return self.resource_name == acl.resource_name
        if acl.pattern_type is PatternType.LITERAL:
            return self.resource_name == acl.resource_name or acl.resource_name == WILDCARD
        if acl.pattern_type is PatternType.PREFIXED:
            return self.resource_name.startswith(acl.resource_name)
        raise ValueError(f"Unsupported PatternType: {acl.pattern_type.name}")

    def _matches_entry(self, acl: StandardAcl) -> bool:
        """AccessControlEntryFilter.matches."""
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission_type is AclPermissionType.ANY or self.permission_type == acl.permission_type


ANY_FILTER = AclBindingFilter()


def validate_create(acl: StandardAcl) -> None:
    """The broker's checks before CreateAcls goes to the controller (AclApis.handleCreateAcls)."""
    if acl.resource_type is ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        raise InvalidAcl("The only valid name for the CLUSTER resource is " + CLUSTER_NAME)
    if not acl.resource_name:
        raise InvalidAcl("Invalid empty resource name")


def validate_new_acl(acl: StandardAcl) -> None:
    """AclControlManager.validateNewAcl: raises InvalidAcl with Kafka's message. A principal without a colon is
    refused too: Kafka accepts it and then fails every authorization that meets it (StandardAcl.kafkaPrincipal)."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidAcl(f"Invalid resourceType {acl.resource_type.name}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"Invalid patternType {acl.pattern_type.name}")
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAcl(f"Invalid operation {acl.operation.name}")
    if acl.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        raise InvalidAcl(f"Invalid permissionType {acl.permission_type.name}")
    if not acl.resource_name:
        raise InvalidAcl("Resource name should not be empty")
    try:
        parse_principal(acl.principal)
    except ValueError as exc:
        raise InvalidAcl(str(exc)) from None


def validate_filter(f: AclBindingFilter) -> None:
    """AclControlManager.validateFilter (DeleteAcls): an UNKNOWN in the pattern or entry filter is refused."""
    if f.resource_type is ResourceType.UNKNOWN or f.pattern_type is PatternType.UNKNOWN:
        raise InvalidAcl("Unknown patternFilter.")
    if f.operation is AclOperation.UNKNOWN or f.permission_type is AclPermissionType.UNKNOWN:
        raise InvalidAcl("Unknown entryFilter.")
