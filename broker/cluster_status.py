"""``odradek cluster status --bootstrap-server HOST:PORT``: the quorum, the brokers and the partitions that
need attention, as ``kafka-metadata-quorum.sh describe --status --replication`` and ``kafka-topics.sh
--describe --unavailable-partitions / --under-replicated-partitions`` show them.

The quorum comes from DescribeQuorum (a broker forwards it to the active controller), the brokers from
DescribeCluster with fenced brokers included, the partitions from Metadata. Share groups (KIP-932), as
``kafka-share-groups.sh --describe --offsets`` sums them: every broker is asked for the share groups it coordinates
(ListGroups v5, type ``share``), and that broker for each group's state and members (ShareGroupDescribe) and its lag
per topic (DescribeShareGroupOffsets v1, KIP-1226: the sum of its partitions' lags, ``-`` while one is unknown).
A broker that cannot be reached or answers an error (its group coordinator loading, say) gets a line saying its
share groups are not listed, as the quorum's line says it is unavailable: a missing group is never silent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from broker.clock import SYSTEM_CLOCK
from broker.network.node_client import BadResponse, NodeClient
from protocol.generated.messages import (
    DescribeClusterRequest, DescribeQuorumRequest, DescribeShareGroupOffsetsRequest, ListGroupsRequest,
    MetadataRequest, ShareGroupDescribeRequest,
)
from protocol.errors import ErrorCode
from protocol.generated.messages import describe_share_group_offsets_request as dsgo
from protocol.generated.messages.describe_quorum_request import PartitionData, TopicData
from protocol.topics import METADATA_PARTITION, METADATA_TOPIC

TIMEOUT_S = 15.0


async def gather_status(host: str, port: int, security=None) -> tuple:
    client = NodeClient(host, port, "odradek-cluster-status", connect_timeout_s=TIMEOUT_S, security=security)
    try:
        quorum = await client.request(DescribeQuorumRequest(topics=[TopicData(
            topic_name=METADATA_TOPIC, partitions=[PartitionData(partition_index=METADATA_PARTITION)])]), 2,
            TIMEOUT_S)
        cluster = await client.request(DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                              endpoint_type=1, include_fenced_brokers=True), 2,
                                       TIMEOUT_S)
        metadata = await client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12,
                                        TIMEOUT_S)
    finally:
        await client.close()
    share = await asyncio.gather(*(_share_groups(b.broker_id, b.host, b.port, security)
                                   for b in sorted(cluster.brokers, key=lambda b: b.broker_id) if not b.is_fenced))
    return (quorum, cluster, metadata, sorted(g for groups, _ in share for g in groups),
            [problem for _, problems in share for problem in problems])


def _unavailable(code: int) -> str:
    try:
        return f"unavailable (error {ErrorCode(code).name})"
    except ValueError:
        return f"unavailable (error {code})"


async def _share_groups(broker_id: int, host: str, port: int, security) -> tuple[list[tuple], list[str]]:
    """The share groups one broker coordinates, (group id, state, members, {topic: lag or None}), and what could not
    be listed: the broker unreachable or its ListGroups refused (the whole broker), a group's describe refused."""
    client = NodeClient(host, port, "odradek-cluster-status", connect_timeout_s=TIMEOUT_S, security=security)
    out: list[tuple] = []
    problems: list[str] = []
    where = f"broker {broker_id} ({host}:{port})"
    try:
        listed = await client.request(ListGroupsRequest(states_filter=[], types_filter=["share"]), 5, TIMEOUT_S)
        if listed.error_code:
            return out, [f"{where}: {_unavailable(listed.error_code)}, its share groups not listed"]
        ids = sorted(g.group_id for g in listed.groups if g.group_type == "share")
        if not ids:
            return out, problems
        described = await client.request(ShareGroupDescribeRequest(group_ids=ids), 1, TIMEOUT_S)
        offsets = await client.request(DescribeShareGroupOffsetsRequest(groups=[
            dsgo.DescribeShareGroupOffsetsRequestGroup(group_id=g, topics=None) for g in ids]), 1, TIMEOUT_S)
        lags = {g.group_id: share_lags(g) for g in offsets.groups}
        problems += [f"{g.group_id} on {where}: lag {_unavailable(g.error_code)}" for g in offsets.groups
                     if g.error_code]
        for d in described.groups:
            if d.error_code == 0:
                out.append((d.group_id, d.group_state, len(d.members), lags.get(d.group_id, {})))
            else:
                problems.append(f"{d.group_id} on {where}: {_unavailable(d.error_code)}")
    except (ConnectionError, OSError, asyncio.TimeoutError, BadResponse) as exc:
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        problems.append(f"{where}: unreachable ({reason}), its share groups not listed")
    finally:
        await client.close()
    return out, problems


def share_lags(group) -> dict[str, int | None]:
    """A DescribeShareGroupOffsets group's lag per topic: the sum over its partitions, None if any is unknown."""
    out: dict[str, int | None] = {}
    if group.error_code:
        return out
    for t in group.topics:
        lags = [p.lag for p in t.partitions]
        out[t.topic_name] = None if any(x < 0 for x in lags) or any(p.error_code for p in t.partitions) \
            else sum(lags)
    return out


def _ago(now_ms: int, ts: int) -> str:
    return "-" if ts < 0 else f"{max(0, now_ms - ts)} ms ago"


