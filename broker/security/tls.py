"""TLS for SSL and SASL_SSL listeners (Kafka's SslFactory / DefaultSslEngineFactory), on the stdlib ``ssl`` module.

* **Keystore** (the listener's own certificate and key): ``ssl.keystore.type`` PEM (a file at
  ``ssl.keystore.location`` holding the key and its chain, or inline ``ssl.keystore.key`` +
  ``ssl.keystore.certificate.chain``; ``ssl.key.password`` for an encrypted key) or PKCS12 (``ssl.keystore.location``
  + ``ssl.keystore.password``, read with ``cryptography``). A JKS store (Kafka's default type) cannot be read here:
  refused at start, naming ``keytool -importkeystore``.
* **Truststore** (whose client certificates are accepted): PEM (file or inline ``ssl.truststore.certificates``) or
  PKCS12.
* ``ssl.client.auth`` none / requested / required; on a SASL_SSL listener only its listener-prefixed value counts
  (KIP-684). ``ssl.enabled.protocols`` sets the TLS versions; ``ssl.cipher.suites`` takes Kafka's (IANA) names of
  TLS 1.2 suites, translated to OpenSSL's; TLS 1.3 suites cannot be chosen in Python, so naming one is refused
  unless all are allowed.
* **Principal** of an SSL connection: the client certificate's subject as an RFC 2253 name through
  ``ssl.principal.mapping.rules`` (SslPrincipalMapper: ``DEFAULT`` and ``RULE:pattern/replacement/[LU]``), else
  ``User:ANONYMOUS``.

Every setting is looked up as Kafka does: ``listener.name.<l>.`` first, then the bare name.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from pathlib import Path
from typing import Any, Mapping

from broker.config.config_types import ConfigException
from broker.security.sasl_config import listener_value

TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"})
# IANA (Kafka's JSSE) names of the TLS 1.2 suites OpenSSL offers, to OpenSSL's names
TLS12_SUITES = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
}
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def _value(values: Mapping[str, Any], listener: str, key: str, prefixed_only: bool = False) -> Any:
    if prefixed_only:
        return values.get(f"listener.name.{listener.lower()}.{key}")
    return listener_value(values, listener, key)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


class RecordSSLObject(ssl.SSLObject):
    """An SSLObject whose read/write/pending are the C object's own methods.

    The TLS transports of uvloop and asyncio call ``read`` (and ``pending``) once per TLS record received, and
    librdkafka sends a record per buffer segment (~1-2 KiB with 1 KiB records): ssl.SSLObject's methods are Python
    wrappers that only forward their positional arguments, a Python frame per record (~4 % of the broker's
    event-loop time on SASL_SSL produce). Bound on the instance, the C methods answer the same calls (both
    transports pass the size, and the buffer, positionally), with the same results and errors."""

    @classmethod
    def _create(cls, *args, **kwargs):
        self = super()._create(*args, **kwargs)
        c = self._sslobj
        self.read, self.write, self.pending = c.read, c.write, c.pending
        return self


def _new_context(protocol: int) -> ssl.SSLContext:
    ctx = ssl.SSLContext(protocol)
    ctx.sslobject_class = RecordSSLObject  # what wrap_bio makes: the transports' per-connection TLS object
    return ctx


def server_context(values: Mapping[str, Any], listener: str, protocol: str) -> ssl.SSLContext:
    """The listener's server SSLContext; ConfigException for what cannot be served (never quoting a secret)."""
    ctx = _new_context(ssl.PROTOCOL_TLS_SERVER)
    _protocols(ctx, values, listener)
    _ciphers(ctx, values, listener)
    _load_keystore(ctx, values, listener)
    auth_raw = _value(values, listener, "ssl.client.auth", prefixed_only=protocol == "SASL_SSL")
    auth = str(auth_raw or "none").strip().lower()
    if auth not in CLIENT_AUTH:
        raise ConfigException(f"Invalid value {auth} for configuration ssl.client.auth: must be one of "
                              f"none, requested, required")
    ctx.verify_mode = CLIENT_AUTH[auth]
    if auth != "none":
        _load_truststore(ctx, values, listener)
    return ctx


