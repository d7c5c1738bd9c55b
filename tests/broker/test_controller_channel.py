"""The controller channel: client admin requests forwarded whole in an Envelope, the broker's own RPCs,
answers only after their records are committed, and bad envelopes refused without a state change."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random

from broker.clock import SYSTEM_CLOCK
from broker.controlplane.controller_channel import QuorumControllerChannel, envelope_for
from broker.quorum.metadata_publisher import MetadataPublisher
from cluster.controller import Controller
from protocol.connection import parse_request
from protocol.errors import ErrorCode
from protocol.generated.api_keys import APIS
from protocol.generated.messages import (
    AllocateProducerIdsRequest, BrokerRegistrationRequest, CreateTopicsRequest, DefaultPrincipalData, EnvelopeRequest,
    EnvelopeResponse, RequestHeader,
)
from protocol.generated.messages.broker_registration_request import Listener
from protocol.generated.messages.create_topics_request import CreatableTopic
from tests.broker.one_voter import VOTERS, one_voter_quorum

CLUSTER_ID = "q1-cluster-id-000000"


@dataclasses.dataclass
class _Ctx:
    """The parts of a RequestContext that forwarding reads."""

    request: object
    client_host: str
    principal: str = "User:ANONYMOUS"
    token_authenticated: bool = False

    @property
    def version(self) -> int:
        return self.request.api_version

    @property
    def client_id(self):
        return self.request.client_id


def _client_request(message, version: int, client_host: str = "127.0.0.1") -> _Ctx:
    spec = APIS[message.API_KEY]
    frame = RequestHeader(message.API_KEY, version, 7, "admin-1").encode(spec.request_header_version(version))
    return _Ctx(parse_request(frame + message.encode(version)), client_host)


async def _channel(tmp_path):
    """The channel of a single node: its controller over a quorum of one voter (it leads at once)."""
    publisher = MetadataPublisher()
    published = []

    async def record(image):
        published.append(image.offset)

    publisher.add(record)
    quorum = await one_voter_quorum(tmp_path, publisher, CLUSTER_ID)
    channel = QuorumControllerChannel(Controller(1, {"num.partitions": 2}, random.Random(3)), quorum, {},
                                      CLUSTER_ID, VOTERS, node_id=1, timeout_ms=30000)
    return channel, publisher, published, quorum


def _registration(epoch: int = -1) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(broker_id=1, cluster_id=CLUSTER_ID, incarnation_id=b"\x05" * 16,
                                     listeners=[Listener(name="PLAINTEXT", host="h", port=9092)], features=[],
                                     rack=None, log_dirs=[], previous_broker_epoch=epoch)


def test_forwarded_create_topics_is_answered_after_its_records_are_published(tmp_path):
    async def scenario():
        channel, publisher, published, log = await _channel(tmp_path)
        reg = await channel.call(_registration())
        assert reg.error_code == 0 and reg.broker_epoch >= 0
        before = len(published)
        req = CreateTopicsRequest(topics=[CreatableTopic(name="orders", num_partitions=3, replication_factor=1)],
                                  timeout_ms=1000)
        resp = await channel.forward(_client_request(req, 7), req)
        assert [t.name for t in resp.topics] == ["orders"] and resp.topics[0].error_code == 0
        assert resp.topics[0].num_partitions == 3
        # the answer came after the image with the topic was published to the node
        assert len(published) == before + 1
        assert publisher.image.topic("orders") is not None
        assert publisher.image.topic("orders").topic_id == resp.topics[0].topic_id
        again = await channel.forward(_client_request(req, 7), req)
        assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        await log.stop()

    asyncio.run(scenario())


def test_validate_only_and_errors_commit_nothing(tmp_path):
    async def scenario():
        channel, publisher, published, log = await _channel(tmp_path)
        await channel.call(_registration())
        end = log.end_offset
        req = CreateTopicsRequest(topics=[CreatableTopic(name="dry", num_partitions=1, replication_factor=1)],
                                  validate_only=True)
        resp = await channel.forward(_client_request(req, 5), req)
        assert resp.topics[0].error_code == 0
        bad = CreateTopicsRequest(topics=[CreatableTopic(name="bad/name", num_partitions=1, replication_factor=1)])
        resp = await channel.forward(_client_request(bad, 5), bad)
        assert resp.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert log.end_offset == end and publisher.image.topic("dry") is None
        await log.stop()

    asyncio.run(scenario())


def test_bad_envelopes_are_refused_without_a_state_change(tmp_path):
    async def scenario():
        channel, publisher, published, log = await _channel(tmp_path)
        end, image = log.end_offset, publisher.image
        good = envelope_for(_client_request(CreateTopicsRequest(topics=[CreatableTopic(
            name="x", num_partitions=1, replication_factor=1)]), 7), CreateTopicsRequest(topics=[CreatableTopic(
                name="x", num_partitions=1, replication_factor=1)]))
        cases = [
            EnvelopeRequest(request_data=b"\x00\x13", request_principal=good.request_principal),  # short header
            EnvelopeRequest(request_data=good.request_data[:-3], request_principal=good.request_principal),
            EnvelopeRequest(request_data=good.request_data, request_principal=b"\xff\xff\xff"),  # bad principal
            # an API the controller does not serve (Produce)
            EnvelopeRequest(request_data=RequestHeader(0, 9, 1, "c").encode(1) + b"\x00" * 8,
                            request_principal=good.request_principal),
        ]
        for envelope in cases:
            resp = await channel.handle_envelope(envelope)
            assert resp.error_code == ErrorCode.INVALID_REQUEST
        assert log.end_offset == end and publisher.image is image
        await log.stop()

    asyncio.run(scenario())


def test_an_envelope_carries_the_clients_principal_its_token_flag_and_address():
    """DefaultKafkaPrincipalBuilder.serialize: type and name (a certificate DN keeps its commas and colons)."""
    req = CreateTopicsRequest(topics=[CreatableTopic(name="x", num_partitions=1, replication_factor=1)])
    ctx = _client_request(req, 7, client_host="10.1.2.3")
    ctx.principal, ctx.token_authenticated = "User:CN=app:1,O=tests", True
    envelope = envelope_for(ctx, req)
    principal = DefaultPrincipalData.decode(envelope.request_principal, 0)
    assert (principal.type, principal.name, principal.token_authenticated) == ("User", "CN=app:1,O=tests", True)
    assert envelope.client_host_address == bytes([10, 1, 2, 3])


def test_a_failed_envelope_answers_the_client_unknown_server_error_in_its_requests_shape(tmp_path):
    """ForwardingManager: an Envelope error (e.g. this node's principal lacks CLUSTER_ACTION at the controller) is
    the brokers' misconfiguration; the client's request gets UNKNOWN_SERVER_ERROR, its connection stays open."""
    async def scenario():
        channel, publisher, published, log = await _channel(tmp_path)

        async def refused(envelope):
            return EnvelopeResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)

        channel.send_envelope = refused
        req = CreateTopicsRequest(topics=[CreatableTopic(name="a", num_partitions=1, replication_factor=1),
                                          CreatableTopic(name="b", num_partitions=1, replication_factor=1)])
        resp = await channel.forward(_client_request(req, 7), req)
        assert [(t.name, t.error_code) for t in resp.topics] == [("a", ErrorCode.UNKNOWN_SERVER_ERROR),
                                                                 ("b", ErrorCode.UNKNOWN_SERVER_ERROR)]
        assert publisher.image.topic("a") is None
        await log.stop()

    asyncio.run(scenario())


def test_a_request_failing_its_own_checks_closes_the_connection_before_it_is_forwarded(tmp_path, monkeypatch):
    """A handler's ``validate_request`` (Kafka's request-class checks, e.g. CreateAclsRequest.validate) runs as the
    broker takes the request: a failure closes the client's connection and nothing is forwarded."""
    from broker.controlplane.controller_apis import k19_create_topics
    from broker.errors import CloseConnection

    def validate(request):
        raise ValueError("CreatableTopic contains unknown elements")

    monkeypatch.setattr(k19_create_topics, "validate_request", validate, raising=False)

    async def scenario():
        channel, publisher, published, log = await _channel(tmp_path)
        sent = []

        async def send(envelope):
            sent.append(envelope)

        channel.send_envelope = send
        req = CreateTopicsRequest(topics=[CreatableTopic(name="x", num_partitions=1, replication_factor=1)])
        try:
            await channel.forward(_client_request(req, 7), req)
            raise AssertionError("forwarded")
        except CloseConnection as exc:
            assert "unknown elements" in str(exc)
        assert sent == []
        await log.stop()

    asyncio.run(scenario())


