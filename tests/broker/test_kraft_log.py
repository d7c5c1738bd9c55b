"""``__cluster_metadata-0`` on disk (KRaftLog): a torn write above the recovery point is cut on open (the leader
sends it again); damage below it stops the node with the segment named; a truncation never leaves the
recovery point checkpoint above the log."""

from __future__ import annotations

import pytest

from broker.quorum.kraft_log import RECOVERY_POINT_FILE, KRaftLog, MetadataLogCorruption
from cluster.raft.log import Entry
from protocol.record_codec import Record, build_batch


def _log(tmp_path) -> KRaftLog:
    raft_log = KRaftLog(tmp_path / "__cluster_metadata-0", frozenset({1}), lambda: 0)
    raft_log.open()
    return raft_log


def _fill(raft_log: KRaftLog, n: int, start: int = 0, epoch: int = 1) -> None:
    raft_log.append([Entry(start + i, epoch, build_batch([Record(value=b"v%d" % i)]), count=1) for i in range(n)])
    raft_log.flush()


def test_a_torn_tail_above_the_recovery_point_is_cut(tmp_path):
    raft_log = _log(tmp_path)
    _fill(raft_log, 10)
    raft_log.close()  # recovery point 10
    segment = next((tmp_path / "__cluster_metadata-0").glob("*.log"))
    data = segment.read_bytes()
    segment.write_bytes(data + data[-40:-5])  # half a batch, as a crash mid-write leaves it
    reopened = _log(tmp_path)
    assert reopened.end_offset == 10 and reopened.disk.log_end_offset == 10


def test_damage_below_the_recovery_point_stops_the_node_naming_the_segment(tmp_path):
    raft_log = _log(tmp_path)
    _fill(raft_log, 10)
    raft_log.close()
    segment = next((tmp_path / "__cluster_metadata-0").glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0x01
    segment.write_bytes(bytes(data))
    for _ in range(2):  # and again on the next start: it never comes back with the damaged log
        with pytest.raises(MetadataLogCorruption, match=f"segment {segment} is corrupt below its recovery point"):
            _log(tmp_path)


def test_truncation_lowers_the_recovery_point_checkpoint(tmp_path):
    raft_log = _log(tmp_path)
    _fill(raft_log, 10)
    raft_log.close()
    raft_log = _log(tmp_path)
    raft_log.truncate_to(6)  # a follower's divergent tail
    assert (tmp_path / "__cluster_metadata-0" / RECOVERY_POINT_FILE).read_text().strip() == "6"
    _fill(raft_log, 2, start=6, epoch=2)
    raft_log.close()
    assert _log(tmp_path).end_offset == 8
