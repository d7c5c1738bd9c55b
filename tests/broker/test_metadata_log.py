"""The metadata log of a single node, a quorum of one voter: records survive a restart and rebuild the same image
(each start a new epoch); a torn tail is recovered."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random

from broker.quorum.log_dirs import METADATA_PARTITION_DIR
from cluster.controller import Controller, NewTopic
from tests.broker.one_voter import one_voter_quorum

NOW = 1_700_000_000_000


def test_restart_rebuilds_identical_image(tmp_path):
    async def main():
        q = await one_voter_quorum(tmp_path)
        c = Controller(1, {"num.partitions": 2}, random.Random(1))
        image = await q.commit(c.bootstrap(q.image).records)
        image = await q.commit(c.register_broker(image, 1, b"\x02" * 16, [("PLAINTEXT", "h", 1)], None, 0,
                                                 []).records)
        image = await q.commit(c.create_topics(image, [NewTopic("a"), NewTopic("b", 3, configs={"retention.ms": "5"})
                                                       ]).records)
        image = await q.commit(c.delete_topics(image, ["a"], []).records)
        image = await q.commit(c.allocate_producer_ids(image, 1, 0).records)
        first_epoch = q.driver.epoch
        await q.stop()

        again = await one_voter_quorum(tmp_path)
        try:
            # the same image; only its offset differs (the LeaderChange batch of the first start's epoch comes first)
            assert again.image == dataclasses.replace(image, offset=again.image.offset)
            assert sorted(again.image.topics_by_name) == ["b"] and again.image.next_producer_id == 1000
            assert again.driver.epoch == first_epoch + 1  # a restarted single voter elects itself again
        finally:
            await again.stop()

    asyncio.run(main())


def test_torn_tail_is_dropped(tmp_path):
    async def main():
        q = await one_voter_quorum(tmp_path)
        c = Controller(1, {}, random.Random(1))
        image = await q.commit(c.register_broker(q.image, 1, b"\x02" * 16, [("PLAINTEXT", "h", 1)], None, 0,
                                                 []).records)
        good = await q.commit(c.create_topics(image, [NewTopic("t", 1)]).records)
        await q.commit(c.create_topics(good, [NewTopic("u", 1)]).records)
        await q.stop()
        seg = tmp_path / METADATA_PARTITION_DIR / ("0" * 20 + ".log")
        size = os.path.getsize(seg)
        with open(seg, "r+b") as f:
            f.truncate(size - 7)  # the last batch is torn, as after a crash mid-write
        (tmp_path / METADATA_PARTITION_DIR / "recovery-point").unlink(missing_ok=True)  # as after kill -9
        again = await one_voter_quorum(tmp_path)
        try:
            assert sorted(again.image.topics_by_name) == ["t"]
        finally:
            await again.stop()

    asyncio.run(main())
