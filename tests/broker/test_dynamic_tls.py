"""A listener's stores changed by dynamic broker configs (broker/security/dynamic_tls.py): the checks of
SslFactory.createNewSslEngineFactory, and what makes a listener's context be rebuilt."""

from __future__ import annotations

import shutil

import pytest

from broker.config.config_types import ConfigException
from broker.security.dynamic_tls import fingerprint, reconfigured_context
from broker.testing.certificates import CertificateAuthority

P = "listener.name.ssl."


def stores(keystore, truststore) -> dict:
    return {P + "ssl.keystore.type": "PEM", P + "ssl.keystore.location": str(keystore),
            P + "ssl.truststore.type": "PEM", P + "ssl.truststore.location": str(truststore),
            "ssl.client.auth": "required"}


def test_a_new_keystore_keeps_the_subject_and_sans_unless_allowed(tmp_path):
    old_ca, new_ca = CertificateAuthority(tmp_path / "old"), CertificateAuthority(tmp_path / "new", "new-ca")
    old = stores(old_ca.issue("broker", server=True).pem, old_ca.pem)
    same = stores(new_ca.issue("broker", server=True).pem, new_ca.pem)
    assert reconfigured_context(old, same, "SSL", "SSL") is not None
    renamed = stores(new_ca.issue("other", server=True).pem, new_ca.pem)
    with pytest.raises(ConfigException, match="Validation of dynamic config update of SSLFactory failed: Keystore "
                                              "DistinguishedName does not match"):
        reconfigured_context(old, renamed, "SSL", "SSL")
    assert reconfigured_context(old, {**renamed, "ssl.allow.dn.changes": "true"}, "SSL", "SSL") is not None
    # the same subject without the SANs (IP 127.0.0.1, localhost) of the old certificate
    no_sans = stores(CertificateAuthority(tmp_path / "third", "third-ca").issue("broker").pem, new_ca.pem)
    with pytest.raises(ConfigException, match="Keystore SubjectAltNames do not match"):
        reconfigured_context(old, no_sans, "SSL", "SSL")
    assert reconfigured_context(old, {**no_sans, P + "ssl.allow.san.changes": "true"}, "SSL", "SSL") is not None
    with pytest.raises(ConfigException, match="cannot read ssl.keystore.location"):
        reconfigured_context(old, stores(tmp_path / "missing.pem", new_ca.pem), "SSL", "SSL")


def test_the_fingerprint_changes_with_the_settings_and_with_the_files_bytes(tmp_path):
    ca, other = CertificateAuthority(tmp_path / "ca"), CertificateAuthority(tmp_path / "other", "other-ca")
    trust = tmp_path / "trust.pem"
    shutil.copy(ca.pem, trust)
    values = stores(ca.issue("broker", server=True).pem, trust)
    before = fingerprint(values, "SSL")
    assert fingerprint(dict(values), "SSL") == before
    assert fingerprint({**values, P + "ssl.truststore.password": "x"}, "SSL") != before
    shutil.copy(other.pem, trust)  # same path, new bytes: rebuilt (DefaultSslEngineFactory.shouldBeRebuilt)
    assert fingerprint(values, "SSL") != before


@pytest.mark.parametrize("tls13", [False, True])
def test_on_the_inter_broker_listener_a_ca_is_rotated_through_a_truststore_holding_both(tmp_path, tls13):
    """SslEngineValidator: the old and the new stores must shake hands both ways (peers still on the old ones keep
    replicating): straight to a new CA is refused, a truststore of both CAs first lets the keystore move."""
    old_ca, new_ca = CertificateAuthority(tmp_path / "old"), CertificateAuthority(tmp_path / "new", "new-ca")
    both = tmp_path / "both.pem"
    both.write_bytes(old_ca.pem.read_bytes() + new_ca.pem.read_bytes())
    versions = {"ssl.enabled.protocols": "TLSv1.3" if tls13 else "TLSv1.2"}
    old_key, new_key = old_ca.issue("broker", server=True).pem, new_ca.issue("broker", server=True).pem
    old = {**stores(old_key, old_ca.pem), **versions}
    with pytest.raises(ConfigException, match="cannot complete a TLS handshake"):
        reconfigured_context(old, {**stores(new_key, new_ca.pem), **versions}, "SSL", "SSL", inter_broker=True)
    # not the inter-broker listener: no handshake asked
    assert reconfigured_context(old, {**stores(new_key, new_ca.pem), **versions}, "SSL", "SSL") is not None
    step1 = {**stores(old_key, both), **versions}
    assert reconfigured_context(old, step1, "SSL", "SSL", inter_broker=True) is not None
    step2 = {**stores(new_key, both), **versions}
    assert reconfigured_context(step1, step2, "SSL", "SSL", inter_broker=True) is not None
