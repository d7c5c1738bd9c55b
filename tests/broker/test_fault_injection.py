"""The test-only fault hook (broker/network/fault_injection.py): off by default, refused next to a non-loopback
listener, rules read again when the file changes, and a dropped peer's requests time out as over a cut link while
others' go through."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest

from broker.config import BrokerConfig, ConfigException
from broker.network.fault_injection import CONFIG_KEY, FaultRules, FaultRulesFile
from broker.network.node_client import NodeClient
from protocol.generated.messages import ApiVersionsRequest, ApiVersionsResponse, ResponseHeader


def test_refused_next_to_a_non_loopback_listener(tmp_path):
    hook = {CONFIG_KEY: str(tmp_path / "faults.json")}
    BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", **hook}).validate()
    BrokerConfig({"listeners": "PLAINTEXT://localhost:0", **hook}).validate()
    for listeners in ("PLAINTEXT://0.0.0.0:9092", "PLAINTEXT://:9092", "PLAINTEXT://10.231.0.1:9092"):
        with pytest.raises(ConfigException, match=CONFIG_KEY):
            BrokerConfig({"listeners": listeners, **hook}).validate()
    with pytest.raises(ConfigException, match="non-loopback"):
        BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0",
                      "advertised.listeners": "PLAINTEXT://broker.example:9092", **hook}).validate()
    BrokerConfig({"listeners": "PLAINTEXT://0.0.0.0:9092"}).validate()  # off: nothing to refuse


def test_rules_follow_the_file(tmp_path):
    path = tmp_path / "faults.json"
    rules = FaultRules()
    watcher = FaultRulesFile(str(path), rules)
    watcher.load()
    assert not rules.blocks(2) and rules.delay_s(2) == 0  # no file: no faults
    path.write_text(json.dumps({"drop": [2, 3], "delay_ms": {"1": 250}}))
    watcher.load()
    assert rules.blocks(2) and rules.blocks(3) and not rules.blocks(1) and not rules.blocks(None)
    assert rules.delay_s(1) == 0.25
    path.write_text("{not json")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    watcher.load()  # unreadable: logged, the rules stay as they were
    assert rules.blocks(2)
    path.unlink()
    watcher.load()
    assert not rules.blocks(2) and rules.delay_s(1) == 0


def test_a_dropped_peer_times_out_and_healing_lets_requests_through(tmp_path):
    async def run():
        async def answer(reader, writer):  # a peer that answers ApiVersions at once, when reached
            try:
                while True:
                    size = await reader.readexactly(4)
                    frame = await reader.readexactly(int.from_bytes(size, "big"))
                    body = ResponseHeader(correlation_id=int.from_bytes(frame[4:8], "big")).encode(0) + \
                        ApiVersionsResponse(error_code=0, api_keys=[]).encode(3)
                    writer.write(len(body).to_bytes(4, "big") + body)
            except asyncio.IncompleteReadError:
                writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        rules = FaultRules()
        client = NodeClient("127.0.0.1", port, "fault-test", peer=2, faults=rules)
        try:
            await client.request(ApiVersionsRequest(), 3, 2.0)  # reachable
            rules.set(drop=[2])
            started = time.monotonic()
            with pytest.raises(asyncio.TimeoutError):
                await client.request(ApiVersionsRequest(), 3, 0.3)
            assert time.monotonic() - started >= 0.3  # the caller's own timeout, as over a cut link
            rules.set()
            await client.request(ApiVersionsRequest(), 3, 2.0)
            rules.set(delay_ms={2: 200})
            started = time.monotonic()
            await client.request(ApiVersionsRequest(), 3, 2.0)
            assert time.monotonic() - started >= 0.2
        finally:
            await client.close()
            server.close()

    asyncio.run(run())


def test_drops_can_be_narrowed_to_api_keys(tmp_path):
    path = tmp_path / "faults.json"
    rules = FaultRules()
    watcher = FaultRulesFile(str(path), rules)
    path.write_text(json.dumps({"drop": [1], "drop_api_keys": [1]}))
    watcher.load()
    assert rules.blocks(1, 1) and not rules.blocks(1, 63) and not rules.blocks(2, 1)
    path.write_text(json.dumps({"drop": [1]}))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    watcher.load()
    assert rules.blocks(1, 1) and rules.blocks(1, 63)
