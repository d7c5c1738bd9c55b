"""KIP-890 part 1 in storage: the verification guard of a producer's first transactional batch on a partition
(``ProducerStateManager``'s verification state entries, ``UnifiedLog.maybeStartTransactionVerification`` and the
append's check). Each test's docstring names the Kafka test it ports."""

from __future__ import annotations

import pytest

from protocol.record_codec import build_end_txn_marker_batch
from storage.config import LogConfig
from storage.errors import InvalidTxnStateError, OutOfOrderSequenceError
from storage.log import ORIGIN_CLIENT, ORIGIN_COORDINATOR
from storage.producer_state import (
    SENTINEL,
    ProducerStateManager,
    VerificationGuard,
)

from .helpers import NoSyncFileIO, batch, open_log

PID = 23
EPOCH = 1
EXPIRATION_MS = 86400000


@pytest.fixture
def psm(tmp_path):
    return ProducerStateManager(str(tmp_path), producer_id_expiration_ms=EXPIRATION_MS, file_io=NoSyncFileIO(),
                                transaction_verification_enabled=True)


def _client_append(psm, pid: int, epoch: int, seq: int, offset: int, transactional: bool):
    """``ProducerStateManagerTest.appendClientEntry``: one batch of one record at ``offset``."""
    from protocol.records import parse_header
    buf = batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=transactional)
    buf[0:8] = offset.to_bytes(8, "big")
    h = parse_header(buf, 0)
    info = psm.prepare_update(pid, ORIGIN_CLIENT)
    info.append(h, buf, 0)
    psm.update(info)
    psm.update_map_end_offset(offset + 1)


def test_entry_for_verification(psm):
    """ProducerStateManagerTest.testEntryForVerification"""
    original = psm.maybe_create_verification_state_entry(PID, 0, 0, now_ms=0)
    guard = original.verification_guard
    again = psm.maybe_create_verification_state_entry(PID, 0, 0, now_ms=0)  # an entry there already: reused
    entry = psm.verification_state_entry(PID)
    assert entry.verification_guard is guard
    assert again.verification_guard is entry.verification_guard
    _client_append(psm, PID, 0, 0, 0, True)
    psm.clear_verification_state_entry(PID)
    assert psm.verification_state_entry(PID) is None


def _verify_entry(psm, guard: VerificationGuard, new, seq: int, epoch: int) -> None:
    entry = psm.verification_state_entry(PID)
    assert entry.verification_guard is guard
    assert new.verification_guard is entry.verification_guard
    assert (entry.lowest_sequence, entry.epoch) == (seq, epoch)


def test_sequence_and_epoch_in_verification_entry(psm):
    """ProducerStateManagerTest.testSequenceAndEpochInVerificationEntry"""
    original = psm.maybe_create_verification_state_entry(PID, 1, 0, now_ms=0)
    guard = original.verification_guard
    _verify_entry(psm, guard, original, 1, 0)
    # a lower sequence at the same epoch: the lower one
    _verify_entry(psm, guard, psm.maybe_create_verification_state_entry(PID, 0, 0, now_ms=0), 0, 0)
    # a higher epoch: its sequence
    _verify_entry(psm, guard, psm.maybe_create_verification_state_entry(PID, 2, 1, now_ms=0), 2, 1)
    # a lower epoch: ignored
    _verify_entry(psm, guard, psm.maybe_create_verification_state_entry(PID, 0, 0, now_ms=0), 2, 1)


@pytest.mark.parametrize("dynamically_disable", [True, False])
def test_throw_out_of_order_sequence_with_verification_sequence_check(psm, dynamically_disable):
    """ProducerStateManagerTest.testThrowOutOfOrderSequenceWithVerificationSequenceCheck"""
    original = psm.maybe_create_verification_state_entry(PID, 0, 0, now_ms=0)
    if dynamically_disable:  # the sequence check still runs while there is an entry
        psm.transaction_verification_enabled = False
    with pytest.raises(OutOfOrderSequenceError):
        _client_append(psm, PID, 0, 4, 0, True)
    assert psm.verification_state_entry(PID) is original


