"""SIGKILL with transactions: a child process appends transactional batches of a few producers, their COMMIT and
ABORT markers and plain batches, and is killed at a random moment (also during its own recovery).  After every kill
the ``.txnindex`` files of the recovered log hold exactly the aborted transactions a replay of the whole log finds,
each with the last stable offset as of its abort, in the segment of its marker.
"""

from __future__ import annotations

import os
import random
import select
import signal
import time

import pytest

from protocol.record_codec import build_end_txn_marker_batch, decode_batch
from protocol.records import LOG_OVERHEAD, iter_batch_positions
from storage import files
from storage.log import ORIGIN_COORDINATOR
from storage.txn_index import ENTRY_SIZE, AbortedTxn
from tests.storage.helpers import batch
from tests.storage.test_crash_process import _manager

ROUNDS = 30
PIDS = (1, 2, 3)


def _child(root: str, w: int, seed: int) -> None:
    try:
        lm = _manager(root)
        lm.startup(0)
        lg = lm.get_or_create_log("t", 0, now_ms=0)
        os.write(w, b"r")  # recovered
        rnd = random.Random(seed)
        while True:
            pid = rnd.choice(PIDS)
            entry = lg.producer_state.last_entry(pid)
            roll = rnd.random()
            if roll < 0.5:
                seq = entry.last_seq + 1 if entry is not None and entry.last_seq >= 0 else 0
                n = 1 + rnd.randrange(3)
                lg.append_as_leader(batch(n, producer_id=pid, producer_epoch=0, base_sequence=seq,
                                          is_transactional=True, value_size=rnd.randrange(10, 400)), 0, now_ms=0)
            elif roll < 0.85:
                marker = build_end_txn_marker_batch(commit=roll >= 0.75, producer_id=pid, producer_epoch=0,
                                                    coordinator_epoch=0, timestamp=0)
                lg.append_as_leader(bytearray(marker), 0, now_ms=0, origin=ORIGIN_COORDINATOR)
            else:
                lg.append_as_leader(batch(2), 0, now_ms=0)
            os.write(w, b"a")
            if rnd.random() < 0.02:
                lm.maintenance(1)  # flushes rolled segments, writes recovery-point checkpoints
    except BaseException:
        os._exit(3)


def _replay(lg) -> dict[int, list[AbortedTxn]]:
    """The aborted transactions of the whole log by segment of their marker, from a replay of its batches: the LSO at
    an abort is the first offset of the earliest other open transaction, else the marker's offset + 1."""
    ongoing: dict[int, int] = {}  # pid -> first offset of its open transaction
    out: dict[int, list[AbortedTxn]] = {}
    for seg in lg.log_segments():
        data = seg.log.read(0, seg.size)
        for pos, h in iter_batch_positions(data):
            if h.producer_id < 0:
                continue
            if not h.is_control:
                ongoing.setdefault(h.producer_id, h.base_offset)
                continue
            _, recs = decode_batch(data[pos:pos + h.batch_length + LOG_OVERHEAD], 0)
            aborted = recs[0].key[3] == 0  # the control record key's type: 0 ABORT, 1 COMMIT
            first = ongoing.pop(h.producer_id, None)
            if first is None or not aborted:
                continue
            lso = min(ongoing.values(), default=h.base_offset + 1)
            out.setdefault(seg.base_offset, []).append(AbortedTxn(h.producer_id, first, h.base_offset, lso))
    return out


def _on_disk(d: str) -> dict[int, list[AbortedTxn]]:
    out = {}
    for name in os.listdir(d):
        if name.endswith(files.TXN_INDEX_FILE_SUFFIX):
            with open(os.path.join(d, name), "rb") as f:
                data = f.read()
            assert len(data) % ENTRY_SIZE == 0, name
            if data:
                out[files.offset_from_file_name(name)] = [AbortedTxn.from_bytes(data, i)
                                                          for i in range(0, len(data), ENTRY_SIZE)]
    return out


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sigkill_with_transactions_rebuilds_the_txn_index(tmp_path):
    root = str(tmp_path)
    rnd = random.Random(20261127)
    aborts = 0
    for rnd_no in range(ROUNDS):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os.close(r)
            _child(root, w, rnd_no)
            os._exit(0)
        os.close(w)
        if rnd_no % 10 != 9:  # else killed while it recovers
            # a few dozen appends, then a random moment
            want, got = 1 + rnd.randrange(60), 0
            while got < want:
                ready, _, _ = select.select([r], [], [], 30)
                assert ready, "child did not start"
                chunk = os.read(r, want - got)
                assert chunk, "child died"
                got += len(chunk)
        time.sleep(rnd.uniform(0.0, 0.01))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status), f"child exited on its own with status {status}"
        os.close(r)
        lm = _manager(root)
        lm.startup(0)
        lg = lm.get_or_create_log("t", 0, now_ms=0)
        try:
            expected = _replay(lg)
            assert _on_disk(lg.dir) == expected, f"round {rnd_no}"
            assert [t for s in lg.log_segments() for t in s.txn_index.all_aborted_txns()] == \
                [t for base in sorted(expected) for t in expected[base]]
            aborts = sum(len(v) for v in expected.values())
        finally:
            lm.close_without_checkpoints()
    assert aborts > 10
