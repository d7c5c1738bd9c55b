"""ElectLeaders through confluent-kafka's admin client: forwarded to the controller, Kafka's per-partition answers."""

from __future__ import annotations

import confluent_kafka
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker import EmbeddedBroker


def test_preferred_election_is_not_needed_where_the_preferred_replica_leads(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path / "d") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("el", 2, 1)])["el"].result(15)
        result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("el", 0), TopicPartition("el", 1),
                                                              TopicPartition("el", 7)]).result(15)
        codes = {tp.partition: (err.code() if err is not None else None) for tp, err in result.items()}
        assert codes == {0: confluent_kafka.KafkaError.ELECTION_NOT_NEEDED,
                         1: confluent_kafka.KafkaError.ELECTION_NOT_NEEDED,
                         7: confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART}
        # nothing needed electing: no leader epoch moved
        assert b.broker.image.topic("el").partitions[0].leader_epoch == 0
