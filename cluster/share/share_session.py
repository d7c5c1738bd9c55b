"""Share sessions (KIP-932, Kafka 4.2): the ShareSessionCache, the session rules of ShareFetch and ShareAcknowledge,
and the validation of acknowledgement batches.

Ported from Kafka 4.2's ``server/share/session/ShareSessionCache``, ``ShareSession``, ``SharePartitionManager``'s
``newContext`` and ``acknowledgeSessionUpdate``, and ``KafkaApis``' request checks (``validateAcknowledgementBatches``,
the IsRenewAck rule of KIP-1222). Pure: the adapter calls these before touching any share partition.

A share session belongs to one (group, member): epoch 0 opens it (replacing any old one), each later request
carries the epoch the broker expects and moves it on by one (after ``Integer.MAX_VALUE`` back to 1), and -1 closes
it. The cache holds at most ``group.share.max.share.sessions`` sessions (2000); a full cache refuses a new session
with SHARE_SESSION_LIMIT_REACHED. Each session remembers the connection that opened it: when that connection
drops, :meth:`ShareSessionCache.on_disconnect` removes the session and the adapter releases its records
(``SharePartition.release_acquired_records``), as Kafka's ``ClientConnectionDisconnectListener`` does.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

from cluster.share.share_partition import AcknowledgeType, AcknowledgementBatch, ShareError
from protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
DEFAULT_MAX_SHARE_SESSIONS = 2000  # group.share.max.share.sessions

TopicIdPartition = tuple[object, int]  # (topic id, partition)


def next_epoch(epoch: int) -> int:
    """``ShareRequestMetadata.nextEpoch``: 0 -> 1, -1 stays, MAX_VALUE wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == 2**31 - 1:
        return 1
    return epoch + 1


def rotate_round_robin(partitions: tuple, session_epoch: int) -> tuple:
    """``PartitionRotateStrategy.rotateRoundRobin``: the session's partitions in the order a ShareFetch reads them,
    moved on by the request's epoch, so that none is starved (a fetch stops at its ``max_records``: read always in
    the same order, the first partitions would drain before the others are read at all). No rotation for one
    partition, an initial or final epoch, or an epoch that is a multiple of the count."""
    n = len(partitions)
    if n <= 1 or session_epoch < 1:
        return partitions
    at = session_epoch % n
    return partitions if at == 0 else (*partitions[at:], *partitions[:at])


@dataclasses.dataclass(frozen=True, slots=True)
class ShareSessionKey:
    group_id: str
    member_id: str


class ShareSession:
    """Kafka's ``ShareSession``: the partitions a member fetches, the next epoch, the opening connection; and how
    often each connection's requests moved the epoch on (``moves_by``: see :meth:`ShareFetchContext.response_error`)."""

    __slots__ = ("key", "partitions", "epoch", "connection_id", "moves", "moves_by")

    def __init__(self, key: ShareSessionKey, partitions: Iterable[TopicIdPartition], epoch: int, connection_id: str):
        self.key = key
        self.partitions: dict[TopicIdPartition, None] = dict.fromkeys(partitions)
        self.epoch = epoch
        self.connection_id = connection_id
        self.moves = 0
        self.moves_by: dict[str, int] = {}

    def move_on(self, connection_id: str) -> None:
        """A subsequent request of the session: the next epoch."""
        self.epoch = next_epoch(self.epoch)
        self.moves += 1
        self.moves_by[connection_id] = self.moves_by.get(connection_id, 0) + 1

    def update(self, fetch: Iterable[TopicIdPartition],
               forget: Iterable[TopicIdPartition]) -> tuple[list, list, list]:
        """``ShareSession.update``: ``(added, updated, removed)``; a partition repeated in a request counts once."""
        added, updated, removed = [], [], []
        for tp in fetch:
            if tp in self.partitions:
                if tp not in updated:
                    updated.append(tp)
            else:
                self.partitions[tp] = None
                added.append(tp)
        for tp in forget:
            if self.partitions.pop(tp, 0) is None:
                removed.append(tp)
        return added, updated, removed


