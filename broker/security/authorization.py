"""The node's authorizer as request handlers ask it (Kafka's AuthHelper over StandardAuthorizer): may this
request's principal, from its host, do an operation on a resource?

``NodeAuthorizer`` follows the metadata image (a publisher step hands it each image's ACLs; the index is rebuilt
only when they change) and is None on a node without ``authorizer.class.name``, where every question is
answered yes, as Kafka's ``authorizer.forall``. Handlers reach it through ``RequestContext.authorize`` and its
siblings, never directly.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, TypeVar

from cluster.acls import CLUSTER_NAME, AclOperation, ResourceType
from cluster.authorizer import ALLOWED, AUTHORIZER_CLASS, Action, StandardAuthorizer
from cluster.metadata_image import MetadataImage

T = TypeVar("T")

SUPPORTED_OPERATIONS: Mapping[ResourceType, tuple[AclOperation, ...]] = {
    # AclEntry.supportedOperations: what authorized-operations fields are computed over
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def to_32bit_field(operations: Iterable[AclOperation]) -> int:
    """Utils.to32BitField: bit ``code`` set for each operation."""
    field = 0
    for op in operations:
        field |= 1 << int(op)
    return field


class NodeAuthorizer:
    """One node's StandardAuthorizer, kept at the latest image's ACLs."""

    def __init__(self, authorizer: StandardAuthorizer) -> None:
        self.authorizer = authorizer

    @classmethod
    def from_config(cls, config: Mapping[str, object], node_id: int) -> "NodeAuthorizer | None":
        """None without ``authorizer.class.name``; only Kafka's StandardAuthorizer is known (the config checks
        refuse any other name at start)."""
        name = config.get("authorizer.class.name")
        if not name:
            return None
        if name != AUTHORIZER_CLASS:
            raise ValueError(f"authorizer.class.name={name}: only {AUTHORIZER_CLASS} is supported")
        return cls(StandardAuthorizer.from_config(config, node_id))

    async def on_new_metadata_image(self, image: MetadataImage) -> None:
        """Publisher step: the image's ACLs; the first image completes the initial load (before it, only super
        users are answered: StandardAuthorizer's AuthorizerNotReadyException)."""
        self.authorizer.update(image.acls)
        self.authorizer.complete_initial_load()

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  resource_name: str, request: str = "", log_if_allowed: bool = True, log_if_denied: bool = True,
                  ref_count: int = 1) -> bool:
        action = Action(operation, resource_type, resource_name, ref_count, log_if_allowed, log_if_denied)
        return self.authorizer.authorize_one(principal, host, action, request) is ALLOWED

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType, request: str = "") -> bool:
        return self.authorizer.authorize_by_resource_type(principal, host, operation, resource_type,
                                                          request) is ALLOWED


# ---- what RequestContext offers handlers (AuthHelper's methods) ------------------------------------------------

def authorize(authorizer: NodeAuthorizer | None, principal: str, host: str, operation: AclOperation,
              resource_type: ResourceType, resource_name: str, request: str = "", log_if_allowed: bool = True,
              log_if_denied: bool = True, ref_count: int = 1) -> bool:
    if authorizer is None:
        return True
    return authorizer.authorize(principal, host, operation, resource_type, resource_name, request,
                                log_if_allowed, log_if_denied, ref_count)


def authorized_operations(authorizer: NodeAuthorizer | None, principal: str, host: str,
                          resource_type: ResourceType, resource_name: str, request: str = "") -> int:
    """AuthHelper.authorizedOperations: the bit field of the resource type's operations this principal may do."""
    ops = SUPPORTED_OPERATIONS[resource_type]
    if authorizer is not None:
        ops = tuple(op for op in ops if authorizer.authorize(principal, host, op, resource_type, resource_name,
                                                            request, False, False))
    return to_32bit_field(ops)


def filter_authorized(authorizer: NodeAuthorizer | None, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType, resources: Iterable[T], name_of: Callable[[T], str],
                      request: str = "", log_if_allowed: bool = True, log_if_denied: bool = True) -> set[str]:
    """AuthHelper.filterByAuthorized: the names among ``resources`` the principal may do ``operation`` on (each
    name asked once, with how many times it appeared as its reference count)."""
    counts: dict[str, int] = {}
    for resource in resources:
        name = name_of(resource)
        counts[name] = counts.get(name, 0) + 1
    if authorizer is None:
        return set(counts)
    return {name for name, count in counts.items()
            if authorizer.authorize(principal, host, operation, resource_type, name, request, log_if_allowed,
                                    log_if_denied, count)}


def authorize_cluster(authorizer: NodeAuthorizer | None, principal: str, host: str, operation: AclOperation,
                      request: str = "", log_if_denied: bool = True) -> bool:
    return authorize(authorizer, principal, host, operation, ResourceType.CLUSTER, CLUSTER_NAME, request,
                     True, log_if_denied)