def test_before_the_first_image_only_super_users_are_answered(tmp_path):
    """StandardAuthorizer before its initial load (AuthorizerNotReadyException): a forwarded request of anyone but a
    super user is answered UNKNOWN_SERVER_ERROR in its own shape, the super user's is decided."""
    from broker.security.authorization import NodeAuthorizer
    from cluster.authorizer import StandardAuthorizer

    async def scenario():
        channel, publisher, published, log = await _channel(tmp_path)
        await channel.call(_registration())  # this node's own broker: nothing to authorize
        channel.authorizer = NodeAuthorizer(StandardAuthorizer(frozenset({"User:admin"})))
        req = CreateTopicsRequest(topics=[CreatableTopic(name="early", num_partitions=1, replication_factor=1)])
        answers = {}
        for principal in ("User:someone", "User:admin"):
            ctx = _client_request(req, 7)
            ctx.principal = principal
            answers[principal] = (await channel.forward(ctx, req)).topics[0].error_code
        assert answers == {"User:someone": ErrorCode.UNKNOWN_SERVER_ERROR, "User:admin": 0}
        await log.stop()

    asyncio.run(scenario())


def test_registration_epoch_and_producer_id_blocks(tmp_path):
    async def scenario():
        channel, publisher, published, log = await _channel(tmp_path)
        first = await channel.call(_registration())
        same = await channel.call(_registration(first.broker_epoch))
        assert same.broker_epoch == first.broker_epoch  # nothing changed: no new record, same epoch
        other = _registration()
        other.cluster_id = "another-cluster-id-00"
        assert (await channel.call(other)).error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
        a = await channel.call(AllocateProducerIdsRequest(broker_id=1, broker_epoch=first.broker_epoch))
        b = await channel.call(AllocateProducerIdsRequest(broker_id=1, broker_epoch=first.broker_epoch))
        assert a.error_code == b.error_code == 0
        assert b.producer_id_start == a.producer_id_start + a.producer_id_len
        stale = await channel.call(AllocateProducerIdsRequest(broker_id=1, broker_epoch=first.broker_epoch - 1))
        assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
        unknown = await channel.call(AllocateProducerIdsRequest(broker_id=9, broker_epoch=0))
        assert unknown.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED
        await log.stop()

    asyncio.run(scenario())