@dataclasses.dataclass(frozen=True, slots=True)
class ShareFetchContext:
    """What :meth:`ShareSessionCache.new_context` decided: a final request (``final``: acknowledge, close the
    session, fetch nothing), a new session (``subsequent`` False) or the next request of one (the session's
    partitions after this request's additions and removals in ``partitions``; ``session`` the one it moved on)."""

    final: bool
    subsequent: bool
    partitions: tuple[TopicIdPartition, ...]
    epoch: int
    session: ShareSession | None = None
    connection_id: str = ""
    moves: int = 0  # the session's moves, and this connection's, once this request moved it on
    own_moves: int = 0

    def response_error(self) -> ErrorCode:
        """The answer's top-level error, as ``ShareSessionContext.updateAndGenerateResponseData`` and
        ``throttleResponse`` check it: a subsequent request whose session moved past the epoch this request set
        (another request of the session was served meanwhile: "possible duplicate request") is
        INVALID_SHARE_SESSION_EPOCH, answered without partitions; else NONE. A new session and a final request
        are not checked.

        Only another connection's requests count: Kafka serves one request of a connection at a time (the channel
        muted until answered), so a request pipelined behind this one on its connection moves the session only
        after this answer; odradek serves it meanwhile."""
        session = self.session
        if not self.subsequent or session is None or session.epoch == next_epoch(self.epoch):
            return ErrorCode.NONE
        own = session.moves_by.get(self.connection_id, 0) - self.own_moves
        if session.moves - self.moves > own:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        return ErrorCode.NONE


class ShareSessionCache:
    """Kafka's ``ShareSessionCache`` with ``SharePartitionManager``'s session rules."""

    def __init__(self, max_entries: int = DEFAULT_MAX_SHARE_SESSIONS):
        self.max_entries = max_entries
        self._sessions: dict[ShareSessionKey, ShareSession] = {}
        self._num_members: dict[str, int] = {}
        # connection id -> [session key, stale]; stale once the session was removed before the disconnect
        self._connections: dict[str, list] = {}

    def get(self, key: ShareSessionKey) -> ShareSession | None:
        return self._sessions.get(key)

    def size(self) -> int:
        return len(self._sessions)

    def total_partitions(self) -> int:
        return sum(len(s.partitions) for s in self._sessions.values())

    def num_members(self, group_id: str) -> int | None:
        return self._num_members.get(group_id)

    def remove(self, key: ShareSessionKey) -> ShareSession | None:
        """Remove a session; its connection's entry turns stale so a later disconnect spares a newer session."""
        session = self._sessions.pop(key, None)
        if session is not None:
            self._num_members[key.group_id] = max(0, self._num_members.get(key.group_id, 0) - 1)
            entry = self._connections.get(session.connection_id)
            if entry is not None:
                entry[1] = True
        return session

    def maybe_create_session(self, group_id: str, member_id: str, partitions: Iterable[TopicIdPartition],
                             connection_id: str) -> ShareSessionKey | None:
        """``maybeCreateSession``: None when the cache is full."""
        if len(self._sessions) >= self.max_entries:
            return None
        key = ShareSessionKey(group_id, member_id)
        self._sessions[key] = ShareSession(key, partitions, next_epoch(INITIAL_EPOCH), connection_id)
        self._num_members[group_id] = self._num_members.get(group_id, 0) + 1
        self._connections[connection_id] = [key, False]
        return key

    def remove_all_sessions(self) -> None:
        """``removeAllSessions`` (share.version turned off)."""
        self._sessions.clear()
        self._num_members.clear()

    def on_disconnect(self, connection_id: str) -> ShareSession | None:
        """``ClientConnectionDisconnectListener.onDisconnect``: the session removed with the connection (the adapter
        then releases the member's records in its partitions, ``releaseSession``), or None."""
        entry = self._connections.pop(connection_id, None)
        if entry is None:
            return None
        key, stale = entry
        removed = None if stale else self.remove(key)
        if self._num_members.get(key.group_id, 0) == 0:
            self._num_members.pop(key.group_id, None)
        return removed

    def close_session(self, group_id: str, member_id: str) -> ShareSession:
        """``releaseSession``'s first step, after a final request's acknowledgements: remove the session and return
        it (its partitions are where the adapter releases the member's records); SHARE_SESSION_NOT_FOUND if none."""
        session = self.remove(ShareSessionKey(group_id, member_id))
        if session is None:
            raise ShareError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"no share session for {group_id}/{member_id}")
        return session

    # ------------------------------------------------------------------ SharePartitionManager's rules

    def new_context(self, group_id: str, fetch: Sequence[TopicIdPartition], forget: Sequence[TopicIdPartition],
                    member_id: str, epoch: int, acknowledge_data_present: bool,
                    connection_id: str) -> ShareFetchContext:
        """``newContext`` for a ShareFetch; raises :class:`ShareError` (SHARE_SESSION_NOT_FOUND,
        INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED, INVALID_REQUEST for acks with epoch 0).

        Call :func:`validate_share_fetch_request` first. A final request (-1) leaves the session in place; the
        adapter removes it (:meth:`remove`) and releases the member's records once the acknowledgements are done,
        as Kafka's ``releaseSession``."""
        key = ShareSessionKey(group_id, member_id)
        if epoch == FINAL_EPOCH:
            if key not in self._sessions:
                raise ShareError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"no share session for {key}")
            return ShareFetchContext(True, False, (), epoch)
        if epoch == INITIAL_EPOCH:
            if acknowledge_data_present:
                raise ShareError(ErrorCode.INVALID_REQUEST, "acknowledge data in an initial share fetch request")
            self.remove(key)
            partitions = tuple(dict.fromkeys(fetch))
            if self.maybe_create_session(group_id, member_id, partitions, connection_id) is None:
                raise ShareError(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                                 f"the share session cache is full ({self.max_entries} sessions)")
            return ShareFetchContext(False, False, partitions, epoch)
        session = self._sessions.get(key)
        if session is None:
            raise ShareError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"no share session for {key}")
        if session.epoch != epoch:
            raise ShareError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                             f"expected share session epoch {session.epoch}, got {epoch}")
        session.update(fetch, forget)
        session.move_on(connection_id)
        return ShareFetchContext(False, True, tuple(session.partitions), epoch, session, connection_id,
                                 session.moves, session.moves_by[connection_id])

    def acknowledge_session_update(self, group_id: str, member_id: str, epoch: int, connection_id: str = "") -> None:
        """``acknowledgeSessionUpdate`` for a ShareAcknowledge: epoch 0 is INVALID_SHARE_SESSION_EPOCH; -1 checks
        the session exists (the adapter removes it and releases the member's records after the acks)."""
        if epoch == INITIAL_EPOCH:
            raise ShareError(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "a share acknowledge cannot open a session")
        key = ShareSessionKey(group_id, member_id)
        session = self._sessions.get(key)
        if session is None:
            raise ShareError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"no share session for {key}")
        if epoch == FINAL_EPOCH:
            return
        if session.epoch != epoch:
            raise ShareError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                             f"expected share session epoch {session.epoch}, got {epoch}")
        session.move_on(connection_id)


