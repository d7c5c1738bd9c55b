"""Configuration: Kafka property names and defaults, YAML or server.properties, overrides, validation."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from broker import EmbeddedBroker
from broker.config import BrokerConfig, ConfigException


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