def test_verification_state_entry_expiration(psm):
    """ProducerStateManagerTest.testVerificationStateEntryExpiration"""
    original = psm.maybe_create_verification_state_entry(PID, 0, 0, now_ms=0)
    now = EXPIRATION_MS // 2  # reading the entry does not refresh it
    psm.remove_expired_producers(now)
    assert psm.verification_state_entry(PID) is original
    now += EXPIRATION_MS // 2 + 1
    psm.remove_expired_producers(now)
    assert psm.verification_state_entry(PID) is None


def test_sentinel_verifies_nothing():
    """VerificationGuard: the sentinel verifies nothing, not even itself; a guard only itself."""
    g = VerificationGuard()
    assert not SENTINEL.verify(SENTINEL)
    assert not g.verify(SENTINEL)
    assert g.verify(g)
    assert not g.verify(VerificationGuard())


# ---- UnifiedLogTest ------------------------------------------------------------------------------------------

def _log(tmp_path, enabled: bool = True):
    return open_log(str(tmp_path), LogConfig(segment_bytes=2048 * 5), transaction_verification_enabled=enabled)


def _records(seq: int, transactional: bool) -> bytearray:
    return batch(2, producer_id=PID, producer_epoch=EPOCH, base_sequence=seq, is_transactional=transactional)


def _commit_marker() -> bytearray:
    return bytearray(build_end_txn_marker_batch(commit=True, producer_id=PID, producer_epoch=EPOCH,
                                                coordinator_epoch=0, timestamp=0))


@pytest.mark.parametrize("origin", [ORIGIN_CLIENT, ORIGIN_COORDINATOR])
def test_transaction_is_ongoing_and_verification_guard(tmp_path, origin):
    """UnifiedLogTest.testTransactionIsOngoingAndVerificationGuard"""
    lg = _log(tmp_path)
    seq = 3 if origin == ORIGIN_CLIENT else 0
    assert not lg.has_ongoing_transaction(PID)
    assert lg.verification_guard(PID) is SENTINEL
    assert not lg.verification_guard(PID).verify(SENTINEL)
    idempotent = _records(seq, False)
    if origin == ORIGIN_CLIENT:  # only clients have sequences
        seq += 2
    transactional = _records(seq, True)
    guard = lg.maybe_start_transaction_verification(PID, seq, EPOCH, now_ms=0)
    assert guard is not SENTINEL
    lg.append_as_leader(idempotent, 0, now_ms=0, origin=origin)
    assert not lg.has_ongoing_transaction(PID)
    assert lg.verification_guard(PID) is guard  # idempotent records keep the guard
    assert lg.verification_guard(PID).verify(guard)
    lg.append_as_leader(transactional, 0, now_ms=0, origin=origin, verification_guard=guard)
    assert lg.has_ongoing_transaction(PID)
    assert lg.verification_guard(PID) is SENTINEL  # cleared by the first transactional batch
    assert lg.maybe_start_transaction_verification(PID, seq, EPOCH, now_ms=0) is SENTINEL  # already verified
    lg.append_as_leader(_commit_marker(), 0, now_ms=0, origin=ORIGIN_COORDINATOR)
    assert not lg.has_ongoing_transaction(PID)
    assert lg.verification_guard(PID) is SENTINEL
    if origin == ORIGIN_CLIENT:
        seq += 1
    new_guard = lg.maybe_start_transaction_verification(PID, seq, EPOCH, now_ms=0)  # the next transaction
    assert new_guard is not SENTINEL and new_guard is not guard
    assert not guard.verify(new_guard)


def test_empty_transaction_still_clears_verification_guard(tmp_path):
    """UnifiedLogTest.testEmptyTransactionStillClearsVerificationGuard"""
    lg = _log(tmp_path)
    assert lg.maybe_start_transaction_verification(PID, 0, EPOCH, now_ms=0) is not SENTINEL
    lg.append_as_leader(_commit_marker(), 0, now_ms=0, origin=ORIGIN_COORDINATOR)
    assert not lg.has_ongoing_transaction(PID)
    assert lg.verification_guard(PID) is SENTINEL


