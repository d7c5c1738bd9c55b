"""Broker sessions, fencing, controlled shutdown and leader elections in the controller: Kafka's
BrokerHeartbeatManagerTest ported, and ReplicationControlManagerTest / ClusterControlManagerTest cases
on the controller facade over a metadata image."""

from __future__ import annotations

import random

import pytest

from cluster.controller import Controller, NewTopic
from cluster.controller.broker_heartbeats import BrokerControlState, BrokerHeartbeatManager
from cluster.controller.replication_control import PREFERRED, UNCLEAN, alter_partition
from cluster.metadata_image import MetadataImage
from protocol.errors import ErrorCode
from protocol.generated.metadata import BrokerRegistrationChangeRecord, RegisterBrokerRecord, UnregisterBrokerRecord
from protocol.generated.metadata.register_broker_record import BrokerEndpoint

S = BrokerControlState


def manager() -> BrokerHeartbeatManager:
    return BrokerHeartbeatManager(session_timeout_ms=10)


def test_has_valid_session():
    """BrokerHeartbeatManagerTest.testHasValidSession"""
    m, now = manager(), 0
    assert not m.has_valid_session(0, now)
    for b in range(3):
        m.register(b, True, now)
    m.touch(0, False, 0, now)
    now += 5
    m.touch(1, False, 0, now)
    m.touch(2, False, 0, now)
    assert [m.has_valid_session(b, now) for b in range(4)] == [True, True, True, False]
    now += 6
    assert [m.has_valid_session(b, now) for b in range(4)] == [False, True, True, False]
    m.remove(2)
    assert not m.has_valid_session(2, now)
    m.remove(1)
    assert not m.has_valid_session(1, now)


def test_find_one_stale_broker():
    """BrokerHeartbeatManagerTest.testFindOneStaleBroker"""
    m, now = manager(), 0
    for b in range(3):
        m.register(b, True, now)
    m.touch(0, False, 0, now)
    now += 5
    m.touch(1, False, 0, now)
    now += 1
    m.touch(2, False, 0, now)
    assert m.find_one_stale_broker(now) is None
    now += 5
    assert m.find_one_stale_broker(now) == 0
    m.fence(0)
    assert m.find_one_stale_broker(now) is None
    now += 20
    assert m.find_one_stale_broker(now) == 1
    m.fence(1)
    assert m.find_one_stale_broker(now) == 2
    m.fence(2)
    assert m.find_one_stale_broker(now) is None


def test_next_check_time():
    """BrokerHeartbeatManagerTest.testNextCheckTimeNs (in ms)"""
    m, now = manager(), 0
    assert m.next_check_time_ms() is None
    for b in range(4):
        m.register(b, True, now)
    m.touch(0, False, 0, now)
    now += 2
    m.touch(1, False, 0, now)
    now += 1
    m.touch(2, False, 0, now)
    now += 1
    m.touch(3, False, 0, now)
    assert m.find_one_stale_broker(now) is None and m.next_check_time_ms() == 10
    now += 7
    assert m.next_check_time_ms() == 10 and m.find_one_stale_broker(now) == 0
    m.fence(0)
    assert m.next_check_time_ms() == 12
    now += 3
    assert m.find_one_stale_broker(now) == 1
    m.fence(1)
    assert m.find_one_stale_broker(now) == 2
    m.fence(2)
    assert m.next_check_time_ms() == 14


