"""Connection quotas on the wire (issue 29; Kafka's ConnectionQuotas, KIP-402, KIP-612) on an in-process node
with two listeners, EXTERNAL and the inter-broker REPLICATION, raw sockets from loopback source addresses
(127.0.0.2, 127.0.0.3: Linux routes all of 127/8) and real clients from 127.0.0.1:

* ``max.connections.per.ip`` and its overrides: the connection past the limit is closed at once, unanswered;
* the IP ``connection_creation_rate`` client quota (AlterClientQuotas): connections beyond it are held, unread,
  and closed; ``ip-connection-accept-throttle-time`` notes it;
* ``max.connection.creation.rate``: connections beyond it are delayed, not closed (every one is answered), and
  the inter-broker listener is not held by the broker-wide rate;
* ``max.connections``: a connection past it waits for a slot, the inter-broker listener is exempt and its
  connection past the limit closes the least recently used EXTERNAL one;
* dynamic changes (IncrementalAlterConfigs at the cluster default and per broker, the broker's own winning) and
  their refusals; a kafka-python producer and consumer beside them keep working.

Nothing here measures time: a delay is seen as a connection answered after others were held, a throttle in the
metrics."""

from __future__ import annotations

import gc
import math
import socket
import struct

import pytest

from broker import EmbeddedBroker
from tests.harness import wait_until
from tests.integration.test_quotas import alter as alter_client_quotas
from tests.kafka_wire import KafkaWire

API_VERSIONS_V0 = b"\x00\x00\x00\x0c\x00\x12\x00\x00\x00\x00\x00\x07\x00\x00\x00\x00"
TWO_LISTENERS = {"listeners": "EXTERNAL://127.0.0.1:0,REPLICATION://127.0.0.1:0",
                 "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,REPLICATION:PLAINTEXT",
                 "inter.broker.listener.name": "REPLICATION",
                 "quota.window.num": 2, "quota.window.size.seconds": 1}  # a rate is measured over >= 1 s
PREFIX = "kafka_server_socketservermetrics_"


@pytest.fixture
def open_sockets():
    socks: list[socket.socket] = []
    yield socks
    for s in socks:
        s.close()


def connect(b: EmbeddedBroker, socks: list, source: str = "127.0.0.1", listener: str = "EXTERNAL",
            request: bool = True) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", b.broker.bound_port(listener)), timeout=15,
                                 source_address=(source, 0))
    socks.append(s)
    if request:
        s.sendall(API_VERSIONS_V0)
    return s


def answered(s: socket.socket) -> bool:
    """True: an ApiVersions answer came (read whole); False: the broker closed the connection unanswered."""
    try:
        head = s.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            return False
        size = struct.unpack(">i", head)[0]
        return len(s.recv(size, socket.MSG_WAITALL)) == size
    except (ConnectionResetError, BrokenPipeError):
        return False


def ask(s: socket.socket) -> bool:
    s.sendall(API_VERSIONS_V0)
    return answered(s)


def round_trip(b: EmbeddedBroker, topic: str) -> None:
    """A kafka-python producer and consumer (from 127.0.0.1) work beside the limited connections."""
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=b.bootstrap)
    try:
        producer.send(topic, b"unharmed").get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=20000)
    try:
        assert next(iter(consumer)).value == b"unharmed"  # StopIteration after 20 s without it
    finally:
        consumer.close()


def metric(b: EmbeddedBroker, name: str, **labels) -> float | None:
    return b.broker.metrics.registry.get_sample_value(name, labels)


def alter_cluster_default(b: EmbeddedBroker, settings: dict) -> tuple[int, str | None]:
    return alter_broker(b, "", settings)


def alter_broker(b: EmbeddedBroker, name: str, settings: dict, listener: str = "EXTERNAL") -> tuple[int, str | None]:
    """IncrementalAlterConfigs of BROKER ``name`` over the wire (librdkafka sends none without a name)."""
    from protocol.generated.messages import IncrementalAlterConfigsRequest
    from protocol.generated.messages import incremental_alter_configs_request as iac

    with KafkaWire(b.broker.bound_port(listener)) as wire:
        answer = wire.call(44, 1, IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
            resource_type=4, resource_name=name, configs=[iac.AlterableConfig(
                name=k, config_operation=1 if v is None else 0, value=v) for k, v in settings.items()])]))
    return answer.responses[0].error_code, answer.responses[0].error_message


