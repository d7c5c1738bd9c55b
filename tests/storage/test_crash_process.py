"""Process crash: a child process recovers the log, appends batches, reports each append that returned, and
is killed with SIGKILL at a random moment (also during its own recovery).  After every kill the log must be
exactly a prefix of what was appended, every batch CRC-valid, and every append that returned present.
"""

from __future__ import annotations

import os
import random
import select
import signal
import time

import pytest

from protocol.record_codec import decode_batch
from protocol.records import validate_batch

from storage.config import LogManagerConfig
from storage.log_manager import LogManager
from tests.storage.helpers import NoSyncFileIO, batch

ROUNDS = 60


BROKER = {"log.segment.bytes": "30000", "log.index.interval.bytes": "500", "log.index.size.max.bytes": "4096",
          "log.flush.offset.checkpoint.interval.ms": "0"}


def _manager(root: str, sync: bool = False) -> LogManager:
    props = dict(BROKER)
    if sync:
        props["log.flush.interval.messages"] = "1"
    return LogManager(LogManagerConfig(log_dirs=(root,), log_flush_offset_checkpoint_interval_ms=0), props,
                      file_io=NoSyncFileIO())


def _child(root: str, first_tag: int, w: int, sync: bool, seed: int) -> None:
    try:
        lm = _manager(root, sync)
        lm.startup(0)  # recovers from the checkpointed recovery point (there is never a clean-shutdown marker)
        lg = lm.get_or_create_log("t", 0, now_ms=0)
        os.write(w, (0).to_bytes(8, "big"))  # recovered, about to append
        rnd = random.Random(seed)
        tag = first_tag
        while True:
            b = batch(1 + rnd.randrange(4), value_size=rnd.randrange(10, 1500), tag=tag, ts=tag)
            lg.append_as_leader(b, 0, now_ms=0)
            os.write(w, tag.to_bytes(8, "big"))  # acknowledged
            tag += 1
            if rnd.random() < 0.01:
                lm.maintenance(tag)  # flushes rolled segments, writes recovery-point checkpoints
    except BaseException:
        os._exit(3)


def _log_tags(root: str, verify: bool) -> list[int]:
    lm = _manager(root)
    lm.startup(0)
    lg = lm.get_or_create_log("t", 0, now_ms=0)
    try:
        if verify:
            assert lg.verify() == []
        tags = []
        for b in lg.iter_batches(0):
            validate_batch(b)
            _, recs = decode_batch(b, 0)
            tags.append(int(recs[0].value.split(b":")[0]))
        return tags
    finally:
        lm.close_without_checkpoints()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sigkill_at_random_points(tmp_path):
    root = str(tmp_path)
    rnd = random.Random(20240917)
    expected: list[int] = []  # what the log must hold, in order
    next_tag = 1
    kills_mid_append = 0
    for rnd_no in range(ROUNDS):
        r, w = os.pipe()
        sync = rnd_no % 5 == 4
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os.close(r)
            _child(root, next_tag, w, sync, rnd_no)
            os._exit(0)
        os.close(w)
        buf = b""
        if rnd_no % 10 == 9:
            # kill it while it recovers the log
            deadline = time.monotonic() + rnd.uniform(0.0, 0.01)
        else:
            # wait until it has recovered, then kill it at a random moment of its appends
            while len(buf) < 8:
                ready, _, _ = select.select([r], [], [], 30)
                assert ready, "child did not start"
                buf += os.read(r, 65536)
            deadline = time.monotonic() + rnd.uniform(0.0, 0.03)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([r], [], [], left)
            if ready:
                chunk = os.read(r, 65536)
                if not chunk:
                    break
                buf += chunk
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status), f"child exited on its own with status {status}"
        while True:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            buf += chunk
        os.close(r)
        acked = [int.from_bytes(buf[i:i + 8], "big") for i in range(0, len(buf) - len(buf) % 8, 8)]
        acked = [t for t in acked if t != 0]
        if acked:
            kills_mid_append += 1
        tags = _log_tags(root, verify=rnd_no % 10 == 0 or rnd_no == ROUNDS - 1)
        # a prefix of everything appended: what was there, every acked batch, maybe one more in flight
        assert tags[: len(expected)] == expected, f"round {rnd_no}: earlier data changed"
        new = tags[len(expected):]
        assert new[: len(acked)] == acked, f"round {rnd_no}: acknowledged appends missing"
        assert len(new) <= len(acked) + 1
        if len(new) == len(acked) + 1:
            assert new[-1] == next_tag + len(acked)  # the append that was in progress
        expected = tags
        next_tag += len(new) + 1  # never reuse a tag (an unacked, lost batch's tag is skipped)
    assert kills_mid_append >= ROUNDS // 2
    assert len(expected) > 100
