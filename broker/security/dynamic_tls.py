"""TLS stores changed at run time by dynamic BROKER configs (Kafka's SslFactory.reconfigure through
DynamicBrokerConfig): the listener settings in force are the static config overlaid with this broker's dynamic
ones (cluster/dynamic_broker_config.py); a listener is rebuilt when its store settings or its store files' bytes
changed (DefaultSslEngineFactory.shouldBeRebuilt); a new keystore must keep the old certificate's subject and
subject alternative names unless ``ssl.allow.dn.changes`` / ``ssl.allow.san.changes`` (SslFactory.CertificateEntries).
"""

from __future__ import annotations

import hashlib
import ssl
from pathlib import Path
from typing import Any, Mapping

from broker.config.config_types import ConfigException
from broker.security.sasl_config import listener_value
from broker.security.tls import keystore_certificate, server_context
from cluster.dynamic_broker_config import SSL_RECONFIGURABLE

_FILES = ("ssl.keystore.location", "ssl.truststore.location")


def fingerprint(values: Mapping[str, Any], listener: str) -> tuple:
    """What a listener's SSLContext is built from: its store settings and the digest of its store files' bytes (a
    file that cannot be read counts as such: building the context says why)."""
    settings = tuple((k, None if (v := listener_value(values, listener, k)) is None else str(v))
                     for k in sorted(SSL_RECONFIGURABLE))
    digests = []
    for key in _FILES:
        location = listener_value(values, listener, key)
        try:
            digests.append(hashlib.sha256(Path(str(location)).read_bytes()).hexdigest() if location else None)
        except OSError:
            digests.append("unreadable")
    return settings + tuple(digests)


def _flag(values, listener: str, key: str) -> bool:
    return str(listener_value(values, listener, key) or "false").strip().lower() == "true"


def _sans(cert) -> set:
    from cryptography import x509

    try:
        return set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        return set()


def reconfigured_context(old_values: Mapping[str, Any], new_values: Mapping[str, Any], listener: str,
                         protocol: str) -> ssl.SSLContext:
    """The listener's new server SSLContext from ``new_values``, checked as SslFactory.createNewSslEngineFactory
    checks a dynamic update; ConfigException (Kafka's message) when refused."""
    try:
        context = server_context(new_values, listener, protocol)
        old_cert = keystore_certificate(old_values, listener)
        new_cert = keystore_certificate(new_values, listener)
        if not _flag(new_values, listener, "ssl.allow.dn.changes") and old_cert.subject != new_cert.subject:
            raise ConfigException(f"Keystore DistinguishedName does not match:  existing={{alias=kafka, "
                                  f"DN={old_cert.subject.rfc4514_string()}}}, new={{alias=kafka, "
                                  f"DN={new_cert.subject.rfc4514_string()}}}")
        if not _flag(new_values, listener, "ssl.allow.san.changes") and not _sans(old_cert) <= _sans(new_cert):
            raise ConfigException(f"Keystore SubjectAltNames do not match:  existing={{alias=kafka, "
                                  f"SAN={sorted(map(str, _sans(old_cert)))}}}, new={{alias=kafka, "
                                  f"SAN={sorted(map(str, _sans(new_cert)))}}}")
    except ConfigException as exc:
        raise ConfigException(f"Validation of dynamic config update of SSLFactory failed: {exc}") from None
    return context
