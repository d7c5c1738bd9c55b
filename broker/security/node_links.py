"""How this node authenticates to its peers: the security of the links to the inter-broker listener (replication,
transaction markers, verification) and to the controller listener (Raft, the controller channel).

As in Kafka, a link speaks its listener's protocol. TLS verifies the peer with the listener's truststore (and its
host name: ``ssl.endpoint.identification.algorithm``, ``https`` by default) and presents the listener's keystore.
SASL uses ``sasl.mechanism.inter.broker.protocol`` (or ``sasl.mechanism.controller.protocol``) with the
``username`` and ``password`` options of the listener's JAAS entry for that mechanism. SCRAM on a controller
listener is refused: the voters' credentials live in the metadata the voters must first elect a leader to read.
"""

from __future__ import annotations

import dataclasses
import ssl
from typing import Any

from broker.config.config_types import ConfigException
from broker.security.sasl_config import PLAIN, listener_sasl, listener_value, parse_jaas
from broker.security.tls import client_context


@dataclasses.dataclass(frozen=True)
class LinkSecurity:
    """What a NodeClient does after connecting: TLS with ``ssl`` (None: plaintext), then SASL with ``mechanism``
    as ``username`` (None: no SASL)."""
    ssl: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = dataclasses.field(default=None, repr=False)


def link_security(config: Any, listener: str, controller: bool = False) -> LinkSecurity | None:
    """The security of links to ``listener`` on the peers; None for PLAINTEXT. ConfigException for what this node
    could not authenticate with. ``config``: the node's BrokerConfig (not imported here: broker.config imports the
    security modules to check them at start)."""
    protocol = config.security_protocol(listener)
    if protocol == "PLAINTEXT":
        return None
    context = client_context(config.values, listener) if protocol in ("SSL", "SASL_SSL") else None
    if not protocol.startswith("SASL_"):
        return LinkSecurity(ssl=context)
    key = "sasl.mechanism.controller.protocol" if controller else "sasl.mechanism.inter.broker.protocol"
    mechanism = str(config.get(key) or "GSSAPI")
    if controller and mechanism.startswith("SCRAM-"):
        raise ConfigException(f"{key}={mechanism}: SCRAM between controllers is refused (their credentials are "
                              f"metadata, which nobody could read with every voter down); use PLAIN or TLS")
    enabled = listener_sasl(config.values, listener).mechanisms
    if mechanism not in enabled:
        raise ConfigException(f"{key}={mechanism} is not among listener {listener}'s sasl.enabled.mechanisms "
                              f"{','.join(enabled)}")
    entry = parse_jaas(str(listener_value(config.values, listener, "sasl.jaas.config", mechanism)))[0]
    username, password = entry.options.get("username"), entry.options.get("password")
    if not username or password is None:
        raise ConfigException(f"Listener {listener}: the JAAS entry for {mechanism} needs username and password "
                              f"options for this node's own connections")
    return LinkSecurity(ssl=context, mechanism=mechanism, username=username, password=password)


def client_properties_security(props: Any) -> LinkSecurity | None:
    """A Kafka tool's ``--command-config`` client properties (``security.protocol``, ``ssl.truststore.*`` /
    ``ssl.keystore.*``, ``ssl.endpoint.identification.algorithm``, ``sasl.mechanism`` and a ``sasl.jaas.config``
    with ``username`` and ``password``) as a link's security; None for PLAINTEXT."""
    protocol = str(props.get("security.protocol") or "PLAINTEXT").upper()
    if protocol == "PLAINTEXT":
        return None
    values = {"ssl.truststore.type": "PEM", "ssl.keystore.type": "PEM",
              "ssl.endpoint.identification.algorithm": "https", **dict(props)}
    context = client_context(values, "client") if protocol in ("SSL", "SASL_SSL") else None
    if not protocol.startswith("SASL_"):
        return LinkSecurity(ssl=context)
    mechanism = str(props.get("sasl.mechanism") or "GSSAPI")
    if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ConfigException(f"sasl.mechanism={mechanism} is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
    jaas = props.get("sasl.jaas.config")
    if not jaas:
        raise ConfigException("sasl.jaas.config with username and password is needed for SASL")
    options = parse_jaas(str(jaas))[0].options
    if not options.get("username") or options.get("password") is None:
        raise ConfigException("sasl.jaas.config needs username and password options")
    return LinkSecurity(ssl=context, mechanism=mechanism, username=options["username"], password=options["password"])


__all__ = ["LinkSecurity", "client_properties_security", "link_security", "PLAIN"]
