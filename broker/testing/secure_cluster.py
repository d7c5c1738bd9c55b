"""What ``EmbeddedCluster(security="SASL_SSL")`` adds to its nodes: a CA and a certificate for 127.0.0.1, the
listeners' protocols (the broker listener SASL_SSL with SCRAM-SHA-512, the controller listener mTLS), the SCRAM
credentials a new cluster starts with (bootstrap.checkpoint, as ``odradek format --add-scram``: the users' for
SCRAM-SHA-512 and SCRAM-SHA-256), and the client side of it. Passwords are made here and kept in 0600 files under
the cluster's data dir.

With ``authorizer`` the nodes run Kafka's StandardAuthorizer, and the nodes' own principals are its super users
(``super.users``): ``User:<the node certificate's DN>`` on the mTLS controller listener (votes, metadata fetches,
registrations, heartbeats, forwarded Envelopes: CLUSTER_ACTION) and the SCRAM ``User:odradek-node`` between
brokers (replication, transaction markers), as a Kafka deployment lists its nodes' principals (KIP-801: before
the ACLs are loaded only super users are answered)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from broker.testing.certificates import CertificateAuthority

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
MECHANISM = "SCRAM-SHA-512"
NODE_USER = "odradek-node"


class SecureSetup:
    def __init__(self, directory: Path, users: tuple[str, ...], authorizer: bool = False) -> None:
        self.dir = Path(directory)
        self.authorizer = authorizer
        self.ca = CertificateAuthority(self.dir / "ca")
        self.node_cert = self.ca.issue("node", server=True)
        self.passwords = {name: self._password(name) for name in (NODE_USER, *users)}

    def _password(self, user: str) -> str:
        path = self.dir / f"{user}.password"
        if path.exists():  # a cluster started again on its data keeps its users
            return path.read_text()
        password = secrets.token_urlsafe(18)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password)
        return password

    @property
    def node_principals(self) -> tuple[str, ...]:
        """The principals the nodes authenticate to each other as: the certificate's (mTLS), the SCRAM user's."""
        return (f"User:{self.node_cert.dn}", f"User:{NODE_USER}")

    def node_properties(self) -> dict:
        jaas = f'{SCRAM_MODULE} required username="{NODE_USER}" password="{self.passwords[NODE_USER]}";'
        authorizer = {}
        if self.authorizer:
            from cluster.authorizer import AUTHORIZER_CLASS

            authorizer = {"authorizer.class.name": AUTHORIZER_CLASS, "super.users": ";".join(self.node_principals)}
        return {**authorizer, "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:SSL",
                "ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.node_cert.pem),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca.pem),
                "listener.name.controller.ssl.client.auth": "required",
                "listener.name.plaintext.sasl.enabled.mechanisms": MECHANISM,
                f"listener.name.plaintext.{MECHANISM.lower()}.sasl.jaas.config": jaas,
                "sasl.mechanism.inter.broker.protocol": MECHANISM}

    def bootstrap(self, data_dir: Path, records=()) -> None:
        """The SCRAM credentials (and ``records``, e.g. ACLs) in a voter's bootstrap.checkpoint (odradek format
        --add-scram), once."""
        from broker.quorum.bootstrap_metadata import BOOTSTRAP_FILE, parse_add_scram, write_bootstrap
        from cluster.controller import BOOTSTRAP_FEATURES

        if (Path(data_dir) / BOOTSTRAP_FILE).exists() or (Path(data_dir) / "meta.properties").exists():
            return
        # the users have a SCRAM-SHA-256 credential too (same password), for a listener a test enables it on
        write_bootstrap(Path(data_dir), dict(BOOTSTRAP_FEATURES), [
            *(parse_add_scram(f"{mechanism}=[name={user},password={password}]")
              for user, password in self.passwords.items()
              for mechanism in ((MECHANISM,) if user == NODE_USER else (MECHANISM, "SCRAM-SHA-256"))), *records])

    def client_config(self, user: str) -> dict:
        return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(self.ca.pem), "sasl.mechanism": MECHANISM,
                "sasl.username": user, "sasl.password": self.passwords[user]}

    def probe_security(self):
        """The harness' own readiness probes: as the nodes authenticate to each other."""
        import ssl

        from broker.security.node_links import LinkSecurity

        context = ssl.create_default_context(cafile=str(self.ca.pem))
        return LinkSecurity(ssl=context, mechanism=MECHANISM, username=NODE_USER, password=self.passwords[NODE_USER])
