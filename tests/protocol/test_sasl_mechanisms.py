"""protocol/scram.py and protocol/sasl_plain.py: RFC 7677's SCRAM-SHA-256 exchange byte for byte, SHA-512 round
trips, and what Kafka's ScramSaslServerTest, ScramMessagesTest, ScramFormatterTest and PlainSaslServerTest check:
bad nonces, bad base64, channel binding, replays, authorization ids, one message for unknown user and bad proof."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.sasl_plain import INVALID, PlainServer
from protocol.scram import (
    GENERIC_FAILURE, Credential, SaslFailure, ScramMechanism, ScramServer, client_proof, credential,
    salted_password, sasl_name, username,
)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512

# RFC 7677 section 3
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_server(users=None) -> ScramServer:
    users = {"user": credential(SHA256, "pencil", RFC_SALT, 4096)} if users is None else users
    return ScramServer(SHA256, users.get, RFC_SERVER_NONCE)


def test_the_rfc_7677_exchange_byte_for_byte():
    server = rfc_server()
    assert server.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.authorization_id == "user"


def _exchange(mechanism, password_typed, stored_password="secret", user="alice", iterations=4096,
              gs2="n,,", tamper=lambda final: final) -> ScramServer:
    salt = b"0123456789abcdef"
    server = ScramServer(mechanism, {user: credential(mechanism, stored_password, salt, iterations)}.get, "SN0nce")
    bare = f"n={sasl_name(user)},r=CN0nce"
    first = server.evaluate(f"{gs2}{bare}".encode()).decode()
    without_proof = f"c={base64.b64encode(gs2.encode()).decode()},r=CN0nceSN0nce"
    auth = f"{bare},{first},{without_proof}".encode()
    proof = client_proof(mechanism, salted_password(mechanism, password_typed, salt, iterations), auth)
    server.evaluate(tamper(f"{without_proof},p={base64.b64encode(proof).decode()}".encode()))
    return server


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_a_right_password_authenticates_and_a_wrong_one_gets_the_generic_message(mechanism):
    assert _exchange(mechanism, "secret").authorization_id == "alice"
    with pytest.raises(SaslFailure) as wrong:
        _exchange(mechanism, "guess")
    assert wrong.value.client_message == GENERIC_FAILURE.format(mechanism.mechanism_name)


def test_a_final_nonce_with_the_client_nonce_repeated_in_front_is_accepted_as_kafka_does():
    """Older librdkafka (kcat's, Debian's 1.x/2.0) sends r=<client nonce><client nonce><server nonce>: Kafka checks
    only that the nonce ends with the server's, so such clients log in."""
    server = rfc_server()
    server.evaluate(RFC_CLIENT_FIRST)
    doubled_final = RFC_CLIENT_FINAL.replace(b"r=rOpr", b"r=rOprNGfwEbeRWgbNEkqOrOpr")
    salted = salted_password(SHA256, "pencil", RFC_SALT, 4096)
    without_proof = doubled_final[:doubled_final.index(b",p=")]
    auth = RFC_CLIENT_FIRST[3:] + b"," + RFC_SERVER_FIRST + b"," + without_proof
    proof = base64.b64encode(client_proof(SHA256, salted, auth))
    assert server.evaluate(without_proof + b",p=" + proof).startswith(b"v=") and server.complete


def test_an_unknown_user_gets_the_same_message_as_a_wrong_password():
    with pytest.raises(SaslFailure) as unknown:
        rfc_server({}).evaluate(RFC_CLIENT_FIRST)
    server = rfc_server()
    server.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(SaslFailure) as wrong:
        server.evaluate(RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=eHzb"))
    assert unknown.value.client_message == wrong.value.client_message == GENERIC_FAILURE.format("SCRAM-SHA-256")


@pytest.mark.parametrize("final", [
    RFC_CLIENT_FINAL.replace(b"r=rOprNGfwEbeRWgbNEkqO%", b"r=XOprNGfwEbeRWgbNEkqO%"),  # nonce not echoed
    RFC_CLIENT_FINAL[:-4],  # a proof 30 bytes long
    RFC_CLIENT_FINAL[:-1] + b"!",  # bad base64 proof
    RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),  # channel binding of "y,,"
    RFC_CLIENT_FINAL.replace(b"c=biws", b"c=b!ws"),
    RFC_CLIENT_FINAL + b",x=1",
    b"\xff\xfe",
])
def test_a_bad_client_final_message_fails(final):
    server = rfc_server()
    server.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(SaslFailure):
        server.evaluate(final)
    assert server.state == "FAILED" and not server.complete


