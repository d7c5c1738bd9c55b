"""KIP-1228 on the partition leader: a WriteTxnMarkers v2 marker with transaction version 2 must carry an epoch
strictly above the transaction's (TV2 bumps it at every EndTxn), so a stale marker of an earlier transaction at the
same epoch is refused (the KAFKA-17754 race at the log); the coordinator's retry of a marker already written (same
epoch, nothing open) succeeds (KAFKA-19999). Versions 0/1 keep the old check (not lower). The cases follow the
descriptions of apache/kafka#20882 (KAFKA-19446) and #21176 (KAFKA-19999)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.record_codec import build_end_txn_marker_batch, decode_batch
from storage.errors import InvalidProducerEpochError
from storage.log import ORIGIN_COORDINATOR

from .helpers import batch, open_log


def _data(lg, pid: int, epoch: int, seq: int, n: int = 2):
    return lg.append_as_leader(batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                     is_transactional=True), 0, now_ms=0)


def _marker(lg, pid: int, epoch: int, tv: int, commit: bool = True):
    m = bytearray(build_end_txn_marker_batch(commit=commit, producer_id=pid, producer_epoch=epoch,
                                             coordinator_epoch=0, timestamp=0))
    return lg.append_as_leader(m, 0, now_ms=0, origin=ORIGIN_COORDINATOR, transaction_version=tv)


def _state(lg, pid: int) -> tuple[int, int | None, int]:
    """(producer epoch, first offset of the open transaction, log end offset)."""
    e = lg.producer_state.producers[pid]
    return e.producer_epoch, e.current_txn_first_offset, lg.log_end_offset


def test_tv2_marker_with_the_transactions_own_epoch_is_refused_and_changes_nothing(tmp_path):
    """The data was written at epoch 5; a TV2 marker at 5 is not this transaction's end (that one carries 6).
    Nothing is appended, the transaction stays open; the bumped marker then ends it."""
    lg = open_log(str(tmp_path))
    _data(lg, 1, 5, 0)
    before = _state(lg, 1)
    with pytest.raises(InvalidProducerEpochError):
        _marker(lg, 1, 5, tv=2)
    with pytest.raises(InvalidProducerEpochError):
        _marker(lg, 1, 4, tv=2)
    assert _state(lg, 1) == before == (5, 0, 2)
    _marker(lg, 1, 6, tv=2)
    assert _state(lg, 1) == (6, None, 3)
    assert lg.producer_state.first_undecided_offset() is None


@pytest.mark.parametrize("tv", [0, 1])
def test_before_tv2_a_marker_at_the_transactions_epoch_ends_it(tmp_path, tv):
    """TV0/1 markers carry the transaction's own epoch; only a lower one is fenced."""
    lg = open_log(str(tmp_path))
    _data(lg, 1, 5, 0)
    with pytest.raises(InvalidProducerEpochError):
        _marker(lg, 1, 4, tv=tv)
    _marker(lg, 1, 5, tv=tv)
    assert _state(lg, 1) == (5, None, 3)


def test_tv2_retry_of_a_written_marker_succeeds(tmp_path):
    """KAFKA-19999: the coordinator sends the marker again at the same bumped epoch (its answer was lost, or the
    coordinator reloaded the transaction in Prepare*): no transaction is open any more, so it is taken as the
    retry it is."""
    lg = open_log(str(tmp_path))
    _data(lg, 1, 5, 0)
    _marker(lg, 1, 6, tv=2, commit=False)
    _marker(lg, 1, 6, tv=2, commit=False)
    assert _state(lg, 1) == (6, None, 4)
    control = [decode_batch(b)[0] for b in lg.iter_batches(0)][1:]
    assert [(m.is_control, m.producer_epoch) for m in control] == [(True, 6), (True, 6)]


def test_tv2_next_transaction_at_the_bumped_epoch_is_ended_only_by_a_higher_marker(tmp_path):
    """The next transaction's data at epoch 6 (sequence 0 again): a delayed marker of the previous transaction at 6
    would close it, and is refused; its own end at 7 closes it."""
    lg = open_log(str(tmp_path))
    _data(lg, 1, 5, 0)
    _marker(lg, 1, 6, tv=2)
    _data(lg, 1, 6, 0)
    with pytest.raises(InvalidProducerEpochError):
        _marker(lg, 1, 6, tv=2)
    assert _state(lg, 1) == (6, 3, 5)
    _marker(lg, 1, 7, tv=2, commit=False)
    assert _state(lg, 1) == (7, None, 6)



@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["data", "marker"]), st.integers(0, 4), st.sampled_from([0, 1, 2])),
                min_size=1, max_size=25))
def test_the_logs_epoch_rules_agree_with_a_model(tmp_path_factory, steps):
    """Random transactional batches and markers of one producer (epochs 0-4, transaction versions 0-2) against a
    model of the rules: data is taken at an epoch not below the producer's (sequence 0 on a new epoch); a marker
    below TV2 at an epoch not below it; a TV2 marker above it, or at it with no transaction open (a retry). A
    refused append changes nothing."""
    lg = open_log(str(tmp_path_factory.mktemp("model")))
    epoch, open_txn, seq, end = -1, False, 0, 0
    for kind, e, tv in steps:
        if kind == "data":
            ok = e >= epoch
            s = 0 if e != epoch else seq
            try:
                _data(lg, 1, e, s, n=1)
                took = True
            except InvalidProducerEpochError:
                took = False
            assert took == ok, (kind, e, tv, epoch, open_txn)
            if ok:
                epoch, open_txn, seq, end = e, True, s + 1, end + 1
        else:
            ok = e >= epoch if tv < 2 else (e > epoch or (e == epoch and not open_txn))
            try:
                _marker(lg, 1, e, tv)
                took = True
            except InvalidProducerEpochError:
                took = False
            assert took == ok, (kind, e, tv, epoch, open_txn)
            if ok:
                seq = 0 if e != epoch else seq
                epoch, open_txn, end = max(epoch, e), False, end + 1
        assert lg.log_end_offset == end
        if epoch >= 0:
            got_epoch, first_offset, _ = _state(lg, 1)
            assert got_epoch == epoch and (first_offset is not None) == open_txn
