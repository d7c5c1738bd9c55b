"""Topic configurations for the jobs, and the small per-partition files a log dir keeps (checkpoints).

Where a value comes from, per key: the broker's metadata log in the analysed directory (``__cluster_metadata-0``:
``ConfigRecord`` for the topic, else a broker-level ``ConfigRecord`` synonym such as ``log.retention.ms``), else
``--config`` on the command line (``key=value`` for every topic, ``topic:key=value`` for one), else Kafka's
default (:class:`storage.config.LogConfig`, which also knows the broker synonyms and validates values).

Metadata records are framed as Kafka's ``MetadataRecordSerde`` writes them: frame version (unsigned varint, 1),
record type = apiKey (unsigned varint), record version (unsigned varint), then the record
(``protocol/generated/metadata``; ``cluster.metadata_serde``). Records are read with this package's own scanner
(read-only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from cluster.metadata_serde import MetadataParseError as MetadataLogError
from cluster.metadata_serde import decode_record
from protocol.generated import metadata as _md
from protocol.topics import METADATA_TOPIC
from storage.checkpoints import OffsetCheckpointFile
from storage.config import TOPIC_CONFIGS, LogConfig

from .planning import PartitionDir, ScanBounds, _split_paths, list_partition_dirs, plan_slices
from .scan import read_slice

__all__ = ["TopicConfigs", "load_topic_configs", "parse_config_args", "read_checkpoints", "Checkpoints",
           "METADATA_TOPIC"]

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
_TOPIC_KEYS = {d.name for d in TOPIC_CONFIGS}
_BROKER_KEYS = {syn for d in TOPIC_CONFIGS for syn, _ in d.synonyms}
MAX_METADATA_RECORDS = 10_000_000


def decode_metadata_record(value: bytes):
    """(record, version) of one ``__cluster_metadata`` record value; (None, version) for a record type the
    codec does not know. The framing is cluster.metadata_serde's, the one the broker writes with."""
    return decode_record(value, unknown_ok=True)


@dataclass
class MetadataConfigs:
    topic: dict[str, dict[str, str]] = field(default_factory=dict)     # topic -> {key: value}
    broker: dict[str, str] = field(default_factory=dict)               # cluster default ("" resource) + broker
    topics_seen: set[str] = field(default_factory=set)
    records: int = 0
    path: str | None = None


def read_metadata_configs(log_dirs: str | Iterable[str]) -> MetadataConfigs | None:
    """Replay ``ConfigRecord``/``TopicRecord``/``RemoveTopicRecord`` from ``__cluster_metadata-0`` if a log dir
    has one; None otherwise."""
    bounds = ScanBounds(topics=frozenset({METADATA_TOPIC}), partitions=frozenset({0}))
    try:
        slices = plan_slices(log_dirs, bounds, max_slice_bytes=1 << 62)
    except Exception:  # noqa: BLE001 - no plannable metadata log: Kafka's defaults apply
        return None
    if not slices:
        return None
    out = MetadataConfigs(path=os.path.dirname(slices[0].path))
    ids: dict[bytes, str] = {}
    broker_default: dict[str, str] = {}
    broker_specific: dict[str, str] = {}
    for sl in slices:
        for rb in read_slice(sl):
            values = rb.column("value").to_pylist()
            controls = rb.column("is_control").to_pylist()
            for value, is_control in zip(values, controls):
                if is_control or value is None:
                    continue
                out.records += 1
                if out.records > MAX_METADATA_RECORDS:
                    raise MetadataLogError("metadata log too large")
                rec, _ = decode_metadata_record(value)
                if isinstance(rec, _md.TopicRecord):
                    ids[bytes(rec.topic_id)] = rec.name
                    out.topics_seen.add(rec.name)
                elif isinstance(rec, _md.RemoveTopicRecord):
                    name = ids.pop(bytes(rec.topic_id), None)
                    if name is not None:
                        out.topic.pop(name, None)
                elif isinstance(rec, _md.ConfigRecord):
                    if rec.resource_type == TOPIC_RESOURCE:
                        d = out.topic.setdefault(rec.resource_name, {})
                    elif rec.resource_type == BROKER_RESOURCE:
                        d = broker_default if rec.resource_name == "" else broker_specific
                    else:
                        continue
                    if rec.value is None:
                        d.pop(rec.name, None)
                    else:
                        d[rec.name] = rec.value
    out.broker = {**broker_default, **broker_specific}
    return out


