"""LogManager: Kafka's per-log-dir layout and files, config names and defaults, partition placement, delete,
periodic work (retention, flush.ms, checkpoints), the background cleaner, restart."""

from __future__ import annotations

import os
import time

import pytest

from storage.checkpoints import MetaProperties, OffsetCheckpointFile
from storage.config import ConfigError, LogConfig, LogManagerConfig
from storage.errors import KafkaStorageError
from storage.log_manager import LogManager
from storage.verify import main as verify_main
from tests.storage.helpers import NoSyncFileIO, all_records, batch


def test_kafka_defaults():
    c = LogConfig()
    assert (c.segment_bytes, c.index_interval_bytes, c.max_index_size) == (1073741824, 4096, 10485760)
    assert c.retention_ms == 168 * 3600 * 1000 and c.retention_bytes == -1
    assert c.segment_ms == 7 * 24 * 3600 * 1000 and c.delete_retention_ms == 86400000
    assert c.file_delete_delay_ms == 60000 and c.min_cleanable_dirty_ratio == 0.5
    assert c.cleanup_policy == ("delete",) and c.max_message_bytes == 1048588
    assert c.flush_messages == c.flush_ms == 2**63 - 1
    assert LogConfig.from_props() == c


def test_broker_synonyms_and_topic_overrides():
    broker = {"log.retention.hours": "1", "log.roll.hours": "2", "log.segment.bytes": "1000",
              "log.cleaner.min.cleanable.ratio": "0.3", "log.segment.delete.delay.ms": "5",
              "message.max.bytes": "777", "log.index.size.max.bytes": "4096", "log.flush.interval.messages": "1"}
    c = LogConfig.from_props({}, broker)
    assert c.retention_ms == 3600_000 and c.segment_ms == 7200_000 and c.segment_bytes == 1000
    assert c.min_cleanable_dirty_ratio == 0.3 and c.file_delete_delay_ms == 5 and c.max_message_bytes == 777
    assert c.max_index_size == 4096 and c.flush_messages == 1
    # log.retention.ms wins over minutes and hours
    assert LogConfig.from_props({}, {"log.retention.ms": "5", "log.retention.minutes": "1",
                                     "log.retention.hours": "1"}).retention_ms == 5
    assert LogConfig.from_props({}, {"log.retention.minutes": "2", "log.retention.hours": "1"}).retention_ms == 120_000
    t = LogConfig.from_props({"retention.ms": "10", "cleanup.policy": "compact,delete"}, broker)
    assert t.retention_ms == 10 and t.compact and t.delete and t.segment_bytes == 1000
    assert t.overridden == {"retention.ms", "cleanup.policy"}
    assert t.get("retention.ms") == 10 and t.to_topic_props()["cleanup.policy"] == "compact,delete"
    for bad in ({"retention.ms": "abc"}, {"cleanup.policy": "shred"}, {"min.cleanable.dirty.ratio": "2"},
                {"segment.bytes": "1"}, {"no.such.config": "1"}):
        with pytest.raises(ConfigError):
            LogConfig.from_props(bad)


