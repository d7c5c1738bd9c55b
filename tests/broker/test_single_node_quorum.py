"""A single node is a quorum of one voter: it has the metadata log's snapshots and retention (with small
thresholds it writes snapshots, retention deletes the log before one, a restart loads the image from it), and
start() returns ready for a CreateTopics."""

from __future__ import annotations

from broker.testing.embedded import EmbeddedBroker
from broker.quorum.kraft_log import CHECKPOINT_SUFFIX
from protocol.generated.messages import CreateTopicsRequest
from protocol.generated.messages.create_topics_request import CreatableTopic
from tests.harness import wait_until
from tests.kafka_wire import KafkaWire

SMALL = {"metadata.log.max.record.bytes.between.snapshots": 4096, "metadata.log.segment.bytes": 8192,
         "metadata.max.retention.bytes": 0}  # every new snapshot lets retention delete the log before it


def test_a_single_node_snapshots_cleans_its_log_and_restarts_from_the_snapshot(tmp_path):
    data = tmp_path / "data"
    names = [f"topic-{i}" for i in range(150)]
    with EmbeddedBroker(data_dir=data, overrides=SMALL) as b:
        node = b.broker
        with KafkaWire(b.port) as w:
            for name in names:  # answered once committed
                response = w.call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(
                    name=name, num_partitions=1, replication_factor=1)], timeout_ms=5000))
                assert response.topics[0].error_code == 0
        raft = node.raft
        wait_until(lambda: raft.snapshots_written >= 2 and raft.log.start_offset > 0, 30, 0.05,
                   "two snapshots and the log before one deleted")
        start, image = raft.log.start_offset, node.image
    snapshots = sorted((data / "__cluster_metadata-0").glob(f"*{CHECKPOINT_SUFFIX}"))
    assert snapshots and int(snapshots[-1].name.split("-")[0]) >= start
    with EmbeddedBroker(data_dir=data, overrides=SMALL) as again:
        assert again.broker.raft.log.start_offset > 0  # what retention deleted stays deleted
        assert again.broker.raft.log.latest_snapshot is not None
        assert set(again.broker.image.topics_by_name) >= set(names)
        assert again.broker.image.topics_by_name.keys() == image.topics_by_name.keys()


def test_a_create_topics_sent_as_soon_as_start_returns_succeeds(tmp_path):
    """start() returns once the node's broker is unfenced: its first CreateTopics (fresh, and after each
    restart on the same directory) finds a broker to place the partitions on."""
    data = tmp_path / "data"
    for start in range(3):
        with EmbeddedBroker(data_dir=data) as b, KafkaWire(b.port) as w:
            response = w.call(19, 7, CreateTopicsRequest(topics=[CreatableTopic(
                name=f"first-{start}", num_partitions=2, replication_factor=1)], timeout_ms=5000))
            assert response.topics[0].error_code == 0, (start, response.topics[0])


def test_an_answer_waits_for_this_nodes_publish_at_most_publish_wait_s(tmp_path, monkeypatch):
    """A committed change is answered once this node's parts have it, or PUBLISH_WAIT_S after the commit when
    they take longer (the logs of 10,000 new partitions): committed is what Kafka's controller answers at."""
    import asyncio

    import broker.quorum.raft_quorum as raft_quorum
    from broker.quorum.metadata_publisher import MetadataPublisher
    from protocol.generated.metadata import TopicRecord
    from tests.broker.one_voter import one_voter_quorum

    monkeypatch.setattr(raft_quorum, "PUBLISH_WAIT_S", 0.3)

    async def run():
        publisher = MetadataPublisher()
        slow = asyncio.Event()
        quick = asyncio.Event()
        quick.set()

        async def part(image):
            if image.topic("slow") is not None:
                await slow.wait()
            await quick.wait()

        publisher.add(part)
        quorum = await one_voter_quorum(tmp_path, publisher)
        try:
            committed, offset = await quorum.append([TopicRecord(name="fast", topic_id=b"\x01" * 16)])
            await asyncio.wait_for(committed, 5)
            assert publisher.image.topic("fast") is not None  # answered once published here

            committed, offset = await quorum.append([TopicRecord(name="slow", topic_id=b"\x02" * 16)])
            image = await asyncio.wait_for(committed, 5)  # the part never finishes: answered after 0.3 s
            assert image.topic("slow") is not None and publisher.image.topic("slow") is None
            assert quorum.image.offset >= offset
        finally:
            slow.set()
            await quorum.stop()

    asyncio.run(run())
