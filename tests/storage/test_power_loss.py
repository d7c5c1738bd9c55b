"""Power loss: with ``flush.messages=1`` every acknowledged append survives; with Kafka's default policy
(no fsync, durability left to replication) recovery still yields a clean prefix of what was written."""

from __future__ import annotations

import random

import pytest

from protocol.record_codec import decode_batch
from protocol.records import validate_batch

from storage.config import LogManagerConfig
from storage.log_manager import LogManager
from tests.storage.helpers import batch
from tests.storage.powerloss import PowerLossIO

BROKER = {"log.segment.bytes": "4000", "log.index.size.max.bytes": "1024", "log.index.interval.bytes": "300"}


def _tags(lg) -> list[int]:
    out = []
    for b in lg.iter_batches(lg.log_start_offset):
        validate_batch(b)
        _, recs = decode_batch(b, 0)
        out.append(int(recs[0].value.split(b":")[0]))
    return out


def _run(root: str, seed: int, props: dict, rounds: int = 6) -> None:
    rnd = random.Random(seed)
    written: list[int] = []   # every batch appended, in order (acked or not)
    acked: set[int] = set()
    sync_every_append = props.get("log.flush.interval.messages") == "1"
    tag = 0
    now = 1000
    for r in range(rounds):
        io = PowerLossIO()
        lm = LogManager(LogManagerConfig(log_dirs=(root,)), props, file_io=io)
        lm.startup(now)
        lg = lm.get_or_create_log("t", 0, now_ms=now)
        survivors = _check_recovered(lg, written, acked, sync_every_append, f"round {r}")
        written = written[: len(survivors)]
        acked = {t for t in acked if t in set(survivors)}
        for _ in range(rnd.randrange(5, 60)):
            tag += 1
            lg.append_as_leader(batch(1 + rnd.randrange(3), value_size=rnd.randrange(20, 300), tag=tag,
                                      ts=now), 0, now_ms=now)
            written.append(tag)
            acked.add(tag)
            now += 1
            lg.update_high_watermark(lg.log_end_offset)
            if rnd.random() < 0.1:
                lm.maintenance(now)  # checkpoints, background flush of rolled segments
            if rnd.random() < 0.05:
                lm.delete_log("unused", 0)
        # power loss: the process dies and unsynced writes vanish
        lm.close_without_checkpoints()
        io.power_loss()
    lm = LogManager(LogManagerConfig(log_dirs=(root,)), props)  # after the last power loss: plain file I/O
    lm.startup(now)
    lg = lm.get_log("t", 0)
    _check_recovered(lg, written, acked, sync_every_append, "after the last round")
    assert acked, "the workload appended nothing"
    lm.shutdown(now)


def _check_recovered(lg, written: list[int], acked: set[int], sync_every_append: bool, when: str) -> list[int]:
    """Recovery yields a clean prefix of what was written; with an fsync per append it holds every
    acknowledged append."""
    survivors = _tags(lg)
    assert survivors == written[: len(survivors)], f"{when}: not a prefix"
    if sync_every_append:
        assert survivors == written, f"{when}: an fsynced append was lost"
        assert acked <= set(survivors), f"{when}: acknowledged appends lost: {sorted(acked - set(survivors))[:10]}"
    assert lg.verify() == []
    return survivors


@pytest.mark.parametrize("seed", range(4))
def test_fsync_every_append_loses_nothing(tmp_path, seed):
    _run(str(tmp_path), seed, {**BROKER, "log.flush.interval.messages": "1"})


@pytest.mark.parametrize("seed", range(4))
def test_default_policy_recovers_a_clean_prefix(tmp_path, seed):
    _run(str(tmp_path), seed, dict(BROKER))


def test_default_policy_really_can_lose_unsynced_data(tmp_path):
    """The simulation is not vacuous: without fsync, a power loss does drop acknowledged data."""
    io = PowerLossIO()
    lm = LogManager(LogManagerConfig(log_dirs=(str(tmp_path),)), dict(BROKER), file_io=io)
    lm.startup(0)
    lg = lm.get_or_create_log("t", 0, now_ms=0)
    for i in range(10):
        lg.append_as_leader(batch(1, tag=i), 0, now_ms=0)
    lm.close_without_checkpoints()
    assert io.power_loss() > 0
    lm2 = LogManager(LogManagerConfig(log_dirs=(str(tmp_path),)), dict(BROKER))
    lm2.startup(0)
    assert lm2.get_log("t", 0).log_end_offset < 10
    lm2.shutdown(0)
