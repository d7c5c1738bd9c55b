"""A node with Kafka's StandardAuthorizer for authorization tests: one in-process node (EmbeddedBroker) whose
PLAINTEXT listener is SASL_PLAINTEXT with PLAIN users, ``User:admin`` a super user, and ACLs that exist from the
start (records in the new cluster's bootstrap.checkpoint, as the controller appends them beside the features).

Each test names its users and their ACLs up front (a user per case keeps the cases apart on one node), then sends
requests as any of them with ``call``: the request decoded by the node, the response decoded here, at the version
asked for.

``controller_listener`` gives the node a controller listener too (it is then the one voter of a quorum named in
``controller.quorum.voters``), reached with ``call(..., controller=True)``:

* ``"SASL_PLAINTEXT"``: the same PLAIN users, so a test can send the controller's APIs as a user without rights;
* ``"PLAINTEXT"``: every connection on it is ``User:ANONYMOUS``, which is then a super user, as a Kafka deployment
  with an authorizer and a PLAINTEXT controller listener must make it (the nodes' votes, fetches, registrations
  and forwarded Envelopes arrive as ANONYMOUS and need CLUSTER_ACTION): such a listener must be reachable by the
  nodes only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from broker.network import blocking_request
from broker.quorum.bootstrap_metadata import write_bootstrap
from broker.security.node_links import LinkSecurity
from broker.testing.embedded import EmbeddedBroker
from broker.testing.embedded_cluster import reserve_ports
from tests.kafka_wire import KafkaWire
from cluster.acls import (
    CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType,
)
from cluster.authorizer import AUTHORIZER_CLASS
from cluster.controller import BOOTSTRAP_FEATURES
from protocol.generated.metadata import AccessControlEntryRecord

SUPER_USER = "admin"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
CLUSTER_ID = "b2RyYWRlay1hdXRoei1ub2Rl"


def acl(principal: str, resource_type: ResourceType, name: str, operation: AclOperation,
        permission: AclPermissionType = AclPermissionType.ALLOW, pattern: PatternType = PatternType.LITERAL,
        host: str = "*") -> AccessControlEntryRecord:
    """One ACL as the controller records it; ``principal`` a bare user name or ``User:name``."""
    if ":" not in principal:
        principal = f"User:{principal}"
    return AccessControlEntryRecord(id=os.urandom(16), resource_type=int(resource_type), resource_name=name,
                                    pattern_type=int(pattern), principal=principal, host=host,
                                    operation=int(operation), permission_type=int(permission))


def cluster_acl(principal: str, operation: AclOperation, **kw) -> AccessControlEntryRecord:
    return acl(principal, ResourceType.CLUSTER, CLUSTER_NAME, operation, **kw)


def password_of(user: str) -> str:
    return f"{user}-secret"


class AuthzNode:
    """The node, its users and a call as any of them. ``with AuthzNode(dir, users, acls) as node: ...``"""

    def __init__(self, data_dir: Path, users: Iterable[str], acls: Iterable[AccessControlEntryRecord] = (),
                 overrides: dict | None = None, controller_listener: str | None = None) -> None:
        self.users = sorted({SUPER_USER, *users})
        entries = " ".join(f'user_{u}="{password_of(u)}"' for u in self.users)
        data_dir = Path(data_dir)
        write_bootstrap(data_dir, dict(BOOTSTRAP_FEATURES), list(acls))
        jaas = (f'{PLAIN_MODULE} required username="{SUPER_USER}" password="{password_of(SUPER_USER)}" '
                f"{entries};")
        values = {"listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
                  "listener.name.plaintext.sasl.enabled.mechanisms": "PLAIN",
                  "listener.name.plaintext.plain.sasl.jaas.config": jaas,
                  "sasl.mechanism.inter.broker.protocol": "PLAIN",
                  "authorizer.class.name": AUTHORIZER_CLASS, "super.users": f"User:{SUPER_USER}"}
        self.controller_listener = controller_listener
        if controller_listener is not None:
            port = reserve_ports(1)[0]
            values.update({"listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}",
                           "controller.listener.names": "CONTROLLER", "node.id": 1,
                           "controller.quorum.voters": f"1@127.0.0.1:{port}", "cluster.id": CLUSTER_ID,
                           "listener.security.protocol.map":
                               f"PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:{controller_listener}"})
            if controller_listener == "SASL_PLAINTEXT":
                values.update({"listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
                               "listener.name.controller.plain.sasl.jaas.config": jaas,
                               "sasl.mechanism.controller.protocol": "PLAIN"})
            elif controller_listener == "PLAINTEXT":
                values["super.users"] = f"User:{SUPER_USER};User:ANONYMOUS"
            else:
                raise ValueError(f"controller_listener={controller_listener!r}: PLAINTEXT or SASL_PLAINTEXT")
        values.update(overrides or {})
        self.broker = EmbeddedBroker(data_dir, values)

    def __enter__(self) -> "AuthzNode":
        self.broker.start()
        return self

    def __exit__(self, *exc) -> None:
        self.broker.stop()

    @property
    def port(self) -> int:
        return self.broker.broker.bound_port("PLAINTEXT")

    @property
    def controller_port(self) -> int:
        return self.broker.broker.bound_port("CONTROLLER")

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def client_config(self, user: str) -> dict:
        """librdkafka-style settings for a real client as ``user``."""
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password_of(user)}

    def call(self, user: str | None, body, version: int, timeout: float = 10.0, client_id: str = "authz-test",
             controller: bool = False):
        """``body`` at ``version`` as ``user`` over a new authenticated connection (to the controller listener
        with ``controller``; ``user`` None on a PLAINTEXT one); the decoded response (ConnectionError when the
        node closes the connection instead of answering)."""
        security = None if user is None else LinkSecurity(mechanism="PLAIN", username=user,
                                                          password=password_of(user))
        return blocking_request.request(self.controller_port if controller else self.port, body, version,
                                        timeout=timeout, client_id=client_id, security=security)

    def wire(self, user: str, client_id: str = "authz-test", timeout: float = 10.0) -> KafkaWire:
        """A raw connection (tests/kafka_wire.py) authenticated as ``user``, for several requests in order: what a
        request without a response (acks=0 Produce) did to the connection shows in the next one's answer."""
        w = KafkaWire(self.port, client_id, timeout)
        try:
            blocking_request.authenticate(w.sock, LinkSecurity(mechanism="PLAIN", username=user,
                                                               password=password_of(user)), client_id)
        except BaseException:
            w.sock.close()
            raise
        return w