def parse_config_args(items: Iterable[str]) -> dict[str | None, dict[str, str]]:
    """``["retention.ms=1000", "orders:cleanup.policy=compact"]`` -> ``{None: {...}, "orders": {...}}``."""
    out: dict[str | None, dict[str, str]] = {}
    for item in items or ():
        if "=" not in item:
            raise ValueError(f"--config expects key=value or topic:key=value, got {item!r}")
        k, v = item.split("=", 1)
        topic = None
        if ":" in k:
            topic, k = k.rsplit(":", 1)
        k = k.strip()
        if k not in _TOPIC_KEYS and k not in _BROKER_KEYS:
            raise ValueError(f"unknown topic config {k!r}")
        out.setdefault(topic, {})[k] = v.strip()
    return out


@dataclass
class TopicConfigs:
    metadata: MetadataConfigs | None
    cli: dict[str | None, dict[str, str]]

    def for_topic(self, topic: str, overrides: Mapping[str, str] | None = None) -> LogConfig:
        """``overrides`` (what-if values) win over everything."""
        topic_props: dict[str, str] = {}
        broker_props: dict[str, str] = {}
        for src in (self.cli.get(None, {}), self.cli.get(topic, {})):
            for k, v in src.items():
                (topic_props if k in _TOPIC_KEYS else broker_props)[k] = v
        if self.metadata is not None:
            for k, v in self.metadata.broker.items():
                if k in _BROKER_KEYS:
                    broker_props[k] = v
                    # a broker-level synonym in the metadata log beats a topic-level --config of the same setting
                    for d in TOPIC_CONFIGS:
                        if any(s == k for s, _ in d.synonyms):
                            topic_props.pop(d.name, None)
            for k, v in self.metadata.topic.get(topic, {}).items():
                if k in _TOPIC_KEYS:
                    topic_props[k] = v
        if overrides:
            topic_props.update(overrides)
        return LogConfig.from_props(topic_props, broker_props)

    def source(self, topic: str, key: str) -> str:
        if self.metadata is not None and key in self.metadata.topic.get(topic, {}):
            return "metadata log (topic)"
        if self.metadata is not None:
            for d in TOPIC_CONFIGS:
                if d.name == key and any(s in self.metadata.broker for s, _ in d.synonyms):
                    return "metadata log (broker)"
        if key in self.cli.get(topic, {}) or key in self.cli.get(None, {}):
            return "--config"
        return "Kafka default"


def load_topic_configs(log_dirs: str | Iterable[str], cli_items: Iterable[str] = ()) -> TopicConfigs:
    return TopicConfigs(read_metadata_configs(log_dirs), parse_config_args(cli_items))


# -- per-log-dir checkpoint files -------------------------------------------------------------------------------

@dataclass
class Checkpoints:
    cleaner: dict[tuple[str, int], int] = field(default_factory=dict)
    log_start: dict[tuple[str, int], int] = field(default_factory=dict)
    recovery_point: dict[tuple[str, int], int] = field(default_factory=dict)
    high_watermark: dict[tuple[str, int], int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def read_checkpoints(log_dirs: str | Iterable[str]) -> Checkpoints:
    """Kafka's ``cleaner-offset-checkpoint``, ``log-start-offset-checkpoint``, ``recovery-point-offset-checkpoint``
    and ``replication-offset-checkpoint`` of each log dir (read only; an unreadable file is reported, not fatal).
    A partition with copies in several log dirs takes its entries from the log dir of the copy the jobs read."""
    cp = Checkpoints()
    read_from = {(p.topic, p.partition): os.path.realpath(os.path.dirname(p.path))
                 for p in list_partition_dirs(log_dirs, ScanBounds(include_internal=True))}
    for root in _split_paths(log_dirs):
        root = os.path.abspath(root)
        base = os.path.basename(root)
        # a partition directory given directly: its log dir is the parent
        if not any(os.path.exists(os.path.join(root, n)) for n in ("cleaner-offset-checkpoint",
                                                                 "log-start-offset-checkpoint",
                                                                 "meta.properties")) and "-" in base \
                and os.path.exists(os.path.join(os.path.dirname(root), "cleaner-offset-checkpoint")):
            root = os.path.dirname(root)
        for name, target in (("cleaner-offset-checkpoint", cp.cleaner),
                             ("log-start-offset-checkpoint", cp.log_start),
                             ("recovery-point-offset-checkpoint", cp.recovery_point),
                             ("replication-offset-checkpoint", cp.high_watermark)):
            path = os.path.join(root, name)
            if not os.path.exists(path):
                continue
            try:
                real_root = os.path.realpath(root)
                target.update({tp: o for tp, o in OffsetCheckpointFile(path).read().items()
                               if read_from.get(tp, real_root) == real_root})
            except Exception as e:  # noqa: BLE001 - a malformed checkpoint: report it, fall back to Kafka's behaviour
                cp.errors.append(f"{path}: {e}")
    return cp


def partitions_of(log_dirs: str | Iterable[str], include_internal: bool = False) -> list[PartitionDir]:
    return list_partition_dirs(log_dirs, ScanBounds(include_internal=include_internal))