# ---- the broker lifecycle RPCs, through the channel ----------------------------------------------------------------

def test_broker_heartbeats_unfence_and_stale_epochs_change_nothing(tmp_path):
    """BrokerHeartbeat: a registered broker that has caught up is unfenced; a heartbeat from an old incarnation
    (stale broker epoch) or an unknown broker is STALE_BROKER_EPOCH and commits nothing."""
    from protocol.generated.messages import BrokerHeartbeatRequest

    async def run():
        channel, publisher, published, log = await _channel(tmp_path)
        epoch = (await channel.call(_registration())).broker_epoch
        reply = await channel.call(BrokerHeartbeatRequest(broker_id=1, broker_epoch=epoch,
                                                          current_metadata_offset=publisher.image.offset))
        assert (reply.error_code, reply.is_caught_up, reply.is_fenced) == (0, True, False)
        before = publisher.image.offset
        for broker_id, broker_epoch in ((1, epoch - 1), (7, 0)):
            reply = await channel.call(BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=broker_epoch,
                                                              current_metadata_offset=before))
            assert reply.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert publisher.image.offset == before
        await log.stop()

    asyncio.run(run())


def test_alter_partition_and_unregister_reject_bad_input(tmp_path):
    """AlterPartition from a broker that does not lead the partition, or with a stale epoch, and UnregisterBroker
    of an unknown id: Kafka's errors, nothing committed."""
    from protocol.generated.messages import AlterPartitionRequest, UnregisterBrokerRequest
    from protocol.generated.messages.alter_partition_request import BrokerState, PartitionData, TopicData
    from protocol.generated.messages.create_topics_request import CreatableTopic as Topic

    async def run():
        channel, publisher, published, log = await _channel(tmp_path)
        epoch = (await channel.call(_registration())).broker_epoch
        await channel.call(CreateTopicsRequest(topics=[Topic(name="ap", num_partitions=1, replication_factor=1)],
                                               timeout_ms=1000))
        topic = publisher.image.topic("ap")
        before = publisher.image.offset

        def request(broker_epoch, leader_epoch=0, isr=(1,)):
            return AlterPartitionRequest(broker_id=1, broker_epoch=broker_epoch, topics=[TopicData(
                topic_id=topic.topic_id, partitions=[PartitionData(
                    partition_index=0, leader_epoch=leader_epoch, partition_epoch=0, leader_recovery_state=0,
                    new_isr_with_epochs=[BrokerState(broker_id=r, broker_epoch=-1) for r in isr])])])

        assert (await channel.call(request(epoch - 1))).error_code == ErrorCode.STALE_BROKER_EPOCH
        resp = await channel.call(request(epoch, leader_epoch=-1))
        assert resp.topics[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
        resp = await channel.call(request(epoch, isr=(1, 5)))
        assert resp.topics[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
        resp = await channel.call(request(epoch))  # the same ISR: accepted, nothing to change
        assert resp.topics[0].partitions[0].error_code == 0 and resp.topics[0].partitions[0].isr == [1]
        resp = await channel.call(UnregisterBrokerRequest(broker_id=42))
        assert resp.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED
        assert publisher.image.offset == before
        await log.stop()

    asyncio.run(run())


def test_a_request_to_a_controller_the_quorum_has_replaced_goes_to_the_new_one(tmp_path, caplog):
    """A paused old controller holds the request: once the quorum names a new leader the channel sends it there
    (a broker's heartbeats must not wait out request.timeout.ms while its session expires), and says so in one
    line (the trace of a request in flight across a failover); a request answered at the first try says nothing."""
    from protocol.generated.messages import BrokerHeartbeatRequest, BrokerHeartbeatResponse, ResponseHeader

    async def run():
        got = []

        async def silent(reader, writer):  # node 1: SIGSTOPped, reads nothing, answers nothing
            await asyncio.sleep(60)

        async def answering(reader, writer):  # node 2: the new controller
            for _ in range(2):
                size = await reader.readexactly(4)
                frame = await reader.readexactly(int.from_bytes(size, "big"))
                got.append(frame)
                version = int.from_bytes(frame[2:4], "big")
                body = ResponseHeader(correlation_id=int.from_bytes(frame[4:8], "big")).encode(1) + \
                    BrokerHeartbeatResponse(is_fenced=False).encode(version)
                writer.write(len(body).to_bytes(4, "big") + body)

        old = await asyncio.start_server(silent, "127.0.0.1", 0)
        new = await asyncio.start_server(answering, "127.0.0.1", 0)
        voters = {1: ("127.0.0.1", old.sockets[0].getsockname()[1]), 2: ("127.0.0.1", new.sockets[0].getsockname()[1])}

        class Driver:
            leader_id = 1
            changed = asyncio.Event()

            def leader_change(self):
                return self.changed

            def elect(self, leader_id):
                self.leader_id = leader_id
                self.changed.set()
                self.changed = asyncio.Event()

        class Quorum:
            driver = Driver()
            is_active = False
            clock = SYSTEM_CLOCK

        channel = QuorumControllerChannel(None, Quorum(), {}, CLUSTER_ID, voters, node_id=3, timeout_ms=30000)
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, Quorum.driver.elect, 2)
        started = loop.time()
        caplog.set_level(logging.INFO, logger="odradek.controller_channel")
        response = await channel.call(BrokerHeartbeatRequest(broker_id=3, broker_epoch=5))
        assert response.is_fenced is False and len(got) == 1
        assert loop.time() - started < 2.0  # not the 30 s request timeout
        retried = [r.getMessage() for r in caplog.records if "answered by controller" in r.getMessage()]
        assert len(retried) == 1 and retried[0].startswith(
            "BrokerHeartbeatRequest answered by controller 2 after 1 failed attempt(s)"), retried
        assert "the quorum moved on from node 1" in retried[0]
        caplog.clear()
        await channel.call(BrokerHeartbeatRequest(broker_id=3, broker_epoch=5), timeout_ms=5000)
        assert len(got) == 2 and not [r for r in caplog.records if "answered by controller" in r.getMessage()]
        await channel.close()
        old.close()
        new.close()

    asyncio.run(run())
