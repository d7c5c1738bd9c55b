"""`odradek serve` as `make run` starts it: config file, --override, relative log.dirs, SIGTERM."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_serve_from_config_with_overrides(tmp_path):
    exe = Path(sys.executable).parent / "odradek"
    proc = subprocess.Popen(
        [str(exe), "serve", "--config", str(REPO / "config" / "single-node.yaml"),
         "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "advertised.listeners=PLAINTEXT://127.0.0.1:0",
         "--override", "metrics.prometheus.listener=127.0.0.1:0"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.search(r"listening on PLAINTEXT://127\.0\.0\.1:(\d+)", line)
        assert m, line
        port = int(m.group(1))
        assert "data in " + str(tmp_path / "data") in proc.stdout.readline()
        assert re.search(r"metrics on http://127\.0\.0\.1:\d+/metrics", proc.stdout.readline())
        assert (tmp_path / "data" / "meta.properties").exists()  # relative log.dirs resolved against the cwd
        out = subprocess.run([shutil.which("kcat"), "-L", "-b", f"127.0.0.1:{port}", "-m", "10"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert f"broker 1 at 127.0.0.1:{port}" in out.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert rc == 0


def test_format_writes_meta_properties(tmp_path):
    exe = Path(sys.executable).parent / "odradek"
    out = subprocess.run([str(exe), "format", "--config", str(REPO / "config" / "single-node.yaml"),
                          "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "data" / "meta.properties").read_text()
    assert "cluster.id=MkU3OEVBNTcwNTJENDM2Qk" in text and "node.id=1" in text and "directory.id=" in text
    assert "version=1" in text
    assert os.path.exists(tmp_path / "data")


def test_sighup_reloads_log_levels(tmp_path):
    import time

    cfg = tmp_path / "c.yaml"
    cfg.write_text((REPO / "config" / "single-node.yaml").read_text() + "logger.odradek.server: INFO\n")
    log_path = tmp_path / "broker.log"
    exe = Path(sys.executable).parent / "odradek"
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(
            [str(exe), "serve", "--config", str(cfg), "--override", "listeners=PLAINTEXT://127.0.0.1:0",
             "--override", "advertised.listeners=PLAINTEXT://127.0.0.1:0", "--override",
             "metrics.prometheus.listener="],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=log_file, text=True)
        try:
            assert "listening on" in proc.stdout.readline()
            cfg.write_text(cfg.read_text().replace("logger.odradek.server: INFO", "logger.odradek.server: DEBUG"))
            proc.send_signal(signal.SIGHUP)
            deadline = time.time() + 20
            while time.time() < deadline and "SIGHUP: log levels reloaded" not in log_path.read_text():
                time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)
    err = log_path.read_text()
    assert "SIGHUP: log levels reloaded" in err and "odradek.server=DEBUG" in err


def test_verify_log_command(tmp_path):
    from broker import EmbeddedBroker
    from confluent_kafka import Producer

    with EmbeddedBroker(data_dir=tmp_path / "d") as b:
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(20):
            p.produce("v", value=b"x%d" % i)
        assert p.flush(10) == 0
    exe = Path(sys.executable).parent / "odradek"
    ok = subprocess.run([str(exe), "verify-log", str(tmp_path / "d")], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "OK" in ok.stdout
    seg = tmp_path / "d" / "v-0" / ("0" * 20 + ".log")
    data = bytearray(seg.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's CRC-covered bytes
    seg.write_bytes(bytes(data))
    bad = subprocess.run([str(exe), "verify-log", str(tmp_path / "d")], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "CORRUPT" in bad.stdout


def test_json_logging(tmp_path):
    import json

    exe = Path(sys.executable).parent / "odradek"
    proc = subprocess.Popen(
        [str(exe), "serve", "--config", str(REPO / "config" / "single-node.yaml"), "--override",
         "listeners=PLAINTEXT://127.0.0.1:0", "--override", "advertised.listeners=PLAINTEXT://127.0.0.1:0",
         "--override", "metrics.prometheus.listener=", "--override", "logging.format=json"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "listening on" in proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    lines = [json.loads(line) for line in proc.stderr.read().splitlines() if line.strip()]
    assert any(r["logger"] == "odradek.server" and "listening on" in r["message"] for r in lines)
    assert all({"ts", "level", "logger", "message"} <= set(r) for r in lines)


def test_help_lists_every_subcommand():
    exe = Path(sys.executable).parent / "odradek"
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60).stdout
    for command in ("serve", "format", "verify-log"):
        assert command in out


def _odradek(*args, cwd, timeout=60):
    exe = Path(sys.executable).parent / "odradek"
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_format_add_scram_bootstraps_credentials_a_single_node_logs_in_with(tmp_path):
    """KIP-900: ``--add-scram`` puts a UserScramCredentialRecord in bootstrap.checkpoint; the node commits it with
    the features, so a SCRAM client logs in without anyone having created the user; bad specs are refused without
    echoing the password."""
    from broker import EmbeddedBroker
    from broker.quorum.bootstrap_metadata import BootstrapError, parse_add_scram, read_bootstrap
    from tests.integration.test_sasl import SCRAM_JAAS, confluent_round_trip

    cfg = str(REPO / "config" / "single-node.yaml")
    out = _odradek("format", "--config", cfg, "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk", "--add-scram",
                   "SCRAM-SHA-512=[name=broker,password=broker-secret,iterations=8192]", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    _, records = read_bootstrap(tmp_path / "data")
    assert [(r.name, r.mechanism, r.iterations) for r in records] == [("broker", 2, 8192)]
    overrides = {"log.dirs": str(tmp_path / "data"), "cluster.id": "MkU3OEVBNTcwNTJENDM2Qk",
                 "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                 "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                 "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS}
    with EmbeddedBroker(data_dir=tmp_path / "data", overrides=overrides) as b:
        conf = {"bootstrap.servers": f"127.0.0.1:{b.broker.bound_port('SASL_PLAINTEXT')}",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "broker", "sasl.password": "broker-secret"}
        assert confluent_round_trip(conf, "bootstrapped", 3) == [b"v0", b"v1", b"v2"]
    for bad in ("SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256=[password=sekrit]",
                "SCRAM-SHA-256=[name=a,password=sekrit,iterations=100]", "SCRAM-SHA-256=[name=a]"):
        with pytest.raises(BootstrapError) as exc:
            parse_add_scram(bad)
        assert "sekrit" not in str(exc.value)


def test_format_writes_the_bootstrap_features_a_new_cluster_starts_with(tmp_path):
    from broker.quorum.bootstrap_metadata import read_bootstrap

    cfg = str(REPO / "config" / "single-node.yaml")
    out = _odradek("format", "--config", cfg, "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk", "--feature",
                   "group.version=0", "--feature", "share.version=0", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Formatting" in out.stdout and "bootstrap.checkpoint" in out.stdout
    features, _ = read_bootstrap(tmp_path / "data")
    assert features["metadata.version"] == 25 and "group.version" not in features  # level 0 is left out
    assert "share.version" not in features
    again = _odradek("format", "--config", cfg, "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk", cwd=tmp_path)
    assert again.returncode == 1 and "is already formatted. Use --ignore-formatted" in again.stderr
    assert _odradek("format", "--config", cfg, "--ignore-formatted", cwd=tmp_path).returncode == 0
    bad = _odradek("format", "--config", cfg, "--feature", "eligible.leader.replicas.version=1",
                   cwd=tmp_path / "data")
    assert bad.returncode == 1 and "Unsupported value 1 for eligible.leader.replicas.version" in bad.stderr
    unknown = _odradek("format", "--config", cfg, "--feature", "queue.version=1", cwd=tmp_path / "data")
    assert unknown.returncode == 1 and "Unsupported feature: queue.version" in unknown.stderr
    too_high = _odradek("format", "--config", cfg, "--feature", "share.version=2", cwd=tmp_path / "data")
    assert too_high.returncode == 1 and "Unsupported value 2 for share.version" in too_high.stderr

    # the node commits the formatted levels: group.version 0 means no KIP-848 consumer protocol finalized
    from broker import EmbeddedBroker

    with EmbeddedBroker(tmp_path / "data", overrides={"cluster.id": "MkU3OEVBNTcwNTJENDM2Qk"}) as b:
        assert b.broker.image.features.get("metadata.version") == 25
        assert "group.version" not in b.broker.image.features
        assert "share.version" not in b.broker.image.features  # share groups off: their APIs answer 35

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert _odradek("format", "--config", cfg, "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk", cwd=fresh).returncode == 0
    assert read_bootstrap(fresh / "data")[0]["share.version"] == 1  # new clusters get share groups, as Kafka 4.2


@pytest.mark.parametrize("override, message", [
    ("cluster.id=AAAAAAAAAAAAAAAAAAAAAA", "Invalid cluster.id in: {d}/meta.properties. Expected "
                                          "AAAAAAAAAAAAAAAAAAAAAA, but read MkU3OEVBNTcwNTJENDM2Qk"),
    ("node.id=7", "Stored node id 1 doesn't match previous node id 7 in {d}/meta.properties"),
])
def test_a_node_whose_meta_properties_name_another_cluster_or_node_refuses_to_start(tmp_path, override, message):
    cfg = str(REPO / "config" / "single-node.yaml")
    assert _odradek("format", "--config", cfg, "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qk", cwd=tmp_path).returncode == 0
    out = _odradek("serve", "--config", cfg, "--override", override, "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                   "--override", "metrics.prometheus.listener=", cwd=tmp_path)
    assert out.returncode == 1
    assert message.format(d=tmp_path / "data") in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL", "SASL_PLAINTEXT", "NOPROTOCOL"])
def test_serve_refuses_a_listener_it_cannot_serve_naming_it(tmp_path, listener):
    """Until TLS and SASL are built, a listener whose protocol is not PLAINTEXT (or that has none) stops the
    start with the listener named, instead of serving plaintext on it."""
    exe = Path(sys.executable).parent / "odradek"
    out = subprocess.run([str(exe), "serve", "--config", str(REPO / "config" / "single-node.yaml"),
                          "--override", f"listeners={listener}://127.0.0.1:0",
                          "--override", f"advertised.listeners={listener}://127.0.0.1:0",
                          "--override", "metrics.prometheus.listener="],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert f"listener {listener}" in out.stderr.replace("Listener", "listener"), out.stderr[-2000:]


def test_a_create_topics_sent_while_the_node_starts_succeeds(tmp_path):
    """A client that connects as soon as the port accepts (as bench_broker and scripts after `make run` do) and
    creates a topic at once: the node lets clients in only once its broker is unfenced, so the admin request
    neither finds no live broker (librdkafka then waits 30 s for a controller) nor an all-fenced cluster."""
    import socket
    import time

    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.harness import reserve_ports

    for attempt in range(3):
        port = reserve_ports(1)[0]
        proc = subprocess.Popen(
            [sys.executable, "-m", "broker.cli", "serve", "--config", str(REPO / "config" / "single-node.yaml"),
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", "metrics.prometheus.listener=", "--override", f"log.dirs={tmp_path / str(attempt)}"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.01)
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
            admin.create_topics([NewTopic("early", 1, 1)], request_timeout=20)["early"].result(timeout=20)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
