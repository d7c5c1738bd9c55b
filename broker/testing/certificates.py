"""Certificates for test clusters' TLS listeners (``EmbeddedCluster(security=...)``, the TLS tests), made with
``cryptography``: a CA, a server certificate for 127.0.0.1 (SAN IP and localhost), client certificates, and a
second CA that nobody trusts. Written as PEM and PKCS12 files (0600) under a directory, as a keystore and truststore
would be."""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

STORE_PASSWORD = "store-secret"


def _name(cn: str, org: str = "odradek-tests") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path: Path, data: bytes) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


@dataclasses.dataclass
class Issued:
    """One key and certificate as files: ``pem`` (key + chain), ``cert`` (certificate only), ``key``, ``p12``."""
    pem: Path
    cert: Path
    key: Path
    p12: Path
    dn: str


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "test-ca") -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=2))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.pem = _write(self.dir / f"{name}.pem", self.cert.public_bytes(serialization.Encoding.PEM))
        self.p12 = _write(self.dir / f"{name}-truststore.p12", pkcs12.serialize_key_and_certificates(
            name.encode(), None, self.cert, None,
            serialization.BestAvailableEncryption(STORE_PASSWORD.encode())))

    def issue(self, cn: str, server: bool = False) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(self.cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1)))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        return Issued(
            pem=_write(self.dir / f"{cn}.pem", key_pem + cert_pem),
            cert=_write(self.dir / f"{cn}-cert.pem", cert_pem),
            key=_write(self.dir / f"{cn}-key.pem", key_pem),
            p12=_write(self.dir / f"{cn}.p12", pkcs12.serialize_key_and_certificates(
                cn.encode(), key, cert, [self.cert], serialization.BestAvailableEncryption(STORE_PASSWORD.encode()))),
            dn=cert.subject.rfc4514_string())
