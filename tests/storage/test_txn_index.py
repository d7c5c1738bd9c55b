"""The aborted-transaction index on its own (storage/txn_index.py), a segment's recovery of it, and the producer
state's last stable offset it records: ports of Kafka's TransactionIndexTest, LogSegmentTest and
ProducerStateManagerTest cases (each docstring names the method), plus a model-based property test."""

from __future__ import annotations

import os
import struct
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.generated.messages.fetch_response import AbortedTransaction
from protocol.record_codec import Record, build_batch, build_end_txn_marker_batch
from storage.config import LogConfig
from storage.errors import CorruptIndexError
from storage.producer_state import CompletedTxn, ProducerStateEntry, ProducerStateManager
from storage.segment import LogSegment
from storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex

from .helpers import NoSyncFileIO

TXNS = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "00000000000000000000.txnindex")


@pytest.fixture
def index(path):
    idx = TransactionIndex(0, path, file_io=NoSyncFileIO())
    yield idx
    idx.close()


def test_position_set_correctly_when_opened(index, path):
    """TransactionIndexTest.testPositionSetCorrectlyWhenOpened"""
    for t in TXNS:
        index.append(t)
    index.close()
    reopened = TransactionIndex(0, path)
    another = AbortedTxn(3, 50, 60, 55)
    reopened.append(another)
    assert reopened.all_aborted_txns() == TXNS + [another]


def test_sanity_check(index, path):
    """TransactionIndexTest.testSanityCheck"""
    for t in TXNS:
        index.append(t)
    index.close()
    reopened = TransactionIndex(100, path)  # a different start offset fakes invalid data
    with pytest.raises(CorruptIndexError):
        reopened.sanity_check()


def test_sanity_check_rejects_a_torn_entry_an_unknown_version_and_offsets_going_back(index, path):
    """odradek's additions to sanityCheck: what Kafka's reader would skip or fail on later."""
    for t in TXNS:
        index.append(t)
    index.sanity_check()  # a good file passes
    with open(path, "ab") as f:
        f.write(b"\x00" * 10)  # a torn write
    with pytest.raises(CorruptIndexError, match="not a multiple of 34"):
        TransactionIndex(0, path).sanity_check()
    with open(path, "wb") as f:
        f.write(struct.pack(">hqqqq", 1, 1, 0, 10, 11))
    with pytest.raises(CorruptIndexError, match="version"):
        TransactionIndex(0, path).sanity_check()
    with open(path, "wb") as f:
        f.write(AbortedTxn(1, 0, 10, 11).to_bytes() + AbortedTxn(2, 0, 10, 11).to_bytes())
    with pytest.raises(CorruptIndexError, match="not greater"):
        TransactionIndex(0, path).sanity_check()


def test_last_offset_must_increase(index):
    """TransactionIndexTest.testLastOffsetMustIncrease"""
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(ValueError, match="must increase sequentially"):
        index.append(AbortedTxn(0, 0, 15, 11))


def test_last_offset_cannot_decrease(index):
    """TransactionIndexTest.testLastOffsetCannotDecrease"""
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(0, 0, 10, 11))


def test_collect_aborted_transactions(index):
    """TransactionIndexTest.testCollectAbortedTransactions"""
    for t in TXNS:
        index.append(t)
    r = index.collect_aborted_txns(0, 100)
    assert r.aborted_transactions == TXNS and not r.is_complete
    r = index.collect_aborted_txns(0, 32)
    assert r.aborted_transactions == TXNS[:3] and r.is_complete
    r = index.collect_aborted_txns(0, 35)
    assert r.aborted_transactions == TXNS and r.is_complete
    r = index.collect_aborted_txns(10, 35)
    assert r.aborted_transactions == TXNS and r.is_complete
    r = index.collect_aborted_txns(11, 35)
    assert r.aborted_transactions == TXNS[1:4] and r.is_complete
    r = index.collect_aborted_txns(20, 41)
    assert r.aborted_transactions == TXNS[2:4] and not r.is_complete


def test_truncate(index):
    """TransactionIndexTest.testTruncate"""
    txns = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]
    for t in txns:
        index.append(t)
    index.truncate_to(51)
    assert index.collect_aborted_txns(0, 100).aborted_transactions == txns
    index.truncate_to(50)
    assert index.collect_aborted_txns(0, 100).aborted_transactions == txns[:3]
    assert os.path.getsize(index.path) == 3 * ENTRY_SIZE
    index.reset()
    assert index.collect_aborted_txns(0, 100).aborted_transactions == []
    assert os.path.getsize(index.path) == 0  # reset keeps the (empty) file, as Kafka's


