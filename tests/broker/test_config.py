"""Configuration: Kafka property names and defaults, YAML or server.properties, overrides, validation."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from broker import EmbeddedBroker
from broker.config import DEFAULTS, BrokerConfig, ConfigException, _known_keys
from broker.config.config_describe import CONFIG_TYPES, broker_entries
from broker.config.config_types import BROKER_CONFIG_TYPES, CLASS, PASSWORD, parse_value
from storage.config import LogConfig


def test_yaml_and_overrides(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("node.id: 3\nlog:\n  dirs: ./x,./y\nnum.partitions: 4\n")
    cfg = BrokerConfig.load(f, ["num.partitions=6", "auto.create.topics.enable=false"])
    assert cfg.node_id == 3 and cfg["num.partitions"] == 6 and cfg["auto.create.topics.enable"] is False
    assert [p.name for p in cfg.log_dirs] == ["x", "y"]
    assert cfg["log.segment.bytes"] == 1073741824  # Kafka's default


def test_server_properties_file(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("# Kafka's own format\nnode.id=2\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs=/tmp/a\n"
                 "log.retention.hours=24\n")
    cfg = BrokerConfig.load(f)
    assert cfg.node_id == 2 and cfg["log.retention.hours"] == 24 and cfg.listeners[0].port == 0


def test_invalid_value_names_key_and_value():
    with pytest.raises(ConfigException, match="num.partitions"):
        BrokerConfig({"num.partitions": "many"}).validate()
    with pytest.raises(ConfigException, match="log.cleanup.policy"):
        BrokerConfig({"log.cleanup.policy": "shred"}).validate()
    with pytest.raises(ConfigException, match="listeners"):
        BrokerConfig({"listeners": "PLAINTEXT://host:port"}).validate()


def test_unknown_key_is_a_warning(caplog, tmp_path):
    caplog.set_level(logging.WARNING)
    with EmbeddedBroker(data_dir=tmp_path / "d", overrides={"no.such.setting": 1}):
        pass
    assert any("no.such.setting" in r.getMessage() for r in caplog.records)


def test_cli_rejects_invalid_config(tmp_path):
    exe = Path(sys.executable).parent / "odradek"
    out = subprocess.run([str(exe), "serve", "--override", "log.segment.bytes=tiny", "--override",
                          f"log.dirs={tmp_path}"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and "log.segment.bytes" in out.stderr


VOTERS = "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"


@pytest.mark.parametrize("values, message", [
    ({"process.roles": "broker,kraken"}, "process.roles"),
    ({"process.roles": "controller"}, "controller.quorum.voters must contain"),
    ({"process.roles": "controller", "controller.quorum.voters": VOTERS, "node.id": 7,
      "listeners": "CONTROLLER://:9093", "controller.listener.names": "CONTROLLER"}, "must be included"),
    ({"process.roles": "controller", "controller.quorum.voters": VOTERS, "node.id": 1,
      "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names": "CONTROLLER"},
     "must only contain KRaft controller listeners"),
    ({"process.roles": "controller", "controller.quorum.voters": VOTERS, "node.id": 1,
      "listeners": "CONTROLLER://:9093"}, "controller.listener.names must contain"),
    ({"process.roles": "broker", "controller.quorum.voters": VOTERS, "node.id": 2,
      "listeners": "PLAINTEXT://:9092", "controller.listener.names": "CONTROLLER"}, "must not be included"),
    ({"process.roles": "broker", "controller.quorum.voters": VOTERS, "node.id": 4,
      "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names": "CONTROLLER"},
     "must not contain a value appearing in the 'listeners'"),
    ({"process.roles": "broker,controller", "controller.quorum.voters": VOTERS, "node.id": 1,
      "listeners": "CONTROLLER://:9093", "controller.listener.names": "CONTROLLER"}, "a broker needs a listener"),
])
def test_roles_are_checked_against_the_quorum_and_listeners_as_kafka_does(values, message):
    with pytest.raises(ConfigException, match=message):
        BrokerConfig(values).validate()


@pytest.mark.parametrize("values", [
    {},  # a single node: its own quorum of one
    {"process.roles": "controller", "controller.quorum.voters": VOTERS, "node.id": 1,
     "listeners": "CONTROLLER://:9093", "controller.listener.names": "CONTROLLER"},
    {"process.roles": "broker", "controller.quorum.voters": VOTERS, "node.id": 4,
     "listeners": "PLAINTEXT://:9092", "controller.listener.names": "CONTROLLER"},
    {"process.roles": "broker,controller", "controller.quorum.voters": VOTERS, "node.id": 3,
     "listeners": "PLAINTEXT://:9092,CONTROLLER://:9095", "controller.listener.names": "CONTROLLER"},
])
def test_the_three_kinds_of_node_are_accepted(values):
    BrokerConfig(values).validate()


# ---- every value parsed by its key's Kafka type (broker/config/config_types.py) ------------------------------------

def test_every_known_key_has_a_kafka_type():
    untyped = sorted(k for k in _known_keys() if k not in BROKER_CONFIG_TYPES)
    assert not untyped, f"keys without a ConfigDef type in broker/config/config_types.py: {untyped}"
    assert set(BROKER_CONFIG_TYPES.values()) <= {"BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST",
                                                 "CLASS", "PASSWORD"}
    for key, default in DEFAULTS.items():  # every default is already the value its type parses to
        if default is not None:
            parsed = BrokerConfig({key: default})[key]
            assert parsed == default and type(parsed) is type(default), key
    # a few looked up in Kafka's own ConfigDefs
    assert {k: BROKER_CONFIG_TYPES[k] for k in (
        "log.retention.ms", "log.retention.minutes", "log.roll.ms", "num.partitions", "broker.rack",
        "controller.quorum.voters", "listeners", "process.roles", "log.dirs", "replica.selector.class",
        "auto.create.topics.enable", "log.cleaner.min.cleanable.ratio", "offsets.topic.replication.factor")} == {
        "log.retention.ms": "LONG", "log.retention.minutes": "INT", "log.roll.ms": "LONG", "num.partitions": "INT",
        "broker.rack": "STRING", "controller.quorum.voters": "LIST", "listeners": "STRING", "process.roles": "LIST",
        "log.dirs": "STRING", "replica.selector.class": "STRING", "auto.create.topics.enable": "BOOLEAN",
        "log.cleaner.min.cleanable.ratio": "DOUBLE", "offsets.topic.replication.factor": "SHORT"}


def _load(tmp_path, source: str, key: str, value):
    """``key`` set to ``value`` through one source: a YAML file (``value`` as a YAML string, or as YAML reads
    ``yaml-plain``'s text unquoted), a server.properties file, or ``--override``."""
    if source == "yaml":
        f = tmp_path / "n.yaml"
        f.write_text(yaml.safe_dump({key: value}))
        return BrokerConfig.load(f)
    if source == "yaml-plain":
        f = tmp_path / "n.yaml"
        f.write_text(f"{key}: {value}\n")
        return BrokerConfig.load(f)
    if source == "properties":
        f = tmp_path / "server.properties"
        f.write_text(f"{key}={value}\n", encoding="utf-8")
        return BrokerConfig.load(f)
    return BrokerConfig.load(None, [f"{key}={value}"])


SOURCES = ["yaml", "yaml-plain", "properties", "override"]
TYPED = [  # (key, its type, text, parsed)
    ("num.partitions", "INT", "4", 4),
    ("log.retention.ms", "LONG", "60000", 60000),  # no default: typed all the same
    ("log.roll.ms", "LONG", "9223372036854775807", 9223372036854775807),
    ("log.retention.minutes", "INT", "-1", -1),
    ("offsets.topic.replication.factor", "SHORT", "3", 3),
    ("log.cleaner.min.cleanable.ratio", "DOUBLE", "0.25", 0.25),
    ("log.cleaner.io.buffer.load.factor", "DOUBLE", "1e-1", 0.1),
    ("auto.create.topics.enable", "BOOLEAN", "false", False),
    ("log.preallocate", "BOOLEAN", "TRUE", True),
    ("broker.rack", "STRING", "rack-a", "rack-a"),
    ("controller.quorum.voters", "LIST", "1@h:9093, 2@h:9094", "1@h:9093,2@h:9094"),
    ("process.roles", "LIST", "broker", "broker"),
]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("key, type_, text, parsed", TYPED, ids=[f"{t[1]}-{t[0]}" for t in TYPED])
def test_every_source_is_parsed_by_the_keys_type(tmp_path, source, key, type_, text, parsed):
    assert BROKER_CONFIG_TYPES[key] == type_
    value = _load(tmp_path, source, key, text)[key]
    assert value == parsed and type(value) is type(parsed)


def test_yaml_scalars_of_another_type_become_the_keys_type(tmp_path):
    f = tmp_path / "n.yaml"
    f.write_text("log.retention.ms: '60000'\nnum.partitions: '4'\nauto.create.topics.enable: 'false'\n"
                 "broker.rack: 1\nlog.cleaner.min.cleanable.ratio: 1\ncontroller.listener.names: true\n"
                 "process.roles: [broker, controller]\nlog.dirs: [./a, ./b]\n")
    cfg = BrokerConfig.load(f)
    assert cfg["log.retention.ms"] == 60000 and cfg["num.partitions"] == 4
    assert cfg["auto.create.topics.enable"] is False and cfg["broker.rack"] == "1"
    assert cfg["log.cleaner.min.cleanable.ratio"] == 1.0 and cfg["controller.listener.names"] == "true"
    assert cfg["process.roles"] == "broker,controller" and cfg.process_roles == {"broker", "controller"}
    assert cfg["log.dirs"] == "./a,./b" and [p.name for p in cfg.log_dirs] == ["a", "b"]
    # none/null are strings for a STRING key (YAML's null is null, ~ or nothing)
    f.write_text("broker.rack: none\nmetadata.log.dir: null\ncluster.id: ~\n")
    cfg = BrokerConfig.load(f, ["inter.broker.listener.name=null"])
    assert cfg["broker.rack"] == "none" and cfg["metadata.log.dir"] is None and cfg["cluster.id"] is None
    assert cfg["inter.broker.listener.name"] == "null"


def test_a_node_yaml_with_quoted_values_validates_and_formats(tmp_path):
    """What `odradek dev-cluster --override` wrote before: every value a YAML string."""
    f = tmp_path / "node1.yaml"
    f.write_text(f"node.id: '1'\nlog.dirs: {tmp_path / 'd'}\nlisteners: PLAINTEXT://127.0.0.1:0\n"
                 "num.partitions: '4'\nlog.retention.ms: '60000'\nauto.create.topics.enable: 'false'\n"
                 "default.replication.factor: '1'\noffsets.topic.replication.factor: '1'\n")
    cfg = BrokerConfig.load(f)
    assert cfg.validate() == []
    assert cfg["num.partitions"] == 4 and cfg["log.retention.ms"] == 60000 and cfg["auto.create.topics.enable"] is False
    assert LogConfig.from_props({}, cfg.values).retention_ms == 60000
    exe = Path(sys.executable).parent / "odradek"
    out = subprocess.run([str(exe), "format", "--config", str(f), "--cluster-id", "AAAAAAAAAAAAAAAAAAAAAA"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "d" / "meta.properties").exists()


GOOD = {"INT": ("num.partitions", "4"), "LONG": ("log.retention.ms", "60000"),
        "SHORT": ("offsets.topic.replication.factor", "3"), "DOUBLE": ("log.cleaner.min.cleanable.ratio", "0.5"),
        "BOOLEAN": ("auto.create.topics.enable", "false")}
BAD = {"double-quoted": '"{}"', "single-quoted": "'{}'", "nbsp-padded": "\u00a0{}", "suffix": "{}x",
       "underscore": "1_000", "empty": ""}


@pytest.mark.parametrize("source", ["yaml", "properties", "override"])
@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("type_", list(GOOD))
def test_a_value_its_type_cannot_parse_is_refused_naming_key_and_value(tmp_path, source, bad, type_):
    key, good = GOOD[type_]
    value = BAD[bad].format(good)
    with pytest.raises(ConfigException) as e:
        _load(tmp_path, source, key, value)
    msg = str(e.value)
    assert msg.startswith("Invalid value ") and f" for configuration {key}: " in msg
    assert (repr(value) if bad in ("nbsp-padded", "empty") else value) in msg
    reason = "Expected value to be either true or false" if type_ == "BOOLEAN" else f"Not a number of type {type_}"
    assert msg.endswith(reason)


@pytest.mark.parametrize("key, value", [
    ("num.partitions", "2147483648"), ("num.partitions", 2**31), ("offsets.topic.replication.factor", "32768"),
    ("log.retention.ms", "9223372036854775808"), ("log.retention.ms", "-9223372036854775809"),
    ("num.partitions", True), ("num.partitions", 4.0), ("num.partitions", "\u0664"),  # ARABIC-INDIC DIGIT FOUR
    ("num.partitions", "0x10"), ("log.cleaner.min.cleanable.ratio", "nan"), ("log.cleaner.min.cleanable.ratio", "inf"),
    ("log.cleaner.min.cleanable.ratio", True), ("auto.create.topics.enable", 1), ("auto.create.topics.enable", "yes"),
    ("process.roles", {"broker": 1}), ("broker.rack", ["a"]),
])
def test_out_of_range_and_wrong_kinds_are_refused(key, value):
    with pytest.raises(ConfigException, match=f"for configuration {key}: "):
        BrokerConfig({key: value})


def test_ascii_whitespace_around_a_value_is_trimmed_as_kafka_does(tmp_path):
    # ConfigDef.parseType trims a string (Java's String.trim: every char <= ' ') before parsing it, so
    # ' 4 ' is 4; a Unicode space such as U+00A0 is not trimmed, and refused (above).
    assert BrokerConfig.load(None, ["num.partitions= 4 "])["num.partitions"] == 4
    assert _load(tmp_path, "yaml", "log.retention.ms", "\t60000\r\n")["log.retention.ms"] == 60000
    assert _load(tmp_path, "yaml", "auto.create.topics.enable", " False ")["auto.create.topics.enable"] is False
    assert _load(tmp_path, "yaml", "log.cleaner.min.cleanable.ratio", " .5 ")["log.cleaner.min.cleanable.ratio"] == .5
    assert _load(tmp_path, "yaml", "broker.rack", " r1\x00")["broker.rack"] == "r1"
    assert _load(tmp_path, "yaml", "process.roles", " broker ,\tcontroller ")["process.roles"] == "broker,controller"
    assert _load(tmp_path, "yaml", "num.partitions", "+4")["num.partitions"] == 4  # Integer.parseInt takes a sign


def test_empty_strings_and_the_remaining_types():
    cfg = BrokerConfig({"broker.rack": "", "controller.quorum.bootstrap.servers": " ", "log.dirs": "/d"})
    assert cfg["broker.rack"] == "" and cfg["controller.quorum.bootstrap.servers"] == ""
    assert parse_value("x.class", " org.example.Thing ", CLASS) == "org.example.Thing"
    assert parse_value("x.password", " secret ", PASSWORD) == "secret"
    with pytest.raises(ConfigException, match="Invalid value 1 for configuration x.class: Expected a Class"):
        parse_value("x.class", 1, CLASS)
    assert parse_value("d", "-Infinity", "DOUBLE") == float("-inf") and parse_value("d", "2.5d", "DOUBLE") == 2.5
    assert parse_value("l", "a,,b,", "LIST") == "a,,b,"  # split(trimmed, -1): empty items kept, as Kafka


def test_unknown_keys_keep_the_old_reading_and_the_warning(tmp_path):
    f = tmp_path / "n.yaml"
    f.write_text("no.such.setting: '5'\nlogger.odradek: DEBUG\n")
    cfg = BrokerConfig.load(f, ["num.partition=4", "other.setting=none", "flag.setting=TRUE"])
    assert cfg["no.such.setting"] == "5" and cfg["logger.odradek"] == "DEBUG"  # YAML: as given
    assert cfg["num.partition"] == 4 and cfg["other.setting"] is None and cfg["flag.setting"] is True
    warnings = cfg.validate()
    assert "The configuration 'num.partition' was supplied but isn't a known config." in warnings
    assert not any("logger.odradek" in w for w in warnings)


def test_validate_parses_values_set_after_construction():
    cfg = BrokerConfig({})
    cfg.values["num.partitions"] = "5"
    cfg.validate()
    assert cfg["num.partitions"] == 5
    cfg.values["num.partitions"] = "five"
    with pytest.raises(ConfigException, match="Invalid value five for configuration num.partitions"):
        cfg.validate()


def test_describe_configs_types_come_from_the_table():
    # DescribeConfigsResponse.ConfigType: UNKNOWN 0, BOOLEAN 1, STRING 2, INT 3, SHORT 4, LONG 5, DOUBLE 6,
    # LIST 7, CLASS 8, PASSWORD 9
    assert CONFIG_TYPES == {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
                            "class": 8, "password": 9}
    cfg = BrokerConfig.load(None, ["log.retention.ms=60000", "auto.create.topics.enable=false",
                                   "log.cleaner.min.cleanable.ratio=0.5", "no.such.setting=1"])
    entries = {e.name: e for e in broker_entries(cfg.values, cfg.explicit, None, False, set())}
    got = {n: (entries[n].value, entries[n].config_type) for n in (
        "log.retention.ms", "auto.create.topics.enable", "log.roll.ms", "broker.rack", "process.roles",
        "offsets.topic.replication.factor", "log.cleaner.min.cleanable.ratio", "num.partitions",
        "log.flush.interval.messages", "no.such.setting")}
    assert got == {"log.retention.ms": ("60000", 5), "auto.create.topics.enable": ("false", 1),
                   "log.roll.ms": (None, 5), "broker.rack": (None, 2), "process.roles": ("broker,controller", 7),
                   "offsets.topic.replication.factor": ("3", 4), "log.cleaner.min.cleanable.ratio": ("0.5", 6),
                   "num.partitions": ("1", 3), "log.flush.interval.messages": ("9223372036854775807", 5),
                   "no.such.setting": ("1", 0)}
    assert all(e.config_type != 0 for n, e in entries.items() if n in BROKER_CONFIG_TYPES)


def test_fetch_max_bytes_is_kafkas_static_broker_config():
    """ServerConfigs: fetch.max.bytes, INT, 55 MiB, atLeast(1024); not in DynamicBrokerConfig's reconfigurables, so
    described read-only, with Kafka's documentation."""
    assert BrokerConfig()["fetch.max.bytes"] == 57671680
    cfg = BrokerConfig.load(None, ["fetch.max.bytes=1024"])
    cfg.validate()
    with pytest.raises(ConfigException, match="Invalid value 1023 for configuration fetch.max.bytes: Value must be "
                                              "at least 1024"):
        BrokerConfig({"fetch.max.bytes": 1023}).validate()
    entry = broker_entries(cfg.values, cfg.explicit, ["fetch.max.bytes"], True, set(), True)[0]
    assert (entry.value, entry.read_only, entry.config_source, entry.config_type) == ("1024", True, 4, 3)
    assert entry.documentation.startswith("The maximum number of bytes we will return for a fetch request.")
    default = BrokerConfig()
    entry = broker_entries(default.values, default.explicit, ["fetch.max.bytes"], False, set())[0]
    assert (entry.value, entry.config_source, entry.is_default) == ("57671680", 5, True)


# ---- listener security protocols (KafkaConfig.effectiveListenerSecurityProtocolMap) ------------------------------

def test_listener_protocols_resolve_as_kafka_resolves_them():
    plain = BrokerConfig({"listeners": "PLAINTEXT://:9092"})
    assert plain.listener_security_protocols()["PLAINTEXT"] == "PLAINTEXT"
    # no map set and no SSL/SASL listener: controller listeners are PLAINTEXT
    kraft = BrokerConfig({"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                          "controller.listener.names": "CONTROLLER", "controller.quorum.voters": "1@localhost:9093"})
    assert kraft.listener_security_protocols()["CONTROLLER"] == "PLAINTEXT"
    kraft.validate()
    # an explicit map is taken as it is, names upper-cased; entries for listeners not in use are fine
    mapped = BrokerConfig({"listeners": "internal://:9092", "listener.security.protocol.map":
                           "INTERNAL:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL"})
    assert mapped.listener_security_protocols() == {"INTERNAL": "PLAINTEXT", "SSL": "SSL", "SASL_SSL": "SASL_SSL"}
    mapped.validate()


@pytest.mark.parametrize("values, message", [
    # every protocol is served; a listener without what its protocol needs stops the start, naming it
    ({"listeners": "SASL_SSL://:9092"}, "Listener SASL_SSL: SASL mechanism GSSAPI is not served"),
    ({"listeners": "SSL://:9092"}, "Listener SSL: a TLS listener needs ssl.keystore.location"),
    ({"listeners": "SASL_PLAINTEXT://:9092"}, "Listener SASL_PLAINTEXT: SASL mechanism GSSAPI is not served"),
    ({"listeners": "EXTERNAL://:9092", "listener.security.protocol.map": "EXTERNAL:SASL_SSL"},
     "Listener EXTERNAL: SASL mechanism GSSAPI is not served"),
    ({"listeners": "INTERNAL://:9092"}, "No security protocol defined for listener INTERNAL"),
    # an explicit map without the controller listener: Kafka adds no default for it
    ({"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names": "CONTROLLER",
      "controller.quorum.voters": "1@localhost:9093", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"},
     "No security protocol defined for listener CONTROLLER"),
    # a broker-only node connects to the controllers' listener: it must be able to verify them
    ({"process.roles": "broker", "node.id": 4, "listeners": "PLAINTEXT://:9092", "controller.listener.names": "CTL",
      "controller.quorum.voters": "1@localhost:9093", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CTL:SSL"},
     "Listener CTL: verifying peers' certificates needs ssl.truststore.location"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "Invalid security protocol `TLS`"),
])
def test_a_listener_without_what_its_protocol_needs_is_refused_naming_it(values, message):
    with pytest.raises(ConfigException, match=re.escape(message)):
        BrokerConfig(values).validate()