def test_usable_brokers_and_lowest_active_offset():
    """BrokerHeartbeatManagerTest.testUsableBrokerIterator"""
    m = manager()
    for b in range(5):
        m.register(b, True, 0)
    for b, fenced, offset in [(0, False, 100), (1, False, 100), (2, False, 98), (3, False, 100), (4, True, 100)]:
        m.touch(b, fenced, offset, 0)
    assert m.lowest_active_offset() == 98
    racks = {b: "rack1" if b % 2 == 0 else "rack2" for b in range(5)}
    assert {(u.id, u.rack, u.fenced) for u in m.usable_brokers(racks.get)} == {
        (0, "rack1", False), (1, "rack2", False), (2, "rack1", False), (3, "rack2", False), (4, "rack1", True)}
    m.maybe_update_controlled_shutdown_offset(2, 0)
    assert m.lowest_active_offset() == 100
    with pytest.raises(RuntimeError):
        m.maybe_update_controlled_shutdown_offset(4, 0)
    m.touch(4, False, 100, 0)
    m.maybe_update_controlled_shutdown_offset(4, 0)
    assert {u.id for u in m.usable_brokers(racks.get)} == {0, 1, 3}


def test_controlled_shutdown_offset_is_only_updated_once():
    """BrokerHeartbeatManagerTest.testControlledShutdownOffsetIsOnlyUpdatedOnce"""
    m = manager()
    for b in range(5):
        m.register(b, True, 0)
    for b, fenced, offset in [(0, False, 100), (1, False, 100), (2, False, 98), (3, False, 100), (4, True, 100)]:
        m.touch(b, fenced, offset, 0)
    assert m.controlled_shutdown_offset(2) is None
    m.maybe_update_controlled_shutdown_offset(2, 98)
    m.maybe_update_controlled_shutdown_offset(2, 99)
    assert m.controlled_shutdown_offset(2) == 98
    m.maybe_update_controlled_shutdown_offset(3, 101)
    m.maybe_update_controlled_shutdown_offset(3, 102)
    assert m.controlled_shutdown_offset(3) == 101


def test_calculate_next_broker_state():
    """BrokerHeartbeatManagerTest.testCalculateNextBrokerState"""
    m = manager()
    for b in range(6):
        m.register(b, True, 0)
    for b, fenced, offset in [(0, True, 100), (1, False, 98), (2, False, 100), (3, False, 100), (4, True, 100),
                              (5, False, 99)]:
        m.touch(b, fenced, offset, 0)
    m.maybe_update_controlled_shutdown_offset(5, 99)
    assert m.lowest_active_offset() == 98
    nxt = m.calculate_next_state
    assert nxt(0, False, False, 100, 100, lambda: False) == (S.FENCED, S.UNFENCED)
    assert nxt(0, False, False, 50, 100, lambda: False) == (S.FENCED, S.FENCED)
    assert nxt(0, False, True, 50, 100, lambda: False) == (S.FENCED, S.SHUTDOWN_NOW)
    assert nxt(0, True, False, 0, 100, lambda: False) == (S.FENCED, S.FENCED)
    assert nxt(1, False, False, 100, 100, lambda: False) == (S.UNFENCED, S.UNFENCED)
    assert nxt(1, True, False, 100, 100, lambda: False) == (S.UNFENCED, S.FENCED)
    assert nxt(1, False, True, 100, 100, lambda: True) == (S.UNFENCED, S.CONTROLLED_SHUTDOWN)
    assert nxt(1, False, True, 100, 100, lambda: False) == (S.UNFENCED, S.SHUTDOWN_NOW)
    assert nxt(5, False, True, 100, 100, lambda: True) == (S.CONTROLLED_SHUTDOWN, S.CONTROLLED_SHUTDOWN)
    assert nxt(5, False, True, 100, 100, lambda: False) == (S.CONTROLLED_SHUTDOWN, S.CONTROLLED_SHUTDOWN)
    m.fence(1)
    assert nxt(5, False, True, 100, 100, lambda: False) == (S.CONTROLLED_SHUTDOWN, S.SHUTDOWN_NOW)
    assert nxt(5, False, True, 100, 100, lambda: True) == (S.CONTROLLED_SHUTDOWN, S.CONTROLLED_SHUTDOWN)
    for unknown in (6, 7):
        with pytest.raises(KeyError, match=f"Broker {unknown} is not registered."):
            nxt(unknown, False, True, 100, 100, lambda: True)


# ---- the controller over an image ---------------------------------------------------------------------------------