def test_disabled_verification_clears_verification_guard(tmp_path):
    """UnifiedLogTest.testDisabledVerificationClearsVerificationGuard"""
    lg = _log(tmp_path)
    assert lg.maybe_start_transaction_verification(PID, 0, EPOCH, now_ms=0) is not SENTINEL
    lg.producer_state.transaction_verification_enabled = False
    lg.append_as_leader(_records(0, True), 0, now_ms=0)
    assert lg.has_ongoing_transaction(PID)
    assert lg.verification_guard(PID) is SENTINEL


def test_enabling_verification_when_request_is_at_log_layer(tmp_path):
    """UnifiedLogTest.testEnablingVerificationWhenRequestIsAtLogLayer"""
    lg = _log(tmp_path, enabled=False)
    lg.producer_state.transaction_verification_enabled = True
    records = _records(4, True)
    with pytest.raises(InvalidTxnStateError, match="Record was not part of an ongoing transaction"):
        lg.append_as_leader(bytearray(records), 0, now_ms=0)
    assert not lg.has_ongoing_transaction(PID)
    assert lg.verification_guard(PID) is SENTINEL
    assert lg.log_end_offset == 0
    guard = lg.maybe_start_transaction_verification(PID, 4, EPOCH, now_ms=0)
    assert guard is not SENTINEL
    lg.append_as_leader(records, 0, now_ms=0, verification_guard=guard)
    assert lg.has_ongoing_transaction(PID)
    assert lg.verification_guard(PID) is SENTINEL


def test_stale_guard_after_abort_is_refused(tmp_path):
    """The ABA case UnifiedLog's comment describes: a verification started, the transaction ended by a marker, a
    new verification started; the append carrying the first guard is refused (odradek's own)."""
    lg = _log(tmp_path)
    old = lg.maybe_start_transaction_verification(PID, 0, EPOCH, now_ms=0)
    lg.append_as_leader(_commit_marker(), 0, now_ms=0, origin=ORIGIN_COORDINATOR)
    lg.maybe_start_transaction_verification(PID, 0, EPOCH, now_ms=0)
    with pytest.raises(InvalidTxnStateError):
        lg.append_as_leader(_records(0, True), 0, now_ms=0, verification_guard=old)
    assert lg.log_end_offset == 1  # the marker only


def test_replication_and_plain_batches_are_not_checked(tmp_path):
    """Only client and coordinator appends of transactional batches are checked: idempotent and plain batches go
    in without a guard (odradek's own)."""
    lg = _log(tmp_path)
    lg.append_as_leader(batch(1), 0, now_ms=0)
    lg.append_as_leader(_records(0, False), 0, now_ms=0)
    assert lg.log_end_offset == 3


def test_a_stale_epoch_is_refused_before_asking_the_coordinator(tmp_path):
    """KAFKA-18042: a transactional produce with an epoch below the producer's at this partition (with transactions
    V2 every transaction ends with a bump: a delayed request of an earlier transaction) gets INVALID_PRODUCER_EPOCH
    at once, no verification started; the current and a newer epoch are verified as before."""
    from storage.errors import InvalidProducerEpochError

    lg = _log(tmp_path)
    marker = build_end_txn_marker_batch(commit=True, producer_id=PID, producer_epoch=EPOCH + 1, coordinator_epoch=0,
                                        timestamp=0)
    lg.append_as_leader(bytearray(marker), 0, now_ms=0, origin=ORIGIN_COORDINATOR, transaction_version=2)
    with pytest.raises(InvalidProducerEpochError):
        lg.maybe_start_transaction_verification(PID, 0, EPOCH, now_ms=0)
    assert lg.verification_guard(PID) is SENTINEL
    assert lg.maybe_start_transaction_verification(PID, 0, EPOCH + 1, now_ms=0) is not SENTINEL
    assert lg.maybe_start_transaction_verification(PID, 0, EPOCH + 2, now_ms=0) is not SENTINEL
