"""The quorum-state file as Kafka's FileQuorumStateStore writes it, and a corrupt one refused by name."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.quorum.state_store import QuorumStateError, QuorumStateStore
from cluster.raft.election_state import ElectionState


def test_round_trip_and_kafka_layout(tmp_path):
    """FileQuorumStateStoreTest.testWriteElectionStateWithVotedCandidate / ...WithElectedLeader (v0 layout)."""
    store = QuorumStateStore(tmp_path)
    assert store.read() is None
    state = ElectionState.with_elected_leader(5, 2, voters={1, 2, 3})
    store.write(state)
    assert store.read() == state
    data = json.loads((tmp_path / "quorum-state").read_text())
    assert data == {"clusterId": "", "leaderId": 2, "leaderEpoch": 5, "votedId": -1, "appliedOffset": 0,
                    "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}], "data_version": 0}
    voted = ElectionState.with_voted_candidate(6, 3, voters={1, 2, 3})
    store.write(voted)
    assert store.read() == voted and not (tmp_path / "quorum-state.tmp").exists()


def test_reads_what_kafka_writes(tmp_path):
    """A quorum-state file from Kafka 3.x (v0) and from Kafka 4.x with kraft.version 1 (v1)."""
    (tmp_path / "quorum-state").write_text('{"clusterId":"","leaderId":1,"leaderEpoch":7,"votedId":-1,'
                                           '"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}')
    assert QuorumStateStore(tmp_path).read() == ElectionState(7, 1, -1, frozenset({1}))
    (tmp_path / "quorum-state").write_text('{"leaderId":-1,"leaderEpoch":9,"votedId":2,'
                                           '"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}')
    assert QuorumStateStore(tmp_path).read() == ElectionState(9, -1, 2)


@pytest.mark.parametrize("content", ["", "{", "[]", '{"leaderEpoch":1}', '{"leaderEpoch":"x","data_version":0}',
                                     '{"leaderEpoch":1,"data_version":7}', "\xff\xfe"])
def test_corrupt_file_is_refused_naming_it(tmp_path, content):
    (tmp_path / "quorum-state").write_text(content, encoding="latin-1")
    with pytest.raises(QuorumStateError, match=str(tmp_path / "quorum-state")):
        QuorumStateStore(tmp_path).read()


@given(epoch=st.integers(0, 2**31 - 1), leader=st.integers(-1, 1000), voted=st.integers(-1, 1000),
       voters=st.frozensets(st.integers(0, 1000), max_size=7))
def test_any_state_round_trips(tmp_path_factory, epoch, leader, voted, voters):
    store = QuorumStateStore(tmp_path_factory.mktemp("qs"))
    state = ElectionState(epoch, leader, voted, voters)
    store.write(state)
    assert store.read() == state
