"""CreateTopics on the controller (ControllerApis.createTopics / ReplicationControlManager.createTopics).

Per-topic errors (TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS,
INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, INVALID_REQUEST for duplicates);
validate_only answers without records; v5+ return topic id, partitions, replication factor and configs.
"""

from __future__ import annotations

from broker.config.config_describe import DEFAULT_CONFIG, TOPIC_CONFIG
from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult, NewTopic
from protocol.generated.messages import CreateTopicsRequest, CreateTopicsResponse
from protocol.generated.messages.create_topics_response import CreatableTopicConfigs, CreatableTopicResult
from storage.config import LogConfig

API_KEY = 19
VERSIONS = (2, 7)


def handle(cctx: ControllerContext, req: CreateTopicsRequest) -> ControllerResult:
    new = [NewTopic(t.name, t.num_partitions, t.replication_factor,
                    {a.partition_index: list(a.broker_ids) for a in t.assignments} or None,
                    {c.name: c.value for c in t.configs})
           for t in req.topics]
    res = cctx.controller.create_topics(cctx.image, new, req.validate_only)
    out = []
    for r in res.response:
        item = CreatableTopicResult(name=r.name, topic_id=r.topic_id, error_code=r.error_code,
                                    error_message=r.error_message)
        if r.error_code == 0 and cctx.version >= 5:
            item.num_partitions = r.num_partitions
            item.replication_factor = r.replication_factor
            cfg = LogConfig.from_props(r.configs, cctx.config)
            item.configs = [CreatableTopicConfigs(name=k, value=v, read_only=False,
                                                  config_source=TOPIC_CONFIG if k in r.configs else DEFAULT_CONFIG,
                                                  is_sensitive=False)
                            for k, v in sorted(cfg.to_topic_props().items())]
        out.append(item)
    return ControllerResult(res.records, CreateTopicsResponse(topics=out))