def render(quorum, cluster, metadata, now_ms: int, share_groups=(), share_unavailable=()) -> str:
    lines = [f"ClusterId:              {cluster.cluster_id}"]
    if quorum.error_code or quorum.topics[0].partitions[0].error_code:
        code = quorum.error_code or quorum.topics[0].partitions[0].error_code
        lines.append(f"Quorum:                 unavailable (error {code})")
    else:
        p = quorum.topics[0].partitions[0]
        leader = next((v for v in p.current_voters if v.replica_id == p.leader_id), None)
        leader_end = leader.log_end_offset if leader is not None else p.high_watermark
        leader_caught_up = leader.last_caught_up_timestamp if leader is not None else -1
        endpoints = {n.node_id: [f"{lst.name}://{lst.host}:{lst.port}" for lst in n.listeners] for n in quorum.nodes}
        max_lag = max((leader_end - v.log_end_offset for v in p.current_voters), default=0)
        caught = [v.last_caught_up_timestamp for v in p.current_voters]
        lag_time = -1 if leader_caught_up < 0 or min(caught) < 0 else leader_caught_up - min(caught)
        lines += [
            f"LeaderId:               {p.leader_id}",
            f"LeaderEpoch:            {p.leader_epoch}",
            f"HighWatermark:          {p.high_watermark}",
            f"MaxFollowerLag:         {max_lag}",
            f"MaxFollowerLagTimeMs:   {lag_time}",
            "CurrentVoters:          " + json.dumps([{"id": v.replica_id, "directoryId": None,
                                                      "endpoints": endpoints.get(v.replica_id, [])}
                                                     for v in p.current_voters]),
            "CurrentObservers:       " + json.dumps([{"id": o.replica_id, "directoryId": None} for o in p.observers]),
            "",
            f"{'NodeId':<8}{'LogEndOffset':<14}{'Lag':<8}{'LastFetchTimestamp':<21}{'LastCaughtUpTimestamp':<24}Status",
        ]
        for status, replicas in (("Voter", p.current_voters), ("Observer", p.observers)):
            for r in replicas:
                kind = "Leader" if r.replica_id == p.leader_id else ("Follower" if status == "Voter" else "Observer")
                lag = leader_end - r.log_end_offset if r.log_end_offset >= 0 else "-"
                lines.append(f"{r.replica_id:<8}{r.log_end_offset:<14}{lag!s:<8}"
                             f"{_ago(now_ms, r.last_fetch_timestamp):<21}{_ago(now_ms, r.last_caught_up_timestamp):<24}"
                             f"{kind}")
    lines += ["", "Brokers:"]
    for b in sorted(cluster.brokers, key=lambda b: b.broker_id):
        lines.append(f"  {b.broker_id:<6}{b.host}:{b.port:<8} rack={b.rack or '-':<10} "
                     f"{'fenced' if b.is_fenced else 'unfenced'}")
    offline, under = [], []
    for t in sorted(metadata.topics, key=lambda t: t.name or ""):
        for part in sorted(t.partitions, key=lambda p: p.partition_index):
            name = f"{t.name}-{part.partition_index}"
            if part.leader_id < 0:
                offline.append(f"{name} (replicas {list(part.replica_nodes)})")
            elif len(part.isr_nodes) < len(part.replica_nodes):
                under.append(f"{name} (isr {list(part.isr_nodes)} of replicas {list(part.replica_nodes)})")
    lines.append("")
    lines.append("Partitions without a leader: " + (", ".join(offline) if offline else "none"))
    lines.append("Under-replicated partitions: " + (", ".join(under) if under else "none"))
    lines.append("")
    lines.append("Share groups:" + ("" if share_groups or share_unavailable else " none"))
    for gid, state, members, lags in share_groups:
        topics = ", ".join(f"{t} lag={'-' if lag is None else lag}" for t, lag in sorted(lags.items()))
        lines.append(f"  {gid}  {state}  members={members}" + (f"  {topics}" if topics else ""))
    for problem in share_unavailable:
        lines.append(f"  {problem}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="odradek cluster", description="look at a running cluster")
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("status", help="the quorum, the brokers and the partitions that need attention")
    st.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    st.add_argument("--command-config", metavar="FILE", help="client properties for a TLS or SASL listener "
                    "(security.protocol, ssl.truststore.location, sasl.mechanism, sasl.jaas.config), as Kafka's tools")
    args = ap.parse_args(argv)
    host, _, port = args.bootstrap_server.rpartition(":")
    if not host or not port.isdigit():
        ap.error("--bootstrap-server is HOST:PORT")
    security = None
    if args.command_config:
        from broker.config.config_types import ConfigException
        from broker.security.node_links import client_properties_security
        from storage.checkpoints import decode_properties

        try:
            with open(args.command_config) as f:
                security = client_properties_security(decode_properties(f.read()))
        except (OSError, ConfigException, ValueError) as exc:
            print(f"odradek cluster status: --command-config: {exc}", file=sys.stderr)
            return 1
    try:
        quorum, cluster, metadata, share, unavailable = asyncio.run(
            gather_status(host.strip("[]"), int(port), security))
    except (ConnectionError, asyncio.TimeoutError, BadResponse) as exc:
        print(f"odradek cluster status: {args.bootstrap_server}: {exc or 'no answer'}", file=sys.stderr)
        return 1
    print(render(quorum, cluster, metadata, SYSTEM_CLOCK.now_ms(), share, unavailable))
    return 0