def test_per_ip_limit_and_override_close_the_connection_past_them(tmp_path, open_sockets):
    overrides = {**TWO_LISTENERS, "max.connections.per.ip": 2,
                 "max.connections.per.ip.overrides": "127.0.0.3:4,127.0.0.1:100"}
    with EmbeddedBroker(data_dir=tmp_path, overrides=overrides) as b:
        default_ip = [connect(b, open_sockets, "127.0.0.2") for _ in range(3)]
        assert [answered(s) for s in default_ip] == [True, True, False]
        # per IP across listeners: the inter-broker listener counts too
        assert not answered(connect(b, open_sockets, "127.0.0.2", "REPLICATION"))
        overridden = [connect(b, open_sockets, "127.0.0.3") for _ in range(5)]
        assert [answered(s) for s in overridden] == [True] * 4 + [False]
        quotas = b.broker.server.quotas.plane("EXTERNAL")
        wait_until(lambda: quotas.get("127.0.0.2") == 2 and quotas.get("127.0.0.3") == 4, 15, what="the counts")
        default_ip[0].close()  # a closed connection frees its place
        wait_until(lambda: quotas.get("127.0.0.2") == 1, 15, what="the count to drop")
        assert answered(connect(b, open_sockets, "127.0.0.2"))
        round_trip(b, "per-ip")


def test_ip_connection_creation_rate_closes_the_connections_beyond_it(tmp_path, open_sockets):
    with EmbeddedBroker(data_dir=tmp_path, overrides=TWO_LISTENERS) as b:
        assert alter_client_quotas(b.bootstrap, {"ip": "127.0.0.2"}, {"connection_creation_rate": 1}) == \
            [(0, None)]
        quotas = b.broker.server.quotas.plane("EXTERNAL")
        wait_until(lambda: quotas.connection_rate_for_ip("127.0.0.2") == 1, 15, what="the IP quota")
        # one a second, measured over at least one second: of five at once, the first is served and the later
        # ones are held (never read) and then closed
        burst = [connect(b, open_sockets, "127.0.0.2") for _ in range(5)]
        results = [answered(s) for s in burst]
        assert results[0] and not all(results), results
        assert metric(b, PREFIX + "ip_connection_accept_throttle_time", listener="EXTERNAL") > 0
        assert metric(b, PREFIX + "connection_accept_rate", ip="127.0.0.2") > 0
        assert quotas.get("127.0.0.2") == results.count(True)  # a throttled one is never counted
        # another IP has no quota; a default for every IP, with 127.0.0.1 excepted, is applied the same way
        assert all(answered(connect(b, open_sockets, "127.0.0.3")) for _ in range(5))
        assert alter_client_quotas(b.bootstrap, {"ip": None}, {"connection_creation_rate": 1}) == [(0, None)]
        assert alter_client_quotas(b.bootstrap, {"ip": "127.0.0.1"}, {"connection_creation_rate": 1000}) == \
            [(0, None)]
        wait_until(lambda: quotas.connection_rate_for_ip("127.0.0.4") == 1, 15, what="the default IP quota")
        results = [answered(connect(b, open_sockets, "127.0.0.4")) for _ in range(5)]
        assert results[0] and not all(results), results
        round_trip(b, "ip-rate")


def test_creation_rate_delays_connections_and_spares_the_inter_broker_listener(tmp_path, open_sockets):
    overrides = {**TWO_LISTENERS, "max.connection.creation.rate": 1,
                 "listener.name.replication.max.connection.creation.rate": 1000}
    with EmbeddedBroker(data_dir=tmp_path, overrides=overrides) as b:
        external = [connect(b, open_sockets) for _ in range(4)]
        assert all(answered(s) for s in external)  # delayed, never closed
        assert metric(b, PREFIX + "connection_accept_throttle_time", listener="EXTERNAL") > 0
        assert metric(b, "kafka_network_acceptor_acceptorblockedpercent_total", listener="EXTERNAL") > 0
        # the broker-wide rate is spent; the inter-broker listener counts only against its own
        replication = [connect(b, open_sockets, listener="REPLICATION") for _ in range(4)]
        assert all(answered(s) for s in replication)
        assert math.isnan(metric(b, PREFIX + "connection_accept_throttle_time", listener="REPLICATION"))
        assert not metric(b, "kafka_network_acceptor_acceptorblockedpercent_total", listener="REPLICATION")
        assert metric(b, PREFIX + "broker_connection_accept_rate") > 0
        round_trip(b, "rate")