class Cluster:
    """An image and a controller; records are applied as if committed at consecutive offsets."""

    def __init__(self, brokers=(1, 2, 3), config=None) -> None:
        self.controller = Controller(1, {"broker.session.timeout.ms": 9000, **(config or {})}, random.Random(5))
        self.image = MetadataImage()
        self.now = 0
        for b in brokers:
            self.commit([RegisterBrokerRecord(broker_id=b, incarnation_id=bytes([b]) * 16,
                                              broker_epoch=self.image.offset + 1, fenced=True, rack=None,
                                              end_points=[BrokerEndpoint("PLAINTEXT", "h", 9000 + b, 0)])])
            self.heartbeat(b)  # caught up: unfenced

    def commit(self, records):
        if records:
            self.image = self.image.apply(records, self.image.offset + len(records))

    def heartbeat(self, b, want_fence=False, want_shut_down=False, offset=None):
        res = self.controller.process_broker_heartbeat(
            self.image, b, self.image.brokers[b].broker_epoch, self.image.offset if offset is None else offset,
            want_fence, want_shut_down, self.image.offset + 1, self.now)
        self.commit(res.records)
        return res.response

    def create(self, name, partitions, rf, assignments=None):
        res = self.controller.create_topics(self.image, [NewTopic(name, partitions if not assignments else -1,
                                                                   rf if not assignments else -1, assignments)])
        assert res.response[0].error_code == 0, res.response[0]
        self.commit(res.records)
        return self.image.topic(name)


def test_registration_is_fenced_until_caught_up():
    """ReplicationControlManagerTest.testRegisterBrokerAndUnfence (the broker heartbeats from behind, then
    from its registration's offset)"""
    c = Cluster(brokers=(1,))
    c.commit([RegisterBrokerRecord(broker_id=2, incarnation_id=b"\x02" * 16, broker_epoch=c.image.offset + 1,
                                   fenced=True, end_points=[])])
    reply = c.heartbeat(2, offset=c.image.offset - 1)
    assert (reply.error_code, reply.is_caught_up, reply.is_fenced) == (0, False, True)
    assert c.image.brokers[2].fenced
    reply = c.heartbeat(2)
    assert (reply.is_caught_up, reply.is_fenced) == (True, False)
    assert not c.image.brokers[2].fenced


def test_a_new_incarnation_waits_for_the_old_sessions_expiry():
    """ClusterControlManager.registerBroker: DuplicateBrokerRegistrationException while the registered
    incarnation's session is valid; once it expires (and it is fenced) the new incarnation registers."""
    c = Cluster()
    before = c.image
    c.now = 5000
    res = c.controller.register_broker(c.image, 2, b"\x99" * 16, [("PLAINTEXT", "h", 9002)], None, c.image.offset + 1,
                                       [], c.now)
    assert (res.records, res.response) == ([], ErrorCode.DUPLICATE_BROKER_REGISTRATION) and c.image is before
    same = c.controller.register_broker(c.image, 2, bytes([2]) * 16, [("PLAINTEXT", "h", 9002)], None,
                                        c.image.offset + 1, [], c.now)
    assert same.response == 0  # the live incarnation itself may register again
    c.now = 9001  # the session (last heartbeat at 0, 9 s) expired
    res = c.controller.register_broker(c.image, 2, b"\x99" * 16, [("PLAINTEXT", "h", 9002)], None, c.image.offset + 1,
                                       [], c.now)
    assert res.response == 0 and res.records[0].incarnation_id == b"\x99" * 16


