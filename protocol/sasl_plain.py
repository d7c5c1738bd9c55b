"""SASL/PLAIN (RFC 4616) as Kafka's server runs it (PlainSaslServer, PlainServerCallbackHandler), sans-IO.

The client's one message is ``authzid NUL user NUL password``; users and passwords come from the listener's JAAS
``user_<name>="<password>"`` options. The password is compared in constant time; an unknown user and a wrong
password get the same answer.
"""

from __future__ import annotations

import hmac
from typing import Callable

from protocol.scram import GENERIC_FAILURE, SaslFailure

INVALID = "Authentication failed: Invalid username or password"


class PlainServer:
    """One SASL/PLAIN exchange: a single client message, an empty reply when the password is right."""

    mechanism_name = "PLAIN"

    def __init__(self, password_of: Callable[[str], str | None]) -> None:
        self._password_of = password_of
        self.authorization_id: str | None = None
        self.state = "RECEIVE_RESPONSE"

    @property
    def complete(self) -> bool:
        return self.state == "COMPLETE"

    def evaluate(self, message: bytes) -> bytes:
        if self.state != "RECEIVE_RESPONSE":
            raise SaslFailure(f"Unexpected challenge in Sasl server state {self.state}",
                              f"Unexpected challenge in Sasl server state {self.state}")
        self.state = "FAILED"
        try:
            text = bytes(message).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure("PLAIN response is not UTF-8", GENERIC_FAILURE.format("PLAIN")) from None
        tokens = text.split("\0", 3)
        if len(tokens) != 3:
            raise SaslFailure("bad token count", f"Invalid SASL/PLAIN response: expected 3 tokens, got "
                                                 f"{min(len(tokens), 4)}")
        authzid, user, password = tokens
        if not user:
            raise SaslFailure("Authentication failed: username not specified", GENERIC_FAILURE.format("PLAIN"))
        if not password:
            raise SaslFailure("Authentication failed: password not specified", GENERIC_FAILURE.format("PLAIN"))
        expected = self._password_of(user)
        # compare against something of the same kind even for an unknown user, so timing tells nothing
        ok = hmac.compare_digest(password.encode(), (expected if expected is not None else "\0" + password).encode())
        if expected is None or not ok:
            raise SaslFailure(INVALID, INVALID)
        if authzid and authzid != user:
            raise SaslFailure("authorization id differs", "Authentication failed: Client requested an authorization "
                                                          "id that is different from username")
        self.authorization_id = user
        self.state = "COMPLETE"
        return b""
