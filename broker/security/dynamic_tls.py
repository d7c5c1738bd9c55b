"""TLS stores changed at run time by dynamic BROKER configs (Kafka's SslFactory.reconfigure through
DynamicBrokerConfig): the listener settings in force are the static config overlaid with this broker's dynamic
ones (cluster/dynamic_broker_config.py); a listener is rebuilt when its store settings or its store files' bytes
changed (DefaultSslEngineFactory.shouldBeRebuilt); a new keystore must keep the old certificate's subject and
subject alternative names unless ``ssl.allow.dn.changes`` / ``ssl.allow.san.changes`` (SslFactory.CertificateEntries);
on the inter-broker listener the old and the new stores must complete a TLS handshake with each other both ways
(SslEngineValidator: peers still on the old stores keep replicating), so a CA is rotated through a truststore that
holds both.
"""

from __future__ import annotations

import hashlib
import ssl
from pathlib import Path
from typing import Any, Mapping

from broker.config.config_types import ConfigException
from broker.security.sasl_config import listener_value
from broker.security.tls import client_context, keystore_certificate, server_context
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


def _handshake(server_values, client_values, listener: str, protocol: str) -> None:
    """A TLS handshake in memory between a server with ``server_values``' stores and a client with
    ``client_values``' (no host name check, as SslEngineValidator); ssl.SSLError when it fails."""
    server_ctx = server_context(server_values, listener, protocol)
    client_ctx = client_context(client_values, listener)
    client_ctx.check_hostname = False
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    client = client_ctx.wrap_bio(c_in, c_out, server_side=False)
    pending = {server, client}
    for _ in range(16):  # a TLS 1.2 or 1.3 handshake takes 2-3 flights each way
        for side in list(pending):
            try:
                side.do_handshake()
                pending.discard(side)
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if not pending:  # the server is done only once it has checked the client's certificate (TLS 1.3 too)
            return
    raise ssl.SSLError("the handshake did not finish")


def reconfigured_context(old_values: Mapping[str, Any], new_values: Mapping[str, Any], listener: str,
                         protocol: str, inter_broker: bool = False, checks: bool = True) -> ssl.SSLContext:
    """The listener's new server SSLContext from ``new_values``, checked (``checks``) as
    SslFactory.createNewSslEngineFactory checks a dynamic update; ConfigException (Kafka's message) when refused."""
    try:
        context = server_context(new_values, listener, protocol)
        if not checks:
            return context
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
        if inter_broker:
            try:
                _handshake(old_values, new_values, listener, protocol)
                _handshake(new_values, old_values, listener, protocol)
            except ssl.SSLError as exc:
                reason = getattr(exc, "reason", None) or exc
                raise ConfigException(f"the old and the new stores of inter-broker listener {listener} cannot "
                                      f"complete a TLS handshake with each other ({reason})") from None
    except ConfigException as exc:
        raise ConfigException(f"Validation of dynamic config update of SSLFactory failed: {exc}") from None
    return context
