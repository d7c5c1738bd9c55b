"""A test context for the pure group coordinator, after Kafka's GroupMetadataManagerTestContext:
a mock clock, request builders with the same defaults, and futures resolved from completions."""

from __future__ import annotations

import itertools
import uuid

from cluster.groups.group_config import GroupConfig
from cluster.groups.group_coordinator import GroupCoordinatorShard, ReqCtx
from cluster.groups.group_records import Subscription, serialize_subscription
from protocol.generated.messages import (
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest, SyncGroupRequest,
)
from protocol.generated.messages.join_group_request import JoinGroupRequestProtocol
from protocol.generated.messages.leave_group_request import MemberIdentity
from protocol.generated.messages.offset_commit_request import OffsetCommitRequestPartition, OffsetCommitRequestTopic
from protocol.generated.messages.sync_group_request import SyncGroupRequestAssignment

UNKNOWN_MEMBER_ID = ""
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


def to_protocols(*names: str) -> list[JoinGroupRequestProtocol]:
    """GroupMetadataManagerTestContext.toProtocols: each protocol subscribes to foo / bar / baz."""
    topics = ["foo", "bar", "baz"]
    return [JoinGroupRequestProtocol(name=n, metadata=serialize_subscription(Subscription(0, [topics[i % 3]])))
            for i, n in enumerate(names)]


def join_request(group_id="group-id", member_id=UNKNOWN_MEMBER_ID, instance_id=None, protocol_type="consumer",
                 protocols=None, session_timeout_ms=500, rebalance_timeout_ms=500, reason=None) -> JoinGroupRequest:
    """JoinGroupRequestBuilder's defaults (session and rebalance timeouts 500 ms, protocol type consumer)."""
    return JoinGroupRequest(group_id=group_id, member_id=member_id, group_instance_id=instance_id,
                            protocol_type=protocol_type, protocols=protocols if protocols is not None else [],
                            session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
                            reason=reason)


def sync_request(group_id="group-id", member_id="", generation_id=0, instance_id=None, assignments=(),
                 protocol_type=None, protocol_name=None) -> SyncGroupRequest:
    return SyncGroupRequest(group_id=group_id, member_id=member_id, generation_id=generation_id,
                            group_instance_id=instance_id, protocol_type=protocol_type, protocol_name=protocol_name,
                            assignments=[SyncGroupRequestAssignment(member_id=m, assignment=a)
                                         for m, a in assignments])


class Future:
    def __init__(self) -> None:
        self.done = False
        self.value = None

    def get(self):
        assert self.done, "future not completed"
        return self.value


class Outcome:
    def __init__(self, result, future: Future | None) -> None:
        self.result = result
        self.records = result.records
        self.future = future
        self.response = result.response
        self.error = result.error