def test_a_new_incarnation_leaves_every_isr_and_leadership_until_it_catches_up():
    """ClusterControlManager.registerBroker with a new incarnation id runs handleBrokerUncleanShutdown: the
    restarted process may have lost an acknowledged tail, so it is no leader and in no ISR until it rejoins;
    a partition whose only ISR member it is keeps it there, leaderless (it is the only copy with everything)."""
    c = Cluster()
    c.create("foo", 0, 0, assignments={0: [1, 2, 3], 1: [2, 3, 1], 2: [1]})
    c.now = 9001
    for b in (2, 3):
        c.heartbeat(b)
    # broker 1's session expired but the periodic fencing has not run yet: the new process registers first
    assert not c.image.brokers[1].fenced
    c.controller.register_fenced = True  # as a KRaft quorum's controller registers brokers
    before = {i: p.leader_epoch for i, p in c.image.topic("foo").partitions.items()}
    res = c.controller.register_broker(c.image, 1, b"\x77" * 16, [("PLAINTEXT", "h", 9001)], None,
                                       c.image.offset + 1, [], c.now)
    assert res.response == 0
    c.commit(res.records)
    parts = c.image.topic("foo").partitions
    assert c.image.brokers[1].fenced and c.image.brokers[1].incarnation_id == b"\x77" * 16
    assert all(1 not in p.isr and p.leader != 1 for i, p in parts.items() if i != 2)
    assert (parts[2].leader, parts[2].isr) == (-1, (1,))
    assert parts[0].leader_epoch == before[0] + 1 and parts[0].leader == 2  # it led: a new leader, a new epoch
    # the same incarnation registering again changes no partition
    again = c.controller.register_broker(c.image, 1, b"\x77" * 16, [("PLAINTEXT", "h", 9001)], None,
                                         c.image.offset + 1, [], c.now)
    assert not [r for r in again.records if type(r).__name__ == "PartitionChangeRecord"]


def test_a_restart_within_the_session_is_refused():
    """A broker restarted before its old session expired is refused (DUPLICATE_BROKER_REGISTRATION); once the
    session expires it registers (the test above: leaving every ISR)."""
    c = Cluster()
    c.create("bar", 0, 0, assignments={0: [1, 2, 3]})
    res = c.controller.register_broker(c.image, 1, b"\x78" * 16, [("PLAINTEXT", "h", 9001)], None,
                                       c.image.offset + 1, [], c.now)
    assert res.response == ErrorCode.DUPLICATE_BROKER_REGISTRATION and res.records == []
    assert c.image.topic("bar").partitions[0].leader == 1


def test_heartbeat_with_a_stale_epoch_changes_nothing():
    """ClusterControlManagerTest / checkBrokerEpoch: an old incarnation's heartbeat is STALE_BROKER_EPOCH."""
    c = Cluster()
    before = c.image
    res = c.controller.process_broker_heartbeat(c.image, 2, c.image.brokers[2].broker_epoch - 1, 100, False, False,
                                                c.image.offset + 1, c.now)
    assert res.response.error_code == ErrorCode.STALE_BROKER_EPOCH and res.records == []
    res = c.controller.process_broker_heartbeat(c.image, 9, 0, 100, False, False, c.image.offset + 1, c.now)
    assert res.response.error_code == ErrorCode.STALE_BROKER_EPOCH and c.image is before


def test_fenced_broker_leaves_every_isr_and_its_leaderships_move():
    """ReplicationControlManagerTest.testFenceMultipleBrokers / handleBrokerFenced"""
    c = Cluster(brokers=(1, 2, 3, 4))
    t = c.create("foo", 0, 0, assignments={0: [1, 2, 3], 1: [2, 3, 4], 2: [3, 4, 1]})
    c.now = 9001
    for b in (2, 3, 4):
        c.heartbeat(b)  # broker 1 falls silent
    res = c.controller.maybe_fence_one_stale_broker(c.image, c.now)
    c.commit(res.records)
    assert c.image.brokers[1].fenced
    parts = c.image.topic("foo").partitions
    assert (parts[0].leader, parts[0].isr, parts[0].leader_epoch) == (2, (2, 3), t.partitions[0].leader_epoch + 1)
    assert (parts[1].leader, parts[1].isr) == (2, (2, 3, 4))
    assert (parts[2].leader, parts[2].isr) == (3, (3, 4))
    assert c.controller.maybe_fence_one_stale_broker(c.image, c.now).records == []