def test_max_connections_waits_for_a_slot_and_the_inter_broker_listener_is_exempt(tmp_path, open_sockets):
    with EmbeddedBroker(data_dir=tmp_path, overrides={**TWO_LISTENERS, "max.connections": 3}) as b:
        server = b.broker.server
        quotas = server.quotas.plane("EXTERNAL")
        first, second, third = (connect(b, open_sockets) for _ in range(3))
        assert all(answered(s) for s in (first, second, third))
        waiting = connect(b, open_sockets)  # the kernel completes it; the acceptor holds it for a slot
        wait_until(lambda: server._slot_waiters and quotas.total == 3, 15, what="the acceptor to wait")
        assert ask(second) and ask(third)  # the first is now the least recently used
        # past the limit on the inter-broker listener: served, and the LRU EXTERNAL connection is closed
        assert answered(connect(b, open_sockets, listener="REPLICATION"))
        assert not answered(first)
        wait_until(lambda: quotas.total == 3 and server._slot_waiters, 15, what="three counted, one waiting")
        second.close()  # a slot: the waiting connection is served, its request answered
        assert answered(waiting)
        assert quotas.total == 3


def test_dynamic_changes_at_both_levels_and_their_refusals(tmp_path, open_sockets):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType,
    )

    with EmbeddedBroker(data_dir=tmp_path, overrides=TWO_LISTENERS) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        node = str(b.broker.node_id)
        live = b.broker.server.quotas

        def alter(name: str, settings: dict) -> None:
            if name == "":  # librdkafka sends no BROKER resource without a name: the raw request
                assert alter_cluster_default(b, settings) == (0, None)
                return
            resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[ConfigEntry(
                k, v, incremental_operation=AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET)
                for k, v in settings.items()])
            admin.incremental_alter_configs([resource])[resource].result(timeout=30)

        def refused(settings: dict) -> tuple[str, str]:
            with pytest.raises(KafkaException) as e:
                alter(node, settings)
            return e.value.args[0].name(), e.value.args[0].str()

        oldest = [connect(b, open_sockets, "127.0.0.2") for _ in range(3)]
        assert all(answered(s) for s in oldest)
        alter("", {"max.connections.per.ip": "4", "max.connections.per.ip.overrides": "127.0.0.1:100"})
        wait_until(lambda: live.values.get("max.connections.per.ip") == 4, 15, what="the cluster default")
        assert [answered(connect(b, open_sockets, "127.0.0.2")) for _ in range(2)] == [True, False]
        alter(node, {"max.connections.per.ip": "5"})  # the broker's own wins over the cluster default
        wait_until(lambda: live.values.get("max.connections.per.ip") == 5, 15, what="the broker's own")
        described = admin.describe_configs([ConfigResource(ResourceType.BROKER, node)])
        entry = next(iter(described.values())).result(timeout=30)["max.connections.per.ip"]
        assert (entry.value, entry.source, entry.is_read_only) == ("5", ConfigSource.DYNAMIC_BROKER_CONFIG.value,
                                                                    False)
        assert [answered(connect(b, open_sockets, "127.0.0.2")) for _ in range(2)] == [True, False]
        alter(node, {"max.connections.per.ip": None})
        alter("", {"max.connections.per.ip": None, "max.connections.per.ip.overrides": None})
        wait_until(lambda: live.values.get("max.connections.per.ip") == 2**31 - 1, 15, what="no limit")
        assert all(answered(connect(b, open_sockets, "127.0.0.2")) for _ in range(3))

        assert refused({"listener.name.external.max.connections": "0"}) == \
            ("INVALID_REQUEST", "Invalid dynamic configuration")
        assert refused({"max.connections": "abc"}) == \
            ("INVALID_REQUEST", "Invalid value abc for configuration max.connections: Not a number of type INT")
        assert refused({"max.connections.per.ip": "0"})[0] == "INVALID_REQUEST"  # 0 only with overrides
        assert alter_cluster_default(b, {"listener.name.external.max.connection.creation.rate": "-1"}) == \
            (42, "Invalid dynamic configuration")

        alter(node, {"listener.name.external.max.connection.creation.rate": "1000"})
        wait_until(lambda: live.plane("EXTERNAL").listeners["EXTERNAL"].rate_bound == 1000, 15,
                   what="the listener's rate")

        # a lowered max.connections closes the least recently used connections over it; the admin client's
        # connections go first, so that only this test's (from 127.0.0.2) are left
        admin = None  # librdkafka closes its connections when destroyed
        gc.collect()
        plane = live.plane("EXTERNAL")
        wait_until(lambda: plane.get("127.0.0.1") == 0, 30, what="the admin client's connections to go")
        open_now = plane.total
        assert alter_broker(b, node, {"max.connections": str(open_now - 2)}) == (0, None)
        assert not answered(oldest[0]) and not answered(oldest[1])
        wait_until(lambda: plane.total <= open_now - 2, 15, what="the count under the new limit")
        # the EXTERNAL listener is full now; the inter-broker one is not held by the broker-wide limit
        assert alter_broker(b, node, {"max.connections": None}, "REPLICATION") == (0, None)
        wait_until(lambda: plane.max_connections == 2**31 - 1, 15, what="no limit again")
        round_trip(b, "dynamic")
