"""protocol/sasl_server.py: SaslServerAuthenticator's states as Kafka's SaslServerAuthenticatorTest and
SaslAuthenticatorTest check them, frame by frame: ApiVersions then SaslHandshake, SCRAM over SaslAuthenticate and
PLAIN as raw v0 tokens, what closes and what answers, re-authentication keeping mechanism and principal."""

from __future__ import annotations

import base64
import struct

import pytest

from protocol.errors import ErrorCode
from protocol.generated.api_keys import APIS
from protocol.generated.messages import (
    ApiVersionsRequest, MetadataRequest, RequestHeader, SaslAuthenticateRequest, SaslHandshakeRequest,
)
from protocol.sasl_plain import PlainServer
from protocol.sasl_server import SaslServerAuthenticator
from protocol.scram import ScramMechanism, ScramServer, client_proof, credential, salted_password

SHA256 = ScramMechanism.SCRAM_SHA_256
SALT = b"saltsaltsaltsalt"
SCRAM_USERS = {"alice": credential(SHA256, "alice-secret", SALT, 4096),
               "bob": credential(SHA256, "bob-secret", SALT, 4096)}
PLAIN_USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def frame(api_key: int, version: int, body, corr: int = 1) -> bytes:
    spec = APIS[api_key]
    return RequestHeader(api_key, version, corr, "test").encode(spec.request_header_version(version)) + \
        body.encode(version)


def response(step, api_key: int, version: int):
    (data,) = step.send
    data = bytes(data)
    spec = APIS[api_key]
    skip = 8 + (1 if spec.response_header_version(version) == 1 else 0)
    return spec.response.decode(data[skip:], version)


def authenticator(reauth_ms: int = 0, mechanisms=("SCRAM-SHA-256", "PLAIN")) -> SaslServerAuthenticator:
    def new(name):
        if name == "PLAIN":
            return PlainServer(PLAIN_USERS.get)
        return ScramServer(ScramMechanism.for_name(name), SCRAM_USERS.get, "serverNonce")
    return SaslServerAuthenticator(list(mechanisms), new, lambda mechanism: reauth_ms)


def scram_messages(user: str, password: str):
    """(client-first, a function from server-first to client-final) as a SCRAM client sends them."""
    bare = f"n={user},r=clientNonce"
    first = f"n,,{bare}".encode()

    def final(server_first: bytes) -> bytes:
        without_proof = "c=biws,r=clientNonceserverNonce"
        auth = f"{bare},{server_first.decode()},{without_proof}".encode()
        proof = client_proof(SHA256, salted_password(SHA256, password, SALT, 4096), auth)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    return first, final


