"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's server runs them (ScramSaslServer,
ScramMessages, ScramFormatter), sans-IO: ``ScramServer.evaluate`` takes a client message and returns the reply.

The server keeps only what a ``UserScramCredentialRecord`` holds (salt, stored key, server key, iterations), never
a password. Failures raise ``SaslFailure``: ``client_message`` is what the client may be told. An unknown user and
a wrong proof end with the same message, so a client cannot learn which names exist; the server nonce comes from
the caller (``secrets`` in the broker), the proof is compared in constant time (``hmac.compare_digest``).

Stricter than Kafka, as RFC 5802 asks: the channel binding ``c=`` must echo the GS2 header (``n,,`` or
``n,a=<user>,``), and an extension other than ``tokenauth`` is refused (Kafka ignores unknown ones);
``tokenauth=true`` is refused too while delegation tokens are not built.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass
from enum import IntEnum
from typing import Callable


class ScramMechanism(IntEnum):
    """Codes as in UserScramCredentialRecord and AlterUserScramCredentials (ScramMechanism.java)."""
    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @classmethod
    def for_name(cls, name: str) -> ScramMechanism | None:
        return {m.mechanism_name: m for m in (cls.SCRAM_SHA_256, cls.SCRAM_SHA_512)}.get(name)


MIN_ITERATIONS = 4096  # ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # ScramMechanism.maxIterations
SUPPORTED_EXTENSIONS = frozenset({"tokenauth"})


class SaslFailure(Exception):
    """An authentication that failed; ``client_message`` is the SaslAuthenticate error message."""

    def __init__(self, detail: str, client_message: str) -> None:
        super().__init__(detail)
        self.client_message = client_message


@dataclass(frozen=True, slots=True)
class Credential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


# ---- ScramFormatter ---------------------------------------------------------------------------------------------

def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i): PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def _hmac(mechanism: ScramMechanism, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, mechanism.hash_name).digest()


def _hash(mechanism: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(mechanism.hash_name, data).digest()


def credential_from_salted_password(mechanism: ScramMechanism, salted: bytes, salt: bytes,
                                    iterations: int) -> Credential:
    """What the server stores (ScramCredentialUtils / ScramControlManager from AlterUserScramCredentials)."""
    client_key = _hmac(mechanism, salted, b"Client Key")
    return Credential(salt, _hash(mechanism, client_key), _hmac(mechanism, salted, b"Server Key"), iterations)


def credential(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> Credential:
    return credential_from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations), salt,
                                           iterations)


def sasl_name(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def username(name: str) -> str:
    """ScramFormatter.username: ``=2C`` and ``=3D`` decoded; any other ``=`` is invalid."""
    decoded = name.replace("=2C", ",")
    if "=" in decoded.replace("=3D", ""):
        raise ValueError(f"Invalid username: {name}")
    return decoded.replace("=3D", "=")


def client_proof(mechanism: ScramMechanism, salted: bytes, auth_message: bytes) -> bytes:
    """The client's side (ScramFormatter.clientProof): for tests and the broker's own client."""
    client_key = _hmac(mechanism, salted, b"Client Key")
    signature = _hmac(mechanism, _hash(mechanism, client_key), auth_message)
    return bytes(a ^ b for a, b in zip(client_key, signature))


def server_signature(mechanism: ScramMechanism, server_key: bytes, auth_message: bytes) -> bytes:
    return _hmac(mechanism, server_key, auth_message)


# ---- ScramMessages ----------------------------------------------------------------------------------------------

_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"  # [\x01-\x7F] without '=' and ','
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # [\x21-\x7E] without ','
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_B64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE})(?:{_EXTENSIONS})),p=(?P<proof>{_B64})")

GENERIC_FAILURE = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


