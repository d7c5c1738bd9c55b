"""The share coordinator's five RPCs for one share-partition, in an order that round-trips (initialize, write, read,
read summary, delete, read again), each with a check of its answer: shared by the authorization test and the
cluster tests."""

from __future__ import annotations

from typing import Callable

from protocol.errors import ErrorCode
from protocol.generated.messages import (
    DeleteShareGroupStateRequest, InitializeShareGroupStateRequest, ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest, WriteShareGroupStateRequest,
)
from protocol.generated.messages import delete_share_group_state_request as dsq
from protocol.generated.messages import initialize_share_group_state_request as isq
from protocol.generated.messages import read_share_group_state_request as rsq
from protocol.generated.messages import read_share_group_state_summary_request as rssq
from protocol.generated.messages import write_share_group_state_request as wsq


def only(response):
    """The one partition result of a one-partition answer."""
    (t,) = response.results
    (p,) = t.partitions
    return p


def ok(response) -> None:
    p = only(response)
    assert p.error_code == 0, (ErrorCode(p.error_code).name, p.error_message)


def initialize(group: str, tid: bytes, partition: int, state_epoch: int = 1) -> InitializeShareGroupStateRequest:
    return InitializeShareGroupStateRequest(group_id=group, topics=[isq.InitializeStateData(topic_id=tid, partitions=[
        isq.PartitionData(partition=partition, state_epoch=state_epoch, start_offset=-1)])])


def write(group: str, tid: bytes, partition: int, start: int, batches, leader_epoch: int = 1,
          state_epoch: int = 1, delivery_complete_count: int = -1) -> WriteShareGroupStateRequest:
    return WriteShareGroupStateRequest(group_id=group, topics=[wsq.WriteStateData(topic_id=tid, partitions=[
        wsq.PartitionData(partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start,
                          delivery_complete_count=delivery_complete_count,
                          state_batches=[wsq.StateBatch(first_offset=f, last_offset=last, delivery_state=s,
                                                        delivery_count=c) for f, last, s, c in batches])])])


def read(group: str, tid: bytes, partition: int, leader_epoch: int = 1) -> ReadShareGroupStateRequest:
    return ReadShareGroupStateRequest(group_id=group, topics=[rsq.ReadStateData(topic_id=tid, partitions=[
        rsq.PartitionData(partition=partition, leader_epoch=leader_epoch)])])


def summary(group: str, tid: bytes, partition: int) -> ReadShareGroupStateSummaryRequest:
    return ReadShareGroupStateSummaryRequest(group_id=group, topics=[rssq.ReadStateSummaryData(
        topic_id=tid, partitions=[rssq.PartitionData(partition=partition, leader_epoch=1)])])


def delete(group: str, tid: bytes, partition: int) -> DeleteShareGroupStateRequest:
    return DeleteShareGroupStateRequest(group_id=group, topics=[dsq.DeleteStateData(
        topic_id=tid, partitions=[dsq.PartitionData(partition=partition)])])


def read_batches(response) -> tuple[int, int, list[tuple[int, int, int, int]]]:
    """(start offset, state epoch, [(first, last, state, count)]) of a read's one partition."""
    p = only(response)
    assert p.error_code == 0, (ErrorCode(p.error_code).name, p.error_message)
    return p.start_offset, p.state_epoch, [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                           for b in p.state_batches]


def share_rpcs(group: str, tid: bytes, partition: int) -> list[tuple[str, int, object, Callable]]:
    """(name, version, request, check of the answer) for initialize, write, read, summary, delete, read again."""
    def check_read(r) -> None:
        assert read_batches(r) == (10, 1, [(10, 14, 2, 1), (15, 19, 0, 1)])

    def check_summary(r) -> None:
        p = only(r)
        assert (p.error_code, p.start_offset, p.state_epoch, p.leader_epoch, p.delivery_complete_count) == \
            (0, 10, 1, 1, 5)

    def check_gone(r) -> None:
        p = only(r)
        assert p.error_code == ErrorCode.INVALID_REQUEST, ErrorCode(p.error_code).name  # uninitialized again

    return [
        ("initialize", 0, initialize(group, tid, partition), ok),
        ("write", 1, write(group, tid, partition, 10, [(10, 14, 2, 1), (15, 19, 0, 1)], delivery_complete_count=5),
         ok),
        ("read", 0, read(group, tid, partition), check_read),
        ("summary", 1, summary(group, tid, partition), check_summary),
        ("delete", 0, delete(group, tid, partition), ok),
        ("read after delete", 0, read(group, tid, partition), check_gone),
    ]
