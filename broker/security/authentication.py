"""Who a connection is: each TLS listener's SSLContext and the principal of a client certificate
(broker/security/tls.py); each SASL listener's authenticators (protocol/sasl_server.py) made with the listener's
mechanisms, PLAIN users from its JAAS entry and SCRAM credentials from the metadata image (read at each
exchange, so a credential changed through the controller counts for the next login). A TLS listener's stores are
the static config overlaid with this broker's dynamic configs (IncrementalAlterConfigs of
``listener.name.<l>.ssl.*``: broker/security/dynamic_tls.py)."""

from __future__ import annotations

import secrets
from typing import Any, Callable, Mapping

from broker.config import BrokerConfig
from broker.security.sasl_config import PLAIN, ListenerSasl, listener_sasl
from broker.security.dynamic_tls import fingerprint, reconfigured_context
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
        self.dynamic: dict[str, str] = {}  # this broker's dynamic configs in force (the SSL store settings)
        self.fingerprints: dict[str, tuple] = {}  # what each TLS listener's context was built from
        self.tls = self.tls_contexts()
        self.principal_mapper = PrincipalMapper(config.get("ssl.principal.mapping.rules"))
        self.max_receive_size = int(config.get("sasl.server.max.receive.size", 524288))
        self.failed_delay_s = int(config.get("connection.failed.authentication.delay.ms", 100)) / 1000.0

    @property
    def values(self) -> dict[str, Any]:
        """The settings in force: the static config, then this broker's dynamic configs (Kafka's precedence)."""
        return {**self.config.values, **self.dynamic}

    def _tls_listeners(self) -> list[tuple[str, str]]:
        config = self.config
        return [(lst.name, config.security_protocol(lst.name)) for lst in config.listeners
                if config.security_protocol(lst.name) in ("SSL", "SASL_SSL")]

    def tls_contexts(self) -> dict:
        """A new SSLContext per TLS listener, its stores read from their files now."""
        values = self.values
        contexts = {}
        for name, protocol in self._tls_listeners():
            self.fingerprints[name] = fingerprint(values, name)
            contexts[name] = server_context(values, name, protocol)
        return contexts

    def _reconfigured(self, dynamic: Mapping[str, str], checks: bool) -> dict:
        new_values = {**self.config.values, **dynamic}
        out = {}
        for name, protocol in self._tls_listeners():
            fp = fingerprint(new_values, name)
            if fp != self.fingerprints.get(name):
                out[name] = (reconfigured_context(self.values, new_values, name, protocol, checks=checks,
                                                  inter_broker=name == self.config.inter_broker_listener), fp)
        return out

    def validate_dynamic(self, dynamic: Mapping[str, str]) -> None:
        """Whether this broker's dynamic configs could become ``dynamic``: every TLS listener whose stores would
        change is built and checked against the stores in force (SslFactory.validateReconfiguration: subject,
        SANs, the inter-broker handshake); ConfigException when not."""
        self._reconfigured(dynamic, checks=True)

    def apply_dynamic(self, dynamic: Mapping[str, str]) -> dict:
        """This broker's dynamic configs become ``dynamic`` (committed, so checked when asked for: here the stores
        only have to load, also at a restart, where the stores in force are the static ones): the new SSLContexts of
        the TLS listeners whose store settings or store files changed (all or none: ConfigException leaves
        everything as it was)."""
        changed = self._reconfigured(dynamic, checks=False)
        self.dynamic = dict(dynamic)
        for name, (context, fp) in changed.items():
            self.tls[name] = context
            self.fingerprints[name] = fp
        return {name: context for name, (context, _) in changed.items()}

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