def test_last_isr_member_fenced_leaves_partition_leaderless_then_unfencing_elects_it():
    """handleBrokerFenced keeps the last ISR member (no ELR) with no leader; handleBrokerUnfenced elects it."""
    c = Cluster(brokers=(1, 2))
    c.create("solo", 0, 0, assignments={0: [1]})
    c.heartbeat(1, want_fence=True)
    p = c.image.topic("solo").partitions[0]
    assert (p.leader, p.isr) == (-1, (1,)) and c.image.brokers[1].fenced
    c.heartbeat(1)
    p = c.image.topic("solo").partitions[0]
    assert (p.leader, p.isr) == (1, (1,)) and not c.image.brokers[1].fenced


def test_unclean_election_when_enabled():
    """testUncleanElection: with unclean.leader.election.enable, a replica outside the ISR leads (RECOVERING)."""
    c = Cluster(brokers=(1, 2), config={"unclean.leader.election.enable": True})
    c.create("u", 0, 0, assignments={0: [1, 2]})
    c.commit(alter_partition(c.image, 1, c.image.brokers[1].broker_epoch, c.image.topic("u").topic_id, 0,
                             0, c.image.topic("u").partitions[0].partition_epoch, [1])[1:2])
    assert c.image.topic("u").partitions[0].isr == (1,)
    c.heartbeat(1, want_fence=True)
    p = c.image.topic("u").partitions[0]
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), 1)


def test_controlled_shutdown_moves_leadership_then_lets_go():
    """testEnterControlledShutdown (QuorumControllerTest.testBrokerHeartbeat...): leaderships move first."""
    c = Cluster(brokers=(1, 2, 3))
    c.create("cs", 0, 0, assignments={0: [1, 2, 3], 1: [1, 3, 2]})
    reply = c.heartbeat(1, want_shut_down=True)
    assert reply.in_controlled_shutdown and not reply.should_shut_down
    assert c.image.brokers[1].in_controlled_shutdown
    parts = c.image.topic("cs").partitions
    assert (parts[0].leader, parts[0].isr) == (2, (2, 3)) and (parts[1].leader, parts[1].isr) == (3, (3, 2))
    # let go only once the other brokers have seen the records that moved the leaderships
    for b in (2, 3):
        c.heartbeat(b, offset=c.image.offset - 1)
    assert not c.heartbeat(1, want_shut_down=True).should_shut_down
    for b in (2, 3):
        c.heartbeat(b)
    reply = c.heartbeat(1, want_shut_down=True)
    assert reply.should_shut_down and c.image.brokers[1].fenced


def test_new_leader_only_from_active_brokers():
    """A broker in controlled shutdown or fenced is never elected (ClusterControlManager.isActive)."""
    c = Cluster(brokers=(1, 2, 3))
    c.create("a", 0, 0, assignments={0: [2, 1, 3]})
    c.heartbeat(3, want_shut_down=True)  # 3 leads nothing: immediate shutdown, fenced
    assert c.image.brokers[3].fenced
    c.heartbeat(2, want_fence=True)
    assert c.image.topic("a").partitions[0].leader == 1