class Ctx:
    def __init__(self, **config) -> None:
        defaults = dict(initial_rebalance_delay_ms=3000, min_session_timeout_ms=10,
                        max_session_timeout_ms=10 * 60 * 1000)
        defaults.update(config)
        self.config = GroupConfig(**defaults)
        self.shard = GroupCoordinatorShard(0, self.config, lambda: str(uuid.uuid4()))
        self.time = 0
        self.futures: dict[int, Future] = {}
        self._tokens = itertools.count(1)
        self.image = None

    # ---- plumbing
    def _resolve(self, result) -> None:
        for token, resp in result.completions:
            f = self.futures.pop(token, None)
            if f is not None:
                assert not f.done, "completed twice"
                f.done, f.value = True, resp

    def _token(self) -> tuple[int, Future]:
        t = next(self._tokens)
        f = Future()
        self.futures[t] = f
        return t, f

    def group(self, group_id="group-id"):
        return self.shard.groups.get(group_id)

    def create_classic_group(self, group_id="group-id"):
        self.shard.now_ms = self.time
        return self.shard.classic_group(group_id, True)

    def sleep(self, ms: int) -> list:
        """Advance the clock, firing due timers one by one; returns the results that had records."""
        self.time += ms
        results = []
        while True:  # MockCoordinatorTimer: due timers run one by one at the new time
            d = self.shard.next_deadline()
            if d is None or d > self.time:
                break
            fn = self.shard.timer.pop_expired(self.time)
            res = self.shard._run(self.time, fn)
            self._resolve(res)
            results.append(res)
        return results

    @property
    def image(self):
        return self.shard.image

    @image.setter
    def image(self, value) -> None:
        """A test's new metadata image reaches the shard as a published image does."""
        self.shard.on_new_metadata_image(value)

    # ---- requests
    def join(self, req, version: int = 3, client_id: str = "client") -> Outcome:
        token, fut = self._token()
        res = self.shard.join_group(ReqCtx(client_id, "/127.0.0.1", version), req, token, self.time)
        self._resolve(res)
        return Outcome(res, fut)

    def sync(self, req, version: int = 5) -> Outcome:
        token, fut = self._token()
        res = self.shard.sync_group(ReqCtx("client", "/127.0.0.1", version), req, token, self.time)
        self._resolve(res)
        return Outcome(res, fut)

    def heartbeat(self, group_id, member_id, generation_id, instance_id=None) -> Outcome:
        res = self.shard.heartbeat(ReqCtx("client", "/127.0.0.1", 4), HeartbeatRequest(
            group_id=group_id, member_id=member_id, generation_id=generation_id, group_instance_id=instance_id),
            self.time)
        self._resolve(res)
        return Outcome(res, None)

    def heartbeat_code(self, group_id, member_id, generation_id, instance_id=None) -> int:
        o = self.heartbeat(group_id, member_id, generation_id, instance_id)
        return o.error.code if o.error is not None else o.response.error_code

    def leave(self, group_id, members: list[tuple[str, str | None]]) -> Outcome:
        req = LeaveGroupRequest(group_id=group_id, members=[MemberIdentity(member_id=m, group_instance_id=i)
                                                            for m, i in members])
        res = self.shard.leave_group(ReqCtx("client", "/127.0.0.1", 5), req, self.time)
        self._resolve(res)
        return Outcome(res, None)

    def commit(self, group_id, member_id, generation, offsets: dict, version: int = 8, instance_id=None) -> Outcome:
        topics = {}
        for (t, p), (off, md) in offsets.items():
            topics.setdefault(t, []).append(OffsetCommitRequestPartition(partition_index=p, committed_offset=off,
                                                                         committed_metadata=md))
        req = OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=generation, member_id=member_id,
                                  group_instance_id=instance_id,
                                  topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()])
        res = self.shard.commit_offsets(ReqCtx("client", "/127.0.0.1", version), req, self.time)
        self._resolve(res)
        return Outcome(res, None)

    # ---- composite helpers (GroupMetadataManagerTestContext)
    def join_as_dynamic_member_and_complete_join(self, req) -> object:
        member_id = req.member_id
        if member_id == UNKNOWN_MEMBER_ID:
            first = self.join(req, version=4)
            assert first.records == [] or all(r.key.__class__.__name__ == "GroupMetadataKey" for r in first.records)
            assert first.future.done and first.future.get().error_code == 79  # MEMBER_ID_REQUIRED
            member_id = first.future.get().member_id
        second = self.join(JoinGroupRequest(
            group_id=req.group_id, member_id=member_id, protocol_type=req.protocol_type, protocols=req.protocols,
            session_timeout_ms=req.session_timeout_ms, rebalance_timeout_ms=req.rebalance_timeout_ms,
            reason=req.reason), version=4)
        assert second.records == []
        timeouts = self.sleep(self.config.initial_rebalance_delay_ms)
        assert len(timeouts) == 1
        assert second.future.done and second.future.get().error_code == 0
        return second.future.get()

    def join_as_dynamic_member_and_complete_rebalance(self, group_id="group-id"):
        self.create_classic_group(group_id)
        resp = self.join_as_dynamic_member_and_complete_join(join_request(
            group_id=group_id, protocols=to_protocols("range"), rebalance_timeout_ms=10000, session_timeout_ms=5000))
        assert resp.generation_id == 1
        s = self.sync(sync_request(group_id=group_id, member_id=resp.member_id, generation_id=resp.generation_id))
        assert s.future.done and s.future.get().error_code == 0
        assert str(self.group(group_id).state) == "Stable"
        return resp

    def static_members_join_and_rebalance(self, group_id, leader_instance, follower_instance,
                                          rebalance_timeout_ms=10000, session_timeout_ms=5000):
        """staticMembersJoinAndRebalance: two static members join and sync; returns ids and generation."""
        self.create_classic_group(group_id)
        protocols = to_protocols("range", "roundrobin")
        leader = self.join(join_request(group_id=group_id, instance_id=leader_instance, protocols=protocols,
                                        rebalance_timeout_ms=rebalance_timeout_ms,
                                        session_timeout_ms=session_timeout_ms))
        follower = self.join(join_request(group_id=group_id, instance_id=follower_instance, protocols=protocols,
                                          rebalance_timeout_ms=rebalance_timeout_ms,
                                          session_timeout_ms=session_timeout_ms))
        assert not leader.future.done and not follower.future.done
        # the second member extends the initial delay once
        self.sleep(self.config.initial_rebalance_delay_ms)
        self.sleep(self.config.initial_rebalance_delay_ms)
        lr, fr = leader.future.get(), follower.future.get()
        assert lr.error_code == 0 and fr.error_code == 0 and lr.generation_id == fr.generation_id == 1
        ls = self.sync(sync_request(group_id=group_id, member_id=lr.member_id, generation_id=1,
                                    instance_id=leader_instance,
                                    assignments=[(lr.member_id, b"\x01"), (fr.member_id, b"\x02")]))
        fs = self.sync(sync_request(group_id=group_id, member_id=fr.member_id, generation_id=1,
                                    instance_id=follower_instance))
        assert ls.future.get().error_code == 0 and fs.future.get().error_code == 0
        assert fs.future.get().assignment == b"\x02"
        return lr.member_id, fr.member_id, 1

    def join_with_n_members(self, group_id, n, rebalance_timeout_ms, session_timeout_ms) -> list:
        """joinWithNMembers: MEMBER_ID_REQUIRED round, second joins, initial delay, then the rebalance timeout."""
        self.create_classic_group(group_id)
        req = join_request(group_id=group_id, protocols=to_protocols("range"),
                           rebalance_timeout_ms=rebalance_timeout_ms, session_timeout_ms=session_timeout_ms)
        ids = []
        for _ in range(n):
            o = self.join(req, version=4)
            assert o.future.get().error_code == 79
            ids.append(o.future.get().member_id)
        outs = []
        for mid in ids:
            req2 = join_request(group_id=group_id, member_id=mid, protocols=to_protocols("range"),
                                rebalance_timeout_ms=rebalance_timeout_ms, session_timeout_ms=session_timeout_ms)
            outs.append(self.join(req2, version=4))
        self.sleep(self.config.initial_rebalance_delay_ms)
        assert not any(o.future.done for o in outs)
        self.sleep(rebalance_timeout_ms)
        return [o.future.get() for o in outs]
