"""`odradek serve` as `make run` starts it: config file, --override, relative log.dirs, SIGTERM."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

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
