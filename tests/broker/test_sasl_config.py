"""broker/security/: each SASL listener's settings as Kafka reads them (listener- and mechanism-prefixed keys,
JAAS entries), what odradek refuses at start (GSSAPI, OAUTHBEARER, a mechanism without its JAAS entry, SASL on a
node link), and secrets kept out of DescribeConfigs."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig
from broker.config.config_describe import broker_entries
from broker.config.config_types import ConfigException
from broker.security.sasl_config import listener_sasl, parse_jaas
from broker.security.secrets import is_sensitive, redact

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice; secret";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def sasl_config(**extra) -> BrokerConfig:
    values = {"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9094",
              "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
              "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
              "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS}
    values.update(extra)
    return BrokerConfig(values)


def test_a_sasl_listener_beside_a_plaintext_one_starts_with_its_mechanisms_users_and_reauth_periods():
    config = sasl_config(**{"listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": 3000})
    config.validate()
    s = listener_sasl(config.values, "SASL_PLAINTEXT")
    assert s.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert dict(s.plain_users) == {"admin": "admin-secret", "alice": "alice; secret"}
    assert dict(s.reauth_ms) == {"PLAIN": 0, "SCRAM-SHA-256": 3000}
    assert "secret" not in repr(s)
    assert config.inter_broker_listener == "PLAINTEXT" and config.security_protocol("SASL_PLAINTEXT") == \
        "SASL_PLAINTEXT"


@pytest.mark.parametrize("extra, message", [
    ({"listener.name.sasl_plaintext.sasl.enabled.mechanisms": None}, "SASL mechanism GSSAPI is not served"),
    ({"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "OAUTHBEARER"}, "OAUTHBEARER is not served"),
    ({"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512"},
     "no JAAS configuration for SASL mechanism SCRAM-SHA-512"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": SCRAM_JAAS}, "expected org.apache.kafka.common."
                                                                           "security.plain.PlainLoginModule"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": "x required a=\"b\""}, "not terminated by semi-colon"),
    ({"inter.broker.listener.name": "SASL_PLAINTEXT"},
     "sasl.mechanism.inter.broker.protocol=GSSAPI is not among listener SASL_PLAINTEXT's"),
    ({"inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
     "needs username and password options"),
])
def test_what_a_sasl_listener_cannot_start_with(extra, message):
    with pytest.raises(ConfigException, match=message) as exc:
        sasl_config(**extra).validate()
    assert "admin-secret" not in str(exc.value)


def test_jaas_entries_parse_as_kafkas_jaas_config():
    (entry,) = parse_jaas(PLAIN_JAAS)
    assert entry.login_module.endswith("PlainLoginModule") and entry.control_flag == "REQUIRED"
    assert entry.options["user_alice"] == "alice; secret"
    assert len(parse_jaas(SCRAM_JAAS + " " + SCRAM_JAAS)) == 2
    for bad in ("", "module", "module bogus;", "module required key;", 'module required k="unterminated;'):
        with pytest.raises(ValueError):
            parse_jaas(bad)


def test_passwords_are_sensitive_also_under_listener_prefixes_and_describe_configs_sends_none():
    assert is_sensitive("sasl.jaas.config") and is_sensitive("listener.name.sasl_ssl.plain.sasl.jaas.config")
    assert is_sensitive("listener.name.ssl.ssl.keystore.password") and not is_sensitive("listeners")
    config = sasl_config()
    entries = {e.name: e for e in broker_entries(config.values, config.explicit, None, True, set())}
    jaas = entries["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert jaas.value is None and jaas.is_sensitive and jaas.synonyms == [] and jaas.config_type == 9
    assert entries["listeners"].value and not entries["listeners"].is_sensitive
    assert redact({"sasl.jaas.config": "x", "a": "b"}) == {"sasl.jaas.config": "[hidden]", "a": "b"}


def test_scram_between_controllers_is_refused_and_plain_is_taken():
    """The voters' SCRAM credentials are metadata the voters must elect a leader to read: refused at start."""
    from broker.security.node_links import link_security

    base = {"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": "1@localhost:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.controller.scram-sha-256.sasl.jaas.config":
                SCRAM_JAAS.replace("required;", 'required username="n" password="p";')}
    with pytest.raises(ConfigException, match="SCRAM between controllers is refused"):
        BrokerConfig({**base, "sasl.mechanism.controller.protocol": "SCRAM-SHA-256"}).validate()
    config = BrokerConfig({**base, "sasl.mechanism.controller.protocol": "PLAIN"})
    config.validate()
    link = link_security(config, "CONTROLLER", controller=True)
    assert (link.mechanism, link.username, link.ssl) == ("PLAIN", "admin", None)
    assert "admin-secret" not in repr(link)


def test_only_kafkas_standard_authorizer_is_accepted():
    """An authorizer odradek does not have would be a silent hole: refused at start."""
    with pytest.raises(ConfigException, match="the only authorizer"):
        BrokerConfig({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}).validate()
    BrokerConfig({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}).validate()
    BrokerConfig({"authorizer.class.name": ""}).validate()
