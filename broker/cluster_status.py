"""``odradek cluster status --bootstrap-server HOST:PORT``: the quorum, the brokers and the partitions that
need attention, as ``kafka-metadata-quorum.sh describe --status --replication`` and ``kafka-topics.sh
--describe --unavailable-partitions / --under-replicated-partitions`` show them.

The quorum comes from DescribeQuorum (a broker forwards it to the active controller), the brokers from
DescribeCluster with fenced brokers included, the partitions from Metadata.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from broker.clock import SYSTEM_CLOCK
from broker.network.node_client import BadResponse, NodeClient
from protocol.generated.messages import DescribeClusterRequest, DescribeQuorumRequest, MetadataRequest
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
        return quorum, cluster, metadata
    finally:
        await client.close()


def _ago(now_ms: int, ts: int) -> str:
    return "-" if ts < 0 else f"{max(0, now_ms - ts)} ms ago"


def render(quorum, cluster, metadata, now_ms: int) -> str:
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
        quorum, cluster, metadata = asyncio.run(gather_status(host.strip("[]"), int(port), security))
    except (ConnectionError, asyncio.TimeoutError, BadResponse) as exc:
        print(f"odradek cluster status: {args.bootstrap_server}: {exc or 'no answer'}", file=sys.stderr)
        return 1
    print(render(quorum, cluster, metadata, SYSTEM_CLOCK.now_ms()))
    return 0
