"""The server side of SASL on a Kafka connection (Kafka's SaslServerAuthenticator), sans-IO.

Frames go in one at a time (``receive``) until the connection is authenticated; each returns a ``Step``: bytes to
send, a request to hand to the ordinary dispatcher (ApiVersions), and whether the connection is now authenticated,
failed (send, then close after ``connection.failed.authentication.delay.ms``) or to be closed at once.

* Before authentication: at most one ApiVersions, then SaslHandshake v0-1; any other request closes the connection
  ("Unexpected Kafka request of type ... during SASL handshake"). A first frame that is not a Kafka request would be
  a GSSAPI token: GSSAPI is not served, so it closes too.
* An unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list, then a close.
* After SaslHandshake v1, only SaslAuthenticate v0-2: anything else is answered ILLEGAL_SASL_STATE (when its
  response has a top-level error code) and closed. After v0, tokens are raw size-prefixed bytes.
* A failed exchange: SASL_AUTHENTICATION_FAILED with the mechanism's client message, then a close.
* Re-authentication (KIP-368): ``begin_reauthentication`` with the SaslHandshake an authenticated connection sent;
  the mechanism and the principal must stay the same. ``session_lifetime_ms`` (SaslAuthenticate v1+) is
  ``connections.max.reauth.ms``; the caller closes a connection whose session expired when it sends anything but
  SaslHandshake.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Callable, Protocol

from protocol.connection import Request, encode_response, parse_request
from protocol.errors import DecodeError, ErrorCode, ProtocolError
from protocol.generated.messages import (
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
)
from protocol.scram import SaslFailure

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
HANDSHAKE_VERSIONS, AUTHENTICATE_VERSIONS = (0, 1), (0, 2)
SASL_SERVER_MAX_RECEIVE_SIZE = 524288  # BrokerSecurityConfigs.DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE


class Mechanism(Protocol):
    complete: bool
    authorization_id: str | None

    def evaluate(self, message: bytes) -> bytes: ...


@dataclasses.dataclass
class Step:
    """What the connection does with one frame's outcome."""
    send: list = dataclasses.field(default_factory=list)  # response parts, in order
    dispatch: Request | None = None  # a request the ordinary dispatcher answers (ApiVersions)
    authenticated: bool = False  # the exchange completed: ``principal`` is set
    failed: bool = False  # send ``send``, then close after the failed-authentication delay
    close: bool = False  # close now (nothing to send)
    reason: str = ""


