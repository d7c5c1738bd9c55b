"""broker/security/tls.py: Kafka's SslPrincipalMapperTest (valid and invalid rules, mapping), the keystore and
truststore forms a TLS listener takes (PEM file, inline PEM, PKCS12), what is refused at start (JKS with the
keytool command, no keystore, a bad ssl.client.auth, TLS 1.3 suites Python cannot choose), and KIP-684's rule that
SASL_SSL takes only a listener-prefixed ssl.client.auth."""

from __future__ import annotations

import ssl

import pytest

from broker.config import BrokerConfig
from broker.config.config_types import ConfigException
from broker.security.tls import PrincipalMapper, RecordSSLObject, client_context, server_context
from broker.testing.certificates import STORE_PASSWORD, CertificateAuthority


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    ca = CertificateAuthority(tmp_path_factory.mktemp("certs"))
    return ca, ca.issue("broker", server=True)


@pytest.mark.parametrize("rule", [
    "DEFAULT", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/", "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U", "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/"])
def test_valid_rules(rule):
    PrincipalMapper(rule)


@pytest.mark.parametrize("rule", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U", "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU"])
def test_invalid_rules(rule):
    with pytest.raises(ConfigException):
        PrincipalMapper(rule)


def test_ssl_principal_mapper():
    mapper = PrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT"]))
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


def test_comma_with_whitespace():
    mapper = PrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_no_matching_rule_fails():
    with pytest.raises(ValueError, match="No rules apply"):
        PrincipalMapper("RULE:^CN=(x)$/$1/").name("CN=y")


def _values(**kv) -> dict:
    return {k.replace("__", "."): v for k, v in kv.items()}


def test_the_keystore_forms_a_tls_listener_takes(certs):
    ca, server = certs
    pem_file = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.pem)}
    inline = {"ssl.keystore.type": "PEM", "ssl.keystore.key": server.key.read_text(),
              "ssl.keystore.certificate.chain": server.cert.read_text()}
    p12 = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(server.p12),
           "ssl.keystore.password": STORE_PASSWORD}
    for values in (pem_file, inline, p12):
        assert isinstance(server_context(values, "SSL", "SSL"), ssl.SSLContext)
    trust = {**p12, "ssl.client.auth": "required", "ssl.truststore.type": "PKCS12",
             "ssl.truststore.location": str(ca.p12), "ssl.truststore.password": STORE_PASSWORD}
    assert server_context(trust, "SSL", "SSL").verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize("values, message", [
    ({"ssl.keystore.location": "/x/ks.jks"}, "keytool -importkeystore -srckeystore /x/ks.jks"),
    ({}, "a TLS listener needs ssl.keystore.location"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "<P12>", "ssl.keystore.password": "wrong"},
     "cannot be opened"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "<PEM>", "ssl.client.auth": "sometimes"},
     "ssl.client.auth"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "<PEM>", "ssl.client.auth": "required"},
     "needs ssl.truststore.location"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "<PEM>", "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"},
     "cannot choose TLS 1.3 suites"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "<PEM>", "ssl.cipher.suites": "TLS_RSA_WITH_NULL_SHA"},
     "not known here"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "<PEM>", "ssl.enabled.protocols": "TLSv1.1"},
     "not served"),
])
def test_what_a_tls_listener_cannot_start_with(certs, values, message):
    _, server = certs
    values = {k: (str(server.p12) if v == "<P12>" else str(server.pem) if v == "<PEM>" else v)
              for k, v in values.items()}
    with pytest.raises(ConfigException, match=message) as exc:
        server_context(values, "SSL", "SSL")
    assert STORE_PASSWORD not in str(exc.value)


def test_sasl_ssl_takes_only_a_listener_prefixed_client_auth_and_tls12_suites_are_translated(certs):
    _, server = certs
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.pem), "ssl.client.auth": "required"}
    assert server_context(base, "SASL_SSL", "SASL_SSL").verify_mode == ssl.CERT_NONE
    suites = {**base, "ssl.client.auth": "none",
              "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}
    names = {c["name"] for c in server_context(suites, "SSL", "SSL").get_ciphers()}
    assert {"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384"} <= names
    assert "ECDHE-ECDSA-CHACHA20-POLY1305" not in names


def test_a_broker_config_with_a_jks_keystore_is_refused_at_start():
    config = BrokerConfig({"listeners": "PLAINTEXT://:9092,SSL://:9093",
                           "ssl.keystore.location": "/etc/kafka/server.keystore.jks"})
    with pytest.raises(ConfigException, match="keytool -importkeystore"):
        config.validate()


def test_contexts_make_record_ssl_objects_that_answer_as_ssl_object(certs):
    """The TLS transports' SSLObject (RecordSSLObject: the C read/write/pending bound on the instance) over memory
    BIOs: the handshake, reads into a buffer and into bytes, pending, writes, the peer's close_notify as a 0 read
    and SSLWantReadError when nothing is buffered, as ssl.SSLObject answers them."""
    ca, broker = certs
    server = server_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(broker.pem)}, "SSL", "SSL")
    client = client_context({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.pem)}, "SSL")
    client.check_hostname = False
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    s = server.wrap_bio(s_in, s_out, server_side=True)
    c = client.wrap_bio(c_in, c_out, server_hostname="broker")
    assert type(s) is RecordSSLObject and type(c) is RecordSSLObject
    for _ in range(10):  # bounded: TLS 1.3 needs two round trips here
        done = 0
        for obj in (c, s):
            try:
                obj.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if done == 2:
            break
    assert s.version() in ("TLSv1.2", "TLSv1.3") and s.cipher() is not None
    with pytest.raises(ssl.SSLWantReadError):
        s.read(1024)
    payload = bytes(range(256)) * 40  # 10,240 bytes in two writes: two TLS records
    assert c.write(payload[:6000]) == 6000 and c.write(memoryview(payload)[6000:]) == 4240
    s_in.write(c_out.read())
    buf = bytearray(len(payload) + 100)
    view = memoryview(buf)
    got = s.read(len(buf), view)  # one record at a time, as uvloop and asyncio read
    assert got == 6000 and s.pending() == 0
    got += s.read(len(buf) - got, view[got:])
    assert bytes(buf[:got]) == payload
    assert s.write(b"answer") == 6
    c_in.write(s_out.read())
    assert c.read(100) == b"answer"
    try:
        c.unwrap()
    except ssl.SSLWantReadError:
        pass
    s_in.write(c_out.read())
    assert s.read(1024) == b""  # the peer's close_notify
