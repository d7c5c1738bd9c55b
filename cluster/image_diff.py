"""What changed between two metadata images (Kafka's ``TopicsDelta`` / ``LocalReplicaChanges``), found by identity.

Images are copy-on-write (``_Delta.build``): a topic no record touched keeps the identical ``TopicInfo`` object, and in
a touched topic every partition no record touched keeps the identical ``PartitionInfo``; configs and brokers likewise
per key. So the changes between two images are found in O(topics + partitions of the touched topics + config keys +
brokers), never by walking every partition; an object replaced by an equal one (a record replayed with the values
it already had) does not count as a change. Publishers (the replica manager, the replica fetchers) then work only on
what changed, as Kafka's ``ReplicaManager.applyDelta`` works on ``TopicsDelta.localChanges``.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, NamedTuple

from cluster.metadata_image import RESOURCE_TOPIC, MetadataImage, PartitionInfo, TopicInfo

TopicPartition = tuple[str, int]
_MISSING = object()


class PartitionChange(NamedTuple):
    """One partition in either image: its topic id and registration before and after (None: not there). A topic
    deleted and created again under the same name has both, with different topic ids."""

    old_topic_id: bytes | None
    old: PartitionInfo | None
    new_topic_id: bytes | None
    new: PartitionInfo | None

    @property
    def recreated(self) -> bool:
        """The name now belongs to another topic (deleted and created again between the two images)."""
        return self.old is not None and self.new is not None and self.old_topic_id != self.new_topic_id


@dataclasses.dataclass(frozen=True, slots=True)
class LocalChanges:
    """``LocalReplicaChanges`` for one broker: the changed partitions it hosted and no longer does (``deletes``:
    moved away, deleted, or its topic re-created), and the changed ones it hosts now, as leader or follower. A
    re-created topic's partition may be in ``deletes`` and in ``leaders``/``followers`` at once."""

    deletes: frozenset[TopicPartition]
    leaders: Mapping[TopicPartition, PartitionInfo]
    followers: Mapping[TopicPartition, PartitionInfo]

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        """Every partition this broker hosted or hosts whose registration changed."""
        return self.deletes | self.leaders.keys() | self.followers.keys()


@dataclasses.dataclass(frozen=True)
class ImageDiff:
    """The changes from ``prev`` to ``image``."""

    prev: MetadataImage
    image: MetadataImage
    partitions: Mapping[TopicPartition, PartitionChange]
    topic_configs: frozenset[str]  # topics whose config overrides differ (set, changed or removed)
    brokers: frozenset[int]  # brokers registered, re-registered, fenced, unfenced, shutting down or unregistered
    _local: dict[int, LocalChanges] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def local_changes(self, node_id: int) -> LocalChanges:
        """``TopicsDelta.localChanges``: the changed partitions ``node_id`` is or was a replica of."""
        local = self._local.get(node_id)
        if local is None:
            local = self._local[node_id] = _local_changes(self.partitions, node_id)
        return local


def diff_images(prev: MetadataImage, image: MetadataImage) -> ImageDiff:
    """The partitions, topic configs and brokers that differ from ``prev`` to ``image`` (``prev`` an empty
    ``MetadataImage()``: everything in ``image``)."""
    return ImageDiff(prev, image, _partition_changes(prev.topics_by_name, image.topics_by_name),
                     frozenset(_topic_config_changes(prev.configs, image.configs)),
                     frozenset(_changed_keys(prev.brokers, image.brokers)))


def _partition_changes(before: Mapping[str, TopicInfo], after: Mapping[str, TopicInfo]
                       ) -> dict[TopicPartition, PartitionChange]:
    out: dict[TopicPartition, PartitionChange] = {}
    kept = 0  # topics in both images
    for name, new in after.items():
        old = before.get(name)
        kept += old is not None
        if old is not new:
            _topic_changes(name, old, new, out)
    if kept < len(before):  # some topic is gone (tested first: most publishes remove none)
        for name, old in before.items():
            if name not in after:
                _topic_changes(name, old, None, out)
    return out


def _topic_changes(name: str, old: TopicInfo | None, new: TopicInfo | None,
                   out: dict[TopicPartition, PartitionChange]) -> None:
    if old is not None and new is not None and old.topic_id == new.topic_id:
        if old.partitions is new.partitions:
            return
        old_id = new_id = new.topic_id
        olds, news = old.partitions, new.partitions
        for index, info in news.items():
            before = olds.get(index)
            if before is not info and before != info:
                out[(name, index)] = PartitionChange(old_id if before is not None else None, before, new_id, info)
        if len(olds) > len(news):  # partitions are never removed from a topic, but stay exact if they were
            for index, before in olds.items():
                if index not in news:
                    out[(name, index)] = PartitionChange(old_id, before, None, None)
        return
    olds = old.partitions if old is not None else {}
    news = new.partitions if new is not None else {}
    old_id = old.topic_id if old is not None else None
    new_id = new.topic_id if new is not None else None
    for index in olds.keys() | news.keys():
        before, info = olds.get(index), news.get(index)
        out[(name, index)] = PartitionChange(old_id if before is not None else None, before,
                                             new_id if info is not None else None, info)


def _changed_keys(before: Mapping, after: Mapping) -> list:
    """Keys whose value differs (by identity first, then by value), including keys only one side has."""
    out = []
    kept = 0
    for k, v in after.items():
        old = before.get(k, _MISSING)
        if old is _MISSING:
            out.append(k)
            continue
        kept += 1
        if old is not v and old != v:
            out.append(k)
    if kept < len(before):
        out.extend(k for k in before if k not in after)
    return out


def _topic_config_changes(before: Mapping, after: Mapping) -> list[str]:
    return [name for rtype, name in _changed_keys(before, after) if rtype == RESOURCE_TOPIC]


def _local_changes(changes: Mapping[TopicPartition, PartitionChange], node_id: int) -> LocalChanges:
    deletes: set[TopicPartition] = set()
    leaders: dict[TopicPartition, PartitionInfo] = {}
    followers: dict[TopicPartition, PartitionInfo] = {}
    for tp, c in changes.items():
        hosts = c.new is not None and node_id in c.new.replicas
        if c.old is not None and node_id in c.old.replicas and (not hosts or c.recreated):
            deletes.add(tp)
        if hosts:
            (leaders if c.new.leader == node_id else followers)[tp] = c.new
    return LocalChanges(frozenset(deletes), leaders, followers)