class SaslServerAuthenticator:
    """One connection's SASL state (INITIAL_REQUEST ... COMPLETE / FAILED)."""

    def __init__(self, enabled_mechanisms: list[str], new_mechanism: Callable[[str], Mechanism],
                 reauth_ms: Callable[[str], int]) -> None:
        self.enabled = list(enabled_mechanisms)
        self._new_mechanism = new_mechanism
        self._reauth_ms = reauth_ms
        self.state = "INITIAL_REQUEST"
        self.mechanism_name: str | None = None
        self.principal: str | None = None
        self.session_expires_ms: int | None = None
        self.client_supports_reauthentication = False
        self._kafka_headers = True
        self._server: Mechanism | None = None
        self._previous_principal: str | None = None

    @property
    def authenticating(self) -> bool:
        return self.state not in ("COMPLETE", "FAILED")

    # ---- frames ----------------------------------------------------------------------------------------------

    def receive(self, frame: bytes | memoryview, now_ms: int) -> Step:
        try:
            if self.state in ("INITIAL_REQUEST", "HANDSHAKE_OR_VERSIONS_REQUEST", "HANDSHAKE_REQUEST",
                              "REAUTH_PROCESS_HANDSHAKE"):
                return self._kafka_request(frame)
            if self.state == "REAUTH_BAD_MECHANISM":
                return self._fail_close(self._bad_mechanism)
            if self.state == "AUTHENTICATE":
                return self._token(frame, now_ms)
            return self._fail_close(f"frame in SASL state {self.state}")
        except (DecodeError, ProtocolError, ValueError, struct.error) as exc:
            return self._fail_close(f"malformed SASL frame: {exc}")

    def begin_reauthentication(self, handshake: Request, now_ms: int) -> Step:
        """An authenticated connection's SaslHandshake (KafkaChannel.maybeBeginServerReauthentication)."""
        self._previous_principal = self.principal
        self.state = "REAUTH_PROCESS_HANDSHAKE"
        return self._handshake(handshake)

    def _kafka_request(self, frame) -> Step:
        try:
            req = parse_request(bytes(frame))
        except DecodeError:
            if self.state == "INITIAL_REQUEST":
                return self._fail_close("the first SASL packet is not a Kafka request (GSSAPI is not served)")
            raise
        if self.state == "INITIAL_REQUEST":
            self.state = "HANDSHAKE_OR_VERSIONS_REQUEST"
        if req.api_key == API_VERSIONS and self.state == "HANDSHAKE_OR_VERSIONS_REQUEST":
            self.state = "HANDSHAKE_REQUEST"
            return Step(dispatch=req)
        if req.api_key != SASL_HANDSHAKE:
            return self._fail_close(f"Unexpected Kafka request of type {req.api_key} during SASL handshake.")
        return self._handshake(req)

    def _handshake(self, req: Request) -> Step:
        if not HANDSHAKE_VERSIONS[0] <= req.api_version <= HANDSHAKE_VERSIONS[1]:
            return self._fail_close(f"SaslHandshake v{req.api_version} is not supported")
        body: SaslHandshakeRequest = req.decode_body()
        mechanism = body.mechanism
        if mechanism not in self.enabled:
            self.state = "FAILED"
            return Step(send=encode_response(req, SaslHandshakeResponse(
                error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=list(self.enabled))),
                failed=True, reason=f"Unsupported SASL mechanism {mechanism}")
        reauthenticating = self.state == "REAUTH_PROCESS_HANDSHAKE"
        self._kafka_headers = req.api_version >= 1
        response = encode_response(req, SaslHandshakeResponse(error_code=0, mechanisms=list(self.enabled)))
        if reauthenticating and mechanism != self.mechanism_name:
            self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                   f"re-authentication of mechanism '{self.mechanism_name}'")
            self.state = "REAUTH_BAD_MECHANISM"
            return Step(send=response)
        self.mechanism_name = mechanism
        self._server = self._new_mechanism(mechanism)
        self.state = "AUTHENTICATE"
        return Step(send=response)

    def _token(self, frame, now_ms: int) -> Step:
        if not self._kafka_headers:
            try:
                token = self._server.evaluate(bytes(frame))
            except SaslFailure as exc:  # no Kafka header: nothing can carry an error; closed after the delay
                self.state = "FAILED"
                return Step(failed=True, reason=str(exc))
            done = self._finish(now_ms) if self._server.complete else None
            if isinstance(done, str):
                self.state = "FAILED"
                return Step(failed=True, reason=done)
            return Step(send=[struct.pack(">i", len(token)) + token], authenticated=self._server.complete)
        req = parse_request(bytes(frame))
        if req.api_key != SASL_AUTHENTICATE:
            return self._illegal_state(req)
        if not AUTHENTICATE_VERSIONS[0] <= req.api_version <= AUTHENTICATE_VERSIONS[1]:
            return self._fail_close(f"Version {req.api_version} is not supported for apiKey SASL_AUTHENTICATE")
        if req.api_version > 0:
            self.client_supports_reauthentication = True
        body: SaslAuthenticateRequest = req.decode_body()
        try:
            token = self._server.evaluate(bytes(body.auth_bytes or b""))
        except SaslFailure as exc:
            self.state = "FAILED"
            return Step(send=encode_response(req, SaslAuthenticateResponse(
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=exc.client_message)),
                failed=True, reason=str(exc))
        lifetime = 0
        if self._server.complete:
            done = self._finish(now_ms)
            if isinstance(done, str):
                self.state = "FAILED"
                return Step(send=encode_response(req, SaslAuthenticateResponse(
                    error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=done)), failed=True, reason=done)
            lifetime = done
        return Step(send=encode_response(req, SaslAuthenticateResponse(
            error_code=0, auth_bytes=token, session_lifetime_ms=lifetime)), authenticated=self._server.complete)

    def _finish(self, now_ms: int) -> int | str:
        """The exchange completed: the principal (unchanged on re-authentication), the session's end."""
        principal = f"User:{self._server.authorization_id}"
        if self._previous_principal is not None and principal != self._previous_principal:
            p_type, _, p_name = self._previous_principal.partition(":")
            return (f"Cannot change principals during re-authentication from {p_type}.{p_name}: "
                    f"User.{self._server.authorization_id}")
        self.principal = principal
        self._previous_principal = None
        self.state = "COMPLETE"
        lifetime = max(int(self._reauth_ms(self.mechanism_name or "")), 0)
        self.session_expires_ms = now_ms + lifetime if lifetime > 0 else None
        return lifetime

    def _illegal_state(self, req: Request) -> Step:
        """Kafka answers the request's own error response with ILLEGAL_SASL_STATE, then closes; a response
        without a top-level error code cannot carry it, so that connection is closed without one."""
        self.state = "FAILED"
        reason = f"Unexpected Kafka request of type {req.api_key} during SASL authentication."
        spec = req.spec
        if spec is not None and req.version_known:
            response = spec.response()
            if "error_code" in getattr(response, "__slots__", ()):
                response.error_code = ErrorCode.ILLEGAL_SASL_STATE
                # the field may not exist at this version (Metadata's top-level error code is v13+)
                if spec.response.decode(response.encode(req.api_version), req.api_version).error_code:
                    return Step(send=encode_response(req, response), failed=True, reason=reason)
        return Step(close=True, reason=reason)

    def _fail_close(self, reason: str) -> Step:
        self.state = "FAILED"
        return Step(close=True, reason=reason)
