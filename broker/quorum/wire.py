"""The Raft core's messages as Kafka's KRaft RPCs on ``__cluster_metadata-0`` (KafkaRaftClient's builders).

``to_request`` / ``from_response`` for what a node sends, ``from_request`` / ``to_response`` for what it
answers. Log entries travel as the record batches they are (Fetch's ``records``); FetchSnapshot's chunks
are put together by the driver, so the core sees a whole snapshot.
"""

from __future__ import annotations

from cluster.raft import messages as m
from cluster.raft.election_state import NO_ID
from protocol.generated.messages import (
    BeginQuorumEpochRequest, BeginQuorumEpochResponse, EndQuorumEpochRequest, EndQuorumEpochResponse, FetchRequest,
    FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, VoteRequest, VoteResponse,
)
from protocol.generated.messages import begin_quorum_epoch_request as bqe_req
from protocol.generated.messages import begin_quorum_epoch_response as bqe_resp
from protocol.generated.messages import end_quorum_epoch_request as eqe_req
from protocol.generated.messages import end_quorum_epoch_response as eqe_resp
from protocol.generated.messages import fetch_request as f_req
from protocol.generated.messages import fetch_response as f_resp
from protocol.generated.messages import fetch_snapshot_request as fs_req
from protocol.generated.messages import vote_request as v_req
from protocol.generated.messages import vote_response as v_resp
from protocol.message import Message
from protocol.records import LOG_OVERHEAD, iter_batch_positions
from protocol.topics import METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID
from broker.quorum.kraft_log import entry_of

# the versions a node sends (Kafka 4.1's: Vote v2 carries KIP-996's PreVote, Fetch v18 KIP-1166's high watermark)
VERSIONS = {VoteRequest: 2, BeginQuorumEpochRequest: 1, EndQuorumEpochRequest: 1, FetchRequest: 18,
            FetchSnapshotRequest: 1}
FETCH_MAX_WAIT_MS = 500  # KafkaRaftClient's fetchMaxWaitMs
FETCH_MAX_BYTES = 8 * 1024 * 1024  # KafkaRaftClient.MAX_FETCH_SIZE_BYTES
SNAPSHOT_CHUNK_BYTES = 1024 * 1024


class NotForThisPartition(ValueError):
    """A KRaft RPC that does not name exactly ``__cluster_metadata-0``."""


# ---- what a node sends ------------------------------------------------------------------------------------

def to_request(msg, cluster_id: str) -> Message:
    if isinstance(msg, m.VoteRequest):
        return VoteRequest(cluster_id=cluster_id, voter_id=msg.dst, topics=[v_req.TopicData(
            topic_name=METADATA_TOPIC, partitions=[v_req.PartitionData(
                partition_index=METADATA_PARTITION, replica_epoch=msg.epoch, replica_id=msg.src,
                last_offset_epoch=msg.last_epoch, last_offset=msg.last_offset, pre_vote=msg.pre_vote)])])
    if isinstance(msg, m.BeginQuorumEpochRequest):
        return BeginQuorumEpochRequest(cluster_id=cluster_id, voter_id=msg.dst, topics=[bqe_req.TopicData(
            topic_name=METADATA_TOPIC, partitions=[bqe_req.PartitionData(
                partition_index=METADATA_PARTITION, leader_id=msg.src, leader_epoch=msg.epoch)])])
    if isinstance(msg, m.EndQuorumEpochRequest):
        return EndQuorumEpochRequest(cluster_id=cluster_id, topics=[eqe_req.TopicData(
            topic_name=METADATA_TOPIC, partitions=[eqe_req.PartitionData(
                partition_index=METADATA_PARTITION, leader_id=msg.src, leader_epoch=msg.epoch,
                preferred_successors=list(msg.preferred_successors),
                preferred_candidates=[eqe_req.ReplicaInfo(candidate_id=c) for c in msg.preferred_successors])])])
    if isinstance(msg, m.FetchRequest):
        return FetchRequest(cluster_id=cluster_id, replica_state=f_req.ReplicaState(replica_id=msg.src),
                            max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=0, max_bytes=FETCH_MAX_BYTES,
                            topics=[f_req.FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[
                                f_req.FetchPartition(partition=METADATA_PARTITION, current_leader_epoch=msg.epoch,
                                                     fetch_offset=msg.fetch_offset,
                                                     last_fetched_epoch=msg.last_fetched_epoch,
                                                     partition_max_bytes=FETCH_MAX_BYTES,
                                                     high_watermark=msg.high_watermark)])])
    if isinstance(msg, m.FetchSnapshotRequest):
        return fetch_snapshot_chunk_request(msg, cluster_id, 0)
    raise TypeError(f"not a request: {msg!r}")


