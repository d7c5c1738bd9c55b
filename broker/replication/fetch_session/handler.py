"""The fetching side of a session (Kafka's FetchSessionHandler.java), used by the replica fetcher: which
partitions the next fetch names, and whether a response fits the session."""

from __future__ import annotations

import logging
from typing import NamedTuple

from broker.replication.fetch_session.metadata import (
    FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, PartitionFetch, metadata_string, next_epoch,
)
from protocol.errors import ErrorCode
from protocol.message import ZERO_UUID

log = logging.getLogger("odradek.fetch_session")


class FetchRequestData(NamedTuple):
    """``FetchSessionHandler.FetchRequestData``: what the next request sends."""

    to_send: dict  # (topic, partition) -> PartitionFetch: the partitions the request names
    to_forget: list  # [(topic_id, topic, partition)] to drop from the session
    to_replace: list  # [(topic_id, topic, partition)]: same partition, a new topic id (forgotten from v13)
    session_partitions: dict  # (topic, partition) -> PartitionFetch: every partition of the session
    session_id: int
    epoch: int
    can_use_topic_ids: bool

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    """The fetch session with one broker, as a client keeps it (Kafka's FetchSessionHandler): the first fetch is
    full and asks for a session; once the broker created one, fetches are incremental and name only partitions
    that were added or whose ``PartitionFetch`` changed, and forget the ones no longer wanted. A session error, a
    malformed response or a failed request sends a full fetch next (FETCH_SESSION_ID_NOT_FOUND: without naming
    the session; otherwise closing it)."""

    def __init__(self, node: int) -> None:
        self.node = node
        self.session_id = INVALID_SESSION_ID  # nextMetadata
        self.epoch = INITIAL_EPOCH
        self.session_partitions: dict[tuple[str, int], PartitionFetch] = {}
        self.session_topic_names: dict[bytes, str] = {}
        self.can_use_topic_ids = True  # as the last build found

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def build_unchanged(self) -> FetchRequestData:
        """``build`` of the partitions and positions of the last build, in an open session: an incremental request
        naming nothing (the caller knows nothing moved, and skips comparing thousands of partitions)."""
        assert not self.is_full
        return FetchRequestData({}, [], [], dict(self.session_partitions), self.session_id, self.epoch,
                                self.can_use_topic_ids)

    def build(self, next_parts: dict[tuple[str, int], PartitionFetch]) -> FetchRequestData:
        """The next request for the partitions wanted now, in order (``Builder.build``)."""
        nxt = dict(next_parts)
        topic_names: dict[bytes, str] = {}
        without_ids = 0
        for (topic, _), data in nxt.items():
            if data.topic_id == ZERO_UUID:
                without_ids += 1
            else:
                topic_names.setdefault(data.topic_id, topic)
        can_use_ids = without_ids == 0
        if self.is_full:
            log.debug("Built full fetch %s for node %d with %d partition(s).",
                      metadata_string(self.session_id, self.epoch), self.node, len(nxt))
            self.session_partitions = nxt
            self.session_topic_names = topic_names if can_use_ids else {}
            self.can_use_topic_ids = can_use_ids
            return FetchRequestData(dict(nxt), [], [], dict(nxt), self.session_id, self.epoch, can_use_ids)
        added, removed, altered, replaced = [], [], [], []
        for tp, prev in list(self.session_partitions.items()):
            data = nxt.pop(tp, None)
            if data is prev:  # the same request as last time: nothing to send
                continue
            if data is not None:
                if prev.topic_id != data.topic_id and prev.topic_id != ZERO_UUID and data.topic_id != ZERO_UUID:
                    nxt[tp] = data  # to the end of the partitions to send
                    self.session_partitions[tp] = data
                    replaced.append((prev.topic_id, *tp))
                elif prev != data:
                    nxt[tp] = data
                    self.session_partitions[tp] = data
                    altered.append((data.topic_id, *tp))
            else:
                del self.session_partitions[tp]
                removed.append((prev.topic_id, *tp))
                if can_use_ids and prev.topic_id == ZERO_UUID:
                    can_use_ids = False
        for tp, data in nxt.items():
            if tp in self.session_partitions:
                break  # the altered and replaced ones, moved to the end: nothing new after them
            self.session_partitions[tp] = data
            added.append((data.topic_id, *tp))
        self.session_topic_names = topic_names if can_use_ids else {}
        self.can_use_topic_ids = can_use_ids
        log.debug("Built incremental fetch %s for node %d. Added %d partition(s), altered %d partition(s), "
                  "removed %d partition(s), replaced %d partition(s) out of %d partition(s)",
                  metadata_string(self.session_id, self.epoch), self.node, len(added), len(altered), len(removed),
                  len(replaced), len(self.session_partitions))
        return FetchRequestData(nxt, removed, replaced, dict(self.session_partitions), self.session_id, self.epoch,
                                can_use_ids)

    def _response_partitions(self, response, version: int) -> tuple[set[tuple[str, int]], set[bytes]]:
        """(partitions whose topic the session knows, every topic id of the response)."""
        parts, ids = set(), set()
        for tr in response.responses:
            if version >= 13:
                ids.add(tr.topic_id)
                name = self.session_topic_names.get(tr.topic_id)
                if name is None:
                    continue
            else:
                name = tr.topic
            parts.update((name, pd.partition_index) for pd in tr.partitions)
        return parts, ids

    def handle_response(self, response, version: int) -> bool:
        """Move the session on from ``response`` (``handleResponse``); False when the response cannot be used
        (a session error or a malformed response: the next fetch is full)."""
        if response.error_code:
            log.info("Node %d was unable to process the fetch request with %s: %s.", self.node,
                     metadata_string(self.session_id, self.epoch), _error_name(response.error_code))
            if response.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            else:
                self.epoch = INITIAL_EPOCH  # close the session, ask for a new one
            return False
        parts, ids = self._response_partitions(response, version)
        extra_ids = ids - self.session_topic_names.keys() if version >= 13 else set()
        extra = parts - self.session_partitions.keys()
        if self.is_full:
            if not parts and response.throttle_time_ms > 0:
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
                return False
            omitted = set(self.session_partitions) - parts
            if omitted or extra or extra_ids:
                log.info("Node %d sent an invalid full fetch response with omitted %s, extra %s, extra ids %d",
                         self.node, sorted(omitted), sorted(extra), len(extra_ids))
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
                return False
            if response.session_id == INVALID_SESSION_ID:
                log.debug("Node %d sent a full fetch response with %d response partition(s)", self.node, len(parts))
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
                return True
            log.debug("Node %d sent a full fetch response that created a new incremental fetch session %d with %d "
                      "response partition(s)", self.node, response.session_id, len(parts))
            self.session_id, self.epoch = response.session_id, next_epoch(INITIAL_EPOCH)
            return True
        if extra or extra_ids:
            log.info("Node %d sent an invalid incremental fetch response with extra %s, extra ids %d", self.node,
                     sorted(extra), len(extra_ids))
            self.epoch = INITIAL_EPOCH
            return False
        if response.session_id == INVALID_SESSION_ID:
            log.debug("Node %d sent an incremental fetch response closing session %d with %d response "
                      "partition(s)", self.node, self.session_id, len(parts))
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            return True
        log.debug("Node %d sent an incremental fetch response for session %d with %d response partition(s), %d "
                  "implied partition(s)", self.node, response.session_id, len(parts),
                  len(self.session_partitions) - len(parts))
        self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self, exc: BaseException) -> None:
        """A request that failed (connection lost, timeout): close the session and ask for a new one."""
        log.info("Error sending fetch request %s to node %d: %r", metadata_string(self.session_id, self.epoch),
                 self.node, exc)
        self.epoch = INITIAL_EPOCH


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