class ScramServer:
    """One SCRAM exchange on the server: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: ScramMechanism, lookup: Callable[[str], Credential | None],
                 server_nonce: str) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = server_nonce
        self.state = "RECEIVE_CLIENT_FIRST_MESSAGE"
        self.authorization_id: str | None = None
        self._credential: Credential | None = None
        self._gs2 = self._client_first_bare = self._server_first = self._nonce = ""

    @property
    def complete(self) -> bool:
        return self.state == "COMPLETE"

    def evaluate(self, message: bytes) -> bytes:
        try:
            if self.state == "RECEIVE_CLIENT_FIRST_MESSAGE":
                return self._client_first(message)
            if self.state == "RECEIVE_CLIENT_FINAL_MESSAGE":
                return self._client_final(message)
            raise SaslFailure(f"Unexpected challenge in Sasl server state {self.state}",
                              f"Unexpected challenge in Sasl server state {self.state}")
        except SaslFailure:
            self._credential = None
            self.state = "FAILED"
            raise

    def _fail(self, detail: str) -> SaslFailure:
        return SaslFailure(detail, GENERIC_FAILURE.format(self.mechanism.mechanism_name))

    def _client_first(self, message: bytes) -> bytes:
        text = _text(message)
        m = _CLIENT_FIRST.fullmatch(text) if text is not None else None
        if m is None:
            raise self._fail(f"Invalid SCRAM client first message format: {text!r}")
        extensions = dict(e.split("=", 1) for e in m["extensions"].split(",")[1:])
        unknown = set(extensions) - SUPPORTED_EXTENSIONS
        if unknown:
            raise self._fail(f"Unsupported SCRAM extensions {sorted(unknown)}")
        if extensions.get("tokenauth", "false").lower() == "true":
            raise self._fail("Token authentication is not enabled (delegation tokens are not built)")
        try:
            user = username(m["saslname"])
        except ValueError as exc:
            raise self._fail(str(exc)) from None
        authzid = m["authzid"] or ""
        if authzid and authzid != user:
            raise SaslFailure("authorization id differs from the user name",
                              "Authentication failed: Client requested an authorization id that is different from "
                              "username")
        found = self._lookup(user)
        if found is None:
            raise self._fail("Authentication failed: Invalid user credentials")
        if found.iterations < MIN_ITERATIONS:
            raise self._fail(f"Iterations {found.iterations} is less than the minimum {MIN_ITERATIONS} for "
                             f"{self.mechanism.mechanism_name}")
        self._credential, self.authorization_id = found, user
        self._gs2, self._client_first_bare = m["gs2"], m["bare"]
        self._nonce = m["nonce"] + self._server_nonce
        self._server_first = (f"r={self._nonce},s={base64.b64encode(found.salt).decode()},"
                              f"i={found.iterations}")
        self.state = "RECEIVE_CLIENT_FINAL_MESSAGE"
        return self._server_first.encode()

    def _client_final(self, message: bytes) -> bytes:
        text = _text(message)
        m = _CLIENT_FINAL.fullmatch(text) if text is not None else None
        if m is None:
            raise self._fail(f"Invalid SCRAM client final message format: {text!r}")
        # Kafka's rule: the nonce ends with the server's (client + server) nonce; librdkafka before 2.x sends the
        # client nonce in front of it once more, and Kafka's brokers accept that
        if not m["nonce"].endswith(self._nonce):
            raise self._fail("Invalid client nonce in the final client message.")
        try:
            channel = base64.b64decode(m["channel"], validate=True)
            proof = base64.b64decode(m["proof"], validate=True)
        except (binascii.Error, ValueError):
            raise self._fail("Invalid base64 in the final client message") from None
        if channel != self._gs2.encode():
            raise self._fail("The channel binding does not echo the GS2 header")
        cred = self._credential
        auth_message = f"{self._client_first_bare},{self._server_first},{m['without_proof']}".encode()
        signature = _hmac(self.mechanism, cred.stored_key, auth_message)
        if len(proof) != len(signature) or not hmac.compare_digest(
                _hash(self.mechanism, bytes(a ^ b for a, b in zip(signature, proof))), cred.stored_key):
            raise self._fail("Invalid client credentials")
        self._credential = None
        self.state = "COMPLETE"
        return b"v=" + base64.b64encode(server_signature(self.mechanism, cred.server_key, auth_message))


def _text(message: bytes) -> str | None:
    try:
        return bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        return None
