"""The KRaft RPCs as the Raft core exchanges them: plain values with sender and receiver.

They carry the fields of Kafka's Vote (v2, with KIP-996's PreVote), BeginQuorumEpoch, EndQuorumEpoch, Fetch
and FetchSnapshot schemas that the algorithm reads; the transport maps them to and from the wire.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cluster.raft.log import Entry

HIGH_WATERMARK_NOT_SUPPORTED = 2**63 - 1  # FetchRequest v18's default: a fetcher that does not say


@dataclasses.dataclass(frozen=True)
class VoteRequest:
    src: int
    dst: int
    epoch: int  # the candidate's epoch; for a pre-vote, the epoch it would campaign in (its current + 1)
    last_epoch: int
    last_offset: int  # the candidate's log end offset
    pre_vote: bool = False


@dataclasses.dataclass(frozen=True)
class VoteResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    granted: bool
    error: int = 0
    pre_vote: bool = False


@dataclasses.dataclass(frozen=True)
class BeginQuorumEpochRequest:
    src: int
    dst: int
    epoch: int  # src is the leader of this epoch


@dataclasses.dataclass(frozen=True)
class BeginQuorumEpochResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    error: int = 0


@dataclasses.dataclass(frozen=True)
class EndQuorumEpochRequest:
    src: int
    dst: int
    epoch: int
    preferred_successors: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class EndQuorumEpochResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    error: int = 0


@dataclasses.dataclass(frozen=True)
class FetchRequest:
    src: int  # the replica id
    dst: int
    epoch: int  # the fetcher's current leader epoch
    fetch_offset: int
    last_fetched_epoch: int
    # the high watermark the fetcher knows (KIP-1166, Fetch v18; -1 unknown): a leader whose own is higher answers
    # at once instead of parking the fetch, so a follower learns of a commit without waiting out the long poll
    high_watermark: int = HIGH_WATERMARK_NOT_SUPPORTED


@dataclasses.dataclass(frozen=True)
class FetchResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    error: int = 0
    high_watermark: int = -1
    log_start_offset: int = 0
    entries: tuple[Entry, ...] = ()
    diverging: tuple[int, int] | None = None  # (end offset, epoch): truncate to it
    snapshot_id: tuple[int, int] | None = None  # (end offset, epoch): fetch this snapshot
    # the position the answered request fetched from: a response to an older request (late, duplicated) is
    # ignored, as Kafka's one-fetch-in-flight with correlation ids guarantees
    fetch_offset: int = -1
    last_fetched_epoch: int = -1
    # KafkaRaftClient.handleFetchRequest: an answer that carries nothing new for the fetcher (no error, records,
    # divergence, snapshot or newer high watermark) may be parked until the log or high watermark moves
    may_wait: bool = False


@dataclasses.dataclass(frozen=True)
class FetchSnapshotRequest:
    src: int
    dst: int
    epoch: int
    snapshot_id: tuple[int, int]


@dataclasses.dataclass(frozen=True)
class FetchSnapshotResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int
    error: int = 0
    snapshot_id: tuple[int, int] | None = None
    data: Any = None


@dataclasses.dataclass(frozen=True)
class RequestFailed:
    """The transport's word that a request to ``src`` got no usable answer (refused, connection lost, timed out,
    undecodable, a top-level error): Kafka's driver hands the core an error response in that case."""

    src: int  # the node the request went to
    dst: int  # this node
    request: str  # the request's type name, e.g. "FetchRequest"


Message = (VoteRequest | VoteResponse | BeginQuorumEpochRequest | BeginQuorumEpochResponse | EndQuorumEpochRequest
           | EndQuorumEpochResponse | FetchRequest | FetchResponse | FetchSnapshotRequest | FetchSnapshotResponse
           | RequestFailed)
