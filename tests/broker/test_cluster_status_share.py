"""``odradek cluster status``'s share-group lines when a broker's group coordinator cannot answer: the broker
unreachable, its ListGroups refused, a group's describe or offsets refused each get a line (the command never
leaves share groups out silently). The brokers are stand-ins (a NodeClient answering from a table), plus one
real refused connection on a closed loopback port."""

from __future__ import annotations

import asyncio
import socket

from broker import cluster_status
from protocol.errors import ErrorCode as E
from protocol.generated.messages import (
    DescribeClusterResponse, DescribeQuorumResponse, DescribeShareGroupOffsetsResponse, ListGroupsResponse,
    MetadataResponse, ShareGroupDescribeResponse,
)
from protocol.generated.messages import describe_cluster_response as dc
from protocol.generated.messages import describe_quorum_response as dq
from protocol.generated.messages import describe_share_group_offsets_response as dsgo
from protocol.generated.messages import list_groups_response as lg
from protocol.generated.messages import share_group_describe_response as sgd


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _offsets(group_id, lag=None, error=0):
    topics = [] if lag is None else [dsgo.DescribeShareGroupOffsetsResponseTopic(topic_name="t", partitions=[
        dsgo.DescribeShareGroupOffsetsResponsePartition(partition_index=0, start_offset=0, lag=lag)])]
    return dsgo.DescribeShareGroupOffsetsResponseGroup(group_id=group_id, topics=topics, error_code=error)


# what each stand-in broker (by port) answers, by API key
BROKERS = {
    9001: {  # the bootstrap broker: coordinates "ok" (described, lag 4) and "gone" (describe refused)
        55: DescribeQuorumResponse(error_code=E.NOT_LEADER_OR_FOLLOWER, topics=[dq.TopicData(
            topic_name="__cluster_metadata", partitions=[dq.PartitionData(error_code=0)])]),
        60: DescribeClusterResponse(cluster_id="c1", brokers=[
            dc.DescribeClusterBroker(broker_id=1, host="stand-in", port=9001),
            dc.DescribeClusterBroker(broker_id=2, host="stand-in", port=9002),
            dc.DescribeClusterBroker(broker_id=3, host="stand-in", port=9003),
            dc.DescribeClusterBroker(broker_id=4, host="stand-in", port=9004, is_fenced=True)]),
        3: MetadataResponse(topics=[]),
        16: ListGroupsResponse(groups=[lg.ListedGroup(group_id=g, group_state="Stable", group_type="share")
                                       for g in ("ok", "gone", "lagless")]),
        77: ShareGroupDescribeResponse(groups=[
            sgd.DescribedGroup(group_id="ok", group_state="Stable", members=[sgd.Member(member_id="m")]),
            sgd.DescribedGroup(group_id="gone", error_code=E.GROUP_ID_NOT_FOUND),
            sgd.DescribedGroup(group_id="lagless", group_state="Empty")]),
        90: DescribeShareGroupOffsetsResponse(groups=[_offsets("ok", lag=4), _offsets("gone"),
                                                      _offsets("lagless", error=E.COORDINATOR_NOT_AVAILABLE)]),
    },
    9002: {16: ListGroupsResponse(error_code=E.COORDINATOR_LOAD_IN_PROGRESS)},  # its coordinator still loading
    9003: None,  # unreachable
}


class _StandIn:
    """NodeClient's shape: a table lookup per API key; a broker without a table refuses the connection."""

    def __init__(self, host, port, client_id, connect_timeout_s=None, security=None):
        self.answers = BROKERS[port]

    async def request(self, req, version, timeout_s):
        if self.answers is None:
            raise ConnectionRefusedError(111, "Connection refused")
        return self.answers[req.API_KEY]

    async def close(self):
        pass


def test_cluster_status_says_which_share_groups_it_could_not_list(monkeypatch, capsys):
    """Broker 2's ListGroups answers COORDINATOR_LOAD_IN_PROGRESS, broker 3 cannot be reached, a group's describe
    and another's offsets are refused: each is a line under "Share groups:" beside the groups that were listed;
    the fenced broker is not asked."""
    monkeypatch.setattr(cluster_status, "NodeClient", _StandIn)
    assert cluster_status.main(["status", "--bootstrap-server", "stand-in:9001"]) == 0
    out = capsys.readouterr().out
    lines = out[out.index("Share groups:"):].splitlines()
    assert lines == [
        "Share groups:",
        "  lagless  Empty  members=0",
        "  ok  Stable  members=1  t lag=4",
        "  lagless on broker 1 (stand-in:9001): lag unavailable (error COORDINATOR_NOT_AVAILABLE)",
        "  gone on broker 1 (stand-in:9001): unavailable (error GROUP_ID_NOT_FOUND)",
        "  broker 2 (stand-in:9002): unavailable (error COORDINATOR_LOAD_IN_PROGRESS), its share groups not listed",
        "  broker 3 (stand-in:9003): unreachable (ConnectionRefusedError: [Errno 111] Connection refused), its share "
        "groups not listed",
    ]  # the fenced broker (9004, no table: a KeyError if asked) is not asked


def test_share_groups_of_a_broker_refusing_the_connection():
    """A real refused connection (a closed loopback port): no groups, one line naming the broker."""
    port = _closed_port()
    groups, problems = asyncio.run(asyncio.wait_for(cluster_status._share_groups(5, "127.0.0.1", port, None), 30))
    assert groups == []
    assert len(problems) == 1 and problems[0].startswith(f"broker 5 (127.0.0.1:{port}): unreachable (")
    assert problems[0].endswith("), its share groups not listed")


def test_render_says_none_only_when_every_broker_answered():
    quorum = DescribeQuorumResponse(error_code=E.NOT_LEADER_OR_FOLLOWER, topics=[dq.TopicData(partitions=[
        dq.PartitionData()])])
    cluster, metadata = DescribeClusterResponse(cluster_id="c1", brokers=[]), MetadataResponse(topics=[])
    assert cluster_status.render(quorum, cluster, metadata, 0).endswith("Share groups: none")
    text = cluster_status.render(quorum, cluster, metadata, 0, [], ["broker 1 (h:1): unreachable (x)"])
    assert text.endswith("Share groups:\n  broker 1 (h:1): unreachable (x)")