def scram_login(a: SaslServerAuthenticator, user="alice", password="alice-secret", now_ms=0, handshake=True):
    if handshake:
        step = a.receive(frame(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256")), now_ms)
        assert response(step, 17, 1).error_code == 0
    first, final = scram_messages(user, password)
    step = a.receive(frame(36, 2, SaslAuthenticateRequest(auth_bytes=first), 2), now_ms)
    server_first = response(step, 36, 2).auth_bytes
    return a.receive(frame(36, 2, SaslAuthenticateRequest(auth_bytes=final(server_first)), 3), now_ms)


def test_api_versions_then_handshake_then_scram_authenticates_and_names_the_principal():
    a = authenticator(reauth_ms=3000)
    step = a.receive(frame(18, 3, ApiVersionsRequest(client_software_name="x", client_software_version="1")), 0)
    assert step.dispatch is not None and step.dispatch.api_key == 18 and not step.send
    step = a.receive(frame(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256")), 0)
    assert response(step, 17, 1).mechanisms == ["SCRAM-SHA-256", "PLAIN"]
    step = scram_login(a, now_ms=1000, handshake=False)
    answer = response(step, 36, 2)
    assert step.authenticated and answer.error_code == 0 and answer.auth_bytes.startswith(b"v=")
    assert answer.session_lifetime_ms == 3000 and a.session_expires_ms == 4000
    assert a.principal == "User:alice" and a.client_supports_reauthentication


def test_a_wrong_password_fails_with_sasl_authentication_failed_and_the_generic_message():
    a = authenticator()
    step = scram_login(a, password="guess")
    answer = response(step, 36, 2)
    assert step.failed and not step.authenticated and a.state == "FAILED"
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer.error_message == ("Authentication failed during authentication due to invalid credentials with "
                                    "SASL mechanism SCRAM-SHA-256")


def test_plain_over_handshake_v0_uses_raw_tokens():
    a = authenticator()
    step = a.receive(frame(17, 0, SaslHandshakeRequest(mechanism="PLAIN")), 0)
    assert response(step, 17, 0).error_code == 0
    step = a.receive(b"\0bob\0bob-secret", 0)
    assert step.authenticated and step.send == [struct.pack(">i", 0)] and a.principal == "User:bob"


def test_plain_over_handshake_v0_with_a_wrong_password_fails_without_a_response():
    a = authenticator()
    a.receive(frame(17, 0, SaslHandshakeRequest(mechanism="PLAIN")), 0)
    step = a.receive(b"\0bob\0nope", 0)
    assert step.failed and not step.send


def test_an_unknown_mechanism_is_answered_with_the_enabled_list_then_closed():
    step = authenticator().receive(frame(17, 1, SaslHandshakeRequest(mechanism="GSSAPI")), 0)
    answer = response(step, 17, 1)
    assert step.failed and answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert answer.mechanisms == ["SCRAM-SHA-256", "PLAIN"]


@pytest.mark.parametrize("frames", [
    [frame(3, 12, MetadataRequest(topics=None))],  # a request before the handshake
    [frame(18, 3, ApiVersionsRequest(client_software_name="x", client_software_version="1")),
     frame(18, 3, ApiVersionsRequest(client_software_name="x", client_software_version="1"))],  # two ApiVersions
    [b"\x60\x82\x01\x00garbage"],  # not a Kafka request: a GSSAPI token
    [frame(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))[:2] + b"\x00\x02" +
     frame(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))[4:]],  # an unknown handshake version
])
def test_anything_but_one_api_versions_and_a_handshake_closes_before_authentication(frames):
    a = authenticator()
    steps = [a.receive(f, 0) for f in frames]
    assert steps[-1].close and not steps[-1].send and a.state == "FAILED"


def test_a_request_between_handshake_and_authenticate_gets_illegal_sasl_state_when_it_can_carry_it():
    from protocol.generated.messages import FindCoordinatorRequest
    a = authenticator()
    a.receive(frame(17, 1, SaslHandshakeRequest(mechanism="PLAIN")), 0)
    step = a.receive(frame(10, 0, FindCoordinatorRequest(key="g")), 0)
    assert step.failed and response(step, 10, 0).error_code == ErrorCode.ILLEGAL_SASL_STATE
    b = authenticator()
    b.receive(frame(17, 1, SaslHandshakeRequest(mechanism="PLAIN")), 0)
    step = b.receive(frame(3, 12, MetadataRequest(topics=None)), 0)  # no top-level error code: just closed
    assert step.close and not step.send


def test_a_truncated_or_garbage_authenticate_frame_closes():
    a = authenticator()
    a.receive(frame(17, 1, SaslHandshakeRequest(mechanism="PLAIN")), 0)
    assert a.receive(frame(36, 2, SaslAuthenticateRequest(auth_bytes=b"\0a\0b"))[:-3], 0).close


def test_reauthentication_keeps_the_principal_and_a_new_lifetime():
    a = authenticator(reauth_ms=3000)
    assert scram_login(a, now_ms=0).authenticated
    handshake = frame(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 7)
    from protocol.connection import parse_request
    step = a.begin_reauthentication(parse_request(handshake), 2500)
    assert response(step, 17, 1).error_code == 0 and a.authenticating
    step = scram_login(a, now_ms=2600, handshake=False)
    assert step.authenticated and a.principal == "User:alice" and a.session_expires_ms == 5600


def test_reauthentication_as_another_user_fails():
    from protocol.connection import parse_request
    a = authenticator(reauth_ms=3000)
    scram_login(a)
    a.begin_reauthentication(parse_request(frame(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))), 100)
    step = scram_login(a, user="bob", password="bob-secret", handshake=False)
    answer = response(step, 36, 2)
    assert step.failed and answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer.error_message == "Cannot change principals during re-authentication from User.alice: User.bob"


def test_reauthentication_with_another_mechanism_fails_on_the_next_frame():
    from protocol.connection import parse_request
    a = authenticator(reauth_ms=3000)
    scram_login(a)
    step = a.begin_reauthentication(parse_request(frame(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))), 100)
    assert response(step, 17, 1).error_code == 0
    assert a.receive(frame(36, 2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret")), 100).close