def test_elect_preferred_leaders():
    """ReplicationControlManagerTest.testElectPreferredLeaders"""
    c = Cluster(brokers=(1, 2, 3))
    c.create("p", 0, 0, assignments={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    c.heartbeat(1, want_fence=True)
    c.heartbeat(1)  # back, in no ISR: not electable yet
    res = c.controller.elect_leaders(c.image, PREFERRED, [("p", 0), ("p", 1), ("p", 9), ("q", 0)])
    codes = {(t, p): code for t, p, code, _ in res.response}
    assert codes == {("p", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, ("p", 1): ErrorCode.ELECTION_NOT_NEEDED,
                     ("p", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("q", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert res.records == []
    # broker 1 rejoins the ISR of partition 0 (AlterPartition from its leader), then the election moves it back
    t = c.image.topic("p")
    p0 = t.partitions[0]
    err, rec, _ = alter_partition(c.image, p0.leader, c.image.brokers[p0.leader].broker_epoch, t.topic_id, 0,
                                  p0.leader_epoch, p0.partition_epoch, list(p0.isr) + [1])
    assert err == 0
    c.commit([rec])
    res = c.controller.elect_leaders(c.image, PREFERRED, None)
    assert [(t_, p_, code) for t_, p_, code, _ in res.response] == [("p", 0, 0)]
    c.commit(res.records)
    assert c.image.topic("p").partitions[0].leader == 1


def test_unclean_elect_leaders_not_needed_with_a_leader():
    c = Cluster(brokers=(1, 2))
    c.create("x", 0, 0, assignments={0: [1, 2]})
    res = c.controller.elect_leaders(c.image, UNCLEAN, [("x", 0)])
    assert res.response[0][2] == ErrorCode.ELECTION_NOT_NEEDED


@pytest.mark.parametrize("change,code", [
    (dict(broker_epoch=-5), ErrorCode.STALE_BROKER_EPOCH),
    (dict(topic_id=b"\x09" * 16), ErrorCode.UNKNOWN_TOPIC_ID),
    (dict(partition_id=7), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (dict(leader_epoch=-1), ErrorCode.FENCED_LEADER_EPOCH),
    (dict(leader_epoch=5), ErrorCode.NOT_CONTROLLER),
    (dict(partition_epoch=-1), ErrorCode.INVALID_UPDATE_VERSION),
    (dict(new_isr=[1, 9]), ErrorCode.INVALID_REQUEST),
    (dict(new_isr=[2]), ErrorCode.INVALID_REQUEST),
    (dict(broker_id=2), ErrorCode.INVALID_REQUEST),
    (dict(new_isr=[1, 3]), ErrorCode.INELIGIBLE_REPLICA),
    (dict(new_isr=[1, 2], isr_broker_epochs=lambda r: 12345), ErrorCode.INELIGIBLE_REPLICA),
    (dict(new_isr=[1, 2], leader_recovery_state=1), ErrorCode.INVALID_REQUEST),
])
def test_alter_partition_rejections(change, code):
    """ReplicationControlManagerTest.testAlterPartitionHandleUnknownTopicIdOrName, testInvalidAlterPartitionRequests,
    testAlterPartitionShouldRejectFencedBrokers, testAlterPartitionShouldRejectBrokersWithStaleEpoch"""
    c = Cluster(brokers=(1, 2, 3))
    c.create("ap", 0, 0, assignments={0: [1, 2, 3]})
    c.heartbeat(3, want_fence=True)
    t = c.image.topic("ap")
    p = t.partitions[0]
    args = dict(broker_id=1, broker_epoch=c.image.brokers[1].broker_epoch, topic_id=t.topic_id, partition_id=0,
                leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch, new_isr=[1, 2])
    if "broker_id" in change:
        args["broker_epoch"] = c.image.brokers[change["broker_id"]].broker_epoch
    args.update(change)
    err, record, _ = alter_partition(c.image, **args)
    assert (err, record) == (code, None)


# ---- ClusterControlManagerTest: registrations replayed into the image, registration records, placement -------------

def _registered(broker_id=1, epoch=100, fenced=True, shutting_down=False, port=9092) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch, rack=None, fenced=fenced,
                                in_controlled_shutdown=shutting_down, incarnation_id=bytes([broker_id]) * 16,
                                end_points=[BrokerEndpoint("PLAINTEXT", "example.com", port, 0)])


def test_replay_fence_and_unfence():
    """ClusterControlManagerTest.testReplay (3.3-IV2 and later: BrokerRegistrationChangeRecord)"""
    image = MetadataImage().apply([_registered()], 100)
    assert 0 not in image.brokers and image.brokers[1].fenced
    image = image.apply([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=100, fenced=-1)], 101)
    assert not image.brokers[1].fenced and 0 not in image.brokers
    image = image.apply([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=100, fenced=1)], 102)
    assert image.brokers[1].fenced


def test_replay_register_broker_record():
    """ClusterControlManagerTest.testReplayRegisterBrokerRecord"""
    image = MetadataImage().apply([_registered(0, shutting_down=True)], 100)
    assert image.brokers[0].fenced and image.brokers[0].in_controlled_shutdown
    image = image.apply([_registered(0)], 101)
    assert image.brokers[0].fenced and not image.brokers[0].in_controlled_shutdown
    image = image.apply([_registered(0, fenced=False)], 102)
    assert image.brokers[0].active


def test_replay_broker_registration_change_record():
    """ClusterControlManagerTest.testReplayBrokerRegistrationChangeRecord"""
    image = MetadataImage().apply([_registered(0, fenced=False)], 100)
    assert image.brokers[0].active
    image = image.apply([BrokerRegistrationChangeRecord(broker_id=0, broker_epoch=100, in_controlled_shutdown=1)], 101)
    assert not image.brokers[0].fenced and image.brokers[0].in_controlled_shutdown
    image = image.apply([BrokerRegistrationChangeRecord(broker_id=0, broker_epoch=100, fenced=-1)], 102)
    assert not image.brokers[0].fenced and image.brokers[0].in_controlled_shutdown


def test_unregister():
    """ClusterControlManagerTest.testUnregister"""
    image = MetadataImage().apply([_registered(1)], 100)
    assert image.brokers[1].endpoints[0].host == "example.com"
    image = image.apply([UnregisterBrokerRecord(broker_id=1, broker_epoch=100)], 101)
    assert 1 not in image.brokers


def test_register_broker_record():
    """ClusterControlManagerTest.testRegisterBrokerRecordVersion: a new broker registers fenced, with the offset
    as its epoch"""
    controller = Controller(1, {"broker.session.timeout.ms": 9000}, random.Random(5), register_fenced=True)
    res = controller.register_broker(MetadataImage(), 0, b"\x07" * 16, [], None, 123, [], 0)
    assert res.response == 0 and len(res.records) == 1
    rec = res.records[0]
    assert (rec.broker_id, rec.broker_epoch, rec.incarnation_id, rec.fenced, rec.in_controlled_shutdown) == \
        (0, 123, b"\x07" * 16, True, False)


@pytest.mark.parametrize("usable", [3, 10])
def test_place_replicas(usable):
    """ClusterControlManagerTest.testPlaceReplicas: replication factor 3 over the unfenced brokers, 100 times"""
    c = Cluster(brokers=range(usable))
    assert all(b.active for b in c.image.brokers.values())
    for i in range(100):
        replicas = c.create(f"t{i}", 1, 3).partitions[0].replicas
        assert len(set(replicas)) == 3 and all(0 <= r < usable for r in replicas)


def test_a_new_tenure_forgets_the_contacts_of_the_last():
    """The time between two tenures as active controller is no heartbeat gap (the metric read 44 s at 10,000
    partitions after the controller moved away and back), and an old contact is not folded into a new session."""
    c = Controller(1, {"broker.session.timeout.ms": 9000}, random.Random(1))
    image = MetadataImage().apply([RegisterBrokerRecord(broker_id=2, broker_epoch=5, fenced=False, end_points=[
        BrokerEndpoint(name="PLAINTEXT", host="h", port=1, security_protocol=0)])], 5)
    c.activate(image, 0)
    c.heartbeat_arrived(image, 2, 5, 1_000)
    c.heartbeat_arrived(image, 2, 5, 2_000)
    c.activate(image, 60_000)  # leadership lost at ~2 s and won again a minute later
    assert c.contacts.contact_time(2, 5) is None
    c.heartbeat_arrived(image, 2, 5, 60_500)
    assert c.contacts.max_gap_ms == 1_000
    assert c.maybe_fence_one_stale_broker(image, 65_000).records == []  # the session started at the activation
