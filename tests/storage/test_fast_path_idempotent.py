"""The produce fast path takes an idempotent producer's next batch in sequence; everything it does must be what
the general path (``ProducerAppendInfo``) does: same offsets, same duplicates and errors, same producer state."""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.records import validate_batches
from storage.config import LogConfig
from storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from storage.log import Log
from tests.storage.helpers import NoSyncFileIO, batch

NOW = 1_800_000_000_000
#: a bound on old timestamps that never bites: it sends every append down the general path
GENERAL_ONLY = LogConfig(message_timestamp_before_max_ms=2**62)

# (producer id, epoch, sequence step): step 0 repeats the previous batch, 1 is the next in order, 2 skips ahead
ops = st.lists(st.tuples(st.sampled_from([5, 9]), st.sampled_from([0, 0, 0, 1]), st.sampled_from([0, 1, 1, 1, 2]),
                         st.integers(1, 4), st.booleans()), min_size=1, max_size=40)


def _run(root: str, config: LogConfig, script) -> tuple[list, dict]:
    lg = Log.open(root, config, now_ms=0, file_io=NoSyncFileIO())
    outcomes = []
    next_seq: dict[tuple[int, int], int] = {}
    last: dict[int, tuple[int, int, int]] = {}
    try:
        for i, (pid, epoch, step, n, pre_validated) in enumerate(script):
            seq = next_seq.get((pid, epoch), 0)
            if step == 0 and pid in last and last[pid][0] == epoch:
                epoch, seq, n = last[pid]  # resend the last batch: a duplicate
            elif step == 2:
                seq += 3  # a gap: OutOfOrderSequence
            b = batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, ts=NOW - 1000 + i, tag=i)
            headers = validate_batches(b) if pre_validated else None
            try:
                info = lg.append_as_leader(b, 0, NOW, validated_headers=headers)
            except (OutOfOrderSequenceError, InvalidProducerEpochError) as e:
                outcomes.append(type(e).__name__)
                continue
            outcomes.append((info.first_offset, info.last_offset, info.duplicate, info.log_start_offset))
            if not info.duplicate:
                next_seq[(pid, epoch)] = seq + n
                last[pid] = (epoch, seq, n)
        state = {pid: (e.producer_epoch, e.last_timestamp, e.current_txn_first_offset, list(e.batch_metadata))
                 for pid, e in lg.producer_state.producers.items()}
        outcomes.append(("leo", lg.log_end_offset, lg.producer_state.last_map_offset))
        return outcomes, state
    finally:
        lg.close()


@settings(deadline=None)
@given(script=ops)
def test_fast_path_matches_general_path_for_idempotent_producers(script):
    root = tempfile.mkdtemp(prefix="odradek-idem-")
    try:
        fast = _run(root + "/fast-0", LogConfig(), script)
        general = _run(root + "/general-0", GENERAL_ONLY, script)
        assert fast == general
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_idempotent_batches_in_order_take_the_fast_path(tmp_path, monkeypatch):
    lg = Log.open(str(tmp_path / "t-0"), LogConfig(), now_ms=0, file_io=NoSyncFileIO())
    lg.append_as_leader(batch(2, producer_id=3, producer_epoch=0, base_sequence=0, ts=NOW), 0, NOW)  # new producer
    calls = []
    monkeypatch.setattr(lg, "_append", lambda *a, **k: calls.append(a))
    for seq in (2, 5, 9):
        n = {2: 3, 5: 4, 9: 1}[seq]
        info = lg.append_as_leader(batch(n, producer_id=3, producer_epoch=0, base_sequence=seq, ts=NOW), 0, NOW)
        assert info.last_offset == seq + n - 1
    assert calls == []
    e = lg.producer_state.last_entry(3)
    assert (e.last_seq, e.last_data_offset, len(e.batch_metadata)) == (9, 9, 4)
    lg.close()
