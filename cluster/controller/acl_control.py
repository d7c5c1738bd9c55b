"""CreateAcls and DeleteAcls decided against the image's ACLs (Kafka's AclControlManager, with the checks
AclApis makes before it): results per creation or filter, and the AccessControlEntryRecord /
RemoveAccessControlEntryRecord to commit.

Pure: the image's ACLs by id and the controller's randomness (for new ids) come in, nothing is kept between
calls; the controller's decision image already holds every ACL decided before (committed or not), so an
identical ACL created twice, in one request or in two pipelined ones, is one record.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping

from cluster.acls import (
    AclBindingFilter, AclOperation, AclPermissionType, InvalidAcl, PatternType, ResourceType, StandardAcl,
    validate_create, validate_filter, validate_new_acl,
)
from cluster.controller.controller import Randomness, random_topic_id
from protocol.errors import ErrorCode
from protocol.generated.metadata import AccessControlEntryRecord, RemoveAccessControlEntryRecord

# QuorumController.MAX_RECORDS_PER_USER_OP (= MAX_RECORDS_PER_BATCH): the records one CreateAcls or DeleteAcls
# may write
MAX_RECORDS_PER_USER_OP = 10_000
# EventHandlerExceptionInfo's answer to BoundedListTooLongException
EXCESSIVE_BATCH = "Unable to perform excessively large batch operation."


@dataclasses.dataclass(frozen=True, slots=True)
class AclError:
    """One creation's or filter's answer (ApiError): code 0 and no message on success."""
    code: int = 0
    message: str | None = None


OK = AclError()


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteResult:
    """One filter's answer (AclDeleteResult): its error, or the ACLs it matched, each removed."""
    error: AclError = OK
    deleted: tuple[StandardAcl, ...] = ()


def _code(enum_type, value: int):
    """``Enum.fromCode``: a code Kafka does not know is UNKNOWN."""
    try:
        return enum_type(value)
    except ValueError:
        return enum_type.UNKNOWN


def binding(resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str, operation: int,
            permission_type: int) -> StandardAcl:
    """CreateAclsRequest.aclBinding: wire codes as Kafka's enums."""
    return StandardAcl(_code(ResourceType, resource_type), resource_name, _code(PatternType, pattern_type),
                       principal, host, _code(AclOperation, operation), _code(AclPermissionType, permission_type))


def binding_filter(resource_type: int, resource_name: str | None, pattern_type: int, principal: str | None,
                   host: str | None, operation: int, permission_type: int) -> AclBindingFilter:
    """DeleteAclsRequest.aclBindingFilter / DescribeAclsRequest.filter."""
    return AclBindingFilter(_code(ResourceType, resource_type), resource_name, _code(PatternType, pattern_type),
                            principal, host, _code(AclOperation, operation),
                            _code(AclPermissionType, permission_type))


def has_unknown_codes(*codes: int) -> bool:
    """The request classes' own check (CreateAclsRequest.validate, DeleteAclsRequest / DescribeAclsRequest
    normalizeAndValidate): a wire code 0 (UNKNOWN) in a type, pattern, operation or permission fails parsing the
    request, and Kafka closes the connection. Other unknown codes parse, as UNKNOWN."""
    return any(code == 0 for code in codes)


def new_acl_id(rng: Randomness, existing: Mapping[bytes, object], taken: set[bytes] | frozenset = frozenset()
               ) -> bytes:
    """AclControlManager.newAclId: Uuid.randomUuid until unused (neither in ``existing`` nor in ``taken``, the ids
    given earlier in the same decision)."""
    while True:
        acl_id = random_topic_id(rng)
        if acl_id not in existing and acl_id not in taken:
            return acl_id


def create_acls(acls: Mapping[bytes, StandardAcl], creations: list[StandardAcl], rng: Randomness
                ) -> tuple[list[AccessControlEntryRecord], list[AclError]]:
    """AclApis.handleCreateAcls' checks, then AclControlManager.createAcls: one result per creation, in order.
    An ACL identical to one that exists (or to an earlier creation) succeeds without a record. More than
    MAX_RECORDS_PER_USER_OP new ACLs: nothing is written and every creation that passed the checks gets
    POLICY_VIOLATION (QuorumController's answer to the BoundedList that overflowed)."""
    results: list[AclError | None] = []
    existing = set(acls.values())
    records: list[AccessControlEntryRecord] = []
    new_ids: set[bytes] = set()
    for acl in creations:
        try:
            validate_create(acl)  # AclApis, before the controller
            validate_new_acl(acl)  # AclControlManager.validateNewAcl
        except InvalidAcl as exc:
            results.append(AclError(ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        if acl not in existing:
            existing.add(acl)
            acl_id = new_acl_id(rng, acls, new_ids)
            new_ids.add(acl_id)
            records.append(AccessControlEntryRecord(
                id=acl_id, resource_type=int(acl.resource_type),
                resource_name=acl.resource_name, pattern_type=int(acl.pattern_type), principal=acl.principal,
                host=acl.host, operation=int(acl.operation), permission_type=int(acl.permission_type)))
        results.append(None)
    if len(records) > MAX_RECORDS_PER_USER_OP:
        too_many = AclError(ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH)
        return [], [too_many if r is None else r for r in results]
    return records, [OK if r is None else r for r in results]


def delete_acls(acls: Mapping[bytes, StandardAcl], filters: list[AclBindingFilter]
                ) -> tuple[list[RemoveAccessControlEntryRecord], list[DeleteResult]]:
    """AclControlManager.deleteAcls: each filter's matches, in the image's order; an ACL two filters match is
    listed by both and removed once. A filter whose matches would take the request past MAX_RECORDS_PER_USER_OP
    removals fails with UNKNOWN_SERVER_ERROR (Kafka's BoundedListTooLongException, caught per filter) and removes
    nothing (Kafka keeps the removals it had gathered, then cannot commit them in one batch)."""
    removed: dict[bytes, None] = {}  # ordered set of ids
    results: list[DeleteResult] = []
    for f in filters:
        try:
            validate_filter(f)
        except InvalidAcl as exc:
            results.append(DeleteResult(AclError(ErrorCode.INVALID_REQUEST, str(exc))))
            continue
        matched = [(acl_id, acl) for acl_id, acl in acls.items() if f.matches(acl)]
        new_ids = {acl_id for acl_id, _ in matched if acl_id not in removed}
        if len(removed) + len(new_ids) > MAX_RECORDS_PER_USER_OP:
            results.append(DeleteResult(AclError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete operation.")))
            continue
        for acl_id, _ in matched:
            removed[acl_id] = None
        results.append(DeleteResult(OK, tuple(acl for _, acl in matched)))
    return [RemoveAccessControlEntryRecord(id=acl_id) for acl_id in removed], results


def describe_resources(acls: Iterable[StandardAcl], f: AclBindingFilter
                       ) -> list[tuple[tuple[ResourceType, str, PatternType], list[StandardAcl]]]:
    """DescribeAclsResponse.aclsResources over the ACLs ``f`` matches: one entry per resource pattern (type,
    name, pattern type) with its distinct entries. Kafka's order is a HashMap's; here patterns are sorted and
    entries keep the image's order, so answers are stable."""
    groups: dict[tuple[ResourceType, str, PatternType], dict[tuple, StandardAcl]] = {}
    for acl in acls:
        if f.matches(acl):
            entry = (acl.principal, acl.host, acl.operation, acl.permission_type)
            groups.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), {}).setdefault(entry, acl)
    return [(pattern, list(groups[pattern].values())) for pattern in sorted(groups)]