def validate_share_fetch_request(epoch: int, fetch_partitions: int, forgotten_partitions: int,
                                 is_renew_ack: bool = False, max_wait_ms: int = 0, min_bytes: int = 0,
                                 max_bytes: int = 0, max_records: int = 0) -> None:
    """The request-level checks of a ShareFetch before ``newContext``; raises INVALID_REQUEST.

    ``fetch_partitions``: partitions to fetch (Topics' entries without acknowledgements), ``forgotten_partitions``:
    ForgottenTopicsData's. A final request (-1) may only acknowledge; IsRenewAck (v2, KIP-1222) requests must not
    fetch: MaxWaitMs, MinBytes, MaxBytes and MaxRecords all 0."""
    # Issue 30's rule, from Kafka 4.0's newContext (INVALID_REQUEST for a final request's partitions with
    # PartitionMaxBytes > 0). Kafka 4.1+ dropped that check with PartitionMaxBytes (KAFKA-18932, apache/kafka#19148):
    # 4.2's newContext gives a final request a FinalContext whatever it names (see PORTED.md's share-fetch differences).
    if epoch == FINAL_EPOCH and (fetch_partitions or forgotten_partitions):
        raise ShareError(ErrorCode.INVALID_REQUEST,
                         "a final share fetch request cannot fetch or forget partitions")
    if is_renew_ack and (max_wait_ms or min_bytes or max_bytes or max_records):
        raise ShareError(ErrorCode.INVALID_REQUEST,
                         "a share fetch request renewing acquisition locks cannot fetch records")


def validate_acknowledgement_batches(batches: Sequence[AcknowledgementBatch], is_renew_ack: bool = False) -> ErrorCode:
    """``KafkaApis.validateAcknowledgementBatches`` for one partition: INVALID_REQUEST when a batch's first offset
    is past its last, the batches overlap or are out of order, a batch has no types or neither one type nor one per
    offset, or a type is outside 0-3 (0-4 when the request says IsRenewAck); else NONE."""
    max_type = AcknowledgeType.RENEW if is_renew_ack else AcknowledgeType.REJECT
    prev_last = -1
    for b in batches:
        if b.first_offset > b.last_offset:
            return ErrorCode.INVALID_REQUEST
        if b.first_offset <= prev_last:
            return ErrorCode.INVALID_REQUEST
        types = b.acknowledge_types
        if not types:
            return ErrorCode.INVALID_REQUEST
        if len(types) > 1 and b.last_offset - b.first_offset != len(types) - 1:
            return ErrorCode.INVALID_REQUEST
        if any(t < 0 or t > max_type for t in types):
            return ErrorCode.INVALID_REQUEST
        prev_last = b.last_offset
    return ErrorCode.NONE