@pytest.mark.parametrize("first", [
    b"p=tls-server-end-point,,n=user,r=abc",  # the client wants channel binding
    b"y,,n=user,r=abc", b"n,,n=user", b"n,,r=abc", b"n,,n=,r=abc", b"n,,n=us=er,r=abc", b"", b"\xff",
    b"n,,n=user,r=abc,tokenauth=true",  # delegation tokens are not built
    b"n,,n=user,r=abc,foo=bar",  # an unknown extension
    b"n,,n=user,r=a,bc",
])
def test_a_bad_client_first_message_fails(first):
    with pytest.raises(SaslFailure):
        rfc_server().evaluate(first)


def test_a_replayed_client_final_is_refused_after_completion_and_on_another_exchange():
    server = rfc_server()
    server.evaluate(RFC_CLIENT_FIRST)
    server.evaluate(RFC_CLIENT_FINAL)
    with pytest.raises(SaslFailure, match="Unexpected challenge"):
        server.evaluate(RFC_CLIENT_FINAL)
    other = ScramServer(SHA256, {"user": credential(SHA256, "pencil", RFC_SALT, 4096)}.get, "anotherNonce")
    other.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(SaslFailure):
        other.evaluate(RFC_CLIENT_FINAL)  # signed over the first server nonce


def test_an_authorization_id_must_be_the_user():
    assert _exchange(SHA256, "secret", gs2="n,a=alice,").authorization_id == "alice"
    with pytest.raises(SaslFailure) as exc:
        _exchange(SHA256, "secret", gs2="n,a=bob,")
    assert "authorization id that is different from username" in exc.value.client_message


def test_too_few_iterations_fail():
    with pytest.raises(SaslFailure, match="Iterations 4095 is less than the minimum 4096"):
        _exchange(SHA256, "secret", iterations=4095)


def test_sasl_names_escape_comma_and_equals():
    assert _exchange(SHA512, "secret", user="a,b=c").authorization_id == "a,b=c"
    assert sasl_name("a,b=c") == "a=2Cb=3Dc"
    assert username("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ValueError):
        username("a=2Db")


@settings(max_examples=25, deadline=None)
@given(user=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12),
       password=st.text(min_size=1, max_size=20), mechanism=st.sampled_from([SHA256, SHA512]))
def test_any_user_and_password_round_trip(user, password, mechanism):
    assert _exchange(mechanism, password, stored_password=password, user=user).authorization_id == user


def test_a_credential_holds_no_password():
    c = credential(SHA256, "pencil", RFC_SALT, 4096)
    assert isinstance(c, Credential) and b"pencil" not in repr(c).encode() and len(c.stored_key) == 32


# ---- PLAIN (PlainSaslServerTest) ---------------------------------------------------------------------------------

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def test_plain_no_authorization_id_and_the_same_authorization_id():
    assert PlainServer(USERS.get).evaluate(b"\0alice\0alice-secret") == b""
    server = PlainServer(USERS.get)
    server.evaluate(b"alice\0alice\0alice-secret")
    assert server.complete and server.authorization_id == "alice"


def test_plain_an_authorization_id_not_the_user_fails():
    with pytest.raises(SaslFailure, match="authorization id differs"):
        PlainServer(USERS.get).evaluate(b"bob\0alice\0alice-secret")


@pytest.mark.parametrize("message, client_message", [
    (b"\0alice\0wrong", INVALID),
    (b"\0mallory\0alice-secret", INVALID),
    (b"\0alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"a\0b\0c\0d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"\0\0alice-secret", GENERIC_FAILURE.format("PLAIN")),
    (b"\0alice\0", GENERIC_FAILURE.format("PLAIN")),
    (b"\xff\0alice\0x", GENERIC_FAILURE.format("PLAIN")),
])
def test_plain_failures_tell_the_client_what_kafka_tells(message, client_message):
    with pytest.raises(SaslFailure) as exc:
        PlainServer(USERS.get).evaluate(message)
    assert exc.value.client_message == client_message


def test_plain_takes_one_message():
    server = PlainServer(USERS.get)
    server.evaluate(b"\0alice\0alice-secret")
    with pytest.raises(SaslFailure, match="Unexpected challenge"):
        server.evaluate(b"\0alice\0alice-secret")