def fetch_snapshot_chunk_request(msg: m.FetchSnapshotRequest, cluster_id: str, position: int) -> Message:
    end, epoch = msg.snapshot_id
    return FetchSnapshotRequest(cluster_id=cluster_id, replica_id=msg.src, max_bytes=SNAPSHOT_CHUNK_BYTES, topics=[
        fs_req.TopicSnapshot(name=METADATA_TOPIC, partitions=[fs_req.PartitionSnapshot(
            partition=METADATA_PARTITION, current_leader_epoch=msg.epoch,
            snapshot_id=fs_req.SnapshotId(end_offset=end, epoch=epoch), position=position)])])


def _only_partition(topics, name_attr: str = "topic_name"):
    if len(topics) != 1 or getattr(topics[0], name_attr) != METADATA_TOPIC or len(topics[0].partitions) != 1:
        raise NotForThisPartition(f"expected only {METADATA_TOPIC}-{METADATA_PARTITION}")
    p = topics[0].partitions[0]
    if getattr(p, "partition_index", getattr(p, "partition", getattr(p, "index", 0))) != METADATA_PARTITION:
        raise NotForThisPartition(f"expected only {METADATA_TOPIC}-{METADATA_PARTITION}")
    return p


def from_response(request, response: Message, snapshot_data: bytes | None = None):
    """The core's response to ``request`` from the wire ``response`` (None if it answers nothing usable)."""
    src, dst = request.dst, request.src
    top = getattr(response, "error_code", 0)
    if isinstance(request, m.VoteRequest):
        if top:
            return m.VoteResponse(src, dst, -1, NO_ID, False, top, request.pre_vote)
        p = _only_partition(response.topics)
        return m.VoteResponse(src, dst, p.leader_epoch, p.leader_id, p.vote_granted, p.error_code, request.pre_vote)
    if isinstance(request, m.BeginQuorumEpochRequest):
        if top:
            return None
        p = _only_partition(response.topics)
        return m.BeginQuorumEpochResponse(src, dst, p.leader_epoch, p.leader_id, p.error_code)
    if isinstance(request, m.EndQuorumEpochRequest):
        if top:
            return None
        p = _only_partition(response.topics)
        return m.EndQuorumEpochResponse(src, dst, p.leader_epoch, p.leader_id, p.error_code)
    if isinstance(request, m.FetchRequest):
        if top:
            return None
        t = response.responses
        if len(t) != 1 or (t[0].topic != METADATA_TOPIC and t[0].topic_id != METADATA_TOPIC_ID) \
                or len(t[0].partitions) != 1 or t[0].partitions[0].partition_index != METADATA_PARTITION:
            raise NotForThisPartition(f"expected only {METADATA_TOPIC}-{METADATA_PARTITION}")
        p = t[0].partitions[0]
        leader_id, epoch = p.current_leader.leader_id, p.current_leader.leader_epoch
        diverging = snapshot_id = None
        if p.diverging_epoch.epoch >= 0:
            diverging = (p.diverging_epoch.end_offset, p.diverging_epoch.epoch)
        if p.snapshot_id.end_offset >= 0:
            snapshot_id = (p.snapshot_id.end_offset, p.snapshot_id.epoch)
        entries = tuple(entry_of(bytes(p.records[pos:pos + h.batch_length + LOG_OVERHEAD]))
                        for pos, h in iter_batch_positions(memoryview(p.records or b"")))
        return m.FetchResponse(src, dst, epoch, leader_id, p.error_code, p.high_watermark, p.log_start_offset,
                               entries, diverging, snapshot_id, request.fetch_offset, request.last_fetched_epoch)
    if isinstance(request, m.FetchSnapshotRequest):
        if top:
            return None
        p = _only_partition(response.topics, "name")
        return m.FetchSnapshotResponse(src, dst, p.current_leader.leader_epoch, p.current_leader.leader_id,
                                       p.error_code, (p.snapshot_id.end_offset, p.snapshot_id.epoch)
                                       if not p.error_code else None, snapshot_data)
    raise TypeError(f"not a request: {request!r}")


# ---- what a node answers --------------------------------------------------------------------------------

def from_request(body: Message, node_id: int):
    """The core's request from a wire request addressed to ``node_id``; NotForThisPartition if malformed."""
    if isinstance(body, VoteRequest):
        p = _only_partition(body.topics)
        return m.VoteRequest(p.replica_id, node_id, p.replica_epoch, p.last_offset_epoch, p.last_offset, p.pre_vote)
    if isinstance(body, BeginQuorumEpochRequest):
        p = _only_partition(body.topics)
        return m.BeginQuorumEpochRequest(p.leader_id, node_id, p.leader_epoch)
    if isinstance(body, EndQuorumEpochRequest):
        p = _only_partition(body.topics)
        successors = tuple(p.preferred_successors) or tuple(c.candidate_id for c in p.preferred_candidates)
        return m.EndQuorumEpochRequest(p.leader_id, node_id, p.leader_epoch, successors)
    if isinstance(body, FetchRequest):
        t = body.topics
        if len(t) != 1 or (t[0].topic != METADATA_TOPIC and t[0].topic_id != METADATA_TOPIC_ID) \
                or len(t[0].partitions) != 1 or t[0].partitions[0].partition != METADATA_PARTITION:
            raise NotForThisPartition(f"expected only {METADATA_TOPIC}-{METADATA_PARTITION}")
        p = t[0].partitions[0]
        replica = body.replica_state.replica_id if body.replica_state.replica_id >= 0 else body.replica_id
        return m.FetchRequest(replica, node_id, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch,
                              p.high_watermark)
    if isinstance(body, FetchSnapshotRequest):
        p = _only_partition(body.topics, "name")
        return m.FetchSnapshotRequest(body.replica_id, node_id, p.current_leader_epoch,
                                      (p.snapshot_id.end_offset, p.snapshot_id.epoch))
    raise TypeError(f"not a KRaft request: {type(body).__name__}")