def client_context(values: Mapping[str, Any], listener: str) -> ssl.SSLContext:
    """This node's client context toward ``listener`` on its peers (replication, the controller channel, Raft):
    the listener's truststore verifies the peer (its host name too, unless
    ``ssl.endpoint.identification.algorithm`` is empty), its keystore is this node's certificate."""
    ctx = _new_context(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(ctx, values, listener)
    _ciphers(ctx, values, listener)
    _load_truststore(ctx, values, listener)
    ctx.check_hostname = bool(_text(_value(values, listener, "ssl.endpoint.identification.algorithm")))
    ctx.verify_mode = ssl.CERT_REQUIRED
    if _value(values, listener, "ssl.keystore.location") or _value(values, listener, "ssl.keystore.key"):
        _load_keystore(ctx, values, listener)
    return ctx


def _protocols(ctx: ssl.SSLContext, values, listener: str) -> None:
    raw = _text(_value(values, listener, "ssl.enabled.protocols")) or "TLSv1.2,TLSv1.3"
    versions = [p.strip() for p in raw.split(",") if p.strip()]
    unknown = [v for v in versions if v not in TLS_VERSIONS]
    if unknown or not versions:
        raise ConfigException(f"Listener {listener}: ssl.enabled.protocols {unknown or raw} not served (TLSv1.2, "
                              f"TLSv1.3)")
    ordered = sorted(TLS_VERSIONS[v] for v in versions)
    ctx.minimum_version, ctx.maximum_version = ordered[0], ordered[-1]


def _ciphers(ctx: ssl.SSLContext, values, listener: str) -> None:
    raw = _text(_value(values, listener, "ssl.cipher.suites"))
    if not raw:
        return
    names = [n.strip() for n in raw.split(",") if n.strip()]
    tls13 = {n for n in names if n in TLS13_SUITES}
    if tls13 and tls13 != TLS13_SUITES:
        raise ConfigException(f"Listener {listener}: ssl.cipher.suites names only some TLS 1.3 suites; Python's ssl "
                              f"cannot choose TLS 1.3 suites (name all three, or none)")
    unknown = [n for n in names if n not in TLS13_SUITES and n not in TLS12_SUITES]
    if unknown:
        raise ConfigException(f"Listener {listener}: ssl.cipher.suites {unknown} not known here (TLS 1.2 suites "
                              f"with ECDHE/DHE and AES-GCM or ChaCha20 are)")
    openssl = [TLS12_SUITES[n] for n in names if n in TLS12_SUITES]
    if openssl:
        ctx.set_ciphers(":".join(openssl))


def _store_type(values, listener: str, kind: str) -> str:
    return str(_value(values, listener, f"ssl.{kind}.type") or "JKS").strip().upper()


def _refuse_jks(listener: str, kind: str, location: str | None) -> ConfigException:
    return ConfigException(
        f"Listener {listener}: ssl.{kind}.type JKS cannot be read by odradek: convert it with `keytool "
        f"-importkeystore -srckeystore {location or 'store.jks'} -destkeystore store.p12 -deststoretype PKCS12` "
        f"and set ssl.{kind}.type=PKCS12 (or use PEM)")


def _load_keystore(ctx: ssl.SSLContext, values, listener: str) -> None:
    pem, password = keystore_pem(values, listener)
    _load_pem_chain(ctx, pem, password, listener)


def keystore_pem(values, listener: str) -> tuple[bytes, str | None]:
    """The listener's keystore as PEM (key and chain) and the key's password; ConfigException when it cannot be
    read."""
    location = _text(_value(values, listener, "ssl.keystore.location"))
    inline_key = _text(_value(values, listener, "ssl.keystore.key"))
    inline_chain = _text(_value(values, listener, "ssl.keystore.certificate.chain"))
    kind = _store_type(values, listener, "keystore")
    key_password = _text(_value(values, listener, "ssl.key.password"))
    if inline_key or inline_chain:
        if kind not in ("PEM", "JKS") or not (inline_key and inline_chain):
            raise ConfigException(f"Listener {listener}: inline ssl.keystore.key and ssl.keystore.certificate.chain "
                                  f"go together, with ssl.keystore.type=PEM")
        return inline_chain.encode() + b"\n" + inline_key.encode(), key_password
    if not location:
        raise ConfigException(f"Listener {listener}: a TLS listener needs ssl.keystore.location (or the inline "
                              f"ssl.keystore.key and ssl.keystore.certificate.chain)")
    if kind == "JKS":
        raise _refuse_jks(listener, "keystore", location)
    try:
        data = Path(location).read_bytes()
    except OSError as exc:
        raise ConfigException(f"Listener {listener}: cannot read ssl.keystore.location {location}: "
                              f"{exc.strerror}") from None
    if kind == "PEM":
        return data, key_password
    if kind == "PKCS12":
        return _pkcs12_to_pem(data, _text(_value(values, listener, "ssl.keystore.password")), listener,
                              "keystore"), None
    raise ConfigException(f"Listener {listener}: ssl.keystore.type {kind} not served (PEM, PKCS12)")


def keystore_certificate(values, listener: str):
    """The listener's own certificate (the first of the keystore's chain), as a ``cryptography`` certificate: what
    a dynamic keystore change compares (SslFactory.CertificateEntries)."""
    from cryptography import x509

    pem, _ = keystore_pem(values, listener)
    try:
        return x509.load_pem_x509_certificates(pem)[0]
    except (ValueError, IndexError):
        raise ConfigException(f"Listener {listener}: the keystore holds no certificate") from None


def _load_pem_chain(ctx: ssl.SSLContext, pem: bytes, password: str | None, listener: str) -> None:
    """``load_cert_chain`` reads files only: the PEM goes through a private temporary file, removed at once."""
    fd, path = tempfile.mkstemp(prefix="odradek-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=password)
    except ssl.SSLError as exc:
        raise ConfigException(f"Listener {listener}: the keystore's key and certificate cannot be loaded "
                              f"({exc.reason or exc})") from None
    finally:
        os.unlink(path)


def _pkcs12_to_pem(data: bytes, password: str | None, listener: str, kind: str) -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError:
        raise ConfigException(f"Listener {listener}: the PKCS12 {kind} cannot be opened (wrong "
                              f"ssl.{kind}.password?)") from None
    out = b""
    if key is not None:
        out += key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())
    for c in ([cert] if cert is not None else []) + list(extra or []):
        out += c.public_bytes(serialization.Encoding.PEM)
    return out


def _load_truststore(ctx: ssl.SSLContext, values, listener: str) -> None:
    location = _text(_value(values, listener, "ssl.truststore.location"))
    inline = _text(_value(values, listener, "ssl.truststore.certificates"))
    kind = _store_type(values, listener, "truststore")
    if not inline and not location:
        raise ConfigException(f"Listener {listener}: verifying peers' certificates needs "
                              f"ssl.truststore.location (or inline ssl.truststore.certificates)")
    if not inline and kind == "JKS":
        raise _refuse_jks(listener, "truststore", location)
    if not inline and kind not in ("PEM", "PKCS12"):
        raise ConfigException(f"Listener {listener}: ssl.truststore.type {kind} not served (PEM, PKCS12)")
    try:
        if inline:
            ctx.load_verify_locations(cadata=inline)
            return
        data = Path(location).read_bytes()
        if kind == "PEM":
            ctx.load_verify_locations(cadata=data.decode())
        elif kind == "PKCS12":
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.serialization import pkcs12

            password = _text(_value(values, listener, "ssl.truststore.password"))
            store = pkcs12.load_pkcs12(data, password.encode() if password else None)
            certs = ([store.cert] if store.cert else []) + list(store.additional_certs)
            ctx.load_verify_locations(cadata="".join(
                c.certificate.public_bytes(serialization.Encoding.PEM).decode() for c in certs))
    except (OSError, ValueError, ssl.SSLError) as exc:
        raise ConfigException(f"Listener {listener}: the truststore cannot be loaded ({type(exc).__name__})") \
            from None


# ---- principals ----------------------------------------------------------------------------------------------

_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


class PrincipalMapper:
    """Kafka's SslPrincipalMapper over ``ssl.principal.mapping.rules``."""

    def __init__(self, rules: str | None) -> None:
        self.rules: list[tuple[re.Pattern, str, str] | None] = []  # None: DEFAULT
        text = (rules or "DEFAULT").strip()
        for m in _RULE_SPLITTER.finditer(text):
            rule = m.group(1)
            if not rule:
                continue
            parsed = _RULE_PARSER.match(rule)
            if parsed is None or parsed.end() != len(rule):
                raise ConfigException(f"Invalid rule: {rule}")
            if parsed.group(1):
                self.rules.append(None)
            elif parsed.group(2) is not None:
                self.rules.append((re.compile(parsed.group(2)), parsed.group(3), parsed.group(4)))
            else:
                raise ConfigException(f"Invalid rule: {rule}")

    def name(self, dn: str) -> str:
        for rule in self.rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            if pattern.fullmatch(dn):
                result = pattern.sub(re.sub(r"\$(\d+)", r"\\\1", replacement), dn)
                return result.lower() if case == "L" else result.upper() if case == "U" else result
        raise ValueError(f"No rules apply to {dn}")


def certificate_dn(der: bytes) -> str:
    """The subject of a DER certificate as Java's X500Principal.getName() (RFC 2253) writes it."""
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def ssl_principal(ssl_object, mapper: PrincipalMapper) -> str:
    """``User:<mapped DN>`` of the client's certificate, else ``User:ANONYMOUS`` (DefaultKafkaPrincipalBuilder)."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return "User:ANONYMOUS"
    return f"User:{mapper.name(certificate_dn(der))}"
