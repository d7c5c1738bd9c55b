"""Each SASL listener's settings, as Kafka reads them, checked at start.

* ``sasl.enabled.mechanisms`` (Kafka's default: GSSAPI), under ``listener.name.<l>.`` too. Served: PLAIN,
  SCRAM-SHA-256, SCRAM-SHA-512. GSSAPI (Kerberos) and OAUTHBEARER are refused at start, naming the listener.
* Every enabled mechanism needs its JAAS entry, ``listener.name.<l>.<mechanism>.sasl.jaas.config`` (or
  ``listener.name.<l>.sasl.jaas.config``, or ``sasl.jaas.config``), as Kafka's broker refuses to start without one:
  ``org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`` for PLAIN
  (its ``user_<name>`` options are the users), ``org.apache.kafka.common.security.scram.ScramLoginModule
  required;`` for SCRAM (the users are the metadata image's SCRAM credentials).
* ``connections.max.reauth.ms`` (0: sessions never expire), per listener and mechanism (KIP-368).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping

from broker.config.config_types import ConfigException

PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, GSSAPI, OAUTHBEARER = (
    "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")
SERVED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
LOGIN_MODULES = {
    PLAIN: "org.apache.kafka.common.security.plain.PlainLoginModule",
    SCRAM_SHA_256: "org.apache.kafka.common.security.scram.ScramLoginModule",
    SCRAM_SHA_512: "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")


@dataclasses.dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: Mapping[str, str]

    def __repr__(self) -> str:  # the options hold passwords
        return f"JaasEntry({self.login_module}, {self.control_flag}, options=[hidden])"


_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.S)


def _jaas_tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: ``word`` (bare or quoted), ``=`` and ``;``."""
    tokens: list[tuple[str, str]] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError("JAAS config has an unreadable token")
        quoted, word, eq, _ = m.groups()
        if quoted is not None:
            tokens.append(("word", re.sub(r"\\(.)", r"\1", quoted)))
        elif word is not None:
            tokens.append(("word", word))
        else:
            tokens.append(("=", "=") if eq is not None else (";", ";"))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return tokens


def parse_jaas(text: str) -> list[JaasEntry]:
    """Kafka's JaasConfig: ``<LoginModule> <flag> key=value ... ;`` entries; values quoted or bare. Errors never
    quote the text (it holds passwords)."""
    tokens = _jaas_tokens(text)
    entries = []
    i = 0
    while i < len(tokens):
        if tokens[i][0] != "word":
            raise ValueError("JAAS config entry does not start with a login module")
        if i + 1 >= len(tokens) or tokens[i + 1][0] != "word":
            raise ValueError("Login module control flag not specified in JAAS config")
        module, flag = tokens[i][1], tokens[i + 1][1].upper()
        if flag not in _FLAGS:
            raise ValueError("Invalid login module control flag in JAAS config")
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i][0] != ";":
            key = tokens[i][1]
            if tokens[i][0] != "word" or i + 2 >= len(tokens) or tokens[i + 1][0] != "=" or \
                    tokens[i + 2][0] != "word":
                raise ValueError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise ValueError("JAAS config entry not terminated by semi-colon")
        i += 1
        entries.append(JaasEntry(module, flag, options))
    if not entries:
        raise ValueError("JAAS config has no login module")
    return entries


def listener_value(values: Mapping[str, Any], listener: str, key: str, mechanism: str | None = None) -> Any:
    """Kafka's lookup order for a listener's security setting."""
    prefix = f"listener.name.{listener.lower()}."
    names = ([f"{prefix}{mechanism.lower()}.{key}"] if mechanism else []) + [f"{prefix}{key}", key]
    for name in names:
        if values.get(name) is not None:
            return values[name]
    return None


@dataclasses.dataclass(frozen=True)
class ListenerSasl:
    """One SASL listener's mechanisms, PLAIN users and re-authentication periods."""
    listener: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    reauth_ms: Mapping[str, int]

    def __repr__(self) -> str:
        return f"ListenerSasl({self.listener}, {self.mechanisms}, {len(self.plain_users)} PLAIN user(s))"


def listener_sasl(values: Mapping[str, Any], listener: str) -> ListenerSasl:
    """The listener's SASL settings; ConfigException for what Kafka would not start with or odradek does not
    serve."""
    raw = listener_value(values, listener, "sasl.enabled.mechanisms")
    mechanisms = tuple(m.strip() for m in str(raw if raw is not None else GSSAPI).split(",") if m.strip())
    if not mechanisms:
        raise ConfigException(f"Listener {listener}: sasl.enabled.mechanisms is empty")
    for m in mechanisms:
        if m in (GSSAPI, OAUTHBEARER):
            raise ConfigException(
                f"Listener {listener}: SASL mechanism {m} is not served by odradek (GSSAPI is Kafka's default "
                f"sasl.enabled.mechanisms): set listener.name.{listener.lower()}.sasl.enabled.mechanisms to PLAIN, "
                f"SCRAM-SHA-256 and/or SCRAM-SHA-512")
        if m not in SERVED_MECHANISMS:
            raise ConfigException(f"Listener {listener}: unknown SASL mechanism {m}")
    plain_users: dict[str, str] = {}
    reauth: dict[str, int] = {}
    for m in mechanisms:
        text = listener_value(values, listener, "sasl.jaas.config", m)
        if text is None:
            raise ConfigException(
                f"Listener {listener}: no JAAS configuration for SASL mechanism {m}: set "
                f"listener.name.{listener.lower()}.{m.lower()}.sasl.jaas.config")
        try:
            entries = parse_jaas(str(text))
        except ValueError as exc:
            raise ConfigException(f"Listener {listener}, mechanism {m}: invalid sasl.jaas.config: {exc}") from None
        if len(entries) != 1:
            raise ConfigException(f"Listener {listener}, mechanism {m}: sasl.jaas.config must contain exactly "
                                  f"one login module")
        entry = entries[0]
        if entry.login_module != LOGIN_MODULES[m]:
            raise ConfigException(f"Listener {listener}, mechanism {m}: sasl.jaas.config names "
                                  f"{entry.login_module}, expected {LOGIN_MODULES[m]}")
        if m == PLAIN:
            plain_users = {k[len("user_"):]: v for k, v in entry.options.items() if k.startswith("user_")}
        reauth[m] = int(listener_value(values, listener, "connections.max.reauth.ms", m) or 0)
    return ListenerSasl(listener, mechanisms, plain_users, reauth)