def to_response(msg, request_body: Message | None = None) -> Message:
    """The wire response for the core's answer ``msg`` (``request_body``: the request, for FetchSnapshot's
    position)."""
    if isinstance(msg, m.VoteResponse):
        return VoteResponse(topics=[v_resp.TopicData(topic_name=METADATA_TOPIC, partitions=[v_resp.PartitionData(
            partition_index=METADATA_PARTITION, error_code=msg.error, leader_id=msg.leader_id,
            leader_epoch=msg.epoch, vote_granted=msg.granted)])])
    if isinstance(msg, m.BeginQuorumEpochResponse):
        return BeginQuorumEpochResponse(topics=[bqe_resp.TopicData(topic_name=METADATA_TOPIC, partitions=[
            bqe_resp.PartitionData(partition_index=METADATA_PARTITION, error_code=msg.error, leader_id=msg.leader_id,
                                   leader_epoch=msg.epoch)])])
    if isinstance(msg, m.EndQuorumEpochResponse):
        return EndQuorumEpochResponse(topics=[eqe_resp.TopicData(topic_name=METADATA_TOPIC, partitions=[
            eqe_resp.PartitionData(partition_index=METADATA_PARTITION, error_code=msg.error, leader_id=msg.leader_id,
                                   leader_epoch=msg.epoch)])])
    if isinstance(msg, m.FetchResponse):
        part = f_resp.PartitionData(
            partition_index=METADATA_PARTITION, error_code=msg.error, high_watermark=msg.high_watermark,
            log_start_offset=msg.log_start_offset,
            current_leader=f_resp.LeaderIdAndEpoch(leader_id=msg.leader_id, leader_epoch=msg.epoch),
            records=b"".join(e.data for e in msg.entries))
        if msg.diverging is not None:
            part.diverging_epoch = f_resp.EpochEndOffset(epoch=msg.diverging[1], end_offset=msg.diverging[0])
        if msg.snapshot_id is not None:
            part.snapshot_id = f_resp.SnapshotId(end_offset=msg.snapshot_id[0], epoch=msg.snapshot_id[1])
        return FetchResponse(responses=[f_resp.FetchableTopicResponse(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID,
                                                                      partitions=[part])])
    if isinstance(msg, m.FetchSnapshotResponse):
        from protocol.generated.messages import fetch_snapshot_response as fs_resp

        position = 0
        if request_body is not None:
            position = request_body.topics[0].partitions[0].position
        data = msg.data or b""
        chunk = bytes(data[position:position + SNAPSHOT_CHUNK_BYTES]) if not msg.error else None
        snap = msg.snapshot_id or (-1, -1)
        return FetchSnapshotResponse(topics=[fs_resp.TopicSnapshot(name=METADATA_TOPIC, partitions=[
            fs_resp.PartitionSnapshot(index=METADATA_PARTITION, error_code=msg.error,
                                      snapshot_id=fs_resp.SnapshotId(end_offset=snap[0], epoch=snap[1]),
                                      current_leader=fs_resp.LeaderIdAndEpoch(leader_id=msg.leader_id,
                                                                              leader_epoch=msg.epoch),
                                      size=len(data), position=position, unaligned_records=chunk)])])
    raise TypeError(f"not a response: {msg!r}")


def error_response(body: Message, error: int) -> Message:
    """A top-level error answer to a KRaft request that cannot be taken (another cluster, malformed)."""
    cls = {VoteRequest: VoteResponse, BeginQuorumEpochRequest: BeginQuorumEpochResponse,
           EndQuorumEpochRequest: EndQuorumEpochResponse, FetchRequest: FetchResponse,
           FetchSnapshotRequest: FetchSnapshotResponse}[type(body)]
    return cls(error_code=error)


RESPONSE_FOR = {m.VoteRequest: m.VoteResponse, m.BeginQuorumEpochRequest: m.BeginQuorumEpochResponse,
                m.EndQuorumEpochRequest: m.EndQuorumEpochResponse, m.FetchRequest: m.FetchResponse,
                m.FetchSnapshotRequest: m.FetchSnapshotResponse}

__all__ = ["RESPONSE_FOR", "to_request", "from_response", "from_request", "to_response",
           "error_response", "fetch_snapshot_chunk_request", "NotForThisPartition"]
