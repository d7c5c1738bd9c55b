"""The KRaft controller's decisions, as pure functions of (image, request) -> (records, response).

``controller.py`` is the facade the broker calls; the managers beside it each own one part of Kafka's
QuorumController (replica placement, partition changes, ...).
"""

from cluster.controller.controller import (
    BOOTSTRAP_FEATURES, METADATA_VERSION, PRODUCER_ID_BLOCK_SIZE, SUPPORTED_FEATURES, Controller, ControllerResult,
    NewTopic, Randomness, TopicResult, random_topic_id, validate_topic_name,
)

__all__ = [
    "BOOTSTRAP_FEATURES", "METADATA_VERSION", "PRODUCER_ID_BLOCK_SIZE", "SUPPORTED_FEATURES", "Controller",
    "ControllerResult", "NewTopic", "Randomness", "TopicResult", "random_topic_id", "validate_topic_name",
]