def test_layout_and_restart(tmp_path):
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    cfg = LogManagerConfig(log_dirs=(d1, d2), cluster_id="q1Sh-9_ISia_zwGINzRvyQ", node_id=4)
    lm = LogManager(cfg, {"log.segment.bytes": "2000"}, file_io=NoSyncFileIO())
    lm.startup(0)
    logs = [lm.get_or_create_log("topic", p, now_ms=0, topic_id=bytes(range(1, 17))) for p in range(4)]
    # spread across dirs, fewest partitions first
    assert sorted(os.path.dirname(lg.dir) for lg in logs) == [d1, d1, d2, d2]
    for lg in logs:
        for i in range(20):
            lg.append_as_leader(batch(1, value_size=200, tag=i), 3, now_ms=0)
        lg.update_high_watermark(15)
    logs[0].maybe_increment_log_start_offset(12)
    lm.shutdown(0)
    for d in (d1, d2):
        names = set(os.listdir(d))
        assert {"meta.properties", ".kafka_cleanshutdown", "recovery-point-offset-checkpoint",
                "log-start-offset-checkpoint", "replication-offset-checkpoint", "cleaner-offset-checkpoint"} <= names
        mp = MetaProperties.read(os.path.join(d, "meta.properties"))
        assert (mp.version, mp.cluster_id, mp.node_id) == (1, "q1Sh-9_ISia_zwGINzRvyQ", 4)
        assert mp.directory_id is not None
        assert open(os.path.join(d, ".kafka_cleanshutdown")).read() == '{"version":0,"brokerEpoch":-1}'
    part = os.path.join(os.path.dirname(logs[0].dir), "topic-0")
    assert {"partition.metadata", "leader-epoch-checkpoint", "00000000000000000000.log",
            "00000000000000000000.index", "00000000000000000000.timeindex"} <= set(os.listdir(part))
    assert open(os.path.join(part, "partition.metadata")).read() == "version: 0\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA"
    assert open(os.path.join(part, "leader-epoch-checkpoint")).read() == "0\n1\n3 12\n"  # moved to the log start
    rp = OffsetCheckpointFile(os.path.join(os.path.dirname(logs[0].dir), "recovery-point-offset-checkpoint")).read()
    assert set(rp.values()) == {20}
    hw = OffsetCheckpointFile(os.path.join(os.path.dirname(logs[0].dir), "replication-offset-checkpoint")).read()
    assert set(hw.values()) == {15}
    ls = open(os.path.join(os.path.dirname(logs[0].dir), "log-start-offset-checkpoint")).read()
    assert ls == "0\n1\ntopic 0 12\n"
    assert verify_main([d1, d2]) == 0

    lm2 = LogManager(cfg, {"log.segment.bytes": "2000"}, file_io=NoSyncFileIO())
    lm2.startup(0)
    assert not os.path.exists(os.path.join(d1, ".kafka_cleanshutdown"))  # deleted at startup
    lg0 = lm2.get_log("topic", 0)
    assert (lg0.log_start_offset, lg0.high_watermark, lg0.log_end_offset) == (12, 15, 20)
    assert lg0.topic_id == bytes(range(1, 17)) and lg0.load_stats.recovered_segments == 0
    assert [o for o, _, _ in all_records(lg0, 12)][0] <= 12
    # a second manager cannot take the same dirs
    with pytest.raises(KafkaStorageError):
        LogManager(cfg, file_io=NoSyncFileIO()).startup(0)
    lm2.shutdown(0)
    # a different node id is refused
    bad = LogManager(LogManagerConfig(log_dirs=(d1,), node_id=5), file_io=NoSyncFileIO())
    with pytest.raises(KafkaStorageError):
        bad.startup(0)


