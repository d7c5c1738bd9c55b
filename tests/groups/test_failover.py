"""Failover and static membership with real clients.

* A member killed with SIGKILL is expired after its session.timeout.ms, its partitions go to the
  survivor, and the records it processed after its last commit are redelivered (at-least-once):
  nothing is lost.
* A static member (group.instance.id) that restarts within its session timeout gets its partitions
  back without a rebalance of the others (the generation does not change; the other member never
  has partitions revoked).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time


from tests.groups.helpers import wait_until
from tests.groups.runners import ConfluentRunner
from tests.groups.workload import create_topic, generations, produce

PARTITIONS = 6
SESSION_MS = 3000


class Doomed:
    def __init__(self, broker, group, topic, commit_until=20):
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(__file__), "crash_consumer.py"), "--bootstrap",
             broker.bootstrap, "--group", group, "--topic", topic, "--commit-until", str(commit_until),
             "--session-timeout-ms", str(SESSION_MS)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def processed(self):
        return [tuple(map(int, line.split()[1:])) for line in list(self.lines) if line.startswith("R ")]

    def committed(self):
        out = {}
        for line in list(self.lines):
            if line.startswith("C "):
                _, p, off = line.split()
                out[int(p)] = max(out.get(int(p), 0), int(off))
        return out

    def assigned(self):
        a = [line for line in list(self.lines) if line.startswith("A ")]
        return {int(x) for x in a[-1][2:].split(",") if x} if a else set()

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def test_sigkilled_member_is_expired_and_its_uncommitted_records_are_redelivered(gbroker):
    topic = group = "failover"
    create_topic(gbroker.bootstrap, topic, PARTITIONS)
    produced = produce(gbroker.bootstrap, topic, 0, 60, PARTITIONS)
    doomed = Doomed(gbroker, group, topic, commit_until=20)
    try:
        wait_until(lambda: len(doomed.assigned()) == PARTITIONS, timeout=30, what="the doomed member's assignment")
        consumed: list = []
        survivor = ConfluentRunner(gbroker.bootstrap, group, topic, consumed, threading.Lock(), "survivor").start()
        try:
            wait_until(lambda: survivor.assigned and len(doomed.assigned()) < PARTITIONS, timeout=30,
                       what="the survivor to share the partitions")
            produced += produce(gbroker.bootstrap, topic, 60, 60, PARTITIONS)
            wait_until(lambda: "READY" in doomed.lines, timeout=30, what="the doomed member to stop committing")
            time.sleep(0.5)  # let it process some more records it will never commit
            doomed_parts = doomed.assigned()
            doomed.kill()
            killed_at = time.monotonic()
            # the survivor keeps its partitions until the session of the dead member expires
            wait_until(lambda: len(survivor.assigned) == PARTITIONS, timeout=SESSION_MS / 1000 + 10,
                       what="the dead member's partitions to be reassigned")
            took = survivor.assign_times[-1] - killed_at
            assert SESSION_MS / 1000 - 0.5 <= took <= SESSION_MS / 1000 + 3.5, took
            produced += produce(gbroker.bootstrap, topic, 120, 30, PARTITIONS)
            wait_until(lambda: set(consumed) | set(doomed.processed()) >= set(produced), timeout=30,
                       what="every record to be processed")
        finally:
            survivor.stop()
    finally:
        if doomed.proc.poll() is None:
            doomed.kill()
    processed_by_doomed = doomed.processed()
    committed = doomed.committed()
    # none lost
    assert set(consumed) | set(processed_by_doomed) >= set(produced)
    # at-least-once: what the dead member processed past its last commit was delivered again
    uncommitted = [(p, o) for p, o in processed_by_doomed if p in doomed_parts and o >= committed.get(p, 0)]
    assert uncommitted, "the doomed member processed nothing past its last commit"
    assert set(uncommitted) <= set(consumed), (sorted(set(uncommitted) - set(consumed)), committed, doomed_parts)
    # the survivor processed each record at most once
    assert len(consumed) == len(set(consumed))


def test_static_member_restart_within_session_timeout_gets_partitions_back_without_rebalance(gbroker):
    topic = group = "static"
    create_topic(gbroker.bootstrap, topic, PARTITIONS)
    produce(gbroker.bootstrap, topic, 0, 30, PARTITIONS)
    consumed: list = []
    lock = threading.Lock()
    static_conf = {"group.instance.id": "static-1", "session.timeout.ms": 6000}
    other = ConfluentRunner(gbroker.bootstrap, group, topic, consumed, lock, "other").start()
    static = ConfluentRunner(gbroker.bootstrap, group, topic, consumed, lock, "static", **static_conf).start()
    try:
        wait_until(lambda: static.assigned and other.assigned
                   and len(static.assigned) + len(other.assigned) == PARTITIONS, timeout=30,
                   what="both members to have partitions")
        before_static = set(static.assigned)
        revocations, assigns = other.revocations, len(other.assign_times)
        gen_before = max(g for g, _ in generations(gbroker.bootstrap, group))
        # a static member leaves no LeaveGroup behind when it closes: the coordinator keeps its place
        static.stop()
        restarted = ConfluentRunner(gbroker.bootstrap, group, topic, consumed, lock, "static-again",
                                    **static_conf).start()
        try:
            wait_until(lambda: restarted.assigned, timeout=10, what="the restarted static member's assignment")
            assert restarted.assigned == before_static
            time.sleep(1.0)  # several heartbeats of the other member: no rebalance starts
            assert other.revocations == revocations and len(other.assign_times) == assigns
            gens = generations(gbroker.bootstrap, group)
            assert max(g for g, _ in gens) == gen_before
            # the stored group metadata names the new member id for the same instance
            latest = [m for g, m in gens if g == gen_before][-1]
            assert len(latest) == 2
        finally:
            restarted.stop()
    finally:
        other.stop()
