"""The metadata log: records survive a restart and rebuild the same image; a torn tail is recovered."""

from __future__ import annotations

import os
import random

from broker.metadata_log import METADATA_PARTITION_DIR, MetadataLog
from cluster.controller import Controller, NewTopic

NOW = 1_700_000_000_000


def test_restart_rebuilds_identical_image(tmp_path):
    ml = MetadataLog(tmp_path)
    image = ml.open(NOW)
    c = Controller(1, {"num.partitions": 2}, random.Random(1))
    image = ml.append(c.bootstrap(image).records, NOW)
    image = ml.append(c.register_broker(image, 1, b"\x02" * 16, [("PLAINTEXT", "h", 1)], None, 0, []).records, NOW)
    created = c.create_topics(image, [NewTopic("a"), NewTopic("b", 3, configs={"retention.ms": "5"})])
    image = ml.append(created.records, NOW)
    image = ml.append(c.delete_topics(image, ["a"], []).records, NOW)
    image = ml.append(c.allocate_producer_ids(image, 1, 0).records, NOW)
    first_epoch = ml.epoch
    ml.close()

    ml2 = MetadataLog(tmp_path)
    again = ml2.open(NOW)
    assert again == image
    assert sorted(again.topics_by_name) == ["b"] and again.next_producer_id == 1000
    assert ml2.epoch == first_epoch + 1
    ml2.close()


def test_torn_tail_is_dropped(tmp_path):
    ml = MetadataLog(tmp_path)
    image = ml.open(NOW)
    c = Controller(1, {}, random.Random(1))
    image = ml.append(c.register_broker(image, 1, b"\x02" * 16, [("PLAINTEXT", "h", 1)], None, 0, []).records, NOW)
    good = ml.append(c.create_topics(image, [NewTopic("t", 1)]).records, NOW)
    ml.append(c.create_topics(good, [NewTopic("u", 1)]).records, NOW)
    ml.close()
    seg = tmp_path / METADATA_PARTITION_DIR / ("0" * 20 + ".log")
    size = os.path.getsize(seg)
    with open(seg, "r+b") as f:
        f.truncate(size - 7)  # the last batch is torn, as after a crash mid-write
    again = MetadataLog(tmp_path).open(NOW)
    assert sorted(again.topics_by_name) == ["t"]