def test_aborted_txn_serde():
    """TransactionIndexTest.testAbortedTxnSerde, and the 34-byte layout of AbortedTxn"""
    t = AbortedTxn(983493, 137, 299, 200)
    assert (t.version, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset) == (0, 983493, 137, 299, 200)
    data = t.to_bytes()
    assert len(data) == ENTRY_SIZE == 34
    assert struct.unpack(">hqqqq", data) == (0, 983493, 137, 299, 200)
    assert AbortedTxn.from_bytes(data) == t
    assert t.as_aborted_transaction() == AbortedTransaction(producer_id=983493, first_offset=137)


def test_rename_index(index, tmp_path):
    """TransactionIndexTest.testRenameIndex"""
    renamed = str(tmp_path / "renamed.txnindex")
    index.append(AbortedTxn(0, 0, 10, 2))
    index.rename_to(renamed)
    index.append(AbortedTxn(1, 5, 15, 16))
    txns = index.collect_aborted_txns(0, 100).aborted_transactions
    assert [t.first_offset for t in txns] == [0, 5]
    assert TransactionIndex(0, renamed).all_aborted_txns() == txns
    assert not os.path.exists(index.path.replace("renamed", "00000000000000000000"))


def test_update_parent_dir(index, tmp_path):
    """TransactionIndexTest.testUpdateParentDir"""
    parent = tmp_path / "parent"
    parent.mkdir()
    assert os.path.dirname(index.path) != str(parent)
    index.update_parent_dir(str(parent))
    assert os.path.dirname(index.path) == str(parent)


def test_flush(tmp_path):
    """TransactionIndexTest.testFlush: the file appears with the first entry (lazily created, as Kafka's)."""
    path = str(tmp_path / "x.txnindex")
    synced = []

    class Recording(NoSyncFileIO):
        def fsync(self, fd):
            synced.append(fd)

    idx = TransactionIndex(0, path, file_io=Recording())
    idx.flush()
    assert not os.path.exists(path) and synced == []
    idx.append(AbortedTxn(0, 0, 10, 2))
    idx.flush()
    assert os.path.getsize(path) == ENTRY_SIZE and len(synced) == 1
    idx.flush()  # nothing new written: nothing synced
    assert len(synced) == 1


def test_delete_if_exists(index):
    """TransactionIndexTest.testDeleteIfExists"""
    index.append(AbortedTxn(0, 0, 10, 2))
    assert os.path.exists(index.path)
    assert index.delete_if_exists()
    assert not os.path.exists(index.path)
    assert not index.delete_if_exists()


def test_operations_on_a_missing_file_create_nothing(index):
    """Lazily created: truncation, reset and reads of an index without entries touch no file."""
    index.truncate_to(0)
    index.reset()
    assert index.collect_aborted_txns(0, 100) == ([], False)
    assert not os.path.exists(index.path)


def test_a_torn_last_entry_is_skipped_and_overwritten(index, path):
    """A write cut short by a crash: the reader skips the partial entry (as Kafka's) and the next append takes its
    place, so the file stays whole entries."""
    index.append(TXNS[0])
    with open(path, "ab") as f:
        f.write(TXNS[1].to_bytes()[:20])
    reopened = TransactionIndex(0, path)
    assert reopened.all_aborted_txns() == [TXNS[0]]
    reopened.append(TXNS[1])
    assert os.path.getsize(path) == 2 * ENTRY_SIZE
    assert TransactionIndex(0, path).all_aborted_txns() == TXNS[:2]


# ---- property test against a list model -------------------------------------------------------------------------

def _model_collect(entries, fetch_offset, upper):
    """Kafka's collectAbortedTxns, literally."""
    out = []
    for t in entries:
        if t.last_offset >= fetch_offset and t.first_offset < upper:
            out.append(t)
        if t.last_stable_offset >= upper:
            return out, True
    return out, False


@st.composite
def _txn(draw):
    last = draw(st.integers(0, 200))
    first = draw(st.integers(0, last))
    lso = draw(st.integers(0, last + 1))  # the LSO at an abort is at most the marker's offset + 1
    return AbortedTxn(draw(st.integers(0, 5)), first, last, lso)


_OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), _txn()),
    st.tuples(st.just("truncate"), st.integers(0, 210)),
    st.tuples(st.just("reset"), st.none()),
    st.tuples(st.just("collect"), st.tuples(st.integers(0, 210), st.integers(0, 210))),
    st.tuples(st.just("reopen"), st.none()),
), max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_OPS)
def test_random_operations_match_a_list_model(ops):
    """Appends, truncations, resets, searches and reopenings agree with a list and Kafka's search loop."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "00000000000000000000.txnindex")
        idx = TransactionIndex(0, path, file_io=NoSyncFileIO())
        model: list[AbortedTxn] = []
        for op, arg in ops:
            if op == "append":
                if model and model[-1].last_offset >= arg.last_offset:
                    with pytest.raises(ValueError):
                        idx.append(arg)
                else:
                    idx.append(arg)
                    model.append(arg)
            elif op == "truncate":
                idx.truncate_to(arg)
                model = [t for t in model if t.last_offset < arg]
            elif op == "reset":
                idx.reset()
                model = []
            elif op == "collect":
                assert tuple(idx.collect_aborted_txns(*arg)) == _model_collect(model, *arg)
            else:
                idx.close()
                idx = TransactionIndex(0, path, file_io=NoSyncFileIO())
                idx.sanity_check()
            assert idx.all_aborted_txns() == model
        size = os.path.getsize(path) if os.path.exists(path) else 0
        assert size == len(model) * ENTRY_SIZE


# ---- a segment's recovery ------------------------------------------------------------------------------------------

def _txn_batch(base: int, pid: int, n: int = 2, epoch: int = 0, seq: int = 100, leader_epoch: int = 15) -> bytes:
    return build_batch([Record(None, b"a" * (i + 1), timestamp=-1) for i in range(n)], base_offset=base,
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True,
                       partition_leader_epoch=leader_epoch)


def _marker(base: int, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_end_txn_marker_batch(commit=commit, producer_id=pid, producer_epoch=epoch,
                                      coordinator_epoch=coordinator_epoch, timestamp=-1, base_offset=base)


def test_recover_transaction_index(tmp_path):
    """LogSegmentTest.testRecoverTransactionIndex"""
    seg = LogSegment.open(str(tmp_path), 100, LogConfig(index_interval_bytes=10), file_io=NoSyncFileIO())
    pid1, pid2 = 5, 10
    seg.append(101, -1, 100, _txn_batch(100, pid1))
    seg.append(103, -1, 102, _txn_batch(102, pid2))
    seg.append(105, -1, 104, build_batch([Record(None, b"a", timestamp=-1), Record(None, b"b", timestamp=-1)],
                                         base_offset=104, partition_leader_epoch=15))
    seg.append(106, -1, 106, _marker(106, pid2, commit=False))
    seg.append(107, -1, 107, _marker(107, pid1, commit=True))

    psm = ProducerStateManager(str(tmp_path), file_io=NoSyncFileIO())
    seg.recover(psm)
    assert psm.map_end_offset == 108
    assert seg.txn_index.all_aborted_txns() == [AbortedTxn(pid2, 102, 106, 100)]

    # recover again, assuming the transaction from pid2 began on a previous segment
    psm = ProducerStateManager(str(tmp_path), file_io=NoSyncFileIO())
    entry = ProducerStateEntry(pid2, 0, 0, -1, 75)
    entry.add_batch(0, 10, 10, 5, -1)
    psm.load_producer_entry(entry)
    seg.recover(psm)
    assert psm.map_end_offset == 108
    assert seg.txn_index.all_aborted_txns() == [AbortedTxn(pid2, 75, 106, 100)]
    seg.close()


def test_segment_truncation_and_suffixes_carry_the_txn_index(tmp_path):
    """LogSegment.truncateTo truncates the transaction index; changeFileSuffixes / hasSuffix / deleteIfExists
    include it (LogSegmentTest's truncate and delete cases, for the .txnindex)."""
    d = str(tmp_path)
    seg = LogSegment.open(d, 0, LogConfig(), file_io=NoSyncFileIO())
    seg.append(1, -1, 0, _txn_batch(0, 1))
    seg.append(2, -1, 2, _marker(2, 1, commit=False))
    seg.append(4, -1, 3, _txn_batch(3, 2))
    seg.append(5, -1, 5, _marker(5, 2, commit=False))
    seg.update_txn_index(CompletedTxn(1, 0, 2, True), 3)
    seg.update_txn_index(CompletedTxn(2, 3, 5, True), 6)
    seg.update_txn_index(CompletedTxn(3, 4, 6, False), 7)  # a commit: no entry
    txn_path = os.path.join(d, "00000000000000000000.txnindex")
    assert os.path.getsize(txn_path) == 2 * ENTRY_SIZE
    seg.truncate_to(5)
    assert seg.txn_index.all_aborted_txns() == [AbortedTxn(1, 0, 2, 3)]
    seg.change_file_suffixes("", ".deleted")
    assert seg.has_suffix(".deleted") and os.path.exists(txn_path + ".deleted") and not os.path.exists(txn_path)
    seg.delete_if_exists()
    assert os.listdir(d) == []


# ---- the producer state's last stable offset ------------------------------------------------------------------------

def _begin(psm: ProducerStateManager, pid: int, offset: int) -> None:
    info = psm.prepare_update(pid, "replication")
    h = _header(_txn_batch(offset, pid, n=1, seq=0))
    info.append(h)
    psm.update(info)


def _header(data: bytes):
    from protocol.records import parse_header
    return parse_header(data)


def test_last_stable_offset_completed_txn(tmp_path):
    """ProducerStateManagerTest.testLastStableOffsetCompletedTxn"""
    psm = ProducerStateManager(str(tmp_path), file_io=NoSyncFileIO())
    pid1, start1 = 23, 992342
    _begin(psm, pid1, start1)
    pid2, start2 = 24, start1 + 25
    _begin(psm, pid2, start2)
    pid3, start3 = 25, start1 + 57
    _begin(psm, pid3, start3)

    last1 = start3 + 15
    c1 = CompletedTxn(pid1, start1, last1, False)
    assert psm.last_stable_offset(c1) == start2
    psm.complete_txn(c1)
    psm.on_high_watermark_updated(last1 + 1)
    assert psm.first_unstable_offset() == start2

    last3 = last1 + 20
    c3 = CompletedTxn(pid3, start3, last3, False)
    assert psm.last_stable_offset(c3) == start2
    psm.complete_txn(c3)
    psm.on_high_watermark_updated(last3 + 1)
    assert psm.first_unstable_offset() == start2

    last2 = last3 + 78
    c2 = CompletedTxn(pid2, start2, last2, False)
    assert psm.last_stable_offset(c2) == last2 + 1
    psm.complete_txn(c2)
    psm.on_high_watermark_updated(last2 + 1)
    assert psm.first_unstable_offset() is None


def test_skip_empty_transactions(tmp_path):
    """ProducerStateManagerTest.testSkipEmptyTransactions: markers without a transaction complete nothing (so no
    index entry); the first unstable offset is the transaction left open."""
    psm = ProducerStateManager(str(tmp_path), file_io=NoSyncFileIO())
    pid, seq = 1, [0]

    def data(info, first, last):
        n = last - first + 1
        info.append(_header(_txn_batch(first, pid, n=n, seq=seq[0])))
        seq[0] += n

    def end(info, commit, offset):
        buf = _marker(offset, pid, commit)
        return info.append(_header(buf), buf, 0)

    first = psm.prepare_update(pid, "client")
    data(first, 16, 20)
    assert [(t.producer_id, t.first_offset) for t in first.started_transactions] == [(pid, 16)]
    psm.update(first)
    psm.on_high_watermark_updated(21)
    assert psm.first_unstable_offset() == 16

    second = psm.prepare_update(pid, "client")
    c1 = end(second, True, 21)
    assert c1 == CompletedTxn(pid, 16, 21, False)
    assert end(second, True, 22) is None
    assert end(second, False, 23) is None
    data(second, 24, 27)
    c2 = end(second, False, 28)
    assert c2 == CompletedTxn(pid, 24, 28, True)
    assert end(second, False, 29) is None
    data(second, 30, 31)
    assert [t.first_offset for t in second.started_transactions] == [24, 30]
    psm.update(second)
    psm.complete_txn(c1)
    psm.complete_txn(c2)
    psm.on_high_watermark_updated(32)
    assert psm.first_unstable_offset() == 30