def test_delete_log_and_periodic_work(tmp_path):
    root = str(tmp_path / "logs")
    lm = LogManager(LogManagerConfig(log_dirs=(root,), log_retention_check_interval_ms=1000,
                                     log_flush_offset_checkpoint_interval_ms=1000,
                                     log_flush_scheduler_interval_ms=1000),
                    {"log.segment.bytes": "1000", "log.retention.ms": "5000", "log.segment.delete.delay.ms": "0"},
                    {"flushed": {"flush.ms": "100"}}, file_io=NoSyncFileIO())
    lm.startup(0)
    lg = lm.get_or_create_log("t", 0, now_ms=0)
    fl = lm.get_or_create_log("flushed", 0, now_ms=0)
    for i in range(20):
        lg.append_as_leader(batch(1, value_size=200, ts=1000 + i), 0, now_ms=0)
        fl.append_as_leader(batch(1, ts=1000 + i), 0, now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    n = lg.num_segments
    lm.maintenance(500)
    assert fl.recovery_point == 20  # flush.ms elapsed at the flusher's first check
    fl.append_as_leader(batch(1, ts=2000), 0, now_ms=500)
    lm.maintenance(1000)
    assert fl.recovery_point == 20  # log.flush.scheduler.interval.ms: the flusher looks again at 1500
    lm.maintenance(2000)
    assert fl.recovery_point == 21
    assert lg.num_segments == n  # nothing old enough yet
    lm.maintenance(1000 + 20 + 5001)
    assert lg.num_segments == 1 and lg.log_start_offset == 20
    lm.scheduler.run_all()
    assert [f for f in os.listdir(lg.dir) if f.endswith(".deleted")] == []
    # topic config change applies to the live log
    lm.update_topic_config("t", {"retention.ms": "-1"})
    assert lg.config.retention_ms == -1
    # delete: renamed to <topic>-<partition>.<uuid>-delete, removed later, and dropped from checkpoints
    assert lm.delete_log("flushed", 0)
    gone = [n for n in os.listdir(root) if n.endswith("-delete")]
    assert len(gone) == 1 and gone[0].startswith("flushed-0.")
    lm.scheduler.run_all()
    assert not [n for n in os.listdir(root) if n.endswith("-delete")]
    assert lm.get_log("flushed", 0) is None
    rp = OffsetCheckpointFile(os.path.join(root, "recovery-point-offset-checkpoint")).read()
    assert ("flushed", 0) not in rp
    lm.shutdown(0)


def test_background_threads_clean_and_retain(tmp_path):
    root = str(tmp_path / "logs")
    lm = LogManager(LogManagerConfig(log_dirs=(root,), log_cleaner_backoff_ms=20,
                                     log_retention_check_interval_ms=10),
                    {"log.segment.bytes": "1500", "log.segment.delete.delay.ms": "0"},
                    {"c": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"}},
                    file_io=NoSyncFileIO())
    lm.startup(0)
    lg = lm.get_or_create_log("c", 0, now_ms=0)
    for i in range(100):
        lg.append_as_leader(batch(1, key=b"k%d" % (i % 3), value_size=50, tag=i), 0, now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    before = lg.size
    lm.start_background(interval_s=0.02)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and lg.size > before // 3:
        time.sleep(0.05)
    lm.shutdown(int(time.time() * 1000))
    assert lg.size <= before // 3
    lm2 = LogManager(LogManagerConfig(log_dirs=(root,)), {}, {"c": {"cleanup.policy": "compact"}},
                     file_io=NoSyncFileIO())
    lm2.startup(0)
    recs = all_records(lm2.get_log("c", 0))
    latest = {}
    for off, k, v in recs:
        latest[k] = v
    assert set(latest) == {b"k0", b"k1", b"k2"}
    assert latest[b"k0"].startswith(b"99:") and latest[b"k1"].startswith(b"97:")
    assert lm2.get_log("c", 0).verify() == []
    lm2.shutdown(0)


def test_a_deleted_log_keeps_its_files_open_until_the_delete_delay(tmp_path):
    """Kafka's asyncDelete: the directory is renamed at once, the files close only when the delayed delete
    runs, so a Fetch answer still being sent from a file slice reads the bytes it was given."""
    root = str(tmp_path / "logs")
    lm = LogManager(LogManagerConfig(log_dirs=(root,)), {"file.delete.delay.ms": "60000"}, file_io=NoSyncFileIO())
    lm.startup(0)
    lg = lm.get_or_create_log("gone", 0, now_ms=0)
    lg.append_as_leader(batch(3, ts=1000), 0, now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    served = lg.read(0, 1 << 20).records  # a fetch answer not yet sent
    expected = served.read()
    assert lm.delete_log("gone", 0)
    assert not os.path.exists(os.path.join(root, "gone-0"))  # renamed at once
    assert served.read() == expected  # the descriptor still reads the same file
    lm.scheduler.run_all()  # the delayed delete: closed and removed
    assert not [d for d in os.listdir(root) if d.startswith("gone-0")]
    lm.shutdown(0)
