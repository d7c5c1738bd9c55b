"""CreateTopics on the controller (ControllerApis.createTopics / ReplicationControlManager.createTopics).

Per-topic errors (TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS,
INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, INVALID_REQUEST for duplicates and for
``__cluster_metadata``, which is never created: ControllerApis.createTopics);
validate_only answers without records; v5+ return topic id, partitions, replication factor and configs.

Authorized as the request's principal (ControllerApis.createTopics): CREATE on the cluster allows every topic,
else CREATE on each topic (TOPIC_AUTHORIZATION_FAILED, "Authorization failed.", for the others, which are not
created); a created topic's configs, partition count and replication factor are returned only with
DESCRIBE_CONFIGS on it, else its topic_config_error_code is TOPIC_AUTHORIZATION_FAILED (v5+).
"""

from __future__ import annotations

from broker.config.config_describe import DEFAULT_CONFIG, TOPIC_CONFIG
from broker.controlplane.controller_apis.context import ControllerContext
from cluster.acls import AclOperation, ResourceType
from cluster.controller import ControllerResult, NewTopic
from protocol.errors import ErrorCode
from protocol.generated.messages import CreateTopicsRequest, CreateTopicsResponse
from protocol.generated.messages.create_topics_response import CreatableTopicConfigs, CreatableTopicResult
from protocol.topics import METADATA_TOPIC
from storage.config import LogConfig

API_KEY = 19
VERSIONS = (2, 7)


def handle(cctx: ControllerContext, req: CreateTopicsRequest) -> ControllerResult:
    names = [t.name for t in req.topics if t.name != METADATA_TOPIC]  # refused whoever asks, never authorized
    if cctx.authorize_cluster(AclOperation.CREATE, log_if_denied=False):
        creatable = set(names)
    else:
        creatable = cctx.filter_authorized(AclOperation.CREATE, ResourceType.TOPIC, names)
    describable = cctx.filter_authorized(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names,
                                         log_if_denied=False)
    allowed = [t for t in req.topics if t.name in creatable]
    new = [NewTopic(t.name, t.num_partitions, t.replication_factor,
                    {a.partition_index: list(a.broker_ids) for a in t.assignments} or None,
                    {c.name: c.value for c in t.configs})
           for t in allowed]
    res = cctx.controller.create_topics(cctx.image, new, req.validate_only, cctx.apply_partition_change_quota)
    decided = iter(res.response)
    out = []
    for t in req.topics:
        if t.name == METADATA_TOPIC:
            out.append(CreatableTopicResult(name=t.name, error_code=ErrorCode.INVALID_REQUEST, error_message=(
                f"Creation of internal topic {METADATA_TOPIC} is prohibited.")))
            continue
        if t.name not in creatable:
            out.append(CreatableTopicResult(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                            error_message="Authorization failed."))
            continue
        r = next(decided)
        item = CreatableTopicResult(name=r.name, topic_id=r.topic_id, error_code=r.error_code,
                                    error_message=r.error_message)
        if r.error_code == 0 and cctx.version >= 5:
            if r.name not in describable:
                item.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                item.num_partitions = r.num_partitions
                item.replication_factor = r.replication_factor
                cfg = LogConfig.from_props(r.configs, cctx.config)
                item.configs = [CreatableTopicConfigs(name=k, value=v, read_only=False,
                                                      config_source=TOPIC_CONFIG if k in r.configs
                                                      else DEFAULT_CONFIG, is_sensitive=False)
                                for k, v in sorted(cfg.to_topic_props().items())]
        out.append(item)
    return ControllerResult(res.records, CreateTopicsResponse(throttle_time_ms=cctx.mutation_throttle_ms, topics=out))
