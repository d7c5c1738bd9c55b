"""Which configuration values are secrets: Kafka's PASSWORD-typed properties, also under a ``listener.name.<l>.``
or ``listener.name.<l>.<mechanism>.`` prefix (DynamicBrokerConfig's ListenerConfigRegex and
ListenerMechanismConfigs). DescribeConfigs answers them with ``value=null, is_sensitive=true``; log lines, errors
and process arguments show ``[hidden]`` (Kafka's Password.toString)."""

from __future__ import annotations

import re

HIDDEN = "[hidden]"

# ConfigDef.Type.PASSWORD properties of KafkaConfig (SslConfigs, SaslConfigs, PasswordEncoderConfigs,
# DelegationTokenManagerConfigs)
PASSWORD_CONFIGS = frozenset({
    "sasl.jaas.config",
    "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
    "password.encoder.secret", "password.encoder.old.secret",
    "delegation.token.secret.key", "delegation.token.master.key",
})

_LISTENER_PREFIX = re.compile(r"listener\.name\.[^.]*\.(.*)")


def base_name(name: str) -> str:
    """``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config`` -> ``sasl.jaas.config``."""
    m = _LISTENER_PREFIX.fullmatch(name)
    if m is None:
        return name
    rest = m.group(1)
    for password in PASSWORD_CONFIGS:
        if rest.endswith("." + password):
            return password
    return rest


def is_sensitive(name: str) -> bool:
    return base_name(name) in PASSWORD_CONFIGS


def redact(values: dict) -> dict:
    """A copy fit for a log line: secrets as ``[hidden]``."""
    return {k: (HIDDEN if v is not None and is_sensitive(k) else v) for k, v in values.items()}
