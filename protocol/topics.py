"""Kafka's internal topic names and ids, in one place (``org.apache.kafka.common.internals.Topic`` and
``Uuid.METADATA_TOPIC_ID``)."""

from __future__ import annotations

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
# Topic.INTERNAL_TOPICS: topics clients may not create or auto-create, flagged is_internal in Metadata
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})

# The KRaft metadata log: a partition on disk, never a topic in the metadata image
METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
METADATA_TOPIC_ID = bytes(15) + b"\x01"  # Uuid.METADATA_TOPIC_ID
