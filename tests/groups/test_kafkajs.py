"""Scale-out with KafkaJS (its own group: KafkaJS names its assigner "RoundRobinAssigner", which no
other client proposes): three members join one by one, each in its own node process; every stable
generation's assignment is disjoint and covers the 6 partitions, and every record is processed
exactly once."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading

import pytest

from tests.groups.helpers import wait_until
from tests.groups.workload import check_exactly_once, check_generations, create_topic, generations, produce

JS = os.path.join(os.path.dirname(__file__), "js")
PARTITIONS = 6

@pytest.fixture(scope="module", autouse=True)
def kafkajs_installed():
    """Install KafkaJS from the lockfile when missing (node is on the machine; `make test` needs nothing else)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are needed for the KafkaJS group tests")
    if not os.path.isdir(os.path.join(JS, "node_modules", "kafkajs")):
        out = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, f"npm ci failed:\n{out.stdout}\n{out.stderr}"


class JsMember:
    def __init__(self, bootstrap, group, topic, name):
        self.lines: list[str] = []
        self.proc = subprocess.Popen(["node", os.path.join(JS, "member.js"), bootstrap, group, topic, name],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def assigned(self) -> set[int]:
        a = [line for line in list(self.lines) if line.startswith("A ")]
        return {int(x) for x in a[-1][2:].split(",") if x} if a else set()

    def processed(self):
        return [tuple(map(int, line.split()[1:])) for line in list(self.lines) if line.startswith("R ")]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        errors = [line for line in self.lines if line.startswith("ERR")]
        assert not errors, errors


def test_scale_out_kafkajs(gbroker):
    topic = group = "scale-kafkajs"
    create_topic(gbroker.bootstrap, topic, PARTITIONS)
    produced = produce(gbroker.bootstrap, topic, 0, 30, PARTITIONS)
    members: list[JsMember] = []
    try:
        for i in range(3):
            m = JsMember(gbroker.bootstrap, group, topic, f"kafkajs-{i}")
            members.append(m)
            wait_until(lambda: len(members) == sum(1 for x in members if x.assigned())
                       and sum(len(x.assigned()) for x in members) == PARTITIONS, timeout=40,
                       what=f"kafkajs member {i} to get partitions")
            produced += produce(gbroker.bootstrap, topic, 30 * (i + 1), 30, PARTITIONS)
        consumed = lambda: [r for x in members for r in x.processed()]  # noqa: E731
        wait_until(lambda: len(consumed()) >= len(produced), timeout=30, what="every record to be consumed")
    finally:
        for m in reversed(members):
            m.stop()
    check_exactly_once(consumed(), produced)
    gens = generations(gbroker.bootstrap, group)
    check_generations(gens, topic, PARTITIONS)
    assert max(len(m) for _, m in gens) == 3
