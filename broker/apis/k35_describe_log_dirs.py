"""DescribeLogDirs: v1-5 (v5: is_cordoned, always false here).

Behaviour (ReplicaManager.describeLogDirs): one result per log dir with every hosted partition (or
the requested ones; null topics = all): size on disk, offset lag (0 for a leader: max(HW - LEO, 0)),
is_future_key false; v4+ total and usable bytes of the file system. Authorization (KafkaApis
.handleDescribeLogDirsRequest, with an authorizer): DESCRIBE on the cluster, else no results and
CLUSTER_AUTHORIZATION_FAILED (the top-level error code from v3; v1-2 have none and answer just an empty list).
"""

from __future__ import annotations

import os

from cluster.acls import AclOperation
from protocol.errors import ErrorCode
from protocol.generated.messages import DescribeLogDirsRequest, DescribeLogDirsResponse
from protocol.generated.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)

API_KEY = 35
VERSIONS = (1, 5)


async def handle(ctx, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
    wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
    by_dir: dict[str, dict[str, list[DescribeLogDirsPartition]]] = {str(d): {} for d in ctx.config.log_dirs}
    for (topic, index), part in sorted(ctx.replicas.partitions.items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        lg = part.log
        parent = os.path.dirname(lg.dir)
        by_dir.setdefault(parent, {}).setdefault(topic, []).append(DescribeLogDirsPartition(
            partition_index=index, partition_size=lg.size, offset_lag=max(lg.high_watermark - lg.log_end_offset, 0),
            is_future_key=False))
    results = []
    for d, topics in by_dir.items():
        try:
            st = os.statvfs(d)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        except OSError:
            total = usable = -1
        results.append(DescribeLogDirsResult(
            error_code=0, log_dir=d, total_bytes=total, usable_bytes=usable,
            topics=[DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in sorted(topics.items())]))
    return DescribeLogDirsResponse(error_code=0, results=results)
