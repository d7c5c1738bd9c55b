"""Issue 30's "an undecodable record in either internal topic: skipped on load, logged": a ``__consumer_offsets``
partition holding share-group records (types 10-15) and a ``__share_group_state`` partition (types 0, 1) are loaded
by their services' replay with, between the good records, a record whose value cannot be decoded and one of a record
type this broker does not know (Kafka's CoordinatorLoaderImpl ignores those with a warning). The loaded state equals
the one the good records alone give; each skipped record is named in a warning."""

from __future__ import annotations

import logging
import struct

from broker.groups.group_service import _replay_log as replay_group_log
from broker.share.share_coordinator_service import _replay_log as replay_share_log
from cluster.share.share_coordinator import ShareCoordinatorConfig, ShareCoordinatorShard
from protocol.record_codec import Record, build_batch
from protocol.topics import GROUP_METADATA_TOPIC, SHARE_GROUP_STATE_TOPIC
from tests.groups.test_share_state_machine import GID, M1, M2, SCtx
from tests.share.test_share_coordinator_shard import Shard, image, init_req, read_req, write_req


class _Log:
    """One record per batch at consecutive offsets: what a partition's log hands the loader."""

    def __init__(self, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
        self.topic, self.partition = topic, 0
        self.batches = [build_batch([Record(k, v, timestamp=0)], base_offset=i) for i, (k, v) in enumerate(records)]
        self.log_end_offset = len(records)

    def iter_batches(self, start: int):
        yield from self.batches


def _with_bad_records(good: list[tuple[bytes, bytes | None]], undecodable: tuple[bytes, bytes],
                      unknown: tuple[bytes, bytes]) -> list[tuple[bytes, bytes | None]]:
    """The good records with the undecodable one after the first and the unknown type after the second."""
    return good[:1] + [undecodable] + good[1:2] + [unknown] + good[2:]


def _skipped(caplog, topic: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and topic in r.getMessage()]


def test_consumer_offsets_load_skips_and_logs_undecodable_and_unknown_records(caplog):
    ctx = SCtx()
    ctx.initialize_all(ctx.join(M1, ["foo"]))
    ctx.join(M2, ["foo", "bar"])
    for m in (M1, M2):
        ctx.hb(group_id=GID, member_id=m, member_epoch=ctx.share_group().members[m].member_epoch)
    good = [r.encode() for r in ctx.log]
    # a ShareGroupMetadata key (type 11) whose value is cut short; a type 9 record (never released by Kafka)
    undecodable = (struct.pack(">h", 11) + struct.pack(">h", 1) + GID.encode()[:1], struct.pack(">h", 0) + b"\x01")
    unknown = (struct.pack(">h", 9) + struct.pack(">h", 1) + b"g", b"\x00\x00")
    log = _Log(GROUP_METADATA_TOPIC, _with_bad_records(good, undecodable, unknown))
    fresh = SCtx(ctx.image)
    caplog.set_level(logging.WARNING, logger="odradek")
    assert replay_group_log(fresh.shard, log) == len(good)
    fresh.shard.on_loaded(ctx.time)
    before, after = ctx.share_group(), fresh.share_group()
    assert (after.group_epoch, after.assignment_epoch, after.members, after.target_assignment) == \
        (before.group_epoch, before.assignment_epoch, before.members, before.target_assignment)
    assert fresh.shard.share.state_metadata == ctx.shard.share.state_metadata
    assert fresh.shard.next_offset == log.log_end_offset
    warned = _skipped(caplog, GROUP_METADATA_TOPIC)
    assert len(warned) == 2, warned
    assert "undecodable record" in warned[0] and "offset 1" in warned[0]
    assert "Unknown record type 9" in warned[1] and "offset 3" in warned[1]


def test_share_group_state_load_skips_and_logs_undecodable_and_unknown_records(caplog):
    s = Shard(per_snapshot=2)
    good = []
    for now, op in enumerate((
            lambda now: s.shard.initialize_state(init_req(state_epoch=1), now),
            lambda now: s.shard.write_state(write_req(leader_epoch=1, state_epoch=1, start_offset=0,
                                                      batches=((0, 9, 2, 1),)), now),
            lambda now: s.shard.write_state(write_req(leader_epoch=2, state_epoch=1, start_offset=10,
                                                      batches=((10, 14, 0, 2),)), now),
            lambda now: s.shard.write_state(write_req(leader_epoch=2, state_epoch=1, start_offset=12,
                                                      batches=((12, 14, 2, 3),)), now))):
        res = s.apply(op(now))
        good += [r.encode() for r in res.records]
    assert len(good) >= 3
    undecodable = (struct.pack(">h", 1) + b"\xff", b"\x00\x00\xff")  # a ShareUpdate key cut short
    unknown = (struct.pack(">h", 5) + b"\x00\x01g", b"\x00\x00")  # no such __share_group_state record type
    log = _Log(SHARE_GROUP_STATE_TOPIC, _with_bad_records(good, undecodable, unknown))
    fresh = ShareCoordinatorShard(ShareCoordinatorConfig(2, 300_000))
    fresh.on_new_metadata_image(image())
    caplog.set_level(logging.WARNING, logger="odradek")
    assert replay_share_log(fresh, log) == len(good)
    assert fresh.state == s.shard.state
    assert fresh.leader_epochs == s.shard.leader_epochs and fresh.state_epochs == s.shard.state_epochs
    p = fresh.read_state(read_req(leader_epoch=2), 4).response.results[0].partitions[0]
    assert (p.error_code, p.start_offset, p.state_epoch) == (0, 12, 1)
    warned = _skipped(caplog, SHARE_GROUP_STATE_TOPIC)
    assert len(warned) == 2, warned
    assert "undecodable record" in warned[0] and "offset 1" in warned[0]
    assert "Unknown record type 5" in warned[1] and "offset 3" in warned[1]

