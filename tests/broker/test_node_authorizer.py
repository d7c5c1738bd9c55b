"""The node's authorizer as handlers ask it (broker/security/authorization.py): Kafka's AuthHelper answers over
the latest image's ACLs, and every answer yes without an authorizer."""

import asyncio

from broker.security.authorization import (
    SUPPORTED_OPERATIONS, NodeAuthorizer, authorize, authorized_operations, filter_authorized, to_32bit_field,
)
from cluster.acls import AclOperation, AclPermissionType, PatternType, ResourceType, StandardAcl
from cluster.authorizer import AUTHORIZER_CLASS
from cluster.metadata_image import MetadataImage

CONFIG = {"authorizer.class.name": AUTHORIZER_CLASS, "super.users": "User:admin"}


def acl(name, op, principal="User:alice", permission=AclPermissionType.ALLOW, pattern=PatternType.LITERAL,
        rtype=ResourceType.TOPIC):
    return StandardAcl(rtype, name, pattern, principal, "*", op, permission)


def node_authorizer(*acls) -> NodeAuthorizer:
    authorizer = NodeAuthorizer.from_config(CONFIG, 1)
    image = MetadataImage(acls={i.to_bytes(16, "big"): a for i, a in enumerate(acls)})
    asyncio.run(authorizer.on_new_metadata_image(image))
    return authorizer


def test_no_authorizer_allows_everything():
    assert NodeAuthorizer.from_config({}, 1) is None
    assert authorize(None, "User:x", "h", AclOperation.WRITE, ResourceType.TOPIC, "t")
    assert filter_authorized(None, "User:x", "h", AclOperation.READ, ResourceType.TOPIC, ["a", "b", "a"],
                             lambda n: n) == {"a", "b"}
    assert authorized_operations(None, "User:x", "h", ResourceType.GROUP, "g") == to_32bit_field(
        SUPPORTED_OPERATIONS[ResourceType.GROUP])


def test_answers_follow_the_image():
    authorizer = node_authorizer(acl("orders", AclOperation.WRITE), acl("pay", AclOperation.READ,
                                                                          pattern=PatternType.PREFIXED))
    assert authorize(authorizer, "User:alice", "h", AclOperation.WRITE, ResourceType.TOPIC, "orders")
    assert not authorize(authorizer, "User:bob", "h", AclOperation.WRITE, ResourceType.TOPIC, "orders")
    assert authorize(authorizer, "User:admin", "h", AclOperation.DELETE, ResourceType.TOPIC, "anything")
    assert filter_authorized(authorizer, "User:alice", "h", AclOperation.READ, ResourceType.TOPIC,
                             ["payments", "orders", "payroll"], lambda n: n) == {"payments", "payroll"}
    # WRITE implies DESCRIBE (an ALLOW): the bit field holds both
    assert authorized_operations(authorizer, "User:alice", "h", ResourceType.TOPIC, "orders") == to_32bit_field(
        [AclOperation.WRITE, AclOperation.DESCRIBE])
    assert authorizer.authorize_by_resource_type("User:alice", "h", AclOperation.WRITE, ResourceType.TOPIC)
    assert not authorizer.authorize_by_resource_type("User:bob", "h", AclOperation.WRITE, ResourceType.TOPIC)
