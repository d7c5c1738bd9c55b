"""Who a connection is: each TLS listener's SSLContext and the principal of a client certificate
(broker/security/tls.py); each SASL listener's authenticators (protocol/sasl_server.py) made with the listener's
mechanisms, PLAIN users from its JAAS entry and SCRAM credentials from the metadata image (read at each
exchange, so a credential changed through the controller counts for the next login)."""

from __future__ import annotations

import secrets
from typing import Callable

from broker.config import BrokerConfig
from broker.security.sasl_config import PLAIN, ListenerSasl, listener_sasl
from broker.security.tls import PrincipalMapper, server_context, ssl_principal
from cluster.metadata_image import MetadataImage
from protocol.sasl_plain import PlainServer
from protocol.sasl_server import SaslServerAuthenticator
from protocol.scram import ScramMechanism, ScramServer

ANONYMOUS = "User:ANONYMOUS"


class ListenerAuthentication:
    """The node's SASL listeners and how their connections authenticate."""

    def __init__(self, config: BrokerConfig, image: Callable[[], MetadataImage]) -> None:
        self._image = image
        self.sasl: dict[str, ListenerSasl] = {
            lst.name: listener_sasl(config.values, lst.name) for lst in config.listeners
            if config.security_protocol(lst.name).startswith("SASL_")}
        self.config = config
        self.tls = self.tls_contexts()
        self.principal_mapper = PrincipalMapper(config.get("ssl.principal.mapping.rules"))
        self.max_receive_size = int(config.get("sasl.server.max.receive.size", 524288))
        self.failed_delay_s = int(config.get("connection.failed.authentication.delay.ms", 100)) / 1000.0

    def tls_contexts(self) -> dict:
        """A new SSLContext per TLS listener, its stores read from their files now."""
        config = self.config
        return {lst.name: server_context(config.values, lst.name, config.security_protocol(lst.name))
                for lst in config.listeners if config.security_protocol(lst.name) in ("SSL", "SASL_SSL")}

    def authenticator(self, listener: str) -> SaslServerAuthenticator | None:
        """A new connection's authenticator; None on a listener without SASL."""
        settings = self.sasl.get(listener)
        if settings is None:
            return None
        return SaslServerAuthenticator(list(settings.mechanisms), lambda name: self._mechanism(settings, name),
                                       lambda name: settings.reauth_ms.get(name, 0))

    def tls_principal(self, listener: str, ssl_object) -> str:
        """An SSL listener's connection: its client certificate's mapped subject, else User:ANONYMOUS (on SASL_SSL
        the SASL exchange names the principal)."""
        if listener not in self.tls or listener in self.sasl:
            return ANONYMOUS
        return ssl_principal(ssl_object, self.principal_mapper)

    def _mechanism(self, settings: ListenerSasl, name: str):
        if name == PLAIN:
            return PlainServer(settings.plain_users.get)
        mechanism = ScramMechanism.for_name(name)
        return ScramServer(mechanism, lambda user: self._image().scram_credentials.get((user, int(mechanism))),
                           secrets.token_urlsafe(18))
